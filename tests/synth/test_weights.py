"""Weighted (pre-aggregated) input without expansion: weighted Records give the expanded rows' marginals and
length exactly, every method synthesize supports gives the same draws on a weighted frame as on its expansion
(several frames and seeds), totals far above the former 2^24 expansion limit run in the aggregated frame's
memory, and bad weights are typed errors naming ``weights`` before any charge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpkit import ZCDP, Accountant, ApproxDP, InvalidData, WrongType
from dpkit.marginals import Domain, Records, direct, flat, marginal, mst, mwem, priview, smg
from dpkit.marginals.domain import MAX_WEIGHT_TOTAL
from dpkit.noise import deterministic_source
from dpkit.synth import synthesize
from dpkit.synth.synthetic import METHODS

SECRET = 987654.321
_FAST = {"mst": {"iters": 30}, "smg": {"rounds": 4, "fit_iters": 5, "final_iters": 20}}


def _frame(n: int, seed: int) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    a = g.integers(0, 3, n)
    b = np.where(g.random(n) < 0.3 + 0.2 * a, "y", "x")
    c = (a + g.integers(0, 2, n)) % 4
    age = 18 + (a * 20 + g.integers(0, 30, n))
    return pd.DataFrame({"a": a, "b": pd.Series(b, dtype=object), "c": pd.Categorical(c, categories=[0, 1, 2, 3]),
                         "age": age})


DOM = {"a": 3, "b": ["x", "y"]}
BINS = {"age": [18, 40, 60, 90]}


def _aggregate(df: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The group-by of ``df`` with a count column ``n`` (rows shuffled, one zero-count row added), and its
    expansion (row order of the expansion: the aggregated rows' order)."""
    agg = df.groupby(list(df.columns), observed=True).size().reset_index(name="n")
    agg = pd.concat([agg, agg.iloc[:1].assign(n=0)], ignore_index=True)
    agg = agg.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    agg["n"] = agg["n"].astype(np.int64)
    for col in df.columns:
        agg[col] = agg[col].astype(df[col].dtype)
    expanded = agg.loc[agg.index.repeat(agg["n"])].drop(columns=["n"]).reset_index(drop=True)
    for col in df.columns:
        expanded[col] = expanded[col].astype(df[col].dtype)
    return agg, expanded


# ------------------------------------------------------------------ weighted Records
def test_weighted_records_marginals_and_length_equal_the_expansion():
    g = np.random.default_rng(0)
    dom = Domain({"a": 3, "b": 2, "c": 5})
    codes = np.column_stack([g.integers(0, k, 40) for k in (3, 2, 5)])
    w = g.integers(0, 7, 40)
    rw = Records(codes, dom, weights=w)
    rx = Records(np.repeat(codes, w, axis=0), dom)
    assert len(rw) == len(rx) == int(w.sum())
    for attrs in ([], ["a"], ["c", "a"], ["a", "b", "c"]):
        np.testing.assert_array_equal(marginal(rw, attrs), marginal(rx, attrs))
    assert len(rw.project(["b"])) == len(rx)
    np.testing.assert_array_equal(marginal(rw.project(["c", "b"])), marginal(rx, ["b", "c"]))
    assert Records(codes, dom).weights is None and rw.weights is not None and not rw.weights.flags.writeable


def test_weighted_records_are_exact_at_large_totals():
    dom = Domain({"a": 2})
    rw = Records([[0], [1], [0]], dom, weights=[2**52, 3, 2**52 - 4])
    m = marginal(rw, ["a"])
    assert int(m[0]) == 2**53 - 4 and int(m[1]) == 3 and len(rw) == 2**53 - 1 == int(marginal(rw, []))


@pytest.mark.parametrize("bad", [[1, -1], [1.5, 1], [np.nan, 1], [np.inf, 1], [2**53, 1], [2**63 - 1, 2**63 - 1],
                                 [1e300, 0], [1], [[1, 1]]])
def test_weighted_records_refusals(bad):
    with pytest.raises(InvalidData) as exc:
        Records([[0], [1]], Domain({"a": 2}), weights=bad)
    assert exc.value.param == "weights"
    with pytest.raises(WrongType) as exc2:
        Records([[0], [1]], Domain({"a": 2}), weights=["x", "y"])
    assert exc2.value.param == "weights"


def test_every_marginal_method_reads_weighted_records_as_their_expansion():
    g = np.random.default_rng(3)
    dom = Domain({"a": 2, "b": 3, "c": 2})
    codes = np.column_stack([g.integers(0, k, 30) for k in (2, 3, 2)])
    w = g.integers(1, 9, 30)
    rw, rx = Records(codes, dom, weights=w), Records(np.repeat(codes, w, axis=0), dom)
    calls = [
        lambda r, s: direct(r, [("a", "b"), ("b", "c")], 1.0, rng=deterministic_source(s)),
        lambda r, s: flat(r, 1.0, rng=deterministic_source(s)),
        lambda r, s: mwem(r, [("a", "b"), ("b", "c")], 1.0, rounds=3, fit_iters=5, rng=deterministic_source(s)),
        lambda r, s: priview(r, 1.0, view_size=2, iters=20, rng=deterministic_source(s)),
        lambda r, s: mst(r, 1.0, iters=20, rng=deterministic_source(s)),
        lambda r, s: smg(r, 1.0, rounds=3, fit_iters=5, final_iters=5, rng=deterministic_source(s)),
    ]
    for call in calls:
        for s in (1, 2):
            a, b = call(rw, s), call(rx, s)
            assert a.cost == b.cost and a.params == b.params
            if isinstance(a.value, dict):
                assert a.value.keys() == b.value.keys()
                for k in a.value:
                    np.testing.assert_array_equal(a.value[k], b.value[k])
            else:
                assert a.value == b.value


