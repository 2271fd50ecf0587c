"""The ``mean`` kind of dpkit.tables (issue #16): ``method="centred"`` (default: a private centre per group, then
the sum centred there), ``method="noisy_ratio"`` (the kind's estimator before issue #16) and ``method="auto"``
(per group, from the released stage-1 values, the centred sum or a pooled noisy ratio at the midpoint). Cost,
refusals, seeded reproducibility, the per-group calibration of the centred sum, the choice rule, accuracy
against the other estimators, engine agreement, the CLI spec key and privacy by brute force."""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit import ZCDP, BudgetExceeded, InvalidParameter, PureDP, WrongType, deterministic_source  # noqa: E402
from dpkit.audit.testing import CountingSource  # noqa: E402
from dpkit.cli.spec import SpecError, parse_spec  # noqa: E402
from dpkit.stats.aggregates import integer_noise  # noqa: E402
from dpkit.tables import Session, unit_of  # noqa: E402
from dpkit.tables.kinds import (  # noqa: E402
    MEAN_METHODS,
    _auto_choice,
    _centre_scale,
    _centres,
    _noise_variance,
    get_kind,
)

KEYS = list(range(600))


def _far_frame(seed: int = 4, per: int = 500) -> pd.DataFrame:
    """600 groups of ``per`` rows with values in [88, 100] (mean about 94, far from the midpoint 50 of (0, 100))."""
    g = np.random.default_rng(seed)  # test data only
    k = np.repeat(np.arange(len(KEYS)), per)
    return pd.DataFrame({"k": k, "x": g.integers(88, 101, size=k.size), "uid": np.arange(k.size) // 2})


def _small() -> pd.DataFrame:
    g = np.random.default_rng(1)  # test data only
    n = 600
    return pd.DataFrame({"k": g.choice(["a", "b", "c"], size=n), "x": g.uniform(-5, 80, size=n).round(2),
                         "uid": g.integers(0, 150, size=n)})


# ------------------------------------------------------------------------------------------------ parameters
def test_method_is_validated_with_typed_errors_naming_it():
    s = Session(_small(), budget=PureDP(1.0), rng=CountingSource(1))
    for bad, err in (("median", InvalidParameter), ("", InvalidParameter), (3, WrongType), (None, WrongType)):
        with pytest.raises(err) as ei:
            s.query().mean("x", (0, 10), method=bad)
        assert ei.value.param == "method"
        with pytest.raises(err) as ei:
            s.query().add("mean", "x", (0, 10), method=bad)
        assert ei.value.param == "method"
    assert s.accountant.receipts == () and s.reads == 0
    assert MEAN_METHODS == ("centred", "noisy_ratio", "auto")
    st = s.query().mean("x", (0, 10)).statistics[0]
    assert st.option["method"] == "centred" and get_kind("mean").method_of(st) == "centred"
    assert s.query().mean("x", (0, 10), method="noisy_ratio").statistics[0].option["method"] == "noisy_ratio"
    assert s.query().mean("x", (0, 10), method="auto").statistics[0].option["method"] == "auto"


# ------------------------------------------------------------------------------------------------ cost
@pytest.mark.parametrize("budget", [PureDP(0.7), ZCDP(0.3)])
def test_exact_cost_one_charge_before_any_read_or_draw(budget):
    src = CountingSource(5)
    s = Session(_small(), budget=PureDP(2.0) if isinstance(budget, PureDP) else ZCDP(1.0),
                unit=unit_of("uid", max_rows=3, max_groups=2), rng=src)
    q = s.query().group_by("k", keys=["a", "b", "c", "z"]).mean("x", (0, 100)).mean("x", (0, 100),
                                                                                  method="noisy_ratio")
    seen = []
    orig = s.accountant.charge

    def charge(*a, **k):
        seen.append((s.reads, src.consumed))
        return orig(*a, **k)

    s.accountant.charge = charge
    res = s.release(q, budget=budget)
    assert seen == [(1, 0)]  # one charge; before it only the validation pass, and no random byte
    assert s.accountant.spent == budget and len(s.accountant.receipts) == 1
    assert len(res) == 8 and res["value"].between(0, 100).all()
    # the three noisy vectors of the centred mean spend at most its share (split 1 : 1 : 8, rounded down)
    plan = s._calibrate(q, budget)
    share = plan.stats[0].share
    parts = plan.stats[0].parts
    assert [p.metric for p in parts] == ["count", "sum", "sum"]
    total = sum(Fraction(p.noise.share) for p in parts)
    assert total <= Fraction(share) and float(total) == pytest.approx(share, rel=1e-12)
    assert parts[2].noise.share == pytest.approx(0.8 * share, rel=1e-12)
    assert parts[0].noise.share == pytest.approx(0.1 * share, rel=1e-12)


@pytest.mark.parametrize("method", MEAN_METHODS)
def test_refused_release_charges_nothing_draws_nothing(method):
    src = CountingSource(5)
    s = Session(_small(), budget=PureDP(1.0), rng=src)
    q = s.query().group_by("k", keys=["a", "b"]).mean("x", (0, 100), method=method)
    with pytest.raises(BudgetExceeded):
        s.release(q, budget=PureDP(1.5))
    assert s.accountant.receipts == () and s.reads == 0 and src.consumed == 0


# ------------------------------------------------------------------------------------------------ reproducibility
@pytest.mark.parametrize("method", ["centred", "auto"])
@pytest.mark.parametrize("budget", [PureDP(1.0), ZCDP(0.5)])
def test_seeded_release_is_reproducible(budget, method):
    def run(seed):
        s = Session(_small(), budget=budget, unit=unit_of("uid", max_rows=2), rng=deterministic_source(seed))
        return s.release(s.query().group_by("k", keys=["a", "b", "c"]).mean("x", (0, 100), method=method),
                         budget=budget)

    a, b, c = run(3), run(3), run(4)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a["value"].to_numpy(), c["value"].to_numpy())
    assert (a["lo"] <= a["value"]).all() and (a["value"] <= a["hi"]).all()
    assert a["mechanism"].str.contains("; count discrete_").all()
    assert a["mechanism"].str.contains("; centre |pooled with the centre's").all()


# ------------------------------------------------------------------------------------------------ the law's pieces
def test_centres_are_the_nearest_integer_of_the_coarse_mean_clamped():
    lo_u, hi_u = 0, 100
    # mid 50 + T/(2C): T = 2 * 10 * (37 - 50) -> 37; C < 1 -> floor(mid); far beyond the bounds -> clamped
    got = _centres(np.array([10, 0, -3, 10, 10, 4]), np.array([-260, 999, 5, 10**9, -10**9, 4]), lo_u, hi_u)
    assert got == [37, 50, 50, 100, 0, 51]  # 50 + 4/8 = 50.5 rounds half up
    # midpoint -2.5: T = 0 rounds half up to -2; C < 1 takes floor(-2.5) = -3
    assert _centres(np.array([3, 0]), np.array([0, 0]), -7, 2) == [-2, -3]
    # on the grid of step 1/q unit: 4 (37.25 - 50) * 2 * 10 / (2 * 10) -> 149 quarter units; q mid for C < 1
    assert _centres(np.array([10, 0, 10]), np.array([-255, 0, 10**9]), 0, 100, 4) == [149, 200, 400]
    # the grid has at least 1,024 steps over the bounds (a public function of the bounds and the granularity)
    assert [_centre_scale(w) for w in (1, 2, 100, 240, 1023, 1024, 99999)] == [1024, 512, 16, 8, 2, 1, 1]


class _Recorder:
    """A stand-in for ``dpkit.tables._measuring.Measure``: exact metrics given, sampled plans and rows recorded."""

    def __init__(self, metrics, noise, bounds, seed):
        self._metrics = metrics
        self.noise = noise
        self.ng = len(next(iter(metrics.values())))
        self.plan = SimpleNamespace(bounds=bounds)
        self.rng = deterministic_source(seed)
        self.plans, self.rows = [], []

    def metric(self, name):
        return np.array(self._metrics[name], dtype=object)

    def sample(self, plan):
        self.plans.append(plan)
        return plan.sample(self.rng)

    def emit(self, st, j, bin_, value, lo, hi, mech, column=None, *, postprocessed=False):
        self.rows.append((j, value, lo, hi, mech))


@pytest.mark.parametrize("noise, budget", [("laplace", PureDP(0.8)), ("gaussian", ZCDP(0.4))])
def test_centred_sum_is_calibrated_per_group_from_its_released_centre(noise, budget):
    """Each group's centred sum (in 1/Q units) has L1 ``L·A`` / L2² ``L2²·A²`` with ``A = max(P - Q lo_u, Q hi_u -
    P)`` for the centre ``P`` that group released, and the 80% share (the privacy-loss argument of the kind's
    docstring)."""
    s = Session(_small(), budget=budget, unit=unit_of("uid", max_rows=3, max_groups=2, max_rows_per_group=2))
    q = s.query().group_by("k", keys=["a", "b", "c", "d"]).mean("x", (-20, 100), granularity=0.5)
    plan = s._calibrate(q, budget)
    sp = plan.stats[0]
    b = plan.bounds
    assert (b.l1, b.l2_squared) == (3, 5)  # R = 3, G = 2, P = 2: L = 3, L2² = 2² + 1²
    lo_u, hi_u = sp.stat.unit_range
    assert (lo_u, hi_u) == (-40, 200)
    q = _centre_scale(hi_u - lo_u)
    assert q == 8  # the centre on a grid of 1/16 value units
    n = [1000, 10, 0, 3000]
    sums = [1000 * 190, 10 * -40, 0, 3000 * 80]  # means near hi, at lo, empty, 80 units
    m = _Recorder({"_s0": sums, "_c0": n}, noise, b, 7)
    get_kind("mean").measure(0, sp, m)
    count_plan, centre_plan, *stage2 = m.plans
    assert count_plan.scale == sp.parts[0].scale and centre_plan.scale == sp.parts[1].scale
    c_noisy = count_plan.sample(deterministic_source(7)).value  # the same stream: the same draws
    t_noisy = centre_plan.sample(_after(7, [count_plan])).value
    centres = _centres(c_noisy, t_noisy, lo_u, hi_u, q)
    widths = [max(c - q * lo_u, q * hi_u - c, 1) for c in centres]
    want = {a: integer_noise(noise, b.l1 * a, b.l2_squared * a * a, sp.parts[2].noise.share).scale
            for a in set(widths)}
    assert sorted(p.scale for p in stage2) == sorted(want.values())
    assert [p.params["coords"] for p in stage2] == [widths.count(a) for a in sorted(set(widths))]
    for p in stage2:
        assert p.cost == (PureDP(sp.parts[2].noise.share) if noise == "laplace" else ZCDP(sp.parts[2].noise.share))
    assert sp.parts[2].scale >= max(want.values())  # the plan's widest calibration bounds every group's
    for j, value, lo, hi, mech in m.rows:
        assert -20 <= lo <= value <= hi <= 100, j
        scale = want[widths[j]] * 0.5 / q  # in value units
        assert f"scale={scale:.6g}" in mech or f"sigma={scale:.6g}" in mech


def _after(seed, plans):
    rng = deterministic_source(seed)
    for p in plans:
        p.sample(rng)
    return rng


def test_plan_describes_the_centred_mean():
    s = Session(_small(), budget=PureDP(1.0))
    q = s.query().mean("x", (0, 100), method="centred").mean("x", (0, 100), method="noisy_ratio")
    p = s.plan(q, budget=PureDP(1.0))
    assert p["mechanism"].iloc[0].startswith("discrete_laplace(scale=250 at most; count ")
    assert "; count discrete_laplace(" in p["mechanism"].iloc[0] and "; centre " in p["mechanism"].iloc[0]
    assert p["mechanism"].iloc[1].startswith("discrete_laplace(scale=")
    # widest centred-sum scale: Δ/(0.8 · 0.5); the old sum: max(|lo|, |hi|)/(0.5 · 0.5)
    assert p["scale"].iloc[0] == pytest.approx(100 / 0.4, rel=1e-9)
    assert p["scale"].iloc[1] == pytest.approx(100 / 0.25, rel=1e-9)
    assert p["half_width_95"].isna().all()


# ------------------------------------------------------------------------------------------------ accuracy
def test_centred_beats_the_old_estimator_far_from_the_midpoint():
    """600 groups of 500 values in [88, 100] (mean about 94), bounds (0, 100), ε = 1 each: the centred kind's
    error is below the old kind's in most groups. Per group the two errors are independent draws; a correct
    implementation has P(centred < old) = 0.721 (7,200 pairs of real releases, standard error 0.005), so fewer
    than 365 wins of 600 has probability 4e-8 even at p = 0.71 (binomial tail). An implementation without the
    gain (p <= 0.5) reaches 365 with probability 6e-8. The medians (0.17 against 0.43 in those releases) differ
    by about 6 standard errors of their log ratio from the asserted 0.7."""
    df = _far_frame()
    truth = df.groupby("k").x.mean().reindex(KEYS).to_numpy()
    err = {}
    for seed, method in enumerate(MEAN_METHODS):
        s = Session(df, budget=PureDP(2.0), rng=deterministic_source(100 + seed))
        res = s.release(s.query().group_by("k", keys=KEYS).mean("x", (0, 100), method=method), budget=PureDP(1.0))
        err[method] = np.abs(res.set_index("k")["value"].reindex(KEYS).to_numpy() - truth)
    wins = int(np.sum(err["centred"] < err["noisy_ratio"]))
    assert wins >= 365, wins
    assert np.median(err["centred"]) < 0.7 * np.median(err["noisy_ratio"])


def test_interval_coverage_of_the_centred_mean():
    """1,500 groups of 300 to 800 rows: the 95% intervals hold the exact clamped mean in at least 95% of the
    groups (less 6 binomial standard deviations), with the centre placed far from the midpoint (values near lo)."""
    g = np.random.default_rng(8)  # test data only
    sizes = g.integers(300, 800, size=1500)
    key = np.repeat(np.arange(sizes.size), sizes)
    df = pd.DataFrame({"k": key, "x": np.clip(g.exponential(8.0, size=key.size), 0, 100).round(0)})
    s = Session(df, budget=PureDP(10.0), rng=deterministic_source(3))
    res = s.release(s.query().group_by("k", keys=list(range(sizes.size))).mean("x", bounds=(0, 100)),
                    budget=PureDP(0.5))
    truth = df.groupby("k").x.mean().to_numpy()
    inside = (res["lo"].to_numpy() <= truth) & (truth <= res["hi"].to_numpy())
    assert inside.mean() >= 0.95 - 6 * math.sqrt(0.05 * 0.95 / sizes.size)
    assert (res["hi"] - res["lo"]).mean() < 40


# ------------------------------------------------------------------------------------------------ engines
@pytest.mark.parametrize("engine", ["pandas", "polars", "parquet"])
@pytest.mark.parametrize("method", MEAN_METHODS)
def test_same_release_on_every_local_engine(engine, method, to_engine):
    df = _small()

    def run(source):
        s = Session(source, budget=PureDP(5.0), unit=unit_of("uid", max_rows=2), rng=deterministic_source(9))
        q = s.query().group_by("k", keys=["a", "b", "c", "z"]).mean("x", (0, 50), method=method)
        return s.release(q, budget=PureDP(1.0))

    ref = run(to_engine(df, "duckdb"))
    got = run(to_engine(df, engine))
    assert np.array_equal(got["value"].to_numpy(), ref["value"].to_numpy())
    assert list(got["mechanism"]) == list(ref["mechanism"])


# ------------------------------------------------------------------------------------------------ CLI spec
@pytest.mark.parametrize("method", MEAN_METHODS)
def test_spec_method_key(method):
    doc = {"budget": {"epsilon": 1.0},
           "query": [{"name": "q", "stat": "mean", "column": "age", "bounds": [0, 100], "method": method}]}
    spec = parse_spec(doc)
    assert spec.queries[0].statistics[0].options == {"method": method}
    s = Session(pd.DataFrame({"age": [30, 40, 50]}), budget=PureDP(1.0))
    from dpkit.cli.engine import _add_stat

    q = _add_stat(s.query(), spec.queries[0].statistics[0])
    assert q.statistics[0].option["method"] == method


@pytest.mark.parametrize("bad", ["median", 3])
def test_spec_bad_method_names_the_key(bad):
    doc = {"budget": {"epsilon": 1.0},
           "query": [{"name": "q", "stat": "mean", "column": "age", "bounds": [0, 100], "method": bad}]}
    with pytest.raises(SpecError) as ei:
        parse_spec(doc)
    assert "query[0].method" in str(ei.value)


def test_docstring_states_guarantee_cost_law_error():
    from tests.contract.test_docstrings import section_problems

    assert section_problems(type(get_kind("mean")).__doc__) == ""


# ------------------------------------------------------------------------------------ privacy by brute force
SKEYS = ["a", "b", "c", "d", "e"]


def _mean_exact(s, salt):
    q = s.query("q").group_by("k", keys=SKEYS).mean("x", bounds=(-20, 100), granularity=0.25)
    p = s._calibrate(q, PureDP(1.0))
    main = s._aggregate(p, salt)["main"].set_index("k").reindex(SKEYS).fillna(0)
    return [int(v) for v in main["_s0"]], [int(v) for v in main["_c0"]], p


@pytest.mark.parametrize("rows, groups, per_group, seed", [(1, None, None, 1), (3, None, None, 2), (4, 2, None, 3),
                                                           (5, 2, 2, 4), (6, 3, 1, 5)])
def test_adding_one_unit_costs_at_most_each_share(rows, groups, per_group, seed):
    """Adding a unit's rows (after contribution bounding) to a table: the count and the midpoint-centred sum move
    within their declared L1 / L2², and for every choice of per-group centres on the grid (the extremes and random
    ones) the centred sums move by ``Σ |d_g| / A_g <= L`` and ``Σ (d_g / A_g)² <= L2²``, so the privacy loss of the
    three noise vectors at the release's own scales is at most the statistic's share (ε 1 / ρ 1), and nearly
    reaches it (a calibration with less noise would fail). The same for ``method="auto"``: whatever groups take
    option (b) (all, none, random splits), its count and doubled midpoint-centred sum (L1 ``L`` and ``L·Δ_u`` at the
    two halves of the centred sum's share) and the other groups' centred sums together lose at most the share."""
    from .conftest import unit_table

    unit = unit_of("uid", max_rows=rows, max_groups=groups, max_rows_per_group=per_group)
    base = unit_table(seed, SKEYS)
    g = np.random.default_rng(seed)  # test data only
    salt = 777 + seed
    s0 = Session(base, budget=PureDP(1.0), unit=unit)
    s_before, n_before, p = _mean_exact(s0, salt)
    sp, b = p.stats[0], p.bounds
    lo_u, hi_u = sp.stat.unit_range
    q = _centre_scale(hi_u - lo_u)
    worst = worst_b = 0.0
    worst_auto = {True: 0.0, False: 0.0}  # the loss of a one-branch (True) or mixed split (False), at most the share
    for j, n_rows in enumerate((12, 9, 3)):
        extra = pd.DataFrame({"uid": 10_000 + j, "k": g.choice(SKEYS, size=n_rows),
                              "x": g.choice([-1000.0, 1000.0, -20.0, 100.0, 40.125], size=n_rows), "n": 1})
        s1 = Session(pd.concat([base, extra], ignore_index=True), budget=PureDP(1.0), unit=unit)
        s_after, n_after, _ = _mean_exact(s1, salt)
        dn = [a - c for a, c in zip(n_after, n_before, strict=True)]
        dt = [2 * (a - c) - d * (lo_u + hi_u) for a, c, d in zip(s_after, s_before, dn, strict=True)]
        assert sum(map(abs, dn)) <= b.l1 and sum(v * v for v in dn) <= b.l2_squared
        d_u = hi_u - lo_u
        assert sum(map(abs, dt)) <= b.l1 * d_u and sum(v * v for v in dt) <= b.l2_squared * d_u * d_u
        choices = [[q * lo_u] * 5, [q * hi_u] * 5, [(q * (lo_u + hi_u)) // 2] * 5,
                   *[list(g.integers(q * lo_u, q * hi_u + 1, size=5)) for _ in range(20)]]
        for centres in choices:
            centres = [int(c) for c in centres]
            widths = [max(c - q * lo_u, q * hi_u - c, 1) for c in centres]
            d2 = [q * (a - c) - d * pc for a, c, d, pc in zip(s_after, s_before, dn, centres, strict=True)]
            assert sum(Fraction(abs(v), w) for v, w in zip(d2, widths, strict=True)) <= b.l1
            assert sum(Fraction(v * v, w * w) for v, w in zip(d2, widths, strict=True)) <= b.l2_squared
            for budget, law in ((PureDP(1.0), "laplace"), (ZCDP(1.0), "gaussian")):
                parts = s0._calibrate(s0.query("q").group_by("k", keys=SKEYS).mean("x", bounds=(-20, 100),
                                                                                   granularity=0.25),
                                      budget).stats[0].parts
                share = parts[2].noise.share
                scales = [integer_noise(law, b.l1 * w, b.l2_squared * w * w, share).scale for w in widths]
                if law == "laplace":
                    loss = (sum(abs(v) for v in dn) / parts[0].scale + sum(abs(v) for v in dt) / parts[1].scale
                            + sum(abs(v) / t for v, t in zip(d2, scales, strict=True)))
                else:
                    loss = (sum(v * v for v in dn) / (2 * parts[0].scale ** 2)
                            + sum(v * v for v in dt) / (2 * parts[1].scale ** 2)
                            + sum(v * v / (2 * t * t) for v, t in zip(d2, scales, strict=True)))
                assert loss <= 1.0 + 1e-12, (law, loss)
                worst = max(worst, loss)
                # method="auto": any split of the groups between the centred sum (a) and option (b)'s count and
                # doubled midpoint-centred sum (the two halves of the centred sum's share), at the same stage 1
                auto = s0._calibrate(s0.query("q").group_by("k", keys=SKEYS).mean("x", bounds=(-20, 100),
                                                                                  granularity=0.25, method="auto"),
                                     budget).stats[0].parts
                assert [p_.noise.scale for p_ in auto[:3]] == [p_.noise.scale for p_ in parts]
                bc, bt = auto[3].noise, auto[4].noise
                for mask in ([True] * 5, [False] * 5, *[list(g.random(5) < 0.5) for _ in range(3)]):
                    if law == "laplace":
                        stage2 = sum(abs(v) / t if in_a else abs(dn_g) / bc.scale + abs(dt_g) / bt.scale
                                     for v, t, in_a, dn_g, dt_g in zip(d2, scales, mask, dn, dt, strict=True))
                        loss_auto = (sum(abs(v) for v in dn) / parts[0].scale
                                     + sum(abs(v) for v in dt) / parts[1].scale + stage2)
                    else:
                        stage2 = sum(v * v / (2 * t * t) if in_a else dn_g**2 / (2 * bc.scale**2)
                                     + dt_g**2 / (2 * bt.scale**2)
                                     for v, t, in_a, dn_g, dt_g in zip(d2, scales, mask, dn, dt, strict=True))
                        loss_auto = (sum(v * v for v in dn) / (2 * parts[0].scale ** 2)
                                     + sum(v * v for v in dt) / (2 * parts[1].scale ** 2) + stage2)
                    assert loss_auto <= 1.0 + 1e-12, (law, mask, loss_auto)
                    worst_auto[all(mask) or not any(mask)] = max(worst_auto[all(mask) or not any(mask)],
                                                                loss_auto)
                    if not any(mask):
                        worst_b = max(worst_b, loss_auto)
    assert worst >= 0.7  # the bound is nearly attained (1.0 in three of these settings): the check has power
    assert worst_b >= 0.7 and max(worst_auto.values()) >= 0.7  # so is option (b)'s, and a mixed split's


# ------------------------------------------------------------------------------------------------ method="auto"
def _sized_frame(sizes, seed=5, hi=20, lo=0):
    """Groups ``0..len(sizes)-1`` with the given row counts and integer values in ``[lo, hi]``."""
    g = np.random.default_rng(seed)  # test data only
    k = np.repeat(np.arange(len(sizes)), sizes)
    return pd.DataFrame({"k": k, "x": g.integers(lo, hi + 1, size=k.size), "uid": np.arange(k.size)})


@pytest.mark.parametrize("budget", [PureDP(0.6), ZCDP(0.2)])
def test_auto_declares_the_same_exact_cost_whichever_branch(budget):
    """Stage 2 spends the centred sum's share ``e_s`` in either option: option (b)'s count and midpoint-centred sum
    are its two halves, rounded down (their sum is at most ``e_s``, exactly, and equal to it to 1e-12). The query
    charges its budget once, before any read or draw, whether every group takes option (a) (large groups), every
    group option (b) (empty and tiny groups, wide bounds) or some of each; and with no group in option (b) the
    release is the centred one, bit for bit (the same draws). The large groups' values lie near the midpoint, where
    the centred sum (the whole ``e_s`` at sensitivity ``≈ Δ/2``) is predicted better under both laws."""
    big = Session(_sized_frame([3000] * 4), budget=budget)
    q = big.query().group_by("k", keys=[0, 1, 2, 3]).mean("x", (0, 1000), method="auto")
    sp = big._calibrate(q, budget).stats[0]
    c1, t1, s2, bc, bt = sp.parts
    assert [p.metric for p in sp.parts] == ["count", "sum", "sum", "count", "sum"]
    assert Fraction(c1.noise.share) + Fraction(t1.noise.share) + Fraction(s2.noise.share) <= Fraction(sp.share)
    assert Fraction(bc.noise.share) + Fraction(bt.noise.share) <= Fraction(s2.noise.share)
    assert float(Fraction(bc.noise.share) + Fraction(bt.noise.share)) == pytest.approx(s2.noise.share, rel=1e-12)
    assert (bc.noise.l1, bt.noise.l1) == (c1.noise.l1, t1.noise.l1)  # the count's and the doubled sum's L1
    pooled = {}
    for name, sizes, keys in (("a", [3000] * 4, [0, 1, 2, 3]), ("b", [2, 1], [0, 1, 7, 8]),
                              ("mixed", [3000, 3000, 1, 2], [0, 1, 2, 3, 9])):
        src = CountingSource(4)
        total = PureDP(3.0) if isinstance(budget, PureDP) else ZCDP(1.0)
        s = Session(_sized_frame(sizes, lo=490, hi=510), budget=total, rng=src)
        seen = []
        orig = s.accountant.charge

        def charge(*a, s=s, src=src, seen=seen, orig=orig, **k):
            seen.append((s.reads, src.consumed))
            return orig(*a, **k)

        s.accountant.charge = charge
        res = s.release(s.query().group_by("k", keys=keys).mean("x", (0, 1000), method="auto"), budget=budget)
        assert seen == [(1, 0)] and s.accountant.spent == budget and len(s.accountant.receipts) == 1, name
        assert res["value"].between(0, 1000).all() and (res["lo"] <= res["value"]).all()
        assert (res["value"] <= res["hi"]).all()
        pooled[name] = res["mechanism"].str.contains("pooled with the centre's").to_numpy()
    assert not pooled["a"].any() and pooled["b"].all() and pooled["mixed"][:2].sum() == 0 and pooled["mixed"][2:].all()
    # no group in option (b): exactly the centred release
    runs = []
    for method in ("auto", "centred"):
        s = Session(_sized_frame([3000] * 4, lo=490, hi=510), budget=budget, rng=deterministic_source(6))
        runs.append(s.release(s.query().group_by("k", keys=[0, 1, 2, 3]).mean("x", (0, 1000), method=method),
                              budget=budget))
    np.testing.assert_array_equal(runs[0]["value"].to_numpy(), runs[1]["value"].to_numpy())


@pytest.mark.parametrize("noise, budget", [("laplace", PureDP(0.8)), ("gaussian", ZCDP(0.4))])
def test_auto_choice_is_a_function_of_the_released_stage_one_values(noise, budget):
    """Replaying the stage-1 draws from the same seed and applying the public rule to the released count and
    centre gives the groups of option (b); stage 2 then draws their count and doubled midpoint-centred sum (one
    vector each, those groups only, at the halves' scales), then the centred sums of the other groups."""
    s = Session(_small(), budget=budget, unit=unit_of("uid", max_rows=3, max_groups=2, max_rows_per_group=2))
    q = s.query().group_by("k", keys=list("abcdefgh")).mean("x", (-20, 100), granularity=0.5, method="auto")
    plan = s._calibrate(q, budget)
    sp, b = plan.stats[0], plan.bounds
    lo_u, hi_u = sp.stat.unit_range
    qq = _centre_scale(hi_u - lo_u)
    n = [1000, 10, 0, 3000, 2, 40, 5000, 1]
    sums = [1000 * 190, 10 * -40, 0, 3000 * 80, 2 * 200, 40 * 100, 5000 * -30, 150]
    m = _Recorder({"_s0": sums, "_c0": n}, noise, b, 11)
    get_kind("mean").measure(0, sp, m)
    count_plan, centre_plan, *stage2 = m.plans
    c_noisy = count_plan.sample(deterministic_source(11)).value
    t_noisy = centre_plan.sample(_after(11, [count_plan])).value
    centres = _centres(c_noisy, t_noisy, lo_u, hi_u, qq)
    widths = [max(c - qq * lo_u, qq * hi_u - c, 1) for c in centres]
    c1, t1, s2, bc, bt = sp.parts
    v_a = {a: _noise_variance(integer_noise(noise, b.l1 * a, b.l2_squared * a * a, s2.noise.share)) / qq**2
           for a in set(widths)}
    choose_a = [_auto_choice(int(c_noisy[j]), centres[j], qq, lo_u, hi_u, _noise_variance(c1.noise),
                             _noise_variance(t1.noise), v_a[widths[j]], _noise_variance(bc.noise),
                             _noise_variance(bt.noise)) for j in range(len(n))]
    n_b = choose_a.count(False)
    assert 0 < n_b < len(n)  # both branches in this release
    b_count, b_sum, *centred = stage2
    assert (b_count.params["coords"], b_sum.params["coords"]) == (n_b, n_b)
    assert (b_count.scale, b_sum.scale) == (bc.scale, bt.scale)
    a_widths = [w for w, a in zip(widths, choose_a, strict=True) if a]
    assert [p.params["coords"] for p in centred] == [a_widths.count(a) for a in sorted(set(a_widths))]
    for j, value, lo, hi, mech in m.rows:
        assert -20 <= lo <= value <= hi <= 100, j
        assert ("pooled with the centre's" in mech) == (not choose_a[j]), j


def test_auto_choice_rule():
    """The rule itself: a large released count with a centre near the mean keeps the centred sum (a); a count
    below 1 (the centre is noise: its variance is capped at (Δ/2)²) takes the pooled noisy ratio (b)."""
    lap = {"v_c1": 2 * 100.0**2, "v_t1": 2 * (100 * 100.0) ** 2, "v_c2": 2 * 25.0**2, "v_t2": 2 * (100 * 25.0) ** 2}
    v_a = 2 * (90 * 12.5) ** 2
    assert _auto_choice(30000, 10 * 16, 16, 0, 100, lap["v_c1"], lap["v_t1"], v_a, lap["v_c2"], lap["v_t2"])
    assert not _auto_choice(0, 10 * 16, 16, 0, 100, lap["v_c1"], lap["v_t1"], v_a, lap["v_c2"], lap["v_t2"])
    assert not _auto_choice(40, 50 * 16, 16, 0, 100, lap["v_c1"], lap["v_t1"], 2 * (50 * 12.5) ** 2, lap["v_c2"],
                            lap["v_t2"])


def test_auto_beats_the_centred_kind_in_small_groups_of_a_wide_column():
    """1,500 groups of 200 values in 0..20 (mean about 10) with bounds (0, 1000), ε = 0.1: ``nε = 20`` against
    ``Δ = 1000``, where the centre of stage 1 is noise. In 6 real releases of each (1,000 + seed streams) the mean
    absolute error was 44.9 ± 1.0 (auto), 99.4 ± 3.4 (centred), 55.3 ± 1.7 (noisy_ratio), and the groups with an
    error of at most 30 numbered 931 ± 18 (auto: a binomial(1500, 0.62), sd 18.8) and 753 ± 22 (centred). A
    correct implementation has fewer than 835 such groups with probability < 2e-7 (5.1 binomial sd) and a mean
    error above 0.6x the centred one's with far less (> 8 sd); an implementation without option (b) (the centred
    law) reaches 835 with probability ~1e-5 and fails the mean-error bound (14 sd)."""
    g = np.random.default_rng(11)  # test data only
    k = np.repeat(np.arange(1500), 200)
    df = pd.DataFrame({"k": k, "x": g.integers(0, 21, size=k.size)})
    truth = df.groupby("k").x.mean().to_numpy()
    keys = list(range(1500))
    err = {}
    for i, method in enumerate(("auto", "centred", "noisy_ratio")):
        s = Session(df, budget=PureDP(1.0), rng=deterministic_source(2000 + i))
        r = s.release(s.query().group_by("k", keys=keys).mean("x", (0, 1000), method=method), budget=PureDP(0.1))
        err[method] = np.abs(r.set_index("k")["value"].reindex(keys).to_numpy() - truth)
    assert int(np.sum(err["auto"] <= 30)) >= 835, int(np.sum(err["auto"] <= 30))
    assert err["auto"].mean() < 0.6 * err["centred"].mean(), (err["auto"].mean(), err["centred"].mean())
    assert err["auto"].mean() < 1.05 * err["noisy_ratio"].mean(), (err["auto"].mean(), err["noisy_ratio"].mean())


@pytest.mark.parametrize("engine", ["pandas", "polars", "parquet"])
def test_auto_same_release_on_every_local_engine_with_both_branches(engine, to_engine):
    df = _sized_frame([2500, 3, 40, 2500, 1], seed=3, hi=60)

    def run(source):
        s = Session(source, budget=PureDP(5.0), rng=deterministic_source(12))
        q = s.query().group_by("k", keys=[0, 1, 2, 3, 4, 5]).mean("x", (0, 5000), method="auto")
        return s.release(q, budget=PureDP(0.5))

    ref = run(to_engine(df, "duckdb"))
    got = run(to_engine(df, engine))
    assert np.array_equal(got["value"].to_numpy(), ref["value"].to_numpy())
    assert list(got["mechanism"]) == list(ref["mechanism"])
    pooled = ref["mechanism"].str.contains("pooled with the centre's")
    assert pooled.any() and not pooled.all()


def test_interval_coverage_of_auto_in_both_branches():
    """1,500 groups of 20 to 3,000 rows (values near ``lo``, bounds (0, 100), ε = 0.5): option (b) in the small
    groups, (a) in the large ones; the 95% intervals hold the exact clamped mean in at least 95% of the groups of
    each branch (less 6 binomial standard deviations)."""
    g = np.random.default_rng(9)  # test data only
    sizes = np.where(np.arange(1500) % 2 == 0, g.integers(20, 60, size=1500), g.integers(1500, 3000, size=1500))
    key = np.repeat(np.arange(sizes.size), sizes)
    df = pd.DataFrame({"k": key, "x": np.clip(g.exponential(8.0, size=key.size), 0, 100).round(0)})
    s = Session(df, budget=PureDP(10.0), rng=deterministic_source(5))
    res = s.release(s.query().group_by("k", keys=list(range(sizes.size))).mean("x", bounds=(0, 100), method="auto"),
                    budget=PureDP(0.5))
    truth = df.groupby("k").x.mean().to_numpy()
    inside = (res["lo"].to_numpy() <= truth) & (truth <= res["hi"].to_numpy())
    pooled = res["mechanism"].str.contains("pooled with the centre's").to_numpy()
    assert pooled.sum() >= 500 and (~pooled).sum() >= 500, pooled.sum()
    for branch in (pooled, ~pooled):
        assert inside[branch].mean() >= 0.95 - 6 * math.sqrt(0.05 * 0.95 / branch.sum())
    assert (res["lo"] <= res["value"]).all() and (res["value"] <= res["hi"]).all()
