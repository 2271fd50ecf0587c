"""Fourier (Barak et al. 2007): noisy low-order Fourier coefficients, and the k-way marginals they determine.

For ``d`` **binary** attributes a record ``x ∈ {0,1}^d`` and a set ``S`` of attributes, the parity (character)
``chi_S(x) = (-1)^(sum_{i in S} x_i)``. The (unnormalised) Fourier coefficient of the data is the integer
``c_S = sum_records chi_S(x)`` (Barak et al.'s normalised ``f^(S) = 2^-d c_S``). The marginal on a set ``A`` of
``k`` attributes depends only on the coefficients of the subsets of ``A`` (inverse Walsh–Hadamard transform on
``{0,1}^k``)::

    M_A(a) = 2^-k sum_{S ⊆ A} c_S chi_S(a)

so releasing the noisy ``c_S`` for every ``|S| <= k`` gives every k-way marginal, and the marginals are
consistent with each other by construction (two of them sum to the same lower-order marginal, computed from
the same noisy coefficients) — "consistent but may be negative" (Li et al. ch. 6).

**Any finite domain** (Barak et al.'s bit encoding): an attribute ``j`` of ``k_j`` levels is written with
``b_j = ceil(log2 k_j)`` bits (its code in binary; an attribute of one level has no bit). A coefficient is then
indexed by a set of bits ``S``; its *support* is the set of attributes having a bit in ``S``. The released
coefficients are those whose support has at most ``k`` attributes — exactly the ones the bit-encoded table's
marginals on the bits of any ``k`` attributes depend on: for each support ``T`` the ``prod_{j in T}
(2^{b_j} - 1)`` non-empty bit masks, ``N = sum_{|T| <= k} prod_{j in T} (2^{b_j} - 1)`` in all (for binary
attributes ``sum_{j<=k} C(d, j)``, as above). The cells of the bit-encoded table outside the domain (codes
``k_j .. 2^{b_j} - 1``) hold no record; the noisy coefficients give them some mass, so the estimate is the
least-squares projection of the noisy coefficients onto the coefficient vectors of tables **on the domain's
cells** (the orthogonal projection: the noise is i.i.d. across coefficients), whose k-way marginals are
released: consistent, on the real domain, unbiased, and a linear function of the noise with an exact per-cell
standard deviation (:func:`fourier`'s Error section). For power-of-two sizes (binary included) the projection is
the inverse transform restricted to the domain.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.neighbours import PrivacyUnit, Replace, validate_neighbours
from dpkit.marginals.direct import _halfwidth
from dpkit.marginals.domain import MAX_CELLS, Domain, marginal
from dpkit.marginals.flat import _budget, _budget_params, _noise_plan, _noise_std, _records
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.marginals.domain import Records
    from dpkit.noise.source import RandomSource

__all__ = ["fourier", "fourier_coefficient_sensitivity", "fourier_ese"]

#: Most combinations the exact replace-one sensitivity of a non-binary domain enumerates (one per count of
#: differing attributes in each group of attributes with the same number of bits); above it the bound
#: ``2 (N - 1)`` is used (every coefficient but the count moves by at most 2).
MAX_REPLACE_STATES = 2**16
#: Largest ``N`` the non-binary sensitivity arithmetic handles exactly in int64.
_MAX_EXACT_N = 2**56


def _count_low(d: int, k: int) -> int:
    """``N = sum_{j <= k} C(d, j)``: the number of parities of weight at most ``k``."""
    return sum(math.comb(d, j) for j in range(k + 1))


def _odd_hits(d: int, k: int, t: int) -> int:
    """``#{S : |S| <= k, |S ∩ D| odd}`` for a set ``D`` of ``t`` attributes: the coefficients that change when a
    record's ``t`` attributes in ``D`` flip."""
    return sum(math.comb(t, j) * sum(math.comb(d - t, ell) for ell in range(k - j + 1))
               for j in range(1, min(t, k) + 1, 2))


def _bits(size: int) -> int:
    """``ceil(log2 size)``: the bits of a code ``0 .. size-1`` (0 for one level)."""
    return (int(size) - 1).bit_length()


