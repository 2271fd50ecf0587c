"""DP steps over **exact integer aggregates** computed elsewhere (by a database engine, for ``dpkit.tables``).

The other modules of :mod:`dpkit.stats` take the private records themselves. When the records live in a
database, the engine computes exact integer aggregates instead (row counts, sums of clamped values rounded to
a public granularity ``g``, sums of their squares, counts per public bucket), one vector per group, and the DP
step runs on those vectors. This module holds those steps, written to the mechanism contract
(:mod:`dpkit.mechanisms.contract`): each builder validates its public parameters, computes the noise law from
public quantities only and returns a :class:`~dpkit.mechanisms.contract.Plan` whose ``draw(rng)`` is the only
place randomness is used. A caller that has already charged the whole cost (``dpkit.tables`` charges one query
once) draws them with :meth:`~dpkit.mechanisms.contract.Plan.sample`; ``run(plan, accountant=...)`` charges and
draws a single one.

- :func:`integer_noise` calibrates one noisy integer vector: discrete Laplace of scale ``t`` (the smallest float
  ``>= L1 / ε``; ε-DP for an integer vector of L1 sensitivity ``L1``) or discrete Gaussian of ``σ`` (the smallest
  float with ``σ² >= L2² / (2ρ)``; ρ-zCDP, Canonne, Kamath & Steinke 2020, Thm 14).
- :func:`integers_plan`: an exact integer vector plus that noise (counts, sums in granularity units).
- :func:`mean_plan`: the mean of clamped values from a noisy count and a noisy sum (post-processing of the two
  noisy vectors, clamped to the bounds), with an interval from the two noise laws.
- :func:`variance_plan`: the variance from a noisy count, sum and sum of squares.
- :func:`bucket_quantile_plan` / :func:`bucket_quantiles_plan`: quantiles by the exponential mechanism over
  public buckets, with the exact rank quality of :mod:`dpkit.stats.order_statistics` computed from the bucket
  counts only.

Sensitivities are the caller's: it knows how far one neighbour step moves each aggregate (``dpkit.tables``
derives them from its contribution bounds, :mod:`dpkit.tables._calib`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, PrivacyLoss, PureDP
from dpkit.mechanisms.accuracy import discrete_gaussian_halfwidth, discrete_laplace_halfwidth
from dpkit.mechanisms.contract import Outcome, Plan, total_cost
from dpkit.mechanisms.discrete import discrete_laplace_scale
from dpkit.mechanisms.selection import exponential
from dpkit.noise import sample_discrete_gaussian, sample_discrete_laplace
from dpkit.noise.source import RandomSource
from dpkit.stats.order_statistics import _exact_scores

__all__ = [
    "IntegerNoise",
    "bucket_quantile_plan",
    "bucket_quantiles_plan",
    "discrete_gaussian_sigma",
    "integer_noise",
    "integers_plan",
    "mean_plan",
    "variance_plan",
]

#: The noise families for integer aggregates: discrete Laplace (ε-DP) and discrete Gaussian (ρ-zCDP).
LAWS = ("laplace", "gaussian")


def discrete_gaussian_sigma(l2_squared: Fraction | int, rho: float) -> float:
    """The smallest float ``σ`` with ``σ² >= l2_squared / (2 rho)`` (checked exactly in rationals).

    For integer vectors of squared L2 sensitivity ``l2_squared`` the discrete Gaussian of this ``σ`` is
    ``rho``-zCDP (Canonne, Kamath & Steinke 2020, Thm 14: ``Δ₂² / (2σ²)``). Raises
    :class:`~dpkit.core.errors.InvalidParameter` (``budget``) when ``σ`` would exceed ``2^50``."""
    need = Fraction(l2_squared) / (2 * Fraction(rho))
    s = _exact.float_at_least(Fraction(math.sqrt(float(need))))
    if not math.isfinite(s):
        raise InvalidParameter("rho", "too large for float64 arithmetic")
    s = _exact.up_until(lambda t: Fraction(t) ** 2 >= need, s)
    if not s <= 2.0**50:
        raise InvalidParameter("budget", "too small: the noise scale overflows")
    return s


@dataclass(frozen=True)
class IntegerNoise:
    """The calibrated noise of one integer vector: its ``law`` (``"laplace"`` or ``"gaussian"``), the budget
    ``share`` it spends (ε or ρ), the integer sensitivities ``l1`` and ``l2_squared`` and the ``scale``
    (discrete Laplace ``t`` or discrete Gaussian ``σ``, in integer units)."""

    law: str
    share: float
    l1: int
    l2_squared: int
    scale: float

    @property
    def cost(self) -> PrivacyLoss:
        """``PureDP(share)`` (discrete Laplace) or ``ZCDP(share)`` (discrete Gaussian)."""
        return PureDP(self.share) if self.law == "laplace" else ZCDP(self.share)

    @property
    def noise(self) -> str:
        """The exact noise law's name (``Release.noise``)."""
        return f"discrete_{self.law}"

    def halfwidth(self, confidence: float = 0.95) -> int:
        """Half-width (integer units) of the central ``confidence`` interval of one noisy coordinate."""
        if self.law == "laplace":
            return discrete_laplace_halfwidth(self.scale, confidence)
        return discrete_gaussian_halfwidth(self.scale, confidence)

    def sample(self, n: int, rng: RandomSource) -> np.ndarray:
        """``n`` noise draws (int64) from ``rng``; nothing drawn for ``n == 0``."""
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if self.law == "laplace":
            return sample_discrete_laplace(self.scale, n, rng=rng)
        return sample_discrete_gaussian(self.scale, n, rng=rng)


