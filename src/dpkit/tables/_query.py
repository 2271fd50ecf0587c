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
from dpkit.tables._expr import Expr, chained_depth, parse

__all__ = ["Query", "Statistic"]

_MAX_KEYS = 2**22
NUMERIC = ("int", "float")


@dataclass(frozen=True)
class Statistic:
    """One aggregation of a query (public parameters only). ``kind`` names a registered statistic kind
    (:mod:`dpkit.tables.kinds`), which interprets the other fields; ``options`` holds the public parameters
    of a kind that the named fields do not cover (``(name, value)`` pairs)."""

    kind: str  # count, count_distinct, sum, mean, variance, quantile, histogram, contingency, or a registered kind
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
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def kind_class(self) -> Any:
        """The registered :class:`~dpkit.tables.kinds.Kind` of this statistic."""
        from dpkit.tables.kinds import get_kind

        return get_kind(self.kind)

    @property
    def option(self) -> dict[str, Any]:
        """``options`` as a dict."""
        return dict(self.options)

    @property
    def auto_bounds(self) -> bool:
        """Whether the clamping bounds are to be found privately (``bounds=None``)."""
        return bool(self.kind_class.auto_bounds(self))

    @property
    def label(self) -> str:
        """``count``, ``sum(income)``, ``contingency(education,sex)`` -- the key used by ``solve``'s targets."""
        return str(self.kind_class.label(self))

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
    def add(self, kind: str, *args: Any, **kwargs: Any) -> Query:
        """Add a statistic of the registered ``kind`` (:mod:`dpkit.tables.kinds`): ``q.add("mean", "age",
        (0, 100))`` is ``q.mean("age", (0, 100))``. The kind validates the parameters against the schema."""
        from dpkit.tables.kinds import get_kind

        if not isinstance(kind, str):
            raise WrongType("kind", "the name of a registered statistic kind")
        st = get_kind(kind).build(self, *args, **kwargs)
        return replace(self, statistics=(*self.statistics, st))

    def __getattr__(self, name: str) -> Any:
        # the builder method of a kind registered after this class was written (register_kind)
        if not name.startswith("_"):
            from dpkit.tables.kinds import by_method

            k = by_method(name)
            if k is not None:
                def builder(*args: Any, **kwargs: Any) -> Query:
                    return self.add(k.name, *args, **kwargs)

                builder.__doc__ = type(k).__doc__
                return builder
        raise AttributeError(name)

    def count(self, *, weight: float = 1.0) -> Query:
        """Number of rows (after bounding) per group."""
        return self.add("count", weight=weight)

    def count_distinct(self, *, weight: float = 1.0) -> Query:
        """Number of distinct privacy units per group (rows under the default row unit)."""
        return self.add("count_distinct", weight=weight)

    def sum(self, column: str, bounds: Any = None, *, granularity: float | None = None,
            weight: float = 1.0) -> Query:
        """Sum of ``column`` clamped to ``bounds`` and rounded to multiples of ``granularity``."""
        return self.add("sum", column, bounds, granularity=granularity, weight=weight)

    def mean(self, column: str, bounds: Any = None, *, granularity: float | None = None,
             weight: float = 1.0, method: str = "centred") -> Query:
        """Mean of ``column`` clamped to ``bounds``: ``method="centred"`` (default) a private centre per group,
        then the sum centred there, over a noisy count; ``"noisy_ratio"`` noisy sum / noisy count (half the
        weight each, the estimator before issue #16); ``"auto"`` per group, from the released centre and count,
        the centred sum or a noisy ratio at the midpoint pooled with them (the same cost). See
        :class:`dpkit.tables.kinds.Mean`."""
        return self.add("mean", column, bounds, granularity=granularity, weight=weight, method=method)

    def variance(self, column: str, bounds: Any = None, *, granularity: float | None = None,
                 weight: float = 1.0) -> Query:
        """From noisy count, sum and sum of squares (a third of the weight each)."""
        return self.add("variance", column, bounds, granularity=granularity, weight=weight)

    def quantiles(self, column: str, levels: Any, bounds: Any = None, *, bins: int | None = None,
                  weight: float = 1.0) -> Query:
        """Quantiles by the exponential mechanism over ``bins`` equal-width buckets of ``bounds``; by default
        (``bins=None``) over the integers of ``bounds`` when the column is integer-typed and the bounds are
        integers at most 65,536 apart (a public schema fact: exact integer answers), else 1,024 buckets."""
        return self.add("quantile", column, levels, bounds, bins=bins, weight=weight)

    def histogram(self, column: str, *, edges: Any = None, categories: Any = None, weight: float = 1.0) -> Query:
        """Counts per public bin: numeric ``edges`` (bins ``[e_i, e_{i+1})``, the last closed; values outside
        are not counted) or ``categories`` (values not listed are not counted)."""
        return self.add("histogram", column, edges=edges, categories=categories, weight=weight)

    def contingency(self, columns: Sequence[str], domains: Mapping[str, Any], *, weight: float = 1.0) -> Query:
        """A k-way table of counts over the public ``domains`` of ``columns`` (cells outside are not counted)."""
        return self.add("contingency", columns, domains, weight=weight)


