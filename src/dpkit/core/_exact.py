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

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType

__all__ = ["bisect", "div_down", "div_up", "down", "down_until", "expand", "first_true", "float_at_least",
           "float_at_most", "split_budget", "up", "up_until"]

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
