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

Under public keys the rows outside the keys are not filtered out before these windows: their sort keys are
NULL, ordered last, so the keys' rows get exactly the ranks they would get alone (DuckDB's window behind a
filter fills its memory limit and spills; issue #16), and they are dropped after the last window, or, when the
main aggregate is the only pass, as whole groups after it (the same aggregate). On DuckDB the key test in the
sort keys starts with a hash lookup (``_bounding.fast_member``). Only the unit column and the columns the query
reads go through the windows.

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

The engine boundary
-------------------
Every call dpkit.tables makes into ibis / DuckDB / Spark / psycopg / pandas / Polars / Arrow (loading the
source, its schema, temp views, executing aggregates, caching, dropping) goes through :func:`guarded`. An
engine exception (``Exception`` or ``MemoryError``; never ``KeyboardInterrupt``, never a dpkit error) becomes
:class:`~dpkit.core.errors.EngineError` naming the source, the column where dpkit knows it from a check of
its own, and the kind of failure. The kind is chosen from the exception's *class* (DuckDB's
``ConversionException``, ``InvalidInputException``, ``IOException``, ...), never from its text, which may
quote a whole record ("Original Line: ..."); the engine's exception is neither shown nor chained (the new
error is raised outside the ``except`` block, so its ``__cause__`` and ``__context__`` are both ``None``).
``RecursionError`` is not caught here: the expression parser refuses deep expressions before any engine
call (:mod:`dpkit.tables._expr`).
"""

from __future__ import annotations

import codecs
import itertools
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from dpkit.core.errors import DPKitError, EngineError, InvalidData, InvalidParameter, MissingDependency, WrongType

__all__ = ["decodes_as_utf8", "failure_kind", "guarded", "ibis_module", "kind_of", "load_source", "source_checker"]

T = TypeVar("T")

# the kinds of engine failure (fixed text; never the engine's message)
DECODE = "cannot decode the file as UTF-8 text"
CONVERT = "a value does not parse as the column's type"
RANGE = "a value or a computed value is out of the engine's range"
INPUT = "the engine cannot parse the source (malformed or not UTF-8 input)"
IO = "the engine cannot read the source"
MEMORY = "the engine ran out of memory"
INTERRUPTED = "the engine was interrupted"
FAILED = "the engine failed"

# DuckDB's exception classes (and the DB-API bases other engines share), matched by class name along the MRO
_KINDS = {
    "ConversionException": CONVERT,
    "OutOfRangeException": RANGE,
    "InvalidInputException": INPUT,
    "IOException": IO,
    "PermissionException": IO,
    "HTTPException": IO,
    "OutOfMemoryException": MEMORY,
    "InterruptException": INTERRUPTED,
    "UnicodeDecodeError": DECODE,
    "UnicodeError": DECODE,
    "MemoryError": MEMORY,
    "FileNotFoundError": IO,
    "PermissionError": IO,
    "OSError": IO,
}


def failure_kind(exc: BaseException) -> str:
    """The fixed description of an engine exception, chosen by its class (the first match along its MRO)."""
    for cls in type(exc).__mro__:
        kind = _KINDS.get(cls.__name__)
        if kind is not None:
            return kind
    return FAILED


def guarded(fn: Callable[[], T], *, param: str = "source", column: str | None = None,
            what: str = "reading the source", refine: Callable[[str], tuple[str, str | None]] | None = None) -> T:
    """``fn()``, with any engine exception replaced by a clean :class:`EngineError` (the engine boundary).

    ``what`` says what dpkit was doing ("reading the source", "computing the aggregates", ...); ``refine``,
    given the kind, may return a more precise ``(kind, column)`` from a check of dpkit's own (e.g. decoding
    the file as UTF-8, or reading the used columns one at a time). dpkit errors, ``KeyboardInterrupt`` and
    ``RecursionError`` pass through unchanged.
    """
    kind: str | None = None
    try:
        return fn()
    except (DPKitError, RecursionError):
        raise
    except (Exception, MemoryError) as exc:  # the engine boundary
        kind = failure_kind(exc)
        del exc
    # outside the except block: the engine's exception is neither __cause__ nor __context__ of ours
    col = column
    if refine is not None:
        kind, found = refine(kind)
        col = found if found is not None else col
    raise EngineError(param, f"{what} failed: {kind}", column=col) from None


def decodes_as_utf8(path: str) -> bool:
    """Whether the file at ``path`` (gunzipped for ``.gz``) is valid UTF-8, read in 1 MiB chunks. dpkit's own
    check, used to name the failure when the engine rejects the input; False also when it cannot be read."""
    import gzip

    dec = codecs.getincrementaldecoder("utf-8")()
    opener = gzip.open if path.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                dec.decode(chunk)
            dec.decode(b"", final=True)
    except (UnicodeDecodeError, OSError, EOFError):
        return False
    except Exception:  # e.g. gzip.BadGzipFile (an OSError) or zlib.error
        return False
    return True


def _is_text_file(source: Any) -> bool:
    return isinstance(source, str) and source.lower().endswith((".csv", ".csv.gz", ".tsv"))


def _file_refiner(path: str) -> Callable[[str], tuple[str, str | None]]:
    def refine(kind: str) -> tuple[str, str | None]:
        if kind in (INPUT, FAILED, CONVERT) and _is_text_file(path) and not decodes_as_utf8(path):
            return DECODE, None
        return kind, None
    return refine


def source_checker(source: Any, table: Any, columns: list[str]) -> Callable[[str], tuple[str, str | None]]:
    """A ``refine`` for :func:`guarded` after a failed read of ``table``: a text file that is not UTF-8 is
    named as such; for a value that does not parse (or malformed input), the ``columns`` are read one at a
    time (``count(col)`` over the whole source) and the first that fails is named. Only dpkit's own checks
    decide: the engine's message is never parsed. Runs only after a failure (one pass per column)."""
    def refine(kind: str) -> tuple[str, str | None]:
        if kind in (INPUT, FAILED, CONVERT) and _is_text_file(source) and not decodes_as_utf8(source):
            return DECODE, None
        if kind not in (CONVERT, INPUT, RANGE):
            return kind, None
        for c in columns:
            bad = False
            try:
                table[c].count().execute()
            except (DPKitError, RecursionError):
                raise
            except (Exception, MemoryError):  # only which column fails matters
                bad = True
            if bad:
                return (CONVERT if kind == INPUT else kind), c
        return kind, None
    return refine

