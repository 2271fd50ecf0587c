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


def outside_rows(seed: int = 11) -> pd.DataFrame:
    """Rows whose group is not a public key, for units inside and outside the adversarial frame: states that are
    not keys (one per row for unit 0: 300 distinct groups), a key in the wrong case, and NULL states."""
    g = np.random.default_rng(seed)  # test data only
    ids = np.repeat(np.array([0, 1, 2, 10, 11, 900], dtype=np.int64), 30)
    state = g.choice(["AA", "ZZZ", "ca"], len(ids)).astype(object)
    state[:30] = [f"X{i}" for i in range(30)]
    state[30:40] = None
    extra = pd.DataFrame({"user_id": np.arange(5000, 5300, dtype=np.int64), "state": [f"Y{i}" for i in range(300)],
                          "income": g.integers(0, 150, 300) * 1.0})
    return pd.concat([pd.DataFrame({"user_id": ids, "state": state, "income": g.integers(0, 150, len(ids)) * 1.0}),
                      extra], ignore_index=True)


UNITS = [dict(max_rows=R), dict(max_rows=R, max_groups=1), dict(max_rows=R, max_groups=2),
         dict(max_rows=R, max_rows_per_group=2), dict(max_rows=4, max_groups=2, max_rows_per_group=2)]


def _session(source, unit):
    s = Session(source, budget=PureDP(1.0), unit=unit_of("user_id", **unit), rng=deterministic_source(1))
    q = s.query("q").group_by("state", keys=STATES).count().sum("income", bounds=(0.0, 100.0)) \
        .mean("income", bounds=(0.0, 100.0))
    return s, q


def _main(raw) -> pd.DataFrame:
    main = raw["main"]
    return main.sort_values("state").reset_index(drop=True)


@pytest.mark.parametrize("unit", UNITS)
def test_outside_groups_dropped_after_aggregation_equal_rows_dropped_after_windows(unit, to_engine):
    """The main aggregate under public keys runs on the bounded rows with those outside the keys and drops the
    groups outside the keys after the aggregation: it equals, value for value, the aggregate of the rows kept
    by ``Session._bounded`` (outside rows dropped row by row) and that of the source without the outside rows;
    no group outside the keys, and no NULL group, is left in it."""
    frame = adversarial_frame()
    mixed = pd.concat([outside_rows(), frame], ignore_index=True)
    salt = 987654321
    s, q = _session(to_engine(mixed, "duckdb"), unit)
    p = s._calibrate(q, PureDP(1.0))
    got = _main(_bounding.aggregate(s, p, salt))
    by_rows = _main(_bounding.passes(s, p, s._bounded(q, salt)))
    s0, q0 = _session(to_engine(frame, "duckdb"), unit)
    alone = _main(_bounding.aggregate(s0, s0._calibrate(q0, PureDP(1.0)), salt))
    pd.testing.assert_frame_equal(got, by_rows)
    pd.testing.assert_frame_equal(got, alone)
    assert set(got["state"]) <= set(STATES) and got["state"].notna().all()
    # the bounded rows with the outside ones: the keys' rows are exactly Session._bounded's
    whole = _bounding.bounded(s, q, salt, outside=True).execute()
    cols = ["user_id", "state", "income"]
    inside = whole[whole.state.isin(STATES)][cols].sort_values(cols).reset_index(drop=True)
    ref = s._bounded(q, salt).execute()[cols].sort_values(cols).reset_index(drop=True)
    pd.testing.assert_frame_equal(inside, ref)


@pytest.mark.parametrize("unit", [UNITS[0], UNITS[1], UNITS[4]])
@pytest.mark.parametrize("engine", ["duckdb", "parquet"])
def test_release_with_outside_rows_equals_release_without_them(unit, engine, to_engine):
    """Seeded releases (statistics and the opt-in diagnostics, which read the row-filtered table) do not
    change when rows outside the public keys are added: nothing of them reaches a released value."""
    frame = adversarial_frame()
    mixed = pd.concat([outside_rows(), frame], ignore_index=True)

    def release(source, diagnostics):
        s, q = _session(source, unit)
        if diagnostics:
            q = q.diagnostics()
        res = s.release(q, budget=PureDP(1.0))
        return {(r.statistic, r.group): float(r.value) for r in res.itertuples()}

    for diagnostics in (False, True):
        got = release(to_engine(mixed, engine), diagnostics)
        ref = release(to_engine(frame, engine), diagnostics)
        if diagnostics:  # dropped_rows / dropped_groups count the outside rows of the source: compare the rest
            got = {k: v for k, v in got.items() if not k[0].startswith("dropped")}
            ref = {k: v for k, v in ref.items() if not k[0].startswith("dropped")}
        assert got == ref
        assert {k[1] for k in got} <= {f"state={x}" for x in STATES} | {""}


