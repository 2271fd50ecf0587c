"""The marginals and synthetic kinds on Spark (and PostgreSQL when configured): the same seed gives the same
release as on DuckDB (one group-by of declared categories and bins per statistic; rows in a canonical order)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

import dpkit  # noqa: E402
from dpkit.noise import deterministic_source  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402

from .conftest import STATES  # noqa: E402


def _release(source: Any) -> tuple[Any, Any]:
    s = Session(source, budget=dpkit.ZCDP(100.0), unit=unit_of("user_id", max_rows=3), rng=deterministic_source(8))
    doms = {"state": list(STATES)}
    bins = {"income": [0, 50, 100, 151], "age": [18, 40, 65, 90]}
    q = (s.query("q").marginals(["state", "income", "age"], domains=doms, bins=bins, consistent=False)
         .synthetic(["state", "income", "age"], domains=doms, bins=bins, rows=200, iters=50))
    res = s.release(q, budget=dpkit.ZCDP(2.0))
    return res, res.attrs["synthetic"]["synthetic(state,income,age)"].frame


@pytest.mark.parametrize("engine", ["spark", "postgres"])
def test_same_release_as_duckdb(engine: str, users: Any, to_engine: Any) -> None:
    light = users[users.groupby("user_id")["user_id"].transform("size") <= 3].reset_index(drop=True)
    got, got_syn = _release(to_engine(light, engine))
    ref, ref_syn = _release(to_engine(light, "duckdb"))
    pd.testing.assert_frame_equal(got.drop(columns=["mechanism"]), ref.drop(columns=["mechanism"]))
    pd.testing.assert_frame_equal(got_syn, ref_syn)
