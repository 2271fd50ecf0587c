"""Flat: the noisy full contingency table (Li et al. ch. 6, "methods that do not fit the problem").

Every cell of the full table over *all* attributes gets independent discrete Laplace (pure DP) or discrete
Gaussian (zCDP) noise; any marginal is then read from the noisy table by summing (:func:`table_marginal`,
post-processing). The table has ``domain.size()`` cells, so Flat only fits small domains: :func:`flat` refuses a
domain with more than ``max_cells`` cells and points to :func:`~dpkit.marginals.direct` (noise per marginal).

This module also holds the private helpers the three "seed" methods of :mod:`dpkit.marginals` share (Flat,
Direct, Fourier): the budget/noise arguments, the per-record sensitivity of a count table under each neighbour
relation and the integer noise plan.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import PrivacyUnit, Replace
from dpkit.marginals.domain import MAX_CELLS, Domain, Records, marginal
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["flat", "flat_ese", "table_marginal"]

#: Default largest full table :func:`flat` builds (about 4.2 million cells).
DEFAULT_MAX_CELLS = 2**22


# -- shared by flat, direct and fourier (same family) --------------------------------------------------------
def _records(records: Any) -> Records:
    """The records, refused (typed, before any charge) when of the wrong type or empty."""
    if not isinstance(records, Records):
        raise WrongType("records", "dpkit.marginals.Records")
    if len(records) == 0:
        raise InvalidData("records", "holds no records")
    return records


def _budget(epsilon: Any, rho: Any, noise: Any) -> tuple[str, float]:
    """``("laplace", epsilon)`` or ``("gaussian", rho)`` from the call's budget arguments."""
    if noise is None:
        noise = "gaussian" if (epsilon is None and rho is not None) else "laplace"
    if not isinstance(noise, str):
        raise WrongType("noise", "'laplace' or 'gaussian'")
    if noise not in ("laplace", "gaussian"):
        raise InvalidParameter("noise", "must be 'laplace' or 'gaussian'")
    if noise == "laplace":
        if rho is not None:
            raise InvalidParameter("rho", "applies to noise='gaussian' only (Laplace noise takes epsilon)")
        if epsilon is None:
            raise InvalidParameter("epsilon", "is required (or give rho for Gaussian noise)")
        return noise, check.epsilon(epsilon)
    if epsilon is not None:
        raise InvalidParameter("epsilon", "applies to noise='laplace' only (Gaussian noise takes rho)")
    if rho is None:
        raise InvalidParameter("rho", "is required with noise='gaussian'")
    return noise, check.positive("rho", rho)


def _table_sensitivity(nb: Neighbours) -> tuple[int, int]:
    """``(L1, L2²)`` of one count table (a partition of the records) for one neighbour step: add/remove 1, 1;
    replace 2, 2 (a record leaves one cell and enters another); a privacy unit of ``r`` rows r, r² (all its rows
    may fall in one cell)."""
    if isinstance(nb, Replace):
        return 2, 2
    if isinstance(nb, PrivacyUnit):
        r = int(nb.max_rows)
        return r, r * r
    return 1, 1


def _sqrt_up(n: int) -> float:
    """The smallest float ``s`` with ``s² >= n`` (exact rational check)."""
    return _exact.up_until(lambda s: Fraction(s) ** 2 >= n, math.sqrt(n))


def _noise_plan(vector: np.ndarray, noise: str, budget: float, l1: int, l2sq: int) -> Plan:
    """The primitive integer plan for ``vector`` (int64 counts or coefficients): discrete Laplace with L1
    sensitivity ``l1`` at ``epsilon = budget``, or discrete Gaussian with L2 sensitivity ``sqrt(l2sq)`` (rounded
    up) at ``rho = budget``."""
    from dpkit.mechanisms import discrete_gaussian_plan, discrete_laplace_plan

    if noise == "laplace":
        return discrete_laplace_plan(vector, l1, budget)
    return discrete_gaussian_plan(vector, _sqrt_up(l2sq), rho=budget)


def _noise_std(plan: Plan) -> float:
    """The standard deviation of the plan's integer noise per coordinate: discrete Laplace ``sqrt(2q)/(1-q)``,
    ``q = exp(-1/t)`` (exact); discrete Gaussian: ``sigma`` (an upper bound, within 1e-8 relative for
    ``sigma >= 1``)."""
    assert plan.scale is not None
    t = float(plan.scale)
    if plan.noise == "discrete_laplace":
        q = math.exp(-1.0 / t)
        return math.sqrt(2.0 * q) / -math.expm1(-1.0 / t)
    return t


