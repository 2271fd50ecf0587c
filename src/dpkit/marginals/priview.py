"""PriView (Qardaji, Yang, Li 2014; Li et al. ch. 6.3): noisy views, consistency, maximum-entropy marginals.

The pipeline (Li et al. §6.3.1):

1. **views** (§6.3.4): a greedy covering design of the attributes, blocks of ``ℓ = view_size`` attributes
   (default 8) covering every ``t``-subset; ``t ∈ {2, 3, 4}`` chosen so that the noise error of Eq 6.7 falls
   in ``[0.001, 0.003]`` (:func:`covering_design`, :func:`view_noise_error`, :func:`choose_t`);
2. **noisy views**: every view's marginal plus discrete Laplace noise of scale ``w/ε`` per cell (``w`` views,
   each a partition of the records: L1 sensitivity ``w``) — the only step that reads the data;
3. **consistency** (§6.3.3): mutual consistency on each intersection of views, in topological order from the
   empty set (:func:`mutual_consistency`, :func:`overall_consistency`), then **ripple non-negativity**
   (:func:`ripple`), then consistency again (the book's Consistency → Non-negativity → Consistency);
4. **any k-way marginal** (§6.3.2): the projection of a view that contains it, else the maximum-entropy table
   matching every view on its overlap with the marginal (iterative proportional fitting from the uniform
   table, :func:`maxent_marginal`); the book's two alternatives, the LP (smallest largest violation) and least
   squares (smallest sum of squares), are :func:`reconstruct_marginal` with ``method="lp"`` / ``"lsq"``.

Steps 3 and 4 are post-processing of the noisy views. :func:`priview` is the release; the helpers are public
in this module (not in :mod:`dpkit.marginals`) for tests and for other methods.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import Neighbours
from dpkit.core.privacy import PureDP
from dpkit.marginals.domain import Domain, Records, marginal
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.mechanisms import Release

__all__ = [
    "PriViewModel",
    "choose_t",
    "covering_design",
    "maxent_marginal",
    "mutual_consistency",
    "overall_consistency",
    "priview",
    "reconstruct_marginal",
    "ripple",
    "view_noise_error",
    "view_size_criterion",
]

#: Eq 6.7's target range for the noise error (Li et al. §6.3.4, "Choosing t").
ERROR_RANGE = (0.001, 0.003)
#: The ``t`` values the book considers.
T_CHOICES = (2, 3, 4)
#: The most ``t``-subsets the greedy covering design enumerates.
MAX_SUBSETS = 400_000
#: The most cells of a reconstructed marginal.
MAX_MARGINAL_CELLS = 2**24
#: The most cells of a marginal reconstructed by the LP or least squares (sparse solvers, one variable a cell).
MAX_PROGRAM_CELLS = 2**18
#: Reconstruction methods for a marginal no view covers (Li et al. §6.3.2).
RECONSTRUCTIONS = ("maxent", "lsq", "lp")

Table = np.ndarray
Attrs = tuple[str, ...]


# -- view selection ----------------------------------------------------------------------------------------
def view_size_criterion(ell: int, t: int = 2) -> float:
    """``2^(ℓ/2) / (ℓ (ℓ-1) ... (ℓ-t+1))``: the quantity Li et al. §6.3.4 minimise over ``ℓ`` (pairs ``t = 2``,
    triples ``t = 3``); the book's table gives ℓ = 8 as the recommended compromise."""
    ell = check.integer("ell", ell, minimum=1)
    t = check.integer("t", t, minimum=1, maximum=ell)
    return float(2.0 ** (ell / 2) / math.perm(ell, t))


