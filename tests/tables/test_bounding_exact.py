"""Contribution bounding is exact on adversarial inputs (issue #16): heavy users, identical rows, ties in the row
hash, shuffled inputs, NULL ids.

The rule under test (``dpkit.tables._bounding.bounded``): a unit keeps its ``max_rows`` first rows in the order
``(hash(salt, unit, used columns), used columns)``. The order is a function of the unit's own rows and the salt
only, so the kept rows are too: they do not depend on the row order of the source, on other units' rows, or on
how the engine breaks ties.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ibis")
pytest.importorskip("duckdb")
pd = pytest.importorskip("pandas")

from dpkit import PureDP  # noqa: E402
from dpkit.noise.source import deterministic_source  # noqa: E402
from dpkit.tables import Session, _bounding, unit_of  # noqa: E402

from . import engine_checks as ec  # noqa: E402

STATES = ["CA", "NY", "TX", "WA"]
R = 3


def adversarial_frame(seed: int = 7) -> pd.DataFrame:
    """One unit with 2,000 rows over every state, one with 50 identical rows, one with 40 rows that are
    identical in pairs, 200 light units (1..R rows) and 60 units just above the bound (R+1 rows)."""
    g = np.random.default_rng(seed)  # test data only
    parts = [
        pd.DataFrame({"user_id": 0, "state": g.choice(STATES, 2000), "income": g.integers(0, 150, 2000) * 1.0}),
        pd.DataFrame({"user_id": 1, "state": ["NY"] * 50, "income": [42.0] * 50}),
        pd.DataFrame({"user_id": 2, "state": ["TX", "WA"] * 20, "income": [7.0, 99.0] * 20}),
    ]
    uid = 10
    for n in [*g.integers(1, R + 1, 200), *([R + 1] * 60)]:
        parts.append(pd.DataFrame({"user_id": uid, "state": [STATES[uid % 4]] * int(n),
                                   "income": g.integers(0, 150, int(n)) * 1.0}))
        uid += 1
    frame = pd.concat(parts, ignore_index=True)
    frame["user_id"] = frame["user_id"].astype(np.int64)
    return frame


def kept_rows(source, *, max_rows: int = R, max_groups: int | None = None, salt: int = 987654321,
              columns: tuple[str, ...] = ("user_id", "state", "income")) -> pd.DataFrame:
    """The rows bounding keeps for a grouped count + sum query, sorted canonically (a multiset)."""
    s = Session(source, budget=PureDP(1.0), unit=unit_of("user_id", max_rows=max_rows, max_groups=max_groups),
                rng=deterministic_source(1))
    q = s.query("q").group_by("state", keys=STATES).count().sum("income", bounds=(0.0, 100.0))
    out = s._bounded(q, salt).execute()[list(columns)]
    return out.sort_values(list(columns)).reset_index(drop=True)


@pytest.mark.parametrize("engine", ["duckdb", "pandas"])
def test_bound_holds_on_adversarial_units(engine, to_engine):
    frame = adversarial_frame()
    kept = kept_rows(to_engine(frame, engine))
    per_user = kept.groupby("user_id").size()
    n = frame.groupby("user_id").size()
    assert int(per_user.max()) <= R
    assert (per_user.sort_index() == n.clip(upper=R).sort_index()).all()  # nobody loses more than the excess
    # the unit of 50 identical rows keeps R of them (ties among identical rows cost nothing)
    assert kept[kept.user_id == 1].shape[0] == R
    # kept rows are rows of the unit (nothing invented)
    merged = kept.merge(frame.drop_duplicates(), on=["user_id", "state", "income"], how="left", indicator=True)
    assert (merged["_merge"] == "both").all()


@pytest.mark.parametrize("max_groups", [None, 1, 2])
def test_kept_rows_do_not_depend_on_row_order_or_other_units(max_groups, to_engine):
    frame = adversarial_frame()
    ref = kept_rows(to_engine(frame, "duckdb"), max_groups=max_groups)
    g = np.random.default_rng(3)  # test data only
    for _ in range(2):
        shuffled = frame.iloc[g.permutation(len(frame))].reset_index(drop=True)
        pd.testing.assert_frame_equal(kept_rows(to_engine(shuffled, "duckdb"), max_groups=max_groups), ref)
    # removing other units does not change what a unit keeps
    alone = frame[frame.user_id.isin([0, 1, 2])]
    got = kept_rows(to_engine(alone, "duckdb"), max_groups=max_groups)
    pd.testing.assert_frame_equal(got, ref[ref.user_id.isin([0, 1, 2])].reset_index(drop=True))
    if max_groups is not None:
        assert int(ref.groupby("user_id")["state"].nunique().max()) <= max_groups


def test_ties_in_the_row_hash_are_broken_by_the_values(monkeypatch, to_engine):
    """A row hash that ties every row of a unit (the worst collision): the kept rows are then the unit's
    smallest rows by the used columns, whatever the row order, and the bound still holds exactly."""
    def tied(t, parts):  # every row of a unit gets the same key
        return parts["_u"].cast("int64")

    monkeypatch.setattr(_bounding, "key_hash", tied)
    frame = adversarial_frame()
    ref = kept_rows(to_engine(frame, "duckdb"))
    assert int(ref.groupby("user_id").size().max()) <= R
    for uid, rows in frame.groupby("user_id"):
        expect = rows.sort_values(["state", "income"]).head(R)
        got = ref[ref.user_id == uid]
        assert sorted(zip(got.state, got.income, strict=True)) == sorted(zip(expect.state, expect.income,
                                                                             strict=True)), uid
    g = np.random.default_rng(4)  # test data only
    shuffled = frame.iloc[g.permutation(len(frame))].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept_rows(to_engine(shuffled, "duckdb")), ref)


def test_release_is_reproducible_under_shuffles_with_bounding_active(to_engine):
    frame = adversarial_frame()
    ref = ec.values(ec.release(to_engine(frame, "duckdb"), budget=PureDP(1.0)))
    g = np.random.default_rng(5)  # test data only
    shuffled = frame.iloc[g.permutation(len(frame))].reset_index(drop=True)
    assert ec.values(ec.release(to_engine(shuffled, "parquet"), budget=PureDP(1.0))) == ref


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_null_ids_refused_on_adversarial_input(engine, to_engine):
    ec.check_null_ids_refused(lambda f: to_engine(f, engine), adversarial_frame())


@pytest.mark.parametrize("max_groups", [None, 1])
def test_rows_outside_the_public_keys_never_take_a_place(max_groups, to_engine):
    """Rows whose group is not a public key are dropped, and they never count against a unit's bound: the kept
    rows are those of the source without them (bounding orders them after every row of the keys)."""
    frame = adversarial_frame()
    g = np.random.default_rng(11)  # test data only
    outside = pd.DataFrame({"user_id": np.repeat(np.array([0, 1, 2, 10, 11], dtype=np.int64), 30),
                            "state": g.choice(["AA", "ZZZ", "ca"], 150), "income": g.integers(0, 150, 150) * 1.0})
    mixed = pd.concat([outside, frame], ignore_index=True)
    got = kept_rows(to_engine(mixed, "duckdb"), max_groups=max_groups)
    ref = kept_rows(to_engine(frame, "duckdb"), max_groups=max_groups)
    pd.testing.assert_frame_equal(got, ref)
    assert set(got.state) <= set(STATES)
