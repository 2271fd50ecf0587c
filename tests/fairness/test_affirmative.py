"""The preferential-treatment pipeline (§8.4.1) and its stated properties (Props 8.4.1 and 8.4.2)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.fairness import _brute

import dpkit
from dpkit.fairness import lipschitz_violations, preferential_treatment, statistical_parity


def _instance(seed: int, n_s: int = 6, n_t: int = 8):
    gen = np.random.default_rng(seed)  # rng-ok: test instance
    pts = np.vstack([gen.random((n_s, 2)) * 0.5, gen.random((n_t, 2)) * 0.5 + 0.4])  # S and T apart
    d = np.minimum(1.0, np.sqrt(((pts[:, None] - pts[None, :]) ** 2).sum(axis=2)))
    np.fill_diagonal(d, 0.0)
    loss = np.stack([pts[:, 0] + pts[:, 1], 1.0 - pts[:, 0]], axis=1)  # S prefers outcome 0, T outcome 1 mostly
    return d, loss, np.arange(n_s), np.arange(n_s, n_s + n_t)


@pytest.mark.parametrize("epsilon", [0.0, 0.05, 0.2])
@pytest.mark.parametrize("seed", range(3))
def test_properties_8_4_1_and_8_4_2(seed, epsilon):
    d, loss, s, t = _instance(seed)
    r = preferential_treatment(d, loss, s, epsilon)
    mu = r.classifier.probabilities
    # 8.4.1 (1): statistical parity up to epsilon
    assert r.parity <= epsilon + 1e-7
    assert statistical_parity(mu, s, t) == pytest.approx(r.parity)
    # 8.4.1 (2): Lipschitz on S x S and on T x T
    assert lipschitz_violations(mu[s], d[np.ix_(s, s)], tolerance=1e-7).ok
    assert lipschitz_violations(mu[t], d[np.ix_(t, t)], tolerance=1e-7).ok
    # the transport satisfies its own constraints
    tr = r.transport
    assert np.allclose(tr.sum(axis=1), 1.0)
    assert 0.5 * np.abs(tr.mean(axis=0) - 1.0 / t.size).sum() <= epsilon + 1e-7
    assert lipschitz_violations(tr, d[np.ix_(s, s)], tolerance=1e-7).ok
    # d_EM+L is the transport's expected distance
    assert r.emd_l == pytest.approx(float(np.mean(np.sum(tr * d[np.ix_(s, t)], axis=1))))
    # 8.4.2: E_{x in S} max_{y in T} [D_tv(M(x), M(y)) - d(x, y)] <= d_EM+L
    dtv = 0.5 * np.abs(mu[s][:, None, :] - mu[t][None, :, :]).sum(axis=2)
    assert float(np.mean(np.max(dtv - d[np.ix_(s, t)], axis=1))) <= r.emd_l + 1e-7
    # composition: M(x) = E_{y ~ mu_x} nu_y
    assert np.allclose(mu[s], tr @ r.target.probabilities, atol=1e-9)


def test_restricted_earthmover_is_the_plain_earthmover_without_lipschitz_bite():
    """With S x S distances >= 1 (no Lipschitz constraint within S) and epsilon = 0, (8.15) is the transport of
    U_S onto U_T: d_EM+L equals the earthmover distance."""
    from dpkit.fairness import earthmover

    gen = np.random.default_rng(5)  # rng-ok: test instance
    n_s, n_t = 4, 4
    d = _brute.random_metric(gen, n_s + n_t, scale=3.0) + 1.0
    np.fill_diagonal(d, 0.0)
    loss = gen.normal(size=(n_s + n_t, 2))
    r = preferential_treatment(d, loss, np.arange(n_s), 0.0)
    assert r.emd_l == pytest.approx(earthmover(d, np.arange(n_s), np.arange(n_s, 8)).value, abs=1e-7)


def test_reweighting_and_its_absence():
    d, loss, s, t = _instance(9)
    with_rw = preferential_treatment(d, loss, s, 0.1)
    without = preferential_treatment(d, loss, s, 0.1, reweight=False, group_t=t)
    assert np.allclose(with_rw.loss_t, loss[t] + with_rw.transport.T @ loss[s])
    assert np.allclose(without.loss_t, loss[t])
    for r in (with_rw, without):
        assert r.parity <= 0.1 + 1e-7


def test_inf_divergence_and_partition_checks():
    d, loss, s, t = _instance(4)
    r = preferential_treatment(d * 2.0, loss, s, 0.1, divergence="inf")
    assert r.parity <= 0.1 + 1e-7
    rep = lipschitz_violations(r.classifier.probabilities[t], (d * 2.0)[np.ix_(t, t)], divergence="inf",
                               tolerance=1e-6)
    assert rep.linear_violation <= 1e-7
    with pytest.raises(dpkit.InvalidParameter) as e:
        preferential_treatment(d, loss, s, 0.1, group_t=t[:-1])
    assert e.value.param == "group_t"
    with pytest.raises(dpkit.InvalidParameter) as e2:
        preferential_treatment(d, loss, s, 1.5)
    assert e2.value.param == "epsilon"
