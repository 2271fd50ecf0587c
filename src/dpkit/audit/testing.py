"""Helpers for testing mechanisms: a byte-counting random source and a goodness-of-fit p-value.

- :class:`CountingSource` wraps the deterministic (insecure, test-only) source and counts the bytes it
  hands out, so a test can check the mechanism contract: nothing is drawn before the accountant is
  charged, and nothing at all when a call is refused.
- :func:`chi2_pvalue` compares observed counts with a mechanism's exact output probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.noise.source import RandomSource, deterministic_source

__all__ = ["CountingSource", "chi2_pvalue", "watch_charges"]


class CountingSource(RandomSource):
    """A deterministic source (insecure: ``secure`` is False) that counts the bytes it hands out.

    >>> src = CountingSource(1)
    >>> _ = src.uint64(3)
    >>> src.consumed
    24
    """

    secure = False
    name = "counting"

    def __init__(self, seed: int = 0) -> None:
        self._inner = deterministic_source(seed)
        self.consumed = 0

    def _fill_into(self, buf: memoryview) -> None:
        self.consumed += len(buf)
        self._inner._fill_into(buf)


def chi2_pvalue(counts: Any, probs: Any) -> float:
    """Chi-square goodness-of-fit p-value of observed ``counts`` against exact probabilities ``probs``.

    Cells with an expected count below 5 are pooled into one; the expected counts are renormalised to
    the observed total (so ``probs`` may omit negligible outcomes).
    """
    from scipy import stats

    counts = np.asarray(counts, dtype=float)
    exp = np.asarray(probs, dtype=float) * counts.sum()
    keep = exp >= 5
    c, e = list(counts[keep]), list(exp[keep])
    if (~keep).any():
        c.append(counts[~keep].sum())
        e.append(exp[~keep].sum())
    c_arr, e_arr = np.array(c), np.array(e)
    return float(stats.chisquare(c_arr, e_arr * c_arr.sum() / e_arr.sum()).pvalue)


def watch_charges(accountant: Any, source: CountingSource) -> list[int]:
    """Record, at each ``accountant.charge`` call, how many bytes ``source`` had handed out.

    A mechanism that honours the contract (charge first, then draw) leaves ``[0]`` for a single release.

    >>> from dpkit import Accountant, PureDP, laplace
    >>> acc, src = Accountant(PureDP(1.0)), CountingSource(1)
    >>> seen = watch_charges(acc, src)
    >>> _ = laplace(3.0, 1.0, 0.5, accountant=acc, rng=src)
    >>> seen, src.consumed > 0
    ([0], True)
    """
    seen: list[int] = []
    original = accountant.charge

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(source.consumed)
        return original(*args, **kwargs)

    accountant.charge = spy
    return seen
