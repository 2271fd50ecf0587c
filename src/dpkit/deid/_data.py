"""Input tables and the one group-by of :mod:`dpkit.deid`.

A table is a pandas DataFrame, a mapping of column name -> 1-D array-like (equal lengths), a path to a CSV
(``.csv``, ``.csv.gz``, ``.tsv``) or Parquet file read with DuckDB (``pip install 'dpkit[tables]'``), or the
string ``"adult"`` (the bundled UCI Adult data).

Everything in the package works on the *equivalence classes* of a set of columns: the distinct combinations of
their values with the number of rows holding each (:class:`Classes`). They are computed once, in O(n) per
column plus one sort at most: each column is factorized (NULL, NaN and NaT form one group of their own, like
SQL's ``GROUP BY``), the codes are combined into one int64 key (mixed radix, re-compressed before it could
overflow), and the key's groups are counted with ``bincount`` (or ``np.unique`` when the key space is sparse).
For a file, DuckDB computes the same classes with ``GROUP BY`` and only the classes are brought into Python.
Later questions (subsets of the columns, generalizations) group the *classes* again, weighted by their sizes,
so they never touch the n rows a second time. Nothing is ever O(n^2).

Error messages name parameters and columns, never a value; a reader's own exception is replaced by an
:class:`~dpkit.core.errors.EngineError` whose text is fixed (a CSV parser's message can quote a line).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from dpkit.core.errors import DPKitError, EngineError, InvalidData, InvalidParameter, MissingDependency, WrongType

T = TypeVar("T")

#: The most quasi-identifier columns one call takes.
MAX_COLUMNS = 32
_KEY_LIMIT = 1 << 62

_READ_KINDS = {
    "ConversionException": "a value does not convert to the column's type",
    "InvalidInputException": "the file cannot be parsed (malformed or not UTF-8)",
    "IOException": "the file cannot be read",
    "PermissionError": "the file cannot be read (permission denied)",
    "FileNotFoundError": "the file cannot be read",
    "OSError": "the file cannot be read",
    "UnicodeDecodeError": "the file is not valid UTF-8",
    "OutOfMemoryException": "the reader ran out of memory",
    "MemoryError": "the reader ran out of memory",
}


def guarded(fn: Callable[[], T], param: str, what: str) -> T:
    """``fn()`` with any non-dpkit exception replaced by a clean :class:`EngineError` (fixed text, no chain)."""
    kind: str | None = None
    try:
        return fn()
    except (DPKitError, RecursionError):
        raise
    except (Exception, MemoryError) as exc:
        kind = next((_READ_KINDS[c.__name__] for c in type(exc).__mro__ if c.__name__ in _READ_KINDS),
                    "the reader failed")
        del exc
    raise EngineError(param, f"{what} failed: {kind}") from None


_CSV_TYPES = ["BOOLEAN", "BIGINT", "DOUBLE", "VARCHAR"]


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise MissingDependency("reading a CSV or Parquet file needs DuckDB: pip install 'dpkit[tables]'") from None
    return duckdb


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def check_path(path: str, param: str) -> str:
    if "\x00" in path:
        raise InvalidParameter(param, "a path must not contain NUL characters")
    if path == "adult":
        return path
    if not os.path.exists(path):
        raise InvalidParameter(param, "no such file (and not 'adult')")
    if os.path.isdir(path):
        raise InvalidParameter(param, "is a folder, not a file")
    if not path.lower().endswith((".csv", ".csv.gz", ".tsv", ".parquet", ".pq")):
        raise InvalidParameter(param, "a path must end in .csv, .csv.gz, .tsv or .parquet")
    return path


def _relation(con: Any, path: str, param: str) -> Any:
    low = path.lower()
    if low.endswith((".parquet", ".pq")):
        return guarded(lambda: con.read_parquet(path), param, "reading the file")
    # no date/time sniffing: DuckDB would guess d/m/Y or m/d/Y from a sample (9/7/1967 is ambiguous); dates stay
    # text and the Dates hierarchy parses them explicitly (ISO or US m/d/Y)
    return guarded(lambda: con.read_csv(path, auto_type_candidates=_CSV_TYPES), param, "reading the file")


def _from_masked(a: Any) -> np.ndarray:
    """A DuckDB result column as a plain array: NULLs become NaN (numeric) or None (other)."""
    if isinstance(a, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(a)
        if not mask.any():
            return np.asarray(a.data)
        if a.dtype.kind in "iuf":
            out = np.asarray(a.data, dtype=np.float64).copy()
            out[mask] = np.nan
            return out
        if a.dtype.kind == "M":
            out = np.asarray(a.data).copy()
            out[mask] = np.datetime64("NaT")
            return out
        obj = np.asarray(a.data, dtype=object).copy()
        obj[mask] = None
        return obj
    return np.asarray(a)


def path_columns(path: str, param: str) -> list[str]:
    """The column names of a file (or of the bundled Adult)."""
    if path == "adult":
        from dpkit.datasets import ADULT_COLUMNS

        return list(ADULT_COLUMNS)
    con = _duckdb().connect()
    try:
        rel = _relation(con, path, param)
        return [str(c) for c in guarded(lambda: rel.columns, param, "reading the file")]
    finally:
        con.close()


def read_columns(path: str, columns: Sequence[str], param: str) -> dict[str, np.ndarray]:
    """The named columns of a file as numpy arrays (NULL: NaN / None / NaT)."""
    if path == "adult":
        from dpkit.datasets import adult

        return {c: np.asarray(v) for c, v in adult(as_frame=False, columns=list(columns)).items()}
    con = _duckdb().connect()
    try:
        rel = _relation(con, path, param)
        have = set(guarded(lambda: rel.columns, param, "reading the file"))
        for c in columns:
            if c not in have:
                raise InvalidParameter(param, f"the file has no column {c!r}")
        sel = ", ".join(_quote(c) for c in columns)
        res = guarded(lambda: rel.project(sel).fetchnumpy(), param, "reading the file")
    finally:
        con.close()
    return {c: _from_masked(res[c]) for c in columns}


def path_classes(path: str, columns: Sequence[str], param: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The distinct combinations of ``columns`` in a file with their row counts, by a DuckDB ``GROUP BY``
    (NULLs form one group per column): ``({column: values}, counts)``, one entry per class."""
    if path == "adult":
        cols = read_columns(path, columns, param)
        cl = classes_of(cols, list(columns))
        return {c: cl.values[i][cl.codes[:, i]] for i, c in enumerate(columns)}, cl.counts
    con = _duckdb().connect()
    try:
        rel = _relation(con, path, param)
        have = set(guarded(lambda: rel.columns, param, "reading the file"))
        for c in columns:
            if c not in have:
                raise InvalidParameter(param, f"the file has no column {c!r}")
        sel = ", ".join(_quote(c) for c in columns)
        res = guarded(lambda: rel.aggregate(f"{sel}, count(*) AS __dpkit_n", sel).fetchnumpy(), param,
                      "grouping the file")
    finally:
        con.close()
    counts = np.asarray(_from_masked(res["__dpkit_n"]), dtype=np.int64)
    return {c: _from_masked(res[c]) for c in columns}, counts


