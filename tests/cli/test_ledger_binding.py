"""Issue #11 in the CLI: a budget no option can reset, outputs that are never overwritten, nothing charged for
a release that cannot finish, read-only commands that write nothing, no exception text but dpkit's."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests.cli.fakes import ADULT_SPEC, FakeEngine

from dpkit.cli import main, output
from dpkit.core.ledger import Ledger
from dpkit.core.privacy import PureDP

ROOT = Path(__file__).resolve().parents[2]
SECRET = "Original Line: 24,Local-gov,SENTINEL-7f3a"


def _spec(folder: Path, text: str = ADULT_SPEC, name: str = "spec.toml") -> Path:
    p = folder / name
    p.write_text(text)
    return p


def _run(*argv: str, engine: FakeEngine | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), engine=engine or FakeEngine(), stdout=out, stderr=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _spent(path: Path, dataset: str = "uci-adult") -> list:
    if not path.exists() or dataset not in Ledger.datasets(path):
        return []
    with Ledger(path, dataset, readonly=True) as led:
        return [r.cost for r in led.receipts]


def _with_total(text: str, total: float) -> str:
    return text.replace("[budget]\nepsilon = 1.0",
                        f"[budget]\nepsilon = 1.0\n[ledger]\ntotal = {{ epsilon = {total} }}")


CSV_SPEC = """
name = "people"
[data]
source = "people.csv"
dataset = "{dataset}"
{extra}
[budget]
epsilon = 1.0
[ledger]
total = {{ epsilon = 3.0 }}
[[query]]
name = "n"
stat = "count"
"""


# ----------------------------------------------------------------------------------------------
# 1. the ledger is bound to the data, not to the output folder


def test_another_out_folder_does_not_reset_the_budget(tmp_path: Path, private_default_ledger: Path) -> None:
    spec = _spec(tmp_path)  # budget ε=1 is the whole lifetime budget
    assert _run("release", str(spec), "--out", str(tmp_path / "first"), "--yes")[0] == 0
    engine = FakeEngine()
    code, _, err = _run("release", str(spec), "--out", str(tmp_path / "other"), "--yes", engine=engine)
    assert code == 3 and "budget exceeded" in err and str(private_default_ledger.resolve()) in err
    assert engine.opened == 0 and not (tmp_path / "other").exists()
    assert _spent(private_default_ledger) == [PureDP(1.0)]


def test_ledger_precedence_option_spec_env_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                private_default_ledger: Path) -> None:
    def ledger_of(out: Path) -> str:
        return json.loads((out / "receipts.json").read_text())["ledger"]["path"]

    spec = _spec(tmp_path)
    # $DPKIT_LEDGER (set by conftest)
    assert _run("release", str(spec), "--out", str(tmp_path / "o1"), "--yes")[0] == 0
    assert ledger_of(tmp_path / "o1") == str(private_default_ledger.resolve())
    # --ledger beats everything
    opt = tmp_path / "opt" / "l.sqlite"
    assert _run("release", str(spec), "--out", str(tmp_path / "o2"), "--yes", "--ledger", str(opt))[0] == 0
    assert ledger_of(tmp_path / "o2") == str(opt.resolve())
    # the spec's [ledger] path beats $DPKIT_LEDGER (relative to the spec's folder)
    in_spec = _spec(tmp_path, ADULT_SPEC.replace("[budget]", '[ledger]\npath = "spec-ledger.sqlite"\n[budget]'),
                    "s2.toml")
    assert _run("release", str(in_spec), "--out", str(tmp_path / "o3"), "--yes")[0] == 0
    assert ledger_of(tmp_path / "o3") == str((tmp_path / "spec-ledger.sqlite").resolve())
    # without $DPKIT_LEDGER: the per-user ledger under $XDG_DATA_HOME
    monkeypatch.delenv("DPKIT_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    code, stdout, err = _run("release", str(spec), "--out", str(tmp_path / "o4"), "--yes")
    user = tmp_path / "xdg" / "dpkit" / "ledger.sqlite"
    assert code == 0 and user.is_file() and ledger_of(tmp_path / "o4") == str(user.resolve())
    assert "created a new ledger file" in err and f"new dataset 'uci-adult' in ledger {user.resolve()}" in err
    assert f"ledger {user.resolve()}:" in stdout
    assert str(user.resolve()) in (tmp_path / "o4" / "report.html").read_text()
    # each ledger above holds exactly one release: no option shared or reset another's budget
    for path in (private_default_ledger, opt, tmp_path / "spec-ledger.sqlite", user):
        assert _spent(path) == [PureDP(1.0)]
    # and ledger show reads the same default
    code, shown, _ = _run("ledger", "show")
    assert code == 0 and f"ledger {user}" in shown and "spent:      ε=1" in shown


def test_ledger_show_default_is_the_env_ledger(tmp_path: Path, private_default_ledger: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run("release", str(_spec(tmp_path)), "--out", str(tmp_path / "o"), "--yes")[0] == 0
    code, shown, err = _run("ledger", "show")
    assert code == 0, err
    assert f"ledger {private_default_ledger}" in shown and "spent:      ε=1" in shown
    assert "source:     sha256:" in shown and "bundled:adult" in shown


# ----------------------------------------------------------------------------------------------
# 2. the source fingerprint


def test_same_bytes_under_a_new_dataset_name_are_refused(tmp_path: Path, private_default_ledger: Path) -> None:
    (tmp_path / "people.csv").write_text("age,sex\n30,F\n40,M\n")
    a = _spec(tmp_path, CSV_SPEC.format(dataset="people", extra=""), "a.toml")
    code, _, err = _run("release", str(a), "--out", str(tmp_path / "a"), "--yes")
    assert code == 0 and "new dataset 'people'" in err
    # the same bytes in another file, released as a new dataset: a fresh budget for the same data -> refused
    shutil.copy(tmp_path / "people.csv", tmp_path / "copy.csv")
    b = _spec(tmp_path, CSV_SPEC.format(dataset="people-again", extra="").replace("people.csv", "copy.csv"), "b.toml")
    engine = FakeEngine()
    code, _, err = _run("release", str(b), "--out", str(tmp_path / "b"), "--yes", engine=engine)
    assert code == 4, err
    assert "'people'" in err and "'people-again'" in err and "allow_known_source = true" in err
    assert "[data] dataset = 'people'" in err and "nothing was spent" in err
    assert engine.released == [] and not (tmp_path / "b").exists()
    assert Ledger.datasets(private_default_ledger) == ["people"]  # no dataset created, nothing charged
    assert _spent(private_default_ledger, "people") == [PureDP(1.0)]
    # the spec may say it is a different population with identical bytes; the receipt records that
    b.write_text(CSV_SPEC.format(dataset="people-again", extra="allow_known_source = true").replace("people.csv",
                                                                                                   "copy.csv"))
    code, _, err = _run("release", str(b), "--out", str(tmp_path / "b"), "--yes")
    assert code == 0, err
    rec = json.loads((tmp_path / "b" / "receipts.json").read_text())
    assert rec["source_identity"]["allow_known_source"] is True and rec["source_identity"]["kind"] == "csv"
    with Ledger(private_default_ledger, "people-again", readonly=True) as led:
        assert led.receipts[0].params["allow_known_source"] is True
    # the same dataset with updated bytes is fine: the new fingerprint is registered too
    (tmp_path / "people.csv").write_text("age,sex\n30,F\n40,M\n50,F\n")
    code, _, err = _run("release", str(a), "--out", str(tmp_path / "a2"), "--yes")
    assert code == 0, err
    with Ledger(private_default_ledger, "people", readonly=True) as led:
        assert len(led.sources()) == 2 and len(led.receipts) == 2


def test_bundled_adult_under_a_new_name_is_refused(tmp_path: Path, private_default_ledger: Path) -> None:
    assert _run("release", str(_spec(tmp_path)), "--out", str(tmp_path / "o"), "--yes")[0] == 0
    renamed = _spec(tmp_path, ADULT_SPEC.replace('source = "adult"', 'source = "adult"\ndataset = "adult-v2"'),
                    "r.toml")
    code, _, err = _run("release", str(renamed), "--out", str(tmp_path / "r"), "--yes")
    assert code == 4 and "'uci-adult'" in err and "'adult-v2'" in err
    assert Ledger.datasets(private_default_ledger) == ["uci-adult"]


# ----------------------------------------------------------------------------------------------
# 5. outputs never overwrite a paid-for release


def test_a_folder_holding_a_release_is_refused_unless_replace(tmp_path: Path, private_default_ledger: Path) -> None:
    spec = _spec(tmp_path, _with_total(ADULT_SPEC, 3.0))
    out = tmp_path / "out"
    assert _run("release", str(spec), "--out", str(out), "--yes")[0] == 0
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    engine = FakeEngine()
    code, _, err = _run("release", str(spec), "--out", str(out), "--yes", engine=engine)
    assert code == 2 and "already holds the results of an earlier release" in err and "--replace" in err
    assert "nothing was read or spent" in err and engine.opened == 0
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    assert _spent(private_default_ledger) == [PureDP(1.0)]
    old_id = json.loads(before["receipts.json"])["release_id"]
    code, _, err = _run("release", str(spec), "--out", str(out), "--yes", "--replace")
    assert code == 0, err
    assert json.loads((out / "receipts.json").read_text())["release_id"] != old_id
    with Ledger(private_default_ledger, "uci-adult", readonly=True) as led:  # the old receipt stays
        assert led.receipts[0].params["release_id"] == old_id and len(led.receipts) == 2


def test_a_folder_holding_other_files_is_refused(tmp_path: Path, private_default_ledger: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes")
    assert code == 2 and "1 file(s) (notes.txt)" in err
    assert not private_default_ledger.exists()
    # a ledger kept inside the output folder does not count as a previous output
    led = tmp_path / "o2" / "ledger.sqlite"
    spec = _spec(tmp_path, _with_total(ADULT_SPEC, 3.0))
    assert _run("release", str(spec), "--out", str(tmp_path / "o2"), "--ledger", str(led), "--yes")[0] == 0
    code, _, err = _run("release", str(spec), "--out", str(tmp_path / "o2"), "--ledger", str(led), "--yes")
    assert code == 2 and "earlier release" in err  # refused for receipts.json, not for the ledger
    shutil.rmtree(tmp_path / "o3", ignore_errors=True)
    (tmp_path / "o3").mkdir()
    led3 = tmp_path / "o3" / "ledger.sqlite"
    assert _run("release", str(spec), "--out", str(tmp_path / "o3"), "--ledger", str(led3), "--yes")[0] == 0


# ----------------------------------------------------------------------------------------------
# 6. everything that can fail is checked before the charge


def test_unwritable_output_folder_is_not_charged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 private_default_ledger: Path) -> None:
    spec = _spec(tmp_path, _with_total(ADULT_SPEC, 3.0))
    assert _run("release", str(spec), "--out", str(tmp_path / "ok"), "--yes")[0] == 0

    def read_only(folder: Path, name: str, data: bytes) -> Path:  # a read-only mount: no file can be created
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(output, "_write_temp", read_only)
    engine = FakeEngine()
    code, _, err = _run("release", str(spec), "--out", str(tmp_path / "ro"), "--yes", engine=engine)
    assert code == 1 and "cannot write to the output folder" in err and "nothing was spent" in err
    assert engine.opened == 0 and not (tmp_path / "ro").exists()
    assert _spent(private_default_ledger) == [PureDP(1.0)]  # unchanged


def test_output_path_that_is_a_file_is_not_charged(tmp_path: Path, private_default_ledger: Path) -> None:
    (tmp_path / "taken").write_text("x")
    code, _, err = _run("release", str(_spec(tmp_path)), "--out", str(tmp_path / "taken" / "sub"), "--yes")
    assert code == 1 and "nothing was spent" in err
    assert not private_default_ledger.exists()


def test_full_output_folder_is_not_charged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           private_default_ledger: Path) -> None:
    spec = _spec(tmp_path, _with_total(ADULT_SPEC, 3.0))
    assert _run("release", str(spec), "--out", str(tmp_path / "ok"), "--yes")[0] == 0
    monkeypatch.setattr(output, "free_bytes", lambda folder: 100 * 1024)  # 100 KiB left on the disk
    code, _, err = _run("release", str(spec), "--out", str(tmp_path / "full"), "--yes")
    assert code == 1 and "100 KiB free" in err and "nothing was spent" in err
    assert _spent(private_default_ledger) == [PureDP(1.0)]
    assert not (tmp_path / "full").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_real_read_only_folder_is_not_charged(tmp_path: Path, private_default_ledger: Path) -> None:
    with _unprivileged_folder() as (folder, run):
        ro = folder / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        spec = folder / "spec.toml"
        spec.write_text(ADULT_SPEC)
        led = folder / "ledger" / "l.sqlite"
        led.parent.mkdir()
        led.parent.chmod(0o777)
        r = run(["release", str(spec), "--out", str(ro / "sub"), "--ledger", str(led), "--yes"])
        assert r.returncode == 1, r.stderr
        assert "cannot write to the output folder" in r.stderr and "nothing was spent" in r.stderr
        assert "Traceback" not in r.stderr
        assert not led.exists()  # not even a ledger created


# ----------------------------------------------------------------------------------------------
# 4. read-only commands open the ledger read-only


PRIV_DROP = """
import os, sys
sys.path[:0] = {paths!r}
import sqlite3, json, locale, importlib.resources  # stdlib modules imported lazily on the way
import dpkit, dpkit.core.ledger, dpkit.datasets.adult
for name in dpkit.__all__:  # dpkit imports on first use: load it all before the privileges go
    getattr(dpkit, name)
