"""Decision-tree and grid classifiers on categorical features (issue #14): DiffPID3 and PrivPfC.

Both work on **categorical** features given as integer level codes with **declared** level counts
(``categories``), as :func:`~dpkit.learn.categorical_nb` does. A numeric feature must be discretised by the caller
on public edges (fixed bins of its declared bounds, round census values, ...) chosen without looking at the data:
dpkit never reads levels or edges from the data.

- :func:`diffpid3` / :class:`DecisionTreeClassifier`: Friedman & Schuster's differentially private ID3 (KDD 2010;
  Li et al. 2016, Algorithm 7): a tree grown level by level, each node spending ``epsilon / (2 (d + 1))`` on a noisy
  record count (the stopping rule) and as much again on either the split attribute (exponential mechanism on a
  low-sensitivity purity score) or the leaf's noisy class counts; the nodes of one level hold disjoint records
  (parallel composition).
- :func:`privpfc` / :class:`PrivPfCClassifier`: Su, Cao & Li's PrivPfC (arXiv:1504.05997; Li et al. 2016,
  Algorithm 11): one grid (a subset of the attributes, each at a public coarsening level) chosen in a **single**
  exponential-mechanism step with a quality that estimates the number of training records the noisy grid would
  classify correctly, then noisy class counts in every cell of that grid; a record is classified by its cell's
  noisy majority.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.learn._base import (
    Estimator,
    ModelClassifier,
    labels,
    level_codes,
    level_counts,
    matrix,
    same_arrays,
    unit_sensitivity,
)
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, run
from dpkit.mechanisms.discrete import discrete_laplace_plan, discrete_laplace_scale
from dpkit.mechanisms.selection import exponential_plan

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["QUALITY_SENSITIVITY", "DecisionTreeClassifier", "DecisionTreeModel", "GridModel", "PrivPfCClassifier",
           "diffpid3", "privpfc"]

#: Largest declared tree depth.
MAX_DEPTH = 64
#: Largest number of nodes a tree may have (``max_nodes``).
MAX_NODES = 10_000_000
#: Largest pool of candidate grids (``max_grids``) and largest number of cells of one grid (``max_cells``).
MAX_GRIDS = 1_000_000
MAX_CELLS = 10_000_000
#: ``sup_u e^-u (u^2 / 4 - 1 / 2) = e^-(1 + sqrt 3) (1 + sqrt 3) / 2 = 0.088909...``, rounded up: the quality of
#: :func:`privpfc` changes by at most ``1 + this`` when one record is added or removed (module Notes).
_QUALITY_EXCESS = 0.089
#: The sensitivity of :func:`privpfc`'s grid quality per added/removed record.
QUALITY_SENSITIVITY = 1.0 + _QUALITY_EXCESS


def _first_argmax(a: np.ndarray) -> np.ndarray:
    return np.asarray(np.argmax(a, axis=-1))


def _proba(counts: np.ndarray) -> np.ndarray:
    """Class probabilities from noisy counts: the counts clamped at 0 and normalised; a row with no positive count
    puts all its mass on its (first) largest count, so the argmax of the probabilities is the argmax of the
    counts."""
    c = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    tot = c.sum(axis=1, keepdims=True)
    empty = tot[:, 0] <= 0
    if np.any(empty):
        c[empty] = 0.0
        c[np.flatnonzero(empty), _first_argmax(np.asarray(counts)[empty])] = 1.0
        tot = c.sum(axis=1, keepdims=True)
    return c / tot


# -- DiffPID3 --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class DecisionTreeModel:
    """A fitted tree (the value of :func:`diffpid3`), as flat arrays over its nodes (node 0 is the root).

    ``feature[i]`` is the attribute node ``i`` splits on, or -1 for a leaf; an internal node's children are the
    nodes ``children[i] + v`` for the attribute's levels ``v = 0 .. n_categories[feature[i]] - 1``; ``counts[i]``
    (K) the noisy class counts of a leaf (zeros at internal nodes); ``label[i]`` the index in ``classes`` of a
    leaf's noisy majority (-1 at internal nodes); ``depth[i]`` the node's depth.
    """

    classes: np.ndarray
    feature: np.ndarray
    children: np.ndarray
    counts: np.ndarray
    label: np.ndarray
    depth: np.ndarray
    n_categories: np.ndarray

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DecisionTreeModel):
            return NotImplemented
        return same_arrays(self, other, ("classes", "feature", "children", "counts", "label", "depth",
                                          "n_categories"))

    __hash__ = None  # type: ignore[assignment]

    @property
    def node_count(self) -> int:
        return int(self.feature.size)

    def apply(self, X: Any) -> np.ndarray:
        """The leaf every row falls in (post-processing)."""
        codes = level_codes(X, self.n_categories, predict=True)
        node = np.zeros(codes.shape[0], dtype=np.int64)
        rows = np.arange(codes.shape[0])
        for _ in range(int(self.depth.max()) + 1):
            f = self.feature[node]
            inner = f >= 0
            if not np.any(inner):
                break
            node[inner] = self.children[node[inner]] + codes[rows[inner], f[inner]]
        return node

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n, K): the leaf's noisy counts clamped at 0, normalised."""
        return _proba(self.counts[self.apply(X)])

    def predict(self, X: Any) -> np.ndarray:
        return self.classes[self.label[self.apply(X)]]


