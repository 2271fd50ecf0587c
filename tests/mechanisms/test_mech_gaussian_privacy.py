"""Independent privacy checks of the Gaussian mechanisms.

The calibration tests elsewhere use dpkit's own δ formula; these recompute the privacy of the
*released* law from scratch: the pmf of the discrete Gaussian in log space, summed by brute force
over its whole effective support, for the σ each mechanism actually used (``Release.scale``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from dpkit.mechanisms import discrete_gaussian
from dpkit.noise.source import deterministic_source


def _log_pmf(sigma: float, shift: int, xs: np.ndarray) -> np.ndarray:
    """log pmf of the discrete Gaussian N_Z(shift, sigma²) on xs (normalised by brute force)."""
    support = np.arange(-int(80 * sigma) - 80, int(80 * sigma) + 81)
    log_z = logsumexp(-(support.astype(float) ** 2) / (2 * sigma**2))
    return -((xs - shift).astype(float) ** 2) / (2 * sigma**2) - log_z


def _hockey_stick(sigma: float, shift: int, eps: float) -> float:
    """δ(ε) = Σ_x max(0, p(x) − e^ε q(x)), p = N_Z(0, σ²), q = N_Z(shift, σ²)."""
    xs = np.arange(-int(80 * sigma) - 80 - shift, int(80 * sigma) + 81 + shift)
    lp, lq = _log_pmf(sigma, 0, xs), _log_pmf(sigma, shift, xs)
    keep = lp > eps + lq
    if not keep.any():
        return 0.0
    # p − e^ε q = p (1 − e^{ε + lq − lp}), in log space
    terms = lp[keep] + np.log1p(-np.exp(eps + lq[keep] - lp[keep]))
    return float(np.exp(logsumexp(terms)))


def _renyi(sigma: float, shift: int, alpha: float) -> float:
    """D_α(N_Z(0,σ²) || N_Z(shift,σ²)) by brute force."""
    xs = np.arange(-int(80 * sigma) - 80 - shift, int(80 * sigma) + 81 + shift)
    lp, lq = _log_pmf(sigma, 0, xs), _log_pmf(sigma, shift, xs)
    return float(logsumexp(alpha * lp + (1 - alpha) * lq) / (alpha - 1))


@pytest.mark.parametrize(("sens", "eps", "delta"), [(1, 1.0, 1e-5), (3, 0.5, 1e-6), (1, 3.0, 1e-3)])
def test_integer_discrete_gaussian_meets_eps_delta_on_the_worst_shift(sens, eps, delta):
    rel = discrete_gaussian(0, sens, epsilon=eps, delta=delta, rng=deterministic_source(1))
    sigma = rel.scale
    # every shift up to the sensitivity, both directions (the law is symmetric, so one suffices)
    worst = max(_hockey_stick(sigma, s, eps) for s in range(1, sens + 1))
    assert worst <= delta
    # and the calibration is not wasteful: a 5% smaller sigma would break the guarantee
    assert _hockey_stick(0.95 * sigma, sens, eps) > delta


@pytest.mark.parametrize(("sens", "rho"), [(1, 0.5), (2, 0.05), (1, 2.0)])
def test_integer_discrete_gaussian_meets_zcdp(sens, rho):
    sigma = discrete_gaussian(0, sens, rho=rho, rng=deterministic_source(2)).scale
    for alpha in (1.5, 2.0, 4.0, 16.0):
        assert _renyi(sigma, sens, alpha) <= rho * alpha * (1 + 1e-9)

