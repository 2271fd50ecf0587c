"""The differentially private count of records (the geometric mechanism on ``n``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource
from dpkit.stats import _common

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["count"]


def _missing(v: Any) -> bool:
    """``None`` or a float NaN (Python or numpy)."""
    if v is None:
        return True
    if isinstance(v, (float, np.floating)):
        return math.isnan(v)
    return False


def records(values: Any, *, nan_policy: str = "raise", name: str = "values") -> np.ndarray:
    """A 1-D array of records of any kind (numbers, strings, objects), with missing entries
    (``None``, NaN) refused (``nan_policy="raise"``) or dropped (``"omit"``). Empty is valid.

    Used where records need not be numbers (counts, categorical histograms); numeric statistics
    use :func:`dpkit.stats._common.data` instead. Messages never contain a value.
    """
    nan_policy = check.nan_policy(nan_policy)
    if values is None or isinstance(values, (str, bytes, dict, set, frozenset)):
        raise WrongType(name, "a 1-D sequence or array of records")
    if isinstance(values, np.ndarray):
        arr = values
        if arr.ndim != 1:
            raise InvalidData(name, "must be one-dimensional")
    else:
        try:
            seq = list(values)
        except TypeError:
            raise WrongType(name, "a 1-D sequence or array of records") from None
        if any(isinstance(v, (list, tuple, np.ndarray)) for v in seq):
            raise InvalidData(name, "must be one-dimensional")
        arr = np.empty(len(seq), dtype=object)
        arr[:] = seq
    if arr.dtype.kind in "fc":
        miss = np.isnan(arr)
    elif arr.dtype == object:
        miss = np.fromiter((_missing(v) for v in arr), dtype=bool, count=arr.size)
    else:
        miss = np.zeros(arr.size, dtype=bool)
    if miss.any():
        if nan_policy == "raise":
            raise InvalidData(name, "contains missing values (None or NaN); pass nan_policy='omit' to drop them")
        arr = arr[~miss]
    return arr


def count(values: ArrayLike, epsilon: float, *, neighbours: Neighbours | None = None,
          accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
          description: str = "") -> Release:
    """Differentially private number of records: ``n + Z``, ``Z`` exact discrete Laplace.

    Parameters
    ----------
    values:
        Any 1-D sequence of records (numbers, strings, objects); ``None``/NaN entries raise
        (``nan_policy="raise"``) or are not counted (``"omit"``, a per-record filter, free).
    epsilon:
        The privacy parameter, > 0.
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`). Replace-one neighbours are refused (see below).

    Guarantee
    ---------
    Pure ``epsilon``-DP. Sensitivity of ``n``: 1 under add/remove one record (the default), ``max_rows``
    under a :class:`~dpkit.core.neighbours.PrivacyUnit`; the discrete Laplace mechanism with scale
    ``t >= sensitivity/epsilon`` has pmf ratio at most ``exp(sensitivity/t) <= exp(epsilon)`` between
    neighbouring counts.

    Under :class:`~dpkit.core.neighbours.Replace` the number of records is *public* (replace-one
    neighbours all have the same size), so a noisy count protects nothing and is refused with
    ``InvalidParameter("neighbours")``: use ``len(values)``.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness is drawn.

    Output law
    ----------
    ``n + Z`` with ``P[Z = k] ∝ exp(-|k|/t)``, ``t`` the smallest float ``>= sensitivity/epsilon``
    (:func:`dpkit.mechanisms.discrete_laplace`); the output is an ``int``, ``Release.scale`` is ``t`` and
    ``Release.noise`` is ``"discrete_laplace"``.

    Error
    -----
    Unbiased. ``Release.interval(c)`` is ``value ± k`` with ``k`` the exact discrete-Laplace quantile
    (``P[|Z| > k] <= 1 - c``), about ``t · ln(1/(1-c))``.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = count(["a", "b", None], 1.0, nan_policy="omit", rng=deterministic_source(3))
    >>> r.mechanism, r.noise, isinstance(r.value, int)
    ('count', 'discrete_laplace', True)
    """
    return run(_count_plan(values, epsilon, neighbours=neighbours, accountant=accountant, nan_policy=nan_policy),
               accountant=accountant, rng=rng, description=description)


def _count_plan(values: Any, epsilon: Any, *, neighbours: Neighbours | None = None,
                accountant: Accountant | None = None, nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`count` (nothing charged or drawn; ``accountant`` only supplies the
    default neighbour relation)."""
    eps = check.epsilon(epsilon)
    nb = _common.neighbours_of(neighbours, accountant)
    if _common.is_replace(nb):
        raise InvalidParameter("neighbours", "under replace-one neighbours the count is public (all neighbouring "
                                             "datasets have the same size); use len(values) instead")
    arr = records(values, nan_policy=nan_policy)
    from dpkit.mechanisms.discrete import discrete_laplace_plan

    sens = _common.unit_rows(nb)
    noisy = discrete_laplace_plan(int(arr.size), sens, eps)  # the geometric mechanism on n (drawn below)

    def draw(rng: RandomSource) -> int:
        return int(noisy.sample(rng).value)

    return Plan(mechanism="count", cost=PureDP(eps), draw=draw, sensitivity=float(sens), scale=noisy.scale,
                noise="discrete_laplace", params={"epsilon": eps, "neighbours": nb.describe()}, neighbours=nb)
