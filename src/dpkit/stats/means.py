"""Differentially private averages of bounded values (Li et al. 2016, §2.5, with errata).

Methods (``mean(..., method=...)``); all clamp the values to the public ``bounds = (lo, hi)`` first
(``Δ = hi - lo``, midpoint ``mid``), all are pure ``epsilon``-DP and charge ``PureDP(epsilon)`` once:

``"centred"`` (default since issue #16)
    A privately chosen centre: ``S̃₁ = Σ(x - mid) + Lap((kΔ/2)/ε₁)`` and ``C̃ = n + DLap(k/ε_C)`` give a coarse
    mean, rounded to the public grid ``lo + Δj/1024`` as the centre ``c`` (``mid`` if ``C̃ <= 1``); then
    ``S̃₂ = Σ(x - c) + Lap(k·max(c - lo, hi - c)/ε_S)`` and the release ``clamp(c + S̃₂/C̃)`` (``c`` if
    ``C̃ <= 1``). ``ε₁ : ε_C : ε_S = 1 : 1 : 8``. The count's noise multiplies ``|mean - c|`` (the first stage's
    error) instead of ``|mean - mid|``, so most of ``ε`` goes to the sum.
``"normalized"`` (Li Alg 4; the default before issue #16)
    ``S̃ = Σ(x - mid) + Lap((Δ/2)/(ε/2))`` and ``C̃ = n + DLap(1/(ε/2))``; ``mid`` if ``C̃ <= 1``, else
    ``clamp(S̃/C̃ + mid)``. Centring makes every term ``|x - mid| <= Δ/2``, so the centred sum has
    add/remove sensitivity ``Δ/2`` whatever the sign of the bounds.
``"noisy_ratio"`` (Li Alg 1)
    ``S̃ = Σx + Lap(max(|lo|,|hi|)/(ε/2))``, ``C̃ = n + DLap(2/ε)``; ``mid`` if ``C̃ <= 1``, else
    ``clamp(S̃/C̃)``.
``"clamp"`` (Li Alg 3, *recalibrated*, see the erratum below)
    ``clamp((Σx + Lap(b))/n)`` with the true ``n``; a mixture of endpoint masses and a uniform when
    ``n = 0``.
``"exponential"``
    The exponential mechanism over ``candidates`` equally spaced public points of ``[lo, hi]``,
    quality ``q(o) = -|Σ(x - o)|`` (Li §2.5).
``"median"``
    The exponential-mechanism median (:func:`dpkit.stats.order_statistics.median` with ``bins=candidates``),
    often the better estimate of the centre at small ``ε`` (Li §2.5's experiments).

Errata vs Li et al. (2016)
--------------------------
- Alg 4 prints the midpoint as "(a_min, a_max)/2"; it is ``(a_min + a_max)/2``.
- Alg 1 prints the sum's noise as ``Lap(2Δ/ε)`` with ``Δ = a_max - a_min``; under the add/remove
  relation the sum's sensitivity is ``max(|a_min|, |a_max|)`` (they differ when ``a_min > 0``).
- Alg 2 (PINQ resampling) is not private, but the book's counterexample pair ``{-1}`` / ``{-1, 1}``
  has ratio exactly ``e^ε`` (the change of variables for ``C = 2`` is missing); a violating pair is
  30 × {-1} vs 30 × {-1} + {+1}: log ratio 1.457 at ε = 1 (``tests/stats`` reproduces it).
- **Alg 3 / Prop 2.22 is not ε-DP as printed.** The proof omits the change-of-variables factor: for
  ``D`` with ``n + 1`` records and ``D'`` with ``n``, the output densities inside ``(lo, hi)`` are
  ``(n+1)·ε/(2Δ)·exp(-ε|(n+1)z - S_D|/Δ)`` and ``n·ε/(2Δ)·exp(-ε|nz - S_D'|/Δ)``, whose log ratio
  reaches ``ln(1 + 1/n) + ε·n/(n+1)`` (``D' = {lo}``, ``D = {lo, hi}``, ``z = mid``:
  ``ln 2 + ε/2 = 1.193`` at ``ε = 1``). The supremum over ``n >= 1`` is ``max(ε₀, ln 2 + ε₀/2)`` for
  noise parameter ``ε₀`` (the endpoint masses, the other direction and the empty case stay within
  ``ε₀``). dpkit therefore runs Alg 3 with ``ε₀ = min(ε, 2(ε - ln 2))`` (rounded down), which is
  ``ε``-DP, and refuses ``ε <= ln 2``.

Neighbour relations
-------------------
Add/remove one record (default): ``n`` is private, formulas as above. Privacy unit with
``max_rows = k``: sensitivities × ``k`` (``"clamp"``: group privacy, per-record ``ε/k``).
Replace-one: ``n`` is public, so ``"centred"``, ``"normalized"``, ``"noisy_ratio"`` and ``"clamp"`` all reduce to
the same (best) mechanism ``clamp((Σx + Lap(Δ/ε))/n)`` (the exact noisy sum with replace-one
sensitivity ``Δ`` and the full ``ε``, divided by the public ``n``; ``mid`` when ``n = 0``), which is
Alg 3 without the change of variables; ``"exponential"`` keeps ``Δq = Δ``.

Empty input gives a valid DP answer for every method (no error that would reveal emptiness).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.noise.source import RandomSource
from dpkit.stats import _common
from dpkit.stats.sums import LatticeSum, exact_sum, finite, widen

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["METHODS", "mean"]

METHODS = ("centred", "normalized", "clamp", "noisy_ratio", "exponential", "median")
_MAX_CANDIDATES = 2**20
_LN2_UP = _exact.up(math.log(2.0))  # >= ln 2
_SLACK = 2.0**-40  # relative allowance for the per-record float rounding of x - mid in the intervals
_SCORE_FLOOR = 2**52  # EM scores are floored at -2^52 lattice steps (exact floats; probability e^-(2^31 ε))


def _midpoint(lo: float, hi: float) -> float:
    mid = lo / 2.0 + hi / 2.0
    return min(max(mid, lo), hi)


def _centred(x: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, float, float]:
    """``y = fl(x - mid)`` for clamped ``x`` and a float ``r >= max|x - mid|`` (exact bound)."""
    mid = _midpoint(lo, hi)
    r = finite("bounds", _exact.float_at_least(max(Fraction(hi) - Fraction(mid), Fraction(mid) - Fraction(lo))))
    y = np.clip(_common.clamp(x, lo, hi) - mid, -r, r)  # |fl(x - mid)| <= r since fl is monotone
    return y, mid, r


def _clip_interval(a: float, b: float, lo: float, hi: float) -> tuple[float, float]:
    """``[a, b]`` intersected with ``[lo, hi]`` (where the true mean lies); a point of ``[lo, hi]`` if empty."""
    return min(max(lo, a), hi), max(min(hi, b), lo)


def _box_ratio(s_lo: float, s_hi: float, n_lo: float, n_hi: float) -> tuple[float, float]:
    """Range of ``s / n`` over ``s in [s_lo, s_hi]``, ``n in [n_lo, n_hi]`` (``n_lo > 0``)."""
    c = [s_lo / n_lo, s_lo / n_hi, s_hi / n_lo, s_hi / n_hi]
    return min(c), max(c)


# ---------------------------------------------------------------------------------------------
# samplers: everything computed from the data and public parameters before the charge; draw(rng, size)
# produces `size` independent releases (size=1 inside the contract Plan of `_mean_plan`, more for the
# audits, which draw the same law vectorised)
# ---------------------------------------------------------------------------------------------
class _RatioPlan:
    """Li Alg 4 (``centred=True``) and Alg 1: a noisy (centred) sum over a noisy count."""

    def __init__(self, x: np.ndarray, lo: float, hi: float, eps: float, nb: Neighbours, centred: bool) -> None:
        k = _common.unit_rows(nb)
        self.lo, self.hi, self.mid = lo, hi, _midpoint(lo, hi)
        self.centred = centred
        if centred:
            y, _, r = _centred(x, lo, hi)
            self.centre = self.mid
        else:
            y = _common.clamp(x, lo, hi)
            r = finite("bounds", _exact.float_at_least(max(abs(Fraction(lo)), abs(Fraction(hi)))))
            self.centre = 0.0
        self.eps_sum, self.eps_count = _common.split(eps, [1.0, 1.0])
        from dpkit.mechanisms.discrete import discrete_laplace_scale

        self.lat = LatticeSum(k * Fraction(r), self.eps_sum)
        self.t_count = discrete_laplace_scale(k, self.eps_count)
        self.n = int(x.size)
        self.r_sum = self.lat.centre(exact_sum(y))
        self.slack = _SLACK * (hi - lo)

    @property
    def scale(self) -> float:
        return self.lat.b

    def draw(self, rng: RandomSource, size: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        from dpkit.noise import sample_discrete_laplace

        s = self.lat.draw(self.r_sum, size, rng)
        c = self.n + np.asarray(sample_discrete_laplace(self.t_count, size, rng=rng), dtype=np.int64)
        with np.errstate(divide="ignore", invalid="ignore"):
            est = np.clip(s / np.maximum(c, 1) + self.centre, self.lo, self.hi)
        value = np.where(c <= 1, self.mid, est)
        key = "centred_sum" if self.centred else "sum"
        return value, {key: s, "count": c}

    def interval_fn(self, s_rel: float, c_rel: int) -> Callable[[float], tuple[float, float]]:
        return _ratio_interval(self.lo, self.hi, self.lat, self.t_count, self.centre, self.slack, s_rel, c_rel)


def _ratio_interval(lo: float, hi: float, lat: Any, t: float, centre: float, slack: float, s_rel: float,
                    c_rel: int) -> Callable[[float], tuple[float, float]]:
    """The interval of ``clamp(s / n + centre)`` from a noisy sum ``s_rel`` (lattice ``lat``) and a noisy count
    ``c_rel`` (discrete Laplace of scale ``t``): a union bound over the two noisy parts, the ratio's box, the
    float slack, clipped to ``[lo, hi]`` (the whole range when the count's interval reaches below 1)."""

    def interval(confidence: float) -> tuple[float, float]:
        from dpkit.mechanisms.accuracy import discrete_laplace_halfwidth

        each = 1.0 - (1.0 - confidence) / 2.0  # union bound over the two noisy parts
        h_c = discrete_laplace_halfwidth(t, each)
        n_lo, n_hi = c_rel - h_c, c_rel + h_c
        if n_lo < 1:
            return lo, hi
        s_lo, s_hi = widen(s_rel - lat.halfwidth(each), s_rel + lat.halfwidth(each))
        a, b = _box_ratio(s_lo, s_hi, float(n_lo), float(n_hi))
        a, b = a + centre, b + centre
        a, b = widen(a, b, slack + _SLACK * max(abs(a), abs(b)))
        return _clip_interval(a, b, lo, hi)

    return interval


_CENTRED_SHARES = (1.0, 1.0, 8.0)  # centre's sum : count : centred sum (10% / 10% / 80% of epsilon)
_CENTRE_GRID = 1024  # the private centre is rounded to lo + (hi - lo) j / 1024 (a public grid)


class _CentredPlan:
    """The privately centred mean (issue #16): a coarse private centre, then the sum centred there.

    1. ``S̃₁ = Σ(x - mid) + Lap(kΔ/2 / ε₁)`` and ``C̃ = n + DLap(k/ε_C)`` (Li Alg 4's two parts at 10% + 10% of
       ``ε``); ``c`` = the point of the public grid ``lo + Δ j/1024`` nearest ``clamp(mid + S̃₁/C̃)`` (``mid``
       when ``C̃ <= 1``): a post-processing of released values.
    2. ``S̃₂ = Σ(x - c) + Lap(k·A(c) / ε_S)`` with ``A(c) = max(c - lo, hi - c)`` (80% of ``ε``): every term
       ``x - c`` of the exact centred sum lies in ``[lo - c, hi - c]``, so its add/remove sensitivity is ``A(c)``.
    3. ``c`` if ``C̃ <= 1``, else ``clamp(c + S̃₂/C̃)``.

    The count's error now multiplies ``|mean - c|`` (about the first stage's error) instead of
    ``|mean - mid|``, so the count needs only a small share, and the sum gets 80% of ``ε``.
    """

    def __init__(self, x: np.ndarray, lo: float, hi: float, eps: float, nb: Neighbours,
                 total: Fraction | None = None) -> None:
        from dpkit.mechanisms.discrete import discrete_laplace_scale

        self.k = _common.unit_rows(nb)
        self.lo, self.hi, self.mid = lo, hi, _midpoint(lo, hi)
        self.eps_centre, self.eps_count, self.eps_sum = _common.split(eps, list(_CENTRED_SHARES))
        r_mid = max(Fraction(hi) - Fraction(self.mid), Fraction(self.mid) - Fraction(lo))
        self.lat1 = LatticeSum(self.k * r_mid, self.eps_centre)
        self.t_count = discrete_laplace_scale(self.k, self.eps_count)
        self.n = int(x.size)
        self.total = exact_sum(x, clamp=(lo, hi)) if total is None else total  # the exact clamped sum
        self.r1 = self.lat1.centre(self.total - self.n * Fraction(self.mid))
        self.slack = _SLACK * (hi - lo)
        self._lat2: dict[float, LatticeSum] = {}
        self.lat2(self.mid)  # the narrowest second-stage lattice (k·Δ/2 up to rounding): refused before any charge
        try:  # the widest (kΔ); bounds near the float range's end keep the centre at the midpoint instead
            self.lat2(lo)
            self.movable = True
        except InvalidParameter:
            self.movable = False

    @property
    def scale(self) -> float:
        return self.lat1.b

    def centre_of(self, s1: float, c: int) -> float:
        """The public-grid centre chosen from the released ``S̃₁`` and ``C̃`` (post-processing)."""
        lo, hi = self.lo, self.hi
        if c <= 1 or not self.movable:
            return self.mid
        est = min(max(s1 / c + self.mid, lo), hi)
        j = round((est - lo) / (hi - lo) * _CENTRE_GRID)
        j = min(max(j, 0), _CENTRE_GRID)
        if j == 0:
            return lo
        if j == _CENTRE_GRID:
            return hi
        return min(max(lo + (hi - lo) * (j / _CENTRE_GRID), lo), hi)

    def lat2(self, centre: float) -> LatticeSum:
        """The lattice Laplace of the sum centred at ``centre``: sensitivity ``k·max(c - lo, hi - c)``, exact."""
        lat = self._lat2.get(centre)
        if lat is None:
            a = max(Fraction(centre) - Fraction(self.lo), Fraction(self.hi) - Fraction(centre))
            lat = self._lat2[centre] = LatticeSum(self.k * a, self.eps_sum)
        return lat

    def draw(self, rng: RandomSource, size: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        from dpkit.noise import sample_discrete_laplace

        s1 = self.lat1.draw(self.r1, size, rng)
        c = self.n + np.asarray(sample_discrete_laplace(self.t_count, size, rng=rng), dtype=np.int64)
        centres = np.array([self.centre_of(float(a), int(b)) for a, b in zip(s1, c, strict=True)], dtype=np.float64)
        s2 = np.empty(size, dtype=np.float64)
        for centre in np.unique(centres):  # one lattice per distinct centre, draws in the order of the slots
            where = np.flatnonzero(centres == centre)
            lat = self.lat2(float(centre))
            r2 = lat.centre(self.total - self.n * Fraction(float(centre)))
            s2[where] = lat.draw(r2, int(where.size), rng)
        with np.errstate(divide="ignore", invalid="ignore"):
            est = np.clip(s2 / np.maximum(c, 1) + centres, self.lo, self.hi)
        value = np.where(c <= 1, centres, est)
        return value, {"centre_sum": s1, "count": c, "centre": centres, "centred_sum": s2}

    def interval_fn(self, s_rel: float, c_rel: int, centre: float) -> Callable[[float], tuple[float, float]]:
        # given the released centre c, the count and the centred sum are the two noisy parts
        return _ratio_interval(self.lo, self.hi, self.lat2(centre), self.t_count, centre, self.slack, s_rel, c_rel)


class _ReplacePlan:
    """Replace-one neighbours: ``n`` public; ``clamp((Σx + Lap(Δ/ε))/n)`` on the exact sum."""

    def __init__(self, x: np.ndarray, lo: float, hi: float, eps: float, total: Fraction | None = None) -> None:
        self.lo, self.hi, self.mid = lo, hi, _midpoint(lo, hi)
        self.lat = LatticeSum(Fraction(hi) - Fraction(lo), eps)
        self.n = int(x.size)
        self.r_sum = self.lat.centre(exact_sum(x, clamp=(lo, hi)) if total is None else total)

    @property
    def scale(self) -> float:
        return self.lat.b

    def draw(self, rng: RandomSource, size: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        s = self.lat.draw(self.r_sum, size, rng)
        if self.n == 0:
            return np.full(size, self.mid), {"sum": s}
        return np.clip(s / self.n, self.lo, self.hi), {"sum": s}

    def interval_fn(self, s_rel: float) -> Callable[[float], tuple[float, float]]:
        lo, hi, lat, n, mid = self.lo, self.hi, self.lat, self.n, self.mid

        def interval(confidence: float) -> tuple[float, float]:
            if n == 0:
                return mid, mid
            h = lat.halfwidth(confidence)
            s_lo, s_hi = widen(s_rel - h, s_rel + h)
            a, b = widen(s_lo / n, s_hi / n, _SLACK * max(abs(s_lo / n), abs(s_hi / n)))
            return _clip_interval(a, b, lo, hi)

        return interval


def _clamp_epsilon0(eps: float, k: int) -> float:
    """The noise parameter ε₀ = min(ε/k, 2(ε/k - ln 2)), rounded down; refuses ε/k <= ln 2."""
    per_record = Fraction(eps) / k
    if per_record <= Fraction(_LN2_UP):
        raise InvalidParameter("epsilon", "method='clamp' (Li Alg 3) needs epsilon > ln 2 (per record of a "
                                          "privacy unit); see the docs of dpkit.stats.means")
    return _exact.float_at_most(min(per_record, 2 * (per_record - Fraction(_LN2_UP))))


def _geometric(scale2: float, size: int, rng: RandomSource) -> np.ndarray:
    """Exact ``P[K = k] = (1 - q) q^k``, ``q = exp(-1/scale2)``: the law of a discrete Laplace
    variable of scale ``scale2`` conditioned on being ``>= 0`` (first non-negative draw per slot)."""
    from dpkit.noise import sample_discrete_laplace

    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        z = np.asarray(sample_discrete_laplace(scale2, todo.size, rng=rng), dtype=np.int64)
        ok = z >= 0
        out[todo[ok]] = z[ok]
        todo = todo[~ok]
    return out


class _ClampPlan:
    """Li Alg 3 with the corrected calibration, sampled exactly on a public grid.

    Records are mapped (a per-record transformation) to integer units ``c = clip(rint((x - m)/g),
    L, H)`` with ``m`` the float midpoint, ``g = lattice_granularity(Δ)`` (a power of two
    ``<= Δ/2^20``), ``L = ceil((lo - m)/g)``, ``H = floor((hi - m)/g)``, ``M = H - L``. The mechanism
    is the continuous Alg 3 on these records (range ``M`` units, noise ``Y ~ Lap(β)`` in units,
    ``β >= M/ε₀`` an exact float) followed by rounding the output to the nearest grid point
    ``m + j g`` (post-processing, so the guarantee of the continuous mechanism carries over):

    - ``C = n >= 1``: ``j = clip(floor((W + 2 S_u + C) / (2C)), L, H)`` with ``S_u = Σc`` and
      ``W = floor(2Y)``. (``round(A) = floor(A + 1/2)`` and ``floor((x + a)/b) = floor((floor(x) + a)/b)``
      for integers ``a``, ``b > 0``; clamping to the integer range commutes with the rounding.)
      ``W`` is exact: with a fair sign, ``W = K`` or ``-1 - K``, ``K`` geometric with
      ``q = exp(-1/(2β))`` (``P[floor(V) = k] = (1-q) q^k / 2`` for ``V ~ Lap(2β)``, ``k >= 0``, and
      symmetrically ``P[floor(V) = -1-k]``), drawn as a discrete Laplace of scale ``2β`` conditioned
      on ``>= 0``.
    - ``C = 0``: ``L`` or ``H`` each with probability ``exp(-γ)/2`` (exact Bernoulli and a fair bit),
      ``γ`` the largest float ``<= M/(2β)`` (= ``ε₀*/2`` for the effective ``ε₀* = M/β <= ε₀``), else
      the uniform on ``[L, H]`` rounded to the grid: ``j = L + ceil(k/2)`` for ``k`` uniform in
      ``{0, ..., 2M - 1}`` (the end cells get half weight). With ``γ <= ε₀*/2`` every ratio against
      a one-record dataset stays within ``e^{ε₀*}``.

    The output lattice ``m + g Z`` is public (it depends on the bounds only): nothing like ``g/n``.
    """

    def __init__(self, x: np.ndarray, lo: float, hi: float, eps: float, nb: Neighbours) -> None:
        from dpkit.mechanisms.contract import check_noise_scale as finite_scale
        from dpkit.noise import lattice_granularity

        k = _common.unit_rows(nb)
        self.eps0 = _clamp_epsilon0(eps, k)
        self.lo, self.hi = lo, hi
        m = _midpoint(lo, hi)
        try:
            g = float(lattice_granularity(finite("bounds", _exact.float_at_least(Fraction(hi) - Fraction(lo)))))
        except InvalidParameter:
            raise InvalidParameter("bounds", "outside the range the exact lattice arithmetic supports") from None
        fg = Fraction(g)
        self.L = math.ceil((Fraction(lo) - Fraction(m)) / fg)
        self.H = math.floor((Fraction(hi) - Fraction(m)) / fg)
        self.M = self.H - self.L
        self.m, self.g = m, g
        self.beta = finite("epsilon", _exact.float_at_least(Fraction(self.M) / Fraction(self.eps0)))
        finite_scale("epsilon", 2.0 * self.beta)
        self.gamma = _exact.float_at_most(Fraction(self.M) / (2 * Fraction(self.beta)))
        c = np.rint((_common.clamp(x, lo, hi) - m) / g)
        c = np.clip(c, self.L, self.H).astype(np.int64)
        self.n = int(c.size)
        self.s_units = int(np.sum(c, dtype=np.int64)) if c.size < 2**40 else sum(int(v) for v in c)

    @property
    def scale(self) -> float:
        return self.beta * self.g  # exact (power-of-two scaling)

    def draw(self, rng: RandomSource, size: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        from dpkit.noise import sample_bernoulli_exp

        L, H = self.L, self.H
        if self.n == 0:
            edge = np.asarray(sample_bernoulli_exp(np.full(size, self.gamma), rng=rng), dtype=bool)
            top = rng.bits(size)
            k = rng.below(2 * self.M, size)
            j = np.where(edge, np.where(top, H, L), L + (k + 1) // 2)
        else:
            sign = rng.bits(size)
            kk = _geometric(2.0 * self.beta, size, rng)
            w = np.where(sign, kk, -1 - kk)
            shift = 2 * self.s_units + self.n
            if abs(shift) + int(np.max(np.abs(w))) < 2**62:
                j = np.floor_divide(w + np.int64(shift), np.int64(2 * self.n))
            else:
                j = np.array([(int(v) + shift) // (2 * self.n) for v in w], dtype=object)
            j = np.clip(j, L, H).astype(np.int64)
        return self.m + j.astype(np.float64) * self.g, {}


class _ExponentialPlan:
    """EM over ``candidates`` public points; quality ``-|Σ(x - o)|`` computed exactly."""

    def __init__(self, x: np.ndarray, lo: float, hi: float, eps: float, nb: Neighbours, candidates: int,
                 total: Fraction | None = None) -> None:
        from dpkit.mechanisms.selection import SelectionLaw
        from dpkit.noise import lattice_granularity

        k = _common.unit_rows(nb)
        steps = candidates - 1
        grid = lo + (hi - lo) * (np.arange(candidates, dtype=np.float64) / steps)
        grid[0], grid[-1] = lo, hi
        self.grid = np.clip(np.maximum.accumulate(grid), lo, hi)
        dq = k * (Fraction(hi) - Fraction(lo))  # adding x moves Σ(x - o) by x - o, |x - o| <= Δ
        try:
            gs = float(lattice_granularity(finite("bounds", _exact.float_at_least(dq))))
        except InvalidParameter:
            raise InvalidParameter("bounds", "outside the range the exact lattice arithmetic supports") from None
        self.sensitivity = finite("bounds", _exact.float_at_least(dq + Fraction(gs)))  # quality on gs Z: + gs
        total = exact_sum(x, clamp=(lo, hi)) if total is None else total
        n = int(x.size)
        # exact integers: q_j / gs = -|S - n o_j| / gs, on a common power-of-two denominator
        num_s, den_s = total.numerator, total.denominator
        pairs = [float(o).as_integer_ratio() for o in self.grid]
        gnum, gden = Fraction(gs).numerator, Fraction(gs).denominator
        den = max([den_s] + [d for _, d in pairs])  # all powers of two
        big_s = num_s * (den // den_s)
        scale_num, scale_den = gden, gnum * den  # (value * den) * gden / (gnum * den) = value / gs
        units = []
        for o_num, o_den in pairs:
            v = -abs(big_s - n * o_num * (den // o_den)) * scale_num
            units.append(max(_round_div(v, scale_den), -_SCORE_FLOOR))
        self.scores = np.array(units, dtype=np.float64) * gs  # exact: |units| <= 2^52
        self.law = SelectionLaw(self.scores, self.sensitivity, eps, 2)
        self.eps = eps

    scale = None

    def draw(self, rng: RandomSource, size: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        if size == 1:
            from dpkit.mechanisms.selection import exponential_plan

            idx = np.array([exponential_plan(self.scores, self.sensitivity, self.eps).sample(rng).value])
        else:
            from dpkit.mechanisms.selection import sample_exponential

            idx = sample_exponential(self.law, rng, size)
        return self.grid[idx], {}


def _round_div(a: int, b: int) -> int:
    """``round_half_even(a / b)`` for integers, ``b > 0``."""
    q, r = divmod(a, b)
    if 2 * r > b or (2 * r == b and q % 2):
        q += 1
    return q


def _uses_clamped_sum(method: str, nb: Neighbours) -> bool:
    """Whether the method's sampler (:func:`_plan`) reads the data through ``exact_sum(x, clamp=(lo, hi))``."""
    return method in ("exponential", "centred") or _common.is_replace(nb)


def _data_and_sum(values: Any, nan_policy: Any, lo: float, hi: float, fused: bool) -> tuple[np.ndarray, Any]:
    """The validated data (``_common.data``, i.e. :func:`dpkit.core._validate.real_data`) and, when ``fused`` and
    ``values`` is a plain 1-D float64 array, its exact clamped sum from the same read of the data (issue #16):
    ``exact_sum(strict=True)`` refuses NaN and ``±inf`` before clamping, and then the validation runs as before, to
    raise its own error (or drop NaN under ``nan_policy="omit"``). Same errors in the same order, same data, same
    sum; one pass over memory fewer. Otherwise ``(data, None)``."""
    if fused and type(values) is np.ndarray and values.dtype == np.float64 and values.ndim == 1:
        _common.data(values[:0], nan_policy=nan_policy)  # real_data's checks of the arguments, on no values
        try:
            return values, exact_sum(values, clamp=(lo, hi), strict=True)
        except InvalidData:
            pass  # a NaN or an infinity: real_data says which (or drops NaN)
    return _common.data(values, nan_policy=nan_policy), None


def _plan(x: np.ndarray, lo: float, hi: float, eps: float, method: str, candidates: int, nb: Neighbours,
          total: Fraction | None = None) -> Any:
    """The method's sampler (validated, nothing drawn); :func:`_mean_plan` wraps it in the contract's Plan.
    ``total``: the exact clamped sum of ``x`` when already computed (:func:`_data_and_sum`)."""
    if method == "exponential":
        return _ExponentialPlan(x, lo, hi, eps, nb, candidates, total)
    if _common.is_replace(nb):
        return _ReplacePlan(x, lo, hi, eps, total)
    if method == "clamp":
        return _ClampPlan(x, lo, hi, eps, nb)
    if method == "centred":
        try:
            return _CentredPlan(x, lo, hi, eps, nb, total)
        except InvalidParameter:  # scales beyond the float range at 10% of ε: Li Alg 4 (public decision)
            pass
    return _RatioPlan(x, lo, hi, eps, nb, centred=(method in ("normalized", "centred")))


def _check_method(method: Any) -> str:
    if not isinstance(method, str):
        raise WrongType("method", "a str: one of " + ", ".join(METHODS))
    if method not in METHODS:
        raise InvalidParameter("method", "must be one of " + ", ".join(METHODS))
    return method


def mean(values: ArrayLike, bounds: tuple[float, float], epsilon: float, *, method: str = "centred",
         candidates: int = 1024, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
         rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """Differentially private mean of ``values`` clamped to the public ``bounds = (lo, hi)``.

    See the module docstring for the methods, the neighbour relations and the errata of Li et al.

    Parameters
    ----------
    values:
        1-D real data. Values outside ``[lo, hi]`` are moved to the nearest bound; ``None``/NaN raise
        (``nan_policy="raise"``) or are dropped (``"omit"``). Empty input gives a valid DP answer.
    bounds:
        Public ``(lo, hi)``, ``lo < hi``; the bounds and the candidate grid must not come from the data.
    epsilon:
        The privacy parameter, > 0.
    method:
        ``"centred"`` (default: a privately chosen centre, then the sum centred there), ``"normalized"`` (Li
        Alg 4, the default before issue #16: pass it to reproduce earlier releases), ``"clamp"`` (Alg 3,
        recalibrated), ``"noisy_ratio"`` (Alg 1), ``"exponential"`` or ``"median"``; ``Release.params["method"]``
        says which.
    candidates:
        (2 to 2^20) the resolution of the public grid: the number of equally spaced points for
        ``"exponential"``, the number of bins (``bins=``) for ``"median"``; other methods ignore it.
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`).

    Guarantee
    ---------
    Pure ``epsilon``-DP for every method, under add/remove one record (default), a privacy unit
    (sensitivities × ``k = max_rows``) or replace-one (``n`` public).

    - ``"centred"``: adaptive sequential composition of three pure-DP releases, ``ε₁ + ε_C + ε_S <= ε`` exactly
      (split 1 : 1 : 8, each part rounded down): the sum centred at the midpoint (sensitivity ``k·Δ/2``, ``ε₁``),
      the count (``k``, ``ε_C``), and, given the centre ``c`` computed from those two released values only, the
      exact sum ``Σ(x - c)`` with sensitivity ``k·max(c - lo, hi - c)`` (``ε_S``): its lattice and scale depend
      on released values and public parameters only. The mean is post-processing.
    - ``"normalized"``/``"noisy_ratio"``: sequential composition of ``ε/2`` for the (centred) sum and
      ``ε/2`` for the count (each rounded down; exact sum ``<= ε``); sensitivities ``k·Δ/2`` (centred sum) or
      ``k·max(|lo|,|hi|)`` (sum) and ``k`` (count). The ratio is post-processing.
    - ``"clamp"``: Alg 3 with noise parameter ``ε₀ = min(ε', 2(ε' - ln 2))``, ``ε' = ε/k``, which is
      ``max(ε₀, ln 2 + ε₀/2) <= ε'``-DP per record (group privacy for a privacy unit); refused for
      ``ε' <= ln 2`` (module docstring for the change-of-variables argument).
    - ``"exponential"``: quality ``q(o) = -|Σ(x - o)|`` with sensitivity ``k·Δ`` (adding ``x`` moves
      ``Σ(x - o)`` by ``x - o``; not monotonic), exact scores, ``dpkit.mechanisms.exponential``.
    - ``"median"``: :func:`dpkit.stats.order_statistics.median`'s guarantee.
    - Replace-one (``"centred"``, ``"normalized"``, ``"noisy_ratio"``, ``"clamp"``): the exact sum with
      sensitivity ``Δ``
      and the full ``ε``, divided by the public ``n``.

    Cost
    ----
    ``PureDP(epsilon)``, charged once, before any randomness, for every method (``"median"`` is the plan of
    :func:`dpkit.stats.order_statistics.median`, whose receipt and release say ``"median"``).

    Output law
    ----------
    A float in ``[lo, hi]``.

    - ``"centred"``: ``S̃₁``, ``S̃₂`` exact lattice Laplace releases of exact sums, ``C̃ = n + Z`` with ``Z``
      exact discrete Laplace; ``Release.parts``: ``centre_sum`` (``S̃₁``), ``count``, ``centre`` and
      ``centred_sum`` (``S̃₂``).
    - ``"normalized"``/``"noisy_ratio"``: ``S̃`` an exact lattice Laplace release of the exact (centred) sum
      (:class:`~dpkit.stats.sums.LatticeSum`), ``C̃ = n + Z`` with ``Z`` exact discrete Laplace; ``mid`` if
      ``C̃ <= 1``, else ``clamp(S̃/C̃ (+ mid))``. ``Release.parts`` holds the noisy sum and the noisy count
      (free to use) and, for ``"normalized"``, the ``centre``.
    - ``"clamp"``: exactly sampled on the public grid ``mid + g Z`` (see ``_ClampPlan``).
    - ``"exponential"``: the exact exponential mechanism over ``candidates`` equally spaced public points.
    - Replace-one: ``clamp(S̃/n)`` (``mid`` when ``n = 0``).

    Error
    -----
    - ``"centred"``: ``Release.interval(c)`` as below, from ``S̃₂``, ``C̃`` and the centre (the second stage is
      independent of the first given the centre). Roughly ``|error| <~ (b_S + |mean - c| b_C)/n`` with
      ``b_S = k·max(c - lo, hi - c)/(0.8 ε)``: it beats ``"normalized"`` (``b = kΔ/ε`` on the sum plus
      ``|mean - mid|·2k/ε`` on the count) when ``n ε`` is large enough for the first stage to place ``c`` near
      the mean. Measured on Adult (200 releases, median |error|, ``docs/benchmarks.md``, issue #16): 0.70–0.79×
      the error of ``"normalized"`` at ε ∈ {0.01, 0.1, 1} on age, hours per week and capital gain. Against
      replace-one peers (``n`` public, a weaker guarantee) it is below them on age and hours per week, and
      about 1.2× on capital gain: with the mean near ``lo``, ``max(c - lo, hi - c) ≈ Δ``, the replace-one
      sensitivity, and the add/remove release still pays 20% of ``ε`` for the count and the centre. For very
      small ``n ε`` (the first stage's error a sizeable part of ``Δ``) it can lose to ``"normalized"``:
      measured on Adult subsamples (400 draws per cell, 2026-11-27), capital gain at ``n = 50, ε = 0.1`` has 8.3×
      ``"normalized"``'s median error (2.2× its mean absolute error), age at ``n = 300, ε = 0.1`` 1.4× (2.6×);
      from ``n ε`` of a few hundred on it wins (capital gain and age at ``n = 300, ε = 1``: 0.79× and 0.75×).
      Pass ``method="normalized"`` for a handful of records at small ``ε``. Bounds or
      ``ε`` for which a noise scale at 10% of ``ε`` leaves the float range (bounds near ``1e308``) run
      ``"normalized"`` instead, and ``Release.params["method"]`` says so.
    - ``"normalized"``/``"noisy_ratio"``: ``Release.interval(c)`` holds the exact mean of the
      clamped data with probability ``>= c``: union bound over the two noisy parts (``(1-c)/2``
      each), the range of ``S/n`` over the two intervals, clipped to ``[lo, hi]``; it is ``(lo, hi)``
      when the count's interval reaches 0. Roughly ``|error| <~ (b_S + |mean - mid| b_C) ln(2/(1-c)) / n``.
      (For an empty dataset the "true mean" is ``mid``, as in Li's Eq. 2.8.)
    - ``"clamp"``: no ``interval`` (the error depends on the private ``n``); with probability
      ``>= 1 - β``: ``|output - mean| <= b ln(1/β)/n + 2g`` for ``n >= 1`` (``b = Release.scale``
      ``~ Δ/ε₀``, ``g <= Δ/2^20`` the grid).
    - ``"exponential"``: no ``interval``; with probability ``>= 1 - β``:
      ``|output - mean| <= Δ/(2(m-1)) + 2kΔ(ln m + ln(1/β))/(n ε)`` (``m`` candidates).
    - ``"median"``: :func:`dpkit.stats.order_statistics.quantile`'s rank error bound.
    - Replace-one: ``interval`` from the noisy sum divided by the public ``n``.

    Clamping biases every method towards the bounds when data lie outside them.

    Errata
    ------
    Li et al. (2016) Alg 3 / Prop 2.22 is not ε-DP as printed (the change-of-variables factor is missing);
    Alg 4's midpoint and Alg 1's sensitivity are misprinted. See the module docstring.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = mean([2.0, 4.0, 6.0] * 100, (0, 10), 1.0, rng=deterministic_source(5))
    >>> r.mechanism, r.params["method"], 3.0 < r.value < 5.0, sorted(r.parts)
    ('mean', 'centred', True, ['centre', 'centre_sum', 'centred_sum', 'count'])
    """
    plan = _mean_plan(values, bounds, epsilon, method=method, candidates=candidates, neighbours=neighbours,
                      accountant=accountant, nan_policy=nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _mean_plan(values: Any, bounds: Any, epsilon: Any, *, method: Any = "centred", candidates: Any = 1024,
               neighbours: Neighbours | None = None, accountant: Accountant | None = None,
               nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`mean` (nothing charged or drawn; ``accountant`` only supplies the default
    neighbour relation). Its draw runs the method's sampler (:func:`_plan`) once."""
    method = _check_method(method)
    candidates = check.integer("candidates", candidates, minimum=2)
    if candidates > _MAX_CANDIDATES:
        raise InvalidParameter("candidates", f"must be <= {_MAX_CANDIDATES}")
    if method == "median":
        from dpkit.stats.order_statistics import _median_plan

        return _median_plan(values, bounds, epsilon, bins=candidates, neighbours=neighbours, accountant=accountant,
                            nan_policy=nan_policy)
    lo, hi = _common.bounds(bounds)
    eps = check.epsilon(epsilon)
    nb = _common.neighbours_of(neighbours, accountant)
    x, total = _data_and_sum(values, nan_policy, lo, hi, _uses_clamped_sum(method, nb))
    sampler = _plan(x, lo, hi, eps, method, candidates, nb, total)
    if method == "centred" and isinstance(sampler, _RatioPlan):
        method = "normalized"  # the fallback of bounds near the float range's end (see _plan)
    params: dict[str, Any] = {"epsilon": eps, "bounds": [lo, hi], "method": method, "neighbours": nb.describe()}
    if method == "exponential":
        params["candidates"] = candidates
    if isinstance(sampler, _ClampPlan):
        params["epsilon0"] = sampler.eps0

    def draw(rng: RandomSource) -> Outcome:
        values_out, parts_arr = sampler.draw(rng, 1)
        parts = {k: (int(v[0]) if v.dtype.kind == "i" else float(v[0])) for k, v in parts_arr.items()}
        interval_fn = None
        if isinstance(sampler, _RatioPlan):
            key = "centred_sum" if sampler.centred else "sum"
            interval_fn = sampler.interval_fn(parts[key], int(parts["count"]))
            if sampler.centred:
                parts["centre"] = sampler.mid
        elif isinstance(sampler, _CentredPlan):
            interval_fn = sampler.interval_fn(parts["centred_sum"], int(parts["count"]), parts["centre"])
        elif isinstance(sampler, _ReplacePlan):
            interval_fn = sampler.interval_fn(parts["sum"])
        return Outcome(float(values_out[0]), parts=parts, interval_fn=interval_fn)

    return Plan(mechanism="mean", cost=PureDP(eps), draw=draw, scale=sampler.scale, params=params, neighbours=nb)
