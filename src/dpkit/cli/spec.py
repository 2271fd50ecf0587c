"""The release spec: a strict TOML schema (documented in ``docs/cli.md``).

:func:`load_spec` reads and validates a spec file without touching any data and without opening
the ledger. Every problem raises :class:`SpecError` naming the key path (``query[2].bounds``,
``budget.epsilon``); unknown keys are errors too, so a typo can never silently change a release.
Paths in the spec are relative to the spec file's folder.
"""

from __future__ import annotations

import hashlib
import math
import os
import stat
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpkit.core.errors import DPKitError
from dpkit.core.neighbours import AddRemove, Neighbours, PrivacyUnit
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss, PureDP

__all__ = ["STATISTICS", "QuerySpec", "Spec", "SpecError", "SpecReader", "StatSpec", "load_spec", "parse_spec"]

class _Statistics(Mapping[str, tuple[str, ...]]):
    """``{stat: keys}``: the statistics a query may ask for, and the keys each accepts (besides ``stat`` and
    ``weight``), read from the registry of statistic kinds (:mod:`dpkit.tables.kinds`) at each use, so that a
    kind registered with :func:`dpkit.tables.register_kind` is a spec statistic too."""

    @staticmethod
    def _kinds() -> dict[str, tuple[str, ...]]:
        from dpkit.tables.kinds import kinds

        return {k.spec: tuple(k.spec_keys) for k in kinds()}

    def __getitem__(self, key: str) -> tuple[str, ...]:
        return self._kinds()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds())

    def __len__(self) -> int:
        return len(self._kinds())

    def __repr__(self) -> str:
        return repr(self._kinds())


#: The statistics a query may ask for, and the keys each accepts (besides ``stat`` and ``weight``).
STATISTICS: Mapping[str, tuple[str, ...]] = _Statistics()


def _stat_keys() -> set[str]:
    """Every key a statistic may have (the single-statistic query form takes them at the query's level)."""
    keys = {"stat", "weight"}
    for v in STATISTICS.values():
        keys.update(v)
    return keys


_QUERY_KEYS = {"name", "filter", "derive", "group_by", "keys", "weight", "postprocess", "statistics", "diagnostics"}
_TOP_KEYS = {"name", "description", "data", "privacy", "budget", "ledger", "output", "domain", "postprocess",
             "query"}
_FORMATS = ("csv", "json", "parquet")
_MAX_NAME = 200


class SpecError(DPKitError):
    """The spec is invalid; ``path`` is the key path (``query[2].bounds``). Nothing was read or spent."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.problem = message
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True)
class StatSpec:
    """One statistic of a query (validated)."""

    stat: str
    path: str
    weight: float = 1.0
    column: str | None = None
    columns: tuple[str, ...] = ()
    bounds: tuple[float, float] | None = None  # None: found privately (``bounds = "private"``)
    levels: tuple[float, ...] = ()
    edges: tuple[float, ...] | None = None
    categories: tuple[Any, ...] | None = None
    domains: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)  # the keys of a registered kind that are not fields


@dataclass(frozen=True)
class QuerySpec:
    """One ``[[query]]`` table (validated)."""

    name: str
    path: str
    statistics: tuple[StatSpec, ...]
    filter: str | None = None
    derive: dict[str, str] = field(default_factory=dict)
    group_by: tuple[str, ...] = ()
    keys: str | dict[str, tuple[Any, ...]] | None = None  # None (no group_by), "private", or public keys per column
    weight: float = 1.0
    postprocess: dict[str, bool] = field(default_factory=dict)
    diagnostics: float | None = None  # the diagnostics' budget weight (docs/cli.md), None: off


@dataclass(frozen=True)
class Spec:
    """A validated release spec."""

    file: Path | None
    sha256: str
    name: str
    description: str
    source: str  # "adult" or an absolute path
    dataset: str  # the ledger key
    nan_policy: str
    unit: PrivacyUnit | None  # None: one row
    budget: PrivacyLoss
    ledger_path: Path | None
    ledger_total: PrivacyLoss | None
    out_dir: Path | None
    formats: tuple[str, ...]
    domain: dict[str, Any]
    queries: tuple[QuerySpec, ...]
    allow_known_source: bool = False  # [data] allow_known_source: identical bytes, a different population

    @property
    def neighbours(self) -> Neighbours:
        return self.unit if self.unit is not None else AddRemove()

    def shares(self) -> list[PrivacyLoss]:
        """Each query's budget: the total split in proportion to the query weights (basic composition)."""
        total = math.fsum(q.weight for q in self.queries)
        return [_scale(self.budget, q.weight / total) for q in self.queries]


