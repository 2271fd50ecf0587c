"""The ``marginals`` and ``synthetic`` statistic kinds of :mod:`dpkit.tables` (issue #13).

Both read a list of **attributes**: categorical columns with declared public categories and numeric columns with
public bin edges (``[e_j, e_{j+1})``, the last bin closed). Categories and bins are never read from the data: a
column with neither is refused (a typed error naming it) before anything is read or charged.

The engine computes **one exact aggregate** per statistic (its own pass over the rows kept by contribution
bounding): a group-by on the attributes (the categorical value, the bin index of a numeric column computed in the
engine's expression) with a row count, so at most ``min(n, domain size)`` rows leave the engine. Rows whose value
is not a declared category or lies outside the bins (and NULL/NaN values under ``nan_policy="omit"``) are **not
counted**, as for histograms and contingency tables; the coverage notes say so. dpkit then rebuilds the integer
records (:class:`dpkit.marginals.Records`, each combination repeated by its count) and runs a method of
:mod:`dpkit.marginals` / :mod:`dpkit.synth` on them, drawn under the query's one charge.

Guarantee (both kinds). After contribution bounding one privacy unit adds or removes at most ``R`` rows
(``R = max_rows``; 1 under the default row unit), so the records fed to the method are neighbours under the
relation "add/remove ``R`` records", which is passed to the method as its ``neighbours=`` argument
(:class:`~dpkit.core.neighbours.PrivacyUnit` with ``max_rows = R``, or add/remove one record): every
marginal-count sensitivity the method uses is multiplied by ``R`` (L1 ``R``, L2 ``R`` per marginal). The budget
share of the statistic is what the method spends (``epsilon`` for Direct with discrete Laplace noise, ``rho`` for
the zCDP methods), and the query is charged once, before the aggregate is computed or any noise drawn. The
attribute list, the categories, the bins, the sets and the method are public; the per-row map from a row to its
cell is fixed, so neighbouring tables give neighbouring records.

Bad input refused before the charge: unknown columns, a column without categories or bins, categories of the
wrong type, non-increasing edges, sets naming unlisted columns, a result or junction tree too large (the size and
what would fit are named), a method unknown or not available, a grouped query, a ``PureDP`` budget for a zCDP
method, a budget share too small for the method; and, by the pre-charge data pass, a table with no row in the
declared domain or with more than :data:`MAX_RECORDS` such rows (:data:`MAX_WEIGHTED_RECORDS` when the
attributes have at most :data:`MAX_RECORDS` cells: the records are weighted cells, never expanded).
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.tables.kinds import Kind, register_kind

if TYPE_CHECKING:  # pragma: no cover
    from dpkit.tables._query import Query, Statistic

__all__ = ["MAX_CELLS", "MAX_RECORDS", "Marginals", "Synthetic", "SyntheticTable"]

#: The most records (rows in the declared domain, before contribution bounding) a marginals or synthetic
#: statistic takes when its attributes have more than this many cells in all: the records are the engine's
#: group-by (one row per cell present, at most the records and at most the cells) read into memory as weighted
#: records (never expanded).
MAX_RECORDS = 2**24
#: The most records when the attributes have at most :data:`MAX_RECORDS` cells (the group-by is then small):
#: the marginal methods' exact score arithmetic (MST and smg refuse 2^40 records).
MAX_WEIGHTED_RECORDS = 2**40 - 1
#: The most cells (result rows) one marginals statistic releases, all sets together.
MAX_CELLS = 2**20
#: The largest junction-tree clique of the consistency step of Direct (cells).
MAX_TREE_CELLS = 2**22
#: The most attributes of one statistic.
MAX_ATTRS = 64
#: The most iterations of a fit (the consistency step, a model method's final fit).
MAX_ITERS = 100_000
#: The most noisy-vs-synthetic comparisons a synthetic statistic reports.
MAX_COMPARISONS = 20
_MAX_BINS = 2**16
_MAX_LEVELS = 2**20
_WEIGHTS = "_dpk_n"
_OUTPUT_SUFFIXES = (".csv", ".parquet")


class SyntheticTable:
    """A synthetic table released by a ``synthetic`` statistic: ``res.attrs["synthetic"][label]``.

    ``frame`` is the pandas DataFrame (the declared columns, in order), ``output`` the file name the CLI writes it
    to (``.csv`` or ``.parquet``; None when not given), ``method`` the fitting method and ``rows`` its row count.
    Compared by identity (a frame's ``attrs`` are compared when frames are concatenated)."""

    __slots__ = ("frame", "method", "output", "rows")

    def __init__(self, frame: Any, output: str | None, method: str, rows: int) -> None:
        self.frame = frame
        self.output = output
        self.method = method
        self.rows = rows

    def __deepcopy__(self, memo: dict[int, Any]) -> SyntheticTable:  # pandas deep-copies attrs: share the table
        return self

    def __repr__(self) -> str:
        return f"<synthetic table: {self.rows} rows, {len(self.frame.columns)} columns, method {self.method!r}>"


# -------------------------------------------------------------------------------------------------------------
# attributes
# -------------------------------------------------------------------------------------------------------------
def _attributes(q: Query, columns: Any, domains: Any, bins: Any) -> tuple[tuple[str, ...], tuple[tuple[Any, ...],
                                                                                               ...], tuple[Any, ...]]:
    """``(columns, categories per column (() for binned), (column, edges) pairs)``, validated on the schema."""
    from dpkit.tables._query import public_values

    if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence) or not columns:
        raise WrongType("columns", "a non-empty list of column names")
    cols = tuple(columns)
    if len(cols) > MAX_ATTRS:
        raise InvalidParameter("columns", f"more than {MAX_ATTRS} columns")
    for c in cols:
        if not isinstance(c, str) or c not in q.schema:
            raise InvalidParameter("columns", f"unknown column {c!r}" if isinstance(c, str) else "unknown column")
    if len(set(cols)) != len(cols):
        raise InvalidParameter("columns", "repeated column")
    domains = {} if domains is None else domains
    bins = {} if bins is None else bins
    if not isinstance(domains, Mapping):
        raise WrongType("domains", "a mapping column -> list of public categories")
    if not isinstance(bins, Mapping):
        raise WrongType("bins", "a mapping column -> public bin edges")
    for name, m in (("domains", domains), ("bins", bins)):
        for c in m:
            if c not in cols:
                raise InvalidParameter(name, f"names a column {c!r} that is not in columns" if isinstance(c, str)
                                       else "names a column that is not in columns")
    cats: list[tuple[Any, ...]] = []
    edges: list[tuple[str, tuple[float, ...]]] = []
    for c in cols:
        if c in domains and c in bins:
            raise InvalidParameter("bins", f"column {c!r} has both categories and bins")
        if c in bins:
            if q.schema[c] not in ("int", "float"):
                raise WrongType("bins", f"column {c!r} must be numeric to be binned")
            e = check.public_vector("bins", bins[c], min_size=2, max_size=_MAX_BINS + 1, increasing=True)
            ev = tuple(float(x) for x in e)
            if q.schema[c] == "int" and any(math.ceil(lo) > (math.floor(hi) if j == len(ev) - 2 else
                                                               math.ceil(hi) - 1)
                                            for j, (lo, hi) in enumerate(itertools.pairwise(ev))):
                raise InvalidParameter("bins", f"column {c!r} is an integer column and a bin holds no integer")
            edges.append((c, ev))
            cats.append(())
        elif c in domains:
            d = public_values("domains", domains[c], q.schema[c])
            if len(d) > _MAX_LEVELS:
                raise InvalidParameter("domains", f"column {c!r} has more than {_MAX_LEVELS} categories")
            cats.append(d)
        else:
            raise InvalidParameter("domains", f"column {c!r} has neither public categories (domains) nor public "
                                              "bins (bins); they are never read from the data")
    return cols, tuple(cats), tuple(edges)


