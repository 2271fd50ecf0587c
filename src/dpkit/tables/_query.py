"""Immutable query builders of :mod:`dpkit.tables` (see ``docs/tables.md``).

A :class:`Query` is a public description: a name, row filters and derived columns in the safe expression
language (:mod:`dpkit.tables._expr`), an optional group-by with public or private keys, and a list of
statistics with their public parameters (bounds, granularity, quantile levels, bin edges, categories,
domains, budget weights). Building a query checks everything against the public schema (column names and
types); no data is read. Every builder method returns a new query.
"""

from __future__ import annotations

import datetime
import keyword
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.stats import _common as _stats_common
from dpkit.tables._expr import Expr, chained_depth, parse

__all__ = ["Query", "Statistic"]

_MAX_BINS = 2**16
_MAX_KEYS = 2**22
NUMERIC = ("int", "float")


@dataclass(frozen=True)
class Statistic:
    """One aggregation of a query (public parameters only)."""

    kind: str  # count, count_distinct, sum, mean, variance, quantile, histogram, contingency
    column: str = ""
    bounds: tuple[float, float] | None = None
    granularity: float | None = None
    weight: float = 1.0
    levels: tuple[float, ...] = ()
    bins: int = 0
    edges: tuple[float, ...] = ()
    categories: tuple[Any, ...] = ()
    columns: tuple[str, ...] = ()
    domains: tuple[tuple[Any, ...], ...] = ()
    candidates: tuple[float, ...] = ()  # public ladder for bounds found privately (bounds=None)

    @property
    def auto_bounds(self) -> bool:
        """Whether the clamping bounds are to be found privately (``bounds=None``)."""
        return self.kind in ("sum", "mean", "variance") and self.bounds is None

    @property
    def label(self) -> str:
        """``count``, ``sum(income)``, ``contingency(education,sex)`` -- the key used by ``solve``'s targets."""
        if self.kind == "contingency":
            return f"contingency({','.join(self.columns)})"
        return f"{self.kind}({self.column})" if self.column else self.kind

    @property
    def unit_range(self) -> tuple[int, int]:
        """``(lo_u, hi_u)``: the clamped bounds in granularity units, ``floor(b / g + 1/2)`` (the engine
        rounds every clamped value the same way and clips the result to this range again)."""
        assert self.bounds is not None and self.granularity is not None
        lo, hi = self.bounds
        return math.floor(lo / self.granularity + 0.5), math.floor(hi / self.granularity + 0.5)

    @property
    def units(self) -> int:
        """``K``: the largest absolute value of a clamped, rounded record in granularity units."""
        a, b = self.unit_range
        return max(abs(a), abs(b), 1)


def bound_candidates(integer: bool) -> tuple[float, ...]:
    """The public ladder searched when ``bounds=None``: ``0`` and ``±2^k`` for ``k = -10 .. 40`` (``k >= 0``
    for integer columns), fixed before any data is seen (as :func:`dpkit.stats.bounds.default_candidates`)."""
    ks = range(0 if integer else -10, 41)
    pos = [math.ldexp(1.0, k) for k in ks]
    return tuple([-x for x in reversed(pos)] + [0.0] + pos)


def default_granularity(bounds: tuple[float, float], integer: bool) -> float:
    """The public rounding step of a clamped value: 1 for an integer column whose bounds fit in 2^24 units,
    else the largest power of two ``g`` with ``max(|lo|, |hi|) / g >= 2^20`` (a relative rounding error of at
    most ``2^-21`` of the bound per record)."""
    m = max(abs(bounds[0]), abs(bounds[1]))
    if integer and m <= 2**24:
        return 1.0
    if m == 0:
        return 1.0
    return math.ldexp(1.0, math.floor(math.log2(m)) - 20)


