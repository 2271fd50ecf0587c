"""Fair affirmative action / preferential treatment (Hardt's thesis §8.4.1, Props 8.4.1-8.4.2)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter
from dpkit.fairness import _inputs
from dpkit.fairness._lp import LPInfo, solve, upper_pairs
from dpkit.fairness.checks import statistical_parity
from dpkit.fairness.classifier import FairClassifier
from dpkit.fairness.lp import MAX_DINF_DISTANCE, fair_classifier, lipschitz_rows

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["PreferentialResult", "preferential_treatment"]

#: Largest |S| x |T| (variables of the restricted earthmover LP).
MAX_TRANSPORT_VARIABLES = 4_000_000


@dataclass
class PreferentialResult:
    """What :func:`preferential_treatment` returns.

    ``classifier``: the composed map M on V (rows of T: ``ν_y``; rows of S: ``E_{y∼μ_x} ν_y``); ``transport``:
    the |S| x |T| matrix of ``μ_x(y)`` (step 1); ``target``: ν, the fairness LP's classifier on T (step 3);
    ``loss_t``: the re-weighted loss L' on T (step 2); ``emd_l``: the restricted earthmover value
    ``d_EM+L(S, T) = E_{x∈S} E_{y∼μ_x} d(x, y)``; ``parity``: ``D_tv(M(S), M(T))`` (at most ε); ``group_s``,
    ``group_t``: the indices; ``lp_transport`` / ``lp_target``: the two LPs' sizes and times."""

    classifier: FairClassifier
    transport: np.ndarray
    target: FairClassifier
    loss_t: np.ndarray
    emd_l: float
    parity: float
    group_s: np.ndarray
    group_t: np.ndarray
    lp_transport: LPInfo
    lp_target: LPInfo


def preferential_treatment(metric: ArrayLike, loss: ArrayLike, group_s: Any, epsilon: float, *,
                           group_t: Any = None, divergence: str = "tv", reweight: bool = True,
                           constraints: str = "all", time_limit: float = 600.0) -> PreferentialResult:
    """Fair affirmative action: statistical parity between S and T while treating similar individuals similarly
    within each group (Hardt's thesis §8.4.1).

    1. **Restricted earthmover** (8.15): maps ``μ_x ∈ Δ(T)`` for x ∈ S minimizing ``E_{x∈S} E_{y∼μ_x} d(x, y)``
       subject to ``D(μ_x, μ_x') <= d(x, x')`` on S x S and ``D_tv(μ_S, U_T) <= ε`` (S and T uniform).
    2. **Re-weighted loss** on T: ``L'(y, a) = Σ_{x∈S} μ_x(y) L(x, a) + L(y, a)`` (``reweight=False``: L' = L, the
       vendor expresses no preference about S).
    3. **Fairness LP on T** with L' (:func:`fair_classifier` on the metric restricted to T), giving ν.
    4. **Composition** (8.16): ``M(y) = ν_y`` for y ∈ T and ``M(x) = E_{y∼μ_x} ν_y`` for x ∈ S.

    Parameters
    ----------
    metric : array (n, n)
        The task metric on V = S ∪ T.
    loss : array (n, |A|)
        The vendor's loss.
    group_s : mask or indices
        The protected group S.
    epsilon : float
        The parity tolerance ε in [0, 1].
    group_t : mask or indices, optional
        T (default: the complement of S). S and T must partition V.
    divergence : {"tv", "inf"}
        The D of the Lipschitz constraints (both in step 1 and step 3).
    reweight : bool
        Use the re-weighted loss L' (default) or L.
    constraints : {"all", "lazy"}
        Passed to :func:`fair_classifier` for step 3.
    time_limit : float
        HiGHS time limit per LP, seconds.

    Returns
    -------
    PreferentialResult

    Notes
    -----
    Properties (tested): (Prop 8.4.1) statistical parity ``D_tv(M(S), M(T)) <= D_tv(μ_S, U_T) <= ε`` and the
    Lipschitz condition on S x S and T x T; (Prop 8.4.2, D = TV, d a metric)
    ``E_{x∈S} max_{y∈T} [D_tv(M(x), M(y)) - d(x, y)] <= d_EM+L(S, T)``. The S x T Lipschitz condition is given
    up, only discouraged through the transport cost. Step 1 has |S||T| variables (and, under TV, |T| auxiliary
    variables per S-pair at distance < 1): keep |S||T| to a few hundred thousand.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.fairness import preferential_treatment
    >>> pos = np.array([0.0, 0.1, 0.8, 0.9])             # S = {0, 1} far from T = {2, 3}
    >>> d = np.abs(pos[:, None] - pos[None, :])
    >>> L = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    >>> r = preferential_treatment(d, L, [0, 1], 0.0)
    >>> round(r.parity, 6), round(r.emd_l, 6)
    (0.0, 0.8)
    """
    div = _inputs.divergence(divergence)
    d = _inputs.metric(metric)
    n = d.shape[0]
    lm = _inputs.loss(loss, n)
    s_idx = _inputs.indices(group_s, n, "group_s")
    eps = _inputs.unit_interval("epsilon", epsilon)
    if group_t is None:
        mask = np.ones(n, dtype=bool)
        mask[s_idx] = False
        t_idx = np.flatnonzero(mask).astype(np.int64)
        if t_idx.size == 0:
            raise InvalidData("group_s", "must leave at least one individual for T")
    else:
        t_idx = _inputs.indices(group_t, n, "group_t")
    rw = check.flag("reweight", reweight)
    strategy = check.choice("constraints", constraints, ("all", "lazy"))
    limit = _inputs.time_limit(time_limit)
    if np.intersect1d(s_idx, t_idx).size or s_idx.size + t_idx.size != n:
        raise InvalidParameter("group_t", "S and T must partition the individuals (disjoint, covering V)")
    ms, mt = s_idx.size, t_idx.size
    if ms * mt > MAX_TRANSPORT_VARIABLES:
        raise InvalidParameter("group_s", f"|S| x |T| must be at most {MAX_TRANSPORT_VARIABLES}")
    if div == "inf" and float(np.max(d)) > MAX_DINF_DISTANCE:
        raise InvalidData("metric", f"distances above {MAX_DINF_DISTANCE:g} are not supported under "
                          "divergence='inf' (the LP's coefficients are e^d)")
    transport, emd_l, info1 = _restricted_earthmover(d, s_idx, t_idx, eps, div, limit)
    loss_t = lm[t_idx] + (transport.T @ lm[s_idx] if rw else 0.0)
    target = fair_classifier(d[np.ix_(t_idx, t_idx)], loss_t, divergence=div, constraints=strategy,
                             time_limit=limit)
    mu = np.empty((n, lm.shape[1]))
    mu[t_idx] = target.probabilities
    mu[s_idx] = transport @ target.probabilities
    mu = np.clip(mu, 0.0, 1.0)
    mu /= mu.sum(axis=1, keepdims=True)
    clf = FairClassifier(mu)
    clf.divergence = div
    clf.objective = float(np.mean(np.sum(clf.probabilities * lm, axis=1)))
    parity = statistical_parity(clf.probabilities, s_idx, t_idx)
    assert target.lp is not None
    return PreferentialResult(classifier=clf, transport=transport, target=target, loss_t=loss_t, emd_l=emd_l,
                              parity=parity, group_s=s_idx, group_t=t_idx, lp_transport=info1,
                              lp_target=target.lp)