def _edges(st: Statistic) -> dict[str, tuple[float, ...]]:
    return dict(st.option["bins"])


def _sizes(st: Statistic) -> list[int]:
    e = _edges(st)
    return [len(e[c]) - 1 if c in e else len(d) for c, d in zip(st.columns, st.domains, strict=True)]


def _domain(st: Statistic) -> Any:
    from dpkit.marginals import Domain

    return Domain(list(zip(st.columns, _sizes(st), strict=True)))


def _level_labels(st: Statistic) -> list[list[str]]:
    e = _edges(st)
    out = []
    for c, d in zip(st.columns, st.domains, strict=True):
        if c in e:
            ed = e[c]
            out.append([f"[{ed[j]:g}, {ed[j + 1]:g}{']' if j == len(ed) - 2 else ')'}" for j in range(len(ed) - 1)])
        else:
            out.append([str(v) for v in d])
    return out


def _neighbours(unit: Any, rows: int) -> Any:
    """The records' neighbour relation: the session's privacy unit (``R = max_rows`` records), else add/remove
    one record. ``unit`` None and ``rows > 1`` (planning without a session unit at hand) is a unit of ``rows``."""
    from dpkit.core.neighbours import AddRemove, PrivacyUnit

    if unit is not None:
        return unit
    return AddRemove() if rows <= 1 else PrivacyUnit("unit", max_rows=rows)


def _dummy(st: Statistic) -> Any:
    """One public record (all codes 0) on the statistic's domain: plan builders validate their public parameters
    on it before the charge (nothing is drawn)."""
    from dpkit.marginals import Records

    return Records(np.zeros((1, len(st.columns)), dtype=np.int64), _domain(st))


def _model_builder(method: str) -> Any:
    """The plan builder of a model-fitting method (:data:`dpkit.synth.synthetic.METHODS`)."""
    from dpkit.synth.synthetic import METHODS

    module, attr = METHODS[method]
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        raise InvalidParameter("method", f"{method!r} is not available in this version of dpkit") from None


def _model_methods() -> tuple[str, ...]:
    from dpkit.synth.synthetic import METHODS

    return tuple(METHODS)


def _method_options(builder: Any, iters: int, workload: Any = None) -> dict[str, Any]:
    """The options a model method's plan builder takes: the final fit's ``iters`` (``iters`` or ``final_iters``)
    and the ``workload`` (the requested sets, for a method that adapts to them)."""
    params = inspect.signature(builder).parameters
    kw: dict[str, Any] = {}
    if "iters" in params:
        kw["iters"] = iters
    elif "final_iters" in params:
        kw["final_iters"] = iters
    if workload is not None and "workload" in params:
        kw["workload"] = list(workload)
    return kw


def _validate_model(st: Statistic, method: str, share: float, rows: int, workload: Any = None) -> None:
    """Build the method's plan on a public dummy record (every public-parameter check; no draw, no charge)."""
    builder = _model_builder(method)
    kw = {"rho": share, "neighbours": _neighbours(None, rows),
          **_method_options(builder, st.option["iters"], workload)}
    try:
        builder(_dummy(st), **kw)
    except (InvalidParameter, WrongType) as exc:
        param = getattr(exc, "param", "")
        where = "budget" if param in ("rho", "epsilon", "budget") else "method"
        raise InvalidParameter(where, f"{method}: {exc}") from None


