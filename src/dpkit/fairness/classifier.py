"""The randomized classifier returned by the fairness LPs, with exact categorical sampling."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.fairness import _inputs
from dpkit.fairness.checks import probabilities as _probabilities
from dpkit.noise.source import RandomSource, resolve

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.fairness._lp import LPInfo
    from dpkit.fairness.checks import LipschitzReport

__all__ = ["FairClassifier", "sample_categorical"]


def _int_weights(row: np.ndarray) -> tuple[list[int], int]:
    """The row's floats as integers over a common power-of-two denominator (exact) and their sum."""
    fr = [Fraction(float(x)) for x in row]
    den = max(f.denominator for f in fr)  # every denominator is a power of two: the largest is their lcm
    w = [f.numerator * (den // f.denominator) for f in fr]
    return w, sum(w)


def _uniform_below(bound: int, rng: RandomSource) -> int:
    """An exactly uniform integer in [0, bound) for any positive Python int (rejection, no modulo bias)."""
    if bound <= 2**63:
        return int(rng.below(bound, 1)[0])
    bits = bound.bit_length()
    words = (bits + 63) // 64
    while True:  # each try succeeds with probability > 1/2
        v = 0
        for w in rng.uint64(words):
            v = (v << 64) | int(w)
        v >>= words * 64 - bits
        if v < bound:
            return v


def sample_categorical(weights: ArrayLike, rng: RandomSource | None = None) -> int:
    """One exact draw from the categorical law ``P[a] = w_a / Σ w`` (every float taken as its exact rational value).

    The weights become integers over their common power-of-two denominator; an exactly uniform integer below
    their sum (rejection from random 64-bit words of the :class:`~dpkit.noise.RandomSource`) picks the category.
    No float uniform is compared, so the law is exactly ``w_a / Σ w``.

    Parameters
    ----------
    weights : array (k,)
        Nonnegative finite weights with a positive sum.
    rng : RandomSource, optional
        The random source (default: the operating system's CSPRNG).

    Returns
    -------
    int
        The index drawn.

    Examples
    --------
    >>> import dpkit
    >>> from dpkit.fairness import sample_categorical
    >>> sample_categorical([0.0, 1.0, 0.0], rng=dpkit.deterministic_source(1))
    1
    """
    w = check.finite_array("weights", weights, ndim=1)
    if w.size > _inputs.MAX_OUTCOMES * 1000:
        raise InvalidParameter("weights", "has too many entries")
    if np.any(w < 0) or not float(np.sum(w)) > 0:
        raise InvalidParameter("weights", "must be >= 0 with a positive sum")
    src = resolve(rng)
    ints, total = _int_weights(w)
    return _pick(ints, _uniform_below(total, src))


def _pick(ints: list[int], u: int) -> int:
    acc = 0
    for a, wa in enumerate(ints):
        acc += wa
        if u < acc:
            return a
    return len(ints) - 1  # pragma: no cover - u < total always


class FairClassifier:
    """A randomized classifier ``M: V -> Δ(A)``: row x of :attr:`probabilities` is the outcome law ``μ_x``.

    Returned by :func:`fair_classifier`, :func:`preferential_treatment` and (as a map V -> Δ(V))
    :func:`exponential_fair_map`; it can also wrap any row-stochastic matrix.

    Parameters
    ----------
    probabilities : array (n, |A|)
        Entries in [0, 1], rows summing to 1 (within 1e-6; the stored rows are renormalized).
    outcomes : sequence, optional
        Labels of the |A| columns (default ``0 .. |A|-1``).

    Attributes
    ----------
    probabilities : ndarray (n, |A|)
        The matrix μ (read-only).
    outcomes : tuple
        The outcome labels.
    objective : float or None
        The LP's expected loss ``E_{x∼w} Σ_a μ_x(a) L(x, a)`` of the returned μ (None when built directly).
    divergence : str or None
        ``"tv"`` or ``"inf"``: the D of the Lipschitz condition the LP imposed.
    lp : LPInfo or None
        The LP's size (variables, constraints, nonzeros, dropped pairs), status and solve time.
    lipschitz : LipschitzReport or None
        The Lipschitz check of the returned μ against the metric (solver tolerance ≈ 1e-9).
    """

    def __init__(self, probabilities: ArrayLike, outcomes: Any = None) -> None:
        mu = _probabilities(probabilities)
        mu = np.clip(mu, 0.0, 1.0)
        mu = mu / mu.sum(axis=1, keepdims=True)
        mu.setflags(write=False)
        self.probabilities: np.ndarray = mu
        self.outcomes: tuple[Any, ...] = _outcomes(outcomes, mu.shape[1])
        self.objective: float | None = None
        self.divergence: str | None = None
        self.lp: LPInfo | None = None
        self.lipschitz: LipschitzReport | None = None
        self._weights: dict[int, tuple[list[int], int]] = {}

    @property
    def n_individuals(self) -> int:
        return int(self.probabilities.shape[0])

    def _rows(self, individuals: Any) -> np.ndarray:
        n = self.n_individuals
        if individuals is None:
            return np.arange(n)
        if isinstance(individuals, (int, np.integer)) and not isinstance(individuals, bool):
            if not 0 <= int(individuals) < n:
                raise InvalidParameter("individuals", "indices must lie in [0, n)")
            return np.array([int(individuals)])
        return _inputs.indices(individuals, n, "individuals", allow_empty=True, unique=False)

    def predict_proba(self, individuals: Any = None) -> np.ndarray:
        """The outcome distributions ``μ_x`` of the given individuals (indices or a mask; default: all), one row
        each."""
        return np.array(self.probabilities[self._rows(individuals)])

    def sample(self, individuals: Any = None, rng: RandomSource | None = None) -> np.ndarray:
        """One outcome per given individual, drawn exactly from ``μ_x`` (:func:`sample_categorical`: the stored
        floats as exact rationals, no float uniform). Returns an array of outcome labels."""
        rows = self._rows(individuals)
        src = resolve(rng)
        out = np.empty(rows.size, dtype=np.int64)
        uniq, inverse = np.unique(rows, return_inverse=True)
        for u, x in enumerate(uniq):  # the draws of each row in one vectorised pass, in request order
            key = int(x)
            if key not in self._weights:
                self._weights[key] = _int_weights(self.probabilities[key])
            ints, total = self._weights[key]
            where = np.flatnonzero(inverse == u)
            if total <= 2**63:  # exact uniform integers below the total, then the category by cumulative sums
                cum = np.cumsum(np.array(ints, dtype=np.uint64))
                draws = src.below(total, where.size).astype(np.uint64)
                out[where] = np.searchsorted(cum, draws, side="right")
            else:
                for t in where:
                    out[t] = _pick(ints, _uniform_below(total, src))
        labels = np.empty(rows.size, dtype=object)
        labels[:] = [self.outcomes[i] for i in out]
        try:
            return np.asarray(labels.tolist())
        except Exception:  # pragma: no cover - labels numpy cannot stack
            return labels

    def expected_loss(self, loss: ArrayLike, weights: Any = None) -> float:
        """``E_{x∼w} Σ_a μ_x(a) L(x, a)`` for an n x |A| loss matrix (``weights``: a distribution over the
        individuals as in :func:`statistical_parity`; default uniform)."""
        lm = _inputs.loss(loss, self.n_individuals)
        if lm.shape[1] != self.probabilities.shape[1]:
            raise InvalidParameter("loss", "must have one column per outcome of the classifier")
        w = (np.full(self.n_individuals, 1.0 / self.n_individuals) if weights is None
             else _inputs.distribution(weights, self.n_individuals, "weights"))
        return float(np.sum(w[:, None] * self.probabilities * lm))

    def __repr__(self) -> str:
        return (f"<FairClassifier n={self.n_individuals} outcomes={len(self.outcomes)} "
                f"divergence={self.divergence} objective={self.objective}>")


def _outcomes(value: Any, k: int) -> tuple[Any, ...]:
    if value is None:
        return tuple(range(k))
    if isinstance(value, (str, bytes, dict)):
        raise WrongType("outcomes", "a sequence of outcome labels")
    try:
        labels = tuple(value)
    except TypeError:
        raise WrongType("outcomes", "a sequence of outcome labels") from None
    if len(labels) != k:
        raise InvalidParameter("outcomes", "must have one label per outcome (column)")
    try:
        distinct = len(set(labels)) == k
    except TypeError:
        raise WrongType("outcomes", "a sequence of hashable outcome labels") from None
    if not distinct:
        raise InvalidParameter("outcomes", "labels must be distinct")
    return labels
