"""The samplers' output laws equal the exact ones (chi-square, p < 1e-7 rejection)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from noise_stats import P_REJECT, binom_pvalue, chi2_pvalue, dgauss_cdf, dlap_cdf

from dpkit.noise import (
    deterministic_source,
    sample_bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_laplace,
)
from dpkit.noise import samplers as S

LAPLACE_SCALES = [0.3, 1.0, 3.7, 50.0, 1e4, 300.0, 2.0**24, 2.0**30 * 1.37, 3.1e13]
GAUSS_SIGMAS = [0.5, 1.0, 2.5, 40.0]


def _span(t: float) -> int:
    return int(60 * t) + 60


@pytest.mark.parametrize("scale", LAPLACE_SCALES)
def test_discrete_laplace_law(scale):
    # 300.0 and above use 64-bit words; > 2**24 the chunked path (one and two low chunks)
    x = sample_discrete_laplace(scale, 200_000, rng=deterministic_source(101))
    assert x.dtype == np.int64
    assert chi2_pvalue(x, dlap_cdf(scale), _span(scale)) > P_REJECT


@pytest.mark.parametrize("sigma", GAUSS_SIGMAS)
def test_discrete_gaussian_law(sigma):
    x = sample_discrete_gaussian(sigma, 200_000, rng=deterministic_source(202))
    assert x.dtype == np.int64
    assert chi2_pvalue(x, dgauss_cdf(sigma), int(20 * sigma) + 20) > P_REJECT


def test_discrete_gaussian_large_sigma_uses_chunked_laplace():
    sigma = 2.0**26 * 1.3  # t = floor(sigma) + 1 > 2**24
    x = sample_discrete_gaussian(sigma, 100_000, rng=deterministic_source(203))
    z = x / sigma
    # the law of X / sigma is N(0, 1) up to a lattice of step 1/sigma ~ 1e-8: KS test
    from scipy import stats

    assert stats.kstest(z, "norm").pvalue > P_REJECT


@pytest.mark.parametrize(("wrong", "right"), [(1.05, 1.0), (52.5, 50.0), (3.7 * 1.05, 3.7), (2.0**30 * 1.05, 2.0**30)])
def test_laplace_test_has_power(wrong, right):
    # the same test rejects a 5% error in the scale: the law tests above are not vacuous
    x = sample_discrete_laplace(wrong, 200_000, rng=deterministic_source(7))
    assert chi2_pvalue(x, dlap_cdf(right), _span(right)) < P_REJECT


@pytest.mark.parametrize(("wrong", "right"), [(0.5 * 1.05, 0.5), (2.5 * 1.05, 2.5), (42.0, 40.0)])
def test_gaussian_test_has_power(wrong, right):
    x = sample_discrete_gaussian(wrong, 200_000, rng=deterministic_source(8))
    assert chi2_pvalue(x, dgauss_cdf(right), int(20 * right) + 20) < P_REJECT


def test_gaussian_is_not_a_rounded_continuous_gaussian():
    # a broken variant (round(N(0, sigma))) is detected at sigma = 0.5
    gen = np.random.Generator(np.random.PCG64(9))
    x = np.rint(gen.normal(0.0, 0.5, 200_000)).astype(np.int64)
    assert chi2_pvalue(x, dgauss_cdf(0.5), 30) < P_REJECT


def test_laplace_is_not_a_difference_of_rounded_exponentials():
    # broken variant: rounding a continuous Laplace of the same scale
    gen = np.random.Generator(np.random.PCG64(10))
    x = np.rint(gen.laplace(0.0, 3.7, 200_000)).astype(np.int64)
    assert chi2_pvalue(x, dlap_cdf(3.7), _span(3.7)) < P_REJECT


GAMMAS = [0.0, 1e-9, 0.25, 1.0, 2.0, 7.5, 30.0]


def test_bernoulli_exp_frequencies():
    n = 100_000
    g = np.repeat(np.array(GAMMAS), n).reshape(len(GAMMAS), n)
    out = sample_bernoulli_exp(g, rng=deterministic_source(303))
    assert out.dtype == bool and out.shape == g.shape
    for row, gamma in zip(out, GAMMAS, strict=True):
        p = float(np.exp(-gamma))
        if gamma == 0.0:
            assert row.all()
        elif gamma >= 30.0:
            assert not row.any()  # P[any True] < 1e5 * 1e-13
        else:
            assert binom_pvalue(int(row.sum()), n, p) > P_REJECT


def test_bernoulli_exp_power():
    n = 100_000
    out = sample_bernoulli_exp(np.full(n, 1.0), rng=deterministic_source(304))
    assert binom_pvalue(int(out.sum()), n, float(np.exp(-1.04))) < P_REJECT


def test_bernoulli_exp_huge_gamma_is_false_and_zero_is_true():
    out = sample_bernoulli_exp([800.0, 1e300, 0.0], rng=deterministic_source(5))
    assert out.tolist() == [False, False, True]


# ---- the exact slow path alone (huge margin: nearly every element is ambiguous) ----------------


@pytest.fixture
def all_slow(monkeypatch):
    monkeypatch.setattr(S, "_ETA", 1.0)


@pytest.mark.parametrize("scale", [0.3, 3.7, 1e4, 2.0**30])
def test_slow_path_laplace_law(all_slow, scale):
    x = sample_discrete_laplace(scale, 3000, rng=deterministic_source(404))
    assert chi2_pvalue(x, dlap_cdf(scale), _span(scale), nbins=15) > P_REJECT


@pytest.mark.parametrize("sigma", [0.5, 2.5, 40.0])
def test_slow_path_gaussian_law(all_slow, sigma):
    x = sample_discrete_gaussian(sigma, 1500, rng=deterministic_source(505))
    assert chi2_pvalue(x, dgauss_cdf(sigma), int(20 * sigma) + 20, nbins=12) > P_REJECT


def test_slow_path_bernoulli(all_slow):
    n = 4000
    gammas = [0.0, 0.5, 2.0]
    out = sample_bernoulli_exp(np.repeat(gammas, n).reshape(3, n), rng=deterministic_source(606))
    assert out[0].all()
    for row, gamma in zip(out[1:], gammas[1:], strict=True):
        assert binom_pvalue(int(row.sum()), n, float(np.exp(-gamma))) > P_REJECT


def test_slow_path_is_really_used(monkeypatch):
    calls = {"ceil": 0, "bern": 0}
    real_ceil, real_bern = S._slow_ceil, S._slow_bernoulli

    def ceil(*a, **k):
        calls["ceil"] += 1
        return real_ceil(*a, **k)

    def bern(*a, **k):
        calls["bern"] += 1
        return real_bern(*a, **k)

    monkeypatch.setattr(S, "_slow_ceil", ceil)
    monkeypatch.setattr(S, "_slow_bernoulli", bern)
    monkeypatch.setattr(S, "_ETA", 1.0)
    sample_discrete_gaussian(2.5, 200, rng=deterministic_source(1))
    assert calls["ceil"] >= 200 and calls["bern"] >= 200


# ---- mixed mode: a few percent of elements go to the slow path ---------------------------------


@pytest.mark.parametrize(("scale", "eta"), [(3.7, 2.0**-8), (1e4, 2.0**-19), (2.0**30, 2.0**-23)])
def test_mixed_path_laplace_law(monkeypatch, scale, eta):
    # eta chosen so that about 5-10% of the elements take the slow path
    monkeypatch.setattr(S, "_ETA", eta)
    x = sample_discrete_laplace(scale, 30_000, rng=deterministic_source(707))
    assert chi2_pvalue(x, dlap_cdf(scale), _span(scale)) > P_REJECT


@pytest.mark.parametrize(("sigma", "eta"), [(1.0, 2.0**-8), (40.0, 2.0**-12)])
def test_mixed_path_gaussian_law(monkeypatch, sigma, eta):
    monkeypatch.setattr(S, "_ETA", eta)
    x = sample_discrete_gaussian(sigma, 20_000, rng=deterministic_source(808))
    assert chi2_pvalue(x, dgauss_cdf(sigma), int(20 * sigma) + 20) > P_REJECT


@pytest.mark.slow
def test_slow_path_larger_sample(monkeypatch):
    # the exact slow path alone, with enough samples to catch a 5% scale error (DPKIT_FULL=1), or a
    # smaller, still fail-safe sample by default
    full = os.environ.get("DPKIT_FULL", "") == "1"
    n = 30_000 if full else 4000
    monkeypatch.setattr(S, "_ETA", 1.0)
    x = sample_discrete_laplace(3.7, n, rng=deterministic_source(909))
    assert chi2_pvalue(x, dlap_cdf(3.7), _span(3.7), nbins=20) > P_REJECT
    y = sample_discrete_gaussian(2.5, n // 2, rng=deterministic_source(910))
    assert chi2_pvalue(y, dgauss_cdf(2.5), 70, nbins=15) > P_REJECT
    if full:
        assert chi2_pvalue(x, dlap_cdf(3.7 * 1.05), _span(3.7), nbins=20) < P_REJECT
