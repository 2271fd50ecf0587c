"""Exact privacy-loss calculator, computed in log space.

For a mechanism whose output law is known in closed form, the privacy loss of an output
event ``S`` between neighbouring inputs ``D`` and ``D'`` is

    ln( P[M(D) in S] / P[M(D') in S] ).

A mechanism is pure eps-DP iff this is at most eps for every ``S`` (and both orders of the
pair). This module computes it *exactly*, up to floating-point rounding, and always in log
space: probabilities are formed from log-densities, log-cdfs and log-survival functions, and
differences of probabilities are taken with ``log1mexp``. Plain arithmetic on probabilities
underflows in the tails, and plain adaptive quadrature of products of cdf terms is known to
report spurious violations (e.g. 6.43 instead of 6.25 for the Lee–Clifton SVT
counterexample), so neither is used here.

Laws
----
A *law* is any object with the methods

- continuous: ``logpdf(x)``, ``logcdf(x)`` (``ln P[X <= x]``), ``logsf(x)`` (``ln P[X > x]``);
- discrete: ``logpmf(x)``, ``logcdf(x)``, ``logsf(x)``; optionally ``log_lt(x)`` (``ln P[X < x]``)
  and ``log_ge(x)`` (``ln P[X >= x]``). Without them the support is taken to be the integers.

scipy's frozen distributions (``scipy.stats.norm(0, 1)``, ``scipy.stats.poisson(3)``) qualify.
dpkit provides :class:`Laplace`, :class:`Gaussian`, :class:`DiscreteLaplace`,
:class:`DiscreteGaussian`, :class:`Lattice` (a scaled and shifted integer law, the law of
:func:`dpkit.noise.lattice_laplace` outputs) and :class:`Truncated` (a law conditioned on an
interval, e.g. the output of a "resample until in range" mechanism), all with tails that are
accurate far beyond where ``exp`` underflows.

Events
------
:class:`Point` (for a continuous law its *density*, for a discrete law its mass),
:class:`Interval`, :class:`HalfLine` and :class:`FiniteSet`. Any object with a method
``log_prob(law) -> float`` can be used as an event.

Integrals
---------
:func:`log_integral` computes ``ln ∫_a^b exp(log_f(z)) dz`` without overflow or underflow.
It is the tool for mechanisms whose output probability is an integral over a shared noise
variable, e.g. the sparse vector technique, where

    P[SVT(D) = ⊥^m ⊤] = ∫ p_rho(z) · Π_i P[q_i + nu_i < z] · P[q_{m+1} + nu_{m+1} >= z] dz.

Example
-------
>>> from dpkit.audit.exact import Laplace, HalfLine, privacy_loss, max_privacy_loss
>>> # Laplace mechanism, sensitivity 1, epsilon 0.5, on f(D) = 0 and f(D') = 1
>>> round(privacy_loss(Laplace(0.0, 2.0), Laplace(1.0, 2.0), HalfLine(-3.0, "<=")), 6)
0.5
>>> worst = max_privacy_loss(Laplace(0.0, 2.0), Laplace(1.0, 2.0), grid=[-5.0, 0.0, 0.5, 5.0])
>>> round(worst.loss, 6)
0.5
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from scipy import integrate, optimize, special

from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Event",
    "FiniteSet",
    "Gaussian",
    "HalfLine",
    "Interval",
    "Laplace",
    "Lattice",
    "MaxLoss",
    "Point",
    "Truncated",
    "log1mexp",
    "log_diff_exp",
    "log_integral",
    "log_prob",
    "max_privacy_loss",
    "privacy_loss",
]

_NEG_INF = -math.inf
_LOG_HALF = math.log(0.5)


# ---------------------------------------------------------------------------------------------
# log-space helpers
# ---------------------------------------------------------------------------------------------


def _extended_real(name: str, value: Any) -> float:
    """A real number, infinities allowed (NaN, bools, None and non-numbers refused; typed, never echoed)."""
    if isinstance(value, float) and math.isinf(value):
        return value
    if isinstance(value, (np.floating, np.ndarray)) and np.ndim(value) == 0 and np.isinf(value):
        return float(value)
    try:
        return check.real(name, value)
    except InvalidParameter:
        raise InvalidParameter(name, "must be a real number (infinite allowed), not NaN or beyond float range") \
            from None


def log1mexp(x: float) -> float:
    """``ln(1 - e^x)`` for ``x <= 0``, accurate for all x (Mächler 2012). ``log1mexp(0) = -inf``."""
    x = _extended_real("x", x)
    if x == _NEG_INF:
        return 0.0
    if x > 0:
        if x < 1e-12:  # rounding noise from a difference of logs: treat as 0
            return _NEG_INF
        raise InvalidParameter("x", "must be <= 0")
    if x == 0:
        return _NEG_INF
    if x > -math.log(2.0):
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


def log_diff_exp(a: float, b: float) -> float:
    """``ln(e^a - e^b)`` for ``a >= b`` (``-inf`` when equal)."""
    a = _extended_real("a", a)
    b = _extended_real("b", b)
    if a == math.inf:
        if b == math.inf:
            raise InvalidParameter("b", "must be finite when a is +inf")
        return math.inf
    if b == math.inf:
        raise InvalidParameter("b", "must be <= a")
    if b == _NEG_INF:
        return a
    if a == _NEG_INF:
        return _NEG_INF
    try:
        return a + log1mexp(b - a)
    except InvalidParameter:
        raise InvalidParameter("b", "must be <= a") from None


def _logaddexp(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


# ---------------------------------------------------------------------------------------------
# laws
# ---------------------------------------------------------------------------------------------


@runtime_checkable
class _ContinuousLaw(Protocol):  # pragma: no cover - typing only
    def logpdf(self, x: Any) -> Any: ...
    def logcdf(self, x: Any) -> Any: ...
    def logsf(self, x: Any) -> Any: ...


def _is_discrete(law: Any) -> bool:
    if hasattr(law, "logpmf"):
        return True
    if hasattr(law, "logpdf"):
        return False
    raise WrongType("law", "an object with logpdf (continuous) or logpmf (discrete), logcdf and logsf")


def _f(v: Any) -> float:
    return float(np.asarray(v, dtype=np.float64))


def _log_le(law: Any, x: float) -> float:
    """ln P[X <= x]."""
    if x == math.inf:
        return 0.0
    if x == -math.inf:
        return _NEG_INF
    return min(_f(law.logcdf(x)), 0.0)


def _log_gt(law: Any, x: float) -> float:
    """ln P[X > x]."""
    if x == math.inf:
        return _NEG_INF
    if x == -math.inf:
        return 0.0
    return min(_f(law.logsf(x)), 0.0)


def _log_lt(law: Any, x: float) -> float:
    """ln P[X < x]."""
    if not _is_discrete(law):
        return _log_le(law, x)
    if hasattr(law, "log_lt"):
        return min(_f(law.log_lt(x)), 0.0)
    if math.isinf(x):
        return _log_le(law, x)
    return _log_le(law, math.ceil(x) - 1)  # integer support


def _log_ge(law: Any, x: float) -> float:
    """ln P[X >= x]."""
    if not _is_discrete(law):
        return _log_gt(law, x)
    if hasattr(law, "log_ge"):
        return min(_f(law.log_ge(x)), 0.0)
    if math.isinf(x):
        return _log_gt(law, x)
    return _log_gt(law, math.ceil(x) - 1)  # integer support


def _log_between(law: Any, lo: float, hi: float, lo_closed: bool = True, hi_closed: bool = True) -> float:
    """ln P[lo (<|<=) X (<|<=) hi], choosing the formula with the least cancellation."""
    if lo > hi or (lo == hi and not (lo_closed and hi_closed)):
        return _NEG_INF
    below_hi = _log_le(law, hi) if hi_closed else _log_lt(law, hi)  # P[X in (-inf, hi]]
    below_lo = _log_lt(law, lo) if lo_closed else _log_le(law, lo)  # P[X in (-inf, lo)) (excluded part)
    if below_hi <= _LOG_HALF:
        return log_diff_exp(below_hi, below_lo) if below_hi >= below_lo else _NEG_INF
    above_lo = _log_ge(law, lo) if lo_closed else _log_gt(law, lo)  # P[X in [lo, inf)]
    above_hi = _log_gt(law, hi) if hi_closed else _log_ge(law, hi)  # excluded upper part
    if above_lo <= _LOG_HALF:
        return log_diff_exp(above_lo, above_hi) if above_lo >= above_hi else _NEG_INF
    # the interval holds the bulk: 1 - P[below] - P[above], both terms <= 1/2
    return log1mexp(min(_logaddexp(below_lo, above_hi), 0.0))


class _Law:
    """Shared behaviour of dpkit's law classes: vectorised wrappers and a repr."""

    discrete: bool = False

    def _vec(self, fn: Callable[[float], float], x: ArrayLike) -> float | np.ndarray:
        arr = np.asarray(x, dtype=np.float64)
        if arr.ndim == 0:
            return fn(float(arr))
        return np.vectorize(fn, otypes=[np.float64])(arr)


