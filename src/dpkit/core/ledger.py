"""A persistent privacy ledger: an :class:`~dpkit.core.accountant.Accountant` stored in SQLite.

A dataset's budget must hold across sessions, processes and restarts, otherwise an analyst
can reset it by restarting Python. :class:`Ledger` keeps, per dataset, the budget, the
neighbour relation and the slack, and one row per charge (the receipt). The spent loss is
always recomputed from the receipts (append-only; the running totals are cached per process
and extended with the rows appended since), so "spent" and "the receipts" cannot disagree.

Where the ledger lives
----------------------
A budget belongs to the data, not to an output folder: :func:`default_ledger_path` gives one ledger per
user (``$DPKIT_LEDGER``, else the per-user data directory). Each dataset records the fingerprints of the
sources released from it (table ``sources``), so the same bytes released under a new dataset name can be
detected (:meth:`Ledger.source_datasets`, :meth:`Ledger.register_source`). Keep the file on a local disk:
SQLite's locks and ``fsync`` are unreliable on network file systems (NFS, SMB), where two writers could
both pass the budget check.

Concurrency and crash safety
----------------------------
- The database uses the rollback journal (``journal_mode=DELETE``) with ``synchronous=FULL`` and a long
  busy timeout, so after every commit the ledger file *alone* holds every receipt (with WAL the newest
  receipts could live only in ``ledger.sqlite-wal``, and a copy of the main file would hand budget back).
  A ledger written in WAL mode by an older dpkit is checkpointed and converted on its first write-open.
- Read-only uses (:meth:`Ledger.datasets`, :meth:`Ledger.source_datasets`, ``Ledger(..., readonly=True)``)
  open the file with ``mode=ro``: no file is created, nothing is written, no journal is converted.
- A charge is one ``BEGIN IMMEDIATE`` transaction: it takes the database's write lock,
  reads the receipts appended since this process last looked, composes, checks the
  budget, inserts the receipt and commits. Two processes (or two ``Ledger`` objects) can
  therefore never both pass the check on the same spent value, and nothing can overspend.
- :meth:`Ledger.charge` returns only after the commit, so a mechanism draws its noise and
  releases only after the charge is durable. A crash at any point either rolls the whole
  transaction back (no receipt, no release) or happens after the commit (a receipt with
  perhaps no release: the budget is spent in vain, never overspent). No partial row can exist.

One ``Ledger`` object may be shared by threads (its connection is used under a lock);
open a separate ``Ledger`` in each process (never share one across ``fork``).

Sub-budgets (:meth:`~dpkit.core.accountant.Accountant.child`) and parallel parts are
in-memory accountants whose reservation is a persisted receipt on the ledger.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sqlite3
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from dpkit.core import _validate as check
from dpkit.core.accountant import (
    Accountant,
    Receipt,
    _Tally,
    _utc_now,
    _validate_budget,
    _validate_slack,
    loss_from_dict,
    loss_to_dict,
)
from dpkit.core.errors import DPKitError, InvalidParameter, LedgerError, WrongType
from dpkit.core.neighbours import AddRemove, Neighbours, neighbours_from_dict, validate_neighbours
from dpkit.core.privacy import PrivacyLoss

__all__ = ["Ledger", "default_ledger_path", "file_fingerprint"]

_FORMAT = "dpkit-ledger"
_VERSION = 1
_BUSY_TIMEOUT_S = 120.0

#: Test hook only: when set, called with a stage name inside the charge transaction
#: (``"before_commit"``, after the receipt row is inserted and before COMMIT).
_TEST_HOOK: Callable[[str], None] | None = None

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS dpkit_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS datasets (dataset TEXT PRIMARY KEY, budget TEXT NOT NULL, "
    "neighbours TEXT NOT NULL, slack REAL NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS receipts (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
    "dataset TEXT NOT NULL REFERENCES datasets(dataset), time TEXT NOT NULL, mechanism TEXT NOT NULL, "
    "cost TEXT NOT NULL, sensitivity REAL, scale REAL, params TEXT NOT NULL, description TEXT NOT NULL, "
    "secure INTEGER NOT NULL, accountant TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS receipts_by_dataset ON receipts (dataset, seq)",
    # added after version 1 shipped: older ledgers get it on their next write-open (same format version)
    "CREATE TABLE IF NOT EXISTS sources (fingerprint TEXT NOT NULL, dataset TEXT NOT NULL "
    "REFERENCES datasets(dataset), kind TEXT NOT NULL, first_seen TEXT NOT NULL, PRIMARY KEY (fingerprint, dataset))",
)
_CHUNK = 1 << 20


def default_ledger_path() -> Path:
    """The ledger a release uses when neither ``--ledger`` nor the spec's ``[ledger] path`` names one.

    ``$DPKIT_LEDGER`` if set, else one per-user ledger: ``$XDG_DATA_HOME/dpkit/ledger.sqlite`` (default
    ``~/.local/share/dpkit/ledger.sqlite``) on Linux and other POSIX systems,
    ``~/Library/Application Support/dpkit/ledger.sqlite`` on macOS and ``%LOCALAPPDATA%\\dpkit\\ledger.sqlite``
    on Windows. Nothing is created here.
    """
    return _default_ledger_path(os.environ, sys.platform)


def _default_ledger_path(environ: Mapping[str, str], platform: str) -> Path:
    explicit = environ.get("DPKIT_LEDGER", "")
    if explicit:
        return Path(os.path.expanduser(explicit))
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    if platform.startswith("win"):
        local = environ.get("LOCALAPPDATA", "")
        base = Path(local) if local else home / "AppData" / "Local"
    elif platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        xdg = environ.get("XDG_DATA_HOME", "")
        base = Path(xdg) if xdg and os.path.isabs(xdg) else home / ".local" / "share"  # XDG: relative is ignored
    return base / "dpkit" / "ledger.sqlite"


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """``"sha256:<hex>"`` of the file's bytes (read in 1 MiB chunks): the identity of a source file.

    Raises :class:`LedgerError` if the file cannot be read (the message names no content).
    """
    p = _path(path)
    h = hashlib.sha256()
    try:
        with open(p, "rb") as fh:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    except OSError as exc:
        raise LedgerError(f"cannot read the source file to fingerprint it ({exc.strerror or 'error'})") from None
    return "sha256:" + h.hexdigest()

_COLUMNS = "seq, id, time, mechanism, cost, sensitivity, scale, params, description, secure, accountant"


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, allow_nan=False)


def _path(path: Any) -> str:
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise WrongType("path", "a file path (str or os.PathLike)")
    p = os.fspath(path)
    if not isinstance(p, str) or not p:
        raise WrongType("path", "a non-empty file path")
    return p


def _connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection to the ledger file. Write mode uses the rollback journal (a WAL ledger is checkpointed and
    converted here); ``readonly`` opens ``file:PATH?mode=ro`` (no file created, no PRAGMA that writes)."""
    try:
        if readonly:
            uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
            conn = sqlite3.connect(uri, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
        else:
            conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise LedgerError("cannot open the ledger file" + (" read-only" if readonly else "")) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
        if readonly:
            conn.execute("PRAGMA query_only = ON")  # per connection; writes nothing to the file
        else:
            try:
                mode = conn.execute("PRAGMA journal_mode = DELETE").fetchone()
            except sqlite3.OperationalError as exc:
                if "lock" not in str(exc):
                    raise
                mode = None
            if mode is None or str(mode[0]).lower() != "delete":
                conn.close()
                raise LedgerError("the ledger is in WAL mode and another process holds it open; it is converted to "
                                  "the rollback journal on first use: retry when the other process has finished")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.Error as exc:
        conn.close()
        raise LedgerError("the file is not a usable SQLite database") from exc
    return conn


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:  # pragma: no cover - the transaction is gone with the connection
        pass


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection, failure: str) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction (the database's write lock is held throughout).

    Any exception in the body rolls the whole transaction back; SQLite errors become a
    :class:`LedgerError` with the message ``failure``; dpkit errors pass through unchanged.
    """
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
    except DPKitError:
        raise
    except (sqlite3.Error, ValueError) as exc:
        raise LedgerError(failure) from exc


def _stored(row: Any, budget: PrivacyLoss | None, neighbours: Neighbours | None,
            slack: float | None) -> tuple[PrivacyLoss, Neighbours, float]:
    stored_budget = loss_from_dict(json.loads(row[0]))
    stored_neighbours = neighbours_from_dict(json.loads(row[1]))
    stored_slack = float(row[2])
    if budget is not None and budget != stored_budget:
        raise LedgerError("a different budget is recorded for this dataset; "
                          "a dataset's budget cannot be changed by reopening")
    if neighbours is not None and neighbours != stored_neighbours:
        raise LedgerError("a different neighbour relation is recorded for this dataset")
    if slack is not None and slack != stored_slack:
        raise LedgerError("a different slack is recorded for this dataset")
    return stored_budget, stored_neighbours, stored_slack


def _dataset_row(conn: sqlite3.Connection, dataset: str) -> Any:
    """Check the file's format and version marks, then the dataset's stored (budget, neighbours, slack) or None."""
    meta = dict(conn.execute("SELECT key, value FROM dpkit_meta").fetchall())
    if meta.get("format") != _FORMAT:
        raise LedgerError("the file is not a dpkit ledger")
    if meta.get("version") != str(_VERSION):
        raise LedgerError("the ledger was written by an incompatible dpkit version")
    return conn.execute("SELECT budget, neighbours, slack FROM datasets WHERE dataset = ?", (dataset,)).fetchone()


def _short_text(name: str, value: Any, limit: int, expected: str = "a string") -> str:
    """A non-empty string of at most ``limit`` characters (a source fingerprint or kind)."""
    if not isinstance(value, str):
        raise WrongType(name, expected)
    if not value or len(value) > limit:
        raise InvalidParameter(name, f"must be a non-empty string of at most {limit} characters")
    return value


def _fingerprint(value: Any) -> str:
    return _short_text("fingerprint", value, 200, "a string such as 'sha256:<hex>'")


def _kind(value: Any) -> str:
    return _short_text("kind", value, 100)


class _SQLiteStore:
    """Receipts of one dataset in an SQLite ledger; ``append_checked`` is one BEGIN IMMEDIATE transaction."""

    def __init__(self, conn: sqlite3.Connection, dataset: str) -> None:
        self._conn = conn
        self._dataset = dataset
        self._lock = threading.Lock()
        self._seen = 0
        self._tally = _Tally()

    def _refresh_locked(self) -> None:
        rows = self._conn.execute("SELECT seq, cost FROM receipts WHERE dataset = ? AND seq > ? ORDER BY seq",
                                  (self._dataset, self._seen)).fetchall()
        t = self._tally
        for seq, cost in rows:
            t = t.add(loss_from_dict(json.loads(cost)))
            self._seen = seq
        self._tally = t

    def append_checked(self, receipt: Receipt,
                       check_fits: Callable[[_Tally, PrivacyLoss, _Tally], None]) -> Receipt:
        with self._lock:
            conn = self._conn
            with _immediate(conn, "the charge could not be recorded; nothing was charged"):
                self._refresh_locked()
                new = self._tally.add(receipt.cost)
                check_fits(new, receipt.cost, self._tally)
                receipt = dataclasses.replace(receipt, time=_utc_now())
                cur = conn.execute(
                    "INSERT INTO receipts (id, dataset, time, mechanism, cost, sensitivity, scale, params, "
                    "description, secure, accountant) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (receipt.id, self._dataset, receipt.time, receipt.mechanism, _dumps(loss_to_dict(receipt.cost)),
                     receipt.sensitivity, receipt.scale, _dumps(receipt.params), receipt.description,
                     int(receipt.secure), receipt.accountant))
                if _TEST_HOOK is not None:
                    _TEST_HOOK("before_commit")
            self._tally, self._seen = new, int(cur.lastrowid or 0)
            return receipt

    def tally(self) -> _Tally:
        with self._lock:
            try:
                self._refresh_locked()
            except (sqlite3.Error, ValueError) as exc:
                raise LedgerError("cannot read the ledger") from exc
            return self._tally

    def receipts(self) -> tuple[Receipt, ...]:
        with self._lock:
            try:
                rows = self._conn.execute(f"SELECT {_COLUMNS} FROM receipts WHERE dataset = ? ORDER BY seq",
                                          (self._dataset,)).fetchall()
            except (sqlite3.Error, ValueError) as exc:
                raise LedgerError("cannot read the ledger") from exc
        return tuple(
            Receipt(id=rid, time=time, mechanism=mech, cost=loss_from_dict(json.loads(cost)), sensitivity=sens,
                    scale=scale, params=json.loads(params), description=desc, secure=bool(secure), accountant=acc)
            for _seq, rid, time, mech, cost, sens, scale, params, desc, secure, acc in rows)

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Ledger(Accountant):
    """An accountant persisted to the SQLite file ``path``, keyed by ``dataset``.

    The first open of a dataset must give ``budget``; it records the budget, the neighbour
    relation (default :class:`~dpkit.core.neighbours.AddRemove`) and the slack (default 0).
    Later opens may omit them (they are read from the file); anything given that differs from
    the record raises :class:`~dpkit.core.errors.LedgerError` (a dataset's budget cannot be
    changed or reset by reopening).

    Every charge writes its receipt — time, mechanism, params, sensitivity, noise scale,
    cost (JSON, e.g. ``{"type": "PureDP", "epsilon": 0.5}``), description, secure — in the
    same transaction as the budget check, committed before :meth:`charge` returns.

    ``readonly=True`` opens an existing ledger with ``mode=ro`` to read budgets and receipts (the dataset must
    exist; nothing is created, converted or written; a charge raises :class:`~dpkit.core.errors.LedgerError`).
    """

    def __init__(self, path: str | os.PathLike[str], dataset: str, budget: PrivacyLoss | None = None, *,
                 neighbours: Neighbours | None = None, slack: float | None = None, readonly: bool = False) -> None:
        path = _path(path)
        if not isinstance(dataset, str):
            raise WrongType("dataset", "a string")
        if not dataset:
            raise InvalidParameter("dataset", "must not be empty")
        if budget is not None:
            budget = _validate_budget(budget)
        if neighbours is not None:
            neighbours = validate_neighbours(neighbours)
        if slack is not None:
            slack = check.nonnegative("slack", slack)
            if budget is not None:
                _validate_slack(slack, budget)
        if not isinstance(readonly, bool):
            raise WrongType("readonly", "a bool")
        if readonly and not os.path.isfile(path):
            raise LedgerError("no ledger file at this path (a read-only open creates none)")
        conn = _connect(path, readonly=readonly)
        try:
            if readonly:
                budget, neighbours, slack = self._open_readonly(conn, dataset, budget, neighbours, slack)
            else:
                budget, neighbours, slack = self._open(conn, dataset, budget, neighbours, slack)
        except BaseException:
            conn.close()
            raise
        super().__init__(budget, neighbours=neighbours, slack=slack, name=f"ledger:{dataset}")
        self._path = path
        self._dataset = dataset
        self._readonly = readonly
        self._conn = conn
        self._store = _SQLiteStore(conn, dataset)

    @staticmethod
    def _open(conn: sqlite3.Connection, dataset: str, budget: PrivacyLoss | None, neighbours: Neighbours | None,
              slack: float | None) -> tuple[PrivacyLoss, Neighbours, float]:
        with _immediate(conn, "cannot open the ledger"):
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if tables and "dpkit_meta" not in tables:
                raise LedgerError("the file is an SQLite database but not a dpkit ledger")
            for stmt in _SCHEMA:
                conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO dpkit_meta VALUES ('format', ?)", (_FORMAT,))
            conn.execute("INSERT OR IGNORE INTO dpkit_meta VALUES ('version', ?)", (str(_VERSION),))
            row = _dataset_row(conn, dataset)
            if row is None:
                if budget is None:
                    raise LedgerError("the dataset is not in this ledger; give a budget to create it")
                neighbours = neighbours if neighbours is not None else AddRemove()
                slack = _validate_slack(0.0 if slack is None else slack, budget)
                conn.execute("INSERT INTO datasets VALUES (?, ?, ?, ?, ?)",
                             (dataset, _dumps(loss_to_dict(budget)), _dumps(neighbours.to_dict()), slack,
                              _utc_now()))
            else:
                budget, neighbours, slack = _stored(row, budget, neighbours, slack)
        return budget, neighbours, slack

    @staticmethod
    def _open_readonly(conn: sqlite3.Connection, dataset: str, budget: PrivacyLoss | None,
                       neighbours: Neighbours | None, slack: float | None) -> tuple[PrivacyLoss, Neighbours, float]:
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"dpkit_meta", "datasets", "receipts"} <= tables:
                raise LedgerError("the file is not a dpkit ledger")
            row = _dataset_row(conn, dataset)
        except sqlite3.Error as exc:
            raise LedgerError("cannot read the ledger") from exc
        if row is None:
            raise LedgerError("the dataset is not in this ledger (a read-only open creates nothing)")
        return _stored(row, budget, neighbours, slack)

    @property
    def path(self) -> str:
        return self._path

    @property
    def dataset(self) -> str:
        return self._dataset

    @staticmethod
    def datasets(path: str | os.PathLike[str]) -> list[str]:
        """The datasets recorded in the ledger file ``path`` (sorted; [] if the file does not exist)."""
        path = _path(path)
        if not os.path.exists(path):
            return []
        conn = _connect(path, readonly=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                return []
            if "datasets" not in tables or "dpkit_meta" not in tables:
                raise LedgerError("the file is an SQLite database but not a dpkit ledger")
            return [r[0] for r in conn.execute("SELECT dataset FROM datasets ORDER BY dataset")]
        except sqlite3.Error as exc:
            raise LedgerError("the file is not a dpkit ledger") from exc
        finally:
            conn.close()

    @staticmethod
    def source_datasets(path: str | os.PathLike[str], fingerprint: str) -> list[str]:
        """The datasets of the ledger file ``path`` that registered the source ``fingerprint`` (sorted; read-only:
        [] if the file does not exist or predates source fingerprints)."""
        path = _path(path)
        fingerprint = _fingerprint(fingerprint)
        if not os.path.exists(path):
            return []
        conn = _connect(path, readonly=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "sources" not in tables:
                return []
            return [r[0] for r in conn.execute("SELECT dataset FROM sources WHERE fingerprint = ? ORDER BY dataset",
                                               (fingerprint,))]
        except sqlite3.Error as exc:
            raise LedgerError("the file is not a dpkit ledger") from exc
        finally:
            conn.close()

    def register_source(self, fingerprint: str, kind: str, *, allow_known: bool = False) -> bool:
        """Record that this dataset releases from the source ``fingerprint`` (``kind``: "csv", "parquet",
        "bundled:adult", ...). Returns True if it was not yet recorded for this dataset.

        In one write transaction: if another dataset registered the same fingerprint, raises
        :class:`LedgerError` naming it (the same data under a new name would get a fresh budget) unless
        ``allow_known`` (a different population with identical bytes; the caller records that choice).
        """
        fingerprint = _fingerprint(fingerprint)
        kind = _kind(kind)
        if not isinstance(allow_known, bool):
            raise WrongType("allow_known", "a bool")
        conn = self._conn
        with self._store._lock, _immediate(conn, "the source could not be recorded"):
            others = [r[0] for r in conn.execute(
                "SELECT dataset FROM sources WHERE fingerprint = ? AND dataset != ? ORDER BY dataset",
                (fingerprint, self._dataset))]
            if others and not allow_known:
                raise LedgerError(f"this source's contents are already registered under dataset {others[0]!r}, "
                                  f"not {self._dataset!r}")
            cur = conn.execute("INSERT OR IGNORE INTO sources VALUES (?, ?, ?, ?)",
                               (fingerprint, self._dataset, kind, _utc_now()))
            return cur.rowcount == 1

    def sources(self) -> list[tuple[str, str, str]]:
        """This dataset's registered sources: (fingerprint, kind, first_seen) in registration order."""
        with self._store._lock:
            try:
                tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if "sources" not in tables:
                    return []
                return [tuple(r) for r in self._conn.execute(
                    "SELECT fingerprint, kind, first_seen FROM sources WHERE dataset = ? ORDER BY first_seen, rowid",
                    (self._dataset,))]
            except (sqlite3.Error, ValueError) as exc:
                raise LedgerError("cannot read the ledger") from exc

    @property
    def readonly(self) -> bool:
        return self._readonly

    def report(self) -> str:
        return f"ledger {self._path} — dataset {self._dataset!r}\n" + super().report()

    def close(self) -> None:
        """Close the database connection (further use raises LedgerError)."""
        self._store.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
