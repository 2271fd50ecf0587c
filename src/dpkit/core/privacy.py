"""Privacy loss types and conversions between them.

A *privacy loss* is the cost of one release (or the size of a budget) under one
definition of differential privacy:

- :class:`PureDP` ``(epsilon)``: ``P[M(D) in S] <= e^eps P[M(D') in S]``.
- :class:`ApproxDP` ``(epsilon, delta)``: ``P[M(D) in S] <= e^eps P[M(D') in S] + delta``.
- :class:`ZCDP` ``(rho)``: zero-concentrated DP, ``D_alpha(M(D)||M(D')) <= rho * alpha`` for all alpha > 1
  (Bun & Steinke 2016).
- :class:`RDP`: a Renyi-DP curve, ``D_alpha(M(D)||M(D')) <= eps(alpha)`` at a finite set of orders
  (Mironov 2017).

Neighbouring datasets D, D' are defined by the accountant's neighbour relation
(:mod:`dpkit.core.neighbours`), not by the loss type.

Conversions use the tightest bounds known to us:

- pure -> zCDP: rho = eps^2 / 2 (Bun & Steinke 2016, Prop 1.4).
- zCDP -> (eps, delta): Canonne, Kamath & Steinke 2020, Prop 12 / Cor 13,
  ``delta = inf_{a>1} exp((a-1)(a rho - eps)) / (a-1) * (1 - 1/a)^a`` (never the loose
  ``rho + 2 sqrt(rho ln 1/delta)``, which is only used as a documented upper bound in tests).
- RDP -> (eps, delta): Balle, Barthe, Gaboardi, Hsu & Sato 2020, Thm 21,
  ``eps = eps(a) + ln((a-1)/a) - (ln delta + ln a)/(a-1)``, minimised over the curve's orders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType

__all__ = ["RDP", "ZCDP", "ApproxDP", "PrivacyLoss", "PureDP", "approx_to_zcdp_rho", "bounded_range_epsilon",
           "rdp_to_approx_epsilon", "zcdp_to_approx_delta", "zcdp_to_approx_epsilon"]



def _items(name: str, value: Any) -> tuple[Any, ...]:
    """The entries of a public 1-D sequence (tuple, list, 1-D array); :class:`WrongType` otherwise."""
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)) or \
            (isinstance(value, np.ndarray) and value.ndim != 1):
        raise WrongType(name, "a sequence of real numbers")
    try:
        return tuple(value)
    except TypeError:
        raise WrongType(name, "a sequence of real numbers") from None

@dataclass(frozen=True)
class PureDP:
    """Pure epsilon-DP."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check.nonnegative("epsilon", self.epsilon))

    def to_zcdp(self) -> ZCDP:
        """eps-DP implies (eps^2/2)-zCDP."""
        return ZCDP(self.epsilon**2 / 2.0)

    def to_approx(self) -> ApproxDP:
        return ApproxDP(self.epsilon, 0.0)

    def __str__(self) -> str:
        return f"ε={self.epsilon:.6g}"