# -------------------------------------------------------------------------------------------------------------
# the shared engine side and records
# -------------------------------------------------------------------------------------------------------------
class _Attributes(Kind):
    """What both kinds share: the attributes, their engine expressions, the pre-charge data checks and the
    records rebuilt from the engine's group-by."""

    public_bins = True
    own_pass = True

    def column_text(self, st: Statistic) -> str:
        return ",".join(st.columns)

    def label(self, st: Statistic) -> str:
        return f"{st.kind}({','.join(st.columns)})"

    def _cells(self, t: Any, st: Statistic, ev: Any) -> Any:
        """``t`` restricted to rows in the declared domain, with ``_dpk_a{j}``: the category or the bin index."""
        e = _edges(st)
        tt = t
        for j, (c, d) in enumerate(zip(st.columns, st.domains, strict=True)):
            if c in e:
                b = ev.float_(tt[c]).bucket(list(e[c]), closed="left", close_extreme=True)
                tt = tt.mutate(**{f"_dpk_a{j}": b})
                tt = tt.filter(tt[f"_dpk_a{j}"].notnull())
            else:
                tt = tt.filter(tt[c].isin(list(d))).mutate(**{f"_dpk_a{j}": tt[c]})
        return tt

    def table(self, i: int, st: Statistic, t: Any, by: list[str], ev: Any) -> Any:
        tt = self._cells(t, st, ev)
        keys = [f"_dpk_a{j}" for j in range(len(st.columns))]
        return tt.aggregate(by=[*by, *keys], _n=tt.count())

    def data_checks(self, i: int, st: Statistic, t: Any, ev: Any) -> dict[str, Any]:
        e = _edges(st)
        cond = None
        for c, d in zip(st.columns, st.domains, strict=True):
            ok = (ev.float_(t[c]).bucket(list(e[c]), closed="left", close_extreme=True).notnull() if c in e
                  else t[c].isin(list(d)))
            cond = ok if cond is None else cond & ok
        return {f"_k{i}": ev.ibis.ifelse(cond, 1, 0).sum()}

    def check_data(self, i: int, st: Statistic, values: Mapping[str, Any]) -> None:
        v = values.get(f"_k{i}")
        n = 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
        if n == 0:
            raise InvalidData("data", f"{st.label}: no row has its values in the declared categories and bins "
                                      "(after filters); nothing to release")
        limit = MAX_WEIGHTED_RECORDS if math.prod(_sizes(st)) <= MAX_RECORDS else MAX_RECORDS
        if n > limit:
            raise InvalidData("data", f"{st.label}: more than {limit} rows in the declared domain, above the "
                                      "limit of the marginal methods here; filter or sample the table first")

    def _groups(self, st: Statistic, m: Any, i: int) -> tuple[np.ndarray, np.ndarray]:
        """``(codes k x d, counts k)`` of the engine's group-by (codes: category index or bin index)."""
        frame = m.extra(i)
        e = _edges(st)
        d = len(st.columns)
        keys = [f"_dpk_a{j}" for j in range(d)]
        lookups = [None if c in e else {v: k for k, v in enumerate(dom)}
                   for c, dom in zip(st.columns, st.domains, strict=True)]
        codes = []
        counts = []
        for r in frame[[*keys, "_n"]].itertuples(index=False, name=None):
            row = []
            for j, v in enumerate(r[:-1]):
                lk = lookups[j]
                row.append(int(v) if lk is None else lk[m.py(v)])
            codes.append(row)
            counts.append(int(r[-1]))
        if not codes:
            return np.zeros((0, d), dtype=np.int64), np.zeros(0, dtype=np.int64)
        arr, cnt = np.asarray(codes, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        order = np.lexsort(arr.T[::-1])  # the engine's row order is arbitrary: the same records on every engine
        return arr[order], cnt[order]

    def _records(self, st: Statistic, m: Any, i: int) -> Any:
        from dpkit.marginals import Records

        codes, counts = self._groups(st, m, i)
        return Records(codes, _domain(st), weights=counts)  # weighted: the expansion's marginals, not expanded

    def needs_zcdp(self, st: Statistic) -> bool:
        return st.option["method"] != "direct"

    def _no_groups(self, q: Query) -> None:
        if q.by:
            raise InvalidParameter("group_by", f"{self.name} are released over the whole table: remove group_by")


# -------------------------------------------------------------------------------------------------------------
# marginals
# -------------------------------------------------------------------------------------------------------------
_STD = re.compile(r"noise std ([0-9.eE+-]+)")


def _std_of(noise: str, scale: float) -> float:
    """The standard deviation of the integer noise: discrete Laplace ``sqrt(2q)/(1-q)``, ``q = exp(-1/t)``;
    discrete Gaussian ``sigma`` (an upper bound)."""
    if noise == "laplace":
        q = math.exp(-1.0 / scale)
        return math.sqrt(2.0 * q) / -math.expm1(-1.0 / scale)
    return scale


@register_kind
class Marginals(_Attributes):
    """``Query.marginals(columns, sets=... | ways=2, domains=..., bins=..., method="direct")``: the marginals (count
    tables) of the attribute sets, released from one exact group-by of the attributes.

    Methods (:mod:`dpkit.marginals`):

    - ``"direct"`` (default; cheap): :func:`dpkit.marginals.direct`, independent integer noise in every cell of
      every set, calibrated to the ``m`` sets together (L1 ``m R``: discrete Laplace of scale ``m R / ε`` under a
      ``PureDP`` budget; L2² ``m R²``: discrete Gaussian under ``ZCDP`` / ``ApproxDP`` budgets), then made
      mutually consistent and non-negative by :func:`dpkit.marginals.estimate` (a graphical model fitted to all
      of them: post-processing; no interval). ``consistent="least_squares"``: their least-squares consistent
      estimate (:func:`dpkit.marginals.direct` with ``consistent=True``: unbiased, the sets agree on shared
      attributes and on one total, cells may be negative or fractional) with exact per-cell 95% intervals (the
      Error section of :func:`~dpkit.marginals.direct`). ``consistent=False`` releases the noisy counts
      themselves with their exact 95% intervals (noise only). Each row's ``mechanism`` gives the per-cell noise
      standard deviation. The three options draw the same noise: only the post-processing differs.
    - ``"mst"`` / ``"smg"``: a model fitted by :func:`dpkit.marginals.mst` (or dpkit's select-measure-generate
      release, when its plan builder is available), projected to each requested set: model estimates without an
      interval (zCDP: a ``ZCDP`` budget, or an ``ApproxDP`` budget spent as the largest converting rho).

    Result rows: one per cell of each set, ``column`` the set (``"age,sex"``), ``bin`` the cell (``"age=[17, 25),
    sex=Male"``), ``value`` the estimate."""

    name = "marginals"
    spec_keys = ("columns", "domains", "bins", "sets", "ways", "method", "consistent", "iters")

    def build(self, q: Query, columns: Sequence[str], *, sets: Any = None, ways: int | None = None,
              domains: Mapping[str, Any] | None = None, bins: Mapping[str, Any] | None = None,
              method: str = "direct", consistent: bool | str = True, iters: int = 1000,
              weight: float = 1.0) -> Statistic:
        from dpkit.marginals import Domain
        from dpkit.tables._query import Statistic

        self._no_groups(q)
        cols, cats, edges = _attributes(q, columns, domains, bins)
        method = check.choice("method", method, ("direct", *_model_methods()))
        consistent = _consistent_option(consistent)
        it = check.size_limit("iters", iters, MAX_ITERS)
        w = check.positive("weight", weight)
        if sets is not None and ways is not None:
            raise InvalidParameter("sets", "give either sets or ways, not both")
        if sets is None:
            k = 2 if ways is None else check.integer("ways", ways, minimum=1)
            if k > len(cols):
                raise InvalidParameter("ways", "exceeds the number of columns")
            norm = [tuple(s) for s in itertools.combinations(cols, k)]
        else:
            if isinstance(sets, (str, bytes)) or not isinstance(sets, Sequence) or not sets:
                raise WrongType("sets", "a non-empty list of column lists")
            norm = []
            for s in sets:
                if isinstance(s, str):
                    s = (s,)
                if not isinstance(s, Sequence) or not s or any(not isinstance(c, str) for c in s):
                    raise WrongType("sets", "a non-empty list of non-empty column lists")
                if any(c not in cols for c in s):
                    raise InvalidParameter("sets", "a set names a column that is not in columns")
                if len(set(s)) != len(s):
                    raise InvalidParameter("sets", "a set repeats a column")
                norm.append(tuple(c for c in cols if c in s))  # the attributes' order
            if len(set(norm)) != len(norm):
                raise InvalidParameter("sets", "lists a set twice")
        sizes = dict(zip(cols, [len(dict(edges)[c]) - 1 if c in dict(edges) else len(d)
                                for c, d in zip(cols, cats, strict=True)], strict=True))
        cells = sum(math.prod(sizes[c] for c in s) for s in norm)
        if cells > MAX_CELLS:
            raise InvalidParameter("sets", f"the sets have {cells} cells in all, above the limit of {MAX_CELLS}: "
                                           "use fewer or smaller sets (coarser bins)")
        st = Statistic("marginals", "", weight=w, columns=cols, domains=cats,
                       options=(("bins", edges), ("sets", tuple(norm)), ("method", method),
                                ("consistent", consistent), ("iters", it)))
        if method == "direct" and consistent is True:  # the consistency step's junction tree, on public zeros
            from dpkit.marginals import Measurement, estimate

            dom = Domain(list(sizes.items()))
            try:
                estimate(dom, [Measurement(s, np.zeros(dom.shape_of(s)), 1.0) for s in norm], total=1.0, iters=0,
                         max_cells=MAX_TREE_CELLS)
            except InvalidParameter:
                raise InvalidParameter("sets", "the consistency step would need a junction tree with a clique above "
                                               f"{MAX_TREE_CELLS} cells: use fewer sets, consistent=False, or "
                                               "method='mst'") from None
        return st

    def columns_texts(self, st: Statistic) -> tuple[str, ...]:
        return tuple(",".join(s) for s in st.option["sets"])

    def is_nonnegative(self, st: Statistic) -> bool:
        return True

    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        _parse_attributes(path, value, kw, reader)
        opts = kw.setdefault("options", {})
        cols = kw["columns"]
        if "sets" in value and "ways" in value:
            raise reader.error(f"{path}.sets", "give either sets or ways, not both")
        if "sets" in value:
            sl = reader.list_(f"{path}.sets", value["sets"])
            sets = []
            for j, s in enumerate(sl):
                items = reader.list_(f"{path}.sets[{j}]", s)
                names = tuple(reader.ident(f"{path}.sets[{j}][{k}]", c) for k, c in enumerate(items))
                for k, c in enumerate(names):
                    if c not in cols:
                        raise reader.error(f"{path}.sets[{j}][{k}]", f"column {c!r} is not in columns")
                sets.append(names)
            opts["sets"] = sets
        if "ways" in value:
            opts["ways"] = reader.int_(f"{path}.ways", value["ways"])
        if "method" in value:
            opts["method"] = reader.str_(f"{path}.method", value["method"])
        if "consistent" in value:
            if isinstance(value["consistent"], str):
                text = reader.str_(f"{path}.consistent", value["consistent"])
                if text != "least_squares":
                    raise reader.error(f"{path}.consistent", 'must be true, false or "least_squares"')
                opts["consistent"] = text
            else:
                opts["consistent"] = reader.bool_(f"{path}.consistent", value["consistent"])
        if "iters" in value:
            opts["iters"] = reader.int_(f"{path}.iters", value["iters"], minimum=0)

    def from_spec(self, q: Query, st: Any) -> Query:
        o = st.options
        return q.marginals(list(st.columns), domains={c: list(v) for c, v in st.domains.items()},
                           bins=dict(o.get("bins", {})), sets=o.get("sets"), ways=o.get("ways"),
                           method=o.get("method", "direct"), consistent=o.get("consistent", True),
                           iters=o.get("iters", 1000), weight=st.weight)

    # -- planning
    def calibrate(self, sp: Any, cal: Any) -> None:
        st = sp.stat
        m = len(st.option["sets"])
        r = cal.bounds.rows
        method = st.option["method"]
        if method == "direct":
            sp.parts = [cal.part("cells", m * r, m * r * r, sp.share)]
        else:
            _validate_model(st, method, sp.share, r, workload=list(st.option["sets"]))
            sp.parts = []

    def plan_row(self, sp: Any, noise: str, confidence: float) -> dict[str, Any]:
        from dpkit.tables._planning import mechanism_text

        st = sp.stat
        if st.option["method"] == "direct":
            part = sp.parts[0]
            return {"column": self.column_text(st),
                    "mechanism": f"direct: {mechanism_text(noise, part.scale)} per cell of {len(st.option['sets'])} "
                                 f"sets" + _consistent_text(st.option["consistent"]),
                    "scale": part.scale, "half_width_95": float(part.noise.halfwidth(confidence))}
        return {"column": self.column_text(st), "mechanism": f"{st.option['method']}(rho={sp.share:.6g}): model "
                                                             "estimates", "scale": float("nan"),
                "half_width_95": float("nan")}

    # -- measuring
    def measure(self, i: int, sp: Any, m: Any) -> None:
        from dpkit.marginals import Measurement, direct, estimate

        st = sp.stat
        method = st.option["method"]
        sets = list(st.option["sets"])
        records = self._records(st, m, i)
        nb = _neighbours(m.unit, 1)
        labels = _level_labels(st)
        pos = {c: j for j, c in enumerate(st.columns)}
        lo_hi: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}
        if method == "direct":
            budget = {"epsilon": sp.share} if m.noise == "laplace" else {"rho": sp.share}
            least_squares = st.option["consistent"] == "least_squares"
            rel = direct(records, sets, noise=m.noise, neighbours=nb, rng=m.rng, consistent=least_squares,
                         **budget)
            noisy = rel.value
            std = float(rel.params["noise_std"])
            scale = float(rel.scale if rel.scale is not None else sp.parts[0].scale)
            mech = f"direct: {_mechanism(m.noise, scale)} per cell, noise std {std:.6g}"
            if least_squares:
                values = noisy
                lo_d, hi_d = rel.interval(0.95)
                lo_hi = {a: (np.asarray(lo_d[a], dtype=np.float64), np.asarray(hi_d[a], dtype=np.float64))
                         for a in sets}
                mech += "; least-squares consistent (post-processing), 95% interval per cell"
            elif st.option["consistent"]:
                model = estimate(records.domain, [Measurement(a, noisy[a], std) for a in sets],
                                 iters=st.option["iters"], max_cells=MAX_TREE_CELLS)
                values = {a: model.project(a) for a in sets}
                mech += "; made consistent by estimate() (post-processing)"
            else:
                values = noisy
                hw = float(sp.parts[0].noise.halfwidth())
                lo_hi = {a: (noisy[a] - hw, noisy[a] + hw) for a in sets}
        else:
            builder = _model_builder(method)
            kw = {"rho": sp.share, "neighbours": nb, **_method_options(builder, st.option["iters"], sets)}
            model = m.sample(builder(records, **kw)).value
            values = {a: model.project(a) for a in sets}
            mech = f"{method}(rho={sp.share:.6g}): model estimate, no interval"
        adjusted = method == "direct" and st.option["consistent"] is not False  # noisy counts changed by a fit
        for a in sets:
            arr = np.asarray(values[a], dtype=np.float64)
            lo_a, hi_a = lo_hi.get(a, (None, None))
            col = ",".join(a)
            for idx in itertools.product(*(range(len(labels[pos[c]])) for c in a)):
                cell = ", ".join(f"{c}={labels[pos[c]][k]}" for c, k in zip(a, idx, strict=True))
                lo = float(lo_a[idx]) if lo_a is not None else float("nan")
                hi = float(hi_a[idx]) if hi_a is not None else float("nan")
                m.emit(st, 0, cell, float(arr[idx]), lo, hi, mech, column=col, postprocessed=adjusted)

    # -- report
    def render(self, title: str, rows: list[dict[str, Any]], report: Any) -> str:
        return render_marginal_set(rows, report)


