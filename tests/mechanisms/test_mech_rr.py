"""Randomized response: output frequencies, exact LDP ratio, unbiased estimators."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit.audit.testing import P_MIN, chi2_pvalue
from dpkit.core import PureDP
from dpkit.mechanisms import (
    NoInterval,
    randomized_response,
    randomized_response_k,
    rr_estimate_proportion,
    rr_k_estimate_frequencies,
    rr_keep_probability,
)

Z_MAX = 5.33  # two-sided normal quantile for p = 1e-7
N = 200_000


def test_binary_flip_frequency(rng):
    eps = 1.0
    bits = np.zeros(N, dtype=int)
    bits[: N // 3] = 1
    rel = randomized_response(bits, eps, rng=rng)
    out = np.asarray(rel.value)
    flips = int(np.sum(out != bits))
    p = 1 / (1 + math.e**eps)
    z = (flips - N * p) / math.sqrt(N * p * (1 - p))
    assert abs(z) < Z_MAX
    # power: the flip probability at a 10% wrong epsilon is rejected
    p_wrong = 1 / (1 + math.exp(1.1 * eps))
    assert abs((flips - N * p_wrong) / math.sqrt(N * p_wrong * (1 - p_wrong))) > Z_MAX
    # flips are independent of the true bit
    for b in (0, 1):
        m = bits == b
        f = int(np.sum(out[m] != b))
        assert abs((f - m.sum() * p) / math.sqrt(m.sum() * p * (1 - p))) < Z_MAX
    assert rel.cost == PureDP(eps) and rel.mechanism == "randomized_response"


def test_binary_scalar_and_bool(rng):
    rel = randomized_response(True, 2.0, rng=rng)
    assert rel.value in (0, 1) and isinstance(rel.value, int)
    with pytest.raises(NoInterval):
        rel.interval()


def test_k_ary_frequencies(rng):
    k, eps = 5, 0.8
    rel = randomized_response_k(np.full(N, 2), k, eps, rng=rng)
    counts = np.bincount(np.asarray(rel.value), minlength=k)
    keep = math.exp(eps) / (math.exp(eps) + k - 1)
    probs = np.full(k, (1 - keep) / (k - 1))
    probs[2] = keep
    assert chi2_pvalue(counts, probs) > P_MIN
    keep_w = math.exp(1.1 * eps) / (math.exp(1.1 * eps) + k - 1)
    wrong = np.full(k, (1 - keep_w) / (k - 1))
    wrong[2] = keep_w
    assert chi2_pvalue(counts, wrong) < P_MIN


def test_exact_ldp_ratio():
    for k in (2, 3, 10):
        for eps in (0.1, 1.0, 4.0):
            keep = rr_keep_probability(eps, k)
            other = (1 - keep) / (k - 1)
            assert math.log(keep / other) == pytest.approx(eps, rel=1e-12)


def test_proportion_estimator_unbiased(rng):
    theta, eps = 0.3, 0.5
    bits = (np.arange(N) < theta * N).astype(int)
    est = rr_estimate_proportion(randomized_response(bits, eps, rng=rng).value, eps)
    sd = math.sqrt(est.exact_variance(theta))
    assert abs(est.value - theta) < Z_MAX * sd
    assert est.variance == pytest.approx(est.exact_variance(theta), rel=0.05)
    lo, hi = est.interval(0.95)
    assert lo < est.value < hi


def test_proportion_estimator_mean_over_repeats(rng):
    # unbiasedness: the average of many independent small-sample estimates converges to theta
    theta, eps, n, reps = 0.8, 1.0, 50, 4000
    bits = (np.arange(n * reps) % n < theta * n).astype(int)
    out = np.asarray(randomized_response(bits, eps, rng=rng).value).reshape(reps, n)
    ests = np.array([rr_estimate_proportion(row, eps).value for row in out])
    var = rr_estimate_proportion(out[0], eps).exact_variance(theta)
    assert abs(ests.mean() - theta) < Z_MAX * math.sqrt(var / reps)


def test_k_frequencies_estimator(rng):
    k, eps = 4, 1.5
    truth = np.array([0.1, 0.2, 0.3, 0.4])
    values = np.repeat(np.arange(k), (truth * N).astype(int))
    est = rr_k_estimate_frequencies(randomized_response_k(values, k, eps, rng=rng).value, k, eps)
    sd = np.sqrt(est.exact_variance(truth))
    assert np.all(np.abs(est.value - truth) < Z_MAX * sd)
    assert est.value.sum() == pytest.approx(1.0, abs=1e-9)


def test_estimator_validation():
    from dpkit.core.errors import InvalidData, InvalidParameter

    with pytest.raises(InvalidData):
        rr_estimate_proportion([0, 2], 1.0)
    with pytest.raises(InvalidParameter):
        rr_estimate_proportion([0, 1], -1.0)
    with pytest.raises(InvalidData):
        rr_k_estimate_frequencies([0, 5], 3, 1.0)
    with pytest.raises(InvalidData):
        rr_k_estimate_frequencies([], 3, 1.0)


def test_module_is_not_shadowed_by_the_function():
    # issue #12's consistency fix: the randomized-response module is dpkit.mechanisms.response; the public
    # name dpkit.mechanisms.randomized_response is the function (no module of that name to shadow)
    import importlib

    import dpkit.mechanisms as m

    mod = importlib.import_module("dpkit.mechanisms.response")
    assert callable(m.randomized_response) and m.randomized_response is mod.randomized_response
    assert m.randomized_response_k is mod.randomized_response_k
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("dpkit.mechanisms.randomized_response")
