"""dpkit.synth.synthesize: one charge first, the original schema back, marginals close at a large budget, the
public row count, bin decoding, and typed refusals before any charge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpkit import ZCDP, Accountant, ApproxDP, InvalidData, InvalidParameter, WrongType
from dpkit.audit.testing import assert_charges_first
from dpkit.noise import deterministic_source
from dpkit.synth import synthesize

SECRET = 987654.321
AGE_BINS = [18, 30, 45, 60, 90]
W_BINS = [0.0, 2.5, 5.0, 7.5, 10.0]


def _frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    sex = g.choice(["f", "m"], n)
    age = g.integers(18, 90, n)
    rich = (age / 90 + (sex == "m") * 0.4 + 0.3 * g.random(n)) > 1.0
    return pd.DataFrame({
        "sex": pd.Categorical(sex, categories=["f", "m"]),
        "age": age,
        "w": np.round(g.random(n) * 10, 3),
        "rich": rich,
        "town": pd.Series(np.where(rich, "x", g.choice(["x", "y", "z"], n)), dtype=object),
        "grade": (age // 30).astype(np.int32),
    })


DOMAIN = {"sex": ["f", "m"], "town": ["x", "y", "z"], "grade": 4}
BINS = {"age": AGE_BINS, "w": W_BINS}


def _synth(df: pd.DataFrame, *args, **kwargs):
    kwargs.setdefault("method", "mst")  # these tests are about the frame, not the method: MST is the faster one
    kwargs.setdefault("domain", DOMAIN)
    kwargs.setdefault("bins", BINS)
    return synthesize(df, *args, **kwargs)


def test_one_charge_before_any_draw():
    rel = assert_charges_first(_synth, (_frame(200), 1.0), {"delta": 1e-6}, cost=ApproxDP(1.0, 1e-6),
                               name="synthesize")
    assert isinstance(rel.value, pd.DataFrame)


def test_round_trip_schema():
    df = _frame(500)
    df["s"] = pd.Series(df["town"].astype(str), dtype="str")
    rel = _synth(df, 1.0, domain={**DOMAIN, "s": ["x", "y", "z"]}, rng=deterministic_source(1))
    out = rel.value
    assert list(out.columns) == list(df.columns)
    assert list(out.dtypes) == list(df.dtypes)
    assert list(out["sex"].cat.categories) == ["f", "m"]
    assert set(out["town"]) <= {"x", "y", "z"} and set(out["s"]) <= {"x", "y", "z"}
    assert out["grade"].between(0, 3).all()
    assert isinstance(out.index, pd.RangeIndex) and len(out) == rel.parts["rows"]
    assert abs(len(out) - len(df)) < 100  # the noisy count (the fitted model's total)
    assert {"model", "rows", "method"} <= set(rel.parts) and "tree" in rel.parts["method"]


def test_large_budget_two_way_marginals_approach_the_data():
    df = _frame(4000, seed=1)
    out = _synth(df, rho=1e4, rows=len(df), rng=deterministic_source(2)).value
    enc = {"age": lambda s: np.searchsorted(AGE_BINS, s, side="right") - 1,
           "w": lambda s: np.minimum(np.searchsorted(W_BINS, s, side="right") - 1, 3)}
    def coded(frame: pd.DataFrame, col: str) -> np.ndarray:
        return np.asarray(enc[col](frame[col].to_numpy())) if col in enc else frame[col].astype(str).to_numpy()
    tvs = []
    for a, b in [("sex", "rich"), ("age", "rich"), ("age", "grade"), ("town", "rich"), ("sex", "w")]:
        p = pd.crosstab(coded(df, a), coded(df, b), normalize=True)
        q = pd.crosstab(coded(out, a), coded(out, b), normalize=True).reindex_like(p).fillna(0.0)
        tvs.append(0.5 * float(np.abs(p.to_numpy() - q.to_numpy()).sum()))
    assert max(tvs) < 0.05, tvs


def test_rows_are_public_and_bins_decode_inside_their_bin():
    df = _frame(300)
    out = _synth(df, 1.0, rows=1234, rng=deterministic_source(3)).value
    assert len(out) == 1234
    assert out["age"].between(18, 90).all() and out["w"].between(0.0, 10.0).all()
    mid = _synth(df, 1.0, rows=500, bin_values="midpoint", rng=deterministic_source(3)).value
    assert set(mid["age"]) <= {23, 37, 52, 75}  # integer bins 18..29, 30..44, 45..59, 60..90
    assert set(mid["w"]) <= {1.25, 3.75, 6.25, 8.75}
    empty = _synth(df, 1.0, rows=0, rng=deterministic_source(3)).value
    assert list(empty.columns) == list(df.columns) and len(empty) == 0


def test_categorical_dtype_domain_and_bins_in_domain():
    df = _frame(300)[["sex", "age"]]
    rel = synthesize(df, rho=1.0, domain={"sex": df["sex"].dtype, "age": {"bins": AGE_BINS}},
                     rng=deterministic_source(4))
    assert rel.cost == ZCDP(1.0)
    assert list(rel.value.dtypes) == list(df.dtypes)


def _bad(df: pd.DataFrame, **kwargs):
    return {"data": df, **kwargs}


@pytest.mark.parametrize(("change", "error", "param"), [
    (lambda df: _bad(df, domain={**DOMAIN, "nope": [1]}), InvalidParameter, "domain"),
    (lambda df: _bad(df, bins={**BINS, "nope": [0, 1]}), InvalidParameter, "bins"),
    (lambda df: _bad(df, domain={"sex": ["f", "m"], "grade": 4}), InvalidParameter, "domain"),  # town undeclared
    (lambda df: _bad(df, bins={"age": AGE_BINS}), InvalidParameter, "bins"),  # w unbounded
    (lambda df: _bad(df, domain={**DOMAIN, "town": ["x", "y"]}), InvalidData, "data"),
    (lambda df: _bad(df, bins={**BINS, "age": [20, 90]}), InvalidData, "data"),
    (lambda df: _bad(df.assign(w=df["w"].where(df.index != 3, np.nan))), InvalidData, "data"),
    (lambda df: _bad(df.iloc[:0]), InvalidData, "data"),
    (lambda df: _bad(df.to_numpy()), WrongType, "data"),
    (lambda df: _bad(df, bins={**BINS, "age": [18, 18.5, 18.7, 90]}), InvalidParameter, "bins"),  # no integer
    (lambda df: _bad(df, bins={**BINS, "age": [90, 18]}), InvalidParameter, "bins"),
    (lambda df: _bad(df, domain={"sex": ["f", "m"], "grade": 4}, bins={**BINS, "town": [0, 1]}), WrongType, "bins"),
    (lambda df: _bad(df, domain={**DOMAIN, "town": ["x", "x", "y", "z"]}), InvalidParameter, "domain"),
    (lambda df: _bad(df, domain={**DOMAIN, "grade": ["a", "b"]}), InvalidParameter, "domain"),
    (lambda df: _bad(df, method="nope"), InvalidParameter, "method"),
    (lambda df: _bad(df, options={"bogus": 1}), InvalidParameter, "options"),
    (lambda df: _bad(df, rows=-1), InvalidParameter, "rows"),
    (lambda df: _bad(df, bin_values="median"), InvalidParameter, "bin_values"),
    (lambda df: _bad(df, epsilon=None), InvalidParameter, "epsilon"),
    (lambda df: _bad(df, rho=1.0), InvalidParameter, "rho"),  # with epsilon too
])
def test_refusals_before_any_charge(change, error, param):
    df = _frame(100)
    df.loc[5, "w"] = 9.5  # keep inside the bins; the secret goes in an error-prone spot below
    kwargs = {"epsilon": 1.0, "domain": DOMAIN, "bins": BINS}
    kwargs.update(change(df))
    acct = Accountant(ApproxDP(10.0, 1e-3))
    with pytest.raises(error) as exc:
        synthesize(**kwargs, accountant=acct, rng=deterministic_source(1))
    assert exc.value.param == param
    assert not acct.receipts


def test_messages_never_show_data_values():
    df = _frame(100)
    df["w"] = df["w"].astype(float)
    df.loc[7, "w"] = SECRET
    with pytest.raises(InvalidData) as exc:
        _synth(df, 1.0)
    assert "987654" not in str(exc.value) and "'w'" in str(exc.value)
    df2 = _frame(100)
    df2.loc[7, "town"] = "secret-town"
    with pytest.raises(InvalidData) as exc:
        _synth(df2, 1.0)
    assert "secret" not in str(exc.value)


# ------------------------------------------------------------------ weights (pre-aggregated frames)
def _aggregated(seed: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A group-by with a count column (some zero counts), and its expansion to one row per record."""
    g = np.random.default_rng(seed)
    df = _frame(400, seed=seed)[["sex", "town", "grade"]]
    agg = df.groupby(["sex", "town", "grade"], observed=False).size().reset_index(name="n")
    agg["n"] = agg["n"].astype(np.int64)
    agg.loc[0, "n"] = 0
    agg = agg.sample(frac=1.0, random_state=int(g.integers(1000))).reset_index(drop=True)
    expanded = agg.loc[agg.index.repeat(agg["n"])].drop(columns=["n"]).reset_index(drop=True)
    return agg, expanded