_counter = itertools.count()


def ibis_module() -> Any:
    """``import ibis`` or :class:`MissingDependency` with the pip command."""
    try:
        import ibis
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependency("dpkit.tables needs ibis and duckdb: pip install 'dpkit[tables]'") from exc
    return ibis


def schema_table(schema: Mapping[str, str], name: str = "t") -> Any:
    """An unbound ibis table with ``schema`` (column -> ibis type name, e.g. ``"int64"``, ``"string"``) and no
    data: a :class:`~dpkit.tables.Session` over it plans and checks queries (columns, types, expressions) without
    an engine or any data, as ``dpkit plan`` does on the bundled Adult data; it cannot release."""
    from dpkit.core.errors import WrongType

    if not isinstance(schema, Mapping) or not schema or any(
            not isinstance(k, str) or not isinstance(v, str) for k, v in schema.items()):
        raise WrongType("schema", "a non-empty mapping column name -> type name")
    if not isinstance(name, str) or not name:
        raise WrongType("name", "a non-empty table name")
    ibis = ibis_module()
    return guarded(lambda: ibis.table(dict(schema), name=name), what="building the schema table")


def _duckdb_connection() -> Any:
    ibis = ibis_module()
    con = guarded(lambda: ibis.duckdb.connect(), what="starting DuckDB")
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
    """``(table, connection, owned)`` for any supported source (docs/tables.md). Every engine call is
    :func:`guarded`: a source the engine cannot read is :class:`EngineError` (never the engine's text)."""
    ibis = ibis_module()
    if isinstance(source, (str, os.PathLike)):
        try:
            path = os.fspath(source)
        except TypeError:  # a bytes path
            raise WrongType("source", "a str path") from None
        if not isinstance(path, str):
            raise WrongType("source", "a str path")
        if "\x00" in path:
            raise InvalidParameter("source", "a path must not contain NUL characters")
        if path == "adult":
            from dpkit.datasets import adult

            con = _duckdb_connection()
            frame = adult(as_frame=True)
            return guarded(lambda: con.create_table(_name(), frame, temp=True)), con, True
        low = path.lower()
        if not os.path.exists(path):
            raise InvalidParameter("source", "no such file (and not 'adult')")
        if os.path.isdir(path):
            raise InvalidParameter("source", "is a folder, not a file")
        con = _duckdb_connection()
        if low.endswith((".csv", ".csv.gz", ".tsv")):
            return guarded(lambda: con.read_csv(path, table_name=_name()), refine=_file_refiner(path)), con, True
        if low.endswith((".parquet", ".pq")):
            return guarded(lambda: con.read_parquet(path, table_name=_name())), con, True
        raise InvalidParameter("source", "a path must end in .csv, .csv.gz, .tsv or .parquet")
    if isinstance(source, ibis.expr.types.Table):
        return source, None, False
    mod = type(source).__module__ or ""
    if mod.startswith("pyspark.sql") and hasattr(source, "createOrReplaceTempView"):
        spark = getattr(source, "sparkSession", None)
        con = guarded(lambda: ibis.pyspark.connect(spark), what="connecting to Spark")
        name = _name()
        guarded(lambda: source.createOrReplaceTempView(name), what="registering the Spark DataFrame")
        return guarded(lambda: con.table(name)), con, True
    if mod.startswith(("pandas", "polars", "pyarrow")):
        con = _duckdb_connection()
        kind: str | None = None
        try:
            return con.create_table(_name(), source, temp=True), con, True
        except (DPKitError, RecursionError):
            raise
        except (Exception, MemoryError) as exc:  # the engine boundary
            kind = failure_kind(exc)
            del exc
        if kind == MEMORY:
            raise EngineError("source", f"registering the frame failed: {kind}") from None
        raise WrongType("source", "a frame DuckDB can read (pandas, Polars, Arrow)") from None
    raise WrongType("source", "a .csv/.parquet path, 'adult', a pandas/Polars/Arrow frame, an ibis Table or a "
                              "pyspark DataFrame")