def covering_design(attrs: Sequence[str], view_size: int, t: int, *, sizes: Mapping[str, int] | None = None,
                    max_cells: int | None = None) -> list[Attrs]:
    """A greedy ``(w, ℓ, t)`` covering design: blocks (views) of at most ``ℓ = view_size`` attributes such that
    every ``t``-subset of ``attrs`` lies in some block. Deterministic (a function of public inputs only).

    Each block starts from the lexicographically first uncovered ``t``-subset and grows one attribute at a
    time, taking the attribute that covers the most uncovered ``t``-subsets (ties: the attribute used in the
    fewest blocks so far, then the first), up to ``view_size`` attributes. With ``sizes`` and ``max_cells`` a
    block never exceeds ``max_cells`` cells (non-binary domains: blocks may stop short of ``view_size``); a
    ``t``-subset that alone exceeds it is refused (:class:`InvalidParameter` naming ``view_size``, with the
    attributes). With ``len(attrs) <= view_size`` the one block is every attribute.

    The greedy design is not optimal (Gordon's repository has smaller ones for small cases), but is within a
    ``ln C(ℓ, t)`` factor of optimal and needs nothing outside dpkit.
    """
    names = [str(a) for a in attrs]
    d = len(names)
    ell = check.integer("view_size", view_size, minimum=1)
    t = check.integer("t", t, minimum=1, maximum=ell)
    size = [int(sizes[a]) if sizes is not None else 2 for a in names]
    cap = math.inf if max_cells is None else int(max_cells)

    def cells(block: Iterable[int]) -> int:
        return math.prod(size[i] for i in block)

    if d <= ell and cells(range(d)) <= cap:
        return [tuple(names)]
    t_eff = min(t, d)
    if math.comb(d, t_eff) > MAX_SUBSETS:
        raise InvalidParameter("t", f"a covering design of all {t_eff}-subsets of {d} attributes is too large to "
                                    "build here; use a smaller t")
    uncovered = set(itertools.combinations(range(d), t_eff))
    for s in uncovered:
        if cells(s) > cap:
            raise InvalidParameter("view_size", f"the attributes {[names[i] for i in s]} together have "
                                                f"{cells(s)} cells, more than max_view_cells={max_cells}: "
                                                "use a smaller t or a method for large domains")
    used = [0] * d
    blocks: list[Attrs] = []
    while uncovered:
        block = list(min(uncovered))
        while len(block) < ell:
            base = cells(block)
            best: tuple[int, int, int] | None = None
            for x in range(d):
                if x in block or base * size[x] > cap:
                    continue
                gain = 0
                for sub in itertools.combinations(block, t_eff - 1):
                    if tuple(sorted((*sub, x))) in uncovered:
                        gain += 1
                key = (-gain, used[x], x)
                if best is None or key < best:
                    best = key
            if best is None:
                break
            block.append(best[2])
        block.sort()
        for s in itertools.combinations(block, t_eff):
            uncovered.discard(s)
        for i in block:
            used[i] += 1
        blocks.append(tuple(names[i] for i in block))
    return blocks


def view_noise_error(n: float, epsilon: float, num_attrs: int, views: Sequence[Sequence[str]],
                     sizes: Mapping[str, int] | None = None, sensitivity: int = 1) -> float:
    """Eq 6.7 of Li et al.: the normalised noise error of a pair marginal,
    ``err = 2^((ℓ+1)/2) / (N ε) · sqrt(w d(d-1) / (ℓ(ℓ-1)))``.

    Generalised to views of unequal sizes and non-binary attributes as
    ``err = sqrt(2 C w² s² / c) / (N ε)`` with ``C`` the mean number of cells of a view (``2^ℓ`` for binary
    views), ``c = Σ_i ℓ_i(ℓ_i-1) / (d(d-1))`` the mean number of views covering a pair and ``s`` the per-view
    sensitivity (1 under add/remove one record): the book's formula when every view has ``ℓ`` binary attributes.
    """
    w = len(views)
    if w == 0:
        raise InvalidParameter("views", "must not be empty")
    cells = [math.prod(int(sizes[a]) if sizes is not None else 2 for a in v) for v in views]
    mean_cells = float(np.mean(cells))
    d = int(num_attrs)
    pairs = sum(len(v) * (len(v) - 1) for v in views)
    cover = pairs / (d * (d - 1)) if d > 1 and pairs > 0 else 1.0
    return math.sqrt(2.0 * mean_cells * w * w * sensitivity * sensitivity / cover) / (float(n) * float(epsilon))


def choose_t(n: float, epsilon: float, attrs: Sequence[str], view_size: int, *,
             sizes: Mapping[str, int] | None = None, max_cells: int | None = None,
             sensitivity: int = 1) -> tuple[int, list[Attrs]]:
    """``(t, views)``: the largest ``t ∈ {2, 3, 4}`` (at most ``view_size`` and the number of attributes) whose
    greedy covering design has Eq 6.7 noise error at most 0.003 (the top of the book's range
    ``[0.001, 0.003]``: more coverage while the noise error stays in range), else the smallest ``t``."""
    d = len(attrs)
    cands = [t for t in T_CHOICES if t <= min(view_size, max(d, 1))] or [1]
    chosen: tuple[int, list[Attrs]] | None = None
    for t in cands:
        try:
            views = covering_design(attrs, view_size, t, sizes=sizes, max_cells=max_cells)
        except InvalidParameter:
            if chosen is None:
                raise
            break
        err = view_noise_error(n, epsilon, d, views, sizes, sensitivity)
        if chosen is None or err <= ERROR_RANGE[1]:
            chosen = (t, views)
        if err > ERROR_RANGE[1]:
            break
    assert chosen is not None
    return chosen


