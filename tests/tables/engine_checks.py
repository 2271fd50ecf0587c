"""The checks every engine must pass (used by ``test_engines_*.py``): same query + same seed -> same release,
user-level bounding enforced in the engine, bad inputs refused before any charge.

Why exact equality is expected across engines: dpkit.tables draws the bounding salt and then the noise from
the session's random source in a fixed order, and the exact aggregates are integers on a public lattice. So
on a table where no user exceeds the bound, every engine computes the same aggregates and, with the same
seed, releases the same values. Where bounding bites, each engine keeps a different (hash-chosen) subset of
a user's rows, so the sums differ, but the counts of a table whose users each stay in one group do not
(every user keeps exactly min(n_u, max_rows) rows) and the sums must lie between the smallest and the largest
sum any choice of min(n_u, max_rows) rows per user could give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit import PureDP
from dpkit.core.errors import InvalidData
from dpkit.noise.source import deterministic_source
from dpkit.tables import Session, unit_of

from .conftest import STATES

MAX_ROWS = 3
BOUNDS = (0.0, 100.0)
HUGE = PureDP(30_000.0)  # noise scale 3e-4 count units: checks bounding, not noise (P(count noise != 0) ~ 1e-1400)


def release(source: Any, *, seed: int = 11, budget: PureDP = HUGE, max_rows: int = MAX_ROWS) -> Any:
    s = Session(source, budget=budget, unit=unit_of("user_id", max_rows=max_rows), rng=deterministic_source(seed))
    q = (
        s.query("by state")
        .group_by("state", keys=list(STATES))
        .count()
        .sum("income", bounds=BOUNDS)
        .mean("income", bounds=BOUNDS)
    )
    return s.release(q, budget=budget)


def values(res: Any) -> dict[tuple[str, str], float]:
    return {(r.statistic, r.group): float(r.value) for r in res.itertuples()}


def light_users(frame: Any) -> Any:
    """The rows of users with at most MAX_ROWS rows: bounding keeps all of them on every engine."""
    n = frame.groupby("user_id")["user_id"].transform("size")
    return frame[n <= MAX_ROWS].reset_index(drop=True)


def bounded_truth(frame: Any) -> dict[str, dict[str, float]]:
    """Per state: the exact bounded count and the [min, max] of the clamped sum over every admissible choice
    of min(n_u, MAX_ROWS) rows per user (users stay in one state in the shared table)."""
    out: dict[str, dict[str, float]] = {}
    clamped = frame.assign(x=frame["income"].clip(*BOUNDS))
    for state, g in clamped.groupby("state"):
        cnt = lo = hi = 0.0
        for _, rows in g.groupby("user_id"):
            x = np.sort(rows["x"].to_numpy())
            k = min(len(x), MAX_ROWS)
            cnt += k
            lo += x[:k].sum()
            hi += x[len(x) - k:].sum()
        out[str(state)] = {"count": cnt, "lo": lo, "hi": hi}
    return out


# --------------------------------------------------------------------------------------------- the checks
def check_same_as_reference(make: Callable[[Any], Any], frame: Any, reference: Any) -> None:
    """On users within the bound, ``make(frame)``'s release equals the DuckDB reference release exactly."""
    light = light_users(frame)
    assert len(light) > 50
    got, ref = values(release(make(light))), values(release(reference(light)))
    assert got.keys() == ref.keys()
    for k in ref:
        assert got[k] == pytest.approx(ref[k], rel=1e-12, abs=1e-9), k
    # a different seed gives a different release (the seed is really used)
    other = values(release(make(light), seed=12))
    assert any(other[k] != ref[k] for k in ref if k[0] == "sum")


def check_bounded_release(make: Callable[[Any], Any], frame: Any) -> None:
    """With bounding active: counts are exactly the bounded counts, sums lie in the admissible range."""
    truth = bounded_truth(frame)
    res = values(release(make(frame)))
    unbounded = frame.groupby("state").size()
    for state in STATES:
        t = truth.get(state, {"count": 0.0, "lo": 0.0, "hi": 0.0})
        assert res[("count", f"state={state}")] == pytest.approx(t["count"], abs=0.5), state
        if t["count"]:
            assert t["count"] < unbounded[state]  # bounding really bites on this table
        s = res[("sum", f"state={state}")]
        assert t["lo"] - 1.0 <= s <= t["hi"] + 1.0, state
        m = res[("mean", f"state={state}")]
        if t["count"]:
            assert t["lo"] / t["count"] - 0.01 <= m <= t["hi"] / t["count"] + 0.01, state


