"""The engine side of :mod:`dpkit.tables`: sources, contribution bounding and exact aggregates, all as ibis
expressions (one code path for DuckDB, Spark, Postgres, ...).

Contribution bounding (user-level privacy unit)
-----------------------------------------------
Window functions over the (filtered, derived) table, in this order:

1. groups: ``dense_rank() over (partition by unit order by (hash(salt, unit, keys), keys)) < max_groups``
   (only when the query is grouped and ``max_groups < max_rows``);
2. rows per group: ``row_number() over (partition by unit, keys order by (rowkey, used columns)) <
   max_rows_per_group`` (only when it is smaller than ``max_rows``);
3. rows: ``row_number() over (partition by unit order by (rowkey, used columns)) < max_rows`` (skipped when
   ``max_groups · max_rows_per_group <= max_rows`` already implies it).

``rowkey = hash(salt, unit, used columns)`` with a 64-bit ``salt`` drawn from the session's random source
*after* the charge. Why a keyed hash rather than ``random()``: the kept rows are then a function of the
unit's own rows and the salt only, so a run is reproducible under ``deterministic_source`` and identical
on every engine and every source format (an engine's ``random()`` cannot be seeded portably). Privacy does
not rest on the hash: any rule that chooses among a unit's own rows keeps the bounds, hence the
sensitivities; the hash only makes the choice close to a uniform sample (good for utility). Ties in the
hash are broken by the used columns, so only rows identical on everything the query reads can tie, and
those are interchangeable: the aggregates do not depend on the engine's tie order.

Values are clamped and rounded in the engine, ``u = clip(floor(clip(v, lo, hi) / g + 1/2), lo_u, hi_u)``,
and summed as integers (sums of squares as ``decimal(38, 0)``), so the aggregate is exact and its
sensitivity is an exact integer; noise is added in Python by dpkit's exact samplers.
"""

from __future__ import annotations

import itertools
import os
import uuid
from typing import Any

from dpkit.core.errors import InvalidData, InvalidParameter, MissingDependency, WrongType

__all__ = ["ibis_module", "kind_of", "load_source"]

_counter = itertools.count()


def ibis_module() -> Any:
    """``import ibis`` or :class:`MissingDependency` with the pip command."""
    try:
        import ibis
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependency("dpkit.tables needs ibis and duckdb: pip install 'dpkit[tables]'") from exc
    return ibis


def _duckdb_connection() -> Any:
    ibis = ibis_module()
    con = ibis.duckdb.connect()
    # DuckDB's top_n_window_elimination rewrites "row_number() <= k" filters into a plan that is several
    # times slower for per-unit bounding with many small partitions; dpkit turns it off on the connections
    # it opens (never on a connection the caller passes in).
    try:
        con.raw_sql("SET disabled_optimizers = 'top_n_window_elimination'")
    except Exception:  # pragma: no cover - older DuckDB without this optimizer
        pass
    return con


def _name() -> str:
    return f"dpkit_src_{os.getpid()}_{next(_counter)}_{uuid.uuid4().hex[:8]}"


def load_source(source: Any) -> tuple[Any, Any, bool]:
    """``(table, connection, owned)`` for any supported source (docs/tables.md)."""
    ibis = ibis_module()
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path == "adult":
            from dpkit.datasets import adult

            con = _duckdb_connection()
            return con.create_table(_name(), adult(as_frame=True), temp=True), con, True
        low = path.lower()
        if not os.path.exists(path):
            raise InvalidParameter("source", "no such file (and not 'adult')")
        con = _duckdb_connection()
        if low.endswith((".csv", ".csv.gz", ".tsv")):
            return con.read_csv(path, table_name=_name()), con, True
        if low.endswith((".parquet", ".pq")):
            return con.read_parquet(path, table_name=_name()), con, True
        raise InvalidParameter("source", "a path must end in .csv, .csv.gz, .tsv or .parquet")
    if isinstance(source, ibis.expr.types.Table):
        return source, None, False
    mod = type(source).__module__ or ""
    if mod.startswith("pyspark.sql") and hasattr(source, "createOrReplaceTempView"):
        spark = getattr(source, "sparkSession", None)
        con = ibis.pyspark.connect(spark)
        name = _name()
        source.createOrReplaceTempView(name)
        return con.table(name), con, True
    if mod.startswith(("pandas", "polars", "pyarrow")):
        con = _duckdb_connection()
        try:
            return con.create_table(_name(), source, temp=True), con, True
        except Exception as exc:
            raise WrongType("source", "a frame DuckDB can read (pandas, Polars, Arrow)") from exc
    raise WrongType("source", "a .csv/.parquet path, 'adult', a pandas/Polars/Arrow frame, an ibis Table or a "
                              "pyspark DataFrame")


def kind_of(dtype: Any) -> str:
    """The public kind of an ibis dtype: int, float, string, bool, date, timestamp or its name."""
    if dtype.is_boolean():
        return "bool"
    if dtype.is_integer():
        return "int"
    if dtype.is_floating() or dtype.is_decimal():
        return "float"
    if dtype.is_string():
        return "string"
    if dtype.is_date():
        return "date"
    if dtype.is_timestamp():
        return "timestamp"
    return str(dtype)


def no_columns() -> InvalidData:
    return InvalidData("source", "has no columns")
