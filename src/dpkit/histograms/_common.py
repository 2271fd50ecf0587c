"""Shared helpers of the histogram family: count validation, the record sensitivity, the budget split and the
noisy steps drawn inside an already-costed plan.

Every histogram algorithm has the form
``algo(counts, epsilon, *, <public params>, neighbours=None, accountant=None, rng=None, description="")`` and is
written to the mechanism contract (:mod:`dpkit.mechanisms.contract`): a private plan builder validates
everything and computes the whole budget split (data-independent), declaring the one total cost
``PureDP(epsilon)``; :func:`~dpkit.mechanisms.contract.run` charges it **once**, before any randomness, and then
calls the plan's ``draw``, which runs the noisy steps (:func:`noisy_counts`, :func:`choose`: primitive mechanisms
drawn without a charge, covered by the plan's cost) and returns an
:class:`~dpkit.mechanisms.contract.Outcome` whose ``value`` estimates every bin (same shape as ``counts``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, WrongType
from dpkit.mechanisms.contract import is_replace, resolve_neighbours, unit_rows
from dpkit.mechanisms.discrete import discrete_laplace_plan
from dpkit.mechanisms.selection import exponential_plan

if TYPE_CHECKING:
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["choose", "counts", "is_replace", "noisy_counts", "record_sensitivity", "resolve_neighbours",
           "split_budget", "unit_rows"]


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


def record_sensitivity(nb: Neighbours) -> int:
    """L1 sensitivity of one histogram (a partition of the records) under the neighbour relation ``nb``:
    1 under add/remove, 2 under replace-one, ``max_rows`` under a privacy unit."""
    return 2 if is_replace(nb) else unit_rows(nb)


def split_budget(epsilon: float, shares: Any, name: str = "split") -> list[float]:
    """A thin alias of dpkit's one budget splitter, :func:`dpkit.core._exact.split_budget` (errors name ``name``
    for the shares and ``epsilon`` for the total): positive parts proportional to the public ``shares``, rounded
    down, whose exact (rational) sum is at most ``epsilon``; a single share gets ``epsilon`` itself."""
    return _exact.split_budget(epsilon, shares, name=name, total_name="epsilon")


def noisy_counts(values: Any, sensitivity: int, epsilon: float, rng: RandomSource) -> np.ndarray:
    """Integer ``values`` plus discrete Laplace noise of scale ``discrete_laplace_scale(sensitivity, epsilon)``: a
    sub-plan of :func:`~dpkit.mechanisms.discrete_laplace_plan` drawn with ``Plan.sample`` (its exact law), as
    ``int64`` of the same shape. **No charge**: only for a step inside a plan whose declared cost covers it."""
    return np.asarray(discrete_laplace_plan(values, sensitivity, epsilon).sample(rng).value, dtype=np.int64)


def choose(scores: Any, sensitivity: float, epsilon: float, rng: RandomSource, *, monotonic: bool = False) -> int:
    """The index drawn by a sub-plan of :func:`~dpkit.mechanisms.exponential_plan` (the exponential mechanism's
    exact law) for ``scores``. **No charge**: only for a step inside a plan whose declared cost covers it."""
    return int(exponential_plan(scores, sensitivity, epsilon, monotonic=monotonic).sample(rng).value)
