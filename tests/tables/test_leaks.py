"""Sentinel leak tests through every engine (issue #11): values injected into the data never appear in any
error (message, ``__cause__``/``__context__`` chain, formatted traceback), warning, log line (DEBUG),
stdout/stderr, receipt, ledger file, report or results file, unless released with noise.

The rule, precisely:

- ``RARE`` is a group key that only ONE privacy unit creates, released under private keys (partition
  selection). It may be released only with probability <= delta/G (seeded here: not released), so it must
  appear NOWHERE. Same for the user id ``SENT_ID`` (the privacy unit's id is never released), the value
  ``SENT_NUM`` (clamped to public bounds; only noisy aggregates are released) and the sentinel in a bad CSV
  cell or next to non-UTF-8 bytes (an ``EngineError``, before any charge).
- ``POPULAR`` is a group key that 400 units share: it passes the noisy threshold, and a released private
  key is data the analyst asked for. It is allowed in the RESULTS only (the result frame, results.csv/json/
  parquet, report.html) and must appear nowhere else (errors, logs, warnings, receipts, ledger, CLI output).

Engines: DuckDB files (CSV, Parquet), frames (pandas, Polars, Arrow), an ibis DuckDB table, Spark (skips
without pyspark/Java unless DPKIT_TEST_REQUIRE=spark) and PostgreSQL (skips without DPKIT_TEST_POSTGRES_URL
unless DPKIT_TEST_REQUIRE=postgres). The CLI is driven for file sources (the only ones a spec can name).
"""

from __future__ import annotations

import io
import json
import logging
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit.cli import main as cli_main  # noqa: E402
from dpkit.core.errors import DPKitError  # noqa: E402
from dpkit.core.privacy import ApproxDP, PureDP  # noqa: E402
from dpkit.noise.source import deterministic_source  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402

from .conftest import STATES, users_frame  # noqa: E402

RARE = "SENTINEL_7f3a9c"
POPULAR = "SENTPOP_5d1e0b"
SENT_ID = 987654321
SENT_NUM = 987654321.123
# every textual form of the sentinels (the number also as its digits and in scientific notation)
NEEDLES = (RARE, "987654321", "9.87654321", "98765432")
ENGINES = ["csv", "parquet", "pandas", "polars", "arrow", "duckdb", "spark", "postgres"]


def sentinel_frame() -> Any:
    """The shared users table plus the sentinels: one unit (``SENT_ID``) alone in group ``RARE`` with the
    income ``SENT_NUM``, and 400 one-row units in group ``POPULAR``."""
    base = users_frame(seed=11, n_users=120)
    rare = pd.DataFrame({"user_id": [SENT_ID], "state": [RARE], "age": [50], "income": [SENT_NUM]})
    pop = pd.DataFrame({"user_id": range(10_000, 10_400), "state": [POPULAR] * 400, "age": [40] * 400,
                        "income": [50.0] * 400})
    also = pd.DataFrame({"user_id": [SENT_ID], "state": ["CA"], "age": [60], "income": [SENT_NUM]})
    return pd.concat([base, rare, pop, also], ignore_index=True)


