"""dpkit plan / release / ledger show end-to-end on the bundled Adult data with the real dpkit.tables engine."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from pathlib import Path

import pytest

from dpkit.cli import main
from dpkit.core.ledger import Ledger
from dpkit.core.privacy import PureDP

pytest.importorskip("dpkit.tables", reason="the tables extra (ibis, duckdb) is not installed")

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "adult.toml"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("adult") / "out"
    code, stdout, stderr = _run("release", str(DEMO), "--out", str(out), "--seed", "2026", "--yes",
                                "--ledger", str(out.parent / "ledger.sqlite"))  # module scope: an explicit ledger
    assert code == 0, stderr
    return out, stdout


def test_release_files_values_receipts_and_ledger(released: tuple[Path, str]) -> None:
    out, stdout = released
    for name in ("results.csv", "results.json", "report.html", "receipts.json"):
        assert (out / name).is_file(), name
    assert not (out / "ledger.sqlite").exists()  # the ledger belongs to the data, not to the output folder
    rec = json.loads((out / "receipts.json").read_text())
    assert rec["dataset"] == "uci-adult" and rec["secure"] is False and rec["seed"] == 2026
    assert [q["name"] for q in rec["queries"]] == ["people by education", "mean age by sex", "mean capital gain",
                                                   "weekly hours quantiles", "share with income >50K by race",
                                                   "age histogram", "sex by income"]
    assert len(rec["charges"]) == 7 and all(c["secure"] is False for c in rec["charges"])
    # the demo asks for diagnostics on the capital-gain mean: 253 true values above its guessed bound 20,000
    rows = json.loads((out / "results.json").read_text())["rows"]
    diag = {r["bin"]: r for r in rows if r["statistic"] == "diagnostic"}
    assert set(diag) == {"clamped_low", "clamped_high"} and all(r["column"] == "capital_gain" for r in diag.values())
    assert abs(diag["clamped_high"]["value"] - 253) < 15 * 20  # scale 15: a 20-scale miss has probability e^-20
    assert abs(diag["clamped_low"]["value"]) < 15 * 20
    assert "Diagnostics" in (out / "report.html").read_text()
    assert math.fsum(c["cost"]["epsilon"] for c in rec["charges"]) == pytest.approx(1.0)
    for name, digest in rec["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    assert rec["ledger"]["path"] == str((out.parent / "ledger.sqlite").resolve())
    assert rec["source_identity"]["kind"] == "bundled:adult" and rec["source_identity"]["fingerprint"].startswith(
        "sha256:") and rec["source_identity"]["allow_known_source"] is False
    with Ledger(out.parent / "ledger.sqlite", "uci-adult") as led:
        (r,) = led.receipts
        assert r.params["source_fingerprint"] == rec["source_identity"]["fingerprint"]
        assert [s[:2] for s in led.sources()] == [(r.params["source_fingerprint"], "bundled:adult")]
        assert r.mechanism == "release" and r.cost == PureDP(1.0) and not r.secure
        assert r.id == rec["ledger"]["receipt"]["id"] and r.params["spec_sha256"] == rec["spec"]["sha256"]
        assert led.remaining == PureDP(0.0)
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 16 + 2 * 2 + (1 + 2) + 5 + 5 + 7 + 4  # capital gain: a mean and two diagnostics
    for r in rows:
        assert math.isfinite(float(r["value"]))
        if r["statistic"] != "quantile":
            assert float(r["lo"]) <= float(r["value"]) <= float(r["hi"])
    by = {(r["query"], r["group"], r["bin"], r["statistic"]): float(r["value"]) for r in rows}
    assert abs(by[("mean age by sex", "sex=Male", "", "mean")] - 39.4) < 3  # true mean 39.43
    assert abs(by[("people by education", "education=HS-grad", "", "count")] - 10501) < 200
    assert f"released {len(rows)} values of 7 queries" in stdout


def test_same_seed_same_values(released: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = released
    code, _, err = _run("release", str(DEMO), "--out", str(tmp_path / "again"), "--seed", "2026", "--yes")
    assert code == 0, err
    a = json.loads((out / "results.json").read_text())["rows"]
    b = json.loads((tmp_path / "again" / "results.json").read_text())["rows"]
    assert a == b


def test_second_release_refused_exit_3(released: tuple[Path, str]) -> None:
    out, _ = released
    before = (out / "results.csv").read_bytes()
    code, _, err = _run("release", str(DEMO), "--out", str(out), "--seed", "1", "--yes",
                        "--ledger", str(out.parent / "ledger.sqlite"))
    assert code == 3 and "budget exceeded" in err
    with Ledger(out.parent / "ledger.sqlite", "uci-adult") as led:
        assert len(led.receipts) == 1
    assert (out / "results.csv").read_bytes() == before


def test_ledger_show(released: tuple[Path, str]) -> None:
    out, _ = released
    code, stdout, _ = _run("ledger", "show", "--ledger", str(out.parent / "ledger.sqlite"))
    assert code == 0
    assert "dataset 'uci-adult'" in stdout and "spent:      ε=1" in stdout and "remaining:  ε=0" in stdout
    assert "UCI Adult: demographics and income (" in stdout and "INSECURE" in stdout


def test_plan_real_engine(tmp_path: Path) -> None:
    code, stdout, _ = _run("plan", str(DEMO))
    assert code == 0
    for name in ("people by education", "weekly hours quantiles", "sex by income"):
        assert name in stdout
    assert "discrete_laplace(scale=5)" in stdout and "exponential" in stdout and "diagnostic" in stdout


def _spec(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text('[budget]\nepsilon = 0.5\n[[query]]\nname = "q"\n' + body)
    return p


@pytest.mark.parametrize(("body", "words"), [
    ('filter = "agee > 3"\nstat = "count"\n', "agee"),
    ('stat = "mean"\ncolumn = "sex"\nbounds = [0, 1]\n', "numeric"),
    ('filter = "age + sex > 3"\nstat = "count"\n', "expression"),
    ('derive = { x = "__import__(\'os\')" }\nstat = "count"\n', "query[0]"),
])
def test_query_errors_found_before_any_charge(tmp_path: Path, body: str, words: str) -> None:
    out = tmp_path / "out"
    code, _, err = _run("release", str(_spec(tmp_path, body)), "--out", str(out), "--yes")
    assert code == 2 and "query[0]" in err and words in err, err
    assert not out.exists()


def test_missing_values_found_before_the_charge(tmp_path: Path, private_default_ledger: Path) -> None:
    out = tmp_path / "out"
    spec = _spec(tmp_path, 'stat = "histogram"\ncolumn = "occupation"\ncategories = "domain"\n')
    code, _, err = _run("release", str(spec), "--out", str(out), "--yes")
    assert code == 1 and "missing values" in err and "nothing was spent" in err
    assert not private_default_ledger.exists() and not out.exists()
    spec.write_text(spec.read_text().replace("[budget]", '[data]\nnan_policy = "drop"\n[budget]'))
    code, _, err = _run("release", str(spec), "--out", str(out), "--yes", "--seed", "3")
    assert code == 0, err
