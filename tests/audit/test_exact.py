"""Tests of the exact, log-space privacy-loss calculator (dpkit.audit.exact)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from dpkit.audit import (
    DiscreteGaussian,
    DiscreteLaplace,
    FiniteSet,
    Gaussian,
    HalfLine,
    Interval,
    Laplace,
    Lattice,
    Point,
    Truncated,
    log_integral,
    log_prob,
    max_privacy_loss,
    privacy_loss,
)
from dpkit.audit.exact import log1mexp
from dpkit.core.errors import InvalidParameter, WrongType

# ---------------------------------------------------------------------------------------------
# laws
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [-30.0, -3.0, -0.5, 0.0, 0.7, 4.0, 25.0])
def test_laplace_matches_scipy(x):
    law, ref = Laplace(0.5, 2.0), stats.laplace(0.5, 2.0)
    assert law.logpdf(x) == pytest.approx(ref.logpdf(x), rel=1e-12, abs=1e-12)
    assert law.logcdf(x) == pytest.approx(ref.logcdf(x), rel=1e-10, abs=1e-14)
    assert law.logsf(x) == pytest.approx(ref.logsf(x), rel=1e-10, abs=1e-14)


def test_laplace_tails_do_not_underflow():
    law = Laplace(0.0, 1.0)
    assert law.logsf(2000.0) == pytest.approx(math.log(0.5) - 2000.0)
    assert law.logcdf(-2000.0) == pytest.approx(math.log(0.5) - 2000.0)
    assert law.logcdf(2000.0) == 0.0 or abs(law.logcdf(2000.0)) < 1e-300


@pytest.mark.parametrize("x", [-40.0, -3.0, 0.0, 1.5, 40.0])
def test_gaussian_matches_scipy(x):
    law, ref = Gaussian(1.0, 3.0), stats.norm(1.0, 3.0)
    assert law.logpdf(x) == pytest.approx(ref.logpdf(x), rel=1e-12)
    assert law.logcdf(x) == pytest.approx(ref.logcdf(x), rel=1e-10, abs=1e-14)
    assert law.logsf(x) == pytest.approx(ref.logsf(x), rel=1e-10, abs=1e-14)


def test_gaussian_far_tail():
    # P[N(0,1) > 40] ~ 3.7e-350: below the smallest double, fine in log space
    assert log_prob(Gaussian(0.0, 1.0), HalfLine(40.0, ">")) == pytest.approx(float(special.log_ndtr(-40.0)))
    assert log_prob(Gaussian(0.0, 1.0), HalfLine(40.0, ">")) < -800


@pytest.mark.parametrize("scale", [0.3, 1.0, 7.5])
def test_discrete_laplace_is_a_normalised_pmf_with_matching_tails(scale):
    law = DiscreteLaplace(3, scale)
    k = np.arange(3 - 400, 3 + 401)
    lp = law.logpmf(k)
    assert special.logsumexp(lp) == pytest.approx(0.0, abs=1e-12)
    cdf = np.logaddexp.accumulate(lp)
    for j in (-20, 0, 2, 3, 4, 10, 30):
        i = j - k[0]
        assert law.logcdf(j) == pytest.approx(cdf[i], abs=1e-12)
        assert law.logcdf(j + 0.5) == pytest.approx(cdf[i], abs=1e-12)
        assert law.logsf(j) == pytest.approx(special.logsumexp(lp[i + 1:]), abs=1e-10)
    assert law.logpmf(3.5) == -math.inf
    # strict and non-strict half-lines on an integer law
    assert log_prob(law, HalfLine(5, "<")) == pytest.approx(law.logcdf(4))
    assert log_prob(law, HalfLine(5, ">=")) == pytest.approx(law.logsf(4))


def test_discrete_laplace_far_tail_is_closed_form():
    law = DiscreteLaplace(0, 1.0)
    q = math.exp(-1.0)
    assert law.logsf(999) == pytest.approx(-1000.0 - math.log1p(q))
    assert law.logcdf(-1000) == pytest.approx(-1000.0 - math.log1p(q))


@pytest.mark.parametrize("sigma", [0.2, 1.0, 5.0, 150.0])
def test_discrete_gaussian_is_a_normalised_pmf(sigma):
    law = DiscreteGaussian(-2, sigma)
    r = int(60 * sigma) + 10
    k = np.arange(-2 - r, -2 + r + 1)
    lp = law.logpmf(k)
    assert special.logsumexp(lp) == pytest.approx(0.0, abs=1e-12)
    cdf = np.logaddexp.accumulate(lp)
    for j in (-2 - r // 3, -3, -2, 0, -2 + r // 3):
        assert law.logcdf(j) == pytest.approx(cdf[j - k[0]], abs=1e-11)


def test_discrete_gaussian_large_sigma_uses_accurate_formulas():
    sigma = 3000.0  # beyond the direct-sum range: Jacobi theta + Euler–Maclaurin
    law = DiscreteGaussian(0, sigma)
    k = np.arange(0, int(60 * sigma), dtype=np.float64)
    logw = -(k * k) / (2 * sigma * sigma)
    lognorm = np.logaddexp(special.logsumexp(logw), special.logsumexp(logw[1:]))
    for m in (0, 1, 500, 3000, 9000, 9001, 20000, 90000, 130000):
        brute = special.logsumexp(logw[m:]) - lognorm
        assert law.logsf(m - 1) == pytest.approx(brute, rel=1e-9, abs=1e-12)
    assert law.logpmf(7) == pytest.approx(-49 / (2 * sigma**2) - lognorm, abs=1e-12)


def test_discrete_gaussian_tail_beyond_the_table():
    sigma = 500.0  # table up to 40 sigma = 20000; check 20000 .. 60000 against brute force
    law = DiscreteGaussian(0, sigma)
    k = np.arange(0, 200_000, dtype=np.float64)
    logw = -(k * k) / (2 * sigma * sigma)
    lognorm = np.logaddexp(special.logsumexp(logw), special.logsumexp(logw[1:]))
    for m in (19_999, 20_002, 20_003, 25_000, 60_000):
        assert law.logsf(m - 1) == pytest.approx(special.logsumexp(logw[m:]) - lognorm, rel=1e-12)


def test_lattice_law():
    g = 0.25
    law = Lattice(DiscreteLaplace(0, 4.0), g, offset=1.0)  # 1 + 0.25 K, K ~ DLap(4)
    assert law.logpmf(1.5) == pytest.approx(DiscreteLaplace(0, 4.0).logpmf(2))
    assert law.logpmf(1.6) == -math.inf
    # an interval's mass is the sum of the lattice masses inside it
    pts = 1.0 + g * np.arange(-3, 5)  # 0.25 .. 2.0
    want = special.logsumexp(law.logpmf(pts))
    assert log_prob(law, Interval(0.25, 2.0)) == pytest.approx(want, abs=1e-12)
    assert log_prob(law, Interval(0.2, 2.1)) == pytest.approx(want, abs=1e-12)
    assert log_prob(law, Interval(0.25, 2.0, lo_closed=False)) == pytest.approx(
        special.logsumexp(law.logpmf(pts[1:])), abs=1e-12)
    assert log_prob(law, FiniteSet((0.25, 2.0, 0.3))) == pytest.approx(
        np.logaddexp(law.logpmf(0.25), law.logpmf(2.0)), abs=1e-12)
    # lattice Laplace mechanism: sensitivity 1 (4 lattice steps), scale 4 steps -> eps = 1 exactly
    d, d_prime = Lattice(DiscreteLaplace(0, 4.0), g), Lattice(DiscreteLaplace(4, 4.0), g)
    worst = max_privacy_loss(d, d_prime, grid=g * np.arange(-40, 41))
    assert worst.loss == pytest.approx(1.0, abs=1e-12)


def test_scipy_frozen_distributions_are_laws():
    assert privacy_loss(stats.norm(0, 1), stats.norm(1, 1), Point(0.0)) == pytest.approx(0.5)
    assert privacy_loss(stats.poisson(3), stats.poisson(4), FiniteSet((0, 1))) == pytest.approx(
        math.log(stats.poisson(3).cdf(1) / stats.poisson(4).cdf(1)))
    assert log_prob(stats.poisson(3), HalfLine(2, "<")) == pytest.approx(math.log(stats.poisson(3).cdf(1)))


def test_truncated_law_is_normalised():
    law = Truncated(Laplace(0.3, 0.5), -1.0, 1.0)
    z, _ = __import__("scipy").integrate.quad(lambda t: math.exp(law.logpdf(t)), -1.0, 1.0, points=[0.3])
    assert z == pytest.approx(1.0, rel=1e-10)
    assert law.logpdf(1.5) == -math.inf
    assert law.logcdf(1.0) == 0.0
    assert law.logsf(-1.0) == 0.0
    assert law.logcdf(0.3) == pytest.approx(math.log(0.5 * (1 - math.exp(-1.3 / 0.5)) / (
        0.5 * (1 - math.exp(-1.3 / 0.5)) + 0.5 * (1 - math.exp(-0.7 / 0.5)))), rel=1e-10)


# ---------------------------------------------------------------------------------------------
# privacy losses
# ---------------------------------------------------------------------------------------------


def test_laplace_mechanism_loss_is_exactly_epsilon():
    eps = 0.7
    d, d_prime = Laplace(0.0, 1.0 / eps), Laplace(1.0, 1.0 / eps)
    worst = max_privacy_loss(d, d_prime, grid=np.linspace(-50, 50, 201))
    assert worst.loss == pytest.approx(eps, abs=1e-12)
    # deep in the tail, where exp() underflows, the loss is still exact
    assert privacy_loss(d, d_prime, HalfLine(-1500.0, "<=")) == pytest.approx(eps, abs=1e-9)
    assert privacy_loss(d, d_prime, HalfLine(1500.0, ">=")) == pytest.approx(-eps, abs=1e-9)


def test_gaussian_loss_grows_in_the_tail():
    d, d_prime = Gaussian(0.0, 1.0), Gaussian(1.0, 1.0)
    # density ratio at x is exp(1/2 - x): unbounded, computed without underflow at x = -45
    assert privacy_loss(d, d_prime, Point(-45.0)) == pytest.approx(45.5, rel=1e-12)
    assert privacy_loss(d, d_prime, HalfLine(-45.0, "<=")) > 44.0


def test_discrete_laplace_loss():
    d, d_prime = DiscreteLaplace(0, 2.0), DiscreteLaplace(1, 2.0)
    worst = max_privacy_loss(d, d_prime, grid=np.arange(-30, 31))
    assert worst.loss == pytest.approx(0.5, abs=1e-12)


def test_infinite_and_undefined_losses():
    d = Truncated(Laplace(0.0, 1.0), -1.0, 0.0)
    d_prime = Truncated(Laplace(0.0, 1.0), 0.5, 1.0)
    assert privacy_loss(d, d_prime, Interval(-1.0, 0.0)) == math.inf
    assert privacy_loss(d_prime, d, Interval(-1.0, 0.0)) == -math.inf
    assert math.isnan(privacy_loss(d, d_prime, Interval(2.0, 3.0)))
    worst = max_privacy_loss(d, d_prime, [Interval(2.0, 3.0), Interval(0.6, 0.7)])
    assert worst.loss == math.inf and worst.direction == "D'/D"


def test_interval_in_the_bulk_and_in_both_tails():
    law = Gaussian(0.0, 1.0)
    assert math.exp(log_prob(law, Interval(-1.0, 1.0))) == pytest.approx(
        stats.norm.cdf(1) - stats.norm.cdf(-1), rel=1e-12)
    assert log_prob(law, Interval(50.0, 51.0)) == pytest.approx(
        float(special.log_ndtr(-50.0)) + log1mexp(float(special.log_ndtr(-51.0) - special.log_ndtr(-50.0))))
    assert log_prob(law, Interval(-51.0, -50.0)) == pytest.approx(log_prob(law, Interval(50.0, 51.0)))
    assert log_prob(law, Interval(1.0, 1.0)) == -math.inf
    assert log_prob(law, Interval(-math.inf, math.inf)) == pytest.approx(0.0, abs=1e-15)


def test_pinq_resampling_average_exact_value():
    """Li et al. Alg 2 on D = 30 x {-1}, D' = D + {+1}, range [-1, 1], eps = 1.

    The output law of "A = (S + Lap(2/eps)) / C, resampled until A in [-1, 1]" is the Laplace law
    Lap(S/C, 2/(eps C)) conditioned on [-1, 1]. The log density ratio at output -1 is 1.457 > eps.
    """
    eps, n = 1.0, 30
    d = Truncated(Laplace(-n / n, 2.0 / (eps * n)), -1.0, 1.0)
    d_prime = Truncated(Laplace((-n + 1.0) / (n + 1), 2.0 / (eps * (n + 1))), -1.0, 1.0)
    loss = privacy_loss(d, d_prime, Point(-1.0))
    assert loss == pytest.approx(1.457, abs=1e-3)
    # closed form: ln(30/31) + 1 + ln((1 - e^{-1}/2 - e^{-30}/2) / ((1 - e^{-30}) / 2))
    closed = math.log(30 / 31) + 1 + math.log((1 - 0.5 * math.exp(-1) - 0.5 * math.exp(-30)) /
                                             (0.5 * (1 - math.exp(-30))))
    assert loss == pytest.approx(closed, rel=1e-12)
    # the worst event over a grid is that point
    assert max_privacy_loss(d, d_prime, grid=np.linspace(-1, 1, 81)).loss == pytest.approx(closed, rel=1e-12)


def test_pinq_book_counterexample_pair_is_not_a_violation():
    """[book-error]: for D = {-1}, D' = {-1, 1} the density ratio at -1 is exactly e^eps, not 2 e^eps."""
    eps = 1.0
    d = Truncated(Laplace(-1.0, 2.0 / eps), -1.0, 1.0)
    d_prime = Truncated(Laplace(0.0, 2.0 / (2 * eps)), -1.0, 1.0)
    assert privacy_loss(d, d_prime, Point(-1.0)) == pytest.approx(eps, abs=1e-12)


