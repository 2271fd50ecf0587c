"""The engine boundary of dpkit.tables (issue #11): engine failures are typed, clean and cost nothing.

- A CSV whose numeric column holds a string past DuckDB's sniffing sample, or whose bytes are not UTF-8,
  makes DuckDB raise its own exception quoting the whole record ("Original Line: ..."). dpkit raises
  ``EngineError`` naming the source and (from its own per-column check) the column, with nothing chained.
- That failure happens in ``Session.check`` and at the start of ``Session.release``, BEFORE the charge,
  whatever the ``nan_policy``: nothing is spent.
- Deep expressions are refused with ``InvalidParameter`` naming the parameter, never ``RecursionError``.
"""

from __future__ import annotations

import gc
import traceback
from pathlib import Path

import pytest

pytest.importorskip("ibis")

from dpkit.core.errors import DPKitError, EngineError, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.noise.source import deterministic_source
from dpkit.tables import Session, _engine, unit_of

SENTINEL = "SENTINEL_7f3a9c"
GOOD_ROWS = 30_000  # past DuckDB's sniffing sample (20,480 rows)


def _late_bad_value_csv(path: Path) -> Path:
    """``GOOD_ROWS`` good rows, then the sentinel in the integer column ``age``."""
    with open(path, "w") as f:
        f.write("user_id,age,work\n")
        for i in range(GOOD_ROWS):
            f.write(f"{i},{20 + i % 50},Private\n")
        f.write(f"{GOOD_ROWS},{SENTINEL},Local-gov\n")
    return path


def _non_utf8_csv(path: Path, late: bool) -> Path:
    """A CSV with bytes that are not UTF-8 next to the sentinel (early: inside the sniffing sample)."""
    n = GOOD_ROWS if late else 10
    with open(path, "wb") as f:
        f.write(b"user_id,age,work\n")
        f.write("".join(f"{i},{20 + i % 50},Private\n" for i in range(n)).encode())
        f.write(f"{n},33,{SENTINEL}".encode() + b"\xff\xfe\x80" + f"{SENTINEL}\n".encode())
        f.write(f"{n + 1},34,Private\n".encode())
    return path


def _assert_clean(exc: BaseException) -> None:
    """No engine text anywhere: not in the message, not in a chained exception, not in the traceback."""
    assert exc.__cause__ is None and exc.__context__ is None
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    for bad in (SENTINEL, "Original Line", "Local-gov", "Conversion Error", "Invalid Input"):
        assert bad not in text, bad
    assert SENTINEL not in repr(exc.args)


def _query(s: Session):
    return s.query("q").count().mean("age", (0, 100))


@pytest.mark.parametrize("nan_policy", ["raise", "drop"])
def test_late_bad_value_is_engine_error_naming_the_column_before_the_charge(tmp_path, nan_policy):
    src = deterministic_source(1)
    s = Session(str(_late_bad_value_csv(tmp_path / "late.csv")), budget=PureDP(2.0), rng=src, nan_policy=nan_policy)
    assert s.columns["age"] == "int"  # the sniffer saw only good rows
    s.plan(_query(s), PureDP(1.0))  # plans read nothing
    with pytest.raises(EngineError) as ei:
        s.check(_query(s))
    assert ei.value.param == "source" and ei.value.column == "age"
    assert "does not parse" in str(ei.value)
    _assert_clean(ei.value)
    with pytest.raises(EngineError) as ei:
        s.release(_query(s), PureDP(1.0))
    assert ei.value.column == "age"
    _assert_clean(ei.value)
    # nothing charged, no receipt, no random byte drawn
    assert s.accountant.spent == PureDP(0.0) and s.accountant.receipts == ()


def test_bad_value_in_a_filter_column_is_found_too(tmp_path):
    s = Session(str(_late_bad_value_csv(tmp_path / "late.csv")), budget=PureDP(2.0), nan_policy="drop")
    q = s.query("q").filter("age > 30").count()
    with pytest.raises(EngineError) as ei:
        s.check(q)
    assert ei.value.column == "age"
    _assert_clean(ei.value)
    # a query that reads only good columns is unaffected
    s.check(s.query("ok").filter("user_id >= 0").count())


