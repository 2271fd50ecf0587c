"""dpkit release of a spec with marginals and a synthetic table (the real dpkit.tables engine, generated data): the
files written, the report's sections, the receipt, and the refusals that cost nothing."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit.cli import main  # noqa: E402
from dpkit.core.ledger import Ledger  # noqa: E402

SPEC = """
name = "marginals and synthetic"
[data]
source = "people.csv"
dataset = "people"
[privacy]
unit = "row"
[budget]
epsilon = 2.0
delta = 1e-6
[domain]
sex = ["F", "M"]
edu = ["a", "b", "c"]

[[query]]
name = "pairs"
stat = "marginals"
columns = ["sex", "edu", "age"]
bins = { age = [17, 30, 50, 70, 100] }
ways = 2

[[query]]
name = "people"
stat = "synthetic"
columns = ["sex", "edu", "age", "x"]
bins = { age = [17, 30, 50, 70, 100], x = [0, 2.5, 5, 10] }
method = "mst"
rows = 400
iters = 100
output = "people_synthetic.csv"
"""


def _data(folder: Path, n: int = 900) -> None:
    g = np.random.default_rng(2)  # test data only
    pd.DataFrame({"sex": g.choice(["F", "M"], n), "edu": g.choice(["a", "b", "c", "zz"], n),
                  "age": g.integers(10, 95, n), "x": g.uniform(0, 10, n).round(3)}).to_csv(folder / "people.csv",
                                                                                            index=False)


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    _data(tmp_path)
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, stdin=io.StringIO(""))
    return code, out.getvalue(), err.getvalue()


def test_release_writes_marginals_and_the_synthetic_table(tmp_path: Path) -> None:
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    code, stdout, stderr = _run("release", str(_spec(tmp_path)), "--out", str(out), "--ledger", str(ledger),
                                "--yes", "--seed", "4")
    assert code == 0, stderr
    assert "people_synthetic.csv" in stdout
    with open(out / "people_synthetic.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 400 and list(rows[0]) == ["sex", "edu", "age", "x"]
    assert {r["edu"] for r in rows} <= {"a", "b", "c"} and all(17 <= int(r["age"]) <= 100 for r in rows)
    rec = json.loads((out / "receipts.json").read_text())
    assert rec["files"]["people_synthetic.csv"] == hashlib.sha256((out / "people_synthetic.csv").read_bytes()
                                                                  ).hexdigest()
    assert rec["synthetic"] == [{"file": "people_synthetic.csv", "rows": 400, "method": "mst",
                                 "columns": ["sex", "edu", "age", "x"]}]
    with Ledger(ledger, "people") as led:
        (r,) = led.receipts
        assert r.cost == led.budget  # one charge: the whole release
    res = json.loads((out / "results.json").read_text())
    marg = [r for r in res["rows"] if r["statistic"] == "marginals"]
    assert len(marg) == 2 * 3 + 2 * 4 + 3 * 4 and {r["column"] for r in marg} == {"sex,edu", "sex,age", "edu,age"}
    syn = {r["bin"]: r for r in res["rows"] if r["statistic"] == "synthetic"}
    assert syn["rows"]["value"] == 400 and any(b.startswith("TV ") for b in syn)
    html = (out / "report.html").read_text()
    assert "marginal sex,edu" in html and "expected L1 error" in html
    assert "synthetic table of sex,edu,age,x" in html and "computed from released values only" in html
    assert "never from the private data" in html
    assert "values outside the public bins or domains are not counted" in html


def test_least_squares_marginals_carry_intervals_in_the_results(tmp_path: Path) -> None:
    text = SPEC.replace("ways = 2", 'ways = 2\nconsistent = "least_squares"')
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    code, _, stderr = _run("release", str(_spec(tmp_path, text)), "--out", str(out), "--ledger", str(ledger),
                           "--yes", "--seed", "4")
    assert code == 0, stderr
    res = json.loads((out / "results.json").read_text())
    marg = [r for r in res["rows"] if r["statistic"] == "marginals"]
    assert len(marg) == 2 * 3 + 2 * 4 + 3 * 4
    assert all(r["lo"] < r["value"] < r["hi"] and r["postprocessed"] for r in marg)
    assert all("least-squares consistent" in r["mechanism"] for r in marg)


def test_plan_lists_both_kinds_and_spends_nothing(tmp_path: Path) -> None:
    code, stdout, stderr = _run("plan", str(_spec(tmp_path)))
    assert code == 0, stderr
    assert "direct: discrete_laplace" in stdout and "mst(rho=" in stdout and "people_synthetic.csv" in stdout


@pytest.mark.parametrize("edit, where", [
    (('output = "people_synthetic.csv"', 'output = "sub/people.csv"'), "query[1].output"),
    (('output = "people_synthetic.csv"', 'output = "results.csv"'), "query[1].output"),
    (('output = "people_synthetic.csv"\n', ""), "query[1].output"),
    (('bins = { age = [17, 30, 50, 70, 100] }\nways', "ways"), "query[0].bins"),  # age: no categories, no bins
    (("ways = 2", 'ways = 2\nsets = [["sex", "edu"]]'), "query[0].sets"),
    (("ways = 2", 'sets = [["sex", "nope"]]'), "query[0].sets[0][1]"),
    (("ways = 2", 'ways = 2\nfoo = 1'), "query[0].foo"),
    (("ways = 2", 'ways = 2\nconsistent = "least squares"'), "query[0].consistent"),
    (("ways = 2", 'ways = 2\nconsistent = 1'), "query[0].consistent"),
    (('method = "mst"', 'method = "direct"'), "query[1]"),
    (("epsilon = 2.0\ndelta = 1e-6", "epsilon = 2.0"), "query[1]"),  # pure ε: the zCDP method is refused
])
def test_spec_errors_exit_2_before_anything_is_spent(tmp_path: Path, edit: tuple[str, str], where: str) -> None:
    text = SPEC.replace(*edit)
    assert text != SPEC
    ledger = tmp_path / "ledger.sqlite"
    code, _, stderr = _run("release", str(_spec(tmp_path, text)), "--out", str(tmp_path / "out"), "--ledger",
                           str(ledger), "--yes")
    assert code == 2, stderr
    assert f"invalid spec: {where}" in stderr
    assert not ledger.exists() and not (tmp_path / "out").exists()


def test_two_statistics_writing_one_file_are_refused(tmp_path: Path) -> None:
    text = SPEC + SPEC[SPEC.index("[[query]]\nname = \"people\""):].replace('name = "people"', 'name = "again"')
    code, _, stderr = _run("plan", str(_spec(tmp_path, text)))
    assert code == 2 and "query[2].output: repeats the output file" in stderr


def test_no_row_in_the_declared_domain_fails_before_the_charge(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    df = pd.read_csv(tmp_path / "people.csv")
    df["edu"] = "zz"
    df.to_csv(tmp_path / "people.csv", index=False)
    ledger = tmp_path / "ledger.sqlite"
    code, _, stderr = _run("release", str(spec), "--out", str(tmp_path / "out"), "--ledger", str(ledger), "--yes")
    assert code == 1 and "nothing was spent" in stderr and "declared categories" in stderr
    assert not ledger.exists() or not Ledger.datasets(ledger) or not list(Ledger(ledger, "people").receipts)
    assert not os.path.exists(tmp_path / "out")


def test_renderers_escape_every_text() -> None:
    from dpkit.report import render_report

    rows = [{"query": "q", "statistic": "marginals", "column": "a,b", "bin": "a=<x>, b=\"&\"", "value": 5.0,
             "lo": float("nan"), "hi": float("nan"), "mechanism": "direct: ... noise std 2 <b>"},
            {"query": "q", "statistic": "marginals", "column": "a,b", "bin": "a=<y>, b=1", "value": 7.0,
             "lo": float("nan"), "hi": float("nan"), "mechanism": "direct: ... noise std 2 <b>"},
            {"query": "s", "statistic": "synthetic", "column": "a,<b>", "bin": "rows", "value": 10.0,
             "lo": float("nan"), "hi": float("nan"), "mechanism": "mst(rho=1): <script> -> x.csv"},
            {"query": "s", "statistic": "synthetic", "column": "a,<b>", "bin": "TV <b>", "value": 0.1,
             "lo": float("nan"), "hi": float("nan"), "mechanism": "post-processing: x; noise std 2 <i>"}]
    html = render_report(rows, title="t", dataset="d")
    for raw in ("<x>", "<script>", "std 2 <b>", "a,<b>", "TV <b>", "<i>"):
        assert raw not in html
    assert "a=&lt;x&gt;" in html and "&lt;script&gt;" in html
    assert "expected L1 error of the noisy marginal at most 4" in html
    assert "never from the private data" in html
