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
_LEVEL_BITS = 62 - _BLOCK_BITS - 1  # |h| <= 2^46 units per value: a block's integer sum stays below 2^61
_FINE_BITS = _LEVEL_BITS + 1 + 53 - _BLOCK_BITS  # 85: a remainder sum is exact on the grid 2^(e-85) ...
_TINY_BITS = _FINE_BITS - 52  # 33: ... when every non-zero value is >= 2^(e-33)
_PART_BITS = 18
_PART_MASK = (1 << _PART_BITS) - 1
_WRAP = 1 << 64
_CLIP: Any = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None) or np.clip  # the ufunc
_EINSUM: Any = getattr(getattr(getattr(np, "_core", None), "multiarray", None), "c_einsum", None) or np.einsum
# (numpy's own loops without the Python wrappers: per block they cost as much as a pass; einsum's float sum is
# faster than add.reduce's pairwise one, and order does not matter where it is used: every partial sum is exact)


def _bits(x: float) -> int:
    """The IEEE-754 bit pattern of the float64 ``x`` as a non-negative integer."""
    return int(np.array([x], dtype=np.float64).view(np.uint64)[0])


def _non_finite(values: Any) -> bool:
    """Whether ``values`` holds a NaN or an infinity (one sum; a sum that overflows is checked value by value)."""
    return not math.isfinite(float(_EINSUM("i->", values))) and not bool(np.isfinite(values).all())