# -- consistency -------------------------------------------------------------------------------------------
def _sum_to(table: Table, attrs: Attrs, sub: Attrs) -> Table:
    """The projection ``T_V[A]`` of a view table on ``A ⊆ V`` (kept with size-1 axes for broadcasting)."""
    axes = tuple(i for i, a in enumerate(attrs) if a not in sub)
    out: Table = table.sum(axis=axes, keepdims=True) if axes else table
    return out


def mutual_consistency(tables: list[Table], views: Sequence[Attrs], common: Iterable[str]) -> None:
    """Make the views that contain ``A = common`` agree on ``A`` (in place; Li et al. §6.3.3, Eq 6.6).

    The best estimate of ``T_A`` is the inverse-variance weighted mean of the views' projections, with weight
    ``1 / |cells of V_i \\ A|`` (the noise variance of ``T_{V_i}[A](a)`` is that many cells' variances): the
    book's arithmetic mean when the views have equal sizes and budgets. Each view is then updated cell by cell,
    ``T_{V_i}(c) += (T_A(a) - T_{V_i}[A](a)) / |cells of V_i \\ A|`` (``2^{|V_i| - |A|}`` for binary
    attributes), ``a`` the restriction of ``c`` to ``A``: the view's projection on ``A`` becomes ``T_A`` and
    its projection on any set ``B`` with ``A ⊄ B`` changes only through ``T_A - T_{V_i}[A]`` summed over
    ``A \\ B`` (Lemma 6.2). Views are given as tuples of attribute names (the axes of their tables).
    """
    a_set = set(common)
    idx = [i for i, v in enumerate(views) if a_set <= set(v)]
    if len(idx) < 2:
        return
    a_tuple = tuple(a_set)
    projs = [_sum_to(tables[i], views[i], a_tuple) for i in idx]
    rest = [tables[i].size // max(projs[j].size, 1) for j, i in enumerate(idx)]
    weights = np.array([1.0 / r for r in rest])
    # the projections have their A-axes in each view's own order: align them on a common order first
    order = [tuple(a for a in views[i] if a in a_set) for i in idx]
    ref = order[0]
    aligned = [np.transpose(p.squeeze(axis=tuple(k for k, a in enumerate(views[i]) if a not in a_set)),
                            [o.index(a) for a in ref]) if ref else p.reshape(())
               for p, o, i in zip(projs, order, idx, strict=True)]
    est = sum(w * p for w, p in zip(weights, aligned, strict=True)) / weights.sum()
    for j, i in enumerate(idx):
        back = np.transpose(est, [ref.index(a) for a in order[j]]) if ref else est
        tables[i] += (back.reshape(projs[j].shape) - projs[j]) / rest[j]


def intersections(views: Sequence[Attrs]) -> list[frozenset[str]]:
    """Every intersection of a non-empty subset of ``views``, plus the empty set, in a topological order of
    ``⊆`` (by size, then by sorted names: deterministic)."""
    base = [frozenset(v) for v in views]
    found: set[frozenset[str]] = set(base) | {frozenset()}
    frontier = set(base)
    while frontier:
        new = {a & b for a in frontier for b in base} - found
        found |= new
        frontier = new
    return sorted(found, key=lambda s: (len(s), sorted(s)))


def overall_consistency(tables: list[Table], views: Sequence[Attrs]) -> None:
    """Overall consistency (in place; Li et al. §6.3.3): :func:`mutual_consistency` on every intersection of
    views, in topological order starting from the empty set (which equalises the totals). By Lemma 6.2 a later
    step never breaks an earlier one, so afterwards every two views agree on their common attributes."""
    for common in intersections(views):
        mutual_consistency(tables, views, common)


def ripple(table: Table, theta: float, *, max_sweeps: int = 10_000) -> Table:
    """Ripple non-negativity (Li et al. §6.3.3): while some cell is below ``-theta``, set it to 0 and subtract
    ``|c|/L`` from each of its ``L`` neighbours, so the total is unchanged.

    Neighbours are the cells that differ in exactly one attribute (binary: flip one of the ``ℓ`` bits, so
    ``L = ℓ``; in general ``L = Σ_j (size_j - 1)``). All cells below ``-theta`` are rippled together in one
    sweep; sweeps repeat until none is left or ``max_sweeps`` (a table whose total is below ``-theta`` times
    its number of cells can never be made non-negative this way). Returns a new array.
    """
    out = np.array(table, dtype=np.float64, copy=True)
    nbrs = sum(s - 1 for s in out.shape)
    if nbrs == 0:
        return out
    for _ in range(max_sweeps):
        neg = np.where(out < -theta, out, 0.0)
        if not neg.any():
            break
        spread = np.zeros_like(out)
        for ax in range(out.ndim):
            spread += neg.sum(axis=ax, keepdims=True) - neg
        out = out - neg + spread / nbrs
    return out


# -- reconstruction ----------------------------------------------------------------------------------------
def _constraints(domain: Domain, attrs: Iterable[str], views: Mapping[Attrs, Table]
                 ) -> tuple[Attrs, tuple[int, ...], Table | None, float, list[tuple[Attrs, Table]]]:
    """``(a, shape, covered, total, [(sub, target)])`` for reconstructing the marginal on ``attrs``: ``covered``
    is a covering view's projection (then nothing else is needed), else the maximal overlaps ``sub = V ∩ A`` of
    the views with ``A`` and their targets ``T_V[sub]`` clipped at 0 (the program requires ``T_A >= 0``), and
    the views' mean total."""
    a = domain.canonical(attrs)
    shape = domain.shape_of(a)
    if math.prod(shape) > MAX_MARGINAL_CELLS:
        raise InvalidParameter("attrs", "the marginal has too many cells to reconstruct densely")
    items = list(views.items())
    if not items:
        raise InvalidParameter("views", "must not be empty")
    a_set = set(a)
    for v, tab in items:
        if a_set <= set(v):
            return a, shape, np.array(_sum_to(tab, v, a).reshape(shape), dtype=np.float64), 0.0, []
    total = float(np.mean([max(float(tab.sum()), 0.0) for _, tab in items]))
    overlaps: dict[Attrs, Table] = {}
    for v, tab in items:
        sub = tuple(x for x in a if x in v)
        if sub and sub not in overlaps:
            overlaps[sub] = np.clip(_sum_to(tab, v, sub).reshape(domain.shape_of(sub)), 0.0, None)
    maximal = [s for s in overlaps if not any(set(s) < set(o) for o in overlaps)]
    return a, shape, None, total, [(s, overlaps[s]) for s in maximal]


def maxent_marginal(domain: Domain, attrs: Iterable[str], views: Mapping[Attrs, Table], *, iters: int = 500,
                    tol: float = 1e-9) -> Table:
    """The maximum-entropy table on ``attrs`` whose projections match the views (Li et al. §6.3.2).

    ``views`` maps view attribute tuples (domain order) to consistent tables. If a view contains ``attrs``, its
    projection is returned. Otherwise each view meeting ``attrs`` gives the constraint
    ``T_A[V ∩ A] = T_V[V ∩ A]`` (only the maximal overlaps are kept; targets clipped at 0, as the book's program
    requires ``T_A ≥ 0``), and iterative proportional fitting from the uniform table with the views' common total
    converges to the maximum-entropy table satisfying them (Csiszár's I-projection of the uniform
    distribution). Stops when every constraint holds to ``tol`` times the total, or after ``iters`` sweeps.
    """
    a, shape, covered, total, maximal = _constraints(domain, attrs, views)
    if covered is not None:
        return covered
    cells = math.prod(shape)
    est = np.full(shape, total / cells if cells else 0.0)
    if total <= 0:
        return est
    cons = []
    for s, target in maximal:
        keep = tuple(i for i, x in enumerate(a) if x in s)
        other = tuple(i for i in range(len(a)) if i not in keep)
        bshape = tuple(shape[i] if i in keep else 1 for i in range(len(a)))
        cons.append((other, target.reshape(bshape)))
    for _ in range(max(int(iters), 1)):
        worst = 0.0
        for other, target in cons:
            cur = est.sum(axis=other, keepdims=True) if other else est
            worst = max(worst, float(np.max(np.abs(cur - target))))
            ratio = np.divide(target, cur, out=np.zeros_like(cur), where=cur > 0)
            est = est * ratio
        if worst <= tol * total:
            break
    return est


def _constraint_matrix(domain: Domain, a: Attrs, shape: tuple[int, ...],
                       maximal: Sequence[tuple[Attrs, Table]]) -> tuple[Any, np.ndarray]:
    """The sparse 0/1 matrix ``C`` (one row a cell of each overlap, one column a cell of ``A``; ``C[r, j] = 1``
    when cell ``j`` restricted to the overlap is ``r``) and the stacked targets ``b``, so the constraints read
    ``C x = b``."""
    from scipy import sparse

    cells = math.prod(shape)
    coords = np.unravel_index(np.arange(cells), shape)
    rows, targets, offset = [], [], 0
    for s, target in maximal:
        keep = [i for i, x in enumerate(a) if x in s]
        sub_shape = tuple(shape[i] for i in keep)
        rows.append(offset + np.ravel_multi_index(tuple(coords[i] for i in keep), sub_shape))
        targets.append(np.asarray(target, dtype=np.float64).ravel())
        offset += math.prod(sub_shape)
    r = np.concatenate(rows)
    c = np.tile(np.arange(cells), len(maximal))
    mat = sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(offset, cells))
    return mat, np.concatenate(targets)