# ---------------------------------------------------------------------------------------------
# log-space quadrature and the sparse-vector counterexamples (Lyu, Su & Li)
# ---------------------------------------------------------------------------------------------


def test_log_integral_basic():
    # a Gaussian bump far away and far below exp's range
    lf = lambda z: -0.5 * (np.asarray(z) - 1e4) ** 2 - 1e5
    assert log_integral(lf, scale=1.0) == pytest.approx(0.5 * math.log(2 * math.pi) - 1e5, rel=1e-12)
    assert log_integral(lf, -math.inf, 0.0) == -math.inf or log_integral(lf, -math.inf, 0.0) < -1e5 - 1e6
    assert log_integral(lambda z: 0.0, 0.0, 3.0) == pytest.approx(math.log(3.0))
    assert log_integral(lambda z: -math.inf, 0.0, 1.0) == -math.inf
    # a product of many cdf terms: int_{-inf}^{0} rho(z) F(z)^m dz for Laplace laws, closed form
    rho, nu, m = Laplace(0.0, 2.0), Laplace(0.0, 2.0), 300
    got = log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z), -math.inf, 0.0)
    # (1/4) 2^-m int_{-inf}^0 e^{z/2 (m + 1)} dz = (1/4) 2^-m 2/(m+1)
    assert got == pytest.approx(math.log(0.25) - m * math.log(2) + math.log(2 / (m + 1)), rel=1e-10)


