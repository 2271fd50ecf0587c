"""The Gaussian mechanism, produced exactly with the discrete Gaussian on a lattice.

Calibrations
------------
- ``rho`` (zCDP): ``sigma = Δ₂' / sqrt(2 rho)``. The multivariate discrete Gaussian with per-coordinate
  parameter ``s`` satisfies exactly ``||μ - μ'||² / (2 s²)``-zCDP between integer shifts ``μ, μ'``
  (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", Thm 14), and
  ``Δ₂'`` is the L2 sensitivity of the query rounded to the lattice (below).
- ``(epsilon, delta)``, ``method="analytic"``: Balle & Wang 2018 ("Improving the Gaussian mechanism
  for differential privacy: analytical calibration and optimal denoising", Thm 8): the smallest
  ``sigma`` with ``Φ(Δ/2σ - εσ/Δ) - e^ε Φ(-Δ/2σ - εσ/Δ) <= δ`` (bracketed root finding, then
  nudged up until the inequality holds in floating point).
- ``(epsilon, delta)``, ``method="classic"``: ``sigma = Δ sqrt(2 ln(1.25/δ)) / ε`` (Dwork & Roth 2014,
  Thm A.1), only valid for ``ε < 1``.

Because the noise is discrete, the continuous calibration is then *checked* against the discrete law:

- one coordinate: the exact ``δ`` of the discrete Gaussian (CKS 2020, Thm 7):
  ``δ = P[Y > εs²/D - D/2] - e^ε P[Y > εs²/D + D/2]`` with ``Y`` discrete Gaussian of parameter ``s``
  (lattice units) and ``D`` the integer lattice sensitivity; ``sigma`` is increased (by the smallest
  relative step found by bisection) until this holds;
- several coordinates: CKS Thm 7 is one-dimensional, so the guarantee is taken from the zCDP bound
  ``rho = Δ₂'² / 2σ²`` converted with the CKS 2020 zCDP -> (ε, δ) conversion
  (:func:`dpkit.core.privacy.zcdp_to_approx_delta`), and ``sigma`` is the larger of the continuous
  calibration and the one this conversion needs. This is more conservative than the analytic
  Gaussian (for ε = 1, δ = 1e-5, Δ = 1: σ ≈ 4.05 instead of 3.73), but it is a proven bound for the
  multivariate discrete Gaussian; use ``rho`` (exact for vectors) where zCDP accounting suits.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = [
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "classic_gaussian_sigma",
    "discrete_gaussian_delta",
    "gaussian",
    "gaussian_plan",
    "gaussian_scale",
]

_METHODS = ("analytic", "classic")
_SQRT_2PI = math.sqrt(2.0 * math.pi)


# ---------------------------------------------------------------------------------------------
# continuous calibrations
# ---------------------------------------------------------------------------------------------
@check.numeric_guard("sigma")
def analytic_gaussian_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """Exact ``δ(ε)`` of the continuous Gaussian mechanism (Balle & Wang 2018, Thm 8)."""
    sigma = check.positive("sigma", sigma)
    sensitivity = check.positive("sensitivity", sensitivity)
    epsilon = check.nonnegative("epsilon", epsilon)
    return _analytic_delta(sigma, sensitivity, epsilon)


def _analytic_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    from scipy import special

    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    first = float(special.ndtr(a - b))
    # e^ε Φ(-a-b) <= Φ(a-b) <= 1, so the exponent below is <= 0 (no overflow for large ε).
    second = math.exp(min(0.0, epsilon + float(special.log_ndtr(-a - b))))
    return max(0.0, first - second)


@check.numeric_guard("epsilon")
def analytic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest ``sigma`` (to float precision, never below) such that the continuous Gaussian
    mechanism with L2 sensitivity ``sensitivity`` is ``(epsilon, delta)``-DP (Balle & Wang 2018)."""
    sens = check.positive("sensitivity", sensitivity)
    eps = check.epsilon(epsilon)
    dlt = check.delta(delta, allow_zero=False)
    from scipy import optimize

    def f(log_s: float) -> float:
        return _analytic_delta(math.exp(log_s), sens, eps) - dlt

    # delta(sigma) decreases from 1 (sigma -> 0) to 0 (sigma -> inf).
    lo = math.log(sens) - 1.0
    while f(lo) <= 0:
        lo -= 2.0
    hi = math.log(sens) + 1.0
    while f(hi) > 0:
        hi += 2.0
    root = optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
    sigma = math.exp(root)
    step = sigma * 1e-13
    while _analytic_delta(sigma, sens, eps) > dlt:
        sigma += step
        step *= 2.0
    return float(sigma)


