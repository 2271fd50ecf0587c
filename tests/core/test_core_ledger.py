"""The persistent SQLite Ledger: persistence, mismatch errors, receipts, concurrency, crash safety."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from fractions import Fraction

import pytest

from dpkit.core import (
    ZCDP,
    Accountant,
    AddRemove,
    ApproxDP,
    BudgetExceeded,
    IncompatibleLoss,
    InvalidParameter,
    Ledger,
    LedgerError,
    PrivacyUnit,
    PureDP,
    Replace,
    WrongType,
    loss_from_dict,
)

SRC = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "src")


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "ledger.sqlite")


def run_python(code: str, *args: str, stderr=subprocess.PIPE) -> subprocess.Popen:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], env=env,
                            stdout=subprocess.PIPE, stderr=stderr, text=True)


def check_consistent(path: str, dataset: str) -> Ledger:
    """Re-open, check SQLite integrity, and that spent is exactly the composition of the receipts."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT id, time, mechanism, cost, params, secure FROM receipts WHERE dataset = ?",
                            (dataset,)).fetchall()
    finally:
        conn.close()
    for rid, time, mech, cost, params, secure in rows:  # no partial row
        assert rid and time and mech and secure in (0, 1)
        loss_from_dict(json.loads(cost))
        json.loads(params)
    ledger = Ledger(path, dataset)
    total = sum((Fraction(r.cost.epsilon) for r in ledger.receipts), Fraction(0))
    assert ledger.spent == PureDP(float(total))
    assert len(ledger.receipts) == len(rows)
    return ledger


# ---------------------------------------------------------------------------------------------
# persistence and configuration


def test_persists_across_reopen(path):
    with Ledger(path, "adult", PureDP(1.0)) as ledger:
        assert isinstance(ledger, Accountant)
        ledger.charge(PureDP(0.25), mechanism="laplace", sensitivity=1.0, scale=4.0, params={"bins": 10},
                      description="age histogram", secure=True)
        ledger.charge(PureDP(0.25), mechanism="laplace", description="income")
    with Ledger(path, "adult") as again:
        assert again.budget == PureDP(1.0)
        assert again.spent == PureDP(0.5) and again.remaining == PureDP(0.5)
        r = again.receipts[0]
        assert (r.mechanism, r.cost, r.sensitivity, r.scale, r.params, r.description, r.secure) == (
            "laplace", PureDP(0.25), 1.0, 4.0, {"bins": 10}, "age histogram", True)
        assert r.accountant == "ledger:adult"
        with pytest.raises(BudgetExceeded):
            again.charge(PureDP(0.6), mechanism="laplace")
    with Ledger(path, "adult", PureDP(1.0), neighbours=AddRemove(), slack=0.0) as same:
        assert len(same.receipts) == 2
    assert Ledger.datasets(path) == ["adult"]


def test_datasets_are_independent(path):
    a = Ledger(path, "a", PureDP(1.0))
    b = Ledger(path, "b", ZCDP(0.5), neighbours=Replace())
    a.charge(PureDP(1.0), mechanism="m")
    b.charge(ZCDP(0.5), mechanism="m")
    assert Ledger.datasets(path) == ["a", "b"]
    assert Ledger(path, "b").neighbours == Replace()
    assert Ledger.datasets(os.path.join(os.path.dirname(path), "missing.sqlite")) == []
    a.close()
    b.close()


def test_first_open_needs_a_budget(path):
    with pytest.raises(LedgerError):
        Ledger(path, "new")


@pytest.mark.parametrize(("kwargs", "what"), [
    ({"budget": PureDP(2.0)}, "budget"),
    ({"budget": ApproxDP(1.0, 1e-6)}, "budget"),
    ({"neighbours": Replace()}, "neighbour"),
    ({"neighbours": PrivacyUnit("user", 3, 2)}, "neighbour"),
    ({"slack": 1e-7}, "slack"),
])
def test_mismatch_is_refused(path, kwargs, what):
    Ledger(path, "ds", ApproxDP(1.0, 1e-5), neighbours=PrivacyUnit("user", 3, 1), slack=1e-6).close()
    with pytest.raises(LedgerError) as info:
        Ledger(path, "ds", **kwargs)
    assert what in str(info.value)
    ledger = Ledger(path, "ds")
    assert ledger.neighbours == PrivacyUnit("user", 3, 1) and ledger.slack == 1e-6


def test_not_a_ledger(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not an sqlite file" * 100)
    with pytest.raises(LedgerError):
        Ledger(str(junk), "ds", PureDP(1.0))
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError):
        Ledger(str(other), "ds", PureDP(1.0))
    with pytest.raises(LedgerError):
        Ledger.datasets(str(other))
    with pytest.raises(LedgerError):
        Ledger(str(tmp_path / "no-such-dir" / "x.sqlite"), "ds", PureDP(1.0))


