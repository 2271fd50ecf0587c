"""The mode (most frequent value) among public candidates, by the exponential mechanism (Li et al.
2016, Ex 2.20)."""

from __future__ import annotations

import math
import numbers
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.accuracy import exponential_utility_bound
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.selection import exponential_plan
from dpkit.noise.source import RandomSource
from dpkit.stats import _common

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["mode", "mode_count_error"]

_MAX_CANDIDATES = 2**24


def _candidates(value: Any) -> tuple[list[Any], str]:
    """The public candidates as a list and their kind (``"real"`` or ``"str"``)."""
    if value is None or isinstance(value, (str, bytes)):
        raise WrongType("candidates", "a sequence of real numbers or of strings")
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise InvalidParameter("candidates", "must be one-dimensional")
        items = value.tolist()
    else:
        try:
            items = list(value)
        except TypeError:
            raise WrongType("candidates", "a sequence of real numbers or of strings") from None
    if not items:
        raise InvalidParameter("candidates", "must not be empty")
    if len(items) > _MAX_CANDIDATES:
        raise InvalidParameter("candidates", "too many candidates")
    if all(isinstance(c, str) for c in items):
        kind = "str"
    elif all(isinstance(c, numbers.Real) and not isinstance(c, (bool, np.bool_)) for c in items):
        kind = "real"
        try:
            finite = all(math.isfinite(float(c)) for c in items)
        except OverflowError:  # a huge int
            finite = False
        if not finite:
            raise InvalidParameter("candidates", "must be finite")
    else:
        raise WrongType("candidates", "all real numbers or all strings")
    keys = items if kind == "str" else [float(c) for c in items]
    if len(set(keys)) != len(keys):
        raise InvalidParameter("candidates", "must be distinct")
    return items, kind


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _str_values(values: Any, nan_policy: str) -> list[str]:
    nan_policy = check.nan_policy(nan_policy)
    if values is None or isinstance(values, (str, bytes)):
        raise WrongType("values", "a 1-D sequence of strings")
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise InvalidData("values", "must be one-dimensional")
        seq = values.tolist()
    else:
        try:
            seq = list(values)
        except TypeError:
            raise WrongType("values", "a 1-D sequence of strings") from None
    out = []
    for v in seq:
        if isinstance(v, str):
            out.append(v)
        elif _missing(v):
            if nan_policy == "raise":
                raise InvalidData("values", "contains missing values; pass nan_policy='omit' to drop them")
        else:
            raise WrongType("values", "a 1-D sequence of strings (the candidates are strings)")
    return out


def _count_matches(data: Any, items: list[Any], kind: str) -> np.ndarray:
    if kind == "str":
        tally = Counter(data)
        return np.array([tally.get(c, 0) for c in items], dtype=np.float64)
    cand = np.array([float(c) for c in items])
    order = np.argsort(cand)
    xs = np.sort(data)
    sorted_c = cand[order]
    cnt = np.searchsorted(xs, sorted_c, side="right") - np.searchsorted(xs, sorted_c, side="left")
    out = np.empty(cand.size, dtype=np.float64)
    out[order] = cnt
    return out


def _plan(nb: Neighbours) -> tuple[float, bool]:
    """``(Δ, monotonic)`` of the counting quality under the neighbour relation."""
    if _common.is_replace(nb):
        return 1.0, False  # one count +1, another -1: not monotonic
    return float(_common.unit_rows(nb)), True  # all counts move the same way by <= m


def mode_count_error(candidates: int, epsilon: float, *, confidence: float = 0.95,
                     neighbours: Neighbours | None = None) -> float:
    """``t`` such that :func:`mode` returns a candidate whose count is ``>= (largest count) - t`` with
    probability ``>= confidence``: ``t = (Δ/ε) ln(K/β)`` (add/remove, monotonic; ``Δ = max_rows`` for a
    privacy unit), ``(2/ε) ln(K/β)`` under replace-one, plus the sampler's tiny lattice terms.
    Data-independent."""
    k = check.integer("candidates", candidates, minimum=1)
    eps = check.epsilon(epsilon)
    delta, mono = _plan(_common.neighbours_of(neighbours, None))
    return exponential_utility_bound(k, delta, eps, confidence, monotonic=mono)


