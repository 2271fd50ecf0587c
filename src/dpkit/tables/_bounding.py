"""The engine side of a :mod:`dpkit.tables` query: derived columns and filters, the pre-charge data checks,
contribution bounding and the exact aggregates (every engine query runs behind
:func:`dpkit.tables._engine.guarded`, counted in ``Session.reads``).

Contribution bounding (:func:`bounded`) keeps, per privacy unit, at most ``max_groups`` groups (the smallest
keyed hashes of the unit's groups), ``max_rows_per_group`` rows per group and ``max_rows`` rows in all (the
smallest keyed hashes of the unit's rows); the key is a salt drawn after the charge, so the choice among a unit's
own rows depends on nothing but that unit's rows and the salt. :func:`aggregate` then computes the exact
integer aggregates: the main pass holds every kind's :meth:`~dpkit.tables.kinds.Kind.metrics` (counts, distinct
units, clamped sums in granularity units, sums of squares) and the diagnostics' clamped counts; each kind with
its own pass (:meth:`~dpkit.tables.kinds.Kind.table`: bucket counts) gets one more engine query.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.core.errors import InvalidData, WrongType
from dpkit.tables import _diagnostics
from dpkit.tables._engine import duckdb_macro, ibis_module, kind_of
from dpkit.tables._query import Query, Statistic


def float_(col: Any) -> Any:
    """``col`` as float64 with NaN -> NULL (SQL aggregates skip NULLs; a clamp would move NaN to a bound)."""
    ibis = ibis_module()
    x = col.cast("float64")
    if col.type().is_floating():
        x = ibis.ifelse(x.isnan(), ibis.null("float64"), x)
    return x


def clip(x: Any, lo: Any, hi: Any) -> Any:
    """``x`` clamped to ``[lo, hi]`` as one CASE (NULL stays NULL). ibis' ``clip`` nests a NULL-guarded
    ``least``/``greatest`` per bound, which grows the SQL exponentially when clamps are composed."""
    ibis = ibis_module()
    return ibis.cases((x < lo, lo), (x > hi, hi), else_=x)


def units_expr(t: Any, st: Statistic) -> Any:
    """The clamped value of ``st.column`` rounded to the granularity lattice, in integer units (int64)."""
    col = t[st.column]
    lo_u, hi_u = st.unit_range
    if kind_of(t[st.column].type()) == "int" and st.granularity == 1.0:
        return clip(col.cast("int64"), lo_u, hi_u)
    x = float_(col)
    lo, hi = st.bounds  # type: ignore[misc]
    v = ((clip(x, lo, hi) / st.granularity) + 0.5).floor().cast("int64")
    # clipped again on the integer lattice: the bound K holds whatever the engine's float arithmetic
    return clip(v, lo_u, hi_u)


class EngineView:
    """The expression helpers a kind's :meth:`~dpkit.tables.kinds.Kind.metrics` / ``table`` may use."""

    float_ = staticmethod(float_)
    clip = staticmethod(clip)
    units = staticmethod(units_expr)

    def __init__(self, unit_column: str | None) -> None:
        self.unit_column = unit_column

    @property
    def ibis(self) -> Any:
        return ibis_module()


def key_hash(t: Any, parts: dict[str, Any]) -> Any:
    """``hash(struct(parts))``, the keyed row/group hash of :func:`bounded`. PostgreSQL cannot hash a struct
    (ibis compiles only int/float/text hashes there), so on it the hash is of the parts' text joined by a unit
    separator, NULL as its own marker: still a function of the salt and the unit's own row."""
    ibis = ibis_module()
    try:
        backend = t._find_backend(use_default=False).name
    except Exception:  # pragma: no cover - an unbound expression: keep the default
        backend = ""
    if backend != "postgres":
        return ibis.struct(parts).hash()
    text: Any = None
    for v in parts.values():
        piece = v.cast("string").fill_null("\u2400")
        text = piece if text is None else text + "\u241f" + piece
    return text.hash()


# -------------------------------------------------------------------------------------------------------------
# rows of the query
# -------------------------------------------------------------------------------------------------------------
def derived(s: Any, q: Query, upto_filters: bool = True) -> Any:
    t = s.table
    for name, e in q.derives:
        t = t.mutate(**{name: e.compile(t)})
    if upto_filters:
        for f in q.filters:
            t = t.filter(f.compile(t))
    return t


def expression_type(s: Any, q: Query, e: Any, param: str) -> str:
    t = s._derived(q, upto_filters=False)
    failed = False
    try:
        expr = e.compile(t)
        dtype = expr.type()
    except Exception:  # ibis' type errors; raised below, outside the except (no chained text)
        failed = True
    if failed:
        raise WrongType(param, "an expression whose operand types match (e.g. no arithmetic on strings)") \
            from None
    if param == "expression" and not dtype.is_boolean():
        raise WrongType("expression", "a boolean filter expression")
    return kind_of(dtype)


