"""Generalization hierarchies and the search for a k-anonymous full-domain generalization.

A *hierarchy* coarsens one column level by level: level 0 is the exact value, each next level merges groups
of the previous one (the partitions are nested), and the top level replaces every value by ``*``. Nesting
makes k-anonymity monotone: if a vector of levels is k-anonymous with at most s suppressed rows, so is every
coarser vector. :func:`k_anonymize` searches the lattice of level vectors bottom-up by height, skipping every
node above one already found k-anonymous (Incognito/OLA-style monotonicity pruning; Samarati 2001, LeFevre et
al. 2005, El Emam et al. 2009), and so finds *every minimal* k-anonymous node of the lattice; among them it
returns the one with the least precision loss (ties: fewer suppressed rows, then more classes). Because the
precision loss grows along the lattice, that node is optimal for that loss **among the full-domain
generalizations of these hierarchies with at most that suppression** — not among all ways to make a table
k-anonymous (local recoding, other hierarchies, cell suppression), a problem that is NP-hard in general
(Meyerson & Williams 2004). The search evaluates on the table's equivalence classes, never on the rows.

The book's ``generalize(df, depths)`` (Near & Abuah, ch. 3.2) *truncates* toward zero to a multiple of
10^depth although its text says "rounding" (36 -> 30, 57 -> 50, 94 -> 90): that is :func:`truncate_digits` and
the :class:`Digits` hierarchy here.

Nothing here is differentially private: a generalized table is a function of the exact data, and k-anonymity
is a property of that one table (see ``docs/guides/deid.md``).
"""

from __future__ import annotations

import copy
import datetime as _dt
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.deid import _data
from dpkit.deid.risk import KAnonymity, _k_result

__all__ = ["Anonymization", "Bins", "Dates", "Digits", "Hierarchy", "Prefix", "Suppress", "default_hierarchy",
           "generalize", "k_anonymize", "truncate_digits"]

#: The largest lattice :func:`k_anonymize` enumerates (product of the columns' level counts).
MAX_LATTICE = 2_000_000
_MAX_LEVELS = 64


def _isnull(u: np.ndarray) -> np.ndarray:
    if u.dtype.kind == "f":
        return np.isnan(u)
    if u.dtype.kind in "Mm":
        return np.isnat(u)
    if u.dtype.kind == "O":
        out = np.zeros(u.size, dtype=bool)
        for i, x in enumerate(u.tolist()):
            try:
                out[i] = x is None or bool(x != x)
            except (TypeError, ValueError):
                out[i] = True  # pd.NA
        return out
    return np.zeros(u.size, dtype=bool)


class Hierarchy:
    """A generalization hierarchy of one column (subclass it: :meth:`prepare`, :meth:`group`, :meth:`label`,
    :meth:`describe`). ``prepare(values)`` sees the column's distinct non-NULL values and returns the number of
    levels *below* the top (the top, ``*``, merges everything, NULL included); below the top NULL stays a
    group of its own. ``group(values, level)`` returns one int64 code per value, nested across levels."""

    name = "hierarchy"

    def prepare(self, values: np.ndarray) -> int:
        raise NotImplementedError

    def group(self, values: np.ndarray, level: int) -> np.ndarray:
        raise NotImplementedError

    def label(self, values: np.ndarray, level: int) -> list[str]:
        raise NotImplementedError

    def describe(self, level: int) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _numeric(values: np.ndarray, what: str) -> np.ndarray:
    try:
        x = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidData("hierarchies", f"{what} needs a numeric column") from None
    return x


