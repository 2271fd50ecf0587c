"""dpkit release with a stand-in engine: outputs, receipts, ledger, budget refusal, crash injection, atomicity."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path

import pytest
from tests.cli.fakes import ADULT_SPEC, FakeEngine

from dpkit.cli import main, output
from dpkit.core.ledger import Ledger
from dpkit.core.privacy import PureDP


def _spec(tmp_path: Path, text: str = ADULT_SPEC) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def _run(*argv: str, engine: FakeEngine | None = None, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), engine=engine or FakeEngine(), stdout=out, stderr=err, stdin=io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


def _default() -> Path:
    """The default ledger of this test (tests/cli/conftest.py points $DPKIT_LEDGER into tmp_path)."""
    return Path(os.environ["DPKIT_LEDGER"])


def _receipts(path: Path, dataset: str = "uci-adult") -> list:
    with Ledger(path, dataset) as led:
        return list(led.receipts)


def test_release_writes_consistent_set_and_charges_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes")
    assert code == 0, stderr
    names = sorted(os.listdir(out))
    assert {"results.csv", "results.json", "report.html", "receipts.json"} <= set(names)
    assert "ledger.sqlite" not in names  # the ledger belongs to the data, not to the output folder
    assert f"new dataset 'uci-adult' in ledger {_default().resolve()} with budget ε=1" in stderr
    assert not [n for n in names if n.startswith(".")]  # no temp file left
    rec = json.loads((out / "receipts.json").read_text())
    assert rec["format"] == "dpkit-release-receipt" and rec["dataset"] == "uci-adult"
    assert rec["budget"] == {"type": "PureDP", "epsilon": 1.0} and rec["secure"] is True and rec["seed"] is None
    assert len(rec["spec"]["sha256"]) == 64
    for name, digest in rec["files"].items():  # the receipt pins every file
        assert __import__("hashlib").sha256((out / name).read_bytes()).hexdigest() == digest
    assert [c["description"] for c in rec["charges"]] == ["by sex", "age histogram"]
    # the ledger has exactly one charge: the whole release, naming it
    (r,) = _receipts(_default())
    assert r.mechanism == "release" and r.cost == PureDP(1.0) and r.secure
    assert r.params["release_id"] == rec["release_id"] == rec["ledger"]["receipt"]["id"] or \
        r.id == rec["ledger"]["receipt"]["id"]
    assert r.params["spec_sha256"] == rec["spec"]["sha256"]
    # results: 2 groups x (count, mean) + 3 bins, all finite
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 7
    assert all(math.isfinite(float(r["value"])) for r in rows)
    assert list(rows[0])[:10] == ["query", "statistic", "column", "group", "bin", "value", "lo", "hi", "mechanism",
                                  "postprocessed"]
    js = json.loads((out / "results.json").read_text())
    assert len(js["rows"]) == 7 and js["release"]["release_id"] == rec["release_id"]
    assert "released 7 values of 2 queries" in stdout and str(out) in stdout
    html = (out / "report.html").read_text()
    assert "INSECURE" not in html


def test_seed_is_marked_insecure_everywhere(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, stderr = _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes", "--seed", "7")
    assert code == 0
    assert "INSECURE" in stderr
    rec = json.loads((out / "receipts.json").read_text())
    assert rec["secure"] is False and rec["seed"] == 7
    assert all(c["secure"] is False for c in rec["charges"])
    (r,) = _receipts(_default())
    assert r.secure is False and r.params["seeded"] is True
    assert 'id="insecure"' in (out / "report.html").read_text()
    code, shown, _ = _run("ledger", "show", "--ledger", str(_default()))
    assert code == 0 and "INSECURE" in shown


def test_budget_exceeded_exit_3_ledger_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = _spec(tmp_path)
    assert _run("release", str(spec), "--out", str(out), "--yes")[0] == 0
    before = {n: (out / n).read_bytes() for n in ("results.csv", "receipts.json", "report.html")}
    engine = FakeEngine()
    code, _, stderr = _run("release", str(spec), "--out", str(out), "--yes", engine=engine)
    assert code == 3
    assert "budget exceeded" in stderr and "nothing was released" in stderr
    assert engine.opened == 0 and engine.released == []  # refused before the data was even opened
    assert len(_receipts(_default())) == 1
    assert {n: (out / n).read_bytes() for n in before} == before  # the earlier release's files are untouched


def test_budget_larger_than_ledger_total_exit_3(tmp_path: Path) -> None:
    text = ADULT_SPEC.replace("[budget]\nepsilon = 1.0", "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 0.5 }")
    out = tmp_path / "out"
    code, _, stderr = _run("release", str(_spec(tmp_path, text)), "--out", str(out), "--yes")
    assert code == 3 and "ε=0.5 left" in stderr
    assert not out.exists()  # no ledger created, no output folder


def test_bad_spec_leaves_existing_ledger_unchanged(tmp_path: Path) -> None:
    text = ADULT_SPEC.replace("[budget]\nepsilon = 1.0", "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 3.0 }")
    out = tmp_path / "out"
    assert _run("release", str(_spec(tmp_path, text)), "--out", str(out), "--yes")[0] == 0
    before = _receipts(_default())
    engine = FakeEngine()
    bad = text.replace("edges = [0, 30, 60, 100]", "edges = [0, 30, 30, 100]")
    code, _, err = _run("release", str(_spec(tmp_path, bad)), "--out", str(out), "--yes", engine=engine)
    assert code == 2 and "query[1].edges[2]" in err and engine.opened == 0
    assert _receipts(_default()) == before


def test_ledger_total_allows_several_releases(tmp_path: Path) -> None:
    text = ADULT_SPEC.replace("[budget]\nepsilon = 1.0", "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 2.0 }")
    spec = _spec(tmp_path, text)
    led = tmp_path / "shared.sqlite"
    for k in range(2):
        assert _run("release", str(spec), "--out", str(tmp_path / f"o{k}"), "--ledger", str(led), "--yes")[0] == 0
    assert _run("release", str(spec), "--out", str(tmp_path / "o2"), "--ledger", str(led), "--yes")[0] == 3
    code, shown, _ = _run("ledger", "show", "--ledger", str(led), "--dataset", "uci-adult")
    assert code == 0
    assert shown.count("test release (") == 2 and shown.count("dpkit release to") == 2
    assert "spent:      ε=2" in shown and "remaining:  ε=0" in shown


def test_crash_in_engine_after_charge_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    engine = FakeEngine(fail_on="age histogram")
    code, _, stderr = _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes", engine=engine)
    assert code == 1
    assert "AFTER its budget was charged" in stderr and "no result file was written" in stderr
    assert engine.released == ["by sex"]
    (r,) = _receipts(_default())  # charged before anything was computed
    assert r.mechanism == "release"
    assert [n for n in os.listdir(out) if not n.startswith("ledger.sqlite")] == []  # nothing else, no temp files


@pytest.mark.parametrize(("stage", "name"), [("staged", "results.csv"), ("staged", "report.html"),
                                             ("replaced", "results.csv"), ("replaced", "report.html")])
def test_crash_while_writing_leaves_consistent_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      stage: str, name: str) -> None:
    spec = _spec(tmp_path, ADULT_SPEC.replace("[budget]\nepsilon = 1.0",
                                              "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 5.0 }"))
    out = tmp_path / "out"
    assert _run("release", str(spec), "--out", str(out), "--yes")[0] == 0
    old = json.loads((out / "receipts.json").read_text())

    def hook(st: str, n: str) -> None:
        if (st, n) == (stage, name):
            raise OSError("disk full (injected)")

    monkeypatch.setattr(output, "_TEST_HOOK", hook)
    code, _, stderr = _run("release", str(spec), "--out", str(out), "--yes", "--replace")
    monkeypatch.setattr(output, "_TEST_HOOK", None)
    assert code == 1 and "AFTER its budget was charged" in stderr
    assert len(_receipts(_default())) == 2  # the failed release was charged (never released uncharged)
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # temp files removed
    if stage == "staged":  # before any replacement: the old set is intact and verifies
        rec = json.loads((out / "receipts.json").read_text())
        assert rec == old
        for f, digest in rec["files"].items():
            assert __import__("hashlib").sha256((out / f).read_bytes()).hexdigest() == digest
    else:  # mid-replacement: no receipts.json claims a mixed set
        assert not (out / "receipts.json").exists()


def test_atomic_write_replaces_or_keeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "f.txt"
    output.atomic_write(p, b"one")
    assert p.read_bytes() == b"one"

    def boom(*a: object) -> None:
        raise OSError("injected")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        output.atomic_write(p, b"two")
    assert p.read_bytes() == b"one"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_csv_formula_injection_guard(tmp_path: Path) -> None:
    bad = ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "plain", "a=b"]
    out = tmp_path / "out"
    code, _, _ = _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes", engine=FakeEngine(labels=bad))
    assert code == 0
    with open(out / "results.csv", newline="") as fh:
        groups = [r["group"] for r in csv.DictReader(fh)][: len(bad)]
    assert groups == ["'=HYPERLINK(\"http://x\")", "'+1+1", "'-2+3", "'@SUM(A1)", "'\tx", "plain", "a=b"]
    js = json.loads((out / "results.json").read_text())
    assert [r["group"] for r in js["rows"]][: len(bad)] == bad  # JSON keeps the raw text
    # numbers are not touched: negative values stay numbers
    assert output.csv_safe(-3.5) == -3.5 and output.csv_safe("-3.5") == "'-3.5"


def test_plan_with_stand_in_engine(tmp_path: Path) -> None:
    engine = FakeEngine()
    code, stdout, _ = _run("plan", str(_spec(tmp_path)), engine=engine)
    assert code == 0 and engine.released == []
    assert "no statistic computed, nothing spent" in stdout
    assert "±95%" in stdout and "discrete_laplace" in stdout
    assert "by sex: ε=0.5" in stdout and "age histogram: ε=0.5" in stdout
    assert not (tmp_path / "out").exists()


def test_prompt_declined_spends_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class TTY(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = tmp_path / "out"
    err = io.StringIO()
    engine = FakeEngine()
    code = main(["release", str(_spec(tmp_path)), "--out", str(out)], engine=engine, stdout=io.StringIO(),
                stderr=err, stdin=TTY("n\n"))
    assert code == 5 and "[y/N]" in err.getvalue() and engine.released == []
    assert _receipts(_default()) == []
    code = main(["release", str(_spec(tmp_path)), "--out", str(out)], engine=engine, stdout=io.StringIO(),
                stderr=io.StringIO(), stdin=TTY("yes\n"))
    assert code == 0 and len(_receipts(_default())) == 1


def test_progress_bar_only_when_asked(tmp_path: Path) -> None:
    spec = _spec(tmp_path, ADULT_SPEC.replace("[budget]\nepsilon = 1.0",
                                              "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 2.0 }"))
    code, _, stderr = _run("release", str(spec), "--out", str(tmp_path / "a"), "--yes")
    assert code == 0 and "[" not in stderr
    code, _, stderr = _run("release", str(spec), "--out", str(tmp_path / "b"), "--yes", "--progress")
    assert code == 0 and "releasing age histogram" in stderr and "done" in stderr


def test_ledger_show_errors(tmp_path: Path) -> None:
    code, _, err = _run("ledger", "show", "--ledger", str(tmp_path / "missing.sqlite"))
    assert code == 2 and "no ledger file" in err
    assert not (tmp_path / "missing.sqlite").exists()
    out = tmp_path / "out"
    assert _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes")[0] == 0
    code, _, err = _run("ledger", "show", "--ledger", str(_default()), "--dataset", "nope")
    assert code == 2 and "not in the ledger" in err


def test_ledger_with_other_unit_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes")[0] == 0
    text = ADULT_SPEC.replace("[budget]", '[privacy]\nunit = "user"\ncolumn = "fnlwgt"\nmax_rows = 2\n[budget]')
    code, _, err = _run("release", str(_spec(tmp_path, text)), "--out", str(out), "--yes")
    assert code == 4 and "neighbour relation" in err
    assert len(_receipts(_default())) == 1


def test_usage_errors_exit_2() -> None:
    assert _run("release")[0] == 2
    assert _run("frobnicate")[0] == 2
    assert _run("release", "x.toml", "--seed", "abc")[0] == 2


def test_negative_seed_exit_2(tmp_path: Path) -> None:
    code, _, err = _run("release", str(_spec(tmp_path)), "--out", str(tmp_path / "o"), "--seed", "-1", "--yes")
    assert code == 2 and "--seed" in err and not (tmp_path / "o").exists()


def test_stale_outputs_of_an_earlier_release_are_removed(tmp_path: Path) -> None:
    text = ADULT_SPEC.replace("[budget]\nepsilon = 1.0", "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 3.0 }")
    out = tmp_path / "out"
    assert _run("release", str(_spec(tmp_path, text)), "--out", str(out), "--yes")[0] == 0
    assert (out / "results.json").exists()
    only_csv = text.replace('name = "test release"', 'name = "test release"\n[output]\nformats = ["csv"]')
    assert _run("release", str(_spec(tmp_path, only_csv)), "--out", str(out), "--yes", "--replace")[0] == 0
    assert not (out / "results.json").exists() and not (out / "results.parquet").exists()
    rec = json.loads((out / "receipts.json").read_text())
    assert sorted(rec["files"]) == ["report.html", "results.csv"]


HARD_CRASH = """
import os, sys
sys.path.insert(0, {root!r})
from dpkit.cli import main, output
from tests.cli.fakes import FakeEngine

