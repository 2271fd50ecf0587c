"""Direct: every marginal of a workload measured with its own noise (Li et al. ch. 6).

Each of the ``m`` marginals of the workload gets independent integer noise calibrated to the sensitivity of the
*whole* workload (one record is in every marginal): L1 ``m`` (Li et al.'s ``Lap(m/epsilon)``, here discrete
Laplace) or L2 ``sqrt(m)`` (discrete Gaussian, zCDP). Also Li et al.'s analytic comparison with Flat:
:func:`direct_ese` and :func:`flat_vs_direct_crossover`.
"""

from __future__ import annotations

import itertools
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
           rho: float | None = None, noise: str | None = None, consistent: bool = False,
           neighbours: Neighbours | None = None, accountant: Accountant | None = None,
           rng: RandomSource | None = None, description: str = "") -> Release:
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
    consistent:
        ``False`` (default): the noisy marginals as measured. ``True``: their least-squares consistent
        estimate (post-processing, same cost): the marginals of the table on the domain's cells whose
        marginals are closest to the noisy ones in summed squared error — a linear function of the noise, with
        an exact per-cell standard deviation and intervals (Output law, Error). Not clipped: cells may be
        negative or fractional.
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
    (``consistent=True``, or the graphical-model inference). ``params["noise_std"]`` is the noise standard
    deviation per cell.

    With ``consistent=True``: ``parts["noisy"]`` holds those noisy marginals ``y_A`` and ``value`` their
    orthogonal projection onto the consistent marginals, ``x̂ = argmin_x sum_A ||M_A x - y_A||²`` over real
    tables ``x`` on the domain, ``value[A] = M_A x̂`` (unique). In closed form (``M^T M`` is diagonal on the
    tables that are non-constant exactly along a set ``U`` of attributes — centred along ``U``, constant along
    the rest): ``value[B] = sum_{U ⊆ B} h_U ⊗_{j in B \\ U} (1/k_j)`` with ``h_U = lam_U^-1 sum_{A ⊇ U}
    (prod_{j in A} k_j)^-1 C_U(y_A summed over A \\ U)`` (``C_U`` centres along each attribute of ``U``,
    ``lam_U = sum_{A ⊇ U} (prod_{j in A} k_j)^-1``, sums over the workload's sets, ``k_j`` the sizes).
    Any two released marginals agree on their common attributes and all on one total. ``Release.noise`` and
    ``scale`` are then ``None`` (the cells are linear combinations of the integer noises, not one of the
    exact per-coordinate laws); ``parts["cell_std"]`` gives each set's per-cell standard deviation.

    Error
    -----
    Unbiased; each cell's noise variance is ``2q/(1-q)²`` (``q = exp(-1/t)``, about ``2 m²/epsilon²``) or at
    most ``sigma²`` (``m / (2 rho)``). Summed over the ``2^k`` cells of a k-way marginal of binary attributes
    this is Li et al.'s ESE ``2^k C(d,k)² V_u`` (:func:`direct_ese`): it grows with the workload size, not the
    domain, so Direct beats Flat from :func:`flat_vs_direct_crossover` attributes on (d >= 16, 26, 36, 46 for
    k = 2..5). ``Release.interval(confidence)`` gives per-cell integer intervals (``({attrs: lo}, {attrs: hi})``).

    ``consistent=True``: still unbiased (the projection returns consistent marginals unchanged), and every
    cell of the marginal on ``B`` has the same variance ``s² v_B``, ``s²`` the per-cell noise variance above and
    ``v_B = sum_{U ⊆ B} prod_{j in B \\ U} (1/k_j) prod_{j in U} (1 - 1/k_j) / (prod_{j in B} k_j lam_U)``
    (``<= 1``: never worse than the raw cell).
    ``parts["cell_std"][B] = s sqrt(v_B)`` (exact for Laplace noise; for the discrete Gaussian ``s`` is its
    parameter ``sigma``, an upper bound on its standard deviation). ``Release.interval(confidence)`` gives
    per-cell intervals ``value ± w`` that hold with probability at least ``confidence`` per cell: Gaussian noise
    ``w = sigma sqrt(2 v_B ln(2 / (1 - confidence)))`` (a linear combination of independent discrete Gaussians
    is ``sigma ||c||``-sub-Gaussian, Canonne, Kamath & Steinke 2020), Laplace noise Chebyshev's ``w = s
    sqrt(v_B / (1 - confidence))``; both widened by ``1e-9 (1 + sum |y|)`` for the float arithmetic. No
    simultaneous interval. These intervals are for the **unclipped** linear estimate only: after clipping,
    rounding or a non-negative fit (e.g. :func:`~dpkit.marginals.estimate`, which the tables ``marginals``
    kind uses for its consistency step) no interval is stated.

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
    return run(_direct_plan(records, workload, epsilon, rho=rho, noise=noise, consistent=consistent,
                            neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _direct_plan(records: Any, workload: Any, epsilon: Any, *, rho: Any, noise: Any, neighbours: Any,
                 accountant: Any, consistent: Any = False) -> Plan:
    rec = _records(records)
    dom = rec.domain
    sets = _workload(dom, workload)
    kind, budget = _budget(epsilon, rho, noise)
    consistent = check.flag("consistent", consistent)
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
        if not consistent:
            return Outcome(out)
        est = _consistent(dom.shape, [dom.axes(a) for a in sets], [out[a] for a in sets], lam)
        value = dict(zip(sets, est, strict=True))
        slack = 1e-9 * (1.0 + sum(float(np.abs(v).sum()) for v in out.values()))  # float rounding, generously

        def interval(confidence: float) -> tuple[Any, Any]:
            w = {a: _halfwidth(kind, inner, var[a], confidence) + slack for a in sets}
            return {a: v - w[a] for a, v in value.items()}, {a: v + w[a] for a, v in value.items()}

        return Outcome(value, parts={"noisy": out, "cell_std": cell_std}, interval_fn=interval)

    std = _noise_std(inner)
    params = {**_budget_params(kind, budget), "noise": kind, "workload": tuple(sets), "marginals": m,
              "sensitivity_l1": m * l1, "sensitivity_l2": math.sqrt(m * l2sq), "noise_std": std}
    if consistent:
        lam = _eigenvalues(dom.shape, [dom.axes(a) for a in sets])
        var = {a: _cell_variance(dom.shape, dom.axes(a), lam) for a in sets}
        cell_std = {a: std * math.sqrt(v) for a, v in var.items()}
        params.update({"consistent": True, "noise_std": max(cell_std.values()), "measured_noise_std": std})
        return Plan(mechanism="direct", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=None,
                    noise=None, params=params, neighbours=nb)
    return Plan(mechanism="direct", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=inner.scale,
                noise=inner.noise, params=params, neighbours=nb)


def _subsets(axes: Sequence[int], sizes: Sequence[int]) -> list[tuple[int, ...]]:
    """The subsets of ``axes`` made of attributes with at least 2 levels (a 1-level attribute is never
    non-constant)."""
    act = [j for j in axes if sizes[j] >= 2]
    return [u for r in range(len(act) + 1) for u in itertools.combinations(act, r)]


def _eigenvalues(sizes: Sequence[int], sets: list[tuple[int, ...]]) -> dict[tuple[int, ...], float]:
    """``lam_U = sum_{A ⊇ U} 1 / prod_{j in A} k_j``: the eigenvalue of ``M^T M / prod(k)`` on the tables
    non-constant exactly along ``U`` (``M`` the workload's stacked marginal map)."""
    lam: dict[tuple[int, ...], float] = {}
    for a in sets:
        inv = 1.0 / math.prod(sizes[j] for j in a)
        for u in _subsets(a, sizes):
            lam[u] = lam.get(u, 0.0) + inv
    return lam


def _cell_variance(sizes: Sequence[int], b: tuple[int, ...], lam: dict[tuple[int, ...], float]) -> float:
    """``v_B``: the variance of each cell of the consistent marginal on ``b`` per unit noise variance."""
    total = 0.0
    for u in _subsets(b, sizes):
        term = 1.0 / (math.prod(sizes[j] for j in b) * lam[u])
        for j in b:
            term *= (1.0 - 1.0 / sizes[j]) if j in u else 1.0 / sizes[j]
        total += term
    return total


def _consistent(sizes: Sequence[int], sets: list[tuple[int, ...]], noisy: list[np.ndarray],
                lam: dict[tuple[int, ...], float]) -> list[np.ndarray]:
    """The least-squares consistent marginals of the workload ``sets`` (axis tuples) from their noisy values."""
    h: dict[tuple[int, ...], np.ndarray] = {}
    for a, y in zip(sets, noisy, strict=True):
        inv = 1.0 / math.prod(sizes[j] for j in a)
        for u in _subsets(a, sizes):
            z = y.sum(axis=tuple(i for i, j in enumerate(a) if j not in u))  # onto U (A's order kept)
            for i in range(z.ndim):
                z = z - z.mean(axis=i, keepdims=True)
            h[u] = h.get(u, 0.0) + inv * z
    for u in h:
        h[u] = h[u] / lam[u]
    out = []
    for b in sets:
        m = np.zeros(tuple(sizes[j] for j in b))
        for u in _subsets(b, sizes):
            scale = 1.0 / math.prod(sizes[j] for j in b if j not in u)
            m = m + np.reshape(h[u], tuple(sizes[j] if j in u else 1 for j in b)) * scale
        out.append(m)
    return out


def _halfwidth(kind: str, inner: Plan, v: float, confidence: float) -> float:
    """The per-cell half-width of a consistent marginal with variance factor ``v`` (sub-Gaussian tail for the
    discrete Gaussian, Chebyshev for the discrete Laplace)."""
    alpha = 1.0 - confidence
    if not alpha > 0:
        return math.inf
    if kind == "gaussian":
        assert inner.scale is not None
        return float(inner.scale) * math.sqrt(2.0 * v * math.log(2.0 / alpha))
    return _noise_std(inner) * math.sqrt(v / alpha)


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
