"""The fairness LP (Hardt's thesis, Fig 8.1; Dwork et al., "Fairness through awareness", 2012).

Minimize the expected loss ``E_{x∼w} Σ_a μ_x(a) L(x, a)`` over randomized classifiers ``{μ_x}`` subject to the
Lipschitz constraints ``D(μ_x, μ_y) <= d(x, y)`` for every pair, with D the total variation (``"tv"``) or the
relative ℓ∞ metric (``"inf"``). Solved by scipy's HiGHS on sparse constraint matrices.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData
from dpkit.fairness import _inputs
from dpkit.fairness._lp import LPInfo, SolverError, solve, upper_pairs
from dpkit.fairness.checks import lipschitz_violations
from dpkit.fairness.classifier import FairClassifier

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["fair_classifier"]

#: Tolerance of the lazy constraint loop: a pair is added when its constraint is violated by more than this.
LAZY_TOLERANCE = 1e-8
#: Largest d(x, y) accepted under D_inf (the LP's coefficients are e^d).
MAX_DINF_DISTANCE = 50.0
_LAZY_NEIGHBOURS = 8
_MAX_ROUNDS = 60


def _csr(rows: list[np.ndarray], cols: list[np.ndarray], vals: list[np.ndarray], shape: tuple[int, int]) -> Any:
    from scipy.sparse import coo_matrix

    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    v = np.concatenate(vals) if vals else np.zeros(0)
    return coo_matrix((v, (r, c)), shape=shape).tocsr()


def lipschitz_rows(pi: np.ndarray, pj: np.ndarray, dist: np.ndarray, n: int, k: int, divergence: str,
                   direct: bool, var_offset: int = 0, mu_var: Any = None) -> tuple[Any, np.ndarray, int]:
    """Sparse Lipschitz constraint rows for the pairs (pi, pj) with distances ``dist``.

    ``direct`` (two outcomes): the variables are p_x = μ_x(0) (column ``var_offset + x``). Otherwise the variables
    are μ_x(a) (column ``mu_var(x, a)``, default ``var_offset + x k + a``) and, under TV, auxiliary s_{pa} appended
    after the n k columns. Returns (A, b, number of auxiliary variables)."""
    p = pi.size
    if mu_var is None:
        def mu_var(x: np.ndarray, a: int) -> np.ndarray:
            return var_offset + x * k + a
    ar = np.arange(p)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    one = np.ones(p)
    if divergence == "tv" and direct:
        # |p_i - p_j| <= d  as two rows per pair
        rows += [2 * ar, 2 * ar, 2 * ar + 1, 2 * ar + 1]
        cols += [var_offset + pi, var_offset + pj, var_offset + pj, var_offset + pi]
        vals += [one, -one, one, -one]
        b = np.repeat(dist, 2)
        return _csr(rows, cols, vals, (2 * p, var_offset + n)), b, 0
    if divergence == "tv":
        # s_{pa} >= μ_i(a) - μ_j(a), s >= 0, Σ_a s_{pa} <= d: equivalent to TV <= d as both rows sum to 1
        base = var_offset + n * k
        for a in range(k):
            r = ar * k + a
            s = base + ar * k + a
            rows += [r, r, r]
            cols += [mu_var(pi, a), mu_var(pj, a), s]
            vals += [one, -one, -one]
            rows.append(p * k + ar)
            cols.append(s)
            vals.append(one)
        b = np.concatenate([np.zeros(p * k), dist])
        return _csr(rows, cols, vals, (p * k + p, base + p * k)), b, p * k
    e = np.exp(dist)
    if direct:
        # p_i <= e p_j, p_j <= e p_i, (1 - p_i) <= e (1 - p_j), (1 - p_j) <= e (1 - p_i)
        rows += [4 * ar, 4 * ar, 4 * ar + 1, 4 * ar + 1, 4 * ar + 2, 4 * ar + 2, 4 * ar + 3, 4 * ar + 3]
        cols += [var_offset + pi, var_offset + pj] * 4
        vals += [one, -e, -e, one, -one, e, e, -one]
        b = np.stack([np.zeros(p), np.zeros(p), e - 1.0, e - 1.0], axis=1).reshape(-1)
        return _csr(rows, cols, vals, (4 * p, var_offset + n)), b, 0
    for a in range(k):
        r = (ar * k + a) * 2
        rows += [r, r, r + 1, r + 1]
        cols += [mu_var(pi, a), mu_var(pj, a), mu_var(pj, a), mu_var(pi, a)]
        vals += [one, -e, one, -e]
    return _csr(rows, cols, vals, (2 * p * k, var_offset + n * k)), np.zeros(2 * p * k), 0


def _pair_violation(mu: np.ndarray, d: np.ndarray, divergence: str, cand: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (i < j) whose Lipschitz constraint (the LP's linear form) is violated by more than LAZY_TOLERANCE."""
    n, k = mu.shape
    block = max(1, 4_000_000 // max(1, n * k))
    out_i, out_j, out_v = [], [], []
    cols = np.arange(n)
    for s in range(0, n, block):
        e = min(n, s + block)
        a, dd = mu[s:e], d[s:e]
        if divergence == "tv":
            v = 0.5 * np.abs(a[:, None, :] - mu[None, :, :]).sum(axis=2) - dd
        else:
            ex = np.exp(dd)[:, :, None]
            v = np.max(np.maximum(a[:, None, :] - ex * mu[None, :, :], mu[None, :, :] - ex * a[:, None, :]), axis=2)
        mask = (cols[None, :] > np.arange(s, e)[:, None]) & (v > LAZY_TOLERANCE)
        if cand is not None:
            mask &= cand[s:e]
        bi, bj = np.nonzero(mask)
        out_i.append(bi + s)
        out_j.append(bj)
        out_v.append(v[bi, bj])
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_v)