def _low_sum(values: list[int], k: int) -> int:
    """``sum_{|T| <= k} prod_{j in T} values[j]`` (elementary symmetric sums up to ``k``; Python ints)."""
    e = [1] + [0] * k
    for v in values:
        for i in range(k, 0, -1):
            e[i] += e[i - 1] * v
    return sum(e)


def _general_sensitivity(sizes: tuple[int, ...], k: int, nb: Any) -> tuple[int, int, bool]:
    """``(L1, L2², exact)`` of the bit-encoded coefficient set (supports of at most ``k`` attributes)."""
    a = [2 ** _bits(s) - 1 for s in sizes if s >= 2]
    n = _low_sum(a, k)
    if isinstance(nb, PrivacyUnit):
        r = int(nb.max_rows)
        return r * n, r * r * n, True
    if not isinstance(nb, Replace):
        return n, n, True
    h, exact = _replace_hits(a, k, n)
    if h == 0:  # no attribute of 2+ levels: nothing moves; the noise plans' smallest sensitivity
        return 1, 1, exact
    return 2 * h, 4 * h, exact


def _replace_hits(a: list[int], k: int, n: int) -> tuple[int, bool]:
    """``max_U #{S : |S ∩ D| odd}`` over the sets ``U`` of attributes two records differ on (``a_j = 2^{b_j} -
    1``): ``(N - min_U G(U)) / 2`` with ``G(U) = [t^0..t^k] prod_{j not in U} (1 + a_j t) prod_{j in U} (1 - t)``
    (an attribute that differs flips the parity of exactly ``2^{b_j - 1}`` of its ``2^{b_j} - 1`` non-empty
    masks, whatever the two codes). Enumerated exactly over the number of differing attributes in each group of
    equal ``a_j``; ``(N - 1, False)`` (every coefficient but the count) when that exceeds
    :data:`MAX_REPLACE_STATES` combinations or ``N`` exceeds the int64 range used."""
    if not a:
        return 0, True
    groups: dict[int, int] = {}
    for v in a:
        groups[v] = groups.get(v, 0) + 1
    combos = math.prod(c + 1 for c in groups.values())
    if combos > MAX_REPLACE_STATES or n > _MAX_EXACT_N:
        return n - 1, False
    states = np.zeros((1, k + 1), dtype=np.int64)
    states[0, 0] = 1
    for v, c in groups.items():
        polys = np.zeros((c + 1, k + 1), dtype=np.int64)
        for u in range(c + 1):  # (1 + v t)^(c - u) (1 - t)^u truncated at degree k (|coefficients| <= N)
            p = [1] + [0] * k
            for f in [v] * (c - u) + [-1] * u:
                for i in range(k, 0, -1):
                    p[i] += p[i - 1] * f
            polys[u] = p
        new = np.zeros((states.shape[0], c + 1, k + 1), dtype=np.int64)
        for l_ in range(k + 1):
            for i in range(l_ + 1):
                new[:, :, l_] += states[:, i, None] * polys[None, :, l_ - i]
        states = np.unique(new.reshape(-1, k + 1), axis=0)
    g_min = int(states.sum(axis=1).min())
    return (n - g_min) // 2, True