def reconstruct_marginal(domain: Domain, attrs: Iterable[str], views: Mapping[Attrs, Table], *,
                         method: str = "maxent", iters: int = 500, tol: float = 1e-9) -> Table:
    """The marginal on ``attrs`` from consistent views, by one of Li et al.'s three programs (§6.3.2).

    A view containing ``attrs`` gives its projection, whatever the method. Otherwise every maximal overlap
    ``S = V ∩ A`` of a view ``V`` with ``A`` gives the constraint ``T_A[S] = T_V[S]`` (targets clipped at 0),
    and ``method`` picks among the tables ``T_A >= 0``:

    - ``"maxent"`` (the book's recommendation, default): the maximum-entropy table satisfying the constraints
      (:func:`maxent_marginal`; ``iters``, ``tol``).
    - ``"lp"`` (Barak et al.'s program): a table minimising the largest violation
      ``tau = max |T_A[S](s) - T_V[S](s)|`` (a linear program, solved exactly by HiGHS). It has no preference
      among the tables that satisfy every constraint, as the book notes: the solver returns a vertex.
    - ``"lsq"``: the table of smallest ``sum T_A(a)^2`` satisfying the constraints. Solved through its dual,
      ``max_lambda b'lambda - 1/2 ||max(0, C' lambda)||^2 - mu/2 ||lambda||^2`` (``C`` the constraint matrix,
      ``T_A = max(0, C' lambda)``), by L-BFGS-B, with a ridge ``mu = 1e-9`` that keeps the dual bounded when
      the clipped targets are not exactly consistent: the result is then the minimum-norm table among those
      that nearly fit them (the constraint residual is at most ``mu`` times the dual variables, about
      ``1e-9`` of a cell's count when they are consistent).

    LP and least squares take one variable per cell (at most ``MAX_PROGRAM_CELLS``; larger marginals are
    refused with :class:`~dpkit.core.errors.InvalidParameter` naming ``attrs`` — use ``"maxent"``). All three
    read only the views: post-processing.
    """
    method = check.choice("method", method, RECONSTRUCTIONS)
    if method == "maxent":
        return maxent_marginal(domain, attrs, views, iters=iters, tol=tol)
    a, shape, covered, total, maximal = _constraints(domain, attrs, views)
    if covered is not None:
        return covered
    cells = math.prod(shape)
    if cells > MAX_PROGRAM_CELLS:
        raise InvalidParameter("attrs", f"the marginal has too many cells for method {method!r} "
                                        f"(at most {MAX_PROGRAM_CELLS}); use method 'maxent'")
    if total <= 0:
        return np.zeros(shape)
    mat, b = _constraint_matrix(domain, a, shape, maximal)
    if method == "lp":
        return _lp(mat, b, cells).reshape(shape)
    return _lsq(mat, b, cells, total).reshape(shape)


