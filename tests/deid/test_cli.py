"""``dpkit deid``: end to end to an HTML report in tmp_path; exit codes; no data value in messages or report."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from dpkit.cli import main

SECRET = "Zyx987654"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def csv(tmp_path):
    g = np.random.default_rng(5)  # rng-ok: test data
    n = 400
    lines = ["name,dob,zip,sex,income"]
    for i in range(n):
        name = SECRET if i == 0 else f"p{i}"
        lines.append(f"{name},{g.integers(1, 13)}/{g.integers(1, 29)}/19{g.integers(50, 60)},"
                     f"{g.integers(10000, 10040)},{g.choice(['F', 'M'])},{g.choice(['<=50K', '>50K'])}")
    p = tmp_path / "people.csv"
    p.write_text("\n".join(lines) + "\n")
    aux = tmp_path / "aux.csv"
    aux.write_text("\n".join(["Name,DOB,ZIP"] + [",".join(r.split(",")[:3]) for r in lines[1:101]]) + "\n")
    return p, aux


def test_report_to_a_folder_and_a_file(csv, tmp_path):
    p, aux = csv
    code, out, err = run("deid", str(p), "--quasi-identifiers", "dob,zip,sex", "--k", "3", "--sensitive", "income",
                         "--hierarchy", "dob=dates", "--hierarchy", "zip=digits", "--aux", str(aux),
                         "--link-on", "dob,zip", "--aux-keys", "DOB,ZIP", "--seed", "1", "--out",
                         str(tmp_path / "rep"))
    assert code == 0, err
    html = (tmp_path / "rep" / "deid_report.html").read_text()
    for section in ("uniqueness", "k-anonymity", "generalization", "linkage", "differencing", "why-dp"):
        assert f'id="{section}"' in html
    assert SECRET not in html and "<script" not in html and "src=" not in html and "href=" not in html
    assert "ℓ-diversity" in html and "re-identified" in html
    summ = json.loads((tmp_path / "rep" / "deid_summary.json").read_text())
    assert summ["linkage"]["aux_rows"] == 100 and summ["k_anonymity"]["k"] == 3
    assert "re-identified" in out
    # a second run refuses to overwrite, --replace replaces
    assert run("deid", str(p), "-q", "dob,zip", "--out", str(tmp_path / "rep"))[0] == 2
    assert run("deid", str(p), "-q", "dob,zip", "--out", str(tmp_path / "rep"), "--replace")[0] == 0
    code, _, _ = run("deid", str(p), "-q", "dob,zip", "--out", str(tmp_path / "one.html"), "--show-examples")
    assert code == 0
    one = (tmp_path / "one.html").read_text()
    assert 'id="has-examples"' in one and 'id="examples"' in one


def test_bundled_adult(tmp_path):
    code, out, err = run("deid", "adult", "-q", "age,sex,race", "--subsets", "2", "--out", str(tmp_path / "a.html"))
    assert code == 0, err and "32,561 rows" in out


@pytest.mark.parametrize("argv, code", [
    (["--quasi-identifiers", "dob,nope"], 2),
    (["--quasi-identifiers", ""], 2),
    (["--quasi-identifiers", "dob,dob"], 2),
    (["-q", "dob", "--k", "0"], 2),
    (["-q", "dob", "--max-suppression", "1.5"], 2),
    (["-q", "dob", "--hierarchy", "dob=weird"], 2),
    (["-q", "dob", "--hierarchy", "zip=bins"], 2),
    (["-q", "dob", "--hierarchy", "dob=bins:-1"], 2),
    (["-q", "dob", "--link-on", "dob"], 2),
    (["-q", "dob", "--sensitive", "dob"], 2),
    (["-q", "dob", "--epsilon", "0"], 2),
    (["-q", "dob", "--target-row", "100000"], 2),
    (["-q", "dob", "--k", "x"], 2),
    ([], 2),
])
def test_bad_flags(csv, tmp_path, argv, code):
    p, _ = csv
    c, _, err = run("deid", str(p), *argv, "--out", str(tmp_path / "r.html"))
    assert c == code
    assert SECRET not in err and not (tmp_path / "r.html").exists()


def test_missing_unreadable_and_wrong_files(tmp_path):
    assert run("deid", str(tmp_path / "none.csv"), "-q", "a", "--out", str(tmp_path / "r.html"))[0] == 2
    (tmp_path / "x.txt").write_text("a\n1\n")
    assert run("deid", str(tmp_path / "x.txt"), "-q", "a", "--out", str(tmp_path / "r.html"))[0] == 2
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet " + SECRET.encode())
    code, _, err = run("deid", str(bad), "-q", "a", "--out", str(tmp_path / "r.html"))
    assert code == 1 and SECRET not in err and "Traceback" not in err
    ok = tmp_path / "ok.csv"
    ok.write_text("a\n1\n2\n")
    (tmp_path / "folder.html").mkdir()
    assert run("deid", str(ok), "-q", "a", "--out", str(tmp_path / "folder.html"))[0] == 2
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    code, _, err = run("deid", str(ok), "-q", "a", "--out", str(blocker / "r.html"))
    assert code == 1
