"""Noise laws and intervals of dpkit.tables releases: one release over 20,000 public cells gives 20,000
independent noise draws, tested against the exact discrete Laplace / discrete Gaussian law (chi-square at
p < 1e-7, with a power check against a 15% wrong scale), interval coverage, and plan = release."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from tests.stats.fixtures import P_MIN, dlap_binned_pvalue  # noqa: E402

from dpkit import ZCDP, PureDP, deterministic_source  # noqa: E402
from dpkit.audit.testing import chi2_pvalue  # noqa: E402
from dpkit.tables import Session  # noqa: E402

from .conftest import cells_frame  # noqa: E402

A, B = 200, 100  # 20,000 cells


@pytest.fixture(scope="module")
def cells():
    df = cells_frame(11, 60_000, A, B)
    units = np.clip(np.floor(np.clip(df.x, 0, 10) / 0.5 + 0.5), 0, 20)
    exact = df.assign(u=units).groupby(["a", "b"]).agg(n=("x", "size"), s=("u", "sum"))
    exact = exact.reindex(pd.MultiIndex.from_product([range(A), range(B)], names=["a", "b"]), fill_value=0)
    return df, exact


def _release(df, budget, seed=1):
    s = Session(df, budget=budget, rng=deterministic_source(seed))
    q = (s.query("law").group_by("a", "b", keys={"a": list(range(A)), "b": list(range(B))}).count()
         .sum("x", bounds=(0, 10), granularity=0.5))
    return s, q, s.release(q, budget=budget)


def _noise(res, exact, stat):
    r = res[res.statistic == stat]
    key = pd.MultiIndex.from_arrays([r["a"].to_numpy(), r["b"].to_numpy()])
    if stat == "count":
        return (r["value"].to_numpy() - exact["n"].reindex(key).to_numpy()).astype(np.int64), r
    return (np.round(r["value"].to_numpy() / 0.5) - exact["s"].reindex(key).to_numpy()).astype(np.int64), r


def _dgauss_pvalue(z, sigma, wrong=1.0):
    span = math.ceil(sigma * 8)
    ks = np.arange(-span, span + 1)
    logp = -(ks.astype(float) ** 2) / (2 * (sigma * wrong) ** 2)
    p = np.exp(logp - logp.max())
    p /= p.sum()
    counts = np.bincount(np.clip(z, -span, span) + span, minlength=ks.size)
    return chi2_pvalue(counts, p)


def test_laplace_law_of_count_and_sum(cells):
    df, exact = cells
    s, q, res = _release(df, PureDP(1.0))
    plan = s.plan(q, budget=PureDP(1.0)).set_index("statistic")
    # count: L1 = 1 (row unit), epsilon 0.5 -> t = 2; sum: L1 = 20 units (10 / 0.5), t = 40
    for stat, t in (("count", 2.0), ("sum", 40.0)):
        z, rows = _noise(res, exact, stat)
        assert z.size == A * B
        g = 1.0 if stat == "count" else 0.5
        assert math.isclose(plan.loc[stat, "scale"], t * g, rel_tol=1e-12)
        assert dlap_binned_pvalue(z, t) > P_MIN
        assert dlap_binned_pvalue(z, t * 1.15) < P_MIN  # power: a 15% wrong scale is caught
        assert dlap_binned_pvalue(z, t / 1.15) < P_MIN
        # plan half-width == release interval half-width; coverage of the 95% interval
        hw = plan.loc[stat, "half_width_95"]
        assert np.allclose(rows["hi"] - rows["value"], hw) and np.allclose(rows["value"] - rows["lo"], hw)
        covered = np.mean(np.abs(z) * g <= hw)
        assert 0.95 - 6 * math.sqrt(0.05 * 0.95 / z.size) <= covered <= 0.975


def test_gaussian_law_of_count_and_sum(cells):
    df, exact = cells
    s, q, res = _release(df, ZCDP(0.5))
    plan = s.plan(q, budget=ZCDP(0.5)).set_index("statistic")
    # rho 0.25 each: count sigma = 1/sqrt(0.5); sum sigma = 20/sqrt(0.5)
    for stat, l2 in (("count", 1.0), ("sum", 20.0)):
        z, rows = _noise(res, exact, stat)
        sigma = l2 / math.sqrt(0.5)
        g = 1.0 if stat == "count" else 0.5
        assert math.isclose(plan.loc[stat, "scale"], sigma * g, rel_tol=1e-12)
        assert rows["mechanism"].iloc[0].startswith("discrete_gaussian(sigma=")
        assert _dgauss_pvalue(z, sigma) > P_MIN
        assert _dgauss_pvalue(z, sigma, 1.15) < P_MIN
        assert _dgauss_pvalue(z, sigma, 1 / 1.15) < P_MIN
        hw = plan.loc[stat, "half_width_95"]
        assert np.allclose(rows["hi"] - rows["value"], hw)
        covered = np.mean(np.abs(z) * g <= hw)
        # integer half-widths are conservative for a small sigma (count: sigma 1.41 -> 98.8%)
        assert 0.95 - 6 * math.sqrt(0.05 * 0.95 / z.size) <= covered <= (0.995 if stat == "count" else 0.975)


def test_mean_interval_coverage():
    g = np.random.default_rng(5)  # test data only
    n_groups = 1500
    sizes = g.integers(30, 200, size=n_groups)
    key = np.repeat(np.arange(n_groups), sizes)
    x = g.uniform(0, 100, size=key.size).round(0)
    df = pd.DataFrame({"k": key, "x": x})
    s = Session(df, budget=PureDP(10.0), rng=deterministic_source(3))
    res = s.release(s.query().group_by("k", keys=list(range(n_groups))).mean("x", bounds=(0, 100)),
                    budget=PureDP(0.5))
    truth = df.groupby("k").x.mean().to_numpy()
    inside = (res["lo"].to_numpy() <= truth) & (truth <= res["hi"].to_numpy())
    assert inside.mean() >= 0.95 - 6 * math.sqrt(0.05 * 0.95 / n_groups)
    assert (res["hi"] - res["lo"]).mean() < 60  # informative, not just the bounds
