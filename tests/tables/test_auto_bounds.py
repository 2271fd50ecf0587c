"""bounds=None: clamping bounds found privately (two exponential-mechanism quantiles over the gaps of a
public ladder) inside the query's single charge, then the statistic calibrated with them."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit import InvalidParameter, PureDP, deterministic_source  # noqa: E402
from dpkit.audit.testing import CountingSource  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402
from dpkit.tables._query import bound_candidates  # noqa: E402


@pytest.fixture(scope="module")
def frame():
    g = np.random.default_rng(2)  # test data only
    n = 20_000
    return pd.DataFrame({"uid": np.arange(n) // 2, "k": g.choice(["a", "b"], size=n),
                         "x": g.uniform(20, 80, size=n), "m": g.integers(0, 3000, size=n)})


def test_bounds_found_privately_in_one_charge(frame):
    src = CountingSource(5)
    s = Session(frame, budget=PureDP(3.0), unit=unit_of("uid", max_rows=2), rng=src)
    seen = []
    orig = s.accountant.charge
    s.accountant.charge = lambda *a, **k: (seen.append((s.reads, src.consumed)), orig(*a, **k))[1]
    q = s.query("auto").group_by("k", keys=["a", "b"]).mean("x").sum("m").variance("x")
    plan = s.plan(q, budget=PureDP(3.0))
    assert plan.loc[plan.statistic != "count", "half_width_95"].isna().all()
    res = s.release(q, budget=PureDP(3.0))
    assert seen == [(1, 0)] and len(s.accountant.receipts) == 1 and s.accountant.spent == PureDP(3.0)
    found = res.attrs["bounds"]
    ladder = set(bound_candidates(False)) | set(bound_candidates(True))
    for lo, hi in found.values():
        assert lo in ladder and hi in ladder and lo < hi
    lo, hi = found["mean(x)"]
    assert 8 <= lo <= 20 and 80 <= hi <= 128  # the gaps holding the 1% and 99% quantiles
    lo, hi = found["sum(m)"]
    assert lo <= 64 and 2048 <= hi <= 4096
    means = res[res.statistic == "mean"]
    truth = frame.groupby("k").x.mean()
    assert np.all(np.abs(means.value.to_numpy() - truth.to_numpy()) < 1.0)
    assert means.mechanism.str.startswith("bounds [").all()


def test_reproducible_and_not_targetable(frame):
    def run():
        s = Session(frame, budget=PureDP(1.0), rng=deterministic_source(8))
        return s.release(s.query().mean("x"), budget=PureDP(1.0))

    a, b = run(), run()
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs["bounds"] == b.attrs["bounds"]
    s = Session(frame, budget=PureDP(1.0))
    with pytest.raises(InvalidParameter) as exc:
        s.solve([s.query().sum("x").count()], targets={"sum(x)": 10.0})
    assert exc.value.param == "targets"
    assert math.isnan(s.plan(s.query().sum("x"), budget=PureDP(1.0)).scale.iloc[0])
