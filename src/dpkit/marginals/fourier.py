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

Only binary domains are handled: a domain with an attribute of more than two levels is refused with a typed
error (binarise it first, or use :func:`~dpkit.marginals.direct`).
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.neighbours import PrivacyUnit, Replace, validate_neighbours
from dpkit.marginals.domain import MAX_CELLS
from dpkit.marginals.flat import _budget, _budget_params, _noise_plan, _noise_std, _records
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.marginals.domain import Records
    from dpkit.noise.source import RandomSource

__all__ = ["fourier", "fourier_coefficient_sensitivity", "fourier_ese"]


def _count_low(d: int, k: int) -> int:
    """``N = sum_{j <= k} C(d, j)``: the number of parities of weight at most ``k``."""
    return sum(math.comb(d, j) for j in range(k + 1))


def _odd_hits(d: int, k: int, t: int) -> int:
    """``#{S : |S| <= k, |S ∩ D| odd}`` for a set ``D`` of ``t`` attributes: the coefficients that change when a
    record's ``t`` attributes in ``D`` flip."""
    return sum(math.comb(t, j) * sum(math.comb(d - t, ell) for ell in range(k - j + 1))
               for j in range(1, min(t, k) + 1, 2))


def fourier_coefficient_sensitivity(d: int, k: int, neighbours: Neighbours | None = None) -> tuple[int, int]:
    """``(L1, L2²)`` of the integer coefficient vector ``(c_S)_{|S| <= k}`` of ``d`` binary attributes for one
    neighbour step (exact, integers).

    - add/remove one record: every ``c_S`` moves by exactly ``±1``: ``(N, N)`` with ``N = sum_{j<=k} C(d, j)``
      (Barak et al.'s normalised coefficients move by ``2^-d`` each);
    - a privacy unit of ``r`` rows: each ``c_S`` moves by at most ``r``: ``(r N, r² N)``;
    - replace one record ``x`` by ``x'``: ``c_S`` moves by ``chi_S(x') - chi_S(x) ∈ {0, ±2}``, non-zero exactly
      when ``|S ∩ D|`` is odd for ``D = x xor x'``; with ``h(t)`` the number of such ``S`` when ``|D| = t``,
      ``(2 max_t h(t), 4 max_t h(t))``.

    >>> fourier_coefficient_sensitivity(4, 2)
    (11, 11)
    >>> from dpkit import Replace
    >>> fourier_coefficient_sensitivity(4, 2, Replace())
    (12, 24)
    """
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
    """Fourier (Barak et al. 2007): all k-way marginals of binary attributes from noisy Fourier coefficients.

    Parameters
    ----------
    records:
        The private records (:class:`~dpkit.marginals.Records`, at least one) over a domain whose attributes all
        have exactly 2 levels. Other domains are refused (:class:`~dpkit.core.errors.InvalidParameter` naming
        ``records``) before any charge: binarise them, or use :func:`~dpkit.marginals.direct`.
    k:
        The order of the marginals, ``1 <= k <= d``: every coefficient of weight ``<= k`` is released and every
        k-way marginal reconstructed.
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
    integer coefficients ``c_S = sum_records (-1)^(sum_{i in S} x_i)``, ``|S| <= k`` (``N = sum_{j<=k} C(d, j)``
    of them, ``S = ∅`` the record count) have the exact sensitivity of
    :func:`fourier_coefficient_sensitivity`: under add/remove every ``c_S`` moves by exactly ±1, so L1 ``N``
    and L2 ``sqrt(N)`` (replace-one and privacy units: see there). They get the exact
    :func:`~dpkit.mechanisms.discrete_laplace` with that L1 sensitivity (``t >= L1 / epsilon``) or
    :func:`~dpkit.mechanisms.discrete_gaussian` with that L2 sensitivity; the marginals are computed from the
    noisy coefficients only (post-processing).

    Cost
    ----
    ``PureDP(epsilon)`` or ``ZCDP(rho)``, charged once to ``accountant`` (if given) before any random bit is
    drawn; a refused charge, or a refused input, draws nothing.

    Output law
    ----------
    ``parts["coefficients"]`` is ``{S: c_S + Z_S}`` for every attribute set ``S`` with ``|S| <= k`` (domain
    order; ``()`` first), ``Z_S`` independent integer noise ``P[Z = z] ∝ exp(-|z| / t)`` (discrete Laplace,
    ``t`` the smallest float ``>= L1 / epsilon``) or ``∝ exp(-z² / (2 sigma²))`` (discrete Gaussian); ``t`` or
    ``sigma`` is ``params["coefficient_scale"]`` and the law ``params["coefficient_noise"]``. ``value`` is
    ``{A: M_A}`` for every k-way set ``A`` (``all_kway``), ``M_A(a) = 2^-k sum_{S ⊆ A} (c_S + Z_S) chi_S(a)``, a
    float64 array of shape ``(2,) * k`` (multiples of ``2^-k``, exact in float64). The marginals are consistent
    (any two agree on their common lower-order marginals, all on the noisy total ``c_∅ + Z_∅``) but may be
    negative. ``Release.noise`` is ``None``: the marginals' noise is a signed average of coefficient noises,
    not one of the exact per-coordinate laws.

    Error
    -----
    Unbiased. Each cell of a k-way marginal has noise variance ``2^-k`` times the coefficient noise variance
    (``2q/(1-q)²``, ``q = exp(-1/t)``, about ``2 N²/epsilon²``; or at most ``sigma²``); summed over the
    ``2^k`` cells that is ``N² V_u`` (:func:`fourier_ese`), against Direct's ``2^k C(d,k)² V_u`` on the same
    marginals: Fourier's noise per marginal is lower for ``k >= 2`` once ``d`` is moderately large, and its
    marginals are consistent. ``params["noise_std"]`` is the per-cell noise standard deviation. Negative cells
    are not corrected (Barak et al.'s LP over ``2^d`` cells is infeasible for large ``d``).

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
    """
    return run(_fourier_plan(records, k, epsilon, rho=rho, noise=noise, neighbours=neighbours,
                             accountant=accountant), accountant=accountant, rng=rng, description=description)