def _restricted_earthmover(d: np.ndarray, s_idx: np.ndarray, t_idx: np.ndarray, eps: float, div: str,
                           limit: float) -> tuple[np.ndarray, float, LPInfo]:
    """LP (8.15): variables μ_x(y) (x ∈ S, y ∈ T), Lipschitz on S x S, D_tv(μ_S, U_T) <= ε."""
    from scipy.sparse import coo_matrix, hstack, vstack

    info = LPInfo()
    t0 = time.process_time()
    ms, mt = s_idx.size, t_idx.size
    dst = d[np.ix_(s_idx, t_idx)]
    pi, pj = upper_pairs(ms)
    info.pairs_total = int(pi.size)
    dss = d[np.ix_(s_idx, s_idx)]
    if div == "tv":
        keep = dss[pi, pj] < 1.0
        info.pairs_dropped = int(pi.size - np.count_nonzero(keep))
        pi, pj = pi[keep], pj[keep]
        info.notes.append("TV: S-pairs with d >= 1 dropped (vacuous)")
    info.pairs_kept = int(pi.size)
    a_lip, b_lip, n_aux = lipschitz_rows(pi, pj, dss[pi, pj], ms, mt, div, False)
    nv = ms * mt + n_aux
    # parity: (1/|S|) Σ_x μ_x(y) - t_y <= 1/|T|,  Σ_y t_y <= ε  (t >= 0): D_tv(μ_S, U_T) <= ε
    var = np.arange(ms * mt)
    rows = np.concatenate([var % mt, np.arange(mt)])
    cols = np.concatenate([var, nv + np.arange(mt)])
    vals = np.concatenate([np.full(var.size, 1.0 / ms), -np.ones(mt)])
    a_par = coo_matrix((vals, (rows, cols)), shape=(mt, nv + mt))
    a_sum = coo_matrix((np.ones(mt), (np.zeros(mt, dtype=np.int64), nv + np.arange(mt))), shape=(1, nv + mt))
    a_lip = hstack([a_lip, coo_matrix((a_lip.shape[0], mt))]) if a_lip.shape[0] else None
    blocks = ([a_lip] if a_lip is not None else []) + [a_par, a_sum]
    a_ub = vstack(blocks).tocsr()
    b_ub = np.concatenate([b_lip if a_lip is not None else np.zeros(0), np.full(mt, 1.0 / mt), [eps]])
    a_eq = coo_matrix((np.ones(ms * mt), (var // mt, var)), shape=(ms, nv + mt)).tocsr()
    b_eq = np.ones(ms)
    c = np.concatenate([dst.reshape(-1) / ms, np.zeros(n_aux + mt)])
    bounds = [(0.0, 1.0)] * (ms * mt) + [(0.0, None)] * (n_aux + mt)
    info.notes.append("restricted earthmover (8.15) with the parity constraint D_tv(mu_S, U_T) <= epsilon")
    info.build_seconds = time.process_time() - t0
    x = solve(c, a_ub, b_ub, a_eq, b_eq, bounds, time_limit=limit, info=info, what="metric")
    mu = np.clip(x[: ms * mt].reshape(ms, mt), 0.0, 1.0)
    mu /= mu.sum(axis=1, keepdims=True)
    return mu, float(np.mean(np.sum(mu * dst, axis=1))), info