def _svt_laws(eps1_scale: float, nu_scale: float):
    return Laplace(0.0, eps1_scale), Laplace(0.0, nu_scale)


def test_svt_alg5_infinite_ratio():
    """Alg 5 (no query noise): q(D) = (0, 1), q(D') = (1, 0), T = 0, output (⊥, ⊤); rho ~ Lap(2)."""
    rho = Laplace(0.0, 2.0)

    def log_f(q):
        # ⊥ on q1: q1 < rho; ⊤ on q2: q2 >= rho
        return lambda z: rho.logpdf(z) + np.where(np.asarray(z) > q[0], 0.0, -np.inf) + np.where(
            q[1] >= np.asarray(z), 0.0, -np.inf)

    p_d = log_integral(log_f((0.0, 1.0)), points=[0.0, 1.0])
    p_dp = log_integral(log_f((1.0, 0.0)), points=[0.0, 1.0])
    assert math.exp(p_d) == pytest.approx(0.5 * (1 - math.exp(-0.5)), rel=1e-9)  # 0.1967
    assert round(math.exp(p_d), 4) == 0.1967
    assert p_dp == -math.inf
    assert p_d - p_dp == math.inf


@pytest.mark.parametrize(("m", "expected"), [(5, 2.000), (20, 9.500)])
def test_svt_alg3_ratio(m, expected):
    """Alg 3 (outputs the noisy value): c = 1, T = 0, eps = 1, rho ~ Lap(2), nu ~ Lap(2);
    q(D) = 0^m 1, q(D') = 1^m 0, output ⊥^m then the value 0. Ln ratio (m - 1) eps / 2."""
    rho, nu = _svt_laws(2.0, 2.0)
    # the value 0 is output when q + nu = 0, with the ⊤ condition 0 >= rho: integrate rho over z <= 0
    log_d = nu.logpdf(-1.0) + log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z), -math.inf, 0.0)
    log_dp = nu.logpdf(0.0) + log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z - 1.0), -math.inf, 0.0)
    assert log_d - log_dp == pytest.approx(expected, abs=5e-4)
    assert log_d - log_dp == pytest.approx((m - 1) / 2, rel=1e-9)