@check.numeric_guard("epsilon")
def classic_gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """``Δ sqrt(2 ln(1.25/δ)) / ε`` (Dwork & Roth 2014, Thm A.1); refuses ``epsilon >= 1``."""
    sens = check.positive("sensitivity", sensitivity)
    eps = check.epsilon(epsilon)
    dlt = check.delta(delta, allow_zero=False)
    if eps >= 1.0:
        raise InvalidParameter("epsilon", "the classic Gaussian calibration needs epsilon < 1 (use method='analytic')")
    return _exact.up(sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps, 4)


# ---------------------------------------------------------------------------------------------
# the discrete Gaussian's exact delta (CKS 2020, Thm 7)
# ---------------------------------------------------------------------------------------------
_DIRECT_MAX_S = 2.0**12


def _dg_tail_ge(s: float, m: int) -> float:
    """``P[Y >= m]`` for ``Y`` discrete Gaussian with parameter ``s`` (``P[y] ∝ exp(-y²/2s²)``)."""
    if m <= 0:
        return 1.0 - _dg_tail_ge(s, 1 - m)
    if s <= _DIRECT_MAX_S:
        k_max = math.ceil(40.0 * s) + 2
        ks = np.arange(1, k_max + 1, dtype=np.float64)
        f = np.exp(-(ks * ks) / (2.0 * s * s))
        norm = 1.0 + 2.0 * float(np.sum(f[::-1]))
        if m > k_max:
            return 0.0
        return float(np.sum(f[m - 1:][::-1])) / norm
    # Euler–Maclaurin (terms through f''') for the tail sum; the normaliser is s sqrt(2π) up to a
    # relative 2 exp(-2π² s²) (Poisson summation), i.e. exactly in float64 for s > 2^12. The
    # neglected remainder is of relative order (m/s²)^5 / s, far below float precision here.
    from scipy import special

    x = m / s
    fm = math.exp(-0.5 * x * x)
    u = m / (s * s)
    corr = 0.5 + u / 12.0 + (-(u**3) + 3.0 * u / (s * s)) / 720.0
    return float(special.ndtr(-x) + fm * corr / (s * _SQRT_2PI))


@check.numeric_guard("s")
def discrete_gaussian_delta(s: float, sensitivity: int, epsilon: float) -> float:
    """Exact ``δ(ε)`` of ``q(x) + Y``, ``Y`` discrete Gaussian with parameter ``s``, for an
    integer-valued query of integer sensitivity ``sensitivity`` (CKS 2020, Thm 7)."""
    s = check.positive("s", s)
    D = check.integer("sensitivity", sensitivity, minimum=1)
    epsilon = check.nonnegative("epsilon", epsilon)
    if not 2.0**-400 <= s <= 2.0**50:
        raise InvalidParameter("s", "outside the range of the exact computation (2^-400 to 2^50)")
    return _dg_delta(s, D, epsilon)