def test_non_utf8_inside_the_sniff_sample_fails_at_open(tmp_path):
    with pytest.raises(EngineError) as ei:
        Session(str(_non_utf8_csv(tmp_path / "early.csv", late=False)), budget=PureDP(1.0))
    assert "UTF-8" in str(ei.value) and ei.value.param == "source"
    _assert_clean(ei.value)


@pytest.mark.parametrize("nan_policy", ["raise", "drop"])
def test_non_utf8_past_the_sniff_sample_fails_before_the_charge(tmp_path, nan_policy):
    s = Session(str(_non_utf8_csv(tmp_path / "late.csv", late=True)), budget=PureDP(2.0), nan_policy=nan_policy)
    q = s.query("q").group_by("work", keys=["Private"]).count()
    for call in (lambda: s.check(q), lambda: s.release(q, PureDP(1.0))):
        with pytest.raises(EngineError) as ei:
            call()
        assert "UTF-8" in str(ei.value)
        _assert_clean(ei.value)
    assert s.accountant.spent == PureDP(0.0) and s.accountant.receipts == ()


def test_overflow_in_a_derived_column_fails_before_the_charge():
    import pandas as pd

    frame = pd.DataFrame({"user_id": range(100), "age": [987654321] * 100})
    s = Session(frame, budget=PureDP(2.0), rng=deterministic_source(2))
    for text in ("age * 987654321 * 987654321 * 987654321", "age + 9223372036854775000"):
        q = s.query("q").derive(big=text).sum("big", (0, 100))
        for call in (lambda q=q: s.check(q), lambda q=q: s.release(q, PureDP(1.0))):
            with pytest.raises(EngineError) as ei:
                call()
            assert "987654321" not in str(ei.value) and "range" in str(ei.value)
            _assert_clean(ei.value)
    assert s.accountant.spent == PureDP(0.0) and s.accountant.receipts == ()
    # the derived value is checked on the rows the filter keeps (none here), as the release computes it
    res = s.release(s.query("q").derive(big="age * age * age").filter("user_id > 1000").sum("big", (0, 100)),
                    PureDP(1.0))
    assert len(res) == 1


def test_corrupt_parquet_and_unreadable_frames(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + SENTINEL.encode() * 10)
    with pytest.raises(EngineError) as ei:
        Session(str(bad), budget=PureDP(1.0))
    _assert_clean(ei.value)

    import pandas as pd

    frame = pd.DataFrame({"x": [object(), object()]})  # DuckDB cannot register Python objects
    with pytest.raises(WrongType) as wi:
        Session(frame, budget=PureDP(1.0))
    assert wi.value.__cause__ is None and wi.value.__context__ is None


def test_folder_and_nul_paths_are_typed(tmp_path):
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(InvalidParameter):
        Session(str(tmp_path / "dir.csv"), budget=PureDP(1.0))
    with pytest.raises(DPKitError):
        Session("a\x00b.csv", budget=PureDP(1.0))


# ------------------------------------------------------------------------------------------- guarded (unit)
def _raiser(exc: BaseException):
    def fn():
        raise exc
    return fn


@pytest.mark.parametrize(("name", "kind"), [
    ("ConversionException", _engine.CONVERT),
    ("InvalidInputException", _engine.INPUT),
    ("IOException", _engine.IO),
    ("OutOfMemoryException", _engine.MEMORY),
    ("OutOfRangeException", _engine.RANGE),
    ("BinderException", _engine.FAILED),
])
def test_guarded_maps_duckdb_classes_by_class_never_by_text(name, kind):
    import duckdb

    exc = getattr(duckdb, name)(f"Original Line: 24,{SENTINEL},Local-gov")
    with pytest.raises(EngineError) as ei:
        _engine.guarded(_raiser(exc), what="reading the source", column="age")
    assert str(ei.value) == f"source (column 'age'): reading the source failed: {kind}"
    _assert_clean(ei.value)


