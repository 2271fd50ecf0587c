"""Privelet: noise on Haar wavelet coefficients (Xiao, Wang & Gehrke 2010/2011; Li et al. §4.2.5), 1-D and 2-D."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.histograms import _common
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["haar_forward", "haar_inverse", "privelet", "privelet_sensitivity"]

_MAX_CELLS = 2**26


def _height(m: int) -> int:
    """``h = max(1, ceil(log2 m))`` (at least one split, so the transform always has a detail level)."""
    h = 1
    while 2**h < m:
        h += 1
    return h


def haar_forward(x: Any) -> np.ndarray:
    """Integer Haar transform along the last axis (length ``2^h``, ``h >= 1``; leading axes are batch axes).

    Output order: the total ``T``, then for every internal node of the binary tree, top first and left to
    right, ``d_v = (sum of the left half) - (sum of the right half)``. Exact for integers (no division).
    Privelet's normalised coefficients are ``h_0 = T/2^h`` and ``h_v = d_v/size(v)``.

    >>> haar_forward([7, 5, 6, 2]).tolist()
    [20, 4, 2, 4]
    """
    cur = np.asarray(x)
    n = cur.shape[-1]
    if n < 2 or n & (n - 1):
        raise InvalidParameter("x", "the last axis must have length 2^h with h >= 1")
    details: list[np.ndarray] = []
    while cur.shape[-1] > 1:
        pairs = cur.reshape(*cur.shape[:-1], -1, 2)
        details.insert(0, pairs[..., 0] - pairs[..., 1])
        cur = pairs.sum(axis=-1)
    return np.concatenate([cur, *details], axis=-1)


def haar_inverse(c: Any) -> np.ndarray:
    """Inverse of :func:`haar_forward` (float64): top-down, ``S_left = (S + d)/2`` and ``S_right = (S - d)/2``;
    in Privelet's averages this is Li et al.'s ``a_ℓ = a + h_v``, ``a_r = a - h_v``.

    >>> haar_inverse([20, 4, 2, 4]).tolist()
    [7.0, 5.0, 6.0, 2.0]
    """
    c = np.asarray(c, dtype=np.float64)
    n = c.shape[-1]
    if n < 2 or n & (n - 1):
        raise InvalidParameter("c", "the last axis must have length 2^h with h >= 1")
    cur, offset, width = c[..., :1], 1, 1
    while offset < n:
        det = c[..., offset:offset + width]
        cur = np.stack([(cur + det) / 2.0, (cur - det) / 2.0], axis=-1).reshape(*c.shape[:-1], 2 * width)
        offset, width = offset + width, 2 * width
    return cur


def privelet_sensitivity(heights: tuple[int, ...], replace: bool = False, rows: int = 1) -> int:
    """Exact L1 sensitivity of the integer Haar coefficients (1-D: ``(h,)``; 2-D tensor: ``(h1, h2)``).

    Every bin's column of the (tensor) transform has ``Π(1 + h_i)`` entries, all ``±1``: adding or removing one
    record moves ``Π(1 + h_i)`` coefficients by one (times ``rows`` under a privacy unit). Replacing a record
    (moving it from bin ``x`` to bin ``y``) leaves the coefficients of their common ancestors unchanged: the
    exact worst case is ``2h`` in 1-D (``x`` and ``y`` in different halves of the root) and
    ``2(1+h1)(1+h2) - 4`` in 2-D (both coordinates differ, split at both roots); these are attained, and
    checked by brute force in the tests.
    """
    if len(heights) == 1:
        return 2 * heights[0] if replace else rows * (1 + heights[0])
    h1, h2 = heights
    full = (1 + h1) * (1 + h2)
    return 2 * full - 4 if replace else rows * full


def privelet(counts: ArrayLike, epsilon: float, *, neighbours: Neighbours | None = None,
             accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> Release:
    """Privelet (Haar wavelet) histogram over a public 1-D or 2-D domain.

    Parameters
    ----------
    counts:
        The true bin counts, a 1-D or 2-D array of non-negative integers over a public domain.
    epsilon:
        The privacy parameter, > 0.
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
    Pure ``epsilon``-DP: the geometric mechanism on the integer coefficient vector, whose exact L1
    sensitivity is ``s`` (:func:`privelet_sensitivity`): add/remove one record (default) ``1 + h`` (2-D:
    ``(1+h1)(1+h2)``); replace-one ``2h`` (2-D: ``2(1+h1)(1+h2) - 4``), smaller than twice the add/remove
    value because a moved record leaves the total and its common ancestors unchanged; privacy unit
    ``max_rows`` times the add/remove value. The reconstruction is post-processing.

    Cost
    ----
    ``PureDP(epsilon)``, charged **once**, before any randomness.

    Output law
    ----------
    1-D: the ``m`` bins are padded with public zero bins to ``2^h`` leaves, ``h = max(1, ceil(log2 m))``. The
    integer Haar coefficients (:func:`haar_forward`: the total and, per internal node, left sum minus right
    sum) each get independent discrete Laplace noise of one common scale ``t >= s/epsilon``, then the leaves
    are reconstructed exactly (:func:`haar_inverse`). 2-D: the standard tensor (row-column) Haar transform,
    each axis padded on its own; coefficient ``(i, j)`` is the product transform ``A1 X A2ᵀ``.

    This is Xiao et al.'s mechanism exactly: their coefficient ``c`` gets ``Lap(λ/W(c))`` with weights
    ``W(h_0) = 2^h`` and ``W(h_v) = size(v)``, ``λ = (1 + h)/epsilon`` (generalised sensitivity ``1 + h``), and
    ``h_0 = T/2^h``, ``h_v = d_v/size(v)``, so the integer coefficients ``T``, ``d_v`` get noise of scale
    ``λ``. Using the integers keeps the noise exact (discrete Laplace, no floating-point Laplace).

    The :class:`Release`: ``value`` the float64 reconstruction (same shape as ``counts``),
    ``parts["coefficients"]`` the noisy integer coefficients (int64; 1-D length ``2^h``, 2-D shape
    ``(2^h1, 2^h2)``), ``params`` the heights, sensitivity and scale.

    Error
    -----
    Unbiased. A leaf is ``T/2^h ± d_root/2^h ± d_1/2^(h-1) ± ... ± d_(h-1)/2`` (one node per level on its
    path), so its variance is ``V(t) (4^-h + Σ_{k=1..h} 4^-k) ≈ V(t)/3`` with ``V(t) = 2q/(1-q)^2``,
    ``q = e^{-1/t}``; range queries combine few coefficients (Xiao et al.: noise variance
    ``O((log m)^3/epsilon^2)`` per range). Li et al. §4.2.5: it behaves like constrained inference on a binary
    tree and does not beat ``H_b`` with ``b ≈ 16`` plus inference.

    Errata
    ------
    Li et al. §4.2.5: the book reconstructs "the count of ``v_3``" as "``v_4 = h_0 - h_1 + h_4 = 5 - 1 + 2 =
    6``". The path from the root to the third of four leaves goes right at the root (``-h_1``) and then left at
    the right child, whose coefficient is ``h_3`` (nodes numbered top first: ``h_1`` root, ``h_2``, ``h_3``);
    the leaf is ``v_3 = h_0 - h_1 + h_3``. Pinned by a test.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = privelet([3, 1, 4, 1, 5], 1.0, rng=deterministic_source(1))
    >>> rel.value.shape, rel.params["heights"], rel.params["sensitivity"]
    ((5,), (3,), 4)
    """
    return run(_privelet_plan(counts, epsilon, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _privelet_plan(counts: Any, epsilon: float, *, neighbours: Neighbours | None,
                   accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`privelet` (nothing drawn or charged)."""
    arr = _common.counts(counts, ndim=(1, 2))
    epsilon = check.epsilon(epsilon)
    nb = _common.resolve_neighbours(neighbours, accountant)
    heights = tuple(_height(int(n)) for n in arr.shape)
    padded_shape = tuple(2**h for h in heights)
    if int(np.prod(padded_shape, dtype=np.float64)) > _MAX_CELLS:
        raise InvalidParameter("counts", "the padded domain is too large (over 2^26 cells)")
    replace = _common.is_replace(nb)
    sens = privelet_sensitivity(heights, replace=replace, rows=_common.record_sensitivity(nb) if not replace else 1)
    t = discrete_laplace_scale(sens, epsilon)
    params = {"epsilon": epsilon, "shape": tuple(int(x) for x in arr.shape), "heights": heights,
              "padded_shape": padded_shape, "sensitivity": sens, "scale": t}

    def draw(rng: RandomSource) -> Outcome:
        x = np.zeros(padded_shape, dtype=np.int64)
        x[tuple(slice(0, n) for n in arr.shape)] = arr
        coef = haar_forward(x)
        if x.ndim == 2:
            coef = haar_forward(coef.T).T
        noisy = _common.noisy_counts(coef.ravel(), sens, epsilon, rng).reshape(coef.shape)
        rec = haar_inverse(noisy)
        if x.ndim == 2:
            rec = haar_inverse(rec.T).T
        value = np.array(rec[tuple(slice(0, n) for n in arr.shape)], dtype=np.float64)
        return Outcome(value, parts={"coefficients": noisy})

    return Plan(mechanism="privelet", cost=PureDP(epsilon), draw=draw, sensitivity=float(sens), scale=t,
                params=params, neighbours=nb)
