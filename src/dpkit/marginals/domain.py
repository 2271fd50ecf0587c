"""Finite domains, integer-coded records, marginals, workloads and marginal-error metrics.

The data model of :mod:`dpkit.marginals` and :mod:`dpkit.synth` (Li et al. ch. 6; Hardt ch. 5; the
private-pgm convention):

- a :class:`Domain` is an ordered list of attributes, each with a public number of levels ``0 .. size-1``;
- a :class:`Records` table holds ``n`` records as an ``n x d`` integer array of codes in that domain;
- the **marginal** on a set of attributes is the contingency table of counts over those attributes, an array
  of shape ``domain.shape_of(attrs)`` with the attributes in *domain order* (``Domain.canonical``);
- a **workload** is a list of attribute sets (``all_kway(domain, k)``) with optional weights.

Nothing here is private: these are exact (non-DP) computations used by the DP methods after their charge and
by benchmarks and tests. Metrics compare two marginals (or two distributions) of the same shape.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType

__all__ = [
    "Domain",
    "Records",
    "all_kway",
    "jensen_shannon",
    "kl_divergence",
    "l1_error",
    "marginal",
    "mean_total_variation",
    "total_variation",
]

#: Refuse a dense table with more cells than this (a method that needs one says which method would fit).
MAX_CELLS = 2**27
#: Largest total of :class:`Records` weights: marginals are weighted bincounts in float64, exact below 2^53.
MAX_WEIGHT_TOTAL = 2**53


@dataclass(frozen=True, init=False)
class Domain:
    """Ordered attributes with public finite sizes.

    >>> dom = Domain({"a": 2, "b": 3, "c": 4})
    >>> dom.size(), dom.size(["c", "a"]), dom.canonical(["c", "a"]), dom.shape_of(["c", "a"])
    (24, 8, ('a', 'c'), (2, 4))
    """

    attrs: tuple[str, ...]
    shape: tuple[int, ...]

    def __init__(self, sizes: Mapping[str, int] | Sequence[tuple[str, int]]) -> None:
        if isinstance(sizes, Mapping):
            items = list(sizes.items())
        elif isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
            raise WrongType("domain", "a mapping attribute -> number of levels")
        else:
            items = list(sizes)
        if not items:
            raise InvalidParameter("domain", "needs at least one attribute")
        attrs: list[str] = []
        shape: list[int] = []
        for item in items:
            if not isinstance(item, tuple) or len(item) != 2:
                raise WrongType("domain", "a mapping attribute -> number of levels")
            name, size = item
            if not isinstance(name, str) or not name:
                raise WrongType("domain", "attribute names that are non-empty strings")
            if name in attrs:
                raise InvalidParameter("domain", "has a repeated attribute name")
            attrs.append(name)
            shape.append(check.integer("domain", size, minimum=1, maximum=2**31))
        object.__setattr__(self, "attrs", tuple(attrs))
        object.__setattr__(self, "shape", tuple(shape))

    @classmethod
    def from_json(cls, path: str | Path) -> Domain:
        """A domain from a JSON file ``{"attr": levels, ...}`` (the private-pgm format)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
            raw = json.loads(text)
        except (OSError, ValueError, TypeError):
            raise InvalidParameter("path", "is not a readable JSON domain file") from None
        if not isinstance(raw, dict):
            raise InvalidParameter("path", "must hold a JSON object attribute -> number of levels")
        return cls(raw)

    def __len__(self) -> int:
        return len(self.attrs)

    def __iter__(self) -> Iterator[str]:
        return iter(self.attrs)

    def __contains__(self, attr: object) -> bool:
        return attr in self.attrs

    def to_dict(self) -> dict[str, int]:
        return dict(zip(self.attrs, self.shape, strict=True))

    def canonical(self, attrs: Iterable[str], name: str = "attrs") -> tuple[str, ...]:
        """``attrs`` as a tuple in domain order, each known and listed once (typed errors naming ``name``)."""
        if isinstance(attrs, str):
            attrs = (attrs,)
        try:
            items = list(attrs)
        except TypeError:
            raise WrongType(name, "a sequence of attribute names") from None
        if any(not isinstance(a, str) for a in items):
            raise WrongType(name, "a sequence of attribute names")
        unknown = [a for a in items if a not in self.attrs]
        if unknown:
            raise InvalidParameter(name, "names an attribute that is not in the domain")
        if len(set(items)) != len(items):
            raise InvalidParameter(name, "lists an attribute twice")
        return tuple(a for a in self.attrs if a in items)

    def axes(self, attrs: Iterable[str]) -> tuple[int, ...]:
        """The positions of ``attrs`` (domain order)."""
        return tuple(self.attrs.index(a) for a in self.canonical(attrs))

    def shape_of(self, attrs: Iterable[str]) -> tuple[int, ...]:
        return tuple(self.shape[i] for i in self.axes(attrs))

    def project(self, attrs: Iterable[str]) -> Domain:
        """The sub-domain on ``attrs`` (domain order)."""
        return Domain([(a, self.shape[self.attrs.index(a)]) for a in self.canonical(attrs)])

    def size(self, attrs: Iterable[str] | None = None) -> int:
        """Number of cells of the marginal on ``attrs`` (all attributes by default); a Python int (no overflow)."""
        shape = self.shape if attrs is None else self.shape_of(attrs)
        return math.prod(shape)


