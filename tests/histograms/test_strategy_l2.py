"""zCDP (Gaussian) workload-optimal strategies: optimize_strategy(norm="l2") and strategy_histogram(rho=...)."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from dpkit import (
    ZCDP,
    InvalidData,
    InvalidParameter,
    PrivacyUnit,
    Replace,
    WrongType,
    deterministic_source,
)
from dpkit.audit.testing import CountingSource, assert_charges_first, assert_refused_cleanly
from dpkit.core.accountant import Accountant
from dpkit.histograms import (
    all_ranges,
    optimize_strategy,
    prefix_ranges,
    strategy_histogram,
    svd_lower_bound,
)
from dpkit.histograms import strategy as st
from dpkit.histograms.lower_bound import range_gram

from ._helpers import REFUSAL_CALL, REFUSAL_SECRETS

WORKLOADS = {"all_ranges": all_ranges, "prefixes": prefix_ranges}


def _gram(name: str, m: int) -> np.ndarray:
    return range_gram(WORKLOADS[name](m), m)


def _brute_dual(g: np.ndarray, p: np.ndarray) -> float:
    """The dual objective (tr (P^½ G P^½)^½)² by a plain eigendecomposition."""
    d = np.sqrt(p)
    lam = np.linalg.eigvalsh(d[:, None] * g * d[None, :])
    return float(np.sqrt(np.clip(lam, 0, None)).sum() ** 2)


@pytest.mark.parametrize("name", ["all_ranges", "prefixes"])
@pytest.mark.parametrize("m", [16, 64, 256])
def test_l2_optimum_primal_equals_dual_and_is_near_the_svd_bound(name, m):
    s = optimize_strategy(name, m, norm="l2")
    g = _gram(name, m)
    a = s.matrix()
    assert a.shape == (m, m) and s.norm == "l2" and s.p == 0
    # brute force primal: max column L2 norm² times tr(G (AᵀA)⁻¹)
    primal = float(np.max(np.sum(a * a, axis=0)) * np.trace(np.linalg.solve(a.T @ a, g)))
    assert primal == pytest.approx(s.objective, rel=1e-8)
    assert np.allclose(np.sum(a * a, axis=0), 1.0, rtol=1e-12)
    # weak duality: any dual point is a lower bound; the reported dual is one, and the gap is certified
    assert s.dual is not None and s.dual <= s.objective
    assert s.objective <= s.dual * (1 + 1e-3)
    assert _brute_dual(g, np.full(m, 1.0 / m)) <= s.objective
    # the L2 SVD bound (Σσ)²/m is the dual at uniform weights; the optimum is within a few % of it in MSE
    # (prefixes at m = 16 / 64: 1.076 / 1.060, certified optimal within 0.1%: the bound itself is loose there)
    svdb = svd_lower_bound(WORKLOADS[name](m), rho=0.5, m=m, total=True)
    ratio = s.objective / svdb
    assert 1.0 <= ratio <= (1.05 if name == "all_ranges" or m >= 256 else 1.08)


def test_l2_matrix_workload_and_rank_deficient_gram():
    m = 12
    w = np.tril(np.ones((m, m)))                   # prefixes as a matrix: same optimum as the closed form
    s = optimize_strategy(w, norm="l2")
    assert s.workload == "matrix"
    assert s.objective == pytest.approx(optimize_strategy("prefixes", m, norm="l2").objective, rel=2e-3)
    # a workload that never touches bin 0: regularised (full-rank strategy), no dual claimed
    w2 = np.zeros((3, m))
    w2[:, 1:] = np.arange(3 * (m - 1)).reshape(3, m - 1) % 5
    s2 = optimize_strategy(w2, norm="l2")
    assert s2.dual is None and np.linalg.matrix_rank(s2.matrix()) == m
    rel = strategy_histogram(np.arange(m), rho=1.0, workload=w2, rng=deterministic_source(1))
    assert rel.value.shape == (m,)


def test_l2_strategies_are_cached():
    assert optimize_strategy("all_ranges", 32, norm="l2") is optimize_strategy("all_ranges", 32, norm="l2")


def _lattice(counts, rho=1.0, **kw):
    rel = strategy_histogram(counts, rho=rho, rng=deterministic_source(0), **kw)
    return rel, np.asarray(rel.parts["strategy"])


@pytest.mark.parametrize("name", ["all_ranges", "prefixes"])
def test_lattice_sensitivity_is_exact_by_brute_force(name):
    m = 7
    x = [2, 0, 5, 1, 1, 3, 4]
    rel, b = _lattice(x, workload=name)
    assert b.dtype == np.int64 and np.max(np.abs(b)) <= st._LATTICE
    cols = [int(np.dot(b[:, j], b[:, j])) for j in range(m)]
    # add/remove: the histogram moves by ±e_j
    assert rel.params["sensitivity_squared"] == max(cols)
    # replace-one: e_j - e_i, i != j (brute force over every pair)
    rep, _ = _lattice(x, workload=name, neighbours=Replace())
    pairs = max(int(np.sum((b[:, i] - b[:, j]) ** 2)) for i in range(m) for j in range(m) if i != j)
    assert rep.params["sensitivity_squared"] == pairs < 4 * max(cols)
    # privacy unit of 3 rows: every non-negative move of L1 norm <= 3 (brute force)
    unit, _ = _lattice(x, workload=name, neighbours=PrivacyUnit("user", max_rows=3))
    best = max(int(np.sum((b @ np.array(v)) ** 2)) for v in itertools.product(range(4), repeat=m) if sum(v) <= 3)
    assert unit.params["sensitivity_squared"] == best == 9 * max(cols)
    for r in (rel, rep, unit):
        s = r.params["sensitivity"]
        assert Fraction(s) ** 2 >= r.params["sensitivity_squared"] > Fraction(math.nextafter(s, 0)) ** 2
        # sigma: the smallest float with sens² / (2 sigma²) <= rho
        assert Fraction(s) ** 2 <= 2 * Fraction(1.0) * Fraction(r.params["scale"]) ** 2


def test_lattice_sensitivity_2d_is_the_kronecker_product():
    x = np.arange(12).reshape(3, 4)
    rel = strategy_histogram(x, rho=1.0, rng=deterministic_source(0))
    b1, b2 = rel.parts["strategy"]
    kron = np.kron(b1, b2)
    assert rel.params["sensitivity_squared"] == int(np.max(np.sum(kron * kron, axis=0)))
    rep = strategy_histogram(x, rho=1.0, neighbours=Replace(), rng=deterministic_source(0))
    assert rep.params["sensitivity_squared"] == 4 * rel.params["sensitivity_squared"]   # the stated bound 2Δ
    # the measurement is B1 X B2ᵀ + Z and least squares inverts it exactly without noise
    y = rel.parts["measurements"]
    assert y.shape == (3, 4)
    assert np.allclose(np.linalg.solve(b1, np.linalg.solve(b2, (y - b1 @ x @ b2.T).T).T), rel.value - x, atol=1e-6)


def _privacy_loss_bound(b, x, x2, sigma, alpha):
    """D_alpha of the product of discrete Gaussians N_Z(Bx, sigma²) vs N_Z(Bx', sigma²), computed per coordinate in
    log space: D = α s²/(2σ²) + log(Σ_y e^{-(y-c)²/2σ²} / Σ_y e^{-y²/2σ²}) / (α - 1), c = (1 - α) s."""
    shift = b @ (np.asarray(x) - np.asarray(x2))
    total = 0.0
    for s in shift.tolist():
        c = (1 - alpha) * s
        y0 = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3, dtype=np.float64)
        yc = y0 + math.floor(c)
        ratio = logsumexp(-((yc - c) ** 2) / (2 * sigma**2)) - logsumexp(-(y0**2) / (2 * sigma**2))
        total += alpha * s * s / (2 * sigma**2) + ratio / (alpha - 1)
    return total


@pytest.mark.parametrize("nb", [None, Replace(), PrivacyUnit("user", max_rows=2)])
def test_privacy_renyi_divergence_is_at_most_alpha_rho(nb):
    # a huge rho makes sigma ~ 1.5, where the discrete law differs from the continuous one (the test is not vacuous)
    m, x = 5, [3, 0, 2, 1, 4]
    rel0 = strategy_histogram(x, rho=1.0, rng=deterministic_source(0))
    rho = rel0.params["sensitivity_squared"] / 4.5 * (1 if nb is None else 4)
    rel = strategy_histogram(x, rho=rho, neighbours=nb, rng=deterministic_source(0))
    b, sigma = np.asarray(rel.parts["strategy"]), rel.params["scale"]
    assert sigma < 3
    k = 1 if nb is None or isinstance(nb, Replace) else 2
    moves = []
    for j in range(m):
        for i in range(m):
            v = [0] * m
            if isinstance(nb, Replace):
                if i == j:
                    continue
                v[j] += 1
                v[i] -= 1
            else:
                if i != j and k == 1:
                    continue
                v[j] += k if i == j else 1
                if i != j:
                    v[i] += 1
            moves.append(v)
    worst = 0.0
    for v in moves:
        x2 = [a + d for a, d in zip(x, v, strict=True)]
        if min(x2) < 0:
            continue
        # exact: integer α gives exactly α ||B v||² / (2σ²); check it in rationals against α rho
        sq = int(np.sum((b @ np.array(v)) ** 2))
        assert Fraction(sq) / (2 * Fraction(sigma) ** 2) <= Fraction(rho)
        worst = max(worst, sq)
        for alpha in (1.5, 2.0, 3.7, 10.0):
            for a, c in ((x, x2), (x2, x)):
                assert _privacy_loss_bound(b, a, c, sigma, alpha) <= alpha * rho * (1 + 1e-12)
    assert worst == rel.params["sensitivity_squared"]   # the declared sensitivity is attained


def test_distribution_of_decoded_errors_matches_the_exact_expectation():
    # sigma ~ 2.4 (rho large): Var(Z) is the discrete Gaussian's, summed exactly; n draws with fixed seeds
    x = np.array([5, 0, 3, 8, 1, 2, 7, 4])
    m, n = x.size, 4000
    base = strategy_histogram(x, rho=1.0, rng=deterministic_source(0))
    rho = base.params["sensitivity_squared"] / (2 * 2.4**2)
    errs = np.array([strategy_histogram(x, rho=rho, rng=deterministic_source(10_000 + i)).value - x
                     for i in range(n)])
    rel = strategy_histogram(x, rho=rho, rng=deterministic_source(1))
    sigma, b = rel.params["scale"], np.asarray(rel.parts["strategy"], dtype=np.float64)
    var = st._dgauss_variance(sigma)
    assert var < sigma**2
    binv = np.linalg.inv(b)
    g = range_gram(all_ranges(m), m)
    # (1) the total squared error over all ranges: mean over draws vs the exact expectation
    tse = np.einsum("ij,jk,ik->i", errs, g, errs)
    expected = rel.params["expected_total_squared_error"]
    mq = binv.T @ g @ binv
    assert expected == pytest.approx(var * np.trace(mq), rel=1e-9)
    sd = math.sqrt(2 * var * var * np.trace(mq @ mq) / n)        # Gaussian fourth moments (sigma = 2.4: within 1e-6)
    z = (tse.mean() - expected) / sd
    assert abs(z) < 5.5                                            # two-sided p < 4e-8 under the CLT
    assert abs(tse.mean() - 4 * expected) / (4 * sd) > 50          # a 2x wrong sigma (4x variance) is caught
    assert abs(tse.mean() - expected / 4) / (sd / 4) > 50          # and a 2x too small one
    # (2) each bin's error: mean 0 and variance var ||row_j(B⁻¹)||² (chi-square, Bonferroni over bins)
    v = var * np.sum(binv * binv, axis=1)
    lo, hi = stats.chi2.ppf(5e-8, n - 1), stats.chi2.isf(5e-8, n - 1)
    for j in range(m):
        e = errs[:, j]
        assert abs(e.mean()) / math.sqrt(v[j] / n) < 5.5
        q = (n - 1) * e.var(ddof=1) / v[j]
        assert lo < q < hi
        assert not lo < (n - 1) * e.var(ddof=1) / (4 * v[j]) < hi     # 2x sigma rejected
    # (3) the per-bin interval covers at its confidence (sub-Gaussian tail: conservative, about 98.6% here)
    lo_, hi_ = rel.interval(0.9)
    half = (hi_ - lo_) / 2
    assert np.allclose(half, sigma * np.sqrt(np.sum(binv * binv, axis=1)) * math.sqrt(2 * math.log(20)), rtol=1e-6)
    cover = np.mean(np.abs(errs) <= half[None, :], axis=0)
    assert np.all(cover >= 0.95)


def test_expected_error_at_large_sigma_matches_the_svd_bound_ratio():
    m = 64
    rel = strategy_histogram(np.zeros(m, dtype=int), rho=0.5, rng=deterministic_source(0))
    bound = svd_lower_bound(all_ranges(m), rho=0.5, m=m)
    assert 1.0 < math.sqrt(rel.params["expected_msae"] / bound) < 1.012   # 1.0109 measured (lattice B)
    assert rel.cost == ZCDP(0.5) and rel.params["lattice"] == 2**20


def test_one_charge_before_any_draw_and_refused_budget():
    assert_charges_first(strategy_histogram, ([3, 1, 4, 1, 5, 9, 2, 6],), {"rho": 0.3}, cost=ZCDP(0.3),
                         name="strategy_histogram", budget=ZCDP(0.5))
    assert_charges_first(strategy_histogram, (np.arange(12).reshape(3, 4),), {"rho": 0.3}, cost=ZCDP(0.3),
                         name="strategy_histogram", budget=ZCDP(0.5))


L2_16 = optimize_strategy("all_ranges", 3, norm="l2")
L1_3 = optimize_strategy("all_ranges", 3, p=1)


@pytest.mark.parametrize(("changes", "error", "param"), [
    ({"rho": 0.0}, InvalidParameter, "rho"),
    ({"rho": -1.0}, InvalidParameter, "rho"),
    ({"rho": float("nan")}, InvalidParameter, "rho"),
    ({"rho": float("inf")}, InvalidParameter, "rho"),
    ({"rho": "1"}, WrongType, "rho"),
    ({"rho": 1.0, "epsilon": 1.0}, InvalidParameter, "rho"),
    ({"rho": None}, InvalidParameter, "epsilon"),
    ({"counts": [12345, -2, 3]}, InvalidData, "counts"),
    ({"counts": [2**41, 1, 3]}, InvalidData, "counts"),
    ({"strategy": L1_3}, InvalidParameter, "strategy"),
    ({"strategy": optimize_strategy("all_ranges", 5, norm="l2")}, InvalidParameter, "strategy"),
    ({"strategy": "hdmm"}, WrongType, "strategy"),
    ({"workload": "suffixes"}, InvalidParameter, "workload"),
])
def test_typed_errors_charge_nothing(changes, error, param):
    args = {"counts": REFUSAL_CALL[0], "rho": 1.0, **changes}
    assert_refused_cleanly(strategy_histogram, (args.pop("counts"),), args, error=error, param=param,
                           secrets=REFUSAL_SECRETS, budget=ZCDP(2.0))


def test_laplace_path_refuses_an_l2_strategy_and_2d_rho_refuses_a_grid_strategy():
    assert_refused_cleanly(strategy_histogram, (REFUSAL_CALL[0], 1.0), {"strategy": L2_16}, error=InvalidParameter,
                           param="strategy", secrets=REFUSAL_SECRETS, budget=ZCDP(2.0))
    grid = optimize_strategy("all_ranges", (2, 2))
    assert_refused_cleanly(strategy_histogram, ([[1, 2], [3, 4]],), {"rho": 1.0, "strategy": grid},
                           error=InvalidParameter, param="strategy", secrets=REFUSAL_SECRETS, budget=ZCDP(2.0))


def test_refusal_draws_nothing_and_spends_nothing():
    acct = Accountant(ZCDP(1.0))
    src = CountingSource(1)
    with pytest.raises(InvalidParameter):
        strategy_histogram([1, 2, 3], 1.0, rho=0.5, accountant=acct, rng=src)
    assert src.consumed == 0 and not acct.receipts


def test_optimize_strategy_l2_typed_errors():
    with pytest.raises(InvalidParameter) as e:
        optimize_strategy("all_ranges", 8, norm="l2", p=2)
    assert e.value.param == "p"
    with pytest.raises(InvalidParameter) as e:
        optimize_strategy("all_ranges", (4, 4), norm="l2")
    assert e.value.param == "m"
    with pytest.raises(InvalidParameter) as e:
        optimize_strategy("all_ranges", 8, norm="l3")
    assert e.value.param == "norm"
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(InvalidParameter) as e:
            optimize_strategy("all_ranges", 8, norm="l2", tol=bad)
        assert e.value.param == "tol"


def test_svd_lower_bound_rho():
    m = 16
    r = all_ranges(m)
    # Laplace: c = 2/eps²; zCDP: c = 1/(2 rho), so at rho = eps²/2 the zCDP bound is half the Laplace one
    assert svd_lower_bound(r, rho=0.5, m=m) == pytest.approx(svd_lower_bound(r, 1.0, m=m) / 2, rel=1e-12)
    bad = (({}, "epsilon"), ({"epsilon": 1.0, "rho": 1.0}, "rho"), ({"rho": 1.0, "delta": 1e-6}, "delta"),
           ({"rho": 0.0}, "rho"))
    for kwargs, param in bad:
        with pytest.raises(InvalidParameter) as e:
            svd_lower_bound(r, m=m, **kwargs)
        assert e.value.param == param


def test_2d_kronecker_error_is_the_product_of_the_1d_errors():
    m1, m2 = 6, 10
    rel = strategy_histogram(np.zeros((m1, m2), dtype=int), rho=0.5, rng=deterministic_source(0))
    one = [strategy_histogram(np.zeros(mi, dtype=int), rho=0.5, rng=deterministic_source(0)) for mi in (m1, m2)]
    # the per-query error factorises up to the noise variance: sigma² of the product lattice over the 1-D ones
    f = [r.params["expected_total_squared_error"] / r.params["scale"] ** 2 for r in (rel, *one)]
    b1, b2 = rel.parts["strategy"]
    g1, g2 = _gram("all_ranges", m1), _gram("all_ranges", m2)
    f1 = np.trace(g1 @ np.linalg.inv(b1.T @ b1.astype(float)))
    f2 = np.trace(g2 @ np.linalg.inv(b2.T @ b2.astype(float)))
    assert f[0] == pytest.approx(f1 * f2, rel=1e-8)
    # ratio to the 2-D SVD bound (the product of the 1-D bounds) is the product of the 1-D ratios (2^12 lattice)
    bound = svd_lower_bound((all_ranges(m1), all_ranges(m2)), rho=0.5, m=(m1, m2))
    ratio = rel.params["expected_msae"] / bound
    ratios = [r.params["expected_msae"] / svd_lower_bound(all_ranges(mi), rho=0.5, m=mi) for r, mi in zip(one, (m1, m2),
                                                                                                     strict=True)]
    assert ratio == pytest.approx(ratios[0] * ratios[1], rel=1e-3)
    assert f[1] > 0 and f[2] > 0
