"""dpkit.stats.mean: every method's law, accuracy, privacy (exact where the law is computable, the auditor
otherwise), the Li et al. errata (Alg 1 sensitivity, Alg 2 counterexample, Alg 3 change of variables),
accounting and refused inputs."""

from __future__ import annotations

import importlib.util
import math
from fractions import Fraction

import numpy as np
import pytest

from audit.fixtures import pinq_resampling_average  # Li Alg 2 (not private), shared with tests/audit
from conftest import sized
from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit import HalfLine, audit
from dpkit.audit.exact import DiscreteLaplace, Laplace, Lattice, log_integral, max_privacy_loss
from dpkit.audit.testing import watch_charges
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, NoInterval, WrongType
from dpkit.noise import deterministic_source
from dpkit.stats.means import _ClampPlan, _ExponentialPlan, _plan, _RatioPlan, _ReplacePlan, mean
from dpkit.stats.sums import exact_sum

from .fixtures import (
    P_MIN,
    SECRET,
    CountingSource,
    assert_refused,
    chi2_pvalue,
    clamp_mean_logpmf,
    dlap_binned_pvalue,
    printed_clamp_plan,
)

CONF = 1 - 1e-7
LN2 = math.log(2.0)


def _dlap_probs(t, ks):
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(ks)


def _vec(method, lo, hi, eps, nb=None):
    """The real sampling path of ``mean`` (``_plan(...).draw``), vectorised for the auditor."""

    def mech(data, rng, size):
        x = np.asarray(data, dtype=np.float64)
        return _plan(x, lo, hi, eps, method, 1024, nb or AddRemove()).draw(rng, size)[0]

    return mech


# ---------------------------------------------------------------------------------------------
# "normalized" (Li Alg 4) and "noisy_ratio" (Li Alg 1)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["normalized", "noisy_ratio", "clamp", "exponential"])
def test_public_function_is_the_plan_plus_one_charge(method):
    x = np.array([1.0, 4.0, 9.5, 3.25, 7.0])
    rel = mean(x, (0, 10), 1.5, method=method, rng=deterministic_source(31))
    v, parts = _plan(x, 0.0, 10.0, 1.5, method, 1024, AddRemove()).draw(deterministic_source(31), 1)
    assert rel.value == float(v[0]) and rel.mechanism == "mean" and rel.params["method"] == method
    for key, arr in parts.items():
        assert rel.parts[key] == arr[0]
    assert 0.0 <= rel.value <= 10.0


@pytest.mark.parametrize("centred", [True, False])
def test_ratio_value_is_postprocessing_of_the_parts(centred):
    lo, hi = 20.0, 80.0
    plan = _RatioPlan(np.array([25.0, 60.0, 79.0]), lo, hi, 1.0, AddRemove(), centred=centred)
    v, parts = plan.draw(deterministic_source(2), 5000)
    s = parts["centred_sum" if centred else "sum"]
    c = parts["count"]
    centre = 50.0 if centred else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(c <= 1, 50.0, np.clip(s / np.maximum(c, 1) + centre, lo, hi))
    assert np.array_equal(v, expected)
    assert np.any(c <= 1) and np.all((v >= lo) & (v <= hi))


def test_scales_per_method_and_relation():
    lo, hi, eps = 20.0, 80.0, 1.0
    x = np.array([30.0, 70.0])
    alg4 = _RatioPlan(x, lo, hi, eps, AddRemove(), centred=True)
    alg1 = _RatioPlan(x, lo, hi, eps, AddRemove(), centred=False)
    unit = _RatioPlan(x, lo, hi, eps, PrivacyUnit("u", max_rows=3), centred=True)
    assert alg4.eps_sum + alg4.eps_count <= eps
    # centred sum: |x - mid| <= Δ/2 = 30 at eps/2; Alg 1 erratum: the sum's add/remove sensitivity is 80, not 60
    assert alg4.lat.sensitivity == 30.0 and alg1.lat.sensitivity == 80.0 and unit.lat.sensitivity == 90.0
    assert 30.0 / (eps / 2) <= alg4.lat.b <= 30.0 / (eps / 2) * (1 + 2.0**-19)
    assert 80.0 / (eps / 2) <= alg1.lat.b <= 80.0 / (eps / 2) * (1 + 2.0**-19)
    assert alg4.t_count == pytest.approx(2.0 / eps) and unit.t_count == pytest.approx(6.0 / eps)
    assert alg4.t_count >= 2.0 / eps


