"""EFPA, the Enhanced Fourier Perturbation Algorithm (Ács, Castelluccia & Chen, ICDM 2012; Li et al. §4.3.3),
for a 1-D histogram, with exact sensitivities and an exact sampler.

The histogram ``x`` (``m`` bins) is expressed in a public real orthonormal basis ``B`` (rows = basis vectors):

- ``basis="dft"`` (default, EFPA's): the real Fourier basis, ordered by frequency: the constant
  ``1/√m``, then ``√(2/m) cos(2π f t/m)`` and ``√(2/m) sin(2π f t/m)`` for ``f = 1, 2, ...`` and, for even
  ``m``, the Nyquist row ``(-1)^t/√m``. Keeping the first ``k`` complex DFT coefficients (EFPA's ``k``,
  using the half-redundancy ``F_{m-f} = conj(F_f)``) is keeping the first ``r(k) = min(m, 2k-1)`` rows;
  ``k = 1..floor(m/2)+1``.
- ``basis="dct"``: the orthonormal DCT-II basis; ``k = r = 1..m`` coefficients.

Exact arithmetic: ``B`` is used as ``B̃ = round(2^30 B)/2^30`` (entries within ``2^-30`` of the true basis).
The coefficients ``2^30 B̃ x`` are computed **exactly** in integers (the counts are split into 18-bit limbs so
every int64 product-sum is exact), tail energies exactly as Python integers, so the selection scores and the
noisy coefficients have exactly the sensitivities stated below whatever the size of the counts.

The ``m x m`` matrix is never built: every entry of ``B̃`` is a value of a table of ``m`` (DFT: cos and sin)
or ``4m`` (DCT) fixed-point numbers at the index ``f t mod m`` (``r (2t + 1) mod 4m``), so row blocks are
generated on the fly (``O(m)`` memory; the same integers as the former dense basis, bit for bit). The exact
transform is still ``O(m^2)`` integer work: an FFT computes the *irrational* basis in floating point, whose
error has no proven bound for numpy/scipy's FFT, so its output could not carry the exact sensitivities above,
and the rounded basis ``B̃`` (whose column norms and near-orthonormality the proof uses) has no fast exact
algorithm (issue #16; measurements in ``docs/benchmarks.md``).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import PrivacyUnit, Replace
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale
from dpkit.noise import lattice_granularity, sample_discrete_laplace

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["BASES", "efpa", "efpa_basis", "efpa_scores"]

BASES = ("dft", "dct")
PRECISION = 30  # bits of the fixed-point basis
MAX_BINS = 2**15  # the basis is generated in row blocks (O(m) memory); the exact transform is O(m^2) time
_LIMB = 18
_BLOCK = 1 << 19  # basis entries per generated row block (4 MiB of int64)
_CLIP = 2**52  # score gaps beyond this many lattice steps are clipped (probability < exp(-2^31))


@functools.lru_cache(maxsize=4)
def _table(m: int, basis: str) -> np.ndarray:
    """The fixed-point values every basis entry is taken from: an entry of row ``f`` at bin ``t`` depends only
    on ``j = f t mod m`` (DFT: ``[cos; sin]`` tables of ``m`` entries each) or ``j = r (2t + 1) mod 4m`` (DCT),
    computed with the same float operations, element by element, as the dense rows, so that
    ``B_int = round(2^30 B)`` is reproduced bit for bit."""
    if basis == "dft":
        j = np.arange(m, dtype=np.int64)
        ang = 2.0 * np.pi * j / m
        vals = np.concatenate([math.sqrt(2.0 / m) * np.cos(ang), math.sqrt(2.0 / m) * np.sin(ang)])
    else:
        j = np.arange(4 * m, dtype=np.int64)
        ang = np.pi * j / (2 * m)
        vals = math.sqrt(2.0 / m) * np.cos(ang)
    out = np.rint(np.ldexp(vals, PRECISION)).astype(np.int64)
    out.setflags(write=False)
    return out


def _row_block(m: int, basis: str, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo..hi-1`` of the fixed-point basis ``B_int`` (int64, in the order coefficients are kept),
    generated from :func:`_table` without the ``m x m`` matrix (index arithmetic in int32 while it fits;
    a mask instead of the modulo when the period is a power of two)."""
    table = _table(m, basis)
    period = m if basis == "dft" else 4 * m
    dt = np.int32 if (m - 1) * (2 * m - 1) < 2**31 else np.int64
    t = np.arange(m, dtype=dt)
    i = np.arange(lo, hi, dtype=dt)
    if basis == "dft":
        f = (i + 1) // 2  # row 2f - 1: cos f, row 2f: sin f
        idx = np.multiply.outer(f, t)
    else:
        idx = np.multiply.outer(i, 2 * t + 1)
    if period & (period - 1) == 0:
        idx &= period - 1
    else:
        idx %= period
    if basis == "dft":
        idx += np.where(i % 2 == 1, 0, m).astype(dt)[:, None]
    out = np.take(table, idx)
    const = int(np.rint(np.ldexp(1.0 / math.sqrt(m), PRECISION)))
    if lo == 0:
        out[0] = const
    if basis == "dft" and m % 2 == 0 and m > 1 and lo <= m - 1 < hi:  # the Nyquist row (-1)^t / sqrt(m)
        out[m - 1 - lo] = np.where(t % 2 == 0, const, int(np.rint(np.ldexp(-1.0 / math.sqrt(m), PRECISION))))
    return out