def test_weighted_frame_equals_expanded_frame():
    agg, expanded = _aggregated()
    assert len(agg) < 40 and len(expanded) > 300
    dom = {"sex": ["f", "m"], "town": ["x", "y", "z"], "grade": 4}
    for kwargs, budget in (({"epsilon": 1.0, "delta": 1e-6}, ApproxDP(10.0, 1e-3)),
                           ({"rho": 0.5, "rows": 77}, ZCDP(10.0))):
        a1, a2 = Accountant(budget), Accountant(budget)
        r1 = synthesize(agg, weights="n", domain=dom, accountant=a1, rng=deterministic_source(7), **kwargs)
        r2 = synthesize(expanded, domain=dom, accountant=a2, rng=deterministic_source(7), **kwargs)
        pd.testing.assert_frame_equal(r1.value, r2.value)
        assert list(r1.value.columns) == ["sex", "town", "grade"]
        assert list(r1.value.dtypes) == list(expanded.dtypes)
        assert r1.cost == r2.cost and [x.cost for x in a1.receipts] == [x.cost for x in a2.receipts]
        assert r1.parts["model"] == r2.parts["model"]
        assert r1.params["weights"] == "n" and r2.params["weights"] is None


def test_weight_zero_rows_are_dropped_unread_and_float_whole_weights_accepted():
    agg, expanded = _aggregated(6)
    dom = {"sex": ["f", "m"], "town": ["x", "y", "z"], "grade": 4}
    bad = agg.copy()
    bad["town"] = bad["town"].astype(object)
    assert (bad["n"] == 0).any()
    bad.loc[bad["n"] == 0, "town"] = "not-a-town"  # weight 0: never read
    bad["n"] = bad["n"].astype(np.float64)
    r1 = synthesize(bad, 1.0, weights="n", domain=dom, rng=deterministic_source(8))
    r2 = synthesize(expanded, 1.0, domain=dom, rng=deterministic_source(8))
    pd.testing.assert_frame_equal(r1.value.astype({"town": object}), r2.value.astype({"town": object}))
    nullable = agg.astype({"n": "Int64"})
    r3 = synthesize(nullable, 1.0, weights="n", domain=dom, rng=deterministic_source(8))
    pd.testing.assert_frame_equal(r3.value, r2.value)