@dataclass(frozen=True)
class Query:
    """An immutable DP query over a session's table (build it with :meth:`Session.query`)."""

    session: Any = field(repr=False, compare=False)
    name: str
    filters: tuple[Expr, ...] = ()
    derives: tuple[tuple[str, Expr], ...] = ()
    schema: Mapping[str, str] = field(default_factory=dict, repr=False)
    by: tuple[str, ...] = ()
    keys: Any = None  # None (ungrouped), "private", or a tuple of key tuples
    selection_weight: float = 1.0
    statistics: tuple[Statistic, ...] = ()
    diagnostics_weight: float | None = None  # None: no diagnostics (see Query.diagnostics)

    # ------------------------------------------------------------------ rows
    def filter(self, expression: str) -> Query:
        """Keep the rows where the public ``expression`` holds (a per-row transformation: free)."""
        e = parse(expression, self.schema, "expression")
        chained_depth(e, self.derives, "expression")
        self.session._expression_type(self, e, "expression")  # compiles it: type errors surface here
        return replace(self, filters=(*self.filters, e))

    def derive(self, **columns: str) -> Query:
        """New columns from expressions over existing columns (``decade="age // 10"``)."""
        q = self
        for name, text in columns.items():
            if not name.isidentifier() or keyword.iskeyword(name) or len(name) > 200:
                raise InvalidParameter("derive", "column names must be identifiers (not keywords, <= 200 chars)")
            e = parse(text, q.schema, name)
            chained_depth(e, q.derives, name)
            kind = self.session._expression_type(q, e, name)
            schema = dict(q.schema)
            schema[name] = kind
            q = replace(q, derives=(*q.derives, (name, e)), schema=schema)
        return q

    # ------------------------------------------------------------------ groups
    def group_by(self, *columns: str, keys: Any, selection_weight: float = 1.0) -> Query:
        """Group by ``columns`` with public ``keys`` (a list of values for one column, a list of tuples, or
        a dict ``{column: values}`` for their cross product) or ``keys="private"`` (partition selection).

        Public keys: rows whose key is not listed are dropped; listed keys without rows get a noisy zero.
        Private keys: the groups are chosen by a thresholded noisy distinct-unit count (needs an
        ``ApproxDP`` budget; ``selection_weight`` is its share of the query's epsilon).
        """
        if self.by:
            raise InvalidParameter("group_by", "the query is already grouped")
        if self.statistics:
            raise InvalidParameter("group_by", "call group_by before adding statistics")
        if not columns:
            raise InvalidParameter("group_by", "needs at least one column")
        for c in columns:
            if not isinstance(c, str):
                raise WrongType("group_by", "column names")
            if c not in self.schema:
                raise InvalidParameter("group_by", f"unknown column {c!r}")
        if len(set(columns)) != len(columns):
            raise InvalidParameter("group_by", "repeated column")
        w = check.positive("selection_weight", selection_weight)
        if isinstance(keys, str):
            if keys != "private":
                raise InvalidParameter("keys", "a list of public keys or 'private'")
            return replace(self, by=tuple(columns), keys="private", selection_weight=w)
        return replace(self, by=tuple(columns), keys=_keys(keys, columns, self.schema))

    # ------------------------------------------------------------------ diagnostics
    def diagnostics(self, enabled: bool = True, *, weight: float = 1.0) -> Query:
        """Also release DP diagnostics, paid from this query's budget (a share ``weight``, like a statistic's,
        inside the query's one charge; shown by ``plan``): per group, noisy counts of the values clamped below
        and above the bounds of every bounded column (sum, mean, variance, quantiles) and, under a user
        privacy unit, noisy counts of the rows (and groups, when ``max_groups`` applies) dropped by
        contribution bounding. Rows of the result with ``statistic="diagnostic"``, ``bin`` one of
        ``clamped_low``, ``clamped_high``, ``dropped_rows``, ``dropped_groups`` (:mod:`dpkit.tables._diagnostics`
        derives their sensitivities). A query with nothing to diagnose gets no diagnostics and no share.
        ``diagnostics(False)`` turns them off."""
        if not isinstance(enabled, bool):
            raise WrongType("diagnostics", "True or False")
        w = check.positive("weight", weight)
        return replace(self, diagnostics_weight=w if enabled else None)

    # ------------------------------------------------------------------ statistics
    def _add(self, stat: Statistic) -> Query:
        return replace(self, statistics=(*self.statistics, stat))

    def _numeric(self, column: Any) -> str:
        if not isinstance(column, str):
            raise WrongType("column", "a column name")
        if column not in self.schema:
            raise InvalidParameter("column", f"unknown column {column!r}")
        if self.schema[column] not in NUMERIC:
            raise WrongType("column", f"a numeric column ({column!r} is {self.schema[column]})")
        return column

    def _bounded(self, kind: str, column: Any, bounds: Any, granularity: Any, weight: Any) -> Statistic:
        col = self._numeric(column)
        w = check.positive("weight", weight)
        if bounds is None:  # found privately after the charge (Session: a third of the statistic's share)
            g = None if granularity is None else check.positive("granularity", granularity)
            return Statistic(kind, col, None, g, w, candidates=bound_candidates(self.schema[col] == "int"))
        b = _pair(bounds)
        if granularity is None:
            g = default_granularity(b, self.schema[col] == "int")
        else:
            g = check.positive("granularity", granularity)
        k = max(abs(b[0]), abs(b[1])) / g
        if k > 2**24:
            raise InvalidParameter("granularity", "too fine for the bounds (more than 2^24 units)")
        return Statistic(kind, col, b, g, w)

    def count(self, *, weight: float = 1.0) -> Query:
        """Number of rows (after bounding) per group."""
        return self._add(Statistic("count", weight=check.positive("weight", weight)))

    def count_distinct(self, *, weight: float = 1.0) -> Query:
        """Number of distinct privacy units per group (rows under the default row unit)."""
        return self._add(Statistic("count_distinct", weight=check.positive("weight", weight)))

    def sum(self, column: str, bounds: Any = None, *, granularity: float | None = None,
            weight: float = 1.0) -> Query:
        """Sum of ``column`` clamped to ``bounds`` and rounded to multiples of ``granularity``."""
        return self._add(self._bounded("sum", column, bounds, granularity, weight))

    def mean(self, column: str, bounds: Any = None, *, granularity: float | None = None,
             weight: float = 1.0) -> Query:
        """Noisy clamped sum / noisy count (half the weight each)."""
        return self._add(self._bounded("mean", column, bounds, granularity, weight))

    def variance(self, column: str, bounds: Any = None, *, granularity: float | None = None,
                 weight: float = 1.0) -> Query:
        """From noisy count, sum and sum of squares (a third of the weight each)."""
        return self._add(self._bounded("variance", column, bounds, granularity, weight))

    def quantiles(self, column: str, levels: Any, bounds: Any = None, *, bins: int = 1024,
                  weight: float = 1.0) -> Query:
        """Quantiles by the exponential mechanism over ``bins`` equal-width buckets of ``bounds``."""
        col = self._numeric(column)
        if bounds is None:
            raise InvalidParameter("bounds", "public clamping bounds (lo, hi) are required")
        b = _pair(bounds)
        lv = check.public_vector("levels", [levels] if np.isscalar(levels) else levels, max_size=256)
        if np.any(lv < 0) or np.any(lv > 1):
            raise InvalidParameter("levels", "must be in [0, 1]")
        k = check.integer("bins", bins, minimum=1)
        if k > _MAX_BINS:
            raise InvalidParameter("bins", "too many bins")
        return self._add(Statistic("quantile", col, b, None, check.positive("weight", weight),
                                   levels=tuple(float(x) for x in lv), bins=k))

    def histogram(self, column: str, *, edges: Any = None, categories: Any = None, weight: float = 1.0) -> Query:
        """Counts per public bin: numeric ``edges`` (bins ``[e_i, e_{i+1})``, the last closed; values outside
        are not counted) or ``categories`` (values not listed are not counted)."""
        if not isinstance(column, str):
            raise WrongType("column", "a column name")
        if column not in self.schema:
            raise InvalidParameter("column", f"unknown column {column!r}")
        w = check.positive("weight", weight)
        if (edges is None) == (categories is None):
            raise InvalidParameter("edges", "give exactly one of edges and categories")
        if edges is not None:
            self._numeric(column)
            e = check.public_vector("edges", edges, min_size=2, max_size=_MAX_BINS, increasing=True)
            return self._add(Statistic("histogram", column, weight=w, edges=tuple(float(x) for x in e)))
        cats = _values("categories", categories, self.schema[column])
        return self._add(Statistic("histogram", column, weight=w, categories=cats))

    def contingency(self, columns: Sequence[str], domains: Mapping[str, Any], *, weight: float = 1.0) -> Query:
        """A k-way table of counts over the public ``domains`` of ``columns`` (cells outside are not counted)."""
        if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
            raise WrongType("columns", "a non-empty list of column names")
        if not isinstance(domains, Mapping):
            raise WrongType("domains", "a mapping column -> list of values")
        cols = tuple(columns)
        doms = []
        cells = 1
        for c in cols:
            if not isinstance(c, str) or c not in self.schema:
                raise InvalidParameter("columns", f"unknown column {c!r}")
            if c not in domains:
                raise InvalidParameter("domains", f"no domain for column {c!r}")
            d = _values("domains", domains[c], self.schema[c])
            doms.append(d)
            cells *= len(d)
        if len(set(cols)) != len(cols):
            raise InvalidParameter("columns", "repeated column")
        if cells > _MAX_KEYS:
            raise InvalidParameter("domains", "too many cells")
        return self._add(Statistic("contingency", "", weight=check.positive("weight", weight), columns=cols,
                                   domains=tuple(doms)))


