"""Non-interactive top-k selection: ``k`` rounds of the exponential mechanism without replacement.

This is the method Lyu, Su & Li (2017, §5) recommend instead of the sparse vector technique when all
the scores are known in advance ("select the ``c`` queries with the largest answers"): run the
exponential mechanism ``k`` times with budget ``epsilon / k`` each, removing each selected candidate
from the pool. Round ``r`` selects candidate ``i`` among the remaining ones ``R_r`` with

    P[i] = exp(epsilon q_i / (2 k Δ)) / Σ_{j in R_r} exp(epsilon q_j / (2 k Δ))

(``exp(epsilon q_i / (k Δ))`` when the caller declares the scores monotonic). Erratum vs the seed:
the paper prints the weight as ``exp(ε / (2cΔ))``, omitting the score ``q``.

Guarantee
---------
Pure ``epsilon``-DP for the whole ordered selection, w.r.t. the neighbour relation under which
``sensitivity`` ``Δ`` bounds ``|q_i(D) - q_i(D')|`` for every candidate: each round is an
``(epsilon/k)``-DP exponential mechanism over a candidate set fixed by the earlier (public) outputs, and
``k`` adaptively chosen ``(epsilon/k)``-DP steps compose to ``epsilon``. ``monotonic=True`` is the
further promise that between any two neighbours all scores move in the same direction (item counts
under add/remove one transaction); it halves the exponent's denominator in every round (Li et al. 2016,
Cor 2.19). A false promise voids the guarantee (loss up to ``2 epsilon``; the tests show it exceeds
``epsilon``). The cost ``PureDP(epsilon)`` is charged once, before any random bit is drawn.

Exact law (what is sampled)
---------------------------
As in :func:`dpkit.mechanisms.exponential` (same code, :class:`dpkit.mechanisms.selection.SelectionLaw`):
scores are rounded to the lattice ``g Z``, ``g = lattice_granularity(Δ)``; the rounded scores ``u_i``
have integer sensitivity ``Δu = floor(Δ/g) + 1`` (monotonic when ``q`` is); ``n_i = max_j u_j - u_i``
are exact integers and ``κ = epsilon / (factor · k · Δu)`` (``factor`` 2, or 1 monotonic) is rounded
**down** to ``M 2^E`` (32 significant bits). With weights ``w_i = exp(-κ n_i)`` the output
``(y_1, ..., y_k)`` has exactly the law

    P[y_1, ..., y_k] = Π_r  w_{y_r} / Σ_{j not in {y_1..y_{r-1}}} w_j,

i.e. per round the exponential mechanism with parameter ``κ' <= epsilon / (factor k Δu)`` on the
remaining candidates (a re-based gap ``n_i - min_{R} n_j`` only rescales all weights of a round by the
same factor). Hence each round is at most ``(epsilon/k)``-DP exactly as for ``exponential``.

How it is sampled: the exponential race (one shot, exact)
--------------------------------------------------------
Give each candidate an independent ``E_i ~ Exp(1)`` and let it "finish" at time ``E_i / w_i``. The
first finisher is ``i`` with probability ``w_i / Σ w_j``, and by memorylessness the race among the
others starts afresh, so **the order of the first ``k`` finishers has exactly the law above**
(Plackett–Luce; this is the Gumbel-top-k / "one-shot peeling" equivalence of Durfee & Rogers 2019,
since ``-ln E_i`` is standard Gumbel). Finishing order = increasing order of the keys

    K_i = κ n_i + ln(-ln U_i),      U_i uniform on (0, 1),  E_i = -ln U_i.

dpkit never decides the order on a rounded key. ``U_i`` is drawn lazily: 53 random bits first, so
``U_i`` lies in a known interval and, ``ln(-ln u)`` being decreasing, ``K_i`` lies in an interval whose
ends are computed in float64 (``-ln u`` through ``log`` for ``u <= 1/2`` and ``log1p(-(1-u))`` above,
where ``1-u`` is exact; ``κ n_i`` as one rounded product) and widened by a margin ``2^-40 (κ n_i +
|ln(-ln u)| + 1)``, far above the ~``2^-48`` worst error of these few IEEE operations and a libm
within hundreds of ulps. The order is accepted only when it is *certified* by the intervals: the
``k`` first intervals (sorted by lower end) are pairwise disjoint and all lie below every other
candidate's interval. Candidates in an overlap (probability ~``2^-40`` per pair) get 64 more random
bits of ``U_i`` and their key intervals are recomputed with rigorous interval arithmetic in
:mod:`decimal` (:class:`dpkit.noise.samplers._Arith`, exact ``κ n_i`` as a rational), repeated until
certified (terminates with probability one; keys are distinct almost surely). The output is thus a
deterministic function of the exact uniforms: exactly the race's law. Cost: one 64-bit word and a
few vectorised ``log`` calls per candidate, i.e. milliseconds for ``k = 300`` rounds over 16,470
candidates. A sequential reference construction (re-building the exponential-mechanism law on the
remaining candidates each round, :func:`_sequential_top_k`) is kept for the tests, which check both
samplers against the exact law above.

Accuracy
--------
With probability ``>= 1 - beta``, every round ``r`` selects a candidate whose score is at least the
``r``-th largest score minus ``alpha = (factor k Δ / epsilon) ln(n k / beta)`` (up to the lattice
rounding, ``<= 2^-19 Δ``): in round ``r`` at most ``r - 1`` candidates are gone, so the best remaining
score is ``>=`` the ``r``-th largest, and the exponential-mechanism tail bound is applied to each round
with ``beta / k`` (:func:`dpkit.mechanisms.exponential_utility_bound`). ``Release.params["alpha_95"]``
is this ``alpha`` for ``beta = 0.05``.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.mechanisms._release import Release, check_bool
from dpkit.mechanisms.contract import Plan, run
from dpkit.mechanisms.selection import SelectionLaw, sample_exponential
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = ["exponential_top_k", "exponential_top_k_plan"]

# Relative margin of the float key intervals (module docstring). Private hook: tests set it to a huge
# value to send every candidate through the exact refinement path.
_MARGIN = 2.0**-40
_WORD_BITS = 53  # bits of U_i used by the float path (u = a 2^-53 and 1 - u are exact floats)
_HUGE_KEY = 1.0e308  # a lower bound for the key of a candidate whose float κ n_i overflowed


# ---------------------------------------------------------------------------------------------
# the exponential race
# ---------------------------------------------------------------------------------------------
class _RaceLaw(SelectionLaw):
    """:class:`SelectionLaw` (lattice rounding, exact integer gaps ``n_i``, κ = ``M 2^E`` rounded down) without the
    Bernoulli limbs, which the race does not use (they cost a Python loop when gaps exceed 2^31)."""

    def _limbs(self) -> np.ndarray:
        return np.empty((int(self.u.size), 0), dtype=np.float64)


def _h(u: np.ndarray) -> np.ndarray:
    """Float ``ln(-ln u)`` for exact floats ``u`` in [0, 1] (``+inf`` at 0, ``-inf`` at 1)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(u <= 0.5, -np.log(u), -np.log1p(-(1.0 - u)))
        return np.log(t)