def _consistent_option(value: Any) -> bool | str:
    """The marginals kind's ``consistent``: ``True``, ``False`` or ``"least_squares"``."""
    if isinstance(value, str):
        return check.choice("consistent", value, ("least_squares",))
    if not isinstance(value, (bool, np.bool_)):
        raise WrongType("consistent", 'a bool or "least_squares"')
    return bool(value)


def _consistent_text(consistent: bool | str) -> str:
    if consistent == "least_squares":
        return "; least-squares consistent"
    return "; made consistent" if consistent else ""


def _mechanism(noise: str, scale: float) -> str:
    from dpkit.tables._planning import mechanism_text

    return mechanism_text(noise, scale)


def render_marginal_set(rows: list[dict[str, Any]], report: Any) -> str:
    """One released set: its expected error (from the noise std in the rows' mechanism, when measured) and a bar
    chart of its cells (the report's table lists every cell)."""
    if not rows:
        return ""
    col = report.text(rows[0].get("column"))
    mech = report.text(rows[0].get("mechanism"))
    vals = [float(r.get("value") or 0.0) for r in rows]
    total = sum(vals)
    cells = len(rows)
    found = _STD.search(mech)
    if found and total > 0:
        std = float(found.group(1))
        err = (f"noise std {report.number(std)} per cell; expected L1 error of the noisy marginal at most "
               f"{report.number(cells * std)} (cells × std), i.e. total variation at most "
               f"{report.number(min(1.0, cells * std / (2 * total)))} of its estimated total "
               f"{report.number(total)}")
        if "consistent" in mech:
            err += "; the consistent estimate shown is post-processing of it"
    else:
        err = "model estimate: no stated error (the model's measurements carry the noise; see the method)"
    head = (f'<div class="marg"><p><b>marginal {report.escape(col)}</b> — {cells} cells. '
            f"{report.escape(err)}.</p>")
    return head + report.chart(f"marginal {col}", rows) + "</div>"


