"""Shared private helpers of :mod:`dpkit.stats` and :mod:`dpkit.stability`.

Every statistic follows the mechanism contract of ``docs/design.md``: validate everything (typed errors
naming the parameter, never a value), compute the cost and scales from public quantities, charge the
accountant **once** for the whole statistic, and only then touch the randomness. Sub-steps then call the
primitive mechanisms with ``accountant=None`` (already paid for).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import AddRemove, PrivacyUnit, Replace, validate_neighbours
from dpkit.core.privacy import PrivacyLoss
from dpkit.mechanisms._release import charge, check_description, resolve_accountant
from dpkit.noise import source as _source

NAN_POLICIES = check.NAN_POLICIES


def data(values: Any, *, nan_policy: str = "raise", name: str = "values") -> np.ndarray:
    """1-D float64 data. ``None``/NaN: an :class:`InvalidData` (``nan_policy="raise"``) or dropped
    (``"omit"``: a per-record transformation, stable, free). ``±inf`` is always refused. Empty is valid."""
    nan_policy = check.nan_policy(nan_policy)
    if isinstance(values, (str, bytes)) or values is None:
        raise WrongType(name, "a 1-D array of real numbers")
    if isinstance(values, np.ndarray) and values.dtype != object:
        arr = values
    else:
        if isinstance(values, np.ndarray) and values.ndim != 1:
            raise InvalidData(name, "must be one-dimensional")
        try:
            seq = list(values) if not isinstance(values, np.ndarray) else values.tolist()
        except TypeError:  # a scalar (or anything not iterable) where a 1-D array is expected
            raise WrongType(name, "a 1-D array of real numbers") from None
        if any(v is None for v in seq):
            if nan_policy == "raise":
                raise InvalidData(name, "contains missing values (None); pass nan_policy='omit' to drop them")
            seq = [v for v in seq if v is not None]
        if any(isinstance(v, (str, bytes, bool, np.bool_)) for v in seq):
            raise WrongType(name, "a 1-D array of real numbers")
        try:
            arr = np.asarray(seq, dtype=np.float64) if seq else np.zeros(0)
        except OverflowError:  # a huge int: finite but beyond float range
            raise InvalidData(name, "contains values too large for a float") from None
        except (TypeError, ValueError):  # nested, ragged, complex or non-numeric entries
            raise WrongType(name, "a 1-D array of real numbers") from None
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.number)):
        raise WrongType(name, "a 1-D array of real numbers")
    if np.iscomplexobj(arr):
        raise WrongType(name, "a 1-D array of real numbers")
    arr = np.asarray(arr, dtype=np.float64).reshape(-1) if arr.ndim <= 1 else None
    if arr is None:
        raise InvalidData(name, "must be one-dimensional")
    nan = np.isnan(arr)
    if nan.any():
        if nan_policy == "raise":
            raise InvalidData(name, "contains NaN; pass nan_policy='omit' to drop them")
        arr = arr[~nan]
    if np.isinf(arr).any():
        raise InvalidData(name, "contains infinite values")
    return arr


def bounds(value: Any, name: str = "bounds") -> tuple[float, float]:
    """Public clamping bounds ``(lo, hi)``: finite reals with ``lo < hi``."""
    a, b = check.pair(name, value)
    lo = check.real(name, a)
    hi = check.real(name, b)
    if not lo < hi:
        raise InvalidParameter(name, "needs lo < hi")
    if hi - lo == float("inf"):
        raise InvalidParameter(name, "range too wide for float arithmetic")
    return lo, hi


def clamp(arr: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Values outside the public bounds are moved to the nearest bound (documented in every statistic)."""
    return np.clip(arr, lo, hi)


def neighbours_of(neighbours: Any, accountant: Any) -> Any:
    """The neighbour relation: the explicit one, else the accountant's, else add/remove one record.
    An explicit relation that differs from the accountant's is refused."""
    accountant = resolve_accountant(accountant)  # a wrong type is a WrongType, before its attributes are read
    if neighbours is None:
        return accountant.neighbours if accountant is not None else AddRemove()
    nb = validate_neighbours(neighbours)
    if accountant is not None and nb != accountant.neighbours:
        raise InvalidParameter("neighbours", "differs from the accountant's neighbour relation")
    return nb


def unit_rows(nb: Any) -> int:
    """How many records one neighbour step may add or remove (``max_rows`` of a privacy unit, else 1).

    Under a :class:`PrivacyUnit` the caller must already have bounded each unit's contribution to
    ``max_rows`` records (``dpkit.tables`` does this); statistics then scale their sensitivities by it.
    """
    if isinstance(nb, PrivacyUnit):
        return int(nb.max_rows)
    return 1


def is_replace(nb: Any) -> bool:
    return isinstance(nb, Replace)


def setup(accountant: Any, rng: Any, description: Any) -> tuple[Any, Any, str]:
    """Validate the accountant, the random source and the description (before any charge)."""
    return resolve_accountant(accountant), _source.resolve(rng), check_description(description)


def pay(accountant: Any, cost: PrivacyLoss, *, mechanism: str, rng: Any, params: Mapping[str, Any],
        sensitivity: float | None = None, scale: float | None = None, description: str = "") -> Any:
    """The one charge of a statistic (before any randomness is used). Returns the receipt or None."""
    return charge(accountant, cost, mechanism=mechanism, sensitivity=sensitivity, scale=scale, params=params,
                  secure=rng.secure, description=description)


def split(epsilon: float, shares: Any, name: str = "split") -> list[float]:
    """Split ``epsilon`` into positive parts proportional to ``shares`` (public): each part is rounded down
    and their exact (rational) sum is at most ``epsilon`` (:func:`dpkit.core._exact.split_budget`)."""
    return _exact.split_budget(epsilon, shares, name=name, total_name="epsilon")
