"""Checkers: Lipschitz violations of a randomized classifier and statistical parity between two groups.

Neither is a mechanism: they read the classifier's probability matrix ``mu`` (n x |A|, row x is the outcome
distribution ``μ_x``) and the task metric, and are vectorized in row blocks (memory O(block x n x |A|)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, WrongType
from dpkit.fairness import _inputs

__all__ = ["LipschitzReport", "lipschitz_violations", "statistical_parity"]

_BLOCK_ENTRIES = 4_000_000


def probabilities(value: Any, name: str = "probabilities", *, n: int | None = None, rtol: float = 1e-6
                  ) -> np.ndarray:
    """A row-stochastic n x |A| matrix (entries in [0, 1], rows summing to 1 within ``rtol``)."""
    if value is None or isinstance(value, (str, bytes)) or callable(value):
        raise WrongType(name, "an n x |A| matrix of outcome probabilities")
    if check.safe_ndim(value) != 2:
        raise InvalidData(name, "must be a two-dimensional matrix (individuals x outcomes)")
    arr = check.finite_array(name, check.as_array(name, value, "an n x |A| matrix of numbers"), ndim=2)
    if n is not None and arr.shape[0] != n:
        raise InvalidData(name, "must have one row per individual of the metric")
    if arr.shape[1] < 1:
        raise InvalidData(name, "needs at least one outcome (column)")
    if arr.shape[1] > _inputs.MAX_OUTCOMES:
        raise InvalidData(name, f"must have at most {_inputs.MAX_OUTCOMES} outcomes")
    if np.any(arr < 0) or np.any(arr > 1):
        raise InvalidData(name, "probabilities must lie in [0, 1]")
    if not np.all(np.abs(arr.sum(axis=1) - 1.0) <= rtol):
        raise InvalidData(name, "every row must sum to 1")
    return arr


def _divergence_block(a: np.ndarray, b: np.ndarray, divergence: str) -> np.ndarray:
    """D(a_i, b_j) for every row pair (len(a) x len(b))."""
    if divergence == "tv":
        return 0.5 * np.abs(a[:, None, :] - b[None, :, :]).sum(axis=2)
    with np.errstate(divide="ignore", invalid="ignore"):
        la, lb = np.log(a), np.log(b)
        diff = np.abs(la[:, None, :] - lb[None, :, :])
    both0 = (a[:, None, :] == 0) & (b[None, :, :] == 0)
    diff[both0] = 0.0
    return np.max(diff, axis=2)


def _linear_block(a: np.ndarray, b: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The LP's D_inf form: max_a max(μ_x(a) - e^d μ_y(a), μ_y(a) - e^d μ_x(a)) for every row pair."""
    with np.errstate(over="ignore"):
        e = np.exp(d)[:, :, None]
    one = a[:, None, :] - e * b[None, :, :]
    two = b[None, :, :] - e * a[:, None, :]
    return np.max(np.maximum(one, two), axis=2)


@dataclass
class LipschitzReport:
    """What :func:`lipschitz_violations` found.

    ``max_violation`` is ``max over pairs x != y of D(μ_x, μ_y) - d(x, y)`` (<= 0 means Lipschitz; ``inf`` under
    D_inf when one distribution gives an outcome probability 0 and the other does not); ``count`` the number of
    unordered pairs whose violation exceeds ``tolerance``; ``pairs`` the worst of them (at most ``max_pairs``
    rows ``(x, y)``, x < y, largest violation first) and ``violations`` their amounts. Under D_inf,
    ``linear_violation`` is the largest violation of the LP's linear form ``μ_x(a) <= e^{d(x,y)} μ_y(a)``
    (a probability, so solver tolerances show as tiny positive numbers rather than ``inf``); None under TV."""

    divergence: str
    max_violation: float
    count: int
    pairs: np.ndarray
    violations: np.ndarray
    tolerance: float
    linear_violation: float | None = None

    @property
    def ok(self) -> bool:
        """True when no pair violates the condition by more than ``tolerance``."""
        return self.count == 0


