"""The :class:`Release` returned by every mechanism, and the plumbing shared by the mechanisms.

Every mechanism in :mod:`dpkit.mechanisms` follows the same order of work:

1. validate every argument (typed dpkit errors naming the parameter, never a value);
2. compute the privacy cost and the noise scale;
3. charge the accountant, if one is given (``secure`` is the random source's ``.secure``);
4. only then draw noise.

If validation fails or the charge raises (e.g. :class:`~dpkit.core.errors.BudgetExceeded`),
nothing is charged and no randomness is consumed. The one implementation of this order is
:func:`dpkit.mechanisms.contract.run` (steps 1-2 are a mechanism's plan builder); :func:`charge` and the
checks below are its plumbing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core.errors import NoInterval, WrongType
from dpkit.core.privacy import PrivacyLoss

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant, Receipt

__all__ = ["NoInterval", "Release"]


@dataclass(frozen=True)
class Release:
    """The result of one mechanism call.

    Attributes
    ----------
    value:
        The noisy value: a float or a float array (Laplace, Gaussian), an int or an int64 array
        (discrete mechanisms), an index (selection mechanisms) or the noisy responses (randomized
        response). Post-processing it is free.
    mechanism:
        The mechanism's name (``"laplace"``, ``"gaussian"``, ...).
    scale:
        The noise scale: Laplace ``b``, Gaussian ``sigma`` (both in the value's units); ``None``
        where the mechanism has no additive noise (randomized response, exponential mechanism).
    cost:
        The privacy cost of the release (what was or would have been charged).
    receipt:
        The accountant's receipt, or ``None`` when no accountant was given.
    secure:
        Whether the randomness came from a secure source.
    noise:
        The exact noise law, for :meth:`interval`: ``"lattice_laplace"``, ``"lattice_gaussian"``,
        ``"discrete_laplace"``, ``"discrete_gaussian"`` or ``None``.
    granularity:
        The lattice step ``g`` for the lattice laws (else ``None``).
    params:
        The parameters of the call (never data values).
    parts:
        Intermediate noisy values that the release also discloses (e.g. the noisy sum and noisy
        count behind a mean). They are covered by ``cost``; post-processing them is free.
    interval_fn:
        For composite releases with no single noise law: ``confidence -> (lo, hi)``, computed from
        the released values and public parameters only. Used by :meth:`interval`.
    """

    value: Any
    mechanism: str
    scale: float | None
    cost: PrivacyLoss
    receipt: Receipt | None = None
    secure: bool = True
    noise: str | None = None
    granularity: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    parts: Mapping[str, Any] = field(default_factory=dict)
    interval_fn: Callable[[float], tuple[Any, Any]] | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        v = self.value
        shown = (f"array(shape={v.shape}, dtype={v.dtype})" if isinstance(v, np.ndarray) and v.size > 6
                 else repr(v.tolist() if isinstance(v, np.ndarray) else v))
        scale = "" if self.scale is None else f", scale={self.scale:.6g}"
        insecure = "" if self.secure else ", INSECURE randomness"
        return f"Release({self.mechanism}: value={shown}{scale}, cost={self.cost}{insecure})"

    # -- convenience -------------------------------------------------------------------------
    def __float__(self) -> float:
        v = np.asarray(self.value)
        if v.size != 1:
            raise WrongType("release", "a scalar release to convert to float")
        return float(v.reshape(()))

    def __int__(self) -> int:
        v = np.asarray(self.value)
        if v.size != 1:
            raise WrongType("release", "a scalar release to convert to int")
        return int(v.reshape(()))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = np.asarray(self.value)
        return arr.astype(dtype) if dtype is not None else arr

    @property
    def coords(self) -> int:
        if isinstance(self.value, Mapping):  # e.g. marginals {attrs: array}: every cell is a coordinate
            return sum(int(np.asarray(v).size) for v in self.value.values())
        return int(np.asarray(self.value).size)

    # -- accuracy ----------------------------------------------------------------------------
    def halfwidth(self, confidence: float = 0.95, simultaneous: bool = False) -> float:
        """Half-width ``h`` of the (1 - beta) interval ``value ± h`` around the true value.

        ``simultaneous=True`` makes the coverage hold for all coordinates at once (Šidák
        correction, exact for the independent per-coordinate noise used here). The half-width is
        computed from the exact noise law (lattice / discrete tails), so the coverage is at least
        the nominal one. For the lattice laws it includes the rounding to the lattice (``g/2``).
        """
        from dpkit.mechanisms import accuracy

        d = self.coords
        if self.noise not in ("lattice_laplace", "lattice_gaussian", "discrete_laplace", "discrete_gaussian"):
            raise NoInterval(self.mechanism)
        scale = self.scale
        if scale is None:  # a hand-built Release: the error the half-width functions' own check raises
            raise WrongType("scale" if self.noise.endswith("laplace") else "sigma", "a real number")
        if self.noise == "lattice_laplace":
            return accuracy.laplace_halfwidth(scale, confidence, coords=d, simultaneous=simultaneous,
                                              granularity=self.granularity)
        if self.noise == "lattice_gaussian":
            return accuracy.gaussian_halfwidth(scale, confidence, coords=d, simultaneous=simultaneous,
                                               granularity=self.granularity)
        if self.noise == "discrete_laplace":
            return accuracy.discrete_laplace_halfwidth(scale, confidence, coords=d, simultaneous=simultaneous)
        return accuracy.discrete_gaussian_halfwidth(scale, confidence, coords=d, simultaneous=simultaneous)

    def interval(self, confidence: float = 0.95, simultaneous: bool = False) -> tuple[Any, Any]:
        """``(lo, hi)`` such that the true value lies in ``[lo, hi]`` with probability >= ``confidence``
        (per coordinate, or for all coordinates at once with ``simultaneous=True``).

        Computed from the public noise law only (no data, no budget). For float releases the
        endpoints are widened by the rounding error of the float output and rounded outwards.
        Raises :class:`NoInterval` for selection mechanisms and randomized response.
        Composite releases (e.g. a mean from a noisy sum and a noisy count) compute it with their
        ``interval_fn`` from public quantities only.
        """
        if self.noise is None and self.interval_fn is not None:
            if simultaneous and self.coords > 1:
                raise NoInterval(self.mechanism)
            from dpkit.core import _validate as check

            return self.interval_fn(check.probability("confidence", confidence))
        h = self.halfwidth(confidence, simultaneous)
        v = self.value
        if self.noise in ("discrete_laplace", "discrete_gaussian"):
            h = int(h)
            if isinstance(v, Mapping):  # {key: array}: ({key: lo}, {key: hi})
                return {k: x - h for k, x in v.items()}, {k: x + h for k, x in v.items()}
            if isinstance(v, np.ndarray):
                return v - h, v + h
            return int(v) - h, int(v) + h
        arr = np.asarray(v, dtype=np.float64)
        # |float output - exact lattice value| <= ulp/2; widen by one ulp and round outwards.
        slack = np.spacing(np.abs(arr))
        lo = np.nextafter(arr - (h + slack), -np.inf)
        hi = np.nextafter(arr + (h + slack), np.inf)
        if arr.ndim == 0:
            return float(lo), float(hi)
        return lo, hi


def resolve_accountant(accountant: Accountant | None) -> Accountant | None:
    """Check the accountant's type (before anything is charged)."""
    if accountant is None:
        return None
    from dpkit.core.accountant import Accountant

    if not isinstance(accountant, Accountant):
        raise WrongType("accountant", "a dpkit Accountant or None")
    return accountant


def charge(accountant: Accountant | None, cost: PrivacyLoss, *, mechanism: str, sensitivity: float | None,
           scale: float | None, params: Mapping[str, Any], secure: bool, description: str = "") -> Receipt | None:
    """Charge ``cost`` (if an accountant is given) and return the receipt (or None)."""
    if accountant is None:
        return None
    return accountant.charge(cost, mechanism=mechanism, sensitivity=sensitivity, scale=scale,
                             params=dict(params), description=description, secure=secure)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise WrongType(name, "a bool")
    return bool(value)


def check_description(value: Any) -> str:
    if not isinstance(value, str):
        raise WrongType("description", "a str")
    return value