@pytest.mark.parametrize(("change", "error", "param"), [
    (lambda a: {"weights": "nope"}, InvalidParameter, "weights"),
    (lambda a: {"weights": ["n"]}, InvalidParameter, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].astype(str))}, WrongType, "weights"),
    (lambda a: {"data": a.assign(n=a["n"] > 0)}, WrongType, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].where(a.index != 2, -SECRET).astype(np.float64))}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].where(a.index != 2, -3))}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].astype(np.float64).where(a.index != 2, np.nan))}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].astype("Int64").where(a.index != 2, pd.NA))}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=a["n"] + 0.5)}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=0)}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=2**36)}, InvalidData, "weights"),  # total above 2^40 - 1
    (lambda a: {"data": a.assign(n=a["n"].astype(np.float64).where(a.index != 2, 1e300))}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].astype(np.uint64).where(a.index != 2, 2**64 - 1))}, InvalidData,
     "weights"),
    (lambda a: {"data": a.assign(n=a["n"].where(a.index != 2, 2**62))}, InvalidData, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].astype(object).where(a.index != 2, None))}, WrongType, "weights"),
    (lambda a: {"data": a.assign(n=a["n"].astype(np.float64).where(a.index != 2, np.inf))}, InvalidData, "weights"),
    (lambda a: {"domain": {"sex": ["f", "m"], "town": ["x", "y", "z"], "grade": 4, "n": 3}}, InvalidParameter,
     "domain"),
    (lambda a: {"data": a[["n"]]}, InvalidData, "data"),
])
def test_weights_refusals_before_any_charge(change, error, param):
    agg, _ = _aggregated()
    kwargs = {"data": agg, "epsilon": 1.0, "weights": "n", "domain": {"sex": ["f", "m"], "town": ["x", "y", "z"],
                                                                      "grade": 4}}
    kwargs.update(change(agg))
    acct = Accountant(ApproxDP(10.0, 1e-3))
    with pytest.raises(error) as exc:
        synthesize(**kwargs, accountant=acct, rng=deterministic_source(1))
    assert exc.value.param == param
    assert "987654" not in str(exc.value)
    assert not acct.receipts


