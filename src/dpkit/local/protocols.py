"""Local frequency-oracle protocols over a known, public domain (client perturbation, server aggregation).

Every protocol object is built from **public** parameters only (the categories, ε or the coin probabilities,
hash sizes) and holds no data. ``protocol.perturb(values, ...)`` (or :func:`dpkit.local.perturb`) is the client
side: one ε-LDP report per value, written to dpkit's contract (charge, then draw; a
:class:`~dpkit.mechanisms.Release` whose value is a :class:`Reports`). ``protocol.aggregate(reports)`` is the
server side: unbiased count estimates with their variance (post-processing, free).

Protocols (Wang, Blocki, Li & Jha 2017, "Locally differentially private protocols for frequency estimation";
Near & Abuah ch. 14; Li et al. §2.6; Erlingsson, Pihur & Korolova 2014 for RAPPOR):

============== ============================================== ============================ =====================
protocol       report                                         ``p* = P[support v | v]``    ``q* = P[support v | u≠v]``
============== ============================================== ============================ =====================
:class:`GRR`   one category (k-ary randomized response)       ``e^ε/(e^ε+k-1)``            ``1/(e^ε+k-1)``
:class:`BinaryRR` one of two categories (Warner 1965)         ``e^ε/(e^ε+1)``              ``1/(e^ε+1)``
:class:`TwoCoinRR` one of two categories (Dwork–Roth coins)   ``(1+t)/2``                  ``(1-t)/2``
:class:`UnaryEncoding` k bits (SUE, OUE or your ``p, q``)     ``p``                        ``q``
:class:`OLH`   ``(seed, y)``, ``y`` in ``[g]``                ``e^ε/(e^ε+g-1)``            ``1/g``
:class:`RAPPOR` ``(cohort, m bits)`` (Bloom filter + RR)      decoded by NNLS              (see the class)
============== ============================================== ============================ =====================

Estimator and variance (the "pure" protocols, Wang et al. 2017 §3, Thm 2): with ``I_v`` the number of reports
that support ``v`` among ``n``, ``ĉ_v = (I_v − n q*)/(p* − q*)`` is unbiased for the true count ``c_v``, and,
the reports being independent given the data, its variance is **exactly**

    ``Var[ĉ_v] = (c_v p*(1−p*) + (n − c_v) q*(1−q*)) / (p* − q*)² = n q*(1−q*)/(p*−q*)² + c_v (1−p*−q*)/(p*−q*)``

(Wang et al.'s Eq. (2)-(3) with ``c_v = n f_v``). :class:`FrequencyEstimate` states it with ``c_v`` replaced by
the estimate clipped to ``[0, n]`` (a plug-in: public quantities and the estimates only). For OLH ``q* = 1/g``
holds over the report's uniformly random public seed when the hash family has collision probability ``1/g``
(dpkit's is a 64-bit mixer; the tests measure it); privacy never depends on the hash.

Exact sampling: every random decision is exact (``dpkit.noise``): probabilities ``e^ε/(e^ε+k-1)`` by the
rejection sampler of :mod:`dpkit.mechanisms.response` (``Bernoulli(e^-ε)`` exact), user-given probabilities
(``p``, ``q``, ``f``, ``t``, floats and so dyadic rationals) by comparing a lazy uniform with the rational 64
bits at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.local import _domain
from dpkit.local._domain import Domain
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.mechanisms import Release

__all__ = ["GRR", "OLH", "OUE", "RAPPOR", "SUE", "BinaryRR", "FrequencyEstimate", "Protocol", "Reports",
           "TwoCoinRR", "UnaryEncoding"]


# ---------------------------------------------------------------------------------------------------------------
# reports and estimates
# ---------------------------------------------------------------------------------------------------------------
class Reports:
    """The perturbed reports of one protocol: what the clients send (``perturb``'s ``Release.value``).

    Attributes
    ----------
    protocol:
        The :class:`Protocol` that produced them (public).
    data:
        One report per row: category indices (int64, ``(n,)``) for :class:`GRR`, :class:`BinaryRR` and
        :class:`TwoCoinRR`; bits (bool, ``(n, k)``) for :class:`UnaryEncoding`; hashed values ``y`` in
        ``[0, g)`` (int64, ``(n,)``) for :class:`OLH`; bits (bool, ``(n, m)``) for :class:`RAPPOR`.
    seeds:
        OLH only: each report's public hash seed (uint64, ``(n,)``).
    cohorts:
        RAPPOR only: each report's public cohort (int64, ``(n,)``).

    Building ``Reports(protocol, data, seeds=..., cohorts=...)`` from collected arrays validates their shape
    and range (typed errors naming the parameter, never a value).
    """

    __slots__ = ("cohorts", "data", "protocol", "seeds")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, protocol: Protocol, data: Any, *, seeds: Any = None, cohorts: Any = None) -> None:
        if not isinstance(protocol, Protocol):
            raise WrongType("protocol", "a dpkit.local protocol (GRR, UnaryEncoding, OLH, RAPPOR, ...)")
        self.protocol = protocol
        self.data, self.seeds, self.cohorts = protocol._check_reports(data, seeds, cohorts)

    @classmethod
    def _trusted(cls, protocol: Protocol, data: np.ndarray, seeds: np.ndarray | None = None,
                 cohorts: np.ndarray | None = None) -> Reports:
        out = cls.__new__(cls)
        out.protocol, out.data, out.seeds, out.cohorts = protocol, data, seeds, cohorts
        return out

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __getitem__(self, i: int) -> Any:
        """Report ``i`` in the form :meth:`Protocol.log_prob` takes."""
        i = check.integer("i", i)
        if not -len(self) <= i < len(self):
            raise IndexError("report index out of range")
        if self.seeds is not None:
            return (int(self.seeds[i]), int(self.data[i]))
        if self.cohorts is not None:
            return (int(self.cohorts[i]), self.data[i].copy())
        row = self.data[i]
        return int(row) if row.ndim == 0 else row.copy()

    def categories(self) -> Any:
        """The reported categories (GRR, BinaryRR, TwoCoinRR only): an array of the protocol's categories."""
        if not isinstance(self.protocol, GRR):
            raise InvalidParameter("reports", "only GRR-type reports are categories")
        return self.protocol.domain.decode(self.data, self.data.shape, False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Reports):
            return NotImplemented
        def same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
            return (a is None and b is None) or (a is not None and b is not None and a.dtype == b.dtype
                                                 and np.array_equal(a, b))
        return (self.protocol == other.protocol and same(self.data, other.data) and same(self.seeds, other.seeds)
                and same(self.cohorts, other.cohorts))

    def __repr__(self) -> str:
        return f"<Reports of {self.protocol!r}: {len(self)} reports>"


@dataclass(frozen=True, eq=False)
class FrequencyEstimate:
    """Unbiased count estimates of every category with their variance (server-side post-processing).

    Attributes
    ----------
    categories:
        The public categories, in the protocol's order.
    counts:
        The estimated counts ``ĉ_v`` (float64, may be negative or above ``n``: unbiased, not clipped).
    variance:
        The stated variance of each estimate: the protocol's exact variance formula (module docstring) with the
        true count replaced by the estimate clipped to ``[0, n]`` (RAPPOR: an approximation, see the class).
    n:
        The number of reports.
    protocol:
        The protocol's name (``"grr"``, ``"oue"``, ...).
    epsilon:
        The per-report local privacy parameter.
    support:
        ``(p*, q*)`` of a pure protocol (``None`` for RAPPOR).
    """

    categories: tuple[Any, ...]
    counts: np.ndarray
    variance: np.ndarray
    n: int
    protocol: str
    epsilon: float
    support: tuple[float, float] | None = None

    @property
    def stderr(self) -> np.ndarray:
        """The standard error of each estimate, ``sqrt(variance)``."""
        return np.sqrt(self.variance)

    @property
    def frequencies(self) -> np.ndarray:
        """The estimated proportions ``ĉ_v / n``."""
        return self.counts / self.n

    def exact_variance(self, true_counts: Any) -> np.ndarray:
        """The estimator's exact variance if the true counts were ``true_counts`` (pure protocols only)."""
        if self.support is None:
            raise InvalidParameter("protocol", "has no closed-form variance (RAPPOR is decoded by NNLS)")
        c = check.finite_array("true_counts", true_counts)
        if c.shape != self.counts.shape:
            raise InvalidData("true_counts", "must hold one count per category")
        return _pure_variance(c, self.n, *self.support)

    def interval(self, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Normal-approximation interval ``ĉ_v ± z·stderr_v`` for each category (approximate: the estimate is a
        sum of ``n`` independent bounded terms, so it is close to normal for large ``n``)."""
        from scipy import special

        conf = check.probability("confidence", confidence)
        z = float(special.ndtri(1.0 - (1.0 - conf) / 2.0))
        h = z * self.stderr
        return self.counts - h, self.counts + h

    def as_dict(self) -> dict[Any, float]:
        """``{category: estimated count}``."""
        return {c: float(v) for c, v in zip(self.categories, self.counts.tolist(), strict=True)}

    def __getitem__(self, category: Any) -> float:
        try:
            return float(self.counts[self.categories.index(category)])
        except (ValueError, TypeError):
            raise InvalidParameter("category", "is not one of the categories") from None

    def top(self, k: int) -> list[Any]:
        """The ``k`` categories with the largest estimates (ties: the earlier category first)."""
        k = check.integer("k", k, minimum=1)
        order = np.argsort(-self.counts, kind="stable")[:k]
        return [self.categories[int(i)] for i in order]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrequencyEstimate):
            return NotImplemented
        return (self.categories == other.categories and self.n == other.n and self.protocol == other.protocol
                and self.epsilon == other.epsilon and self.support == other.support
                and np.array_equal(self.counts, other.counts) and np.array_equal(self.variance, other.variance))

    __hash__ = None  # type: ignore[assignment]


def _pure_variance(c: np.ndarray, n: int, p: float, q: float) -> np.ndarray:
    c = np.clip(c, 0.0, float(n))
    return (c * p * (1.0 - p) + (n - c) * q * (1.0 - q)) / (p - q) ** 2


# ---------------------------------------------------------------------------------------------------------------
# protocols
# ---------------------------------------------------------------------------------------------------------------
class Protocol:
    """Base class of the local protocols: a public domain, a per-report ε, client and server sides."""

    name: str = "protocol"
    domain: Domain

    # -- public interface ---------------------------------------------------------------------------------------
    @property
    def categories(self) -> tuple[Any, ...]:
        """The public categories, in order."""
        return self.domain.categories

    @property
    def k(self) -> int:
        """The number of categories."""
        return self.domain.k

    @property
    def epsilon(self) -> float:
        """The per-report local privacy parameter (exact, or rounded up where it is a logarithm)."""
        raise NotImplementedError

    @property
    def params(self) -> dict[str, Any]:
        """The protocol's public parameters (written into receipts)."""
        return {"protocol": self.name, "k": self.k, "epsilon": self.epsilon}

    def perturb(self, values: Any, *, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                rng: RandomSource | None = None, description: str = "") -> Release:
        """Client side: one report per value; the same as :func:`dpkit.local.perturb(values, self, ...)
        <dpkit.local.perturb>` (its docstring states the guarantee, cost, law and error)."""
        from dpkit.local.frequency import perturb

        return perturb(values, self, neighbours=neighbours, accountant=accountant, rng=rng, description=description)

    def aggregate(self, reports: Reports) -> FrequencyEstimate:
        """Server side: unbiased count estimates of every category from ``reports`` (a :class:`Reports`, or
        the :class:`~dpkit.mechanisms.Release` of :func:`~dpkit.local.perturb`; post-processing, free)."""
        reports = self._own(reports)
        n = len(reports)
        p, q = self.support_probabilities
        support = self._support(reports)
        counts = (support - n * q) / (p - q)
        return FrequencyEstimate(self.categories, counts, _pure_variance(counts, n, p, q), n, self.name,
                                 self.epsilon, (p, q))

    def variance(self, true_counts: Any, n: int) -> np.ndarray:
        """The exact variance of each count estimate for true counts ``true_counts`` out of ``n`` reports."""
        n = check.integer("n", n, minimum=1)
        c = check.finite_array("true_counts", true_counts)
        if c.shape != (self.k,):
            raise InvalidData("true_counts", "must hold one count per category")
        if np.any(c < 0) or float(c.sum()) > n:
            raise InvalidData("true_counts", "must be non-negative and sum to at most n")
        p, q = self.support_probabilities
        return (c * p * (1.0 - p) + (n - c) * q * (1.0 - q)) / (p - q) ** 2

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """``(p*, q*)``: the probability that a report supports the reporter's own value, and another value."""
        raise NotImplementedError

    def log_prob(self, report: Any, value: Any) -> float:
        """``ln P[report | value]``, exact up to float rounding (conditioned on the report's public seed or
        cohort). ``report`` as :meth:`Reports.__getitem__` gives it; ``value`` a category."""
        idx, _, _ = self.domain.encode("value", [value])
        return self._log_prob(report, int(idx[0]))

    # -- internals ----------------------------------------------------------------------------------------------
    def _own(self, reports: Any) -> Reports:
        reports = _unwrap(reports)
        if not isinstance(reports, Reports):
            raise WrongType("reports", "a dpkit.local.Reports (from perturb, or built from collected arrays)")
        if reports.protocol != self:
            raise InvalidParameter("reports", "were produced by a different protocol")
        if len(reports) == 0:
            raise InvalidData("reports", "must not be empty")
        return reports

    def _draw(self, idx: np.ndarray, rng: RandomSource) -> Reports:
        raise NotImplementedError

    def _support(self, reports: Reports) -> np.ndarray:
        raise NotImplementedError

    def _log_prob(self, report: Any, v: int) -> float:
        raise NotImplementedError

    def _check_reports(self, data: Any, seeds: Any, cohorts: Any) -> tuple[np.ndarray, Any, Any]:
        raise NotImplementedError

    def _key(self) -> tuple[Any, ...]:
        return (type(self).__name__, self.domain.categories if not self.domain.ranged else self.k,
                tuple(sorted(self.params.items())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Protocol):
            return NotImplemented
        return self is other or self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.k, tuple(sorted(self.params.items()))))

    def __repr__(self) -> str:
        extra = ", ".join(f"{k}={v!r}" for k, v in self.params.items() if k not in ("protocol", "k"))
        return f"{type(self).__name__}(k={self.k}, {extra})"


def _informative(proto: Protocol) -> None:
    """Refuse (at construction) an epsilon so small that ``p* − q*`` rounds to zero in float arithmetic."""
    p, q = proto.support_probabilities
    if not p - q > 0:
        raise InvalidParameter("epsilon", "too small: p* - q* rounds to zero (the estimates would be undefined)")


def _unwrap(reports: Any) -> Any:
    """A perturb Release's Reports (its value), else ``reports`` itself."""
    from dpkit.mechanisms import Release

    if isinstance(reports, Release) and isinstance(reports.value, Reports):
        return reports.value
    return reports


def _epsilon(value: Any) -> float:
    eps = check.epsilon(value)
    if eps > 700:
        raise InvalidParameter("epsilon", "must be <= 700 (e^epsilon must be a finite float)")
    return eps


def _int_reports(name: str, data: Any, bound: int) -> np.ndarray:
    arr = check.integer_array(name, data, allow_empty=True)
    if arr.ndim != 1:
        raise InvalidData(name, "must be one-dimensional (one report per row)")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= bound):
        raise InvalidData(name, "contains a report outside the protocol's range")
    _domain._size(name, arr.size)
    return arr