class Bins(Hierarchy):
    """Numeric bins whose width doubles: level j >= 1 is ``[w·m, w·(m+1))`` with ``w = width·2^(j-1)``, anchored
    at 0 (so the bins are public and nested); levels stop when one bin holds every value. ``width`` is public: a
    round number you would publish (1 year, 1,000 dollars), not one read from the data."""

    name = "bins"

    def __init__(self, width: float = 1.0) -> None:
        if isinstance(width, bool) or not isinstance(width, (int, float, np.integer, np.floating)):
            raise WrongType("width", "a positive float")
        try:
            w = float(width)
        except OverflowError:
            raise InvalidParameter("width", "must be a finite number > 0") from None
        if not (math.isfinite(w) and w > 0.0 and w < 1e300):
            raise InvalidParameter("width", "must be a finite number > 0")
        self.width = w

    def _w(self, level: int) -> float:
        return self.width * 2.0 ** (level - 1)

    def prepare(self, values: np.ndarray) -> int:
        x = _numeric(values, "bins")
        if x.size <= 1:
            return 1
        for j in range(1, _MAX_LEVELS):
            b = np.floor(x / self._w(j))
            if b.min() == b.max():
                return j
        return _MAX_LEVELS

    def group(self, values: np.ndarray, level: int) -> np.ndarray:
        x = _numeric(values, "bins")
        if level == 0:
            return np.unique(x, return_inverse=True)[1].astype(np.int64).ravel()
        return np.unique(np.floor(x / self._w(level)), return_inverse=True)[1].astype(np.int64).ravel()

    def label(self, values: np.ndarray, level: int) -> list[str]:
        x = _numeric(values, "bins")
        if level == 0:
            return [_num(v) for v in x]
        w = self._w(level)
        lo = np.floor(x / w) * w
        return [f"[{_num(a)}, {_num(a + w)})" for a in lo]

    def describe(self, level: int) -> str:
        return "exact value" if level == 0 else f"bins of width {_num(self._w(level))}"

    def __repr__(self) -> str:
        return f"Bins(width={_num(self.width)})"


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.6g}"


class Digits(Hierarchy):
    """The book's generalization, named for what it does: level d truncates toward zero to a multiple of 10^d
    (``int(x / 10**d)``; 36 -> ``3*``, 64152 -> ``641**`` at d = 2), until every value truncates to 0."""

    name = "digits"

    def prepare(self, values: np.ndarray) -> int:
        x = _numeric(values, "digits")
        m = float(np.max(np.abs(x))) if x.size else 0.0
        d = 1
        while d < _MAX_LEVELS and m >= 10.0**d:
            d += 1
        return d

    def group(self, values: np.ndarray, level: int) -> np.ndarray:
        x = _numeric(values, "digits")
        t = x if level == 0 else np.trunc(x / 10.0**level)
        return np.unique(t, return_inverse=True)[1].astype(np.int64).ravel()

    def label(self, values: np.ndarray, level: int) -> list[str]:
        x = _numeric(values, "digits")
        if level == 0:
            return [_num(v) for v in x]
        t = np.trunc(x / 10.0**level)
        return [("-" if v < 0 or (v == 0 and a < 0) else "") + f"{abs(int(v))}" + "*" * level
                for v, a in zip(t, x, strict=True)]

    def describe(self, level: int) -> str:
        return "exact value" if level == 0 else f"last {level} digit{'s' if level > 1 else ''} truncated"


class Prefix(Hierarchy):
    """Strings truncated from the right: level j keeps the first ``L - j`` characters (L: the longest value),
    the rest shown as ``*`` (ZIP ``64152`` -> ``6415*`` -> ``641**``). Non-string values are formatted first."""

    name = "prefix"

    def __init__(self) -> None:
        self._len = 0

    @staticmethod
    def _s(values: np.ndarray) -> list[str]:
        out = []
        for v in values.tolist():
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            out.append(v if isinstance(v, str) else str(v))
        return out

    def prepare(self, values: np.ndarray) -> int:
        s = self._s(values)
        self._len = max((len(v) for v in s), default=0)
        return max(self._len, 1)

    def _cut(self, values: np.ndarray, level: int) -> list[str]:
        keep = max(self._len - level, 0)
        return [v if len(v) <= keep else v[:keep] for v in self._s(values)]

    def group(self, values: np.ndarray, level: int) -> np.ndarray:
        cut = self._cut(values, level)
        table: dict[str, int] = {}
        return np.array([table.setdefault(v, len(table)) for v in cut], dtype=np.int64)

    def label(self, values: np.ndarray, level: int) -> list[str]:
        keep = max(self._len - level, 0)
        return [v if len(v) <= keep else v[:keep] + "*" * (len(v) - keep) for v in self._s(values)]

    def describe(self, level: int) -> str:
        return "exact value" if level == 0 else f"last {level} character{'s' if level > 1 else ''} masked"