# ------------------------------------------------------------------ the noisy record count (count_share)
def _tiny(n: int = 50) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame({"a": (i * 7) % 3, "b": np.where(i % 4 == 0, "x", "y")})


TINY = {"a": 3, "b": ["x", "y"]}


def test_count_is_the_discrete_gaussian_of_its_share_drawn_first():
    from dpkit.mechanisms import discrete_gaussian_plan

    df = _tiny(60)
    for seed in range(5):
        rel = synthesize(df, rho=0.5, domain=TINY, method="mst", options={"iters": 20}, rng=deterministic_source(seed))
        p = rel.params
        assert p["count_share"] == 0.02 and p["count_sensitivity"] == 1.0
        expected = discrete_gaussian_plan(60, 1.0, rho=p["count_rho"]).sample(deterministic_source(seed)).value
        count = rel.parts["count"]
        assert count == expected
        assert rel.parts["rows"] == len(rel.value) == min(2**26, max(1, count))
        assert rel.parts["model"].total == pytest.approx(max(1, count))
        assert rel.cost == ZCDP(0.5)
    # the exact split: count share + method share <= rho, and the method ran on the method share
    from fractions import Fraction

    assert Fraction(p["count_rho"]) + Fraction(p["method_rho"]) <= Fraction(0.5)
    assert p["count_rho"] == pytest.approx(0.01) and p["rho"] == 0.5
    assert Fraction(p["one_way_rho"]) + Fraction(p["two_way_rho"]) <= Fraction(p["method_rho"])
    assert p["count_std"] == pytest.approx(1.0 / np.sqrt(2 * p["count_rho"]))


def test_count_law_mean_and_variance():
    """N + Z with Z discrete Gaussian (sigma = 5 at rho_c = 0.02): the sample mean and variance of 200 draws within
    bounds that a correct law exceeds with probability < 1e-7 each (normal mean test; chi-square variance test,
    the discrete Gaussian's variance is sigma^2 to within 1e-100 at sigma = 5)."""
    from scipy import stats

    df = _tiny(40)
    m = 200
    z = np.empty(m)
    for s in range(m):
        rel = synthesize(df, rho=1.0, domain=TINY, rows=0, method="mst", options={"iters": 1, "select_iters": 1},
                         rng=deterministic_source(1000 + s))
        z[s] = rel.parts["count"] - 40
    sigma = rel.params["count_std"]
    assert sigma == pytest.approx(5.0)
    assert abs(z.mean()) <= 5.33 * sigma / np.sqrt(m)  # P(|N(0,1)| > 5.33) < 1e-7
    ratio = (m - 1) * z.var(ddof=1) / sigma**2
    assert stats.chi2.ppf(5e-8, m - 1) <= ratio <= stats.chi2.isf(5e-8, m - 1)


def test_count_share_zero_keeps_the_models_total_and_the_methods_cost():
    df = _tiny(80)
    rel = synthesize(df, 1.0, delta=1e-6, domain=TINY, count_share=0, method="mst", options={"iters": 20},
                     rng=deterministic_source(3))
    assert rel.parts["count"] is None and "count_rho" not in rel.params
    assert rel.parts["rows"] == max(1, int(np.floor(rel.parts["model"].total + 0.5)))
    assert rel.cost == ApproxDP(1.0, 1e-6)