def _bit_reports(name: str, data: Any, width: int) -> np.ndarray:
    arr = check.integer_array(name, data, allow_empty=True)
    if arr.ndim != 2 or arr.shape[1] != width:
        raise InvalidData(name, "must be a 2-D array with one row of bits per report")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > 1):
        raise InvalidData(name, "must hold only 0/1 bits")
    _domain._size(name, arr.size)
    return arr.astype(bool)


class GRR(Protocol):
    """Generalized (k-ary) randomized response, a.k.a. direct encoding, over public ``categories``.

    Each client reports its own category with probability ``p = e^ε/(e^ε+k-1)`` and each other category
    with probability ``q = 1/(e^ε+k-1)``: ``P[o | v]/P[o | v'] <= p/q = e^ε``, so every report is ε-LDP.
    The best protocol when ``k < 3e^ε + 2`` (Wang et al. 2017); its variance grows linearly with ``k``.

    Parameters
    ----------
    epsilon:
        The per-report local privacy parameter, in ``(0, 700]``.
    categories:
        The public domain: a sequence of distinct hashable categories, or an int ``k`` for ``0..k-1``.
    """

    name = "grr"

    def __init__(self, epsilon: float, categories: Any) -> None:
        self._eps = _epsilon(epsilon)
        self.domain = Domain(categories)
        _informative(self)

    @property
    def epsilon(self) -> float:
        return self._eps

    @property
    def support_probabilities(self) -> tuple[float, float]:
        p = 1.0 / (1.0 + (self.k - 1) * math.exp(-self._eps))
        q = math.exp(-self._eps) * p
        return p, q

    def _draw(self, idx: np.ndarray, rng: RandomSource) -> Reports:
        from dpkit.mechanisms.response import randomized_response_k_plan

        out = randomized_response_k_plan(idx, self.k, self._eps).sample(rng).value
        return Reports._trusted(self, np.asarray(out, dtype=np.int64).reshape(-1))

    def _support(self, reports: Reports) -> np.ndarray:
        return np.bincount(reports.data, minlength=self.k).astype(np.float64)

    def _log_prob(self, report: Any, v: int) -> float:
        o = check.integer("report", report, minimum=0, maximum=self.k - 1)
        log_norm = float(np.logaddexp(self._eps, math.log(self.k - 1)))
        return (self._eps if o == v else 0.0) - log_norm

    def _check_reports(self, data: Any, seeds: Any, cohorts: Any) -> tuple[np.ndarray, Any, Any]:
        if seeds is not None or cohorts is not None:
            raise InvalidParameter("seeds", "only OLH reports carry seeds, only RAPPOR reports cohorts")
        return _int_reports("data", data, self.k), None, None


