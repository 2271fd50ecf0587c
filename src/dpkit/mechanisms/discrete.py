"""Integer mechanisms: the geometric (discrete Laplace) and discrete Gaussian mechanisms."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData
from dpkit.core.privacy import PrivacyLoss, PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.mechanisms.gaussian import _calibrate, _privacy_args
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = [
    "discrete_gaussian",
    "discrete_gaussian_plan",
    "discrete_gaussian_scale",
    "discrete_laplace",
    "discrete_laplace_plan",
    "discrete_laplace_scale",
]

_MAX_ABS = 2**61  # |value| and |value + noise| stay inside int64


@check.numeric_guard("epsilon")
def discrete_laplace_scale(sensitivity: int, epsilon: float) -> float:
    """The smallest float ``t >= sensitivity / epsilon`` (exact rational check)."""
    sens = check.integer("sensitivity", sensitivity, minimum=1)
    eps = check.epsilon(epsilon)
    t = _exact.div_up(Fraction(sens), Fraction(eps))
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
    d_units: int | None
    if d == 1:
        # an integer query with |q(x) - q(x')| <= sens moves by at most floor(sens) (at least 1 here)
        d_units = max(1, math.floor(sens))
        dprime = float(d_units)
    else:
        d_units = None
        dprime = sens
    sigma, cost = _calibrate(dprime, d_units, 1.0, eps, dlt, rho, method)
    _common.finite_scale("rho" if rho is not None else "epsilon", sigma)
    return sigma, cost


def discrete_laplace(value: ArrayLike, sensitivity: int, epsilon: float, *, accountant: Accountant | None = None,
                     rng: RandomSource | None = None, description: str = "") -> Release:
    """Geometric mechanism: integer ``value`` plus discrete Laplace noise; exactly ``epsilon``-DP.

    Parameters
    ----------
    value:
        The true value: an integer or an array of integers (bools count as 0/1, integral floats are
        accepted); ``|value| < 2^61``.
    sensitivity:
        The integer **L1** sensitivity of ``value`` (>= 1) under the caller's (or accountant's) neighbour
        relation. The caller declares it.
    epsilon:
        The privacy parameter, > 0.
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP under the relation for which ``sensitivity`` holds. For integer shifts of L1
    norm at most ``sensitivity`` the pmf ratio of the noise is at most ``exp(sensitivity / t) <=
    exp(epsilon)`` (``t >= sensitivity / epsilon``, exact rational check).

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any random bit is drawn; a
    refused charge draws nothing.

    Output law
    ----------
    Each coordinate gets independent noise ``Z`` with ``P[Z = k] ∝ exp(-|k| / t)``, ``t`` the smallest
    float ``>= sensitivity / epsilon`` (:func:`discrete_laplace_scale`), sampled exactly
    (``dpkit.noise.sample_discrete_laplace``). ``Release.scale`` is ``t``, ``Release.noise`` is
    ``"discrete_laplace"``. Output: an int (scalar input) or an int64 array of the input's shape.

    Error
    -----
    Unbiased (symmetric noise), variance ``2q/(1-q)²`` with ``q = exp(-1/t)`` (about ``2 t²``).
    ``Release.interval(confidence)`` gives integer bounds ``value ± k`` with ``k`` the smallest integer
    with ``P[|Z| > k] = 2 q^(k+1)/(1+q) <= beta`` (:func:`~dpkit.mechanisms.discrete_laplace_halfwidth`;
    per coordinate, or jointly with ``simultaneous=True``).
    """
    return run(discrete_laplace_plan(value, sensitivity, epsilon), accountant=accountant, rng=rng,
               description=description)


def discrete_laplace_plan(value: ArrayLike, sensitivity: int, epsilon: float) -> Plan:
    """The validated plan of :func:`discrete_laplace` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`discrete_laplace`, which is ``run(discrete_laplace_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``None``: the guarantee holds under the
    relation for which the declared sensitivity holds.
    """
    arr, scalar = _ints(value)
    t = discrete_laplace_scale(sensitivity, epsilon)
    sens = int(sensitivity)
    eps = float(epsilon)
    d = int(arr.size)

    def draw(rng: RandomSource) -> Any:
        from dpkit.noise import sample_discrete_laplace

        noisy = _add(arr, sample_discrete_laplace(t, d, rng=rng))
        return _common.out(noisy, scalar, int)

    return Plan(mechanism="discrete_laplace", cost=PureDP(eps), draw=draw, sensitivity=float(sens), scale=t,
                noise="discrete_laplace", params={"epsilon": eps, "coords": d, "norm": "l1"}, neighbours=None)


def discrete_gaussian(value: ArrayLike, sensitivity: float, *, epsilon: float | None = None, delta: float | None = None,
                      rho: float | None = None, method: str = "analytic", accountant: Accountant | None = None,
                      rng: RandomSource | None = None, description: str = "") -> Release:
    """Discrete Gaussian mechanism for integers: ``rho``-zCDP or ``(epsilon, delta)``-DP.

    Parameters
    ----------
    value:
        The true value: an integer or an array of integers; ``|value| < 2^61``.
    sensitivity:
        Its **L2** sensitivity under the caller's (or accountant's) neighbour relation (for one
        coordinate an integer; for vectors it may be a real such as ``sqrt(k)``). The caller declares it.
    epsilon, delta:
        Give both for ``(epsilon, delta)``-DP (``epsilon > 0``, ``0 < delta < 1``); ``method`` picks the
        continuous calibration (``"analytic"`` Balle–Wang, or ``"classic"`` for ``epsilon < 1``).
    rho:
        Give instead for ``rho``-zCDP.
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
    Under the relation for which ``sensitivity`` holds:

    - ``rho``: ``sigma = Δ₂ / sqrt(2 rho)`` (the smallest float with ``Δ₂²/(2 sigma²) <= rho``, exact
      check); exactly ``Δ₂²/(2 sigma²) <= rho`` zCDP for integer shifts (CKS 2020, Thm 14). For one
      coordinate ``Δ₂`` is ``max(1, floor(sensitivity))`` (an integer query moves by an integer).
    - ``epsilon, delta``: the continuous calibration, then checked against the discrete Gaussian's exact
      ``δ`` (CKS Thm 7) for one coordinate (``sigma`` increased if needed), or against the zCDP
      conversion for vectors (:mod:`dpkit.mechanisms.gaussian`).

    Cost
    ----
    ``ZCDP(rho)`` with ``rho``, else ``ApproxDP(epsilon, delta)``; charged once to ``accountant`` (if
    given) before any random bit is drawn; a refused charge draws nothing.

    Output law
    ----------
    Each coordinate gets independent noise ``Y`` with ``P[Y = y] ∝ exp(-y² / (2 sigma²))`` (CKS 2020),
    sampled exactly (``dpkit.noise.sample_discrete_gaussian``). ``Release.scale`` is ``sigma``,
    ``Release.noise`` is ``"discrete_gaussian"``. Output: an int (scalar input) or an int64 array.

    Error
    -----
    Unbiased (symmetric noise), variance at most ``sigma²``. ``Release.interval(confidence)`` gives integer
    bounds ``value ± k``, ``k`` the smallest integer with ``P[|Y| > k] <= beta`` (exact for ``sigma <=
    4096``, else at most one step wider; :func:`~dpkit.mechanisms.discrete_gaussian_halfwidth`).
    """
    return run(discrete_gaussian_plan(value, sensitivity, epsilon=epsilon, delta=delta, rho=rho, method=method),
               accountant=accountant, rng=rng, description=description)


def discrete_gaussian_plan(value: ArrayLike, sensitivity: float, *, epsilon: float | None = None,
                           delta: float | None = None, rho: float | None = None, method: str = "analytic") -> Plan:
    """The validated plan of :func:`discrete_gaussian` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`discrete_gaussian`, which is ``run(discrete_gaussian_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``None``: the guarantee holds under the
    relation for which the declared sensitivity holds.
    """
    arr, scalar = _ints(value)
    sens = check.positive("sensitivity", sensitivity)
    eps, dlt, rh, method = _privacy_args(epsilon, delta, rho, method)
    d = int(arr.size)
    sigma, cost = _law(sens, d, eps, dlt, rh, method)
    params: dict[str, Any] = {"coords": d, "norm": "l2"}
    if rh is not None:
        params["rho"] = rh
    else:
        params.update(epsilon=eps, delta=dlt, method=method)

    def draw(rng: RandomSource) -> Any:
        from dpkit.noise import sample_discrete_gaussian

        noisy = _add(arr, sample_discrete_gaussian(sigma, d, rng=rng))
        return _common.out(noisy, scalar, int)

    return Plan(mechanism="discrete_gaussian", cost=cost, draw=draw, sensitivity=sens, scale=sigma,
                noise="discrete_gaussian", params=params, neighbours=None)
