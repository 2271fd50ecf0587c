"""Shared helpers for the mechanism tests (statistical thresholds: p-value 1e-7)."""

from __future__ import annotations

import numpy as np

from dpkit.noise.source import RandomSource, deterministic_source

P_MIN = 1e-7  # a correct implementation fails a statistical test with probability < 1e-7


class CountingSource(RandomSource):
    """A deterministic source that counts the bytes it hands out."""

    secure = False
    name = "counting"

    def __init__(self, seed: int = 0) -> None:
        self._inner = deterministic_source(seed)
        self.consumed = 0

    def _fill_into(self, buf: memoryview) -> None:
        self.consumed += len(buf)
        self._inner._fill_into(buf)


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square goodness-of-fit p-value, pooling cells with expected count < 5."""
    from scipy import stats

    counts = np.asarray(counts, dtype=float)
    n = counts.sum()
    exp = np.asarray(probs, dtype=float) * n
    keep = exp >= 5
    c = list(counts[keep])
    e = list(exp[keep])
    if (~keep).any():
        c.append(counts[~keep].sum())
        e.append(exp[~keep].sum())
    c, e = np.array(c), np.array(e)
    e = e * c.sum() / e.sum()
    return float(stats.chisquare(c, e).pvalue)