def fourier_coefficient_sensitivity(d: int | Domain, k: int, neighbours: Neighbours | None = None) -> tuple[int, int]:
    """``(L1, L2²)`` of the integer coefficient vector released by :func:`fourier` for one neighbour step
    (exact, integers): ``d`` binary attributes (an int), or the bit-encoded coefficients of a
    :class:`~dpkit.marginals.Domain` (supports of at most ``k`` attributes, ``N`` of them as in the module
    docstring).

    - add/remove one record: every ``c_S`` moves by exactly ``±1``: ``(N, N)`` with ``N = sum_{j<=k} C(d, j)``
      for binary attributes, ``N = sum_{|T| <= k} prod_{j in T} (2^{b_j} - 1)`` in general (Barak et al.'s
      normalised coefficients move by ``2^-d`` each);
    - a privacy unit of ``r`` rows: each ``c_S`` moves by at most ``r``: ``(r N, r² N)``;
    - replace one record ``x`` by ``x'``: ``c_S`` moves by ``chi_S(x') - chi_S(x) ∈ {0, ±2}``, non-zero exactly
      when ``|S ∩ D|`` is odd for ``D = x xor x'`` (bit-encoded); with ``h`` the largest number of such ``S``
      over pairs of records, ``(2 h, 4 h)``. Binary: ``h = max_t h(t)``, ``|D| = t``. In general ``h`` depends
      only on the set ``U`` of attributes the records differ on (an attribute that differs flips the parity of
      exactly ``2^{b_j - 1}`` of its non-empty masks): ``h = max_U (N - G(U)) / 2``, ``G(U) = [t^0..t^k]
      prod_{j not in U} (1 + (2^{b_j} - 1) t) prod_{j in U} (1 - t)``, maximised exactly over ``U`` (by the
      number of differing attributes among those with the same number of bits) when that takes at most
      :data:`MAX_REPLACE_STATES` combinations, else bounded by ``h <= N - 1`` (the count never moves). A
      domain with no attribute of two or more levels has ``h = 0``; ``(1, 1)`` is returned (the noise plans'
      smallest sensitivity: conservative).

    >>> fourier_coefficient_sensitivity(4, 2)
    (11, 11)
    >>> from dpkit import Replace
    >>> fourier_coefficient_sensitivity(4, 2, Replace())
    (12, 24)
    >>> fourier_coefficient_sensitivity(Domain({"a": 3, "b": 2}), 1)
    (5, 5)
    """
    if isinstance(d, Domain):
        k = check.integer("k", k, minimum=1, maximum=len(d))
        if neighbours is not None:
            validate_neighbours(neighbours)
        if all(s == 2 for s in d.shape):
            return fourier_coefficient_sensitivity(len(d), k, neighbours)
        l1, l2sq, _ = _general_sensitivity(d.shape, k, neighbours)
        return l1, l2sq
    d = check.integer("d", d, minimum=1, maximum=1024)
    k = check.integer("k", k, minimum=1, maximum=d)
    if neighbours is not None:
        validate_neighbours(neighbours)
    n = _count_low(d, k)
    if isinstance(neighbours, Replace):
        h = max(_odd_hits(d, k, t) for t in range(1, d + 1))
        return 2 * h, 4 * h
    if isinstance(neighbours, PrivacyUnit):
        r = int(neighbours.max_rows)
        return r * n, r * r * n
    return n, n


def fourier_ese(d: int, k: int, epsilon: float = 1.0) -> float:
    """The analytic expected squared error (summed over cells) of one k-way marginal of ``d`` binary attributes
    from Fourier with Laplace noise of scale ``N / epsilon`` on each of the ``N = sum_{j<=k} C(d, j)``
    coefficients: each cell is ``2^-k`` times a signed sum of ``2^k`` noisy coefficients, so its variance is
    ``2^-k N² V_u`` and the ``2^k`` cells sum to ``N² V_u`` (``V_u = 2/epsilon²``, Li et al.'s notation).
    Compare :func:`~dpkit.marginals.direct_ese` (``2^k C(d,k)² V_u``).

    >>> fourier_ese(4, 2)
    242.0
    """
    d = check.integer("d", d, minimum=1, maximum=1024)
    k = check.integer("k", k, minimum=1, maximum=d)
    eps = check.epsilon(epsilon)
    n = _count_low(d, k)
    return float(n * n) * 2.0 / (eps * eps)


def _hadamard(k: int) -> np.ndarray:
    """``H[a, s] = (-1)^popcount(a & s)`` on ``{0,1}^k`` (bit ``k-1-j`` of an index is attribute ``j``)."""
    idx = np.arange(2**k)
    bits = np.bitwise_and.outer(idx, idx)
    parity = np.zeros_like(bits)
    for b in range(k):
        parity ^= (bits >> b) & 1
    out: np.ndarray = 1 - 2 * parity
    return out


