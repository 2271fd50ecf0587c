"""Validation of the fairness tools' inputs (private to :mod:`dpkit.fairness`).

Every helper raises a typed dpkit error naming the parameter and never a value (``dpkit.core.errors``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType

#: Largest number of individuals a metric matrix may describe (n^2 float64 entries: 1.8 GB at 15,000).
MAX_INDIVIDUALS = 15_000
#: Largest number of outcomes.
MAX_OUTCOMES = 1_000
#: Relative tolerance on the symmetry of a metric matrix: |d(x,y) - d(y,x)| <= SYMMETRY_RTOL * max(1, max d).
#: Within it the two entries are replaced by their minimum (the stronger constraint); beyond it the metric is
#: refused as asymmetric.
SYMMETRY_RTOL = 1e-12
DIVERGENCES = ("tv", "inf")


def metric(value: Any, name: str = "metric", *, n: int | None = None) -> np.ndarray:
    """A task metric as an n x n float64 matrix: finite, >= 0, zero diagonal, symmetric (up to
    :data:`SYMMETRY_RTOL`, then made exactly symmetric by taking the elementwise minimum)."""
    if value is None or isinstance(value, (str, bytes)) or callable(value):
        raise WrongType(name, "an n x n matrix of distances (build one with dpkit.fairness.task_metric)")
    if check.safe_ndim(value) != 2:
        raise InvalidData(name, "must be a square two-dimensional matrix")
    arr = check.finite_array(name, check.as_array(name, value, "an n x n matrix of numbers"), ndim=2)
    if arr.shape[0] != arr.shape[1]:
        raise InvalidData(name, "must be a square matrix (n x n)")
    if n is not None and arr.shape[0] != n:
        raise InvalidData(name, "must have one row and one column per individual")
    if arr.shape[0] > MAX_INDIVIDUALS:
        raise InvalidParameter(name, f"must describe at most {MAX_INDIVIDUALS} individuals")
    if np.any(arr < 0):
        raise InvalidData(name, "distances must be >= 0")
    if np.any(np.diagonal(arr) != 0):
        raise InvalidData(name, "d(x, x) must be 0 for every individual")
    tol = SYMMETRY_RTOL * max(1.0, float(np.max(arr)))
    if not np.all(np.abs(arr - arr.T) <= tol):
        raise InvalidData(name, "must be symmetric (d(x, y) = d(y, x))")
    return np.minimum(arr, arr.T)


def loss(value: Any, n: int, name: str = "loss") -> np.ndarray:
    """A loss L(x, a) as an n x |A| float64 matrix (finite; at least two outcomes)."""
    if value is None or isinstance(value, (str, bytes)) or callable(value):
        raise WrongType(name, "an n x |A| matrix of losses L(x, a)")
    if check.safe_ndim(value) != 2:
        raise InvalidData(name, "must be a two-dimensional matrix (individuals x outcomes)")
    arr = check.finite_array(name, check.as_array(name, value, "an n x |A| matrix of numbers"), ndim=2)
    if arr.shape[0] != n:
        raise InvalidData(name, "must have one row per individual of the metric")
    if arr.shape[1] < 2:
        raise InvalidData(name, "needs at least two outcomes (columns)")
    if arr.shape[1] > MAX_OUTCOMES:
        raise InvalidParameter(name, f"must have at most {MAX_OUTCOMES} outcomes")
    if float(np.max(np.abs(arr))) > 1e150:
        raise InvalidData(name, "values too large in magnitude")
    return arr


def distribution(value: Any, n: int, name: str) -> np.ndarray:
    """A distribution over the n individuals, as a float64 vector summing to 1.

    Accepted forms: a boolean mask of length n (uniform over the True entries), an integer array of
    distinct indices in [0, n) (uniform over them), or a float array of n nonnegative weights (normalized)."""
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)):
        raise WrongType(name, "a boolean mask, an array of indices or an array of weights")
    if check.safe_ndim(value) != 1:
        raise InvalidData(name, "must be one-dimensional (a mask, indices or weights)")
    arr = check.as_array(name, value, "a boolean mask, an array of indices or an array of weights")
    if arr.dtype == np.bool_:
        if arr.shape[0] != n:
            raise InvalidData(name, "a mask must have one entry per individual")
        if not np.any(arr):
            raise InvalidData(name, "must contain at least one individual")
        return arr.astype(np.float64) / float(np.count_nonzero(arr))
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise WrongType(name, "a boolean mask, an array of indices or an array of weights")
    if np.issubdtype(arr.dtype, np.integer):
        idx = indices(arr, n, name)
        out = np.zeros(n)
        out[idx] = 1.0 / idx.size
        return out
    w = check.finite_array(name, arr, ndim=1)
    if w.shape[0] != n:
        raise InvalidData(name, "weights must have one entry per individual")
    if np.any(w < 0):
        raise InvalidData(name, "weights must be >= 0")
    total = float(np.sum(w))
    if not total > 0 or not np.isfinite(total):
        raise InvalidData(name, "weights must have a positive finite sum")
    return w / total


def indices(value: Any, n: int, name: str, *, allow_empty: bool = False, unique: bool = True) -> np.ndarray:
    """Distinct (when ``unique``) integer indices in [0, n), as int64 (a boolean mask of length n also works)."""
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)):
        raise WrongType(name, "an array of individual indices")
    if check.safe_ndim(value) != 1:
        raise InvalidData(name, "must be one-dimensional")
    arr = check.as_array(name, value, "an array of individual indices")
    if arr.dtype == np.bool_:
        if arr.shape[0] != n:
            raise InvalidData(name, "a mask must have one entry per individual")
        arr = np.flatnonzero(arr)
    elif arr.size == 0:
        arr = np.zeros(0, dtype=np.int64)
    elif arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
        raise WrongType(name, "an array of integer indices or a boolean mask")
    if arr.size == 0 and not allow_empty:
        raise InvalidData(name, "must contain at least one individual")
    if arr.size and (int(np.min(arr)) < 0 or int(np.max(arr)) >= n):
        raise InvalidData(name, "indices must lie in [0, n)")
    out = arr.astype(np.int64)
    if unique and np.unique(out).size != out.size:
        raise InvalidData(name, "indices must be distinct")
    return out


def divergence(value: Any, name: str = "divergence") -> str:
    """``"tv"`` (total variation) or ``"inf"`` (relative l-infinity)."""
    return check.choice(name, value, DIVERGENCES)


def time_limit(value: Any, name: str = "time_limit") -> float:
    """A solver time limit in seconds (> 0, at most a day)."""
    v = check.positive(name, value)
    if v > 86_400:
        raise InvalidParameter(name, "must be at most 86400 seconds")
    return v


def unit_interval(name: str, value: Any, *, allow_zero: bool = True) -> float:
    v = check.real(name, value)
    if v < 0 or (v == 0 and not allow_zero) or v > 1:
        raise InvalidParameter(name, "must lie in [0, 1]" if allow_zero else "must lie in (0, 1]")
    return v
