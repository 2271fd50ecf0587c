"""Data-dependent 2-D grids: the uniform grid UG and the adaptive grids AG (Qardaji, Yang & Li, ICDE 2013;
Li et al. §4.3.1–4.3.2).

Input: a 2-D array of true counts over a **public** fine grid (e.g. 256×256 pixels of a map). The methods
choose a coarser partition whose granularity depends on a *noisy* total (and, for AG, on noisy level-1
counts), release noisy counts of its cells and spread every cell's estimate uniformly over its fine cells.
The total is never used unnoised: it is a discrete Laplace count charged to the same single budget.

Non-divisible sizes: ``m`` coarse cells along an axis of ``n`` fine cells have edges
``floor(i n / m)``, ``i = 0..m`` (widths differ by at most one; all widths >= 1 because ``m <= n``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.histograms.hierarchical import _dlap_variance
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["adaptive_grid", "uniform_grid"]

_MAX_TOTAL = 2.0**52  # every sum of counts (and count + noise) stays exact in int64 and float64


# ------------------------------------------------------------------ shared 2-D helpers (also used by kdtree)
def _counts2d(counts: Any) -> np.ndarray:
    """A validated 2-D ``int64`` count array whose total is small enough for exact arithmetic."""
    arr = _common.counts(counts, ndim=2)
    if float(np.sum(arr, dtype=np.float64)) >= _MAX_TOTAL:
        raise InvalidData("counts", "total too large for exact arithmetic")
    return arr


def _prefix(arr: np.ndarray) -> np.ndarray:
    """2-D prefix sums ``P[i, j] = sum(arr[:i, :j])`` (int64, exact)."""
    p = np.zeros((arr.shape[0] + 1, arr.shape[1] + 1), dtype=np.int64)
    p[1:, 1:] = arr.cumsum(axis=0).cumsum(axis=1)
    return p


def _rect_sums(p: np.ndarray, r0: Any, r1: Any, c0: Any, c1: Any) -> np.ndarray:
    """Exact counts of the rectangles ``[r0, r1) x [c0, c1)`` (vectorised; empty rectangles give 0)."""
    return p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]


def _edges(n: int, m: int) -> np.ndarray:
    """Edges of ``m`` near-equal blocks of ``n`` fine cells: ``floor(i n / m)``, ``i = 0..m``."""
    return (np.arange(m + 1, dtype=np.int64) * n) // m


def grid_size(total: Any, epsilon: float, c: float) -> np.ndarray:
    """The UG guideline ``m = ceil(sqrt(N epsilon / c))`` (at least 1), elementwise, for **noisy** totals ``N``
    (negative noisy totals count as 0). Public post-processing of released values."""
    x = np.maximum(np.asarray(total, dtype=np.int64), 0).astype(np.float64) * float(epsilon) / float(c)
    x = np.minimum(x, 2.0**60)  # a tiny c or a huge epsilon: inf would cast to a garbage int64
    return np.maximum(1, np.ceil(np.sqrt(x))).astype(np.int64)


def _share(name: str, value: Any) -> float:
    v = check.real(name, value)
    if not 0.0 < v < 1.0:
        raise InvalidParameter(name, "must be in (0, 1)")
    return v


def _check_common(counts: Any, epsilon: Any, neighbours: Neighbours | None,
                  accountant: Accountant | None) -> tuple[np.ndarray, float, Any, int]:
    """The validated 2-D counts, epsilon, neighbour relation and record sensitivity (shared with kdtree)."""
    arr = _counts2d(counts)
    eps = check.epsilon(epsilon)
    nb = _common.resolve_neighbours(neighbours, accountant)
    sens = _common.record_sensitivity(nb)
    return arr, eps, nb, sens


# ------------------------------------------------------------------ UG
def uniform_grid(counts: ArrayLike, epsilon: float, *, c: float = 10.0, total_share: float = 0.05,
                 neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                 rng: RandomSource | None = None, description: str = "") -> Release:
    """Uniform grid UG (Qardaji, Yang & Li 2013; Li et al. §4.3.1) over a public 2-D grid of counts.

    Parameters
    ----------
    counts:
        The true counts, a 2-D array of non-negative integers over a public fine grid (total below 2^52).
    epsilon:
        The privacy parameter, > 0.
    c:
        The guideline's constant (> 0; default 10).
    total_share:
        The share of ``epsilon`` spent on the noisy total (in (0, 1); default 0.05).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``PureDP(epsilon)`` once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP. Under add/remove one record (the default) the total and the block histogram each have
    L1 sensitivity ``s = 1``; under replace-one ``s = 2``; under a privacy unit ``s = max_rows``. The grid size
    is post-processing of ``N~``; the blocks partition the grid, so step 3 costs ``eps_C`` whatever ``m`` is.
    The true total is never used.

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness. Budget split: ``eps_N + eps_C <= epsilon``
    (exact rational check), ``eps_N = total_share * epsilon``.

    Output law
    ----------
    (1) a noisy total ``N~ = N + Z``, ``Z`` discrete Laplace with scale ``s / eps_N``; (2)
    ``m = ceil(sqrt(N~ eps_C / c))`` (at least 1, capped at each axis length: ``m_r = min(m, rows)``,
    ``m_c = min(m, cols)``) with ``eps_C = (1 - total_share) epsilon`` the budget of the cell counts, the
    guideline's ``epsilon``; (3) the fine cells are aggregated into an ``m_r x m_c`` grid of near-equal blocks
    (edges ``floor(i n/m)``), each block gets discrete Laplace noise with scale ``s / eps_C``; (4) each block's
    noisy count is spread uniformly over its fine cells.

    The :class:`Release`'s ``value`` is the float64 estimate of every fine cell (same shape as ``counts``).
    ``parts``: ``total`` (``N~``), ``grid`` (``(m_r, m_c)``), ``row_edges``, ``col_edges`` and ``cells`` (the
    noisy block counts, int64). ``params``: the budget split and scales (data-independent).

    Error
    -----
    Each block count is unbiased with variance ``2q/(1-q)^2`` (``q = e^{-1/t_C}``, ≈ ``2 s^2/eps_C^2``);
    within a block the uniform spreading adds the non-uniformity of the data. The guideline balances the two
    for a query covering a fixed fraction of the grid (Qardaji et al.).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = uniform_grid(np.full((8, 8), 5), 1.0, rng=deterministic_source(3))
    >>> rel.value.shape, rel.parts["grid"]
    ((8, 8), (6, 6))
    """
    return run(_uniform_grid_plan(counts, epsilon, c=c, total_share=total_share, neighbours=neighbours,
                                  accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _uniform_grid_plan(counts: Any, epsilon: float, *, c: Any, total_share: Any, neighbours: Neighbours | None,
                       accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`uniform_grid` (nothing drawn or charged)."""
    arr, eps, nb, sens = _check_common(counts, epsilon, neighbours, accountant)
    c = check.positive("c", c)
    total_share = _share("total_share", total_share)
    eps_n, eps_c = _common.split_budget(eps, [total_share, 1.0 - total_share])
    t_n, t_c = discrete_laplace_scale(sens, eps_n), discrete_laplace_scale(sens, eps_c)
    rows, cols = arr.shape
    params = {"epsilon": eps, "c": c, "total_share": total_share, "total_epsilon": eps_n, "cell_epsilon": eps_c,
              "total_scale": t_n, "cell_scale": t_c, "sensitivity": sens, "shape": (rows, cols)}

    def draw(rng: RandomSource) -> Outcome:
        p = _prefix(arr)
        n_noisy = int(_common.noisy_counts(int(p[-1, -1]), sens, eps_n, rng))
        m = int(grid_size(n_noisy, eps_c, c))
        mr, mc = min(m, rows), min(m, cols)
        er, ec = _edges(rows, mr), _edges(cols, mc)
        true = _rect_sums(p, er[:-1, None], er[1:, None], ec[None, :-1], ec[None, 1:])
        cells = _common.noisy_counts(true, sens, eps_c, rng).reshape(mr, mc)
        hr, wc = np.diff(er), np.diff(ec)
        density = cells / (hr[:, None] * wc[None, :]).astype(np.float64)
        value = np.repeat(np.repeat(density, hr, axis=0), wc, axis=1)
        parts = {"total": n_noisy, "grid": (mr, mc), "row_edges": er, "col_edges": ec, "cells": cells}
        return Outcome(value, parts=parts)

    return Plan(mechanism="uniform_grid", cost=PureDP(eps), draw=draw, sensitivity=float(sens), scale=t_c,
                params=params, neighbours=nb)