def fourier(records: Records, k: int, epsilon: float | None = None, *, rho: float | None = None,
            noise: str | None = None, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
            rng: RandomSource | None = None, description: str = "") -> Release:
    """Fourier (Barak et al. 2007): all k-way marginals from noisy Fourier coefficients (any finite domain).

    Parameters
    ----------
    records:
        The private records (:class:`~dpkit.marginals.Records`, at least one; weighted records count each row
        ``weight`` times). Binary attributes are transformed directly; an attribute of ``k_j`` levels is
        bit-encoded with ``b_j = ceil(log2 k_j)`` bits (module docstring). A domain whose coefficient set or
        k-way marginals exceed :data:`~dpkit.marginals.domain.MAX_CELLS` (``2^27``) is refused
        (:class:`~dpkit.core.errors.InvalidParameter` naming ``k``, or ``records`` when even ``k = 1`` is too
        large; the message gives both sizes and points to :func:`~dpkit.marginals.direct` on chosen sets or
        :func:`~dpkit.marginals.mst` / :func:`~dpkit.marginals.smg`) before any charge.
    k:
        The order of the marginals, ``1 <= k <= d``: every coefficient whose support has at most ``k``
        attributes is released and every k-way marginal reconstructed.
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
    ``epsilon``-DP (pure; ``noise="laplace"``) or ``rho``-zCDP (``noise="gaussian"``) under ``neighbours``. The
    integer coefficients ``c_S = sum_records chi_S(x)`` of the (bit-encoded) records — binary: ``S`` a set of at
    most ``k`` attributes, ``N = sum_{j<=k} C(d, j)`` of them; in general ``S`` a set of bits whose support has
    at most ``k`` attributes, ``N = sum_{|T| <= k} prod_{j in T} (2^{b_j} - 1)``; ``S = ∅`` the record count —
    have the exact sensitivity of :func:`fourier_coefficient_sensitivity`: under add/remove every ``c_S`` moves
    by exactly ±1, so L1 ``N`` and L2 ``sqrt(N)``; a privacy unit of ``r`` rows ``r N`` and ``r sqrt(N)``;
    replace-one ``2h`` and ``2 sqrt(h)`` with ``h`` the largest number of coefficients whose parity two
    records' encodings change (exact by enumeration, or the stated bound ``h <= N - 1`` when the enumeration
    is too large: ``params["sensitivity_exact"]``). They get the exact :func:`~dpkit.mechanisms.discrete_laplace`
    with that L1 sensitivity (``t >= L1 / epsilon``) or :func:`~dpkit.mechanisms.discrete_gaussian` with that
    L2 sensitivity; the marginals are computed from the noisy coefficients and public sizes only
    (post-processing).

    Cost
    ----
    ``PureDP(epsilon)`` or ``ZCDP(rho)``, charged once to ``accountant`` (if given) before any random bit is
    drawn; a refused charge, or a refused input, draws nothing. ``params``: ``"coefficients"`` (``N``),
    ``"sensitivity_l1"``, ``"sensitivity_l2"``, ``"coefficient_scale"``, ``"coefficient_noise"``.

    Output law
    ----------
    ``parts["coefficients"]`` holds every noisy coefficient ``c_S + Z_S``, ``Z_S`` independent integer noise
    ``P[Z = z] ∝ exp(-|z| / t)`` (discrete Laplace, ``t`` the smallest float ``>= L1 / epsilon``) or
    ``∝ exp(-z² / (2 sigma²))`` (discrete Gaussian); ``t`` or ``sigma`` is ``params["coefficient_scale"]`` and
    the law ``params["coefficient_noise"]``.

    *Binary domains*: ``{S: int}`` for every attribute set ``|S| <= k`` (domain order; ``()`` first); ``value``
    is ``{A: M_A}`` for every k-way set ``A`` (``all_kway``), ``M_A(a) = 2^-k sum_{S ⊆ A} (c_S + Z_S)
    chi_S(a)``, a float64 array of shape ``(2,) * k`` (multiples of ``2^-k``, exact in float64).

    *Other domains*: ``{T: array}`` for every support ``T`` (attributes of at least 2 levels, ``|T| <= k``,
    by size then domain order), an int64 array of shape ``(2^{b_j} - 1 for j in T)`` whose entry
    ``[s_1 - 1, ..., s_t - 1]`` is the coefficient of the bits ``s_j`` (a mask over attribute ``j``'s code bits)
    — ``T = ()`` is the noisy count (0-d). With ``y`` the noisy vector and ``A`` the linear map from a table on
    the domain's cells to its coefficients, the estimate is ``x̂ = argmin ||A x - y||²`` (the orthogonal
    projection: identifiable part, computed in closed form — ``A^T A`` is diagonal on the tables that are
    non-constant exactly along a set ``U`` of attributes, eigenvalue ``prod(k) * sum_{T ⊇ U} prod_{j in U}
    2^{b_j}/k_j prod_{j in T \\ U} (2^{b_j} - k_j)/k_j``) and ``value[A]`` its marginal on ``A``, a float64 array
    of shape ``domain.shape_of(A)``. ``parts["cell_std"]`` maps each k-way set to its per-cell noise standard
    deviation (below); ``params["bits"]`` the bits per attribute. For power-of-two sizes this is the inverse
    transform of the binary case restricted to the domain.

    In both cases the marginals are consistent (any two agree on their common lower-order marginals and on
    their total), supported on the domain's cells, but may be negative. ``Release.noise`` is ``None``: the
    marginals' noise is a linear combination of coefficient noises, not one of the exact per-coordinate laws.

    Error
    -----
    Unbiased: the estimate is a fixed linear function of the noisy coefficients that returns the true marginals
    from the exact coefficients. Every cell of the marginal on ``A`` has the same noise variance,
    ``sigma_c² v_A`` with ``sigma_c²`` the coefficient noise variance (``2q/(1-q)²``, ``q = exp(-1/t)``, about
    ``2 N²/epsilon²``; or at most ``sigma²``) and ``v_A = sum_{U ⊆ A} prod_{j in A \\ U} (1/k_j) prod_{j in U}
    (1 - 1/k_j) / (prod_{j in A} k_j lam_U)`` (``lam_U`` the eigenvalue above divided by ``prod(k)``);
    binary and power-of-two domains: ``v_A = 1 / (cells of A)``, i.e. ``2^-k`` for binary. Summed over the
    ``2^k`` binary cells that is ``N² V_u`` (:func:`fourier_ese`), against Direct's ``2^k C(d,k)² V_u`` on the
    same marginals: Fourier's noise per marginal is lower for ``k >= 2`` once ``d`` is moderately large, and
    its marginals are consistent. ``params["noise_std"]`` is the per-cell standard deviation (the largest over
    the k-way sets; each in ``parts["cell_std"]`` for non-binary domains): exact for Laplace noise, an upper
    bound within 1e-8 for the discrete Gaussian with ``sigma >= 1``. ``Release.interval(confidence)`` gives
    per-cell intervals ``value ± w`` (``({A: lo}, {A: hi})``) holding with probability at least ``confidence``
    per cell: Gaussian noise ``w = sigma sqrt(2 v_A ln(2 / (1 - confidence)))`` (a cell is a linear combination
    ``sum c_S Z_S`` with ``||c||² = v_A`` of independent discrete Gaussians, hence ``sigma sqrt(v_A)``-sub-
    Gaussian, Canonne, Kamath & Steinke 2020), Laplace noise Chebyshev's ``w = s sqrt(v_A / (1 -
    confidence))`` (``s`` the exact coefficient noise std); both widened by ``1e-9 (1 + sum |y|)`` for the
    float arithmetic; no simultaneous interval. Negative cells are not corrected (Barak et al.'s LP over all
    cells is infeasible for large domains): the intervals and the std are for the unclipped estimate only;
    after clipping, rounding or a non-negative fit no interval is stated.

    References
    ----------
    Barak, Chaudhuri, Dwork, Kale, McSherry, Talwar, "Privacy, accuracy, and consistency too: a holistic solution
    to contingency table release", PODS 2007; Li, Lyu, Su, Yang (2016), ch. 6.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit import deterministic_source
    >>> from dpkit.marginals import Domain, Records, fourier
    >>> dom = Domain({"a": 2, "b": 2, "c": 2})
    >>> rec = Records(np.array([[0, 1, 1], [1, 1, 0], [0, 0, 0]]), dom)
    >>> rel = fourier(rec, 2, 1.0, rng=deterministic_source(1))
    >>> sorted(rel.value), len(rel.parts["coefficients"]), rel.params["coefficient_scale"]
    ([('a', 'b'), ('a', 'c'), ('b', 'c')], 7, 7.0)
    >>> rec3 = Records(np.array([[0, 2], [1, 1], [2, 0]]), Domain({"a": 3, "b": 3}))
    >>> rel3 = fourier(rec3, 1, 1.0, rng=deterministic_source(1))
    >>> rel3.params["coefficients"], rel3.params["bits"], rel3.value[("a",)].shape
    (7, {'a': 2, 'b': 2}, (3,))
    """
    return run(_fourier_plan(records, k, epsilon, rho=rho, noise=noise, neighbours=neighbours,
                             accountant=accountant), accountant=accountant, rng=rng, description=description)