def lipschitz_violations(probabilities: Any, metric: Any, *, divergence: str = "tv", tolerance: float = 0.0,
                         max_pairs: int = 100) -> LipschitzReport:
    """Check the (D, d)-Lipschitz condition ``D(μ_x, μ_y) <= d(x, y)`` for every pair of individuals.

    Parameters
    ----------
    probabilities : array (n, |A|)
        The classifier: row x is the outcome distribution ``μ_x`` (entries in [0, 1], rows sum to 1).
    metric : array (n, n)
        The task metric d (see :func:`dpkit.fairness.task_metric`).
    divergence : {"tv", "inf"}
        ``"tv"``: total variation ``D_tv(P, Q) = ½ Σ_a |P(a) - Q(a)|``; ``"inf"``: relative ℓ∞
        ``D_∞(P, Q) = max_a |log P(a)/Q(a)|`` (0 where both are 0).
    tolerance : float
        A pair counts as violating when ``D - d > tolerance`` (LP solutions satisfy the constraints up to the
        solver's feasibility tolerance, about 1e-9 here).
    max_pairs : int
        How many of the worst violating pairs to return.

    Returns
    -------
    LipschitzReport
        ``max_violation``, ``count``, the worst ``pairs`` and their ``violations``.

    Notes
    -----
    Exact in floating point up to the rounding of ``|P - Q|`` sums and logarithms; O(n² |A|) time, vectorized in
    row blocks. Lemma 8.2.5 of Hardt's thesis: ``D_tv <= 1 - e^{-D_∞} <= D_∞``, so a (D_∞, d)-Lipschitz map is
    (D_tv, d)-Lipschitz.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import lipschitz_violations
    >>> mu = np.array([[0.9, 0.1], [0.5, 0.5]])
    >>> d = np.array([[0.0, 0.3], [0.3, 0.0]])
    >>> r = lipschitz_violations(mu, d)
    >>> round(r.max_violation, 6), r.count, r.pairs.tolist()
    (0.1, 1, [[0, 1]])
    """
    div = _inputs.divergence(divergence)
    mu = _probabilities_checked(probabilities)
    d = _inputs.metric(metric, n=mu.shape[0])
    tol = check.nonnegative("tolerance", tolerance)
    keep = check.size_limit("max_pairs", max_pairs, 1_000_000, minimum=0)
    n, k = mu.shape
    block = max(1, _BLOCK_ENTRIES // max(1, n * k))
    worst = -np.inf
    lin_worst = -np.inf
    count = 0
    top_i: list[np.ndarray] = []
    top_j: list[np.ndarray] = []
    top_v: list[np.ndarray] = []
    cols = np.arange(n)
    for s in range(0, n, block):
        e = min(n, s + block)
        rows = np.arange(s, e)
        dv = _divergence_block(mu[s:e], mu, div) - d[s:e]
        upper = cols[None, :] > rows[:, None]
        vals = np.where(upper, dv, -np.inf)
        if n > 1:
            worst = max(worst, float(np.max(vals)))
        if div == "inf" and n > 1:
            lin = np.where(upper, _linear_block(mu[s:e], mu, d[s:e]), -np.inf)
            lin_worst = max(lin_worst, float(np.max(lin)))
        bad = vals > tol
        nb = int(np.count_nonzero(bad))
        if nb:
            count += nb
            bi, bj = np.nonzero(bad)
            top_i.append(bi + s)
            top_j.append(bj)
            top_v.append(vals[bi, bj])
            if keep and sum(x.size for x in top_v) > 4 * keep + 1024:
                ii, jj, vv = np.concatenate(top_i), np.concatenate(top_j), np.concatenate(top_v)
                sel = np.argsort(-vv, kind="stable")[:keep]
                top_i, top_j, top_v = [ii[sel]], [jj[sel]], [vv[sel]]
    if top_v and keep:
        ii, jj, vv = np.concatenate(top_i), np.concatenate(top_j), np.concatenate(top_v)
        sel = np.argsort(-vv, kind="stable")[:keep]
        pairs = np.stack([ii[sel], jj[sel]], axis=1).astype(np.int64)
        viol = vv[sel]
    else:
        pairs = np.zeros((0, 2), dtype=np.int64)
        viol = np.zeros(0)
    if n == 1:
        worst = 0.0
    return LipschitzReport(divergence=div, max_violation=float(worst), count=count, pairs=pairs, violations=viol,
                           tolerance=tol, linear_violation=(float(lin_worst) if div == "inf" and n > 1 else
                                                            (0.0 if div == "inf" else None)))


def _probabilities_checked(value: Any) -> np.ndarray:
    return probabilities(value)


def statistical_parity(probabilities: Any, group_s: Any, group_t: Any) -> float:
    """The statistical-parity gap ``D_tv(μ_S, μ_T)`` between two groups (Def 8.3.1).

    ``μ_S(a) = E_{x∼S} μ_x(a)`` is the group-averaged outcome distribution. A classifier satisfies statistical
    parity up to bias ε between S and T when this is at most ε; then for every set of outcomes O,
    ``|P[M(x) ∈ O | x ∈ S] - P[M(x) ∈ O | x ∈ T]| <= ε`` (Prop 8.3.2).

    Parameters
    ----------
    probabilities : array (n, |A|)
        The classifier (rows sum to 1).
    group_s, group_t
        Each a boolean mask of length n, an array of distinct indices (uniform over them), or n nonnegative
        weights (a distribution over the individuals). They may overlap.

    Returns
    -------
    float
        ``½ Σ_a |μ_S(a) - μ_T(a)|`` in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import statistical_parity
    >>> mu = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    >>> statistical_parity(mu, [0], [1, 2])
    0.75
    """
    mu = _probabilities_checked(probabilities)
    s = _inputs.distribution(group_s, mu.shape[0], "group_s")
    t = _inputs.distribution(group_t, mu.shape[0], "group_t")
    return float(0.5 * np.sum(np.abs(s @ mu - t @ mu)))