def _dg_delta(s: float, D: int, epsilon: float) -> float:
    sf = Fraction(s)
    ef = Fraction(epsilon)
    a1 = ef * sf * sf / D - Fraction(D, 2)
    a2 = ef * sf * sf / D + Fraction(D, 2)
    m1 = math.floor(a1) + 1  # P[Y > a] = P[Y >= floor(a) + 1], computed exactly
    m2 = math.floor(a2) + 1
    t1 = _dg_tail_ge(s, m1)
    t2 = _dg_tail_ge(s, m2)
    if t2 <= 0.0:
        return t1
    return max(0.0, t1 - math.exp(min(700.0, epsilon + math.log(t2))))


def _increase_until(ok: Any, sigma: float) -> float:
    """The smallest (to ~1e-12 relative) sigma' >= sigma with ok(sigma') (ok is monotone): steps of
    ``sigma 1e-12`` doubled until ``ok`` holds (:func:`_exact.expand`), then at most 60 halvings of the
    last step (:func:`_exact.bisect`); the returned point satisfies ``ok``."""
    if ok(sigma):
        return sigma
    step = _exact.expand(lambda st: ok(sigma + st), sigma * 1e-12, 2.0, limit=math.inf)
    assert step is not None  # the limit is infinite
    _, hi = _exact.bisect(ok, sigma + step / 2.0, sigma + step, rel_tol=0.0, max_iter=60)
    return hi


def _sigma_for_rho(dprime: float, rho: float) -> float:
    """Smallest float sigma with ``dprime² / (2 sigma²) <= rho`` (exact rational check; the float
    quotient is at most a few ulps low: :func:`_exact.up_until`)."""
    target = Fraction(dprime) ** 2
    return _exact.up_until(lambda s: 2 * Fraction(rho) * Fraction(s) ** 2 >= target, dprime / math.sqrt(2.0 * rho))


def _rho_for_approx(epsilon: float, delta: float) -> float:
    """Largest rho (bisection, never above) with ``zcdp_to_approx_delta(rho, epsilon) <= delta``: the core's
    :func:`~dpkit.core.privacy.approx_to_zcdp_rho`."""
    from dpkit.core.privacy import approx_to_zcdp_rho

    return approx_to_zcdp_rho(epsilon, delta)


def _privacy_args(epsilon: Any, delta: Any, rho: Any, method: Any) -> tuple[float | None, float | None,
                                                                            float | None, str]:
    if not isinstance(method, str):
        raise WrongType("method", "a str ('analytic' or 'classic')")
    if method not in _METHODS:
        raise InvalidParameter("method", "must be 'analytic' or 'classic'")
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameter("rho", "give either rho or (epsilon, delta), not both")
        return None, None, check.positive("rho", rho), method
    if epsilon is None or delta is None:
        raise InvalidParameter("epsilon" if epsilon is None else "delta",
                               "give rho, or both epsilon and delta")
    eps = check.epsilon(epsilon)
    dlt = check.delta(delta, allow_zero=False)
    if method == "classic" and eps >= 1.0:
        raise InvalidParameter("epsilon", "the classic Gaussian calibration needs epsilon < 1 (use method='analytic')")
    return eps, dlt, None, method


def _calibrate(dprime: float, d_units: int | None, unit: float, epsilon: float | None, delta: float | None,
               rho: float | None, method: str) -> tuple[float, PrivacyLoss]:
    """sigma (value units) and the cost, for rounded-query L2 sensitivity ``dprime`` (value units);
    ``d_units`` is the integer sensitivity in lattice units for a single coordinate (else None)."""
    if rho is not None:
        return _sigma_for_rho(dprime, rho), ZCDP(rho)
    assert epsilon is not None and delta is not None
    if method == "analytic":
        sigma = analytic_gaussian_sigma(dprime, epsilon, delta)
    else:
        sigma = classic_gaussian_sigma(dprime, epsilon, delta)
    if d_units is not None:
        margin = delta * 1e-9
        sigma = _increase_until(lambda s: _dg_delta(s / unit, d_units, epsilon) + margin <= delta,
                                sigma)
    else:
        sigma = max(sigma, _sigma_for_rho(dprime, _rho_for_approx(epsilon, delta)))
    return sigma, ApproxDP(epsilon, delta)


