"""2-D hierarchical histograms (each node splits into b x b children) with constrained inference, and Cormode et
al.'s (2012) quadtree (Li et al. §4.2.6 and §4.3.4)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.histograms.hierarchical import _dlap_variance, _infer, tree_height
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["hierarchical2d", "level_epsilons_2d", "quadtree", "tree_order"]

ALLOCATIONS = ("equal", "geometric")
INFERENCES = ("closed", "ls", "nnls", "none")
_MAX_CELLS = 2**24


def tree_order(level: int, b: int) -> np.ndarray:
    """Flat (row-major) grid indices of the ``b^level x b^level`` nodes of a level, in **tree order**: node
    ``k`` of level ``j`` has children ``k b² .. k b² + b² - 1`` at level ``j + 1`` (base-``b²`` digits, one per
    level, each digit ``r b + c`` a child's row and column within its parent).

    >>> tree_order(1, 2).tolist(), tree_order(2, 2)[:4].tolist()
    ([0, 1, 2, 3], [0, 1, 4, 5])
    """
    n = b**level
    t = np.arange(n * n, dtype=np.int64)
    r = np.zeros_like(t)
    c = np.zeros_like(t)
    for i in range(level):
        place = b ** (level - 1 - i)
        d = (t // (b * b) ** (level - 1 - i)) % (b * b)
        r += (d // b) * place
        c += (d % b) * place
    return r * n + c


def level_epsilons_2d(epsilon: float, b: int, levels: list[int], allocation: str) -> list[float]:
    """Per-level budgets for the released levels ``levels`` (depths, top first; the root is depth 0), summing
    to at most ``epsilon`` exactly. ``"equal"``: equal parts. ``"geometric"``: each level gets ``cbrt(b)``
    times its parent's share, i.e. ``eps_j ∝ b^{j/3}`` (for a quadtree with root, ``b = 2``, depths
    ``0..h``, this is Cormode et al.'s ``eps_i = 2^{(h-i)/3} eps (2^{1/3}-1)/(2^{(h+1)/3}-1)`` with
    ``i = h - j`` counted from the leaves)."""
    shares = [1.0] * len(levels) if allocation == "equal" else [float(b) ** (j / 3.0) for j in levels]
    return _common.split_budget(epsilon, shares)


def _spread(est: np.ndarray, w: int, shape: tuple[int, int]) -> np.ndarray:
    """Leaf-block estimates (a grid) -> per-cell values, each block's estimate spread uniformly over its real
    (non-padding) cells. Public post-processing (uniformity assumption inside a leaf)."""
    m1, m2 = shape
    rows = np.minimum(np.arange(est.shape[0]) * w + w, m1) - np.minimum(np.arange(est.shape[0]) * w, m1)
    cols = np.minimum(np.arange(est.shape[1]) * w + w, m2) - np.minimum(np.arange(est.shape[1]) * w, m2)
    size = np.outer(rows, cols).astype(np.float64)
    per = np.divide(est, size, out=np.zeros_like(est, dtype=np.float64), where=size > 0)
    cells = np.repeat(np.repeat(per, w, axis=0), w, axis=1)
    return np.ascontiguousarray(cells[:m1, :m2], dtype=np.float64)


def _strategy_2d(b: int, depths: list[int], leaf_depth: int, keep: np.ndarray) -> sp.csr_matrix:
    """Rows: the nodes of the released levels (row-major per level, top first); columns: the leaf blocks with
    ``keep`` true (row-major). Entry 1 where the node contains the block."""
    n = b**leaf_depth
    blocks = np.flatnonzero(keep.ravel())
    br, bc = blocks // n, blocks % n
    rows, offset = [], 0
    for j in depths:
        w = b ** (leaf_depth - j)
        rows.append(offset + (br // w) * b**j + bc // w)
        offset += b ** (2 * j)
    r = np.concatenate(rows)
    c = np.tile(np.arange(blocks.size), len(depths))
    return sp.csr_matrix((np.ones(r.size), (r, c)), shape=(offset, blocks.size))


def _tree2d_plan(counts: Any, epsilon: float, *, branching: Any, allocation: Any, inference: Any, depth: Any,
                 root: bool, neighbours: Neighbours | None, accountant: Accountant | None, mechanism: str) -> Plan:
    """The validated plan of :func:`hierarchical2d` and :func:`quadtree` (nothing drawn or charged)."""
    arr = _common.counts(counts, ndim=2)
    epsilon = check.epsilon(epsilon)
    b = check.integer("branching", branching, minimum=2)
    if not isinstance(allocation, str) or allocation not in ALLOCATIONS:
        raise InvalidParameter("allocation", "must be 'equal' or 'geometric'")
    if not isinstance(inference, str) or inference not in INFERENCES:
        raise InvalidParameter("inference", "must be 'closed', 'ls', 'nnls' or 'none'")
    m1, m2 = (int(x) for x in arr.shape)
    full = max(tree_height(m1, b), tree_height(m2, b))
    if b ** (2 * full) > _MAX_CELLS:
        raise InvalidParameter("branching", "the padded grid is too large (over 2^24 cells)")
    name = "max_depth" if mechanism == "quadtree" else "depth"
    h = full if depth is None else check.integer(name, depth, minimum=1)
    if h > full:
        raise InvalidParameter(name, "must not exceed the height at which leaves are single cells")
    nb = _common.resolve_neighbours(neighbours, accountant)
    sens = _common.record_sensitivity(nb)
    depths = list(range(0 if root else 1, h + 1))
    eps_levels = level_epsilons_2d(epsilon, b, depths, allocation)
    scales = [discrete_laplace_scale(sens, e) for e in eps_levels]
    side = b**full
    w = b ** (full - h)
    params = {"epsilon": epsilon, "branching": b, "height": h, "full_height": full, "root": root,
              "allocation": allocation, "inference": inference, "shape": (m1, m2), "padded_shape": (side, side),
              "leaf_block": w, "sensitivity_per_level": sens, "level_depths": tuple(depths),
              "level_epsilons": tuple(eps_levels), "level_scales": tuple(scales)}

    def draw(rng: RandomSource) -> Outcome:
        grid = np.zeros((side, side), dtype=np.int64)
        grid[:m1, :m2] = arr
        true_levels = []
        for j in depths:
            k = side // b**j
            true_levels.append(grid.reshape(b**j, k, b**j, k).sum(axis=(1, 3)))
        noisy = [_common.noisy_counts(lv.ravel(), sens, e, rng).reshape(lv.shape)
                 for lv, e in zip(true_levels, eps_levels, strict=True)]
        parts: dict[str, Any] = {"levels": noisy}
        variances = [_dlap_variance(t) for t in scales]
        if inference == "closed":
            orders = [tree_order(j, b) for j in depths]
            tree = [lv.ravel()[o] for lv, o in zip(noisy, orders, strict=True)]
            est_tree = _infer(tree, [1.0 / v for v in variances], b * b)[-len(depths):]
            est = []
            for j, o, e in zip(depths, orders, est_tree, strict=True):
                g = np.empty(b ** (2 * j))
                g[o] = e
                est.append(g.reshape(b**j, b**j))
            parts["consistent_levels"] = est
            leaf = est[-1]
        elif inference in ("ls", "nnls"):
            from dpkit.histograms import inference as _inference

            n = b**h
            idx = np.arange(n) * w
            keep = np.outer(idx < m1, idx < m2)
            # exact on the b²-ary tree in tree order, O(h b^2h) per step (the same optimum as the general solvers)
            orders = [tree_order(j, b) for j in depths]
            tree = [lv.ravel()[o].astype(np.float64) for lv, o in zip(noisy, orders, strict=True)]
            fixed = ~keep.ravel()[orders[-1]]
            leaf = np.zeros((n, n))
            try:
                if inference == "ls":
                    est_t = _inference._tree_gls(tree, variances, b * b, fixed)
                else:
                    est_t, _ = _inference._tree_nnls(tree, variances, b * b, n * n, pad=fixed)
                flat = np.empty(n * n)
                flat[orders[-1]] = est_t
                leaf = flat.reshape(n, n)
                leaf[~keep] = 0.0
            except ArithmeticError:  # pragma: no cover - the active set did not settle: general solver
                a = _strategy_2d(b, depths, h, keep)
                y = np.concatenate([lv.ravel() for lv in noisy]).astype(np.float64)
                var = np.repeat(variances, [b ** (2 * j) for j in depths])
                solve = _inference.least_squares if inference == "ls" else _inference.nnls
                leaf[keep] = solve(a, y, var)
            est = []
            for j in depths:
                k = n // b**j
                est.append(leaf.reshape(b**j, k, b**j, k).sum(axis=(1, 3)))
            parts["consistent_levels"] = est
        else:
            leaf = noisy[-1].astype(np.float64)
        return Outcome(_spread(np.asarray(leaf, dtype=np.float64), w, (m1, m2)), parts=parts)

    return Plan(mechanism=mechanism, cost=PureDP(epsilon), draw=draw, sensitivity=float(sens * len(depths)),
                scale=scales[-1], params=params, neighbours=nb)


def hierarchical2d(counts: ArrayLike, epsilon: float, *, branching: int = 2, allocation: str = "equal",
                   inference: str = "closed", depth: int | None = None, root: bool = False,
                   neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                   rng: RandomSource | None = None, description: str = "") -> Release:
    """2-D hierarchical histogram: a tree over a public ``m1 x m2`` grid in which every node splits into
    ``b x b`` children, noisy counts at every level, constrained inference.

    Parameters
    ----------
    counts:
        The true counts, a 2-D array of non-negative integers over a public grid (its shape is public).
    epsilon:
        The privacy parameter, > 0.
    branching:
        ``b >= 2``: every node splits into ``b x b`` children.
    allocation:
        ``"equal"`` (equal parts) or ``"geometric"`` (each level ``cbrt(b)`` times its parent's share:
        ``eps_j ∝ b^{j/3}``; :func:`level_epsilons_2d`).
    inference:
        ``"closed"``, ``"ls"``, ``"nnls"`` or ``"none"`` (see Output law).
    depth:
        The deepest released level, ``1..H`` (default ``H``: leaves are single cells).
    root:
        Whether the root (the total, level 0) is released too.
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
    Pure ``epsilon``-DP. Each level is a partition of the records: L1 sensitivity ``s = 1`` per level under
    add/remove one record (default), ``2`` under replace-one, ``max_rows`` under a privacy unit; levels
    compose sequentially with exact budgets ``Σ_j s/t_j <= Σ_j eps_j <= epsilon`` (discrete Laplace, scale
    ``t_j >= s/eps_j``). Inference and the uniform spreading are post-processing.

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness (per-level budgets in
    ``params["level_epsilons"]``, summing to at most ``epsilon`` exactly).

    Output law
    ----------
    Both axes are padded with public zero cells to ``b^H``, ``H = max(ceil(log_b m1), ceil(log_b m2), 1)``.
    Level ``j`` (root = 0) is the ``b^j x b^j`` grid of blocks; levels ``1..depth`` are released (and the
    root if ``root``), each block count with independent discrete Laplace noise of scale ``t_j``. With a
    smaller ``depth`` the leaves are blocks of ``b^(H-depth)`` cells a side and ``value`` spreads each leaf's
    estimate uniformly over its real cells.

    Inference (post-processing): ``"closed"``: the generalised two-phase closed form of Li et al. §4.2.3 with
    ``b²`` children per node (weighted averaging bottom-up with per-level precisions, then mean consistency
    top-down sharing the residual equally among the ``b²`` children): the BLUE over the padded tree.
    ``"ls"`` / ``"nnls"``: weighted (non-negative) least squares over the leaf blocks that hold real cells
    (the optimum of :func:`~dpkit.histograms.least_squares` / :func:`~dpkit.histograms.nnls` on the level
    strategy), computed exactly on the ``b²``-ary tree: two-pass Gaussian belief propagation for ``"ls"``, a
    primal-dual active set on it for ``"nnls"`` (as :func:`hierarchical`). Measured (2 cores, CPU): ``"nnls"``
    at 128×128 cells 0.024 s (the general sparse solver took 51 s), at 256×256 with branching 4 0.04 s (236 s,
    and the general solver had not converged: the tree solution meets the KKT conditions to 1e-12).
    ``"none"``: raw noisy leaves.

    The :class:`Release`: ``value`` float64 ``(m1, m2)``; ``parts["levels"]`` the noisy integer grids (top
    first), ``parts["consistent_levels"]`` the inferred grids (unless ``"none"``); ``params`` the budgets and
    scales.

    Error
    -----
    Unbiased within each leaf block for ``"closed"``/``"ls"``/``"none"`` (``"nnls"`` is biased); a leaf
    block larger than a cell adds the non-uniformity of the cells inside it. Li et al. §4.2.6: in 2-D a
    hierarchy's worst-case MSAE is ``b(√m - 1)⌈log_{b²} m⌉²`` (units of ``V_u``) and "the flat histogram
    wins for ``m < 4096`` cells". Exact averages over all rectangles (BLUE, equal allocation) put the
    crossover lower: flat wins for every ``m <= 2209`` (47 x 47), a two-level hierarchy (``b ≈ √n``) wins at
    49 x 49 and from 54 x 54 on (pinned in ``tests/histograms/test_oracles.py``). Use
    :func:`~dpkit.histograms.identity` on small grids.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = hierarchical2d([[1, 2, 3], [4, 5, 6]], 1.0, rng=deterministic_source(1))
    >>> rel.value.shape, rel.params["height"], [lv.shape for lv in rel.parts["levels"]]
    ((2, 3), 2, [(2, 2), (4, 4)])
    """
    root = check.flag("root", root)
    return run(_tree2d_plan(counts, epsilon, branching=branching, allocation=allocation, inference=inference,
                            depth=depth, root=root, neighbours=neighbours, accountant=accountant,
                            mechanism="hierarchical2d"),
               accountant=accountant, rng=rng, description=description)


def quadtree(counts: ArrayLike, epsilon: float, *, max_depth: int | None = None, allocation: str = "geometric",
             inference: str = "closed", neighbours: Neighbours | None = None, accountant: Accountant | None = None,
             rng: RandomSource | None = None, description: str = "") -> Release:
    """Cormode et al.'s (2012) private quadtree: midpoint splits (no budget spent on the structure), noisy
    counts at every node from the root (depth 0) to ``max_depth``, geometric budget, least-squares inference.

    This is :func:`hierarchical2d` with ``b = 2``, ``root=True`` and ``depth=max_depth``.

    Parameters
    ----------
    counts:
        The true counts, a 2-D array of non-negative integers over a public grid. Cormode et al. work on
        continuous coordinates; here the domain is the public grid of ``counts`` (bin the points first with
        public edges).
    epsilon:
        The privacy parameter, > 0.
    max_depth:
        The deepest released level (default: the depth at which leaves are single cells of the public grid).
    allocation:
        ``"geometric"`` (default, Cormode et al.'s) or ``"equal"``.
    inference:
        ``"closed"``, ``"ls"``, ``"nnls"`` or ``"none"`` (as :func:`hierarchical2d`).
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
    Same as :func:`hierarchical2d`: pure ``epsilon``-DP; every level (root included) is a partition of the
    records with per-level sensitivity 1 under add/remove, 2 under replace-one, ``max_rows`` per unit, and
    the levels compose sequentially within ``epsilon`` (exact). The midpoint splits are data-independent.

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness.

    Output law
    ----------
    As :func:`hierarchical2d` with ``b = 2`` and the root released. With ``allocation="geometric"``
    (default), level ``i`` counted from the leaves (``i = 0``) to the root (``i = h``) gets Cormode et al.'s
    ``eps_i = 2^{(h-i)/3} · epsilon · (2^{1/3} - 1)/(2^{(h+1)/3} - 1)``: each level ``2^{1/3}`` times its
    parent's budget toward the leaves. ``Release.mechanism`` is ``"quadtree"``.

    Error
    -----
    As :func:`hierarchical2d` (BLUE with ``"closed"``; the geometric budget favours the many small
    leaf-level nodes that most queries use).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = quadtree([[1, 2], [3, 4]], 1.0, rng=deterministic_source(1))
    >>> rel.params["level_depths"], rel.mechanism
    ((0, 1), 'quadtree')
    """
    return run(_tree2d_plan(counts, epsilon, branching=2, allocation=allocation, inference=inference,
                            depth=max_depth, root=True, neighbours=neighbours, accountant=accountant,
                            mechanism="quadtree"),
               accountant=accountant, rng=rng, description=description)