def _fourier_plan(records: Any, k: Any, epsilon: Any, *, rho: Any, noise: Any, neighbours: Any,
                  accountant: Any) -> Plan:
    rec = _records(records)
    dom = rec.domain
    if any(s != 2 for s in dom.shape):
        raise InvalidParameter("records", "fourier needs binary attributes (2 levels each); binarise the domain "
                                          "or use dpkit.marginals.direct")
    d = len(dom)
    k = check.integer("k", k, minimum=1, maximum=d)
    kind, budget = _budget(epsilon, rho, noise)
    nb = resolve_neighbours(neighbours, accountant)
    n_coef = _count_low(d, k)
    n_out = math.comb(d, k) * 2**k
    if n_coef > MAX_CELLS or n_out > MAX_CELLS:
        raise InvalidParameter("k", f"{n_coef} coefficients and {n_out} marginal cells: too many; lower k")
    l1, l2sq = fourier_coefficient_sensitivity(d, k, nb)
    subsets = [s for j in range(k + 1) for s in itertools.combinations(range(d), j)]
    codes = rec.codes
    n = codes.shape[0]
    coef = np.empty(len(subsets), dtype=np.int64)
    for i, s in enumerate(subsets):
        odd = int(np.count_nonzero(codes[:, list(s)].sum(axis=1) & 1)) if s else 0
        coef[i] = n - 2 * odd
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
        return Outcome(value, parts={"coefficients": coefficients})

    std = _noise_std(inner) / math.sqrt(2.0**k)
    params = {**_budget_params(kind, budget), "noise": kind, "k": k, "coefficients": n_coef,
              "coefficient_noise": inner.noise, "coefficient_scale": inner.scale, "sensitivity_l1": l1,
              "sensitivity_l2": math.sqrt(l2sq), "noise_std": std}
    return Plan(mechanism="fourier", cost=inner.cost, draw=draw, sensitivity=inner.sensitivity, scale=None,
                noise=None, params=params, neighbours=nb)