class Laplace(_Law):
    """Laplace law with location ``loc`` and scale ``scale`` (density ``exp(-|x-loc|/scale) / (2 scale)``)."""

    def __init__(self, loc: float, scale: float) -> None:
        self.loc = check.real("loc", loc)
        self.scale = check.positive("scale", scale)

    def logpdf(self, x: ArrayLike) -> float | np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = -np.abs(x - self.loc) / self.scale - math.log(2.0 * self.scale)
        return float(out) if out.ndim == 0 else out

    def _logcdf1(self, x: float) -> float:
        z = (x - self.loc) / self.scale
        if z < 0:
            return _LOG_HALF + z
        return math.log1p(-0.5 * math.exp(-z))

    def logcdf(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(self._logcdf1, x)

    def logsf(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(lambda t: self._logcdf1(2.0 * self.loc - t), x)  # P[X > t] = P[X < 2 loc - t]

    def __repr__(self) -> str:
        return f"Laplace(loc={self.loc!r}, scale={self.scale!r})"


class Gaussian(_Law):
    """Gaussian law N(loc, sigma²)."""

    def __init__(self, loc: float, sigma: float) -> None:
        self.loc = check.real("loc", loc)
        self.sigma = check.positive("sigma", sigma)

    def logpdf(self, x: ArrayLike) -> float | np.ndarray:
        z = (np.asarray(x, dtype=np.float64) - self.loc) / self.sigma
        out = -0.5 * z * z - math.log(self.sigma) - 0.5 * math.log(2.0 * math.pi)
        return float(out) if out.ndim == 0 else out

    def logcdf(self, x: ArrayLike) -> float | np.ndarray:
        out = special.log_ndtr((np.asarray(x, dtype=np.float64) - self.loc) / self.sigma)
        return float(out) if np.ndim(out) == 0 else out

    def logsf(self, x: ArrayLike) -> float | np.ndarray:
        out = special.log_ndtr((self.loc - np.asarray(x, dtype=np.float64)) / self.sigma)
        return float(out) if np.ndim(out) == 0 else out

    def __repr__(self) -> str:
        return f"Gaussian(loc={self.loc!r}, sigma={self.sigma!r})"


class _IntegerLaw(_Law):
    """A law on the integers, symmetric about an integer ``loc``, defined by its upper tail
    ``_log_tail(m) = ln P[X >= loc + m]`` for integers ``m >= 0`` and ``_log_mass(m)``."""

    discrete = True
    loc: int

    def _log_mass(self, m: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _log_tail(self, m: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def _logpmf1(self, x: float) -> float:
        if x != math.floor(x):
            return _NEG_INF
        return self._log_mass(abs(int(x) - self.loc))

    def _logcdf1(self, x: float) -> float:
        if x == math.inf:
            return 0.0
        if x == -math.inf:
            return _NEG_INF
        j = math.floor(x)
        m = self.loc - j
        if m >= 0:  # P[X <= loc - m] = P[X >= loc + m]
            return self._log_tail(m)
        return log1mexp(self._log_tail(-m + 1))  # 1 - P[X >= j + 1]

    def logpmf(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(self._logpmf1, x)

    def logcdf(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(self._logcdf1, x)

    def logsf(self, x: ArrayLike) -> float | np.ndarray:
        # P[X > x] = P[X < 2 loc - x] = P[X <= ceil(2 loc - x) - 1]
        return self._vec(lambda t: self._logcdf1(math.ceil(2 * self.loc - t) - 1) if math.isfinite(t)
                         else (0.0 if t < 0 else _NEG_INF), x)


def _integer_loc(loc: Any) -> int:
    v = check.real("loc", loc)
    if v != math.floor(v) or abs(v) >= 2.0**62:
        raise InvalidParameter("loc", "must be an integer")
    return int(v)


class DiscreteLaplace(_IntegerLaw):
    """Discrete Laplace law on the integers: ``P[k] ∝ exp(-|k - loc| / scale)``, ``loc`` an integer.

    Tail sums are closed-form: ``P[X >= loc + m] = q^m / (1 + q)`` with ``q = e^{-1/scale}``.
    """

    def __init__(self, loc: int, scale: float) -> None:
        self.loc = _integer_loc(loc)
        self.scale = check.positive("scale", scale)
        self._logq = -1.0 / self.scale
        self._log1pq = math.log1p(math.exp(self._logq))
        # ln((1-q)/(1+q))
        self._lognorm = log1mexp(self._logq) - self._log1pq

    def _log_mass(self, m: int) -> float:
        return self._lognorm + (m * self._logq if m else 0.0)  # m = 0: no 0 * -inf at a vanishing scale

    def _log_tail(self, m: int) -> float:
        return (m * self._logq if m else 0.0) - self._log1pq

    def __repr__(self) -> str:
        return f"DiscreteLaplace(loc={self.loc!r}, scale={self.scale!r})"


_MIN_SIGMA = 1e-100


class DiscreteGaussian(_IntegerLaw):
    """Discrete Gaussian law on the integers: ``P[k] ∝ exp(-(k - loc)² / (2 sigma²))``, ``loc`` an integer.

    The normaliser and tail sums are exact to double precision: direct log-sum-exp over every
    integer within 40 sigma for sigma <= 2000; beyond, the Jacobi-theta identity for the
    normaliser, and for tails either direct sums (where terms shrink geometrically) or the
    Euler–Maclaurin formula (relative error below 1e-14).
    """

    _DIRECT_MAX_SIGMA = 2000.0

    def __init__(self, loc: int, sigma: float) -> None:
        self.loc = _integer_loc(loc)
        self.sigma = check.positive("sigma", sigma)
        if self.sigma < _MIN_SIGMA:  # sigma² would underflow: the law is a point mass at loc in double precision
            raise InvalidParameter("sigma", f"must be >= {_MIN_SIGMA:g}")
        s2 = self.sigma * self.sigma
        self._half_inv_s2 = 0.5 / s2
        if self.sigma <= self._DIRECT_MAX_SIGMA:
            self._K: int | None = math.ceil(40.0 * self.sigma) + 2
            k = np.arange(0, self._K + 1, dtype=np.float64)
            logw = -(k * k) * self._half_inv_s2
            # upper tail sums (unnormalised) T[m] = sum_{k >= m} w_k, as a reversed cumulative logsumexp
            rev = np.logaddexp.accumulate(logw[::-1])[::-1]
            # add the (tiny) mass beyond the table so that tails near its end stay exact
            rev = np.logaddexp(rev, self._tail_sum(self._K + 1))
            self._log_tails_unnorm = rev
            lognorm = float(np.logaddexp(rev[0], rev[1]))  # sum over all k = T[0] + T[1]
        else:
            self._K = None
            # Poisson summation: sum_k exp(-k²/(2s²)) = s sqrt(2 pi) (1 + 2 sum_n exp(-2 pi² s² n²))
            lognorm = math.log(self.sigma) + 0.5 * math.log(2.0 * math.pi)  # corrections < 1e-300
        self._lognorm = lognorm

    def _log_mass(self, m: int) -> float:
        return -(m * m) * self._half_inv_s2 - self._lognorm

    def _log_tail(self, m: int) -> float:
        if self._K is not None and m <= self._K:
            return float(self._log_tails_unnorm[m]) - self._lognorm
        return self._tail_sum(m) - self._lognorm

    def _tail_sum(self, m: int) -> float:
        """ln sum_{k >= m} exp(-k²/(2s²)) for m >= 0 beyond the precomputed table.

        Successive terms shrink by at least exp(-h), h = m/s². If h > 1e-3 the terms are summed
        directly until they fall below e^-60 of the first (at most ~6e4 terms). Otherwise the
        Euler–Maclaurin formula ``∫_m^∞ f + f(m)/2 + (h/12) f(m)`` is used; its next term is
        ``O(h^4/720)`` relative (< 1e-14).
        """
        s = self.sigma
        h = m / (s * s)
        if h > 1e-3:
            count = math.ceil(60.0 / h) + 2
            k = np.arange(m, m + count, dtype=np.float64)
            return float(special.logsumexp(-(k * k) * self._half_inv_s2))
        log_fm = -(m * m) * self._half_inv_s2
        log_int = float(special.log_ndtr(-m / s)) + math.log(s) + 0.5 * math.log(2.0 * math.pi)
        return _logaddexp(log_int, log_fm + math.log(0.5 + h / 12.0))

    def __repr__(self) -> str:
        return f"DiscreteGaussian(loc={self.loc!r}, sigma={self.sigma!r})"


class Lattice(_Law):
    """The law of ``offset + granularity * K`` for an integer-valued law ``K`` (a "lattice" law).

    This is the output law of :func:`dpkit.noise.lattice_laplace` /
    :func:`dpkit.noise.lattice_gaussian`: for a value v the output is
    ``Lattice(DiscreteLaplace(0, scale / g), g, offset=g * round_half_even(v / g))``.
    Points off the lattice have mass 0.
    """

    discrete = True

    def __init__(self, base: Any, granularity: float, offset: float = 0.0) -> None:
        if not _is_discrete(base):
            raise WrongType("base", "a discrete (integer-valued) law with logpmf")
        self.base = base
        self.granularity = check.positive("granularity", granularity)
        self.offset = check.real("offset", offset)

    def _index(self, x: float) -> float:
        return (x - self.offset) / self.granularity

    def logpmf(self, x: ArrayLike) -> float | np.ndarray:
        def one(t: float) -> float:
            k = self._index(t)
            r = round(k)
            if not math.isfinite(k) or abs(k - r) > 1e-9 * max(1.0, abs(k)):
                return _NEG_INF
            return _f(self.base.logpmf(r))

        return self._vec(one, x)

    def logcdf(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(lambda t: _log_le(self.base, math.floor(self._index(t) + 1e-9)), x)

    def logsf(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(lambda t: _log_gt(self.base, math.floor(self._index(t) + 1e-9)), x)

    def log_lt(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(lambda t: _log_le(self.base, math.ceil(self._index(t) - 1e-9) - 1), x)

    def log_ge(self, x: ArrayLike) -> float | np.ndarray:
        return self._vec(lambda t: _log_gt(self.base, math.ceil(self._index(t) - 1e-9) - 1), x)

    def __repr__(self) -> str:
        return f"Lattice({self.base!r}, granularity={self.granularity!r}, offset={self.offset!r})"


class Truncated(_Law):
    """A law conditioned on ``lo <= X <= hi``.

    This is the output law of a mechanism that *resamples until the output is in range*
    (e.g. the PINQ-style noisy average). Example: the resampling average of n records with
    sum S, range [a, b] and noise Lap((b - a)/eps) outputs
    ``Truncated(Laplace(S / n, (b - a) / (eps * n)), a, b)``.
    """

    def __init__(self, base: Any, lo: float, hi: float) -> None:
        self.discrete = _is_discrete(base)
        self.base = base
        lo = _extended_real("lo", lo)
        hi = _extended_real("hi", hi)
        if lo > hi:
            raise InvalidParameter("lo", "must be <= hi")
        self.lo, self.hi = lo, hi
        self._logz = _law_call("base", _log_between, base, lo, hi)
        if self._logz == _NEG_INF:
            raise InvalidParameter("lo", "the interval [lo, hi] has probability zero under the base law")

    def _inside(self, t: float) -> bool:
        return self.lo <= t <= self.hi

    def _density(self, t: float) -> float:
        if not self._inside(t):
            return _NEG_INF
        fn = self.base.logpmf if self.discrete else self.base.logpdf
        return _f(fn(t)) - self._logz

    def __getattr__(self, name: str) -> Any:
        # expose logpmf only for discrete bases and logpdf only for continuous ones
        if name == "logpmf" and self.__dict__.get("discrete"):
            return lambda x: self._vec(self._density, x)
        if name == "logpdf" and "discrete" in self.__dict__ and not self.__dict__["discrete"]:
            return lambda x: self._vec(self._density, x)
        raise AttributeError(name)

    def logcdf(self, x: ArrayLike) -> float | np.ndarray:
        def one(t: float) -> float:
            if t < self.lo:
                return _NEG_INF
            if t >= self.hi:
                return 0.0
            return min(_log_between(self.base, self.lo, t) - self._logz, 0.0)

        return self._vec(one, x)

    def logsf(self, x: ArrayLike) -> float | np.ndarray:
        def one(t: float) -> float:
            if t < self.lo:
                return 0.0
            if t >= self.hi:
                return _NEG_INF
            return min(_log_between(self.base, t, self.hi, lo_closed=False) - self._logz, 0.0)

        return self._vec(one, x)

    def log_lt(self, x: ArrayLike) -> float | np.ndarray:
        def one(t: float) -> float:
            if t <= self.lo:
                return _NEG_INF
            if t > self.hi:
                return 0.0
            return min(_log_between(self.base, self.lo, t, hi_closed=False) - self._logz, 0.0)

        return self._vec(one, x)

    def log_ge(self, x: ArrayLike) -> float | np.ndarray:
        def one(t: float) -> float:
            if t <= self.lo:
                return 0.0
            if t > self.hi:
                return _NEG_INF
            return min(_log_between(self.base, t, self.hi) - self._logz, 0.0)

        return self._vec(one, x)

    def __repr__(self) -> str:
        return f"Truncated({self.base!r}, lo={self.lo!r}, hi={self.hi!r})"


# ---------------------------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------------------------


class Event(Protocol):
    """Anything with ``log_prob(law) -> float`` (the natural log of the event's probability)."""

    def log_prob(self, law: Any) -> float: ...  # pragma: no cover - protocol


def _point_value(name: str, x: Any) -> float:
    v = check.real(name, x)
    return v


@dataclass(frozen=True)
class Point:
    """The event ``{X = x}``. For a continuous law its log-*density* at x (so a privacy loss
    between two continuous laws at a point is the log density ratio, the limit of small
    intervals around x); for a discrete law its log-mass."""

    x: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "x", _point_value("x", self.x))

    def log_prob(self, law: Any) -> float:
        fn = law.logpmf if _is_discrete(law) else law.logpdf
        return _f(fn(self.x))

    def contains(self, outputs: Any) -> np.ndarray:
        """Elementwise membership, for the statistical auditor."""
        return np.asarray(outputs) == self.x

    def __str__(self) -> str:
        return f"output == {self.x:.6g}"


@dataclass(frozen=True)
class Interval:
    """The event ``{lo <= X <= hi}`` (either end open with ``lo_closed=False`` / ``hi_closed=False``;
    ends may be infinite)."""

    lo: float
    hi: float
    lo_closed: bool = True
    hi_closed: bool = True

    def __post_init__(self) -> None:
        for name in ("lo", "hi"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                    or (isinstance(v, (float, np.floating)) and math.isnan(v)):
                raise WrongType(name, "a real number (infinite allowed)")
            object.__setattr__(self, name, _extended_real(name, v))
        for name in ("lo_closed", "hi_closed"):
            object.__setattr__(self, name, check.flag(name, getattr(self, name)))
        if self.lo > self.hi:
            raise InvalidParameter("lo", "must be <= hi")

    def log_prob(self, law: Any) -> float:
        return _log_between(law, self.lo, self.hi, self.lo_closed, self.hi_closed)

    def contains(self, outputs: Any) -> np.ndarray:
        """Elementwise membership, for the statistical auditor."""
        x = np.asarray(outputs)
        above = x >= self.lo if self.lo_closed else x > self.lo
        below = x <= self.hi if self.hi_closed else x < self.hi
        return above & below

    def __str__(self) -> str:
        return f"{self.lo:.6g} {'<=' if self.lo_closed else '<'} output {'<=' if self.hi_closed else '<'} {self.hi:.6g}"


_SIDES = ("<=", "<", ">=", ">")


@dataclass(frozen=True)
class HalfLine:
    """The event ``{X side t}`` with side one of ``"<="``, ``"<"``, ``">="``, ``">"``."""

    t: float
    side: str = "<="

    def __post_init__(self) -> None:
        object.__setattr__(self, "t", _point_value("t", self.t))
        if not isinstance(self.side, str) or self.side not in _SIDES:
            raise InvalidParameter("side", "must be one of '<=', '<', '>=', '>'")

    def log_prob(self, law: Any) -> float:
        return {"<=": _log_le, "<": _log_lt, ">=": _log_ge, ">": _log_gt}[self.side](law, self.t)

    def contains(self, outputs: Any) -> np.ndarray:
        """Elementwise membership, for the statistical auditor."""
        x = np.asarray(outputs)
        return {"<=": x <= self.t, "<": x < self.t, ">=": x >= self.t, ">": x > self.t}[self.side]

    def __str__(self) -> str:
        return f"output {self.side} {self.t:.6g}"


@dataclass(frozen=True)
class FiniteSet:
    """The event ``{X in points}`` for a discrete law (a finite set has probability 0 under a
    continuous law; use :class:`Point` for densities)."""

    points: tuple[float, ...]

    def __post_init__(self) -> None:
        raw: Any = self.points
        if raw is None or isinstance(raw, (str, bytes, dict, set, frozenset)):
            raise WrongType("points", "a sequence of finite reals")
        if np.isscalar(raw) or (isinstance(raw, np.ndarray) and raw.ndim == 0):
            raw = [raw]
        try:
            raw = list(raw)
        except Exception:
            raise WrongType("points", "a sequence of finite reals") from None
        pts = check.finite_array("points", check.as_array("points", raw, "a sequence of finite reals"))
        if pts.size > _MAX_POINTS:
            raise InvalidParameter("points", f"has more than {_MAX_POINTS} entries")
        object.__setattr__(self, "points", tuple(sorted(set(float(p) for p in pts.ravel()))))

    def log_prob(self, law: Any) -> float:
        if not _is_discrete(law):
            raise InvalidParameter("event", "a finite set has probability zero under a continuous law; "
                                            "use Point (density) or Interval")
        vals = np.asarray(law.logpmf(np.asarray(self.points)), dtype=np.float64)
        return float(special.logsumexp(vals)) if np.any(vals > _NEG_INF) else _NEG_INF

    def contains(self, outputs: Any) -> np.ndarray:
        """Elementwise membership, for the statistical auditor."""
        return np.isin(np.asarray(outputs), np.asarray(self.points))

    def __str__(self) -> str:
        shown = ", ".join(f"{p:.6g}" for p in self.points[:8])
        return f"output in {{{shown}{', ...' if len(self.points) > 8 else ''}}}"


_MAX_POINTS = 10**6
_MAX_EVENTS = 10**5


def _law_call(name: str, fn: Callable[..., Any], *args: Any, what: str = "") -> float:
    """``fn(*args)`` for a law or event computation: a failure of a caller's law or event object (or float
    arithmetic at extreme parameters) becomes a typed error naming ``name`` (never chained: it may hold data)."""
    from dpkit.core.errors import DPKitError
    try:
        return float(fn(*args))
    except DPKitError:
        raise
    except (RecursionError, MemoryError):
        raise InvalidParameter(name, "could not be evaluated (too deep or too large)") from None
    except Exception:
        raise InvalidParameter(name, what or "could not be evaluated: its log_prob / logpdf / logpmf failed "
                                             "or the parameters are outside the supported range") from None


def _check_event(event: Any) -> None:
    if not callable(getattr(event, "log_prob", None)):
        raise WrongType("event", "an event (Point, Interval, HalfLine, FiniteSet or an object with log_prob(law))")


def log_prob(law: Any, event: Any) -> float:
    """``ln P[X in event]`` for ``X ~ law`` (a log-density for a :class:`Point` of a continuous law).

    >>> from dpkit.audit.exact import Gaussian, HalfLine, log_prob
    >>> round(log_prob(Gaussian(0.0, 1.0), HalfLine(40.0, ">")), 3)   # far beyond exp underflow
    -804.608
    """
    _check_event(event)
    _is_discrete(law)
    return _law_call("event", event.log_prob, law)


def privacy_loss(law_d: Any, law_d_prime: Any, event: Any) -> float:
    """``ln(P[M(D) in S] / P[M(D') in S])`` where ``M(D) ~ law_d`` and ``M(D') ~ law_d_prime``.

    Returns ``+inf`` when the event is possible under D but not under D', ``-inf`` in the
    opposite case, and ``nan`` when it is impossible under both (no information).

    >>> from dpkit.audit.exact import Laplace, Point, privacy_loss
    >>> round(privacy_loss(Laplace(0.0, 1.0), Laplace(1.0, 1.0), Point(-2.0)), 12)
    1.0
    """
    a = log_prob(law_d, event)
    b = log_prob(law_d_prime, event)
    if a == _NEG_INF and b == _NEG_INF:
        return math.nan
    if b == _NEG_INF:
        return math.inf
    if a == _NEG_INF:
        return _NEG_INF
    return a - b


@dataclass(frozen=True)
class MaxLoss:
    """The largest privacy loss found: ``loss = ln(P[M(first) in event] / P[M(second) in event])``,
    with ``direction`` ``"D/D'"`` or ``"D'/D"`` saying which law is ``first``."""

    loss: float
    event: Any
    direction: str

    def __str__(self) -> str:
        return f"privacy loss {self.loss:.6g} for event [{self.event}] ({self.direction})"


def _grid_events(grid: Any, discrete: bool) -> list[Any]:
    pts = check.finite_array("grid", check.as_array("grid", grid, "an array of finite reals")).ravel()
    if pts.size > _MAX_EVENTS:
        raise InvalidParameter("grid", f"has more than {_MAX_EVENTS} points")
    events: list[Any] = []
    for t in np.unique(pts):
        t = float(t)
        events += [Point(t), HalfLine(t, "<="), HalfLine(t, ">=")]
        if discrete:
            events += [HalfLine(t, "<"), HalfLine(t, ">")]
    return events


def max_privacy_loss(law_d: Any, law_d_prime: Any, events: Iterable[Any] | None = None, *,
                     grid: Sequence[float] | np.ndarray | None = None, both_directions: bool = True) -> MaxLoss:
    """The largest privacy loss over a family of events.

    Give ``events`` (any events), or ``grid`` (points t: the events ``{X = t}``, ``{X <= t}``,
    ``{X >= t}`` and, for discrete laws, the strict half-lines), or both. With
    ``both_directions`` (default) the ratio is also taken the other way round (D' over D),
    as DP requires. Events impossible under both laws are skipped.

    >>> from dpkit.audit.exact import Laplace, Truncated, Point, max_privacy_loss
    >>> # "resample until in [-1, 1]" average: D = 30 x {-1}, D' = D + {+1}, eps = 1
    >>> d = Truncated(Laplace(-1.0, 2.0 / 30), -1.0, 1.0)
    >>> d_prime = Truncated(Laplace(-29.0 / 31, 2.0 / 31), -1.0, 1.0)
    >>> round(max_privacy_loss(d, d_prime, [Point(-1.0)]).loss, 3)
    1.457
    """
    both_directions = check.flag("both_directions", both_directions)
    _is_discrete(law_d)
    _is_discrete(law_d_prime)
    evs: list[Any] = []
    if events is not None:
        if isinstance(events, (str, bytes, dict)) or not isinstance(events, Iterable):
            raise WrongType("events", "an iterable of events, or None")
        try:
            for ev in events:
                evs.append(ev)
                if len(evs) > _MAX_EVENTS:
                    raise InvalidParameter("events", f"has more than {_MAX_EVENTS} entries")
        except DPKitError:
            raise
        except Exception:
            raise WrongType("events", "an iterable of events, or None") from None
    if grid is not None:
        discrete = _is_discrete(law_d) or _is_discrete(law_d_prime)
        evs += _grid_events(grid, discrete)
    if not evs:
        raise InvalidParameter("events", "give at least one event, or a grid")
    best: MaxLoss | None = None
    for ev in evs:
        _check_event(ev)
        la = _law_call("events", ev.log_prob, law_d)
        lb = _law_call("events", ev.log_prob, law_d_prime)
        pairs = [(la, lb, "D/D'")]
        if both_directions:
            pairs.append((lb, la, "D'/D"))
        for x, y, direction in pairs:
            if x == _NEG_INF:
                continue  # impossible under the numerator: loss -inf or no information
            loss = math.inf if y == _NEG_INF else x - y
            if best is None or loss > best.loss:
                best = MaxLoss(loss, ev, direction)
    if best is None:
        return MaxLoss(math.nan, None, "D/D'")
    return best


# ---------------------------------------------------------------------------------------------
# log-space quadrature
# ---------------------------------------------------------------------------------------------


def _eval_log_f(log_f: Callable[[Any], Any], x: np.ndarray) -> np.ndarray:
    """log_f on an array: one vectorised call if log_f supports it, else elementwise."""
    try:
        with np.errstate(all="ignore"):
            y = np.asarray(log_f(x), dtype=np.float64)
        if y.shape == x.shape:
            return np.where(np.isnan(y), _NEG_INF, y)
    except Exception:  # not vectorised: fall back to a loop
        pass
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        for i, t in enumerate(x):
            v = float(np.asarray(log_f(float(t)), dtype=np.float64))
            out[i] = _NEG_INF if math.isnan(v) else v
    return out


def _default_grid(a: float, b: float, center: float, scale: float, size: int) -> np.ndarray:
    """A grid over [a, b] that is dense near ``center`` (width ~ ``scale``) and geometric outwards."""
    parts = [np.linspace(center - 50.0 * scale, center + 50.0 * scale, size)]
    geo = scale * np.geomspace(1e-6, 1e8, 200)
    parts += [center + geo, center - geo]
    if math.isfinite(a) and math.isfinite(b):
        parts.append(np.linspace(a, b, size))
    g = np.concatenate(parts)
    lo = a if math.isfinite(a) else -math.inf
    hi = b if math.isfinite(b) else math.inf
    g = g[(g >= lo) & (g <= hi) & np.isfinite(g)]
    if math.isfinite(a):
        g = np.append(g, a)
    if math.isfinite(b):
        g = np.append(g, b)
    return np.unique(g)


def _quad(g: Callable[[float], float], lo: float, hi: float, pts: list[float] | None, epsabs: float,
          epsrel: float) -> float:
    """quad; if it reports round-off (an integrand whose own rounding noise exceeds epsrel, e.g.
    exp of a log_f of magnitude 1e7), retry at 1e-7 relative accuracy and warn only if that fails too."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
        warnings.simplefilter("always", integrate.IntegrationWarning)
        val, _err = integrate.quad(g, lo, hi, points=pts, limit=500, epsabs=epsabs, epsrel=epsrel)
    if not any(issubclass(w.category, integrate.IntegrationWarning) for w in caught) or epsrel >= 1e-7:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return val
    with np.errstate(all="ignore"):
        val, _err = integrate.quad(g, lo, hi, points=pts, limit=500, epsabs=epsabs, epsrel=1e-7)
    return val


_MAX_GRID = 10**6


def log_integral(log_f: Callable[[Any], Any], a: float = -math.inf, b: float = math.inf, *,
                 points: Sequence[float] | None = None, scale: float = 1.0, center: float | None = None,
                 grid_size: int = 4001, epsrel: float = 1e-10) -> float:
    if not callable(log_f):
        raise WrongType("log_f", "a callable z -> ln f(z)")
    a = _extended_real("a", a)
    b = _extended_real("b", b)
    scale = check.positive("scale", scale)
    grid_size = check.size_limit("grid_size", grid_size, _MAX_GRID, minimum=10)
    epsrel = check.positive("epsrel", epsrel)
    if center is not None:
        center = check.real("center", center)
    pts: np.ndarray | None = None
    if points is not None:
        if isinstance(points, (str, bytes, dict, set, frozenset)):
            raise WrongType("points", "a sequence of finite reals, or None")
        pts = check.finite_array("points", check.as_array("points", points, "a sequence of finite reals"),
                                 allow_empty=True).ravel()
        if pts.size > _MAX_POINTS:
            raise InvalidParameter("points", f"has more than {_MAX_POINTS} entries")
    return _law_call("log_f", _log_integral, log_f, a, b, pts, scale, center, grid_size, epsrel,
                     what="could not be integrated: log_f failed on the grid, or the parameters are outside "
                          "the supported range")


def _log_integral(log_f: Callable[[Any], Any], a: float = -math.inf, b: float = math.inf,
                  points: Sequence[float] | None = None, scale: float = 1.0, center: float | None = None,
                  grid_size: int = 4001, epsrel: float = 1e-10) -> float:
    """``ln ∫_a^b exp(log_f(z)) dz``, computed without overflow or underflow.

    Method: find ``M = max log_f`` on a fine grid (dense within ±50·``scale`` of ``center``,
    geometric out to 1e8·``scale``, plus ``points``), refine it with a bounded local optimiser,
    then integrate ``exp(log_f(z) - M)`` with ``scipy.integrate.quad``, split at the peak, at
    ``points`` (put every kink or discontinuity of log_f there: thresholds, indicator edges)
    and at the edges of the region where the integrand is above ``e^-60`` of its peak.
    Returns ``M + ln(integral)``; ``-inf`` if log_f is ``-inf`` on the whole grid.

    ``log_f`` receives a float (or, if it accepts one, an array of floats for the grid
    search) and returns ``ln f`` (``-inf`` where f is 0). ``a`` and ``b`` may be infinite.

    Example: the sparse-vector probability of ``⊥^m`` followed by ``⊤`` with threshold noise
    ``rho ~ Lap(2)`` and query noise ``nu ~ Lap(4)`` (threshold 0, all queries 0):

    >>> from dpkit.audit.exact import Laplace, log_integral
    >>> rho, nu = Laplace(0.0, 2.0), Laplace(0.0, 4.0)
    >>> lf = lambda z: rho.logpdf(z) + 3 * nu.logcdf(z) + nu.logsf(z)   # P[nu < z]^3 P[nu > z]
    >>> round(float(np.exp(log_integral(lf, points=[0.0]))), 6) > 0
    True
    """
    a = float(a)
    b = float(b)
    if math.isnan(a) or math.isnan(b):
        raise InvalidParameter("a", "a and b must not be NaN")
    if a > b:
        raise InvalidParameter("a", "must be <= b")
    if a == b:
        return _NEG_INF
    scale = check.positive("scale", scale)
    grid_size = check.integer("grid_size", grid_size, minimum=10)
    epsrel = check.positive("epsrel", epsrel)
    pts = [] if points is None else [float(p) for p in check.finite_array("points", points, allow_empty=True).ravel()]
    pts = [p for p in pts if a < p < b]
    if center is None:
        if pts:
            center = float(np.median(pts))
        elif math.isfinite(a) and math.isfinite(b):
            center = 0.5 * (a + b)
        elif math.isfinite(a):
            center = a
        elif math.isfinite(b):
            center = b
        else:
            center = 0.0
    center = check.real("center", center)

    grid = _default_grid(a, b, center, scale, grid_size)
    if pts:
        grid = np.unique(np.concatenate([grid, pts, np.nextafter(pts, -math.inf), np.nextafter(pts, math.inf)]))
        grid = grid[(grid >= a) & (grid <= b)]
    vals = _eval_log_f(log_f, grid)
    if vals.size == 0 or not np.any(vals > _NEG_INF):
        return _NEG_INF
    if np.any(vals == math.inf):
        raise InvalidParameter("log_f", "is +inf somewhere: the integrand is unbounded")
    i = int(np.argmax(vals))
    peak_x, peak = float(grid[i]), float(vals[i])
    lo_n = float(grid[max(i - 1, 0)])
    hi_n = float(grid[min(i + 1, grid.size - 1)])
    if hi_n > lo_n:
        def neg(t: float) -> float:
            v = float(np.asarray(log_f(t), dtype=np.float64))
            return math.inf if math.isnan(v) or v == _NEG_INF else -v

        try:
            res = optimize.minimize_scalar(neg, bounds=(lo_n, hi_n), method="bounded",
                                           options={"xatol": 1e-12 * max(1.0, abs(peak_x))})
            if res.success and -res.fun > peak:
                peak_x, peak = float(res.x), float(-res.fun)
        except Exception:  # keep the grid maximum
            pass
    M = peak

    # the region where the integrand matters (> e^-60 of the peak), one grid step wider
    big = np.nonzero(vals >= M - 60.0)[0]
    first = min(int(big[0]) if big.size else i, i)
    last = max(int(big[-1]) if big.size else i, i)
    eff_lo = a if first == 0 else float(grid[first - 1])
    eff_hi = b if last == grid.size - 1 else float(grid[last + 1])

    def lf1(t: float) -> float:
        v = float(np.asarray(log_f(t), dtype=np.float64))
        return _NEG_INF if math.isnan(v) else v

    # breakpoints where the integrand has fallen to e^-2, e^-10, e^-40 of its peak on each side
    # (bisection from the peak to the first grid point below that level), so that every quad
    # piece sees an integrand of a sensible shape however narrow the peak is
    drops: list[float] = []
    for side in (-1, 1):
        for k in (2.0, 10.0, 40.0):
            j = i
            while 0 <= j < grid.size and not (vals[j] < M - k and (grid[j] - peak_x) * side > 0):
                j += side
            if not 0 <= j < grid.size:
                continue
            inner, outer = peak_x, float(grid[j])
            for _ in range(80):
                mid = 0.5 * (inner + outer)
                if mid in (inner, outer):
                    break
                if lf1(mid) > M - k:
                    inner = mid
                else:
                    outer = mid
            drops.append(outer)

    breaks = sorted({a, b, peak_x, eff_lo, eff_hi, *pts, *drops})
    breaks = [t for t in breaks if a <= t <= b]

    def g(t: float) -> float:
        v = lf1(t)
        return 0.0 if v == _NEG_INF else math.exp(v - M)

    pieces = [(lo, hi) for lo, hi in itertools.pairwise(breaks) if hi > lo]
    # integrate the pieces nearest the peak first; the running total then sets a negligible absolute
    # tolerance for the far pieces, where the integrand is ~0 and a relative tolerance cannot be met
    pieces.sort(key=lambda p: 0.0 if p[0] <= peak_x <= p[1] else min(abs(p[0] - peak_x), abs(p[1] - peak_x)))
    total = 0.0
    for lo, hi in pieces:
        piece_pts = None
        if math.isfinite(lo) and math.isfinite(hi):
            inner_pts = grid[(grid > lo) & (grid < hi)]
            if inner_pts.size > 50:
                inner_pts = inner_pts[np.linspace(0, inner_pts.size - 1, 50).astype(int)]
            piece_pts = list(inner_pts) if inner_pts.size else None
        val = _quad(g, lo, hi, piece_pts, epsrel * 1e-3 * total, epsrel)
        total += max(val, 0.0)
    if total <= 0.0:
        return _NEG_INF
    return M + math.log(total)


log_integral.__doc__ = _log_integral.__doc__