def _initial_pairs(d: np.ndarray, cand: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each individual with its nearest neighbours (the constraints most likely to bind)."""
    n = d.shape[0]
    m = min(n - 1, _LAZY_NEIGHBOURS)
    if m <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    dd = d.copy()
    np.fill_diagonal(dd, np.inf)
    nn = np.argpartition(dd, m - 1, axis=1)[:, :m]
    i = np.repeat(np.arange(n), m)
    j = nn.reshape(-1)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    if cand is not None:
        keep = cand[lo, hi]
        lo, hi = lo[keep], hi[keep]
    key = np.unique(lo * n + hi)
    return (key // n).astype(np.int64), (key % n).astype(np.int64)


def fair_classifier(metric: ArrayLike, loss: ArrayLike, *, divergence: str = "tv", weights: Any = None,
                    outcomes: Any = None, constraints: str = "all", formulation: str = "auto",
                    time_limit: float = 600.0) -> FairClassifier:
    """Solve the fairness LP: the loss-minimizing randomized classifier that is (D, d)-Lipschitz.

    Finds ``{μ_x}`` minimizing ``E_{x∼w} Σ_a μ_x(a) L(x, a)`` subject to ``D(μ_x, μ_y) <= d(x, y)`` for every
    pair of individuals and ``μ_x ∈ Δ(A)`` (Hardt's thesis, Fig 8.1; Lemmas 8.2.2 and 8.2.4), with scipy's HiGHS
    (``linprog(method="highs")``) on sparse constraint matrices. Not a mechanism: it charges nothing, draws
    nothing and the output depends on every input (the framework assumes a trusted data owner).

    Parameters
    ----------
    metric : array (n, n)
        The task metric d: finite, >= 0, symmetric, zero diagonal (:func:`task_metric` builds one from features).
        Under ``"tv"`` it should be scaled to [0, 1] (pairs at d >= 1 are unconstrained); under ``"inf"``
        similar individuals have d ≪ 1 (at most 50: the LP's coefficients are e^d).
    loss : array (n, |A|)
        The vendor's loss L(x, a), finite, at least two outcomes (columns).
    divergence : {"tv", "inf"}
        ``"tv"``: total variation; ``"inf"``: relative ℓ∞, ``D_∞(P, Q) = max_a |log P(a)/Q(a)|``.
    weights : optional
        The distribution over individuals of the expectation: a mask, indices or nonnegative weights (default
        uniform on V).
    outcomes : sequence, optional
        Labels of the loss columns (default ``0 .. |A|-1``).
    constraints : {"all", "lazy"}
        ``"all"``: one LP with every non-vacuous constraint. ``"lazy"``: constraint generation — start from each
        individual's 8 nearest neighbours, solve, add every pair whose constraint the solution violates by more
        than 1e-8, repeat until none does. The final LP is a relaxation of the full one whose optimum satisfies
        every constraint (to 1e-8), so it is optimal for the full LP; usually far smaller.
    formulation : {"auto", "aux"}
        With two outcomes ``"auto"`` uses one variable per individual (``p_x = μ_x(0)``; TV is ``|p_x - p_y|``);
        ``"aux"`` forces the general formulation (|A| variables per individual, under TV auxiliary variables per
        pair and outcome).
    time_limit : float
        HiGHS's time limit in seconds per solve (a hit raises :class:`SolverError` with ``param="time_limit"``).

    Returns
    -------
    FairClassifier
        ``probabilities`` (μ), ``objective`` (the expected loss of μ), ``lp`` (:class:`LPInfo`: variables,
        constraints, nonzeros, pairs kept/dropped, rounds, status, CPU seconds) and ``lipschitz`` (the check of
        μ by :func:`lipschitz_violations`; violations are at most the solver's tolerance, about 1e-9).

    Raises
    ------
    InvalidData, InvalidParameter, WrongType
        Bad inputs (NaN, negative or asymmetric distances, d(x, x) != 0, shapes), naming the parameter.
    SolverError
        HiGHS did not reach an optimum (time limit, numerical trouble).

    Notes
    -----
    The LP, with P the unordered pairs kept:

    - ``"tv"``: ``s_{xya} >= μ_x(a) - μ_y(a)``, ``s >= 0``, ``Σ_a s_{xya} <= d(x, y)`` for each pair x < y
      (equivalent to ``D_tv <= d`` because both rows sum to 1, so ``Σ_a (μ_x(a) - μ_y(a))^+ = D_tv``; half of
      the thesis's two-sided rows): n|A| + P|A| variables, P(|A| + 1) + n constraints. With two outcomes:
      ``|p_x - p_y| <= d``, n variables and 2P constraints.
    - ``"inf"``: ``μ_x(a) <= e^{d(x,y)} μ_y(a)`` both ways, for each pair and outcome (2P|A| rows; with two
      outcomes the same four rows on ``p`` and ``1 - p``).

    **Dropped constraints.** Under TV, pairs with ``d(x, y) >= 1`` are dropped: ``D_tv <= 1`` always, so their
    constraint is vacuous (``lp.pairs_dropped``). Under D_∞ nothing is dropped: ``μ_y(a) = 0`` forces
    ``μ_x(a) = 0`` at every finite distance, so no constraint is vacuous. Symmetric duplicates (y, x) are never
    built (d is symmetric).

    References
    ----------
    Dwork, Hardt, Pitassi, Reingold, Zemel, "Fairness through awareness", ITCS 2012; Hardt's thesis ch. 8.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import fair_classifier
    >>> d = np.array([[0.0, 0.2], [0.2, 0.0]])
    >>> L = np.array([[0.0, 1.0], [1.0, 0.0]])       # x0 prefers outcome 0, x1 outcome 1
    >>> clf = fair_classifier(d, L)
    >>> round(clf.objective, 6)                       # they can differ by at most 0.2 in total variation
    0.4
    >>> clf.lipschitz.ok
    True
    """
    div = _inputs.divergence(divergence)
    strategy = check.choice("constraints", constraints, ("all", "lazy"))
    form = check.choice("formulation", formulation, ("auto", "aux"))
    d = _inputs.metric(metric)
    n = d.shape[0]
    lm = _inputs.loss(loss, n)
    k = lm.shape[1]
    w = np.full(n, 1.0 / n) if weights is None else _inputs.distribution(weights, n, "weights")
    labels = outcomes
    limit = _inputs.time_limit(time_limit)
    if div == "inf" and float(np.max(d)) > MAX_DINF_DISTANCE:
        raise InvalidData("metric", f"distances above {MAX_DINF_DISTANCE:g} are not supported under "
                          "divergence='inf' (the LP's coefficients are e^d)")
    FairClassifier(np.full((1, k), 1.0 / k), labels)  # validate the labels before any work
    direct = k == 2 and form == "auto"
    info = LPInfo()
    t0 = time.process_time()
    pi_all, pj_all = upper_pairs(n)
    info.pairs_total = int(pi_all.size)
    cand = None
    if div == "tv":
        keep = d[pi_all, pj_all] < 1.0
        info.pairs_dropped = int(pi_all.size - np.count_nonzero(keep))
        info.notes.append("TV: pairs with d(x, y) >= 1 dropped (D_tv <= 1 makes their constraint vacuous)")
        if strategy == "lazy":
            cand = d < 1.0
        else:
            pi_all, pj_all = pi_all[keep], pj_all[keep]
    else:
        info.notes.append("D_inf: no pair dropped (mu_y(a) = 0 forces mu_x(a) = 0 at any finite distance)")
    if direct:
        info.notes.append("two outcomes: one variable p_x = mu_x(0) per individual")
    info.build_seconds = time.process_time() - t0
    if strategy == "all":
        info.pairs_kept = int(pi_all.size)
        mu = _solve_pairs(d, lm, w, div, direct, pi_all, pj_all, limit, info)
    else:
        info.notes.append(f"lazy constraint generation (start: {_LAZY_NEIGHBOURS} nearest neighbours; add pairs "
                          f"violated by > {LAZY_TOLERANCE:g})")
        pi, pj = _initial_pairs(d, cand)
        for _ in range(_MAX_ROUNDS):
            mu = _solve_pairs(d, lm, w, div, direct, pi, pj, limit, info)
            vi, vj, vv = _pair_violation(mu, d, div, cand)
            if vi.size == 0:
                break
            cap = max(20 * n, 10_000)
            if vi.size > cap:
                sel = np.argpartition(-vv, cap - 1)[:cap]
                vi, vj = vi[sel], vj[sel]
            key = np.unique(np.concatenate([pi * n + pj, vi * n + vj]))
            pi, pj = (key // n).astype(np.int64), (key % n).astype(np.int64)
        else:
            raise SolverError("constraints", f"lazy constraint generation did not converge in {_MAX_ROUNDS} "
                              "rounds; use constraints='all'", status=1, lp=info)
        info.pairs_kept = int(pi.size)
        if div == "tv":
            info.pairs_dropped = info.pairs_total - info.pairs_kept
    clf = FairClassifier(mu, labels)
    clf.divergence = div
    clf.lp = info
    clf.objective = float(np.sum(w[:, None] * clf.probabilities * lm))
    clf.lipschitz = lipschitz_violations(clf.probabilities, d, divergence=div, tolerance=1e-7)
    return clf


def _solve_pairs(d: np.ndarray, lm: np.ndarray, w: np.ndarray, div: str, direct: bool, pi: np.ndarray,
                 pj: np.ndarray, limit: float, info: LPInfo) -> np.ndarray:
    from scipy.sparse import csr_matrix

    n, k = lm.shape
    t0 = time.process_time()
    dist = d[pi, pj]
    a_ub, b_ub, n_aux = lipschitz_rows(pi, pj, dist, n, k, div, direct)
    if direct:
        c = w * (lm[:, 0] - lm[:, 1])
        a_eq = b_eq = None
        bounds: Any = (0.0, 1.0)
    else:
        c = np.concatenate([(w[:, None] * lm).reshape(-1), np.zeros(n_aux)])
        r = np.repeat(np.arange(n), k)
        a_eq = csr_matrix((np.ones(n * k), (r, np.arange(n * k))), shape=(n, n * k + n_aux))
        b_eq = np.ones(n)
        bounds = [(0.0, 1.0)] * (n * k) + [(0.0, None)] * n_aux
    b_opt: np.ndarray | None = b_ub
    if a_ub.shape[0] == 0:
        a_ub = b_opt = None
    info.build_seconds += time.process_time() - t0
    x = solve(c, a_ub, b_opt, a_eq, b_eq, bounds, time_limit=limit, info=info, what="loss")
    if direct:
        p = np.clip(x, 0.0, 1.0)
        return np.stack([p, 1.0 - p], axis=1)
    mu = np.clip(x[: n * k].reshape(n, k), 0.0, 1.0)
    return mu / mu.sum(axis=1, keepdims=True)