def test_argument_validation(path):
    with pytest.raises(WrongType) as info:
        Ledger(3, "ds", PureDP(1.0))
    assert info.value.param == "path"
    with pytest.raises(WrongType) as info:
        Ledger(path, None, PureDP(1.0))
    assert info.value.param == "dataset"
    with pytest.raises(InvalidParameter) as info:
        Ledger(path, "", PureDP(1.0))
    assert info.value.param == "dataset"
    with pytest.raises(WrongType) as info:
        Ledger(path, "ds", 1.0)
    assert info.value.param == "budget"
    with pytest.raises(InvalidParameter) as info:
        Ledger(path, "ds", PureDP(1.0), slack=1e-6)
    assert info.value.param == "slack"
    with pytest.raises(WrongType) as info:
        Ledger(path, "ds", PureDP(1.0), neighbours="add-remove")
    assert info.value.param == "neighbours"
    assert Ledger.datasets(path) == []  # nothing was created by the failures above


def test_incompatible_and_refused_charges_write_nothing(path):
    ledger = Ledger(path, "ds", ApproxDP(1.0, 1e-6))
    with pytest.raises(IncompatibleLoss):
        ledger.charge(ZCDP(0.1), mechanism="gaussian")
    ledger.charge(ApproxDP(0.9, 5e-7), mechanism="gaussian")
    with pytest.raises(BudgetExceeded):
        ledger.charge(ApproxDP(0.2, 1e-7), mechanism="gaussian")
    with pytest.raises(WrongType):
        ledger.charge(PureDP(0.01), mechanism="m", params={"x": object()})
    assert len(Ledger(path, "ds").receipts) == 1


def test_children_and_parallel_reservations_are_persisted(path):
    ledger = Ledger(path, "ds", PureDP(2.0))
    child = ledger.child(PureDP(0.5), description="exploration")
    parts = ledger.parallel(PureDP(0.5), parts=4, description="by state")
    assert isinstance(child, Accountant) and not isinstance(child, Ledger)
    child.charge(PureDP(0.5), mechanism="m")
    for p in parts:
        p.charge(PureDP(0.5), mechanism="m")
    again = Ledger(path, "ds")
    assert again.spent == PureDP(1.0)
    assert [r.mechanism for r in again.receipts] == ["sub-budget", "parallel"]
    assert again.receipts[1].params["parts"] == 4


def test_advanced_composition_in_a_ledger(path):
    ledger = Ledger(path, "ds", ApproxDP(1.0, 1e-5), slack=1e-6)
    for _ in range(150):
        ledger.charge(PureDP(0.01), mechanism="m")
    spent = Ledger(path, "ds").spent
    assert spent.delta == 1e-6 and spent.epsilon < 1.0


def test_report(path):
    ledger = Ledger(path, "adult", PureDP(1.0))
    ledger.charge(PureDP(0.3), mechanism="laplace", description="age")
    ledger.charge(PureDP(0.2), mechanism="exponential", description="median income")
    text = ledger.report()
    assert "adult" in text and path in text
    assert "laplace" in text and "median income" in text and "spent:      ε=0.5" in text


def test_closed_ledger_raises(path):
    ledger = Ledger(path, "ds", PureDP(1.0))
    ledger.close()
    with pytest.raises(LedgerError):
        ledger.charge(PureDP(0.1), mechanism="m")
    with pytest.raises(LedgerError):
        _ = ledger.spent


