"""DAWA, the data- and workload-aware 1-D histogram (Li, Hay, Miklau & Wang, VLDB 2014; Li et al. §4.3.3).

Stage 1 privately chooses a partition of the domain into intervals ("buckets") whose counts are close to
uniform, by a dynamic program over *noisy* interval costs; stage 2 measures the bucket counts with a
hierarchical strategy and spreads each bucket's estimate uniformly over its bins.

Exact interval costs
--------------------
The cost of an interval ``I`` is its L1 deviation from its mean, ``dev(I) = sum_{l in I} |x_l - S_I/|I||``,
plus the public noise-error term ``1/eps2`` of one bucket. ``|I| dev(I) = sum_l | |I| x_l - S_I |`` is an
integer; it is put on the lattice ``2^-bits`` **exactly** (``u_I = floor(dev(I) 2^bits)`` in integer
arithmetic), so the dynamic program runs on exact int64 values and its tie rule is well defined.

``|I| dev(I) = 2 (S_I c_I - |I| s_I)`` with ``c_I``, ``s_I`` the number and the sum of the bins of ``I``
below its mean (the signed deviations sum to zero); ``c_I`` and ``s_I`` are range-dominance queries answered
exactly by a wavelet matrix over the ranks of the counts in ``O(log m)`` integer steps each, so the
``O(m log m)`` power-of-two candidates cost ``O(m log^2 m)`` in all (not ``O(m^2)`` as direct window sums).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.histograms.hierarchical import _dlap_variance, _infer, tree_height
from dpkit.histograms.workloads import _ranges
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["dawa"]

BITS = 12  # interval costs live on the lattice 2^-12
ALL_LENGTHS_MAX = 512  # "auto": every interval length up to this domain size, powers of two above
_LENGTHS = ("auto", "all", "powers_of_two")


# ------------------------------------------------------------------------------------ exact costs
def floor_units(dev_times_len: np.ndarray, length: Any, bits: int) -> np.ndarray:
    """``floor(D 2^bits / L)`` exactly, for int64 ``D`` (``L dev``) and lengths ``L`` (no int64 overflow while
    ``D / L < 2^(62 - bits)``)."""
    q, r = np.divmod(dev_times_len, length)
    return q * np.int64(1 << bits) + (r * np.int64(1 << bits)) // length


class _Dominance:
    """Exact range-dominance counts and sums over a non-negative int64 vector ``x`` (a wavelet matrix over
    the ranks of ``x``): for windows ``[lo, hi)`` and thresholds ``tau``, ``#{l in [lo, hi) : x_l <= tau}``
    and the sum of those ``x_l``, in ``O(log m)`` vectorised integer steps per query (``O(m log m)`` to
    build). All arithmetic is int64 and exact (sums stay below ``sum(x)``)."""

    def __init__(self, x: np.ndarray) -> None:
        n = int(x.size)
        order = np.argsort(x, kind="stable")
        self.sorted = x[order]
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)  # x_l <= tau  <=>  rank_l < #{x <= tau}
        self.nbits = max(1, n.bit_length())  # ranks and their query bound r <= n fit in nbits bits
        vals = x.astype(np.int64)
        self.zeros: list[np.ndarray] = []  # rank0[p]: zero bits among the first p entries of the level
        self.zsums: list[np.ndarray] = []  # the sum of x over those zero-bit entries
        self.nzero: list[int] = []
        for b in range(self.nbits - 1, -1, -1):
            bit = (rank >> b) & 1
            zero = bit == 0
            z = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(zero, out=z[1:])
            zs = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.where(zero, vals, 0), out=zs[1:])
            self.zeros.append(z)
            self.zsums.append(zs)
            self.nzero.append(int(z[-1]))
            perm = np.concatenate([np.flatnonzero(zero), np.flatnonzero(~zero)])  # stable: zeros first
            rank, vals = rank[perm], vals[perm]

    def below(self, lo: np.ndarray, hi: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(count, sum)`` of the entries ``<= tau`` in ``x[lo:hi]``, elementwise over the query arrays."""
        r = np.searchsorted(self.sorted, tau, side="right")
        s, e = lo.astype(np.int64), hi.astype(np.int64)
        cnt = np.zeros(s.shape, dtype=np.int64)
        tot = np.zeros(s.shape, dtype=np.int64)
        for level, b in enumerate(range(self.nbits - 1, -1, -1)):
            z, zs, nz = self.zeros[level], self.zsums[level], self.nzero[level]
            zl, zh = z[s], z[e]
            one = ((r >> b) & 1).astype(bool)
            cnt += np.where(one, zh - zl, 0)
            tot += np.where(one, zs[e] - zs[s], 0)
            s = np.where(one, nz + s - zl, zl)
            e = np.where(one, nz + e - zh, zh)
        return cnt, tot


