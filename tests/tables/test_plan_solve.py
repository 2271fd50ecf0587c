"""plan (nothing read, nothing charged), solve (smallest budget meeting the targets; 1% less misses one) and
private partition selection (release rate matches the exact law; the threshold is the smallest valid one)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")
scipy_stats = pytest.importorskip("scipy.stats")

from tests.stats.fixtures import P_MIN  # noqa: E402
from tests.tables.conftest import STATES, users_frame  # noqa: E402

from dpkit import ZCDP, ApproxDP, InvalidParameter, PureDP, deterministic_source  # noqa: E402
from dpkit.audit.testing import CountingSource  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402


def _queries(s):
    q1 = (s.query("by state").group_by("state", keys=list(STATES)).count().sum("income", bounds=(0, 100))
          .mean("age", bounds=(0, 100)))
    q2 = s.query("ages").histogram("age", edges=[0, 30, 60, 100]).count()
    return q1, q2


def test_plan_reads_nothing_charges_nothing():
    src = CountingSource(1)
    s = Session(users_frame(), budget=PureDP(1.0), unit=unit_of("user_id", max_rows=3), rng=src)
    q1, _ = _queries(s)
    plan = s.plan(q1, budget=PureDP(0.9))
    assert s.reads == 0 and src.consumed == 0 and s.accountant.receipts == ()
    assert list(plan.columns) == ["query", "statistic", "column", "mechanism", "epsilon", "scale", "half_width_95"]
    p = plan.set_index("statistic")
    # count: L1 = max_rows = 3 (no max_groups: a user may touch 3 states), eps 0.3 -> t = 10
    assert math.isclose(p.loc["count", "scale"], 10.0, rel_tol=1e-12)
    assert math.isclose(p.loc["sum", "scale"], 1000.0, rel_tol=1e-12)
    assert math.isnan(p.loc["mean", "half_width_95"])
    zplan = s.plan(q1, budget=ZCDP(0.3))
    assert "rho" in zplan.columns and zplan["mechanism"].str.startswith("discrete_gaussian").all()


@pytest.mark.parametrize("budget_type", ["pure", "zcdp"])
def test_solve_meets_targets_and_one_percent_less_misses(budget_type):
    s = Session(users_frame(), budget=PureDP(100.0) if budget_type == "pure" else ZCDP(100.0),
                unit=unit_of("user_id", max_rows=3, max_groups=1))
    q1, q2 = _queries(s)
    targets = {"count": 20, "sum(income)": 900, "ages:histogram(age)": 35}
    sol = s.solve([q1, q2], targets=targets)
    kind = PureDP if budget_type == "pure" else ZCDP
    assert isinstance(sol.budget, kind) and all(isinstance(b, kind) for b in sol.budgets)
    total = sum(b.epsilon if budget_type == "pure" else b.rho for b in sol.budgets)
    assert math.isclose(total, sol.budget.epsilon if budget_type == "pure" else sol.budget.rho)

    def halfwidths(scale_by):
        out = {}
        for q, b in zip(sol.queries, sol.budgets, strict=True):
            bb = PureDP(b.epsilon * scale_by) if budget_type == "pure" else ZCDP(b.rho * scale_by)
            for _, r in s.plan(q, budget=bb).iterrows():
                label = f"{r.statistic}({r.column})" if r.column else r.statistic
                out[(q.name, label)] = r.half_width_95
        return out

    ok = halfwidths(1.0)
    assert ok[("by state", "count")] <= 20 and ok[("ages", "count")] <= 20
    assert ok[("by state", "sum(income)")] <= 900 and ok[("ages", "histogram(age)")] <= 35
    less = halfwidths(0.99)
    missed = [less[("by state", "count")] > 20, less[("ages", "count")] > 20,
              less[("by state", "sum(income)")] > 900, less[("ages", "histogram(age)")] > 35]
    assert all(missed)  # every targeted statistic sits exactly at its smallest sufficient share
    # the untargeted mean gets its weight times the smallest per-weight share
    split = sol.split.set_index(["query", "label"])
    col = "epsilon" if budget_type == "pure" else "rho"
    targeted = split[split.target.notna()][col]
    assert math.isclose(split.loc[("by state", "mean(age)"), col], targeted.min())
    # releasing the solved queries charges exactly the solved total
    for q, b in zip(sol.queries, sol.budgets, strict=True):
        s.release(q, budget=b)
    spent = s.accountant.spent
    assert math.isclose(spent.epsilon if budget_type == "pure" else spent.rho, total, rel_tol=1e-9)


def test_solve_bad_targets():
    s = Session(users_frame(), budget=PureDP(1.0))
    q1, _ = _queries(s)
    for targets, why in (({"mean(age)": 3}, "half-width"), ({"nope": 3}, "no statistic"), ({}, None)):
        with pytest.raises((InvalidParameter, TypeError)) as exc:
            s.solve([q1], targets=targets)
        if why:
            assert why in str(exc.value)


def _dlap_ge(t, m):
    """P[Z >= m] for discrete Laplace of scale t."""
    q = math.exp(-1.0 / t)
    return q**m / (1 + q) if m >= 1 else 1 - q ** (1 - m) / (1 + q)


def test_partition_selection_rate_matches_law():
    sizes = {1: 3000, 6: 4000, 8: 4000, 10: 4000}
    rows, gid = [], 0
    for size, n_groups in sizes.items():
        for _ in range(n_groups):
            rows += [(gid, size)] * size
            gid += 1
    df = pd.DataFrame(rows, columns=["g", "size"])
    df["uid"] = np.arange(len(df))  # one row per unit: every group's distinct-unit count is its size
    s = Session(df, budget=ApproxDP(10.0, 0.5), unit=unit_of("uid", max_rows=2, max_groups=2),
                rng=deterministic_source(9))
    q = s.query("private").group_by("g", keys="private", selection_weight=1.0).count(weight=1.0)
    res = s.release(q, budget=ApproxDP(1.0, 0.2))
    sel = res.attrs["selection"]
    t, tau, groups = sel["scale"], sel["threshold"], 2
    assert math.isclose(t, groups / 0.5, rel_tol=1e-12)
    # tau is the smallest integer with P[Z >= tau - 1] <= delta / G
    assert _dlap_ge(t, tau - 1) <= 0.2 / groups < _dlap_ge(t, tau - 2)
    released = set(res["g"])
    size_of = df.groupby("g")["size"].first()
    for size, n_groups in sizes.items():
        k = sum(1 for g in size_of.index[size_of == size] if g in released)
        p = _dlap_ge(t, tau - size)
        assert scipy_stats.binomtest(k, n_groups, p).pvalue > P_MIN, (size, k, n_groups, p)
        # power: the law with a threshold one higher or lower is rejected (for the sizes near tau)
        if size >= 6:
            assert scipy_stats.binomtest(k, n_groups, _dlap_ge(t, tau + 1 - size)).pvalue < P_MIN
            assert scipy_stats.binomtest(k, n_groups, _dlap_ge(t, tau - 1 - size)).pvalue < P_MIN
    assert s.accountant.spent == ApproxDP(1.0, 0.2)


def test_private_keys_need_delta():
    s = Session(users_frame(), budget=ZCDP(1.0))
    with pytest.raises(InvalidParameter) as exc:
        s.plan(s.query().group_by("state", keys="private").count(), budget=ZCDP(0.5))
    assert exc.value.param == "keys"


def _dgauss_ge(sigma, m):
    """P[Y >= m] for the discrete Gaussian, by direct summation of the pmf."""
    ks = np.arange(-int(40 * sigma) - 50, int(40 * sigma) + 51)
    w = np.exp(-(ks.astype(float) ** 2) / (2 * sigma**2))
    return float(w[ks >= m].sum() / w.sum())


def test_gaussian_partition_selection_rate_and_threshold():
    budget = ApproxDP(1.0, 0.2)
    probe = Session(pd.DataFrame({"g": [0], "uid": [0]}), budget=budget, unit=unit_of("uid", max_rows=2, max_groups=2))
    sel = probe._calibrate(probe.query().group_by("g", keys="private").count(), budget, "gaussian").selection
    sigma, tau, groups = sel["scale"], sel["threshold"], 2
    assert sel["delta"] == 0.1
    # the threshold is valid for the exact law, and the tail bound used is not loose by more than one step
    assert _dgauss_ge(sigma, tau - 1) <= 0.1 / groups
    assert _dgauss_ge(sigma, tau - 3) > 0.1 / groups
    sizes = {tau - 3: 4000, tau: 4000, tau + 3: 4000}
    rows, gid = [], 0
    for size, n_groups in sizes.items():
        for _ in range(n_groups):
            rows += [(gid, size)] * size
            gid += 1
    df = pd.DataFrame(rows, columns=["g", "size"])
    df["uid"] = np.arange(len(df))
    s = Session(df, budget=budget, unit=unit_of("uid", max_rows=2, max_groups=2), rng=deterministic_source(4))
    res = s.release(s.query().group_by("g", keys="private").count(), budget=budget, noise="gaussian")
    assert res.attrs["selection"]["threshold"] == tau and res.attrs["cost"] == str(budget)
    released = set(res["g"])
    size_of = df.groupby("g")["size"].first()
    for size, n_groups in sizes.items():
        k = sum(1 for g in size_of.index[size_of == size] if g in released)
        assert scipy_stats.binomtest(k, n_groups, _dgauss_ge(sigma, tau - size)).pvalue > P_MIN
        assert scipy_stats.binomtest(k, n_groups, _dgauss_ge(sigma * 1.2, tau - size)).pvalue < P_MIN or size == tau