def exact_sum(values: Any, *, clamp: tuple[float, float] | None = None, strict: bool = False) -> Fraction:
    """The exact sum of float64 ``values`` (clamped to ``clamp = (lo, hi)`` first when given), as a
    :class:`~fractions.Fraction`: no rounding at all, whatever the magnitudes, signs, order or length.

    **Method** (one read of the data, in cache-sized blocks of ``2^15`` values). Let ``M < 2^e`` bound ``|x|``
    (from ``clamp``, else ``max(|min|, |max|)``): the grids below are fixed by ``e`` alone, never by the values.

    1. *First level*, ``s₁ = 2^(e-46)``, ``C = 1.5·2^(e-46+52)``: ``u = fl(x + C)`` is exactly ``C + h`` with
       ``h`` = ``x`` rounded to the nearest multiple of ``s₁`` (``x + C`` lies in ``[2^(e+6), 2^(e+7))``, where the
       float spacing is ``s₁``), so the bit pattern of ``u`` read as an integer is ``bits(C) + h/s₁``: numpy's
       ``int64`` sum of a block's bit patterns (modulo ``2^64``) minus ``m·bits(C)`` is ``Σh/s₁`` exactly, since
       ``|Σh/s₁| <= 2^15·2^46 < 2^63`` (the wrapped differences are taken in ``int64``, one per block, and added
       in Python integers). ``h = fl(u - C)`` (Sterbenz) and ``r = fl(x - h)`` are exact (``|r| <=
       s₁/2`` is a multiple of ``ulp(x) <= s₁``). A block whose values all equal their ``h`` (integer-valued data,
       a coarse grid) is done here.
    2. *Remainders*, when every non-zero value of the block has ``|x| >= 2^(e-33)`` (so ``ulp(x) >= g =
       2^(e-85)``): every ``r`` is a multiple of ``g`` and every partial sum of the block's remainders is a
       multiple of ``g`` of magnitude at most ``2^15·2^(e-47) = 2^53 g``, hence exactly representable, so numpy's
       float sum of the remainders (``einsum``) is exact in any order. The test reads the bit patterns of the
       clamped values as unsigned integers: for ``x >= 0`` one minimum, ``min bits(x) >= bits(2^(e-33))`` (a lower
       bound of 0 is clamped to ``-0``, whose pattern is at the top of the unsigned order); if a ``+0`` fails it,
       a second pass on ``bits(x) - 1`` (``+0`` wraps to the top); for bounds of both signs the same on ``|x|``;
       and no test at all when the bounds exclude ``(-2^(e-33), 2^(e-33))``.
    3. Otherwise (tiny values, subnormals in the block), a *second level* ``s₂ = 2^(e-93)`` as in step 1 takes
       the remainders, and the values still off that grid (``r != h₂``; magnitudes below about ``M·2^-40``)
       keep exact remainders that are summed by the per-exponent integer method (:func:`_exact_sum_pieces`).

    Per block of generic non-negative floats: the clamping (the one read from memory), then six passes in cache
    (add, integer sum, subtract, minimum, subtract, float sum); integer-valued blocks: add, integer sum,
    subtract, compare. The figures are in ``docs/benchmarks.md`` (issue #16). Bounds beyond ``2^1016`` or below
    ``2^-981`` use :func:`_exact_sum_pieces` throughout.

    ``values`` must be finite (callers validate with :func:`dpkit.core._validate.real_data`): a NaN raises
    :class:`~dpkit.core.errors.InvalidData`, and so does an infinity without ``clamp``; with ``clamp`` an
    infinity is clamped to the bound unless ``strict=True``, which refuses NaN and ``±inf`` before the clamping:
    the finiteness check of :func:`~dpkit.core._validate.real_data` (one float sum per block) fused into the
    loop, as :func:`dpkit.stats.mean` uses it.

    >>> exact_sum([0.1, 0.2]) == Fraction(0.1) + Fraction(0.2)
    True
    >>> exact_sum([1e308, 1e308, -1e308]) == Fraction(1e308)
    True
    >>> exact_sum([-5.0, 0.5, 7.0], clamp=(0.0, 1.0)) == Fraction(3, 2)
    True
    """
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    n = int(arr.size)
    if clamp is not None:
        lo, hi = float(clamp[0]), float(clamp[1])
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise InvalidParameter("bounds", "needs finite lo <= hi")
    if n == 0:
        return Fraction(0)
    if clamp is None:
        lo, hi = float(arr.min()), float(arr.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise InvalidData("values", "contains NaN or infinite values")
    bound = max(abs(lo), abs(hi))
    e = math.frexp(bound)[1]  # bound < 2^e
    if bound == 0.0 or not -981 <= e <= 1016:  # all ±0, or magnitudes at the ends of the float range
        with np.errstate(over="ignore"):
            if strict and _non_finite(arr):
                raise InvalidData("values", "contains NaN or infinite values")
        src = np.clip(arr, lo, hi) if clamp is not None else arr
        if not np.isfinite(src).all():
            raise InvalidData("values", "contains NaN or infinite values")
        return Fraction(0) if bound == 0.0 else _exact_sum_pieces(src)
    e1, e2, eg = e - _LEVEL_BITS, e - 2 * _LEVEL_BITS - 1, e - _FINE_BITS
    big1, big2 = 1.5 * math.ldexp(1.0, e1 + 52), 1.5 * math.ldexp(1.0, e2 + 52)  # normal: e2 >= -1074
    k1, k2 = _bits(big1), _bits(big2)
    tiny = math.ldexp(1.0, e - _TINY_BITS)
    t_bits = _bits(tiny)
    mode = 0 if (lo >= tiny or hi <= -tiny) else 1 if lo >= 0.0 else 2  # the test of step 2: none, x >= 0, |x|
    if mode == 1 and lo == 0.0:
        lo = -0.0  # clamped values land on -0 (top of the unsigned order): the one-pass test passes over them
    size = min(_BLOCK, n)
    nblocks = -(-n // _BLOCK)
    sums1 = np.zeros(nblocks, dtype=np.int64)  # per block: the int64 sum of the bit patterns of u (wrapped)
    sums2 = np.zeros(nblocks, dtype=np.int64)  # the same at the second level (where it ran)
    ran2 = np.zeros(nblocks, dtype=np.bool_)
    fine = np.zeros(nblocks)  # per block: the exact float sum of the remainders (where step 2 applied)
    buf = np.empty(size)  # the clamped values, then the remainders
    tmp = np.empty(size)  # u, then h; then scratch
    flags = np.empty(size, dtype=np.bool_)
    views: tuple[Any, ...] = (buf, tmp, tmp.view(np.int64), buf.view(np.uint64), flags)
    aux: Any = None  # scratch for the slower tests (mixed signs, +0 in the block)
    add, sub, neq, clip = np.add, np.subtract, np.not_equal, _CLIP
    isum, fsum, umin = np.add.reduce, _EINSUM, np.minimum.reduce
    rest: list[Any] = []
    deep = False  # has a block needed the remainders? (then skip the first level's test)
    with np.errstate(over="ignore"):  # strict's sum of a block may overflow (then checked value by value)
        for j in range(nblocks):
            xb = arr[j * _BLOCK:(j + 1) * _BLOCK]
            m = int(xb.size)
            c, t, ti, cu, f = views if m == size else (v[:m] for v in views)
            if strict and _non_finite(xb):
                raise InvalidData("values", "contains NaN or infinite values")
            src = clip(xb, lo, hi, out=c) if clamp is not None else xb  # the one read from memory
            add(src, big1, out=t)  # u = C + (x rounded to the nearest multiple of s₁), exactly
            sums1[j] = isum(ti)  # Σbits(u) modulo 2^64
            t -= big1  # h, exactly (a NaN stays NaN)
            if not deep:
                neq(src, t, out=f)
                if not f.any():  # every value is on the first grid: nothing remains
                    continue
                deep = True
            ok = mode == 0  # step 2's test, on the clamped values
            if not ok:
                if mode == 1:
                    a = cu if clamp is not None else src.view(np.uint64)
                else:
                    aux = np.empty(size) if aux is None else aux
                    a = np.abs(src, out=aux[:m]).view(np.uint64)
                ok = int(umin(a)) >= t_bits  # no value in [+0, 2^(e-33)) (-0 is at the top)
                if not ok:  # +0 is harmless too: bits - 1 moves it to the top
                    aux = np.empty(size) if aux is None else aux
                    au = aux[:m].view(np.uint64)
                    sub(a, np.uint64(1), out=au)
                    ok = int(umin(au)) >= t_bits - 1
            if clamp is not None:
                c -= t  # the exact remainders, |r| <= s₁/2
            else:
                sub(xb, t, out=c)
            total = float(fsum("i->", c))
            if ok and total - total == 0.0:  # finite (a NaN makes it NaN); every partial sum a multiple of g, exact
                fine[j] = total
                continue
            add(c, big2, out=t)  # the second level on the remainders
            sums2[j] = isum(ti)
            ran2[j] = True
            t -= big2
            neq(c, t, out=f)  # a value with bits below the second grid (or a NaN)
            if f.any():
                w = np.flatnonzero(f)
                rest.append(c[w] - t[w])  # exact, as at the first level
    counts = np.full(nblocks, _BLOCK, dtype=np.int64)
    counts[-1] = n - (nblocks - 1) * _BLOCK
    # int64 arithmetic wraps modulo 2^64, and each block's Σh/s fits in int64: the differences are exact
    u1 = sum((sums1 - counts * np.int64(k1)).tolist())
    u2 = sum((sums2[ran2] - counts[ran2] * np.int64(k2)).tolist())
    ug = sum(np.ldexp(fine, -eg).astype(np.int64).tolist())  # exact integers below 2^53
    out = Fraction(u1) * Fraction(2) ** e1 + Fraction(u2) * Fraction(2) ** e2 + Fraction(ug) * Fraction(2) ** eg
    if rest:
        left = np.concatenate(rest)
        if not np.isfinite(left).all():  # a NaN never equals its rounding, so it always lands here
            raise InvalidData("values", "contains NaN or infinite values")
        out += _exact_sum_pieces(left)
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