# -------------------------------------------------------------------------------------------------------------
# validation helpers for the statistic kinds (dpkit.tables.kinds)
# -------------------------------------------------------------------------------------------------------------
def numeric_column(q: Query, column: Any) -> str:
    """``column``, checked to be a numeric column of the query's schema."""
    if not isinstance(column, str):
        raise WrongType("column", "a column name")
    if column not in q.schema:
        raise InvalidParameter("column", f"unknown column {column!r}")
    if q.schema[column] not in NUMERIC:
        raise WrongType("column", f"a numeric column ({column!r} is {q.schema[column]})")
    return column


def bounded_statistic(q: Query, kind: str, column: Any, bounds: Any, granularity: Any, weight: Any) -> Statistic:
    """A statistic of a numeric ``column`` clamped to public ``bounds`` (``None``: found privately after the
    charge) and rounded to ``granularity`` (default :func:`default_granularity`)."""
    col = numeric_column(q, column)
    w = check.positive("weight", weight)
    if bounds is None:  # found privately after the charge (Session: a third of the statistic's share)
        g = None if granularity is None else check.positive("granularity", granularity)
        return Statistic(kind, col, None, g, w, candidates=bound_candidates(q.schema[col] == "int"))
    b = public_pair(bounds)
    if granularity is None:
        g = default_granularity(b, q.schema[col] == "int")
    else:
        g = check.positive("granularity", granularity)
    k = max(abs(b[0]), abs(b[1])) / g
    if k > 2**24:
        raise InvalidParameter("granularity", "too fine for the bounds (more than 2^24 units)")
    return Statistic(kind, col, b, g, w)


def public_values(name: str, values: Any, kind: str) -> tuple[Any, ...]:
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


def public_pair(bounds: Any) -> tuple[float, float]:
    """Public bounds ``(lo, hi)``: a list, tuple or array of two finite reals (a mapping or set is refused
    before :func:`dpkit.core._validate.bounds` indexes it)."""
    if isinstance(bounds, (str, bytes, Mapping, set, frozenset)) or not isinstance(bounds, (Sequence, np.ndarray)):
        raise WrongType("bounds", "a pair (lo, hi) of finite reals")
    if isinstance(bounds, np.ndarray) and bounds.ndim != 1:
        raise WrongType("bounds", "a pair (lo, hi) of finite reals")
    return check.bounds(tuple(bounds))


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
        per = [public_values("keys", keys[c], schema[c]) if c in keys else None for c in columns]
        if any(p is None for p in per):
            raise InvalidParameter("keys", "every grouped column needs its values")
        out = tuple(itertools.product(*per))  # type: ignore[arg-type]
    else:
        if isinstance(keys, (str, bytes)) or not isinstance(keys, (Sequence, np.ndarray)):
            raise WrongType("keys", "a list of keys, a dict of per-column values or 'private'")
        if len(columns) == 1:
            out = tuple((v,) for v in public_values("keys", keys, schema[columns[0]]))
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