def test_two_handles_in_one_process_share_the_budget(path):
    a = Ledger(path, "ds", PureDP(7.5))
    b = Ledger(path, "ds")
    ok = [0, 0]

    def work(i, ledger):
        for _ in range(50):
            try:
                ledger.charge(PureDP(0.125), mechanism="m")
                ok[i] += 1
            except BudgetExceeded:
                pass

    threads = [threading.Thread(target=work, args=(i, h)) for i, h in enumerate((a, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(ok) == 60
    assert a.spent == b.spent == PureDP(7.5)


# ---------------------------------------------------------------------------------------------
# several processes; crashes


def test_processes_charging_concurrently_never_overspend(path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(__file__))
    import _core_ledger_workers as workers

    Ledger(path, "shared", PureDP(7.5)).close()  # allows exactly 60 charges of 0.125
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=workers.charge_many, args=(path, "shared", w, 50, 0.125, barrier, results))
             for w in range(4)]
    for p in procs:
        p.start()
    got = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    ledger = check_consistent(path, "shared")
    assert sum(got.values()) == 60 == len(ledger.receipts)
    assert ledger.spent == PureDP(7.5)
    per_worker = {w: sum(1 for r in ledger.receipts if r.params["worker"] == w) for w in range(4)}
    assert per_worker == got


def test_crash_inside_the_transaction_leaves_a_consistent_ledger(path):
    Ledger(path, "ds", PureDP(10.0)).close()
    child = run_python("""
        import os, sys
        from dpkit.core import Ledger, PureDP
        import dpkit.core.ledger as ledger_module
        ledger = Ledger(sys.argv[1], "ds")
        for _ in range(3):
            ledger.charge(PureDP(0.5), mechanism="laplace")
        ledger_module._TEST_HOOK = lambda stage: os._exit(17)   # dies after INSERT, before COMMIT
        ledger.charge(PureDP(0.5), mechanism="laplace")
        print("released")  # never reached
    """, path)
    out, err = child.communicate(timeout=120)
    assert child.returncode == 17, err
    assert "released" not in out
    ledger = check_consistent(path, "ds")
    assert len(ledger.receipts) == 3 and ledger.spent == PureDP(1.5)
    ledger.charge(PureDP(0.5), mechanism="laplace")  # the dead process left no lock behind
    assert len(Ledger(path, "ds").receipts) == 4


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_while_charging_leaves_a_consistent_ledger(path):
    Ledger(path, "ds", PureDP(1e6)).close()
    child = run_python("""
        import sys
        from dpkit.core import Ledger, PureDP
        ledger = Ledger(sys.argv[1], "ds")
        while True:
            ledger.charge(PureDP(0.001), mechanism="laplace", params={"pad": "x" * 2000})
            print("ok", flush=True)
    """, path, stderr=subprocess.DEVNULL)
    seen = 0
    while seen < 30:
        line = child.stdout.readline()
        assert line, "the charging process died early"
        seen += line.startswith("ok")
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    rest = child.stdout.read()  # includes what the reader had already buffered
    child.stdout.close()
    printed = seen + rest.count("ok")
    assert child.returncode == -signal.SIGKILL
    ledger = check_consistent(path, "ds")
    # every printed charge was committed before it was printed; at most one more committed unprinted
    n = len(ledger.receipts)
    assert printed <= n <= printed + 1
    ledger.charge(PureDP(0.001), mechanism="laplace")
    assert len(Ledger(path, "ds").receipts) == n + 1


# ---------------------------------------------------------------------------------------------
# issue #11: the file alone is complete, read-only opens, source fingerprints, the default location


def test_the_ledger_file_alone_holds_every_committed_charge(tmp_path):
    """Copying only ledger.sqlite (no side file) while the writer is still open -- a crash before any
    checkpoint -- must not hand budget back (in WAL mode the receipt lived only in ledger.sqlite-wal)."""
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path, "ds", PureDP(1.0))
    ledger.charge(PureDP(0.75), mechanism="laplace")
    copy = tmp_path / "copy" / "ledger.sqlite"
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())  # the main file only, the writer still open
    assert sorted(os.listdir(tmp_path)) == ["copy", "ledger.sqlite"]  # no -wal / -journal after the commit
    with Ledger(copy, "ds") as restored:
        assert restored.spent == PureDP(0.75) and len(restored.receipts) == 1
        with pytest.raises(BudgetExceeded):
            restored.charge(PureDP(0.5), mechanism="laplace")
    ledger.close()


def test_a_wal_ledger_is_checkpointed_and_converted_on_first_write_open(tmp_path):
    path = str(tmp_path / "old.sqlite")
    Ledger(path, "ds", PureDP(1.0)).close()
    conn = sqlite3.connect(path)  # as an older dpkit left it: WAL mode, the newest receipt only in the -wal file
    assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    conn.close()
    with Ledger(path, "ds") as old:
        assert old._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # converted already
        old.charge(PureDP(0.5), mechanism="laplace")
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(open(path, "rb").read())
    assert Ledger(copy, "ds", readonly=True).spent == PureDP(0.5)
    assert not os.path.exists(path + "-wal")


def _snapshot(folder):
    return {n: (os.stat(os.path.join(folder, n)).st_mtime_ns, open(os.path.join(folder, n), "rb").read())
            for n in sorted(os.listdir(folder))}