def _law(law: Any) -> str:
    if not isinstance(law, str):
        raise WrongType("noise", "'laplace' or 'gaussian'")
    if law not in LAWS:
        raise InvalidParameter("noise", "must be 'laplace' or 'gaussian'")
    return law


def integer_noise(law: str, l1: int, l2_squared: int, share: float) -> IntegerNoise:
    """Calibrate the noise of one integer vector of L1 sensitivity ``l1`` and squared L2 sensitivity
    ``l2_squared`` for a budget ``share``: discrete Laplace of scale ``t >= l1 / share`` (ε-DP, ``share = ε``)
    or discrete Gaussian of ``σ = discrete_gaussian_sigma(l2_squared, share)`` (ρ-zCDP, ``share = ρ``)."""
    law = _law(law)
    if law == "laplace":
        scale = discrete_laplace_scale(int(l1), share)
    else:
        scale = discrete_gaussian_sigma(l2_squared, share)
    return IntegerNoise(law, share, int(l1), int(l2_squared), scale)


def _noise_arg(name: str, value: Any) -> IntegerNoise:
    if not isinstance(value, IntegerNoise):
        raise WrongType(name, "an IntegerNoise from dpkit.stats.aggregates.integer_noise")
    return value


def _ints(name: str, exact: Any) -> np.ndarray:
    """A 1-D object array of Python ints (exact, no overflow)."""
    if isinstance(exact, (str, bytes)):
        raise WrongType(name, "a 1-D sequence of integers")
    arr = np.asarray(exact, dtype=object)
    if arr.ndim != 1:
        raise WrongType(name, "a 1-D sequence of integers")
    return arr


def integers_plan(exact: Any, noise: IntegerNoise) -> Plan:
    """Noisy integers: ``exact + Z`` with ``Z`` i.i.d. from ``noise`` (one draw per coordinate, in order).

    ``exact`` is a 1-D vector of exact integers (counts, or sums in granularity units) whose L1 / squared L2
    sensitivity is ``noise.l1`` / ``noise.l2_squared``. Cost ``noise.cost``: ``noise.share``-DP (discrete
    Laplace) or ``noise.share``-zCDP (discrete Gaussian). The draw returns an object array (exact Python
    integers plus int64 noise)."""
    noise = _noise_arg("noise", noise)
    arr = _ints("exact", exact)

    def draw(rng: RandomSource) -> Any:
        return arr + noise.sample(len(arr), rng)

    return Plan(mechanism=noise.noise, cost=noise.cost, draw=draw, sensitivity=float(noise.l1), scale=noise.scale,
                noise=noise.noise, params={"coords": len(arr)})


def _bounds_g(bounds: Any, granularity: Any) -> tuple[float, float, float]:
    from dpkit.core import _validate as check

    lo, hi = check.bounds(tuple(bounds))
    return lo, hi, check.positive("granularity", granularity)