def _scale(loss: PrivacyLoss, f: float) -> PrivacyLoss:
    if isinstance(loss, PureDP):
        return PureDP(loss.epsilon * f)
    if isinstance(loss, ApproxDP):
        return ApproxDP(loss.epsilon * f, loss.delta * f)
    assert isinstance(loss, ZCDP)
    return ZCDP(loss.rho * f)


# ----------------------------------------------------------------------------------------------
# small typed readers; each names the key path


def _table(path: str, value: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(path, "must be a table")
    for k in value:
        if k not in allowed:
            where = f"{path}.{k}" if path else k
            raise SpecError(where, f"unknown key (allowed: {', '.join(sorted(allowed))})")
    return value


def _str(path: str, value: Any, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise SpecError(path, "must be a string")
    if not empty and not value.strip():
        raise SpecError(path, "must not be empty")
    if len(value) > 10_000:
        raise SpecError(path, "is too long")
    return value


def _ident(path: str, value: Any) -> str:
    s = _str(path, value)
    if not s.isidentifier():
        raise SpecError(path, "must be a column name (letters, digits and _, not starting with a digit)")
    return s


def _num(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(path, "must be a number")
    x = float(value)
    if not math.isfinite(x):
        raise SpecError(path, "must be finite")
    return x


def _pos(path: str, value: Any) -> float:
    x = _num(path, value)
    if x <= 0:
        raise SpecError(path, "must be > 0")
    return x


def _int(path: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(path, "must be an integer")
    if value < minimum:
        raise SpecError(path, f"must be >= {minimum}")
    return value


def _bool(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SpecError(path, "must be true or false")
    return value


def _list(path: str, value: Any, *, min_len: int = 1) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError(path, "must be a list")
    if len(value) < min_len:
        raise SpecError(path, f"must have at least {min_len} element(s)")
    return value


def _scalars(path: str, value: Any) -> tuple[Any, ...]:
    """A public list of keys / categories: strings, integers or booleans, distinct."""
    items = _list(path, value)
    out = []
    for i, v in enumerate(items):
        if isinstance(v, float) or not isinstance(v, (str, int, bool)):
            raise SpecError(f"{path}[{i}]", "must be a string, integer or boolean")
        out.append(v)
    if len({(type(v), v) for v in out}) != len(out):
        raise SpecError(path, "must not repeat a value")
    return tuple(out)


def _increasing(path: str, value: Any, *, min_len: int, open01: bool = False) -> tuple[float, ...]:
    items = _list(path, value, min_len=min_len)
    xs = tuple(_num(f"{path}[{i}]", v) for i, v in enumerate(items))
    for i in range(1, len(xs)):
        if not xs[i] > xs[i - 1]:
            raise SpecError(f"{path}[{i}]", "must be strictly increasing")
    if open01:
        for i, x in enumerate(xs):
            if not 0.0 < x < 1.0:
                raise SpecError(f"{path}[{i}]", "must be strictly between 0 and 1")
    return xs


def _loss(path: str, value: Any) -> PrivacyLoss:
    t = _table(path, value, {"epsilon", "delta", "rho"})
    eps, delta, rho = t.get("epsilon"), t.get("delta"), t.get("rho")
    if rho is not None:
        if eps is not None or delta is not None:
            raise SpecError(f"{path}.rho", "give either rho (zCDP) or epsilon [and delta], not both")
        return ZCDP(_pos(f"{path}.rho", rho))
    if eps is None:
        raise SpecError(f"{path}.epsilon", "missing: give epsilon, epsilon and delta, or rho")
    e = _pos(f"{path}.epsilon", eps)
    if delta is None:
        return PureDP(e)
    d = _num(f"{path}.delta", delta)
    if not 0.0 < d < 1.0:
        raise SpecError(f"{path}.delta", "must be strictly between 0 and 1")
    return ApproxDP(e, d)


def _accepts(total: PrivacyLoss, cost: PrivacyLoss) -> bool:
    if isinstance(total, PureDP):
        return isinstance(cost, PureDP)
    if isinstance(total, ZCDP):
        return isinstance(cost, (ZCDP, PureDP))
    return isinstance(cost, (PureDP, ApproxDP))


def _rel_path(base: Path, value: str) -> Path:
    p = Path(os.path.expanduser(value))
    return p if p.is_absolute() else (base / p)


# ----------------------------------------------------------------------------------------------


#: The largest spec file accepted (a spec is a few KiB; this refuses /dev/zero and accidental data files).
MAX_SPEC_BYTES = 1 << 20


def load_spec(path: str | os.PathLike[str]) -> Spec:
    """Read and validate the spec file ``path`` (no data read, nothing spent).

    The file must be a regular file of at most :data:`MAX_SPEC_BYTES` (at most that many bytes plus one are read).
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not block the open
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise SpecError("", f"the spec {p} is not a regular file")
            raw = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError("", f"cannot read the spec file {p} ({exc.strerror or 'error'})") from None
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError("", f"the spec {p} is larger than {MAX_SPEC_BYTES // (1 << 20)} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("", "the spec file is not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError("", f"invalid TOML: {exc}") from None
    except RecursionError:
        raise SpecError("", "invalid TOML: arrays or tables nested too deeply") from None
    return parse_spec(doc, file=p.resolve(), sha256=hashlib.sha256(raw).hexdigest())


def parse_spec(doc: dict[str, Any], *, file: Path | None = None, sha256: str = "") -> Spec:
    """Validate an already-parsed spec (``tomllib`` output)."""
    doc = _table("", doc, _TOP_KEYS)
    base = file.parent if file is not None else Path.cwd()
    name = _str("name", doc["name"]) if "name" in doc else (file.stem if file is not None else "release")
    if len(name) > _MAX_NAME:
        raise SpecError("name", "is too long")
    description = _str("description", doc.get("description", ""), empty=True)

    data = _table("data", doc.get("data", {}), {"source", "dataset", "nan_policy", "allow_known_source"})
    source = _str("data.source", data.get("source", "adult"))
    if source != "adult":
        sp = _rel_path(base, source)
        if sp.suffix.lower() not in (".csv", ".parquet"):
            raise SpecError("data.source", 'must be "adult" or a path to a .csv or .parquet file')
        source = str(sp)
    default_dataset = "uci-adult" if source == "adult" else Path(source).stem
    dataset = _str("data.dataset", data.get("dataset", default_dataset))
    nan_policy = _str("data.nan_policy", data.get("nan_policy", "raise"))
    if nan_policy not in ("raise", "omit", "drop"):  # "drop": the earlier name, an alias of "omit"
        raise SpecError("data.nan_policy", 'must be "raise" or "omit"')
    nan_policy = "omit" if nan_policy == "drop" else nan_policy
    allow_known = _bool("data.allow_known_source", data.get("allow_known_source", False))

    priv = _table("privacy", doc.get("privacy", {}), {"unit", "column", "max_rows", "max_groups",
                                                      "max_rows_per_group"})
    unit_kind = _str("privacy.unit", priv.get("unit", "row"))
    unit: PrivacyUnit | None = None
    if unit_kind == "row":
        for k in ("column", "max_rows", "max_groups", "max_rows_per_group"):
            if k in priv:
                raise SpecError(f"privacy.{k}", 'only with unit = "user"')
    elif unit_kind == "user":
        if "column" not in priv:
            raise SpecError("privacy.column", 'missing: unit = "user" needs the user id column')
        if "max_rows" not in priv:
            raise SpecError("privacy.max_rows", 'missing: unit = "user" needs max_rows (rows kept per user)')
        col = _ident("privacy.column", priv["column"])
        mr = _int("privacy.max_rows", priv["max_rows"])
        mg = _int("privacy.max_groups", priv["max_groups"]) if "max_groups" in priv else None
        mrg = _int("privacy.max_rows_per_group", priv["max_rows_per_group"]) if "max_rows_per_group" in priv \
            else None
        if mrg is not None and mrg > mr:
            raise SpecError("privacy.max_rows_per_group", "must be <= privacy.max_rows")
        unit = PrivacyUnit(col, max_rows=mr, max_groups=mg, max_rows_per_group=mrg)
    else:
        raise SpecError("privacy.unit", 'must be "row" or "user"')

    if "budget" not in doc:
        raise SpecError("budget", "missing: the budget this release spends ([budget] epsilon = ...)")
    budget = _loss("budget", doc["budget"])

    led = _table("ledger", doc.get("ledger", {}), {"path", "total"})
    ledger_path = _rel_path(base, _str("ledger.path", led["path"])) if "path" in led else None
    ledger_total = _loss("ledger.total", led["total"]) if "total" in led else None
    if ledger_total is not None and not _accepts(ledger_total, budget):
        raise SpecError("ledger.total", "is of a definition that cannot be charged with [budget] "
                                        "(pure ε accepts only ε; (ε, δ) accepts ε and (ε, δ); ρ accepts ρ and ε)")

    out = _table("output", doc.get("output", {}), {"dir", "formats", "diagnostics"})
    diag_default = _diagnostics("output.diagnostics", out["diagnostics"]) if "diagnostics" in out else None
    out_dir = _rel_path(base, _str("output.dir", out["dir"])) if "dir" in out else None
    if "formats" in out:
        fl = _list("output.formats", out["formats"])
        formats = []
        for i, f in enumerate(fl):
            if f not in _FORMATS:
                raise SpecError(f"output.formats[{i}]", f"must be one of {', '.join(_FORMATS)}")
            if f in formats:
                raise SpecError(f"output.formats[{i}]", "is repeated")
            formats.append(f)
        if "parquet" in formats and not _has_pyarrow():
            raise SpecError("output.formats", "parquet needs pyarrow (pip install pyarrow)")
        fmt = tuple(formats)
    else:
        fmt = ("csv", "json", "parquet") if _has_pyarrow() else ("csv", "json")

    domain = _domain(doc.get("domain", {}), source)
    pp_default = _postprocess("postprocess", doc.get("postprocess", {}))

    qs = _list("query", doc.get("query"), min_len=1) if "query" in doc else None
    if qs is None:
        raise SpecError("query", "missing: give at least one [[query]] table")
    queries = []
    seen: set[str] = set()
    for i, q in enumerate(qs):
        qs_ = _query(f"query[{i}]", q, domain, pp_default, budget, diag_default)
        if qs_.name in seen:
            raise SpecError(f"query[{i}].name", "repeats the name of an earlier query")
        seen.add(qs_.name)
        queries.append(qs_)
    outputs: set[str] = set()
    for qs_ in queries:  # files a statistic writes into the release folder (synthetic tables)
        for st in qs_.statistics:
            file_name = st.options.get("output")
            if isinstance(file_name, str):
                if file_name.lower() in outputs:
                    raise SpecError(f"{st.path}.output", "repeats the output file of another statistic")
                outputs.add(file_name.lower())
    return Spec(file=file, sha256=sha256, name=name, description=description, source=source, dataset=dataset,
                nan_policy=nan_policy, unit=unit, budget=budget, ledger_path=ledger_path, ledger_total=ledger_total,
                out_dir=out_dir, formats=fmt, domain=domain, queries=tuple(queries), allow_known_source=allow_known)


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _domain(value: Any, source: str) -> dict[str, Any]:
    """[domain]: ``col = [categories...]`` or ``col = {bounds = [lo, hi]}``; bundled Adult's codebook as fallback."""
    t = _table("domain", value, set(value) if isinstance(value, dict) else set())
    out: dict[str, Any] = {}
    if source == "adult":
        from dpkit.datasets import adult_domain

        for col, d in adult_domain().items():
            out[col] = tuple(d["categories"]) if d["kind"] == "categorical" else {"bounds": tuple(d["bounds"])}
    for col, v in t.items():
        path = f"domain.{col}"
        if not col.isidentifier():
            raise SpecError(path, "must be a column name")
        if isinstance(v, dict):
            b = _table(path, v, {"bounds"})
            if "bounds" not in b:
                raise SpecError(f"{path}.bounds", "missing")
            out[col] = {"bounds": _bounds(f"{path}.bounds", b["bounds"], allow_private=False)}
        else:
            out[col] = _scalars(path, v)
    return out


def _bounds(path: str, value: Any, *, allow_private: bool = True) -> tuple[float, float] | None:
    if allow_private and value == "private":
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise SpecError(path, "must be [lower, upper]" + (' or "private"' if allow_private else ""))
    lo, hi = _num(f"{path}[0]", value[0]), _num(f"{path}[1]", value[1])
    if not lo < hi:
        raise SpecError(path, "lower must be < upper")
    return lo, hi


def _postprocess(path: str, value: Any) -> dict[str, bool]:
    t = _table(path, value, {"nonnegative", "round"})
    return {k: _bool(f"{path}.{k}", v) for k, v in t.items()}


def _keys_for(path: str, col: str, domain: dict[str, Any]) -> tuple[Any, ...]:
    d = domain.get(col)
    if not isinstance(d, tuple):
        raise SpecError(path, f"no public category list for column {col!r} in [domain]")
    return d


def _diagnostics(path: str, value: Any) -> float | None:
    """``diagnostics = true | false | <weight>``: the diagnostics' share of the query budget (true: weight 1)."""
    if isinstance(value, bool):
        return 1.0 if value else None
    if not isinstance(value, (int, float)):
        raise SpecError(path, "must be true, false or a positive weight")
    return _pos(path, value)


def _query(path: str, value: Any, domain: dict[str, Any], pp_default: dict[str, bool],
           budget: PrivacyLoss, diag_default: float | None = None) -> QuerySpec:
    if not isinstance(value, dict):
        raise SpecError(path, "must be a table")
    allowed = _QUERY_KEYS | (_stat_keys() if "statistics" not in value else set())
    q = _table(path, value, allowed)
    if "name" not in q:
        raise SpecError(f"{path}.name", "missing")
    name = _str(f"{path}.name", q["name"])
    if len(name) > _MAX_NAME:
        raise SpecError(f"{path}.name", "is too long")
    filt = _str(f"{path}.filter", q["filter"]) if "filter" in q else None
    derive: dict[str, str] = {}
    if "derive" in q:
        dt = q["derive"]
        if not isinstance(dt, dict):
            raise SpecError(f"{path}.derive", "must be a table of column = \"expression\"")
        for k, v in dt.items():
            derive[_ident(f"{path}.derive.{k}", k)] = _str(f"{path}.derive.{k}", v)
    group_by: tuple[str, ...] = ()
    if "group_by" in q:
        g = q["group_by"]
        cols = [g] if isinstance(g, str) else _list(f"{path}.group_by", g)
        group_by = tuple(_ident(f"{path}.group_by" + (f"[{i}]" if not isinstance(g, str) else ""), c)
                         for i, c in enumerate(cols))
        if len(set(group_by)) != len(group_by):
            raise SpecError(f"{path}.group_by", "repeats a column")
    keys: str | dict[str, tuple[Any, ...]] | None = None
    if group_by:
        kv = q.get("keys", "domain")
        kp = f"{path}.keys"
        if kv == "private":
            if not isinstance(budget, ApproxDP):
                raise SpecError(kp, '"private" keys need an (epsilon, delta) budget: set [budget] delta')
            keys = "private"
        elif kv == "domain":
            keys = {c: _keys_for(kp, c, domain) for c in group_by}
        elif isinstance(kv, list):
            if len(group_by) != 1:
                raise SpecError(kp, "a list of keys needs exactly one group_by column; "
                                    "give a table column = [keys] for several")
            keys = {group_by[0]: _scalars(kp, kv)}
        elif isinstance(kv, dict):
            kt = _table(kp, kv, set(group_by))
            keys = {}
            for c in group_by:
                keys[c] = _scalars(f"{kp}.{c}", kt[c]) if c in kt else _keys_for(f"{kp}.{c}", c, domain)
        else:
            raise SpecError(kp, 'must be "domain", "private", a list of keys, or a table column = [keys]')
    elif "keys" in q:
        raise SpecError(f"{path}.keys", "only with group_by")
    weight = _pos(f"{path}.weight", q["weight"]) if "weight" in q else 1.0
    pp = dict(pp_default)
    if "postprocess" in q:
        pp.update(_postprocess(f"{path}.postprocess", q["postprocess"]))

    if "statistics" in q:
        items = _list(f"{path}.statistics", q["statistics"])
        stats = tuple(_stat(f"{path}.statistics[{j}]", s, domain) for j, s in enumerate(items))
    elif "stat" in q:
        single = {k: v for k, v in q.items() if k in _stat_keys() and k != "weight"}
        stats = (_stat(path, single, domain),)
    else:
        raise SpecError(f"{path}.statistics", "missing: give statistics = [{stat = ...}, ...] or stat = ...")
    diag = _diagnostics(f"{path}.diagnostics", q["diagnostics"]) if "diagnostics" in q else diag_default
    return QuerySpec(name=name, path=path, statistics=stats, filter=filt, derive=derive, group_by=group_by,
                     keys=keys, weight=weight, postprocess=pp, diagnostics=diag)


def _stat(path: str, value: Any, domain: dict[str, Any]) -> StatSpec:
    if not isinstance(value, dict):
        raise SpecError(path, "must be a table {stat = ..., ...}")
    if "stat" not in value:
        raise SpecError(f"{path}.stat", f"missing (one of {', '.join(STATISTICS)})")
    kind = value["stat"]
    if kind not in STATISTICS:
        raise SpecError(f"{path}.stat", f"unknown statistic (one of {', '.join(STATISTICS)})")
    allowed = {"stat", "weight", *STATISTICS[kind]}
    for k in value:
        if k not in allowed:
            raise SpecError(f"{path}.{k}", f"not a key of statistic {kind!r} (allowed: {', '.join(sorted(allowed))})")
    kw: dict[str, Any] = {"stat": kind, "path": path}
    if "weight" in value:
        kw["weight"] = _pos(f"{path}.weight", value["weight"])
    if "column" in STATISTICS[kind]:
        if "column" not in value:
            raise SpecError(f"{path}.column", "missing")
        kw["column"] = _ident(f"{path}.column", value["column"])
    if "bounds" in STATISTICS[kind]:
        if "bounds" not in value:
            raise SpecError(f"{path}.bounds", 'missing: give [lower, upper], "domain" or "private"')
        b = value["bounds"]
        if b == "domain":
            d = domain.get(kw["column"])
            if not isinstance(d, dict):
                raise SpecError(f"{path}.bounds", f"no public bounds for column {kw['column']!r} in [domain]")
            kw["bounds"] = d["bounds"]
        else:
            kw["bounds"] = _bounds(f"{path}.bounds", b)
    from dpkit.tables.kinds import by_spec

    registered = by_spec(kind)
    assert registered is not None  # STATISTICS lists the registered kinds
    registered.parse_spec(path, value, kw, SpecReader(domain))
    return StatSpec(**kw)


class SpecReader:
    """The spec's typed readers, for a statistic kind's :meth:`~dpkit.tables.kinds.Kind.parse_spec`: each names
    the key path and raises :class:`SpecError`; ``error(path, message)`` builds one."""

    error = staticmethod(SpecError)
    table = staticmethod(_table)
    str_ = staticmethod(_str)
    ident = staticmethod(_ident)
    num = staticmethod(_num)
    pos = staticmethod(_pos)
    int_ = staticmethod(_int)
    bool_ = staticmethod(_bool)
    list_ = staticmethod(_list)
    scalars = staticmethod(_scalars)
    increasing = staticmethod(_increasing)

    def __init__(self, domain: dict[str, Any]) -> None:
        self.domain = domain

    def bounds(self, path: str, value: Any, *, allow_private: bool = True) -> tuple[float, float] | None:
        return _bounds(path, value, allow_private=allow_private)

    def keys_for(self, path: str, column: str) -> tuple[Any, ...]:
        """The public category list of ``column`` in ``[domain]``."""
        return _keys_for(path, column, self.domain)