def _budget_params(noise: str, budget: float) -> dict[str, Any]:
    return {"epsilon": budget} if noise == "laplace" else {"rho": budget}


def _ints(table: np.ndarray) -> np.ndarray:
    """A float64 count table as int64 (exact: counts are integers below 2^53)."""
    return np.rint(table).astype(np.int64).reshape(-1)


# -- Flat -----------------------------------------------------------------------------------------------------
def flat(records: Records, epsilon: float | None = None, *, rho: float | None = None, noise: str | None = None,
         max_cells: int = DEFAULT_MAX_CELLS, neighbours: Neighbours | None = None,
         accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """Flat: the full contingency table of ``records`` with independent integer noise in every cell.

    Parameters
    ----------
    records:
        The private records (:class:`~dpkit.marginals.Records`, at least one).
    epsilon:
        Pure-DP budget, > 0, for ``noise="laplace"`` (the default).
    rho:
        zCDP budget, > 0, for ``noise="gaussian"`` (give ``rho`` instead of ``epsilon``).
    noise:
        ``"laplace"`` (discrete Laplace, with ``epsilon``) or ``"gaussian"`` (discrete Gaussian, with ``rho``).
        Default: the one that matches the budget argument given.
    max_cells:
        The largest full table to build (default ``2**22``; at most ``2**27``). A domain with more cells is
        refused (:class:`~dpkit.core.errors.InvalidParameter` naming ``records``, with the domain size) before
        any charge: use :func:`~dpkit.marginals.direct` (noise per marginal) or
        :func:`~dpkit.marginals.fourier` for the low-order marginals of a large domain.
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
    ``epsilon``-DP (pure; ``noise="laplace"``) or ``rho``-zCDP (``noise="gaussian"``) under ``neighbours``. The
    full table is one histogram: adding or removing one record changes one cell by 1 (L1 = L2 = 1); replacing one
    moves a record between two cells (L1 2, L2 sqrt 2); a privacy unit of ``max_rows`` rows changes cells by
    ``max_rows`` in total (L1 = L2 = ``max_rows``, all rows possibly in one cell). The noise is the exact
    :func:`~dpkit.mechanisms.discrete_laplace` with that L1 sensitivity (``t >= L1 / epsilon``) or
    :func:`~dpkit.mechanisms.discrete_gaussian` with that L2 sensitivity (``sigma >= L2 / sqrt(2 rho)``); every
    marginal read from the table is post-processing.

    Cost
    ----
    ``PureDP(epsilon)`` or ``ZCDP(rho)``, charged once to ``accountant`` (if given) before any random bit is
    drawn; a refused charge, or a refused input, draws nothing.

    Output law
    ----------
    ``value`` is ``{domain.attrs: T}``, ``T`` a float64 array of shape ``domain.shape`` whose cells are the exact
    counts plus independent integer noise ``Z``: ``P[Z = k] ∝ exp(-|k| / t)`` (``Release.noise`` is
    ``"discrete_laplace"``, ``Release.scale`` is ``t``, the smallest float ``>= L1 / epsilon``) or
    ``P[Z = k] ∝ exp(-k² / (2 sigma²))`` (``"discrete_gaussian"``, scale ``sigma``). Values are integers (may be
    negative). ``params["noise_std"]`` is the noise standard deviation per cell. Read any marginal with
    :func:`table_marginal` (a sum of cells: consistent across marginals, its noise the sum of the cells').

    Error
    -----
    Unbiased. Each cell's noise variance is ``2q/(1-q)²`` (``q = exp(-1/t)``, about ``2/epsilon²``) or at most
    ``sigma²``; a marginal on ``k`` of ``d`` attributes sums ``size / size(attrs)`` cells per output cell, so its
    summed squared error is ``size`` times the cell variance whatever ``k`` (Li et al.'s ESE ``2^d V_u`` for
    binary attributes, :func:`flat_ese`): Flat's error grows with the domain, which is why it loses to Direct
    beyond :func:`~dpkit.marginals.flat_vs_direct_crossover` attributes. ``Release.interval(confidence)`` gives
    per-cell integer intervals ``T ± h`` (as ``({attrs: lo}, {attrs: hi})``).

    References
    ----------
    Li, Lyu, Su, Yang, *Differential Privacy: From Theory to Practice* (2016), ch. 6; Canonne, Kamath, Steinke
    (2020) for the discrete Gaussian.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit import deterministic_source
    >>> from dpkit.marginals import Domain, Records, flat, table_marginal
    >>> dom = Domain({"a": 2, "b": 3})
    >>> rec = Records(np.array([[0, 1], [1, 2], [0, 1]]), dom)
    >>> rel = flat(rec, 1.0, rng=deterministic_source(1))
    >>> rel.value[("a", "b")].shape, table_marginal(rel.value, dom, ["b"]).shape
    ((2, 3), (3,))
    """
    return run(_flat_plan(records, epsilon, rho=rho, noise=noise, max_cells=max_cells, neighbours=neighbours,
                          accountant=accountant), accountant=accountant, rng=rng, description=description)


def _flat_plan(records: Any, epsilon: Any, *, rho: Any, noise: Any, max_cells: Any, neighbours: Any,
               accountant: Any) -> Plan:
    rec = _records(records)
    kind, budget = _budget(epsilon, rho, noise)
    cap = check.integer("max_cells", max_cells, minimum=1, maximum=MAX_CELLS)
    nb = resolve_neighbours(neighbours, accountant)
    dom = rec.domain
    size = dom.size()
    if size > cap:
        raise InvalidParameter("records", f"the domain has {size} cells, more than max_cells = {cap}: Flat fits "
                                          "small domains only; use dpkit.marginals.direct (noise per marginal) "
                                          "or fourier for low-order marginals")
    l1, l2sq = _table_sensitivity(nb)
    inner = _noise_plan(_ints(marginal(rec)), kind, budget, l1, l2sq)
    attrs = dom.attrs
    shape = dom.shape

    def draw(rng: RandomSource) -> Outcome:
        noisy = np.asarray(inner.sample(rng).value, dtype=np.int64).astype(np.float64).reshape(shape)
        return Outcome({attrs: noisy})

    params = {**_budget_params(kind, budget), "noise": kind, "cells": size, "attrs": attrs,
              "sensitivity_l1": l1, "sensitivity_l2": math.sqrt(l2sq), "noise_std": _noise_std(inner)}
    return Plan(mechanism="flat", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=inner.scale,
                noise=inner.noise, params=params, neighbours=nb)


def table_marginal(table: Any, domain: Domain, attrs: Iterable[str]) -> np.ndarray:
    """The marginal on ``attrs`` of a full table over ``domain`` (e.g. :func:`flat`'s release value), by summing
    the other attributes out: a float64 array of shape ``domain.shape_of(attrs)`` (domain order).

    ``table`` is the full array (shape ``domain.shape``) or a mapping holding it under ``domain.attrs`` (the
    :func:`flat` value). Post-processing: no data, no charge.

    >>> import numpy as np
    >>> dom = Domain({"a": 2, "b": 3})
    >>> table_marginal(np.arange(6.0).reshape(2, 3), dom, ["a"]).tolist()
    [3.0, 12.0]
    """
    if not isinstance(domain, Domain):
        raise WrongType("domain", "a dpkit.marginals.Domain")
    if isinstance(table, Mapping):
        if domain.attrs not in table:
            raise InvalidParameter("table", "holds no full table over the domain's attributes")
        table = table[domain.attrs]
    arr = check.as_array("table", table, "an array of counts")
    if arr.shape != domain.shape:
        raise InvalidParameter("table", "does not have the domain's shape")
    if arr.dtype.kind not in "iuf":
        raise WrongType("table", "an array of counts")
    arr = arr.astype(np.float64)
    keep = domain.axes(attrs)
    drop = tuple(i for i in range(len(domain)) if i not in keep)
    return np.asarray(arr.sum(axis=drop) if drop else arr, dtype=np.float64)


def flat_ese(d: int, k: int, epsilon: float = 1.0) -> float:
    """Li et al.'s analytic expected squared error (summed over cells) of one k-way marginal of ``d`` binary
    attributes read from Flat: ``2^d V_u`` with ``V_u = 2/epsilon²`` (the variance of ``Lap(1/epsilon)``): each
    of the ``2^k`` cells sums ``2^(d-k)`` noisy cells. Compare :func:`~dpkit.marginals.direct_ese`.

    >>> flat_ese(16, 2)
    131072.0
    """
    d = check.integer("d", d, minimum=1, maximum=1024)
    k = check.integer("k", k, minimum=0, maximum=d)
    eps = check.epsilon(epsilon)
    return float(2**d) * 2.0 / (eps * eps)