def _blocks(m: int, stop: int | None = None) -> list[tuple[int, int]]:
    """Row ranges of at most ``_BLOCK`` entries covering rows ``0..stop-1``."""
    stop = m if stop is None else stop
    step = max(1, _BLOCK // max(m, 1))
    return [(a, min(stop, a + step)) for a in range(0, stop, step)]


@functools.lru_cache(maxsize=4)
def _candidates(m: int, basis: str) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, l1)``: ``rows[k-1] = r(k)``, the number of rows kept for each candidate ``k``, and
    ``l1[k-1] = max_j Σ_{i < r(k)} |B_int[i, j]|`` (exact; the kept vector's L1 sensitivity is
    ``s l1 / 2^30`` for a change of ``s`` records in one bin — the maximum column L1 norm). ``O(m^2)``
    integer work in row blocks, ``O(m)`` memory."""
    rows = np.minimum(m, 2 * np.arange(1, m // 2 + 2) - 1) if basis == "dft" else np.arange(1, m + 1)
    l1_all = np.empty(m, dtype=np.int64)
    acc = np.zeros(m, dtype=np.int64)
    for lo, hi in _blocks(m):
        cum = np.cumsum(np.abs(_row_block(m, basis, lo, hi)), axis=0) + acc
        l1_all[lo:hi] = cum.max(axis=1)
        acc = cum[-1]
    l1 = l1_all[rows - 1]
    for a in (rows, l1):
        a.setflags(write=False)
    return rows, l1


def efpa_basis(m: int, basis: str = "dft") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B_int, rows, l1)``: the fixed-point basis ``B_int = round(2^30 B)`` as a dense ``m x m`` int64
    matrix (rows in the order coefficients are kept; for inspection and tests — :func:`efpa` never builds it),
    and ``rows``, ``l1`` as in the mechanism: ``rows[k-1] = r(k)`` the number of rows kept for each candidate
    ``k``, ``l1[k-1] = max_j Σ_{i < r(k)} |B_int[i, j]|`` (exact; the kept vector's L1 sensitivity is
    ``s l1 / 2^30`` for a change of ``s`` records in one bin — the maximum column L1 norm)."""
    rows, l1 = _candidates(m, basis)
    return _row_block(m, basis, 0, m), rows, l1


def _coefficients(m: int, basis: str, arr: np.ndarray) -> list[int]:
    """``B_int @ x`` exactly, as Python ints, without the ``m x m`` matrix: row blocks of ``B_int`` times the
    counts split into 18-bit limbs (each int64 product-sum stays below ``2^63``: ``|B_int| <= 2^30 √(2/m) + 1``,
    so ``m |B_int| 2^18 <= 2^56`` for ``m <= 2^15``), recombined in integers. Always three limbs (counts
    ``< 2^52``): the work does not depend on the data."""
    rest = arr.astype(np.int64)
    cols = []
    for _ in range(0, 54, _LIMB):
        cols.append(rest & np.int64((1 << _LIMB) - 1))
        rest = rest >> np.int64(_LIMB)
    limbs = np.stack(cols, axis=1)
    out: list[int] = []
    for lo, hi in _blocks(m):
        part = _row_block(m, basis, lo, hi) @ limbs
        out += [a + (b << _LIMB) + (c << (2 * _LIMB)) for a, b, c in part.tolist()]
    return out


