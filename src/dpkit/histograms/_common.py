"""Shared helpers of the histogram family: count validation, the exact budget split, the one charge.

Every histogram algorithm has the form
``algo(counts, epsilon, *, <public params>, neighbours=None, accountant=None, rng=None, description="")``:
it validates, computes its whole budget split (data-independent), charges ``PureDP(epsilon)`` **once**
through :func:`pay` before any randomness, then runs its noisy steps with ``accountant=None`` and returns a
:class:`~dpkit.mechanisms.Release` whose ``value`` estimates every bin (same shape as ``counts``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, WrongType
from dpkit.stats._common import is_replace, neighbours_of, pay, setup, unit_rows

__all__ = ["counts", "is_replace", "neighbours_of", "pay", "record_sensitivity", "setup", "split_budget"]


def counts(value: Any, *, ndim: int | tuple[int, ...] = 1, name: str = "counts") -> np.ndarray:
    """Validate a histogram of true counts: finite non-negative integers, ``ndim`` dimensions (an int or a
    tuple of allowed ones), not empty; returned as ``int64``. Messages never contain a value."""
    if value is None or isinstance(value, (str, bytes)):
        raise WrongType(name, "an array of non-negative integer counts")
    dims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
    arr = check.finite_array(name, value)
    if arr.ndim not in dims:
        raise InvalidData(name, f"must have {' or '.join(map(str, dims))} dimension(s)")
    if arr.size == 0:
        raise InvalidData(name, "must not be empty")
    if not np.all(arr == np.round(arr)):
        raise InvalidData(name, "must contain integers only")
    if np.any(arr < 0):
        raise InvalidData(name, "must be non-negative")
    if np.max(arr) >= 2.0**52:
        raise InvalidData(name, "values too large for exact arithmetic")
    return arr.astype(np.int64)


def record_sensitivity(nb: Any) -> int:
    """L1 sensitivity of one histogram (a partition of the records) under the neighbour relation ``nb``:
    1 under add/remove, 2 under replace-one, ``max_rows`` under a privacy unit."""
    return 2 if is_replace(nb) else unit_rows(nb)


def split_budget(epsilon: float, shares: Any, name: str = "split") -> list[float]:
    """Split ``epsilon`` into positive parts proportional to the public ``shares``; the parts sum to at most
    ``epsilon`` **exactly** (in rational arithmetic). A single share gets ``epsilon`` itself. The one splitter
    of dpkit, :func:`dpkit.core._exact.split_budget` (O(len(shares)) for any input)."""
    return _exact.split_budget(epsilon, shares, name=name, total_name="epsilon")
