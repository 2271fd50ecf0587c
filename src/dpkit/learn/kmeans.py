"""Differentially private k-means: DPLloyd and EUGkM (Li et al. §5.3.1 and §5.5.1; Su et al. 2016), and the
:class:`KMeans` estimator (with GkM, :func:`dpkit.stability.gkm`, as the weak baseline of Li et al. §8.2).

Both algorithms are pure epsilon-DP under add/remove one record (the default), replace-one, or a privacy unit,
and need **declared** per-feature bounds (values are clamped into them; dpkit never reads bounds from the data).

- :func:`dplloyd` makes each Lloyd step private (PINQ's DPLloyd, Li et al. Algorithm 6): ``iters`` rounds (5 by
  default, equal budgets), each releasing a noisy count and noisy per-feature sums for every cluster.
- :func:`eugkm` publishes one noisy grid synopsis (EUG, ``M = (N epsilon/theta)^(2d/(2+d))`` cells, Li Eq 5.5)
  and runs ordinary weighted k-means on the noisy cell counts: the k-means part is post-processing.

Su et al. 2016 (cited by Li et al. §5.6) found these two the best private k-means methods; GkM
(sample-and-aggregate) is much worse. ``bench/learn/kmeans.py`` checks that ranking on Adult.

Exact arithmetic. The noisy sums are integers: every clamped value is mapped to its centred position in its
feature's range, ``(x - mid)/(hi - lo)`` in ``[-1/2, 1/2]``, and rounded to the grid ``2^-20`` (a quantisation
error of at most ``2^-21`` of the range, far below the noise), so a record contributes at most ``2^19`` units per
feature, the sums are exact int64 numbers whatever ``n``, and the noise comes from the exact discrete Laplace
sampler (:func:`dpkit.mechanisms.discrete_laplace_plan`). Counts are exact integers with the same sampler.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.learn._base import Estimator, check_fitted, columns, feature_bounds, features
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["Clustering", "KMeans", "dplloyd", "eug_cells", "eugkm", "nicv"]

#: Quantisation of the centred, range-normalised values: ``2^QBITS`` steps per feature range.
QBITS = 20
#: Largest number of clusters.
MAX_K = 10_000
#: Largest number of DPLloyd rounds.
MAX_ITERS = 1_000
#: Default largest EUG grid (cells); :func:`eugkm` refuses a grid that cannot fit.
MAX_CELLS = 2**20
#: Rows per block when computing distances (bounds the n x k working memory).
_CHUNK = 32_768


@dataclass(frozen=True)
class Clustering:
    """A released clustering: the ``k x d`` cluster centres (``centers``) and the algorithm that made them.

    ``predict``/``transform`` apply the centres to any rows you pass (post-processing of the release)."""

    centers: np.ndarray = field(repr=False)
    method: str

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distances of each row of ``X`` to every centre (``n x k``)."""
        return np.sqrt(_sq_dist(columns(X, self.centers.shape[1]), self.centers))

    def predict(self, X: Any) -> np.ndarray:
        """Index of the nearest centre for each row of ``X`` (ties: the lowest index)."""
        return _nearest(columns(X, self.centers.shape[1]), self.centers)[0]


