"""Property-based fuzzing of the ``dpkit`` command line (issue #11).

Random, huge and deeply nested TOML specs and random argv go through ``dpkit.cli.main([...])``. Whatever the
input: the exit code is one of 0..5, the call returns within a deadline, nothing raises, no traceback is
printed, and a call that exits non-zero charges nothing (the ledger's receipts are unchanged). The stand-in
engine of ``tests/cli/fakes.py`` is used where no real data is needed. ``DPKIT_FULL=1`` runs more examples.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.cli.fakes import ADULT_SPEC, FakeEngine
from tests.conftest import sized

from dpkit.cli import main

EXIT_CODES = {0, 1, 2, 3, 4, 5}
#: The stand-in spec with a lifetime budget large enough for many successful releases in one fuzz run.
BASE = ADULT_SPEC.replace("[budget]\nepsilon = 1.0", "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 1e9 }")
DEADLINE_S = 20.0
FUZZ = settings(max_examples=sized(80, 800), deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                     HealthCheck.function_scoped_fixture])  # one box per test


class _Box:
    """One scratch folder and one ledger for a whole fuzz test (hypothesis examples cannot use tmp_path)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dpkit-fuzz-cli-"))
        self.ledger = self.root / "ledger.sqlite"

    def fresh(self, name: str) -> Path:
        return self.root / f"{name}-{uuid.uuid4().hex[:12]}"

    def receipts(self) -> int:
        if not self.ledger.exists():
            return 0
        conn = sqlite3.connect(f"file:{self.ledger}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return conn.execute("SELECT COUNT(*) FROM receipts").fetchone()[0] if "receipts" in tables else 0
        finally:
            conn.close()


@pytest.fixture
def box(monkeypatch: pytest.MonkeyPatch) -> Any:
    b = _Box()
    monkeypatch.setenv("DPKIT_LEDGER", str(b.ledger))
    monkeypatch.setenv("XDG_DATA_HOME", str(b.root / "xdg"))
    monkeypatch.setenv("HOME", str(b.root / "home"))
    monkeypatch.delenv("DPKIT_DEBUG", raising=False)
    monkeypatch.chdir(b.root)
    yield b
    shutil.rmtree(b.root, ignore_errors=True)


def _call(box: _Box, argv: list[str], engine: Any = None) -> tuple[int, str]:
    """Run the CLI; check the promises; return (code, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    before = box.receipts()
    t0 = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):  # argparse writes to sys.stderr
        code = main(argv, engine=engine if engine is not None else FakeEngine(), stdout=out, stderr=err,
                    stdin=io.StringIO("n\n"))
    elapsed = time.monotonic() - t0
    text = out.getvalue() + err.getvalue()
    assert code in EXIT_CODES, (code, argv, text[-2000:])
    assert elapsed < DEADLINE_S, (elapsed, argv)
    assert "Traceback" not in text, text[-3000:]
    if code != 0:
        assert box.receipts() == before, (code, argv, text[-2000:])  # a refused or failed call charges nothing
    with contextlib.suppress(Exception):  # outside a hypothesis test there is nothing to record
        # --hypothesis-show-statistics shows the mix of commands and exit codes
        event(f"{next((a for a in argv if a in ('release', 'plan', 'ledger')), '-')}: exit {code}")
    return code, err.getvalue()


# ----------------------------------------------------------------------------------------------
# strategies

_KEYS = ["name", "description", "data", "source", "dataset", "nan_policy", "allow_known_source", "privacy", "unit",
         "column", "max_rows", "budget", "epsilon", "delta", "rho", "ledger", "path", "total", "output", "dir",
         "formats", "query", "stat", "bounds", "edges", "categories", "filter", "derive", "group_by", "keys",
         "weight", "levels", "statistics", "domain", "postprocess", "diagnostics", "x", "__class__"]

_scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([0, -1, 1, 10**18, 2**63 - 1, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0, float("nan"), float("inf")]),
    st.text(max_size=30),
    st.sampled_from(["adult", "private", "row", "user", "count", "mean", "histogram", "age", "sex", "raise",
                     "drop", "csv", "json", "parquet", "/dev/zero", "../../etc/passwd", "", " ", "=1+1",
                     "age > 30", "(" * 60 + "age" + ")" * 60, "__import__('os')"]),
)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in v
                             if ord(c) < 0xD800 or ord(c) > 0xDFFF) + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    assert isinstance(v, dict)
    return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"


def _toml_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else _toml_value(k)


_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)), max_leaves=12)


_numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(2**70), 2**70),
                   st.floats(min_value=1e-3, max_value=10.0), st.sampled_from([0, 1, 2, 0.5, 1e-300, 1e300]))


@st.composite
def _mutated_spec(draw: st.DrawFn) -> str:
    """The valid stand-in spec with 0-3 edits: a number changed (often still valid), a key replaced by a random
    value, or a random key added (at the top, in [budget], in [data], in a query)."""
    lines = BASE.strip("\n").split("\n")
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["number", "number", "replace", "insert"]))
        where = draw(st.integers(0, len(lines) - 1))
        numeric = [i for i, ln in enumerate(lines) if "=" in ln and any(c.isdigit() for c in ln.split("=")[1])]
        if kind == "number" and numeric:
            i = draw(st.sampled_from(numeric))
            head, _, tail = lines[i].partition("=")
            lines[i] = head + "= " + (_toml_value(draw(_numbers)) if "[" not in tail else
                                      _toml_value(draw(st.lists(_numbers, min_size=0, max_size=6))))
        elif kind == "replace" and "=" in lines[where]:
            lines[where] = lines[where].split("=")[0] + "= " + _toml_value(draw(_values))
        else:
            lines.insert(where, f"{_toml_key(draw(st.sampled_from(_KEYS)))} = {_toml_value(draw(_values))}")
    return "\n".join(lines) + "\n"


@st.composite
def _nested_spec(draw: st.DrawFn) -> str:
    depth = draw(st.sampled_from([10, 100, 999, 1000, 3000, 20000]))
    kind = draw(st.sampled_from(["array", "inline", "filter", "edges"]))
    if kind == "array":
        return BASE + "\n[domain]\nx = " + "[" * depth + "]" * depth + "\n"
    if kind == "inline":
        return BASE.replace("[budget]\nepsilon = 1.0", "[budget]\nepsilon = " + "{ a = " * depth + "1"
                                  + " }" * depth)
    if kind == "filter":
        return BASE.replace('name = "by sex"', 'name = "by sex"\nfilter = "' + "(" * depth + "age"
                                  + ")" * depth + ' > 3"')
    return BASE.replace("edges = [0, 30, 60, 100]", "edges = [" + ", ".join(str(i) for i in range(depth))
                              + "]")


@st.composite
def _huge_spec(draw: st.DrawFn) -> str:
    size = draw(st.sampled_from([10_000, 600_000, (1 << 20) - 200, (1 << 20) + 1, 3 << 20]))
    kind = draw(st.sampled_from(["comment", "name", "description"]))
    if kind == "comment":
        return BASE + "#" + "x" * size + "\n"
    return BASE.replace('name = "test release"', f'{kind} = "' + "n" * size + '"\nname = "t"', 1) \
        if kind == "description" else BASE.replace('name = "test release"', 'name = "' + "n" * size + '"')


_spec_text = st.one_of(_mutated_spec(), _nested_spec(), _huge_spec(), st.text(max_size=300),
                       st.binary(max_size=300).map(lambda b: b.decode("latin-1")))


# ----------------------------------------------------------------------------------------------
# properties


@FUZZ
@given(text=_spec_text, command=st.sampled_from(["plan", "release"]))
def test_fuzz_specs_never_raise_and_never_charge_on_failure(box: _Box, text: str, command: str) -> None:
    spec = box.fresh("spec").with_suffix(".toml")
    spec.write_bytes(text.encode("utf-8", "surrogatepass"))
    argv = [command, str(spec)] + (["--out", str(box.fresh("out")), "--yes"] if command == "release" else [])
    code, err = _call(box, argv)
    if code == 2:
        assert err.startswith("dpkit:"), err[:500]


_tokens = st.one_of(
    st.sampled_from(["release", "plan", "ledger", "show", "--out", "--ledger", "--seed", "--yes", "-y", "--replace",
                     "--progress", "--dataset", "--help", "--version", "-", "--", "uci-adult", "/dev/zero", "/",
                     "/nonexistent/x.toml", "SPEC", "OUT", "LEDGER", "-1", "0", str(2**128), "1e999", "nan"]),
    st.text(max_size=20).filter(lambda s: "\x00" not in s),
)


_prefixes = st.sampled_from([[], ["release", "SPEC", "--out", "OUT"], ["release", "SPEC", "--out", "OUT", "--yes"],
                             ["plan", "SPEC"], ["ledger", "show"], ["ledger", "show", "--ledger", "LEDGER"]])


@FUZZ
@given(prefix=_prefixes, rest=st.lists(_tokens, max_size=6))
def test_fuzz_argv_never_raises(box: _Box, prefix: list[str], rest: list[str]) -> None:
    argv = prefix + rest
    spec = box.root / "valid.toml"
    if not spec.exists():
        spec.write_text(ADULT_SPEC.replace("[budget]\nepsilon = 1.0",
                                           "[budget]\nepsilon = 1.0\n[ledger]\ntotal = { epsilon = 1e9 }"))
    subst = {"SPEC": str(spec), "OUT": str(box.fresh("out")), "LEDGER": str(box.ledger)}
    _call(box, [subst.get(a, a) for a in argv])


def test_fuzz_failures_after_a_paid_release_charge_nothing(box: _Box) -> None:
    """A spent dataset, then hostile repeats: exit 3 / 2 / 4, never another receipt."""
    spec = box.root / "spec.toml"
    spec.write_text(ADULT_SPEC)
    out = box.fresh("out")
    assert _call(box, ["release", str(spec), "--out", str(out), "--yes"])[0] == 0
    assert box.receipts() == 1
    for argv in (["release", str(spec), "--out", str(out), "--yes"],
                 ["release", str(spec), "--out", str(box.fresh("o")), "--yes"],
                 ["release", str(spec), "--out", str(out), "--yes", "--replace"],
                 ["release", str(spec), "--out", str(box.fresh("o")), "--ledger", str(box.ledger), "--yes"]):
        assert _call(box, argv)[0] == 3
    renamed = box.root / "renamed.toml"
    renamed.write_text(ADULT_SPEC.replace('source = "adult"', 'source = "adult"\ndataset = "other-name"'))
    assert _call(box, ["release", str(renamed), "--out", str(box.fresh("o")), "--yes"])[0] == 4
    assert box.receipts() == 1


@pytest.mark.parametrize("depth", [60, 1000, 20000])
@pytest.mark.parametrize("key", ["filter", "derive"])
def test_deep_expressions_with_the_real_engine(box: _Box, depth: int, key: str) -> None:
    pytest.importorskip("dpkit.tables", reason="the tables extra is not installed")
    expr = "(" * depth + "age" + ")" * depth
    body = f'filter = "{expr} > 3"\n' if key == "filter" else f'derive = {{ x = "{expr}" }}\n'
    spec = box.root / f"deep-{key}-{depth}.toml"
    spec.write_text('[budget]\nepsilon = 0.5\n[[query]]\nname = "q"\n' + body + 'stat = "count"\n')
    for argv in (["plan", str(spec)], ["release", str(spec), "--out", str(box.fresh("o")), "--yes"]):
        code, err = _call(box, argv, engine=_real_engine())
        assert code == 2 and f"query[0].{key}" in err and ("nested too deeply" in err or "too long" in err), err
    assert box.receipts() == 0


def _real_engine() -> Any:
    from dpkit.cli.engine import TablesEngine

    return TablesEngine()


def test_spec_size_cap_is_exact(box: _Box) -> None:
    from dpkit.cli.spec import MAX_SPEC_BYTES

    base = ADULT_SPEC.encode()
    ok = box.root / "ok.toml"
    ok.write_bytes(base + b"#" * (MAX_SPEC_BYTES - len(base) - 1) + b"\n")
    assert os.path.getsize(ok) == MAX_SPEC_BYTES
    assert _call(box, ["plan", str(ok)])[0] == 0
    big = box.root / "big.toml"
    big.write_bytes(base + b"#" * (MAX_SPEC_BYTES - len(base)) + b"\n")
    code, err = _call(box, ["plan", str(big)])
    assert code == 2 and str(big) in err


_deid_tokens = st.one_of(
    st.sampled_from(["deid", "CSV", "AUX", "OUT", "--quasi-identifiers", "-q", "zip,age", "age", "zip,zip", "name",
                     "nope", "--k", "--l", "--sensitive", "--max-suppression", "--hierarchy", "age=bins:5",
                     "zip=digits", "name=prefix", "x=bogus", "--no-generalize", "--subsets", "--aux", "--link-on",
                     "--aux-keys", "--epsilon", "--target-row", "--seed", "--out", "--replace", "--show-examples",
                     "-1", "0", "1", "2", str(2**70), "1e999", "nan", "inf", "-", "/", "/nonexistent/x.csv",
                     "/dev/zero"]),
    st.text(max_size=12).filter(lambda s: "\x00" not in s),
)
_FULL = ["deid", "CSV", "-q", "zip,age", "--out", "OUT"]
_deid_prefixes = st.sampled_from([["deid"], ["deid", "CSV"], ["deid", "CSV", "-q", "zip,age"], _FULL, _FULL,
                                  [*_FULL, "--k", "2"], [*_FULL, "--sensitive", "name", "--seed", "1"],
                                  ["deid", "CSV", "-q", "zip,age,name", "--aux", "AUX", "--out", "OUT"]])


@FUZZ
@given(prefix=_deid_prefixes, rest=st.lists(_deid_tokens, max_size=4))
def test_fuzz_deid_argv_never_raises(box: _Box, prefix: list[str], rest: list[str]) -> None:
    """``dpkit deid`` (issue #15): any argv on a small CSV exits 0..5 within the deadline, raises nothing and
    charges nothing (it spends no budget at all)."""
    pytest.importorskip("duckdb")
    csv = box.root / "people.csv"
    aux = box.root / "aux.csv"
    if not csv.exists():
        csv.write_text("zip,age,name\n" + "".join(f"{1000 + i % 7},{20 + i % 11},p{i}\n" for i in range(60)))
        aux.write_text("zip,age,name\n1000,20,p0\n1001,21,p1\n")
    subst = {"CSV": str(csv), "AUX": str(aux), "OUT": str(box.fresh("deid"))}
    code, _ = _call(box, [subst.get(a, a) for a in prefix + rest])
    event(f"deid: exit {code}")