class BinaryRR(GRR):
    """Warner's binary randomized response over two public categories (default ``(0, 1)``): the true answer
    with probability ``e^ε/(1+e^ε)``, the other one otherwise (GRR with ``k = 2``; ε-LDP per report).

    Parameters
    ----------
    epsilon:
        The per-report local privacy parameter, in ``(0, 700]``.
    categories:
        Exactly two distinct hashable categories, e.g. ``("no", "yes")`` (default ``(0, 1)``).
    """

    name = "binary_rr"

    def __init__(self, epsilon: float, categories: Any = (0, 1)) -> None:
        super().__init__(epsilon, categories)
        if self.k != 2:
            raise InvalidParameter("categories", "must hold exactly 2 categories")


class TwoCoinRR(GRR):
    """Randomized response with coins (Dwork & Roth 2014, §3.2; Near & Abuah ch. 14): flip a coin that comes up
    "truth" with probability ``truth`` (default 1/2, the book's fair coin); on "truth" answer truthfully, else
    answer with a second fair coin. ``P[same answer] = (1+t)/2``, ``P[other] = (1-t)/2``, so each report is
    ``ε = ln((1+t)/(1-t))``-LDP: ``ln 3`` for the fair coin (``epsilon`` is that value rounded up).

    Parameters
    ----------
    categories:
        Exactly two distinct hashable categories (default ``(0, 1)``; the book's no/yes).
    truth:
        The first coin's probability of "answer truthfully", in ``(0, 1)`` (a float, used as its exact value).
    """

    name = "two_coin_rr"

    def __init__(self, categories: Any = (0, 1), truth: float = 0.5) -> None:
        self._t = _domain.dyadic("truth", truth, open_low=True, open_high=True)
        self.domain = Domain(categories)
        if self.k != 2:
            raise InvalidParameter("categories", "must hold exactly 2 categories")
        self._eps = _domain.log_up((1 + self._t) / (1 - self._t))
        if not self.support_probabilities[0] > self.support_probabilities[1]:
            raise InvalidParameter("truth", "too small: the two answers' probabilities round to the same float")

    @property
    def params(self) -> dict[str, Any]:
        return {**super().params, "truth": float(self._t)}

    @property
    def support_probabilities(self) -> tuple[float, float]:
        return float((1 + self._t) / 2), float((1 - self._t) / 2)

    def _draw(self, idx: np.ndarray, rng: RandomSource) -> Reports:
        n = idx.size
        truthful = _domain.bernoulli(self._t, n, rng)  # the first coin (exact)
        second = rng.bits(n)  # the second, fair coin
        out = np.where(truthful, idx, second.astype(np.int64))
        return Reports._trusted(self, out.astype(np.int64))

    def _log_prob(self, report: Any, v: int) -> float:
        o = check.integer("report", report, minimum=0, maximum=1)
        p = (1 + self._t) / 2
        return math.log(p if o == v else 1 - p)


