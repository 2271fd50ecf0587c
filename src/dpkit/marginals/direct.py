"""Direct: every marginal of a workload measured with its own noise (Li et al. ch. 6).

Each of the ``m`` marginals of the workload gets independent integer noise calibrated to the sensitivity of the
*whole* workload (one record is in every marginal): L1 ``m`` (Li et al.'s ``Lap(m/epsilon)``, here discrete
Laplace) or L2 ``sqrt(m)`` (discrete Gaussian, zCDP). Also Li et al.'s analytic comparison with Flat:
:func:`direct_ese` and :func:`flat_vs_direct_crossover`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.marginals.domain import MAX_CELLS, Domain, marginal
from dpkit.marginals.flat import (
    _budget,
    _budget_params,
    _ints,
    _noise_plan,
    _noise_std,
    _records,
    _table_sensitivity,
)
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.marginals.domain import Records
    from dpkit.noise.source import RandomSource

__all__ = ["direct", "direct_ese", "flat_vs_direct_crossover"]


def _workload(domain: Domain, workload: Any) -> list[tuple[str, ...]]:
    """The workload's attribute sets in domain order: a non-empty sequence, each set listed once."""
    if isinstance(workload, (str, bytes)) or not isinstance(workload, Sequence):
        raise WrongType("workload", "a sequence of attribute sets")
    sets = [domain.canonical(a, "workload") for a in workload]
    if not sets:
        raise InvalidParameter("workload", "must not be empty")
    if len(set(sets)) != len(sets):
        raise InvalidParameter("workload", "lists an attribute set twice")
    cells = sum(domain.size(a) for a in sets)
    if cells > MAX_CELLS:
        raise InvalidParameter("workload", f"its marginals have {cells} cells in all, more than {MAX_CELLS}")
    return sets