def test_readonly_open_reads_and_writes_nothing(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    with Ledger(path, "ds", PureDP(2.0)) as led:
        led.charge(PureDP(0.5), mechanism="laplace")
        led.register_source("sha256:" + "ab" * 32, "csv")
    before = _snapshot(tmp_path)
    with Ledger(path, "ds", readonly=True) as ro:
        assert ro.readonly and ro.spent == PureDP(0.5) and ro.budget == PureDP(2.0) and len(ro.receipts) == 1
        with pytest.raises(LedgerError):
            ro.charge(PureDP(0.1), mechanism="laplace")
        assert ro.spent == PureDP(0.5)
    assert Ledger.datasets(path) == ["ds"]
    assert Ledger.source_datasets(path, "sha256:" + "ab" * 32) == ["ds"]
    assert _snapshot(tmp_path) == before  # same files (no -journal/-wal), same bytes, same mtimes
    with pytest.raises(LedgerError):
        Ledger(path, "other", PureDP(1.0), readonly=True)  # a read-only open never creates a dataset
    with pytest.raises(LedgerError):
        Ledger(tmp_path / "missing.sqlite", "ds", readonly=True)
    assert _snapshot(tmp_path) == before


def test_source_fingerprints_are_recorded_per_dataset(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    fp, fp2 = "sha256:" + "11" * 32, "sha256:" + "22" * 32
    assert Ledger.source_datasets(path, fp) == [] and not os.path.exists(path)
    with Ledger(path, "adult", PureDP(1.0)) as a:
        assert a.register_source(fp, "csv") is True
        assert a.register_source(fp, "csv") is False  # idempotent
        assert a.register_source(fp2, "csv") is True  # the same dataset with updated bytes
        assert [s[:2] for s in a.sources()] == [(fp, "csv"), (fp2, "csv")]
    with Ledger(path, "renamed", PureDP(1.0)) as b:
        with pytest.raises(LedgerError, match="'adult'"):
            b.register_source(fp, "csv")
        assert b.sources() == []
        assert b.register_source(fp, "csv", allow_known=True) is True
        with pytest.raises(WrongType):
            b.register_source(b"x", "csv")  # type: ignore[arg-type]
        with pytest.raises(InvalidParameter):
            b.register_source(fp, "")
    assert Ledger.source_datasets(path, fp) == ["adult", "renamed"]
    assert Ledger.source_datasets(path, fp2) == ["adult"]


def test_an_old_ledger_without_sources_is_upgraded_in_place(tmp_path):
    path = str(tmp_path / "v1.sqlite")
    with Ledger(path, "ds", PureDP(1.0)) as led:
        led.charge(PureDP(0.25), mechanism="laplace")
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE sources")  # a ledger written before source fingerprints existed
    conn.commit()
    conn.close()
    assert Ledger.source_datasets(path, "sha256:00") == []  # read-only: no upgrade, no error
    with Ledger(path, "ds", readonly=True) as ro:
        assert ro.sources() == [] and ro.spent == PureDP(0.25)
    with Ledger(path, "ds") as led:  # the first write-open upgrades it
        assert led.register_source("sha256:00", "csv") and led.spent == PureDP(0.25)
    assert Ledger.source_datasets(path, "sha256:00") == ["ds"]


def test_file_fingerprint_streams_the_bytes(tmp_path):
    import hashlib

    from dpkit.core.ledger import file_fingerprint

    p = tmp_path / "data.csv"
    data = os.urandom(3 * (1 << 20) + 17)  # several 1 MiB chunks
    p.write_bytes(data)
    assert file_fingerprint(p) == "sha256:" + hashlib.sha256(data).hexdigest()
    p.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert file_fingerprint(p) != "sha256:" + hashlib.sha256(data).hexdigest()
    with pytest.raises(LedgerError):
        file_fingerprint(tmp_path / "missing.csv")


@pytest.mark.parametrize(("environ", "platform", "expected"), [
    ({"HOME": "/h"}, "linux", "/h/.local/share/dpkit/ledger.sqlite"),
    ({"HOME": "/h", "XDG_DATA_HOME": "/x"}, "linux", "/x/dpkit/ledger.sqlite"),
    ({"HOME": "/h", "XDG_DATA_HOME": "rel"}, "linux", "/h/.local/share/dpkit/ledger.sqlite"),
    ({"HOME": "/h", "XDG_DATA_HOME": "/x", "DPKIT_LEDGER": "/l/b.sqlite"}, "linux", "/l/b.sqlite"),
    ({"HOME": "/h"}, "darwin", "/h/Library/Application Support/dpkit/ledger.sqlite"),
    ({"HOME": "/h", "LOCALAPPDATA": "/w/Local"}, "win32", "/w/Local/dpkit/ledger.sqlite"),
])
def test_default_ledger_path_per_platform(environ, platform, expected):
    from pathlib import Path

    from dpkit.core.ledger import _default_ledger_path

    assert _default_ledger_path(environ, platform) == Path(expected)


def test_default_ledger_path_is_public_and_follows_the_environment(tmp_path, monkeypatch):
    from dpkit.core import default_ledger_path

    monkeypatch.delenv("DPKIT_LEDGER", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert default_ledger_path() == tmp_path / "xdg" / "dpkit" / "ledger.sqlite"
    monkeypatch.setenv("DPKIT_LEDGER", str(tmp_path / "mine.sqlite"))
    assert default_ledger_path() == tmp_path / "mine.sqlite"
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "mine.sqlite").exists()  # nothing created