def _fourier_plan(records: Any, k: Any, epsilon: Any, *, rho: Any, noise: Any, neighbours: Any,
                  accountant: Any) -> Plan:
    rec = _records(records)
    dom = rec.domain
    d = len(dom)
    k = check.integer("k", k, minimum=1, maximum=d)
    kind, budget = _budget(epsilon, rho, noise)
    nb = resolve_neighbours(neighbours, accountant)
    if all(s == 2 for s in dom.shape):
        return _binary_plan(rec, k, kind, budget, nb)
    return _general_plan(rec, k, kind, budget, nb)


def _fwht(x: np.ndarray, axis: int) -> np.ndarray:
    """The Walsh–Hadamard transform along ``axis`` (length ``2^b``): ``out[s] = sum_v (-1)^popcount(s & v) x[v]``
    (``b 2^b`` additions per vector; exact for integers)."""
    x = np.moveaxis(x, axis, -1)
    lead, n = x.shape[:-1], x.shape[-1]
    h = 1
    while h < n:
        y = x.reshape(*lead, n // (2 * h), 2, h)
        x = np.stack([y[..., 0, :] + y[..., 1, :], y[..., 0, :] - y[..., 1, :]], axis=-2).reshape(*lead, n)
        h *= 2
    return np.moveaxis(x, -1, axis)


def _forward(x: np.ndarray, axis: int) -> np.ndarray:
    """``R x`` along ``axis`` (``size`` codes -> the ``2^b - 1`` non-empty bit masks): ``R[s - 1, v] =
    (-1)^popcount(s & v)``, the codes padded with zero cells to ``2^b``."""
    size = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, 2 ** _bits(size) - size)
    out = _fwht(np.pad(x, pad), axis)
    return np.take(out, np.arange(1, out.shape[axis]), axis=axis)