class UnaryEncoding(Protocol):
    """Unary encoding: one-hot encode the category into ``k`` bits and perturb every bit independently; a bit
    that is 1 stays 1 with probability ``p``, a bit that is 0 becomes 1 with probability ``q``.

    Two values' encodings differ in two bits, so each report is ``ε = ln(p(1−q)/((1−p)q))``-LDP (Wang et al.
    2017; Near & Abuah ch. 14, where ``p = 0.75, q = 0.25`` gives ``ln 9``). Variants:

    - ``variant="oue"`` (optimized, default): ``p = 1/2``, ``q = 1/(e^ε+1)``: the smallest variance of all unary
      encodings, ``4 n e^ε/(e^ε−1)²`` per count (for a rare value), the same as OLH;
    - ``variant="sue"`` (symmetric, basic RAPPOR): ``p = e^{ε/2}/(e^{ε/2}+1)``, ``q = 1 − p``;
    - ``p=..., q=...`` (both floats, ``p > q``): your own coins, ``epsilon`` computed from them (rounded up).

    Parameters
    ----------
    categories:
        The public domain: a sequence of distinct hashable categories, or an int ``k``.
    epsilon:
        The per-report local privacy parameter (with ``variant``); leave it out when giving ``p`` and ``q``.
    variant:
        ``"oue"`` (default) or ``"sue"``.
    p, q:
        Custom bit probabilities (``0 <= q < p <= 1``, not both 0/1 extremes so that ε is finite).
    """

    def __init__(self, categories: Any, epsilon: float | None = None, *, variant: str = "oue",
                 p: float | None = None, q: float | None = None) -> None:
        self.domain = Domain(categories)
        self._pq: tuple[Fraction, Fraction] | None = None
        if p is not None or q is not None:
            if epsilon is not None:
                raise InvalidParameter("epsilon", "must be left out when p and q are given (it follows from them)")
            if p is None or q is None:
                raise InvalidParameter("p" if p is None else "q", "p and q must be given together")
            fp = _domain.dyadic("p", p)
            fq = _domain.dyadic("q", q)
            if not fq < fp:
                raise InvalidParameter("q", "must be < p")
            if fq == 0 or fp == 1:
                raise InvalidParameter("p", "with q = 0 or p = 1 the privacy loss is infinite")
            self._pq = (fp, fq)
            self.variant = "custom"
            self._eps = _domain.log_up(fp * (1 - fq) / ((1 - fp) * fq))
        else:
            if epsilon is None:
                raise InvalidParameter("epsilon", "is required unless p and q are given")
            self.variant = check.choice("variant", variant, ("oue", "sue"))
            self._eps = _epsilon(epsilon)
        self.name = self.variant if self.variant != "custom" else "unary"
        _informative(self)

    @property
    def epsilon(self) -> float:
        return self._eps

    @property
    def params(self) -> dict[str, Any]:
        out = {**super().params, "variant": self.variant}
        if self._pq is not None:
            out.update(p=float(self._pq[0]), q=float(self._pq[1]))
        return out

    @property
    def support_probabilities(self) -> tuple[float, float]:
        if self._pq is not None:
            return float(self._pq[0]), float(self._pq[1])
        if self.variant == "oue":
            return 0.5, 1.0 / (1.0 + math.exp(self._eps))
        half = self._eps / 2.0
        return 1.0 / (1.0 + math.exp(-half)), 1.0 / (1.0 + math.exp(half))

    def _log_bits(self) -> tuple[float, float, float, float]:
        """``ln P[1 | 1], ln P[0 | 1], ln P[1 | 0], ln P[0 | 0]`` of one bit."""
        if self._pq is not None:
            p, q = self._pq
            return math.log(p), _log_or_inf(1 - p), _log_or_inf(q), math.log(1 - q)
        e = self._eps
        if self.variant == "oue":
            return -math.log(2.0), -math.log(2.0), -float(np.logaddexp(0.0, e)), e - float(np.logaddexp(0.0, e))
        h = e / 2.0
        keep, flip = h - float(np.logaddexp(0.0, h)), -float(np.logaddexp(0.0, h))
        return keep, flip, flip, keep

    def _draw(self, idx: np.ndarray, rng: RandomSource) -> Reports:
        from dpkit.mechanisms.response import randomized_response_plan

        n, k = idx.size, self.k
        rows = np.arange(n)
        if self.variant == "sue":  # every bit is binary RR with epsilon/2
            onehot = np.zeros((n, k), dtype=np.int64)
            onehot[rows, idx] = 1
            bits = np.asarray(randomized_response_plan(onehot, self._eps / 2.0).sample(rng).value, dtype=bool)
            return Reports._trusted(self, bits.reshape(n, k))
        out = np.empty((n, k), dtype=bool)
        mask = np.ones((n, k), dtype=bool)
        mask[rows, idx] = False
        if self._pq is None:  # OUE: the true bit is a fair coin, every other bit binary RR of 0 with epsilon
            ones = rng.bits(n)
            zeros = np.zeros(n * (k - 1), dtype=np.int64)
            others = np.asarray(randomized_response_plan(zeros, self._eps).sample(rng).value, dtype=bool)
        else:
            p, q = self._pq
            ones = _domain.bernoulli(p, n, rng)
            others = _domain.bernoulli(q, n * (k - 1), rng)
        out[rows, idx] = ones
        out[mask] = others
        return Reports._trusted(self, out)

    def _support(self, reports: Reports) -> np.ndarray:
        return reports.data.sum(axis=0, dtype=np.int64).astype(np.float64)

    def _log_prob(self, report: Any, v: int) -> float:
        bits = _bit_reports("report", np.asarray(report).reshape(1, -1), self.k)[0]
        l11, l01, l10, l00 = self._log_bits()
        total = 0.0
        for j, b in enumerate(bits.tolist()):
            if j == v:
                total += l11 if b else l01
            else:
                total += l10 if b else l00
        return total

    def _check_reports(self, data: Any, seeds: Any, cohorts: Any) -> tuple[np.ndarray, Any, Any]:
        if seeds is not None or cohorts is not None:
            raise InvalidParameter("seeds", "only OLH reports carry seeds, only RAPPOR reports cohorts")
        return _bit_reports("data", data, self.k), None, None


