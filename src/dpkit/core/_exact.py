"""Exact (rational) helpers for budget arithmetic.

This module is the one home of dpkit's exact arithmetic: directed rounding of rationals to floats
(:func:`float_at_least`, :func:`float_at_most`, :func:`div_up`, :func:`div_down`, :func:`up`, :func:`down`),
the one bisection loop (:func:`bisect`, with :func:`expand` to find a bracket) and the one budget splitter.

:func:`split_budget` is the one budget splitter of dpkit: every family that divides a privacy parameter
into parts calls it, so "the parts sum to at most the whole" is proved once, in rational arithmetic,
and costs O(len(weights)) for any input (no loop that steps one ulp at a time).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType

__all__ = ["bisect", "div_down", "div_up", "down", "down_until", "exact_sum", "expand", "first_true",
           "float_at_least", "float_at_most", "split_budget", "up", "up_until"]

#: More parts than this is refused (a split is data-independent bookkeeping; nothing needs millions).
MAX_PARTS = 1_000_000


def float_at_most(x: Fraction) -> float:
    """The largest float ``f`` with ``Fraction(f) <= x`` (``x`` finite, ``|x| <= max float``).

    ``float(Fraction)`` rounds correctly to nearest, so at most one step down is needed; ``-inf`` / the largest
    float for an ``x`` beyond the float range."""
    try:
        f = float(x)
    except OverflowError:
        return 1.7976931348623157e308 if x > 0 else -math.inf
    if math.isfinite(f) and Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def float_at_least(x: Fraction) -> float:
    """The smallest float ``f`` with ``Fraction(f) >= x``, or ``inf`` when ``x`` is beyond the largest float.

    One correctly rounded conversion and at most one step up: O(1) for any ``x``."""
    try:
        f = float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf
    if math.isfinite(f) and Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


def split_budget(total: Any, weights: Any, *, name: str = "weights", total_name: str = "epsilon") -> list[float]:
    """Split ``total`` (> 0, finite) into parts proportional to the public positive ``weights``.

    Each part is the largest float at most ``total * w_i / sum(w)`` computed exactly in rationals, so
    every part is a float ``> 0`` and the **exact** sum of the parts is ``<= total``. A single weight gets
    ``total`` itself. Raises :class:`WrongType` / :class:`InvalidParameter` naming ``name`` for bad
    weights and naming ``total_name`` when ``total`` is invalid or too small for some part to be positive.
    Never echoes a value.
    """
    tot = check.positive(total_name, total)
    if weights is None or isinstance(weights, (str, bytes)):
        raise WrongType(name, "a sequence of positive weights")
    try:
        items = list(weights)
    except TypeError:
        raise WrongType(name, "a sequence of positive weights") from None
    if not items:
        raise InvalidParameter(name, "must not be empty")
    if len(items) > MAX_PARTS:
        raise InvalidParameter(name, "has too many entries")
    w = [Fraction(check.positive(name, x)) for x in items]
    if len(w) == 1:
        return [tot]
    wsum = sum(w)
    whole = Fraction(tot)
    parts = [float_at_most(whole * x / wsum) for x in w]
    if not all(p > 0 for p in parts):
        raise InvalidParameter(total_name, "too small to split into positive parts")
    return parts


def div_up(num: Any, den: Any) -> float:
    """The smallest float ``>= num / den``, computed exactly in rationals (``num``, ``den`` floats, ints or
    :class:`~fractions.Fraction`; ``den != 0``)."""
    return float_at_least(Fraction(num) / Fraction(den))


def div_down(num: Any, den: Any) -> float:
    """The largest float ``<= num / den``, computed exactly in rationals."""
    return float_at_most(Fraction(num) / Fraction(den))


def up(x: float, k: int = 1) -> float:
    """``x`` moved up by ``k`` ulps: a safe upper bound for a float result computed with ``k`` roundings."""
    for _ in range(k):
        x = math.nextafter(x, math.inf)
    return x


def down(x: float, k: int = 1) -> float:
    """``x`` moved down by ``k`` ulps: a safe lower bound for a float result computed with ``k`` roundings."""
    for _ in range(k):
        x = math.nextafter(x, -math.inf)
    return x


def up_until(ok: Any, x: float) -> float:
    """``x`` moved up one ulp at a time until ``ok(x)`` holds (``ok`` monotone, exact, e.g. a rational check of
    ``s² >= need``): the fix-up after a float estimate that may be a few ulps low. The caller's estimate must be
    within a few ulps, as every caller's is (a correctly rounded ``sqrt`` or quotient)."""
    while not ok(x):
        x = math.nextafter(x, math.inf)
    return x