def direct(records: Records, workload: Sequence[Iterable[str]], epsilon: float | None = None, *,
           rho: float | None = None, noise: str | None = None, neighbours: Neighbours | None = None,
           accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """Direct: each marginal of ``workload`` with independent integer noise, calibrated to the whole workload.

    Parameters
    ----------
    records:
        The private records (:class:`~dpkit.marginals.Records`, at least one).
    workload:
        The attribute sets to release (e.g. ``all_kway(domain, 2)``), each listed once, in any order; each is
        released in domain order (:meth:`~dpkit.marginals.Domain.canonical`). ``m = len(workload)``.
    epsilon:
        Pure-DP budget, > 0, for ``noise="laplace"`` (the default).
    rho:
        zCDP budget, > 0, for ``noise="gaussian"`` (give ``rho`` instead of ``epsilon``).
    noise:
        ``"laplace"`` (discrete Laplace, with ``epsilon``) or ``"gaussian"`` (discrete Gaussian, with ``rho``).
        Default: the one that matches the budget argument given.
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged the cost before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure; ``noise="laplace"``) or ``rho``-zCDP (``noise="gaussian"``) under ``neighbours``. Each
    marginal is a histogram of all records (a partition), so adding or removing one record changes one cell of
    *each* marginal by 1: the concatenated marginals have L1 sensitivity ``m`` and L2 sensitivity ``sqrt(m)``
    (replace-one: ``2m`` and ``sqrt(2m)``; a privacy unit of ``r`` rows: ``r m`` and ``r sqrt(m)``). The noise is
    the exact :func:`~dpkit.mechanisms.discrete_laplace` with that L1 sensitivity (``t >= m / epsilon``: Li et
    al.'s ``Lap(m/epsilon)``) or :func:`~dpkit.mechanisms.discrete_gaussian` with that L2 sensitivity
    (``sigma >= sqrt(m / (2 rho))``), on all cells at once.

    Cost
    ----
    ``PureDP(epsilon)`` or ``ZCDP(rho)``, charged once to ``accountant`` (if given) before any random bit is
    drawn; a refused charge, or a refused input, draws nothing.

    Output law
    ----------
    ``value`` is ``{attrs: M}`` for every set of the workload (domain order, in the workload's order), ``M`` a
    float64 array of shape ``domain.shape_of(attrs)``: the exact counts plus independent integer noise in every
    cell, ``P[Z = k] ∝ exp(-|k| / t)`` (``Release.noise`` ``"discrete_laplace"``, ``Release.scale`` ``t``, the
    smallest float ``>= L1 / epsilon``) or ``P[Z = k] ∝ exp(-k² / (2 sigma²))`` (``"discrete_gaussian"``, scale
    ``sigma``). Values are integers (may be negative); marginals sharing attributes are not made consistent
    (post-process them, e.g. with the graphical-model inference). ``params["noise_std"]`` is the noise standard
    deviation per cell.

    Error
    -----
    Unbiased; each cell's noise variance is ``2q/(1-q)²`` (``q = exp(-1/t)``, about ``2 m²/epsilon²``) or at
    most ``sigma²`` (``m / (2 rho)``). Summed over the ``2^k`` cells of a k-way marginal of binary attributes
    this is Li et al.'s ESE ``2^k C(d,k)² V_u`` (:func:`direct_ese`): it grows with the workload size, not the
    domain, so Direct beats Flat from :func:`flat_vs_direct_crossover` attributes on (d >= 16, 26, 36, 46 for
    k = 2..5). ``Release.interval(confidence)`` gives per-cell integer intervals (``({attrs: lo}, {attrs: hi})``).

    References
    ----------
    Li, Lyu, Su, Yang, *Differential Privacy: From Theory to Practice* (2016), ch. 6.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit import deterministic_source
    >>> from dpkit.marginals import Domain, Records, all_kway, direct
    >>> dom = Domain({"a": 2, "b": 3, "c": 2})
    >>> rec = Records(np.array([[0, 1, 1], [1, 2, 0], [0, 1, 0]]), dom)
    >>> rel = direct(rec, all_kway(dom, 2), 1.0, rng=deterministic_source(1))
    >>> sorted(rel.value), rel.scale
    ([('a', 'b'), ('a', 'c'), ('b', 'c')], 3.0)
    """
    return run(_direct_plan(records, workload, epsilon, rho=rho, noise=noise, neighbours=neighbours,
                            accountant=accountant), accountant=accountant, rng=rng, description=description)


def _direct_plan(records: Any, workload: Any, epsilon: Any, *, rho: Any, noise: Any, neighbours: Any,
                 accountant: Any) -> Plan:
    rec = _records(records)
    dom = rec.domain
    sets = _workload(dom, workload)
    kind, budget = _budget(epsilon, rho, noise)
    nb = resolve_neighbours(neighbours, accountant)
    l1, l2sq = _table_sensitivity(nb)
    m = len(sets)
    shapes = [dom.shape_of(a) for a in sets]
    vector = np.concatenate([_ints(marginal(rec, a)) for a in sets])
    inner = _noise_plan(vector, kind, budget, m * l1, m * l2sq)

    def draw(rng: RandomSource) -> Outcome:
        noisy = np.asarray(inner.sample(rng).value, dtype=np.int64).reshape(-1).astype(np.float64)
        out: dict[tuple[str, ...], np.ndarray] = {}
        pos = 0
        for a, shape in zip(sets, shapes, strict=True):
            size = math.prod(shape)
            out[a] = noisy[pos:pos + size].reshape(shape)
            pos += size
        return Outcome(out)

    params = {**_budget_params(kind, budget), "noise": kind, "workload": tuple(sets), "marginals": m,
              "sensitivity_l1": m * l1, "sensitivity_l2": math.sqrt(m * l2sq), "noise_std": _noise_std(inner)}
    return Plan(mechanism="direct", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=inner.scale,
                noise=inner.noise, params=params, neighbours=nb)


def direct_ese(d: int, k: int, epsilon: float = 1.0) -> float:
    """Li et al.'s analytic expected squared error (summed over cells) of one k-way marginal of ``d`` binary
    attributes under Direct on all ``m = C(d, k)`` k-way marginals: ``2^k m² V_u`` with ``V_u = 2/epsilon²``
    (each of the ``2^k`` cells gets ``Lap(m/epsilon)``). Compare :func:`~dpkit.marginals.flat_ese`.

    >>> direct_ese(16, 2)
    115200.0
    """
    d = check.integer("d", d, minimum=1, maximum=1024)
    k = check.integer("k", k, minimum=0, maximum=d)
    eps = check.epsilon(epsilon)
    m = math.comb(d, k)
    return float(2**k * m * m) * 2.0 / (eps * eps)


def flat_vs_direct_crossover(k: int) -> int:
    """The smallest number ``d`` of binary attributes from which Direct's ESE on the k-way marginals is below
    Flat's (Li et al. ch. 6): the smallest ``d >= k`` with ``2^k C(d,k)² < 2^d`` (exact integers; the ratio
    ``2^(d-k) / C(d,k)²`` only grows past it, so Direct stays ahead for every larger ``d``).

    ======  ====  ====  ====  ====
    k       2     3     4     5
    d       16    26    36    46
    ======  ====  ====  ====  ====

    >>> [flat_vs_direct_crossover(k) for k in (2, 3, 4, 5)]
    [16, 26, 36, 46]
    """
    k = check.integer("k", k, minimum=1, maximum=64)
    d = k
    while 2**k * math.comb(d, k) ** 2 >= 2**d:
        d += 1
    return d