@pytest.mark.slow
@pytest.mark.parametrize("centred", [True, False])
def test_ratio_parts_have_the_stated_laws(centred):
    lo, hi, eps = -2.0, 6.0, 0.8
    x = np.array([-1.5, 0.0, 2.5, 5.75, 6.0, 3.0])
    plan = _RatioPlan(x, lo, hi, eps, AddRemove(), centred=centred)
    n = sized(20_000, 200_000)
    _, parts = plan.draw(deterministic_source(41), n)
    s = parts["centred_sum" if centred else "sum"]
    z = np.rint(s / plan.lat.g).astype(np.int64) - plan.r_sum
    assert np.all(s == (plan.r_sum + z) * plan.lat.g)
    truth = exact_sum(np.clip(x, lo, hi) - (2.0 if centred else 0.0))
    assert plan.r_sum == round(truth / Fraction(plan.lat.g))
    assert dlap_binned_pvalue(z, plan.lat.t) > P_MIN
    assert dlap_binned_pvalue(z, 1.15 * plan.lat.t) < P_MIN  # power
    ks = np.arange(-150, 151)
    cnt = np.bincount(np.clip(parts["count"] - x.size, -150, 150) + 150, minlength=ks.size)
    assert cnt.sum() == n
    assert chi2_pvalue(cnt, _dlap_probs(plan.t_count, ks)) > P_MIN
    assert chi2_pvalue(cnt, _dlap_probs(1.15 * plan.t_count, ks)) < P_MIN  # power


