"""Small helpers shared by the mechanisms (private): data conversion and the samplers' range checks.

Exact arithmetic (directed rounding, bisection) is :mod:`dpkit.core._exact`'s, not this module's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter

# |value| / g must stay well inside the float range so that value / g and its rounding are exact.
_MAX_LATTICE_UNITS = 2.0**1000


def values(name: str, value: Any) -> tuple[np.ndarray, bool]:
    """Real data as a float64 array, plus whether it was a scalar."""
    arr = check.finite_array(name, value)
    return arr, arr.ndim == 0


def int_values(name: str, value: Any) -> tuple[np.ndarray, bool]:
    """Integer data as an int64 array, plus whether it was a scalar.

    Accepts Python/numpy integers, bools (as 0/1) and integral floats.
    """
    arr = check.integer_array(name, value)
    return arr, arr.ndim == 0


def check_lattice_range(name: str, arr: np.ndarray, g: float) -> None:
    if arr.size and float(np.max(np.abs(arr))) / g >= _MAX_LATTICE_UNITS:
        raise InvalidData(name, "values too large relative to the sensitivity for exact lattice arithmetic")


def finite_scale(name: str, scale: float, g: float | None = None) -> None:
    """Refuse (before any charge) a noise scale the exact samplers cannot take: in lattice units it
    must lie in [2^-400, 2^50] (dpkit.noise's range)."""
    units = scale if g is None else scale / g
    if not math.isfinite(units) or units > 2.0**50:
        raise InvalidParameter(name, "too small: the noise scale exceeds the samplers' range")
    if units < 2.0**-400:
        raise InvalidParameter(name, "too large: the noise scale is below the samplers' range")


def out(arr: np.ndarray, scalar: bool, kind: type = float) -> Any:
    if scalar:
        return kind(arr.reshape(()))
    return arr