def _centred_adjoint(z: np.ndarray, axis: int, size: int) -> np.ndarray:
    """``(I - J / size) R^T z`` along ``axis`` (``2^b - 1`` masks -> ``size`` codes, centred): the transform of
    ``z`` with a zero at mask 0, its first ``size`` entries, minus their mean."""
    pad = [(0, 0)] * z.ndim
    pad[axis] = (1, 0)
    w = np.take(_fwht(np.pad(z, pad), axis), np.arange(size), axis=axis)
    out: np.ndarray = w - w.mean(axis=axis, keepdims=True)
    return out


def _coefficients(rec: Records, supports: list[tuple[int, ...]]) -> list[np.ndarray]:
    """The exact integer coefficients ``(c_S)`` of each support ``T``, shape ``(2^{b_j} - 1 for j in T)``: the
    ``T``-marginal (a weighted count for weighted records) transformed along each attribute."""
    attrs = rec.domain.attrs
    out = []
    for t in supports:
        m = np.rint(marginal(rec, [attrs[j] for j in t])).astype(np.int64)  # counts below 2^53: exact
        for axis in range(len(t)):  # |partial sums| <= the number of records: exact in int64
            m = _forward(m, axis)
        out.append(m)
    return out


def _low_supports(active: list[int], k: int) -> list[tuple[int, ...]]:
    return [t for j in range(k + 1) for t in itertools.combinations(active, j)]


def _intervals(value: dict[tuple[str, ...], np.ndarray], var: dict[tuple[str, ...], float], kind: str,
               inner: Plan, noisy: np.ndarray) -> Any:
    """``confidence -> ({A: lo}, {A: hi})``: per-cell intervals of the unclipped estimate (variance factor
    ``var[A]`` per unit coefficient variance), from public quantities and released values only."""
    slack = 1e-9 * (1.0 + float(np.abs(noisy).astype(np.float64).sum()))  # float rounding, generously

    def interval(confidence: float) -> tuple[Any, Any]:
        w = {a: _halfwidth(kind, inner, var[a], confidence) + slack for a in value}
        return {a: v - w[a] for a, v in value.items()}, {a: v + w[a] for a, v in value.items()}

    return interval