BINARY_MACRO = "_dpk_binary"


def exact_strings(table: Any, keep: str | None = None) -> Any:
    """``table`` with its string columns compared byte for byte, on DuckDB; elsewhere ``table`` itself.

    A DuckDB column may carry a collation (``VARCHAR COLLATE NOCASE``, or the connection's
    ``default_collation``): then ``GROUP BY`` merges ``'A'`` and ``'a'`` under one label that the engine picks
    from the data (a data-dependent output outside any DP step), ``IN`` matches a public key ``'a'`` to both
    while the group is labelled ``'A'`` (a wrong count of 0 for the key), and so on. dpkit defines string
    equality as exact: each string column becomes ``CAST(c AS VARCHAR) COLLATE C`` (a temporary macro; no cost
    measured on 20 M rows), so groups, keys, categories and filters see the values as stored. Only the privacy
    unit's column ``keep`` is left as declared: a collation that merges ids merges units, which only tightens
    the contribution bounds. A connection that cannot create the macro, or a table ibis cannot rewrite, is
    kept as it is. The session applies this to a caller's ibis table only: dpkit's own connections (files,
    frames) declare no collation."""
    binary = duckdb_macro(table, BINARY_MACRO, "(CAST(x AS VARCHAR)) COLLATE C", "preparing the string columns")
    if binary is None:
        return table
    try:
        cols = [c for c, t in table.schema().items() if t.is_string() and c != keep]
        return table.mutate(**{c: binary(table[c]) for c in cols}) if cols else table
    except Exception:  # an expression ibis cannot rewrite: the table as given (never an engine's text)
        return table


def duckdb_macro(table: Any, name: str, body: str, what: str, returns_bool: bool = False) -> Any:
    """A one-argument temporary macro ``name(x) AS body`` on ``table``'s DuckDB connection, as an ibis scalar
    function of a string (returning a string, or a boolean with ``returns_bool``), or None when the table is not
    on DuckDB or the connection cannot create it (:class:`EngineError` inside, never raised)."""
    try:
        backend = table._find_backend(use_default=False)
    except Exception:  # an unbound expression
        return None
    if getattr(backend, "name", "") != "duckdb":
        return None
    try:
        guarded(lambda: backend.raw_sql(f"CREATE OR REPLACE TEMP MACRO {name}(x) AS {body}"), what=what)
    except EngineError:
        return None
    ibis = ibis_module()
    if returns_bool:
        @ibis.udf.scalar.builtin(name=name)
        def test(x: str) -> bool:  # type: ignore[empty-body]
            ...

        return test

    @ibis.udf.scalar.builtin(name=name)
    def macro(x: str) -> str:  # type: ignore[empty-body]
        ...

    return macro


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