def used_columns(q: Query) -> list[str]:
    """The columns the query's statistics read (their kinds say which)."""
    cols: list[str] = []
    for st in q.statistics:
        for c in st.kind_class.columns(st):
            if c not in cols:
                cols.append(c)
    return cols


def raw_columns(s: Any, q: Query) -> list[str]:
    """The source's columns the query reads (statistics, groups, unit, filters and derives)."""
    names = [*used_columns(q), *q.by, *([s.unit.column] if s.unit is not None else [])]
    for e in [*q.filters, *(e for _, e in q.derives)]:
        names.extend(sorted(e.names))
    return [c for c in dict.fromkeys(names) if c in s.columns]


def validate_data(s: Any, q: Query) -> None:
    """The pre-charge validation pass (``dpkit.tables._session``'s docstring), one engine query over the whole
    source: every source column the query reads is converted on every row (``count(col)``), so that a value that
    does not parse as the declared type, or bytes that are not UTF-8, fail here, before any charge, whatever the
    ``nan_policy`` (:class:`EngineError` naming the column, found by re-reading the columns one at a time);
    derived columns the statistics read are computed on every kept row (an overflow fails here); then NULL unit
    ids always, and missing values in aggregated columns (and private group keys) under ``nan_policy="raise"``,
    among the rows the filters keep. (A file reader converts a column it reads on every row, before any filter,
    as the release's own scan does.)"""
    ibis = ibis_module()
    s._raw_used = raw_columns(s, q)
    t = s._derived(q)
    checks: dict[str, Any] = {"_rows": t.count()}
    derives = dict(q.derives)
    for i, c in enumerate(s._raw_used):
        if c not in derives:
            checks[f"_r{i}"] = t[c].count()
    for i, c in enumerate(c for c in dict.fromkeys([*used_columns(q), *q.by]) if c in derives):
        checks[f"_v{i}"] = t[c].max() if t[c].type().is_numeric() else t[c].count()
    names: list[str] = []
    unit = s.unit
    if unit is not None:
        names.append(unit.column)
    if s._nan == "raise":
        for c in used_columns(q) + (list(q.by) if q.keys == "private" else []):
            if c not in names:
                names.append(c)
    for i, c in enumerate(names):
        col = t[c]
        bad = col.isnull()
        if q.schema.get(c) == "float" and col.type().is_floating():
            bad = bad | col.isnan()
        checks[f"_m{i}"] = ibis.ifelse(bad, 1, 0).sum()  # Postgres cannot cast boolean to bigint
    ev = EngineView(unit.column if unit is not None else None)
    kind_checks = [st.kind_class.data_checks(i, st, t, ev) for i, st in enumerate(q.statistics)]
    for kc in kind_checks:
        checks.update(kc)
    res = s._run(t.aggregate(**checks), what="checking the source")
    for i, c in enumerate(names):
        v = res[f"_m{i}"].iloc[0]
        if v is not None and not (isinstance(v, float) and math.isnan(v)) and int(v) > 0:
            if unit is not None and c == unit.column:
                raise InvalidData(c, "the privacy-unit column contains NULL ids")
            raise InvalidData(c, "contains missing values (NULL/NaN); pass nan_policy='omit' to drop them")
    for i, (st, kc) in enumerate(zip(q.statistics, kind_checks, strict=True)):
        if kc:
            st.kind_class.check_data(i, st, {k: res[k].iloc[0] for k in kc})


def key_member(t: Any, q: Query, fast: bool = False) -> Any:
    """The predicate "the row's group is among the public keys" (per column: its value is one of the keys'),
    or None when the query has no public keys. ``fast``: on DuckDB a string column's test starts with a hash
    lookup (:func:`fast_member`), the same predicate (used in the bounding windows' sort keys)."""
    if not q.by or q.keys == "private":
        return None
    pred: Any = None
    for j, c in enumerate(q.by):
        values = [k[0] for k in q.keys] if len(q.by) == 1 else sorted({k[j] for k in q.keys}, key=repr)
        p = t[c].isin(values)
        if fast:
            p = fast_member(t, c, values, p)
        pred = p if pred is None else pred & p
    return pred


FAST_MEMBER_MIN = 8  # fewer keys: the IN list costs about as much as the hash lookup