@check.numeric_guard("epsilon")
def gaussian_scale(sensitivity: float, *, epsilon: float | None = None, delta: float | None = None,
                   rho: float | None = None, method: str = "analytic", coords: int = 1) -> tuple[float, float]:
    """``(granularity, sigma)`` used by :func:`gaussian` for ``coords`` coordinates (no data needed)."""
    from dpkit.noise import lattice_granularity

    sens = check.positive("sensitivity", sensitivity)
    coords = check.integer("coords", coords, minimum=1)
    eps, dlt, rh, method = _privacy_args(epsilon, delta, rho, method)
    g, sigma, _, _ = _law(sens, coords, eps, dlt, rh, method, lattice_granularity)
    return g, sigma


@check.numeric_guard("epsilon")
def _law(sens: float, d: int, eps: float | None, dlt: float | None, rho: float | None, method: str,
         lattice_granularity: Any) -> tuple[float, float, PrivacyLoss, float]:
    g = float(lattice_granularity(sens, coords=d))
    if d == 1:
        d_units = math.floor(sens / g) + 1  # |r(x) - r(x')| <= sens + g, a multiple of g
        dprime = d_units * g
    else:
        d_units = None
        dprime = _exact.up(sens + math.sqrt(d) * g, 3)  # >= sens + sqrt(d) g
    sigma, cost = _calibrate(dprime, d_units, g, eps, dlt, rho, method)
    _common.finite_scale("rho" if rho is not None else "epsilon", sigma, g)
    return g, sigma, cost, dprime


def gaussian(value: ArrayLike, sensitivity: float, *, epsilon: float | None = None, delta: float | None = None,
             rho: float | None = None, method: str = "analytic", accountant: Accountant | None = None,
             rng: RandomSource | None = None, description: str = "") -> Release:
    """Gaussian mechanism on a lattice: ``(epsilon, delta)``-DP or ``rho``-zCDP.

    Parameters
    ----------
    value:
        The true value: a real scalar or array (finite).
    sensitivity:
        The **L2** sensitivity of ``value`` under the caller's (or accountant's) neighbour relation:
        ``max ||f(D) - f(D')||_2`` over neighbouring datasets. The caller declares it.
    epsilon, delta:
        Give both for an ``(epsilon, delta)`` guarantee (``epsilon > 0``, ``0 < delta < 1``), charged as
        ``ApproxDP(epsilon, delta)``; ``method`` picks the calibration (``"analytic"``: Balle & Wang 2018;
        ``"classic"``: ``Δ sqrt(2 ln(1.25/δ))/ε``, only for ``epsilon < 1``).
    rho:
        Give instead for a ``rho``-zCDP guarantee, charged as ``ZCDP(rho)``; ``sigma = Δ₂'/sqrt(2 rho)``.
    method:
        ``"analytic"`` (default) or ``"classic"``; ignored with ``rho``.
    accountant:
        If given, charged the cost (below) before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    With ``rho``: ``rho``-zCDP (Bun & Steinke 2016) under the relation for which ``sensitivity`` holds:
    the multivariate discrete Gaussian with parameter ``s`` satisfies exactly ``||μ - μ'||² / (2 s²)``-zCDP
    between lattice shifts (Canonne, Kamath & Steinke 2020, Thm 14), and ``sigma`` is the smallest float
    with ``Δ₂'² / (2 sigma²) <= rho`` (exact rational check), ``Δ₂'`` the rounded query's L2 sensitivity.
    With ``(epsilon, delta)``: ``(epsilon, delta)``-DP. The continuous calibration (``method``) is checked
    against the discrete law: for one coordinate with the discrete Gaussian's exact ``δ(ε)`` (CKS 2020,
    Thm 7; ``sigma`` raised until it holds with a ``1e-9 δ`` margin), for vectors with the zCDP bound
    converted by the CKS 2020 conversion (module docstring). The float output is post-processing.

    Cost
    ----
    ``ZCDP(rho)`` with ``rho``, else ``ApproxDP(epsilon, delta)``; charged once to ``accountant`` (if
    given) before any random bit is drawn; a refused charge draws nothing.

    Output law
    ----------
    With ``d = value.size``, ``g = lattice_granularity(sensitivity, coords=d)``: each coordinate is
    ``g * round_half_even(x/g) + g * Y``, ``Y`` discrete Gaussian with ``P[y] ∝ exp(-y² g² / (2 sigma²))``,
    independent across coordinates. Rounding moves each coordinate by at most ``g/2``, so the rounded
    query's L2 sensitivity is ``Δ₂' <= sensitivity + sqrt(d) g`` (for ``d = 1``: the integer number of
    lattice steps ``floor(sensitivity/g) + 1``). ``sigma`` is calibrated to ``Δ₂'`` (relative inflation
    <= ``2^-20``) and, for ``(epsilon, delta)``, checked against the discrete law (module docstring).
    ``Release.scale`` is ``sigma``, ``Release.noise`` is ``"lattice_gaussian"``, ``Release.granularity``
    is ``g``. The float output is a correctly rounded function of the exact lattice value
    (post-processing).

    Error
    -----
    The noise is symmetric; the only bias is the rounding of the true value to the lattice (at most
    ``g/2`` per coordinate). The noise variance per coordinate is at most ``sigma²`` (a discrete
    Gaussian's variance is below its parameter's square, CKS 2020). ``Release.interval(confidence)``
    covers the true value with probability at least ``confidence`` (per coordinate, or jointly with
    ``simultaneous=True``); the half-width is :func:`~dpkit.mechanisms.gaussian_halfwidth` of the lattice
    law (about ``sigma Φ^-1(1 - β/2)``, plus ``g/2``), from the exact discrete tail.
    """
    return run(gaussian_plan(value, sensitivity, epsilon=epsilon, delta=delta, rho=rho, method=method),
               accountant=accountant, rng=rng, description=description)