def hook(stage, name):
    if (stage, name) == ({stage!r}, {name!r}):
        os._exit(9)  # a hard crash: no exception handler, no cleanup

output._TEST_HOOK = hook
sys.exit(main(["release", {spec!r}, "--out", {out!r}, "--yes", "--replace"], engine=FakeEngine()))
"""


@pytest.mark.parametrize(("stage", "name"), [("staged", "report.html"), ("replaced", "results.json")])
def test_hard_crash_never_releases_uncharged_and_never_leaves_a_mixed_set(tmp_path: Path, stage: str,
                                                                         name: str) -> None:
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    spec = _spec(tmp_path, ADULT_SPEC.replace("[budget]\nepsilon = 1.0",
                                              "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 5.0 }"))
    out = tmp_path / "out"
    assert _run("release", str(spec), "--out", str(out), "--yes")[0] == 0
    old = json.loads((out / "receipts.json").read_text())
    script = HARD_CRASH.format(root=root, stage=stage, name=name, spec=str(spec), out=str(out))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120, check=False)
    assert r.returncode == 9, r.stderr.decode()[-2000:]
    assert len(_receipts(_default())) == 2  # the crashed release was charged first
    if stage == "staged":  # crashed before any replacement: the old set is intact and verifies
        assert json.loads((out / "receipts.json").read_text()) == old
        for f, digest in old["files"].items():
            assert __import__("hashlib").sha256((out / f).read_bytes()).hexdigest() == digest
    else:  # crashed mid-replacement: no receipts.json vouches for the mixed folder
        assert not (out / "receipts.json").exists()
    # a later release into the same folder (--replace) repairs it (stray hidden temp files aside)
    assert _run("release", str(spec), "--out", str(out), "--yes", "--replace")[0] == 0
    rec = json.loads((out / "receipts.json").read_text())
    for f, digest in rec["files"].items():
        assert __import__("hashlib").sha256((out / f).read_bytes()).hexdigest() == digest


def test_interrupt_after_charge_reports_spent_budget(tmp_path: Path) -> None:
    class Interrupted(FakeEngine):
        def release(self, session, query, budget):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

    out = tmp_path / "out"
    code, _, err = _run("release", str(_spec(tmp_path)), "--out", str(out), "--yes", engine=Interrupted())
    assert code == 1 and "AFTER its budget was charged" in err
    assert len(_receipts(_default())) == 1
    assert [n for n in os.listdir(out) if not n.startswith("ledger.sqlite")] == []


CONCURRENT = """
import sys
sys.path.insert(0, {root!r})
from dpkit.cli import main
from tests.cli.fakes import FakeEngine
sys.exit(main(["release", {spec!r}, "--out", {out!r}, "--ledger", {ledger!r}, "--yes"], engine=FakeEngine()))
"""


def test_concurrent_releases_cannot_overspend(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    spec = _spec(tmp_path)  # budget ε=1 = the ledger's total: only one release can be paid
    ledger = tmp_path / "shared.sqlite"
    procs = [subprocess.Popen([sys.executable, "-c", CONCURRENT.format(root=root, spec=str(spec),
                                                                      out=str(tmp_path / f"o{k}"),
                                                                      ledger=str(ledger))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for k in range(2)]
    codes = sorted(p.wait(timeout=180) for p in procs)
    assert codes == [0, 3]
    (r,) = _receipts(ledger)
    assert r.cost == PureDP(1.0)
    done = [k for k in range(2) if (tmp_path / f"o{k}" / "receipts.json").exists()]
    assert len(done) == 1