# -- small numerical helpers (post-processing or public) ---------------------------------------------------
def _sq_dist(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """``n x k`` squared Euclidean distances (non-negative)."""
    d2 = np.einsum("ij,ij->i", X, X)[:, None] - 2.0 * (X @ C.T) + np.einsum("ij,ij->i", C, C)[None, :]
    return np.maximum(d2, 0.0)


def _nearest(X: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the nearest centre, squared distance to it) for every row, in blocks of rows."""
    n = X.shape[0]
    lab = np.empty(n, dtype=np.int64)
    dist = np.empty(n, dtype=np.float64)
    for s in range(0, n, _CHUNK):
        d2 = _sq_dist(X[s:s + _CHUNK], C)
        lab[s:s + _CHUNK] = np.argmin(d2, axis=1)
        dist[s:s + _CHUNK] = d2[np.arange(d2.shape[0]), lab[s:s + _CHUNK]]
    return lab, dist


def _uniform(rng: RandomSource, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform floats in ``[0, 1)`` (53 random bits each) from dpkit's source."""
    size = int(np.prod(shape))
    return ((rng.uint64(size) >> np.uint64(11)).astype(np.float64) * 2.0**-53).reshape(shape)


def _spread_start(rng: RandomSource, k: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``k`` data-independent starting centres spread out in the box (a sphere-packing idea, Su et al. 2016):
    in range-normalised units, draw candidates uniformly at least ``r`` from the faces and accept one when it
    is at least ``2r`` from every accepted centre; after 100 consecutive rejections, halve ``r`` and start over."""
    d = lo.size
    r = 0.25
    while r > 2.0**-30:
        out = np.empty((k, d))
        got, misses = 0, 0
        while got < k and misses < 100:
            cand = r + _uniform(rng, (d,)) * (1.0 - 2.0 * r)
            if got == 0 or float(np.min(np.sum((out[:got] - cand) ** 2, axis=1))) >= (2.0 * r) ** 2:
                out[got] = cand
                got, misses = got + 1, 0
            else:
                misses += 1
        if got == k:
            return lo + out * (hi - lo)
        r /= 2.0
    return lo + _uniform(rng, (k, d)) * (hi - lo)  # pragma: no cover - k far beyond any packing


def _quantise(X: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Centred, range-normalised values on the grid ``2^-QBITS``, as int64 in ``[-2^(QBITS-1), 2^(QBITS-1)]``."""
    half = 2 ** (QBITS - 1)
    mid = lo + (hi - lo) / 2.0
    q = np.rint((X - mid) / (hi - lo) * 2.0**QBITS)
    return np.clip(q, -half, half).astype(np.int64)


def _cluster_sums(q: np.ndarray, lab: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact integer counts (``k``) and per-feature sums (``k x d``) of ``q`` over the clusters ``lab``."""
    counts = np.bincount(lab, minlength=k).astype(np.int64)
    sums = np.zeros((k, q.shape[1]), dtype=np.int64)
    order = np.argsort(lab, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    has = counts > 0
    if np.any(has):
        sums[has] = np.add.reduceat(q[order], starts[has], axis=0)
    return counts, sums


def _multiplier(nb: Neighbours) -> int:
    """How many records' worth one neighbour step changes the counts and sums: ``max_rows`` of a privacy unit
    (else 1), doubled under replace-one (one record leaves one cluster and enters another)."""
    return unit_rows(nb) * (2 if is_replace(nb) else 1)


def _start(init: Any, k: int, lo: np.ndarray, hi: np.ndarray) -> tuple[str, np.ndarray | None]:
    """Validate ``init``: ``"uniform"``, ``"spread"`` or a public ``k x d`` array (clamped into the bounds)."""
    if isinstance(init, str):
        return check.choice("init", init, ("uniform", "spread", "eugkm")), None
    if init is None:
        raise WrongType("init", "'spread', 'uniform', 'eugkm' or a k x d array of public starting centres")
    try:
        arr = np.asarray(init, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise WrongType("init", "'spread', 'uniform', 'eugkm' or a k x d array of public starting centres") from None
    if arr.shape != (k, lo.size):
        raise InvalidParameter("init", "must have shape (k, d)")
    if not np.all(np.isfinite(arr)):
        raise InvalidParameter("init", "must be finite")
    return "given", np.clip(arr, lo, hi)


def _draw_start(kind: str, given: np.ndarray | None, rng: RandomSource, k: int, lo: np.ndarray,
                hi: np.ndarray) -> np.ndarray:
    if given is not None:
        return given.copy()
    if kind == "spread":
        return _spread_start(rng, k, lo, hi)
    return lo + _uniform(rng, (k, lo.size)) * (hi - lo)


def _schedule(schedule: Any, iters: int) -> tuple[str, list[float]]:
    """Public round weights: ``"equal"`` (1, ..., 1), ``"increasing"`` (1, 2, ..., t) or ``t`` positive weights."""
    if isinstance(schedule, str):
        name = check.choice("schedule", schedule, ("equal", "increasing"))
        return name, [1.0] * iters if name == "equal" else [float(i + 1) for i in range(iters)]
    if schedule is None:
        raise WrongType("schedule", "'equal', 'increasing' or a sequence of iters positive weights")
    try:
        items = [float(w) for w in schedule]
    except (TypeError, ValueError):
        raise WrongType("schedule", "'equal', 'increasing' or a sequence of iters positive weights") from None
    if len(items) != iters:
        raise InvalidParameter("schedule", "must give one weight per round (iters)")
    if not all(np.isfinite(w) and w > 0 for w in items):
        raise InvalidParameter("schedule", "weights must be finite and > 0")
    return "weights", items


# -- DPLloyd -------------------------------------------------------------------------------------------------
def dplloyd(X: ArrayLike, k: int, epsilon: float, *, bounds: Any = None, iters: int = 5, schedule: Any = "equal",
            init: Any = "spread", init_share: float = 0.3, count_share: float | None = None, empty: str = "redraw",
            neighbours: Neighbours | None = None, accountant: Accountant | None = None,
            rng: RandomSource | None = None, description: str = "") -> Release:
    """DPLloyd: ``k`` cluster centres by ``iters`` noisy Lloyd steps (PINQ; Li et al. Algorithm 6); pure epsilon-DP.

    Parameters
    ----------
    X:
        ``n x d`` private records (finite), clamped into ``bounds``.
    k:
        The number of clusters (1 to 10,000).
    epsilon:
        The total privacy parameter, > 0.
    bounds:
        **Required**: public feature bounds, one pair ``(lo, hi)`` for every feature or one pair per feature.
    iters:
        The number of rounds ``t`` (default 5, PINQ's choice, which Li et al. found to work across datasets; many
        more rounds, as in Mohan et al. 2012's 20-200, starve each round of budget).
    schedule:
        How ``epsilon`` is split over the rounds: ``"equal"`` (default), ``"increasing"`` (round ``i`` gets a
        share proportional to ``i``: less noise late, when the centres are close to converging) or a sequence of
        ``iters`` positive weights.
    init:
        The starting centres, **data-independent**: ``"spread"`` (default: points drawn uniformly in the box but
        kept apart, a sphere-packing start after Su et al. 2016), ``"uniform"`` (``k`` points drawn uniformly in
        the box) -- both from dpkit's random source, after the charge -- or a public ``k x d`` array (clamped
        into the bounds) -- or ``"eugkm"``: the centres of :func:`eugkm` run with ``init_share`` of ``epsilon``
        (a hybrid after Su et al. 2016, who combine EUGkM and DPLloyd; the split 0.3 and ``iters=3`` that
        :class:`KMeans` uses with it were chosen on seeded synthetic mixtures, not on the benchmark data).
    init_share:
        The share of ``epsilon`` spent on the ``"eugkm"`` start (default 0.3; ignored otherwise).
    count_share:
        The share of each round's budget spent on the counts (the rest on the sums). Default ``None``: Li's
        choice, one noise scale for every count and sum, i.e. ``1/(1 + d/2)`` (see Guarantee).
    empty:
        What a cluster whose noisy count is ``<= 0`` does: ``"redraw"`` a fresh uniform point in the box (default:
        public randomness, a new chance to capture records) or ``"keep"`` its previous centre.
    neighbours:
        The neighbour relation: add/remove one record (default, or the accountant's), replace-one, or a
        privacy unit (its ``max_rows``).
    accountant, rng, description:
        The accountant charged, the random source (default the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP under the neighbour relation (add/remove one record by default). Proof: in every round
    the clusters are a partition of the records fixed by the previous round's *released* centres, so one record
    lies in exactly one cluster (parallel composition across clusters). Values are centred on the bound
    midpoints and normalised by the ranges, ``u = (x - mid)/(hi - lo)`` in ``[-1/2, 1/2]^d``: one record changes
    one cluster's count by 1 and its ``d`` sums by at most ``d/2`` in L1 (``d 2^19`` quantised units) -- the
    book's ``(d r + 1)`` per round for ``[-r, r]^d`` with ``r = 1/2``; centring halves the ``d`` of the
    uncentred ``[0, 1]^d``. Counts get discrete Laplace noise for ``epsilon_c`` and sums for ``epsilon_s`` of the
    round's ``epsilon_r = epsilon_c + epsilon_s``; the rounds compose sequentially (``sum epsilon_r <= epsilon``,
    exact in rationals). Under replace-one the sensitivities double (the record can leave one cluster and enter
    another); under a privacy unit they are ``max_rows`` times larger. The starting centres and redraws are
    data-independent; the division, clamping and guards are post-processing. With ``init="eugkm"`` the start is
    :func:`eugkm`'s release for ``epsilon_0 = init_share * epsilon`` (its own guarantee) and the rounds share
    the rest: sequential composition.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness (all rounds, counts and sums, and the ``"eugkm"``
    start; every intermediate centre is covered, not only the last).

    Output law
    ----------
    Round ``i`` (budget ``epsilon_r`` from ``schedule``; ``epsilon_c = count_share * epsilon_r``, default
    ``epsilon_r/(1 + d/2)``): assign every clamped record to its nearest current centre (ties: the lowest
    index); release ``count_j + L`` with ``L`` discrete Laplace of scale ``m/epsilon_c`` and, per feature,
    ``S_jl + L'`` with ``S_jl`` the exact sum of the quantised ``u`` (units ``2^-20``) and ``L'`` discrete
    Laplace of scale ``m d 2^19/epsilon_s`` (``m`` = 1, 2 under replace, ``max_rows`` for a unit). The new
    centre is ``mid + (hi - lo) * noisy_sum 2^-20 / noisy_count``, clamped into the bounds; a cluster with
    ``noisy_count <= 0`` gets a uniform point (``empty="redraw"``) or keeps its centre (``"keep"``).
    ``Release.value`` is a :class:`Clustering` (``centers``: the last round's ``k x d`` centres);
    ``parts``: ``init`` (starting centres), ``counts`` (``t x k`` noisy counts), ``sums`` (``t x k x d`` noisy
    quantised sums), ``centers`` (each round's centres), ``epsilon_rounds``.

    Error
    -----
    No interval is stated (the partition itself depends on the noise). In a round, a cluster of ``c`` records
    gets a centre error per feature of about ``(hi - lo) sqrt(2) m d/(2 epsilon_s c)`` from the sums plus its
    offset from the midpoint times ``sqrt(2) m/(epsilon_c c)`` from the count: small clusters (and small
    ``epsilon``) dominate. Quantisation adds at most ``2^-21`` of the range per feature to each sum term. The
    start is random, so a centre that starts far from the data may capture no records (then it is redrawn or
    stays put): Lloyd's local-optimum error comes on top, and 5 rounds may stop short of convergence.

    Errata
    ------
    Li et al. (after Dwork 2011) mention a geometric schedule ``epsilon/2, epsilon/4, ...``: it puts the most
    noise in the last rounds, where the centres should be most precise. dpkit's default is the equal split; a
    non-equal split should *increase* (``schedule="increasing"``), which needs ``t`` fixed in advance (tested in
    ``tests/learn/test_kmeans.py``). The book's algorithm divides by a noisy count that may be ``<= 0``; dpkit
    guards it (``empty``).

    References
    ----------
    McSherry 2009 (PINQ); Li, Lyu, Su, Yang, *Differential Privacy: From Theory to Practice*, §5.3.1; Su, Cao,
    Li, Bertino, Jin, *Differentially private k-means clustering*, CODASPY 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.noise import deterministic_source
    >>> X = np.array([[0.1, 0.1], [0.2, 0.1], [0.1, 0.2], [0.9, 0.9], [0.8, 0.9], [0.9, 0.8]] * 500)
    >>> r = dplloyd(X, 2, 1.0, bounds=(0.0, 1.0), init=[[0.3, 0.3], [0.7, 0.7]], rng=deterministic_source(3))
    >>> np.round(r.value.centers, 1).tolist()
    [[0.1, 0.1], [0.9, 0.9]]
    """
    plan = _dplloyd_plan(X, k, epsilon, bounds, iters, schedule, init, init_share, count_share, empty, neighbours,
                         accountant)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _dplloyd_plan(X: Any, k: Any, epsilon: Any, bounds: Any, iters: Any, schedule: Any, init: Any, init_share: Any,
                  count_share: Any, empty: Any, neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    nb = resolve_neighbours(neighbours, accountant)
    data, info = features(X, bounds=bounds)
    n, d = data.shape
    box = info["bounds"]
    lo, hi = box[:, 0].copy(), box[:, 1].copy()
    k = check.size_limit("k", k, MAX_K, minimum=1)
    eps = check.epsilon(epsilon)
    iters = check.size_limit("iters", iters, MAX_ITERS, minimum=1)
    sched_name, weights = _schedule(schedule, iters)
    kind, given = _start(init, k, lo, hi)
    if count_share is None:
        share = Fraction(1) / (1 + Fraction(d, 2))
    else:
        share = Fraction(check.probability("count_share", count_share))
    empty = check.choice("empty", empty, ("keep", "redraw"))
    eug_plan: Plan | None = None
    eps_lloyd = eps
    if kind == "eugkm":
        ishare = check.probability("init_share", init_share)
        eps_init, eps_lloyd = _exact.split_budget(eps, (ishare, 1.0 - ishare), name="init_share",
                                                  total_name="epsilon")
        eug_plan = _eugkm_plan(data, k, eps_init, box, None, 10.0, 0.05, MAX_CELLS, "auto", 5, 50, nb, None)
    eps_rounds = _exact.split_budget(eps_lloyd, weights, name="schedule", total_name="epsilon")
    mult = _multiplier(nb)
    sum_sens = mult * d * 2 ** (QBITS - 1)
    splits = [_exact.split_budget(e, (float(share), float(1 - share)), name="count_share", total_name="epsilon")
              for e in eps_rounds]
    from dpkit.mechanisms import discrete_laplace_scale

    for e_c, e_s in splits:  # refuse a scale the samplers cannot take before the charge
        discrete_laplace_scale(mult, e_c)
        discrete_laplace_scale(sum_sens, e_s)
    q = _quantise(data, lo, hi)
    params: dict[str, Any] = {"epsilon": eps, "k": k, "d": int(d), "iters": iters, "schedule": sched_name,
                              "init": kind, "count_share": float(share), "empty": empty,
                              "epsilon_rounds_total": eps_lloyd,
                              "bounds": box.tolist(), "sensitivity_counts": mult, "sensitivity_sums": sum_sens,
                              "quantisation": 2.0**-QBITS, "neighbours": nb.describe()}

    def draw(rng: RandomSource) -> Outcome:
        from dpkit.mechanisms import discrete_laplace_plan

        if eug_plan is not None:
            centres = np.array(eug_plan.sample(rng).value.centers, dtype=np.float64)
        else:
            centres = _draw_start(kind, given, rng, k, lo, hi)
        parts: dict[str, Any] = {"init": centres.copy(), "epsilon_rounds": list(eps_rounds)}
        all_counts, all_sums, all_centres = [], [], []
        for e_c, e_s in splits:
            lab, _ = _nearest(data, centres)
            counts, sums = _cluster_sums(q, lab, k)
            noisy_c = np.asarray(discrete_laplace_plan(counts, mult, e_c).sample(rng).value, dtype=np.int64)
            noisy_s = np.asarray(discrete_laplace_plan(sums.ravel(), sum_sens, e_s).sample(rng).value,
                                 dtype=np.int64).reshape(k, d)
            ok = noisy_c > 0
            new = centres.copy()
            if np.any(ok):
                mean_u = noisy_s[ok].astype(np.float64) * 2.0**-QBITS / noisy_c[ok, None].astype(np.float64)
                new[ok] = np.clip(lo + (hi - lo) / 2.0 + mean_u * (hi - lo), lo, hi)
            if empty == "redraw" and not np.all(ok):
                bad = np.flatnonzero(~ok)
                new[bad] = lo + _uniform(rng, (bad.size, d)) * (hi - lo)
            centres = new
            all_counts.append(noisy_c)
            all_sums.append(noisy_s)
            all_centres.append(centres.copy())
        parts.update(counts=np.array(all_counts), sums=np.array(all_sums), centers=np.array(all_centres))
        return Outcome(Clustering(centers=centres, method="dplloyd"), parts=parts)

    del n
    return Plan(mechanism="dplloyd", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


# -- EUGkM ---------------------------------------------------------------------------------------------------
def _int_root(m: int, d: int) -> int:
    """The largest integer ``r`` with ``r^d <= m`` (exact)."""
    r = max(1, round(m ** (1.0 / d)))
    while r**d > m:
        r -= 1
    while (r + 1) ** d <= m:
        r += 1
    return r


def eug_cells(n: float, epsilon: float, d: int, theta: float = 10.0) -> int:
    """EUG's cells per feature, ``m = round((n epsilon/theta)^(2/(2+d)))`` (at least 1), so that the grid has
    ``M = m^d ~ (n epsilon/theta)^(2d/(2+d))`` cells (Li et al. Eq 5.5; Su et al. 2016). Public arithmetic on
    whatever ``n`` you pass (:func:`eugkm` passes a noisy count)."""
    n = check.positive("n", n)
    epsilon = check.epsilon(epsilon)
    d = check.integer("d", d, minimum=1)
    theta = check.positive("theta", theta)
    return max(1, round((n * epsilon / theta) ** (2.0 / (2.0 + d))))


def eugkm(X: ArrayLike, k: int, epsilon: float, *, bounds: Any = None, cells: int | None = None,
          theta: float = 10.0, count_share: float = 0.05, max_cells: int = MAX_CELLS, floor: Any = "auto",
          restarts: int = 5, kmeans_iters: int = 50, neighbours: Neighbours | None = None,
          accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """EUGkM: ``k`` cluster centres by weighted k-means on a noisy uniform grid (EUG, Li et al. §5.5.1); pure DP.

    Parameters
    ----------
    X:
        ``n x d`` private records (finite), clamped into ``bounds``.
    k:
        The number of clusters (1 to 10,000).
    epsilon:
        The total privacy parameter, > 0.
    bounds:
        **Required**: public feature bounds, one pair ``(lo, hi)`` for every feature or one pair per feature.
    cells:
        Public cells per feature. Default ``None``: EUG's rule ``m = round((N epsilon_h/theta)^(2/(2+d)))``
        (:func:`eug_cells`) with ``N`` a **noisy count** paid from ``count_share`` of ``epsilon`` (``N`` is private
        under add/remove), capped so that ``m^d <= max_cells``. Given, the whole ``epsilon`` goes to the grid.
    theta:
        EUG's constant (10, as in Su et al. 2016).
    count_share:
        The share of ``epsilon`` for the noisy count when ``cells`` is ``None`` (default 0.05).
    max_cells:
        The largest grid allowed (default ``2^20``). A grid of even 2 cells per feature that exceeds it is refused
        before any charge (:class:`~dpkit.core.errors.InvalidParameter` naming ``bounds``: EUG does not scale to
        many features; use :func:`dplloyd`), as is a given ``cells`` whose grid exceeds it.
    floor:
        Post-processing of the noisy cell counts before k-means: ``"auto"`` (default) drops the cells whose noisy
        count is at most ``(b/2) ln M`` (``b`` the noise scale, ``M`` the number of cells: an empty cell passes
        with probability ``1/(2 sqrt M)``, so about ``sqrt(M)/2`` spurious cells survive); a number ``tau >= 0``
        drops the counts ``<= tau``; ``"zero"`` drops the counts ``<= 0``; ``"none"`` keeps every cell with its
        signed noisy count (unbiased, slower: all ``M`` cells enter k-means).
    restarts, kmeans_iters:
        Post-processing: weighted k-means on the synopsis from ``restarts`` k-means++ starts (randomness from
        dpkit's source), at most ``kmeans_iters`` Lloyd steps each (stopping when no cell changes cluster); the
        lowest synopsis inertia wins.
    neighbours, accountant, rng, description:
        The neighbour relation (add/remove by default, replace-one, or a privacy unit), the accountant charged,
        the random source, the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP under the neighbour relation. The grid (bounds and ``m``) is public or a function of the
    released noisy count; one record changes one cell count by 1 (``m`` = 2 cells by 1 each under replace-one,
    ``max_rows`` under a privacy unit), so the histogram with discrete Laplace noise of scale
    ``m/epsilon_h`` is ``epsilon_h``-DP; the count is ``epsilon_n``-DP; ``epsilon_n + epsilon_h <= epsilon``
    (sequential composition, exact in rationals). Under replace-one ``N`` is public but still estimated the
    same way. Everything after the noisy counts (weighted k-means) is post-processing.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness (noisy count and grid).

    Output law
    ----------
    ``N~ = n + L`` (discrete Laplace, scale ``m_nb/epsilon_n``), ``m = min(eug_cells(max(N~, 1), epsilon_h, d,
    theta), floor(max_cells^(1/d)))`` (or ``cells``); every record falls in cell ``floor((x - lo) m/(hi - lo))``
    (the top edge in the last cell); each of the ``m^d`` cell counts gets independent discrete Laplace noise of
    scale ``m_nb/epsilon_h``; the cells that ``floor`` keeps enter weighted k-means (points the cell centres,
    weights their noisy counts; a cluster of weight ``<= 0`` keeps its centre; centres clamped into the box),
    post-processing. ``Release.value`` is a :class:`Clustering`;
    ``parts``: ``cells`` (``m``), ``noisy_count`` (if drawn), ``grid`` (the ``m^d`` noisy counts, C order),
    ``synopsis_inertia``.

    Error
    -----
    No interval is stated. Two errors compete (EUG's rule balances them): the cell width ``(hi - lo)/m`` (every
    record is moved to its cell centre, at most half a cell per feature) and the noise, about
    ``sqrt(2) m_nb/epsilon_h`` per cell over ``m^d`` cells. Merely clipping negative counts at zero
    (``floor="zero"``) leaves a positive mass of about ``m^d m_nb/(2 epsilon_h)`` spread uniformly over the
    box, which pulls the centres towards its middle when the grid is large relative to ``n epsilon`` (on Adult's
    5 numeric features it made EUGkM's NICV 1.6 times worse at epsilon = 1); the default threshold removes
    almost all of it and drops small true cells, a bias of its own. The grid grows like ``m^d``: for many
    features use :func:`dplloyd`.

    References
    ----------
    Qardaji, Yang, Li 2013 (UG); Su, Cao, Li, Bertino, Jin, CODASPY 2016 (EUG, EUGkM); Li et al. §5.5.1, Eq 5.5.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.noise import deterministic_source
    >>> X = np.array([[0.1, 0.1], [0.2, 0.1], [0.1, 0.2], [0.9, 0.9], [0.8, 0.9], [0.9, 0.8]] * 500)
    >>> r = eugkm(X, 2, 1.0, bounds=(0.0, 1.0), rng=deterministic_source(3))
    >>> sorted(np.round(r.value.centers, 1).tolist())
    [[0.1, 0.1], [0.9, 0.9]]
    """
    plan = _eugkm_plan(X, k, epsilon, bounds, cells, theta, count_share, max_cells, floor, restarts, kmeans_iters,
                       neighbours, accountant)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _eugkm_plan(X: Any, k: Any, epsilon: Any, bounds: Any, cells: Any, theta: Any, count_share: Any,
                max_cells: Any, floor: Any, restarts: Any, kmeans_iters: Any, neighbours: Neighbours | None,
                accountant: Accountant | None) -> Plan:
    nb = resolve_neighbours(neighbours, accountant)
    data, info = features(X, bounds=bounds)
    n, d = data.shape
    box = info["bounds"]
    lo, hi = box[:, 0].copy(), box[:, 1].copy()
    k = check.size_limit("k", k, MAX_K, minimum=1)
    eps = check.epsilon(epsilon)
    theta = check.positive("theta", theta)
    max_cells = check.size_limit("max_cells", max_cells, 2**26, minimum=1)
    if isinstance(floor, str):
        floor_kind: str = check.choice("floor", floor, ("auto", "zero", "none"))
        tau = 0.0
    else:
        floor_kind = "tau"
        tau = check.nonnegative("floor", floor)
    restarts = check.size_limit("restarts", restarts, 1_000, minimum=1)
    kmeans_iters = check.size_limit("kmeans_iters", kmeans_iters, 100_000, minimum=1)
    if cells is not None:
        m_fixed: int | None = check.size_limit("cells", cells, max_cells, minimum=1)
        if m_fixed is not None and m_fixed ** d > max_cells:
            raise InvalidParameter("cells", f"gives a grid of more than max_cells = {max_cells} cells "
                                   f"(cells^d with d = {d}); use fewer cells or dplloyd")
        eps_n, eps_h = None, eps
    else:
        m_fixed = None
        if d >= 64 or 2**d > max_cells:
            raise InvalidParameter("bounds", f"{d} features need a grid of at least 2^{d} cells, more than "
                                   f"max_cells = {max_cells}; EUG does not scale to many features: use dplloyd")
        share = check.probability("count_share", count_share)
        eps_n, eps_h = _exact.split_budget(eps, (share, 1.0 - share), name="count_share", total_name="epsilon")
    m_cap = _int_root(max_cells, d)
    mult = _multiplier(nb)
    from dpkit.mechanisms import discrete_laplace_scale

    discrete_laplace_scale(mult, eps_h)
    if eps_n is not None:
        discrete_laplace_scale(mult, eps_n)
    params: dict[str, Any] = {"epsilon": eps, "k": k, "d": int(d), "theta": theta, "max_cells": max_cells,
                              "cells": m_fixed if m_fixed is not None else "eug", "epsilon_grid": eps_h,
                              "floor": floor_kind if floor_kind != "tau" else tau,
                              "restarts": restarts, "kmeans_iters": kmeans_iters, "bounds": box.tolist(),
                              "sensitivity": mult, "neighbours": nb.describe()}
    if eps_n is not None:
        params["epsilon_count"] = eps_n

    def draw(rng: RandomSource) -> Outcome:
        from dpkit.mechanisms import discrete_laplace_plan

        parts: dict[str, Any] = {}
        if m_fixed is None:
            assert eps_n is not None
            noisy_n = int(discrete_laplace_plan(int(n), mult, eps_n).sample(rng).value)
            parts["noisy_count"] = noisy_n
            m = min(eug_cells(max(noisy_n, 1), eps_h, d, theta), m_cap)
        else:
            m = m_fixed
        parts["cells"] = m
        idx = np.clip(np.floor((data - lo) / (hi - lo) * m), 0, m - 1).astype(np.int64)
        flat = np.ravel_multi_index(tuple(idx.T), (m,) * d) if d > 1 else idx[:, 0]
        counts = np.bincount(flat, minlength=m**d).astype(np.int64)
        step = discrete_laplace_plan(counts, mult, eps_h)
        noisy = np.asarray(step.sample(rng).value, dtype=np.int64)
        parts["grid"] = noisy
        if floor_kind == "none":
            keep = np.arange(noisy.size)
        else:
            assert step.scale is not None
            cut = {"auto": 0.5 * step.scale * np.log(max(noisy.size, 2)), "zero": 0.0, "tau": tau}[floor_kind]
            keep = np.flatnonzero(noisy > cut)
        weights = noisy[keep].astype(np.float64)
        width = (hi - lo) / m
        if keep.size and float(np.sum(weights)) > 0:
            pos = np.stack(np.unravel_index(keep, (m,) * d), axis=1).astype(np.float64)
            points = lo + (pos + 0.5) * width
            centres, inertia = _weighted_kmeans(points, weights, k, restarts, kmeans_iters, rng)
        else:  # nothing survived the noise: uniform centres (public randomness)
            centres, inertia = lo + _uniform(rng, (k, d)) * (hi - lo), 0.0
        parts["synopsis_inertia"] = inertia
        return Outcome(Clustering(centers=centres, method="eugkm"), parts=parts)

    return Plan(mechanism="eugkm", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def _weighted_kmeans(points: np.ndarray, weights: np.ndarray, k: int, restarts: int, iters: int,
                     rng: RandomSource) -> tuple[np.ndarray, float]:
    """Weighted Lloyd from ``restarts`` weighted k-means++ starts (post-processing of released counts); the
    centres with the lowest weighted inertia. Weights may be negative (signed noisy counts): seeding uses the
    positive parts; a cluster of total weight ``<= 0`` keeps its centre; centres stay in the points' box.
    Random choices from ``rng``."""
    best, best_inertia = None, np.inf
    lo, hi = points.min(axis=0), points.max(axis=0)
    seed_w = np.maximum(weights, 0.0)
    total = float(weights.sum())
    for _ in range(restarts):
        c = _kmeanspp(points, seed_w, k, rng)
        old = None
        for _ in range(iters):
            lab, _ = _nearest(points, c)
            if old is not None and np.array_equal(lab, old):
                break
            old = lab
            wsum = np.bincount(lab, weights=weights, minlength=k)
            has = wsum > 0
            for j in range(points.shape[1]):
                col = np.bincount(lab, weights=weights * points[:, j], minlength=k)
                c[has, j] = np.clip(col[has] / wsum[has], lo[j], hi[j])
        _, dist = _nearest(points, c)
        inertia = float(np.dot(weights, dist)) / total
        if inertia < best_inertia:
            best, best_inertia = c.copy(), inertia
    assert best is not None
    return best, best_inertia


def _kmeanspp(points: np.ndarray, weights: np.ndarray, k: int, rng: RandomSource) -> np.ndarray:
    """Weighted k-means++ seeding: the first centre with probability proportional to the weight, each next one
    proportional to weight times squared distance to the nearest chosen centre."""
    p = points.shape[0]
    chosen = np.empty((k, points.shape[1]))
    cum = np.cumsum(weights)
    i = int(np.searchsorted(cum, _uniform(rng, (1,))[0] * cum[-1], side="right"))
    chosen[0] = points[min(i, p - 1)]
    best = _sq_dist(points, chosen[:1])[:, 0]
    for j in range(1, k):
        score = np.cumsum(weights * best)
        if score[-1] <= 0:  # every weighted point is already a centre: repeat one
            chosen[j] = chosen[j - 1]
            continue
        i = int(np.searchsorted(score, _uniform(rng, (1,))[0] * score[-1], side="right"))
        chosen[j] = points[min(i, p - 1)]
        best = np.minimum(best, _sq_dist(points, chosen[j:j + 1])[:, 0])
    return chosen


# -- the estimator -------------------------------------------------------------------------------------------
class KMeans(Estimator):
    """Differentially private k-means as a scikit-learn-style clusterer (``fit``, ``predict``, ``transform``,
    ``score``).

    ``method``: ``"auto"`` (default: ``"hybrid"`` when EUG's grid fits, i.e. ``2^d <= 2^20`` -- ``d`` is public --
    else ``"dplloyd"``), ``"hybrid"`` (:func:`dplloyd` with ``init="eugkm"``: EUGkM with 30% of ``epsilon``
    gives the start, then ``iters`` = 3 DPLloyd rounds), ``"dplloyd"`` (:func:`dplloyd`, Li et al.'s
    Algorithm 6: ``iters`` = 5 rounds from ``init``), ``"eugkm"`` (:func:`eugkm`) or ``"gkm"``
    (:func:`dpkit.stability.gkm`, sample-and-aggregate: the weak baseline of Li et al. §8.2, kept for
    comparison; its centres are clamped into the bounds, post-processing). ``bounds`` (public per-feature
    bounds) are required; ``epsilon`` is the whole fit's budget, charged to ``accountant`` (shared by clones).
    ``iters`` is the number of DPLloyd rounds (``None``: 3 for the hybrid, 5 for DPLloyd); ``init`` DPLloyd's
    (and GkM's, when an array) start; ``cells`` EUGkM's grid (``None``: EUG's rule).

    After ``fit``: ``cluster_centers_`` (``k x d``), ``n_features_in_``, ``release_`` (the
    :class:`~dpkit.mechanisms.Release`, with its receipt). There is deliberately **no** ``labels_`` or
    ``inertia_``: the training records' assignments and the training inertia are functions of the private data
    that the release does not cover. ``score(X)`` computes ``-sum_x min_j ||x - c_j||^2`` (scikit-learn's sign:
    higher is better; Li et al.'s NICV is ``-score(X)/len(X)``) on the rows you pass: if they are private, the
    number is not private.
    """

    _estimator_type = "clusterer"

    def __init__(self, n_clusters: int = 8, *, epsilon: float = 1.0, bounds: Any = None, method: str = "auto",
                 iters: int | None = None, init: Any = "spread", cells: int | None = None,
                 accountant: Accountant | None = None, rng: RandomSource | None = None) -> None:
        self.n_clusters = n_clusters
        self.epsilon = epsilon
        self.bounds = bounds
        self.method = method
        self.iters = iters
        self.init = init
        self.cells = cells
        self.accountant = accountant
        self.rng = rng

    def __sklearn_tags__(self) -> Any:  # pragma: no cover - exercised by the scikit-learn tests
        from sklearn.utils import TransformerTags

        tags = super().__sklearn_tags__()
        tags.transformer_tags = TransformerTags()
        return tags

    def fit(self, X: Any, y: Any = None) -> KMeans:
        """Fit the centres on ``X`` (private; ``y`` is ignored), charging ``epsilon`` once."""
        method = check.choice("method", self.method, ("auto", "hybrid", "dplloyd", "eugkm", "gkm"))
        if method == "auto":
            try:
                d = int(np.shape(X)[1]) if np.ndim(X) == 2 else 0
            except Exception:  # ragged or odd input: dplloyd's validation names it
                d = 0
            method = "hybrid" if 1 <= d <= 20 else "dplloyd"
        if method in ("hybrid", "dplloyd"):
            hybrid = method == "hybrid"
            iters = self.iters if self.iters is not None else (3 if hybrid else 5)
            rel = dplloyd(X, self.n_clusters, self.epsilon, bounds=self.bounds, iters=iters,
                          init="eugkm" if hybrid else self.init, accountant=self.accountant, rng=self.rng)
            centres = rel.value.centers
        elif method == "eugkm":
            rel = eugkm(X, self.n_clusters, self.epsilon, bounds=self.bounds, cells=self.cells,
                        accountant=self.accountant, rng=self.rng)
            centres = rel.value.centers
        else:
            from dpkit.stability import gkm

            arr = np.asarray(X) if not hasattr(X, "to_numpy") else X.to_numpy()
            d = arr.shape[1] if arr.ndim == 2 else 1
            box = feature_bounds(self.bounds, d)
            start = None if isinstance(self.init, str) else self.init
            box_pair: Any = (box[:, 0].tolist(), box[:, 1].tolist())  # gkm takes per-coordinate sequences
            rel = gkm(arr, self.n_clusters, box_pair, self.epsilon, init=start,
                      accountant=self.accountant, rng=self.rng)
            centres = np.clip(np.asarray(rel.value, dtype=np.float64).reshape(self.n_clusters, d), box[:, 0],
                              box[:, 1])
        self.cluster_centers_ = np.asarray(centres, dtype=np.float64)
        self.n_features_in_ = int(self.cluster_centers_.shape[1])
        self.release_ = rel
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Euclidean distances of each row to every centre (post-processing of the release)."""
        check_fitted(self, "cluster_centers_")
        return np.sqrt(_sq_dist(columns(X, self.n_features_in_), self.cluster_centers_))

    def fit_transform(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X).transform(X)``: the distances of the (private) training rows, for their owner only."""
        return self.fit(X).transform(X)

    def predict(self, X: Any) -> np.ndarray:
        """Index of the nearest centre for each row (ties: the lowest index)."""
        check_fitted(self, "cluster_centers_")
        return _nearest(columns(X, self.n_features_in_), self.cluster_centers_)[0]

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """``fit(X).predict(X)``: the training rows' clusters (a function of private data: for their owner only,
        not covered by the release)."""
        return self.fit(X).predict(X)

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """``-sum_x w_x min_j ||x - c_j||^2`` over the rows you pass (scikit-learn's sign; NICV =
        ``-score/len(X)``). Not private when ``X`` is private data."""
        check_fitted(self, "cluster_centers_")
        _, dist = _nearest(columns(X, self.n_features_in_), self.cluster_centers_)
        if sample_weight is None:
            return -float(np.sum(dist))
        w = check.finite_array("sample_weight", sample_weight, ndim=1)
        if w.shape != dist.shape:
            raise InvalidData("sample_weight", "must have one weight per row of X")
        return -float(np.dot(w, dist))


def nicv(X: Any, centers: Any) -> float:
    """Li et al.'s NICV, ``(1/N) sum_x min_j ||x - o_j||^2`` (Eq 5.1), of the rows ``X`` against ``centers``:
    an evaluation tool, not private when ``X`` is private."""
    c = np.asarray(centers, dtype=np.float64)
    if c.ndim != 2:
        raise InvalidParameter("centers", "must be a k x d array")
    _, dist = _nearest(columns(X, c.shape[1]), c)
    return float(np.mean(dist))
