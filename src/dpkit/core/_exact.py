"""Exact (rational) helpers for budget arithmetic.

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

__all__ = ["float_at_least", "float_at_most", "split_budget"]

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