# ----------------------------------------------------------------------------------------------
# in-memory tables


def table_columns(data: Any, param: str = "data") -> tuple[dict[str, Any], int] | None:
    """``({name: column}, n)`` for an in-memory table (columns not yet converted), or None for a path."""
    if isinstance(data, (str, os.PathLike)):
        return None
    mod = type(data).__module__ or ""
    if mod.startswith("pandas") and hasattr(data, "columns") and hasattr(data, "__getitem__"):
        cols = {}
        for c in data.columns:
            if not isinstance(c, str):
                raise WrongType(param, "a table whose column names are strings")
            cols[c] = data[c]
        if len(set(cols)) != len(data.columns):
            raise InvalidData(param, "column names must be unique")
        return cols, len(data)
    if isinstance(data, Mapping):
        cols = {}
        n = -1
        for c, v in data.items():
            if not isinstance(c, str):
                raise WrongType(param, "a table whose column names are strings")
            if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
                raise WrongType(param, "a mapping of column name -> 1-D array-like")
            ln = len(v)
            if n >= 0 and ln != n:
                raise InvalidData(param, "columns must have the same length")
            n = ln
            cols[c] = v
        if not cols:
            raise InvalidData(param, "the table has no column")
        return cols, n
    raise WrongType(param, "a pandas DataFrame, a mapping of column name -> 1-D array, or a CSV/Parquet path")


def column_array(v: Any, name: str, param: str) -> np.ndarray:
    """A column as a 1-D numpy array (pandas extension types converted; pd.NA -> None / NaN)."""
    mod = type(v).__module__ or ""
    try:
        if mod.startswith("pandas"):
            dt = getattr(v, "dtype", None)
            kind = getattr(dt, "kind", "O")
            if kind in "iufbM" and not getattr(v, "hasnans", False) and isinstance(dt, np.dtype):
                a = np.asarray(v)
            elif kind in "iuf":
                a = np.asarray(v.astype("float64"), dtype=np.float64)
            else:
                a = np.asarray(v.astype(object).where(v.notna(), None), dtype=object)
        else:
            a = np.asarray(v)
            if a.dtype.kind in "US":
                a = a.astype(object)
    except (TypeError, ValueError, OverflowError):
        raise InvalidData(param, f"column {name!r} cannot be read as a 1-D array") from None
    if a.ndim != 1:
        raise InvalidData(param, f"column {name!r} must be 1-D")
    if a.dtype.kind not in "biufOMm":
        raise InvalidData(param, f"column {name!r} has an unsupported type")
    if a.dtype.kind == "f" and np.isinf(a).any():
        raise InvalidData(param, f"column {name!r} holds an infinite value")
    return a