def _synthesis(m: int, basis: str, noisy: np.ndarray) -> np.ndarray:
    """``B̃_kept^T ĉ`` for the ``r = len(noisy)`` kept rows (post-processing), in row blocks."""
    value = np.zeros(m, dtype=np.float64)
    for lo, hi in _blocks(m, noisy.size):
        value += np.ldexp(_row_block(m, basis, lo, hi).astype(np.float64), -PRECISION).T @ noisy[lo:hi]
    return value


def _l2_record(nb: Neighbours) -> Fraction:
    """L2 norm bound of the change of the histogram: 1 (add/remove), √2 (replace, as a rational upper
    bound), ``max_rows`` (privacy unit: ``||v||_2 <= ||v||_1``)."""
    if isinstance(nb, Replace):
        return Fraction(_exact.up_until(lambda t: Fraction(t) ** 2 >= 2, math.sqrt(2.0)))
    if isinstance(nb, PrivacyUnit):
        return Fraction(int(nb.max_rows))
    return Fraction(1)


def _noise_law(l1: int, rows: int, sens: int, eps: float) -> tuple[float, int, int]:
    """``(g, a, D)`` for releasing ``rows`` kept coefficients: the lattice step ``g = 2^-e`` (a power of two
    ``<= Δ1/(rows 2^20)``, ``Δ1 = sens l1 / 2^30``), ``a = e - 30`` (coefficients in lattice units are
    ``c_int 2^a``) and the integer L1 sensitivity ``D = ceil(sens l1 2^a) + rows`` of the rounded vector
    (each coordinate's rounding moves by at most one step between neighbours)."""
    delta1 = Fraction(sens * l1, 2**PRECISION)
    g = float(lattice_granularity(_exact.float_at_least(delta1), coords=rows))
    e = -math.frexp(g)[1] + 1  # g = 2^-e
    a = e - PRECISION
    scaled = Fraction(sens * l1) * (Fraction(2) ** a)
    return g, a, math.ceil(scaled) + rows


def _round_shift(c: int, a: int) -> int:
    """``round(c 2^a)`` exactly (half up)."""
    if a >= 0:
        return c << a
    return (c + (1 << (-a - 1))) >> (-a)


def efpa_scores(coeffs: list[int], rows: np.ndarray, public: np.ndarray) -> list[Fraction]:
    """Exact quality of each candidate: ``-(isqrt(Σ_{i >= r(k)} c_i^2)/2^30 + public[k-1])``, where
    ``isqrt/2^30`` is the norm ``||B̃_tail x||_2`` rounded down by less than ``2^-30``."""
    tails = [0] * (len(coeffs) + 1)
    acc = 0
    for i in range(len(coeffs) - 1, -1, -1):
        acc += coeffs[i] * coeffs[i]
        tails[i] = acc
    two_p = 2**PRECISION
    return [-(Fraction(math.isqrt(tails[int(r)]), two_p) + Fraction(float(p)))
            for r, p in zip(rows, public, strict=True)]