# ------------------------------------------------------------------ AG
def _ag_infer(v: np.ndarray, u: np.ndarray, group: np.ndarray, k: np.ndarray, var1: float,
              var2: float) -> tuple[np.ndarray, np.ndarray]:
    """AG constrained inference for every level-1 cell at once (the BLUE of the two-level tree).

    ``v[i]``: noisy count of level-1 cell ``i`` (variance ``var1``); ``u``: noisy leaf counts (variance
    ``var2`` each), leaf ``l`` lying in cell ``group[l]``; ``k[i]`` leaves per cell. With ``S = sum u``:
    ``v' = (v/var1 + S/(k var2)) / (1/var1 + 1/(k var2))`` (Li's ``α² k v + (1-α)² S`` over
    ``α² k + (1-α)²`` with ``k = m2²``) and ``u' = u + (v' - S)/k``: the difference is shared equally among the
    ``k`` leaves (the printed text omits the ``/k``; erratum). Returns ``(v', u')``.
    """
    s = np.bincount(group, weights=u.astype(np.float64), minlength=v.size)
    kv = k.astype(np.float64) * var2
    v_new = (v * kv + s * var1) / (kv + var1)
    u_new = u + ((v_new - s) / k)[group]
    return v_new, u_new


def adaptive_grid(counts: ArrayLike, epsilon: float, *, alpha: float = 0.5, c2: float = 5.0, c: float = 10.0,
                  total_share: float = 0.05, min_level1: int = 10, neighbours: Neighbours | None = None,
                  accountant: Accountant | None = None, rng: RandomSource | None = None,
                  description: str = "") -> Release:
    """Adaptive grids AG (Qardaji, Yang & Li 2013; Li et al. §4.3.2) over a public 2-D grid of counts.

    Parameters
    ----------
    counts:
        The true counts, a 2-D array of non-negative integers over a public fine grid (total below 2^52).
    epsilon:
        The privacy parameter, > 0.
    alpha:
        The level-1 share of the budget left after the total (in (0, 1); default 1/2).
    c2:
        The level-2 guideline constant (> 0; default 5).
    c:
        The level-1 guideline constant (> 0; default 10).
    total_share:
        The share of ``epsilon`` spent on the noisy total (in (0, 1); default 0.05).
    min_level1:
        The smallest level-1 grid size (>= 1; default 10).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``PureDP(epsilon)`` once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP. Under add/remove one record (the default) the total, the level-1 histogram and the
    leaf histogram (all leaves together partition the grid: parallel composition) each have L1 sensitivity
    ``s = 1``; replace-one ``s = 2``; a privacy unit ``s = max_rows``. ``m1`` and every ``m2`` are
    post-processing of released noisy counts (adaptive sequential composition). The true total is never
    used.

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness. Budget: ``eps_N = total_share * epsilon``
    for a noisy total ``N~``; the rest ``eps' = (1 - total_share) epsilon`` is split ``eps_1 = alpha eps'``
    (level 1) and ``eps_2 = (1 - alpha) eps'`` (level 2); ``eps_N + eps_1 + eps_2 <= epsilon`` (exact
    rational check).

    Output law
    ----------
    1. ``m1 = max(min_level1, ceil(sqrt(N~ eps'/c) / 4))`` (capped at each axis length); an ``m1 x m1`` grid of
       near-equal blocks gets discrete Laplace counts ``v`` with scale ``s / eps_1``.
    2. Each level-1 cell with noisy count ``N' = v`` is split into ``m2 x m2`` near-equal sub-blocks,
       ``m2 = ceil(sqrt(max(N', 0) eps_2 / c2))`` (at least 1, capped at the cell's extent per axis), with
       discrete Laplace counts ``u`` (scale ``s / eps_2``).
    3. Constrained inference per level-1 cell (the BLUE given ``v`` and its ``k = m2²`` leaves, with the exact
       discrete Laplace variances ``V1, V2``): ``v' = (k V2 v + V1 Σu)/(k V2 + V1)``, then
       ``u' = u + (v' - Σu)/k``.
    4. Each leaf's ``u'`` is spread uniformly over its fine cells.

    The :class:`Release`'s ``value`` is the float64 estimate of every fine cell (same shape as ``counts``).
    ``parts``: ``total``, ``level1_grid`` ``(m1_r, m1_c)``, ``level1`` (noisy, int64, ``m1_r x m1_c``),
    ``level1_consistent`` (``v'``), ``m2`` (per level-1 cell), ``leaves`` (noisy leaf counts, int64, in cell
    order then row-major within a cell) and ``leaves_consistent`` (``u'``).

    Error
    -----
    Each leaf estimate ``u'`` is unbiased (the BLUE of the two-level tree, never worse than ``u`` alone), with
    variance at most ``V2 ≈ 2 s^2/eps_2^2``; the uniform spreading inside a leaf adds the non-uniformity of
    the data. Dense level-1 cells get finer leaves, sparse ones coarser.

    Errata
    ------
    Li et al. p. 59: the book prints ``u'_{ij} = u_{ij} + (v' - Σu)`` while describing the step as
    "distributing the difference among all nodes equally"; without the ``/m2²`` the leaves would not sum to
    ``v'`` and the estimate would not be the least-squares one. dpkit divides by ``k = m2_r m2_c``; a test
    checks the result equals the generalised least-squares estimate.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = adaptive_grid(np.full((20, 20), 30), 1.0, rng=deterministic_source(3))
    >>> rel.value.shape, rel.parts["level1_grid"]
    ((20, 20), (10, 10))
    """
    return run(_adaptive_grid_plan(counts, epsilon, alpha=alpha, c2=c2, c=c, total_share=total_share,
                                   min_level1=min_level1, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _adaptive_grid_plan(counts: Any, epsilon: float, *, alpha: Any, c2: Any, c: Any, total_share: Any, min_level1: Any,
                        neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`adaptive_grid` (nothing drawn or charged)."""
    arr, eps, nb, sens = _check_common(counts, epsilon, neighbours, accountant)
    alpha = _share("alpha", alpha)
    c2 = check.positive("c2", c2)
    c = check.positive("c", c)
    total_share = _share("total_share", total_share)
    min_level1 = check.integer("min_level1", min_level1, minimum=1)
    rest = 1.0 - total_share
    eps_n, eps_1, eps_2 = _common.split_budget(eps, [total_share, rest * alpha, rest * (1.0 - alpha)])
    eps_rest = eps_1 + eps_2
    t_n, t_1, t_2 = (discrete_laplace_scale(sens, e) for e in (eps_n, eps_1, eps_2))
    rows, cols = arr.shape
    params = {"epsilon": eps, "alpha": alpha, "c": c, "c2": c2, "total_share": total_share, "min_level1": min_level1,
              "total_epsilon": eps_n, "level1_epsilon": eps_1, "level2_epsilon": eps_2, "total_scale": t_n,
              "level1_scale": t_1, "level2_scale": t_2, "sensitivity": sens, "shape": (rows, cols)}

    def draw(rng: RandomSource) -> Outcome:
        p = _prefix(arr)
        n_noisy = int(_common.noisy_counts(int(p[-1, -1]), sens, eps_n, rng))
        x1 = math.sqrt(max(n_noisy, 0) * eps_rest / c) / 4.0  # may be inf for a tiny public c: capped below
        m1 = max(min_level1, math.ceil(x1) if x1 < max(rows, cols) else max(rows, cols))
        m1r, m1c = min(m1, rows), min(m1, cols)
        er, ec = _edges(rows, m1r), _edges(cols, m1c)
        true1 = _rect_sums(p, er[:-1, None], er[1:, None], ec[None, :-1], ec[None, 1:])
        v = _common.noisy_counts(true1, sens, eps_1, rng).reshape(m1r, m1c)
        # level 2: per-cell grid sizes (post-processing of v), then every leaf rectangle, vectorised
        h = np.repeat(np.diff(er), m1c)              # cell heights, cells in row-major order
        w = np.tile(np.diff(ec), m1r)
        r0 = np.repeat(er[:-1], m1c)
        c0 = np.tile(ec[:-1], m1r)
        m2 = grid_size(v.ravel(), eps_2, c2)
        m2r, m2c = np.minimum(m2, h), np.minimum(m2, w)
        k = m2r * m2c
        offsets = np.concatenate([[0], np.cumsum(k)])
        group = np.repeat(np.arange(k.size), k)
        local = np.arange(offsets[-1]) - offsets[group]
        a, b = local // m2c[group], local % m2c[group]
        hr, wr, mr_, mc_ = h[group], w[group], m2r[group], m2c[group]
        lr0 = r0[group] + (a * hr) // mr_
        lr1 = r0[group] + ((a + 1) * hr) // mr_
        lc0 = c0[group] + (b * wr) // mc_
        lc1 = c0[group] + ((b + 1) * wr) // mc_
        u = _common.noisy_counts(_rect_sums(p, lr0, lr1, lc0, lc1), sens, eps_2, rng)
        v_new, u_new = _ag_infer(v.ravel().astype(np.float64), u, group, k, _dlap_variance(t_1),
                                 _dlap_variance(t_2))
        # paint: leaf label of every fine cell
        row_cell = np.repeat(np.arange(m1r), np.diff(er))
        col_cell = np.repeat(np.arange(m1c), np.diff(ec))
        cell = row_cell[:, None] * m1c + col_cell[None, :]
        orow = (np.arange(rows) - er[row_cell])[:, None]
        ocol = (np.arange(cols) - ec[col_cell])[None, :]
        sub_r = ((orow + 1) * m2r[cell] - 1) // h[cell]
        sub_c = ((ocol + 1) * m2c[cell] - 1) // w[cell]
        label = offsets[cell] + sub_r * m2c[cell] + sub_c
        area = ((lr1 - lr0) * (lc1 - lc0)).astype(np.float64)
        value = (u_new / area)[label]
        parts = {"total": n_noisy, "level1_grid": (m1r, m1c), "level1": v,
                 "level1_consistent": v_new.reshape(m1r, m1c), "m2": m2.reshape(m1r, m1c), "leaves": u,
                 "leaves_consistent": u_new}
        return Outcome(value, parts=parts)

    return Plan(mechanism="adaptive_grid", cost=PureDP(eps), draw=draw, sensitivity=float(sens), scale=t_2,
                params=params, neighbours=nb)
