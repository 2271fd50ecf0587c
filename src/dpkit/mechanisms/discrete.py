"""Integer mechanisms: the geometric (discrete Laplace) and discrete Gaussian mechanisms."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData
from dpkit.core.privacy import PrivacyLoss, PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release, charge, check_description, resolve_accountant
from dpkit.mechanisms.gaussian import _calibrate, _privacy_args
from dpkit.noise import source as _source

__all__ = ["discrete_gaussian", "discrete_gaussian_scale", "discrete_laplace", "discrete_laplace_scale"]

_MAX_ABS = 2**61  # |value| and |value + noise| stay inside int64


@check.numeric_guard("epsilon")
def discrete_laplace_scale(sensitivity: int, epsilon: float) -> float:
    """The smallest float ``t >= sensitivity / epsilon`` (exact rational check)."""
    sens = check.integer("sensitivity", sensitivity, minimum=1)
    eps = check.epsilon(epsilon)
    t = _common.div_up(Fraction(sens), Fraction(eps))
    _common.finite_scale("epsilon", t)
    return t


def _ints(value: Any) -> tuple[np.ndarray, bool]:
    arr, scalar = _common.int_values("value", value)
    if arr.size and int(np.max(np.abs(arr))) >= _MAX_ABS:
        raise InvalidData("value", "values too large for 64-bit integer arithmetic with noise")
    return arr, scalar


def _add(arr: np.ndarray, noise: np.ndarray) -> np.ndarray:
    noise = np.asarray(noise, dtype=np.int64)
    if noise.size and int(np.max(np.abs(noise))) >= _MAX_ABS:  # pragma: no cover - astronomically unlikely
        raise InvalidData("value", "noisy values overflow 64-bit integers")
    return arr + noise.reshape(arr.shape)


def discrete_laplace(value: Any, sensitivity: int, epsilon: float, *, accountant: Any = None, rng: Any = None,
                     description: str = "") -> Release:
    """Geometric mechanism: integer ``value`` plus discrete Laplace noise; exactly ``epsilon``-DP.

    ``value`` is an integer or an array of integers; ``sensitivity`` is the integer **L1** sensitivity
    of ``value`` under the caller's (or accountant's) neighbour relation. Each coordinate gets
    independent noise ``Z`` with ``P[Z = k] ∝ exp(-|k| / t)``, ``t`` the smallest float >=
    ``sensitivity / epsilon`` (``Release.scale = t``). For integer shifts of L1 norm at most
    ``sensitivity`` the pmf ratio is at most ``exp(sensitivity / t) <= exp(epsilon)``: pure
    ``epsilon``-DP, charged as ``PureDP(epsilon)``. Output: int (scalar input) or int64 array.
    """
    arr, scalar = _ints(value)
    t = discrete_laplace_scale(sensitivity, epsilon)
    sens = int(sensitivity)
    eps = float(epsilon)
    description = check_description(description)
    rng = _source.resolve(rng)
    accountant = resolve_accountant(accountant)
    cost = PureDP(eps)
    params = {"epsilon": eps, "coords": int(arr.size), "norm": "l1"}
    receipt = charge(accountant, cost, mechanism="discrete_laplace", sensitivity=float(sens), scale=t,
                     params=params, secure=rng.secure, description=description)
    from dpkit.noise import sample_discrete_laplace

    noisy = _add(arr, sample_discrete_laplace(t, int(arr.size), rng=rng))
    return Release(value=_common.out(noisy, scalar, int), mechanism="discrete_laplace", scale=t, cost=cost,
                   receipt=receipt, secure=rng.secure, noise="discrete_laplace", params=params)


@check.numeric_guard("epsilon")
def discrete_gaussian_scale(sensitivity: float, *, epsilon: float | None = None, delta: float | None = None,
                            rho: float | None = None, method: str = "analytic", coords: int = 1) -> float:
    """The ``sigma`` used by :func:`discrete_gaussian` for ``coords`` coordinates."""
    sens = check.positive("sensitivity", sensitivity)
    coords = check.integer("coords", coords, minimum=1)
    eps, dlt, rh, method = _privacy_args(epsilon, delta, rho, method)
    return _law(sens, coords, eps, dlt, rh, method)[0]


@check.numeric_guard("epsilon")
def _law(sens: float, d: int, eps: float | None, dlt: float | None, rho: float | None,
         method: str) -> tuple[float, PrivacyLoss]:
    if d == 1:
        # an integer query with |q(x) - q(x')| <= sens moves by at most floor(sens) (at least 1 here)
        d_units: int | None = max(1, math.floor(sens))
        dprime = float(d_units)
    else:
        d_units = None
        dprime = sens
    sigma, cost = _calibrate(dprime, d_units, 1.0, eps, dlt, rho, method)
    _common.finite_scale("rho" if rho is not None else "epsilon", sigma)
    return sigma, cost


def discrete_gaussian(value: Any, sensitivity: float, *, epsilon: float | None = None, delta: float | None = None,
                      rho: float | None = None, method: str = "analytic", accountant: Any = None, rng: Any = None,
                      description: str = "") -> Release:
    """Discrete Gaussian mechanism for integers: ``rho``-zCDP or ``(epsilon, delta)``-DP.

    ``value`` is an integer or an array of integers; ``sensitivity`` is its **L2** sensitivity under
    the caller's (or accountant's) neighbour relation (for one coordinate an integer; for vectors it
    may be a real such as ``sqrt(k)``). Each coordinate gets independent noise ``Y`` with
    ``P[Y = y] ∝ exp(-y² / (2 sigma²))`` (CKS 2020), ``Release.scale = sigma``.

    - ``rho``: ``sigma = Δ₂ / sqrt(2 rho)``; exactly ``Δ₂²/(2 sigma²) <= rho`` zCDP for integer shifts
      (CKS 2020, Thm 14). Charged ``ZCDP(rho)``.
    - ``epsilon, delta``: the continuous calibration (``method``: ``"analytic"`` Balle–Wang, or
      ``"classic"`` for ``epsilon < 1``), then checked against the discrete Gaussian's exact ``δ``
      (CKS Thm 7) for one coordinate (``sigma`` increased if needed), or against the zCDP conversion
      for vectors. Charged ``ApproxDP(epsilon, delta)``.
    """
    arr, scalar = _ints(value)
    sens = check.positive("sensitivity", sensitivity)
    eps, dlt, rh, method = _privacy_args(epsilon, delta, rho, method)
    description = check_description(description)
    rng = _source.resolve(rng)
    accountant = resolve_accountant(accountant)
    d = int(arr.size)
    sigma, cost = _law(sens, d, eps, dlt, rh, method)
    params: dict[str, Any] = {"coords": d, "norm": "l2"}
    if rh is not None:
        params["rho"] = rh
    else:
        params.update(epsilon=eps, delta=dlt, method=method)
    receipt = charge(accountant, cost, mechanism="discrete_gaussian", sensitivity=sens, scale=sigma, params=params,
                     secure=rng.secure, description=description)
    from dpkit.noise import sample_discrete_gaussian

    noisy = _add(arr, sample_discrete_gaussian(sigma, d, rng=rng))
    return Release(value=_common.out(noisy, scalar, int), mechanism="discrete_gaussian", scale=sigma, cost=cost,
                   receipt=receipt, secure=rng.secure, noise="discrete_gaussian", params=params)