def _binary_plan(rec: Records, k: int, kind: str, budget: float, nb: Any) -> Plan:
    """Binary attributes: the inverse Walsh–Hadamard transform of the noisy coefficients (exact in float64)."""
    dom = rec.domain
    d = len(dom)
    n_coef = _count_low(d, k)
    n_out = math.comb(d, k) * 2**k
    if n_coef > MAX_CELLS or n_out > MAX_CELLS:
        raise InvalidParameter("k", f"{n_coef} coefficients and {n_out} marginal cells: too many; lower k")
    l1, l2sq = fourier_coefficient_sensitivity(d, k, nb)
    subsets = _low_supports(list(range(d)), k)
    coef = np.concatenate([c.reshape(-1) for c in _coefficients(rec, subsets)]).astype(np.int64)
    inner = _noise_plan(coef, kind, budget, l1, l2sq)
    index = {s: i for i, s in enumerate(subsets)}
    attrs = dom.attrs
    hadamard = _hadamard(k)
    targets = list(itertools.combinations(range(d), k))
    # for each k-way set A and each bit mask s over A's positions (bit k-1-j is A[j]), the coefficient index
    gather = np.array([[index[tuple(a[j] for j in range(k) if (mask >> (k - 1 - j)) & 1)]
                        for mask in range(2**k)] for a in targets], dtype=np.int64)

    def draw(rng: RandomSource) -> Outcome:
        noisy = np.asarray(inner.sample(rng).value, dtype=np.int64).reshape(-1)
        sub = noisy[gather].astype(np.float64)  # (targets, 2^k)
        cells = (sub @ hadamard.T.astype(np.float64)) / float(2**k)
        value = {tuple(attrs[i] for i in a): cells[j].reshape((2,) * k) for j, a in enumerate(targets)}
        coefficients = {tuple(attrs[i] for i in s): int(noisy[index[s]]) for s in subsets}
        return Outcome(value, parts={"coefficients": coefficients},
                       interval_fn=_intervals(value, {a: v_cell for a in value}, kind, inner, noisy))

    std = _noise_std(inner) / math.sqrt(2.0**k)
    v_cell = 2.0**-k
    params = {**_budget_params(kind, budget), "noise": kind, "k": k, "coefficients": n_coef,
              "coefficient_noise": inner.noise, "coefficient_scale": inner.scale, "sensitivity_l1": l1,
              "sensitivity_l2": math.sqrt(l2sq), "noise_std": std}
    return Plan(mechanism="fourier", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=None,
                noise=None, params=params, neighbours=nb)


def _projection(sizes: tuple[int, ...], supports: list[tuple[int, ...]]) -> dict[tuple[int, ...], float]:
    """``lam[U]``: the eigenvalue of ``A^T A / prod(sizes)`` on the tables that are non-constant exactly along
    the attributes ``U`` (``A`` the bit-coefficient map restricted to the domain's cells):
    ``sum_{T ⊇ U} prod_{j in U} 2^{b_j} / k_j prod_{j in T \\ U} (2^{b_j} - k_j) / k_j``."""
    lam = {u: 0.0 for u in supports}
    for t in supports:
        for r in range(len(t) + 1):
            for u in itertools.combinations(t, r):
                term = 1.0
                for j in t:
                    term *= (2.0 ** _bits(sizes[j]) - (0 if j in u else sizes[j])) / sizes[j]
                lam[u] += term
    return lam


def _cell_variance(sizes: tuple[int, ...], a: tuple[int, ...], lam: dict[tuple[int, ...], float]) -> float:
    """The variance of every cell of the estimate on ``a`` per unit coefficient-noise variance:
    ``sum_{U ⊆ a} prod_{j in a \\ U} 1/k_j prod_{j in U} (1 - 1/k_j) / (prod_{j in a} k_j lam[U])``."""
    act = [j for j in a if sizes[j] >= 2]
    total = 0.0
    for r in range(len(act) + 1):
        for u in itertools.combinations(act, r):
            term = 1.0 / (math.prod(sizes[j] for j in a) * lam[u])
            for j in a:
                term *= (1.0 - 1.0 / sizes[j]) if j in u else 1.0 / sizes[j]
            total += term
    return total