def test_guarded_memory_error_and_what_passes_through():
    with pytest.raises(EngineError) as ei:
        _engine.guarded(_raiser(MemoryError(SENTINEL)))
    assert _engine.MEMORY in str(ei.value)
    _assert_clean(ei.value)
    for exc in (KeyboardInterrupt(), RecursionError(), InvalidParameter("x", "y")):
        with pytest.raises(type(exc)):
            _engine.guarded(_raiser(exc))
    assert _engine.guarded(lambda: 42) == 42


def test_guarded_keeps_no_reference_to_the_engine_exception():
    class Marked(Exception):
        pass

    with pytest.raises(EngineError) as ei:
        _engine.guarded(_raiser(Marked(SENTINEL)))
    err = ei.value
    del ei
    gc.collect()
    assert not [o for o in gc.get_referrers(err) if isinstance(o, Marked)]
    assert err.__cause__ is None and err.__context__ is None and SENTINEL not in str(err)


def test_utf8_check():
    import gzip
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        ok, bad, gz = Path(d, "ok.csv"), Path(d, "bad.csv"), Path(d, "bad.csv.gz")
        ok.write_text("a,b\n1,é\n", encoding="utf-8")
        bad.write_bytes(b"a,b\n1,\xe9\n")
        gz.write_bytes(gzip.compress(b"a,b\n1,\xe9\n"))
        assert _engine.decodes_as_utf8(str(ok))
        assert not _engine.decodes_as_utf8(str(bad)) and not _engine.decodes_as_utf8(str(gz))


# ------------------------------------------------------------------------------------------- deep expressions
DEEP = [
    "(" * 5000 + "age" + ")" * 5000,
    "(" * 60 + "age" + ")" * 60 + " > 1",
    "not " * 2000 + "age > 1",
    "not " * 150 + "age > 1",
    "+".join(["age"] * 100_000) + " > 1",
    "+".join(["age"] * 2000) + " > 1",
    "+".join(["age"] * 150) + " > 1",
    "-" * 3000 + "age > 1",
    "**".join(["age"] * 400) + " > 1",
    "age if " * 200 + "True" + " else age" * 200 + " > 1",
]


@pytest.mark.parametrize("text", DEEP, ids=lambda t: f"{t[:12]}..{len(t)}")
def test_deep_expressions_are_refused_typed(text):
    s = Session("adult", budget=PureDP(1.0))
    with pytest.raises(InvalidParameter) as ei:
        s.query().filter(text)
    assert ei.value.param == "expression"
    with pytest.raises(InvalidParameter) as ei:
        s.query().derive(x=text)
    assert ei.value.param == "x"


def test_chained_derives_are_capped_and_moderate_depth_still_runs():
    s = Session("adult", budget=PureDP(5.0), rng=deterministic_source(3))
    q = s.query()
    with pytest.raises(InvalidParameter) as ei:
        for i in range(40):
            q = q.derive(**{f"d{i}": ("age" if i == 0 else f"d{i - 1}") + " + 1" * 5})
    assert ei.value.param.startswith("d")
    with pytest.raises(InvalidParameter):
        s.query().derive(a="+".join(["age"] * 60)).derive(b="+".join(["a"] * 60))
    with pytest.raises(InvalidParameter):
        s.query().derive(a="+".join(["age"] * 60)).filter("+".join(["a"] * 60) + " > 3")
    # a 90-deep expression compiles and runs on DuckDB
    res = s.release(s.query().derive(x="+".join(["age"] * 90)).filter("x > 3").count(), PureDP(0.5))
    assert len(res) == 1


def test_user_unit_release_on_bad_csv_fails_before_the_charge(tmp_path):
    s = Session(str(_late_bad_value_csv(tmp_path / "late.csv")), budget=PureDP(2.0),
                unit=unit_of("user_id", max_rows=2), nan_policy="drop")
    with pytest.raises(EngineError) as ei:
        s.release(s.query().group_by("work", keys=["Private"]).mean("age", (0, 100)), PureDP(1.0))
    assert ei.value.column == "age"
    _assert_clean(ei.value)
    assert s.accountant.spent == PureDP(0.0) and s.accountant.receipts == ()
