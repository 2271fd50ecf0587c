"""Differentially private histograms over public bins (numeric edges or a list of categories)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource
from dpkit.stats import _common
from dpkit.stats.counts import records

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["histogram"]


def _edges(edges: Any) -> np.ndarray:
    return check.public_vector("edges", edges, min_size=2, increasing=True,
                               kind="a 1-D array of at least two strictly increasing finite reals")


def _categories(categories: Any) -> list[Any]:
    if isinstance(categories, (str, bytes)) or categories is None:
        raise WrongType("categories", "a sequence of distinct hashable values")
    try:
        cats = list(categories.tolist() if isinstance(categories, np.ndarray) else categories)
    except TypeError:
        raise WrongType("categories", "a sequence of distinct hashable values") from None
    if not cats:
        raise InvalidParameter("categories", "needs at least one category")
    for c in cats:
        if c is None or (isinstance(c, (float, np.floating)) and math.isnan(c)):
            raise InvalidParameter("categories", "must not contain None or NaN")
        try:
            hash(c)
        except TypeError:
            raise WrongType("categories", "a sequence of distinct hashable values") from None
    if len(set(cats)) != len(cats):
        raise InvalidParameter("categories", "must be distinct (note that 1, 1.0 and True are equal in Python)")
    return cats


def _edge_counts(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """numpy's convention: bins ``[e_i, e_{i+1})``, the last one closed; values outside are dropped."""
    m = edges.size - 1
    keep = (x >= edges[0]) & (x <= edges[-1])
    idx = np.searchsorted(edges, x[keep], side="right") - 1
    idx = np.minimum(idx, m - 1)  # x == edges[-1] goes to the last bin
    return np.bincount(idx, minlength=m).astype(np.int64)


def _category_counts(arr: np.ndarray, cats: list[Any]) -> np.ndarray:
    index = {c: i for i, c in enumerate(cats)}
    counts = np.zeros(len(cats), dtype=np.int64)
    if arr.size == 0:
        return counts
    try:
        if arr.dtype != object:
            uniq, freq = np.unique(arr, return_counts=True)
            pairs: Iterable[tuple[Any, int]] = zip(uniq.tolist(), freq.tolist(), strict=True)
        else:
            from collections import Counter

            pairs = Counter(arr.tolist()).items()
        for v, f in pairs:
            i = index.get(v)
            if i is not None:
                counts[i] += f
    except TypeError:
        raise WrongType("values", "hashable records (numbers, strings, ...)") from None
    return counts


def histogram(values: ArrayLike, epsilon: float, *, edges: ArrayLike | None = None, categories: ArrayLike | None = None,
              nonnegative: bool = False, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
              rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """Differentially private histogram: exact counts per public bin plus discrete Laplace noise.

    Parameters
    ----------
    values:
        1-D records: numeric with ``edges``; any hashable records (strings, objects) with ``categories``.
        ``None``/NaN records raise (``nan_policy="raise"``) or are dropped (``"omit"``).
    epsilon:
        The privacy parameter, > 0.
    edges, categories:
        Give exactly one of

        - ``edges``: strictly increasing, finite, public bin edges ``e_0 < ... < e_m`` (m bins).
          numpy's convention: bin ``i`` is ``[e_i, e_{i+1})`` and the last bin is closed
          ``[e_{m-1}, e_m]``; values outside ``[e_0, e_m]`` are **dropped** (not clamped: add
          open-ended outer edges yourself if you want them counted). ``values`` must be numeric.
        - ``categories``: a public list of distinct hashable values (numbers, strings, ...); each
          record is counted in the bin of the category it equals; records equal to no category go to
          no bin. ``values`` may be any 1-D sequence (strings, objects).

        The bins must not be derived from the data (no ``np.unique`` of the private values).
    nonnegative:
        ``True`` replaces negative noisy counts by 0 (post-processing, free).
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`).

    Guarantee
    ---------
    Pure ``epsilon``-DP. The count vector's L1 sensitivity is the relation's ``histogram_sensitivity``:
    1 under add/remove one record, 2 under replace-one (a record leaves a bin and enters another),
    ``max_rows`` under a privacy unit. Independent discrete Laplace noise of scale ``t >= sensitivity/epsilon``
    per bin: the joint pmf ratio between neighbouring count vectors is at most ``exp(||Δcounts||_1 / t)``.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness is drawn.

    Output law
    ----------
    Each bin's exact count plus independent exact discrete Laplace noise ``P[Z = k] ∝ exp(-|k|/t)``,
    ``t`` the smallest float ``>= sensitivity/epsilon`` (``Release.scale``); the value is an int64 array,
    clipped below at 0 when ``nonnegative=True``.

    Error
    -----
    Unbiased per bin without ``nonnegative``. ``Release.interval(c)`` (per bin) and
    ``interval(c, simultaneous=True)`` (all bins at once) use the exact discrete Laplace law; with
    ``nonnegative=True`` they remain valid (clipping at 0 moves a noisy count towards every possible true count).

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> r = histogram([0.5, 1.5, 1.7, 3.0], 1.0, edges=[0, 1, 2, 3], rng=deterministic_source(2))
    >>> r.value.dtype.name, r.value.shape, r.noise
    ('int64', (3,), 'discrete_laplace')
    """
    plan = _histogram_plan(values, epsilon, edges=edges, categories=categories, nonnegative=nonnegative,
                           neighbours=neighbours, accountant=accountant, nan_policy=nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _histogram_plan(values: Any, epsilon: Any, *, edges: Any = None, categories: Any = None, nonnegative: Any = False,
                    neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                    nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`histogram` (nothing charged or drawn)."""
    eps = check.epsilon(epsilon)
    if (edges is None) == (categories is None):
        raise InvalidParameter("edges", "give exactly one of edges or categories")
    nonneg = check.flag("nonnegative", nonnegative)
    nb = _common.neighbours_of(neighbours, accountant)
    if edges is not None:
        e = _edges(edges)
        x = _common.data(values, nan_policy=nan_policy)
        true_counts = _edge_counts(x, e)
        kind = "edges"
    else:
        cats = _categories(categories)
        arr = records(values, nan_policy=nan_policy)
        true_counts = _category_counts(arr, cats)
        kind = "categories"
    from dpkit.mechanisms.discrete import discrete_laplace_plan

    sens = int(nb.histogram_sensitivity)
    noisy = discrete_laplace_plan(true_counts, sens, eps)  # independent noise per bin (drawn below)
    params = {"epsilon": eps, "bins": int(true_counts.size), "kind": kind, "nonnegative": nonneg,
              "neighbours": nb.describe()}

    def draw(rng: RandomSource) -> np.ndarray:
        out = np.asarray(noisy.sample(rng).value, dtype=np.int64).reshape(-1)
        return np.maximum(out, 0) if nonneg else out

    return Plan(mechanism="histogram", cost=PureDP(eps), draw=draw, sensitivity=float(sens), scale=noisy.scale,
                noise="discrete_laplace", params=params, neighbours=nb)