class Records:
    """``n`` records over a :class:`Domain`: an ``n x d`` int64 array of codes, column ``j`` in
    ``0 .. domain.shape[j] - 1``. Missing values are not allowed (code them as a level of their own).

    ``weights`` (optional, one non-negative integer per row, total at most :data:`MAX_WEIGHT_TOTAL`) makes the
    rows pre-aggregated: a row of weight ``w`` stands for ``w`` identical records. ``len`` is then the total
    weight and :func:`marginal` a weighted count, equal (exactly) to those of the expanded rows, so every method
    that reads records through :func:`marginal` and ``len`` treats a weighted table as its expansion.
    ``codes`` and ``weights`` keep the rows as given (``weights`` is ``None`` for unweighted records).

    >>> r = Records([[0, 1], [1, 2], [0, 1]], Domain({"a": 2, "b": 3}))
    >>> len(r), marginal(r, ["b"]).tolist()
    (3, [0.0, 2.0, 1.0])
    >>> w = Records([[0, 1], [1, 2]], Domain({"a": 2, "b": 3}), weights=[2, 1])
    >>> len(w), marginal(w, ["b"]).tolist()
    (3, [0.0, 2.0, 1.0])
    """

    def __init__(self, codes: Any, domain: Domain, *, weights: Any = None) -> None:
        if not isinstance(domain, Domain):
            raise WrongType("domain", "a dpkit.marginals.Domain")
        arr = check.as_array("records", codes, "an n x d array of integer codes")
        if arr.ndim == 1 and arr.size == 0:
            arr = arr.reshape(0, len(domain))
        if arr.ndim != 2 or arr.shape[1] != len(domain):
            raise InvalidData("records", "must be an n x d array with one column per domain attribute")
        if arr.dtype.kind == "f":
            _check_whole("records", arr, "must hold integer codes")
        elif arr.dtype.kind not in "iub":
            raise WrongType("records", "an n x d array of integer codes")
        codes64 = arr.astype(np.int64)
        if codes64.size:
            hi = np.asarray(domain.shape, dtype=np.int64)
            if (codes64 < 0).any() or (codes64 >= hi).any():
                raise InvalidData("records", "contains a code outside its attribute's domain")
        self.codes = codes64
        self.domain = domain
        self.weights: np.ndarray | None = None if weights is None else _row_weights(weights, codes64.shape[0])

    @classmethod
    def from_frame(cls, frame: Any, domain: Domain) -> Records:
        """Records from a DataFrame (or a mapping of columns) whose columns include every domain attribute."""
        try:
            cols = [np.asarray(frame[a]) for a in domain.attrs]
        except (KeyError, TypeError, IndexError):
            raise InvalidData("frame", "lacks a column for some domain attribute") from None
        n = {c.shape[0] if c.ndim == 1 else -1 for c in cols}
        if len(n) != 1 or -1 in n:
            raise InvalidData("frame", "columns must be 1-D and of equal length")
        return cls(np.column_stack(cols) if cols[0].size else np.zeros((0, len(domain)), np.int64), domain)

    def __len__(self) -> int:
        """The number of records: rows, or with ``weights`` their total."""
        if self.weights is not None:
            return int(self.weights.sum())  # at most MAX_WEIGHT_TOTAL: exact in int64
        return int(self.codes.shape[0])

    def project(self, attrs: Iterable[str]) -> Records:
        dom = self.domain.project(attrs)
        return Records(self.codes[:, list(self.domain.axes(dom.attrs))], dom, weights=self.weights)


