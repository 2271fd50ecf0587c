"""GkM: k-means by sample-and-aggregate (GUPT, Mohan et al. 2012; Li et al. §8.2, Eq 8.2). Pure epsilon-DP.

Each record goes to one of ``m`` blocks by an independent uniform draw (:mod:`dpkit.stability.sample_and_aggregate`);
on every block, Lloyd's algorithm runs ``iterations`` steps from a **public** start (``init``, or ``k``
points drawn uniformly in the public box with dpkit's random source -- the same start for every block);
each block's ``k`` centroids are sorted by their first coordinate (ties by the next), averaged over the
blocks, and released with Laplace noise.

Alignment. Centroid ``j`` of one block and centroid ``j`` of another need not describe the same
cluster: k-means solutions are only defined up to a permutation, and averaging misaligned centroids
gives points between clusters. GUPT (and Li et al.) leave this open; sorting by the first coordinate is
a data-independent canonical order that works when the clusters are separated along that axis and
fails when two centroids swap order between blocks. The privacy argument does not depend on it.

Sensitivity (derived; the coordinates are first mapped to ``[0, 1]^d`` by the public bounds): one
record changes one block (add/remove or replace; ``min(max_rows, m)`` blocks for a privacy unit), whose
sorted ``k x d`` centroid matrix has entries in ``[0, 1]`` (centroids are means of points in the box),
so the L1 change is at most ``k d`` and the average over ``m`` blocks moves by ``k d / m``:
``Lap(k d / (m epsilon))`` per normalised coordinate, i.e. ``k d (max - min)/(m epsilon)`` in the
original units for a cube. **Erratum (Li Eq 8.2):** the printed ``Lap(k (max - min)/(m epsilon))``
omits the factor ``d`` (it is right for ``d = 1``, or with ``max - min`` read as the L1 diameter of the box).

Why it is a weak baseline (Su et al. 2016, Li §8.2): with ``m = n^0.4`` blocks the noise per coordinate
is ``k d w/(n^0.4 epsilon)`` -- error ``∝ 1/(n^0.4 epsilon)``, against ``1/(n epsilon)`` for DPLloyd-style
noisy sums -- and each block learns from only ``n^0.6`` points (subsampling error), with the alignment
problem on top.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run
from dpkit.noise.source import RandomSource
from dpkit.stability.sample_and_aggregate import (
    MAX_NOISY_BLOCKS,
    assign_blocks,
    block_multiplier,
    block_plan,
    check_count_scale,
    noisy_block_count,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["gkm", "lloyd"]


def _points(points: Any, nan_policy: str) -> np.ndarray:
    nan_policy = check.nan_policy(nan_policy)
    if points is None or isinstance(points, (str, bytes)):
        raise WrongType("points", "a 2-D array of real numbers (rows are records)")
    try:
        arr = np.asarray(points)
    except Exception:
        raise WrongType("points", "a 2-D array of real numbers (rows are records)") from None
    if arr.dtype == bool or arr.dtype == object or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise WrongType("points", "a 2-D array of real numbers (rows are records)")
    arr = arr.astype(np.float64)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise InvalidData("points", "must be a 2-D array (n records x d coordinates)")
    bad = np.isnan(arr).any(axis=1)
    if bad.any():
        if nan_policy == "raise":
            raise InvalidData("points", "contains NaN; pass nan_policy='omit' to drop those rows")
        arr = arr[~bad]
    if np.isinf(arr).any():
        raise InvalidData("points", "contains infinite values")
    return arr


def _box(bounds: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    b0, b1 = check.pair("bounds", bounds, "a pair (lo, hi) of reals or of length-d sequences")
    try:
        lo = np.broadcast_to(np.asarray(b0, dtype=np.float64), (d,)).copy()
        hi = np.broadcast_to(np.asarray(b1, dtype=np.float64), (d,)).copy()
    except (TypeError, ValueError, OverflowError):
        raise WrongType("bounds", "a pair (lo, hi) of reals or of length-d sequences") from None
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise InvalidParameter("bounds", "must be finite")
    if not (lo < hi).all():
        raise InvalidParameter("bounds", "needs lo < hi in every coordinate")
    if not np.isfinite(hi - lo).all():
        raise InvalidParameter("bounds", "range too wide for float arithmetic")
    return lo, hi


def lloyd(points: np.ndarray, init: np.ndarray, iterations: int) -> np.ndarray:
    """Plain Lloyd's k-means from ``init`` (``k x d``) for ``iterations`` steps; a cluster that loses all
    its points keeps its previous centroid. Deterministic; returns the centroids sorted by the first
    coordinate (ties broken by the next ones)."""
    c = np.array(init, dtype=np.float64, copy=True)
    if points.shape[0]:
        for _ in range(iterations):
            d2 = ((points[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
            lab = np.argmin(d2, axis=1)
            counts = np.bincount(lab, minlength=c.shape[0])
            sums = np.zeros_like(c)
            np.add.at(sums, lab, points)
            has = counts > 0
            c[has] = sums[has] / counts[has, None]
    order = np.lexsort(c.T[::-1])
    return c[order]


def gkm(points: ArrayLike, k: int, bounds: tuple[float, float], epsilon: float, *, blocks: int | str = "auto",
        iterations: int = 10, init: ArrayLike | None = None, count_share: float = 0.1,
        neighbours: Neighbours | None = None, accountant: Accountant | None = None, rng: RandomSource | None = None,
        nan_policy: str = "raise", description: str = "") -> Release:
    """GkM: ``k`` cluster centres by sample-and-aggregate over ``blocks`` random blocks; pure epsilon-DP.

    Parameters
    ----------
    points:
        ``n x d`` records (1-D = ``d = 1``), clamped into the public box.
    k:
        The number of centres.
    bounds:
        The public box ``(lo, hi)`` (scalars or length-``d`` sequences).
    epsilon:
        The total privacy parameter.
    blocks:
        A public int or ``"auto"`` (``n^0.4``, from a noisy count paid from ``count_share`` under add/remove;
        the true ``n`` under replace).
    iterations:
        Lloyd steps per block.
    init:
        Public ``k x d`` starting centres (default: uniform in the box, drawn after the charge with dpkit's
        random source).
    count_share:
        The share of ``epsilon`` for the noisy count (``blocks="auto"``).
    neighbours, accountant, rng, nan_policy, description:
        The neighbour relation, the accountant charged, the random source, the missing-value policy, the
        receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP under add/remove (default), replace, or a privacy unit: one record changes one block
    (``min(max_rows, m)`` under a unit), whose sorted normalised centroids move by at most ``k d`` in L1, so the
    average moves by ``mult k d / m`` (module docstring: derivation, the alignment problem and the erratum).

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness (count + aggregate).

    Output law
    ----------
    ``Lap(mult k d/(m epsilon_agg))`` (exact lattice Laplace, :func:`dpkit.mechanisms.laplace`) on every
    coordinate of the block-averaged normalised centroids, i.e. ``w_j`` times that in coordinate ``j`` of the
    original units. ``Release.value`` is a ``k x d`` array; ``parts``: ``blocks``, ``init``, ``noisy_count``
    (``"auto"``).

    Error
    -----
    ``Release.interval(c)`` gives, per coordinate, an interval around the released centres that contains the
    *block-averaged* centres with probability ``>= c`` (not the k-means optimum: subsampling and alignment
    errors come on top).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.noise import deterministic_source
    >>> rng = np.random.default_rng(0)  # rng-ok: example data
    >>> pts = np.concatenate([rng.normal(2, 0.3, (3000, 1)), rng.normal(8, 0.3, (3000, 1))])
    >>> r = gkm(pts, 2, (0.0, 10.0), 1.0, blocks=20, init=[[1.0], [9.0]], rng=deterministic_source(1))
    >>> np.round(r.value.ravel()).tolist()
    [2.0, 8.0]
    """
    plan = _gkm_plan(points, k, bounds, epsilon, blocks, iterations, init, count_share, neighbours, accountant,
                     nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _gkm_plan(points: Any, k: Any, bounds: Any, epsilon: Any, blocks: Any, iterations: Any, init: Any, count_share: Any,
              neighbours: Neighbours | None, accountant: Accountant | None, nan_policy: Any) -> Plan:
    """The validated plan of :func:`gkm` (nothing drawn or charged)."""
    nb = resolve_neighbours(neighbours, accountant)
    data = _points(points, nan_policy)
    n, d = data.shape
    k = check.size_limit("k", k, 10_000, minimum=1)
    lo, hi = _box(bounds, d)
    eps = check.epsilon(epsilon)
    iterations = check.size_limit("iterations", iterations, 10_000, minimum=1)
    start = None
    if init is not None:
        try:
            start = np.asarray(init, dtype=np.float64)
        except (TypeError, ValueError, OverflowError):
            raise WrongType("init", "a k x d array of reals") from None
        if start.shape != (k, d):
            raise InvalidParameter("init", "must have shape (k, d)")
        if not np.isfinite(start).all():
            raise InvalidParameter("init", "must be finite")
        start = (np.clip(start, lo, hi) - lo) / (hi - lo)
    m, cshare = block_plan(blocks, count_share, nb, n)
    if cshare is not None:
        eps_count, eps_agg = _exact.split_budget(eps, (cshare, 1.0 - cshare), name="count_share", total_name="epsilon")
    else:
        eps_count, eps_agg = None, eps
    # with blocks="auto" m comes from a noisy count after the charge: check both scales now, for every m
    for mm in ((m,) if m is not None else (1, MAX_NOISY_BLOCKS)):
        _scale(k, d, mm, nb, eps_agg)
    if m is None:
        assert eps_count is not None  # blocks="auto" under add/remove: a share of epsilon for the count
        check_count_scale(nb, eps_count)
    params: dict[str, Any] = {"epsilon": eps, "k": k, "d": int(d), "iterations": iterations,
                              "blocks": blocks if isinstance(blocks, str) else int(blocks),
                              "bounds": (lo.tolist(), hi.tolist()), "epsilon_aggregate": eps_agg,
                              "neighbours": nb.describe()}
    if eps_count is not None:
        params["epsilon_count"] = eps_count
    m_public, start_public = m, start

    def draw(rng: RandomSource) -> Outcome:
        m, start = m_public, start_public
        parts: dict[str, Any] = {}
        if m is None:
            assert eps_count is not None
            m, noisy_n = noisy_block_count(n, eps_count, nb, rng)
            parts["noisy_count"] = noisy_n
        parts["blocks"] = m
        if start is None:
            words = rng.uint64(k * d) >> np.uint64(11)
            start = (words.astype(np.float64) * 2.0**-53).reshape(k, d)
        parts["init"] = (lo + start * (hi - lo)).tolist()
        norm = (np.clip(data, lo, hi) - lo) / (hi - lo)
        labels = assign_blocks(n, m, rng)
        total = _block_average(norm, labels, m, start, iterations)
        from dpkit.mechanisms import laplace_plan

        step = laplace_plan(total.ravel(), _sens(k, d, m, nb), eps_agg)
        noisy = np.asarray(step.sample(rng).value, dtype=np.float64).reshape(k, d)
        value = lo + noisy * (hi - lo)
        scale, g = step.scale, step.granularity
        assert scale is not None  # laplace_plan always declares its scale
        width = hi - lo

        def interval(confidence: float) -> tuple[np.ndarray, np.ndarray]:
            from dpkit.mechanisms import accuracy

            h = accuracy.laplace_halfwidth(scale, confidence, granularity=g) * (1 + 2.0**-40)
            return value - h * width, value + h * width

        return Outcome(value, parts=parts, interval_fn=interval)

    return Plan(mechanism="gkm", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def _sens(k: int, d: int, m: int, nb: Neighbours) -> float:
    # + the float error of summing m entries in [0, 1] and dividing (< (m + 1) 2^-52 per entry, twice)
    return _exact.up(block_multiplier(nb, m) * k * d / m + 2.0**-50 * k * d * (m + 1), 2)


def _scale(k: int, d: int, m: int, nb: Neighbours, eps: float) -> None:
    from dpkit.mechanisms import laplace_scale

    laplace_scale(_sens(k, d, m, nb), eps, coords=k * d)


def _block_average(norm: np.ndarray, labels: np.ndarray, m: int, start: np.ndarray, iterations: int) -> np.ndarray:
    """Mean over the ``m`` blocks of each block's sorted Lloyd centroids (empty blocks: the sorted start)."""
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=m)
    ends = np.cumsum(counts)
    acc = np.zeros_like(start)
    empty = lloyd(np.zeros((0, start.shape[1])), start, iterations)
    for i in range(m):
        if counts[i] == 0:
            acc += empty
            continue
        block = norm[order[ends[i] - counts[i]:ends[i]]]
        acc += lloyd(block, start, iterations)
    return np.clip(acc / m, 0.0, 1.0)