def fast_member(t: Any, c: str, values: list[Any], member: Any) -> Any:
    """``member`` (``t[c].isin(values)``) with a hash lookup first, on DuckDB for a string column: a temporary
    macro ``TRY_CAST(x AS ENUM(keys)) IS NOT NULL`` (one lookup in the keys' dictionary, where DuckDB
    evaluates ``IN`` inside a window's sort key as one comparison per key: 1 s per 10 M rows and 50 keys;
    issue #16). The result is ``CASE WHEN lookup THEN TRUE ELSE member END``: the lookup is true only for a
    value byte for byte equal to a key, which ``member`` holds true too, and every other row gets ``member``
    itself (a collation or a value the lookup misses is still tested), so the predicate is exactly
    ``member``. Elsewhere, or if the macro cannot be created, ``member`` itself."""
    import hashlib

    ibis = ibis_module()
    keys = sorted({v for v in values if isinstance(v, str)})
    if len(keys) < FAST_MEMBER_MIN or not t[c].type().is_string() or any("\x00" in k for k in keys):
        return member
    text = ", ".join("'" + k.replace("'", "''") + "'" for k in keys)
    name = "_dpk_keys_" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]
    lookup = duckdb_macro(t, name, f"TRY_CAST(x AS ENUM({text})) IS NOT NULL", "preparing the public keys",
                          returns_bool=True)
    if lookup is None:  # not DuckDB, or a connection that cannot hold the macro: the plain test
        return member
    return ibis.ifelse(lookup(t[c]), True, member)


def keyed(s: Any, q: Query, public_filter: bool = True) -> Any:
    """The derived, filtered rows of the query's groups (public keys listed; private keys not missing): the
    rows contribution bounding chooses from. ``public_filter=False`` leaves the public-key restriction out
    (:func:`bounded` applies it after its windows, ordering the other rows last)."""
    t = s._derived(q)
    if q.by and q.keys != "private":
        if public_filter:
            t = t.filter(key_member(t, q))
    elif q.keys == "private":
        for c in q.by:
            t = t.filter(t[c].notnull())
            if t[c].type().is_floating():
                t = t.filter(~t[c].isnan())
    return t


def bounded(s: Any, q: Query, salt: int, outside: bool = False) -> Any:
    """The rows kept by contribution bounding (module docstring); the keyed rows when there is no unit.

    ``outside=True`` (under a privacy unit and public keys) also returns the rows outside the public keys that
    the windows ranked within a unit's bound: the rows of the keys are exactly those of ``outside=False``, and
    every other row lies in a group that is not a public key (:func:`passes` drops those groups after the
    aggregation, :func:`group_member`)."""
    from dpkit.tables._planning import contribution_bounds

    ibis = ibis_module()
    u = s.unit
    if u is None:
        return s._keyed(q)
    # Public keys: the rows outside the keys are not filtered out before the windows but ordered after every
    # row of the keys (NULL sort keys, NULLS LAST), so that the keys' rows get exactly the ranks they would get
    # alone, and dropped after the last window (or, with ``outside``, as whole groups after the aggregation).
    # Same kept rows; DuckDB's window behind a filter fills its memory limit and spills (docs/benchmarks.md,
    # "Speed at the limit (issue #16): tables"). Membership is a function of the group columns alone, so a
    # partition by (unit, group columns) holds only rows of the keys or only rows outside them, and rows
    # outside the keys kept by one window never change the ranks of the keys' rows in the next.
    t = keyed(s, q, public_filter=False)
    b = contribution_bounds(u, q)
    used = [c for c in list(q.by) + used_columns(q) if c != u.column]
    used = list(dict.fromkeys(used))
    # only the columns the query reads after bounding travel through the windows (an engine does not always
    # prune a column that a window passes through: DuckDB sorts and spills whatever the window carries)
    t = t.select(u.column, *used)
    uid = t[u.column]
    lit = ibis.literal(salt, "int64")

    def first(x: Any, key: Any) -> Any:  # the sort key, NULL (last) outside the public keys
        member = key_member(x, q, fast=True)
        return key if member is None else ibis.asc(ibis.ifelse(member, key, ibis.null("int64")), nulls_first=False)

    rowkey = key_hash(t, {"_s": lit, "_u": uid, **{f"_c{i}": t[c] for i, c in enumerate(used)}})
    t = t.mutate(_dpk_rk=rowkey)
    by_groups = bool(q.by) and b.groups < b.rows
    by_rows_in_group = bool(q.by) and b.per_group < b.rows
    if by_groups:
        gkey = key_hash(t, {"_s": lit, "_u": uid, **{f"_g{i}": t[c] for i, c in enumerate(q.by)}})
        t = t.mutate(_dpk_gk=gkey)
        rank = ibis.dense_rank().over(group_by=t[u.column],
                                      order_by=[first(t, t["_dpk_gk"]), *(t[c] for c in q.by)])
        t = t.mutate(_dpk_gr=rank).filter(lambda x: x["_dpk_gr"] < b.groups).drop("_dpk_gr", "_dpk_gk")
    if by_rows_in_group:
        order = [first(t, t["_dpk_rk"]), *(t[c] for c in used)]
        rn = ibis.row_number().over(group_by=[t[u.column], *(t[c] for c in q.by)], order_by=order)
        t = t.mutate(_dpk_rg=rn).filter(lambda x: x["_dpk_rg"] < b.per_group).drop("_dpk_rg")
    if not (by_groups and by_rows_in_group and b.groups * b.per_group <= b.rows):  # else implied
        order = [first(t, t["_dpk_rk"]), *(t[c] for c in used)]
        rn = ibis.row_number().over(group_by=t[u.column], order_by=order)
        t = t.mutate(_dpk_rn=rn).filter(lambda x: x["_dpk_rn"] < b.rows).drop("_dpk_rn")
    t = t.drop("_dpk_rk")
    member = key_member(t, q)
    if member is not None and not outside:
        t = t.filter(member)
    return t