def _lp(mat: Any, b: np.ndarray, cells: int) -> np.ndarray:
    """``argmin_{x >= 0} max |C x - b|`` by HiGHS (variables ``x`` and ``tau``)."""
    from scipy import optimize, sparse

    ones = sparse.csr_matrix(np.ones((mat.shape[0], 1)))
    a_ub = sparse.vstack([sparse.hstack([mat, -ones]), sparse.hstack([-mat, -ones])]).tocsr()
    b_ub = np.concatenate([b, -b])
    cost = np.zeros(cells + 1)
    cost[-1] = 1.0
    res = optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(0, None)] * (cells + 1), method="highs")
    if res.status != 0 or res.x is None:  # pragma: no cover - the program is always feasible and bounded
        raise InvalidParameter("views", "the reconstruction LP did not solve")
    return np.clip(np.asarray(res.x[:cells], dtype=np.float64), 0.0, None)


def _lsq(mat: Any, b: np.ndarray, cells: int, total: float) -> np.ndarray:
    """``argmin_{x >= 0, C x = b} ||x||^2`` through the ridge-regularised dual (see :func:`reconstruct_marginal`)."""
    from scipy import optimize

    scale = max(total, 1.0)
    bs = b / scale  # solve for x / total: a well-scaled problem whatever the count
    mu = 1e-9
    mt = mat.T.tocsr()

    def neg_dual(lam: np.ndarray) -> tuple[float, np.ndarray]:
        x = np.maximum(mt @ lam, 0.0)
        val = float(bs @ lam) - 0.5 * float(x @ x) - 0.5 * mu * float(lam @ lam)
        grad = bs - mat @ x - mu * lam
        return -val, -grad

    lam0 = np.zeros(mat.shape[0])
    res = optimize.minimize(neg_dual, lam0, jac=True, method="L-BFGS-B",
                            options={"maxiter": 20_000, "maxcor": 30, "ftol": 1e-15, "gtol": 1e-12})
    return np.maximum(mt @ res.x, 0.0) * scale


