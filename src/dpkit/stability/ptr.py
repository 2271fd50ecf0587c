"""Propose-test-release (Dwork & Lei 2009): the general framework, the mean, and the IQR "Scale" algorithm.

The framework (Li et al. §8.4; Near & Abuah §8.3): the analyst *proposes* a bound ``b`` on the local
sensitivity; the mechanism *tests*, privately, that the data are far from any data set whose local
sensitivity exceeds ``b``; if so it *releases* ``f(x) + Lap(b/epsilon)``, else ``⊥`` (``None``).

Let ``D(x) = min{k : A(f, x, k) > b}`` (the distance to the nearest "unstable" data set; ``A`` is the
local sensitivity at distance ``k``, :mod:`dpkit.stability.local`). Then ``D`` has global sensitivity
1 and ``D(x) >= 1`` implies ``LS(x) <= b``. The test draws ``Z ~ DLap(1/epsilon_test)`` (exact
discrete Laplace on the *integer* distance) and **passes iff ``D + Z >= T``**, with ``T`` the smallest
integer such that ``P[Z >= T] <= delta`` (:func:`ptr_threshold`, certified in high precision).

Proof of ``(epsilon_test + epsilon_release, delta)``-DP. Fix neighbours ``x, x'`` and an event ``E``.
If ``D(x) = 0``: ``P[pass | x] = P[Z >= T] <= delta``, so ``P[M(x) ∈ E] <= delta + P[fail | x] 1[⊥ ∈ E]
<= delta + e^{epsilon_test} P[fail | x'] 1[⊥ ∈ E]``. If ``D(x) >= 1``: ``|f(x) - f(x')| <= LS(x) <= b``, so
``P[pass|x] <= e^{epsilon_test} P[pass|x']`` (sensitivity 1), the Laplace release is
``epsilon_release``-DP, and ``P[fail|x] <= e^{epsilon_test} P[fail|x']``: the ratio is
``<= e^{epsilon_test + epsilon_release}`` on every event, with no delta. ``tests/stability/test_ptr.py``
computes the exact joint law of (pass/fail, output) on small instances and checks ``delta(epsilon)``.

Errata (Near & Abuah §8.3, via Barthe et al. Fig. 10)
-----------------------------------------------------
- **Threshold.** The book prints ``⊥ if D + Lap(1/epsilon) < ln(2/delta)/(2 epsilon)``
  (:func:`book_ptr_threshold`; 10.737 for ``n = 32,561``, ``delta = 1/n²``). With ``D = 0`` it passes
  with probability ``½ exp(-ln(2/delta)/2) = sqrt(delta/8)`` (:func:`book_ptr_pass_probability`:
  ``1.09e-5`` there, 11,500 times ``delta``): not ``(epsilon, delta)``-DP. The continuous threshold
  must be ``ln(1/(2 delta))/epsilon`` (20.09 there); this module uses the exact discrete one.
- **Cost.** The book charges ``epsilon`` although the test and the release each spend ``epsilon``: the
  total is ``(epsilon_test + epsilon_release, delta)``. Here ``epsilon`` is the *total* and
  ``test_share`` (default ½) of it goes to the test. It is charged **before** the test and stays
  spent when the result is ``⊥`` (the ``Release`` then has ``value=None`` and ``parts["passed"] = False``).
- **Mean distance.** Near uses ``A(k) = u/(n - k + 1)``, which misses removals; under add/remove the
  correct bound is ``w/max(n - k, 2)`` (:mod:`dpkit.stability.local`). For Near's example (u = 100,
  b = 0.005) both give ``D = 12,562`` (the book stops at the first ``k`` with ``A >= b``; we need ``> b``).

IQR "Scale" (Li Alg 21 / Dwork & Lei 2009) is documented on :func:`ptr_iqr_scale`.

Where it loses: PTR needs the analyst to guess ``b`` (Near's ``0.005`` is "magic") and barely beats the
global-sensitivity mean (:func:`dpkit.stats.mean`), which is pure DP and needs no guess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import ApproxDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run
from dpkit.noise.source import RandomSource
from dpkit.stability import _util

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = [
    "book_ptr_mean_distance",
    "book_ptr_pass_probability",
    "book_ptr_threshold",
    "propose_test_release",
    "ptr_iqr_scale",
    "ptr_mean",
    "ptr_mean_distance",
    "ptr_threshold",
]

_TAIL_UNITS = 40  # the distance is capped at T + 40 t (a pass probability of 1 - e^-40/2 there)


# ---------------------------------------------------------------------------------------------
# thresholds: the correct one, and the book's (reproduction only)
# ---------------------------------------------------------------------------------------------


def _test_scale(epsilon_test: float) -> float:
    from dpkit.mechanisms import discrete_laplace_scale

    return discrete_laplace_scale(1, epsilon_test)


def ptr_threshold(epsilon_test: float, delta: float) -> int:
    """The integer threshold ``T`` of the PTR test: the smallest ``T >= 1`` with ``P[Z >= T] <= delta``,
    ``Z ~ DLap(t)``, ``t = 1/epsilon_test`` (as the smallest float >= it); the test passes iff
    ``D + Z >= T``. Computed from ``P[Z >= T] = q^T/(1+q)``, ``q = e^{-1/t}``, certified in 80-digit
    arithmetic.

    >>> n = 32561
    >>> ptr_threshold(1.0, 1.0 / n**2)   # continuous analogue ln(1/(2 delta)) = 20.09; the book: 10.737
    21
    """
    eps = check.epsilon(epsilon_test, "epsilon_test")
    dlt = _util.approx_delta(delta)
    return _util.dlap_threshold(_test_scale(eps), dlt)


def book_ptr_threshold(epsilon: float, delta: float) -> float:
    """Near & Abuah's printed PTR threshold ``ln(2/delta)/(2 epsilon)`` (**wrong**; reproduction only).

    >>> n = 32561
    >>> book_ptr_threshold(1.0, 1.0 / n**2)
    10.73744412245554
    """
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    return math.log(2.0 / dlt) / (2.0 * eps)


def book_ptr_pass_probability(epsilon: float, delta: float) -> float:
    """``P[0 + Lap(1/epsilon) >= book threshold] = ½ exp(-ln(2/delta)/2) = sqrt(delta/8)``: the chance
    that the book's test passes on an unstable data set (it must be ``<= delta``; it is not).

    >>> n = 32561
    >>> p = book_ptr_pass_probability(1.0, 1.0 / n**2)
    >>> round(p, 10), p > 10_000 / n**2
    (1.08582e-05, True)
    """
    eps = check.epsilon(epsilon)
    return 0.5 * math.exp(-eps * book_ptr_threshold(eps, delta))


@check.numeric_guard("bound")
def book_ptr_mean_distance(n: int, upper: float, bound: float) -> int:
    """Near & Abuah's ``dist_to_high_ls``: the first ``k`` with ``u/(n - k + 1) >= b`` (reproduction only).

    >>> book_ptr_mean_distance(32561, 100.0, 0.005)
    12562
    """
    n = check.integer("n", n, minimum=0)
    u = check.positive("upper", upper)
    b = check.positive("bound", bound)

    def high(k: int) -> bool:  # the book's float test, ``ls_at_distance(k) >= b``
        return k > n or abs(u / (n - k + 1)) >= b

    k = max(0, n + 1 - math.floor(u / b))  # u/(n-k+1) >= b <=> n-k+1 <= u/b, up to float rounding
    while k > 0 and high(k - 1):
        k -= 1
    while not high(k):
        k += 1
    return k


# ---------------------------------------------------------------------------------------------
# the general framework
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    eps_test: float
    eps_release: float
    t: float  # test noise scale (lattice units = distance units)
    threshold: int
    cap: int


def _plan(epsilon: Any, delta: Any, test_share: Any, test_delta: float | None = None,
          parts: tuple[float, ...] | None = None) -> _Plan:
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    s = _util.share("test_share", test_share)
    if parts is None:
        eps_t, eps_r = _exact.split_budget(eps, (s, 1.0 - s), name="test_share", total_name="epsilon")
    else:
        eps_t, eps_r = parts
    t = _test_scale(eps_t)
    threshold = _util.dlap_threshold(t, dlt if test_delta is None else test_delta)
    cap = threshold + math.ceil(_TAIL_UNITS * t) + 1
    return _Plan(eps_t, eps_r, t, threshold, cap)


def _distance(name: str, value: Any) -> float:
    """A non-negative integer distance, or ``math.inf``."""
    if isinstance(value, float) and value == math.inf:
        return math.inf
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise WrongType(name, "a non-negative integer (or math.inf)")
    if int(value) < 0:
        raise InvalidParameter(name, "must be >= 0")
    return int(value)


def _test(plan: _Plan, distance: float, rng: RandomSource) -> tuple[bool, int]:
    """One PTR test: ``(passed, noisy capped distance)``: the geometric mechanism on the capped distance
    (sensitivity 1, ``epsilon_test``: exact discrete Laplace noise of scale ``plan.t``), drawn without a charge
    (inside a plan whose cost covers it)."""
    from dpkit.mechanisms import discrete_laplace_plan

    d = plan.cap if distance >= plan.cap else int(distance)
    noisy = int(discrete_laplace_plan(d, 1, plan.eps_test).sample(rng).value)
    return noisy >= plan.threshold, noisy


def _release_value(f_value: float, sensitivity: float, eps: float, rng: RandomSource) -> tuple[float, Plan]:
    """The Laplace release of ``f_value`` (drawn without a charge, inside a plan whose cost covers it) and its
    plan (for the release's scale, noise law and granularity)."""
    from dpkit.mechanisms import laplace_plan

    step = laplace_plan(f_value, sensitivity, eps)
    return step.sample(rng).value, step


def propose_test_release(f_value: float, distance: int | float, bound: float, epsilon: float, delta: float, *,
                         test_share: float = 0.5, neighbours: Neighbours | None = None,
                         accountant: Accountant | None = None, rng: RandomSource | None = None,
                         description: str = "") -> Release:
    """Propose-test-release for a caller-computed statistic: (epsilon, delta)-DP **given the caller's promise**.

    Parameters
    ----------
    f_value:
        The private ``f(x)`` (a finite real).
    distance:
        The private ``D(f, x, bound)`` = the number of neighbour steps from ``x`` to the nearest data set with
        local sensitivity ``> bound`` (an integer ``>= 0``, or ``math.inf`` if none exists). **The caller
        promises** (dpkit cannot check it) that ``D`` has global sensitivity 1 and ``D(x) >= 1`` implies
        ``|f(x) - f(x')| <= bound`` for every neighbour ``x'``, under the neighbour relation in force
        (``neighbours`` / the accountant's). :func:`ptr_mean` and :func:`ptr_iqr_scale` are instances with
        proven ``D``.
    bound:
        The proposed bound ``b`` (> 0) on the local sensitivity: the sensitivity of the Laplace release.
    epsilon, delta:
        The total privacy parameters (``epsilon > 0``, ``delta`` in (0, 1)).
    test_share:
        The share of ``epsilon`` spent on the test, in (0, 1) (default ½); the rest goes to the release.
    neighbours, accountant, rng, description:
        The neighbour relation (default: the accountant's, else add/remove one record), the accountant
        charged (or ``None``), the random source (default: the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    ``(epsilon, delta)``-DP, ``epsilon = epsilon_test + epsilon_release`` with ``epsilon_test = test_share *
    epsilon``, under the neighbour relation in force, given the caller's promise. Proof (module docstring): an
    unstable data set (``D = 0``) passes with probability ``P[Z >= T] <= delta``; otherwise the test (sensitivity
    1) and the release (sensitivity ``bound``) compose to ``epsilon_test + epsilon_release``.

    Cost
    ----
    ``ApproxDP(epsilon, delta)``, charged once, **before** the test; it stays spent when the result is ``⊥``.

    Output law
    ----------
    The test draws ``Z ~ DLap(t)``, ``t`` the smallest float ``>= 1/epsilon_test`` (exact discrete Laplace,
    :func:`dpkit.mechanisms.discrete_laplace` on the distance capped at ``threshold + 40 t``) and passes iff
    ``D + Z >= T`` (:func:`ptr_threshold`). ``Release.value`` is ``f + Lap(bound/epsilon_release)`` (exact
    lattice Laplace, :func:`dpkit.mechanisms.laplace`) if the test passed, else ``None`` (``⊥``); ``parts`` has
    ``passed``, the released ``noisy_distance`` (capped at ``threshold + 40 t``) and ``threshold``.

    Error
    -----
    When it passes: that of the Laplace mechanism of scale ``bound/epsilon_release`` (``Release.interval``, from
    ``Release.scale`` and the lattice). On ``⊥`` there is no value.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = propose_test_release(3.0, 500, 0.1, 1.0, 1e-6, rng=deterministic_source(1))
    >>> r.parts["passed"], abs(r.value - 3.0) < 2.0, r.cost
    (True, True, ApproxDP(epsilon=1.0, delta=1e-06))
    >>> propose_test_release(3.0, 0, 0.1, 1.0, 1e-6, rng=deterministic_source(1)).value is None
    True
    """
    plan = _propose_test_release_plan(f_value, distance, bound, epsilon, delta, test_share, neighbours,
                                              accountant)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _propose_test_release_plan(f_value: Any, distance: Any, bound: Any, epsilon: Any, delta: Any, test_share: Any,
                               neighbours: Neighbours | None,
                               accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`propose_test_release` (nothing drawn or charged); its outcome's ``fields``
    carry the release's scale, noise law and granularity."""
    nb = resolve_neighbours(neighbours, accountant)
    f = check.real("f_value", f_value)
    dist = _distance("distance", distance)
    b = check.positive("bound", bound)
    plan = _plan(epsilon, delta, test_share)
    from dpkit.mechanisms import laplace_scale

    laplace_scale(b, plan.eps_release)  # refuse an unusable scale before charging
    eps, dlt = float(epsilon), float(delta)
    params = {"epsilon": eps, "delta": dlt, "bound": b, "test_share": float(test_share),
              "epsilon_test": plan.eps_test, "epsilon_release": plan.eps_release, "threshold": plan.threshold,
              "neighbours": nb.describe()}
    return _ptr_plan("propose_test_release", plan, f, dist, b, ApproxDP(eps, dlt), params, nb)


def _ptr_plan(mechanism: str, plan: _Plan, f: float, dist: float, sensitivity: float, cost: ApproxDP,
              params: dict[str, Any], nb: Neighbours) -> Plan:
    """The one PTR plan: cost ``cost`` (charged before the test, kept on ``⊥``); draw the test, then, if it
    passed, the Laplace release. The outcome's ``fields`` carry the release's scale, noise law and granularity."""
    from dpkit.mechanisms import laplace_scale

    def draw(rng: RandomSource) -> Outcome:
        passed, noisy = _test(plan, dist, rng)
        parts: dict[str, Any] = {"passed": passed, "noisy_distance": noisy, "threshold": plan.threshold}
        g, scale = laplace_scale(sensitivity, plan.eps_release)
        if not passed:
            return Outcome(None, parts=parts, fields={"scale": scale, "noise": None, "granularity": g})
        value, step = _release_value(f, sensitivity, plan.eps_release, rng)
        return Outcome(value, parts=parts,
                       fields={"scale": step.scale, "noise": step.noise, "granularity": step.granularity})

    return Plan(mechanism=mechanism, cost=cost, draw=draw, params=params, neighbours=nb)


# ---------------------------------------------------------------------------------------------
# the mean
# ---------------------------------------------------------------------------------------------


def _mean_distance(n: int, lo: float, hi: float, b: float, replace: bool) -> float:
    """``D = min{k : Â(x, k) > b}`` for the clamped mean (exact rationals; ``inf`` if never)."""
    w = Fraction(hi) - Fraction(lo)
    fb = Fraction(b)
    if replace:  # Â = w/n, constant (n public)
        return math.inf if n == 0 or w / n <= fb else 0
    if w / 2 <= fb:
        return math.inf
    c = math.ceil(w / fb) - 1  # the largest integer c with c b < w; c >= 2 here
    return max(0, n - c)


def ptr_mean_distance(values: ArrayLike, upper: float, bound: float, *, lower: float = 0.0,
                      neighbours: Neighbours | None = None, nan_policy: str = "raise") -> float:
    """**NOT PRIVATE -- never release this number.** ``D(mean, x, bound)`` for values clamped to
    ``[lower, upper]``: ``max(0, n - c)`` with ``c`` the largest integer with ``c * bound < w``
    (add/remove; ``inf`` when ``w/2 <= bound``); under replace ``0`` or ``inf``.

    >>> ptr_mean_distance([30.0] * 32561, 100.0, 0.005)   # Near's example size: D = 12,562
    12562
    """
    nb = _util.relation(neighbours, None, "ptr_mean_distance")
    xs, lo, hi = _util.sorted_clipped(values, (lower, upper), nan_policy)
    b = check.positive("bound", bound)
    return _mean_distance(xs.size, lo, hi, b, is_replace(nb))


def ptr_mean(values: ArrayLike, upper: float, bound: float, epsilon: float, delta: float, *, lower: float = 0.0,
             test_share: float = 0.5, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
             rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """PTR mean (Near & Abuah §8.3): values clamped to ``[lower, upper]``, proposed bound ``bound`` on the
    local sensitivity of the mean; (epsilon, delta)-DP.

    Parameters
    ----------
    values:
        The private data (1-D, real); clamped into ``[lower, upper]``. The mean of an empty sample is the
        midpoint.
    upper, lower:
        The public clamping bounds (``lower`` defaults to 0).
    bound:
        The proposed bound ``b`` (> 0) on the local sensitivity of the mean.
    epsilon, delta:
        The total privacy parameters.
    test_share:
        The share of ``epsilon`` spent on the test (default ½).
    neighbours, accountant, rng, nan_policy, description:
        The neighbour relation (add/remove one record by default, or replace one; privacy units are refused),
        the accountant charged, the random source, the missing-value policy, the receipt's note.

    Guarantee
    ---------
    ``(epsilon, delta)``-DP under add/remove (default) or replace one record: :func:`propose_test_release` with
    a proven distance. Distance (add/remove, derived in :mod:`dpkit.stability.local`): ``Â(x, k) = w / max(n -
    k, 2)``, so ``D = max(0, n - c)`` with ``c`` the largest integer with ``c * bound < w`` (``inf`` if ``w/2 <=
    bound``: then no data set is unstable). Under replace ``n`` is public and ``LS = w/n``.

    Cost
    ----
    ``ApproxDP(epsilon, delta)`` charged once before the test, also when the result is ``⊥`` (``value=None``);
    ``epsilon`` is split ``test_share`` : rest between the test and the release (the book charges only one of
    them: erratum, see the module docstring).

    Output law
    ----------
    That of :func:`propose_test_release` with ``f`` the clamped mean (``math.fsum``) and the release's sensitivity
    ``bound`` plus twice the float error of the mean (``4 · 2^-48 max(|lower|, |upper|)``, rounded up).

    Error
    -----
    When it passes: ``Lap(bound/epsilon_release)`` on the lattice (``Release.interval``) around the clamped mean
    (clamping bias comes on top). PTR barely beats the global-sensitivity mean (:func:`dpkit.stats.mean`).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = ptr_mean([40.0] * 5000, 100.0, 0.05, 1.0, 1e-6, rng=deterministic_source(2))
    >>> r.parts["passed"], abs(r.value - 40.0) < 1.0
    (True, True)
    """
    plan = _ptr_mean_plan(values, upper, bound, epsilon, delta, lower, test_share, neighbours, accountant,
                                  nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _ptr_mean_plan(values: Any, upper: Any, bound: Any, epsilon: Any, delta: Any, lower: Any, test_share: Any,
                   neighbours: Neighbours | None, accountant: Accountant | None,
                   nan_policy: Any) -> Plan:
    """The validated plan of :func:`ptr_mean` (nothing drawn or charged)."""
    nb = _util.relation(neighbours, accountant, "ptr_mean")
    lower = check.real("lower", lower)
    upper = check.real("upper", upper)
    xs, lo, hi = _util.sorted_clipped(values, (lower, upper), nan_policy)
    b = check.positive("bound", bound)
    plan = _plan(epsilon, delta, test_share)
    # the float mean is within 2^-50 max(|lo|, |hi|) of the exact one: add twice that to the bound
    sens = _exact.up(b + 4.0 * _util.FLOAT_SLACK * _util.magnitude(lo, hi))
    from dpkit.mechanisms import laplace_scale

    laplace_scale(sens, plan.eps_release)
    eps, dlt = float(epsilon), float(delta)
    params = {"epsilon": eps, "delta": dlt, "bounds": (lo, hi), "bound": b, "test_share": float(test_share),
              "epsilon_test": plan.eps_test, "epsilon_release": plan.eps_release, "threshold": plan.threshold,
              "neighbours": nb.describe()}
    dist = _mean_distance(xs.size, lo, hi, b, is_replace(nb))
    f = _util.mean_value(xs, lo, hi)
    return _ptr_plan("ptr_mean", plan, f, dist, sens, ApproxDP(eps, dlt), params, nb)


# ---------------------------------------------------------------------------------------------
# Dwork & Lei's Scale algorithm (IQR)
# ---------------------------------------------------------------------------------------------

_SQRT2 = math.sqrt(2.0)  # a fixed float: the second grid's boundaries are exactly _SQRT2 * 2^a


def _quartile_ranks(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return -np.floor_divide(-m, 4), -np.floor_divide(-3 * m, 4)  # ceil(m/4), ceil(3m/4)


def iqr_value(xs: np.ndarray) -> float:
    """``x_(ceil(3n/4)) - x_(ceil(n/4))`` of sorted data (0 for an empty sample)."""
    n = xs.size
    if n == 0:
        return 0.0
    r1, r3 = _quartile_ranks(np.array([n]))
    return float(xs[int(r3[0]) - 1] - xs[int(r1[0]) - 1])


def _padded_inf(xs: np.ndarray, idx: np.ndarray) -> np.ndarray:
    n = xs.size
    if n == 0:
        return np.where(idx < 1, -np.inf, np.inf)
    inner = xs[np.clip(idx - 1, 0, n - 1)]
    return np.where(idx < 1, -np.inf, np.where(idx > n, np.inf, inner))


def _iqr_level(xs: np.ndarray, d: int, replace: bool) -> tuple[float, float]:
    """``(min low, max up)`` over the pairs ``(a, b)`` of level ``d`` (``a + b = d``; ``a = b = d`` under replace).

    ``a`` removals and ``b`` additions give ``y_(r) ∈ [x_(r-b), x_(r+a)]`` (padded with ∓inf), so the IQR
    of ``y`` (size ``m = n - a + b``, quartile ranks ``r1 = ceil(m/4)``, ``r3 = ceil(3m/4)``) lies in
    ``[low, up] = [max(0, x_(r3-b) - x_(r1+a)), x_(r3+a) - x_(r1-b)]`` (0 for ``m = 0``).
    """
    n = xs.size
    if replace:
        a = np.array([d], dtype=np.int64)
        b = a.copy()
    else:
        a = np.arange(0, min(d, n) + 1, dtype=np.int64)
        b = d - a
    m = n - a + b
    r1, r3 = _quartile_ranks(m)
    with np.errstate(invalid="ignore"):
        up = _padded_inf(xs, r3 + a) - _padded_inf(xs, r1 - b)
        low = np.maximum(0.0, _padded_inf(xs, r3 - b) - _padded_inf(xs, r1 + a))
    empty = m == 0
    up = np.where(empty, 0.0, up)
    low = np.where(empty, 0.0, low)
    return float(np.min(low)), float(np.max(up))


def _iqr_reach(xs: np.ndarray, dmax: int, replace: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(Smin[d], Smax[d])`` for ``d = 0..dmax``: bounds on the IQR of every data set within ``d`` steps.

    Each pair of level ``d`` is dominated by a pair of level ``d + 1`` (raising ``b`` by one moves every
    rank in the formulas of :func:`_iqr_level` outwards), so the level bounds are already monotone in ``d``
    and ``Smin(d) = level_min(d)``, ``Smax(d) = level_max(d)``. They satisfy ``Smax(x, d) <= Smax(x', d+1)``
    and ``Smin(x, d) >= Smin(x', d+1)`` for neighbours (shift ``a`` or ``b`` by one; the ranks depend on
    ``m`` only). The accumulations below only guard the monotonicity against float corner cases.
    """
    levels = [_iqr_level(xs, d, replace) for d in range(dmax + 1)]
    smin = np.minimum.accumulate(np.array([lv[0] for lv in levels]))
    smax = np.maximum.accumulate(np.array([lv[1] for lv in levels]))
    return smin, smax


def _bucket(s: float, c: float) -> tuple[str, int]:
    """The bucket of ``s >= 0`` in the grid ``[c 2^a, c 2^{a+1})``: ``("zero", 0)``, ``("inf", 0)`` or ``("a", a)``."""
    if s == 0.0:
        return ("zero", 0)
    if s == math.inf:
        return ("inf", 0)
    a = math.floor(math.log2(s / c))
    while math.ldexp(c, a) > s:
        a -= 1
    while math.ldexp(c, a + 1) <= s:
        a += 1
    return ("a", a)


def _scale_distance(xs: np.ndarray, c: float, cap: int, replace: bool) -> int:
    """``D_j(x) = min{k >= 0 : some data set within k + 1 steps has its IQR in another bucket}``, capped.

    Sensitivity 1 and ``D_j >= 1`` => every neighbour's IQR is in the same bucket (see :func:`ptr_iqr_scale`).
    "Some data set within ``d`` steps leaves the bucket" is monotone in ``d`` (:func:`_iqr_reach`), so the
    first such ``d`` is found by exponential then binary search (``O(D log D)`` work; ``D <= n + 1``:
    removing every record gives IQR 0, and ``n/3 + 1`` far additions make it infinite).
    """
    s = iqr_value(xs)
    kind, a = _bucket(s, c)

    def change(d: int) -> bool:
        low, up = _iqr_level(xs, d, replace)
        if kind == "zero":
            return up > 0.0
        if kind == "inf":
            return low < math.inf
        return up >= math.ldexp(c, a + 1) or low < math.ldexp(c, a)

    limit = cap + 1
    hi = 1
    while hi < limit and not change(hi):
        hi = min(limit, 2 * hi)
    if not change(hi):
        return cap
    lo = hi // 2 + 1 if hi > 1 else 1  # change(hi // 2) is False (or hi == 1)
    return int(min(cap, _exact.first_true(change, lo, hi) - 1))


def ptr_iqr_scale(values: ArrayLike, epsilon: float, delta: float, *, test_share: float = 0.5,
                  neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                  rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """Dwork & Lei's "Scale" algorithm (Li et al. Alg 21): the interquartile range up to a factor, by PTR.

    No bounds are needed: the IQR ``s(x) = x_(ceil(3n/4)) - x_(ceil(n/4))`` is released on a log2 scale.

    Parameters
    ----------
    values:
        The private data (1-D, real).
    epsilon, delta:
        The total privacy parameters.
    test_share:
        The share of ``epsilon`` split between the two tests (default ½); the rest goes to the release.
    neighbours, accountant, rng, nan_policy, description:
        Record-level add/remove (default) or replace; privacy units are refused. The accountant charged, the
        random source, the missing-value policy, the receipt's note.

    Guarantee
    ---------
    ``(2 epsilon_test + epsilon_release, delta)``-DP (``epsilon`` is the total: ``test_share`` of it is split
    between the two tests, the rest goes to the release). Proof: ``D_j >= 1`` implies every neighbour's IQR is
    in the same bucket, so ``|log2 s(x) - log2 s(x')| < 1`` and the release (lattice Laplace on ``log2 s`` with
    sensitivity 1, then ``2^.``) is ``epsilon_release``-DP. The output is s^(1) (prob ratio ``<= e^{epsilon_test
    + epsilon_release}``), or ⊥-then-s^(2) (``<= e^{2 epsilon_test + epsilon_release}``), or ⊥⊥ (``<= e^{2
    epsilon_test}``); an unstable grid (``D_j = 0``) passes with probability ``<= delta/2`` and enters with a
    factor ``P[fail_1] <= 1``, so the two add to ``delta``. Li et al. (and Dwork & Lei) state ``(4 epsilon,
    delta)`` with ``epsilon`` per step: valid but loose (two full PTRs); the same parameters give ``(3 epsilon,
    delta)`` here.

    Cost
    ----
    ``ApproxDP(epsilon, delta)``, charged once before the tests; it stays spent when the result is ``⊥``.

    Output law
    ----------
    For grid ``j`` (``c_1 = 1``, ``c_2 = sqrt 2``: buckets ``[c_j 2^a, c_j 2^{a+1})``, plus a bucket for ``s =
    0``), ``D_j(x)`` is (one less than) the number of add/remove steps needed to move the IQR to another bucket
    (computed from certified order-statistic bounds, capped; sensitivity 1). Then::

        for j in (1, 2):
            if D_j + Z_j >= T (Z_j ~ DLap(1/epsilon_test), T: P[Z >= T] <= delta/2): return s 2^{Lap(1/epsilon_release)}
        return ⊥ (None)

    with exact discrete Laplace test noise and exact lattice Laplace noise on ``log2 s`` (sensitivity ``1 +
    2^-30``); ``s = 0`` (or ``inf``) is released as is. ``parts``: ``passed``, ``grid``, ``noisy_distance``,
    ``threshold``, ``log2_value``.

    Error
    -----
    When it passes: ``value / s ∈ [2^{-h}, 2^{h}]`` with ``h`` the Laplace half-width of the release on the log2
    scale (``parts["log2_value"]``); ``Release.interval`` returns ``(value 2^{-h}, value 2^{h})``, which
    contains the IQR with the stated confidence. On ``⊥`` there is no value.

    Errata
    ------
    **Li Alg 21:** the printed test ``R_0 <= 1 + ln(1/epsilon)`` should read ``1 + ln(1/delta)/epsilon``
    (Dwork–Lei's ``A_0 = D + 1``; ``P[Lap(1/epsilon) > ln(1/delta)/epsilon] = delta/2`` per grid); with
    ``ln(1/epsilon)`` the test does not depend on ``delta`` at all and is passed by unstable data with constant
    probability. Here the exact discrete threshold is used.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> import numpy as np
    >>> x = np.arange(2000.0)   # IQR = 1000
    >>> r = ptr_iqr_scale(x, 3.0, 1e-6, rng=deterministic_source(5))
    >>> r.parts["passed"], 250 < r.value < 4000
    (True, True)
    """
    plan = _ptr_iqr_scale_plan(values, epsilon, delta, test_share, neighbours, accountant, nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _ptr_iqr_scale_plan(values: Any, epsilon: Any, delta: Any, test_share: Any, neighbours: Neighbours | None,
                        accountant: Accountant | None, nan_policy: Any) -> Plan:
    """The validated plan of :func:`ptr_iqr_scale` (nothing drawn or charged)."""
    nb = _util.relation(neighbours, accountant, "ptr_iqr_scale")
    arr = check.real_data(values, nan_policy=nan_policy)
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    s = _util.share("test_share", test_share)
    eps_t1, eps_t2, eps_r = _exact.split_budget(eps, (s / 2.0, s / 2.0, 1.0 - s),
                                                name="test_share", total_name="epsilon")
    plan = _plan(eps, dlt, s, test_delta=dlt / 2.0, parts=(min(eps_t1, eps_t2), eps_r))
    sens = 1.0 + 2.0**-30  # |log2 s - log2 s'| < 1 exactly; float log2 error < 2^-40
    from dpkit.mechanisms import laplace_scale

    laplace_scale(sens, plan.eps_release)
    params = {"epsilon": eps, "delta": dlt, "test_share": s, "epsilon_test": plan.eps_test,
              "epsilon_release": plan.eps_release, "threshold": plan.threshold, "neighbours": nb.describe()}
    xs = np.sort(arr)
    replace = is_replace(nb)
    iqr = iqr_value(xs)
    dists = [_scale_distance(xs, c, plan.cap, replace) for c in (1.0, _SQRT2)]
    cost = ApproxDP(eps, dlt)

    def draw(rng: RandomSource) -> Outcome:
        noisy: list[int] = []
        for grid, dist in enumerate(dists):
            passed, nd = _test(plan, dist, rng)
            noisy.append(nd)
            if passed:
                return _scale_release(iqr, sens, plan, grid + 1, noisy, rng)
        g, scale = laplace_scale(sens, plan.eps_release)
        parts = {"passed": False, "grid": None, "noisy_distance": tuple(noisy), "threshold": plan.threshold}
        return Outcome(None, parts=parts, fields={"scale": scale, "noise": None, "granularity": g})

    return Plan(mechanism="ptr_iqr_scale", cost=cost, draw=draw, params=params, neighbours=nb)


def _scale_release(iqr: float, sens: float, plan: _Plan, grid: int, noisy: list[int], rng: RandomSource) -> Outcome:
    from dpkit.mechanisms import laplace_scale

    g, scale = laplace_scale(sens, plan.eps_release)
    fields = {"scale": scale, "noise": None, "granularity": g}
    if iqr == 0.0 or iqr == math.inf:
        log_value: float | None = None
        value = iqr  # every neighbour has the same (degenerate) IQR: a deterministic release
    else:
        lv, _step = _release_value(math.log2(iqr), sens, plan.eps_release, rng)
        log_value = float(lv)
        value = float(2.0**log_value)
    parts = {"passed": True, "grid": grid, "noisy_distance": tuple(noisy), "threshold": plan.threshold,
             "log2_value": log_value}

    def interval(confidence: float) -> tuple[float, float]:
        from dpkit.mechanisms import accuracy

        if log_value is None:
            return value, value
        h = accuracy.laplace_halfwidth(scale, confidence, granularity=g)
        return float(2.0 ** (log_value - h) * (1 - 2.0**-50)), float(2.0 ** (log_value + h) * (1 + 2.0**-50))

    return Outcome(value, parts=parts, interval_fn=interval, fields=fields)