def _window_devs(dom: _Dominance, csum: np.ndarray, starts: np.ndarray, length: Any) -> np.ndarray:
    """``L dev`` of the windows ``[i, i + L)`` (exact int64): with ``S`` the window sum, ``c`` the number and
    ``s`` the sum of its entries below the mean (``L x_l < S``, i.e. ``x_l <= (S - 1) // L`` for integers),
    ``sum_l |L x_l - S| = 2 (S c - L s)`` (the signed deviations sum to zero)."""
    ends = starts + length
    total = csum[ends] - csum[starts]
    cnt, below = dom.below(starts, ends, (total - 1) // length)
    return 2 * (total * cnt - length * below)


def window_devs(x: np.ndarray, length: int) -> np.ndarray:
    """``L dev`` (exact int64) of every window ``[i, i+L)`` of ``x``, ``i = 0..m-L``: ``O(m log m)`` time
    and memory (see :func:`interval_costs`)."""
    x = np.asarray(x, dtype=np.int64)
    csum = np.concatenate([[0], np.cumsum(x)])
    return _window_devs(_Dominance(x), csum, np.arange(x.size - length + 1, dtype=np.int64), np.int64(length))


def guard_size(arr: np.ndarray, name: str = "counts") -> None:
    """Refuse data whose exact cost arithmetic could overflow int64 (``m N >= 2^40``), before any charge."""
    total = int(arr.sum())
    if total * max(1, arr.size) >= 2**40:
        raise InvalidData(name, "total count times domain size too large for exact cost arithmetic (>= 2^40)")


def _lengths(kind: Any, m: int) -> np.ndarray:
    if not isinstance(kind, str) or kind not in _LENGTHS:
        raise InvalidParameter("lengths", "must be 'auto', 'all' or 'powers_of_two'")
    if kind == "all" or (kind == "auto" and m <= ALL_LENGTHS_MAX):
        if kind == "all" and m > 1024:
            raise InvalidParameter("lengths", "'all' is limited to domains of at most 1024 bins (O(m^2 log m) costs)")
        return np.arange(m, 0, -1, dtype=np.int64)
    p = [1 << j for j in range(m.bit_length()) if (1 << j) <= m]
    return np.array(p[::-1], dtype=np.int64)


_SCALAR_DP_MAX = 64  # up to this many candidate lengths, the DP runs on Python ints
_QUERY_BLOCK = 1 << 14  # candidate intervals per vectorised batch: bounds memory (and stays in cache)


def interval_costs(x: np.ndarray, lengths: np.ndarray, bits: int = BITS) -> np.ndarray:
    """Exact lattice costs ``u[j, i] = floor(dev([i, i + lengths[j])) 2^bits)`` (int64; ``-1`` where the
    interval leaves the domain). ``lengths`` must be decreasing.

    Each cost is ``2 (S c - L s)`` (see :func:`window_devs`) with ``c, s`` range-dominance counts and sums
    answered by a wavelet matrix over the ranks of ``x``: ``O(m log m)`` to build, ``O(log m)`` per
    interval, so ``O(m log^2 m)`` for the powers of two and ``O(m^2 log m)`` for all lengths, exact in int64
    (the same integers as the direct sum ``sum_l |L x_l - S|``)."""
    x = np.asarray(x, dtype=np.int64)
    m = x.size
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.full((lengths.size, m), -1, dtype=np.int64)
    per = np.maximum(m - lengths + 1, 0)
    total = int(per.sum())
    if total == 0:
        return out
    csum = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(x, out=csum[1:])
    dom = _Dominance(x)
    rows = np.repeat(np.arange(lengths.size, dtype=np.int64), per)
    starts = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(per) - per, per)
    for a in range(0, total, _QUERY_BLOCK):
        row, start = rows[a:a + _QUERY_BLOCK], starts[a:a + _QUERY_BLOCK]
        length = lengths[row]
        out[row, start] = floor_units(_window_devs(dom, csum, start, length), length, bits)
    return out