def _purity(table: np.ndarray, criterion: str) -> np.ndarray:
    """Purity scores of splits from their (nodes, values, classes) count tables, one per node."""
    if criterion == "max":
        return table.max(axis=2).sum(axis=1).astype(np.float64)
    t = table.astype(np.float64)
    tot = t.sum(axis=2)
    sq = (t * t).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        impurity = np.where(tot > 0, tot - sq / np.where(tot > 0, tot, 1.0), 0.0)
    return -impurity.sum(axis=1)


def _diffpid3_plan(X: Any, y: Any, epsilon: Any, *, classes: Any, categories: Any, max_depth: Any, criterion: Any,
                   max_nodes: Any, neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    arr = matrix("X", X)
    n, d = arr.shape
    levels = level_counts(categories, d)
    codes = level_codes(arr, levels)
    cls, cy = labels(y, classes, n)
    eps = check.epsilon(epsilon)
    depth_max = check.integer("max_depth", max_depth, minimum=0, maximum=MAX_DEPTH)
    crit = check.choice("criterion", criterion, ("max", "gini"))
    cap = check.integer("max_nodes", max_nodes, minimum=1, maximum=MAX_NODES)
    nb, u = unit_sensitivity(neighbours, accountant)
    replace = is_replace(nb)
    k = int(cls.size)
    depth = min(depth_max, d)  # a path uses each attribute at most once: deeper levels never exist
    eps_level = _exact.float_at_most(Fraction(eps) / (2 * (depth + 1)))
    if not eps_level > 0.0:
        raise InvalidParameter("epsilon", "is too small for the number of levels")
    # the purity score's sensitivity: "max" moves by at most one per record added or removed (and all scores in
    # the same direction); replacing a record moves it within [-1, 1] too (one max down, another up by at most
    # one each), but not monotonically. Gini (Friedman & Schuster) moves by less than 2 per record.
    rows = u // 2 if replace else u
    if crit == "max":
        q_sens, mono = float(rows), not replace
    else:
        q_sens, mono = 2.0 * u, False
    scale = discrete_laplace_scale(u, eps_level)
    threshold = math.sqrt(2.0) * scale  # the noise's standard deviation, sqrt(2)/eps' in the paper (u = 1)
    params = {"epsilon": eps, "epsilon_level": eps_level, "max_depth": depth_max, "depth": depth,
              "criterion": crit, "quality_sensitivity": q_sens, "monotonic": mono, "max_nodes": cap,
              "classes": k, "features": d, "unit": u, "scale": scale, "stop_threshold": threshold}

    def draw(rng: RandomSource) -> Outcome:
        feature: list[int] = [-1]
        children: list[int] = [-1]
        node_depth: list[int] = [0]
        counts: list[np.ndarray] = [np.zeros(k, dtype=np.int64)]
        noisy_n: list[int] = [0]
        remaining: dict[int, np.ndarray] = {0: np.ones(d, dtype=bool)}
        active = [0]
        where = np.zeros(n, dtype=np.int64)  # the position in ``active`` of each record's node, -1 once at a leaf
        for level in range(depth + 1):
            m = len(active)
            live = where >= 0
            true_n = np.bincount(where[live], minlength=m).astype(np.int64)
            n_hat = np.asarray(discrete_laplace_plan(true_n, u, eps_level).sample(rng).value, dtype=np.int64)
            split: list[int] = []  # positions in ``active``
            budget = cap - len(feature)
            for pos, node in enumerate(active):
                noisy_n[node] = int(n_hat[pos])
                rem = remaining[node]
                if level == depth or not np.any(rem):
                    continue
                t = int(levels[rem].max())
                if n_hat[pos] / (t * k) < threshold or budget < t:
                    continue
                split.append(pos)
                budget -= t
            is_split = np.zeros(m, dtype=bool)
            is_split[split] = True
            leaves = np.flatnonzero(~is_split)
            # leaves: noisy class counts (one vector for all leaves of the level: disjoint records)
            if leaves.size:
                leaf_of = np.full(m, -1, dtype=np.int64)
                leaf_of[leaves] = np.arange(leaves.size)
                at_leaf = live & (leaf_of[np.where(live, where, 0)] >= 0)
                cells = leaf_of[where[at_leaf]] * k + cy[at_leaf]
                table = np.bincount(cells, minlength=leaves.size * k).astype(np.int64)
                noisy = np.asarray(discrete_laplace_plan(table, u, eps_level).sample(rng).value, dtype=np.int64)
                for i, lp in enumerate(leaves.tolist()):
                    counts[active[lp]] = noisy[i * k:(i + 1) * k]
            if not split:
                break
            # split nodes: purity of every attribute (vectorised over the nodes), one exponential mechanism each
            sp = np.asarray(split, dtype=np.int64)
            split_of = np.full(m, -1, dtype=np.int64)
            split_of[sp] = np.arange(sp.size)
            at_split = live & (split_of[np.where(live, where, 0)] >= 0)
            s_idx = split_of[where[at_split]]
            s_y = cy[at_split]
            s_x = codes[at_split]
            scores = np.empty((sp.size, d))
            for j in range(d):
                v = int(levels[j])
                tab = np.bincount((s_idx * v + s_x[:, j]) * k + s_y, minlength=sp.size * v * k)
                scores[:, j] = _purity(tab.reshape(sp.size, v, k), crit)
            new_where = np.full(n, -1, dtype=np.int64)
            next_active: list[int] = []
            child_pos: dict[int, int] = {}
            for i, pos in enumerate(split):
                node = active[pos]
                rem = remaining[node]
                cand = np.flatnonzero(rem)
                pick = int(exponential_plan(scores[i, cand], q_sens, eps_level, monotonic=mono).sample(rng).value)
                a = int(cand[pick])
                feature[node] = a
                children[node] = len(feature)
                child_pos[pos] = len(next_active)
                sub = rem.copy()
                sub[a] = False
                for _ in range(int(levels[a])):
                    c = len(feature)
                    feature.append(-1)
                    children.append(-1)
                    node_depth.append(level + 1)
                    counts.append(np.zeros(k, dtype=np.int64))
                    noisy_n.append(0)
                    remaining[c] = sub
                    next_active.append(c)
            # move every record of a split node to its child
            first = np.full(m, -1, dtype=np.int64)
            attr = np.zeros(m, dtype=np.int64)
            for pos in split:
                first[pos] = child_pos[pos]
                attr[pos] = feature[active[pos]]
            rows_split = np.flatnonzero(at_split)
            wpos = where[rows_split]
            new_where[rows_split] = first[wpos] + codes[rows_split, attr[wpos]]
            where = new_where
            active = next_active
        cnt = np.vstack(counts).astype(np.int64)
        feat = np.asarray(feature, dtype=np.int64)
        label = np.where(feat < 0, _first_argmax(cnt), -1).astype(np.int64)
        model = DecisionTreeModel(classes=cls, feature=feat, children=np.asarray(children, dtype=np.int64),
                                  counts=cnt, label=label, depth=np.asarray(node_depth, dtype=np.int64),
                                  n_categories=levels)
        return Outcome(model, parts={"node_count": np.asarray(noisy_n, dtype=np.int64), "leaf_counts": cnt},
                       params={"nodes": int(feat.size), "leaves": int(np.sum(feat < 0))})

    return Plan(mechanism="diffpid3", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def diffpid3(X: Any, y: Any, epsilon: float, *, classes: Any, categories: Any, max_depth: int = 5,
             criterion: str = "max", max_nodes: int = 100_000, neighbours: Neighbours | None = None,
             accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """A decision tree by DiffPID3 (Friedman & Schuster 2010; Li et al. 2016, Algorithm 7), pure epsilon-DP.

    Parameters
    ----------
    X:
        Private features, shape (n, d): integer level codes, feature ``j`` in ``0 .. categories[j] - 1``. A
        numeric feature must be discretised by the caller on **public** edges (e.g. equal-width bins of its
        declared bounds); dpkit never reads levels or edges from the data.
    y:
        Private labels, one per row, each one of ``classes``.
    epsilon:
        The privacy parameter, > 0.
    classes:
        The public label set (required).
    categories:
        The public number of levels of every feature (required): one integer for all or one per feature. A code
        outside them is refused (:class:`~dpkit.core.errors.InvalidData`), never clamped.
    max_depth:
        The largest depth ``D`` of the tree (default 5; 0 gives a single leaf). A path splits on each attribute at
        most once, so the depth used is ``d' = min(max_depth, d)``, and every level gets ``epsilon' = epsilon /
        (2 (d' + 1))``.
    criterion:
        The purity score of a split: ``"max"`` (default: the number of records the split's majority labels would
        classify correctly, ``sum_v max_c tau_vc``; sensitivity 1, monotonic under add/remove) or ``"gini"``
        (minus the Gini impurity count, ``-sum_v (tau_v - sum_c tau_vc^2 / tau_v)``; sensitivity 2).
    max_nodes:
        A public cap on the number of nodes (default 100,000): a node whose children could push the tree past
        it becomes a leaf (decided from released noisy counts only).
    neighbours:
        Add/remove one record (default, or the accountant's relation), replace one record, or a privacy unit of
        ``max_rows`` records.
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure). The tree is grown level by level, from the root (level 0) to level ``d'``. At every
    level the nodes partition the records that have not reached a leaf (a record follows one path), so the
    mechanisms of one level's nodes see disjoint data (parallel composition) and a record takes part in at most
    two mechanisms per level, each ``epsilon'``-DP:

    1. the node's record count ``N`` plus discrete Laplace noise (sensitivity ``u``, scale ``u / epsilon'``);
    2. either (a node that stops: the last level, no attribute left, or ``N_hat / (t K) < sqrt 2 u /
       epsilon'`` with ``t`` the largest level count of the attributes left, ``K`` the number of classes, or
       the ``max_nodes`` cap) the leaf's K class counts plus discrete Laplace noise (one record moves one count:
       sensitivity ``u``; the counts of all of a level's nodes form one vector, so this holds whichever nodes
       the changed records fall in), or (a node that splits) the exponential mechanism over the attributes
       left with the purity score.

    ``u`` is 1 under add/remove, 2 under replace-one (a replacement is a removal and an addition), ``r`` (``2
    r``) for a privacy unit of ``r`` rows. The exponential mechanisms of a level are separate draws, one per
    split node, and the changed records may fall in different nodes; their losses add up. With ``P ∝ exp(kappa
    q)``, a node's loss is at most ``kappa (up + down)``, ``up``/``down`` the largest rise/fall of any of its
    scores (only one of them when every score moves the same way). ``"max"`` (``sum_v max_c tau_vc``) rises or
    falls by at most one per record added or removed, every score the same way: under add/remove ``kappa =
    epsilon' / r`` (monotonic, ``P ∝ exp(epsilon' q / r)``) and a node holding ``s`` of the ``r`` rows loses at
    most ``epsilon' s / r``; under replace-one ``kappa = epsilon' / (2 r)`` and a node with ``s`` rows removed
    and ``s'`` added loses at most ``epsilon' (s + s') / (2 r)``. ``"gini"`` moves by less than 2 per record
    (Friedman & Schuster; ``Delta = 2 u``, ``kappa = epsilon' / (4 u)``, not monotonic): a node with ``s``
    changed rows loses at most ``epsilon' s / u``. So in every case each changed row (removed or added) costs at
    most ``epsilon' / u`` in the second mechanism of its node (the leaf-count vector, sensitivity ``u``, or its
    node's exponential mechanism), and at most ``u`` rows change: a level's second step costs at most
    ``epsilon'``, as its noisy counts ``N`` do.

    Which nodes exist, stop or split is decided from released values only (post-processing). Summed over the
    ``d' + 1`` levels: ``2 (d' + 1) epsilon' <= epsilon``.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any noise is drawn; a refused charge
    or an invalid argument draws nothing.

    Output law
    ----------
    The value is a :class:`DecisionTreeModel`. Every node's record count is released as the true count plus
    independent discrete Laplace noise of scale ``params["scale"]`` (``parts["node_count"]``); every leaf's class
    counts likewise (``parts["leaf_counts"]``, zeros at internal nodes), and the leaf predicts the (first)
    largest of them. A split node's attribute ``a`` is drawn by :func:`~dpkit.mechanisms.exponential_plan`'s
    exact sampler with ``P[a] ∝ exp(kappa q_a)``, ``kappa`` about ``epsilon' / quality_sensitivity``
    (monotonic) or half that, over the attributes not yet used on the node's path; its children are one node
    per declared level of ``a`` (a level with no training record included).

    Error
    -----
    The tree is data-dependent and no accuracy interval is stated. The noise of every count has standard
    deviation about ``sqrt 2 u 2 (d' + 1) / epsilon``; the stopping rule makes a node a leaf when its count per
    (level x class) cell is below that, so deep trees need many records per leaf; the attribute choice is within
    ``(2 quality_sensitivity / epsilon') ln(d / beta)`` of the best purity with probability ``1 - beta``
    (halved when monotonic). Attributes with many levels make the stopping rule strict (``t`` is the largest
    level count left).

    Notes
    -----
    Li et al. print the exponential mechanism as Friedman & Schuster do, ``exp(epsilon' q / (2 Delta))``; with
    the ``"max"`` score under add/remove every score moves the same way, so the monotonic form (half the noise)
    is used, which is still ``epsilon'``-DP (Li et al. 2016, Cor. 2.19). The stopping threshold ``sqrt 2 /
    epsilon'`` is the noise's standard deviation for ``u = 1``; it is scaled by ``u`` with the noise. Counting is
    vectorised per level (``np.bincount`` on combined codes); each split node draws its own exponential
    mechanism.

    References
    ----------
    Friedman & Schuster, "Data mining with differential privacy", KDD 2010. Li, Lyu, Su, Yang, "Differential
    Privacy: From Theory to Practice", 2016, Sec. 5.3.2.

    Examples
    --------
    >>> import numpy as np, dpkit
    >>> from dpkit.learn import diffpid3
    >>> X = np.array([[0, 1], [0, 0], [1, 1], [1, 0]] * 100)
    >>> y = np.array([0, 0, 1, 1] * 100)
    >>> rel = diffpid3(X, y, 2.0, classes=[0, 1], categories=2, max_depth=1, rng=dpkit.deterministic_source(1))
    >>> int(rel.value.feature[0]), rel.value.predict(np.array([[0, 1], [1, 1]])).tolist()
    (0, [0, 1])
    """
    return run(_diffpid3_plan(X, y, epsilon, classes=classes, categories=categories, max_depth=max_depth,
                              criterion=criterion, max_nodes=max_nodes, neighbours=neighbours,
                              accountant=accountant),
               accountant=accountant, rng=rng, description=description)


# -- PrivPfC ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class GridModel:
    """A fitted PrivPfC grid classifier (the value of :func:`privpfc`).

    ``features`` the selected attributes (a tuple of indices, possibly empty), ``maps`` one integer array per
    selected attribute mapping its declared level codes to the grid's coarse levels, ``shape`` the coarse level
    counts, ``counts`` (cells, K) the noisy class counts rounded to non-negative integers (cells in row-major
    order of ``shape``), ``label`` (cells,) the index in ``classes`` a cell predicts (its noisy majority, or
    ``default`` for a cell whose counts are all zero), ``default`` the majority of the summed counts.
    """

    classes: np.ndarray
    features: tuple[int, ...]
    maps: tuple[np.ndarray, ...]
    shape: tuple[int, ...]
    counts: np.ndarray
    label: np.ndarray
    default: int
    n_categories: np.ndarray

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GridModel):
            return NotImplemented
        return (self.features == other.features and self.shape == other.shape and self.default == other.default
                and same_arrays(self, other, ("classes", "maps", "counts", "label", "n_categories")))

    __hash__ = None  # type: ignore[assignment]

    def cell(self, X: Any) -> np.ndarray:
        """The grid cell of every row (post-processing)."""
        codes = level_codes(X, self.n_categories, predict=True)
        idx = np.zeros(codes.shape[0], dtype=np.int64)
        for j, m, v in zip(self.features, self.maps, self.shape, strict=True):
            idx = idx * v + m[codes[:, j]]
        return idx

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n, K): the cell's counts normalised; an empty cell gets the summed counts'."""
        c = self.counts.astype(np.float64)
        tot = c.sum(axis=1, keepdims=True)
        glob = c.sum(axis=0)
        if glob.sum() > 0:
            glob = glob / glob.sum()
        else:
            glob = np.zeros_like(glob)
            glob[self.default] = 1.0
        p = np.where(tot > 0, c / np.where(tot > 0, tot, 1.0), glob[None, :])
        return np.asarray(p[self.cell(X)])

    def predict(self, X: Any) -> np.ndarray:
        return self.classes[self.label[self.cell(X)]]


def _levels_of(hierarchies: Any, levels: np.ndarray) -> list[list[np.ndarray]]:
    """Every feature's public coarsenings: the identity first, then the declared maps (validated)."""
    d = int(levels.size)
    out = [[np.arange(int(v), dtype=np.int64)] for v in levels]
    if hierarchies is None:
        return out
    if not isinstance(hierarchies, dict):
        raise WrongType("hierarchies", "a dict {feature index: [level maps]}")
    for key, maps in hierarchies.items():
        j = check.integer("hierarchies", key, minimum=0, maximum=d - 1)
        if isinstance(maps, (str, bytes)) or not hasattr(maps, "__iter__"):
            raise WrongType("hierarchies", "a dict {feature index: [level maps]}")
        for m in maps:
            try:
                arr = np.asarray(m)
            except Exception:
                raise WrongType("hierarchies", "level maps of integers") from None
            if arr.shape != (int(levels[j]),) or arr.dtype.kind not in "iu":
                raise InvalidParameter("hierarchies", "each map must give one integer code per declared level")
            arr = arr.astype(np.int64)
            if arr.min() < 0 or set(np.unique(arr).tolist()) != set(range(int(arr.max()) + 1)):
                raise InvalidParameter("hierarchies", "each map must use the coarse codes 0 .. m - 1, every one")
            out[j].append(arr)
    return out


def _shares(value: Any) -> tuple[float, float, float]:
    if value is None or isinstance(value, (str, bytes)):
        raise WrongType("shares", "three positive shares (count, selection, cells)")
    try:
        items = list(value)
    except TypeError:
        raise WrongType("shares", "three positive shares (count, selection, cells)") from None
    if len(items) != 3:
        raise InvalidParameter("shares", "must give three shares (count, selection, cells)")
    a, b, c = (check.positive("shares", v) for v in items)
    return a, b, c


def _quality_terms(table: np.ndarray, b: float) -> float:
    """Sum over cells of ``m2 + g(m1 - m2)`` (top two counts of each cell, ``g(x) = x (1 - p(x))``, ``p(x) =
    (1 + x / (2 b)) e^(-x / b) / 2`` the chance that Laplace(b) noise on both counts swaps them)."""
    if table.shape[1] == 2:
        m1 = table.max(axis=1).astype(np.float64)
        m2 = table.min(axis=1).astype(np.float64)
    else:
        top = np.sort(table, axis=1)
        m1 = top[:, -1].astype(np.float64)
        m2 = top[:, -2].astype(np.float64)
    x = m1 - m2
    ux = x / b
    p = 0.5 * (1.0 + 0.5 * ux) * np.exp(-ux)
    return float(np.sum(m2 + x * (1.0 - p)))


def _privpfc_plan(X: Any, y: Any, epsilon: Any, *, classes: Any, categories: Any, hierarchies: Any,
                  max_attributes: Any, max_grids: Any, max_cells: Any, cell_factor: Any, shares: Any,
                  neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    arr = matrix("X", X)
    n, d = arr.shape
    levels = level_counts(categories, d)
    codes = level_codes(arr, levels)
    cls, cy = labels(y, classes, n)
    eps = check.epsilon(epsilon)
    coarse = _levels_of(hierarchies, levels)
    top = min(d, check.integer("max_attributes", max_attributes, minimum=0, maximum=MAX_DEPTH))
    pool_cap = check.integer("max_grids", max_grids, minimum=1, maximum=MAX_GRIDS)
    cell_cap = check.integer("max_cells", max_cells, minimum=1, maximum=MAX_CELLS)
    factor = check.positive("cell_factor", cell_factor)
    w = _shares(shares)
    nb, u = unit_sensitivity(neighbours, accountant)
    k = int(cls.size)
    if cell_cap * k > 10 * MAX_CELLS:
        raise InvalidParameter("max_cells", "too many cells x classes for the count tables")
    eps_n, eps_sh, eps_ph = _exact.split_budget(eps, w, name="shares")
    count_plan = discrete_laplace_plan(np.int64(n), u, eps_n)
    b = discrete_laplace_scale(u, eps_ph)
    q_sens = u * QUALITY_SENSITIVITY
    params = {"epsilon": eps, "epsilon_count": eps_n, "epsilon_select": eps_sh, "epsilon_cells": eps_ph,
              "shares": w, "max_attributes": top, "max_grids": pool_cap, "max_cells": cell_cap,
              "cell_factor": factor, "classes": k, "features": d, "unit": u, "count_scale": count_plan.scale,
              "cell_scale": b, "quality_sensitivity": q_sens}

    def enumerate_pool(limit: float) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        pool: list[tuple[tuple[int, ...], tuple[int, ...]]] = [((), ())]  # the one-cell grid
        for size in range(1, top + 1):
            for subset in itertools.combinations(range(d), size):
                for choice in itertools.product(*(range(len(coarse[j])) for j in subset)):
                    if len(pool) >= pool_cap:
                        return pool
                    cells = 1
                    for j, c in zip(subset, choice, strict=True):
                        cells *= int(coarse[j][c].max()) + 1
                    if cells <= limit:
                        pool.append((subset, choice))
        return pool

    def table_of(subset: tuple[int, ...], choice: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, ...]]:
        idx = np.zeros(n, dtype=np.int64)
        shape = []
        for j, c in zip(subset, choice, strict=True):
            m = coarse[j][c]
            v = int(m.max()) + 1
            idx = idx * v + m[codes[:, j]]
            shape.append(v)
        cells = int(np.prod(shape)) if shape else 1
        tab = np.bincount(idx * k + cy, minlength=cells * k).reshape(cells, k)
        return tab.astype(np.int64), tuple(shape)

    def draw(rng: RandomSource) -> Outcome:
        n_hat = int(count_plan.sample(rng).value)
        limit = max(1.0, min(float(cell_cap), factor * n_hat * eps_ph))
        pool = enumerate_pool(limit)
        # quality of every grid: one pass over the records per attribute subset at its finest levels, coarser
        # levels summed from that table
        scores = np.empty(len(pool))
        fine_cache: dict[tuple[int, ...], np.ndarray] = {}
        for i, (subset, choice) in enumerate(pool):
            fine_shape = [int(levels[j]) for j in subset]
            if int(np.prod(fine_shape, dtype=np.float64)) * k <= 4_000_000:
                fine = fine_cache.get(subset)
                if fine is None:
                    fine = table_of(subset, tuple(0 for _ in subset))[0].reshape(*fine_shape, k)
                    fine_cache = {subset: fine}
                tab = fine
                for axis, (j, c) in enumerate(zip(subset, choice, strict=True)):
                    if c:
                        m = coarse[j][c]
                        onehot = np.zeros((int(levels[j]), int(m.max()) + 1), dtype=np.int64)
                        onehot[np.arange(int(levels[j])), m] = 1
                        tab = np.moveaxis(np.tensordot(tab, onehot, axes=([axis], [0])), -1, axis)
                scores[i] = _quality_terms(tab.reshape(-1, k), b)
            else:
                scores[i] = _quality_terms(table_of(subset, choice)[0], b)
        pick = int(exponential_plan(scores, q_sens, eps_sh).sample(rng).value)
        subset, choice = pool[pick]
        tab, shape = table_of(subset, choice)
        raw = np.asarray(discrete_laplace_plan(tab.ravel(), u, eps_ph).sample(rng).value, dtype=np.int64)
        noisy = np.maximum(raw, 0).reshape(tab.shape)
        default = int(_first_argmax(noisy.sum(axis=0)))
        label = np.where(noisy.sum(axis=1) > 0, _first_argmax(noisy), default).astype(np.int64)
        model = GridModel(classes=cls, features=tuple(int(j) for j in subset),
                          maps=tuple(coarse[j][c] for j, c in zip(subset, choice, strict=True)), shape=shape,
                          counts=noisy, label=label, default=default, n_categories=levels)
        parts = {"noisy_n": n_hat, "pool": pool, "selected": pick, "cell_counts": raw.reshape(tab.shape)}
        return Outcome(model, parts=parts, params={"pool_size": len(pool), "cell_limit": limit,
                                                   "cells": int(tab.shape[0])})

    return Plan(mechanism="privpfc", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def privpfc(X: Any, y: Any, epsilon: float, *, classes: Any, categories: Any, hierarchies: Any = None,
            max_attributes: int = 3, max_grids: int = 2000, max_cells: int = 100_000, cell_factor: float = 0.2,
            shares: Any = (0.03, 0.37, 0.6), neighbours: Neighbours | None = None,
            accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """A grid classifier by PrivPfC (Su, Cao & Li 2016; Li et al. 2016, Algorithm 11), pure epsilon-DP.

    Parameters
    ----------
    X:
        Private features, shape (n, d): integer level codes, feature ``j`` in ``0 .. categories[j] - 1``. A
        numeric feature must be discretised by the caller on **public** edges; coarser public discretisations
        (taxonomy levels) are declared in ``hierarchies``.
    y:
        Private labels, one per row, each one of ``classes``.
    epsilon:
        The privacy parameter, > 0.
    classes:
        The public label set (required).
    categories:
        The public number of levels of every feature (required): one integer for all or one per feature.
    hierarchies:
        Optional public coarsenings: ``{j: [map, ...]}``, each map an integer array of length ``categories[j]``
        sending every level to a coarse code ``0 .. m - 1`` (all used), e.g. merged adjacent bins of a
        discretised numeric feature or a taxonomy level. Every feature also has its declared levels (the finest).
    max_attributes:
        The largest number of attributes of a candidate grid (public cap, default 3, at most 64; 0 gives the
        one-cell grid).
    max_grids:
        ``Omega``, the largest pool of candidate grids (default 2,000).
    max_cells:
        A public cap on the cells of a candidate grid (default 100,000), besides the paper's ``T``.
    cell_factor:
        ``T = cell_factor N_hat epsilon_cells`` caps the cells of a candidate (the paper's 20%: default 0.2).
    shares:
        The split of ``epsilon`` over the noisy count, the grid selection and the cell counts (default the paper's
        ``(0.03, 0.37, 0.6)``).
    neighbours:
        Add/remove one record (default, or the accountant's relation), replace one record, or a privacy unit of
        ``max_rows`` records.
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure), by sequential composition of three ``epsilon_*``-DP steps whose budgets sum to at most
    ``epsilon`` (``shares`` split exactly, rounded down):

    1. ``N_hat = n + discrete Laplace`` (sensitivity ``u``, ``epsilon_count``);
    2. the pool of candidate grids is a function of ``N_hat`` and public parameters only: grids with at most
       ``max_attributes`` attributes, each at one of its public levels, of at most ``T = max(1, min(max_cells,
       cell_factor N_hat epsilon_cells))`` cells, enumerated level-wise (the one-cell grid, then one attribute,
       two, ...; attributes in index order, each attribute's levels finest first) until ``max_grids``; one grid is
       chosen by the exponential mechanism at ``epsilon_select`` with the quality ``q`` below, whose sensitivity
       is ``QUALITY_SENSITIVITY u`` (``1.089 u``);
    3. the chosen grid's (cell, class) counts plus discrete Laplace noise: a record lies in one cell and one
       class, so the whole table has L1 sensitivity ``u`` (``epsilon_cells``).

    The quality of a grid is ``q = sum_cells m2 + g(m1 - m2)``, ``m1 >= m2`` a cell's two largest class counts,
    ``g(x) = x (1 - p(x))`` and ``p(x) = (1 + x / (2 b)) e^(-x / b) / 2`` the probability that Laplace noise of
    scale ``b`` (the cell noise's scale) on both counts reverses their order: for two classes, ``q`` is the
    expected number of training records the noisy grid classifies correctly. Adding a record to a cell raises
    ``m1`` by one, or ``m2`` by one, or neither (the top two of the counts after adding one to a count are the
    old top two with one of them raised); ``g' = 1 + e^(-x/b) (x^2 / (4 b^2) - 1 / 2)`` lies in ``[1/2, 1 +
    c]`` with ``c = e^-(1 + sqrt 3) (1 + sqrt 3) / 2 < 0.089``, so ``q`` moves by ``g(x + 1) - g(x)`` in
    ``[1/2, 1 + c]`` or by ``1 - (g(x) - g(x - 1))`` in ``[-c, 1/2]``: ``|Delta q| <= 1 + c`` whatever ``b`` is,
    and ``u (1 + c)`` for ``u`` records (``u`` = 1 add/remove, 2 replace-one, ``r`` or ``2 r`` for privacy units).
    The scores are not monotonic, so ``P ∝ exp(epsilon_select q / (2 Delta))``.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any noise is drawn; a refused charge
    or an invalid argument draws nothing.

    Output law
    ----------
    ``parts["noisy_n"]``: ``n`` plus discrete Laplace noise of scale ``params["count_scale"]``; ``parts["pool"]``
    the candidate grids (``(attributes, level choices)``, a function of ``noisy_n``), ``parts["selected"]`` the
    index drawn by :func:`~dpkit.mechanisms.exponential_plan`'s exact sampler with ``P[i] ∝ exp(kappa q_i)``,
    ``kappa`` about ``epsilon_select / (2 quality_sensitivity)``; ``parts["cell_counts"]`` the chosen grid's
    (cells, K) counts plus independent discrete Laplace noise of scale ``params["cell_scale"]``. The value is a
    :class:`GridModel` whose counts are those clamped at 0 (the nearest non-negative integers): a cell predicts
    its (first) largest count, an all-zero cell the (first) largest of the summed counts.

    Error
    -----
    No accuracy interval is stated. The quality trades the resolution of a grid against the noise: a cell whose
    majority margin is a few ``b = 1 / epsilon_cells`` is classified about as well as by its true majority,
    smaller margins about half the time. The selection is within ``(2 Delta / epsilon_select) ln(|pool| / beta)``
    of the best quality in the pool with probability ``1 - beta``. Only the pool is searched: with many attributes
    ``max_grids`` stops the level-wise enumeration early, favouring the first attributes.

    Errata
    ------
    Li et al.'s Algorithm 11 prints the selection weight as ``p_i = e^(-(q_i epsilon_sh) / 2)``, a loss, while
    the text says the quality estimates the expected number of correctly classified records (to be maximised),
    and it omits the sensitivity. Here the weight is ``exp(+epsilon_select q / (2 Delta))`` with ``Delta =
    1.089 u`` (tests/learn/test_tree.py checks that the selection favours the grid with more correct
    classifications with exactly these probabilities). The seed states neither the quality's formula nor its
    sensitivity; the formula above (the two-class expected correct count, on the top two classes for K > 2) and
    its sensitivity bound are derived here.

    Notes
    -----
    Li et al. perturb ``(n_c^+, n_c^-)`` per cell with ``Lap(1 / epsilon_ph)`` and round to the nearest
    non-negative integers; the discrete Laplace law used here gives integers directly (rounding is then
    clamping). The quality uses the continuous Laplace law as its noise model; it is only a score (its
    sensitivity, not its accuracy, carries the guarantee).

    References
    ----------
    Su, Cao, Li, "PrivPfC: differentially private data publication for classification", arXiv:1504.05997
    (2016). Li, Lyu, Su, Yang, "Differential Privacy: From Theory to Practice", 2016, Sec. 5.5.4.

    Examples
    --------
    >>> import numpy as np, dpkit
    >>> from dpkit.learn import privpfc
    >>> X = np.array([[0, 1], [0, 0], [1, 1], [1, 0]] * 100)
    >>> y = np.array([0, 0, 1, 1] * 100)
    >>> rel = privpfc(X, y, 2.0, classes=[0, 1], categories=2, rng=dpkit.deterministic_source(1))
    >>> 0 in rel.value.features, rel.value.predict(np.array([[0, 1], [1, 1]])).tolist()
    (True, [0, 1])
    """
    return run(_privpfc_plan(X, y, epsilon, classes=classes, categories=categories, hierarchies=hierarchies,
                             max_attributes=max_attributes, max_grids=max_grids, max_cells=max_cells,
                             cell_factor=cell_factor, shares=shares, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


# -- estimators ------------------------------------------------------------------------------------------------
class _TreeMixin(ModelClassifier):
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities from the noisy counts (clamped at 0), shape (n, K), columns in ``classes_``
        order; their argmax is ``predict``."""
        return np.asarray(self._model().predict_proba(X))


class DecisionTreeClassifier(_TreeMixin, Estimator):
    """A decision tree, epsilon-DP (scikit-learn style); ``fit`` calls :func:`diffpid3` (``method="diffpid3"``,
    the only method: the parameter is kept for other tree builders).

    Features are integer level codes (``0 .. categories[j] - 1``; discretise numeric features on public edges).
    Fitted attributes: ``classes_``, ``n_features_in_``, ``tree_`` (the :class:`DecisionTreeModel`),
    ``node_count_``, ``n_categories_`` and ``release_``. Each ``fit`` charges ``PureDP(epsilon)`` to ``accountant``
    (shared by clones). PrivPfC, which releases a grid rather than a tree, is :class:`PrivPfCClassifier`.
    """

    def __init__(self, epsilon: float = 1.0, *, classes: Any = None, categories: Any = None, max_depth: int = 5,
                 criterion: str = "max", method: str = "diffpid3", max_nodes: int = 100_000, accountant: Any = None,
                 rng: Any = None) -> None:
        self.epsilon = epsilon
        self.classes = classes
        self.categories = categories
        self.max_depth = max_depth
        self.criterion = criterion
        self.method = method
        self.max_nodes = max_nodes
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> DecisionTreeClassifier:
        """Fit on private ``X``, ``y`` (charges ``epsilon``); returns ``self``."""
        check.choice("method", self.method, ("diffpid3",))
        rel = diffpid3(X, y, self.epsilon, classes=self.classes, categories=self.categories,
                       max_depth=self.max_depth, criterion=self.criterion, max_nodes=self.max_nodes,
                       accountant=self.accountant, rng=self.rng)
        m: DecisionTreeModel = rel.value
        self.release_ = rel
        self.tree_ = m
        self.classes_ = m.classes
        self.node_count_ = m.node_count
        self.n_categories_ = m.n_categories
        self.n_features_in_ = int(m.n_categories.size)
        return self


class PrivPfCClassifier(_TreeMixin, Estimator):
    """The PrivPfC grid classifier, epsilon-DP (scikit-learn style); ``fit`` calls :func:`privpfc`.

    Features are integer level codes (``0 .. categories[j] - 1``). Fitted attributes: ``classes_``,
    ``n_features_in_``, ``grid_`` (the :class:`GridModel`), ``features_`` (the selected attributes),
    ``n_categories_`` and ``release_``. Each ``fit`` charges ``PureDP(epsilon)`` to ``accountant`` (shared by
    clones).
    """

    def __init__(self, epsilon: float = 1.0, *, classes: Any = None, categories: Any = None,
                 hierarchies: Any = None, max_attributes: int = 3, max_grids: int = 2000, max_cells: int = 100_000,
                 cell_factor: float = 0.2, shares: Any = (0.03, 0.37, 0.6), accountant: Any = None,
                 rng: Any = None) -> None:
        self.epsilon = epsilon
        self.classes = classes
        self.categories = categories
        self.hierarchies = hierarchies
        self.max_attributes = max_attributes
        self.max_grids = max_grids
        self.max_cells = max_cells
        self.cell_factor = cell_factor
        self.shares = shares
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> PrivPfCClassifier:
        """Fit on private ``X``, ``y`` (charges ``epsilon``); returns ``self``."""
        rel = privpfc(X, y, self.epsilon, classes=self.classes, categories=self.categories,
                      hierarchies=self.hierarchies, max_attributes=self.max_attributes, max_grids=self.max_grids,
                      max_cells=self.max_cells, cell_factor=self.cell_factor, shares=self.shares,
                      accountant=self.accountant, rng=self.rng)
        m: GridModel = rel.value
        self.release_ = rel
        self.grid_ = m
        self.features_ = m.features
        self.classes_ = m.classes
        self.n_categories_ = m.n_categories
        self.n_features_in_ = int(m.n_categories.size)
        return self
