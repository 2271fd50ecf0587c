"""Earthmover distance and bias by LP; Theorem 8.3.7 (bias_tv = d_EM when d <= 1) on random instances."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from tests.fairness import _brute

from dpkit.fairness import bias, earthmover, fair_classifier, lipschitz_violations, statistical_parity


@pytest.mark.parametrize("seed", range(4))
def test_earthmover_equals_min_cost_assignment(seed):
    """Uniform distributions on two sets of m points: d_EM is the min-cost perfect matching / m (Birkhoff-von
    Neumann), computed independently by the Hungarian algorithm."""
    gen = np.random.default_rng(seed)  # rng-ok: test instance
    m = 6
    d = _brute.random_metric(gen, 2 * m, scale=2.0)
    s, t = np.arange(m), np.arange(m, 2 * m)
    rows, cols = linear_sum_assignment(d[np.ix_(s, t)])
    expected = float(d[np.ix_(s, t)][rows, cols].sum()) / m
    res = earthmover(d, s, t)
    assert res.value == pytest.approx(expected, abs=1e-9)
    assert np.allclose(res.plan.sum(axis=1)[s], 1 / m) and np.allclose(res.plan.sum(axis=0)[t], 1 / m)
    assert res.lp.variables == m * m and res.lp.constraints == 2 * m


@pytest.mark.parametrize("seed", range(8))
def test_theorem_8_3_7_bias_equals_emd_when_d_at_most_1(seed):
    gen = np.random.default_rng(100 + seed)  # rng-ok: test instance
    n = 5 + seed % 4
    d = _brute.random_metric(gen, n, scale=0.9, cap=1.0)  # a metric with d <= 1
    s = gen.random(n) * (gen.random(n) < 0.6)
    t = gen.random(n) * (gen.random(n) < 0.6)
    s[0] += 0.1
    t[-1] += 0.1
    s, t = s / s.sum(), t / t.sum()
    b = bias(d, s, t)
    emd = earthmover(d, s, t)
    assert b.value == pytest.approx(emd.value, abs=1e-7)
    # the attaining map is (D_tv, d)-Lipschitz and has exactly that parity gap
    assert lipschitz_violations(b.classifier.probabilities, d, tolerance=1e-7).ok
    mu_s, mu_t = s @ b.classifier.probabilities, t @ b.classifier.probabilities
    assert mu_s[0] - mu_t[0] == pytest.approx(b.value, abs=1e-9)
    # Lemma 8.3.9: bias_inf <= bias_tv
    assert bias(d, s, t, divergence="inf").value <= b.value + 1e-8


@pytest.mark.parametrize("seed", range(4))
def test_bias_at_most_emd_for_unbounded_metrics(seed):
    """(8.9) holds for any metric; with distances above 1 the inequality can be strict (bias <= 1)."""
    gen = np.random.default_rng(200 + seed)  # rng-ok: test instance
    n = 6
    d = _brute.random_metric(gen, n, scale=4.0)
    s, t = np.arange(3), np.arange(3, 6)
    assert bias(d, s, t).value <= earthmover(d, s, t).value + 1e-8


@pytest.mark.parametrize("divergence", ["tv", "inf"])
@pytest.mark.parametrize("seed", range(4))
def test_bias_matches_vertex_enumeration(divergence, seed):
    gen = np.random.default_rng(300 + seed)  # rng-ok: test instance
    n = 3 + seed % 2
    d = _brute.random_metric(gen, n, scale=1.3)
    s = np.zeros(n)
    s[0] = 1.0
    t = np.full(n, 1.0 / (n - 1))
    t[0] = 0.0
    assert bias(d, s, t, divergence=divergence).value == pytest.approx(
        _brute.bias_two_outcomes(d, s, t, divergence), abs=1e-7)


def test_every_lipschitz_classifier_has_parity_within_bias():
    """Lemma 8.3.4: any (D, d)-Lipschitz map into any outcome set has parity up to bias_{D,d}(S, T)."""
    gen = np.random.default_rng(400)  # rng-ok: test instance
    n = 12
    d = _brute.random_metric(gen, n, scale=0.8, cap=1.0)
    s, t = np.arange(5), np.arange(5, 12)
    for divergence in ("tv", "inf"):
        b = bias(d, s, t, divergence=divergence).value
        for trial in range(4):
            clf = fair_classifier(d, gen.normal(size=(n, 3)), divergence=divergence)
            assert statistical_parity(clf.probabilities, s, t) <= b + 1e-7, trial
