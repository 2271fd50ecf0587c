"""Private helpers shared by the stability-based mechanisms.

Nothing here draws randomness or charges an accountant; everything is a pure function of its
arguments. Order statistics use the *padded* convention of Nissim, Raskhodnikova & Smith (2007):
for a sorted sample ``x_(1) <= ... <= x_(n)`` inside public bounds ``[lo, hi]``, ``x_(i) = lo`` for
``i < 1`` and ``x_(i) = hi`` for ``i > n`` (indices are 1-based throughout).
"""

from __future__ import annotations

import functools
import math
from decimal import Context, Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.neighbours import AddRemove, PrivacyUnit
from dpkit.mechanisms.contract import resolve_neighbours

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

# relative slack for float evaluations of data-dependent statistics (fsum means): outputs of a
# statistic evaluated in float64 are within 4 ulps of the exact real value; we budget
# FLOAT_SLACK * max(|lo|, |hi|) for it wherever a sensitivity must hold for the float values.
FLOAT_SLACK = 2.0**-48


def refuse_units(nb: Neighbours, what: str) -> None:
    """The data-dependent (local/smooth/PTR) analyses here are record-level: refuse privacy units."""
    if isinstance(nb, PrivacyUnit):
        raise InvalidParameter("neighbours", f"{what} supports AddRemove() and Replace() only (record-level "
                               "analysis); for privacy units use the global-sensitivity statistics")


def relation(neighbours: Neighbours | None, accountant: Accountant | None, what: str) -> Neighbours:
    """The call's neighbour relation (:func:`~dpkit.mechanisms.contract.resolve_neighbours`), privacy units
    refused."""
    nb = resolve_neighbours(neighbours, accountant)
    refuse_units(nb, what)
    return nb


def is_add_remove(nb: Neighbours) -> bool:
    return isinstance(nb, AddRemove)


def approx_delta(value: Any) -> float:
    """delta of an (epsilon, delta) mechanism: in (0, 1)."""
    return check.delta(value, allow_zero=False)


def share(name: str, value: Any) -> float:
    """A budget share strictly between 0 and 1."""
    return check.probability(name, value)


def sorted_clipped(values: Any, bounds: Any, nan_policy: str) -> tuple[np.ndarray, float, float]:
    """Validated data, clamped into the public bounds and sorted."""
    arr = check.real_data(values, nan_policy=nan_policy)
    lo, hi = check.bounds(bounds)
    return np.sort(check.clamp(arr, lo, hi)), lo, hi


def order_stat(xs: np.ndarray, idx: Any, lo: float, hi: float) -> np.ndarray:
    """Padded order statistics ``x_(idx)`` (1-based; ``lo`` below 1, ``hi`` above n), elementwise."""
    idx = np.asarray(idx, dtype=np.int64)
    n = xs.size
    if n == 0:
        return np.where(idx < 1, lo, hi).astype(np.float64)
    inner = xs[np.clip(idx - 1, 0, n - 1)]
    return np.where(idx < 1, lo, np.where(idx > n, hi, inner)).astype(np.float64)


def median_value(xs: np.ndarray, lo: float, hi: float) -> float:
    """The *lower* median ``x_(ceil(n/2))`` of sorted clamped data (``lo`` for an empty sample)."""
    n = xs.size
    return float(order_stat(xs, [(n + 1) // 2], lo, hi)[0])


def mean_value(xs: np.ndarray, lo: float, hi: float) -> float:
    """The mean of clamped data, correctly rounded sum (``math.fsum``) over n; the midpoint if empty."""
    if xs.size == 0:
        return lo / 2.0 + hi / 2.0
    return math.fsum(xs.tolist()) / xs.size


def magnitude(lo: float, hi: float) -> float:
    return max(abs(lo), abs(hi))


def power_of_two(name: str, value: Any) -> float:
    g = check.positive(name, value)
    if math.frexp(g)[0] != 0.5 or g < 2.0**-1000:
        raise InvalidParameter(name, "must be a (normal) power of two")
    return g


def floor_pow2(x: float) -> float:
    """The largest power of two <= x (x > 0, finite)."""
    _, e = math.frexp(x)
    return math.ldexp(1.0, e - 1)


# ---------------------------------------------------------------------------------------------
# discrete-Laplace thresholds (exact)
# ---------------------------------------------------------------------------------------------

_CTX = Context(prec=80)


def _log_tail_margin(t: float, m: int, delta: float) -> Decimal:
    """``ln P[Z >= m] - ln delta`` for ``Z ~ DLap(t)`` (``P[Z >= m] = q^m / (1 + q)``, ``q = e^{-1/t}``,
    ``m >= 1``), in 80-digit decimal arithmetic (exp/ln correctly rounded)."""
    c = _CTX
    tt = Decimal(t)  # exact
    log_q = c.minus(c.divide(Decimal(1), tt))
    q = c.exp(log_q)
    val = c.subtract(c.subtract(c.multiply(Decimal(m), log_q), c.ln(c.add(Decimal(1), q))), c.ln(Decimal(delta)))
    return val


def dlap_tail_at_most(t: float, m: int, delta: float) -> bool:
    """Certainly ``P[Z >= m] <= delta`` for ``Z ~ DLap(t)`` and an integer ``m >= 1`` (a margin of
    1e-60 absorbs the decimal rounding; a borderline case answers False, which is the safe side)."""
    return _log_tail_margin(t, m, delta) < Decimal("-1e-60")


@functools.lru_cache(maxsize=256)
def dlap_threshold(t: float, delta: float) -> int:
    """The smallest integer ``m >= 1`` with ``P[Z >= m] <= delta`` for ``Z ~ DLap(t)`` (certified).

    ``P[Z >= m] = q^m / (1 + q)`` with ``q = exp(-1/t)``; so ``m = ceil(t (ln(1/delta) - ln(1 + q)))``
    up to rounding, checked and adjusted in 80-digit decimal arithmetic.
    """
    if not delta > 0:  # a share of a subnormal delta can round to 0
        raise InvalidParameter("delta", "too small (a part of it rounds to zero)")
    q = math.exp(-1.0 / t)
    guess = t * (-math.log(delta) - math.log1p(q))
    m = max(1, math.ceil(guess)) if math.isfinite(guess) else 1
    while not dlap_tail_at_most(t, m, delta):
        m += 1
    while m > 1 and dlap_tail_at_most(t, m - 1, delta):
        m -= 1
    return m


def dlap_tail(t: float, m: int) -> float:
    """``P[Z >= m]`` for ``Z ~ DLap(t)`` and integer ``m`` (float, for reporting)."""
    q = math.exp(-1.0 / t)
    if m >= 1:
        return q**m / (1.0 + q)
    return 1.0 - q ** (1 - m) / (1.0 + q)


def check_callable(name: str, func: Any) -> Any:
    if not callable(func):
        raise WrongType(name, "a callable")
    return func