def _values(name: str, values: Any, kind: str) -> tuple[Any, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray, set, frozenset)):
        raise WrongType(name, "a list of values")
    out = tuple(v.item() if isinstance(v, np.generic) else v for v in values)
    if not out:
        raise InvalidParameter(name, "must not be empty")
    if len(out) > _MAX_KEYS:
        raise InvalidParameter(name, "too many values")
    for v in out:
        _check_value(name, v, kind)
    if len(set(out)) != len(out):
        raise InvalidParameter(name, "repeated value")
    return out


def _pair(bounds: Any) -> tuple[float, float]:
    """Public bounds ``(lo, hi)``: a list, tuple or array of two finite reals (a mapping or set is refused
    before :func:`dpkit.stats._common.bounds` indexes it)."""
    if isinstance(bounds, (str, bytes, Mapping, set, frozenset)) or not isinstance(bounds, (Sequence, np.ndarray)):
        raise WrongType("bounds", "a pair (lo, hi) of finite reals")
    if isinstance(bounds, np.ndarray) and bounds.ndim != 1:
        raise WrongType("bounds", "a pair (lo, hi) of finite reals")
    return _stats_common.bounds(tuple(bounds))


def _check_value(name: str, v: Any, kind: str) -> None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        raise InvalidParameter(name, "values must not be missing")
    if not isinstance(v, (str, bool, int, float, datetime.date)):
        raise WrongType(name, "strings, numbers, booleans or dates")
    if kind == "string" and not isinstance(v, str):
        raise WrongType(name, "strings for a string column")
    if kind in NUMERIC and (isinstance(v, (bool, str)) or not isinstance(v, (int, float))):
        raise WrongType(name, "numbers for a numeric column")
    if kind == "bool" and not isinstance(v, bool):
        raise WrongType(name, "booleans for a boolean column")