class Sink:
    """Every text a run produced, by where it went (``results`` is the only place ``POPULAR`` may be)."""

    def __init__(self) -> None:
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, text: Any) -> None:
        self.texts.append((where, text if isinstance(text, str) else repr(text)))

    def error(self, exc: BaseException) -> None:
        seen = 0
        e: BaseException | None = exc
        while e is not None and seen < 20:  # the whole chain, suppressed context included
            self.add("error", f"{type(e).__name__}: {e} {e.args!r}")
            e = e.__cause__ or e.__context__
            seen += 1
        self.add("traceback", "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def call(self, fn: Callable[[], Any]) -> Any:
        """``fn()``; a dpkit error is recorded (and returned), any other exception fails the test."""
        try:
            return fn()
        except DPKitError as exc:
            self.error(exc)
            return exc

    def result(self, frame: Any) -> None:
        if isinstance(frame, BaseException) or frame is None:
            return
        self.add("results", frame.to_csv(index=False))
        self.add("attrs", json.dumps(frame.attrs, default=repr))

    def check(self, allowed_popular: tuple[str, ...] = ("results",)) -> None:
        for where, text in self.texts:
            for needle in NEEDLES:
                assert needle not in text, f"{needle!r} leaked into {where}"
            if where not in allowed_popular:
                assert POPULAR not in text, f"{POPULAR!r} (a released key) leaked into {where}"


@pytest.fixture
def sink(caplog, recwarn, capfd) -> Any:
    """A Sink that, at the end of the test, also takes DEBUG logs, warnings and the process's stdout/stderr."""
    s = Sink()
    caplog.set_level(logging.DEBUG)
    warnings.simplefilter("always")
    yield s
    out, err = capfd.readouterr()
    s.add("stdout", out)
    s.add("stderr", err)
    s.add("log", caplog.text)
    for rec in caplog.records:
        s.add("log", rec.getMessage())
    for w in recwarn.list:
        s.add("warning", str(w.message))
    s.check()


def _source(engine: str, frame: Any, tmp_path: Path, to_engine: Any) -> Any:
    if engine == "csv":
        p = tmp_path / "data.csv"
        frame.to_csv(p, index=False)
        return str(p)
    if engine == "arrow":
        pa = pytest.importorskip("pyarrow")
        return pa.Table.from_pandas(frame, preserve_index=False)
    return to_engine(frame, engine)


def _queries(s: Session) -> list[tuple[Any, Any]]:
    return [
        (s.query("private").group_by("state", keys="private").count().sum("income", (0, 100)),
         ApproxDP(1.0, 1e-6)),
        (s.query("public").group_by("state", keys=list(STATES)).count().mean("income", (0, 100))
         .quantiles("age", [0.5], bounds=(0, 100), bins=16).histogram("income", edges=[0, 50, 100]),
         PureDP(0.5)),
        (s.query("all").count_distinct().variance("income", (0, 100)), PureDP(0.5)),
    ]


@pytest.mark.parametrize("engine", ENGINES)
def test_sentinels_never_leak_through_the_python_api(engine, tmp_path, to_engine, sink):
    frame = sentinel_frame()
    src = _source(engine, frame, tmp_path, to_engine)  # before capture matters: the fixture's own logs are fine
    s = Session(src, budget=ApproxDP(10.0, 1e-5), unit=unit_of("user_id", max_rows=3), rng=deterministic_source(7))
    released_popular = False
    for q, b in _queries(s):
        sink.add("plan", s.plan(q, b).to_csv())
        sink.call(lambda q=q: s.check(q))
        res = sink.call(lambda q=q, b=b: s.release(q, b))
        assert not isinstance(res, BaseException), res  # these releases succeed
        sink.result(res)
        released_popular |= POPULAR in res.to_csv(index=False)
    assert released_popular  # the rule's allowed case really happens (400 units pass the threshold)
    # typed refusals whose inputs touch the sentinel columns
    sink.call(lambda: s.query("x").mean("state", (0, 1)))  # WrongType: a string column
    sink.call(lambda: s.query("x").filter("state == 1"))  # WrongType: compares a string with a number
    sink.call(lambda: s.query("x").group_by("state", keys=[RARE[:3]]).count())  # fine: public keys, not data
    sink.call(lambda: s.release(s.query("x").derive(big="user_id * user_id * user_id")
                                .sum("big", (0, 1)), PureDP(0.1)))  # an engine overflow (or a clamped sum)
    for r in s.accountant.receipts:
        sink.add("receipt", json.dumps(r.to_dict(), default=repr))
    sink.add("receipt", repr(s.accountant.receipts))


@pytest.mark.parametrize("engine", ["csv", "pandas", "spark", "postgres"])
def test_null_ids_and_missing_values_refused_without_values(engine, tmp_path, to_engine, sink):
    frame = sentinel_frame()
    frame.loc[frame.user_id == SENT_ID, "income"] = float("nan")
    frame["user_id"] = frame["user_id"].astype("float64")
    frame.loc[0, "user_id"] = float("nan")
    src = _source(engine, frame, tmp_path, to_engine)
    s = Session(src, budget=PureDP(2.0), unit=unit_of("user_id", max_rows=3))
    err = sink.call(lambda: s.release(s.query("q").mean("income", (0, 100)), PureDP(1.0)))
    assert isinstance(err, DPKitError) and s.accountant.receipts == ()
    s2 = Session(src, budget=PureDP(2.0))
    err = sink.call(lambda: s2.release(s2.query("q").group_by("state", keys=list(STATES)).mean("income", (0, 100)),
                                       PureDP(1.0)))
    assert isinstance(err, DPKitError) and s2.accountant.receipts == ()


def _bad_csv(path: Path, kind: str) -> Path:
    """30,000 good rows (past DuckDB's sniffing sample), then the sentinel in the numeric ``age`` column
    (``kind="value"``) or next to bytes that are not UTF-8 (``kind="utf8"``)."""
    with open(path, "wb") as f:
        f.write(b"user_id,state,age,income\n")
        f.write("".join(f"{i},CA,{20 + i % 50},{i % 100}\n" for i in range(30_000)).encode())
        if kind == "value":
            f.write(f"{SENT_ID},{RARE},{RARE},{SENT_NUM}\n".encode())
        else:
            f.write(f"{SENT_ID},{RARE}".encode() + b"\xff\xfe" + f"{RARE},50,{SENT_NUM}\n".encode())
    return path


@pytest.mark.parametrize("kind", ["value", "utf8"])
@pytest.mark.parametrize("nan_policy", ["raise", "drop"])
def test_bad_csv_sentinels_never_leak_and_nothing_is_charged(kind, nan_policy, tmp_path, sink):
    path = str(_bad_csv(tmp_path / "bad.csv", kind))
    s = sink.call(lambda: Session(path, budget=PureDP(2.0), nan_policy=nan_policy, rng=deterministic_source(1)))
    if isinstance(s, DPKitError):
        return
    q = s.query("q").group_by("state", keys=["CA"]).count().mean("age", (0, 100))
    sink.add("plan", s.plan(q, PureDP(1.0)).to_csv())
    assert isinstance(sink.call(lambda: s.check(q)), DPKitError)
    assert isinstance(sink.call(lambda: s.release(q, PureDP(1.0))), DPKitError)
    assert s.accountant.spent == PureDP(0.0) and s.accountant.receipts == ()


def test_mixed_type_pandas_column_never_leaks(sink):
    frame = pd.DataFrame({"user_id": [1, 2, 3], "age": [30, 40, RARE]})  # object column: ints and the sentinel
    s = sink.call(lambda: Session(frame, budget=PureDP(1.0)))
    if isinstance(s, Session):
        sink.call(lambda: s.release(s.query().mean("age", (0, 100)), PureDP(0.5)))


# ------------------------------------------------------------------------------------------------ the CLI
def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_main(list(argv), stdout=out, stderr=err, stdin=io.StringIO())
    return code, out.getvalue(), err.getvalue()


def _spec(tmp_path: Path, source: str, nan_policy: str = "raise") -> Path:
    p = tmp_path / "leak.toml"
    p.write_text(f'''name = "leak test"
[data]
source = "{source}"
dataset = "leak-{tmp_path.name}"
nan_policy = "{nan_policy}"
[privacy]
unit = "user"
column = "user_id"
max_rows = 3
[budget]
epsilon = 2.0
delta = 1e-6
[output]
formats = ["csv", "json"]
[[query]]
name = "private states"
group_by = "state"
keys = "private"
statistics = [{{ stat = "count" }}, {{ stat = "sum", column = "income", bounds = [0, 100] }}]
[[query]]
name = "public states"
group_by = "state"
keys = ["CA", "NY", "TX", "WA"]
statistics = [{{ stat = "mean", column = "income", bounds = [0, 100] }},
              {{ stat = "quantiles", column = "age", levels = [0.5], bounds = [0, 100] }}]
''')
    return p


def _files(sink: Sink, folder: Path, results: bool) -> None:
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            where = "results" if results and f.name.startswith(("results.", "report.")) else f"file {f.name}"
            sink.add(where, f.read_bytes().decode("utf-8", "replace"))


def _cli_sunk(sink, label, *argv):
    """Run the CLI, put its stdout and stderr in ``sink`` as ``<label> stdout/stderr``; ``(code, stderr)``."""
    code, o, e = _cli(*argv)
    sink.add(f"{label} stdout", o)
    sink.add(f"{label} stderr", e)
    return code, e


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_cli_release_never_leaks(fmt, tmp_path, sink):
    frame = sentinel_frame()
    data = tmp_path / "data"
    data.mkdir()
    path = data / f"users.{fmt}"
    frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path, index=False)
    spec = _spec(tmp_path, str(path))
    ledger = tmp_path / "ledger" / "ledger.sqlite"
    ledger.parent.mkdir()
    out = tmp_path / "out"
    code, e = _cli_sunk(sink, "cli plan", "plan", str(spec))
    assert code == 0, e
    code, e = _cli_sunk(sink, "cli", "release", str(spec), "--out", str(out), "--ledger", str(ledger), "--yes",
                        "--seed", "5")
    assert code == 0, e
    _files(sink, out, results=True)
    _files(sink, ledger.parent, results=False)
    released = "".join(t for w, t in sink.texts if w == "results")
    assert POPULAR in released  # the allowed case: a released private key, in the results and the report
    _cli_sunk(sink, "cli ledger", "ledger", "show", "--ledger", str(ledger))


@pytest.mark.parametrize("kind", ["value", "utf8"])
@pytest.mark.parametrize("nan_policy", ["raise", "drop"])
def test_cli_bad_csv_never_leaks_and_charges_nothing(kind, nan_policy, tmp_path, sink):
    path = _bad_csv(tmp_path / "bad.csv", kind)
    spec = _spec(tmp_path, str(path), nan_policy)
    ledger = tmp_path / "ledger" / "ledger.sqlite"
    ledger.parent.mkdir()
    out = tmp_path / "out"
    _cli_sunk(sink, "cli plan", "plan", str(spec))
    code, e = _cli_sunk(sink, "cli", "release", str(spec), "--out", str(out), "--ledger", str(ledger), "--yes",
                        "--seed", "5")
    assert code != 0 and "nothing was spent" in e, e
    if out.exists():
        _files(sink, out, results=False)
    if ledger.exists():
        from dpkit.core.ledger import Ledger

        with Ledger(ledger, f"leak-{tmp_path.name}") as led:
            assert list(led.receipts) == []
        _files(sink, ledger.parent, results=False)
