"""Private spatial decompositions over a public 2-D grid: the KD-tree with noisy medians and the KD-hybrid
(Cormode, Procopiuc, Srivastava, Shen & Yu, ICDE 2012; Xiao et al. 2010; Li et al. §4.3.4).

A tree of rectangles of the public fine grid is grown level by level. A **KD level** splits every node in two
along one axis (alternating rows/columns) at a noisy median: the exponential mechanism (exactly the law of
:func:`~dpkit.mechanisms.exponential`, sampled for all nodes of a level at once) over the public split
positions ``lo+1 .. hi-1`` with quality ``q(p) = -|L(p) - R(p)|`` (``L``, ``R``: the node's counts on either
side of ``p``). A **quadtree level** splits every node into four at the midpoints ``floor((lo+hi)/2)``
(data-independent, free). Every level's node counts
(root to leaves) get discrete Laplace noise; constrained inference (the generalised least-squares estimate
on the tree) makes them consistent; each leaf's estimate is spread uniformly over its fine cells.

Degenerate nodes: a node one cell wide along the preferred axis is split along the other axis; a node one cell
wide along both (or a quadtree node one cell wide along an axis) gets an empty child. Empty nodes are known to
hold 0 (public: they contain no fine cell), so their counts are not noised and inference treats them as exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.histograms.grids import _check_common, _dlap_variance, _prefix, _rect_sums, _share
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale
from dpkit.mechanisms.selection import SelectionLaw, accept_exp_limbs

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["kd_hybrid", "kd_tree"]

_KD, _QUAD = "kd", "quad"
_MAX_LEAF_BITS = 20  # at most 2^20 leaves (kd levels + 2 * quadtree levels)
ALLOCATIONS = ("geometric", "equal")
ORDERS = ("kd_first", "quad_first")


def _default_bits(shape: tuple[int, ...]) -> int:
    """Default ``log2`` of the number of leaves, from the public grid shape only: ``ceil(log2(cells)) - 2``
    (leaves of about four fine cells; 14 for 256x256), between 1 and 14."""
    cells = int(shape[0]) * int(shape[1])
    return max(1, min(14, (cells - 1).bit_length() - 2))


def _budget(epsilon: float, kinds: list[str], median_share: float, allocation: str) -> tuple[list[float], list[float]]:
    """Per-KD-level median budgets and per-level count budgets (root first), summing to <= epsilon exactly.

    Medians: ``median_share * epsilon`` split equally over the KD levels. Counts: the rest over the
    ``len(kinds) + 1`` levels, equally or geometrically (each level ``f^(1/3)`` times its parent's share,
    ``f`` the parent's fanout: 2 for a KD split, 4 for a quadtree split; Cormode et al.'s geometric budget,
    leaves get the most)."""
    n_kd = kinds.count(_KD)
    w = [1.0]
    for k in kinds:
        w.append(w[-1] * (2.0 if k == _KD else 4.0) ** (1.0 / 3.0) if allocation == "geometric" else 1.0)
    total_w = sum(w)
    shares = [median_share / n_kd] * n_kd + [(1.0 - median_share) * x / total_w for x in w]
    parts = _common.split_budget(epsilon, shares)
    return parts[:n_kd], parts[n_kd:]


def _noisy_medians(scores: np.ndarray, starts: np.ndarray, lens: np.ndarray, sens: int, eps: float,
                   rng: RandomSource) -> np.ndarray:
    """One exponential-mechanism draw per node, all nodes of a level at once; returns local indices.

    Node ``i`` owns ``scores[starts[i] : starts[i] + lens[i]]``. The law of each draw is exactly that of
    :func:`~dpkit.mechanisms.exponential` ``(node_scores, sens, eps)`` (same lattice, same exponent factor
    ``κ`` rounded down, same exact Bernoulli limbs; scores are shifted so every node's best is 0, an exact
    integer shift that leaves each node's gaps unchanged). Sampling is the mechanism's own rejection
    scheme, vectorised over nodes: every node proposes uniformly among its candidates (random 64-bit words
    masked to the node's bit length, out-of-range ones rejected: exactly uniform) and accepts with
    ``Bernoulli(exp(-κ gap))`` (exact); a node keeps its first acceptance. Nodes are independent.
    """
    node_max = np.maximum.reduceat(scores, starts)
    owner = np.repeat(np.arange(starts.size), lens)
    law = SelectionLaw(scores - node_max[owner], float(sens), eps, 2)
    out = np.full(starts.size, -1, dtype=np.int64)
    pending = np.arange(starts.size)
    masks = np.array([(1 << int(n - 1).bit_length()) - 1 for n in lens.tolist()], dtype=np.uint64)
    batch = 16
    while pending.size:
        # exact uniform proposals below each node's length: masked 64-bit words, out-of-range ones rejected
        words = rng.uint64(pending.size * batch).reshape(pending.size, batch) & masks[pending][:, None]
        props = words.astype(np.int64)
        ok = props < lens[pending][:, None]
        flat = (starts[pending][:, None] + props)[ok]
        ok[ok] = accept_exp_limbs(law.limbs[flat], rng)
        done = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        out[pending[done]] = props[done, first[done]]
        pending = pending[~done]
    return out


def _kd_split(p: np.ndarray, rect: tuple[np.ndarray, ...], pref: int, sens: int, eps: float,
              rng: RandomSource) -> tuple[np.ndarray, np.ndarray]:
    """Axis and split position of every node of a KD level (noisy medians: one exponential-mechanism draw
    per node with at least two candidate positions)."""
    r0, r1, c0, c1 = rect
    ext = (r1 - r0, c1 - c0)
    axis = np.where(ext[pref] >= 2, pref, np.where(ext[1 - pref] >= 2, 1 - pref, pref))
    lo = np.where(axis == 0, r0, c0)
    hi = np.where(axis == 0, r1, c1)
    pos = np.where(hi - lo >= 2, lo + 1, hi)  # one candidate (extent 2) or no split (extent < 2)
    idx = np.flatnonzero(hi - lo >= 3)
    if idx.size:
        lens = hi[idx] - lo[idx] - 1
        owner = np.repeat(np.arange(idx.size), lens)
        starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
        cand = lo[idx][owner] + 1 + (np.arange(owner.size) - starts[owner])
        nodes = idx[owner]
        rows = axis[nodes] == 0
        left = _rect_sums(p, r0[nodes], np.where(rows, cand, r1[nodes]), c0[nodes], np.where(rows, c1[nodes], cand))
        total = _rect_sums(p, r0[nodes], r1[nodes], c0[nodes], c1[nodes])
        scores = -np.abs(2 * left - total).astype(np.float64)
        pos[idx] = lo[idx] + 1 + _noisy_medians(scores, starts, lens, sens, eps, rng)
    return axis, pos


def _children(kind: str, rect: tuple[np.ndarray, ...], split: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Child rectangles, children of node ``i`` at ``f*i .. f*i+f-1``."""
    r0, r1, c0, c1 = rect
    if kind == _KD:
        axis, pos = split
        rows = axis == 0
        kids = [(r0, np.where(rows, pos, r1), c0, np.where(rows, c1, pos)),
                (np.where(rows, pos, r0), r1, np.where(rows, c0, pos), c1)]
    else:
        pr, pc = split
        kids = [(r0, pr, c0, pc), (r0, pr, pc, c1), (pr, r1, c0, pc), (pr, r1, pc, c1)]
    return tuple(np.stack([k[j] for k in kids], axis=1).reshape(-1) for j in range(4))


def _infer(y: list[np.ndarray], var: list[np.ndarray], fanouts: list[int]) -> list[np.ndarray]:
    """Constrained inference on a tree: the generalised least-squares (BLUE) estimate of every node count.

    ``y[j]``: noisy counts of level ``j`` (root first), ``var[j]`` their noise variances (``0`` = known exactly),
    the children of node ``i`` of level ``j`` at ``f*i .. f*i+f-1`` of level ``j+1`` (``f = fanouts[j]``).
    Phase 1 (bottom-up): ``z`` = the BLUE from the node's subtree, ``w`` its variance:
    ``z = (y w_S + S v)/(v + w_S)`` with ``S``, ``w_S`` the sum of the children's ``z`` and of their ``w``.
    Phase 2 (top-down): ``n̄ = z`` at the root; a child gets ``z_c + (n̄_parent - S) w_c / w_S`` (the residual
    shared in proportion to the children's variances; equal shares when they are equal, as in Hay et al.).
    """
    z = [np.asarray(y[-1], dtype=np.float64)]
    w = [np.asarray(var[-1], dtype=np.float64)]
    sums: list[np.ndarray] = []
    wsums: list[np.ndarray] = []
    for j in range(len(y) - 2, -1, -1):
        f = fanouts[j]
        s = z[0].reshape(-1, f).sum(axis=1)
        ws = w[0].reshape(-1, f).sum(axis=1)
        v = np.asarray(var[j], dtype=np.float64)
        yj = np.asarray(y[j], dtype=np.float64)
        den = v + ws
        safe = np.where(den > 0, den, 1.0)
        zj = np.where(v == 0, yj, np.where(ws == 0, s, (yj * ws + s * v) / safe))
        wj = np.where((v == 0) | (ws == 0), 0.0, v * ws / safe)
        z.insert(0, zj)
        w.insert(0, wj)
        sums.insert(0, s)
        wsums.insert(0, ws)
    out = [z[0]]
    for j in range(len(y) - 1):
        f = fanouts[j]
        resid = out[-1] - sums[j]
        share = np.divide(w[j + 1].reshape(-1, f), wsums[j][:, None], out=np.zeros((wsums[j].size, f)),
                          where=wsums[j][:, None] > 0)
        out.append((z[j + 1].reshape(-1, f) + resid[:, None] * share).reshape(-1))
    return out


def _decompose(arr: np.ndarray, kinds: list[str], eps_med: list[float], eps_cnt: list[float], sens: int,
               rng: RandomSource) -> tuple[np.ndarray, dict[str, Any]]:
    """Grow the tree, noise every level, infer, paint. Returns ``(value, parts)``."""
    rows, cols = arr.shape
    p = _prefix(arr)
    one = np.zeros(1, dtype=np.int64)
    rect: tuple[np.ndarray, ...] = (one, one + rows, one.copy(), one + cols)
    rects, splits, fanouts = [rect], [], []
    kd_index = 0
    for kind in kinds:
        if kind == _KD:
            split = _kd_split(p, rect, kd_index % 2, sens, eps_med[kd_index], rng)
            kd_index += 1
            fanouts.append(2)
        else:
            split = ((rect[0] + rect[1]) // 2, (rect[2] + rect[3]) // 2)
            fanouts.append(4)
        splits.append(split)
        rect = _children(kind, rect, split)
        rects.append(rect)
    noisy, variances, levels = [], [], []
    for (r0, r1, c0, c1), e in zip(rects, eps_cnt, strict=True):
        empty = (r1 <= r0) | (c1 <= c0)
        t = discrete_laplace_scale(sens, e)
        y = _common.noisy_counts(_rect_sums(p, r0, r1, c0, c1), sens, e, rng)
        y = np.where(empty, 0, y)
        levels.append(y)
        noisy.append(y.astype(np.float64))
        variances.append(np.where(empty, 0.0, _dlap_variance(t)))
    est = _infer(noisy, variances, fanouts)
    # paint: leaf label of every fine cell, level by level
    rr = np.arange(rows)[:, None]
    cc = np.arange(cols)[None, :]
    label = np.zeros((rows, cols), dtype=np.int64)
    for kind, split, f in zip(kinds, splits, fanouts, strict=True):
        if kind == _KD:
            axis, pos = split[0][label], split[1][label]
            local = np.where(axis == 0, rr >= pos, cc >= pos).astype(np.int64)
        else:
            local = 2 * (rr >= split[0][label]) + (cc >= split[1][label])
        label = f * label + local
    r0, r1, c0, c1 = rects[-1]
    area = ((r1 - r0) * (c1 - c0)).astype(np.float64)
    density = np.divide(est[-1], area, out=np.zeros_like(area), where=area > 0)
    parts = {"levels": levels, "consistent_levels": est, "splits": splits,
             "leaves": np.stack([r0, r1, c0, c1], axis=1)}
    return density[label], parts


def _check_tree(kinds: list[str], median_share: Any, allocation: Any) -> tuple[float, str]:
    median_share = _share("median_share", median_share)
    if not isinstance(allocation, str) or allocation not in ALLOCATIONS:
        raise InvalidParameter("allocation", "must be 'geometric' or 'equal'")
    return median_share, allocation


def _tree_plan(arr: np.ndarray, eps: float, nb: Neighbours, sens: int, kinds: list[str], median_share: float,
               allocation: str, mechanism: str, extra: dict[str, Any]) -> Plan:
    """The plan of :func:`kd_tree` and :func:`kd_hybrid` from validated arguments (nothing drawn or charged)."""
    eps_med, eps_cnt = _budget(eps, kinds, median_share, allocation)
    scales = [discrete_laplace_scale(sens, e) for e in eps_cnt]
    params = {"epsilon": eps, **extra, "levels": tuple(kinds), "median_share": median_share,
              "allocation": allocation, "median_epsilons": tuple(eps_med), "count_epsilons": tuple(eps_cnt),
              "count_scales": tuple(scales), "sensitivity": sens, "shape": tuple(arr.shape)}

    def draw(rng: RandomSource) -> Outcome:
        value, parts = _decompose(arr, kinds, eps_med, eps_cnt, sens, rng)
        return Outcome(value, parts=parts)

    return Plan(mechanism=mechanism, cost=PureDP(eps), draw=draw, sensitivity=float(sens), scale=scales[-1],
                params=params, neighbours=nb)


def kd_tree(counts: ArrayLike, epsilon: float, *, depth: int | None = None, median_share: float = 0.1,
            allocation: str = "geometric", neighbours: Neighbours | None = None, accountant: Accountant | None = None,
            rng: RandomSource | None = None, description: str = "") -> Release:
    """KD-tree with noisy medians (Cormode et al. 2012) over a public 2-D grid of counts; ``2^depth`` leaves.

    Parameters
    ----------
    counts:
        The true counts, a 2-D array of non-negative integers over a public fine grid (total below 2^52).
    epsilon:
        The privacy parameter, > 0.
    depth:
        The number of KD levels, ``1..20``. ``None`` chooses ``ceil(log2(rows * cols)) - 2`` (leaves of about
        four fine cells), between 1 and 14 (14 for a 256x256 grid): a function of the public shape only.
    median_share:
        The share of ``epsilon`` spent on the noisy medians (in (0, 1); default 0.1).
    allocation:
        ``"geometric"`` (each count level ``2^(1/3)`` times its parent's share) or ``"equal"``.
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
    Pure ``epsilon``-DP. Under add/remove one record (the default) a record changes every split quality by at
    most ``s = 1`` and lies in one node per level, so each KD level (one exponential mechanism per node, nodes
    disjoint) costs its median budget by parallel composition, and each level's counts form a histogram of a
    partition (L1 sensitivity ``s``) costing its count budget. Under replace-one ``s = 2`` (qualities and counts
    are calibrated to 2; a moved record changes two nodes by 1 each); under a privacy unit ``s = max_rows``.
    The tree shape is post-processing of released noisy medians (adaptive sequential composition).

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness; the steps then run without a charge.
    ``sum(median_epsilons) + sum(count_epsilons) <= epsilon`` (exact rational check; both in ``params``).

    Output law
    ----------
    ``depth`` KD levels, alternating rows (even levels) and columns (odd levels); every split at a noisy median
    chosen by the exponential mechanism (quality ``-|L(p) - R(p)|``, the law of
    :func:`~dpkit.mechanisms.exponential`) with budget ``median_share * epsilon / depth`` per level. Counts of
    all ``depth + 1`` levels get discrete Laplace noise with ``(1 - median_share) epsilon`` allocated
    geometrically (``allocation="geometric"``: each level ``2^(1/3)`` times its parent's share) or equally,
    then constrained inference (BLUE) and uniform expansion within the leaves.

    The :class:`Release`'s ``value`` is the float64 estimate of every fine cell (same shape as ``counts``).
    ``parts``: ``splits`` (per level: axis and position of every node's split), ``levels`` (noisy int64 counts,
    root first), ``consistent_levels`` and ``leaves`` (``[r0, r1, c0, c1]`` of every leaf; empty ones
    included).

    Error
    -----
    Leaf estimates are the BLUE given the noisy tree (unbiased for the chosen leaves); the uniform spreading
    inside a leaf adds the data's non-uniformity there. Noisy medians make the leaves hold similar counts, so
    dense regions get small leaves; medians of few records are mostly noise (see :func:`kd_hybrid`).

    Notes
    -----
    Running time: one exponential draw per node with at least two candidate positions (``< 2^depth``
    draws).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = kd_tree(np.arange(64).reshape(8, 8), 1.0, depth=3, rng=deterministic_source(3))
    >>> rel.value.shape, len(rel.parts["levels"])
    ((8, 8), 4)
    """
    return run(_kd_tree_plan(counts, epsilon, depth=depth, median_share=median_share, allocation=allocation,
                             neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _kd_tree_plan(counts: Any, epsilon: float, *, depth: Any, median_share: Any, allocation: Any,
                  neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`kd_tree` (nothing drawn or charged)."""
    arr, eps, nb, sens = _check_common(counts, epsilon, neighbours, accountant)
    depth = _default_bits(arr.shape) if depth is None else check.integer("depth", depth, minimum=1)
    if depth > _MAX_LEAF_BITS:
        raise InvalidParameter("depth", f"must be <= {_MAX_LEAF_BITS}")
    kinds = [_KD] * depth
    median_share, allocation = _check_tree(kinds, median_share, allocation)
    return _tree_plan(arr, eps, nb, sens, kinds, median_share, allocation, "kd_tree", {"depth": depth})


def kd_hybrid(counts: ArrayLike, epsilon: float, *, kd_levels: int = 4, quad_levels: int | None = None,
              median_share: float = 0.1, allocation: str = "geometric", order: str = "kd_first",
              neighbours: Neighbours | None = None, accountant: Accountant | None = None,
              rng: RandomSource | None = None, description: str = "") -> Release:
    """KD-hybrid (Cormode et al. 2012): ``kd_levels`` noisy-median KD levels **on top**, then ``quad_levels``
    data-independent quadtree levels below; ``2^kd_levels * 4^quad_levels`` leaves.

    Parameters
    ----------
    counts:
        The true counts, a 2-D array of non-negative integers over a public fine grid (total below 2^52).
    epsilon:
        The privacy parameter, > 0.
    kd_levels:
        The number of KD (noisy-median) levels, >= 1 (default 4).
    quad_levels:
        The number of quadtree levels, >= 0, with ``kd_levels + 2 * quad_levels <= 20``. ``None`` chooses
        ``floor((ceil(log2(rows * cols)) - 2 - kd_levels) / 2)`` levels (at least 0; 5 for 256x256 with the
        default ``kd_levels=4``), from the public shape only.
    median_share:
        The share of ``epsilon`` spent on the noisy medians (in (0, 1); default 0.1).
    allocation:
        ``"geometric"`` or ``"equal"`` (see Cost).
    order:
        ``"kd_first"`` (default, Cormode et al.'s) or ``"quad_first"`` (the book's variant; see Errata).
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
    Pure ``epsilon``-DP. Under add/remove one record (the default) a record changes every split quality by at
    most ``s = 1`` and lies in one node per level, so each KD level (one exponential mechanism per node, nodes
    disjoint) costs its median budget by parallel composition, and each level's counts form a histogram of a
    partition (L1 sensitivity ``s``) costing its count budget. Under replace-one ``s = 2`` (qualities and counts
    are calibrated to 2; a moved record changes two nodes by 1 each); under a privacy unit ``s = max_rows``.
    The tree shape is post-processing of released noisy medians (adaptive sequential composition).

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness; the steps then run without a charge.
    Budget: ``median_share * epsilon`` split equally over the KD levels; ``(1 - median_share) epsilon`` over
    the ``kd_levels + quad_levels + 1`` count levels, geometrically (each level ``f^(1/3)`` times its parent's
    share, ``f`` = 2 below a KD level, 4 below a quadtree level) or equally.
    ``sum(median_epsilons) + sum(count_epsilons) <= epsilon`` (exact rational check).

    Output law
    ----------
    As :func:`kd_tree` with the quadtree levels splitting every node into four at the midpoints
    ``floor((lo+hi)/2)`` (data-independent, free): noisy counts at every level, constrained inference,
    uniform expansion. ``parts`` as :func:`kd_tree` (``splits`` holds ``(row_mid, col_mid)`` for quadtree
    levels).

    Error
    -----
    As :func:`kd_tree`: BLUE leaf estimates plus the non-uniformity inside each leaf; the quadtree levels
    below the medians avoid spending budget on medians of a few records.

    Errata
    ------
    Order: Cormode et al.'s hybrid uses the data-dependent median splits for the first levels, where
    nodes hold many records and the noisy median is accurate, and switches to free midpoint splits lower down,
    where medians of a few records are mostly noise. Li et al. §4.3.4 (p. 61) describes it the other way
    round ("a quadtree for the first few levels ... then the KD-tree approach"). dpkit's default
    ``order="kd_first"`` is Cormode et al.'s; ``order="quad_first"`` builds the book's variant (same budget
    split) for comparison.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = kd_hybrid(np.arange(64).reshape(8, 8), 1.0, kd_levels=2, quad_levels=1, rng=deterministic_source(3))
    >>> rel.value.shape, rel.params["levels"]
    ((8, 8), ('kd', 'kd', 'quad'))
    """
    return run(_kd_hybrid_plan(counts, epsilon, kd_levels=kd_levels, quad_levels=quad_levels,
                               median_share=median_share, allocation=allocation, order=order, neighbours=neighbours,
                               accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _kd_hybrid_plan(counts: Any, epsilon: float, *, kd_levels: Any, quad_levels: Any, median_share: Any,
                    allocation: Any, order: Any, neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`kd_hybrid` (nothing drawn or charged)."""
    arr, eps, nb, sens = _check_common(counts, epsilon, neighbours, accountant)
    kd_levels = check.integer("kd_levels", kd_levels, minimum=1)
    if quad_levels is None:
        quad_levels = max(0, (_default_bits(arr.shape) - kd_levels) // 2)
    quad_levels = check.integer("quad_levels", quad_levels, minimum=0)
    if kd_levels + 2 * quad_levels > _MAX_LEAF_BITS:
        raise InvalidParameter("quad_levels", f"kd_levels + 2 * quad_levels must be <= {_MAX_LEAF_BITS}")
    if not isinstance(order, str) or order not in ORDERS:
        raise InvalidParameter("order", "must be 'kd_first' or 'quad_first'")
    kinds = [_KD] * kd_levels + [_QUAD] * quad_levels
    if order == "quad_first":
        kinds = kinds[::-1]
    median_share, allocation = _check_tree(kinds, median_share, allocation)
    return _tree_plan(arr, eps, nb, sens, kinds, median_share, allocation, "kd_hybrid",
                      {"kd_levels": kd_levels, "quad_levels": quad_levels, "order": order})