@pytest.mark.slow
@pytest.mark.parametrize("n_rec", [400, 3200])
def test_normalized_error_shrinks_like_scale_over_n(n_rec):
    # data symmetric about the midpoint: the centred sum is exactly 0, so value - mid = S~/C~ with S~ the
    # lattice Laplace noise: E|value - mid| = b_S / n (1 + O(1/n)). A 10 % wrong scale or another rate fails.
    lo, hi, eps = 0.0, 10.0, 1.0
    x = np.concatenate([np.full(n_rec // 2, 2.0), np.full(n_rec // 2, 8.0)])
    plan = _RatioPlan(x, lo, hi, eps, AddRemove(), centred=True)
    assert plan.r_sum == 0
    trials = sized(20_000, 200_000)
    v, _ = plan.draw(deterministic_source(n_rec), trials)
    ratio = float(np.mean(np.abs(v - 5.0))) * n_rec / plan.lat.b
    # sd of mean |Laplace| / b is 1/sqrt(trials) (0.7 %); 6 sd + O(1/n) bias
    assert abs(ratio - 1.0) < 6 / math.sqrt(trials) + 4.0 / n_rec


@pytest.mark.parametrize(("method", "nb"), [("normalized", AddRemove()), ("noisy_ratio", AddRemove()),
                                             ("normalized", Replace()), ("normalized", PrivacyUnit("u", 2))])
def test_interval_covers_the_true_mean(method, nb):
    lo, hi, eps, conf = 0.0, 10.0, 1.0, 0.9
    x = np.linspace(0.5, 9.0, 60) ** 1.1
    x = np.clip(x, lo, hi)
    truth = float(np.mean(x))
    plan = _plan(x, lo, hi, eps, method, 1024, nb)
    trials = 1500
    _, parts = plan.draw(deterministic_source(7), trials)
    hits = widths = 0.0
    for i in range(trials):
        if isinstance(plan, _ReplacePlan):
            fn = plan.interval_fn(float(parts["sum"][i]))
        else:
            key = "centred_sum" if plan.centred else "sum"
            fn = plan.interval_fn(float(parts[key][i]), int(parts["count"][i]))
        a, b = fn(conf)
        assert lo <= a <= b <= hi
        hits += a <= truth <= b
        widths += b - a
    assert hits / trials >= conf - 6 * math.sqrt(conf * (1 - conf) / trials)
    assert widths / trials < hi - lo  # informative


def test_interval_is_the_whole_range_when_the_count_may_be_zero():
    rel = mean([], (0, 10), 0.5, rng=deterministic_source(3))
    assert rel.interval(0.95) == (0.0, 10.0)
    rel = mean([3.0] * 5000, (0, 10), 1.0, rng=deterministic_source(3))
    a, b = rel.interval(0.95)
    assert a <= 3.0 <= b and b - a < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("method", ["normalized", "noisy_ratio"])
def test_auditor_does_not_flag_alg4_and_alg1(method):
    lo, hi, eps = 1.0, 3.0, 1.0  # the two methods differ here (sum sensitivity 3 vs centred 1)
    d = [lo] * 2
    trials = sized(100_000, 1_000_000)
    r = audit(_vec(method, lo, hi, eps), [*d, hi], d, trials=trials, vectorized=True, claimed_epsilon=eps,
              confidence=CONF, rng=deterministic_source(5))
    assert not r.flagged


# ---------------------------------------------------------------------------------------------
# Li Alg 2 (PINQ resampling): NOT private, but not for the book's reason
# ---------------------------------------------------------------------------------------------


def _resampling_log_density(c: int, add: bool, eps: float = 1.0, lo: float = -1.0, hi: float = 1.0):
    """log density of Alg 2's output on D = c x {lo} (+ {hi}): Laplace((S + Y)/C) truncated to [lo, hi];
    the normaliser is computed by numerical integration (dpkit.audit.exact.log_integral)."""
    s, n = c * lo + (hi if add else 0.0), c + (1 if add else 0)
    lap = Laplace(s / n, (hi - lo) / eps / n)
    log_z = log_integral(lap.logpdf, lo, hi, points=[s / n] if lo < s / n < hi else None, scale=lap.scale)
    return lambda z: lap.logpdf(z) - log_z


def test_resampling_average_worst_ratio_by_numerical_integration():
    table = {1: 1.000, 2: 1.143, 5: 1.310, 30: 1.457, 100: 1.480}
    for c, expected in table.items():
        loss = _resampling_log_density(c, False)(-1.0) - _resampling_log_density(c, True)(-1.0)
        assert round(loss, 3) == expected
    # the book's pair D = {-1}, D' = {-1, 1}: the true densities at -1 are eps/(2(1-e^-eps)) and
    # eps e^-eps/(2(1-e^-eps)) (the book forgets the factor C = 2 of the change of variables): ratio e^eps
    e = 1.0
    assert math.exp(_resampling_log_density(1, False)(-1.0)) == pytest.approx(e / (2 * (1 - math.exp(-e))))
    assert math.exp(_resampling_log_density(1, True)(-1.0)) == pytest.approx(
        e * math.exp(-e) / (2 * (1 - math.exp(-e))))


@pytest.mark.slow
def test_auditor_flags_the_resampling_average():
    d = [-1.0] * 30
    trials = sized(100_000, 500_000)
    # P[out <= -0.995] = 0.0723 on D and 0.0182 on D' (log ratio 1.381); CP bound ~1.24 at 100k trials
    r = audit(pinq_resampling_average, d, [*d, 1.0], trials=trials, vectorized=True, claimed_epsilon=1.0,
              event=HalfLine(-0.995, "<="), confidence=CONF, rng=deterministic_source(11))
    assert r.flagged and 1.0 < r.epsilon_lower_bound < 1.457


# ---------------------------------------------------------------------------------------------
# "clamp" (Li Alg 3): the erratum, the corrected calibration, the exact sampler
# ---------------------------------------------------------------------------------------------


def test_alg3_supremum_formula():
    # sup_n ln(1 + 1/n) + ε₀ n/(n+1) = max(ε₀, ln 2 + ε₀/2)
    n = np.arange(1, 200_001, dtype=np.float64)
    for e0 in (0.05, 0.5, 1.0, 1.2, 1.5, 2.0, 4.0):
        h = np.log1p(1.0 / n) + e0 * n / (n + 1.0)
        bound = max(e0, LN2 + e0 / 2)
        assert h.max() <= bound + 1e-12
        assert h.max() >= bound - 1e-4
        if e0 <= 1.0:
            assert h[0] == pytest.approx(bound) and np.all(np.diff(h[:1000]) < 0)  # decreasing in n
    # brute force over the continuous densities of Alg 3 (data and output in [0, 1], Δ = 1)
    e0 = 1.0
    z = np.linspace(0.0, 1.0, 401)[1:-1]  # interior outputs
    for n_prev in (1, 2, 3, 6):
        worst = -np.inf
        for s_prev in np.linspace(0.0, n_prev, 25):
            for x_add in np.linspace(0.0, 1.0, 25):
                ld = math.log(n_prev + 1) - e0 * np.abs((n_prev + 1) * z - (s_prev + x_add))
                ldp = math.log(n_prev) - e0 * np.abs(n_prev * z - s_prev)
                worst = max(worst, float(np.max(ld - ldp)), float(np.max(ldp - ld)))
        claimed = math.log1p(1 / n_prev) + e0 * n_prev / (n_prev + 1)
        assert claimed - 0.02 <= worst <= claimed + 1e-12


def _pair_loss(plan_d, plan_dp):
    a = clamp_mean_logpmf(plan_d.s_units, plan_d.n, plan_d.L, plan_d.H, plan_d.beta, plan_d.gamma)
    b = clamp_mean_logpmf(plan_dp.s_units, plan_dp.n, plan_dp.L, plan_dp.H, plan_dp.beta, plan_dp.gamma)
    assert plan_d.L == plan_dp.L and plan_d.H == plan_dp.H  # the output grid is public
    return float(np.max(np.abs(a - b)))


def test_alg3_as_printed_is_not_epsilon_dp():
    # the exact output law of the sampler with the book's calibration (ε₀ = ε = 1): D' = {lo}, D = {lo, hi}
    lo, hi = 0.0, 1.0
    loss = _pair_loss(printed_clamp_plan([lo, hi], lo, hi, 1.0), printed_clamp_plan([lo], lo, hi, 1.0))
    assert loss == pytest.approx(LN2 + 0.5, abs=1e-5)  # 1.193 > 1
    assert loss > 1.19


PAIRS = [([], [0.0]), ([], [0.5]), ([], [1.0]), ([0.0], [0.0, 1.0]), ([1.0], [1.0, 0.0]),
         ([0.0] * 5, [0.0] * 5 + [1.0]), ([0.2, 0.9, 0.4], [0.2, 0.9, 0.4, 0.0])]


@pytest.mark.parametrize("eps", [0.75, 1.0, 2.5])
def test_alg3_corrected_calibration_is_epsilon_dp_exactly(eps):
    worst = 0.0
    for d_prime, d in PAIRS:
        p_d = _ClampPlan(np.array(d), 0.0, 1.0, eps, AddRemove())
        p_dp = _ClampPlan(np.array(d_prime), 0.0, 1.0, eps, AddRemove())
        worst = max(worst, _pair_loss(p_d, p_dp))
    assert worst <= eps * (1 + 1e-9)
    assert worst >= eps * (1 - 1e-5)  # and tight: ε₀ is the largest admissible


def test_alg3_exhaustive_on_a_coarse_grid():
    # the same closed form on a grid of 8 cells: every dataset of <= 3 records and every added record
    lo_u, hi_u = -4, 4
    m = hi_u - lo_u
    for eps in (0.8, 1.0, 1.5, 3.0):
        e0 = min(eps, 2 * (eps - LN2))
        beta = m / e0
        gamma = m / (2 * beta)
        worst = 0.0
        printed_worst = 0.0
        for n in range(4):
            for s in range(n * lo_u, n * hi_u + 1):
                a = clamp_mean_logpmf(s, n, lo_u, hi_u, beta, gamma)
                a_printed = clamp_mean_logpmf(s, n, lo_u, hi_u, m / eps, eps / 2)
                for x in range(lo_u, hi_u + 1):
                    b = clamp_mean_logpmf(s + x, n + 1, lo_u, hi_u, beta, gamma)
                    worst = max(worst, float(np.max(np.abs(a - b))))
                    b_printed = clamp_mean_logpmf(s + x, n + 1, lo_u, hi_u, m / eps, eps / 2)
                    printed_worst = max(printed_worst, float(np.max(np.abs(a_printed - b_printed))))
        assert worst <= eps * (1 + 1e-9)
        if eps < 2 * LN2:
            assert printed_worst > eps + 0.02


@pytest.mark.parametrize(("s", "n", "beta"), [(0, 1, 3.0), (-4, 1, 0.8), (5, 3, 2.5), (-11, 3, 7.0), (9, 5, 1.7)])
def test_alg3_sampler_law_is_the_rounded_continuous_mechanism(s, n, beta):
    # The closed form used above (cells of W = floor(2Y) between a_j = 2nj - 2s - n) equals the law of
    # round(clamp((s + Y)/n, L, H)) with Y ~ Lap(beta) computed directly from the Laplace cdf: this checks
    # floor((x + m)/M) = floor((floor(x) + m)/M) and the law of floor(2Y) used by the sampler.
    lo_u, hi_u = -4, 4
    lap = Laplace(0.0, beta)
    j = np.arange(lo_u, hi_u + 1)
    # round half up: output j <=> (s + Y)/n in [j - 1/2, j + 1/2)  <=>  Y in [n(j - 1/2) - s, n(j + 1/2) - s)
    upper = np.exp(lap.logcdf(n * (j + 0.5) - s))
    lower = np.exp(lap.logcdf(n * (j - 0.5) - s))
    direct = upper - lower
    direct[0] = upper[0]
    direct[-1] = 1.0 - lower[-1]
    closed = np.exp(clamp_mean_logpmf(s, n, lo_u, hi_u, beta, 0.1))
    assert np.allclose(closed, direct, rtol=1e-9, atol=1e-15)
    # empty case: endpoint masses e^-gamma/2 plus the uniform on [L, H] rounded (end cells of width 1/2)
    gamma, m = 0.37, hi_u - lo_u
    cells = np.full(j.size, 1.0 / m)
    cells[0] = cells[-1] = 0.5 / m
    expected = (1 - math.exp(-gamma)) * cells
    expected[0] += math.exp(-gamma) / 2
    expected[-1] += math.exp(-gamma) / 2
    assert np.allclose(np.exp(clamp_mean_logpmf(0, 0, lo_u, hi_u, beta, gamma)), expected, rtol=1e-12)


def _small_plan(n, s_units, lo_u=-4, hi_u=4, beta=3.0, gamma=0.4):
    plan = _ClampPlan(np.zeros(0), 0.0, 1.0, 1.0, AddRemove())
    plan.L, plan.H, plan.M = lo_u, hi_u, hi_u - lo_u
    plan.n, plan.s_units, plan.beta, plan.gamma = n, s_units, beta, gamma
    plan.m, plan.g = 0.0, 1.0
    return plan


@pytest.mark.slow
@pytest.mark.parametrize(("n", "s_units"), [(0, 0), (1, -4), (1, 2), (3, 5)])
def test_alg3_sampler_matches_its_exact_law(n, s_units):
    plan = _small_plan(n, s_units)
    trials = sized(30_000, 300_000)
    v, _ = plan.draw(deterministic_source(100 + n), trials)
    j = v.astype(np.int64)
    assert np.all(v == j)
    counts = np.bincount(j - plan.L, minlength=plan.M + 1)
    p = np.exp(clamp_mean_logpmf(s_units, n, plan.L, plan.H, plan.beta, plan.gamma))
    assert p.sum() == pytest.approx(1.0)
    assert chi2_pvalue(counts, p) > P_MIN
    if n == 0:
        wrong = clamp_mean_logpmf(s_units, n, plan.L, plan.H, plan.beta, 2 * plan.gamma)
    else:
        wrong = clamp_mean_logpmf(s_units, n, plan.L, plan.H, 1.3 * plan.beta, plan.gamma)
    assert chi2_pvalue(counts, np.exp(wrong)) < P_MIN  # power: a wrong scale is caught


def test_alg3_calibration_and_refusal():
    x = np.array([0.3, 0.6])
    assert _ClampPlan(x, 0.0, 1.0, 1.0, AddRemove()).eps0 == pytest.approx(2 * (1 - LN2))
    assert _ClampPlan(x, 0.0, 1.0, 2.0, AddRemove()).eps0 == 2.0
    assert _ClampPlan(x, 0.0, 1.0, 0.7, AddRemove()).eps0 == pytest.approx(2 * (0.7 - LN2))
    assert _ClampPlan(x, 0.0, 1.0, 3.0, PrivacyUnit("u", max_rows=2)).eps0 == 1.5  # group privacy: ε/k
    for eps in (2 * LN2 * 0.999, 1.0, 1.3):
        e0 = _ClampPlan(x, 0.0, 1.0, eps, AddRemove()).eps0
        assert max(e0, LN2 + e0 / 2) <= eps
    for eps, nb in ((0.5, AddRemove()), (LN2, AddRemove()), (1.2, PrivacyUnit("u", max_rows=2))):
        acct = Accountant(PureDP(5.0), neighbours=nb)
        src = CountingSource(1)
        with pytest.raises(InvalidParameter) as exc:
            mean(x, (0, 1), eps, method="clamp", accountant=acct, rng=src)
        assert exc.value.param == "epsilon" and "ln 2" in str(exc.value)
        assert acct.spent == PureDP(0.0) and src.consumed == 0
    # under replace-one n is public: no change of variables, no refusal
    rel = mean(x, (0, 1), 0.5, method="clamp", neighbours=Replace(), rng=deterministic_source(1))
    assert 0.0 <= rel.value <= 1.0


def test_alg3_output_lies_on_a_public_grid():
    lo, hi = -3.0, 7.0
    g = None
    for n_rec in (1, 3, 7, 40):
        x = np.linspace(lo, hi, n_rec) * 0.731
        plan = _ClampPlan(x, lo, hi, 1.0, AddRemove())
        g = plan.g if g is None else g
        assert plan.g == g and plan.m == 2.0
        v, _ = plan.draw(deterministic_source(n_rec), 500)
        k = (v - plan.m) / plan.g
        assert np.all(k == np.round(k)) and np.all((v >= lo) & (v <= hi))
    rel = mean([1.0], (lo, hi), 1.0, method="clamp", rng=deterministic_source(2))
    with pytest.raises(NoInterval):
        rel.interval()


@pytest.mark.slow
def test_alg3_error_bound():
    lo, hi, eps, beta_fail = 0.0, 10.0, 1.0, 0.05
    gen = np.random.default_rng(3)  # rng-ok: test data only
    x = gen.uniform(lo, hi, 300)
    plan = _ClampPlan(x, lo, hi, eps, AddRemove())
    trials = sized(20_000, 200_000)
    v, _ = plan.draw(deterministic_source(9), trials)
    bound = plan.scale * math.log(1 / beta_fail) / x.size + 2 * plan.g
    inside = np.mean(np.abs(v - x.mean()) <= bound)
    assert inside >= 1 - beta_fail - 6 * math.sqrt(beta_fail * (1 - beta_fail) / trials)
    assert inside <= 1 - beta_fail / 2  # the bound is not loose by a factor (it is ~exact for the Laplace part)


# ---------------------------------------------------------------------------------------------
# "exponential"
# ---------------------------------------------------------------------------------------------


def test_exponential_scores_are_exact_and_private():
    lo, hi, eps = -1.0, 3.0, 0.7
    base = [0.5, 2.25, -0.75, 2.9]
    for extra in (lo, hi, 1.1):
        d, d_prime = np.array(base), np.array([*base, extra])
        p, p2 = (_ExponentialPlan(v, lo, hi, eps, AddRemove(), 64) for v in (d, d_prime))
        # brute-force sensitivity of the raw quality -|Σ(x - o)| on this pair: <= Δ = 4
        q = [-np.abs(np.sum(v) - v.size * p.grid) for v in (d, d_prime)]
        assert np.max(np.abs(q[0] - q[1])) <= hi - lo
        # the scores passed to the sampler are the exact qualities rounded to the lattice
        exact = [-abs(exact_sum(d) - d.size * Fraction(float(o))) for o in p.grid]
        gs = Fraction(p.sensitivity) - (hi - lo)
        assert all(abs(Fraction(float(s)) - e) <= gs / 2 for s, e in zip(p.scores, exact, strict=True))
        loss = float(np.max(np.abs(p.law.log_probs() - p2.law.log_probs())))
        assert loss <= eps * (1 + 1e-9)


def test_exponential_accuracy_and_empty():
    lo, hi, eps, m, beta_fail = 0.0, 10.0, 1.0, 256, 0.01
    gen = np.random.default_rng(4)  # rng-ok: test data only
    x = gen.uniform(2.0, 9.0, 500)
    plan = _ExponentialPlan(x, lo, hi, eps, AddRemove(), m)
    v, _ = plan.draw(deterministic_source(12), 2000)
    bound = (hi - lo) / (2 * (m - 1)) + 2 * (hi - lo) * (math.log(m) + math.log(1 / beta_fail)) / (x.size * eps)
    assert np.mean(np.abs(v - x.mean()) <= bound) >= 1 - beta_fail - 6 * math.sqrt(beta_fail / 2000)
    assert np.all(np.isin(v, plan.grid))
    empty = _ExponentialPlan(np.zeros(0), lo, hi, eps, AddRemove(), m)
    assert np.all(empty.scores == 0.0)  # all candidates equal: uniform
    rel = mean([], (lo, hi), eps, method="exponential", candidates=m, rng=deterministic_source(1))
    assert rel.value in plan.grid
    with pytest.raises(NoInterval):
        rel.interval()


# ---------------------------------------------------------------------------------------------
# "median", replace-one, empty input
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("dpkit.stats.order_statistics") is None,
                    reason="dpkit.stats.quantiles (helper QUANTILES) is not in the tree yet")
def test_median_method_delegates_to_the_em_median():
    acct = Accountant(PureDP(1.0))
    rel = mean([1.0, 2.0, 3.0, 4.0, 100.0] * 20, (0, 100), 0.8, method="median", accountant=acct,
               rng=deterministic_source(3))
    assert 0.0 <= float(rel.value) <= 100.0
    assert acct.spent == PureDP(0.8) and len(acct.receipts) == 1


@pytest.mark.parametrize("method", ["normalized", "noisy_ratio", "clamp"])
def test_replace_one_uses_the_public_count(method):
    lo, hi, eps = 20.0, 80.0, 0.9
    x = np.array([25.0, 61.0, 79.5, 33.0])
    plan = _plan(x, lo, hi, eps, method, 1024, Replace())
    assert isinstance(plan, _ReplacePlan) and plan.lat.sensitivity == 60.0  # replace-one: hi - lo
    v, parts = plan.draw(deterministic_source(8), 1000)
    assert np.array_equal(v, np.clip(parts["sum"] / 4, lo, hi))
    # exact privacy of the released sum for a replacement lo -> hi
    d, d2 = np.append(x, lo), np.append(x, hi)
    r, r2 = (_plan(v_, lo, hi, eps, method, 1024, Replace()).r_sum for v_ in (d, d2))
    laws = [Lattice(DiscreteLaplace(c, plan.lat.t), plan.lat.g) for c in (r, r2)]
    grid = [(r - 2) * plan.lat.g, r * plan.lat.g, r2 * plan.lat.g, (r2 + 2) * plan.lat.g]
    assert max_privacy_loss(*laws, grid=grid).loss <= eps * (1 + 1e-12)
    empty = _plan(np.zeros(0), lo, hi, eps, method, 1024, Replace())
    assert np.all(empty.draw(deterministic_source(1), 3)[0] == 50.0)


@pytest.mark.parametrize("method", ["normalized", "noisy_ratio", "clamp", "exponential"])
@pytest.mark.parametrize("nb", [AddRemove(), Replace(), PrivacyUnit("u", max_rows=1)])
def test_empty_input_gives_a_valid_release(method, nb):
    acct = Accountant(PureDP(5.0), neighbours=nb)
    rel = mean([], (-2, 5), 2.0, method=method, accountant=acct, rng=deterministic_source(4))
    assert -2.0 <= rel.value <= 5.0 and acct.spent == PureDP(2.0)
    rel = mean([float("nan")], (-2, 5), 2.0, method=method, accountant=acct, nan_policy="omit",
               rng=deterministic_source(4))
    assert -2.0 <= rel.value <= 5.0


# ---------------------------------------------------------------------------------------------
# accounting and refused inputs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["normalized", "noisy_ratio", "clamp", "exponential"])
def test_charged_once_before_any_randomness(method):
    acct = Accountant(PureDP(2.0))
    src = CountingSource(7)
    seen = watch_charges(acct, src)
    rel = mean([1.0, 2.0, 3.0], (0, 5), 1.2, method=method, accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0
    assert rel.cost == PureDP(1.2) and acct.spent == PureDP(1.2) and len(acct.receipts) == 1
    assert rel.receipt is acct.receipts[-1] and rel.receipt.mechanism == "mean"
    assert rel.receipt.params["method"] == method
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        mean([1.0, 2.0, 3.0], (0, 5), 1.2, method=method, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


def _mean_call(values, *, bounds=(0, 10), epsilon=1.0, **kw):
    return mean(values, bounds, epsilon, **kw)


BAD = [
    (lambda f: f([SECRET, float("nan")]), InvalidData, "values"),
    (lambda f: f([SECRET, None]), InvalidData, "values"),
    (lambda f: f([SECRET, float("inf")]), InvalidData, "values"),
    (lambda f: f([SECRET, -float("inf")], nan_policy="omit"), InvalidData, "values"),
    (lambda f: f(np.array([[SECRET, 1.0]])), InvalidData, "values"),
    (lambda f: f([SECRET, "1.0"]), WrongType, "values"),
    (lambda f: f("12"), WrongType, "values"),
    (lambda f: f([SECRET], bounds=(3, 3)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(3, -3)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(-float("inf"), 3)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(0, float("nan"))), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=[1, 2, 3]), WrongType, "bounds"),
    (lambda f: f([SECRET], epsilon=0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon=-0.5), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon=None), WrongType, "epsilon"),
    (lambda f: f([SECRET], method="mode"), InvalidParameter, "method"),
    (lambda f: f([SECRET], method=None), WrongType, "method"),
    (lambda f: f([SECRET], candidates=1), InvalidParameter, "candidates"),
    (lambda f: f([SECRET], candidates=2.5), WrongType, "candidates"),
    (lambda f: f([SECRET], candidates=10**8), InvalidParameter, "candidates"),
    (lambda f: f([SECRET], method="clamp", epsilon=0.6), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], nan_policy=None), InvalidParameter, "nan_policy"),
]


