"""The same query with the same seed gives the same release on every source format (one code path)."""

from __future__ import annotations

import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from tests.tables.conftest import STATES, users_frame  # noqa: E402

from dpkit import PureDP, deterministic_source  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402


def _release(source):
    s = Session(source, budget=PureDP(1.0), unit=unit_of("user_id", max_rows=3, max_groups=1),
                rng=deterministic_source(42))
    q = (s.query("all formats").filter("age >= 20").derive(decade="age // 10")
         .group_by("state", keys=list(STATES)).count().sum("income", bounds=(0, 100)).mean("age", bounds=(0, 100))
         .quantiles("income", [0.5], bounds=(0, 150), bins=64).histogram("decade", edges=[2, 4, 6, 8, 10])
         .count_distinct())
    return s.release(q, budget=PureDP(1.0))


def test_same_release_on_every_source(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pl = pytest.importorskip("polars")
    frame = users_frame()
    csv = tmp_path / "users.csv"
    frame.to_csv(csv, index=False)
    pq = tmp_path / "users.parquet"
    frame.to_parquet(pq, index=False)
    ref = _release(frame)
    assert len(ref) == 5 * 4 + 5 * 4 + 5  # count, sum, mean, quantile, distinct + 4 histogram bins per key
    for source in (str(csv), str(pq), pl.from_pandas(frame), pa.Table.from_pandas(frame)):
        got = _release(source)
        pd.testing.assert_frame_equal(got, ref)


def test_adult_builtin():
    s = Session("adult", budget=PureDP(1.0), rng=deterministic_source(1))
    assert s.columns["age"] == "int" and s.columns["sex"] == "string"
    res = s.release(s.query("sex").group_by("sex", keys=["Female", "Male"]).count(), budget=PureDP(1.0))
    assert abs(res["value"].sum() - 32_561) < 50


# ------------------------------------------------------------------ DuckDB collations: exact string equality
def _nocase_table(default_collation: bool = False):
    ibis = pytest.importorskip("ibis")
    con = ibis.duckdb.connect()
    if default_collation:
        con.raw_sql("SET default_collation = 'nocase'")
        con.raw_sql("CREATE TABLE t (g VARCHAR, u VARCHAR, x INTEGER)")
    else:
        con.raw_sql("CREATE TABLE t (g VARCHAR COLLATE NOCASE, u VARCHAR COLLATE NOCASE, x INTEGER)")
    # 1000 'A', 2000 'a', 500 'b'; unit ids 'P0'/'p0', 'P1'/'p1', ...: under NOCASE each id has two spellings
    con.raw_sql("INSERT INTO t SELECT CASE WHEN i < 1000 THEN 'A' WHEN i < 3000 THEN 'a' ELSE 'b' END, "
                "CASE WHEN i % 2 = 0 THEN 'P' ELSE 'p' END || CAST(i // 2 AS VARCHAR), i % 7 FROM range(3500) r(i)")
    return con.table("t")


def _values(res):
    return dict(zip(res["group"], res["value"], strict=True))


@pytest.mark.parametrize("default_collation", [False, True])
def test_collated_strings_are_compared_exactly(default_collation):
    """A NOCASE column (declared, or the connection's default collation) groups 'A' and 'a' under one label the
    engine picks from the data; dpkit compares strings byte for byte: public key 'a' counts the 2000 'a' rows
    (it released about 0 before), private keys release 'A' and 'a' apart, and a filter is exact too."""
    from dpkit import ApproxDP

    s = Session(_nocase_table(default_collation), budget=ApproxDP(100.0, 1e-6), rng=deterministic_source(0))
    got = _values(s.release(s.query("k").group_by("g", keys=["a", "b"]).count(), PureDP(10.0)))
    assert abs(got["g=a"] - 2000) < 20 and abs(got["g=b"] - 500) < 20
    got = _values(s.release(s.query("p").group_by("g", keys="private").count(), ApproxDP(10.0, 1e-7)))
    assert set(got) == {"g=A", "g=a", "g=b"}
    assert abs(got["g=A"] - 1000) < 20 and abs(got["g=a"] - 2000) < 20
    got = _values(s.release(s.query("f").filter("g == 'a'").count(), PureDP(10.0)))
    assert abs(got[""] - 2000) < 20


def test_collated_unit_column_keeps_its_collation():
    """The privacy unit's column is left as declared: 'P7' and 'p7' are one unit under NOCASE, so max_rows=1
    keeps one row of the two (1750 units), never two (3500 if the ids were split)."""
    s = Session(_nocase_table(), budget=PureDP(100.0), unit=unit_of("u", max_rows=1), rng=deterministic_source(0))
    got = _values(s.release(s.query("u").count(), PureDP(10.0)))
    assert abs(got[""] - 1750) < 20