class Dates(Hierarchy):
    """Dates: day -> month -> year -> ``*``. Takes datetime64 values, ``datetime.date`` objects, or strings in
    ISO form (``1967-09-07``) or US form (``9/7/1967``)."""

    name = "dates"
    _DESC = ("exact date", "month", "year")

    @staticmethod
    def _ym(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if values.dtype.kind == "M":
            d = values.astype("datetime64[D]")
            y = d.astype("datetime64[Y]").astype(np.int64) + 1970
            m = d.astype("datetime64[M]").astype(np.int64) % 12 + 1
            return y, m, d.astype(np.int64)
        ys, ms, ds = [], [], []
        for v in values.tolist():
            day = _parse_date(v)
            if day is None:
                raise InvalidData("hierarchies", "a dates hierarchy needs date values (datetime, ISO or m/d/Y "
                                                 "strings)")
            ys.append(day.year)
            ms.append(day.month)
            ds.append(day.toordinal())
        return np.array(ys, dtype=np.int64), np.array(ms, dtype=np.int64), np.array(ds, dtype=np.int64)

    def prepare(self, values: np.ndarray) -> int:
        self._ym(values)
        return 3

    def group(self, values: np.ndarray, level: int) -> np.ndarray:
        y, m, d = self._ym(values)
        key = d if level == 0 else (y * 12 + m if level == 1 else y)
        return np.unique(key, return_inverse=True)[1].astype(np.int64).ravel()

    def label(self, values: np.ndarray, level: int) -> list[str]:
        y, m, d = self._ym(values)
        if level == 0:
            return [_dt.date.fromordinal(int(v)).isoformat() if values.dtype.kind != "M" else
                    str(np.datetime64(int(v), "D")) for v in d]
        if level == 1:
            return [f"{a:04d}-{b:02d}" for a, b in zip(y, m, strict=True)]
        return [f"{a:04d}" for a in y]

    def describe(self, level: int) -> str:
        return self._DESC[level]


def _parse_date(v: Any) -> _dt.date | None:
    if isinstance(v, _dt.datetime):
        return v.date()
    if isinstance(v, _dt.date):
        return v
    if hasattr(v, "to_pydatetime"):
        return v.to_pydatetime().date()
    if isinstance(v, np.datetime64):
        return _dt.date.fromisoformat(str(v.astype("datetime64[D]")))
    if not isinstance(v, str):
        return None
    s = v.strip()
    for fmt in ("%Y-%m-%d", "%m/%d/%Y"):
        try:
            return _dt.datetime.strptime(s, fmt).date()
        except ValueError:
            continue
    return None


class Suppress(Hierarchy):
    """A categorical column kept or replaced by ``*`` (no intermediate level)."""

    name = "suppress"

    def prepare(self, values: np.ndarray) -> int:
        return 0

    def group(self, values: np.ndarray, level: int) -> np.ndarray:
        return _data.factorize(np.asarray(values, dtype=object), "column", "hierarchies")[0]

    def label(self, values: np.ndarray, level: int) -> list[str]:
        return [str(v) for v in values.tolist()]

    def describe(self, level: int) -> str:
        return "exact value"


def default_hierarchy(values: Any) -> Hierarchy:
    """The hierarchy :func:`k_anonymize` uses when none is given: :class:`Dates` for datetimes and date strings
    (ISO or m/d/Y), :class:`Bins`
    (width 2 for integers, 1 for other numbers) for numbers, :class:`Prefix` for strings made of digits only
    (codes such as ZIP), :class:`Suppress` for other categories (booleans included).

    Examples
    --------
    >>> default_hierarchy([1, 2, 3]), default_hierarchy(["02139", "02142"]), default_hierarchy(["F", "M"])
    (Bins(width=2), Prefix(), Suppress())
    """
    a = values if isinstance(values, np.ndarray) else _data.column_array(values, "values", "values")
    if a.dtype.kind == "M":
        return Dates()
    if a.dtype.kind in "iu":
        return Bins(2.0)
    if a.dtype.kind == "f":
        x = a[~np.isnan(a)]
        return Bins(2.0) if x.size and np.all(x == np.round(x)) else Bins(1.0)
    if a.dtype.kind == "O":
        items = [v for v in a.tolist() if v is not None and v == v][:10_000]
        if items and all(isinstance(v, str) and v.isdigit() and v.isascii() for v in items):
            return Prefix()
        if items and all(isinstance(v, (_dt.date, np.datetime64)) for v in items):
            return Dates()
        if items and all(isinstance(v, str) and _parse_date(v) is not None for v in items[:200]):
            return Dates()  # date strings (ISO or m/d/Y), e.g. a CSV's birth dates
    return Suppress()


def _plain(vals: np.ndarray) -> np.ndarray:
    """Object arrays of plain numbers as a numeric array (a frame's nullable column read as objects)."""
    if vals.dtype == object and vals.size and all(isinstance(v, (int, float, np.integer, np.floating))
                                                  and not isinstance(v, (bool, np.bool_)) for v in vals.tolist()):
        return np.asarray(vals.tolist())
    return vals


@dataclass
class _Column:
    name: str
    hierarchy: Hierarchy
    top: int  # the "*" level
    codes: list[np.ndarray]  # per level: a code per distinct value (NULL separate below the top)
    cards: list[int]


def _prepare(name: str, uniques: np.ndarray, h: Hierarchy) -> _Column:
    h = copy.copy(h)  # a hierarchy may keep what prepare() saw (Prefix's length): one copy per column
    null = _isnull(uniques)
    vals = _plain(uniques[~null])
    below = int(h.prepare(vals)) if vals.size else 0
    top = below + 1
    codes, cards = [], []
    for lev in range(top):
        c = np.zeros(uniques.size, dtype=np.int64)
        g = np.asarray(h.group(vals, lev), dtype=np.int64) if vals.size else np.zeros(0, dtype=np.int64)
        card = int(g.max()) + 1 if g.size else 0
        c[~null] = g
        c[null] = card  # NULL: one group of its own
        codes.append(c)
        cards.append(card + 1)
    codes.append(np.zeros(uniques.size, dtype=np.int64))
    cards.append(1)
    return _Column(name, h, top, codes, cards)


def _hierarchies_arg(hierarchies: Any, cols: list[str]) -> dict[str, Hierarchy | None]:
    if hierarchies is None:
        return dict.fromkeys(cols)
    if not isinstance(hierarchies, dict):
        raise WrongType("hierarchies", "a dict column name -> Hierarchy")
    out: dict[str, Hierarchy | None] = dict.fromkeys(cols)
    for c, h in hierarchies.items():
        if not isinstance(c, str) or c not in out:
            raise InvalidParameter("hierarchies", "a key is not one of the quasi-identifiers")
        if not isinstance(h, Hierarchy):
            raise WrongType("hierarchies", "a dict column name -> Hierarchy (Bins, Digits, Prefix, Dates, Suppress)")
        out[c] = h
    return out


@dataclass(frozen=True)
class Anonymization:
    """The result of :func:`k_anonymize`.

    ``levels``: column -> chosen level (None when no node of the lattice qualifies); ``descriptions``: what each
    level means ("bins of width 16"); ``hierarchies``: column -> its hierarchy's repr; ``suppressed_rows``:
    rows removed (in classes still below k); ``classes`` / ``min_class_size``: of the kept rows;
    ``precision_loss``: mean over the columns of level / top level (0: nothing generalized, 1: all ``*``;
    Sweeney's Prec loss), the quantity minimised; ``average_class_ratio``: kept rows / classes / k (1 is ideal);
    ``minimal_nodes``: every minimal k-anonymous level vector found; ``nodes_evaluated`` / ``lattice_size``;
    ``exhaustive``: False when ``max_nodes`` stopped the search (the answer is then the best found, not
    guaranteed minimal); ``before``: the k-anonymity check of the original columns; ``table``: the generalized
    table without the suppressed rows (same kind as the input; None for a file input).
    """

    k: int
    max_suppression: float
    columns: tuple[str, ...]
    levels: dict[str, int] | None
    top_levels: dict[str, int]
    descriptions: dict[str, str]
    hierarchies: dict[str, str]
    rows: int
    suppressed_rows: int
    classes: int
    min_class_size: int
    precision_loss: float
    average_class_ratio: float
    minimal_nodes: tuple[dict[str, int], ...]
    nodes_evaluated: int
    lattice_size: int
    exhaustive: bool
    before: KAnonymity
    table: Any = field(default=None, repr=False)


def truncate_digits(values: Any, depth: int) -> np.ndarray:
    """The book's ``generalize`` for one column, named for what it does: ``int(int(x / 10**depth) * 10**depth)``,
    i.e. *truncation* toward zero to a multiple of 10^depth (36 -> 30, 57 -> 50, 94 -> 90, -37 -> -30), not the
    rounding its text describes.

    Examples
    --------
    >>> truncate_digits([42, 52, 36, 24, 73], 1).tolist()
    [40, 50, 30, 20, 70]
    """
    d = _data.int_arg(depth, "depth", 0, 18)
    a = _data.column_array(values, "values", "values")
    if a.dtype.kind not in "biuf":
        raise WrongType("values", "numbers")
    x = a.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise InvalidData("values", "must be finite (no NaN or infinity)")
    if x.size and float(np.max(np.abs(x))) >= 2.0**62:
        raise InvalidData("values", "too large for int64")
    if a.dtype.kind in "iu":
        p = np.int64(10) ** d
        v = a.astype(np.int64)
        return np.sign(v) * (np.abs(v) // p) * p  # exact for integers
    p10 = 10.0**d
    return (np.trunc(x / p10) * p10).astype(np.int64)


def _apply(arr: np.ndarray, name: str, h: Hierarchy, level: int, param: str) -> np.ndarray:
    codes, uniques = _data.factorize(arr, name, param)
    col = _prepare(name, uniques, h)
    if level > col.top:
        raise InvalidParameter("levels", f"column {name!r} has levels 0..{col.top}")
    null = _isnull(uniques)
    labels = np.empty(uniques.size, dtype=object)
    if level == col.top:
        labels[:] = "*"
    else:
        labels[null] = None
        vals = _plain(uniques[~null])
        if vals.size:
            labels[~null] = col.hierarchy.label(vals, level)
    return labels[codes]


def _out_table(tab: _data.Table, replaced: dict[str, np.ndarray], keep: np.ndarray | None) -> Any:
    orig = tab.original
    mod = type(orig).__module__ or ""
    if mod.startswith("pandas"):
        df = orig.copy()
        for c, v in replaced.items():
            df[c] = v
        return df[keep].reset_index(drop=True) if keep is not None else df
    out = {}
    for c, v in tab.raw.items():
        a = replaced.get(c)
        if a is None:
            a = np.asarray(v)
        out[c] = a[keep] if keep is not None else a
    return out


def generalize(data: Any, levels: Any, hierarchies: Any = None) -> Any:
    """Replace the named columns by their generalization at the given levels (no suppression).

    Parameters
    ----------
    data:
        A pandas DataFrame or a mapping of column name -> 1-D array (in memory).
    levels:
        A dict column -> level (0: unchanged; the hierarchy's top level: ``*``).
    hierarchies:
        A dict column -> :class:`Hierarchy` (default: :func:`default_hierarchy` of the column).

    Returns
    -------
    The same kind of table, the generalized columns as text labels (NULL stays None below the top).

    Examples
    --------
    >>> generalize({"age": [42, 52, 36]}, {"age": 1}, {"age": Digits()})["age"].tolist()
    ['4*', '5*', '3*']
    """
    tab = _data.table(data)
    if tab.path is not None:
        raise WrongType("data", "an in-memory table (a DataFrame or a mapping of columns)")
    if not isinstance(levels, dict):
        raise WrongType("levels", "a dict column name -> level")
    cols = _data.columns_arg(list(levels), "levels", tab)
    hs = _hierarchies_arg(hierarchies, cols)
    replaced = {}
    for c in cols:
        lev = _data.int_arg(levels[c], "levels", 0, _MAX_LEVELS + 1)
        arr = tab.arrays([c])[c]
        h = hs[c] or default_hierarchy(arr)
        replaced[c] = _apply(arr, c, h, lev, "data")
    return _out_table(tab, replaced, None)


def k_anonymize(data: Any, quasi_identifiers: Any, k: int, *, max_suppression: float = 0.0,
                hierarchies: Any = None, max_nodes: int = 100_000) -> Anonymization:
    """The least-generalized full-domain generalization that makes ``data`` k-anonymous on the
    quasi-identifiers, suppressing at most ``max_suppression`` of the rows.

    Bottom-up search of the lattice of level vectors by height with monotonicity pruning (every node above a
    k-anonymous node is k-anonymous and is skipped), so every minimal k-anonymous node is found; the one with the
    least precision loss is returned (optimal for that loss among the lattice's nodes; optimal k-anonymization in
    general is NP-hard). Each node costs one group-by of the table's equivalence classes, not of its rows.

    Parameters
    ----------
    data:
        A pandas DataFrame, a mapping of column name -> 1-D array, a CSV/Parquet path (classes by DuckDB; no
        table is returned), or ``"adult"``.
    quasi_identifiers:
        The columns to generalize.
    k:
        The class size required, an int >= 2.
    max_suppression:
        The largest share of rows that may be removed (rows in classes still below k), in [0, 1).
    hierarchies:
        A dict column -> :class:`Hierarchy`; missing columns get :func:`default_hierarchy`.
    max_nodes:
        Stop after evaluating this many lattice nodes (the result then says ``exhaustive=False``).

    Returns
    -------
    Anonymization
        The levels, the utility loss, the search's statistics and the generalized table.

    Notes
    -----
    Not differential privacy. The suppressed rows and the chosen levels depend on every row, and the output
    is a property of one table: a second release, a sensitive column with one value per class, or background
    knowledge breaks it (Near & Abuah ch. 3; Li et al. ch. 3).

    Examples
    --------
    >>> t = {"age": [20, 21, 22, 23, 30, 31, 32, 33], "sex": ["F", "F", "M", "M", "F", "F", "M", "M"]}
    >>> r = k_anonymize(t, ["age", "sex"], 2, hierarchies={"age": Bins(2)})
    >>> r.levels, r.descriptions["age"], r.suppressed_rows
    ({'age': 1, 'sex': 0}, 'bins of width 2', 0)
    """
    kk = _data.int_arg(k, "k", 2, 2**62)
    s = _data.frac_arg(max_suppression, "max_suppression")
    mn = _data.int_arg(max_nodes, "max_nodes", 1, 10**8)
    tab = _data.table(data)
    cols = _data.columns_arg(quasi_identifiers, "quasi_identifiers", tab)
    hs = _hierarchies_arg(hierarchies, cols)
    cl = tab.classes(cols)
    pcols = []
    for i, c in enumerate(cols):
        u = cl.values[i]
        h = hs[c]
        if h is None:
            nn = u[~_isnull(u)]
            h = default_hierarchy(nn if nn.dtype != object or not nn.size else
                                  _data.column_array(list(nn), c, "data"))
        pcols.append(_prepare(c, u, h))
    n = cl.n
    allowed = math.floor(s * n)
    tops = [p.top for p in pcols]
    lattice = math.prod(t + 1 for t in tops)
    if lattice > MAX_LATTICE:
        raise InvalidParameter("hierarchies", f"the lattice has more than {MAX_LATTICE:,} nodes; use coarser "
                                              "hierarchies (e.g. a larger Bins width) or fewer quasi-identifiers")

    def evaluate(node: tuple[int, ...]) -> tuple[int, np.ndarray, np.ndarray]:
        ids, sizes = cl.regroup([p.codes[lv][cl.codes[:, i]] for i, (p, lv) in enumerate(zip(pcols, node,
                                                                                              strict=True))],
                                [p.cards[lv] for p, lv in zip(pcols, node, strict=True)])
        return int(sizes[sizes < kk].sum()), ids, sizes

    nodes = sorted(itertools.product(*(range(t + 1) for t in tops)), key=lambda v: (sum(v), v))
    minimal: list[tuple[int, ...]] = []
    marr = np.zeros((0, len(cols)), dtype=np.int64)
    evaluated = 0
    exhaustive = True
    for node in nodes:
        if marr.shape[0] and bool(np.all(marr <= np.asarray(node), axis=1).any()):
            continue  # above a k-anonymous node: k-anonymous, not minimal
        if evaluated >= mn:
            exhaustive = False
            break
        evaluated += 1
        supp, _, _ = evaluate(node)
        if supp <= allowed and n >= kk:
            minimal.append(node)
            marr = np.asarray(minimal, dtype=np.int64)

    before = _k_result(cl.counts, kk)
    hrepr = {p.name: repr(p.hierarchy) for p in pcols}
    top_levels = {p.name: p.top for p in pcols}

    def loss(v: tuple[int, ...]) -> float:
        return float(np.mean([lv / t if t else 0.0 for lv, t in zip(v, tops, strict=True)]))

    if not minimal:
        return Anonymization(k=kk, max_suppression=s, columns=tuple(cols), levels=None, top_levels=top_levels,
                             descriptions={}, hierarchies=hrepr, rows=n, suppressed_rows=n, classes=0,
                             min_class_size=0, precision_loss=1.0, average_class_ratio=0.0, minimal_nodes=(),
                             nodes_evaluated=evaluated, lattice_size=lattice, exhaustive=exhaustive, before=before)
    scored = []
    for v in minimal:
        supp, ids, sizes = evaluate(v)
        kept = sizes >= kk
        scored.append((loss(v), supp, -int(kept.sum()), v, ids, sizes))
    scored.sort(key=lambda t: t[:4])
    best_loss, supp, _, best, ids, sizes = scored[0]
    kept = sizes >= kk
    classes = int(kept.sum())
    levels = {c: int(lv) for c, lv in zip(cols, best, strict=True)}
    desc = {p.name: ("* (suppressed)" if lv == p.top else p.hierarchy.describe(lv)) for p, lv in
            zip(pcols, best, strict=True)}
    out_table = None
    if tab.path is None and cl.row_class is not None:
        keep_rows = kept[ids[cl.row_class]]
        replaced = {}
        for i, (p, lv) in enumerate(zip(pcols, best, strict=True)):
            u = cl.values[i]
            null = _isnull(u)
            labels = np.empty(u.size, dtype=object)
            if lv == p.top:
                labels[:] = "*"
            else:
                labels[null] = None
                vals = _plain(u[~null])
                if vals.size:
                    labels[~null] = p.hierarchy.label(vals, lv)
            replaced[p.name] = labels[cl.codes[:, i]][cl.row_class]
        out_table = _out_table(tab, replaced, keep_rows)
    return Anonymization(
        k=kk, max_suppression=s, columns=tuple(cols), levels=levels, top_levels=top_levels, descriptions=desc,
        hierarchies=hrepr, rows=n, suppressed_rows=int(supp), classes=classes,
        min_class_size=int(sizes[kept].min()) if classes else 0, precision_loss=best_loss,
        average_class_ratio=(n - supp) / classes / kk if classes else 0.0,
        minimal_nodes=tuple({c: int(lv) for c, lv in zip(cols, v, strict=True)} for v in minimal),
        nodes_evaluated=evaluated, lattice_size=lattice, exhaustive=exhaustive, before=before, table=out_table)