@pytest.mark.parametrize(("m", "expected"), [(1, 0.82), (2, 1.70), (4, 3.55), (8, 7.35), (16, 15.1), (64, 62.6)])
def test_svt_alg6_ratio(m, expected):
    """Alg 6 (GPTT): rho ~ Lap(2), nu ~ Lap(2); q(D) = 0^{2m}, q(D') = 1^m (-1)^m, output ⊥^m ⊤^m."""
    rho, nu = _svt_laws(2.0, 2.0)
    log_d = log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z) + m * nu.logsf(z), points=[0.0])
    log_dp = log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z - 1) + m * nu.logsf(z + 1), points=[-1, 0, 1])
    assert log_d - log_dp == pytest.approx(expected, abs=0.01 if expected < 10 else 0.1)


@pytest.mark.parametrize(("c", "expected"), [(1, 1.75), (4, 6.25)])
def test_svt_alg4_tight_value_in_log_space(c, expected):
    """Alg 4 (Lee–Clifton): eps1 = 1/4, rho ~ Lap(4), nu ~ Lap(4/3), m = 64;
    q(D) = 0^{m+c}, q(D') = 1^m (-1)^c, output ⊥^m ⊤^c: ln ratio -> (1 + 6c)/4 (plain quadrature: 6.43)."""
    m = 64
    rho, nu = _svt_laws(4.0, 4.0 / 3.0)
    log_d = log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z) + c * nu.logsf(z), points=[0.0])
    log_dp = log_integral(lambda z: rho.logpdf(z) + m * nu.logcdf(z - 1) + c * nu.logsf(z + 1), points=[-1, 0, 1])
    assert log_d - log_dp == pytest.approx(expected, abs=1e-6)


