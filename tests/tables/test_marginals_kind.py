"""The ``marginals`` statistic kind of dpkit.tables: one exact group-by, Direct (+ consistency) or a fitted model,
one charge before any draw, public categories and bins only, refusals before the charge."""

from __future__ import annotations

import itertools
import re
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

import dpkit  # noqa: E402
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType  # noqa: E402
from dpkit.noise import deterministic_source  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402

SEX = ["F", "M"]
EDU = ["a", "b", "c"]
AGE = [17, 30, 50, 70, 100]


def frame(n: int = 1200, seed: int = 0) -> Any:
    """Generated rows; ``edu`` has an undeclared value ``zz`` and ``age`` values below 17 (not counted)."""
    g = np.random.default_rng(seed)  # test data only
    sex = g.choice(SEX, n)
    edu = np.where(sex == "F", g.choice(["a", "b", "c", "zz"], n, p=[0.5, 0.2, 0.2, 0.1]),
                   g.choice(["a", "b", "c", "zz"], n, p=[0.1, 0.3, 0.5, 0.1]))
    return pd.DataFrame({"uid": g.integers(0, n // 3, n), "sex": sex, "edu": edu, "age": g.integers(10, 95, n),
                         "x": g.uniform(0, 10, n)})


def session(df: Any, budget: Any = None, **kw: Any) -> Session:
    return Session(df, budget=budget or dpkit.ZCDP(100.0), rng=deterministic_source(3), **kw)


def query(s: Session, **kw: Any) -> Any:
    kw.setdefault("domains", {"sex": SEX, "edu": EDU})
    kw.setdefault("bins", {"age": AGE})
    return s.query("m").marginals(["sex", "edu", "age"], **kw)


def in_domain(df: Any) -> Any:
    return df[df["edu"].isin(EDU) & (df["age"] >= 17)].assign(
        agebin=lambda d: np.minimum(np.searchsorted(AGE, d["age"], side="right") - 1, len(AGE) - 2))


def test_direct_rows_cost_and_consistency() -> None:
    df = frame()
    s = session(df, dpkit.PureDP(10.0))
    q = query(s)
    plan = s.plan(q, budget=dpkit.PureDP(1.0))
    (row,) = plan.to_dict("records")
    assert row["statistic"] == "marginals" and row["epsilon"] == 1.0
    assert row["scale"] == 3.0  # 3 sets (all 2-way), add/remove one row: L1 3, discrete Laplace t = 3 / eps
    res = s.release(q, budget=dpkit.PureDP(1.0))
    assert s.accountant.spent == dpkit.PureDP(1.0) and len(s.accountant.receipts) == 1
    assert set(res["statistic"]) == {"marginals"}
    assert list(dict.fromkeys(res["column"])) == ["sex,edu", "sex,age", "edu,age"]
    assert len(res) == 2 * 3 + 2 * 4 + 3 * 4
    assert res["bin"].iloc[0] == "sex=F, edu=a" and "edu=a, age=[70, 100]" in set(res["bin"])
    assert res["lo"].isna().all() and (res["value"] >= 0).all()
    assert all("discrete_laplace(scale=3)" in m and "consistent" in m for m in res["mechanism"])
    assert res["postprocessed"].all()  # the consistent values are a model fit to the noisy counts
    # consistent: the sex 1-way marginal is the same from both sets that hold it
    by = {c: g.set_index("bin")["value"] for c, g in res.groupby("column")}
    f_edu = sum(by["sex,edu"][f"sex=F, edu={e}"] for e in EDU)
    f_age = sum(v for k, v in by["sex,age"].items() if k.startswith("sex=F"))
    assert f_edu == pytest.approx(f_age, rel=1e-3)
    assert res.attrs["coverage"]["outside_bins"] == ["marginals(sex,edu,age)"]


def test_raw_counts_exclude_values_outside_the_domain_and_carry_exact_intervals() -> None:
    df = frame()
    s = session(df, dpkit.PureDP(1e7))
    res = s.release(query(s, sets=[["edu", "sex"], ["age"]], consistent=False), budget=dpkit.PureDP(1e6))
    inside = in_domain(df)
    got = res[res["column"] == "sex,edu"].set_index("bin")["value"]
    for sx, e in itertools.product(SEX, EDU):
        assert got[f"sex={sx}, edu={e}"] == ((inside["sex"] == sx) & (inside["edu"] == e)).sum()
    ages = res[res["column"] == "age"]["value"].to_numpy()
    assert ages.sum() == len(inside)  # rows with "zz" or age < 17 are not counted
    assert not res["postprocessed"].any()  # the raw noisy counts
    hw = (res["hi"] - res["value"]).to_numpy()
    assert np.allclose(res["value"] - res["lo"], hw) and (hw >= 0).all()


def test_least_squares_consistency_keeps_exact_intervals_and_the_same_noise() -> None:
    """``consistent="least_squares"``: the same noisy counts as ``consistent=False`` (same seed, same draws),
    projected to consistent marginals that agree on shared attributes, with per-cell intervals that are
    ``dpkit.marginals.direct(consistent=True)``'s and that cover the truth at a large budget."""
    df = frame()
    sets = [["sex", "edu"], ["sex", "age"], ["edu", "age"]]
    out = {}
    for c in (False, "least_squares"):
        s = session(df, dpkit.ZCDP(10.0))
        out[c] = s.release(query(s, sets=sets, consistent=c), budget=dpkit.ZCDP(1.0))
        assert s.accountant.spent == dpkit.ZCDP(1.0) and len(s.accountant.receipts) == 1
    raw, ls = out[False], out["least_squares"]
    assert list(raw["bin"]) == list(ls["bin"])
    assert ls["postprocessed"].all() and not raw["postprocessed"].any()
    assert all("least-squares consistent" in m for m in ls["mechanism"])
    # the projection of the same noisy vector: the sets agree on sex and on the total
    by = {c: g.set_index("bin")["value"] for c, g in ls.groupby("column")}
    f_edu = sum(by["sex,edu"][f"sex=F, edu={e}"] for e in EDU)
    f_age = sum(v for k, v in by["sex,age"].items() if k.startswith("sex=F"))
    assert f_edu == pytest.approx(f_age, rel=1e-9)
    assert by["sex,edu"].sum() == pytest.approx(by["edu,age"].sum(), rel=1e-9)
    # not the raw counts, but the same total noise scale: the projection never increases a cell's variance
    assert not np.allclose(raw["value"], ls["value"])
    w_raw = (raw["hi"] - raw["lo"]).to_numpy()
    w_ls = (ls["hi"] - ls["lo"]).to_numpy()
    assert np.isfinite(w_ls).all() and (w_ls > 0).all()
    assert np.allclose(ls["hi"] - ls["value"], ls["value"] - ls["lo"])
    # the intervals are direct(consistent=True)'s: one width per set (every cell of a set has the same variance)
    for _, g in ls.groupby("column"):
        widths = (g["hi"] - g["lo"]).to_numpy()
        assert np.allclose(widths, widths[0], rtol=1e-6)
    assert w_ls.mean() < 3 * w_raw.mean()
    # at a large budget the intervals cover the exact counts
    s = session(df, dpkit.ZCDP(1e9))
    big = s.release(query(s, sets=sets, consistent="least_squares"), budget=dpkit.ZCDP(1e8))
    inside = in_domain(df)
    got = big[big["column"] == "sex,edu"].set_index("bin")
    for sx, e in itertools.product(SEX, EDU):
        true = ((inside["sex"] == sx) & (inside["edu"] == e)).sum()
        row = got.loc[f"sex={sx}, edu={e}"]
        assert row["lo"] <= true <= row["hi"] and abs(row["value"] - true) < 0.01


def test_consistent_option_refuses_other_strings_before_any_read() -> None:
    s = session(frame(60))
    for bad in ("least squares", "LEAST_SQUARES", "model", 1, None):
        with pytest.raises((InvalidParameter, WrongType)) as e:
            query(s, consistent=bad)
        assert e.value.param == "consistent"
    assert s.reads == 0 and not s.accountant.receipts


def test_planned_scale_is_the_released_scale_under_zcdp_and_a_privacy_unit() -> None:
    df = frame()
    s = session(df, dpkit.ZCDP(10.0), unit=unit_of("uid", max_rows=3))
    q = query(s, ways=2)
    (row,) = s.plan(q, budget=dpkit.ZCDP(0.5)).to_dict("records")
    # 3 sets, a unit adds <= 3 rows: L2^2 = 3 * 9, sigma^2 >= 27 / (2 rho)
    assert row["scale"] == pytest.approx(np.sqrt(27 / 1.0), rel=1e-9)
    res = s.release(q, budget=dpkit.ZCDP(0.5))
    sigma = float(re.search(r"sigma=([0-9.]+)", res["mechanism"].iloc[0]).group(1))
    assert sigma == pytest.approx(row["scale"], rel=1e-5)
    assert s.accountant.spent == dpkit.ZCDP(0.5)


def test_mst_model_estimates_under_zcdp_and_approx_dp() -> None:
    df = frame()
    s = session(df, dpkit.ApproxDP(10.0, 1e-3))
    q = query(s, method="mst", sets=[["sex", "edu"], ["age"]], iters=100)
    res = s.release(q, budget=dpkit.ApproxDP(1.0, 1e-6))
    assert s.accountant.spent == dpkit.ApproxDP(1.0, 1e-6)
    assert len(res) == 6 + 4 and res["lo"].isna().all()
    assert all(m.startswith("mst(rho=") and "model estimate" in m for m in res["mechanism"])
    assert res[res["column"] == "age"]["value"].sum() == pytest.approx(len(in_domain(df)), rel=0.1)


def test_zcdp_methods_are_refused_under_pure_dp_before_anything_is_read() -> None:
    s = session(frame(), dpkit.PureDP(10.0))
    q = query(s, method="mst")
    with pytest.raises(InvalidParameter) as e:
        s.release(q, budget=dpkit.PureDP(1.0))
    assert e.value.param == "budget" and "zCDP" in str(e.value)
    assert s.reads == 0 and s.accountant.spent == dpkit.PureDP(0.0)


def test_refused_charge_reads_and_draws_nothing() -> None:
    s = session(frame(), dpkit.PureDP(0.5))
    with pytest.raises(BudgetExceeded):
        s.release(query(s), budget=dpkit.PureDP(1.0))
    assert s.reads == 0 and not s.accountant.receipts


@pytest.mark.parametrize("kwargs, err, param", [
    ({"domains": {"sex": SEX}}, InvalidParameter, "domains"),                    # edu without categories
    ({"domains": {"edu": EDU}, "bins": {"age": AGE, "sex": [0, 1]}}, WrongType, "bins"),  # a string column binned
    ({"bins": {"age": [30, 20]}}, InvalidParameter, "bins"),                     # not increasing
    ({"bins": {"age": [17.2, 17.8]}}, InvalidParameter, "bins"),                 # an int bin holding no integer
    ({"domains": {"sex": [1, 2], "edu": EDU}}, WrongType, "domains"),            # numbers for a string column
    ({"sets": [["sex", "nope"]]}, InvalidParameter, "sets"),
    ({"sets": [["sex"], ["sex"]]}, InvalidParameter, "sets"),
    ({"sets": [["sex"]], "ways": 1}, InvalidParameter, "sets"),
    ({"ways": 4}, InvalidParameter, "ways"),
    ({"method": "flat"}, InvalidParameter, "method"),
    ({"bins": {"age": list(range(0, 2000))}, "ways": 3, "domains": {"sex": SEX, "edu": [f"e{i}" for i in range(600)]}},
     InvalidParameter, "sets"),                                                  # too many cells
])
def test_bad_parameters_are_typed_errors_before_any_charge(kwargs: dict, err: type, param: str) -> None:
    s = session(frame())
    with pytest.raises(err) as e:
        query(s, **kwargs)
    assert e.value.param == param
    assert s.reads == 0 and not s.accountant.receipts


def test_unknown_column_and_grouped_query_are_refused() -> None:
    s = session(frame())
    with pytest.raises(InvalidParameter) as e:
        s.query("m").marginals(["sex", "nope"], domains={"sex": SEX})
    assert e.value.param == "columns"
    with pytest.raises(InvalidParameter) as e:
        s.query("m").group_by("sex", keys=SEX).marginals(["edu"], domains={"edu": EDU})
    assert e.value.param == "group_by"


def test_consistency_tree_too_large_is_refused_with_what_would_fit() -> None:
    g = np.random.default_rng(1)  # test data only
    df = pd.DataFrame({f"c{i}": g.integers(0, 40, 50) for i in range(6)})
    s = session(df)
    with pytest.raises(InvalidParameter) as e:
        s.query("m").marginals([f"c{i}" for i in range(6)], bins={f"c{i}": list(range(41)) for i in range(6)})
    assert e.value.param == "sets" and "method='mst'" in str(e.value)


def test_no_row_in_the_declared_domain_is_refused_before_the_charge() -> None:
    df = frame()
    df["edu"] = "zz"
    s = session(df)
    with pytest.raises(InvalidData) as e:
        s.release(query(s), budget=dpkit.ZCDP(0.5))
    assert e.value.param == "data" and "zz" not in str(e.value)
    assert not s.accountant.receipts


def test_reproducible_under_a_seed_and_postprocess_rounds() -> None:
    df = frame()
    out = []
    for _ in range(2):
        s = session(df, dpkit.PureDP(10.0))
        out.append(s.release(query(s, consistent=False), budget=dpkit.PureDP(1.0),
                             postprocess={"nonnegative": True, "round": True}))
    assert out[0]["value"].tolist() == out[1]["value"].tolist()
    assert (out[0]["value"] >= 0).all()


def test_brute_force_sensitivity_under_a_privacy_unit() -> None:
    """Adding one unit (1..6 rows) moves each released set by at most R = max_rows in L1 (the calibration's
    per-set sensitivity): exact counts from a release whose noise is negligible (scale 6e-9)."""
    base = frame(300, seed=4)
    g = np.random.default_rng(9)  # test data only
    r = 2

    def exact(df: Any) -> Any:
        s = Session(df, budget=dpkit.PureDP(1e10), unit=unit_of("uid", max_rows=r), rng=deterministic_source(1))
        res = s.release(query(s, consistent=False), budget=dpkit.PureDP(1e9))
        return res.set_index(["column", "bin"])["value"]

    ref = exact(base)
    worst = 0.0
    for trial in range(6):
        k = 1 + trial
        extra = pd.DataFrame({"uid": [10_000] * k, "sex": g.choice(SEX, k), "edu": g.choice(EDU, k),
                              "age": g.integers(17, 95, k), "x": g.uniform(0, 10, k)})
        diff = (exact(pd.concat([base, extra], ignore_index=True)) - ref).abs()
        per_set = diff.groupby(level="column").sum()
        assert (per_set <= r).all()
        worst = max(worst, float(per_set.max()))
    assert worst == r  # attained


JUNK = [None, "", "sex", 3, 1.5, float("nan"), [], [[]], {"a": 1}, [None], ["sex", "sex"], {"sex": "F"},
        {"age": "x"}, {"age": [1]}, {"age": [float("inf"), 2]}, True, -1, 10**30]


@pytest.mark.parametrize("param", ["columns", "sets", "ways", "domains", "bins", "method", "consistent", "iters",
                                   "weight"])
def test_junk_parameters_raise_only_dpkit_errors(param: str) -> None:
    s = session(frame(60))
    for junk in JUNK:
        kw: dict[str, Any] = {"domains": {"sex": SEX, "edu": EDU}, "bins": {"age": AGE}}
        cols: Any = ["sex", "edu", "age"]
        if param == "columns":
            cols = junk
        else:
            kw[param] = junk
        try:
            s.query("m").marginals(cols, **kw)
            s.query("s").synthetic(cols, **{k: v for k, v in kw.items() if k in ("domains", "bins", "method",
                                                                                  "iters", "weight")})
        except dpkit.DPKitError as exc:
            assert "nan" not in str(exc).lower() or param == "method"
    assert s.reads == 0 and not s.accountant.receipts
