"""Continuous-valued Laplace and Gaussian noise on a power-of-two lattice.

Textbook floating-point Laplace/Gaussian samplers leak through the pattern of representable
outputs (Mironov 2012). Here the output is built from an *exact integer* sample instead:

    out = g * round_half_even(x / g) + g * Z

with ``g`` a power of two (the granularity) and ``Z`` an exact discrete Laplace (scale
``scale / g``) or discrete Gaussian (sigma ``sigma / g``) integer from
:mod:`dpkit.noise.samplers`. Because ``g`` is a power of two, ``x / g``, the rounding and both
products are exact in float64 (barring overflow, which is refused); the only rounding is the
final IEEE addition, which is correctly rounded, so the float output is a deterministic
function of the exact lattice point ``g * (round_half_even(x/g) + Z)`` -- post-processing of an
exact discrete mechanism, with no dependence on how the noise was computed. (When the lattice
point needs more than 53 significant bits the float is its correctly rounded value.)

Exact output law, elementwise and independent:
``P[out = fl(g (r + k))] = P[Z = k]``, ``r = round_half_even(x/g)``, with ``P[Z = k]``
proportional to ``exp(-|k| g / scale)`` (Laplace) or ``exp(-k**2 g**2 / (2 sigma**2))``
(Gaussian).

Rounding moves each value by at most ``g/2``, so the sensitivity of the rounded query is at most
``Delta_1 + coords * g`` (L1) or ``Delta_2 + sqrt(coords) * g`` (L2): mechanisms account for this;
:func:`lattice_granularity` picks ``g <= Delta / (coords * 2**bits)`` so the increase is small.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.noise import samplers as _s
from dpkit.noise import source as _source
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["lattice_gaussian", "lattice_granularity", "lattice_laplace"]


def lattice_granularity(sensitivity: float, coords: int = 1, bits: int = 20) -> float:
    """The largest power of two ``g <= sensitivity / (coords * 2**bits)`` (computed exactly)."""
    sens = check.positive("sensitivity", sensitivity)
    coords = check.integer("coords", coords, minimum=1)
    bits = check.integer("bits", bits, minimum=0)
    if bits > 200:
        raise InvalidParameter("bits", "must be <= 200")
    x = Fraction(sens) / (coords * 2**bits)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    # now 2**(e-1) < x < 2**(e+1); settle e = floor(log2 x)
    if Fraction(2) ** e > x:
        e -= 1
    if e < -1022:
        raise InvalidParameter("sensitivity", "too small for a float64 lattice with these coords and bits")
    return math.ldexp(1.0, e)


def _granularity(g: Any) -> float:
    g = check.positive("granularity", g)
    if math.frexp(g)[0] != 0.5 or g < 2.0**-1022:
        raise InvalidParameter("granularity", "must be a (normal) power of two, e.g. lattice_granularity(...)")
    return g


def _check_values(values: Any, g: float) -> np.ndarray:
    """Validated values; refuses a granularity so fine that ``values / g`` would overflow."""
    x = check.finite_array("values", values, allow_empty=True)
    if x.size:
        big = max(abs(float(np.max(x))), abs(float(np.min(x))))
        if not (math.isfinite(big / g) and math.isfinite(big + g)):
            raise InvalidParameter("granularity", "too small for the magnitude of values")
    return x


_BLOCK = _s._BLOCK  # the samplers' blocks
_EXACT_INT = 2**53
_CSUB = 1 << 14  # elements per piece of the lattice combine


def _exact_point(units: int, g: float) -> float:
    """The float nearest to the lattice point ``units * g`` (one correct rounding)."""
    try:
        return float(units * Fraction(g))
    except OverflowError:
        return math.copysign(math.inf, units)


def _combine(x: np.ndarray, g: float, z: np.ndarray | Iterable[np.ndarray],
             bounds: list[int | None] | None = None) -> np.ndarray:
    """``fl(g * (round_half_even(x / g) + z))``, block by block (no large temporaries); ``z`` is an int64 array
    of the size of ``x``, or consecutive blocks of it (used each while it is in cache).

    ``x * (1/g)`` (= ``x / g``: ``1/g`` is a power of two) and the rounding are exact (no overflow), ``z``
    converts exactly while ``|z| < 2**53``, and ``fl(r + z) * g`` is the correctly rounded value of the exact
    lattice point ``g (r + z)``: the one rounding is that of the integer ``r + z`` to 53 bits, and the scaling by
    the power of two ``g`` is exact because ``|g (r + z)|`` is 0 or at least ``g >= 2**-1022`` (normal), and
    overflows exactly when the correctly rounded value does. So each output is a function of that point alone.
    Entries with ``|z| >= 2**53`` (possible only for huge scales) are done in exact rational arithmetic with one
    final rounding, for the same guarantee. With ``bounds`` (filled by :func:`~dpkit.noise.samplers._noise_blocks`),
    a block whose sampler bounds its magnitudes below 2**53 skips the search for such entries.
    """
    flat = x.reshape(-1)
    out = np.empty(flat.size, dtype=np.float64)
    inv_g = 1.0 / g  # exact: g is a normal power of two >= 2**-1022, so 1/g <= 2**1022
    if isinstance(z, np.ndarray):
        zf = z.reshape(-1)
        z = (zf[i : i + _BLOCK] for i in range(0, zf.size, _BLOCK))
    start = 0
    for zb in z:
        stop = start + zb.size
        big_idx: list[int] = []
        zbig: list[int] = []
        known = None if bounds is None else bounds[0]
        if zb.size and (known is None or known >= _EXACT_INT) and max(-int(zb.min()), int(zb.max())) >= _EXACT_INT:
            big = np.abs(zb) >= _EXACT_INT
            big_idx = np.flatnonzero(big).tolist()
            zbig = [int(zb[i]) for i in big_idx]
            zb = np.where(big, 0, zb)
        for lo in range(0, zb.size, _CSUB):  # cache-sized pieces: the four passes reuse what the first loaded
            ob = out[start + lo : start + lo + _CSUB]
            np.multiply(flat[start + lo : start + lo + _CSUB], inv_g, out=ob)
            np.rint(ob, out=ob)  # round half to even
            np.add(ob, zb[lo : lo + _CSUB], out=ob)  # fl(r + z): z converts exactly (|z| < 2**53)
            ob *= g
        for i, zi in zip(big_idx, zbig, strict=True):  # r = rint(x / g), an exact integer-valued float
            out[start + i] = _exact_point(int(np.rint(flat[start + i] * inv_g)) + zi, g)
        start = stop
    assert start == flat.size
    return out.reshape(x.shape)


def lattice_laplace(values: ArrayLike, scale: float, granularity: float, rng: RandomSource | None = None) -> np.ndarray:
    """``g * round_half_even(values / g) + g * Z``, ``Z ~`` exact discrete Laplace of scale ``scale/g``.

    ``granularity`` ``g`` must be a power of two; ``scale / g`` must be in [2**-400, 2**50].
    Returns float64 of the shape of ``values``. See the module docstring for the exact law.
    """
    scale = check.positive("scale", scale)
    g = _granularity(granularity)
    t = scale / g  # exact (power-of-two division) unless out of range, refused below
    if not (_s._MIN_SCALE <= t <= _s._MAX_SCALE):
        raise InvalidParameter("scale", "divided by granularity must be between 2**-400 and 2**50")
    x = _check_values(values, g)
    rng = _source.resolve(rng)
    bounds: list[int | None] = [None]
    return _combine(x, g, _s._noise_blocks(False, t, x.size, rng, bounds=bounds), bounds)


def lattice_gaussian(values: ArrayLike, sigma: float, granularity: float,
                     rng: RandomSource | None = None) -> np.ndarray:
    """``g * round_half_even(values / g) + g * Z``, ``Z ~`` exact discrete Gaussian of sigma ``sigma/g``.

    ``granularity`` ``g`` must be a power of two; ``sigma / g`` must be in [2**-400, 2**50].
    Returns float64 of the shape of ``values``. See the module docstring for the exact law.
    """
    sigma = check.positive("sigma", sigma)
    g = _granularity(granularity)
    s = sigma / g
    if not (_s._MIN_SCALE <= s <= _s._MAX_SCALE):
        raise InvalidParameter("sigma", "divided by granularity must be between 2**-400 and 2**50")
    x = _check_values(values, g)
    rng = _source.resolve(rng)
    bounds: list[int | None] = [None]
    return _combine(x, g, _s._noise_blocks(True, s, x.size, rng, bounds=bounds), bounds)