class PriViewModel:
    """The released PriView synopsis: consistent view tables from which any marginal is reconstructed.

    Attributes
    ----------
    domain:
        The public domain.
    views:
        ``{view attrs (domain order): table}``, the views after Consistency → Ripple → Consistency (every two
        agree on their common attributes; entries may be slightly negative, above ``-theta`` up to the last
        consistency step's changes).
    total:
        The common total of the views (the estimated number of records).

    :meth:`project` (alias :meth:`marginal`) returns any marginal; it reads only the views (post-processing).
    """

    def __init__(self, domain: Domain, views: Mapping[Attrs, Table], *, iters: int = 500,
                 reconstruction: str = "maxent") -> None:
        self.domain = domain
        self.views: dict[Attrs, Table] = dict(views)
        self.total = float(np.mean([float(t.sum()) for t in self.views.values()]))
        self.iters = int(iters)
        self.reconstruction = check.choice("reconstruction", reconstruction, RECONSTRUCTIONS)

    def project(self, attrs: Iterable[str], method: str | None = None) -> Table:
        """The marginal on ``attrs`` (shape ``domain.shape_of(attrs)``, domain order): a view's projection if a
        view covers it, else the reconstruction by ``method`` (default the model's ``reconstruction``:
        ``"maxent"``, ``"lsq"`` or ``"lp"``, :func:`reconstruct_marginal`)."""
        how = self.reconstruction if method is None else method
        return reconstruct_marginal(self.domain, attrs, self.views, method=how, iters=self.iters)

    marginal = project

    def marginals(self, workload: Iterable[Iterable[str]]) -> dict[Attrs, Table]:
        """``{attrs: marginal}`` for every attribute set of ``workload`` (domain order keys)."""
        out: dict[Attrs, Table] = {}
        for w in workload:
            key = self.domain.canonical(w, "workload")
            out[key] = self.project(key)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PriViewModel):
            return NotImplemented
        return (self.domain == other.domain and self.views.keys() == other.views.keys()
                and all(np.array_equal(self.views[k], other.views[k]) for k in self.views))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PriViewModel({len(self.views)} views over {len(self.domain)} attributes)"


