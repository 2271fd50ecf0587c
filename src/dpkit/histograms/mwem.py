"""MWEM for 1-D range queries (Hardt, Ligett & McSherry, NIPS 2012; Hardt's thesis Ch. 5, Alg 5.1).

Each round selects the worst-answered workload query with the exponential mechanism, measures it with
discrete Laplace noise and moves the synthetic histogram towards the measurement by a multiplicative
weights step. Everything after the noisy steps (the updates, the extra sweeps, the averaging) is
post-processing of released values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.histograms.dawa import _ranges_param
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["mwem"]

DEFAULT_ROUNDS = 10
_SCORE_BITS = 10  # synthetic answers are rounded to 2^-10 so that |q(x) - q(A)| is an exact float


def range_answers(hist: np.ndarray, ranges: np.ndarray) -> np.ndarray:
    """Answers of half-open ranges ``[lo, hi)`` via prefix sums (int64 for int64 input)."""
    prefix = np.concatenate([np.zeros(1, dtype=hist.dtype), np.cumsum(hist)])
    return prefix[ranges[:, 1]] - prefix[ranges[:, 0]]


def selection_scores(true_answers: np.ndarray, synthetic_answers: np.ndarray) -> np.ndarray:
    """``|q(x) - q(A)|`` with ``q(A)`` first rounded to the public lattice ``2^-10`` (so the difference of
    an integer and a lattice value below 2^42 is exact): sensitivity exactly that of ``q(x)``."""
    qa = np.round(synthetic_answers * 2.0**_SCORE_BITS) / 2.0**_SCORE_BITS
    return np.abs(true_answers.astype(np.float64) - qa)


def mw_update(log_a: np.ndarray, lo: int, hi: int, measurement: float, total: float) -> np.ndarray:
    """One multiplicative-weights step on the log synthetic histogram (total ``total``) for the range
    ``[lo, hi)`` measured as ``measurement``: ``A[u] <- A[u] exp(q[u] (m - q(A)) / (2 total))``, renormalised
    to ``total`` (Hardt et al.: ``eta = d/2``; the factor ``1/2`` and ``q[u]`` are lost in the thesis's
    printed Alg 5.1). Computed in log space (no overflow)."""
    a = np.exp(log_a - np.max(log_a))
    a *= total / a.sum()
    qa = float(a[lo:hi].sum())
    out = log_a.copy()
    out[lo:hi] += (measurement - qa) / (2.0 * total)
    mx = np.max(out)
    return out - (mx + np.log(np.sum(np.exp(out - mx)))) + np.log(total)


def mwem(counts: ArrayLike, epsilon: float, *, workload: ArrayLike, rounds: int = DEFAULT_ROUNDS,
         total_share: float = 0.1, sweeps: int = 10, average: bool = True, neighbours: Neighbours | None = None,
         accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """MWEM (multiplicative weights + exponential mechanism) for a workload of 1-D range queries.

    Parameters
    ----------
    counts:
        The true bin counts over a public domain of ``m`` bins (non-negative integers, total below 2^42).
    epsilon:
        The privacy parameter, > 0.
    workload:
        A public int array ``(k, 2)`` of half-open ranges ``[lo, hi)`` (as :mod:`dpkit.histograms.workloads`
        builds them); required, at least one range.
    rounds:
        The number of rounds ``T`` (``1..10000``; default 10, a data-independent choice: the thesis's optimal
        ``T`` depends on the private ``n``).
    total_share:
        The share of ``epsilon`` spent on the noisy total under add/remove (in (0, 1); default 0.1).
    sweeps:
        Further multiplicative-weights passes over all measurements after each round (``0..10000``; default
        10; free post-processing).
    average:
        Release the average ``(1/T) sum_t A_t`` (default, as in Alg 5.1) or ``A_T``.
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``PureDP(epsilon)`` once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP by sequential composition, ``eps_N + T (eps_sel + eps_meas) <= epsilon`` (exact
    rational check). A range query changes by at most ``s_q`` = 1 under add/remove and under replace-one (one
    record leaves, one arrives), ``max_rows`` under a privacy unit; ``q(A_{t-1})`` is a function of earlier
    releases only, so every score moves by at most ``s_q``. Everything after the noisy steps (the updates,
    the extra sweeps, the averaging) is post-processing of released values.

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness. Budget split (listed in
    ``Release.params``): add/remove (default): ``eps_N = total_share * epsilon`` (default 10 %) for the noisy
    total ``N^``, and ``(1 - total_share) epsilon / (2T)`` each for the selection and the measurement of every
    round. Replace-one: ``n`` is public, so ``N^ = n`` and the whole ``epsilon`` goes to the rounds.

    Output law
    ----------
    ``A_0`` is uniform with total ``N^`` (a noisy total: discrete Laplace, sensitivity ``s_q``, clamped to
    ``>= 1`` afterwards; ``n`` itself under replace-one). In round ``t = 1..T``:

    1. select ``q_t`` by the exponential mechanism with score ``|q(x) - q(A_{t-1})|`` (sensitivity ``s_q``,
       not monotone: ``P ∝ exp(eps_sel score / (2 s_q))``; dpkit's exact sampler);
    2. measure ``m_t = q_t(x) + Z``, ``Z`` discrete Laplace with scale ``s_q / eps_meas``;
    3. multiplicative weights: ``A_t[u] ∝ A_{t-1}[u] exp(q_t[u] (m_t - q_t(A_{t-1})) / (2 N^))``,
       renormalised to ``N^``; then ``sweeps`` further passes over all measurements so far (Hardt et al.'s
       "iterating the update" improvement; ``sweeps=0`` is the base algorithm).

    The release is the average ``(1/T) sum_t A_t`` (``average=True``) or ``A_T``: the :class:`Release`'s
    ``value`` is the float64 synthetic histogram (every bin), ``parts`` the noisy total, the selected query
    indices and the noisy measurements. ``Release.scale`` is ``None`` (the receipt records the measurement
    scale).

    Error
    -----
    Hardt et al.'s bound (up to constants and the budget split): with ``T`` rounds the largest
    workload error of the averaged histogram is ``O(n sqrt(log m / T) + T log(k)/epsilon)`` with high
    probability, ``n`` the number of records and ``k`` the number of queries (selection and measurement
    errors grow with ``T``, the multiplicative-weights error shrinks); the noisy total ``N^`` adds its own
    discrete Laplace error. No interval is provided.

    Errata
    ------
    Pinned by tests: the thesis's printed update ``x'_t[u] = exp(d^_t(f_t)) x_{t-1}[u]`` multiplies
    every cell by the same factor, so renormalisation undoes it (MWEM would never learn); the analysis
    (Lemma 5.2.7, ``eta = d^_t/2``, penalty ``f_t``) gives the update above. The thesis also calls its
    selection (``exp(eps_0 n |d| / 2)``, score sensitivity 1/2) ``eps_0/2``-DP; by the standard ``2 eps Δ``
    bound it is ``eps_0``-DP, so dpkit calibrates the selection with the factor 2.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> from dpkit.histograms import all_ranges
    >>> rel = mwem([5, 0, 0, 20], 2.0, workload=all_ranges(4), rounds=3, rng=deterministic_source(1))
    >>> rel.value.shape, len(rel.parts["queries"])
    ((4,), 3)
    """
    return run(_mwem_plan(counts, epsilon, workload=workload, rounds=rounds, total_share=total_share,
                          sweeps=sweeps, average=average, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _mwem_plan(counts: Any, epsilon: float, *, workload: Any, rounds: Any, total_share: Any, sweeps: Any, average: Any,
               neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`mwem` (nothing drawn or charged)."""
    arr = _common.counts(counts)
    m = int(arr.size)
    epsilon = check.epsilon(epsilon)
    if workload is None:
        raise InvalidParameter("workload", "is required (an int array (k, 2) of half-open ranges)")
    wl = _ranges_param(workload, m)
    if wl.shape[0] == 0:
        raise InvalidParameter("workload", "must contain at least one range")
    rounds = check.size_limit("rounds", rounds, 10_000, minimum=1)
    total_share = check.probability("total_share", total_share)
    sweeps = check.size_limit("sweeps", sweeps, 10_000, minimum=0)
    average = check.flag("average", average)
    nb = _common.resolve_neighbours(neighbours, accountant)
    if int(arr.sum()) >= 2**42:
        raise InvalidData("counts", "total count too large for exact query arithmetic (>= 2^42)")
    s_q = _common.unit_rows(nb)
    replace_one = _common.is_replace(nb)
    if replace_one:
        parts = _common.split_budget(epsilon, [1.0] * (2 * rounds), name="rounds")
        eps_total = 0.0
    else:
        per = (1.0 - total_share) / (2 * rounds)
        parts = _common.split_budget(epsilon, [total_share] + [per] * (2 * rounds), name="total_share")
        eps_total, parts = parts[0], parts[1:]
    eps_sel, eps_meas = parts[0::2], parts[1::2]
    t_meas = discrete_laplace_scale(s_q, eps_meas[0])
    t_total = discrete_laplace_scale(s_q, eps_total) if not replace_one else None
    params = {"epsilon": epsilon, "rounds": rounds, "total_share": 0.0 if replace_one else total_share,
              "total_epsilon": eps_total, "selection_epsilon": eps_sel[0], "measurement_epsilon": eps_meas[0],
              "query_sensitivity": s_q, "measurement_scale": t_meas, "total_scale": t_total, "sweeps": sweeps,
              "average": average, "domain_size": m, "queries": int(wl.shape[0])}

    def draw(rng: RandomSource) -> Outcome:
        if replace_one:
            total = float(max(int(arr.sum()), 1))
            noisy_total = int(arr.sum())
        else:
            noisy_total = int(_common.noisy_counts(int(arr.sum()), s_q, eps_total, rng))
            total = float(max(noisy_total, 1))
        true_answers = range_answers(arr, wl)
        log_a = np.full(m, np.log(total / m))
        acc = np.zeros(m)
        chosen: list[int] = []
        measured: list[int] = []
        for t in range(rounds):
            a = np.exp(log_a)
            scores = selection_scores(true_answers, range_answers(a, wl))
            i = _common.choose(scores, float(s_q), eps_sel[t], rng)
            meas = int(_common.noisy_counts(int(true_answers[i]), s_q, eps_meas[t], rng))
            chosen.append(i)
            measured.append(meas)
            log_a = mw_update(log_a, int(wl[i, 0]), int(wl[i, 1]), float(meas), total)
            for _ in range(sweeps):
                for j, mj in zip(chosen, measured, strict=True):
                    log_a = mw_update(log_a, int(wl[j, 0]), int(wl[j, 1]), float(mj), total)
            acc += np.exp(log_a)
        value = acc / rounds if average else np.exp(log_a)
        return Outcome(np.asarray(value, dtype=np.float64),
                       parts={"total": noisy_total, "queries": chosen, "measurements": measured},
                       fields={"scale": None})  # no single scale for the synthetic data (receipt: the rounds')

    return Plan(mechanism="mwem", cost=PureDP(epsilon), draw=draw, sensitivity=float(s_q), scale=t_meas,
                params=params, neighbours=nb)
