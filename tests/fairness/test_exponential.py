"""The exponential fair map with the /2 correction (notes §2.8 ERRATA), its exact sampler and the ε-net extension."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from tests.fairness import _brute

import dpkit
from dpkit.fairness import epsilon_net, exponential_fair_map, lipschitz_violations, net_fair_map, triangle_violation


def _uncorrected_map(d: np.ndarray) -> np.ndarray:
    """The thesis's Def 8.5.1 as printed, E(x) ∝ e^{-d(x,y)} (λ = 1): a known-bad variant, test fixture only."""
    w = np.exp(-d)
    return w / w.sum(axis=1, keepdims=True)


def _exact_max_log_ratio_excess(d: np.ndarray, lam: float, factor: float) -> mpmath.mpf:
    """max over x, x', y of |log E(x)(y) - log E(x')(y)| - factor d(x, x'), in 60-digit arithmetic on the exact
    float distances."""
    mpmath.mp.dps = 60
    n = d.shape[0]
    dm = [[mpmath.mpf(float(d[i, j])) for j in range(n)] for i in range(n)]
    lm = mpmath.mpf(lam)
    logz = [mpmath.log(mpmath.fsum(mpmath.exp(-lm * dm[i][j]) for j in range(n))) for i in range(n)]
    worst = mpmath.mpf("-inf")
    for x in range(n):
        for xp in range(n):
            if x == xp:
                continue
            for y in range(n):
                r = abs((-lm * dm[x][y] - logz[x]) - (-lm * dm[xp][y] - logz[xp]))
                worst = max(worst, r - mpmath.mpf(factor) * dm[x][xp])
    return worst


def _crafted() -> np.ndarray:
    """x = 0 and x' = 1 on a line, with 20 points clustered just beyond x': Z_x' ≫ Z_x, so λ = 1 loses a factor
    Z_x'/Z_x on top of e^{d(x,x')}."""
    pos = np.concatenate([[0.0, 1.0], 1.0 + np.linspace(0.001, 0.02, 20)])
    return np.abs(pos[:, None] - pos[None, :])


@pytest.mark.parametrize("seed", range(3))
def test_corrected_map_is_d_lipschitz_exactly(seed):
    gen = np.random.default_rng(seed)  # rng-ok: test instance
    d = _brute.random_metric(gen, 7, scale=3.0)
    assert _exact_max_log_ratio_excess(d, 0.5, 1.0) <= 0
    assert _exact_max_log_ratio_excess(d, 1.0, 2.0) <= 0  # scale λ: guarantee 2λ d
    E = exponential_fair_map(d)
    assert E.lipschitz_factor == 1.0
    assert lipschitz_violations(E.probabilities, d, divergence="inf", tolerance=1e-12).ok


def test_corrected_map_on_the_crafted_instance_and_the_uncorrected_one_fails():
    d = _crafted()
    assert triangle_violation(d) <= 1e-12
    assert _exact_max_log_ratio_excess(d, 0.5, 1.0) <= 0
    # the thesis's λ = 1 map is NOT (D_inf, d)-Lipschitz: the excess is large (about 0.9 at d(x, x') = 1) ...
    assert _exact_max_log_ratio_excess(d, 1.0, 1.0) > 0.5
    bad = lipschitz_violations(_uncorrected_map(d), d, divergence="inf")
    assert not bad.ok and bad.max_violation > 0.5 and [0, 1] in bad.pairs.tolist()
    # ... but it is (D_inf, 2d)-Lipschitz, as the errata says
    assert _exact_max_log_ratio_excess(d, 1.0, 2.0) <= 0
    assert exponential_fair_map(d, scale=1.0).lipschitz_factor == 2.0


def test_exact_sampler_follows_the_map_and_has_power():
    """Chi-square goodness of fit at p < 1e-7 against E(x); the uncorrected law is rejected at the same size."""
    from scipy.stats import chisquare

    d = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    E = exponential_fair_map(d)
    m = 30_000
    draws = E.sample(np.zeros(m, dtype=np.int64), rng=dpkit.deterministic_source(7))
    counts = np.bincount(draws, minlength=3)
    assert chisquare(counts, m * E.probabilities[0]).pvalue > 1e-7
    assert chisquare(counts, m * _uncorrected_map(d)[0]).pvalue < 1e-7


def test_epsilon_net_and_extension_slack():
    gen = np.random.default_rng(12)  # rng-ok: test instance
    d = _brute.random_metric(gen, 40, scale=4.0)
    radius = 0.6
    net = epsilon_net(d, radius)
    sub = d[np.ix_(net, net)]
    assert np.all(sub[~np.eye(net.size, dtype=bool)] > radius)  # well separated
    assert np.all(d[:, net].min(axis=1) <= radius)  # covering
    m = net_fair_map(d, radius)
    assert m.slack == pytest.approx(2 * radius)
    mu = m.classifier.probabilities
    # Remark 8.5.6 with λ = 1/2: D_inf(M(x), M(y)) <= d(x, y) + r_x + r_y <= d(x, y) + 2 radius
    with np.errstate(divide="ignore"):
        lg = np.log(mu)
    dinf = np.max(np.abs(lg[:, None, :] - lg[None, :, :]), axis=2)
    assert np.all(dinf <= d + m.radii[:, None] + m.radii[None, :] + 1e-9)
    assert np.all(dinf <= d + m.slack + 1e-9)
    # new points: map by nearest net point; a net point itself maps to its own row
    ext = m.extend(d[np.ix_(net[:3], net)])
    assert ext.nearest.tolist() == [0, 1, 2] and np.allclose(ext.radii, 0.0)
    assert np.allclose(ext.classifier.probabilities, m.net_map.probabilities[:3])
    draws = m.sample([0, 1, 2], rng=dpkit.deterministic_source(3))
    assert set(draws.tolist()) <= set(net.tolist())


def test_triangle_check_refuses_a_non_metric():
    d = np.array([[0.0, 3.0, 1.0], [3.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    with pytest.raises(dpkit.InvalidData) as e:
        exponential_fair_map(d)
    assert e.value.param == "metric"
    exponential_fair_map(d, check_triangle=False)  # the caller vouches for it