def mode(values: ArrayLike, candidates: ArrayLike, epsilon: float, *, neighbours: Neighbours | None = None,
         accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
         description: str = "") -> Release:
    """The most frequent candidate, by the exponential mechanism with the counting quality
    ``quality(c) = #{records equal to c}`` (Li et al. 2016, Ex 2.20).

    Parameters
    ----------
    values:
        1-D data: real numbers (compared with the candidates by exact equality; NaN/None per
        ``nan_policy``, ``±inf`` refused) or strings (when the candidates are strings; ``None``/NaN are
        missing values, other non-strings are refused).
    candidates:
        The public, non-empty list of distinct candidates: all real numbers or all strings. **Values not
        among the candidates are ignored** (they count for no candidate); the candidate list must be
        fixed before looking at the data.
    epsilon:
        The privacy parameter (> 0).
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`).

    Guarantee
    ---------
    Pure ``epsilon``-DP. Add/remove one record: every count moves by at most 1 and all in the same
    direction, so ``Δ = 1`` and the quality is monotonic: ``P[c] ∝ exp(epsilon count(c) / Δ)`` (Li et al.
    Cor 2.19). Privacy unit of ``m`` rows: ``Δ = m``, still monotonic. Replace one record: one count goes
    up and another down, so the quality is **not** monotonic and the general mechanism
    ``P[c] ∝ exp(epsilon count(c) / 2)`` (``Δ = 1``) is used.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness is drawn.

    Output law
    ----------
    The exact exponential mechanism (:func:`dpkit.mechanisms.exponential`) on the exact counts:
    ``P[c] ∝ exp(epsilon count(c) / Δ)`` (monotonic) or ``exp(epsilon count(c) / (2Δ))`` (replace-one).
    ``Release.value`` is the chosen candidate (as given); ``parts["index"]`` its position.

    Error
    -----
    With ``K`` candidates and probability ``>= 1 - β`` the released candidate's count is at least the
    largest count minus ``t = (Δ/ε)(ln K + ln(1/β))`` (``2/ε`` in place of ``Δ/ε`` under replace-one;
    :func:`mode_count_error`). So the true mode is returned with probability ``>= 1 - β`` as soon as its
    count exceeds every other count by more than ``t``. Li et al. state "frequency above
    ``c ln(1,000,000)/ε`` with ``c ≈ 5``" for ``K = 10^6`` candidates; the bound here, ``2 ln(10^6)/ε ≈
    27.6/ε`` at ``β = 10^-6``, is of the same form with ``c = 2`` (theirs is conservative). No interval.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = mode(["a"] * 50 + ["b"] * 5, ["a", "b", "c"], 1.0, rng=deterministic_source(3))
    >>> r.value, r.mechanism
    ('a', 'mode')
    """
    return run(_mode_plan(values, candidates, epsilon, neighbours=neighbours, accountant=accountant,
                          nan_policy=nan_policy), accountant=accountant, rng=rng, description=description)


def _mode_plan(values: Any, candidates: Any, epsilon: Any, *, neighbours: Neighbours | None = None,
               accountant: Accountant | None = None, nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`mode` (nothing charged or drawn)."""
    nb = _common.neighbours_of(neighbours, accountant)
    eps = check.epsilon(epsilon)
    items, kind = _candidates(candidates)
    data = _str_values(values, nan_policy) if kind == "str" else _common.data(values, nan_policy=nan_policy)
    delta, mono = _plan(nb)
    choice = exponential_plan(_count_matches(data, items, kind), delta, eps, monotonic=mono)

    def draw(rng: RandomSource) -> Outcome:
        idx = int(choice.sample(rng).value)
        return Outcome(items[idx], parts={"index": idx})

    return Plan(mechanism="mode", cost=PureDP(eps), draw=draw, sensitivity=delta,
                params={"epsilon": eps, "candidates": len(items), "monotonic": mono}, neighbours=nb)
