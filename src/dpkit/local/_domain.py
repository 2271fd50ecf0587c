"""Private helpers of :mod:`dpkit.local`: the public category domain, exact coins, the report hash family.

- :class:`Domain` maps a public, ordered list of hashable categories (or ``range(k)`` given as an int ``k``) to
  indices ``0..k-1`` and back. A private value outside the categories is an
  :class:`~dpkit.core.errors.InvalidData` naming the data parameter (never the value).
- :func:`bernoulli` draws ``Bernoulli(r)`` **exactly** for a dyadic rational ``r`` (every float is one): a lazy
  uniform ``U`` is compared with ``r`` 64 bits at a time; a tie on a word (probability ``2^-64``) draws the
  next word, so ``P[U < r] = r`` exactly (no float decision).
- :func:`mix64` / :func:`seeded_hash` are the hash family of OLH and the RAPPOR Bloom filters: a bijective
  64-bit finaliser (splitmix64's) of ``seed XOR a_v`` with ``a_v = mix64((v + 1) * golden)``, reduced to
  ``[0, g)``. Data-independent and public; privacy never depends on its quality (each report is conditioned on its
  public seed), only the OLH unbiasedness does (collision probability ``1/g`` over the seed; measured in the
  tests). The reduction to ``[0, g)`` is a multiply-shift of the top 32 bits (no division; ``g <= 2^32``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.noise.source import RandomSource

#: Most categories a domain may hold (the estimates hold one float per category).
MAX_CATEGORIES = 10**7
#: Most reports one call may perturb or aggregate.
MAX_REPORTS = 2**27


class Domain:
    """A public, ordered domain of hashable categories (or ``range(k)`` given as the int ``k``)."""

    __slots__ = ("_cats", "_index", "k", "ranged")

    def __init__(self, categories: Any, name: str = "categories") -> None:
        if isinstance(categories, numbers.Integral) and not isinstance(categories, bool):
            self.k = check.size_limit(name, categories, MAX_CATEGORIES, minimum=2)
            self.ranged = True
            self._cats: tuple[Any, ...] | None = None
            self._index: dict[Any, int] | None = None
            return
        if isinstance(categories, np.ndarray) and categories.ndim == 0 and np.issubdtype(categories.dtype,
                                                                                          np.integer):
            self.__init__(int(categories), name)  # type: ignore[misc]
            return
        if isinstance(categories, (str, bytes, Fraction)) or not isinstance(categories, (Sequence, np.ndarray,
                                                                                         range)):
            raise WrongType(name, "a sequence of distinct hashable categories, or an int k for 0..k-1")
        if isinstance(categories, np.ndarray) and categories.ndim != 1:
            raise InvalidParameter(name, "must be one-dimensional")
        if len(categories) > MAX_CATEGORIES:
            raise InvalidParameter(name, f"must hold at most {MAX_CATEGORIES} categories")
        cats = tuple(categories.tolist() if isinstance(categories, np.ndarray) else categories)
        index: dict[Any, int] = {}
        for i, c in enumerate(cats):
            try:
                hash(c)
            except TypeError:
                raise WrongType(name, "hashable categories") from None
            if isinstance(c, float) and math.isnan(c):
                raise InvalidParameter(name, "must not contain NaN")
            try:
                seen = c in index
            except (TypeError, ValueError):
                raise WrongType(name, "hashable categories") from None
            if seen:
                raise InvalidParameter(name, "must be distinct")
            index[c] = i
        if len(cats) < 2:
            raise InvalidParameter(name, "must hold at least 2 categories")
        self.k = len(cats)
        self.ranged = False
        self._cats = cats
        self._index = index

    @property
    def categories(self) -> tuple[Any, ...]:
        if self._cats is None:
            self._cats = tuple(range(self.k))
        return self._cats

    def encode(self, name: str, values: Any, *, allow_empty: bool = False) -> tuple[np.ndarray, tuple[int, ...], bool]:
        """``(indices int64 (flat), shape, scalar)`` of the private ``values``; never echoes a value."""
        if self.ranged:
            arr = check.integer_array(name, values, allow_empty=allow_empty)
            if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.k):
                raise InvalidData(name, "must contain only integers in [0, k) (the categories)")
            _size(name, arr.size)
            return arr.reshape(-1), arr.shape, arr.ndim == 0
        if values is None or isinstance(values, (bytes, dict, set, frozenset)):
            raise WrongType(name, "a value or an array of values among the categories")
        if isinstance(values, str) or not isinstance(values, (Sequence, np.ndarray, range)):
            scalar_in = True
            flat = [values]
            shape: tuple[int, ...] = ()
        else:
            scalar_in = False
            try:
                arr = np.asarray(values) if isinstance(values, np.ndarray) else _as_object(values)
            except (ValueError, TypeError):
                raise WrongType(name, "a (rectangular) array of values among the categories") from None
            shape = arr.shape
            _size(name, arr.size)
            flat = arr.reshape(-1).tolist()
        if not flat and not allow_empty:
            raise InvalidData(name, "must not be empty")
        assert self._index is not None
        index = self._index
        out = np.empty(len(flat), dtype=np.int64)
        for i, v in enumerate(flat):
            try:
                j = index.get(v)
            except TypeError:
                j = None
            if j is None:
                raise InvalidData(name, "contains a value outside the categories")
            out[i] = j
        return out, shape, scalar_in

    def decode(self, idx: np.ndarray, shape: tuple[int, ...], scalar: bool) -> Any:
        """The categories at ``idx`` (int64), with the input's shape (a scalar for a scalar input)."""
        if self.ranged:
            if scalar:
                return int(idx.reshape(()))
            return idx.reshape(shape)
        cats = self.categories
        if scalar:
            return cats[int(idx.reshape(-1)[0])]
        table = _category_array(cats)
        return table[idx].reshape(shape)