def _hashable_key(x: Any) -> Any:
    """A dict key under which NULLs (None, NaN, NaT, pd.NA) all fall together."""
    if x is None:
        return _NULL
    try:
        if x != x:  # NaN, NaT
            return _NULL
    except (TypeError, ValueError):  # pd.NA raises on bool()
        return _NULL
    return x


class _Null:
    def __repr__(self) -> str:
        return "NULL"


_NULL = _Null()


def factorize(a: np.ndarray, name: str, param: str) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, uniques)``: ``codes`` int64 in ``[0, len(uniques))``; NULLs form one group (uniques holds None
    / NaN / NaT for it). Numeric columns: ``np.unique`` (NaNs collapsed); other columns: a hash table."""
    if a.dtype.kind in "biu":
        if a.size and a.dtype.kind != "b":
            lo, hi = int(a.min()), int(a.max())
            if hi - lo < 4 * a.size + 1024:  # dense integers: O(n)
                off = (a.astype(np.int64) - lo)
                present = np.bincount(off, minlength=hi - lo + 1) > 0
                remap = np.cumsum(present) - 1
                return remap[off].astype(np.int64), np.flatnonzero(present).astype(np.int64) + lo
        u, inv = np.unique(a, return_inverse=True)
        return inv.astype(np.int64).ravel(), u
    if a.dtype.kind in "fMm":
        u, inv = np.unique(a, return_inverse=True)  # NaN / NaT sort last and collapse into one
        return inv.astype(np.int64).ravel(), u
    try:
        import pandas as pd

        codes, uniq = pd.factorize(a, use_na_sentinel=False)
        uniques = np.asarray(uniq, dtype=object)
        isnull = pd.isna(uniques)
        if isnull.sum() > 1:  # None and NaN in one column: one NULL group
            first = int(np.flatnonzero(isnull)[0])
            keep = ~isnull
            keep[first] = True
            remap = np.cumsum(keep) - 1
            remap[isnull] = remap[first]
            codes = remap[codes]
            uniques = uniques[keep]
        return np.asarray(codes, dtype=np.int64), uniques
    except ImportError:
        pass
    except (TypeError, ValueError):
        raise InvalidData(param, f"column {name!r} holds values that cannot be grouped") from None
    table: dict[Any, int] = {}
    codes = np.empty(a.size, dtype=np.int64)
    try:
        for i, x in enumerate(a.tolist()):
            codes[i] = table.setdefault(_hashable_key(x), len(table))
    except TypeError:
        raise InvalidData(param, f"column {name!r} holds unhashable values") from None
    uniques = np.array([None if k is _NULL else k for k in table], dtype=object)
    return codes, uniques


def combine(codes: Sequence[np.ndarray], cards: Sequence[int], n: int) -> tuple[np.ndarray, int]:
    """One group id per row for the tuple of code columns: ``(ids in [0, groups), groups)``."""
    if not codes:
        return np.zeros(n, dtype=np.int64), (1 if n else 0)
    key = np.zeros(n, dtype=np.int64)
    space = 1
    for c, card in zip(codes, cards, strict=True):
        card = max(int(card), 1)
        if space * card >= _KEY_LIMIT:
            key, space = compress(key, space)
        key = key * card + c
        space *= card
    return compress(key, space)


def compress(key: np.ndarray, space: int) -> tuple[np.ndarray, int]:
    """Renumber the keys that occur as ``0..groups-1`` (bincount when the key space is small, else a sort)."""
    if key.size == 0:
        return key, 0
    if space <= 4 * key.size + 1024:
        present = np.bincount(key, minlength=space) > 0
        remap = np.cumsum(present) - 1
        return remap[key], int(present.sum())
    u, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64).ravel(), int(u.size)


@dataclass(frozen=True)
class Classes:
    """The equivalence classes of a table on some columns.

    ``values[i]``: the distinct values of column ``columns[i]``; ``codes[g, i]``: class ``g``'s value of that
    column (an index into ``values[i]``); ``counts[g]``: its number of rows; ``row_class``: each row's class
    (in-memory tables only, else None).
    """

    columns: tuple[str, ...]
    values: tuple[np.ndarray, ...]
    codes: np.ndarray
    counts: np.ndarray
    row_class: np.ndarray | None

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def regroup(self, code_cols: Sequence[np.ndarray], cards: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Group the classes again by other per-class codes: ``(class -> new group, new group sizes)``."""
        ids, groups = combine(code_cols, cards, self.counts.size)
        return ids, np.bincount(ids, weights=self.counts, minlength=groups).astype(np.int64)