def check_bounding_internal(make: Callable[[Any], Any], frame: Any, *, max_groups: int | None = None) -> None:
    """dpkit's bounded table (``Session._bounded``, executed on the engine): no user keeps more than
    max_rows rows (nor more than max_groups groups), and a user with fewer rows keeps all of them."""
    s = Session(make(frame), budget=HUGE, unit=unit_of("user_id", max_rows=MAX_ROWS, max_groups=max_groups),
                rng=deterministic_source(3))
    q = s.query("bounded").group_by("state", keys=list(STATES)).count()
    t = s._bounded(q, 123456789)
    per_user = t.group_by("user_id").aggregate(n=t.count(), g=t.state.nunique()).execute()
    n_rows = frame.groupby("user_id").size()
    n_groups = frame.groupby("user_id")["state"].nunique()
    kept = per_user.set_index("user_id")
    assert set(kept.index) == set(n_rows.index)  # every user keeps at least one row
    assert int(kept["n"].max()) <= MAX_ROWS
    if max_groups is None:
        expect = n_rows.clip(upper=MAX_ROWS)
        assert (kept["n"].sort_index() == expect.sort_index()).all()
    else:
        assert int(kept["g"].max()) <= max_groups
        assert (kept["g"].sort_index() == n_groups.clip(upper=max_groups).sort_index()).all()


def check_null_ids_refused(make: Callable[[Any], Any], frame: Any) -> None:
    """A NULL user id is InvalidData naming the unit column; nothing is charged; no value leaks."""
    bad = frame.astype({"user_id": "Int64"}).copy()
    bad.loc[bad.index[::7], "user_id"] = None
    s = Session(make(bad), budget=PureDP(1.0), unit=unit_of("user_id", max_rows=MAX_ROWS),
                rng=deterministic_source(5))
    q = s.query("q").group_by("state", keys=list(STATES)).count().sum("income", bounds=BOUNDS)
    with pytest.raises(InvalidData) as ei:
        s.release(q, budget=PureDP(1.0))
    assert ei.value.param == "user_id"
    assert not s.accountant.receipts
    msg = str(ei.value)
    assert not any(str(v) in msg for v in bad["income"].head(20).astype(int))


def check_adversarial_bound(make: Callable[[Any], Any], frame: Any) -> None:
    """Issue #16: a unit with many rows, a unit of identical rows and a unit whose rows tie in pairs keep exactly
    min(n_u, MAX_ROWS) rows each, and the kept rows do not depend on the source's row order."""
    import pandas as pd

    extra = pd.DataFrame({
        "user_id": np.array([10_001] * 300 + [10_002] * 40 + [10_003] * 30, dtype=np.int64),
        "state": ["CA", "NY", "TX", "WA"] * 75 + ["NY"] * 40 + ["TX", "WA"] * 15,
        "age": np.int64(40),
        "income": np.concatenate([np.arange(300) % 151, np.full(40, 42), np.tile([7, 99], 15)]).astype(np.float64),
    })
    full = pd.concat([frame, extra], ignore_index=True)[list(frame.columns)]

    def kept(f: Any) -> Any:
        s = Session(make(f), budget=HUGE, unit=unit_of("user_id", max_rows=MAX_ROWS), rng=deterministic_source(3))
        q = s.query("q").group_by("state", keys=list(STATES)).count().sum("income", bounds=BOUNDS)
        out = s._bounded(q, 123456789).select("user_id", "state", "income").execute()
        return out.sort_values(["user_id", "state", "income"]).reset_index(drop=True)

    ref = kept(full)
    per_user = ref.groupby("user_id").size()
    n = full.groupby("user_id").size()
    assert (per_user.sort_index() == n.clip(upper=MAX_ROWS).sort_index()).all()
    shuffled = full.iloc[np.random.default_rng(9).permutation(len(full))].reset_index(drop=True)  # test data only
    pd.testing.assert_frame_equal(kept(shuffled), ref, check_dtype=False)