def test_count_under_a_privacy_unit_and_with_weights():
    from dpkit.core.neighbours import PrivacyUnit

    df = _tiny(30).assign(n=np.arange(30) % 3)
    rel = synthesize(df, rho=1.0, domain=TINY, weights="n", neighbours=PrivacyUnit("u", 3), method="mst",
                     options={"iters": 10}, rng=deterministic_source(4))
    assert rel.params["count_sensitivity"] == 3.0
    from dpkit.mechanisms import discrete_gaussian_plan

    total = int(df["n"].sum())
    assert rel.parts["count"] == discrete_gaussian_plan(total, 3.0, rho=rel.params["count_rho"]).sample(
        deterministic_source(4)).value


def test_count_with_epsilon_delta_charges_exactly_the_budget():
    df = _tiny(50)
    acct = Accountant(ApproxDP(2.0, 1e-5))
    rel = synthesize(df, 1.0, delta=1e-6, domain=TINY, accountant=acct, method="mst", options={"iters": 10},
                     rng=deterministic_source(5))
    assert rel.cost == ApproxDP(1.0, 1e-6) and [r.cost for r in acct.receipts] == [ApproxDP(1.0, 1e-6)]
    zacct = Accountant(ZCDP(1.0))
    rel = synthesize(df, 1.0, delta=1e-6, domain=TINY, accountant=zacct, method="mst", options={"iters": 10},
                     rng=deterministic_source(5))
    assert rel.cost == ZCDP(rel.params["rho"])


@pytest.mark.parametrize(("kwargs", "error", "param"), [
    ({"count_share": 1.0}, InvalidParameter, "count_share"),
    ({"count_share": -0.1}, InvalidParameter, "count_share"),
    ({"count_share": "x"}, WrongType, "count_share"),
    ({"count_share": float("nan")}, InvalidParameter, "count_share"),
    ({"options": {"total": 10.0}}, InvalidParameter, "options"),
    ({"delta": None}, InvalidParameter, "delta"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
])
def test_count_share_refusals_before_any_charge(kwargs, error, param):
    acct = Accountant(ApproxDP(10.0, 1e-3))
    call = {"epsilon": 1.0, "domain": TINY, **kwargs}
    with pytest.raises(error) as exc:
        synthesize(_tiny(), **call, accountant=acct, rng=deterministic_source(1))
    assert exc.value.param == param and not acct.receipts


# ------------------------------------------------------------------ method="smg"
def test_smg_end_to_end_on_a_generated_frame():
    df = _frame(1500, seed=9)
    acct = Accountant(ApproxDP(5.0, 1e-5))
    rel = _synth(df, 2.0, delta=1e-6, method="smg", options={"rounds": 8, "fit_iters": 10, "final_iters": 50},
                 accountant=acct, rng=deterministic_source(11))
    out = rel.value
    assert list(out.columns) == list(df.columns) and list(out.dtypes) == list(df.dtypes)
    assert rel.params["method"] == "smg" and rel.params["inner_mechanism"] == "smg_marginals"
    assert [r.cost for r in acct.receipts] == [ApproxDP(2.0, 1e-6)]
    assert rel.parts["rows"] == len(out) == max(1, rel.parts["count"])
    assert rel.parts["method"]["total"] == float(max(1, rel.parts["count"]))  # the count is smg's total
    assert abs(len(out) - len(df)) < 60
    # the released model answers the 1-way marginals well at this budget
    p = df["rich"].mean()
    assert abs(out["rich"].mean() - p) < 0.08
    same = _synth(df, 2.0, delta=1e-6, method="smg", options={"rounds": 8, "fit_iters": 10, "final_iters": 50},
                  rng=deterministic_source(11))
    pd.testing.assert_frame_equal(same.value, out)


def test_smg_plan_is_public_and_matches_smg():
    from dpkit.marginals import Domain, Records, smg, smg_plan
    from dpkit.mechanisms.contract import run

    rec = Records((np.arange(600).reshape(200, 3) * 7 // 5) % 2, Domain({"a": 2, "b": 2, "c": 2}))
    kw = {"rounds": 3, "fit_iters": 5, "final_iters": 5}
    a = smg(rec, 0.5, **kw, rng=deterministic_source(2))
    b = run(smg_plan(rec, 0.5, **kw), accountant=None, rng=deterministic_source(2), description="")
    assert a.value == b.value and a.cost == b.cost == ZCDP(0.5)
