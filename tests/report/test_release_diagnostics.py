"""End to end through the release CLI with the real tables engine (issue #11): ``diagnostics = true`` in a spec
releases the diagnostic rows inside the query's one charge, ``plan`` shows them, results.json says what the
intervals cover, and report.html renders the coverage notes and the Diagnostics block with its hints."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit.cli import main  # noqa: E402
from dpkit.cli.spec import SpecError, parse_spec  # noqa: E402

SPEC = """
name = "clamped"
[data]
source = "visits.csv"
dataset = "visits-test"
[privacy]
unit = "user"
column = "uid"
max_rows = 2
[budget]
epsilon = 8.0
[output]
diagnostics = true
[[query]]
name = "spend"
group_by = "region"
keys = ["n", "s"]
statistics = [{ stat = "count" }, { stat = "mean", column = "spend", bounds = [0, 99] }]
[[query]]
name = "plain"
diagnostics = false
stat = "count"
"""


def _data(tmp_path: Path) -> pd.DataFrame:
    g = np.random.default_rng(3)  # test data only
    n_users = 1500
    per = g.integers(1, 5, size=n_users)  # 1..4 rows per user, max_rows 2: about 1,900 rows dropped
    uid = np.repeat(np.arange(n_users), per)
    df = pd.DataFrame({"uid": uid, "region": np.repeat(g.choice(["n", "s"], size=n_users), per),
                       "spend": g.normal(80, 20, size=uid.size).round()})
    df.to_csv(tmp_path / "visits.csv", index=False)
    return df


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


def test_spec_key_per_query_and_in_output() -> None:
    base = {"budget": {"epsilon": 1.0}, "query": [{"name": "a", "stat": "count"}]}
    assert parse_spec(base).queries[0].diagnostics is None
    assert parse_spec({**base, "output": {"diagnostics": True}}).queries[0].diagnostics == 1.0
    q = [{"name": "a", "stat": "count", "diagnostics": 0.25}, {"name": "b", "stat": "count", "diagnostics": False}]
    spec = parse_spec({**base, "output": {"diagnostics": True}, "query": q})
    assert [x.diagnostics for x in spec.queries] == [0.25, None]
    for bad, path in (({"output": {"diagnostics": "yes"}}, "output.diagnostics"),
                      ({"query": [{"name": "a", "stat": "count", "diagnostics": -1}]}, "query[0].diagnostics")):
        with pytest.raises(SpecError) as e:
            parse_spec({**base, **bad})
        assert e.value.path == path


def test_release_with_diagnostics_end_to_end(tmp_path: Path) -> None:
    df = _data(tmp_path)
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    ledger = tmp_path / "ledger.sqlite"
    code, out, err = _run("plan", str(spec))
    assert code == 0, err
    assert "diagnostic" in out and "spend (clamped_low, clamped_high)" in out and "(dropped_rows)" in out
    code, out, err = _run("release", str(spec), "--out", str(tmp_path / "out"), "--ledger", str(ledger), "--yes",
                          "--seed", "11")
    assert code == 0, err
    (results,) = list((tmp_path / "out").rglob("results.json"))
    js = json.loads(results.read_text())
    meta = js["release"]
    assert "noise" in meta["intervals"] and "do not cover clamping" in meta["intervals"]
    cov = meta["coverage"]
    assert cov["spend"]["clamped"][0]["bounds"] == [0.0, 99.0]
    assert cov["spend"]["bounding"]["max_rows"] == 2 and cov["plain"]["clamped"] == []
    rows = pd.DataFrame(js["rows"])
    diag = rows[rows.statistic == "diagnostic"]
    assert set(diag["query"]) == {"spend"}  # "plain" turned them off
    # near the truth: clamped above 99 among the kept rows, and rows dropped by max_rows = 2 (capped at 2 per user)
    high = diag[diag.bin == "clamped_high"]
    n_u = df.groupby("uid").size()
    dropped = int(np.minimum(n_u - np.minimum(n_u, 2), 2).sum())
    (d_rows,) = diag[diag.bin == "dropped_rows"].value
    assert abs(d_rows - dropped) <= 60 and dropped > 1000
    # kept rows are a random half-or-so of the heavy users' rows: the clamped count is about 16% of kept rows
    kept = int(np.minimum(n_u, 2).sum())
    assert abs(high.value.sum() - 0.166 * kept) <= 0.05 * kept
    html = (results.parent / "report.html").read_text()
    assert "Diagnostics" in html and "clamped at the upper bound 99: widen the bounds if that matters" in html
    assert "raise max_rows if that matters" in html
    assert "accounts for the noise only" in html and "values are clamped to [0, 99]" in html
    # one charge per query: the diagnostics are inside it
    rec = json.loads((results.parent / "receipts.json").read_text())
    assert [c["description"] for c in rec["charges"]] == ["spend", "plain"]