def mean_plan(sums: Any, counts: Any, *, bounds: tuple[float, float], granularity: float,
              sum_noise: IntegerNoise, count_noise: IntegerNoise) -> Plan:
    """The mean of clamped values from a noisy count and a noisy clamped sum (per coordinate).

    ``counts``: exact numbers of values; ``sums``: exact sums of the values clamped to ``bounds`` and rounded to
    multiples of ``granularity``, in units of ``granularity``. The draw adds ``count_noise`` to the counts,
    then ``sum_noise`` to the sums (in that order), and returns the post-processed ratio
    ``clamp(S g / C, lo, hi)`` (the bounds' midpoint where ``C <= 0``). Cost: the exact sum of the two noises'
    costs. ``Outcome.parts`` holds the noisy ``count`` and ``sum``; ``Outcome.interval_fn(confidence)`` gives
    per-coordinate ``(lo, hi)`` arrays: each noisy vector within its central ``1 - (1 - confidence) / 2``
    interval (so both hold with probability ``>= confidence``), the ratio's extremes over that box, clamped to the
    bounds (the bounds themselves where the count's lower end is below 1)."""
    c_noise, s_noise = _noise_arg("count_noise", count_noise), _noise_arg("sum_noise", sum_noise)
    lo_b, hi_b, g = _bounds_g(bounds, granularity)
    cnt, sm = _ints("counts", counts), _ints("sums", sums)
    if len(cnt) != len(sm):
        raise InvalidParameter("sums", "must have the length of counts")

    def draw(rng: RandomSource) -> Outcome:
        c = cnt + c_noise.sample(len(cnt), rng)
        s = sm + s_noise.sample(len(sm), rng)
        values = []
        for j in range(len(c)):
            cj, sj = int(c[j]), int(s[j])
            values.append(min(max(sj * g / cj, lo_b), hi_b) if cj > 0 else (lo_b + hi_b) / 2)

        def interval(confidence: float) -> tuple[np.ndarray, np.ndarray]:
            each = 1 - (1 - confidence) / 2
            hc, hs = c_noise.halfwidth(each), s_noise.halfwidth(each)
            los, his = [], []
            for j in range(len(c)):
                cj, sj = int(c[j]), int(s[j])
                lo, hi = lo_b, hi_b
                if cj - hc >= 1:
                    cands = [(sj - hs) * g / (cj - hc), (sj - hs) * g / (cj + hc), (sj + hs) * g / (cj - hc),
                             (sj + hs) * g / (cj + hc)]
                    lo, hi = max(lo_b, min(cands)), min(hi_b, max(cands))
                los.append(lo)
                his.append(hi)
            return np.array(los, dtype=np.float64), np.array(his, dtype=np.float64)

        return Outcome(np.array(values, dtype=np.float64), parts={"count": c, "sum": s}, interval_fn=interval)

    return Plan(mechanism="mean_from_sums", cost=total_cost([c_noise.cost, s_noise.cost]), draw=draw,
                params={"bounds": [lo_b, hi_b], "granularity": g, "coords": len(cnt)})