def test_log_integral_accepts_scalar_only_functions():
    rho = Laplace(0.0, 1.0)

    def scalar_only(z: float) -> float:
        if not isinstance(z, float):
            raise TypeError("scalar only")
        return rho.logpdf(z)

    assert log_integral(scalar_only) == pytest.approx(0.0, abs=1e-9)


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


def test_bad_input_names_the_parameter():
    with pytest.raises(InvalidParameter) as e:
        Laplace(0.0, 0.0)
    assert e.value.param == "scale"
    with pytest.raises(InvalidParameter) as e:
        Gaussian(0.0, -1.0)
    assert e.value.param == "sigma"
    with pytest.raises(InvalidParameter) as e:
        DiscreteLaplace(0.5, 1.0)
    assert e.value.param == "loc"
    with pytest.raises(WrongType) as e:
        Lattice(Laplace(0.0, 1.0), 0.5)
    assert e.value.param == "base"
    with pytest.raises(InvalidParameter) as e:
        Truncated(Laplace(0.0, 1.0), 1.0, -1.0)
    assert e.value.param == "lo"
    with pytest.raises(InvalidParameter) as e:
        HalfLine(0.0, "=>")
    assert e.value.param == "side"
    with pytest.raises(InvalidParameter) as e:
        log_prob(Laplace(0.0, 1.0), FiniteSet((1.0,)))
    assert e.value.param == "event"
    with pytest.raises(WrongType) as e:
        log_prob(Laplace(0.0, 1.0), "x <= 1")
    assert e.value.param == "event"
    with pytest.raises(WrongType) as e:
        log_prob(object(), Point(0.0))
    assert e.value.param == "law"
    with pytest.raises(InvalidParameter) as e:
        max_privacy_loss(Laplace(0.0, 1.0), Laplace(1.0, 1.0))
    assert e.value.param == "events"
    with pytest.raises(InvalidParameter) as e:
        log_integral(lambda z: 0.0, 1.0, 0.0)
    assert e.value.param == "a"
    with pytest.raises(InvalidParameter) as e:
        log_integral(lambda z: 0.0, 0.0, 1.0, scale=0.0)
    assert e.value.param == "scale"