def _general_plan(rec: Records, k: int, kind: str, budget: float, nb: Any) -> Plan:
    """Any finite domain: bit-encoded coefficients with supports of at most ``k`` attributes, projected back
    onto the domain's cells by least squares."""
    dom = rec.domain
    d = len(dom)
    sizes = dom.shape
    active = [j for j in range(d) if sizes[j] >= 2]
    masks = [2 ** _bits(sizes[j]) - 1 for j in active]
    n_coef = _low_sum(masks, k)
    e = [1] + [0] * k  # n_out = e_k(sizes): the cells of all k-way marginals
    for v in sizes:
        for i in range(k, 0, -1):
            e[i] += e[i - 1] * v
    n_out = e[k]
    if n_coef > MAX_CELLS or n_out > MAX_CELLS:
        too_big_at_1 = _low_sum(masks, 1) > MAX_CELLS or sum(sizes) > MAX_CELLS
        raise InvalidParameter("records" if too_big_at_1 or k == 1 else "k",
                               f"the bit-encoded domain needs {n_coef} Fourier coefficients and the {k}-way "
                               f"marginals have {n_out} cells (limit {MAX_CELLS} each): too large for fourier; "
                               + ("" if too_big_at_1 or k == 1 else "lower k, or ")
                               + "use dpkit.marginals.direct on chosen sets, or dpkit.marginals.mst / smg")
    l1, l2sq, exact = _general_sensitivity(sizes, k, nb)
    supports = _low_supports(active, k)
    coefs = _coefficients(rec, supports)
    shapes = [c.shape for c in coefs]
    inner = _noise_plan(np.concatenate([c.reshape(-1) for c in coefs]).astype(np.int64), kind, budget, l1, l2sq)
    lam = _projection(sizes, supports)
    row = {j: _forward(np.ones(sizes[j]), 0) for j in active}  # r_j = R_j 1
    attrs = dom.attrs
    targets = list(itertools.combinations(range(d), k))
    var = {a: _cell_variance(sizes, a, lam) for a in targets}
    coef_std = _noise_std(inner)

    def draw(rng: RandomSource) -> Outcome:
        noisy = np.asarray(inner.sample(rng).value, dtype=np.int64).reshape(-1)
        ys, pos = [], 0
        for shp in shapes:
            size = math.prod(shp)
            ys.append(noisy[pos:pos + size].reshape(shp))
            pos += size
        h = {u: np.zeros(tuple(sizes[j] for j in u)) for u in supports}
        for t, y in zip(supports, ys, strict=True):
            yf = y.astype(np.float64) / math.prod(sizes[j] for j in t)
            for r in range(len(t) + 1):
                for u in itertools.combinations(t, r):
                    z = yf
                    for axis in reversed(range(len(t))):  # last axis first: contracting keeps earlier axes
                        j = t[axis]
                        z = (_centred_adjoint(z, axis, sizes[j]) if j in u
                             else np.tensordot(z, row[j], axes=([axis], [0])))
                    h[u] += z
        for u in supports:
            h[u] /= lam[u]
        value = {}
        for a in targets:
            shape = tuple(sizes[j] for j in a)
            out = np.zeros(shape)
            act = [j for j in a if sizes[j] >= 2]
            for r in range(len(act) + 1):
                for u in itertools.combinations(act, r):
                    scale = 1.0 / math.prod(sizes[j] for j in a if j not in u)
                    out += h[u].reshape(tuple(sizes[j] if j in u else 1 for j in a)) * scale
            value[tuple(attrs[j] for j in a)] = out
        coefficients = {tuple(attrs[j] for j in t): y for t, y in zip(supports, ys, strict=True)}
        named = {tuple(attrs[j] for j in a): var[a] for a in targets}
        return Outcome(value, parts={"coefficients": coefficients,
                                     "cell_std": {a: coef_std * math.sqrt(v) for a, v in named.items()}},
                       interval_fn=_intervals(value, named, kind, inner, noisy))

    params = {**_budget_params(kind, budget), "noise": kind, "k": k, "coefficients": n_coef,
              "coefficient_noise": inner.noise, "coefficient_scale": inner.scale, "sensitivity_l1": l1,
              "sensitivity_l2": math.sqrt(l2sq), "sensitivity_exact": exact,
              "bits": {attrs[j]: _bits(sizes[j]) for j in range(d)},
              "noise_std": coef_std * math.sqrt(max(var.values()))}
    return Plan(mechanism="fourier", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=None,
                noise=None, params=params, neighbours=nb)