class OUE(UnaryEncoding):
    """Optimized unary encoding: ``UnaryEncoding(categories, epsilon, variant="oue")`` (``p = 1/2``,
    ``q = 1/(e^ε+1)``; Wang et al. 2017 §4.3). Each report is ε-LDP.

    Parameters
    ----------
    epsilon:
        The per-report local privacy parameter, in ``(0, 700]``.
    categories:
        The public domain: a sequence of distinct hashable categories, or an int ``k``.
    """

    def __init__(self, epsilon: float, categories: Any) -> None:
        super().__init__(categories, epsilon, variant="oue")


class SUE(UnaryEncoding):
    """Symmetric unary encoding (basic one-time RAPPOR): ``UnaryEncoding(categories, epsilon, variant="sue")``
    (``p = e^{ε/2}/(e^{ε/2}+1)``, ``q = 1 − p``). Each report is ε-LDP.

    Parameters
    ----------
    epsilon:
        The per-report local privacy parameter, in ``(0, 700]``.
    categories:
        The public domain: a sequence of distinct hashable categories, or an int ``k``.
    """

    def __init__(self, epsilon: float, categories: Any) -> None:
        super().__init__(categories, epsilon, variant="sue")


def _log_or_inf(x: Fraction) -> float:
    return math.log(x) if x > 0 else -math.inf