from dpkit.cli import main as cli_main  # loaded before the privileges go
if {drop!r}:
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    assert os.geteuid() == 65534
sys.exit(cli_main(sys.argv[1:]))
"""


@contextlib.contextmanager
def _unprivileged_folder():
    """A folder outside pytest's 0700 tree, and a runner of the CLI in a process that cannot write what the test
    made read-only: as root the child drops to ``nobody`` (root ignores permissions), else chmod suffices."""
    folder = Path(tempfile.mkdtemp(prefix="dpkit-ro-"))
    folder.chmod(0o755)
    root = os.geteuid() == 0

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        script = PRIV_DROP.format(paths=[str(ROOT), str(ROOT / "src")], drop=root)
        env = {k: v for k, v in os.environ.items() if k not in ("DPKIT_DEBUG",)}
        env["HOME"] = str(folder)
        return subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120,
                              check=False, env=env, cwd=str(folder))

    try:
        yield folder, run
    finally:
        for p in folder.rglob("*"):
            with contextlib.suppress(OSError):
                p.chmod(0o755 if p.is_dir() else 0o644)
        shutil.rmtree(folder, ignore_errors=True)


def _state(folder: Path) -> dict[str, tuple[int, bytes]]:
    return {n: (os.stat(folder / n).st_mtime_ns, (folder / n).read_bytes()) for n in sorted(os.listdir(folder))}


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_ledger_show_works_on_a_read_only_ledger(tmp_path: Path) -> None:
    with _unprivileged_folder() as (folder, run):
        led_dir = folder / "ledgers"
        led_dir.mkdir()
        led = led_dir / "ledger.sqlite"
        assert _run("release", str(_spec(tmp_path)), "--out", str(tmp_path / "o"), "--ledger", str(led),
                    "--yes")[0] == 0
        led.chmod(0o444)
        led_dir.chmod(0o555)
        before = _state(led_dir)
        r = run(["ledger", "show", "--ledger", str(led)])
        assert r.returncode == 0, r.stderr
        assert "dataset 'uci-adult'" in r.stdout and "spent:      ε=1" in r.stdout
        assert _state(led_dir) == before  # same bytes, same mtime, no -journal / -wal / -shm file
        # the budget pre-check of a release is read-only too (exit 3 on the spent dataset)
        spec = folder / "spec.toml"
        spec.write_text(ADULT_SPEC)
        r = run(["release", str(spec), "--out", str(folder / "out"), "--ledger", str(led), "--yes"])
        assert r.returncode == 3 and "budget exceeded" in r.stderr, r.stderr
        assert _state(led_dir) == before


def test_budget_precheck_writes_nothing(tmp_path: Path, private_default_ledger: Path) -> None:
    spec = _spec(tmp_path)
    assert _run("release", str(spec), "--out", str(tmp_path / "o"), "--yes")[0] == 0
    folder = private_default_ledger.parent
    before = _state(folder)
    assert _run("release", str(spec), "--out", str(tmp_path / "o2"), "--yes")[0] == 3
    assert _state(folder) == before


# ----------------------------------------------------------------------------------------------
# 7. only a dpkit error's text is ever printed


class _Leaky(FakeEngine):
    def __init__(self, where: str, exc: BaseException) -> None:
        super().__init__()
        self.where, self.exc = where, exc

    def open(self, spec, budget, rng):  # type: ignore[no-untyped-def]
        if self.where == "open":
            raise self.exc
        return super().open(spec, budget, rng)

    def plan(self, session, query, budget):  # type: ignore[no-untyped-def]
        if self.where == "plan":
            raise self.exc
        return super().plan(session, query, budget)

    def release(self, session, query, budget):  # type: ignore[no-untyped-def]
        if self.where == "release":
            raise self.exc
        return super().release(session, query, budget)


@pytest.mark.parametrize("where", ["open", "plan", "release"])
@pytest.mark.parametrize("exc", [ValueError(SECRET), RuntimeError(SECRET), UnicodeDecodeError("utf-8", b"\xff",
                                                                                              0, 1, SECRET)])
def test_non_dpkit_exception_text_is_never_printed(tmp_path: Path, private_default_ledger: Path, where: str,
                                                   exc: BaseException) -> None:
    for command in (["plan", str(_spec(tmp_path))],
                    ["release", str(_spec(tmp_path)), "--out", str(tmp_path / f"o-{where}"), "--yes"]):
        code, out, err = _run(*command, engine=_Leaky(where, exc))
        if command[0] == "plan" and where == "release":
            assert code == 0
            continue
        assert code == 1, err
        assert "SENTINEL" not in out + err and "Original Line" not in out + err
        assert type(exc).__name__ in err
    charged = where == "release"
    assert _spent(private_default_ledger) == ([PureDP(1.0)] if charged else [])


def test_deeply_nested_filter_is_a_spec_error_naming_the_key(tmp_path: Path) -> None:
    class Deep(FakeEngine):
        def plan(self, session, query, budget):  # type: ignore[no-untyped-def]
            if query.filter is not None:
                raise RecursionError("maximum recursion depth exceeded")
            return super().plan(session, query, budget)

    deep = "(" * 300 + "age" + ")" * 300
    text = ADULT_SPEC.replace('name = "by sex"', 'name = "by sex"\nfilter = "' + deep + ' > 1"')
    for cmd in ("plan", "release"):
        code, _, err = _run(cmd, str(_spec(tmp_path, text)), "--out", str(tmp_path / "o"), "--yes", engine=Deep()) \
            if cmd == "release" else _run(cmd, str(_spec(tmp_path, text)), engine=Deep())
        assert code == 2 and "query[0].filter" in err and "nested too deeply" in err, err
    assert not (tmp_path / "o").exists()


def test_deeply_nested_toml_is_exit_2(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n")
    code, _, err = _run("plan", str(spec))
    assert code == 2 and "nested too deeply" in err


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_plan_dev_zero_refuses_quickly() -> None:
    import time

    t = time.monotonic()
    code, _, err = _run("plan", "/dev/zero")
    assert code == 2 and "/dev/zero" in err and "not a regular file" in err
    assert time.monotonic() - t < 5


def test_huge_spec_is_refused_naming_it(tmp_path: Path) -> None:
    spec = tmp_path / "huge.toml"
    spec.write_text(ADULT_SPEC + "\n" + "# padding\n" * 120_000)
    code, _, err = _run("plan", str(spec))
    assert code == 2 and str(spec) in err and "larger than 1 MiB" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    code, _, err = _run("plan", str(fifo))
    assert code == 2 and "not a regular file" in err


def test_plan_never_opens_the_ledger(tmp_path: Path, private_default_ledger: Path) -> None:
    spec = _spec(tmp_path, ADULT_SPEC.replace("[budget]", f'[ledger]\npath = "{tmp_path / "named.sqlite"}"\n[budget]'))
    assert _run("plan", str(spec))[0] == 0
    assert _run("plan", str(_spec(tmp_path, ADULT_SPEC, "plain.toml")))[0] == 0
    assert not private_default_ledger.parent.exists() and not (tmp_path / "named.sqlite").exists()