# ------------------------------------------------------------------ synthesize
@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize(("n", "frame_seed", "cols"), [(300, 1, ["a", "b"]), (500, 2, ["a", "b", "c"]),
                                                       (400, 3, ["a", "c", "age"])])
def test_weighted_frame_gives_the_same_draws_as_its_expansion(method, n, frame_seed, cols):
    df = _frame(n, frame_seed)[cols]
    agg, expanded = _aggregate(df, frame_seed)
    assert len(agg) < len(expanded) // 2
    dom = {k: v for k, v in {**DOM, "c": [0, 1, 2, 3]}.items() if k in cols}
    bins = {k: v for k, v in BINS.items() if k in cols}
    for seed, kwargs in ((7, {"rho": 0.5}), (8, {"epsilon": 1.0, "delta": 1e-6, "rows": 50}),
                         (9, {"rho": 1.0, "count_share": 0.0})):
        a1, a2 = Accountant(ZCDP(10.0)), Accountant(ZCDP(10.0))
        r1 = synthesize(agg, weights="n", domain=dom, bins=bins, method=method, options=_FAST[method],
                        accountant=a1, rng=deterministic_source(seed), **kwargs)
        r2 = synthesize(expanded, domain=dom, bins=bins, method=method, options=_FAST[method], accountant=a2,
                        rng=deterministic_source(seed), **kwargs)
        pd.testing.assert_frame_equal(r1.value, r2.value)
        assert r1.parts["model"] == r2.parts["model"]
        assert r1.parts["count"] == r2.parts["count"] and r1.parts["rows"] == r2.parts["rows"]
        assert r1.cost == r2.cost and [x.cost for x in a1.receipts] == [x.cost for x in a2.receipts]
        assert {k: v for k, v in r1.params.items() if k != "weights"} == \
            {k: v for k, v in r2.params.items() if k != "weights"}


def test_totals_far_above_the_former_expansion_limit():
    """2^34 underlying records in 12 rows: the count is their total (sensitivity unchanged), the model fits
    their proportions; nothing of size 2^34 is built."""
    g = np.random.default_rng(4)
    agg = pd.DataFrame({"a": np.repeat([0, 1, 2], 4), "b": ["x", "y"] * 6})
    p = g.dirichlet(np.ones(12))
    agg["n"] = np.floor(p * 2**34).astype(np.int64)
    total = int(agg["n"].sum())
    assert total > 2**33
    rel = synthesize(agg, rho=1.0, weights="n", domain=DOM, method="mst", options={"iters": 50}, rows=1000,
                     rng=deterministic_source(5))
    assert abs(rel.parts["count"] - total) < 100  # count_std about 5 at this share
    assert rel.params["count_sensitivity"] == 1.0
    model = rel.parts["model"]
    truth = agg.groupby("a")["n"].sum().to_numpy() / total
    np.testing.assert_allclose(model.project(["a"]) / model.total, truth, atol=1e-6)
    assert len(rel.value) == 1000


def test_largest_total_is_accepted_and_one_more_is_refused():
    agg = pd.DataFrame({"a": [0, 1, 2], "b": ["x", "y", "x"], "n": [2**39, 2**39 - 1, 0]})
    from dpkit.synth.synthetic import MAX_WEIGHT_TOTAL as SYN_MAX

    assert SYN_MAX == 2**40 - 1 <= MAX_WEIGHT_TOTAL
    rel = synthesize(agg, rho=1.0, weights="n", domain=DOM, method="mst", options={"iters": 5}, rows=10,
                     rng=deterministic_source(6))
    assert len(rel.value) == 10
    acct = Accountant(ZCDP(10.0))
    with pytest.raises(InvalidData) as exc:
        synthesize(agg.assign(n=[2**39, 2**39, 0]), rho=1.0, weights="n", domain=DOM, method="mst",
                   accountant=acct, rng=deterministic_source(6))
    assert exc.value.param == "weights" and not acct.receipts


@pytest.mark.parametrize(("values", "error"), [
    ([1.0, -SECRET, 2.0], InvalidData), ([1.0, SECRET, 2.0], InvalidData), ([1.0, np.nan, 2.0], InvalidData),
    ([1.0, np.inf, 2.0], InvalidData), ([1.0, -np.inf, 2.0], InvalidData), ([1.0, 1e300, 2.0], InvalidData),
    ([1, None, 2], WrongType), (["1", "2", "3"], WrongType), ([True, False, True], WrongType),
    ([1.0, 2.0**45, 2.0], InvalidData), ([0, 0, 0], InvalidData),
])
def test_bad_weights_are_refused_before_any_charge(values, error):
    agg = pd.DataFrame({"a": [0, 1, 2], "b": ["x", "y", "x"]})
    agg["n"] = pd.Series(values, dtype=object if None in values or isinstance(values[0], str) else None)
    acct = Accountant(ApproxDP(10.0, 1e-3))
    with pytest.raises(error) as exc:
        synthesize(agg, epsilon=1.0, delta=1e-6, weights="n", domain=DOM, accountant=acct,
                   rng=deterministic_source(1))
    assert exc.value.param == "weights"
    assert "987654" not in str(exc.value)
    assert not acct.receipts