def gaussian_plan(value: ArrayLike, sensitivity: float, *, epsilon: float | None = None, delta: float | None = None,
                  rho: float | None = None, method: str = "analytic") -> Plan:
    """The validated plan of :func:`gaussian` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`gaussian`, which is ``run(gaussian_plan(...))``: run it with :func:`~dpkit.mechanisms.contract.run`, or
    draw it inside a composite plan whose cost covers it with :meth:`~dpkit.mechanisms.contract.Plan.sample`.
    ``Plan.neighbours`` is ``None``: the guarantee holds under the relation for which the declared sensitivity
    holds.
    """
    from dpkit.noise import lattice_granularity

    arr, scalar = _common.values("value", value)
    sens = check.positive("sensitivity", sensitivity)
    eps, dlt, rh, method = _privacy_args(epsilon, delta, rho, method)
    d = int(arr.size)
    g, sigma, cost, dprime = _law(sens, d, eps, dlt, rh, method, lattice_granularity)
    _common.check_lattice_range("value", arr, g)
    params: dict[str, Any] = {"coords": d, "granularity": g, "norm": "l2", "rounded_sensitivity": dprime}
    if rh is not None:
        params["rho"] = rh
    else:
        params.update(epsilon=eps, delta=dlt, method=method)

    def draw(rng: RandomSource) -> Any:
        from dpkit.noise import lattice_gaussian

        noisy = lattice_gaussian(arr.reshape(-1), sigma, g, rng=rng).reshape(arr.shape)
        return _common.out(noisy, scalar)

    return Plan(mechanism="gaussian", cost=cost, draw=draw, sensitivity=sens, scale=sigma,
                noise="lattice_gaussian", granularity=g, params=params, neighbours=None)
