"""Range-query workloads and error metrics for evaluating 1-D histogram releases (Li et al. §4.1–4.2).

Everything here is **public post-processing**: workloads are built from the public domain size ``m``
(and, for :func:`random_ranges`, public randomness from a dpkit :class:`~dpkit.noise.source.RandomSource`);
metrics compare a true and a noisy answer vector, for evaluation only (they read the true answers, so
their results are not differentially private and must not be published as such).

A range is a half-open pair ``[lo, hi)`` of bin indices with ``0 <= lo < hi <= m``; a workload is an int64
array of shape ``(k, 2)``.

>>> import numpy as np
>>> r = all_ranges(3)
>>> r.tolist()
[[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
>>> answer(np.array([1, 2, 3]), r).tolist()
[1.0, 3.0, 6.0, 2.0, 5.0, 3.0]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.noise import source as rng_source

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.noise.source import RandomSource

__all__ = ["all_ranges", "answer", "mae", "msae", "prefix_ranges", "random_ranges", "relative_error",
           "scaled_error"]

_MAX_ALL = 5_000  # all_ranges(m) has m(m+1)/2 rows; refuse domains that would need gigabytes


#: Largest domain / range count the workload builders accept (the arrays are (count, 2) int64: 160 MB).
_MAX_ROWS = 10**7


def _domain(m: Any) -> int:
    return check.integer("m", m, minimum=1)


def all_ranges(m: int) -> np.ndarray:
    """All ``m(m+1)/2`` ranges ``[lo, hi)`` of a domain of ``m`` bins, sorted by ``(lo, hi)``.

    Their average length is ``(m+2)/3`` (Li et al. §4.2.1), so a uniform-over-all-ranges workload is
    dominated by ranges of length Θ(m). ``m`` is limited to 5000 (12.5 million ranges).
    """
    m = _domain(m)
    if m > _MAX_ALL:
        raise InvalidParameter("m", f"must be <= {_MAX_ALL} for all_ranges (use random_ranges)")
    lo, hi = np.triu_indices(m + 1, k=1)
    return np.stack([lo, hi], axis=1).astype(np.int64)


def prefix_ranges(m: int) -> np.ndarray:
    """The ``m`` prefix ranges ``[0, hi)``, ``hi = 1..m``."""
    m = _domain(m)
    if m > _MAX_ROWS:
        raise InvalidParameter("m", f"must be <= {_MAX_ROWS} for prefix_ranges")
    hi = np.arange(1, m + 1, dtype=np.int64)
    return np.stack([np.zeros(m, dtype=np.int64), hi], axis=1)


def random_ranges(m: int, count: int, rng: RandomSource | None = None) -> np.ndarray:
    """``count`` ranges drawn independently and **uniformly from all** ``m(m+1)/2`` ranges.

    Two endpoints are drawn uniformly (exactly, :meth:`RandomSource.below`) from ``{0, ..., m}``; equal
    pairs are redrawn, so the unordered pair of distinct endpoints is uniform, i.e. the range is uniform.
    ``rng`` is a dpkit :class:`~dpkit.noise.source.RandomSource` (``None``: the OS CSPRNG).
    """
    m = _domain(m)
    count = check.size_limit("count", count, _MAX_ROWS, minimum=0)
    rng = rng_source.resolve(rng)
    a = np.empty(count, dtype=np.int64)
    b = np.empty(count, dtype=np.int64)
    todo = np.arange(count)
    while todo.size:
        x = rng.below(m + 1, todo.size)
        y = rng.below(m + 1, todo.size)
        ok = x != y
        a[todo[ok]] = x[ok]
        b[todo[ok]] = y[ok]
        todo = todo[~ok]
    return np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)


def _ranges(ranges: Any, m: int) -> np.ndarray:
    if ranges is None or isinstance(ranges, (str, bytes)):
        raise WrongType("ranges", "an integer array of shape (k, 2)")
    try:
        arr = np.asarray(ranges)
    except Exception:
        raise WrongType("ranges", "an integer array of shape (k, 2)") from None
    if arr.size == 0:
        arr = arr.reshape(0, 2) if arr.ndim <= 2 else arr
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise WrongType("ranges", "an integer array of shape (k, 2)")
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise InvalidParameter("ranges", "must have shape (k, 2)")
    arr = arr.astype(np.int64)
    if arr.size and not (np.all(arr[:, 0] >= 0) and np.all(arr[:, 0] < arr[:, 1]) and np.all(arr[:, 1] <= m)):
        raise InvalidParameter("ranges", "every range needs 0 <= lo < hi <= m (the histogram's length)")
    return arr


def answer(hist: ArrayLike, ranges: ArrayLike) -> np.ndarray:
    """Answers of the ranges on ``hist`` (a 1-D array of ``m`` bin values), via prefix sums: float64 ``(k,)``.

    The prefix sums are accumulated in float64 (exact for integer counts below 2^53).
    """
    h = check.finite_array("hist", hist, ndim=1)
    r = _ranges(ranges, int(h.size))
    prefix = np.concatenate([[0.0], np.cumsum(h)])
    return prefix[r[:, 1]] - prefix[r[:, 0]]


def _pair(true: Any, noisy: Any) -> tuple[np.ndarray, np.ndarray]:
    t = check.finite_array("true", true)
    n = check.finite_array("noisy", noisy)
    if t.shape != n.shape:
        raise InvalidParameter("noisy", "must have the same shape as true")
    return t.ravel(), n.ravel()


def mae(true: ArrayLike, noisy: ArrayLike) -> float:
    """Mean absolute error ``mean |true - noisy|``."""
    t, n = _pair(true, noisy)
    return float(np.mean(np.abs(t - n)))


def msae(true: ArrayLike, noisy: ArrayLike) -> float:
    """Mean squared absolute error ``mean (true - noisy)^2`` (for data-independent mechanisms, the average
    noise variance of the queries)."""
    t, n = _pair(true, noisy)
    return float(np.mean((t - n) ** 2))


def relative_error(true: ArrayLike, noisy: ArrayLike, theta: float) -> float:
    """Mean relative error ``mean |true - noisy| / max(theta, true)`` with a public threshold ``theta > 0``
    (Li et al. §4.1; the threshold keeps small true answers from dominating)."""
    t, n = _pair(true, noisy)
    theta = check.positive("theta", theta)
    return float(np.mean(np.abs(t - n) / np.maximum(theta, t)))


def scaled_error(true: ArrayLike, noisy: ArrayLike, total: float) -> float:
    """DPBench's scaled average per-query error (Hay et al. 2016): ``mean |true - noisy| / total``, with
    ``total`` the dataset size N (> 0). It makes errors comparable across dataset sizes."""
    t, n = _pair(true, noisy)
    total = check.positive("total", total)
    return float(np.mean(np.abs(t - n)) / total)