MANY = ["CA", "NY", "TX", "WA", "", "it's", "é", "AL", "AK", "AZ", "AR", "CO", "ct", "DE"]  # >= FAST_MEMBER_MIN


def many_keys_frame(seed: int = 13) -> pd.DataFrame:
    """Units over many keys and values outside them: the keys in another case, with a trailing blank, other
    strings, NULL."""
    g = np.random.default_rng(seed)  # test data only
    values = np.array([*MANY, "ca", "CT", "AL ", "X", "ALX", None], dtype=object)
    n = g.integers(1, 9, 300)
    ids = np.repeat(np.arange(300, dtype=np.int64), n)
    return pd.DataFrame({"user_id": ids, "state": g.choice(values, len(ids)),
                         "income": g.integers(0, 150, len(ids)) * 1.0})


@pytest.mark.parametrize("collation", [None, "NOCASE"])
@pytest.mark.parametrize("unit", [UNITS[0], UNITS[1], UNITS[4]])
def test_fast_key_lookup_keeps_the_same_rows(collation, unit, monkeypatch):
    """On DuckDB the windows' key test starts with a hash lookup (``_bounding.fast_member``): the kept rows
    and the main aggregate are those of the plain ``IN`` test, also on a column declared case-insensitive (the
    session compares strings byte for byte, ``_engine.exact_strings``: 'ca' and 'CT' are not the keys 'CA' and
    'ct' there either)."""
    import ibis

    frame = many_keys_frame()
    con = ibis.duckdb.connect()
    con.create_table("raw", frame, temp=True)
    if collation:
        con.raw_sql(f"CREATE TEMP TABLE src AS SELECT user_id, state COLLATE {collation} AS state, income FROM raw")
    else:
        con.raw_sql("CREATE TEMP TABLE src AS SELECT * FROM raw")
    source = con.table("src")
    salt = 24680

    def run():
        s = Session(source, budget=PureDP(1.0), unit=unit_of("user_id", **unit), rng=deterministic_source(1))
        q = s.query("q").group_by("state", keys=MANY).count().sum("income", bounds=(0.0, 100.0))
        cols = ["user_id", "state", "income"]
        kept = s._bounded(q, salt).execute()[cols].sort_values(cols).reset_index(drop=True)
        main = _main(_bounding.aggregate(s, s._calibrate(q, PureDP(1.0)), salt))
        sql = str(ibis.to_sql(_bounding.bounded(s, q, salt, outside=True)))
        return kept, main, sql

    kept, main, sql = run()
    assert "_dpk_keys_" in sql.lower()
    monkeypatch.setattr(_bounding, "FAST_MEMBER_MIN", 10**9)
    kept0, main0, sql0 = run()
    assert "_dpk_keys_" not in sql0.lower()
    pd.testing.assert_frame_equal(kept, kept0)
    pd.testing.assert_frame_equal(main, main0)
    assert int(kept.groupby("user_id").size().max()) <= unit["max_rows"]
    assert kept["state"].isin(MANY).all()
    assert set(main["state"]) <= set(MANY)


def test_fast_key_lookup_falls_back_to_in_when_the_macro_cannot_be_created(monkeypatch, to_engine):
    """A connection that refuses the temporary macro (read-only, an old DuckDB): the plain ``IN`` test, the
    same rows."""
    from dpkit.core.errors import EngineError
    from dpkit.tables import _engine

    frame = many_keys_frame()
    salt = 13579

    def kept(source):
        s = Session(source, budget=PureDP(1.0), unit=unit_of("user_id", max_rows=R), rng=deterministic_source(1))
        q = s.query("q").group_by("state", keys=MANY).count().sum("income", bounds=(0.0, 100.0))
        cols = ["user_id", "state", "income"]
        t = s._bounded(q, salt)
        return t.execute()[cols].sort_values(cols).reset_index(drop=True), str(__import__("ibis").to_sql(t))

    ref, sql = kept(to_engine(frame, "duckdb"))
    assert "_dpk_keys_" in sql.lower()

    def refuse(fn, **kw):
        if kw.get("what") == "preparing the public keys":
            raise EngineError("source", "refused")
        return fn()

    monkeypatch.setattr(_engine, "guarded", refuse)
    got, sql = kept(to_engine(frame, "duckdb"))
    assert "_dpk_keys_" not in sql.lower()
    pd.testing.assert_frame_equal(got, ref)
