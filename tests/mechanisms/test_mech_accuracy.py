"""Accuracy: half-widths, exact discrete tails, empirical coverage, inverse functions round-trip."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from dpkit.core.errors import InvalidParameter
from dpkit.mechanisms import (
    discrete_gaussian,
    discrete_gaussian_halfwidth,
    discrete_gaussian_rho_for,
    discrete_gaussian_scale,
    discrete_laplace,
    discrete_laplace_epsilon_for,
    discrete_laplace_halfwidth,
    discrete_laplace_scale,
    gaussian,
    gaussian_epsilon_for,
    gaussian_halfwidth,
    gaussian_rho_for,
    gaussian_scale,
    laplace,
    laplace_epsilon_for,
    laplace_halfwidth,
    laplace_scale,
)

Z_MAX = 5.33


def test_continuous_formulas():
    assert laplace_halfwidth(2.0, 0.95) == pytest.approx(2.0 * math.log(20.0))
    assert gaussian_halfwidth(3.0, 0.95) == pytest.approx(3.0 * 1.959963984540054)
    # Šidák for simultaneous coverage
    beta = 1 - (1 - 0.05) ** (1 / 10)
    assert laplace_halfwidth(1.0, 0.95, coords=10, simultaneous=True) == pytest.approx(math.log(1 / beta))
    assert laplace_halfwidth(1.0, 0.95, coords=10) == pytest.approx(math.log(20.0))


def test_lattice_halfwidth_close_to_continuous():
    g, b = laplace_scale(1.0, 0.5)
    h = laplace_halfwidth(b, 0.9, granularity=g)
    assert abs(h - b * math.log(10.0)) < 3 * g
    g, s = gaussian_scale(1.0, rho=0.5)
    h = gaussian_halfwidth(s, 0.9, granularity=g)
    assert abs(h - s * -special.ndtri(0.05)) < 3 * g


def _dlap_pmf(ks, t):
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(ks)


def _dgauss_pmf(ks, s):
    allk = np.arange(-int(60 * s) - 10, int(60 * s) + 11)
    norm = np.exp(-(allk.astype(float) ** 2) / (2 * s * s)).sum()
    return np.exp(-(np.asarray(ks, dtype=float) ** 2) / (2 * s * s)) / norm


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5, 17.0])
@pytest.mark.parametrize("conf", [0.5, 0.9, 0.99])
def test_discrete_laplace_halfwidth_exact_and_minimal(t, conf):
    k = discrete_laplace_halfwidth(t, conf)
    ks = np.arange(-k, k + 1)
    assert _dlap_pmf(ks, t).sum() >= conf - 1e-12
    if k > 0:
        assert _dlap_pmf(ks[1:-1], t).sum() < conf


@pytest.mark.parametrize("s", [0.4, 1.0, 3.3, 20.0])
@pytest.mark.parametrize("conf", [0.5, 0.95, 0.999])
def test_discrete_gaussian_halfwidth_exact_and_minimal(s, conf):
    k = discrete_gaussian_halfwidth(s, conf)
    ks = np.arange(-k, k + 1)
    assert _dgauss_pmf(ks, s).sum() >= conf - 1e-12
    if k > 0:
        assert _dgauss_pmf(ks[1:-1], s).sum() < conf


def _coverage_z(covered: np.ndarray, conf: float) -> float:
    n = covered.size
    return (covered.sum() - n * conf) / math.sqrt(n * conf * (1 - conf))


def test_laplace_interval_coverage(rng):
    n, conf = 100_000, 0.9
    truth = np.linspace(-50, 50, n)
    rel = laplace(truth, 1.0, 1.0, rng=rng)
    lo, hi = rel.interval(conf)
    covered = (lo <= truth) & (truth <= hi)
    assert abs(_coverage_z(covered, conf)) < Z_MAX
    # the wrong (10% narrower) interval is caught
    h = rel.halfwidth(conf) / 1.1
    assert _coverage_z(np.abs(np.asarray(rel.value) - truth) <= h, conf) < -Z_MAX


def test_gaussian_interval_coverage(rng):
    n, conf = 100_000, 0.8
    truth = np.zeros(n)
    rel = gaussian(truth, 1.0, rho=0.5, rng=rng)
    lo, hi = rel.interval(conf)
    assert abs(_coverage_z((lo <= 0) & (0 <= hi), conf)) < Z_MAX


def test_simultaneous_coverage(rng):
    reps, d, conf = 20_000, 8, 0.8
    rel = laplace(np.zeros(reps * d), 1.0, 1.0, rng=rng)
    h = laplace_halfwidth(rel.scale, conf, coords=d, simultaneous=True, granularity=rel.granularity)
    allin = np.all(np.abs(np.asarray(rel.value).reshape(reps, d)) <= h, axis=1)
    assert abs(_coverage_z(allin, conf)) < Z_MAX


def test_discrete_interval_coverage_and_types(rng):
    n, conf = 100_000, 0.9
    rel = discrete_laplace(np.zeros(n, dtype=int), 1, 0.5, rng=rng)
    lo, hi = rel.interval(conf)
    assert lo.dtype == np.int64
    covered = (lo <= 0) & (0 <= hi)
    k = discrete_laplace_halfwidth(rel.scale, conf)
    exact = _dlap_pmf(np.arange(-k, k + 1), rel.scale).sum()  # the exact coverage (>= conf)
    assert abs(_coverage_z(covered, exact)) < Z_MAX
    rel = discrete_gaussian(3, 1, rho=0.5, rng=rng)
    lo, hi = rel.interval()
    assert isinstance(lo, int) and hi - lo == 2 * discrete_gaussian_halfwidth(rel.scale, 0.95)


def test_laplace_epsilon_for_round_trip():
    cases = [(3.0, 1.0, 0.95, 1, False), (0.01, 0.002, 0.99, 4, True), (100.0, 7.0, 0.5, 1, False)]
    for h, sens, conf, d, sim in cases:
        eps = laplace_epsilon_for(h, sens, conf, coords=d, simultaneous=sim)
        g, b = laplace_scale(sens, eps, d)
        assert laplace_halfwidth(b, conf, coords=d, simultaneous=sim, granularity=g) <= h
        g2, b2 = laplace_scale(sens, eps * (1 - 1e-9), d)
        assert laplace_halfwidth(b2, conf, coords=d, simultaneous=sim, granularity=g2) > h  # minimal
        beta = 1 - conf if not sim else 1 - conf ** (1 / d)
        assert eps == pytest.approx(sens * math.log(1 / beta) / h, rel=1e-4)


def test_gaussian_rho_for_round_trip():
    for h, sens, conf in [(3.0, 1.0, 0.95), (0.5, 2.0, 0.9)]:
        rho = gaussian_rho_for(h, sens, conf)
        g, s = gaussian_scale(sens, rho=rho)
        assert gaussian_halfwidth(s, conf, granularity=g) <= h
        g2, s2 = gaussian_scale(sens, rho=rho * (1 - 1e-9))
        assert gaussian_halfwidth(s2, conf, granularity=g2) > h
        z = -special.ndtri((1 - conf) / 2)
        assert rho == pytest.approx((sens * z / h) ** 2 / 2, rel=1e-4)


def test_gaussian_epsilon_for_round_trip():
    for method in ("analytic", "classic"):
        eps = gaussian_epsilon_for(20.0, 1.0, 1e-5, 0.95, method=method)
        g, s = gaussian_scale(1.0, epsilon=eps, delta=1e-5, method=method)
        assert gaussian_halfwidth(s, 0.95, granularity=g) <= 20.0
        g2, s2 = gaussian_scale(1.0, epsilon=eps * (1 - 1e-9), delta=1e-5, method=method)
        assert gaussian_halfwidth(s2, 0.95, granularity=g2) > 20.0
    with pytest.raises(InvalidParameter) as info:
        gaussian_epsilon_for(0.5, 1.0, 1e-5, 0.95, method="classic")  # would need epsilon >= 1
    assert info.value.param == "halfwidth"


def test_discrete_inverses_round_trip():
    eps = discrete_laplace_epsilon_for(10, 1, 0.9)
    assert discrete_laplace_halfwidth(discrete_laplace_scale(1, eps), 0.9) <= 10
    assert discrete_laplace_halfwidth(discrete_laplace_scale(1, eps * (1 - 1e-9)), 0.9) > 10
    rho = discrete_gaussian_rho_for(5, 1, 0.95)
    assert discrete_gaussian_halfwidth(discrete_gaussian_scale(1, rho=rho), 0.95) <= 5
    assert discrete_gaussian_halfwidth(discrete_gaussian_scale(1, rho=rho * (1 - 1e-9)), 0.95) > 5


def test_accuracy_validation():
    from dpkit.core.errors import WrongType

    with pytest.raises(InvalidParameter) as info:
        laplace_halfwidth(1.0, 1.5)
    assert info.value.param == "confidence"
    with pytest.raises(InvalidParameter):
        laplace_halfwidth(-1.0)
    with pytest.raises(InvalidParameter):
        gaussian_rho_for(0.0, 1.0)
    with pytest.raises(WrongType):
        gaussian_halfwidth(1.0, 0.9, simultaneous="yes")