@pytest.mark.parametrize("method", ["normalized", "noisy_ratio", "clamp", "exponential"])
@pytest.mark.parametrize("bad", BAD)
def test_refused_inputs_charge_and_draw_nothing(method, bad):
    call, err, param = bad

    def fn(values, **kw):
        kw.setdefault("method", method)
        return _mean_call(values, **kw)

    assert_refused(fn, call, err, param)


def test_relation_differing_from_the_accountants_is_refused():
    acct = Accountant(PureDP(1.0))
    with pytest.raises(InvalidParameter) as exc:
        mean([1.0], (0, 1), 0.5, neighbours=Replace(), accountant=acct, rng=CountingSource(1))
    assert exc.value.param == "neighbours" and acct.spent == PureDP(0.0)


# ---------------------------------------------------------------------------------------------
# "centred" (issue #16, the default): a private centre, then the sum centred there
# ---------------------------------------------------------------------------------------------
def _centred_sup_log_ratio(d, d2, lo, hi, eps, sens2=None):
    """The exact supremum over all outputs of |log P[out | d] / P[out | d2]| for method="centred": the three
    released parts are lattice Laplace / discrete Laplace with the same public lattices under both datasets, so the
    log ratio of a part is (|z + shift| - |z|)/t, whose sup over z is |shift|/t; the second part's lattice is
    chosen by the centre, so its sup is the max over every grid centre (all 1025 of them)."""
    from dpkit.stats.means import _CENTRE_GRID, _CentredPlan

    a = _CentredPlan(np.asarray(d, float), lo, hi, eps, AddRemove())
    b = _CentredPlan(np.asarray(d2, float), lo, hi, eps, AddRemove())
    total = Fraction(abs(a.r1 - b.r1)) / Fraction(a.lat1.t) + Fraction(abs(a.n - b.n)) / Fraction(a.t_count)
    worst = Fraction(0)
    for j in range(_CENTRE_GRID + 1):
        c = lo if j == 0 else hi if j == _CENTRE_GRID else lo + (hi - lo) * (j / _CENTRE_GRID)
        lat = a.lat2(c) if sens2 is None else sens2(a, c)
        ra = lat.centre(a.total - a.n * Fraction(c))
        rb = lat.centre(b.total - b.n * Fraction(c))
        worst = max(worst, Fraction(abs(ra - rb)) / Fraction(lat.t))
    return total + worst


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (1.0, 3.0), (-2.0, 5.0), (0.0, 99_999.0)])
def test_centred_is_epsilon_dp_exactly(lo, hi):
    eps = 1.0
    for base in ([lo] * 3, [hi] * 3, [lo, hi], []):
        for extra in (lo, hi, (lo + hi) / 2):
            sup = _centred_sup_log_ratio(base, [*base, extra], lo, hi, eps)
            assert sup <= Fraction(eps)


