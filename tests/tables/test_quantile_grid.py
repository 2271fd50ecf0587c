"""Table quantiles on an integer column use the integers of the bounds (issue #16): exact integer answers, as
``dpkit.stats.quantile`` does for integer-typed data; float columns keep the 1,024 buckets."""

from __future__ import annotations

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("ibis")

from dpkit import PureDP, deterministic_source  # noqa: E402
from dpkit.tables import Session  # noqa: E402

AGES = np.repeat(np.arange(100), 100)  # 10,000 rows, 100 per value


def _release(query_fn, seed=3):
    df = pd.DataFrame({"age": AGES.astype(np.int64), "agef": AGES.astype(float)})
    s = Session(df, budget=PureDP(100.0), rng=deterministic_source(seed))
    return s.release(query_fn(s.query()), budget=PureDP(100.0))


def test_integer_column_answers_on_the_integer_grid():
    # at eps 100/3 per level the neighbouring integers (100 rows away in rank) have probability ~e^-800
    # levels away from the rank boundaries between values (0.25 is a tie of 24 and 25)
    res = _release(lambda q: q.quantiles("age", [0.255, 0.505, 0.755], bounds=(0, 100)))
    assert res["value"].tolist() == [25.0, 50.0, 75.0]


def test_float_column_keeps_the_buckets_and_bins_can_be_forced():
    res = _release(lambda q: q.quantiles("agef", [0.505], bounds=(0, 100)))
    width = 100 / 1024
    v = float(res["value"].iloc[0])
    assert abs(v - 50.0) < 2 * width and ((v / width) - 0.5) % 1 == pytest.approx(0.0, abs=1e-9)
    forced = _release(lambda q: q.quantiles("age", [0.505], bounds=(0, 100), bins=10))
    assert forced["value"].iloc[0] == pytest.approx(55.0)  # bucket [40, 50)'s midpoint, as before


def test_grid_is_public_schema_only():
    """The choice reads the schema and the bounds, never the data: non-integer bounds or a span above 2^16 use
    the buckets even on an integer column."""
    res = _release(lambda q: q.quantiles("age", [0.505], bounds=(0, 100.5)))
    v = float(res["value"].iloc[0])
    assert v != 50.0 and abs(v - 50.0) < 2 * 100.5 / 1024  # a bucket midpoint near 50
    res = _release(lambda q: q.quantiles("age", [0.505], bounds=(0, 2**17)))
    assert float(res["value"].iloc[0]) == 64.0  # the midpoint of the first of 1,024 buckets of width 128
