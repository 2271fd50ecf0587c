"""Workload matrices and the singular value lower bound of the matrix mechanism (Li & Miklau 2012, 2013).

Public computations only (no data, no budget): they say how well *any* data-independent linear strategy
could answer a workload, so a benchmark can compare measured errors to the limit.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.histograms.workloads import _ranges

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["range_gram", "svd_bound", "svd_lower_bound", "workload_matrix"]

_MAX_GRAM = 8192  # the Gram matrix is n x n dense and its eigenvalues cost O(n^3)


def workload_matrix(ranges: ArrayLike, m: int) -> sp.csr_matrix:
    """The ``k x m`` 0/1 matrix of ``k`` range queries ``[lo, hi)`` (the ``(k, 2)`` arrays of
    :mod:`dpkit.histograms.workloads`) over ``m`` bins, ``scipy.sparse`` CSR. It stores ``Σ (hi - lo)``
    ones: for all ranges of a large domain use :func:`range_gram` (``O(m^2)``) instead.

    >>> workload_matrix([[0, 2], [1, 3]], 3).toarray().astype(int).tolist()
    [[1, 1, 0], [0, 1, 1]]
    """
    m = check.integer("m", m, minimum=1)
    r = _ranges(ranges, m)
    lengths = r[:, 1] - r[:, 0]
    rows = np.repeat(np.arange(r.shape[0]), lengths)
    first = np.cumsum(lengths) - lengths  # position of each range's first one in the flat list
    cols = np.arange(rows.size) - np.repeat(first - r[:, 0], lengths)
    return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(r.shape[0], m))


def range_gram(ranges: Any, m: int) -> np.ndarray:
    """``WᵀW`` of a range workload without building ``W``: entry ``(i, j)`` is the number of ranges containing
    both bins ``i`` and ``j`` (a 2-D suffix/prefix count over the ``(lo, hi)`` pairs; ``O(k + m^2)``)."""
    m = check.integer("m", m, minimum=1)
    if m > _MAX_GRAM:
        raise InvalidParameter("m", f"must be <= {_MAX_GRAM} for the dense Gram matrix")
    r = _ranges(ranges, m)
    c = np.bincount(r[:, 0] * (m + 1) + r[:, 1], minlength=(m + 1) ** 2).reshape(m + 1, m + 1).astype(np.float64)
    s = np.cumsum(c, axis=0)                       # lo <= a
    s = np.cumsum(s[:, ::-1], axis=1)[:, ::-1]     # hi >= b
    i = np.arange(m)
    lo = np.minimum.outer(i, i)
    hi = np.maximum.outer(i, i) + 1
    return s[lo, hi]


def _gram(workload: Any, m: Any) -> tuple[np.ndarray, int]:
    if m is not None:
        r = _ranges(workload, check.integer("m", m, minimum=1))
        return range_gram(r, m), int(r.shape[0])
    if sp.issparse(workload):
        w = sp.csr_matrix(workload, dtype=np.float64)
        if w.nnz and not np.all(np.isfinite(w.data)):
            raise InvalidParameter("workload", "must be finite")
    else:
        if workload is None or isinstance(workload, (str, bytes)):
            raise WrongType("workload", "a 2-D matrix (numpy array or scipy.sparse), or ranges with m")
        w = check.finite_array("workload", workload, ndim=2)
    if w.shape[0] == 0 or w.shape[1] == 0:
        raise InvalidParameter("workload", "must not be empty")
    if w.shape[1] > _MAX_GRAM:
        raise InvalidParameter("workload", f"must have at most {_MAX_GRAM} columns (bins)")
    g = w.T @ w
    return (g.toarray() if sp.issparse(g) else np.asarray(g)), int(w.shape[0])


def svd_bound(workload: Any, *, m: int | None = None) -> float:
    """``svdb(W) = (σ_1 + ... + σ_s)^2 / n``: the squared sum of the singular values of the ``k x n`` workload
    ``W`` over its number of columns ``n`` (the privacy-free factor of :func:`svd_lower_bound`). ``workload``
    is a matrix, or the ``(k, 2)`` range array when the domain size ``m`` is given."""
    g, _ = _gram(workload, m)
    return float(_sigma(g).sum() ** 2 / g.shape[0])


def _sigma(g: np.ndarray) -> np.ndarray:
    """Singular values of ``W`` from ``G = WᵀW``; eigenvalues within rounding of zero count as zero."""
    lam = np.linalg.eigvalsh((g + g.T) / 2.0)
    tol = g.shape[0] * np.finfo(np.float64).eps * max(float(np.max(np.abs(lam))), 1.0)
    return np.sqrt(np.where(lam > tol, lam, 0.0))


def svd_lower_bound(workload: Any, epsilon: float | None = None, delta: float | None = None, *,
                    rho: float | None = None, m: int | tuple[int, int] | None = None, total: bool = False) -> float:
    """Singular value lower bound on the error of **every** matrix-mechanism strategy for a workload.

    Matrix mechanism (Li et al. 2010): answer a strategy ``A`` (``p x n``, full column rank) with independent
    noise calibrated to its sensitivity, then ``Ŵx = W A⁺ (A x + z)``. Its total squared error over the ``k``
    workload queries is ``TSE = c · ‖A‖² · tr(WᵀW (AᵀA)⁻¹)`` with

    - ``(epsilon, delta)``, Gaussian noise (Li & Miklau 2012): ``‖A‖`` the largest column **L2** norm and
      ``c = P(epsilon, delta) = 2 ln(2/delta) / epsilon^2``;
    - ``epsilon``-DP, Laplace noise (``delta=None``; Li & Miklau 2013): ``‖A‖`` the largest column **L1**
      norm and ``c = 2 / epsilon^2``;
    - ``rho``-zCDP, Gaussian noise (``rho=`` instead of ``epsilon``): ``‖A‖`` the largest column **L2** norm
      (the L2 sensitivity ``Δ``) and ``c = 1 / (2 rho)`` (noise variance ``Δ² / (2 rho)``; the discrete
      Gaussian's variance is at most that, and equal to it to double precision at the scales dpkit uses).

    **Bound** (Li & Miklau 2012, Thm. "SVD bound"): for every ``A``,
    ``TSE >= c · (σ_1 + ... + σ_s)^2 / n`` with ``σ_i`` the singular values of ``W`` and ``n`` its number of
    columns. Proof: ``‖A‖_2² >= tr(AᵀA)/n`` (the largest column norm is at least the mean), and by
    Cauchy–Schwarz on ``tr(M)·tr(G M⁻¹) >= (tr G^{1/2})²`` (``M = AᵀA``, ``G = WᵀW``), the product is at
    least ``(Σ σ_i)² / n``. The L1 (Laplace) case follows because a column's L1 norm is at least its L2
    norm, so the same ``(Σσ)²/n`` bounds ``‖A‖_1² tr(G M⁻¹)``; it is valid but need not be tight.
    Neighbours: add/remove one record (column norms are the sensitivities).

    Returns the bound on the **mean squared error per workload query** (``TSE / k``; comparable with
    :func:`~dpkit.histograms.msae`), or on ``TSE`` with ``total=True``. ``workload`` is a ``k x n`` matrix
    (dense or sparse), or the ``(k, 2)`` range array of :mod:`dpkit.histograms.workloads` when ``m`` is
    given (then ``WᵀW`` is computed from the ranges, :func:`range_gram`). At most 8192 bins. 2-D rectangle
    workloads: ``m=(m1, m2)`` and ``workload=(ranges1, ranges2)`` mean every product of a row range and a
    column range (e.g. ``(all_ranges(m1), all_ranges(m2))``: all rectangles); the singular values of
    ``W1 ⊗ W2`` are the products ``σ_i τ_j``, so ``svdb = svdb(W1) · svdb(W2)``.

    Caveats: the bound covers data-independent linear unbiased strategies with independent noise (identity,
    ``H_b`` with least squares, Privelet, ...), not data-dependent algorithms (DAWA, AHP, MWEM can beat it on
    favourable data). dpkit draws *discrete* Laplace noise, whose variance at scale ``t`` is
    ``1/(2 sinh²(1/(2t))) ≈ 2t² - 1/6``, slightly below the continuous ``2t²`` the Laplace bound assumes; at
    small ``t`` (large ``epsilon``) a measured error can therefore dip a little under the Laplace bound.

    >>> import numpy as np
    >>> round(svd_lower_bound(np.eye(4), 1.0), 12)            # identity workload: the flat histogram is optimal
    2.0
    >>> round(svd_lower_bound([[0, 4]], 1.0, m=4), 12)       # one query of 4 bins: sigma = 2, bound 2*4/4
    2.0
    >>> round(svd_lower_bound(np.eye(4), rho=0.5), 12)       # zCDP: variance 1/(2 rho) per bin
    1.0
    """
    if rho is not None or epsilon is None:
        if epsilon is not None:
            raise InvalidParameter("rho", "give either epsilon or rho, not both")
        if rho is None:
            raise InvalidParameter("epsilon", "give epsilon (with delta for Gaussian (epsilon, delta)) or rho")
        if delta is not None:
            raise InvalidParameter("delta", "is not used with rho")
        rho = check.positive("rho", rho)
        total = check.flag("total", total)
        c = 1.0 / (2.0 * rho)
        if not (0.0 < c < math.inf):
            raise InvalidParameter("rho", "outside the range this bound can be computed for")
    else:
        epsilon = check.epsilon(epsilon)
        total = check.flag("total", total)
        if delta is not None:
            delta = check.probability("delta", delta)
        eps2 = epsilon * epsilon  # float products never raise: they under/overflow to 0 or inf
        if not (0.0 < eps2 < math.inf):
            raise InvalidParameter("epsilon", "outside the range this bound can be computed for")
        c = 2.0 / eps2 if delta is None else 2.0 * math.log(2.0 / delta) / eps2
        if not math.isfinite(c):
            raise InvalidParameter("epsilon", "outside the range this bound can be computed for")
    if isinstance(m, tuple):
        if len(m) != 2 or not isinstance(workload, tuple) or len(workload) != 2:
            raise InvalidParameter("workload", "a 2-D bound needs workload=(ranges1, ranges2) and m=(m1, m2)")
        parts = [_gram(w, mi) for w, mi in zip(workload, m, strict=True)]
        k = parts[0][1] * parts[1][1]
        svdb = math.prod(float(_sigma(g).sum() ** 2) / g.shape[0] for g, _ in parts)
    else:
        g, k = _gram(workload, m)
        svdb = float(_sigma(g).sum() ** 2) / g.shape[0]
    if k == 0:
        raise InvalidParameter("workload", "must contain at least one query")
    tse = c * svdb
    return tse if total else tse / k