class OLH(Protocol):
    """Optimized local hashing (Wang et al. 2017 §4.4): each client draws a public random hash seed ``s``,
    hashes its category into ``[g]`` with ``H_s``, and reports ``(s, GRR_g(H_s(v)))``, ``g = round(e^ε + 1)``.

    Given the seed (public, drawn independently of the value), the report is GRR over ``g`` values of
    ``H_s(v)``: ``P[y | v, s]/P[y | v', s] <= e^ε``, so each report is ε-LDP whatever the hash. The server counts,
    for each candidate ``v``, the reports with ``H_s(v) = y`` (``p* = e^ε/(e^ε+g−1)``, ``q* = 1/g``). Variance
    ``≈ 4 n e^ε/(e^ε−1)²`` for rare values, independent of ``k``; communication ``O(log g)`` bits plus the seed.
    Aggregation costs ``O(n k)`` hash evaluations (vectorized in blocks).

    Parameters
    ----------
    epsilon:
        The per-report local privacy parameter, in ``(0, 700]``.
    categories:
        The public domain: a sequence of distinct hashable categories, or an int ``k``.
    g:
        The hash range, in ``[2, 2^32]`` (default ``round(e^ε + 1)``, at most ``2^32``).
    """

    name = "olh"
    #: elements per block of the aggregation (users x candidates)
    _BLOCK = 1 << 16  # 512 KiB temporaries: cache-resident (4x faster than 2^22 on the bench machine)

    def __init__(self, epsilon: float, categories: Any, *, g: int | None = None) -> None:
        self._eps = _epsilon(epsilon)
        self.domain = Domain(categories)
        if g is None:
            g = max(2, round(math.exp(self._eps) + 1.0)) if self._eps < 22 else 2**32
        self.g = check.integer("g", g, minimum=2, maximum=2**32)
        _informative(self)

    @property
    def epsilon(self) -> float:
        return self._eps

    @property
    def params(self) -> dict[str, Any]:
        return {**super().params, "g": self.g}

    @property
    def support_probabilities(self) -> tuple[float, float]:
        p = 1.0 / (1.0 + (self.g - 1) * math.exp(-self._eps))
        return p, 1.0 / self.g

    def _draw(self, idx: np.ndarray, rng: RandomSource) -> Reports:
        from dpkit.mechanisms.response import randomized_response_k_plan

        seeds = rng.uint64(idx.size)
        hashed = _domain.seeded_hash(seeds, _domain.value_keys(idx), self.g)
        y = randomized_response_k_plan(hashed, self.g, self._eps).sample(rng).value
        return Reports._trusted(self, np.asarray(y, dtype=np.int64).reshape(-1), seeds=seeds)

    def _support(self, reports: Reports) -> np.ndarray:
        keys = _domain.value_keys(np.arange(self.k))
        seeds = reports.seeds
        assert seeds is not None
        y = reports.data.astype(np.uint64)
        n = len(reports)
        cb = max(1, min(self.k, 1024))
        ub = max(1, self._BLOCK // cb)
        out = np.zeros(self.k, dtype=np.int64)
        with np.errstate(over="ignore"):
            for c0 in range(0, self.k, cb):
                kk = keys[c0:c0 + cb][None, :]
                acc = np.zeros(kk.shape[1], dtype=np.int64)
                for u0 in range(0, n, ub):
                    h = _domain.reduce(_domain.mix64(np.bitwise_xor(seeds[u0:u0 + ub, None], kk)), self.g)
                    acc += np.count_nonzero(h == y[u0:u0 + ub, None], axis=0)
                out[c0:c0 + cb] = acc
        return out.astype(np.float64)

    def _log_prob(self, report: Any, v: int) -> float:
        if not isinstance(report, tuple) or len(report) != 2:
            raise WrongType("report", "a pair (seed, y)")
        seed = check.integer("report", report[0], minimum=0, maximum=2**64 - 1)
        y = check.integer("report", report[1], minimum=0, maximum=self.g - 1)
        h = int(_domain.seeded_hash(np.array([seed], dtype=np.uint64), _domain.value_keys([v]), self.g)[0])
        log_norm = float(np.logaddexp(self._eps, math.log(self.g - 1)))
        return (self._eps if h == y else 0.0) - log_norm

    def _check_reports(self, data: Any, seeds: Any, cohorts: Any) -> tuple[np.ndarray, Any, Any]:
        if cohorts is not None:
            raise InvalidParameter("cohorts", "only RAPPOR reports carry cohorts")
        y = _int_reports("data", data, self.g)
        if seeds is None:
            raise InvalidParameter("seeds", "OLH reports need their hash seeds")
        try:
            s = np.asarray(seeds)
        except Exception:
            raise WrongType("seeds", "an array of 64-bit unsigned seeds") from None
        if s.dtype != np.uint64 and not (s.dtype.kind == "i" and (s.size == 0 or int(s.min()) >= 0)):
            raise WrongType("seeds", "an array of 64-bit unsigned seeds")
        if s.shape != y.shape:
            raise InvalidData("seeds", "must hold one seed per report")
        return y, s.astype(np.uint64), None


class RAPPOR(Protocol):
    """RAPPOR-style Bloom-filter reports (Erlingsson, Pihur & Korolova 2014), decoded over the known categories.

    A category sets ``h`` bits of an ``m``-bit Bloom filter (public hash functions of its cohort); the
    *permanent* randomized response keeps each bit with probability ``1 − f`` and otherwise sets it to 1 or 0
    with probability ``f/2`` each; the optional *instantaneous* RR reports 1 with probability ``q`` where the
    permanent bit is 1 and ``p`` where it is 0. Marginally each reported bit is 1 with probability
    ``q* = (1−f/2)q + (f/2)p`` where the filter bit is 1 and ``p* = (f/2)q + (1−f/2)p`` where it is 0 (without
    instantaneous RR: ``p = 0, q = 1``).

    Privacy (per report, stated correctly): two categories' filters differ in at most ``h`` ones on each side,
    and each such position changes the likelihood by at most ``q*/p*`` or ``(1−p*)/(1−q*)`` (or their
    inverses), so one report is ``ε₁ = h·|ln(q*(1−p*)/(p*(1−q*)))|``-LDP (RAPPOR's ε₁; ``epsilon``, rounded up).
    The permanent response alone is ``ε∞ = 2h·ln((1−f/2)/(f/2))``-LDP (``epsilon_permanent``): in a real
    deployment each client memoises its permanent filter, which caps the loss of *all* its future reports of the
    same value at ε∞. ``perturb`` draws a fresh permanent response per call (a simulation of one collection),
    so every call is charged ε₁.

    Decoding: with ``t_{c,j} = (y_{c,j} − p* N_c)/(q* − p*)`` (``y`` the count of 1s of bit ``j`` in cohort
    ``c``, ``N_c`` its reports), ``E[t_{c,j}] = Σ_v x_{c,v} [j ∈ B_c(v)]``; with cohorts assigned uniformly at
    random, ``E[x_{c,v}] = c_v N_c/n``. The counts are the non-negative least squares solution of that linear
    system (scipy's NNLS). The stated variance is an approximation: the least-squares sandwich
    ``(XᵀX)⁻¹XᵀΣX(XᵀX)⁻¹`` with ``Σ`` the bits' binomial variances (NaN when ``XᵀX`` is singular, e.g.
    ``k > m·cohorts``); it ignores the non-negativity constraint and the random cohort sizes.

    Parameters
    ----------
    categories:
        The public candidate set: a sequence of distinct hashable categories, or an int ``k``.
    f:
        The permanent randomized response's parameter, in ``(0, 1)``.
    p, q:
        The instantaneous randomized response's probabilities (both or neither; ``p != q``).
    hashes:
        ``h``, the number of hash functions (bits set per category), >= 1.
    bits:
        ``m``, the Bloom filter's size, >= 2.
    cohorts:
        The number of cohorts (each with its own hash functions), >= 1.
    hash_seed:
        A public seed of the hash functions (default 0).
    """

    name = "rappor"

    def __init__(self, categories: Any, f: float = 0.5, p: float | None = None, q: float | None = None, *,
                 hashes: int = 2, bits: int = 64, cohorts: int = 1, hash_seed: int = 0) -> None:
        self.domain = Domain(categories)
        self._f = _domain.dyadic("f", f, open_low=True, open_high=True)
        if (p is None) != (q is None):
            raise InvalidParameter("p" if p is None else "q", "p and q must be given together")
        self._p = Fraction(0) if p is None else _domain.dyadic("p", p)
        self._q = Fraction(1) if q is None else _domain.dyadic("q", q)
        if self._p == self._q:
            raise InvalidParameter("q", "must differ from p (the report would carry no information)")
        self.irr = p is not None
        self.hashes = check.integer("hashes", hashes, minimum=1, maximum=64)
        self.bits = check.integer("bits", bits, minimum=2, maximum=2**16)
        self.cohorts = check.integer("cohorts", cohorts, minimum=1, maximum=2**12)
        self.hash_seed = check.integer("hash_seed", hash_seed, minimum=0, maximum=2**63 - 1)
        if self.bits * self.cohorts * self.k > 2**26:
            raise InvalidParameter("bits", "bits x cohorts x categories is too large to decode (at most 2**26)")
        half = self._f / 2
        self._qs = (1 - half) * self._q + half * self._p  # P[1 | filter bit 1]
        self._ps = half * self._q + (1 - half) * self._p  # P[1 | filter bit 0]
        r = self._qs * (1 - self._ps) / (self._ps * (1 - self._qs))
        self._eps = _exact.up(self.hashes * _domain.log_up(max(r, 1 / r)), 2)
        self._eps_inf = _exact.up(2 * self.hashes * _domain.log_up((1 - half) / half), 2)
        self._filters = self._bloom()

    @property
    def epsilon(self) -> float:
        return self._eps

    @property
    def epsilon_permanent(self) -> float:
        """``ε∞ = 2h ln((1−f/2)/(f/2))``: the bound on all reports of one memoised permanent response."""
        return self._eps_inf

    @property
    def params(self) -> dict[str, Any]:
        return {**super().params, "f": float(self._f), "p": float(self._p), "q": float(self._q), "irr": self.irr,
                "hashes": self.hashes, "bits": self.bits, "cohorts": self.cohorts, "hash_seed": self.hash_seed}

    @property
    def support_probabilities(self) -> tuple[float, float]:
        """``(q*, p*)``: the probability that a reported bit is 1 where the Bloom bit is 1, and where it is 0."""
        return float(self._qs), float(self._ps)

    def bloom_filters(self) -> np.ndarray:
        """The public Bloom filters: a bool array ``(cohorts, k, m)``."""
        return self._filters.copy()

    def _bloom(self) -> np.ndarray:
        c, k, m, h = self.cohorts, self.k, self.bits, self.hashes
        out = np.zeros((c, k, m), dtype=bool)
        keys = _domain.value_keys(np.arange(k))
        with np.errstate(over="ignore"):
            for ci in range(c):
                for hi in range(h):
                    seed = _domain.mix64(np.array([self.hash_seed * 4099 + ci * 67 + hi + 1], dtype=np.uint64))
                    pos = _domain.seeded_hash(seed, keys, m)
                    out[ci, np.arange(k), pos] = True
        return out

    def _draw(self, idx: np.ndarray, rng: RandomSource) -> Reports:
        n = idx.size
        cohorts = rng.below(self.cohorts, n) if self.cohorts > 1 else np.zeros(n, dtype=np.int64)
        bloom = self._filters[cohorts, idx]  # (n, m)
        out = np.empty_like(bloom)
        ones = int(bloom.sum())
        out[bloom] = _domain.bernoulli(self._qs, ones, rng)
        out[~bloom] = _domain.bernoulli(self._ps, bloom.size - ones, rng)
        return Reports._trusted(self, out, cohorts=cohorts)

    def aggregate(self, reports: Reports) -> FrequencyEstimate:
        from scipy import optimize

        reports = self._own(reports)
        assert reports.cohorts is not None
        n = len(reports)
        qs, ps = float(self._qs), float(self._ps)
        rows, targets, var = [], [], []
        for c in range(self.cohorts):
            sel = reports.cohorts == c
            nc = int(sel.sum())
            if nc == 0:
                continue
            y = reports.data[sel].sum(axis=0, dtype=np.int64).astype(np.float64)
            targets.append((y - ps * nc) / (qs - ps))
            var.append(np.clip(y * (nc - y) / nc, 0.25, None) / (qs - ps) ** 2)
            rows.append(self._filters[c].T.astype(np.float64) * (nc / n))  # (m, k)
        x = np.vstack(rows)
        t = np.concatenate(targets)
        counts, _ = optimize.nnls(x, t, maxiter=50 * x.shape[1])
        variance = np.full(self.k, np.nan)
        xtx = x.T @ x
        if np.linalg.matrix_rank(xtx) == self.k:
            inv = np.linalg.inv(xtx)
            sandwich = inv @ (x.T * np.concatenate(var)) @ x @ inv
            variance = np.clip(np.diag(sandwich), 0.0, None)
        return FrequencyEstimate(self.categories, counts, variance, n, self.name, self.epsilon, None)

    def variance(self, true_counts: Any, n: int) -> np.ndarray:
        raise InvalidParameter("protocol", "RAPPOR has no closed-form variance (decoded by NNLS)")

    def _log_prob(self, report: Any, v: int) -> float:
        if not isinstance(report, tuple) or len(report) != 2:
            raise WrongType("report", "a pair (cohort, bits)")
        c = check.integer("report", report[0], minimum=0, maximum=self.cohorts - 1)
        bits = _bit_reports("report", np.asarray(report[1]).reshape(1, -1), self.bits)[0]
        f = self._filters[c, v]
        qs, ps = self._qs, self._ps
        total = 0.0
        for b, fb in zip(bits.tolist(), f.tolist(), strict=True):
            pr = qs if fb else ps
            total += _log_or_inf(pr if b else 1 - pr)
        return total

    def _check_reports(self, data: Any, seeds: Any, cohorts: Any) -> tuple[np.ndarray, Any, Any]:
        if seeds is not None:
            raise InvalidParameter("seeds", "only OLH reports carry seeds")
        bits = _bit_reports("data", data, self.bits)
        if cohorts is None:
            if self.cohorts != 1:
                raise InvalidParameter("cohorts", "reports of a multi-cohort RAPPOR need their cohorts")
            return bits, None, np.zeros(bits.shape[0], dtype=np.int64)
        co = _int_reports("cohorts", cohorts, self.cohorts)
        if co.shape[0] != bits.shape[0]:
            raise InvalidData("cohorts", "must hold one cohort per report")
        return bits, None, co