# -------------------------------------------------------------------------------------------------------------
# synthetic
# -------------------------------------------------------------------------------------------------------------
@register_kind
class Synthetic(_Attributes):
    """``Query.synthetic(columns, domains=..., bins=..., method="mst", rows=None, output=None)``: a synthetic table
    of the attributes, by :func:`dpkit.synth.synthesize` on the engine's group-by (its count column as
    ``weights``: the records of the neighbour relation are the underlying rows), numeric columns drawn back
    uniformly within their bins. zCDP (a ``ZCDP`` budget, or an ``ApproxDP`` budget spent as the largest
    converting rho). The table is ``res.attrs["synthetic"][label]`` (a :class:`SyntheticTable`; the CLI writes
    it to ``output``, a ``.csv`` or ``.parquet`` file name in the release folder).

    Result rows (all DP: functions of the released model and synthetic records only): ``bin = "rows"`` (rows
    sampled), ``"estimated records"`` (the model's total), and up to :data:`MAX_COMPARISONS` rows
    ``"TV <set>"``: the total variation distance between the synthetic records' marginal and the method's
    released noisy measurement of that set (negative counts clipped, normalised), with the noise std per cell
    in ``mechanism``. They compare released values only, never the private data."""

    name = "synthetic"
    spec_keys = ("columns", "domains", "bins", "method", "rows", "output", "iters")

    def build(self, q: Query, columns: Sequence[str], *, domains: Mapping[str, Any] | None = None,
              bins: Mapping[str, Any] | None = None, method: str = "mst", rows: int | None = None,
              output: str | None = None, iters: int = 1000, weight: float = 1.0) -> Statistic:
        from dpkit.tables._query import Statistic

        self._no_groups(q)
        cols, cats, edges = _attributes(q, columns, domains, bins)
        if _WEIGHTS in cols:
            raise InvalidParameter("columns", f"{_WEIGHTS!r} is reserved")
        method = check.choice("method", method, _model_methods())
        n = None if rows is None else check.size_limit("rows", rows, MAX_RECORDS, minimum=1)
        if output is not None:
            output = output_name(output)
        it = check.size_limit("iters", iters, MAX_ITERS)
        w = check.positive("weight", weight)
        return Statistic("synthetic", "", weight=w, columns=cols, domains=cats,
                         options=(("bins", edges), ("method", method), ("rows", n), ("output", output),
                                  ("iters", it)))

    def parse_spec(self, path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
        _parse_attributes(path, value, kw, reader)
        opts = kw.setdefault("options", {})
        if "method" in value:
            opts["method"] = reader.str_(f"{path}.method", value["method"])
        if "rows" in value:
            opts["rows"] = reader.int_(f"{path}.rows", value["rows"])
        if "iters" in value:
            opts["iters"] = reader.int_(f"{path}.iters", value["iters"], minimum=0)
        if "output" not in value:
            raise reader.error(f"{path}.output", 'missing: the file name of the synthetic table, e.g. "synthetic.csv"')
        try:
            opts["output"] = output_name(value["output"])
        except (InvalidParameter, WrongType) as exc:
            raise reader.error(f"{path}.output", str(exc).split(": ", 1)[-1]) from None
        if opts["output"].endswith(".parquet"):
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise reader.error(f"{path}.output", "a .parquet file needs pyarrow (pip install pyarrow)") from None

    def from_spec(self, q: Query, st: Any) -> Query:
        o = st.options
        return q.synthetic(list(st.columns), domains={c: list(v) for c, v in st.domains.items()},
                           bins=dict(o.get("bins", {})), method=o.get("method", "mst"), rows=o.get("rows"),
                           output=o.get("output"), iters=o.get("iters", 1000), weight=st.weight)

    def calibrate(self, sp: Any, cal: Any) -> None:
        _validate_model(sp.stat, sp.stat.option["method"], sp.share, cal.bounds.rows)
        sp.parts = []

    def plan_row(self, sp: Any, noise: str, confidence: float) -> dict[str, Any]:
        st = sp.stat
        out = st.option["output"]
        return {"column": self.column_text(st),
                "mechanism": f"{st.option['method']}(rho={sp.share:.6g}): synthetic records"
                             + (f" -> {out}" if out else ""),
                "scale": float("nan"), "half_width_95": float("nan")}

    def measure(self, i: int, sp: Any, m: Any) -> None:
        import pandas as pd

        from dpkit.synth import synthesize

        st = sp.stat
        method = st.option["method"]
        codes, counts = self._groups(st, m, i)
        e = _edges(st)
        data: dict[str, Any] = {}
        for j, (c, d) in enumerate(zip(st.columns, st.domains, strict=True)):
            k = codes[:, j]
            if c in e:
                left = np.asarray(e[c][:-1], dtype=np.float64)[k]
                if m.plan.query.schema[c] == "int":  # the bin's smallest integer: re-encoded to the same bin
                    data[c] = pd.Series(np.ceil(left).astype(np.int64))
                else:
                    data[c] = pd.Series(left)
            else:
                vals = np.empty(len(d), dtype=object)
                vals[:] = list(d)
                data[c] = pd.Series(vals[k], dtype=bool if all(isinstance(v, bool) for v in d) else object)
        data[_WEIGHTS] = pd.Series(counts, dtype=np.int64)
        frame = pd.DataFrame(data)
        domains = {c: list(d) for c, d in zip(st.columns, st.domains, strict=True) if c not in e}
        rel = synthesize(frame, rho=sp.share, domain=domains, bins={c: list(v) for c, v in e.items()},
                         method=method, rows=st.option["rows"], weights=_WEIGHTS, neighbours=_neighbours(m.unit, 1),
                         options=_method_options(_model_builder(method), st.option["iters"]), rng=m.rng)
        out = rel.value
        n = int(rel.parts["rows"])
        model = rel.parts["model"]
        m.publish(st, SyntheticTable(out, st.option["output"], method, n))
        mech = f"{method}(rho={sp.share:.6g})"
        target = f" -> {st.option['output']}" if st.option["output"] else ""
        nan = float("nan")
        m.emit(st, 0, "rows", float(n), nan, nan, f"{mech}: synthetic records{target}")
        m.emit(st, 0, "estimated records", float(model.total), nan, nan, f"{mech}: the fitted model's total")
        for label, tv, std, floor in _comparisons(st, out, rel.parts.get("method") or {}):
            m.emit(st, 0, f"TV {label}", tv, nan, nan,
                   f"post-processing: synthetic vs released noisy marginal; noise std {std:.6g} per cell "
                   f"(noise alone: TV about {floor:.3g})")

    def render(self, title: str, rows: list[dict[str, Any]], report: Any) -> str:
        return render_synthetic(rows, report)


def output_name(value: Any) -> str:
    """The synthetic table's file name: a plain ``.csv`` / ``.parquet`` file name (no folder), not one of the
    release's own files."""
    if not isinstance(value, str):
        raise WrongType("output", "a file name ending in .csv or .parquet")
    name = value.strip()
    if (not name or name != value or "/" in name or "\\" in name or name.startswith(".") or len(name) > 200
            or any(ord(ch) < 32 for ch in name)):
        raise InvalidParameter("output", "must be a plain file name (no folder), written in the release's folder")
    if not name.lower().endswith(_OUTPUT_SUFFIXES):
        raise InvalidParameter("output", "must end in .csv or .parquet")
    if name.lower() in ("results.csv", "results.json", "results.parquet", "report.html", "receipts.json"):
        raise InvalidParameter("output", "is the name of one of the release's own files")
    return name


def _encode(st: Statistic, frame: Any) -> np.ndarray:
    """The synthetic rows' codes on the statistic's domain (category index, bin index)."""
    e = _edges(st)
    out = np.zeros((len(frame), len(st.columns)), dtype=np.int64)
    for j, (c, d) in enumerate(zip(st.columns, st.domains, strict=True)):
        if c in e:
            ed = np.asarray(e[c], dtype=np.float64)
            x = np.asarray(frame[c], dtype=np.float64)
            out[:, j] = np.clip(np.searchsorted(ed, x, side="right") - 1, 0, ed.size - 2)
        else:
            lk = {v: k for k, v in enumerate(d)}
            out[:, j] = [lk[v] for v in frame[c].tolist()]
    return out


def _comparisons(st: Statistic, frame: Any, parts: Mapping[str, Any]) -> list[tuple[str, float, float, float]]:
    """``(set label, TV, noise std, expected TV of the noise alone)``: the synthetic records' marginal against each
    set's released identity measurement of the method (its most precise one when measured more than once; on the
    method's compressed domain when it merged levels; negative noisy counts clipped, normalised). Released values
    only."""
    measurements = parts.get("measurements") or []
    cdom = parts.get("compressed_domain")
    levels = parts.get("levels") or {}
    if not measurements or len(frame) == 0:
        return []
    codes = _encode(st, frame)
    if cdom is None:
        cdom = _domain(st)
    comp = codes.copy()
    for j, c in enumerate(st.columns):
        if c in levels:
            comp[:, j] = np.asarray(levels[c], dtype=np.int64)[codes[:, j]]
    best: dict[tuple[str, ...], Any] = {}  # a set measured more than once: its most precise measurement
    for ms in measurements:
        if ms.query is None and ms.attrs and (ms.attrs not in best or ms.std < best[ms.attrs].std):
            best[ms.attrs] = ms
    out = []
    for ms in best.values():
        shape = cdom.shape_of(ms.attrs)
        axes = [st.columns.index(a) for a in ms.attrs]
        flat = np.ravel_multi_index(tuple(comp[:, a] for a in axes), shape)
        syn = np.bincount(flat, minlength=math.prod(shape)).astype(np.float64)
        noisy = np.clip(np.asarray(ms.values, dtype=np.float64).ravel(), 0.0, None)
        if noisy.sum() <= 0:
            continue
        p, q = noisy / noisy.sum(), syn / syn.sum()
        tv = 0.5 * float(np.abs(p - q).sum())
        total = float(np.asarray(ms.values, dtype=np.float64).sum())
        floor = min(1.0, syn.size * float(ms.std) * math.sqrt(2 / math.pi) / (2 * max(total, 1.0)))
        out.append((", ".join(ms.attrs), tv, float(ms.std), floor))
        if len(out) >= MAX_COMPARISONS:
            break
    return out


def render_synthetic(rows: list[dict[str, Any]], report: Any) -> str:
    """The synthetic table's summary and its noisy-vs-synthetic comparisons (released values only)."""
    by = {report.text(r.get("bin")): r for r in rows}
    first = rows[0] if rows else {}
    mech = report.text((by.get("rows") or first).get("mechanism"))
    out = [f'<div class="synth"><p><b>synthetic table of {report.escape(report.text(first.get("column")))}</b>: '
           f"{report.escape(report.number((by.get('rows') or {}).get('value')))} rows "
           f"({report.escape(mech)}); the model estimates "
           f"{report.escape(report.number((by.get('estimated records') or {}).get('value')))} records.</p>"]
    comps = [r for r in rows if report.text(r.get("bin")).startswith("TV ")]
    if comps:
        out.append('<p class="small">How close the synthetic records are to the released noisy marginals: total '
                   "variation distance (0 = identical, 1 = disjoint). These comparisons are computed from released "
                   "values only (the method's noisy measurements and the synthetic records), never from the "
                   "private data, so they are differentially private too; the noise in the measurement accounts "
                   "for part of each distance.</p><table><thead><tr><th>marginal</th><th>TV(synthetic, noisy)"
                   "</th><th>noise</th></tr></thead><tbody>")
        for r in comps:
            out.append(f"<tr><td>{report.escape(report.text(r.get('bin'))[3:])}</td>"
                       f'<td class="n">{report.escape(report.number(r.get("value")))}</td>'
                       f"<td>{report.escape(report.text(r.get('mechanism')).split('; ', 1)[-1])}</td></tr>")
        out.append("</tbody></table>")
    out.append("</div>")
    return "".join(out)


# -------------------------------------------------------------------------------------------------------------
# the CLI spec's attribute keys (both kinds)
# -------------------------------------------------------------------------------------------------------------
def _parse_attributes(path: str, value: Mapping[str, Any], kw: dict[str, Any], reader: Any) -> None:
    """``columns`` (required), ``bins = {col = [edges]}`` for numeric columns, ``domains = "domain" | {col =
    [categories]}`` (default: the spec's ``[domain]`` category lists) for the others."""
    if "columns" not in value:
        raise reader.error(f"{path}.columns", "missing: the columns (attributes)")
    cl = reader.list_(f"{path}.columns", value["columns"])
    cols = tuple(reader.ident(f"{path}.columns[{i}]", c) for i, c in enumerate(cl))
    if len(set(cols)) != len(cols):
        raise reader.error(f"{path}.columns", "repeats a column")
    bins: dict[str, tuple[float, ...]] = {}
    if "bins" in value:
        bt = reader.table(f"{path}.bins", value["bins"], set(cols))
        for c, v in bt.items():
            bins[c] = reader.increasing(f"{path}.bins.{c}", v, min_len=2)
    dv = value.get("domains", "domain")
    given: dict[str, Any] = {}
    if dv != "domain":
        given = reader.table(f"{path}.domains", dv, set(cols))
    doms: dict[str, tuple[Any, ...]] = {}
    for c in cols:
        if c in bins:
            if c in given:
                raise reader.error(f"{path}.domains.{c}", "the column has bins too: give one of them")
            continue
        if c in given:
            doms[c] = reader.scalars(f"{path}.domains.{c}", given[c])
            continue
        d = reader.domain.get(c)
        if not isinstance(d, tuple):
            raise reader.error(f"{path}.bins", f"column {c!r} has no public category list in [domain] or domains; "
                                               "give its categories, or bins = {" + c + " = [edges]} for a numeric "
                                               "column (never read from the data)")
        doms[c] = d
    kw["columns"] = cols
    kw["domains"] = doms
    kw.setdefault("options", {})["bins"] = bins