@dataclass(frozen=True)
class ApproxDP:
    """Approximate (epsilon, delta)-DP."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check.nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check.delta(self.delta))

    def to_approx(self) -> ApproxDP:
        return self

    def __str__(self) -> str:
        return f"ε={self.epsilon:.6g}, δ={self.delta:.3g}"


@dataclass(frozen=True)
class ZCDP:
    """rho-zero-concentrated DP."""

    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check.nonnegative("rho", self.rho))

    def to_zcdp(self) -> ZCDP:
        return self

    def to_approx(self, delta: float) -> ApproxDP:
        """The smallest epsilon (CKS 2020 conversion) such that this is (epsilon, delta)-DP."""
        return ApproxDP(zcdp_to_approx_epsilon(self.rho, delta), delta)

    def to_rdp(self, orders: tuple[float, ...] | None = None) -> RDP:
        orders = orders or _DEFAULT_ORDERS
        return RDP(tuple(orders), tuple(self.rho * a for a in orders))

    def __str__(self) -> str:
        return f"ρ={self.rho:.6g}"


_DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5] + [float(a) for a in range(5, 64)]
    + [64.0, 80.0, 96.0, 128.0, 256.0, 512.0, 1024.0]
)


@dataclass(frozen=True)
class RDP:
    """A Renyi-DP curve: ``eps(alpha)`` at the given orders (all > 1)."""

    orders: tuple[float, ...]
    epsilons: tuple[float, ...]

    def __post_init__(self) -> None:
        orders = tuple(check.real("orders", a) for a in _items("orders", self.orders))
        eps = tuple(check.nonnegative("epsilons", e) for e in _items("epsilons", self.epsilons))
        if len(orders) == 0 or len(orders) != len(eps):
            raise InvalidParameter("orders", "must be non-empty and as long as epsilons")
        if any(a <= 1 for a in orders):
            raise InvalidParameter("orders", "every order must be > 1")
        object.__setattr__(self, "orders", orders)
        object.__setattr__(self, "epsilons", eps)

    def to_approx(self, delta: float) -> ApproxDP:
        return ApproxDP(rdp_to_approx_epsilon(self.orders, self.epsilons, delta), delta)

    def __add__(self, other: RDP) -> RDP:
        if self.orders != other.orders:
            raise InvalidParameter("orders", "RDP curves must share their orders to be composed")
        return RDP(self.orders, tuple(a + b for a, b in zip(self.epsilons, other.epsilons, strict=True)))

    def __str__(self) -> str:
        return f"RDP({len(self.orders)} orders)"


PrivacyLoss = PureDP | ApproxDP | ZCDP | RDP


def _cks_log_delta(rho: float, eps: float, alpha: float) -> float:
    # log of exp((a-1)(a rho - eps)) / (a-1) * (1 - 1/a)^a   (CKS 2020, Prop 12)
    a = alpha
    return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1.0 / a)


def zcdp_to_approx_delta(rho: float, epsilon: float) -> float:
    """delta such that rho-zCDP implies (epsilon, delta)-DP (CKS 2020, minimised over alpha > 1)."""
    rho = check.nonnegative("rho", rho)
    epsilon = check.nonnegative("epsilon", epsilon)
    if rho == 0:
        return 0.0
    from scipy import optimize

    # The objective is convex in alpha; its unconstrained optimum is near (eps + rho) / (2 rho) + 1.
    try:
        hi = max(4.0, 4.0 * (epsilon + rho) / (2 * rho) + 4.0)
        if not math.isfinite(hi):
            raise OverflowError
        res = optimize.minimize_scalar(lambda a: _cks_log_delta(rho, epsilon, a),
                                       bounds=(1.0 + 1e-9, hi), method="bounded",
                                       options={"xatol": 1e-10})
        out = float(min(1.0, math.exp(min(0.0, res.fun))))
    except (ArithmeticError, ValueError):  # extreme (finite) rho / epsilon beyond float range
        raise InvalidParameter("rho", "with this epsilon: outside the range the conversion supports") from None
    if math.isnan(out):
        raise InvalidParameter("rho", "with this epsilon: outside the range the conversion supports")
    return out


def zcdp_to_approx_epsilon(rho: float, delta: float) -> float:
    """Smallest epsilon with rho-zCDP => (epsilon, delta)-DP (CKS 2020 conversion)."""
    rho = check.nonnegative("rho", rho)
    delta = check.delta(delta, allow_zero=False)
    if rho == 0:
        return 0.0
    loose = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    if not math.isfinite(loose + 1.0):
        raise InvalidParameter("rho", "outside the range the conversion supports")
    f = lambda e: zcdp_to_approx_delta(rho, e) - delta
    if f(0.0) <= 0:
        return 0.0
    from scipy import optimize

    try:
        eps = optimize.brentq(f, 0.0, loose + 1.0, xtol=1e-13, rtol=1e-13, maxiter=500)
    except (ArithmeticError, ValueError, RuntimeError):  # no sign change / no convergence at extreme rho
        raise InvalidParameter("rho", "with this delta: outside the range the conversion supports") from None
    # brentq returns a point within tolerance; nudge up so the delta bound is met (geometric steps: few).
    for _ in range(10_000):
        if f(eps) <= 0:
            return float(eps)
        eps = _exact.up(eps) * (1 + 1e-12)
    raise InvalidParameter("rho", "with this delta: outside the range the conversion supports")


def rdp_to_approx_epsilon(orders: tuple[float, ...] | np.ndarray, epsilons: tuple[float, ...] | np.ndarray,
                          delta: float) -> float:
    """Balle et al. 2020 (Thm 21) RDP -> (eps, delta), minimised over the given orders."""
    delta = check.delta(delta, allow_zero=False)
    # Validate through RDP: an order <= 1, a NaN or a negative epsilon would otherwise make the
    # minimum NaN and max(0.0, nan) silently returns 0.0 (an unsafe epsilon).
    curve = RDP(tuple(np.ravel(orders)) if isinstance(orders, np.ndarray) else orders,
                tuple(np.ravel(epsilons)) if isinstance(epsilons, np.ndarray) else epsilons)
    a = np.asarray(curve.orders, dtype=float)
    e = np.asarray(curve.epsilons, dtype=float)
    cand = e + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    return float(max(0.0, np.min(cand)))


def approx_to_zcdp_rho(epsilon: float, delta: float) -> float:
    """The largest ``rho`` (bisection to 1e-12 relative, never above the exact answer as computed) such that
    ``rho``-zCDP implies ``(epsilon, delta)``-DP by :func:`zcdp_to_approx_delta` (Canonne, Kamath & Steinke 2020).
    The one conversion the Gaussian mechanism and the zCDP marginal releases use for an ``(epsilon, delta)``
    budget. Typed errors name ``epsilon``/``delta``."""
    eps = check.epsilon(epsilon)
    dlt = check.delta(delta, allow_zero=False)

    def too_big(rho: float) -> bool:
        return zcdp_to_approx_delta(rho, eps) > dlt

    hi = _exact.expand(too_big, eps, 2.0, limit=math.inf)
    lo = _exact.expand(lambda r: not too_big(r), hi / 2.0, 0.5, limit=0.0) if hi is not None else None
    if hi is None or lo is None:  # pragma: no cover - the conversion's delta runs from 0 to 1 as rho grows
        raise InvalidParameter("epsilon", "with this delta: outside the range the zCDP conversion supports")
    lo, _ = _exact.bisect(too_big, lo, hi, rel_tol=1e-12, max_iter=100)
    if not lo > 0:
        raise InvalidParameter("delta", "with this epsilon leaves no zCDP budget")
    return lo


def bounded_range_epsilon(rho: float) -> float:
    """The largest float ``eps`` with ``eps² / 8 <= rho`` (exact rational check): the exponential mechanism with
    parameter ``eps`` is ``eps``-bounded-range, hence ``eps²/8``-zCDP (Cesar & Rogers 2021). The selection
    steps of the zCDP marginal releases (MWEM, MST, smg) spend their share ``rho`` through it."""
    from fractions import Fraction

    r = check.positive("rho", rho)
    target = 8 * Fraction(r)
    return _exact.down_until(lambda e: Fraction(e) ** 2 <= target, math.sqrt(8.0 * r))

