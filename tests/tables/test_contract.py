"""The release contract of dpkit.tables: one charge before any aggregate or random byte; a refused charge
reads nothing and charges nothing; the result frame of docs/tables.md; receipts; typed errors before any
charge for every bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit import (  # noqa: E402
    ZCDP,
    Accountant,
    ApproxDP,
    BudgetExceeded,
    IncompatibleLoss,
    InvalidData,
    InvalidParameter,
    Ledger,
    PureDP,
    WrongType,
)
from dpkit.audit.testing import CountingSource  # noqa: E402
from dpkit.core.neighbours import PrivacyUnit  # noqa: E402
from dpkit.tables import RESULT_COLUMNS, Session, unit_of  # noqa: E402

STATES = ["CA", "NY", "TX", "WA", "ZZ"]
SECRET = 987654.25


@pytest.fixture(scope="module")
def frame():
    from tests.tables.conftest import users_frame

    return users_frame()


def _spy(session, src):
    """Record (reads so far, bytes drawn so far) at every charge."""
    seen = []
    acc = session.accountant
    orig = acc.charge

    def charge(*a, **k):
        seen.append((session.reads, src.consumed))
        return orig(*a, **k)

    acc.charge = charge
    return seen


def _query(s):
    return (s.query("q").filter("age >= 18").group_by("state", keys=STATES).count()
            .sum("income", bounds=(0, 100)).mean("income", bounds=(0, 100)).quantiles("age", [0.5], bounds=(0, 100))
            .histogram("age", edges=[0, 30, 60, 100]))


@pytest.mark.parametrize("nan_policy", ["raise", "drop"])
def test_one_charge_before_any_aggregate_or_noise(frame, nan_policy):
    src = CountingSource(3)
    s = Session(frame, budget=PureDP(2.0), unit=unit_of("user_id", max_rows=3), rng=src, nan_policy=nan_policy)
    seen = _spy(s, src)
    res = s.release(_query(s), budget=PureDP(1.0))
    # exactly one charge; before it at most the validation pass ran (NULL unit ids / missing values), and no
    # random byte was drawn
    assert len(seen) == 1
    assert seen[0] == (1, 0)
    assert s.reads >= 3 and src.consumed > 0
    assert len(s.accountant.receipts) == 1
    assert res.attrs["receipt"] == [s.accountant.receipts[0].id]
    assert s.accountant.spent == PureDP(1.0)


def test_row_unit_drop_policy_reads_only_the_source_check_before_the_charge(frame):
    # issue #11: even under nan_policy="drop" the whole source is read once before the charge (a value that does
    # not parse must fail before anything is spent); that one pass is the only read, and no byte is drawn
    src = CountingSource(3)
    s = Session(frame, budget=PureDP(2.0), rng=src, nan_policy="drop")
    seen = _spy(s, src)
    s.release(_query(s), budget=PureDP(1.0))
    assert seen == [(1, 0)]


@pytest.mark.parametrize("budget", [PureDP(1.5), ZCDP(0.5)])
def test_refused_charge_reads_nothing_charges_nothing(frame, budget):
    src = CountingSource(3)
    s = Session(frame, budget=PureDP(1.0) if isinstance(budget, PureDP) else ZCDP(0.2),
                unit=unit_of("user_id", max_rows=3), rng=src)
    with pytest.raises(BudgetExceeded):
        s.release(_query(s), budget=budget)
    assert s.reads == 0 and src.consumed == 0 and s.accountant.receipts == ()


def test_incompatible_budget_reads_nothing(frame):
    src = CountingSource(3)
    s = Session(frame, budget=PureDP(5.0), rng=src)
    with pytest.raises(IncompatibleLoss):
        s.release(s.query().count(), budget=ZCDP(0.1))
    assert s.reads == 0 and src.consumed == 0 and s.accountant.receipts == ()


def test_result_frame_shape(frame):
    s = Session(frame, budget=PureDP(5.0), rng=CountingSource(1))
    res = s.release(_query(s), budget=PureDP(1.0))
    assert list(res.columns) == [*RESULT_COLUMNS, "state"]
    assert set(res["statistic"]) == {"count", "sum", "mean", "quantile", "histogram"}
    assert (res.loc[res.statistic == "count", "group"] == [f"state={k}" for k in STATES]).all()
    assert (res.loc[res.statistic == "count", "state"] == STATES).all()
    assert res["value"].dtype == float and res["postprocessed"].dtype == bool
    hist = res[res.statistic == "histogram"]
    assert list(hist["bin"][:3]) == ["[0, 30)", "[30, 60)", "[60, 100]"]
    assert (res.loc[res.statistic == "quantile", "bin"] == "0.5").all()
    assert res.loc[res.statistic == "count", "mechanism"].iloc[0].startswith("discrete_laplace(scale=")
    ungrouped = s.release(s.query("all").count(), budget=PureDP(1.0))
    assert list(ungrouped.columns) == RESULT_COLUMNS and list(ungrouped["group"]) == [""]


def test_missing_public_key_gets_noisy_zero_and_unlisted_keys_are_dropped(frame):
    s = Session(frame, budget=PureDP(100.0), rng=CountingSource(1))
    res = s.release(s.query().group_by("state", keys=["ZZ", "CA"]).count(), budget=PureDP(50.0))
    assert list(res["state"]) == ["ZZ", "CA"]
    assert abs(res["value"].iloc[0]) <= 5
    assert abs(res["value"].iloc[1] - (frame.state == "CA").sum()) <= 5


def test_postprocess(frame):
    s = Session(frame, budget=PureDP(10.0), rng=CountingSource(4))
    q = s.query().group_by("state", keys=STATES).count().mean("income", bounds=(0, 100))
    res = s.release(q, budget=PureDP(0.05), postprocess={"nonnegative": True, "round": 1})
    counts = res[res.statistic == "count"]
    assert (counts["value"] >= 0).all()
    assert counts["postprocessed"].any()  # the empty key's noisy zero is negative at least sometimes
    means = res[res.statistic == "mean"]["value"]
    assert np.allclose(means, np.round(means, 1))
    with pytest.raises(InvalidParameter):
        s.release(q, budget=PureDP(0.1), postprocess={"clip": True})


def test_ledger_session(frame, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite", "users", PureDP(1.0), neighbours=PrivacyUnit("user_id", 3))
    s = Session(frame, ledger=ledger, unit=unit_of("user_id", max_rows=3), rng=CountingSource(1))
    res = s.release(s.query().count(), budget=PureDP(0.5))
    again = Ledger(tmp_path / "l.sqlite", "users")
    assert [r.id for r in again.receipts] == res.attrs["receipt"]
    with pytest.raises(InvalidParameter):
        Session(frame, ledger=ledger)  # relation differs from the ledger's
    with pytest.raises(InvalidParameter):
        Session(frame, ledger=ledger, budget=PureDP(2.0), unit=unit_of("user_id", max_rows=3))


# -------------------------------------------------------------------------------------------------------------
# bad inputs: typed errors naming the parameter, no data value in the message, nothing charged or read
# -------------------------------------------------------------------------------------------------------------
def _bad_frame():
    return pd.DataFrame({"user_id": [1, 2, 3, 4], "state": ["CA", "NY", "CA", None],
                         "income": [1.0, SECRET, np.nan, 4.0], "name": ["a", "b", "c", "d"],
                         "age": [20, 30, 40, 50]})


def _assert_clean(s, src, exc):
    assert "987654" not in str(exc.value)
    assert s.accountant.receipts == () and src.consumed == 0


@pytest.fixture(scope="module")
def bad_session():
    src = CountingSource(1)
    return Session(_bad_frame(), budget=PureDP(1.0), rng=src), src


@pytest.mark.parametrize("build, err, param", [
    (lambda s: s.query().sum("name", bounds=(0, 1)), WrongType, "column"),
    (lambda s: s.query().mean("salary", bounds=(0, 1)), InvalidParameter, "column"),
    (lambda s: s.query().mean("income", granularity=-1.0), InvalidParameter, "granularity"),
    (lambda s: s.query().quantiles("income", [0.5]), InvalidParameter, "bounds"),
    (lambda s: s.query().sum("income", bounds=(5, 1)), InvalidParameter, "bounds"),
    (lambda s: s.query().sum("income", bounds=(0, 1e9), granularity=1e-3), InvalidParameter, "granularity"),
    (lambda s: s.query().count(weight=0), InvalidParameter, "weight"),
    (lambda s: s.query().group_by("state", keys="public"), InvalidParameter, "keys"),
    (lambda s: s.query().group_by("state", keys=["CA", "CA"]), InvalidParameter, "keys"),
    (lambda s: s.query().group_by("state", keys=[1, 2]), WrongType, "keys"),
    (lambda s: s.query().group_by("nope", keys=["a"]), InvalidParameter, "group_by"),
    (lambda s: s.query().count().group_by("state", keys=["CA"]), InvalidParameter, "group_by"),
    (lambda s: s.query().quantiles("income", [1.5], bounds=(0, 10)), InvalidParameter, "levels"),
    (lambda s: s.query().histogram("income", edges=[3, 1]), InvalidParameter, "edges"),
    (lambda s: s.query().histogram("income"), InvalidParameter, "edges"),
    (lambda s: s.query().histogram("state", categories=[1, 2]), WrongType, "categories"),
    (lambda s: s.query().contingency(["state"], domains={}), InvalidParameter, "domains"),
    (lambda s: s.query().filter("income.real > 0"), InvalidParameter, "expression"),
    (lambda s: s.query(""), InvalidParameter, "name"),
])
def test_bad_query(bad_session, build, err, param):
    s, src = bad_session
    with pytest.raises(err) as exc:
        build(s)
    assert exc.value.param == param
    _assert_clean(s, src, exc)
    assert s.reads == 0


@pytest.mark.parametrize("budget, err, param", [
    (None, InvalidParameter, "budget"), (1.0, WrongType, "budget"),
    (PureDP(0.5), InvalidParameter, "keys"),  # private keys need ApproxDP
])
def test_bad_budget(budget, err, param):
    src = CountingSource(1)
    s = Session(_bad_frame(), budget=ApproxDP(1.0, 1e-6), rng=src)
    q = s.query().group_by("state", keys="private").count() if param == "keys" else s.query().count()
    with pytest.raises(err) as exc:
        s.release(q, budget=budget)
    assert exc.value.param == param
    _assert_clean(s, src, exc)
    assert s.reads == 0


def test_nan_policy_raise_names_the_column_before_any_charge():
    src = CountingSource(1)
    s = Session(_bad_frame(), budget=PureDP(1.0), rng=src)
    with pytest.raises(InvalidData) as exc:
        s.release(s.query().sum("income", bounds=(0, 10)), budget=PureDP(0.5))
    assert exc.value.param == "income"
    _assert_clean(s, src, exc)
    # private keys: a NULL key is missing data too
    s2 = Session(_bad_frame(), budget=ApproxDP(1.0, 1e-6), rng=src)
    with pytest.raises(InvalidData) as exc:
        s2.release(s2.query().group_by("state", keys="private").count(), budget=ApproxDP(0.5, 1e-7))
    assert exc.value.param == "state"
    _assert_clean(s2, src, exc)


def test_check_runs_the_pre_charge_data_checks_without_charging():
    src = CountingSource(1)
    s = Session(_bad_frame(), budget=PureDP(1.0), rng=src)
    with pytest.raises(InvalidData) as exc:
        s.check(s.query().sum("income", bounds=(0, 10)))
    assert exc.value.param == "income"
    _assert_clean(s, src, exc)
    s.check(s.query().count())  # nothing missing in what a count reads: no error
    assert s.accountant.receipts == () and src.consumed == 0
    with pytest.raises(WrongType) as exc:
        s.check("count")
    assert exc.value.param == "query"


def test_nan_policy_drop_drops_per_statistic():
    s = Session(_bad_frame(), budget=PureDP(1e6), rng=CountingSource(1), nan_policy="drop")
    res = s.release(s.query().count().sum("income", bounds=(0, 10)).mean("income", bounds=(0, 10)),
                    budget=PureDP(1e5))
    v = dict(zip(res.statistic, res.value, strict=True))
    assert v["count"] == 4 and math.isclose(v["sum"], 15, abs_tol=1e-2) and math.isclose(v["mean"], 5.0, abs_tol=1e-2)


def test_null_unit_ids_always_refused():
    df = _bad_frame()
    df["user_id"] = pd.array([1, None, 3, 4], dtype="Int64")
    for policy in ("raise", "drop"):
        src = CountingSource(1)
        s = Session(df, budget=PureDP(1.0), unit=unit_of("user_id", max_rows=2), rng=src, nan_policy=policy)
        with pytest.raises(InvalidData) as exc:
            s.release(s.query().count(), budget=PureDP(0.5))
        assert exc.value.param == "user_id"
        _assert_clean(s, src, exc)


@pytest.mark.parametrize("kw, err, param", [
    ({"nan_policy": "skip"}, InvalidParameter, "nan_policy"),
    ({"unit": "user_id"}, WrongType, "unit"),
    ({"unit": unit_of("uid", max_rows=2)}, InvalidParameter, "unit"),
    ({"budget": None}, InvalidParameter, "budget"),
    ({"ledger": Accountant(PureDP(1.0)), "budget": PureDP(3.0)}, InvalidParameter, "budget"),
])
def test_bad_session(kw, err, param):
    args = {"budget": PureDP(1.0), **kw}
    with pytest.raises(err) as exc:
        Session(_bad_frame(), **args)
    assert exc.value.param == param


@pytest.mark.parametrize("source, err", [(3, WrongType), ("nope.csv", InvalidParameter), ("x.json", InvalidParameter)])
def test_bad_source(source, err, tmp_path):
    if source == "x.json":
        (tmp_path / "x.json").write_text("{}")
        source = str(tmp_path / "x.json")
    with pytest.raises(err) as exc:
        Session(source, budget=PureDP(1.0))
    assert exc.value.param == "source"


def test_empty_table_is_valid_and_releases_noise():
    df = _bad_frame().iloc[:0]
    s = Session(df, budget=PureDP(1.0), rng=CountingSource(1))
    res = s.release(s.query().group_by("state", keys=["CA"]).count().mean("age", bounds=(0, 100)),
                    budget=PureDP(0.5))
    assert len(res) == 2 and np.isfinite(res["value"]).all()


def test_query_from_another_session_refused(frame):
    s1 = Session(frame, budget=PureDP(1.0))
    s2 = Session(frame, budget=PureDP(1.0))
    with pytest.raises(InvalidParameter) as exc:
        s2.release(s1.query().count(), budget=PureDP(0.1))
    assert exc.value.param == "query"
    with pytest.raises(InvalidParameter):
        s2.release(s2.query(), budget=PureDP(0.1))


def test_one_missing_value_policy_name_across_stats_tables_and_cli():
    # issue #12's consistency fix: "omit" everywhere (stats' name); "drop" (tables' and the CLI's earlier name)
    # is an alias giving identical releases; anything else is refused naming nan_policy
    import pandas as pd

    import dpkit
    from dpkit.cli.spec import SpecError, parse_spec
    from dpkit.noise import deterministic_source
    from dpkit.tables import Session

    frame = pd.DataFrame({"x": [1.0, None, 3.0, 4.0, None, 6.0]})
    out = []
    for name in ("omit", "drop"):
        s = Session(frame, budget=dpkit.PureDP(1.0), nan_policy=name, rng=deterministic_source(4))
        out.append(s.release(s.query("q").count().mean("x", bounds=(0, 10)), budget=dpkit.PureDP(1.0)))
    pd.testing.assert_frame_equal(out[0], out[1])
    assert out[0].attrs["coverage"] == out[1].attrs["coverage"]
    with pytest.raises(dpkit.InvalidParameter, match="nan_policy"):
        Session(frame, budget=dpkit.PureDP(1.0), nan_policy="skip")
    for name in ("omit", "drop"):
        assert dpkit.stats.count([1.0, None, 2.0], 1.0, nan_policy=name, rng=deterministic_source(1)).value is not None
    doc = {"data": {"source": "adult"}, "budget": {"epsilon": 1.0},
           "query": [{"name": "n", "stat": "count"}]}
    for name, want in (("omit", "omit"), ("drop", "omit"), ("raise", "raise")):
        assert parse_spec({**doc, "data": {"source": "adult", "nan_policy": name}}).nan_policy == want
    with pytest.raises(SpecError, match=r"data\.nan_policy"):
        parse_spec({**doc, "data": {"source": "adult", "nan_policy": "skip"}})
