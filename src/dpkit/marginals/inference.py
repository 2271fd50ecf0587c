"""Inference from noisy marginals: a graphical model fitted to noisy measurements (Private-PGM style).

Given noisy measurements ``y_i ≈ Q_i mu_{C_i}`` of marginals of a table over a :class:`~dpkit.marginals.Domain`
(each with a public noise standard deviation), :func:`estimate` finds a distribution whose marginals best fit
all of them: it minimises the weighted loss

    L2 (default):  L(mu) = 1/2 * sum_i || (Q_i mu_{C_i} - y_i) / std_i ||_2^2
    L1 (option):   L(mu) =       sum_i || Q_i mu_{C_i} - y_i ||_1 / std_i

over the marginals ``mu`` of distributions (scaled to the estimated number of records ``total``), within the
family of Markov random fields whose cliques are the measured attribute sets (McKenna, Sheldon, Miklau 2019,
"Graphical-model based estimation and inference for differential privacy"). Among the distributions with the
optimal marginals, the one found is the maximum-entropy one (the exponential-family solution).

How (all in numpy; written for dpkit, not copied from private-pgm):

- **structure**: the attribute graph (an edge between two attributes measured together) is triangulated by a
  greedy elimination order (min-fill and min-cells both tried, the cheaper kept); its maximal cliques joined by a
  maximum spanning tree over clique intersections form a junction tree. A junction-tree clique above
  ``max_cells`` cells (default 2**22) is refused with :class:`~dpkit.core.errors.InvalidParameter` naming its
  size and width;
- **inference**: exact belief propagation on the junction tree in log space (two passes, log-sum-exp);
- **fit**: entropic mirror descent on the clique log-potentials ``theta <- theta - alpha * dL/dmu`` with a
  backtracking step size (sufficient decrease against the Bregman divergence, i.e. ``total * KL``; the step grows
  again after each accepted step) for the L2 loss, and a decreasing step (best iterate kept) for the L1 loss;
- **answers**: :meth:`GraphicalModel.project` gives any marginal exactly (a subtree of the calibrated junction
  tree is eliminated), :meth:`GraphicalModel.synthetic` samples records exactly from the model.

Everything here is **post-processing** of already-released measurements: no private data is read, nothing is
charged, and the output is as private as the measurements it was fitted to.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.marginals.domain import Domain, Records
from dpkit.noise.source import RandomSource, resolve

__all__ = ["GraphicalModel", "Measurement", "estimate"]

#: Default largest junction-tree clique (cells) the exact inference accepts.
MAX_CELLS = 2**22
#: Most iterations :func:`estimate` accepts, and most records :meth:`GraphicalModel.synthetic` draws at once.
MAX_ITERS = 100_000
MAX_RECORDS = 2**26
#: Largest total (records) the fit accepts: beyond it float arithmetic on squared counts loses its range.
MAX_TOTAL = 2.0**53

Clique = tuple[str, ...]


# ---------------------------------------------------------------------------------------------------------------
# measurements
# ---------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    """A noisy measurement of one marginal: ``values ≈ query @ marginal(attrs).ravel()`` with noise of standard
    deviation ``std`` (``query`` None: the identity, ``values`` the noisy marginal itself, shaped
    ``domain.shape_of(attrs)`` or flattened). ``attrs`` are in domain order (``()`` measures the total count).

    Checked here: types, finite values, ``std > 0``, a 2-D finite ``query`` with one row per value. Checked by
    :func:`estimate` against the domain: known attributes in domain order, and the shapes.
    """

    attrs: tuple[str, ...]
    values: np.ndarray
    std: float
    query: np.ndarray | None = None

    def __post_init__(self) -> None:
        attrs = self.attrs
        if isinstance(attrs, str):
            attrs = (attrs,)
        if isinstance(attrs, (bytes, Mapping)) or not isinstance(attrs, Iterable):
            raise WrongType("attrs", "a sequence of attribute names")
        try:
            items = tuple(attrs)
        except Exception:
            raise WrongType("attrs", "a sequence of attribute names") from None
        if any(not isinstance(a, str) for a in items):
            raise WrongType("attrs", "a sequence of attribute names")
        if len(set(items)) != len(items):
            raise InvalidParameter("attrs", "lists an attribute twice")
        values = check.finite_array("values", check.as_array("values", self.values, "an array of noisy answers"),
                                    allow_empty=False)
        std = check.positive("std", self.std)
        query = self.query
        if query is not None:
            q = check.as_array("query", query, "a 2-D matrix of real numbers")
            if q.dtype == object or not (np.issubdtype(q.dtype, np.number) or q.dtype == bool) or np.iscomplexobj(q):
                raise WrongType("query", "a 2-D matrix of real numbers")
            q = q.astype(np.float64)
            if q.ndim != 2 or q.shape[0] == 0 or q.shape[1] == 0:
                raise InvalidParameter("query", "must be a non-empty 2-D matrix (rows x cells of the marginal)")
            if not np.isfinite(q).all():
                raise InvalidParameter("query", "must be finite")
            if values.size != q.shape[0]:
                raise InvalidData("values", "must hold one answer per row of query")
            values = values.ravel()
            query = q
        object.__setattr__(self, "attrs", items)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "std", std)
        object.__setattr__(self, "query", query)


# ---------------------------------------------------------------------------------------------------------------
# array helpers: arrays over attribute tuples in domain order
# ---------------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _shape(domain: Domain, attrs: Clique) -> tuple[int, ...]:
    """``domain.shape_of(attrs)`` for a validated attribute tuple (cached: the fit asks for it constantly)."""
    return domain.shape_of(attrs)


def _order(domain: Domain, attrs: Iterable[str]) -> Clique:
    s = set(attrs)
    return tuple(a for a in domain.attrs if a in s)


def _align(arr: np.ndarray, sub: Clique, full: Clique) -> np.ndarray:
    """``arr`` over ``sub`` reshaped to broadcast against an array over ``full`` (both in domain order)."""
    shape = []
    it = iter(arr.shape)
    for a in full:
        shape.append(next(it) if a in sub else 1)
    return arr.reshape(shape)


def _sum_to(arr: np.ndarray, full: Clique, keep: Clique) -> np.ndarray:
    axes = tuple(i for i, a in enumerate(full) if a not in keep)
    return arr.sum(axis=axes) if axes else arr


def _lse_to(arr: np.ndarray, full: Clique, keep: Clique) -> np.ndarray:
    """log-sum-exp of ``arr`` (over ``full``) down to ``keep``."""
    axes = tuple(i for i, a in enumerate(full) if a not in keep)
    if not axes:
        return arr
    m = arr.max(axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.exp(arr - m).sum(axis=axes, keepdims=True)) + m
    return out.reshape([s for i, s in enumerate(arr.shape) if i not in axes])


# ---------------------------------------------------------------------------------------------------------------
# junction tree
# ---------------------------------------------------------------------------------------------------------------
def _elimination_cliques(domain: Domain, edges: set[frozenset[str]], rule: str) -> list[frozenset[str]]:
    adj: dict[str, set[str]] = {a: set() for a in domain.attrs}
    for e in edges:
        a, b = tuple(e)
        adj[a].add(b)
        adj[b].add(a)
    size = dict(zip(domain.attrs, domain.shape, strict=True))
    rank = {a: i for i, a in enumerate(domain.attrs)}
    out: list[frozenset[str]] = []
    while adj:
        def key(v: str) -> tuple[float, float, int]:
            nb = adj[v]
            fill = sum(1 for x, y in itertools.combinations(nb, 2) if y not in adj[x])
            cells = math.prod(size[x] for x in nb) * size[v]
            return (fill, cells, rank[v]) if rule == "fill" else (cells, fill, rank[v])

        v = min(adj, key=key)
        nb = adj.pop(v)
        out.append(frozenset(nb | {v}))
        for x in nb:
            adj[x].discard(v)
            adj[x] |= nb - {x}
    return out


@dataclass
class _Tree:
    cliques: list[Clique]  # junction-tree cliques (domain order)
    parent: list[int]  # parent index (-1 for the root)
    order: list[int]  # breadth-first from the root
    seps: list[Clique]  # separator with the parent (() for the root)
    children: list[list[int]]
    hosts: dict[Clique, int] = dataclasses.field(default_factory=dict)  # clique -> a tree clique holding it
    # root -> (parent, order) of the tree re-rooted there (projections of sets spread over several cliques)
    rooted: dict[int, tuple[list[int], list[int]]] = dataclasses.field(default_factory=dict)

    def reroot(self, root: int) -> tuple[list[int], list[int]]:
        """``(parent, order)`` of the tree re-rooted at ``root`` (breadth-first order; cached)."""
        hit = self.rooted.get(root)
        if hit is not None:
            return hit
        k = len(self.cliques)
        nbrs: list[list[int]] = [[] for _ in range(k)]
        for i in range(k):
            if self.parent[i] >= 0:
                nbrs[i].append(self.parent[i])
                nbrs[self.parent[i]].append(i)
        parent = [-1] * k
        order = [root]
        for i in order:
            for j in nbrs[i]:
                if j != parent[i] and j != root and parent[j] < 0:
                    parent[j] = i
                    order.append(j)
        self.rooted[root] = (parent, order)
        return parent, order


def _junction_tree(domain: Domain, sets: Sequence[Clique], max_cells: int, param: str) -> _Tree:
    edges: set[frozenset[str]] = set()
    for s in sets:
        for a, b in itertools.combinations(s, 2):
            edges.add(frozenset((a, b)))
    best: list[frozenset[str]] | None = None
    best_cost: tuple[int, int] | None = None
    for rule in ("fill", "cells"):
        elim = _elimination_cliques(domain, edges, rule)
        maximal = [c for c in elim if not any(c < d for d in elim)]
        uniq = list(dict.fromkeys(maximal))
        cells = [domain.size(c) for c in uniq]
        cost = (max(cells), sum(cells))
        if best_cost is None or cost < best_cost:
            best, best_cost = uniq, cost
    assert best is not None and best_cost is not None
    if best_cost[0] > max_cells:
        big = max(best, key=domain.size)
        raise InvalidParameter(
            param, f"the junction tree needs a clique of {domain.size(big)} cells over {len(big)} attributes "
                   f"(tree width {len(big) - 1}), above the limit of {max_cells} cells: measure fewer or smaller "
                   "attribute sets, or raise max_cells")
    cliques = [_order(domain, c) for c in best]
    # maximum spanning tree over intersection sizes (Kruskal; zero-weight edges join independent components)
    k = len(cliques)
    pairs = []
    for i, j in itertools.combinations(range(k), 2):
        inter = set(cliques[i]) & set(cliques[j])
        pairs.append((-len(inter), -domain.size(inter), i, j))
    pairs.sort()
    comp = list(range(k))

    def find(x: int) -> int:
        while comp[x] != x:
            comp[x] = comp[comp[x]]
            x = comp[x]
        return x

    nbrs: list[list[int]] = [[] for _ in range(k)]
    for _, _, i, j in pairs:
        ri, rj = find(i), find(j)
        if ri != rj:
            comp[ri] = rj
            nbrs[i].append(j)
            nbrs[j].append(i)
    root = max(range(k), key=lambda i: (domain.size(cliques[i]), -i))
    parent = [-1] * k
    order = [root]
    seen = {root}
    for i in order:
        for j in nbrs[i]:
            if j not in seen:
                seen.add(j)
                parent[j] = i
                order.append(j)
    seps = [() if parent[i] < 0 else _order(domain, set(cliques[i]) & set(cliques[parent[i]])) for i in range(k)]
    children: list[list[int]] = [[] for _ in range(k)]
    for i in order[1:]:
        children[parent[i]].append(i)
    return _Tree(cliques, parent, order, seps, children)


def _contract(factors: Sequence[tuple[Clique, np.ndarray]], out: Clique) -> np.ndarray:
    """The product of ``factors`` (each over its attributes, all in one domain order) summed down to ``out``."""
    letters: dict[str, str] = {}
    for attrs, _ in factors:
        for a in attrs:
            if a not in letters:
                letters[a] = chr(ord("a") + len(letters)) if len(letters) < 26 else chr(ord("A") + len(letters) - 26)
    spec = ",".join("".join(letters[a] for a in attrs) for attrs, _ in factors)
    spec += "->" + "".join(letters[a] for a in out)
    return np.asarray(np.einsum(spec, *(arr for _, arr in factors), optimize=len(factors) > 2))


def _maximal(sets: Iterable[Clique]) -> list[Clique]:
    uniq = list(dict.fromkeys(sets))
    return [c for c in uniq if not any(set(c) < set(d) for d in uniq)]


# ---------------------------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------------------------
class GraphicalModel:
    """A Markov random field over a :class:`~dpkit.marginals.Domain`, scaled to ``total`` records.

    ``p(x) ∝ exp(sum_C theta_C(x_C))`` over the model's ``cliques`` (each ``theta_C`` an array shaped
    ``domain.shape_of(C)``); the marginals are computed exactly by belief propagation on a junction tree.
    Usually made by :func:`estimate`; built directly from log-potentials it is a plain (public) distribution.

    Post-processing only: a model fitted by :func:`estimate` is a function of released measurements, so it, its
    marginals and its synthetic records cost no privacy budget and are as private as those measurements.

    Parameters
    ----------
    domain : Domain
    potentials : mapping attribute set -> array
        The log-potentials ``theta_C`` (shape ``domain.shape_of(C)``, finite); attribute sets in domain order.
        Attributes in no set are uniform and independent of the rest.
    total : float
        The number of records the marginals are scaled to (> 0).
    max_cells : int
        Largest junction-tree clique accepted (cells); a larger one is refused naming its size.

    Attributes
    ----------
    domain, cliques (the potentials' attribute sets, domain order), total, junction_tree (the tree's cliques).
    """

    def __init__(self, domain: Domain, potentials: Mapping[Clique, Any], total: float, *,
                 max_cells: int = MAX_CELLS) -> None:
        if not isinstance(domain, Domain):
            raise WrongType("domain", "a dpkit.marginals.Domain")
        if not isinstance(potentials, Mapping):
            raise WrongType("potentials", "a mapping attribute set -> array of log-potentials")
        total = check.positive("total", total)
        if total > MAX_TOTAL:
            raise InvalidParameter("total", "must be <= 2**53")
        max_cells = check.integer("max_cells", max_cells, minimum=1, maximum=2**27)
        pots: dict[Clique, np.ndarray] = {}
        for key, arr in potentials.items():
            c = domain.canonical(key, "potentials")
            if c != (tuple(key) if not isinstance(key, str) else (key,)):
                raise InvalidParameter("potentials", "attribute sets must be in domain order")
            if domain.size(c) > max_cells:
                raise InvalidParameter("potentials", f"a clique has more than {max_cells} cells")
            a = check.finite_array("potentials", check.as_array("potentials", arr, "an array of log-potentials"),
                                   allow_empty=False)
            if a.shape != domain.shape_of(c):
                if a.size != domain.size(c):
                    raise InvalidParameter("potentials", "an array does not have its attribute set's shape")
                a = a.reshape(domain.shape_of(c))
            pots[c] = pots[c] + a if c in pots else a.copy()
        self._setup(domain, pots, total, max_cells)

    # -- internal construction (estimate builds models without re-validating) --
    @classmethod
    def _build(cls, domain: Domain, pots: dict[Clique, np.ndarray], total: float, max_cells: int,
               tree: _Tree | None = None) -> GraphicalModel:
        self = cls.__new__(cls)
        self._setup(domain, pots, total, max_cells, tree)
        return self

    def _setup(self, domain: Domain, pots: dict[Clique, np.ndarray], total: float, max_cells: int,
               tree: _Tree | None = None) -> None:
        covered = {a for c in pots for a in c}
        singles = [(a,) for a in domain.attrs if a not in covered]
        for s in singles:
            pots[s] = np.zeros(domain.shape_of(s))
        self.domain = domain
        self.total = float(total)
        self.max_cells = max_cells
        self._pots = pots
        self.cliques: tuple[Clique, ...] = tuple(c for c in pots if c not in singles) or tuple(pots)
        self._tree = tree if tree is not None else _junction_tree(domain, list(pots), max_cells, "potentials")
        self.junction_tree: tuple[Clique, ...] = tuple(self._tree.cliques)
        hosts = self._tree.hosts
        for c in pots:
            if c not in hosts:
                hosts[c] = next(i for i, j in enumerate(self._tree.cliques) if set(c) <= set(j))
        self._host = hosts
        self._calibrate()

    def _calibrate(self) -> None:
        t = self._tree
        psi = [np.zeros(_shape(self.domain, c)) for c in t.cliques]
        for c, th in self._pots.items():
            i = self._host[c]
            psi[i] = psi[i] + _align(th, c, t.cliques[i])
        up: dict[int, np.ndarray] = {}
        for i in reversed(t.order):
            b = psi[i]
            for ch in t.children[i]:
                b = b + _align(up[ch], t.seps[ch], t.cliques[i])
            psi[i] = b  # now the clique's potential times its children's messages
            if t.parent[i] >= 0:
                up[i] = _lse_to(b, t.cliques[i], t.seps[i])
        root = t.order[0]
        beliefs: list[np.ndarray] = [np.empty(0)] * len(t.cliques)
        beliefs[root] = psi[root]
        for i in t.order[1:]:
            p = t.parent[i]
            down = _lse_to(beliefs[p], t.cliques[p], t.seps[i]) - up[i]
            beliefs[i] = psi[i] + _align(down, t.seps[i], t.cliques[i])
        logz = float(_lse_to(beliefs[root], t.cliques[root], ()))
        self._logz = logz
        self._logp = [b - logz for b in beliefs]
        self._prob = [np.exp(b) for b in self._logp]
        self._subs: list[dict[Clique, np.ndarray]] = [{} for _ in t.cliques]  # cached clique sub-marginals
        self._conds: dict[tuple[int, Clique, Clique], np.ndarray] = {}  # cached clique conditionals
        self._sub_cells = 0

    #: Most cells of clique sub-marginals one model caches (projections reuse them).
    _SUB_CACHE_CELLS = 2**23

    def _sub(self, i: int, keep: Clique) -> np.ndarray:
        """Junction-tree clique ``i``'s probabilities summed down to ``keep`` (a subset, domain order), from the
        smallest cached sub-marginal holding ``keep`` (cached in turn while the cache is small)."""
        ci = self._tree.cliques[i]
        if keep == ci:
            return self._prob[i]
        cache = self._subs[i]
        hit = cache.get(keep)
        if hit is not None:
            return hit
        src_attrs, src = ci, self._prob[i]
        ks = set(keep)
        for a, arr in cache.items():
            if arr.size < src.size and ks <= set(a):
                src_attrs, src = a, arr
        out = _sum_to(src, src_attrs, keep)
        if self._sub_cells + out.size <= self._SUB_CACHE_CELLS:
            cache[keep] = out
            self._sub_cells += out.size
        return out

    # -- public --
    @property
    def potentials(self) -> dict[Clique, np.ndarray]:
        """A copy of the log-potentials (warm starts pass the model itself to :func:`estimate`)."""
        return {c: a.copy() for c, a in self._pots.items()}

    def _clique_marginal(self, c: Clique) -> np.ndarray:
        """Probabilities on ``c`` (domain order) when ``c`` lies in one junction-tree clique, else None-like."""
        i = self._host[c] if c in self._host else next(
            (i for i, j in enumerate(self._tree.cliques) if set(c) <= set(j)), -1)
        if i < 0:
            raise KeyError(c)
        return self._sub(i, c)  # from the smallest cached marginal of the clique that holds ``c``

    def project(self, attrs: Iterable[str]) -> np.ndarray:
        """The model's marginal on ``attrs`` (any attribute set; domain order), scaled to ``total``: an array of
        shape ``domain.shape_of(attrs)``. Exact: a clique's belief summed down, or for a set spread over several
        junction-tree cliques, variable elimination over the subtree holding it (each clique's conditional summed
        down first; refused with the size when an intermediate table would exceed ``max_cells``). Clique
        sub-marginals and conditionals are cached on the model, so projecting many sets is cheap."""
        c = self.domain.canonical(attrs)
        cells = self.domain.size(c)
        if cells > self.max_cells:
            raise InvalidParameter("attrs", f"the marginal has {cells} cells, above the limit of {self.max_cells}")
        t = self._tree
        for i, j in enumerate(t.cliques):
            if set(c) <= set(j):
                return self.total * self._sub(i, c)
        return self.total * self._eliminate(c)

    def _eliminate(self, target: Clique) -> np.ndarray:
        """The probabilities on ``target`` (spread over several junction-tree cliques), by variable elimination.

        The tree is re-rooted at the first clique (breadth-first) holding a target attribute; cliques whose
        subtree adds no target attribute beyond their separator are dropped (their conditionals sum to one). Each
        kept clique gives one factor: its table summed down to the attributes used outside it (its separator, its
        target attributes, its kept children's separators: any other attribute occurs in no other kept clique, by
        the running intersection property, so summing it out locally is exact), divided by its separator's
        marginal (its conditional; the root's is its marginal). Their product is the joint of the kept
        attributes; the non-target attributes are summed out one at a time, each time the one whose factors'
        product is smallest (refused with :class:`InvalidParameter` when that exceeds ``max_cells``)."""
        t = self._tree
        dom = self.domain
        tset = set(target)
        root = next(i for i in t.order if set(t.cliques[i]) & tset)
        parent, order = t.reroot(root)
        k = len(t.cliques)
        below: list[set[str]] = [set(t.cliques[i]) & tset for i in range(k)]
        for i in reversed(order[1:]):
            below[parent[i]] |= below[i]
        kept: list[int] = []
        seps: dict[int, Clique] = {}
        for i in order:
            sep = _order(dom, set(t.cliques[i]) & set(t.cliques[parent[i]])) if i != root else ()
            if i == root or below[i] - set(sep):  # else it sums to one given the separator
                kept.append(i)
                seps[i] = sep
        need: dict[int, set[str]] = {i: set(seps[i]) | (tset & set(t.cliques[i])) for i in kept}
        for i in kept:
            if i != root:
                need[parent[i]] |= set(seps[i])
        factors: list[tuple[Clique, np.ndarray]] = []
        for i in kept:
            attrs = _order(dom, need[i])
            factors.append((attrs, self._conditional(i, attrs, seps[i])))
        size = dict(zip(dom.attrs, dom.shape, strict=True))
        rest = {a for attrs, _ in factors for a in attrs} - tset
        while rest:
            best: tuple[int, int, str] | None = None
            for a in rest:
                union = set().union(*(f for f, _ in factors if a in f))
                cells = math.prod(size[x] for x in union)
                key = (cells, dom.attrs.index(a), a)
                if best is None or key < best:
                    best = key
            assert best is not None
            cells, _, a = best
            if cells > self.max_cells:
                raise InvalidParameter("attrs", f"eliminating to this set needs a table above the limit of "
                                                f"{self.max_cells} cells")
            use = [f for f in factors if a in f[0]]
            factors = [f for f in factors if a not in f[0]]
            out = _order(dom, set().union(*(f for f, _ in use)) - {a})
            factors.append((out, _contract(use, out)))
            rest.discard(a)
        arr = _contract(factors, target)
        return np.asarray(arr / arr.sum())

    def _conditional(self, i: int, attrs: Clique, sep: Clique) -> np.ndarray:
        """Clique ``i``'s probabilities on ``attrs`` divided by their marginal on ``sep`` (0 where that is 0)."""
        arr = self._sub(i, attrs)
        if not sep:
            return arr
        key = (i, attrs, sep)
        cache = self._conds
        hit = cache.get(key)
        if hit is not None:
            return hit
        ps = _align(_sum_to(arr, attrs, sep), sep, attrs)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(ps > 0, arr / ps, 0.0)
        if self._sub_cells + out.size <= self._SUB_CACHE_CELLS:
            cache[key] = out
            self._sub_cells += out.size
        return out

    def synthetic(self, n: int, rng: RandomSource | None = None, *, method: str = "sample") -> Records:
        """``n`` records drawn from the model (post-processing: no charge).

        ``method="sample"`` (default): exact independent draws. The root junction-tree clique's cells are drawn
        from its joint by inverse CDF on 53-bit uniforms from ``rng``; then, in breadth-first order, each child
        clique's new attributes from their conditional law given the separator's values already drawn. The rows
        are i.i.d. from the model: no row-order artefacts.

        ``method="round"``: the low-variance variant. Counts per root cell are the systematic rounding of
        ``n * p`` (one random offset: each count is the floor or the ceiling of its expectation, unbiased); for
        each child clique and each separator value ``s`` drawn ``n_s`` times, the counts of the new attributes
        are the systematic rounding of ``n_s * p(. | s)`` and those values are given to the ``n_s`` records in a
        uniformly random order (random keys from ``rng``), so that, given the separator, they are independent of
        every other attribute (mbi 1.1's "round" assigns them in row order, which creates spurious
        correlations). The rows are returned in a random order.
        """
        n = check.size_limit("n", n, MAX_RECORDS)
        rng = resolve(rng)
        method = check.choice("method", method, ("sample", "round"))
        t = self._tree
        d = self.domain
        codes = np.zeros((n, len(d)), dtype=np.int64)
        if n == 0:
            return Records(codes, d)
        col = {a: i for i, a in enumerate(d.attrs)}
        for i in t.order:
            ci, sep = t.cliques[i], t.seps[i]
            rest = tuple(a for a in ci if a not in sep)
            if not rest:
                continue
            axes = [ci.index(a) for a in sep] + [ci.index(a) for a in rest]
            table = np.transpose(self._prob[i], axes).reshape(d.size(sep), d.size(rest))
            rows = table.sum(axis=1, keepdims=True)
            cond = np.where(rows > 0, table / np.where(rows > 0, rows, 1.0), 1.0 / table.shape[1])
            cdf = np.cumsum(cond, axis=1)
            cdf /= cdf[:, -1:]
            cdf[:, -1] = 1.0
            s = (np.ravel_multi_index(tuple(codes[:, col[a]] for a in sep), d.shape_of(sep)) if sep
                 else np.zeros(n, dtype=np.int64))
            if method == "sample":
                r = _inverse_cdf(cdf, s, _uniform(rng, n))
            else:
                r = _round_assign(cdf, s, rng)
            new = np.unravel_index(r, d.shape_of(rest))
            for a, v in zip(rest, new, strict=True):
                codes[:, col[a]] = v
        if method == "round":
            codes = codes[_permutation(rng, n)]
        return Records(codes, d)

    def __eq__(self, other: object) -> bool:
        """Same domain, total and log-potentials (the same distribution, written the same way)."""
        if not isinstance(other, GraphicalModel):
            return NotImplemented
        return (self.domain == other.domain and self.total == other.total and self._pots.keys() == other._pots.keys()
                and all(np.array_equal(a, other._pots[c]) for c, a in self._pots.items()))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"GraphicalModel(attrs={len(self.domain)}, cliques={len(self.cliques)}, "
                f"junction_tree={len(self.junction_tree)}, total={self.total:g})")


