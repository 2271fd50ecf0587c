"""Exact reference laws and a fail-safe chi-square test for the noise-sampler tests.

Every statistical test compares sample frequencies with the *exact* law using a chi-square test
on bins of probability >= about 1/40 (tails merged), rejecting at p < 1e-7: a correct sampler
fails with probability < 1e-7 per test, whatever the seed.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

P_REJECT = 1e-7


def dlap_cdf(t: float):
    """CDF of the discrete Laplace law P[k] = (1-q)/(1+q) q^|k|, q = exp(-1/t), on integers."""
    q = np.exp(-1.0 / t)

    def cdf(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        pos = 1.0 - np.exp(-(np.maximum(x, 0.0) + 1.0) / t) / (1.0 + q)
        neg = np.exp(-np.abs(np.minimum(x, -1.0)) / t) / (1.0 + q)
        return np.where(x >= 0, pos, neg)

    return cdf


def dgauss_cdf(sigma: float):
    """CDF of the discrete Gaussian P[k] prop. to exp(-k^2 / (2 sigma^2)) (support truncated at 14 sigma + 14,
    where the neglected mass is < 1e-40)."""
    big_k = int(np.ceil(14 * sigma)) + 14
    ks = np.arange(-big_k, big_k + 1)
    logp = -(ks.astype(np.float64) ** 2) / (2.0 * sigma * sigma)
    p = np.exp(logp - logp.max())
    c = np.cumsum(p / p.sum())

    def cdf(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        i = np.clip(x + big_k, -1, 2 * big_k)
        return np.where(i < 0, 0.0, c[np.maximum(i, 0)])

    return cdf


def _quantile(cdf, u: float, lo: int, hi: int) -> int:
    """Smallest integer x in [lo, hi] with cdf(x) >= u (bisection)."""
    while lo < hi:
        mid = (lo + hi) // 2
        if cdf(np.array([mid]))[0] >= u:
            hi = mid
        else:
            lo = mid + 1
    return lo


def chi2_pvalue(samples: np.ndarray, cdf, span: int, nbins: int = 40) -> float:
    """Chi-square p-value of integer ``samples`` against the law with CDF ``cdf``.

    Bins are (e_{i-1}, e_i] with e_i the i/nbins quantiles (deduplicated), plus two open tails;
    bins with an expected count < 20 are merged into a neighbour.
    """
    samples = np.asarray(samples).reshape(-1)
    n = samples.size
    edges = sorted({_quantile(cdf, i / nbins, -span, span) for i in range(1, nbins)})
    edges_a = np.array(edges, dtype=np.int64)
    probs = np.diff(np.concatenate([[0.0], cdf(edges_a), [1.0]]))
    # merge small bins
    e = list(edges)
    p = list(probs)
    i = 0
    while i < len(p):
        if p[i] * n < 20 and len(p) > 2:
            j = i + 1 if i + 1 < len(p) else i - 1
            p[min(i, j)] += p[max(i, j)]
            del p[max(i, j)]
            del e[min(i, j)]
            i = 0
            continue
        i += 1
    idx = np.searchsorted(np.array(e, dtype=np.int64), samples, side="left")
    observed = np.bincount(idx, minlength=len(p))
    expected = n * np.array(p)
    stat = float(((observed - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(stat, len(p) - 1))


def binom_pvalue(successes: int, n: int, p: float) -> float:
    return float(stats.binomtest(successes, n, p).pvalue)