def _check_whole(name: str, arr: np.ndarray, message: str) -> None:
    """A float array holds only finite whole numbers (typed errors naming ``name``, never a value)."""
    if not np.isfinite(arr).all():
        raise InvalidData(name, "contains missing or infinite values")
    if not np.array_equal(arr, np.floor(arr)):
        raise InvalidData(name, message)


def _row_weights(weights: Any, n: int) -> np.ndarray:
    """Validated row weights: int64, one per row, each >= 0, total at most :data:`MAX_WEIGHT_TOTAL` (typed
    errors naming ``"weights"``, never a value)."""
    arr = check.as_array("weights", weights, "a 1-D array of non-negative integers")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise InvalidData("weights", "must be a 1-D array with one weight per row")
    if arr.dtype.kind == "f":
        _check_whole("weights", arr, "must hold whole numbers")
        if arr.size and float(arr.max()) > MAX_WEIGHT_TOTAL:  # exact: the limit is a float
            raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL}")
    elif arr.dtype.kind not in "iub":
        raise WrongType("weights", "a 1-D array of non-negative integers")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > MAX_WEIGHT_TOTAL:
        raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL}")
    w = arr.astype(np.int64)
    if (w < 0).any():
        raise InvalidData("weights", "contains a negative weight")
    if float(w.sum(dtype=np.float64)) > 2.0 * MAX_WEIGHT_TOTAL:  # guards the exact int64 sum below
        raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL}")
    if int(w.sum()) > MAX_WEIGHT_TOTAL:
        raise InvalidData("weights", f"total is above the limit of {MAX_WEIGHT_TOTAL}")
    w.setflags(write=False)
    return w


def marginal(records: Records, attrs: Iterable[str] | None = None) -> np.ndarray:
    """The exact marginal (contingency table of counts) of ``records`` on ``attrs`` (all attributes by
    default): a float64 array of shape ``domain.shape_of(attrs)``, attributes in domain order. Weighted records
    give the weighted counts (a bincount with the row weights: exact integers, the expansion's marginal). Not
    private."""
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    dom = records.domain
    attrs_c = dom.attrs if attrs is None else dom.canonical(attrs)
    shape = dom.shape_of(attrs_c)
    cells = math.prod(shape)
    if cells > MAX_CELLS:
        raise InvalidParameter("attrs", "the marginal has too many cells for a dense table")
    if not attrs_c:
        return np.array(float(len(records)))
    idx = records.codes[:, list(dom.axes(attrs_c))]
    flat = np.ravel_multi_index(tuple(idx.T), shape) if idx.shape[0] else np.zeros(0, np.int64)
    if records.weights is not None:  # float64 sums of integers below 2^53: exact
        return np.bincount(flat, weights=records.weights.astype(np.float64), minlength=cells).reshape(shape)
    return np.bincount(flat, minlength=cells).astype(np.float64).reshape(shape)


def all_kway(domain: Domain, k: int) -> list[tuple[str, ...]]:
    """Every set of ``k`` attributes (domain order), as private-pgm's and Li et al.'s k-way workloads."""
    if not isinstance(domain, Domain):
        raise WrongType("domain", "a dpkit.marginals.Domain")
    k = check.integer("k", k, minimum=1, maximum=len(domain))
    return [tuple(c) for c in itertools.combinations(domain.attrs, k)]