def _keys(keys: Any, columns: tuple[str, ...], schema: Mapping[str, str]) -> tuple[tuple[Any, ...], ...]:
    if keys is None:
        raise InvalidParameter("keys", "give the public keys or 'private'")
    if isinstance(keys, Mapping):
        import itertools

        for c in keys:
            if c not in columns:
                raise InvalidParameter("keys", f"column {c!r} is not grouped")
        per = [_values("keys", keys[c], schema[c]) if c in keys else None for c in columns]
        if any(p is None for p in per):
            raise InvalidParameter("keys", "every grouped column needs its values")
        out = tuple(itertools.product(*per))  # type: ignore[arg-type]
    else:
        if isinstance(keys, (str, bytes)) or not isinstance(keys, (Sequence, np.ndarray)):
            raise WrongType("keys", "a list of keys, a dict of per-column values or 'private'")
        if len(columns) == 1:
            out = tuple((v,) for v in _values("keys", keys, schema[columns[0]]))
        else:
            rows = []
            for k in keys:
                if not isinstance(k, (tuple, list)) or len(k) != len(columns):
                    raise WrongType("keys", f"tuples of {len(columns)} values")
                t = tuple(v.item() if isinstance(v, np.generic) else v for v in k)
                for v, c in zip(t, columns, strict=True):
                    _check_value("keys", v, schema[c])
                rows.append(t)
            if not rows:
                raise InvalidParameter("keys", "must not be empty")
            if len(set(rows)) != len(rows):
                raise InvalidParameter("keys", "repeated key")
            out = tuple(rows)
    if len(out) > _MAX_KEYS:
        raise InvalidParameter("keys", "too many keys")
    return out
