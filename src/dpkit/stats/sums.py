"""The differentially private sum of bounded values, computed exactly.

Also home of the exact machinery that :mod:`dpkit.stats.mean` and :mod:`dpkit.stats.variance` reuse:

- :func:`exact_sum` (:func:`dpkit.core._exact.exact_sum`): the *exact* sum of float64 values (a
  :class:`~fractions.Fraction`), so that no floating-point summation error ever enters a sensitivity argument;
- :class:`LatticeSum`: the Laplace mechanism on an exact rational value, produced on the lattice
  ``g Z`` exactly as :func:`dpkit.mechanisms.laplace` does (same ``g`` and scale), with a vectorised
  ``draw`` used by the statistics and by their audits.

Why exactness matters. A Laplace release ``g·round(f(D)/g) + g·Z`` is exactly ``epsilon``-DP when
``|f(D) - f(D')| <= Δ`` holds for the function that is actually computed. A float sum ``fl(Σx)``
is not ``Σx``: its error depends on the data and on the summation order and can, in principle, push
``round(f(D)/g) - round(f(D')/g)`` one step beyond the accounted bound. Here ``f(D)`` is the exact
sum of the clamped records (every float64 is a dyadic rational, and the sum is accumulated in
integers), so the sensitivity holds exactly.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.neighbours import AddRemove, validate_neighbours
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource
from dpkit.stats import _common

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["exact_sum", "sum", "sum_sensitivity"]


# ---------------------------------------------------------------------------------------------
# exact arithmetic helpers
# ---------------------------------------------------------------------------------------------
exact_sum = _exact.exact_sum  # the one home of the exact sum (dpkit.core._exact; clamp= fuses the clamping)


def finite(param: str, f: float) -> float:
    """``f`` (a directed rounding from :mod:`dpkit.core._exact`), refused with ``InvalidParameter(param)`` when it
    left the float range (a public quantity too large for float64 arithmetic)."""
    if not math.isfinite(f):
        raise InvalidParameter(param, "too large for float64 arithmetic")
    return f


def to_float(x: Fraction) -> float:
    """``x`` correctly rounded to a float (±inf beyond the float range)."""
    try:
        return float(x)
    except OverflowError:
        return math.copysign(math.inf, x)


class LatticeSum:
    """The Laplace mechanism on an exact rational value, on the lattice ``g Z``.

    ``sensitivity`` is the exact (rational) L1 sensitivity of the value under the neighbour
    relation in use. ``g, b = laplace_scale(s, epsilon)`` with ``s`` the smallest float >= the
    sensitivity: ``g`` is the largest power of two ``<= s / 2^20`` and ``b`` the smallest float
    ``>= (s + g) / epsilon`` -- exactly the calibration of :func:`dpkit.mechanisms.laplace`.

    Output law: ``g · (round_half_even(v / g) + Z)`` (rounded once to float), ``Z`` exact discrete
    Laplace of scale ``t = b / g`` (an exact float). For neighbours, ``|v - v'| <= s`` gives
    ``|round(v/g) - round(v'/g)| <= floor(s/g) + 1 <= (s + g)/g``, and the discrete Laplace pmf ratio
    of shifts by ``k`` is at most ``exp(k / t) <= exp(epsilon)``: exactly ``epsilon``-DP. The lattice
    ``g Z`` depends on public quantities only. ``|released - v| <= g/2 + g|Z|`` (``Release.interval``
    with ``noise="lattice_laplace"`` uses exactly this law).
    """

    def __init__(self, sensitivity: Fraction, epsilon: float, *, param: str = "bounds") -> None:
        from dpkit.mechanisms.laplace import laplace_scale

        self.sensitivity = finite("bounds", _exact.float_at_least(Fraction(sensitivity)))
        try:
            self.g, self.b = laplace_scale(self.sensitivity, epsilon)
        except InvalidParameter as exc:
            if exc.param == "sensitivity":
                raise InvalidParameter(param, "outside the range the exact lattice arithmetic supports") from None
            raise
        self.t = self.b / self.g  # exact: g is a power of two and t is in the samplers' range
        self.epsilon = float(epsilon)

    def centre(self, value: Fraction) -> int:
        """``round_half_even(value / g)`` exactly (Python's ``round`` on a Fraction)."""
        return round(Fraction(value) / Fraction(self.g))

    def draw(self, r: int, size: int, rng: RandomSource) -> np.ndarray:
        """``size`` independent releases ``fl(g (r + Z))`` for the lattice centre ``r``."""
        from dpkit.noise import sample_discrete_laplace

        z = np.asarray(sample_discrete_laplace(self.t, size, rng=rng), dtype=np.int64).reshape(-1)
        if abs(r) < 2**52 and (z.size == 0 or int(np.max(np.abs(z))) < 2**52):
            units = np.int64(r) + z  # |.| < 2^53: exact in int64 and in float64
            return units.astype(np.float64) * self.g  # exact (power of two; the result is a normal float)
        fg = Fraction(self.g)
        return np.array([to_float((r + int(k)) * fg) for k in z], dtype=np.float64)

    def halfwidth(self, confidence: float) -> float:
        """``h`` with ``P[|released - value| > h] <= 1 - confidence`` (before the float rounding)."""
        from dpkit.mechanisms.accuracy import laplace_halfwidth

        return laplace_halfwidth(self.b, confidence, granularity=self.g)


def widen(lo: float, hi: float, slack: float = 0.0) -> tuple[float, float]:
    """``[lo - slack, hi + slack]`` rounded outwards by one ulp on each side."""
    return _exact.down(lo - slack - math.ulp(lo)), _exact.up(hi + slack + math.ulp(hi))


# ---------------------------------------------------------------------------------------------
# sensitivity
# ---------------------------------------------------------------------------------------------
def exact_sum_sensitivity(lo: float, hi: float, nb: Neighbours) -> Fraction:
    """Exact L1 sensitivity of the sum of values clamped to ``[lo, hi]`` under the relation ``nb``."""
    if _common.is_replace(nb):
        return Fraction(hi) - Fraction(lo)
    return _common.unit_rows(nb) * max(abs(Fraction(lo)), abs(Fraction(hi)))


def sum_sensitivity(bounds: tuple[float, float], neighbours: Neighbours | None = None) -> float:
    """The L1 sensitivity of the sum of values clamped to ``bounds = (lo, hi)`` (rounded up to a float).

    - add/remove one record (default): ``max(|lo|, |hi|)`` -- the record added or removed can be
      anywhere in ``[lo, hi]``;
    - replace one record: ``hi - lo``;
    - a privacy unit with ``max_rows = k``: ``k · max(|lo|, |hi|)``.

    **Erratum (Near & Abuah, Programming DP ch. 6; also a common rule elsewhere):** "sensitivity =
    upper - lower" is the *replace-one* value. Under the add/remove relation the books use, it
    under-estimates the sensitivity whenever ``lo > 0`` (or ``hi < 0``): for ``[20, 80]`` it gives 60,
    but adding a record of value 80 moves the sum by 80.

    >>> sum_sensitivity((20, 80))
    80.0
    >>> from dpkit.core.neighbours import Replace
    >>> sum_sensitivity((20, 80), Replace())
    60.0
    """
    lo, hi = _common.bounds(bounds)
    nb = AddRemove() if neighbours is None else validate_neighbours(neighbours)
    return finite("bounds", _exact.float_at_least(exact_sum_sensitivity(lo, hi, nb)))


# ---------------------------------------------------------------------------------------------
# the statistic
# ---------------------------------------------------------------------------------------------
def sum(values: ArrayLike, bounds: tuple[float, float], epsilon: float, *, neighbours: Neighbours | None = None,
        accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
        description: str = "") -> Release:
    """Differentially private sum of ``values`` clamped to the public ``bounds = (lo, hi)``.

    Parameters
    ----------
    values:
        1-D real data. Values outside ``[lo, hi]`` are moved to the nearest bound (clamping) before
        summing; ``None``/NaN entries raise (``nan_policy="raise"``) or are dropped (``"omit"``).
    bounds:
        Public ``(lo, hi)``, ``lo < hi``; they must not be derived from the data (use
        :func:`dpkit.stats.bounds_for` or :func:`dpkit.stats.auto_sum` for a private choice).
    epsilon:
        The privacy parameter, > 0.
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`).

    Guarantee
    ---------
    Pure ``epsilon``-DP. Sensitivity (:func:`sum_sensitivity`): ``max(|lo|, |hi|)`` under add/remove one
    record (the default), ``hi - lo`` under replace-one, ``max_rows · max(|lo|, |hi|)`` under a privacy
    unit. The clamped values are summed **exactly** (:func:`exact_sum`), so no floating-point summation
    error can enter the sensitivity; the lattice Laplace release of an exact value with that sensitivity
    is exactly ``epsilon``-DP (:class:`LatticeSum`).

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness is drawn.

    Output law
    ----------
    :class:`LatticeSum`: ``g · (round(S/g) + Z)`` with ``S`` the exact clamped sum, ``g`` the largest power of
    two ``<= Δ/2^20`` and ``Z`` exact discrete Laplace of scale ``b/g``, ``b >= (Δ + g)/epsilon``
    (the noise is ``2^-20`` relative above ``Δ/epsilon``). ``Release.noise`` is ``"lattice_laplace"``,
    ``Release.granularity`` is ``g`` and ``Release.scale`` is ``b``.

    Error
    -----
    Unbiased for the clamped sum (clamping itself biases the sum of the raw data). ``Release.interval(c)``
    holds the exact clamped sum with probability ``>= c``: half-width ``g·k + g/2`` with ``k`` the discrete
    Laplace quantile, about ``b · ln(1/(1-c))``.

    Errata
    ------
    The "upper - lower" sensitivity rule (Near & Abuah ch. 6) is right only for replace-one neighbours;
    see :func:`sum_sensitivity`.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = sum([1.0, 2.0, 3.0], (0, 10), 1.0, rng=deterministic_source(1))
    >>> r.mechanism, r.noise, round(r.scale, 3)
    ('sum', 'lattice_laplace', 10.0)
    """
    return run(_sum_plan(values, bounds, epsilon, neighbours=neighbours, accountant=accountant,
                         nan_policy=nan_policy), accountant=accountant, rng=rng, description=description)


def _sum_plan(values: Any, bounds: Any, epsilon: Any, *, neighbours: Neighbours | None = None,
              accountant: Accountant | None = None, nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`sum` (nothing charged or drawn; ``accountant`` only supplies the default
    neighbour relation)."""
    lo, hi = _common.bounds(bounds)
    eps = check.epsilon(epsilon)
    nb = _common.neighbours_of(neighbours, accountant)
    arr = _common.data(values, nan_policy=nan_policy)
    lat = LatticeSum(exact_sum_sensitivity(lo, hi, nb), eps)
    r = lat.centre(exact_sum(arr, clamp=(lo, hi)))

    def draw(rng: RandomSource) -> float:
        return float(lat.draw(r, 1, rng)[0])

    return Plan(mechanism="sum", cost=PureDP(eps), draw=draw, sensitivity=lat.sensitivity, scale=lat.b,
                noise="lattice_laplace", granularity=lat.g,
                params={"epsilon": eps, "bounds": [lo, hi], "granularity": lat.g, "neighbours": nb.describe()},
                neighbours=nb)
