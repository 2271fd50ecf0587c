"""Earthmover distance and bias by LP (Hardt's thesis §8.3: Def 8.3.3, Def 8.3.5, Theorem 8.3.7)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core.errors import InvalidData
from dpkit.fairness import _inputs
from dpkit.fairness._lp import LPInfo, solve, upper_pairs
from dpkit.fairness.classifier import FairClassifier
from dpkit.fairness.lp import MAX_DINF_DISTANCE, lipschitz_rows

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["BiasResult", "EarthmoverResult", "bias", "earthmover"]


@dataclass
class EarthmoverResult:
    """``value`` = d_EM(S, T); ``plan`` the optimal transport h (n x n, ``h[x, y]`` mass moved from x to y, rows
    summing to S, columns to T); ``lp`` its :class:`LPInfo`."""

    value: float
    plan: np.ndarray
    lp: LPInfo


@dataclass
class BiasResult:
    """``value`` = bias_{D,d}(S, T); ``classifier`` a (D, d)-Lipschitz map into Δ({0, 1}) attaining it (its
    ``μ_S(0) - μ_T(0)`` is ``value``); ``lp`` its :class:`LPInfo`."""

    value: float
    classifier: FairClassifier
    lp: LPInfo


def earthmover(metric: ArrayLike, group_s: Any, group_t: Any, *, time_limit: float = 600.0) -> EarthmoverResult:
    """The earthmover distance ``d_EM(S, T)`` between two distributions over the individuals (Def 8.3.5).

    ``min Σ_{x,y} h(x, y) d(x, y)`` subject to ``Σ_y h(x, y) = S(x)``, ``Σ_x h(x, y) = T(y)``, ``h >= 0``: the
    transportation LP, with variables only on supp(S) x supp(T), solved by HiGHS.

    Parameters
    ----------
    metric : array (n, n)
        The task metric (finite, >= 0, symmetric, zero diagonal).
    group_s, group_t
        Distributions over the n individuals: a boolean mask or an array of distinct indices (uniform over them),
        or n nonnegative weights (normalized).
    time_limit : float
        HiGHS time limit in seconds.

    Returns
    -------
    EarthmoverResult
        ``value``, the optimal ``plan`` (n x n) and the LP's size and time.

    Notes
    -----
    Theorem 8.3.7: ``bias_{D_tv,d}(S, T) <= d_EM(S, T)`` for a metric d, with equality when ``d <= 1``
    (see :func:`bias`); ``bias_{D_∞,d} <= bias_{D_tv,d}`` (Lemma 8.3.9).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import earthmover
    >>> d = np.array([[0.0, 0.5, 1.0], [0.5, 0.0, 0.5], [1.0, 0.5, 0.0]])
    >>> round(earthmover(d, [0], [1, 2]).value, 6)   # half the mass moves 0.5, half moves 1.0
    0.75
    """
    d = _inputs.metric(metric)
    n = d.shape[0]
    s = _inputs.distribution(group_s, n, "group_s")
    t = _inputs.distribution(group_t, n, "group_t")
    limit = _inputs.time_limit(time_limit)
    from scipy.sparse import coo_matrix

    info = LPInfo()
    t0 = time.process_time()
    xs, ys = np.flatnonzero(s > 0), np.flatnonzero(t > 0)
    ms, mt = xs.size, ys.size
    info.pairs_total = ms * mt
    info.pairs_kept = ms * mt
    c = d[np.ix_(xs, ys)].reshape(-1)
    var = np.arange(ms * mt)
    rows = np.concatenate([var // mt, ms + var % mt])
    cols = np.concatenate([var, var])
    a_eq = coo_matrix((np.ones(2 * var.size), (rows, cols)), shape=(ms + mt, ms * mt)).tocsr()
    b_eq = np.concatenate([s[xs], t[ys]])
    info.notes.append("transportation LP on supp(S) x supp(T)")
    info.build_seconds = time.process_time() - t0
    x = solve(c, None, None, a_eq, b_eq, (0.0, None), time_limit=limit, info=info, what="metric")
    plan = np.zeros((n, n))
    plan[np.ix_(xs, ys)] = np.maximum(x.reshape(ms, mt), 0.0)
    return EarthmoverResult(value=float(np.sum(plan * d)), plan=plan, lp=info)


def bias(metric: ArrayLike, group_s: Any, group_t: Any, *, divergence: str = "tv", time_limit: float = 600.0
         ) -> BiasResult:
    """``bias_{D,d}(S, T)``: the largest statistical-parity gap any (D, d)-Lipschitz classifier can have (Def 8.3.3).

    ``max μ_S(0) - μ_T(0)`` over (D, d)-Lipschitz maps ``M: V -> Δ({0, 1})``; by Lemma 8.3.4 every (D, d)-Lipschitz
    map into any outcome set has statistical parity between S and T up to this bias. With two outcomes
    ``D_tv(μ_x, μ_y) = |p_x - p_y|`` (p_x = μ_x(0)), so the LP is ``max Σ_x (S(x) - T(x)) p_x`` subject to
    ``|p_x - p_y| <= d(x, y)`` (pairs with d >= 1 dropped: vacuous) and ``0 <= p <= 1``; under D_∞ the rows are
    ``p_x <= e^d p_y`` and ``1 - p_x <= e^d (1 - p_y)`` both ways.

    Parameters
    ----------
    metric : array (n, n)
        The task metric.
    group_s, group_t
        Distributions over the individuals (mask, indices or weights), as in :func:`earthmover`.
    divergence : {"tv", "inf"}
        The D of the Lipschitz condition.
    time_limit : float
        HiGHS time limit in seconds.

    Returns
    -------
    BiasResult
        ``value`` in [0, 1], the attaining ``classifier`` and the LP's size.

    Notes
    -----
    Theorem 8.3.7: for a metric d, ``bias_{D_tv,d}(S, T) <= d_EM(S, T)``, with equality when every ``d(x, y) <= 1``
    (LP duality; the test suite checks it on random instances). Lemma 8.3.9: ``bias_{D_∞,d} <= bias_{D_tv,d}``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import bias, earthmover
    >>> d = np.array([[0.0, 0.5, 1.0], [0.5, 0.0, 0.5], [1.0, 0.5, 0.0]])
    >>> round(bias(d, [0], [1, 2]).value, 6), round(earthmover(d, [0], [1, 2]).value, 6)
    (0.75, 0.75)
    """
    div = _inputs.divergence(divergence)
    d = _inputs.metric(metric)
    n = d.shape[0]
    s = _inputs.distribution(group_s, n, "group_s")
    t = _inputs.distribution(group_t, n, "group_t")
    limit = _inputs.time_limit(time_limit)
    if div == "inf" and float(np.max(d)) > MAX_DINF_DISTANCE:
        raise InvalidData("metric", f"distances above {MAX_DINF_DISTANCE:g} are not supported under "
                                  "divergence='inf' (the LP's coefficients are e^d)")
    info = LPInfo()
    t0 = time.process_time()
    pi, pj = upper_pairs(n)
    info.pairs_total = int(pi.size)
    if div == "tv":
        keep = d[pi, pj] < 1.0
        info.pairs_dropped = int(pi.size - np.count_nonzero(keep))
        pi, pj = pi[keep], pj[keep]
        info.notes.append("TV: pairs with d(x, y) >= 1 dropped (vacuous)")
    info.pairs_kept = int(pi.size)
    a_ub, b_ub, _ = lipschitz_rows(pi, pj, d[pi, pj], n, 2, div, True)
    info.build_seconds = time.process_time() - t0
    b_opt: np.ndarray | None = b_ub
    if a_ub.shape[0] == 0:
        a_ub = b_opt = None
    x = solve(s - t, a_ub, b_opt, None, None, (0.0, 1.0), time_limit=limit, info=info, what="metric", sense="max")
    p = np.clip(x, 0.0, 1.0)
    clf = FairClassifier(np.stack([p, 1.0 - p], axis=1))
    clf.divergence = div
    clf.lp = info
    return BiasResult(value=float(max(0.0, np.dot(s - t, p))), classifier=clf, lp=info)