def unit_sensitivity(bits: int) -> int:
    """Lattice-unit sensitivity of one interval cost to one record: ``dev`` moves by at most
    ``2(1 - 1/|I|) < 2``, so ``floor(dev 2^bits)`` moves by at most ``2^(bits+1)`` (+1 for the floor)."""
    return 2 ** (bits + 1) + 1


def best_partition(noisy: np.ndarray, lengths: np.ndarray) -> list[tuple[int, int]]:
    """Exact argmin over partitions into candidate intervals of the summed integer costs ``noisy[j, i]``.

    Forward dynamic program ``best[k] = min_i best[i] + w(i, k)``; ties go to the smallest start ``i``
    (``lengths`` decreasing and the first minimum is kept). The traced-back partition is therefore
    the optimal partition that is smallest in the order comparing the starts of the buckets from the last
    one backwards, a fixed total order on partitions (the privacy argument in :func:`dawa` needs one).
    Returns half-open buckets ``[(lo, hi), ...]`` in domain order.

    With few candidate lengths (powers of two) the inner minimum runs over Python integers (exact, no
    per-``k`` array overhead); with many (all lengths, ``m <= 1024``) it is vectorised per ``k``.
    """
    nl, m = noisy.shape
    lens = [int(v) for v in lengths]
    arg = [0] * (m + 1)
    if nl <= _SCALAR_DP_MAX:
        rows = [noisy[j].tolist() for j in range(nl)]
        pairs = list(zip(lens, rows, strict=True))
        best = [0] * (m + 1)
        first = nl  # lengths are decreasing: the candidates with L <= k are pairs[first:]
        for k in range(1, m + 1):
            while first > 0 and lens[first - 1] <= k:
                first -= 1
            bi = k - lens[first]  # every candidate set holds a length <= k (the smallest length is 1)
            bv = best[bi] + rows[first][bi]
            for length, row in pairs[first + 1:]:
                i = k - length
                v = best[i] + row[i]
                if v < bv:  # strict: the first minimum (smallest start) wins ties
                    bv, bi = v, i
            best[k] = bv
            arg[k] = bi
    else:
        bestv = np.zeros(m + 1, dtype=np.int64)
        lens_a = np.asarray(lens, dtype=np.int64)
        idx = np.arange(nl)
        for k in range(1, m + 1):
            ok = lens_a <= k
            starts = k - lens_a[ok]
            vals = bestv[starts] + noisy[idx[ok], starts]
            i = int(vals.argmin())
            bestv[k] = vals[i]
            arg[k] = int(starts[i])
    buckets = []
    k = m
    while k > 0:
        buckets.append((arg[k], k))
        k = arg[k]
    return buckets[::-1]


def private_partition(x: np.ndarray, eps1: float, sens: int, rng: RandomSource, *, lengths: np.ndarray,
                      bonus_units: int, bits: int = BITS) -> tuple[list[tuple[int, int]], float]:
    """Stage 1 (already paid for): noisy lattice costs ``u_I + bonus + Z_I`` for **every** candidate
    interval (singletons included), ``Z_I`` discrete Laplace with scale ``t >= 2 sens Δu / eps1`` lattice
    units (``Δu`` = :func:`unit_sensitivity`), then the exact argmin :func:`best_partition`.
    Returns the buckets and ``t``."""
    costs = interval_costs(x, lengths, bits)
    valid = costs >= 0
    du = unit_sensitivity(bits)
    t = discrete_laplace_scale(2 * sens * du, eps1)
    noisy = np.zeros_like(costs)
    noisy[valid] = _common.noisy_counts(costs[valid] + np.int64(bonus_units), 2 * sens * du, eps1, rng)
    return best_partition(noisy, lengths), float(t)