def test_centred_with_the_midpoint_sensitivity_is_not_private():
    """Power check: keeping the midpoint's sensitivity Δ/2 after moving the centre breaks the guarantee."""
    from dpkit.stats.sums import LatticeSum

    lo, hi, eps = 0.0, 1.0, 1.0

    def broken(plan, c):
        return LatticeSum(Fraction(hi - lo) / 2, plan.eps_sum)

    assert _centred_sup_log_ratio([lo] * 3, [lo] * 3 + [hi], lo, hi, eps, sens2=broken) > Fraction(eps)


@pytest.mark.slow
def test_auditor_does_not_flag_centred():
    lo, hi, eps = 1.0, 3.0, 1.0
    d = [lo] * 2
    trials = sized(100_000, 1_000_000)
    r = audit(_vec("centred", lo, hi, eps), [*d, hi], d, trials=trials, vectorized=True, claimed_epsilon=eps,
              confidence=CONF, rng=deterministic_source(5))
    assert not r.flagged


def test_centred_is_the_default_and_its_parts_are_consistent():
    x = np.round(np.linspace(0, 100, 5_000))
    r = mean(x, (0, 100), 1.0, rng=deterministic_source(3))
    assert r.params["method"] == "centred"
    p = r.parts
    assert sorted(p) == ["centre", "centre_sum", "centred_sum", "count"]
    assert 0 <= p["centre"] <= 100 and (p["centre"] / 100 * 1024) == round(p["centre"] / 100 * 1024)
    assert r.value == pytest.approx(min(max(p["centre"] + p["centred_sum"] / p["count"], 0), 100), rel=1e-15)
    assert abs(r.value - x.mean()) < 0.5
    old = mean(x, (0, 100), 1.0, method="normalized", rng=deterministic_source(3))
    assert old.params["method"] == "normalized" and sorted(old.parts) == ["centre", "centred_sum", "count"]