def down_until(ok: Any, x: float) -> float:
    """``x`` moved down one ulp at a time until ``ok(x)`` holds: the mirror of :func:`up_until` (a float estimate
    a few ulps high, fixed by an exact check)."""
    while not ok(x):
        x = math.nextafter(x, -math.inf)
    return x


def bisect(ok: Any, lo: float, hi: float, *, rel_tol: float = 1e-12, max_iter: int = 200,
           geometric: bool = False) -> tuple[float, float]:
    """Narrow a bracket of a monotone predicate: ``ok`` is False at ``lo`` and True at ``hi`` (the caller
    has checked both) and switches once in between. Returns the final ``(lo, hi)`` with the same invariant,
    so ``hi`` is the smallest point found where ``ok`` holds (as computed) and ``lo`` the largest where it
    fails. Stops when ``hi - lo <= rel_tol * |hi|``, after ``max_iter`` halvings, or when the midpoint is
    no longer strictly inside (float resolution). ``geometric=True`` splits at ``sqrt(lo * hi)`` (for
    positive brackets spanning many orders of magnitude).

    This is dpkit's one bisection loop: calibrations (a noise scale for a target half-width, the smallest
    sigma for an (ε, δ) pair, the largest ρ implying (ε, δ)) call it and keep the side that is safe for
    privacy, so a rounding error can cost accuracy, never privacy.
    """
    for _ in range(max_iter):
        if hi - lo <= rel_tol * abs(hi):
            break
        mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def first_true(ok: Any, lo: int, hi: int) -> int:
    """The smallest integer ``k`` in ``[lo, hi]`` with ``ok(k)``, for a monotone predicate (False then True)
    with ``ok(hi)`` True (the caller has checked it): binary search, ``O(log(hi - lo))`` calls."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def expand(ok: Any, x: float, factor: float, *, limit: float) -> float | None:
    """Multiply ``x`` by ``factor`` (> 1 to grow, in (0, 1) to shrink) until ``ok(x)`` holds; ``None`` once
    ``x`` passes ``limit`` without it. Finds the far end of a bracket for :func:`bisect`."""
    grow = factor > 1
    while not ok(x):
        x *= factor
        if (grow and x > limit) or (not grow and x < limit):
            return None
    return x


# ---------------------------------------------------------------------------------------------
# the exact sum of float64 values (issue #16: at memory speed, still exact)
# ---------------------------------------------------------------------------------------------
_BLOCK_BITS = 15  # blocks of 2^15 values (256 KiB): every pass of a block stays in cache
_BLOCK = 1 << _BLOCK_BITS
_LEVEL_BITS = 37  # |v| <= 2^37 units per value: a block's partial sums stay <= 2^52 units (exact in float64)
_PART_BITS = 18
_PART_MASK = (1 << _PART_BITS) - 1


def exact_sum(values: Any, *, clamp: tuple[float, float] | None = None) -> Fraction:
    """The exact sum of float64 ``values`` (clamped to ``clamp = (lo, hi)`` first when given), as a
    :class:`~fractions.Fraction`: no rounding at all, whatever the magnitudes, signs, order or length.

    **Method** (one read of the data, in cache-sized blocks of ``2^15`` values). Let ``M`` bound ``|x|`` (from
    ``clamp``, else ``max(|min|, |max|)``) and ``s₁ = 2^E₁`` the power of two with ``M <= 2^37 s₁``. For a level
    ``s = 2^E`` and ``C = 1.5·2^(E+52)``, ``h = fl(fl(x + C) - C)`` is ``x`` rounded to the nearest multiple of
    ``s`` *exactly* (``x + C`` lies in ``[2^(E+52), 2^(E+53))`` where the float spacing is ``s``, and the
    subtraction is exact by Sterbenz's lemma), and ``r = fl(x - h)`` is exact (``|r| <= s/2`` is a multiple of
    ``ulp(x) <= s``). Each ``h`` is a multiple of ``s`` with ``|h| <= 2^37 s``, so every partial sum of a block's
    ``h`` is a multiple of ``s`` below ``2^52 s``: numpy's float sum of a block is exact in any order, and the
    block totals are added in Python integers. A second level ``s₂ = s₁·2^-38`` takes the remainders; the few
    values with bits below ``s₂·2^-1`` (magnitudes below about ``M·2^-22``: tiny values, subnormals) keep a
    non-zero remainder, which is summed exactly by the per-exponent integer method (``np.frexp``, 18-bit pieces,
    ``np.bincount``). A block whose remainders are all zero after the first level (integer-valued data, a coarse
    grid) skips the second. Cost: about 5–6 passes over a block in cache; the figures are in
    ``docs/benchmarks.md`` (issue #16).

    ``values`` must be finite (callers validate with :func:`dpkit.core._validate.real_data`); a NaN or an
    infinity raises :class:`~dpkit.core.errors.InvalidData`.

    >>> exact_sum([0.1, 0.2]) == Fraction(0.1) + Fraction(0.2)
    True
    >>> exact_sum([1e308, 1e308, -1e308]) == Fraction(1e308)
    True
    >>> exact_sum([-5.0, 0.5, 7.0], clamp=(0.0, 1.0)) == Fraction(3, 2)
    True
    """
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    n = int(arr.size)
    if n == 0:
        return Fraction(0)
    if clamp is not None:
        lo, hi = float(clamp[0]), float(clamp[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise InvalidParameter("bounds", "needs finite lo <= hi")
        bound = max(abs(lo), abs(hi))
    else:
        a, b = float(arr.min()), float(arr.max())
        if not (math.isfinite(a) and math.isfinite(b)):
            raise InvalidData("values", "contains NaN or infinite values")
        bound = max(abs(a), abs(b))
    if bound == 0.0:  # every (clamped) value is ±0
        return Fraction(0)
    e = math.frexp(bound)[1]  # bound < 2^e
    e1 = e - _LEVEL_BITS
    e2 = e1 - _LEVEL_BITS - 1
    if e1 + 53 > 1023 or e1 < -1074:  # magnitudes at the ends of the float range
        src = np.clip(arr, lo, hi) if clamp is not None else arr
        if not np.isfinite(src).all():
            raise InvalidData("values", "contains NaN or infinite values")
        return _exact_sum_pieces(src)
    levels = [(e1, 1.5 * math.ldexp(1.0, e1 + 52))]
    if e2 >= -1074:
        levels.append((e2, 1.5 * math.ldexp(1.0, e2 + 52)))
    units = [0] * len(levels)
    size = min(_BLOCK, n)
    buf = np.empty(size)
    tmp = np.empty(size)
    rest: list[Any] = []
    deep = False  # did the previous block need the second level? (then skip the first level's zero test)
    for i in range(0, n, _BLOCK):
        xb = arr[i:i + _BLOCK]
        m = int(xb.size)
        r, t = buf[:m], tmp[:m]
        src = xb
        if clamp is not None:
            src = np.clip(xb, lo, hi, out=r)
        done = False
        for k, (ek, big) in enumerate(levels):
            np.add(src, big, out=t)
            t -= big  # t = src rounded to the nearest multiple of 2^ek, exactly
            total = float(t.sum())  # exact: a multiple of 2^ek below 2^52 * 2^ek
            if not math.isfinite(total):
                raise InvalidData("values", "contains NaN or infinite values")
            units[k] += int(math.ldexp(total, -ek))
            np.subtract(src, t, out=r)  # the exact remainder, |r| <= 2^(ek-1)
            src = r
            if (k > 0 or not deep) and not r.any():
                done = True
                break
        deep = not done or k > 0
        if not done:
            rest.append(r[np.flatnonzero(r)].copy())
    out = Fraction(0)
    for (ek, _), u in zip(levels, units, strict=True):
        out += Fraction(u) * (Fraction(2) ** ek)
    if rest:
        out += _exact_sum_pieces(np.concatenate(rest))
    return out


def _exact_sum_pieces(arr: Any) -> Fraction:
    """The exact sum by exponent classes (the reference method, used for the rare remainders).

    Each value is ``m · 2^(e-53)`` with an integer ``|m| < 2^53`` (``np.frexp``). The magnitudes ``|m|`` are cut
    into three 18-bit pieces and summed per (exponent, sign) class with ``np.bincount``; every partial sum is an
    integer below ``2^53`` (for fewer than ``2^35`` values), so the float accumulation is exact. The class
    totals are combined in Python integers."""
    arr = np.asarray(arr, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        return Fraction(0)
    if arr.size >= 2**35:  # pragma: no cover - far beyond memory
        half = arr.size // 2
        return _exact_sum_pieces(arr[:half]) + _exact_sum_pieces(arr[half:])
    mant, ex = np.frexp(arr)
    m = np.ldexp(mant, 53).astype(np.int64)  # exact: |mant| < 1 has at most 53 significant bits
    neg = m < 0
    mag = np.abs(m)
    emin = int(ex.min())
    emax = int(ex.max())
    idx = (ex.astype(np.int64) - emin) * 2 + neg
    nbins = 2 * (emax - emin + 1)
    total = 0
    for shift in (0, _PART_BITS, 2 * _PART_BITS):
        part = ((mag >> shift) & _PART_MASK).astype(np.float64)
        sums = np.bincount(idx, weights=part, minlength=nbins)
        for b in np.flatnonzero(sums):
            v = int(sums[b]) << (shift + int(b) // 2)
            total += -v if b % 2 else v
    return Fraction(total) * Fraction(2) ** (emin - 53)