# ------------------------------------------------------------------------------------ stage 2
def _level_uses(ranges: np.ndarray, b: int, h: int) -> np.ndarray:
    """Nodes per level (top first) used by the canonical b-ary decompositions of bucket ranges ``[l, r)``."""
    lo, hi = ranges[:, 0].copy(), ranges[:, 1].copy()
    uses = np.zeros(h)
    for lvl in range(h - 1, -1, -1):
        if lvl == 0:
            uses[lvl] = float(np.sum(hi - lo))
            break
        lu = -(-lo // b) * b
        rd = (hi // b) * b
        inner = lu <= rd
        used = np.where(inner, (lu - lo) + (hi - rd), hi - lo)
        uses[lvl] = float(np.sum(used))
        lo = np.where(inner, lu // b, 0)
        hi = np.where(inner, rd // b, 0)
    return uses


def _bucket_ranges(workload: np.ndarray, buckets: list[tuple[int, int]]) -> np.ndarray:
    """Each bin range mapped to the half-open range of the buckets it touches."""
    starts = np.array([lo for lo, _ in buckets], dtype=np.int64)
    first = np.searchsorted(starts, workload[:, 0], side="right") - 1
    last = np.searchsorted(starts, workload[:, 1] - 1, side="right") - 1
    return np.stack([first, last + 1], axis=1)


def _measure_buckets(bucket_counts: np.ndarray, eps2: float, b: int, sens: int, rng: RandomSource,
                     bucket_ranges: np.ndarray | None) -> tuple[np.ndarray, dict[str, Any]]:
    """H_b over the bucket counts with per-level budgets, constrained inference; bucket estimates."""
    k = bucket_counts.size
    h = tree_height(k, b)
    if bucket_ranges is None:
        shares = [1.0] * h
    else:
        uses = _level_uses(bucket_ranges, b, h)
        top = float(np.max(uses)) if uses.size else 0.0
        shares = [max(u, 1e-2 * top, 1e-12) ** (1.0 / 3.0) for u in uses] if top > 0 else [1.0] * h
    eps_levels = _common.split_budget(eps2, shares, name="workload")
    leaves = np.zeros(b**h, dtype=np.int64)
    leaves[:k] = bucket_counts
    levels = [leaves]
    for _ in range(h - 1):
        levels.insert(0, levels[0].reshape(-1, b).sum(axis=1))
    noisy, scales = [], []
    for lv, e in zip(levels, eps_levels, strict=True):
        noisy.append(_common.noisy_counts(lv, sens, e, rng))
        scales.append(float(discrete_laplace_scale(sens, e)))
    est = _infer(noisy, [1.0 / _dlap_variance(t) for t in scales], b)[-h:]
    info = {"height": h, "level_epsilons": tuple(eps_levels), "level_scales": tuple(scales)}
    return np.asarray(est[-1][:k], dtype=np.float64), {"info": info, "levels": noisy}


# ------------------------------------------------------------------------------------ public
def dawa(counts: ArrayLike, epsilon: float, *, workload: ArrayLike | None = None, ratio: float = 0.25,
         branching: int = 2, lengths: str = "auto", penalty: float | None = None, neighbours: Neighbours | None = None,
         accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """DAWA histogram (Li, Hay, Miklau & Wang 2014): private L1 partition, then a workload-aware
    hierarchical measurement of the bucket counts, expanded uniformly within each bucket.

    Parameters
    ----------
    counts:
        The true bin counts of a public 1-D domain of ``m`` bins (non-negative integers).
    epsilon:
        The privacy parameter, > 0.
    workload:
        Optional public int array ``(k, 2)`` of half-open bin ranges ``[lo, hi)`` as in
        :mod:`dpkit.histograms.workloads`; it sets the stage-2 level budgets.
    ratio:
        The share of ``epsilon`` spent on the partition (in (0, 1); default 0.25).
    branching:
        The branching factor of the stage-2 tree over the buckets (default 2).
    lengths:
        Candidate interval lengths: ``"auto"`` (all lengths if ``m <= 512``, else powers of two), ``"all"``
        (at most 1024 bins) or ``"powers_of_two"``.
    penalty:
        The public per-bucket penalty in count units (default ``None``: ``s/eps2 + 2 * (4 s/eps1)``; see
        Notes).
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
    Pure ``epsilon``-DP. Neighbours differ in one bin ``j`` (add/remove one record; ``s = 1``).
    Every partition contains exactly one interval containing ``j``, so fixing the noise of all intervals
    not containing ``j`` (whose costs are equal on both datasets) the output is determined by which
    interval ``I ∋ j`` minimises ``c_I + Z_I + L_I + R_I`` (``L_I``, ``R_I`` the best noisy costs left and
    right of ``I``, fixed), the rest of the partition being a fixed function of ``I``. That is report-noisy-min
    over candidates whose scores move by at most ``Δu`` **in either direction**, so the winning threshold
    on ``Z_I`` moves by at most ``2 Δu`` and the discrete Laplace tail gives ``e^(2Δu/t) <= e^eps1``.
    Replace-one (``s = 2``) and privacy units (``s = max_rows``) follow by group privacy. Stage 2 is an
    ``eps2``-DP histogram of the (now fixed) buckets: each level has L1 sensitivity ``s``. Total
    ``eps1 + sum_l eps_l <= epsilon`` (exact rational check).

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness. Budget split (all data-independent; listed
    in ``Release.params``): ``eps1 = ratio * epsilon`` (default ``ratio = 0.25``) for the partition,
    ``eps2 = (1 - ratio) epsilon`` for the bucket counts, split over the ``h`` levels of a ``branching``-ary
    tree over the buckets: equally without a workload, otherwise ``eps_l ∝ n_l^(1/3)``, ``n_l`` the number of
    level-``l`` nodes that the workload's ranges (mapped to the buckets they touch) use in their canonical
    decompositions (the allocation minimising ``sum_l n_l Var_l``; a level no range uses gets a 1 % floor
    share). This replaces the paper's GreedyH weighting by a hierarchical (``H_b``, default ``H_2``) strategy
    with that closed-form level allocation and constrained inference; it is the stage-2 choice for range
    workloads only.

    Output law
    ----------
    Stage 1, the private partition: every candidate interval ``I`` (all lengths if ``m <= 512`` or
    ``lengths="all"``; otherwise, as in the paper's fast variant, lengths that are powers of two at every
    start, ``lengths="powers_of_two"``) gets the noisy cost ``dev(I) + penalty + Z_I`` (on the lattice
    ``2^-12``, see the module docstring), ``Z_I`` independent discrete Laplace with scale ``t = 2 s Δu / eps1``
    lattice units, ``Δu = 2^13 + 1`` (one record moves ``dev(I)`` by at most ``2(1 - 1/|I|) < 2``, i.e.
    ``Δu`` units after the floor), ``s`` the record sensitivity. The partition with the smallest noisy total
    is found exactly by dynamic programming (a fixed tie order).

    Stage 2: the bucket counts form a ``branching``-ary tree (padded), every node gets discrete Laplace noise
    with its level's budget, constrained inference (BLUE) gives the bucket estimates, and each bucket's
    estimate is spread uniformly over its bins.

    The :class:`Release`: ``value`` the float64 estimate of every bin; ``parts["buckets"]`` the private
    partition (half-open ``(lo, hi)`` pairs), ``parts["bucket_estimates"]`` and ``parts["levels"]`` the
    noisy tree over the buckets. ``params`` holds the budget split, the cost noise scale and the stage-2
    level budgets and scales. ``Release.scale`` is ``None`` (the receipt records the cost noise scale).

    Error
    -----
    Within a bucket the estimate is uniform, so the error is the bucket's non-uniformity (``dev(I)``, which
    the partition trades against the per-bucket noise) plus the stage-2 noise of the bucket estimate (BLUE
    over the tree, variance about ``h`` level variances ``2 s^2/eps_l^2`` shared by the canonical
    decomposition). No interval is provided.

    Errata
    ------
    Differences from the published code: the ektelo/dpcomp ``L1partition`` draws its noise with scale
    ``(2 - 1/|I| - 1/m)/eps1`` (it assumes all costs move in one direction, which they do not), gives single
    bins **no** noise and floors noisy costs at ``1/eps2``; it is not ``eps1``-DP (the exact-loss tests show
    the violation on 3 bins). dpkit noises every candidate with ``2 Δ/eps1``.

    Notes
    -----
    Per-bucket penalty (a documented deviation): the paper adds ``s/eps2`` (the expected absolute noise
    of one bucket count) to every interval cost. With correctly calibrated cost noise (scale
    ``4 s/eps1``, 12 times ``s/eps2`` at ``ratio = 0.25``) the minimum over exponentially many partitions
    picks up intervals with strongly negative noise, so the partition is much finer than the data
    warrant (about ``m/2`` buckets on uniform data; the published code hid this with its non-private
    floor). dpkit's default ``penalty=None`` therefore adds ``s/eps2 + 2 * (4 s/eps1)``; a float
    ``penalty`` (public, count units) replaces it, e.g. ``penalty = s/eps2`` for the paper's objective.
    The penalty is public, so it does not affect privacy.

    Running time: the exact interval costs take ``O(m^2 log m)`` integer work for all lengths (``m <= 512``,
    or ``lengths="all"`` up to 1024) and ``O(m log^2 m)`` with powers of two (range-dominance counts on a
    wavelet matrix, :func:`interval_costs`), then an ``O(m · #lengths)`` dynamic program: about 0.5 s of
    CPU at 65,536 bins (was 18 s with the direct ``O(m^2)`` window sums; same integers, same law; see
    ``docs/benchmarks.md``, "Speed at the limit (issue #16)").

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = dawa([50, 52, 49, 51, 0, 0, 1, 0], 1.0, rng=deterministic_source(3))
    >>> rel.value.shape, rel.params["ratio"]
    ((8,), 0.25)
    """
    return run(_dawa_plan(counts, epsilon, workload=workload, ratio=ratio, branching=branching, lengths=lengths,
                          penalty=penalty, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _dawa_plan(counts: Any, epsilon: float, *, workload: Any, ratio: Any, branching: Any, lengths: Any, penalty: Any,
               neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`dawa` (nothing drawn or charged)."""
    arr = _common.counts(counts)
    m = int(arr.size)
    epsilon = check.epsilon(epsilon)
    ratio = check.probability("ratio", ratio)
    b = check.size_limit("branching", branching, 2**20, minimum=2)
    lens = _lengths(lengths, m)
    wl = None if workload is None else _ranges_param(workload, m)
    nb = _common.resolve_neighbours(neighbours, accountant)
    guard_size(arr)
    sens = _common.record_sensitivity(nb)
    eps1, eps2 = _common.split_budget(epsilon, [ratio, 1.0 - ratio], name="ratio")
    du = unit_sensitivity(BITS)
    t1 = discrete_laplace_scale(2 * sens * du, eps1)
    if penalty is None:  # the paper's s/eps2 plus twice the cost noise scale (see the docstring)
        bonus_units = round(2.0**BITS * sens / eps2 + 2.0 * t1)
    else:
        bonus = 2.0**BITS * check.nonnegative("penalty", penalty)
        if not bonus < 2.0**56:
            raise InvalidParameter("penalty", "too large for exact cost arithmetic")
        bonus_units = round(bonus)
    if t1 * m * 64 >= 2.0**56 or bonus_units * m >= 2**56:
        raise InvalidParameter("epsilon", "too small for exact cost arithmetic on this domain")
    params: dict[str, Any] = {
        "epsilon": epsilon, "ratio": ratio, "partition_epsilon": eps1, "counts_epsilon": eps2,
        "branching": b, "domain_size": m, "sensitivity": sens, "lengths": "all" if lens.size == m and m > 1
        else ("powers_of_two" if m > 1 else "all"), "cost_lattice": 2.0**-BITS, "cost_noise_scale": t1 * 2.0**-BITS,
        "penalty": bonus_units * 2.0**-BITS, "workload_aware": wl is not None}

    def draw(rng: RandomSource) -> Outcome:
        buckets, _ = private_partition(arr, eps1, sens, rng, lengths=lens, bonus_units=bonus_units)
        bucket_counts = np.array([arr[lo:hi].sum() for lo, hi in buckets], dtype=np.int64)
        branges = None if wl is None else _bucket_ranges(wl, buckets)
        est, extra = _measure_buckets(bucket_counts, eps2, b, sens, rng, branges)
        widths = np.array([hi - lo for lo, hi in buckets], dtype=np.float64)
        value = np.repeat(est / widths, widths.astype(np.int64))
        return Outcome(value.astype(np.float64),
                       parts={"buckets": buckets, "bucket_estimates": est, "levels": extra["levels"]},
                       params={f"counts_{k}": v for k, v in extra["info"].items()},
                       fields={"scale": None})  # no single scale for the estimate (receipt: the cost noise's)

    return Plan(mechanism="dawa", cost=PureDP(epsilon), draw=draw, sensitivity=float(sens), scale=t1 * 2.0**-BITS,
                params=params, neighbours=nb)


def _ranges_param(workload: Any, m: int) -> np.ndarray:
    """The workload as validated half-open ranges; errors name ``workload``."""
    try:
        return _ranges(workload, m)
    except WrongType:
        raise WrongType("workload", "an integer array of shape (k, 2) of half-open ranges [lo, hi)") from None
    except InvalidParameter:
        raise InvalidParameter("workload", "needs shape (k, 2) and 0 <= lo < hi <= m for every range") from None
