"""Private validation helpers shared by every public function.

Each helper raises a typed dpkit error that names the parameter and never a value.
They are called *before* any budget is charged and before any noise is drawn.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import numpy as np

from dpkit.core.errors import InvalidData, InvalidParameter, WrongType

_P = ParamSpec("_P")
_R = TypeVar("_R")


def real(name: str, value: Any) -> float:
    """A real, finite scalar (bools and None refused)."""
    if isinstance(value, bool) or value is None or not isinstance(value, numbers.Real):
        if isinstance(value, np.ndarray) and value.ndim == 0 and np.issubdtype(value.dtype, np.number):
            value = value.item()
        else:
            raise WrongType(name, "a real number")
    try:
        v = float(value)
    except OverflowError:  # a huge int or Fraction: finite but beyond float range
        raise InvalidParameter(name, "must be finite (too large for a float)") from None
    except Exception:  # an exotic numbers.Real whose float() fails
        raise WrongType(name, "a real number") from None
    if not math.isfinite(v):
        raise InvalidParameter(name, "must be finite")
    return v


def positive(name: str, value: Any) -> float:
    """A finite real > 0 (epsilon, rho, sensitivity, scale, ...)."""
    v = real(name, value)
    if v <= 0:
        raise InvalidParameter(name, "must be > 0")
    return v


def nonnegative(name: str, value: Any) -> float:
    v = real(name, value)
    if v < 0:
        raise InvalidParameter(name, "must be >= 0")
    return v


def epsilon(value: Any, name: str = "epsilon") -> float:
    return positive(name, value)


def delta(value: Any, name: str = "delta", *, allow_zero: bool = True) -> float:
    """delta in [0, 1) (or (0, 1) when allow_zero is False)."""
    v = real(name, value)
    if v < 0 or v >= 1 or (v == 0 and not allow_zero):
        raise InvalidParameter(name, "must be in [0, 1)" if allow_zero else "must be in (0, 1)")
    return v


def probability(name: str, value: Any, *, open_low: bool = True, open_high: bool = True) -> float:
    v = real(name, value)
    lo_bad = v <= 0 if open_low else v < 0
    hi_bad = v >= 1 if open_high else v > 1
    if lo_bad or hi_bad:
        lo, hi = ("(" if open_low else "["), (")" if open_high else "]")
        raise InvalidParameter(name, f"must be in {lo}0, 1{hi}")
    return v


#: Default largest magnitude :func:`integer` accepts: counts, sizes, k, seeds' lower bits... all fit int64, and
#: a larger value would overflow the float/int64 arithmetic that follows validation.
INT_LIMIT = 2**63 - 1


def integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = INT_LIMIT) -> int:
    """An integer (bools refused) in ``[minimum, maximum]``; ``maximum=None`` for no upper limit."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, np.ndarray) and value.ndim == 0 and np.issubdtype(value.dtype, np.integer):
            value = value.item()
        else:
            raise WrongType(name, "an integer")
    v = int(value)
    if minimum is not None and v < minimum:
        raise InvalidParameter(name, f"must be >= {minimum}")
    if maximum is not None and v > maximum:
        raise InvalidParameter(name, "is too large" if maximum == INT_LIMIT else f"must be <= {maximum}")
    if v < -INT_LIMIT:
        raise InvalidParameter(name, "is too large in magnitude")
    return v


def finite_array(name: str, data: Any, *, allow_empty: bool = False, ndim: int | None = None) -> np.ndarray:
    """Data as a float64 array with only finite values. Never echoes a value."""
    if data is None:
        raise WrongType(name, "an array of numbers, not None")
    if isinstance(data, (str, bytes)):
        raise WrongType(name, "an array of numbers")
    try:
        arr = np.asarray(data)
    except Exception:
        raise WrongType(name, "an array of numbers") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise WrongType(name, "an array of numbers")
    if np.iscomplexobj(arr):
        raise WrongType(name, "an array of real numbers")
    arr = arr.astype(np.float64, copy=False)
    if ndim is not None and arr.ndim != ndim:
        raise InvalidData(name, f"must be {ndim}-dimensional")
    if arr.size == 0 and not allow_empty:
        raise InvalidData(name, "must not be empty")
    if not np.all(np.isfinite(arr)):
        raise InvalidData(name, "contains NaN or infinite values")
    return arr


def integer_array(name: str, data: Any, *, allow_empty: bool = False) -> np.ndarray:
    """Data as an int64 array (floats accepted only when integral)."""
    arr = finite_array(name, data, allow_empty=allow_empty)
    if not np.all(arr == np.round(arr)):
        raise InvalidData(name, "must contain integers only")
    if arr.size and np.max(np.abs(arr)) >= 2.0**62:
        raise InvalidData(name, "values too large for 64-bit integer arithmetic")
    return arr.astype(np.int64)


def public_vector(name: str, value: Any, *, min_size: int = 1, max_size: int | None = None,
                  increasing: bool = False, kind: str = "a 1-D array of real numbers") -> np.ndarray:
    """A public parameter vector (bin edges, candidates, quantile levels) as float64: 1-D, finite, at least
    ``min_size`` and at most ``max_size`` long, strictly increasing if asked. :class:`WrongType` for a
    non-numeric value, :class:`InvalidParameter` otherwise."""
    if value is None or isinstance(value, (str, bytes)):
        raise WrongType(name, kind)
    try:
        arr = np.asarray(value)
    except Exception:
        raise WrongType(name, kind) from None
    if arr.dtype == object or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) \
            or np.iscomplexobj(arr):
        raise WrongType(name, kind)
    arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise InvalidParameter(name, "must be one-dimensional")
    if arr.size < min_size:
        raise InvalidParameter(name, "must not be empty" if min_size == 1 else f"needs at least {min_size} entries")
    if max_size is not None and arr.size > max_size:
        raise InvalidParameter(name, "has too many entries")
    if not np.all(np.isfinite(arr)):
        raise InvalidParameter(name, "must be finite")
    if increasing and not np.all(np.diff(arr) > 0):
        raise InvalidParameter(name, "must be strictly increasing")
    return arr


def choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    """One of the string ``options``; anything else (an array or None included) is :class:`InvalidParameter`."""
    if not isinstance(value, str) or value not in options:
        raise InvalidParameter(name, "must be one of " + ", ".join(repr(o) for o in options))
    return value


#: The missing-value policy, one name across stats, tables and the CLI: "raise" (refuse missing values) or
#: "omit" (drop them, a per-record transformation). "drop", the name tables and the CLI used before, is
#: accepted as an alias of "omit".
NAN_POLICIES = ("raise", "omit")


def nan_policy(value: Any, name: str = "nan_policy") -> str:
    """The canonical missing-value policy (``"raise"`` or ``"omit"``; the old alias ``"drop"`` gives ``"omit"``)."""
    if isinstance(value, str) and value == "drop":
        return "omit"
    return choice(name, value, NAN_POLICIES)


def flag(name: str, value: Any) -> bool:
    """A bool (Python or NumPy); anything else is a :class:`WrongType`."""
    if not isinstance(value, (bool, np.bool_)):
        raise WrongType(name, "a bool")
    return bool(value)


def pair(name: str, value: Any, what: str = "a pair (lo, hi) of finite reals") -> tuple[Any, Any]:
    """The two entries of a public pair (tuple, list or 1-D array of length 2); :class:`WrongType` otherwise."""
    if isinstance(value, (str, bytes, dict, set, frozenset)) or value is None:
        raise WrongType(name, what)
    if isinstance(value, np.ndarray):
        if value.ndim != 1 or value.shape[0] != 2:
            raise WrongType(name, what)
        return value[0], value[1]
    try:
        items = tuple(value)
    except TypeError:
        raise WrongType(name, what) from None
    if len(items) != 2:
        raise WrongType(name, what)
    return items[0], items[1]


def size_limit(name: str, value: Any, limit: int, *, minimum: int = 0) -> int:
    """An integer in ``[minimum, limit]``: a public size (rounds, blocks, sample counts...) that drives memory or
    running time, refused with :class:`InvalidParameter` naming it when it would exhaust either."""
    v = integer(name, value, minimum=minimum)
    if v > limit:
        raise InvalidParameter(name, f"must be <= {limit} (memory and running time grow with it)")
    return v


def numeric_guard(name: str, what: str = "outside the range this computation supports (with the other parameters)"
                  ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator for public numerical helpers whose arguments are validated but whose float arithmetic can still
    fail at extreme finite values (overflow, division by a subnormal, a root finder without a bracket): such a
    failure becomes :class:`InvalidParameter` naming ``name`` (never chained), and a NaN result is refused too.
    dpkit's own typed errors pass through unchanged."""
    import functools

    from dpkit.core.errors import DPKitError

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def inner(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                out = fn(*args, **kwargs)
            except DPKitError:
                raise
            except (ArithmeticError, ValueError, RuntimeError):
                raise InvalidParameter(name, what) from None
            if isinstance(out, float) and math.isnan(out):
                raise InvalidParameter(name, what)
            return out
        return inner
    return wrap


def safe_ndim(value: Any) -> int:
    """``np.ndim(value)``, or -1 when NumPy cannot even shape it (ragged nesting, exotic objects)."""
    try:
        return int(np.ndim(value))
    except Exception:  # ragged lists raise ValueError; odd objects other errors
        return -1


def as_array(name: str, value: Any, what: str, dtype: Any = None) -> np.ndarray:
    """``np.asarray(value, dtype)`` with every conversion failure (ragged, huge ints, non-numbers) a
    :class:`WrongType` naming ``name`` (never chained)."""
    try:
        return np.asarray(value, dtype=dtype)
    except Exception:
        raise WrongType(name, what) from None


_nan_policy = nan_policy  # the checker, under a name that a parameter called nan_policy does not shadow


# -- shared by the algorithm families (stats, stability, ...): 1-D private data and public bounds --
def real_data(values: Any, *, nan_policy: str = "raise", name: str = "values") -> np.ndarray:
    """1-D float64 data. ``None``/NaN: an :class:`InvalidData` (``nan_policy="raise"``) or dropped
    (``"omit"``: a per-record transformation, stable, free). ``±inf`` is always refused. Empty is valid."""
    nan_policy = _nan_policy(nan_policy)
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
    if arr.ndim > 1:
        raise InvalidData(name, "must be one-dimensional")
    arr = np.asarray(arr, dtype=np.float64).reshape(-1)
    if math.isfinite(float(np.add.reduce(arr))):  # one read: a NaN or an infinity makes the sum non-finite
        return arr
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
    a, b = pair(name, value)
    lo = real(name, a)
    hi = real(name, b)
    if not lo < hi:
        raise InvalidParameter(name, "needs lo < hi")
    if hi - lo == float("inf"):
        raise InvalidParameter(name, "range too wide for float arithmetic")
    return lo, hi


def clamp(arr: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Values outside the public bounds are moved to the nearest bound (documented in every statistic)."""
    return np.clip(arr, lo, hi)
