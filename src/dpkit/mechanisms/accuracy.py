"""Accuracy without touching data: interval half-widths for a given noise scale, and the inverse
(the privacy parameter needed for a target half-width).

All functions are data-independent and cost nothing. A half-width ``h`` at confidence ``1 - β``
means ``P[|noisy - true| > h] <= β`` for one coordinate, or, with ``simultaneous=True`` and
``coords = d``, ``P[max_i |noisy_i - true_i| > h] <= β``: the per-coordinate level is then
``1 - (1-β)^(1/d)`` (Šidák; exact for the independent per-coordinate noise dpkit uses, and slightly
tighter than the union bound ``β/d``).

- continuous laws (``granularity=None``): Laplace ``h = b ln(1/β)``; Gaussian ``h = σ Φ^-1(1 - β/2)``;
- discrete Laplace (scale ``t``): closed form, ``P[|Z| > k] = 2 q^(k+1)/(1+q)``, ``q = e^(-1/t)``; the
  smallest integer ``k`` with this ``<= β``;
- discrete Gaussian (parameter ``s``): the smallest ``k`` with ``P[|Y| > k] <= β`` by summing the pmf
  exactly for ``s <= 4096``; above, ``k = ceil(s Φ^-1(1 - β/2))``, which is valid because
  ``P[Y > k] <= P[N(0, s²) > k]`` for integers ``k >= 0`` (the normaliser is ``>= s sqrt(2π)`` and
  the tail sum is ``<=`` the integral), and at most one lattice step wider than the exact value;
- lattice laws (``granularity=g``, what :func:`~dpkit.mechanisms.laplace` and
  :func:`~dpkit.mechanisms.gaussian` produce): ``g k + g/2`` with ``k`` from the discrete law in lattice
  units; the ``g/2`` covers the rounding of the true value to the lattice.

The inverse functions return the smallest privacy parameter (to a relative ``1e-12``, never below)
for which the *mechanism's own* calibration (lattice inflation and discrete checks included) meets
the target half-width, so ``halfwidth(scale(param_for(h))) <= h`` holds exactly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter

__all__ = [
    "discrete_gaussian_halfwidth",
    "discrete_gaussian_rho_for",
    "discrete_laplace_epsilon_for",
    "discrete_laplace_halfwidth",
    "exponential_utility_bound",
    "gaussian_epsilon_for",
    "gaussian_halfwidth",
    "gaussian_rho_for",
    "laplace_epsilon_for",
    "laplace_halfwidth",
]

_DIRECT_MAX_S = 4096.0


def _beta(confidence: Any, coords: Any, simultaneous: Any) -> float:
    conf = check.probability("confidence", confidence)
    d = check.integer("coords", coords, minimum=1)
    if not isinstance(simultaneous, (bool, np.bool_)):
        from dpkit.core.errors import WrongType

        raise WrongType("simultaneous", "a bool")
    beta = 1.0 - conf
    if simultaneous and d > 1:
        beta = -math.expm1(math.log1p(-beta) / d)
    return beta


def _granularity(granularity: Any) -> float | None:
    if granularity is None:
        return None
    return check.positive("granularity", granularity)


# ---------------------------------------------------------------------------------------------
# discrete laws (lattice units)
# ---------------------------------------------------------------------------------------------
def _dlap_log_tail(t: float, k: int) -> float:
    """log P[|Z| > k] for discrete Laplace with scale t."""
    return math.log(2.0) - (k + 1) / t - math.log1p(math.exp(-1.0 / t))


def _dlap_k(t: float, beta: float) -> int:
    if not 2.0**-400 <= t <= 2.0**50:  # beyond, k ± 1 no longer changes (k+1)/t: the searches below would not end
        raise OverflowError("scale outside the exact range")
    lb = math.log(beta)
    k = max(0, math.ceil(t * (math.log(2.0) - math.log1p(math.exp(-1.0 / t)) - lb)) - 1)
    while k > 0 and _dlap_log_tail(t, k - 1) <= lb:
        k -= 1
    while _dlap_log_tail(t, k) > lb:
        k += 1
    return k


def _dgauss_k(s: float, beta: float) -> int:
    if not 2.0**-400 <= s <= 2.0**50:
        raise OverflowError("sigma outside the exact range")
    if s <= _DIRECT_MAX_S:
        kmax = math.ceil(40.0 * s) + 2
        ks = np.arange(0, kmax + 1, dtype=np.float64)
        f = np.exp(-(ks * ks) / (2.0 * s * s))
        norm = f[0] + 2.0 * float(np.sum(f[1:][::-1]))
        # tail[k] = P[|Y| > k] = 2 sum_{j > k} f(j) / norm
        rev = np.cumsum(f[::-1])[::-1]  # rev[k] = sum_{j >= k} f(j)
        tail = 2.0 * np.append(rev[1:], 0.0) / norm
        idx = np.flatnonzero(tail <= beta)
        return int(idx[0])
    return math.ceil(s * _z(beta))


def _z(beta: float) -> float:
    """``Φ^-1(1 - β/2)``, the two-sided normal quantile (scipy, imported when first needed)."""
    from scipy import special

    return -float(special.ndtri(beta / 2.0))


# ---------------------------------------------------------------------------------------------
# half-widths
# ---------------------------------------------------------------------------------------------
@check.numeric_guard("scale")
def laplace_halfwidth(scale: float, confidence: float = 0.95, *, coords: int = 1, simultaneous: bool = False,
                      granularity: float | None = None) -> float:
    """Half-width of the (1-β) interval for Laplace noise of scale ``scale``: ``b ln(1/β)``; with
    ``granularity=g`` the exact value for the lattice law of :func:`~dpkit.mechanisms.laplace`."""
    b = check.positive("scale", scale)
    beta = _beta(confidence, coords, simultaneous)
    g = _granularity(granularity)
    if g is None:
        return b * math.log(1.0 / beta)
    return g * _dlap_k(b / g, beta) + g / 2.0


@check.numeric_guard("scale")
def discrete_laplace_halfwidth(scale: float, confidence: float = 0.95, *, coords: int = 1,
                               simultaneous: bool = False) -> int:
    """Smallest integer ``k`` with ``P[|Z| > k] <= β`` for discrete Laplace noise of scale ``scale``."""
    t = check.positive("scale", scale)
    return _dlap_k(t, _beta(confidence, coords, simultaneous))


@check.numeric_guard("sigma")
def gaussian_halfwidth(sigma: float, confidence: float = 0.95, *, coords: int = 1, simultaneous: bool = False,
                       granularity: float | None = None) -> float:
    """Half-width of the (1-β) interval for Gaussian noise: ``σ Φ^-1(1-β/2)``; with ``granularity=g``
    the value for the lattice law of :func:`~dpkit.mechanisms.gaussian`."""
    sigma = check.positive("sigma", sigma)
    beta = _beta(confidence, coords, simultaneous)
    g = _granularity(granularity)
    if g is None:
        return sigma * _z(beta)
    return g * _dgauss_k(sigma / g, beta) + g / 2.0


@check.numeric_guard("sigma")
def discrete_gaussian_halfwidth(sigma: float, confidence: float = 0.95, *, coords: int = 1,
                                simultaneous: bool = False) -> int:
    """Smallest integer ``k`` (exact for ``sigma <= 4096``, else within one) with ``P[|Y| > k] <= β``."""
    sigma = check.positive("sigma", sigma)
    return _dgauss_k(sigma, _beta(confidence, coords, simultaneous))


# ---------------------------------------------------------------------------------------------
# inverses
# ---------------------------------------------------------------------------------------------
def _smallest(H: Any, target: float, guess: float, name: str, upper: float = 1e300) -> float:
    """Smallest x > 0 (relative 1e-12, returned value satisfies) with H(x) <= target; H nonincreasing.

    The bracket grows from ``guess`` by 4 up to ``upper`` (tried last), then shrinks from half its top by 4
    until ``H`` fails (:func:`_exact.expand`); :func:`_exact.bisect` narrows it and the point where
    ``H(x) <= target`` holds is returned."""

    def ok(x: float) -> bool:
        return H(x) <= target

    start = min(guess, upper)
    if not start > 0:  # an underflowed (or NaN) guess would never grow
        start = 1e-300
    hi = _exact.expand(ok, start, 4.0, limit=upper)
    if hi is None:  # every multiple below the cap failed: the cap itself is the last candidate
        if not ok(upper):
            raise InvalidParameter("halfwidth", f"too small: no {name} reaches it")
        hi = upper
    lowest_ok = [hi]  # the smallest point seen where ok holds (the bracket's top)

    def fails(x: float) -> bool:
        if ok(x):
            lowest_ok[0] = x
            return False
        return True

    lo = _exact.expand(fails, hi / 2.0, 0.25, limit=1e-300)
    if lo is None:  # ok down to 1e-300: no useful lower end
        return lowest_ok[0]
    _, hi = _exact.bisect(ok, lo, lowest_ok[0], rel_tol=1e-12, max_iter=200)
    return hi


def _target(halfwidth: Any) -> float:
    return check.positive("halfwidth", halfwidth)


@check.numeric_guard("halfwidth")
def laplace_epsilon_for(halfwidth: float, sensitivity: float, confidence: float = 0.95, *, coords: int = 1,
                        simultaneous: bool = False) -> float:
    """Smallest ``epsilon`` for which :func:`~dpkit.mechanisms.laplace` (L1 ``sensitivity``,
    ``coords`` coordinates) has (1-β) half-width ``<= halfwidth``. About ``Δ ln(1/β) / h``."""
    from dpkit.mechanisms.laplace import laplace_scale

    h = _target(halfwidth)
    sens = check.positive("sensitivity", sensitivity)
    beta = _beta(confidence, coords, simultaneous)

    def H(eps: float) -> float:
        g, b = laplace_scale(sens, eps, coords)
        return laplace_halfwidth(b, confidence, coords=coords, simultaneous=simultaneous, granularity=g)

    return _smallest(H, h, sens * math.log(1.0 / beta) / h, "epsilon")


@check.numeric_guard("halfwidth")
def discrete_laplace_epsilon_for(halfwidth: int, sensitivity: int, confidence: float = 0.95, *, coords: int = 1,
                                 simultaneous: bool = False) -> float:
    """Smallest ``epsilon`` for which :func:`~dpkit.mechanisms.discrete_laplace` has (1-β) half-width
    ``<= halfwidth`` (an integer >= 0)."""
    from dpkit.mechanisms.discrete import discrete_laplace_scale

    h = check.integer("halfwidth", halfwidth, minimum=0)
    sens = check.integer("sensitivity", sensitivity, minimum=1)
    beta = _beta(confidence, coords, simultaneous)

    def H(eps: float) -> float:
        return discrete_laplace_halfwidth(discrete_laplace_scale(sens, eps), confidence, coords=coords,
                                          simultaneous=simultaneous)

    return _smallest(H, h, sens * math.log(1.0 / beta) / max(h, 0.5), "epsilon")


@check.numeric_guard("halfwidth")
def gaussian_rho_for(halfwidth: float, sensitivity: float, confidence: float = 0.95, *, coords: int = 1,
                     simultaneous: bool = False) -> float:
    """Smallest ``rho`` for which :func:`~dpkit.mechanisms.gaussian` (L2 ``sensitivity``) has (1-β)
    half-width ``<= halfwidth``. About ``Δ² z² / (2 h²)``, ``z = Φ^-1(1-β/2)``."""
    from dpkit.mechanisms.gaussian import gaussian_scale

    h = _target(halfwidth)
    sens = check.positive("sensitivity", sensitivity)
    beta = _beta(confidence, coords, simultaneous)
    z = _z(beta)

    def H(rho: float) -> float:
        g, sigma = gaussian_scale(sens, rho=rho, coords=coords)
        return gaussian_halfwidth(sigma, confidence, coords=coords, simultaneous=simultaneous, granularity=g)

    return _smallest(H, h, (sens * z / h) ** 2 / 2.0, "rho")


@check.numeric_guard("halfwidth")
def discrete_gaussian_rho_for(halfwidth: int, sensitivity: float, confidence: float = 0.95, *, coords: int = 1,
                              simultaneous: bool = False) -> float:
    """Smallest ``rho`` for which :func:`~dpkit.mechanisms.discrete_gaussian` has (1-β) half-width
    ``<= halfwidth`` (an integer >= 0)."""
    from dpkit.mechanisms.discrete import discrete_gaussian_scale

    h = check.integer("halfwidth", halfwidth, minimum=0)
    sens = check.positive("sensitivity", sensitivity)
    beta = _beta(confidence, coords, simultaneous)
    z = _z(beta)

    def H(rho: float) -> float:
        return discrete_gaussian_halfwidth(discrete_gaussian_scale(sens, rho=rho, coords=coords), confidence,
                                           coords=coords, simultaneous=simultaneous)

    return _smallest(H, h, (sens * z / max(h, 0.5)) ** 2 / 2.0, "rho")


@check.numeric_guard("halfwidth")
def gaussian_epsilon_for(halfwidth: float, sensitivity: float, delta: float, confidence: float = 0.95, *,
                         coords: int = 1, simultaneous: bool = False, method: str = "analytic") -> float:
    """Smallest ``epsilon`` for which :func:`~dpkit.mechanisms.gaussian` with this ``delta`` and
    ``method`` has (1-β) half-width ``<= halfwidth``. With ``method="classic"`` the answer must be
    below 1, else :class:`~dpkit.core.errors.InvalidParameter` (``halfwidth``) is raised."""
    from dpkit.mechanisms.gaussian import _privacy_args, gaussian_scale

    h = _target(halfwidth)
    sens = check.positive("sensitivity", sensitivity)
    dlt = check.delta(delta, allow_zero=False)
    _privacy_args(0.5, dlt, None, method)  # validates method
    beta = _beta(confidence, coords, simultaneous)
    z = _z(beta)

    def H(eps: float) -> float:
        g, sigma = gaussian_scale(sens, epsilon=eps, delta=dlt, method=method, coords=coords)
        return gaussian_halfwidth(sigma, confidence, coords=coords, simultaneous=simultaneous, granularity=g)

    upper = math.nextafter(1.0, 0.0) if method == "classic" else 1e300
    guess = sens * z * math.sqrt(2.0 * math.log(1.25 / dlt)) / h
    return _smallest(H, h, min(guess, upper), "epsilon", upper=upper)


@check.numeric_guard("epsilon")
def exponential_utility_bound(candidates: int, sensitivity: float, epsilon: float, confidence: float = 0.95, *,
                              monotonic: bool = False) -> float:
    """``t`` such that the exponential mechanism (and Gumbel report-noisy-max, and permute-and-flip)
    returns a candidate with score ``>= max score - t`` with probability ``>= confidence``:
    ``t = (2Δ/ε) ln(n/β)`` (``(Δ/ε) ln(n/β)`` monotonic), from ``P[i] <= exp(-ε (q* - q_i)/(2Δ))``.
    A data-independent bound; the rounding of scores to the ``Δ/2^20`` lattice is included."""
    n = check.integer("candidates", candidates, minimum=1)
    sens = check.positive("sensitivity", sensitivity)
    eps = check.epsilon(epsilon)
    beta = _beta(confidence, 1, False)
    factor = 1.0 if check.flag("monotonic", monotonic) else 2.0
    d_units_scale = 1.0 + 2.0**-19  # Δu g / Δ <= 1 + 2^-19 (lattice inflation), and κ rounded down (< 2^-31)
    t = factor * sens * d_units_scale * (1.0 + 2.0**-30) / eps * max(0.0, math.log(n / beta))
    return t + sens * 2.0**-19  # + the rounding of the two scores compared (<= g each)
