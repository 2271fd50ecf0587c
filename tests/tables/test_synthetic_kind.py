"""The ``synthetic`` statistic kind of dpkit.tables: dpkit.synth.synthesize on the engine's group-by (weights),
the table in ``res.attrs["synthetic"]``, DP comparisons from released values only, refusals before the charge."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

import dpkit  # noqa: E402
from dpkit.core.errors import InvalidData, InvalidParameter  # noqa: E402
from dpkit.noise import deterministic_source  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402
from dpkit.tables._synth_kinds import SyntheticTable, output_name  # noqa: E402

SEX = ["F", "M"]
EDU = ["a", "b", "c"]
AGE = [17, 30, 50, 70, 100]
X = [0.0, 2.5, 5.0, 10.0]


def frame(n: int = 800, seed: int = 0) -> Any:
    g = np.random.default_rng(seed)  # test data only
    sex = g.choice(SEX, n)
    edu = np.where(sex == "F", g.choice(["a", "b", "c", "zz"], n, p=[0.6, 0.2, 0.1, 0.1]),
                   g.choice(["a", "b", "c", "zz"], n, p=[0.1, 0.2, 0.6, 0.1]))
    return pd.DataFrame({"uid": g.integers(0, n // 4, n), "sex": sex, "edu": edu, "age": g.integers(10, 95, n),
                         "x": g.uniform(0, 10, n)})


def query(s: Session, **kw: Any) -> Any:
    kw.setdefault("domains", {"sex": SEX, "edu": EDU})
    kw.setdefault("bins", {"age": AGE, "x": X})
    kw.setdefault("iters", 100)
    return s.query("syn").synthetic(["sex", "edu", "age", "x"], **kw)


def release(budget: Any = None, seed: int = 5, **kw: Any) -> tuple[Session, Any]:
    s = Session(frame(), budget=dpkit.ZCDP(100.0), rng=deterministic_source(seed))
    res = s.release(query(s, **kw), budget=budget or dpkit.ZCDP(1.0))
    return s, res


def test_synthetic_table_schema_rows_and_one_charge() -> None:
    s, res = release(rows=300, output="people.csv")
    assert s.accountant.spent == dpkit.ZCDP(1.0) and len(s.accountant.receipts) == 1
    (table,) = res.attrs["synthetic"].values()
    assert isinstance(table, SyntheticTable) and table.output == "people.csv" and table.method == "mst"
    out = table.frame
    assert list(out.columns) == ["sex", "edu", "age", "x"] and len(out) == table.rows == 300
    assert set(out["sex"]) <= set(SEX) and set(out["edu"]) <= set(EDU)
    assert out["age"].dtype == np.int64 and out["age"].between(17, 100).all()
    assert out["x"].dtype == np.float64 and out["x"].between(0, 10).all()
    by = res.set_index("bin")
    assert by.loc["rows", "value"] == 300 and by.loc["estimated records", "value"] > 0
    tv = res[res["bin"].str.startswith("TV ")]
    assert len(tv) >= 4 and tv["value"].between(0, 1).all()
    assert all("released noisy marginal" in m and "noise std" in m for m in tv["mechanism"])
    assert res["lo"].isna().all()


def test_the_model_learns_the_association_from_counts_of_declared_values_only() -> None:
    _, res = release(budget=dpkit.ZCDP(50.0))
    out = res.attrs["synthetic"]["synthetic(sex,edu,age,x)"].frame
    f = out[out["sex"] == "F"]["edu"].value_counts(normalize=True)
    m = out[out["sex"] == "M"]["edu"].value_counts(normalize=True)
    assert f["a"] > 0.45 and m["c"] > 0.45  # the generated association (zz is never produced)
    # default rows: the model's total, about the rows in the declared domain (zz and age < 17 not counted)
    df = frame()
    inside = ((df["edu"] != "zz") & (df["age"] >= 17)).sum()
    assert abs(len(out) - inside) < 0.1 * inside


def test_reproducible_under_a_seed_and_attrs_survive_copies() -> None:
    _, a = release(rows=100)
    _, b = release(rows=100)
    ta, tb = (r.attrs["synthetic"]["synthetic(sex,edu,age,x)"] for r in (a, b))
    pd.testing.assert_frame_equal(ta.frame, tb.frame)
    assert copy.deepcopy(ta) is ta and a.copy().attrs["synthetic"]["synthetic(sex,edu,age,x)"] is ta
    pd.concat([a, b])  # attrs holding tables compare by identity (no ambiguous DataFrame truth value)


def test_under_a_privacy_unit_and_approx_dp() -> None:
    s = Session(frame(), budget=dpkit.ApproxDP(10.0, 1e-3), unit=unit_of("uid", max_rows=2),
                rng=deterministic_source(1))
    q = query(s)
    (row,) = s.plan(q, budget=dpkit.ApproxDP(1.0, 1e-6)).to_dict("records")
    assert row["mechanism"].startswith("mst(rho=") and row["rho"] < 0.1
    res = s.release(q, budget=dpkit.ApproxDP(1.0, 1e-6))
    assert s.accountant.spent == dpkit.ApproxDP(1.0, 1e-6)
    assert len(res.attrs["synthetic"]["synthetic(sex,edu,age,x)"].frame) > 0


def test_pure_dp_budget_is_refused_before_anything_is_read() -> None:
    s = Session(frame(), budget=dpkit.PureDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidParameter) as e:
        s.release(query(s), budget=dpkit.PureDP(1.0))
    assert e.value.param == "budget"
    assert s.reads == 0 and not s.accountant.receipts


def test_budget_too_small_for_the_method_is_refused_before_the_charge() -> None:
    s = Session(frame(), budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidParameter):
        s.plan(query(s), budget=dpkit.ZCDP(1e-310))
    assert not s.accountant.receipts


def test_empty_domain_is_refused_before_the_charge() -> None:
    df = frame()
    df["age"] = 5  # below the first bin edge: not counted
    s = Session(df, budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidData) as e:
        s.release(query(s), budget=dpkit.ZCDP(1.0))
    assert e.value.param == "data" and not s.accountant.receipts


@pytest.mark.parametrize("name", ["out/a.csv", "a.txt", ".a.csv", "results.csv", "report.html", " a.csv", "", 3])
def test_output_names_are_plain_csv_or_parquet_files(name: Any) -> None:
    with pytest.raises((InvalidParameter, dpkit.WrongType)) as e:
        output_name(name)
    assert e.value.param == "output"
    assert output_name("a.parquet") == "a.parquet"


def test_bad_parameters() -> None:
    s = Session(frame(), budget=dpkit.ZCDP(10.0))
    for kw, param in [({"rows": 0}, "rows"), ({"method": "direct"}, "method"), ({"domains": {"sex": SEX}}, "domains"),
                      ({"output": "x/y.csv"}, "output")]:
        with pytest.raises((InvalidParameter, dpkit.WrongType)) as e:
            query(s, **kw)
        assert e.value.param == param
    assert s.reads == 0


def test_domain_too_large_for_the_method_and_empty_table_are_refused_before_the_charge() -> None:
    g = np.random.default_rng(3)  # test data only
    df = pd.DataFrame({"a": g.uniform(0, 1, 50), "b": g.uniform(0, 1, 50)})
    s = Session(df, budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    edges = list(np.linspace(0, 1, 5001))
    q = s.query("big").synthetic(["a", "b"], bins={"a": edges, "b": edges}, output="big.csv")
    with pytest.raises(InvalidParameter) as e:
        s.release(q, budget=dpkit.ZCDP(1.0))
    assert e.value.param == "method" and "cells" in str(e.value)
    assert s.reads == 0 and not s.accountant.receipts
    empty = Session(frame().iloc[:0], budget=dpkit.ZCDP(10.0), rng=deterministic_source(1))
    with pytest.raises(InvalidData):
        empty.release(query(empty), budget=dpkit.ZCDP(1.0))
    assert not empty.accountant.receipts


def test_one_charge_before_any_aggregate_or_random_byte() -> None:
    from dpkit.audit.testing import CountingSource

    src = CountingSource(3)
    s = Session(frame(), budget=dpkit.ApproxDP(5.0, 1e-5), unit=unit_of("uid", max_rows=2), rng=src)
    seen = []
    orig = s.accountant.charge

    def charge(*a: Any, **k: Any) -> Any:
        seen.append((s.reads, src.consumed))
        return orig(*a, **k)

    s.accountant.charge = charge  # type: ignore[method-assign]
    q = query(s).marginals(["sex", "age"], domains={"sex": SEX}, bins={"age": AGE}, method="mst", iters=50)
    s.release(q, budget=dpkit.ApproxDP(1.0, 1e-6))
    assert seen == [(1, 0)]  # only the pre-charge validation pass ran, and no random byte was drawn
    assert src.consumed > 0 and s.accountant.spent == dpkit.ApproxDP(1.0, 1e-6)