def classes_of(cols: Mapping[str, np.ndarray], columns: Sequence[str], param: str = "data") -> Classes:
    """The classes of in-memory columns (already arrays of equal length)."""
    n = len(next(iter(cols.values()))) if cols else 0
    codes, uniques = [], []
    for c in columns:
        k, u = factorize(cols[c], c, param)
        codes.append(k)
        uniques.append(u)
    ids, groups = combine(codes, [u.size for u in uniques], n)
    counts = np.bincount(ids, minlength=groups).astype(np.int64)
    first = np.empty(groups, dtype=np.int64)
    first[ids[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)
    cc = np.stack([k[first] for k in codes], axis=1) if codes else np.zeros((groups, 0), dtype=np.int64)
    return Classes(tuple(columns), tuple(uniques), cc, counts, ids)


def _columns_arg(columns: Any, param: str, available: Sequence[str] | None, *, allow_empty: bool = False) -> list[str]:
    if isinstance(columns, str):
        columns = [columns]
    try:
        cols = list(columns)
    except TypeError:
        raise WrongType(param, "a list of column names") from None
    if not cols and not allow_empty:
        raise InvalidParameter(param, "name at least one column")
    if len(cols) > MAX_COLUMNS:
        raise InvalidParameter(param, f"at most {MAX_COLUMNS} columns")
    for c in cols:
        if not isinstance(c, str):
            raise WrongType(param, "a list of column names (str)")
    if len(set(cols)) != len(cols):
        raise InvalidParameter(param, "a column is named twice")
    if available is not None:
        for c in cols:
            if c not in available:
                raise InvalidParameter(param, f"the table has no column {c!r}")
    return cols


@dataclass
class Table:
    """A validated input: in-memory columns (converted on demand) or a path read by DuckDB."""

    path: str | None
    raw: dict[str, Any]
    n: int | None
    names: list[str]
    param: str
    original: Any = None

    def arrays(self, columns: Sequence[str]) -> dict[str, np.ndarray]:
        if self.path is not None:
            return read_columns(self.path, columns, self.param)
        return {c: column_array(self.raw[c], c, self.param) for c in columns}

    def classes(self, columns: Sequence[str]) -> Classes:
        if self.path is not None and self.path != "adult":
            vals, counts = path_classes(self.path, columns, self.param)
            cl = classes_of(vals, columns, self.param)  # classes of the classes: identical, re-coded
            return Classes(cl.columns, cl.values, cl.codes, np.bincount(cl.row_class, weights=counts,
                                                                          minlength=cl.counts.size).astype(np.int64)
                           if cl.row_class is not None else counts, None)
        cl = classes_of(self.arrays(columns), columns, self.param)
        return cl


def table(data: Any, param: str = "data") -> Table:
    """Validate ``data`` (a frame, a mapping of columns, a path, or ``"adult"``)."""
    if isinstance(data, (str, os.PathLike)):
        try:
            path = os.fspath(data)
        except TypeError:
            raise WrongType(param, "a str path") from None
        if not isinstance(path, str):
            raise WrongType(param, "a str path")
        path = check_path(path, param)
        return Table(path, {}, None, path_columns(path, param), param, data)
    got = table_columns(data, param)
    assert got is not None
    cols, n = got
    return Table(None, cols, n, list(cols), param, data)


def columns_arg(columns: Any, param: str, tab: Table, *, allow_empty: bool = False) -> list[str]:
    return _columns_arg(columns, param, tab.names, allow_empty=allow_empty)


def int_arg(x: Any, param: str, lo: int, hi: int) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise WrongType(param, "an int")
    v = int(x)
    if not lo <= v <= hi:
        raise InvalidParameter(param, f"must be an integer in [{lo}, {hi}]")
    return v


def frac_arg(x: Any, param: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise WrongType(param, "a float in [0, 1)")
    try:
        v = float(x)
    except OverflowError:
        raise InvalidParameter(param, "must be in [0, 1)") from None
    if not (math.isfinite(v) and 0.0 <= v < 1.0):
        raise InvalidParameter(param, "must be in [0, 1)")
    return v