def variance_plan(sums: Any, counts: Any, squares: Any, *, bounds: tuple[float, float], granularity: float,
                  sum_noise: IntegerNoise, count_noise: IntegerNoise, square_noise: IntegerNoise) -> Plan:
    """The (population) variance of clamped values from a noisy count, sum and sum of squares.

    Inputs as for :func:`mean_plan`, plus ``squares`` (exact sums of the squared values in units of
    ``granularity²``). The draw adds ``count_noise``, ``sum_noise`` and ``square_noise`` in that order and
    returns ``clamp((Q / C - (S / C)²) g², 0, ((hi - lo) / 2)²)`` (0 where ``C <= 1``). Cost: the exact sum of
    the three noises' costs. ``Outcome.parts``: the noisy ``count``, ``sum`` and ``squares``; no interval
    (it would depend on the private count's size)."""
    c_noise, s_noise = _noise_arg("count_noise", count_noise), _noise_arg("sum_noise", sum_noise)
    q_noise = _noise_arg("square_noise", square_noise)
    lo_b, hi_b, g = _bounds_g(bounds, granularity)
    cnt, sm, sq = _ints("counts", counts), _ints("sums", sums), _ints("squares", squares)
    if not len(cnt) == len(sm) == len(sq):
        raise InvalidParameter("sums", "counts, sums and squares must have one length")
    try:
        cap = ((hi_b - lo_b) / 2) ** 2
    except OverflowError:  # bounds wider than 2^512: no finite cap (the value is clamped at 0 only)
        cap = math.inf

    def draw(rng: RandomSource) -> Outcome:
        c = cnt + c_noise.sample(len(cnt), rng)
        s = sm + s_noise.sample(len(sm), rng)
        s2 = sq + q_noise.sample(len(sq), rng)
        values = []
        for j in range(len(c)):
            cj = int(c[j])
            if cj <= 1:
                value = 0.0
            else:
                m = int(s[j]) / cj
                value = min(max((int(s2[j]) / cj - m * m) * g * g, 0.0), cap)
            values.append(value)
        return Outcome(np.array(values, dtype=np.float64), parts={"count": c, "sum": s, "squares": s2})

    return Plan(mechanism="variance_from_sums", cost=total_cost([c_noise.cost, s_noise.cost, q_noise.cost]),
                draw=draw, params={"bounds": [lo_b, hi_b], "granularity": g, "coords": len(cnt)})


def _counts(counts: Any) -> np.ndarray:
    arr = np.asarray(counts)
    if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise WrongType("counts", "a non-empty 1-D array of integer bucket counts")
    return arr.astype(np.int64)


def bucket_quantile_plan(counts: Any, level: float | Fraction, *, sensitivity: Fraction, epsilon: float) -> Plan:
    """The index of the bucket holding the ``level`` quantile, by the exponential mechanism.

    ``counts[i]`` is the exact number of values in public bucket ``i`` (buckets in increasing order). Bucket ``i``
    covers the ranks ``[a_i, b_i]`` (``b = cumsum(counts)``, ``a = b - counts``); its quality is minus the
    distance of the target rank ``level · n`` to that interval, computed exactly on the lattice of
    :mod:`dpkit.stats.order_statistics` (whose ``_exact_scores`` declares the sensitivity the lattice needs).
    ``sensitivity`` is how far one neighbour step moves the quality (``max(q, 1 - q)`` per added or removed value;
    the caller scales it by the values a neighbour step can move). Cost ``PureDP(epsilon)``; the draw is one
    exponential-mechanism selection (:func:`dpkit.mechanisms.exponential`) and returns the index."""
    arr = _counts(counts)
    sens = Fraction(sensitivity)
    if not sens > 0:
        raise InvalidParameter("sensitivity", "must be > 0")

    def draw(rng: RandomSource) -> int:
        b = np.cumsum(arr)
        a = b - arr
        n = int(b[-1])
        scores, declared = _exact_scores(a, b, Fraction(level) * n, sens)
        return int(exponential(scores, declared, epsilon, rng=rng).value)

    return Plan(mechanism="exponential", cost=PureDP(epsilon), draw=draw, sensitivity=float(sens),
                params={"level": float(level), "buckets": int(arr.size)})


def bucket_quantiles_plan(counts: Any, levels: Sequence[float], *, bounds: tuple[float, float],
                          sensitivities: Sequence[Fraction], epsilon: float) -> Plan:
    """Quantiles of values in ``len(counts)`` equal-width buckets of ``bounds``: one
    :func:`bucket_quantile_plan` per level (in order, each at ``epsilon``), each returning the midpoint of the
    chosen bucket, ``lo + (i + 1/2) (hi - lo) / k``. Cost: the exact sum of the levels' costs. The value is
    the list of quantiles (floats)."""
    arr = _counts(counts)
    lo_b, hi_b = bounds
    width = (hi_b - lo_b) / arr.size
    steps = [bucket_quantile_plan(arr, lv, sensitivity=d, epsilon=epsilon)
             for lv, d in zip(levels, sensitivities, strict=True)]

    def draw(rng: RandomSource) -> list[float]:
        return [lo_b + (int(p.sample(rng).value) + 0.5) * width for p in steps]

    return Plan(mechanism="exponential", cost=total_cost([p.cost for p in steps]), draw=draw,
                params={"levels": [float(x) for x in levels], "buckets": int(arr.size)})
