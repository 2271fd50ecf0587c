"""P-HPartition: private hierarchical (recursive) partitioning of a 1-D histogram by the exponential
mechanism (Ács, Castelluccia & Chen, ICDM 2012; Li et al. §4.3.3–4.3.4), then noisy bucket counts.

The seed (Li et al.) only says that P-HPartition "uses the exponential mechanism to iteratively bisect
the data domain" with a quality that "considers both the reconstruction error (the non-uniformity error)
and noise error". The exact definition dpkit implements is stated in :func:`p_hpartition`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.histograms.dawa import floor_units, guard_size
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["p_hpartition"]

BITS = 12  # scores live on the lattice 2^-12 (exact integers in those units)


def prefix_devs(seg: np.ndarray) -> np.ndarray:
    """``p dev(seg[:p])`` for ``p = 1..n`` (exact int64): ``sum_{l<p} |p x_l - S_p|``.

    With ``c_p = #{l < p : p x_l < S_p}`` and ``s_p`` the sum of those ``x_l``, the deviation is
    ``2 (S_p c_p - p s_p)`` (the signed deviations sum to zero). ``c_p, s_p`` are prefix dominance counts,
    computed in ``O(n sqrt n)`` vectorised work with sorted blocks of ``~sqrt n`` bins: whole blocks before
    ``p`` by binary search, the partial block directly. For integers, ``p x < S`` iff ``x <= (S - 1) // p``.
    """
    n = seg.size
    s = np.cumsum(seg)
    p = np.arange(1, n + 1, dtype=np.int64)
    if n <= 256:  # small: the direct O(n^2) matrix is cheaper than the blocks
        mat = np.abs(p[:, None] * seg[None, :] - s[:, None])
        return np.where(np.arange(n)[None, :] < p[:, None], mat, 0).sum(axis=1)
    tau = (s - 1) // p  # x_l < S_p / p  <=>  x_l <= tau_p
    cnt = np.zeros(n, dtype=np.int64)
    tot = np.zeros(n, dtype=np.int64)
    width = max(1, int(np.sqrt(n)))
    for a in range(0, n, width):
        blk = np.sort(seg[a:a + width])
        csum = np.concatenate([[0], np.cumsum(blk)])
        after = p > a + blk.size  # prefixes that contain the whole block
        if after.any():
            k = np.searchsorted(blk, tau[after], side="right")
            cnt[after] += k
            tot[after] += csum[k]
        inside = (p > a) & ~after  # prefixes ending inside this block
        if inside.any():
            q = p[inside]
            vals = seg[a:a + width][None, :]
            use = (np.arange(a, a + blk.size)[None, :] < q[:, None]) & (vals <= tau[inside][:, None])
            cnt[inside] += use.sum(axis=1)
            tot[inside] += np.where(use, vals, 0).sum(axis=1)
    return 2 * (s * cnt - p * tot)


def split_scores(seg: np.ndarray, bucket_units: int, bits: int = BITS) -> np.ndarray:
    """Exponential-mechanism scores (exact integers, lattice units ``2^-bits``) for one interval ``seg``
    of ``n >= 2`` bins: entry ``i`` for ``i = 1..n-1`` splits into ``seg[:i]`` and ``seg[i:]`` with score
    ``-(sae(left) + sae(right) + 2 b)``; entry ``0`` keeps the interval, ``-(sae(seg) + b)``. ``sae`` is the
    L1 deviation from the mean floored to the lattice, ``b = bucket_units`` the noise error of a bucket."""
    n = seg.size
    lens = np.arange(1, n + 1, dtype=np.int64)
    left = floor_units(prefix_devs(seg), lens, bits)  # sae of seg[:p], p = 1..n
    right = floor_units(prefix_devs(seg[::-1]), lens, bits)  # sae of seg[n-p:], p = 1..n
    scores = np.empty(n, dtype=np.int64)
    scores[0] = -(left[n - 1] + bucket_units)
    i = np.arange(1, n)
    scores[1:] = -(left[i - 1] + right[n - i - 1] + 2 * bucket_units)
    return scores


def score_sensitivity(sens: int, bits: int = BITS) -> int:
    """Lattice-unit sensitivity of every score: one record moves one ``sae`` by at most ``2(1 - 1/|I|)``,
    i.e. ``2^(bits+1)`` units plus one for the floor; ``sens`` records by ``sens`` times that."""
    return sens * (2 ** (bits + 1) + 1)


def default_depth(m: int) -> int:
    """``max(1, ceil(log2 m))``: enough levels to reach single bins with balanced splits."""
    return max(1, math.ceil(math.log2(m))) if m > 1 else 1


def p_hpartition(counts: ArrayLike, epsilon: float, *, ratio: float = 0.5, depth: int | None = None,
                 neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                 rng: RandomSource | None = None, description: str = "") -> Release:
    """P-HPartition: recursive private bisection by the exponential mechanism, then noisy bucket counts
    spread uniformly within each bucket.

    Parameters
    ----------
    counts:
        The true bin counts of a public 1-D domain of ``m`` bins (non-negative integers).
    epsilon:
        The privacy parameter, > 0.
    ratio:
        The share of ``epsilon`` spent on the structure (in (0, 1); default 1/2, as in StructureFirst; the
        seed gives no split).
    depth:
        The number of bisection levels, ``1..64`` (default ``max(1, ceil(log2 m))``).
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
    Pure ``epsilon``-DP. Add/remove one record (default, ``s = 1``): the record lies in exactly
    one interval per level, whose scores all move by at most ``2(1 - 1/|I|) < 2`` (in either direction),
    so each exponential mechanism, calibrated as ``exp(eps_l q / (2 Δ))`` with ``Δ = 2`` (plus one lattice
    unit), is ``eps_l``-DP and the disjoint intervals of a level compose in parallel (the intervals are
    a function of earlier private outputs only). Replace-one (``s = 2``) and privacy units
    (``s = max_rows``) scale ``Δ`` by ``s`` (the changed records' effects add up across intervals).
    The bucket counts are a histogram of disjoint buckets: L1 sensitivity ``s``. Total
    ``eps_s + eps_c <= epsilon`` (exact).

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness. Budget split: ``eps_s = ratio * epsilon``,
    equal over the ``depth`` levels; ``eps_c = (1 - ratio) epsilon`` for the bucket counts. Listed in
    ``Release.params``.

    Output law
    ----------
    Definition (dpkit's; the seed gives only the outline): start with the whole domain as one interval. At
    each of ``depth`` levels, every still-open interval ``I`` of at least 2 bins chooses, by the
    exponential mechanism with budget ``eps_s / depth``, either to stay whole (it is then closed) or
    to split at one of its ``|I| - 1`` inner positions. The quality is minus the expected L1 error of the
    result: ``-(sae(I) + b)`` for keeping, ``-(sae(L) + sae(R) + 2b)`` for a split into ``L, R``, with
    ``sae`` the L1 deviation from the mean (reconstruction error, as in Ács et al.'s ``clustersplit``)
    and ``b = s / eps_c`` the expected absolute noise of one bucket count (the noise error).
    Finally each bucket's count gets discrete Laplace noise (scale ``s / eps_c``) and is spread
    uniformly over its bins. Scores are exact integers on the lattice ``2^-12`` and the exponential mechanism
    is dpkit's exact sampler (:func:`~dpkit.mechanisms.exponential`'s law, drawn without a charge).

    The :class:`Release`: ``value`` the float64 estimate of every bin, ``parts["buckets"]`` the private
    partition (half-open pairs) and ``parts["bucket_counts"]`` the noisy integer counts.

    Error
    -----
    Within a bucket of width ``n`` the estimate is uniform: noise variance ``2q/(1-q)^2 / n^2``
    (``q = e^{-1/t_c}``) per bin plus the bucket's non-uniformity, the trade-off the quality scores.

    Notes
    -----
    Running time: ``O(|I|^1.5)`` vectorised integer work per open interval per level.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = p_hpartition([9, 9, 9, 9, 0, 0, 0, 0], 2.0, rng=deterministic_source(1))
    >>> rel.value.shape, rel.params["depth"]
    ((8,), 3)
    """
    return run(_p_hpartition_plan(counts, epsilon, ratio=ratio, depth=depth, neighbours=neighbours,
                                  accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _p_hpartition_plan(counts: Any, epsilon: float, *, ratio: Any, depth: Any, neighbours: Neighbours | None,
                       accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`p_hpartition` (nothing drawn or charged)."""
    arr = _common.counts(counts)
    m = int(arr.size)
    epsilon = check.epsilon(epsilon)
    ratio = check.probability("ratio", ratio)
    depth = default_depth(m) if depth is None else check.size_limit("depth", depth, 64, minimum=1)
    nb = _common.resolve_neighbours(neighbours, accountant)
    guard_size(arr)
    sens = _common.record_sensitivity(nb)
    eps_s, eps_c = _common.split_budget(epsilon, [ratio, 1.0 - ratio], name="ratio")
    eps_levels = _common.split_budget(eps_s, [1.0] * depth, name="depth")
    t_c = discrete_laplace_scale(sens, eps_c)
    bucket_units = round(2.0**BITS * t_c)
    if bucket_units * m >= 2**56:
        raise InvalidParameter("epsilon", "too small for exact score arithmetic on this domain")
    du = score_sensitivity(sens)
    params = {"epsilon": epsilon, "ratio": ratio, "structure_epsilon": eps_s, "counts_epsilon": eps_c,
              "depth": depth, "level_epsilon": eps_levels[0], "domain_size": m, "sensitivity": sens,
              "score_sensitivity": du * 2.0**-BITS, "count_scale": t_c, "bucket_noise_error": t_c}

    def draw(rng: RandomSource) -> Outcome:
        open_ = [(0, m)] if m > 1 else []
        closed: list[tuple[int, int]] = [] if m > 1 else [(0, m)]
        for e_l in eps_levels:
            nxt: list[tuple[int, int]] = []
            for lo, hi in open_:
                scores = split_scores(arr[lo:hi], bucket_units)
                i = _common.choose(scores.astype(np.float64), float(du), e_l, rng)
                if i == 0:
                    closed.append((lo, hi))
                else:
                    for a, b in ((lo, lo + i), (lo + i, hi)):
                        (nxt if b - a > 1 else closed).append((a, b))
            open_ = nxt
            if not open_:
                break
        buckets = sorted(closed + open_)
        true = np.array([arr[lo:hi].sum() for lo, hi in buckets], dtype=np.int64)
        noisy = _common.noisy_counts(true, sens, eps_c, rng)
        widths = np.array([hi - lo for lo, hi in buckets], dtype=np.int64)
        value = np.repeat(noisy / widths, widths).astype(np.float64)
        return Outcome(value, parts={"buckets": buckets, "bucket_counts": noisy})

    return Plan(mechanism="p_hpartition", cost=PureDP(epsilon), draw=draw, sensitivity=float(sens), scale=t_c,
                params=params, neighbours=nb)
