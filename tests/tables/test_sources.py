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
