"""Laplace and Gaussian mechanisms: output laws, calibration, exact privacy on the lattice."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit.audit.testing import P_MIN, chi2_pvalue
from dpkit.core import ZCDP, ApproxDP, PureDP, zcdp_to_approx_delta
from dpkit.mechanisms import (
    analytic_gaussian_delta,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
    discrete_gaussian,
    discrete_gaussian_delta,
    discrete_laplace,
    gaussian,
    gaussian_scale,
    laplace,
    laplace_scale,
)
from dpkit.mechanisms.gaussian import _dg_tail_ge
from dpkit.noise import deterministic_source, lattice_granularity

N = 100_000


# ---------------------------------------------------------------------------------------------- laplace
def test_laplace_scale_is_exact_and_slightly_inflated():
    for sens, eps, d in [(1.0, 1.0, 1), (3.7, 0.3, 5), (1e-3, 7.0, 100), (0.1, 0.1, 1)]:
        g, b = laplace_scale(sens, eps, d)
        assert g == lattice_granularity(sens, coords=d)
        assert Fraction(b) * Fraction(eps) >= Fraction(sens) + d * Fraction(g)
        assert b <= sens / eps * (1 + 2.0**-20) * (1 + 1e-15)


def test_laplace_scalar_and_vector_shapes(rng):
    r = laplace(2.5, 1.0, 1.0, rng=rng)
    assert isinstance(r.value, float) and isinstance(float(r), float)
    v = laplace(np.ones((2, 3)), 1.0, 1.0, rng=rng)
    assert v.value.shape == (2, 3) and np.asarray(v).shape == (2, 3)
    assert v.cost == PureDP(1.0) and v.scale == laplace_scale(1.0, 1.0, 6)[1]


def test_laplace_output_law_ks(rng):
    # one vector call gives N iid coordinates of scale b (the L1 sensitivity covers the whole vector)
    rel = laplace(np.full(N, 10.0), 1.0, 1.0, rng=rng)
    noise = rel.value - 10.0
    b = rel.scale
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > P_MIN
    # power: a 10% wrong scale is caught by the same test
    assert stats.kstest(noise, stats.laplace(scale=1.1 * b).cdf).pvalue < P_MIN
    assert stats.kstest(noise, stats.laplace(scale=b / 1.1).cdf).pvalue < P_MIN


def test_laplace_outputs_are_on_the_lattice(rng):
    rel = laplace(np.array([0.3, -7.1, 1e6]), 2.0, 1.0, rng=rng)
    g = rel.granularity
    assert np.all(np.asarray(rel.value) / g == np.rint(np.asarray(rel.value) / g))


def _lattice_shift_units(x: np.ndarray, x2: np.ndarray, g: float) -> float:
    return float(np.sum(np.abs(np.rint(x2 / g) - np.rint(x / g))))


def test_laplace_exact_lattice_privacy_ratio():
    """The exact output pmf ratio between neighbours is <= e^eps, and nearly tight in a worst case."""
    eps = 0.8
    for sens, d in [(1.0 + 2.0**-30, 1), (1.0, 1), (2.5, 3), (1e-4, 1)]:
        g, b = laplace_scale(sens, eps, d)
        t = b / g  # discrete Laplace scale in lattice units: log pmf ratio <= L1 shift / t
        gen = np.random.default_rng(0)
        x = gen.uniform(-5, 5, (5000, d))
        delta = gen.uniform(-1, 1, (5000, d))
        delta *= sens / np.sum(np.abs(delta), axis=1, keepdims=True)
        shifts = np.sum(np.abs(np.rint((x + delta) / g) - np.rint(x / g)), axis=1)
        worst = float(np.max(shifts)) / t
        # adversarial: the rounding moves the two values apart by almost g
        x = np.full(d, 0.5 * g * (1 - 2.0**-20))
        step = np.full(d, sens / d)
        worst = max(worst, _lattice_shift_units(x, x + step, g) / t)
        # exact pmf check over a window of outputs
        a, a2 = 0, int(_lattice_shift_units(x, x + step, g))
        ys = np.concatenate([np.arange(-20, 20), np.arange(a2 - 20, a2 + 20), [-3 * a2, 3 * a2, a2 // 2]])
        lr = (np.abs(ys - a2) - np.abs(ys - a)) / t
        assert np.max(np.abs(lr)) <= eps * (1 + 1e-12)
        assert worst <= eps * (1 + 1e-12)
        if sens == 1.0 + 2.0**-30:
            assert worst >= eps * (1 - 1e-5)  # tight: rounding adds almost a full step


# --------------------------------------------------------------------------------------------- gaussian
def test_analytic_gaussian_known_value():
    sigma = analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    assert sigma == pytest.approx(3.7306, abs=5e-4)  # Balle & Wang 2018
    assert analytic_gaussian_delta(sigma, 1.0, 1.0) <= 1e-5
    assert analytic_gaussian_delta(sigma * (1 - 1e-9), 1.0, 1.0) > 1e-5  # smallest such sigma
    # scale invariance and monotonicity in epsilon
    assert analytic_gaussian_sigma(3.0, 1.0, 1e-5) == pytest.approx(3 * sigma, rel=1e-10)
    assert analytic_gaussian_sigma(1.0, 2.0, 1e-5) < sigma
    # large epsilon works (the classic formula does not apply there)
    s10 = analytic_gaussian_sigma(1.0, 10.0, 1e-6)
    assert analytic_gaussian_delta(s10, 1.0, 10.0) <= 1e-6 and s10 < 1.0


def test_classic_gaussian_formula():
    for eps, delta in [(0.5, 1e-5), (0.9, 1e-3), (0.01, 1e-8)]:
        s = classic_gaussian_sigma(2.0, eps, delta)
        assert s == pytest.approx(2.0 * math.sqrt(2 * math.log(1.25 / delta)) / eps, rel=1e-14)
        assert s >= 2.0 * math.sqrt(2 * math.log(1.25 / delta)) / eps
        assert analytic_gaussian_delta(s, 2.0, eps) <= delta  # classic is conservative


def test_discrete_gaussian_delta_matches_brute_force():
    for s, D, eps in [(1.5, 1, 0.5), (4.0, 3, 1.0), (10.0, 2, 0.2), (0.7, 1, 2.0)]:
        ys = np.arange(-int(80 * s) - 10 * D, int(80 * s) + 10 * D + 1)
        logp = -(ys.astype(float) ** 2) / (2 * s * s)
        logq = -((ys - D).astype(float) ** 2) / (2 * s * s)
        p = np.exp(logp)
        p /= p.sum()
        q = np.exp(logq)
        q /= q.sum()
        brute = np.sum(np.maximum(0.0, p - math.exp(eps) * q))
        assert discrete_gaussian_delta(s, D, eps) == pytest.approx(brute, rel=1e-9, abs=1e-15)


def test_discrete_gaussian_tail_direct_vs_euler_maclaurin():
    import importlib

    G = importlib.import_module("dpkit.mechanisms.gaussian")

    for m in [0, 5, 4096, 9000, 20000]:
        a = _dg_tail_ge(4096.0, m)
        old = G._DIRECT_MAX_S
        try:
            G._DIRECT_MAX_S = 1.0
            b = _dg_tail_ge(4096.0, m)
        finally:
            G._DIRECT_MAX_S = old
        assert a == pytest.approx(b, rel=1e-12, abs=1e-300)


def test_gaussian_eps_delta_scalar_calibration():
    for sens, eps, delta in [(1.0, 1.0, 1e-5), (5.0, 0.3, 1e-7), (0.01, 3.0, 1e-4)]:
        g, sigma = gaussian_scale(sens, epsilon=eps, delta=delta)
        d_units = math.floor(sens / g) + 1
        base = analytic_gaussian_sigma(sens, eps, delta)
        assert base <= sigma <= base * (1 + 4e-6)  # lattice inflation <= 2^-20 (+ discrete check)
        assert discrete_gaussian_delta(sigma / g, d_units, eps) <= delta


def test_gaussian_vector_eps_delta_uses_zcdp_conversion():
    sens, eps, delta, d = 1.0, 1.0, 1e-5, 4
    g, sigma = gaussian_scale(sens, epsilon=eps, delta=delta, coords=d)
    dprime = sens + math.sqrt(d) * g
    assert zcdp_to_approx_delta(dprime**2 / (2 * sigma**2), eps) <= delta
    assert sigma >= analytic_gaussian_sigma(dprime, eps, delta)


def test_gaussian_rho_calibration_is_exact():
    for sens, rho, d in [(1.0, 0.5, 1), (2.0, 0.01, 10), (0.3, 2.0, 1)]:
        g, sigma = gaussian_scale(sens, rho=rho, coords=d)
        dprime = (math.floor(sens / g) + 1) * g if d == 1 else sens + math.sqrt(d) * g
        assert 2 * Fraction(rho) * Fraction(sigma) ** 2 >= Fraction(dprime) ** 2 * (1 - Fraction(1, 10**15))
        assert sigma == pytest.approx(sens / math.sqrt(2 * rho), rel=4e-6)


def test_gaussian_release_fields(rng):
    rel = gaussian(1.0, 1.0, epsilon=1.0, delta=1e-5, rng=rng)
    assert rel.cost == ApproxDP(1.0, 1e-5) and rel.noise == "lattice_gaussian"
    rel = gaussian([1.0, 2.0], 1.0, rho=0.1, rng=rng)
    assert rel.cost == ZCDP(0.1) and rel.value.shape == (2,)
    rel = gaussian(0.0, 1.0, epsilon=0.5, delta=1e-5, method="classic", rng=rng)
    assert rel.scale >= classic_gaussian_sigma(1.0, 0.5, 1e-5)


def test_gaussian_output_law_ks(rng):
    rel = gaussian(np.zeros(N), 1.0, rho=0.5, rng=rng)
    sigma = rel.scale
    noise = np.asarray(rel.value)
    assert stats.kstest(noise, stats.norm(scale=sigma).cdf).pvalue > P_MIN
    assert stats.kstest(noise, stats.norm(scale=1.1 * sigma).cdf).pvalue < P_MIN
    assert stats.kstest(noise, stats.norm(scale=sigma / 1.1).cdf).pvalue < P_MIN


# --------------------------------------------------------------------------------------------- discrete
def _dlap_pmf(ks: np.ndarray, t: float) -> np.ndarray:
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(ks)


def test_discrete_laplace_law_chi2(rng):
    rel = discrete_laplace(np.zeros(N, dtype=int), 2, 1.0, rng=rng)
    t = rel.scale
    assert t == 2.0
    z = np.asarray(rel.value)
    ks = np.arange(-40, 41)
    counts = np.array([np.sum(z == k) for k in ks] + [np.sum(np.abs(z) > 40)])
    probs = np.append(_dlap_pmf(ks, t), 0.0)
    probs[-1] = 1 - probs[:-1].sum()
    assert chi2_pvalue(counts, probs) > P_MIN
    wrong = np.append(_dlap_pmf(ks, 1.1 * t), 0.0)
    wrong[-1] = 1 - wrong[:-1].sum()
    assert chi2_pvalue(counts, wrong) < P_MIN


def test_discrete_laplace_scalar_int(rng):
    rel = discrete_laplace(7, 1, 1.0, rng=rng)
    assert isinstance(rel.value, int) and isinstance(int(rel), int)
    rel = discrete_laplace(np.array([1, 2, 3]), 3, 0.5, rng=rng)
    assert rel.value.dtype == np.int64 and rel.scale == 6.0


def test_discrete_laplace_exact_privacy_ratio():
    # pmf ratio between shifts at L1 distance <= sensitivity is <= e^eps exactly
    for sens, eps in [(1, 1.0), (3, 0.1), (2, 5.0)]:
        from dpkit.mechanisms import discrete_laplace_scale

        t = discrete_laplace_scale(sens, eps)
        assert Fraction(sens) / Fraction(t) <= Fraction(eps)


def test_discrete_gaussian_law_chi2(rng):
    rel = discrete_gaussian(np.zeros(N, dtype=int), 1, rho=0.125, rng=rng)  # sigma = 2
    sigma = rel.scale
    assert sigma == 2.0
    z = np.asarray(rel.value)
    ks = np.arange(-16, 17)

    def pmf(s):
        allk = np.arange(-200, 201)
        w = np.exp(-(allk.astype(float) ** 2) / (2 * s * s))
        w /= w.sum()
        p = w[200 - 16:200 + 17]
        return np.append(p, 1 - p.sum())

    counts = np.array([np.sum(z == k) for k in ks] + [np.sum(np.abs(z) > 16)])
    assert chi2_pvalue(counts, pmf(sigma)) > P_MIN
    assert chi2_pvalue(counts, pmf(1.1 * sigma)) < P_MIN


def test_discrete_gaussian_eps_delta_exact(rng):
    rel = discrete_gaussian(5, 1, epsilon=1.0, delta=1e-5, rng=rng)
    assert discrete_gaussian_delta(rel.scale, 1, 1.0) <= 1e-5
    assert rel.scale >= analytic_gaussian_sigma(1.0, 1.0, 1e-5)
    assert rel.cost == ApproxDP(1.0, 1e-5)
    assert isinstance(rel.value, int)
    # vectors with a real L2 sensitivity
    rel = discrete_gaussian([1, 2, 3], math.sqrt(3), rho=0.5, rng=rng)
    assert rel.scale == pytest.approx(math.sqrt(3), rel=1e-12)


def test_gaussian_secure_source_runs():
    rel = gaussian(1.0, 1.0, rho=1.0)
    assert rel.secure is True and math.isfinite(rel.value)
    assert deterministic_source(0).secure is False