def _gamma_float(law: SelectionLaw) -> np.ndarray:
    """Float approximations of ``κ n_i`` (relative error <= 2^-51; ``inf`` beyond the float range)."""
    if isinstance(law.gaps, np.ndarray):
        gaps = law.gaps.astype(np.float64)
    else:
        gaps = np.array([float(n) for n in law.gaps], dtype=np.float64)
    with np.errstate(over="ignore"):
        return gaps * law.kappa


def _gamma_exact(law: SelectionLaw, i: int) -> Fraction:
    return Fraction(int(law.gaps[i]) * law.M) * Fraction(2) ** law.E


def _exact_bounds(gamma: Fraction, num: int, nbits: int) -> tuple[Any, Any]:
    """Rigorous (lo, hi) of ``γ + ln(-ln U)`` for ``U`` in ``[num, num + 1] / 2^nbits`` (Decimal or ±inf)."""
    from dpkit.noise.samplers import Undecided, arith, prec_for

    digits = max(0, len(str(abs(gamma.numerator) // gamma.denominator)))
    ar = arith(prec_for(nbits) + digits)
    g = ar.const(gamma)

    def h_at(x: Fraction, side: int) -> Any:
        # side 0: a lower bound of ln(-ln x); side 1: an upper bound
        if x == 0:
            return Decimal("Infinity") if side else Decimal("-Infinity")
        if x == 1:
            return Decimal("-Infinity")
        try:
            val = ar.ln(ar.neg(ar.ln(ar.const(x))))
        except Undecided:
            return Decimal("-Infinity") if side == 0 else Decimal("Infinity")
        return ar.add(g, val)[side]

    den = 1 << nbits
    lo = h_at(Fraction(num + 1, den), 0)  # h is decreasing: the upper end of U gives the lower key
    hi = h_at(Fraction(num, den), 1)
    return lo, hi


def _float_bounds(gam: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float enclosures ``lo <= κ n_i + ln(-ln U_i) <= hi`` for ``U_i`` in ``[a_i, a_i + 1] 2^-53`` (``a`` exact
    integers held in float64, ``gam`` the float ``κ n_i`` of :func:`_gamma_float`); module docstring."""
    scale = 2.0**-_WORD_BITS
    h_lo = _h((a + 1.0) * scale)  # lower end of ln(-ln U)
    h_hi = _h(a * scale)  # upper end
    with np.errstate(invalid="ignore", over="ignore"):
        lo = gam + h_lo - _MARGIN * (gam + np.abs(h_lo) + 1.0)
        hi = gam + h_hi + _MARGIN * (gam + np.abs(h_hi) + 1.0)
    big = np.broadcast_to(~np.isfinite(gam), lo.shape)
    if big.any():
        lo[big] = np.where(np.isneginf(h_lo[big]), -np.inf, _HUGE_KEY)
        hi[big] = np.inf
    lo[np.isneginf(h_lo)] = -np.inf
    hi[np.isposinf(h_hi)] = np.inf
    return lo, hi


def _race_top_k(law: SelectionLaw, k: int, rng: RandomSource, count: int = 1) -> np.ndarray:
    """``count`` independent races: row ``r`` holds the first ``k`` finishers of the exponential race with
    weights ``exp(-κ n_i)``, in order (shape ``(count, k)``). Rows are certified together in float; a
    row with an overlap is finished by :func:`_refine` (fresh bits, exact arithmetic)."""
    n = int(law.u.size)
    if n == 1:
        return np.zeros((count, 1), dtype=np.int64)
    gam = _gamma_float(law)[None, :]
    a = (rng.uint64(count * n) >> np.uint64(64 - _WORD_BITS)).astype(np.float64).reshape(count, n)  # < 2^53
    lo, hi = _float_bounds(gam, a)

    kth = np.partition(hi, k - 1, axis=1)[:, k - 1]
    cand = lo <= kth[:, None]  # the others are certainly beaten by k candidates
    ncand = cand.sum(axis=1)
    m = min(k + 1, n)
    lo_c = np.where(cand, lo, np.inf)
    if m < n:
        part = np.argpartition(lo_c, m - 1, axis=1)[:, :m]
        sub = np.take_along_axis(lo_c, part, axis=1)
        order = np.take_along_axis(part, np.argsort(sub, axis=1, kind="stable"), axis=1)
    else:
        order = np.argsort(lo_c, axis=1, kind="stable")
    lo_s = np.take_along_axis(lo, order, axis=1)
    hi_s = np.take_along_axis(hi, order, axis=1)
    pair_ok = (hi_s[:, :-1] < lo_s[:, 1:]) | (np.arange(1, m)[None, :] >= ncand[:, None])
    out = order[:, :k].astype(np.int64)
    for r in np.flatnonzero(~pair_ok.all(axis=1)):
        out[r] = _refine(law, k, np.flatnonzero(cand[r]), a[r].astype(np.int64), lo[r], hi[r], rng)
    return out


def _refine(law: SelectionLaw, k: int, cand: np.ndarray, a: np.ndarray, lo_f: np.ndarray, hi_f: np.ndarray,
            rng: RandomSource) -> np.ndarray:
    """Certify the order among the candidates that may be in the top ``k``, refining the uniforms of
    those whose key intervals overlap (exact arithmetic); see the module docstring."""
    ids = [int(i) for i in cand]
    lo: dict[int, Any] = {i: float(lo_f[i]) for i in ids}
    hi: dict[int, Any] = {i: float(hi_f[i]) for i in ids}
    state = {i: (int(a[i]), _WORD_BITS) for i in ids}
    while True:
        kth = sorted(hi[i] for i in ids)[k - 1]
        ids = [i for i in ids if lo[i] <= kth]
        order = sorted(ids, key=lambda i: (lo[i], hi[i]))
        bad: set[int] = set()
        for j in range(min(k, len(order) - 1)):
            if hi[order[j]] >= lo[order[j + 1]]:
                bad.update((order[j], order[j + 1]))
        if not bad:
            return np.array(order[:k], dtype=np.int64)
        for i in sorted(bad):
            num, nbits = state[i]
            num = (num << 64) | int(rng.uint64(1)[0])
            nbits += 64
            state[i] = (num, nbits)
            lo[i], hi[i] = _exact_bounds(_gamma_exact(law, i), num, nbits)


# ---------------------------------------------------------------------------------------------
# the sequential reference construction (tests)
# ---------------------------------------------------------------------------------------------
def _sequential_top_k(scores: np.ndarray, sensitivity: float, epsilon: float, factor: int, k: int,
                      rng: RandomSource) -> np.ndarray:
    """``k`` rounds of the exact exponential-mechanism sampler, each on a law re-built over the
    remaining candidates (``factor`` is ``2k``, or ``k`` monotonic, so every round has the same κ).

    Same law as :func:`_race_top_k`: re-building subtracts ``min_R n_j`` from every gap of the round,
    which multiplies all weights by one constant. Slower (up to ``n`` proposals per round); kept as
    an independent reference for the tests."""
    remaining = np.arange(scores.size)
    out = np.empty(k, dtype=np.int64)
    for r in range(k):
        law = SelectionLaw(scores[remaining], sensitivity, epsilon, factor)
        j = int(sample_exponential(law, rng, 1)[0])
        out[r] = remaining[j]
        remaining = np.delete(remaining, j)
    return out


# ---------------------------------------------------------------------------------------------
# public mechanism
# ---------------------------------------------------------------------------------------------
def _alpha(candidates: int, k: int, sensitivity: float, epsilon: float, monotonic: bool, beta: float) -> float:
    from dpkit.mechanisms.accuracy import exponential_utility_bound

    return exponential_utility_bound(candidates, sensitivity, epsilon / k, 1.0 - beta / k, monotonic=monotonic)


def exponential_top_k(scores: ArrayLike, k: int, sensitivity: float, epsilon: float, *, monotonic: bool = False,
                      accountant: Accountant | None = None, rng: RandomSource | None = None,
                      description: str = "") -> Release:
    """Select ``k`` distinct candidates, in order, by ``k`` rounds of the exponential mechanism without
    replacement, ``epsilon / k`` each (Lyu, Su & Li 2017, §5; the recommended non-interactive top-c
    method).

    Round ``r`` picks a remaining candidate ``i`` with probability proportional to
    ``exp(epsilon q_i / (2 k Δ))``, or ``exp(epsilon q_i / (k Δ))`` with ``monotonic=True``.

    Parameters
    ----------
    scores:
        ``q_i(D)``, one finite real per candidate (1-D, non-empty); higher is better. The candidate
        set (and so the indices) must be public.
    k:
        How many candidates to select, ``1 <= k <= len(scores)``.
    sensitivity:
        ``Δ``: the largest change of any score between neighbouring datasets (the caller's promise).
    epsilon:
        Total privacy parameter of the whole selection (> 0).
    monotonic:
        Declare that between any two neighbours all scores move in the same direction (counts under
        add/remove). A false declaration voids the guarantee.
    accountant:
        If given, charged ``PureDP(epsilon)`` once before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP for the whole ordered selection under the caller's neighbour relation: each round
    is an ``(epsilon/k)``-DP exponential mechanism over a candidate set fixed by the earlier (public)
    outputs, and ``k`` adaptively chosen ``(epsilon/k)``-DP steps compose to ``epsilon`` (module
    docstring, with the proof of the exact law).

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any random bit is drawn; a
    refused charge draws nothing.

    Output law
    ----------
    ``P[y_1, ..., y_k] = Π_r w_{y_r} / Σ_{j not in {y_1..y_{r-1}}} w_j`` with ``w_i = exp(-κ n_i)``, ``n_i``
    the exact integer gaps of the lattice-rounded scores and ``κ <= epsilon / (factor k Δu)`` (module
    docstring), sampled exactly by the one-shot exponential race. ``Release.value`` is an int64 array of
    the selected indices in selection order; ``Release.scale`` and ``Release.noise`` are ``None``.

    Error
    -----
    With probability at least ``1 - beta``, every round ``r`` selects a candidate whose score is at least
    the ``r``-th largest score minus ``alpha = (factor k Δ / epsilon) ln(n k / beta)`` (``factor`` 2, or 1
    monotonic; up to the lattice rounding, ``<= 2^-19 Δ``; module docstring). ``Release.params["alpha_95"]``
    is this ``alpha`` for ``beta = 0.05``. ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.

    Errata
    ------
    Lyu–Su–Li print the weight as ``exp(ε/(2cΔ))`` (the score ``q`` is missing).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> exponential_top_k([500, 3, 480, 20, 470], 2, 1.0, 5.0, monotonic=True,
    ...                   rng=deterministic_source(1)).value.tolist()
    [0, 2]
    """
    return run(exponential_top_k_plan(scores, k, sensitivity, epsilon, monotonic=monotonic), accountant=accountant,
               rng=rng, description=description)


def exponential_top_k_plan(scores: ArrayLike, k: int, sensitivity: float, epsilon: float, *,
                           monotonic: bool = False) -> Plan:
    """The validated plan of :func:`exponential_top_k` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`exponential_top_k`, which is ``run(exponential_top_k_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``None``: the guarantee holds under the
    relation for which the declared sensitivity holds.
    """
    arr = check.finite_array("scores", scores, ndim=1)
    kk = check.integer("k", k, minimum=1)
    if kk > arr.size:
        raise InvalidParameter("k", "must not exceed the number of candidates")
    sens = check.positive("sensitivity", sensitivity)
    eps = check.epsilon(epsilon)
    mono = check_bool("monotonic", monotonic)
    factor = (1 if mono else 2) * kk
    law = _RaceLaw(arr, sens, eps, factor)
    params: dict[str, Any] = {"epsilon": eps, "k": kk, "candidates": int(arr.size), "monotonic": mono,
                              "epsilon_per_round": eps / kk, "granularity": law.g,
                              "alpha_95": _alpha(int(arr.size), kk, sens, eps, mono, 0.05)}

    def draw(rng: RandomSource) -> Any:
        return _race_top_k(law, kk, rng)[0]

    return Plan(mechanism="exponential_top_k", cost=PureDP(eps), draw=draw, sensitivity=sens, scale=None,
                params=params, neighbours=None)