def workload_sets(domain: Domain, workload: Any) -> list[tuple[str, ...]]:
    """The attribute sets of ``workload`` in domain order, each once (a repeated set is kept once): a non-empty
    sequence of non-empty attribute sets, else :class:`~dpkit.core.errors.WrongType` /
    :class:`~dpkit.core.errors.InvalidParameter` naming ``"workload"`` (for the adaptive methods' workloads)."""
    if workload is None or isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise WrongType("workload", "a sequence of attribute sets")
    out: list[tuple[str, ...]] = []
    for attrs in workload:
        if isinstance(attrs, str):
            raise WrongType("workload", "a sequence of attribute sets (tuples of names), not of names")
        c = domain.canonical(attrs, "workload")
        if not c:
            raise InvalidParameter("workload", "contains an empty attribute set")
        if c not in out:
            out.append(c)
    if not out:
        raise InvalidParameter("workload", "must not be empty")
    return out


def _pair(true: Any, est: Any) -> tuple[np.ndarray, np.ndarray]:
    a = check.finite_array("true", check.as_array("true", true, "an array of counts"), allow_empty=False)
    b = check.finite_array("estimate", check.as_array("estimate", est, "an array of counts"), allow_empty=False)
    if a.shape != b.shape:
        raise InvalidParameter("estimate", "has a different shape from the true marginal")
    return a.astype(np.float64).ravel(), b.astype(np.float64).ravel()


def _prob(x: np.ndarray, name: str) -> np.ndarray:
    """``x`` clipped at 0 and normalised to sum 1 (uniform when it sums to 0)."""
    x = np.clip(x, 0.0, None)
    s = float(x.sum())
    if not s > 0:
        return np.full(x.shape, 1.0 / x.size)
    return x / s


def l1_error(true: Any, estimate: Any) -> float:
    """``sum |true - estimate|`` (count units; no normalisation)."""
    a, b = _pair(true, estimate)
    return float(np.abs(a - b).sum())


def total_variation(true: Any, estimate: Any) -> float:
    """Total variation distance ``0.5 * || p - q ||_1`` between the two tables normalised to distributions
    (negative estimates clipped at 0 first): the metric of private-pgm's AIM/MST benchmarks, in [0, 1]."""
    a, b = _pair(true, estimate)
    return float(0.5 * np.abs(_prob(a, "true") - _prob(b, "estimate")).sum())


def kl_divergence(true: Any, estimate: Any) -> float:
    """``KL(p || q)`` in nats for the normalised tables (Hardt ch. 5's measure); ``inf`` when the estimate gives
    probability 0 to a cell the true table has."""
    a, b = _pair(true, estimate)
    p, q = _prob(a, "true"), _prob(b, "estimate")
    m = p > 0
    if (q[m] == 0).any():
        return math.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def jensen_shannon(true: Any, estimate: Any) -> float:
    """Jensen–Shannon divergence (nats) of the normalised tables (Li et al. ch. 6's PriView metric)."""
    a, b = _pair(true, estimate)
    p, q = _prob(a, "true"), _prob(b, "estimate")
    m = 0.5 * (p + q)

    def kl(x: np.ndarray) -> float:
        s = x > 0
        return float(np.sum(x[s] * np.log(x[s] / m[s])))

    return 0.5 * kl(p) + 0.5 * kl(q)


def mean_total_variation(records: Records, estimate: Any, workload: Sequence[Iterable[str]]) -> float:
    """Mean :func:`total_variation` over the workload's marginals, where ``estimate(attrs)`` returns the
    estimated marginal on ``attrs`` (a fitted model's ``project``, or another Records' :func:`marginal`)."""
    if isinstance(estimate, Records):
        other = estimate

        def estimate(attrs: Iterable[str]) -> np.ndarray:
            return marginal(other, attrs)

    if not callable(estimate):
        raise WrongType("estimate", "a callable attrs -> marginal, or Records")
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise WrongType("workload", "a sequence of attribute sets")
    sets = [records.domain.canonical(a, "workload") for a in workload]
    tvs = [total_variation(marginal(records, a), estimate(a)) for a in sets]
    if not tvs:
        raise InvalidParameter("workload", "must not be empty")
    return float(np.mean(tvs))