def _as_object(values: Any) -> np.ndarray:
    """A non-array sequence of values as an array: nested lists make a multi-dimensional array, anything else
    (tuples included: they may be categories) a 1-D array of the items."""
    items = list(values)
    if any(isinstance(x, (list, np.ndarray)) for x in items):
        return np.asarray(values)
    kinds = {type(x) for x in items}
    if kinds <= {str, int, float} and len(kinds) <= 1:
        return np.asarray(items)
    out = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        out[i] = x
    return out


def _category_array(cats: tuple[Any, ...]) -> np.ndarray:
    """The categories as a numpy array: a typed array when they share one plain type, else an object array."""
    kinds = {type(c) for c in cats}
    if len(kinds) == 1 and next(iter(kinds)) in (int, str, float):
        arr = np.asarray(cats)
        if arr.dtype.kind in "iufU":
            return arr
    out = np.empty(len(cats), dtype=object)
    out[:] = list(cats)
    return out


def _size(name: str, n: int) -> None:
    if n > MAX_REPORTS:
        raise InvalidData(name, f"too many values for one call (at most {MAX_REPORTS})")


# -- exact coins --------------------------------------------------------------------------------------------
def dyadic(name: str, value: Any, *, open_low: bool = False, open_high: bool = False) -> Fraction:
    """A probability given as a float: its exact rational value (floats are dyadic rationals)."""
    v = check.probability(name, value, open_low=open_low, open_high=open_high)
    return Fraction(v)


def bernoulli(prob: Fraction, n: int, rng: RandomSource) -> np.ndarray:
    """``n`` independent exact ``Bernoulli(prob)`` draws (bool), ``prob`` a dyadic rational in ``[0, 1]``."""
    if prob <= 0:
        return np.zeros(n, dtype=bool)
    if prob >= 1:
        return np.ones(n, dtype=bool)
    scaled = prob * 2**64
    top = math.floor(scaled)  # < 2**64 since prob < 1
    rest = scaled - top
    w = rng.uint64(n)
    t = np.uint64(top)
    out = w < t
    for i in np.flatnonzero(w == t):  # probability 2^-64 per draw: refine U with further words
        out[i] = _refine(rest, rng)
    return out


def _refine(rest: Fraction, rng: RandomSource) -> bool:
    """``U' < rest`` for a fresh lazy uniform ``U'`` in ``[0, 1)``."""
    while True:
        if rest <= 0:
            return False
        scaled = rest * 2**64
        top = math.floor(scaled)
        w = int(rng.uint64(1)[0])
        if w < top:
            return True
        if w > top:
            return False
        rest = scaled - top


def log_up(x: Fraction) -> float:
    """A float at least ``ln(x)`` for a rational ``x > 0`` (correctly rounded input, two ulps for libm)."""
    return _exact.up(math.log(_exact.float_at_least(x)), 2)


# -- the public hash family -----------------------------------------------------------------------------------
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (a bijection of 64-bit words), on a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def value_keys(idx: Any) -> np.ndarray:
    """``a_v = mix64((v + 1) * golden)`` for category indices ``v`` (uint64)."""
    v = np.asarray(idx, dtype=np.int64).astype(np.uint64)
    return mix64((v + np.uint64(1)) * _GOLDEN)


def reduce(h: np.ndarray, g: int) -> np.ndarray:
    """``floor(hi32(h) · g / 2^32)``: the top 32 bits of ``h`` mapped onto ``[0, g)`` (Lemire's multiply-shift,
    no division; ``g <= 2^32``), uint64."""
    return ((h >> np.uint64(32)) * np.uint64(g)) >> np.uint64(32)


def seeded_hash(seeds: np.ndarray, keys: np.ndarray, g: int) -> np.ndarray:
    """``reduce(mix64(seed XOR a_v), g)`` (broadcasting ``seeds`` against ``keys``), as int64 in ``[0, g)``."""
    with np.errstate(over="ignore"):
        h = mix64(np.bitwise_xor(seeds, keys))
        return reduce(h, g).astype(np.int64)