def efpa(counts: ArrayLike, epsilon: float, *, basis: str = "dft", selection_share: float = 0.5,
         neighbours: Neighbours | None = None, accountant: Accountant | None = None, rng: RandomSource | None = None,
         description: str = "") -> Release:
    """EFPA: keep the ``k`` lowest-frequency Fourier coefficients, ``k`` chosen privately; noise them; invert.

    Parameters
    ----------
    counts:
        The true bin counts, a 1-D array of at most 32,768 non-negative integers over a public domain.
    epsilon:
        The privacy parameter, > 0.
    basis:
        ``"dft"`` (default, EFPA's real Fourier basis) or ``"dct"`` (orthonormal DCT-II); see the module
        docstring.
    selection_share:
        The share of ``epsilon`` spent on choosing ``k`` (in (0, 1); default 1/2).
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
    Pure ``epsilon``-DP by sequential composition: the exponential mechanism (``eps_select``) and, for the
    released ``k``, the Laplace step (``eps_noise``); the parts sum to at most ``epsilon`` exactly. Neighbours:
    add/remove one record (default), replace-one, or a privacy unit. Only the first term of the selection
    score, ``||x - P_k x||_2``, depends on the data; its sensitivity is the L2 norm of the histogram's change,
    ``1`` under add/remove, ``√2`` under replace-one, ``max_rows`` under a privacy unit, enlarged by
    ``(1 + m 2^-30)`` (the fixed-point basis is within ``m 2^-30`` of orthonormal in Frobenius norm) and
    ``+ 2^-30`` (exact integer square root, rounded down). The kept coefficients' L1 sensitivity is
    ``Δ1(k) = s · max_j Σ_{i<r} |B̃_ij|`` (the maximum column L1 norm of the kept rows, computed exactly;
    ``s`` = 1, 2 or ``max_rows``).

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness: ``eps_select = selection_share * epsilon``
    and ``eps_noise = epsilon - eps_select``, i.e. ``(1 - selection_share) epsilon`` (both rounded down by the
    exact splitter, so they sum to at most ``epsilon``; in ``params["budget"]``). With ``m = 1`` there is
    nothing to choose and the whole budget goes to the noise.

    Output law
    ----------
    1. ``k`` is chosen by the exponential mechanism (budget ``eps_select``) with EFPA's quality, minus the
       expected error with ``k`` coefficients: ``q(k) = -( ||x - P_k x||_2 + b_k √(2 r(k)) )`` — the
       reconstruction error (the norm of the dropped coefficients) plus the root expected energy of the
       Laplace noise on the ``r(k)`` kept ones, ``b_k = Δ1(k)/eps_noise`` (public).
    2. The ``r(k)`` kept coefficients (real and imaginary parts, i.e. the cos and sin rows) get exact
       discrete Laplace noise on a lattice ``g`` (a power of two ``<= Δ1/(r 2^20)``) with scale
       ``>= (Δ1 + r g)/eps_noise`` (the ``r g`` covers the rounding; relative inflation ``<= 2^-20``).
    3. Post-processing: ``x̂ = B̃_kept^T ĉ``.

    The :class:`Release`: ``value`` the float64 estimate of every bin; ``parts``: ``k`` (frequencies kept),
    ``kept`` (``r(k)`` real coefficients), ``coefficients`` (the noisy kept coefficients, float64), ``basis``,
    ``scale`` (the noise scale of the kept coefficients). ``params``: epsilon, basis, the budget split,
    ``score_sensitivity``.

    Error
    -----
    The estimate has the reconstruction error of dropping the ``m - r(k)`` highest frequencies (bias
    ``x - P_k x``) plus unbiased noise of total expected energy ``2 r(k) b_k^2`` spread by the orthonormal
    basis; ``k`` is chosen to minimise (privately) the sum of their scales.

    Running time: ``O(m^2)`` integer work (the exact transform; see the module docstring for why not an FFT)
    in ``O(m)`` memory. Measured (one shared core, issue #16): 0.35 s / 1.1 s of CPU for the first call at
    ``m = 4096 / 8192`` (the candidates' L1 norms, cached for the last four ``(m, basis)``), 0.14 s / 0.4 s
    after; the former dense basis took 1.5 s / 7.1 s and 2.3 GB at 8192.

    Errata
    ------
    Rastogi & Nath's bound ``√k Δ2`` on the kept coefficients' L1 sensitivity is replaced by the exact
    maximum column norm. The ``dpcomp_core`` reference implementation (the authors' code) adds Laplace noise
    to the **magnitudes** of the kept complex coefficients and releases their **true phases**: the phases are
    a deterministic function of the data, so that release is not differentially private (adding one record
    to bin 1 of ``[1, 0, 0, 0]`` turns the phase of ``F_1`` from 0 to ``-π/4``: the two output laws have
    disjoint supports; pinned by a test fixture). dpkit noises both real and imaginary parts. Its noise term
    ``√2 kept Δ2/eps2`` in the score is replaced by the exact root expected noise energy.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = efpa([10, 12, 15, 17, 15, 12, 10, 9], 1.0, rng=deterministic_source(1))
    >>> rel.value.shape, 1 <= rel.parts["k"] <= 5
    ((8,), True)
    """
    return run(_efpa_plan(counts, epsilon, basis=basis, selection_share=selection_share, neighbours=neighbours,
                          accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _efpa_plan(counts: Any, epsilon: float, *, basis: Any, selection_share: Any, neighbours: Neighbours | None,
               accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`efpa` (nothing drawn or charged)."""
    arr = _common.counts(counts)
    m = int(arr.size)
    if m > MAX_BINS:
        raise InvalidData("counts", f"too many bins for EFPA's exact O(m^2) transform (at most {MAX_BINS})")
    epsilon = check.epsilon(epsilon)
    if not isinstance(basis, str):
        raise WrongType("basis", "a str ('dft' or 'dct')")
    if basis not in BASES:
        raise InvalidParameter("basis", "must be 'dft' or 'dct'")
    share = check.probability("selection_share", selection_share)
    nb = _common.resolve_neighbours(neighbours, accountant)
    sens = _common.record_sensitivity(nb)
    rows, _ = _candidates(m, basis)
    ncand = int(rows.size)
    if ncand == 1:
        eps_select, eps_noise = 0.0, epsilon
    else:
        eps_select, eps_noise = _common.split_budget(epsilon, [share, 1.0 - share])
    laws, scales, public, score_sens = _plan(m, basis, nb, eps_noise)
    params = {"epsilon": epsilon, "basis": basis, "selection_share": share, "domain_size": m, "sensitivity": sens,
              "budget": {"select": eps_select, "noise": eps_noise}, "score_sensitivity": score_sens}

    def draw(rng: RandomSource) -> Outcome:
        coeffs = _coefficients(m, basis, arr)
        if ncand == 1:
            idx = 0
        else:
            scores = efpa_scores(coeffs, rows, public)
            idx = _common.choose(_lattice_scores(scores, score_sens), score_sens, eps_select, rng)
        r = int(rows[idx])
        g, a, _ = laws[idx]
        t = scales[idx]
        z = np.asarray(sample_discrete_laplace(t, r, rng=rng), dtype=np.int64)
        noisy = np.array([float(_round_shift(c, a) + int(zi)) * g for c, zi in zip(coeffs[:r], z, strict=True)])
        value = _synthesis(m, basis, noisy)
        parts = {"k": idx + 1, "kept": r, "coefficients": noisy, "basis": basis, "scale": g * t}
        return Outcome(np.asarray(value, dtype=np.float64), parts=parts)

    return Plan(mechanism="efpa", cost=PureDP(epsilon), draw=draw, sensitivity=float(sens), scale=None,
                params=params, neighbours=nb)


def _plan(m: int, basis: str, nb: Neighbours,
          eps_noise: float) -> tuple[list[tuple[float, int, int]], list[float], np.ndarray, float]:
    """Everything data-independent: per candidate the noise lattice law ``(g, a, D)`` and scale ``t`` (lattice
    units), the public score term ``g t √(2 r)`` (root expected noise energy), and the score sensitivity."""
    sens = _common.record_sensitivity(nb)
    rows, l1 = _candidates(m, basis)
    laws = [_noise_law(int(l1[i]), int(rows[i]), sens, eps_noise) for i in range(rows.size)]
    scales = [discrete_laplace_scale(d, eps_noise) for _, _, d in laws]
    public = np.array([g * t * math.sqrt(2.0 * r) for (g, _, _), t, r in zip(laws, scales, rows, strict=True)])
    score_sens = _exact.float_at_least(_l2_record(nb) * (1 + Fraction(m, 2**PRECISION)) + Fraction(1, 2**PRECISION))
    return laws, scales, public, score_sens


def _lattice_scores(scores: list[Fraction], sensitivity: float) -> np.ndarray:
    """The exact scores as floats that the exponential mechanism reads without rounding: each rounded to its
    lattice ``g`` (``u = round(q/g)``, the rounding the mechanism's own sensitivity allowance covers),
    shifted by the best (the law only depends on gaps) and gaps clipped at ``2^52`` steps
    (``max(u_i, max u - C)`` keeps the sensitivity)."""
    g = Fraction(float(lattice_granularity(sensitivity, coords=1)))
    u = [round(q / g) for q in scores]
    top = max(u)
    return np.array([float(max(v - top, -_CLIP) * g) for v in u], dtype=np.float64)
