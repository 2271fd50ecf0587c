"""Smooth sensitivity (Nissim, Raskhodnikova & Smith 2007): the median and the mean, (epsilon, delta)-DP.

The framework (Near & Abuah §8.4, Li et al. §8.1):

1. ``beta = epsilon / (2 ln(2/delta))``;
2. ``S(x) = max_{k >= 0} e^{-beta k} A(f, x, k)`` -- a *beta-smooth upper bound* on the local
   sensitivity: ``S(x) >= LS(x)`` and ``S(x) <= e^beta S(x')`` for neighbours;
3. release ``f(x) + Lap(2 S(x) / epsilon)``.

``S`` depends on the private data, so the *noise scale is private*: it is never released
(``Release.scale`` is None) and the output lattice must not depend on it (below).

Errata and deviations from the seeds
------------------------------------
- **k starts at 0.** Near & Abuah's text writes ``max_{k=1..n}``; their code (and NRS) start at
  ``k = 0``, which is needed for ``S >= LS`` (for the mean the maximum *is* at ``k = 0``).
- **All k are searched.** Near's code stops at ``k < 200``; here the maximum is exact: the median's
  windows are evaluated for every ``k`` up to the point where ``e^{-beta k}(w + 2g) < 2g`` (no later
  term can be the maximum, because the ``k = 0`` term is ``>= 2g``), and the mean's maximum is over
  the same range (for ``S`` without ``+2g``, :func:`smooth_sensitivity_mean`, by a convexity argument
  the maximum is at ``k = 0`` or ``k = n - 2``).
- **Add/remove local sensitivities** are derived in :mod:`dpkit.stability.local` (Li's median formula is
  for replace-one and odd ``n``; Near's mean formula ``u/(n-k+1)`` misses removals: here
  ``w / max(n - k, 2)``). For Near's Adult example (u = 100, epsilon = 1, delta = 1/n², n = 32,561) the
  maximum is at ``k = 0`` in both versions: Near's ``2S = 200/32562 = 0.006142128861863522``
  (:func:`book_smooth_sensitivity_mean`), ours ``2S = 200/32561 = 0.0061423174963913885``. Both
  exceed the PTR bound ``b = 0.005`` Near proposes (as the book notes).
- **beta.** The proof below uses ``e^{beta} - 1 <= epsilon/(2L)`` with ``L = max(1, ln(2/delta))``, so
  the mechanisms use ``beta = ln(1 + epsilon/(2L)) - 2^-34`` (a hair smaller than NRS's
  ``epsilon/(2 ln(2/delta))``; the ``2^-34`` absorbs floating-point error, see "Numerics").

Exact lattice release (no floating-point Laplace)
-------------------------------------------------
Let ``g`` be a **public** power of two chosen from the bounds and epsilon only (``<= w 2^-30``; never
from ``S``: a lattice such as ``S 2^-20`` would publish ``S`` through the output's spacing). With
``S'(x) = max_k e^{-beta k} (Â(x, k) + 2g)`` (still beta-smooth: ``Â + 2g`` keeps both NRS properties)
the release is

    out = g (r + Z),  r = round_half_even(f(x) / g),  Z ~ DLap(t),  t = 2 S'(x) / (epsilon g),

``P[Z = z] = tanh(1/(2t)) e^{-|z|/t}``. Neighbours ``x, x'`` have ``|r - r'| <= LS/g + 1 + 1`` (one for
the rounding, one for the float evaluation of ``f``, see "Numerics") ``<= epsilon t/2`` and
``<= epsilon t'/2``, and ``t/t' <= e^{beta}``.

Proof that this is (epsilon, delta)-DP. Fix neighbours ``x, x'``, ``Δ = r' - r``, ``P = P_x``,
``P' = P_{x'}``.

*Case t <= t'* (``x`` has the smaller scale). Pointwise, ``ln P(k) - ln P'(k) = ln(tanh(1/2t) /
tanh(1/2t')) - |k - r|/t + |k - r'|/t'``. The normaliser ratio is ``<= t'/t <= e^beta`` (``tanh(u)/u``
decreases -- the discrete analogue of the continuous Jacobian), and
``-|k - r|/t + |k - r'|/t' <= |Δ|/t' + |k - r| (1/t' - 1/t) <= |Δ|/t' <= epsilon/2``. So the ratio is
``<= e^{beta + epsilon/2} <= e^epsilon`` (``beta <= epsilon/(2L) <= epsilon/2``): no delta needed.

*Case t > t'* (dilation, then slide). Let ``Q`` be DLap(t') centred at ``r``. For ``z = k - r``,
``P(k)/Q(k) = (tanh(1/2t)/tanh(1/2t')) e^{|z| (1/t' - 1/t)} <= e^{|z|(1/t' - 1/t)}``, which is
``<= e^{epsilon/2}`` unless ``|z| > (epsilon/2) / (1/t' - 1/t) = (epsilon/2) t / (t/t' - 1) >= L t``
(as ``t/t' - 1 <= e^beta - 1 <= epsilon/(2L)``). That tail has ``P``-mass
``P[|Z| >= floor(Lt) + 1] = 2 q^{floor(Lt)+1}/(1+q) <= 2 e^{-L} <= delta`` (``q = e^{-1/t}``). So
``P(E) <= e^{epsilon/2} Q(E) + delta``. Sliding ``Q`` to ``P'`` (same scale ``t'``, shift ``|Δ| <=
epsilon t'/2``) costs a pointwise factor ``e^{|Δ|/t'} <= e^{epsilon/2}``; hence
``P(E) <= e^epsilon P'(E) + delta`` for every event ``E``. (NRS's continuous proof splits delta into
two halves; this order of the two steps needs only one tail.)

``tests/stability/test_smooth.py`` checks this numerically: for small data sets and **every** add/remove
neighbour it computes both exact output pmfs and ``delta(epsilon) = sum_o max(0, P(o) - e^epsilon P'(o))``
in both directions, and asserts ``<= delta``; variants without smoothing or with ``beta`` too large
are caught.

Numerics. Â is a float difference (monotone rounding keeps ``Â(x,k) <= Â(x',k+1)``); each term
``e^{-beta k}(Â + 2g)`` is computed with relative error < 2^-44 for every ``k`` that can attain the
maximum (there ``beta k <= ln(2^32)``); the maximum is multiplied by ``1 + 2^-36`` and rounded up, and
``t`` is rounded up (exact rationals). So ``S'`` used ``>= `` the exact ``S'`` and the ratio of the
used scales between neighbours is ``<= e^{beta}(1 + 2^-38) < 1 + epsilon/(2L)``. The mean is
evaluated with ``math.fsum`` (error below ``2^-50 max(|lo|, |hi|) <= g/2`` by the choice of ``g``).
Epsilons with ``epsilon/(2L) < 2^-24`` are refused (the margins would not fit).

Where it loses
--------------
As Li et al. (§8.1) report, the smooth-sensitivity median is worse than the exponential-mechanism
median (:func:`dpkit.stats.median`) on continuous data: its noise is at least ``2 LS/epsilon`` and grows
with the widest gap reachable in ``~1/beta = 2 ln(2/delta)/epsilon`` steps, and it needs delta
(``tests/stability/test_smooth.py``: 1,001 standard normals, epsilon = 1, the EM median's mean absolute
error is smaller). The exception is heavily tied data: on the Adult ages (integers, n = 32,561, median 37
repeated hundreds of times) no window within ``~1/beta`` steps opens, ``S ≈ 1e-8``, and the smooth median is
exact to ``~1e-7`` while a 1024-bucket EM median is off by ~0.04 (bucket width 0.1). For the mean,
``2S ~ 2w/n`` is twice the local sensitivity -- no better than the global-sensitivity mean
(:func:`dpkit.stats.mean`), which is pure DP.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import ApproxDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, run
from dpkit.noise.source import RandomSource
from dpkit.stability import _util
from dpkit.stability.local import mean_bound

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = [
    "book_smooth_sensitivity_mean",
    "smooth_beta",
    "smooth_mean",
    "smooth_median",
    "smooth_sensitivity_mean",
    "smooth_sensitivity_median",
]

_BETA_MARGIN = 2.0**-34
_S_MARGIN = 1.0 + 2.0**-36
_MIN_RATIO = 2.0**-24
_MAX_UNITS = 2.0**49  # t must stay <= 2^50 (sampler range); keep a factor 2 of room


def _L(delta: float) -> float:
    return max(1.0, math.log(2.0 / delta))


def smooth_beta(epsilon: float, delta: float) -> float:
    """The smoothing parameter the mechanisms use: ``ln(1 + epsilon/(2L)) - 2^-34``, ``L = max(1, ln(2/delta))``.

    Public (a function of epsilon and delta only). NRS and Near & Abuah use ``epsilon/(2 ln(2/delta))``,
    a hair larger; see the module docstring for why this one.
    """
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    ratio = eps / (2.0 * _L(dlt))
    if ratio < _MIN_RATIO:
        raise InvalidParameter("epsilon", "too small for the smooth-sensitivity calibration (epsilon/(2 ln(2/delta)) "
                               "must be >= 2^-24)")
    return math.log1p(ratio) - _BETA_MARGIN


def _beta_arg(beta: Any) -> float:
    return check.positive("beta", beta)


# ---------------------------------------------------------------------------------------------
# max_k e^{-beta k} (A(x, k) + c)
# ---------------------------------------------------------------------------------------------


def _horizon(a_max: float, c: float, beta: float, n: int) -> int:
    """Largest k worth evaluating: beyond it e^{-beta k}(a_max + c) < c <= the k = 0 term."""
    if c <= 0.0:
        return n
    k = math.ceil(math.log((a_max + c) / c) / beta) + 2
    return max(0, min(n, k))


def _median_smooth_max(xs: np.ndarray, lo: float, hi: float, beta: float, c: float, replace: bool) -> float:
    """``max_{k >= 0} e^{-beta k} (A(x, k) + c)`` for the lower median (exact max, see module docstring)."""
    n = xs.size
    w = hi - lo
    if not replace:
        # symmetric windows (local.py): A(k) = x_(i_k + k + 1) - x_(i_k), i_k = floor((n - k)/2);
        # for k >= n the window is [lo, hi] and only the weight decreases
        k = np.arange(0, _horizon(w, c, beta, n) + 1, dtype=np.int64)
        i = np.floor_divide(n - k, 2)
        gaps = _util.order_stat(xs, i + k + 1, lo, hi) - _util.order_stat(xs, i, lo, hi)
        return float(np.max(np.exp(-beta * k.astype(np.float64)) * (gaps + c)))
    return _replace_median_max(xs, lo, hi, beta, c)


def _replace_median_max(xs: np.ndarray, lo: float, hi: float, beta: float, c: float) -> float:
    """NRS: ``max_{0 <= i <= m <= j <= n+1, i < j} e^{-beta (j - i - 1)} (x_(j) - x_(i) + c)``.

    Divide and conquer over ``i`` (level by level, vectorised): the best ``j`` for ``i`` is
    non-decreasing in ``i`` (``(x_j2 - x_i + c)/(x_j1 - x_i + c)`` grows with ``x_i`` when
    ``x_j2 >= x_j1``), so the mid-point's best ``j*`` splits the ``j`` range. O(n log n).
    """
    n = xs.size
    m = (n + 1) // 2
    K = _horizon(hi - lo, c, beta, n + 1)
    ilo0, ihi0 = max(0, m - K - 1), m
    jlo0, jhi0 = m, min(n + 1, m + K + 1)
    seg = np.array([[ilo0, ihi0, jlo0, jhi0]], dtype=np.int64)
    best = -math.inf
    while seg.size:
        ilo, ihi, jlo, jhi = seg.T
        mid = (ilo + ihi) // 2
        lengths = jhi - jlo + 1
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        rep = np.repeat(np.arange(seg.shape[0]), lengths)
        j = jlo[rep] + (np.arange(int(lengths.sum())) - starts[rep])
        i = mid[rep]
        val = np.exp(-beta * (j - i - 1).astype(np.float64)) * (
            _util.order_stat(xs, j, lo, hi) - _util.order_stat(xs, i, lo, hi) + c)
        val = np.where(j > i, val, -math.inf)
        segmax = np.maximum.reduceat(val, starts)
        best = max(best, float(np.max(segmax)))
        jstar = np.maximum.reduceat(np.where(val == segmax[rep], j, -1), starts)
        jstar = np.where(jstar < 0, jhi, jstar)
        left = np.stack([ilo, mid - 1, jlo, np.maximum(jstar, jlo)], axis=1)[mid - 1 >= ilo]
        right = np.stack([mid + 1, ihi, np.minimum(jstar, jhi), jhi], axis=1)[mid + 1 <= ihi]
        seg = np.concatenate([left, right]) if (left.size or right.size) else np.zeros((0, 4), dtype=np.int64)
    return best


def _mean_smooth_max(n: int, w: float, beta: float, c: float, replace: bool) -> float:
    """``max_{k >= 0} e^{-beta k} (Â(x, k) + c)`` for the mean, ``Â(x, k) = w / max(n - k, 2)``."""
    if replace:
        return float(mean_bound(n, w, np.zeros(1), True)[0] + c)
    if c <= 0.0:
        # log-convex in k on [0, n-2] (ln of w/(n-k) is convex), constant A beyond: endpoints suffice
        cands = [w / max(n, 2)]
        if n > 2:
            cands.append(math.exp(-beta * (n - 2)) * w / 2.0)
        return float(max(cands))
    k = np.arange(0, _horizon(w / 2.0, c, beta, n) + 1, dtype=np.float64)
    return float(np.max(np.exp(-beta * k) * (mean_bound(n, w, k, False) + c)))


# ---------------------------------------------------------------------------------------------
# analysis tools (NOT private)
# ---------------------------------------------------------------------------------------------


def smooth_sensitivity_median(values: ArrayLike, bounds: tuple[float, float], beta: float, *,
                              neighbours: Neighbours | None = None, nan_policy: str = "raise") -> float:
    """**NOT PRIVATE -- never release this number.** ``S*(x) = max_{k>=0} e^{-beta k} A(x, k)`` for the
    lower median (exact over all ``k``; add/remove by default, NRS's formula under replace).

    >>> smooth_sensitivity_median([1.0, 2.0, 3.0, 4.0, 5.0], (0.0, 10.0), 0.5)
    1.2130613194252668
    """
    beta = _beta_arg(beta)
    nb = _util.relation(neighbours, None, "smooth_sensitivity_median")
    xs, lo, hi = _util.sorted_clipped(values, bounds, nan_policy)
    return _median_smooth_max(xs, lo, hi, beta, 0.0, is_replace(nb))


def smooth_sensitivity_mean(values: ArrayLike, bounds: tuple[float, float], beta: float, *,
                            neighbours: Neighbours | None = None, nan_policy: str = "raise") -> float:
    """**NOT PRIVATE -- never release this number.** ``max_{k>=0} e^{-beta k} w/max(n-k, 2)`` (add/remove)
    or ``w/n`` (replace) for the clamped mean: a beta-smooth upper bound on its local sensitivity.

    >>> smooth_sensitivity_mean([1.0] * 100, (0.0, 10.0), 0.1)  # maximum at k = 0: w / n
    0.1
    """
    beta = _beta_arg(beta)
    nb = _util.relation(neighbours, None, "smooth_sensitivity_mean")
    xs, lo, hi = _util.sorted_clipped(values, bounds, nan_policy)
    return _mean_smooth_max(xs.size, hi - lo, beta, 0.0, is_replace(nb))


def book_smooth_sensitivity_mean(n: int, upper: float, epsilon: float, delta: float, *, kmax: int = 200) -> float:
    """Near & Abuah's smooth sensitivity of the mean, **as printed** (for reproduction only):
    ``S = max_{0 <= k < kmax} e^{-beta k} u/(n - k + 1)``, ``beta = epsilon/(2 ln(2/delta))``.

    It under-covers removals (see :mod:`dpkit.stability.local`) and truncates ``k``; no mechanism uses it.

    >>> n = 32561
    >>> 2 * book_smooth_sensitivity_mean(n, 100.0, 1.0, 1.0 / n**2)
    0.006142128861863522
    """
    n = check.integer("n", n, minimum=1)
    u = check.positive("upper", upper)
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    kmax = check.size_limit("kmax", kmax, 10**7, minimum=1)
    beta = eps / (2.0 * math.log(2.0 / dlt))
    k = np.arange(0, min(kmax, n + 1), dtype=np.float64)
    return float(np.max(np.exp(-beta * k) * np.abs(u / (n - k + 1))))


# ---------------------------------------------------------------------------------------------
# the mechanisms
# ---------------------------------------------------------------------------------------------


def _granularity(granularity: Any, w: float, mag: float, a_max: float, eps: float) -> float:
    """The public output lattice step: a power of two from the bounds and epsilon only."""
    floor_g = mag * 2.0 * _util.FLOAT_SLACK  # float evaluation error of f stays below g/2

    def units_max(g: float) -> float:
        return 2.0 * (a_max + 2.0 * g) * 1.001 / (eps * g)

    if granularity is not None:
        g = _util.power_of_two("granularity", granularity)
        if g < floor_g:
            raise InvalidParameter("granularity", "too fine for the magnitude of the bounds (float error)")
        if units_max(g) > _MAX_UNITS:
            raise InvalidParameter("granularity", "too fine for this epsilon (noise scale out of the sampler range)")
        return g
    g = _util.floor_pow2(w * 2.0**-30)
    while g < floor_g:
        g *= 2.0
    while units_max(g) > _MAX_UNITS:
        g *= 2.0
    return g


class _Setup:
    """Validated arguments and public calibration of a smooth-sensitivity release."""

    def __init__(self, what: str, values: Any, bounds: Any, epsilon: Any, delta: Any, granularity: Any,
                 neighbours: Neighbours | None, accountant: Accountant | None, nan_policy: Any, a_max_of_w: float,
                 a_max_replace: float | None = None) -> None:
        self.nb = _util.relation(neighbours, accountant, what)
        self.xs, self.lo, self.hi = _util.sorted_clipped(values, bounds, nan_policy)
        self.eps = check.epsilon(epsilon)
        self.delta = _util.approx_delta(delta)
        self.beta = smooth_beta(self.eps, self.delta)
        w = self.hi - self.lo
        self.replace = is_replace(self.nb)
        # the largest value Â can take (public): the median's windows are <= w; the mean's bound is
        # <= w/2 under add/remove and w/n <= w under replace
        self.a_max = w * (a_max_replace if (self.replace and a_max_replace is not None) else a_max_of_w)
        self.g = _granularity(granularity, w, _util.magnitude(self.lo, self.hi), self.a_max, self.eps)
        # a public upper bound on every scale this call can use (for the conservative interval)
        self.units_max = _exact.div_up(Fraction(2) * Fraction(self.a_max + 2.0 * self.g) * Fraction(1.0 + 2.0**-30),
                                       Fraction(self.eps) * Fraction(self.g))
        self.params = {"epsilon": self.eps, "delta": self.delta, "bounds": (self.lo, self.hi), "beta": self.beta,
                       "granularity": self.g, "neighbours": self.nb.describe()}


def _units(s_prime: float, eps: float, g: float) -> float:
    """``t = 2 S'/(epsilon g)`` in lattice units, with the margins of the module docstring (rounded up)."""
    s_used = _exact.up(s_prime * _S_MARGIN, 2)
    return _exact.div_up(Fraction(2) * Fraction(s_used), Fraction(eps) * Fraction(g))


def _smooth_plan(setup: _Setup, mechanism: str, f: float, t: float) -> Plan:
    """The plan of a smooth-sensitivity release: cost ``ApproxDP(epsilon, delta)``; draw ``g (r + DLap(t))``
    (``f = r g``, ``t`` the private scale in lattice units, never recorded). ``Plan.scale`` and ``noise`` are
    ``None`` (the scale is private); ``granularity`` is the public ``g``."""
    units_max, g = setup.units_max, setup.g

    def draw(rng: RandomSource) -> Outcome:
        from dpkit.mechanisms import accuracy
        from dpkit.noise import lattice_laplace

        value = float(lattice_laplace(np.array([f]), t * g, g, rng=rng)[0])

        def interval(confidence: float) -> tuple[float, float]:
            # conservative: the worst-case (public) scale; covers the clamped statistic f(x)
            h = accuracy.laplace_halfwidth(units_max * g, confidence, granularity=g)
            return float(np.nextafter(value - h, -np.inf)), float(np.nextafter(value + h, np.inf))

        return Outcome(value, interval_fn=interval)

    return Plan(mechanism=mechanism, cost=ApproxDP(setup.eps, setup.delta), draw=draw, granularity=g,
                params=setup.params, neighbours=setup.nb)


def _median_law(setup: _Setup) -> tuple[int, float]:
    """(centre r in lattice units, scale t in lattice units): the exact output law ``g (r + DLap(t))``."""
    f = _util.median_value(setup.xs, setup.lo, setup.hi)
    s_prime = _median_smooth_max(setup.xs, setup.lo, setup.hi, setup.beta, 2.0 * setup.g, setup.replace)
    return int(np.rint(f / setup.g)), _units(s_prime, setup.eps, setup.g)


def _mean_law(setup: _Setup) -> tuple[int, float]:
    f = _util.mean_value(setup.xs, setup.lo, setup.hi)
    s_prime = _mean_smooth_max(setup.xs.size, setup.hi - setup.lo, setup.beta, 2.0 * setup.g, setup.replace)
    return int(np.rint(f / setup.g)), _units(s_prime, setup.eps, setup.g)


def smooth_median(values: ArrayLike, bounds: tuple[float, float], epsilon: float, delta: float, *,
                  granularity: float | None = None, neighbours: Neighbours | None = None,
                  accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
                  description: str = "") -> Release:
    """The lower median with smooth-sensitivity Laplace noise (NRS 2007): (epsilon, delta)-DP.

    Parameters
    ----------
    values:
        The private data (1-D, real), clamped into ``bounds``; the statistic is the lower median
        ``x_(ceil(n/2))`` (``lo`` for an empty sample).
    bounds:
        The public ``(lo, hi)``.
    epsilon, delta:
        The privacy parameters (``epsilon/(2 ln(2/delta)) >= 2^-24``).
    granularity:
        The public lattice step (a power of two; default ``<= (hi - lo) 2^-30``).
    neighbours, accountant, rng, nan_policy, description:
        Add/remove one record (default) or replace one (``n`` public; NRS's window formula); privacy units are
        refused. The accountant charged, the random source, the missing-value policy, the receipt's note.

    Guarantee
    ---------
    ``(epsilon, delta)``-DP (approximate) under the relation in force: ``S'`` is a ``beta``-smooth upper bound
    on the local sensitivity (plus ``2g``), and the discrete Laplace with a ``beta``-smooth scale is ``(epsilon,
    delta)``-DP by the dilation-then-slide argument of the module docstring (proof and errata there).

    Cost
    ----
    ``ApproxDP(epsilon, delta)``, charged once, before any randomness.

    Output law
    ----------
    ``g (round(median/g) + Z)``, ``Z ~ DLap(2 S'(x)/(epsilon g))`` with the smooth bound ``S'`` of the module
    docstring. The scale depends on the data and is **not** released (``Release.scale`` is None; the lattice
    ``g`` is public).

    Error
    -----
    With probability ``>= 1 - beta_conf`` the error is at most ``(2 S'(x)/epsilon) ln(1/beta_conf) + g`` where
    ``S'(x) >= LS(x) + 2g`` is the smooth bound; the public worst case ``S' <= w + 2g`` gives
    ``Release.interval`` (conservative). Li et al. note that this loses to the exponential-mechanism median
    (:func:`dpkit.stats.median`).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> import numpy as np
    >>> r = smooth_median(np.linspace(0.0, 100.0, 10001), (0.0, 100.0), 1.0, 1e-6, rng=deterministic_source(3))
    >>> r.cost, abs(r.value - 50.0) < 5
    (ApproxDP(epsilon=1.0, delta=1e-06), True)
    """
    return run(_smooth_median_plan(values, bounds, epsilon, delta, granularity, neighbours, accountant, nan_policy),
               accountant=accountant, rng=rng, description=description)


def _smooth_median_plan(values: Any, bounds: Any, epsilon: Any, delta: Any, granularity: Any,
                        neighbours: Neighbours | None, accountant: Accountant | None, nan_policy: Any) -> Plan:
    """The validated plan of :func:`smooth_median` (nothing drawn or charged)."""
    setup = _Setup("smooth_median", values, bounds, epsilon, delta, granularity, neighbours, accountant, nan_policy,
                   a_max_of_w=1.0)
    r, t = _median_law(setup)
    return _smooth_plan(setup, "smooth_median", r * setup.g, t)


def smooth_mean(values: ArrayLike, bounds: tuple[float, float], epsilon: float, delta: float, *,
                granularity: float | None = None, neighbours: Neighbours | None = None,
                accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
                description: str = "") -> Release:
    """The clamped mean with smooth-sensitivity Laplace noise (Near & Abuah §8.4): (epsilon, delta)-DP.

    Parameters
    ----------
    values:
        The private data (1-D, real), clamped into ``bounds``. The mean of an empty sample is the midpoint.
    bounds:
        The public ``(lo, hi)``.
    epsilon, delta:
        The privacy parameters.
    granularity:
        The public lattice step (a power of two; default ``<= (hi - lo) 2^-30``).
    neighbours, accountant, rng, nan_policy, description:
        Add/remove one record (default) or replace one (then ``n`` is public and the bound is the global
        ``w/n``); privacy units are refused. The accountant charged, the random source, the missing-value
        policy, the receipt's note.

    Guarantee
    ---------
    ``(epsilon, delta)``-DP under the relation in force; same argument as :func:`smooth_median` (module
    docstring) with the smooth bound below.

    Cost
    ----
    ``ApproxDP(epsilon, delta)``, charged once, before any randomness.

    Output law
    ----------
    Smooth bound (add/remove): ``S'(x) = max_k e^{-beta k} (w / max(n - k, 2) + 2g)``, maximised over every
    ``k`` (:mod:`dpkit.stability.local` derives ``w/max(n-k, 2)``; Near's ``u/(n-k+1)`` misses removals).
    Output ``g (round(mean/g) + Z)``, ``Z ~ DLap(2 S'/(epsilon g))``; the scale reveals ``n`` and is not
    released.

    Error
    -----
    With probability ``>= 1 - beta_conf`` the error is at most ``(2 S'/epsilon) ln(1/beta_conf) + g``, about
    ``(2w/(n epsilon)) ln(1/beta_conf)`` for large ``n``: no better than the global-sensitivity mean, which is
    pure DP (:func:`dpkit.stats.mean`). ``Release.interval`` uses the public worst case ``S' <= w/2 + 2g``
    (conservative).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = smooth_mean([30.0] * 1000, (0.0, 100.0), 1.0, 1e-6, rng=deterministic_source(3))
    >>> abs(r.value - 30.0) < 5
    True
    """
    return run(_smooth_mean_plan(values, bounds, epsilon, delta, granularity, neighbours, accountant, nan_policy),
               accountant=accountant, rng=rng, description=description)


def _smooth_mean_plan(values: Any, bounds: Any, epsilon: Any, delta: Any, granularity: Any,
                      neighbours: Neighbours | None, accountant: Accountant | None, nan_policy: Any) -> Plan:
    """The validated plan of :func:`smooth_mean` (nothing drawn or charged)."""
    setup = _Setup("smooth_mean", values, bounds, epsilon, delta, granularity, neighbours, accountant, nan_policy,
                   a_max_of_w=0.5, a_max_replace=1.0)
    r, t = _mean_law(setup)
    return _smooth_plan(setup, "smooth_mean", r * setup.g, t)