# -- the release -------------------------------------------------------------------------------------------
def priview(records: Records, epsilon: float, *, view_size: int = 8, t: int | None = None,
            n_estimate: float | None = None, count_share: float = 0.01, theta: float = 1.0,
            max_view_cells: int = 2**16, iters: int = 500, reconstruction: str = "maxent",
            neighbours: Neighbours | None = None,
            accountant: Accountant | None = None, rng: RandomSource | None = None,
            description: str = "") -> Release:
    """PriView (Qardaji, Yang, Li 2014): noisy covering-design views made consistent, any marginal by max-entropy.

    Parameters
    ----------
    records:
        The private :class:`~dpkit.marginals.Records` (non-empty). Its domain is public.
    epsilon:
        The privacy parameter, > 0 (pure DP).
    view_size:
        ``ℓ``, the most attributes of a view (default 8, the book's choice; 7–11 are fine).
    t:
        Cover every ``t``-subset of attributes by some view. ``None`` (default): the book's rule, the largest
        ``t ∈ {2, 3, 4}`` whose Eq 6.7 noise error is at most 0.003 (:func:`choose_t`), which needs a rough
        ``N``: ``n_estimate`` if given; else ``len(records)`` under replace-one (``N`` is public there); else a
        noisy count with ``count_share`` of ``epsilon`` (the book suggests a tiny budget). Unused when every
        attribute fits in one view.
    n_estimate:
        A public rough number of records for choosing ``t`` (no budget spent on the count).
    count_share:
        The share of ``epsilon`` spent on the noisy count when it is needed (default 0.01), in ``(0, 1)``.
    theta:
        Ripple threshold ``θ >= 0`` in counts (default 1: cells below minus one record are rippled).
    max_view_cells:
        The most cells of a view (default ``2^16``): with non-binary attributes views stop growing before
        ``view_size`` attributes at this size; a ``t``-subset larger than this is refused.
    iters:
        Sweeps of iterative proportional fitting for a marginal no view covers (default 500).
    reconstruction:
        How the model reconstructs a marginal no view covers (§6.3.2): ``"maxent"`` (default, the book's
        recommendation), ``"lsq"`` (least squares) or ``"lp"`` (the LP); see :func:`reconstruct_marginal`.
        Post-processing: any of them may also be asked per call, ``model.project(attrs, method=...)``.
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure) under ``neighbours``. Each of the ``w`` views is a marginal, a partition of the
    records, so adding or removing one record changes the ``w`` views' cells by at most ``w`` in L1 (``w·r``
    under a privacy unit of ``r`` rows, ``2w`` under replace-one); the views are released with discrete
    Laplace noise of scale ``t_noise >= sensitivity / ε_views`` (the exact geometric mechanism, CKS 2020), so
    they are ``ε_views``-DP. When a noisy count chooses ``t``, it is a discrete Laplace count (sensitivity
    ``r``) with ``ε_count``, and the design is a function of that released count: basic composition gives
    ``ε_count + ε_views <= epsilon`` (exact rational split). Consistency, ripple and reconstruction read only
    the noisy views (post-processing).

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any random bit is drawn; a refused
    charge draws nothing. Split as ``count_share · epsilon`` for the count (only when ``t`` is chosen from a
    noisy count) and the rest for the views.

    Output law
    ----------
    ``parts["noisy_views"]`` maps each view (attribute tuple, domain order) to its true marginal plus i.i.d.
    discrete Laplace noise ``P[Z = k] ∝ exp(-|k| / b)`` per cell (int64), ``b = Release.scale`` the smallest
    float ``>= w·s / ε_views`` (``s`` the per-view sensitivity), drawn as one discrete Laplace vector over all
    views' cells (:func:`~dpkit.mechanisms.discrete_laplace_plan`). ``parts["noisy_count"]`` (when drawn) is
    the count plus discrete Laplace noise of scale ``>= s / ε_count``. The value is a :class:`PriViewModel`, a
    deterministic function of the noisy views: overall consistency, ripple non-negativity (``theta``),
    overall consistency again; its ``project(attrs)`` gives any marginal. ``parts["views"]`` lists the views;
    ``params`` hold ``t``, ``w``, the scale and the budget split. ``Release.noise`` is ``None`` (the value is a
    model, not a noisy vector).

    Error
    -----
    The noise error of a pair marginal is about Eq 6.7, ``2^((ℓ+1)/2)/(Nε) · sqrt(w d(d-1)/(ℓ(ℓ-1)))`` in
    normalised L2 (:func:`view_noise_error`); consistency averages the views that share attributes and lowers
    it. A marginal not covered by a view also has a *coverage error* (correlation not captured by the views'
    overlaps, e.g. ``a = b XOR c``) that cannot be bounded without the data. Ripple keeps totals and removes
    the positive bias of clipping. No confidence interval is stated.

    Errata
    ------
    Li et al. print the mutual-consistency update as ``T_{V_i}(c) += (T_A(c) - T_{V_i}(c)) / (2^{|V_i|} - |A|)``.
    The book's own worked example (views ``{a1,a2}`` = [.3,.3,.3,.1] and ``{a1,a3}`` = [.2,.3,.1,.4] → [.275,
    .275,.325,.125] and [.225,.325,.075,.375]) needs the denominator ``2^{|V_i| - |A|}`` (the number of cells of
    the view with a given restriction to ``A``) and the view's *projection* ``T_{V_i}[A](a)`` in the numerator,
    which is what is implemented (generalised to ``|cells of V_i \\ A|`` for non-binary attributes).

    References
    ----------
    W. Qardaji, W. Yang, N. Li. PriView: practical differentially private release of marginal contingency
    tables. SIGMOD 2014. N. Li, M. Lyu, D. Su, W. Yang. Differential Privacy: From Theory to Practice, ch. 6.3.

    Examples
    --------
    >>> import numpy as np, dpkit
    >>> from dpkit.marginals import Domain, Records, priview
    >>> dom = Domain({f"a{i}": 2 for i in range(10)})
    >>> recs = Records((np.arange(5000).reshape(500, 10) * 7 // 3) % 2, dom)
    >>> rel = priview(recs, 1.0, view_size=4, t=2, rng=dpkit.deterministic_source(1))
    >>> rel.value.project(["a0", "a9"]).shape
    (2, 2)
    """
    return run(_priview_plan(records, epsilon, view_size=view_size, t=t, n_estimate=n_estimate,
                             count_share=count_share, theta=theta, max_view_cells=max_view_cells, iters=iters,
                             reconstruction=reconstruction, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _check_records(records: Any) -> Records:
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    if len(records) == 0:
        raise InvalidData("records", "must not be empty")
    return records


def _priview_plan(records: Any, epsilon: float, *, view_size: int, t: int | None, n_estimate: float | None,
                  count_share: float, theta: float, max_view_cells: int, iters: int, reconstruction: str = "maxent",
                  neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`priview` (nothing drawn or charged)."""
    from dpkit.mechanisms import discrete_laplace_plan
    from dpkit.mechanisms.discrete import discrete_laplace_scale

    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    eps = check.epsilon(epsilon)
    ell = check.integer("view_size", view_size, minimum=1, maximum=64)
    t_fixed = None if t is None else check.integer("t", t, minimum=1, maximum=ell)
    n_est = None if n_estimate is None else check.positive("n_estimate", n_estimate)
    share = check.probability("count_share", count_share)
    th = check.real("theta", theta)
    if th < 0:
        raise InvalidParameter("theta", "must be >= 0")
    cap = check.integer("max_view_cells", max_view_cells, minimum=1, maximum=2**24)
    n_iters = check.integer("iters", iters, minimum=1, maximum=10**6)
    how = check.choice("reconstruction", reconstruction, RECONSTRUCTIONS)
    nb = resolve_neighbours(neighbours, accountant)
    _check_records(records)
    dom = records.domain
    attrs = dom.attrs
    sizes = dom.to_dict()
    rows = unit_rows(nb)
    per_view = 2 * rows if is_replace(nb) else rows
    d = len(attrs)

    one_view = d <= ell and dom.size() <= cap
    need_count = not one_view and t_fixed is None and n_est is None and not is_replace(nb)
    if need_count:
        eps_count, eps_views = _exact.split_budget(eps, [share, 1.0 - share], name="count_share")
    else:
        eps_count, eps_views = 0.0, eps
    # everything the design can refuse is refused here, before the charge
    fixed_views: list[Attrs] | None = None
    t_used: int | None = None
    if one_view:
        fixed_views, t_used = [attrs], min(t_fixed or min(2, d), d)
    elif t_fixed is not None:
        fixed_views, t_used = covering_design(attrs, ell, t_fixed, sizes=sizes, max_cells=cap), t_fixed
    elif not need_count:
        n_public = float(len(records)) if n_est is None else n_est  # replace-one: N is public
        t_used, fixed_views = choose_t(n_public, eps_views, attrs, ell, sizes=sizes, max_cells=cap,
                                       sensitivity=per_view)
    else:  # t from a noisy count: check now that the smallest candidate design exists
        covering_design(attrs, ell, min([x for x in T_CHOICES if x <= ell] or [1]), sizes=sizes, max_cells=cap)
    if fixed_views is not None:
        scale: float | None = discrete_laplace_scale(len(fixed_views) * per_view, eps_views)
    else:
        scale = None
        discrete_laplace_scale(per_view, eps_count)  # refuse a budget the samplers cannot take
    codes = records  # the private data, read only inside draw

    params: dict[str, Any] = {"epsilon": eps, "view_size": ell, "theta": th, "max_view_cells": cap,
                              "reconstruction": how,
                              "per_view_sensitivity": per_view, "epsilon_views": eps_views,
                              "epsilon_count": eps_count}
    if fixed_views is not None:
        params.update(t=t_used, w=len(fixed_views), scale=scale, views=list(fixed_views))

    def draw(rng: RandomSource) -> Outcome:
        parts: dict[str, Any] = {}
        out_params: dict[str, Any] = {}
        views = fixed_views
        t_here = t_used
        if views is None:
            noisy_n = int(discrete_laplace_plan(len(codes), per_view, eps_count).sample(rng).value)
            parts["noisy_count"] = noisy_n
            t_here, views = choose_t(max(float(noisy_n), 1.0), eps_views, attrs, ell, sizes=sizes, max_cells=cap,
                                     sensitivity=per_view)
            out_params = {"t": t_here, "w": len(views), "views": list(views),
                          "scale": discrete_laplace_scale(len(views) * per_view, eps_views)}
        true = [marginal(codes, v).astype(np.int64) for v in views]
        flat = np.concatenate([x.ravel() for x in true])
        noisy_flat = np.asarray(discrete_laplace_plan(flat, len(views) * per_view, eps_views).sample(rng).value,
                                dtype=np.int64).reshape(-1)
        noisy: dict[Attrs, Table] = {}
        pos = 0
        for v, x in zip(views, true, strict=True):
            noisy[v] = noisy_flat[pos:pos + x.size].reshape(x.shape)
            pos += x.size
        tables = [noisy[v].astype(np.float64) for v in views]
        overall_consistency(tables, views)
        tables = [ripple(tab, th) for tab in tables]
        overall_consistency(tables, views)
        model = PriViewModel(dom, dict(zip(views, tables, strict=True)), iters=n_iters, reconstruction=how)
        parts.update(noisy_views=noisy, views=list(views))
        fields = {"scale": out_params["scale"]} if "scale" in out_params else {}
        return Outcome(model, parts=parts, params=out_params, fields=fields)

    return Plan(mechanism="priview", cost=PureDP(eps), draw=draw, sensitivity=None, scale=scale, noise=None,
                params=params, neighbours=nb)