def _uniform(rng: RandomSource, n: int) -> np.ndarray:
    return (rng.uint64(n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _permutation(rng: RandomSource, n: int) -> np.ndarray:
    return np.lexsort((np.arange(n), rng.uint64(n)))


def _inverse_cdf(cdf: np.ndarray, s: np.ndarray, u: np.ndarray) -> np.ndarray:
    """For each record, the first column ``k`` with ``cdf[s, k] > u`` (row-wise inverse CDF)."""
    n, m = s.size, cdf.shape[1]
    out = np.empty(n, dtype=np.int64)
    if m <= 64:
        step = max(1, 2**22 // m)
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            out[lo:hi] = (cdf[s[lo:hi]] <= u[lo:hi, None]).sum(axis=1)
    else:
        order = np.argsort(s, kind="stable")
        ss = s[order]
        starts = np.flatnonzero(np.r_[True, ss[1:] != ss[:-1]])
        ends = np.r_[starts[1:], n]
        for a, b in zip(starts, ends, strict=True):
            idx = order[a:b]
            out[idx] = np.searchsorted(cdf[ss[a]], u[idx], side="right")
    return np.minimum(out, m - 1)


def _round_assign(cdf: np.ndarray, s: np.ndarray, rng: RandomSource) -> np.ndarray:
    """Systematic rounding of ``n_s * p(.|s)`` per separator value, assigned to the ``n_s`` records in a random
    order."""
    n, (k, m) = s.size, cdf.shape
    ns = np.bincount(s, minlength=k).astype(np.float64)
    u0 = _uniform(rng, k)
    bounds = np.ceil(ns[:, None] * cdf - u0[:, None])
    bounds[:, -1] = ns  # exact: ceil(n_s - u0) = n_s for u0 in [0, 1)
    counts = np.diff(bounds, axis=1, prepend=0.0).astype(np.int64)
    values = np.repeat(np.tile(np.arange(m, dtype=np.int64), k), counts.ravel())
    order = np.lexsort((np.arange(n), rng.uint64(n), s))  # grouped by s, random order within each group
    out = np.empty(n, dtype=np.int64)
    out[order] = values
    return out


# ---------------------------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class _Term:
    attrs: Clique
    factor: Clique  # the model clique the measurement is attached to
    y: np.ndarray  # flat
    std: float
    query: np.ndarray | None


def _check_measurements(domain: Domain, measurements: Any) -> list[Measurement]:
    if isinstance(measurements, (str, bytes, Mapping)) or not isinstance(measurements, (Sequence, Iterable)):
        raise WrongType("measurements", "a sequence of dpkit.marginals.Measurement")
    try:
        items = list(measurements)
    except Exception:
        raise WrongType("measurements", "a sequence of dpkit.marginals.Measurement") from None
    for m in items:
        if not isinstance(m, Measurement):
            raise WrongType("measurements", "a sequence of dpkit.marginals.Measurement")
        if any(a not in domain for a in m.attrs):
            raise InvalidParameter("measurements", "a measurement names an attribute that is not in the domain")
        if domain.canonical(m.attrs, "measurements") != m.attrs:
            raise InvalidParameter("measurements", "a measurement's attributes must be in domain order")
        cells = domain.size(m.attrs)
        if m.query is None:
            if m.values.shape != domain.shape_of(m.attrs) and m.values.size != cells:
                raise InvalidData("measurements", "a measurement's values do not have its marginal's shape")
            if m.values.ndim > 1 and m.values.shape != domain.shape_of(m.attrs):
                raise InvalidData("measurements", "a measurement's values do not have its marginal's shape")
        elif m.query.shape[1] != cells:
            raise InvalidData("measurements", "a measurement's query does not have one column per marginal cell")
    return items


def _estimate_total(items: Sequence[Measurement], domain: Domain) -> float:
    """Inverse-variance weighted total implied by the measurements (identity: the sum; a query: ``w @ y`` for a
    ``w`` with ``Q^T w = 1`` when one exists)."""
    est, weight = 0.0, 0.0
    for m in items:
        y = m.values.ravel()
        if m.query is None:
            w = np.ones(y.size)
        else:
            ones = np.ones(m.query.shape[1])
            w = np.linalg.lstsq(m.query.T, ones, rcond=None)[0]
            if not np.allclose(m.query.T @ w, ones, rtol=0.0, atol=1e-8):
                continue
        var = float(w @ w) * m.std**2
        if not (var > 0 and math.isfinite(var)):
            continue
        est += float(w @ y) / var
        weight += 1.0 / var
    if weight == 0 or not math.isfinite(est / weight):
        raise InvalidParameter("total", "cannot be estimated from these measurements: pass it")
    return max(1.0, est / weight)


def estimate(domain: Domain, measurements: Sequence[Measurement], *, total: float | None = None,
             iters: int = 1000, cliques: Sequence[Clique] | None = None,
             warm_start: GraphicalModel | None = None, loss: str = "l2",
             max_cells: int = MAX_CELLS) -> GraphicalModel:
    """Fit a graphical model whose marginals best match noisy measurements (Private-PGM; post-processing).

    Post-processing only: the measurements are already-released noisy answers; this function reads no private
    data and charges nothing (it is not a mechanism). The model, its marginals and its synthetic records are as
    private as the measurements.

    Parameters
    ----------
    domain : Domain
    measurements : sequence of Measurement
        Noisy answers on attribute sets of ``domain`` (attributes in domain order), each with its noise ``std``.
    total : float, optional
        The number of records (> 0). By default estimated from the measurements: the inverse-variance weighted
        mean of the totals they imply (an identity measurement implies ``sum(values)`` with variance
        ``cells * std**2``), at least 1.
    iters : int
        Mirror-descent iterations (0 .. 100000; each one or a few belief propagations). Stops early when the
        loss no longer changes.
    cliques : sequence of attribute sets, optional
        Extra cliques for the model's structure (e.g. sets to be measured later or wanted jointly).
    warm_start : GraphicalModel, optional
        Start from this model's log-potentials (an adaptive method re-fitting after new measurements). Its
        cliques are kept in the new structure, so its distribution is the starting point exactly.
    loss : {"l2", "l1"}
        ``"l2"``: ``1/2 sum ||(Q mu_C - y) / std||^2`` (maximum likelihood under Gaussian noise), fitted with a
        backtracking mirror-descent step; ``"l1"``: ``sum ||Q mu_C - y||_1 / std`` (Laplace noise), fitted by
        mirror subgradient steps ``alpha_0 / sqrt(t + 1)`` keeping the best iterate.
    max_cells : int
        Largest junction-tree clique accepted (default 2**22 cells).

    Returns
    -------
    GraphicalModel
        The fitted model (cliques: the maximal measured sets, the extra cliques, the warm start's cliques),
        scaled to ``total``.

    Raises
    ------
    InvalidParameter / InvalidData / WrongType
        Unknown attributes, attributes out of domain order, values of the wrong shape, ``std <= 0``, NaN values,
        a junction tree whose largest clique exceeds ``max_cells`` (the message gives its size and width).

    Notes
    -----
    The optimum marginals of the L2 loss are unique when every measurement is of full rank; the model returned
    is the maximum-entropy distribution with those marginals. Where the measurements are best fit with a cell
    below zero (a noisy count measured negative, say), the optimum gives that cell probability 0 (the fit lies on
    the boundary of the simplex), and the fit approaches it: the cell's log-potential decreases step by step, so
    after enough iterations the model, its projections and its synthetic records give the cell probability 0 in
    floating point (``kl_divergence(true, model)`` is then infinite when the data hold that cell; measured in
    the Hardt ch. 5 reproduction, ``docs/benchmarks.md``). A floor or smoothing would be a different estimator
    and is not applied. Each preconditioned step moves a cell's log-potential by at most 32 nats (``e^32`` is
    above the ratio of any two counts below ``2^40``): the direction ``g / p`` is unbounded where a cell's mass
    vanishes, and before 2026-11-27 one accepted step could set log-potentials of about ``1e298``, where belief
    propagation cancels catastrophically (all-zero clique tables and NaN marginals; and a cell that far down
    could not come back when a later measurement of a warm-started re-fit called for it). With the clip, smg's
    releases changed (paired over seeds, mean 3-way TV): Titanic epsilon 10 -0.0070 ± 0.0012, 1 -0.0025 ±
    0.0020, 0.1 and 0.3 level; NLTCS level to -0.0004 ± 0.0002 (``docs/benchmarks.md``).

    References
    ----------
    McKenna, Sheldon, Miklau (2019), "Graphical-model based estimation and inference for differential privacy",
    ICML.
    """
    if not isinstance(domain, Domain):
        raise WrongType("domain", "a dpkit.marginals.Domain")
    items = _check_measurements(domain, measurements)
    iters = check.size_limit("iters", iters, MAX_ITERS)
    loss = check.choice("loss", loss, ("l2", "l1"))
    max_cells = check.integer("max_cells", max_cells, minimum=1, maximum=2**27)
    extra: list[Clique] = []
    if cliques is not None:
        if isinstance(cliques, (str, bytes, Mapping)) or not isinstance(cliques, (Sequence, Iterable)):
            raise WrongType("cliques", "a sequence of attribute sets")
        try:
            raw = list(cliques)
        except Exception:
            raise WrongType("cliques", "a sequence of attribute sets") from None
        extra = [domain.canonical(c, "cliques") for c in raw]
    if warm_start is not None:
        if not isinstance(warm_start, GraphicalModel):
            raise WrongType("warm_start", "a GraphicalModel")
        if warm_start.domain != domain:
            raise InvalidParameter("warm_start", "was fitted on another domain")
    if total is None:
        if not items:
            raise InvalidParameter("total", "cannot be estimated without measurements: pass it")
        n_total = _estimate_total(items, domain)
    else:
        n_total = check.positive("total", total)
    if n_total > MAX_TOTAL:
        raise InvalidParameter("total", "must be <= 2**53")
    for m in items:
        if not math.isfinite((n_total / m.std) ** 2) or m.std < 1e-100:
            raise InvalidParameter("measurements", "a measurement's std is too small for the fit's arithmetic")
    # structure
    sets = [m.attrs for m in items if m.attrs] + [c for c in extra if c]
    if warm_start is not None:
        sets += [c for c in warm_start._pots if len(c) > 0]
    factors = _maximal(sets)
    tree = _junction_tree(domain, factors, max_cells, "measurements" if cliques is None else "cliques")
    pots: dict[Clique, np.ndarray] = {c: np.zeros(domain.shape_of(c)) for c in factors}
    if warm_start is not None:
        for c, th in warm_start._pots.items():
            f = next((f for f in factors if set(c) <= set(f)), None)
            if f is None:  # a singleton of an attribute nothing else covers
                pots[c] = th.copy()
                continue
            pots[f] = pots[f] + _align(th, c, f)
    terms = []
    for m in items:
        f = next((f for f in factors if set(m.attrs) <= set(f)), ())
        terms.append(_Term(m.attrs, f, m.values.ravel().astype(np.float64), m.std, m.query))
    with np.errstate(all="ignore"):
        model = _fit(domain, pots, n_total, max_cells, tree, terms, iters, loss)
    if not all(np.isfinite(a).all() for a in model._pots.values()) or not math.isfinite(model._logz):
        raise InvalidParameter("measurements", "the fit left the range of floating-point arithmetic")
    return model


def _loss_grad(model: GraphicalModel, terms: Sequence[_Term], loss: str
               ) -> tuple[float, dict[Clique, np.ndarray], dict[Clique, np.ndarray]]:
    """Loss, its gradient per factor (count units) and the factors' marginals (counts)."""
    d = model.domain
    mus: dict[Clique, np.ndarray] = {}
    grads: dict[Clique, np.ndarray] = {}
    value = 0.0
    # the factors' marginals, largest first: each smaller one is then summed from the smallest cached marginal that
    # holds it (one pass over a junction-tree clique's table per nest of factors, not one per factor)
    for f in sorted({t.factor for t in terms if t.attrs}, key=lambda f: -d.size(f)):
        mus[f] = model.total * model._clique_marginal(f)
    for t in terms:
        if not t.attrs:
            mu_c = np.array([model.total])
        else:
            if t.factor not in mus:
                mus[t.factor] = model.total * model._clique_marginal(t.factor)
            mu_c = _sum_to(mus[t.factor], t.factor, t.attrs).ravel()
        r = (t.query @ mu_c if t.query is not None else mu_c) - t.y
        if loss == "l2":
            value += 0.5 * float(np.sum((r / t.std) ** 2))
            g = r / t.std**2
        else:
            value += float(np.abs(r).sum()) / t.std
            g = np.sign(r) / t.std
        if not t.attrs:
            continue
        if t.query is not None:
            g = t.query.T @ g
        g = _align(g.reshape(_shape(d, t.attrs)), t.attrs, t.factor)
        grads[t.factor] = grads[t.factor] + g if t.factor in grads else np.broadcast_to(g, mus[t.factor].shape)
    return value, grads, mus


def _step(model: GraphicalModel, grads: Mapping[Clique, np.ndarray], alpha: float) -> GraphicalModel:
    pots = {c: (a - alpha * grads[c] if c in grads else a) for c, a in model._pots.items()}
    return GraphicalModel._build(model.domain, pots, model.total, model.max_cells, model._tree)


#: Largest change of one cell's log-potential in one preconditioned step (nats): e^32 ≈ 8e13, more than the
#: ratio of any two counts below 2^40, so only cells whose mass vanishes are clipped (their direction g / p is
#: unbounded), and the step of every other cell is the plain preconditioned one.
_MAX_LOG_STEP = 32.0


def _fit(domain: Domain, pots: dict[Clique, np.ndarray], total: float, max_cells: int, tree: _Tree,
         terms: Sequence[_Term], iters: int, loss: str) -> GraphicalModel:
    model = GraphicalModel._build(domain, pots, total, max_cells, tree)
    if iters == 0 or not terms:
        return model
    value, grads, mus = _loss_grad(model, terms, loss)
    # initial step: the inverse of a relative-smoothness bound (sum of the weights total^2 / std^2), then adapted
    alpha = 1.0 / sum((total / t.std) ** 2 for t in terms if t.attrs) if any(t.attrs for t in terms) else 1.0
    if loss == "l1":
        alpha0 = 1.0 / sum(total / t.std for t in terms if t.attrs) if any(t.attrs for t in terms) else 1.0
        best, best_value = model, value
        for it in range(iters):
            model = _step(model, grads, alpha0 * total / math.sqrt(it + 1.0) / max(1, len(terms)))
            value, grads, mus = _loss_grad(model, terms, loss)
            if value < best_value:
                best, best_value = model, value
        return best
    # Each iteration starts from an extrapolated point (Nesterov momentum on the log-potentials, dropped when it
    # does not lower the loss). The step: first a mirror-descent step preconditioned per cell by the clique
    # marginal (direction ``-g_C / p_C``: for a lone clique with an identity measurement and the step
    # ``std**2 / total``, the iterative-proportional-fitting step ``theta_C += (y_C - mu_C) / mu_C``), with
    # backtracking to an Armijo decrease; it converges in a few dozen steps when the cliques do not compete, but
    # is not stationary at the optimum when overlapping cliques' gradients cancel, so once it stalls (or finds
    # no decrease) the plain entropic mirror-descent step with its relative-smoothness backtracking
    # (:func:`_search`) takes over; it decreases the loss at every step and is stationary only at the optimum.
    beta = 1.0 / total
    stall = 0
    prev: GraphicalModel | None = None
    k = 0
    precondition = True
    for _ in range(iters):
        # the extrapolated point (Nesterov momentum on the log-potentials; dropped when it does not help)
        base, bvalue, bgrads, bmus = model, value, grads, mus
        if prev is not None and k > 0:
            w = k / (k + 3.0)
            ext = GraphicalModel._build(domain, {c: a + w * (a - prev._pots[c]) for c, a in model._pots.items()},
                                        total, max_cells, tree)
            evalue, egrads, emus = _loss_grad(ext, terms, loss)
            if evalue < value:
                base, bvalue, bgrads, bmus = ext, evalue, egrads, emus
            else:
                k = 0
        new = None
        dirs = {c: g / np.maximum(bmus[c] / total, 1e-300) for c, g in bgrads.items()}
        pred = total * sum(float(np.sum(g * g)) for g in bgrads.values())
        beta *= 4.0
        for _ in range(40 if precondition else 0):
            # each cell's move is clipped to _MAX_LOG_STEP: where a cell's mass vanishes, g / p is unbounded, and
            # an accepted step could set log-potentials of 1e298, where belief propagation cancels
            # catastrophically (all-zero clique tables, NaN marginals: smg on NLTCS, epsilon 0.3,
            # init_share=None, seed 0, 2026-11-27)
            cand = GraphicalModel._build(domain, {c: (a - np.clip(beta * dirs[c], -_MAX_LOG_STEP, _MAX_LOG_STEP)
                                                      if c in dirs else a)
                                                  for c, a in base._pots.items()}, total, max_cells, tree)
            cand_value, cand_grads, cand_mus = _loss_grad(cand, terms, loss)
            if cand_value <= bvalue - 1e-4 * beta * pred:
                new = (cand, cand_value, cand_grads, cand_mus)
                break
            beta *= 0.25
        if new is None:
            # no preconditioned step decreased the loss at any of its 40 step sizes: from here on plain steps only
            # (a warm start holding cells of vanishing mass makes the direction g / p unbounded there, and the
            # 40 failed trials then cost 40 loss evaluations in every iteration: smg on Adult, 2026-11-27)
            precondition = False
            beta = 1.0 / total
            cand, cand_value, cand_grads, cand_mus, alpha, ok = _search(base, bvalue, bgrads, bmus, alpha, terms,
                                                                        loss)
            alpha *= 2.0
            if not ok or not cand_value < value:
                if k > 0:
                    k = 0
                    continue
                break  # no step decreases the loss: optimal to working precision
            new = (cand, cand_value, cand_grads, cand_mus)
        if new[1] > value:  # momentum overshot: restart from the iterate
            k = 0
            continue
        improvement = value - new[1]
        if precondition and improvement <= 1e-9 * value:
            precondition = False  # the per-cell preconditioning has stalled (coupled cliques): plain steps
        prev = model
        model, value, grads, mus = new
        k += 1
        stall = stall + 1 if improvement <= 1e-15 * max(value, 1e-300) else 0
        if (stall >= 5 and not precondition) or value == 0.0:
            break
    return model


def _search(model: GraphicalModel, value: float, grads: Mapping[Clique, np.ndarray],
            mus: Mapping[Clique, np.ndarray], alpha: float, terms: Sequence[_Term], loss: str
            ) -> tuple[GraphicalModel, float, dict[Clique, np.ndarray], dict[Clique, np.ndarray], float, bool]:
    """One mirror-descent step from ``model`` with backtracking: the largest ``alpha * 2**-j`` whose loss stays
    below the linearisation plus ``total * KL(new || model) / alpha`` (the relative-smoothness bound)."""
    total = model.total
    for _ in range(60):
        new = _step(model, grads, alpha)
        new_value, new_grads, new_mus = _loss_grad(new, terms, loss)
        lin = 0.0
        kl = 0.0
        for c, g in grads.items():
            p_new = new._clique_marginal(c)
            lin += float(np.sum(g * (total * p_new - mus[c])))
            kl -= alpha * float(np.sum(g * p_new))
        kl = max(0.0, kl - (new._logz - model._logz))
        if new_value <= value + lin + total * kl / alpha * (1.0 + 1e-12) + 1e-12 * abs(value):
            return new, new_value, new_grads, new_mus, alpha, True
        alpha *= 0.5
    return model, value, dict(grads), dict(mus), alpha, False