def test_centred_parts_have_the_stated_laws():
    from dpkit.stats.means import _CentredPlan

    x = np.array([0.0, 1.0, 3.0, 3.0, 2.5])
    p = _CentredPlan(x, 0.0, 4.0, 1.0, AddRemove())
    size = sized(20_000, 200_000)
    _, parts = p.draw(deterministic_source(11), size)
    assert dlap_binned_pvalue(parts["count"] - x.size, p.t_count) > P_MIN
    z1 = np.rint(parts["centre_sum"] / p.lat1.g).astype(np.int64) - p.r1
    assert dlap_binned_pvalue(z1, p.lat1.t) > P_MIN
    assert set(np.unique(parts["centre"])) <= {0.0 + 4.0 * j / 1024 for j in range(1025)}


def test_centred_interval_covers_the_true_mean():
    rng = deterministic_source(21)
    x = np.linspace(10, 30, 400)
    miss = 0
    reps = 300
    for _ in range(reps):
        r = mean(x, (0, 100), 0.5, rng=rng)
        a, b = r.interval(0.9)
        miss += not (a <= x.mean() <= b)
    assert miss / reps < 0.1 + 4 * math.sqrt(0.09 / reps)


def test_centred_beats_normalized_on_a_skewed_column():
    """The reason for the default: the count's error multiplies |mean - centre|, not |mean - midpoint|."""
    lo, hi, eps = 0.0, 100_000.0, 0.1
    x = np.zeros(30_000)
    x[:2_000] = 15_000.0  # mean 1,000, far from the midpoint
    size = sized(2_000, 20_000)
    new = _plan(x, lo, hi, eps, "centred", 1024, AddRemove()).draw(deterministic_source(1), size)[0]
    old = _plan(x, lo, hi, eps, "normalized", 1024, AddRemove()).draw(deterministic_source(2), size)[0]
    assert np.median(np.abs(new - x.mean())) < 0.9 * np.median(np.abs(old - x.mean()))