def group_member(agg: Any, q: Query) -> Any:
    """The filter that keeps, of an aggregate grouped by ``q.by`` (with the row count ``_n``), the groups among
    the public keys: the same predicate as :func:`key_member` (a function of the group columns alone, so
    keeping a group's aggregate is keeping its rows), or'ed with ``_n < 0``, never true, which only stops an
    engine from pushing the test below the aggregation (DuckDB would push it back onto every bounded row)."""
    member = key_member(agg, q)
    return member | (agg["_n"] < 0)


# -------------------------------------------------------------------------------------------------------------
# exact aggregates
# -------------------------------------------------------------------------------------------------------------
def aggregate(s: Any, p: Any, salt: int) -> dict[str, Any]:
    """All exact aggregates of the query: one engine query for the main metrics, one per kind with a pass of its
    own; privately found bounds are chosen first (:func:`dpkit.tables._measuring.find_bounds`)."""
    from dpkit.tables._measuring import find_bounds

    q = p.query
    t = s._bounded(q, salt)
    cached = None
    whole: Any = None
    auto = any(st.auto_bounds for st in q.statistics)
    if (s.unit is not None or auto) and any(st.kind_class.own_pass or st.auto_bounds for st in q.statistics):
        # several passes over the bounded table: materialise it once (the windows run once)
        keep = list(dict.fromkeys([*q.by, *used_columns(q)] + ([s.unit.column] if s.unit is not None else [])))
        try:
            cached = t.select(*keep).cache()
            s.reads += 1
            t = cached
        except (Exception, MemoryError):  # pragma: no cover - no caching (or no memory for it): recompute
            cached = None
    if cached is None and s.unit is not None and key_member(t, q) is not None:
        # one pass (the main aggregate) over the windows: the rows outside the public keys are dropped as whole
        # groups after the aggregation, not row by row after the windows (issue #16)
        whole = bounded(s, q, salt, outside=True)
    try:
        if auto:
            find_bounds(s, p, t)
        raw = passes(s, p, t, whole)
        if p.diagnostics is not None:
            raw["diagnostics"] = _diagnostics.dropped(s, p, t)
        return raw
    finally:
        if cached is not None:
            try:
                cached.release()
            except Exception:  # pragma: no cover
                pass


def passes(s: Any, p: Any, t: Any, whole: Any = None) -> dict[str, Any]:
    """The main aggregate (``{"main": frame}``) and the kinds' own passes (``{"extra": {index: frame}}``).

    ``whole``: the bounded rows with those outside the public keys (:func:`bounded` with ``outside=True``); the
    main aggregate is then computed on it and its groups outside the keys dropped (:func:`group_member`), which
    leaves exactly the aggregate of ``t`` (every metric is per group)."""
    q = p.query
    ev = EngineView(s.unit.column if s.unit is not None else None)
    m = t if whole is None else whole
    metrics: dict[str, Any] = {"_n": m.count()}
    need_distinct = q.keys == "private" or any(sp.stat.kind_class.distinct_units for sp in p.stats)
    if need_distinct:
        metrics["_d"] = m[s.unit.column].nunique() if s.unit is not None else m.count()
    for i, st in enumerate(sp.stat for sp in p.stats):
        metrics.update(st.kind_class.metrics(i, st, m, ev))
    metrics.update(_diagnostics.metrics(p, m))  # clamped counts (opt-in), same engine pass
    by = list(q.by)
    agg = m.aggregate(by=by, **metrics) if by else m.aggregate(**metrics)
    if whole is not None:
        agg = agg.filter(group_member(agg, q))
    main = s._run(agg)
    extra: dict[int, Any] = {}
    for i, st in enumerate(sp.stat for sp in p.stats):
        expr = st.kind_class.table(i, st, t, by, ev)
        if expr is not None:
            extra[i] = s._run(expr)
    return {"main": main, "extra": extra}
