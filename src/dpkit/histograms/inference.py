"""Least-squares inference for data-independent histogram strategies (Hay et al. 2010; Li et al. 2010).

A *strategy* is a public ``k x n`` matrix ``A`` of linear counting queries over the ``n`` bins (a hierarchy of
interval counts, Haar coefficients, ...). A mechanism releases ``y = A x + z`` with independent zero-mean noise
of public variances ``v``. Everything here is **post-processing** of ``y`` with public ``A`` and ``v``: it costs
no privacy budget and never reads the true counts.

- :func:`least_squares` returns the generalised least-squares estimate (the BLUE)
  ``x̂ = argmin_x Σ_i (y_i - (A x)_i)^2 / v_i = (Aᵀ V⁻¹ A)⁻¹ Aᵀ V⁻¹ y`` (``A`` must have full column rank);
  for a complete b-ary hierarchy it coincides with the closed-form constrained inference of
  :func:`~dpkit.histograms.hierarchical` (Li et al. §4.2.3), and for the Haar strategy (square, invertible)
  with Privelet's reconstruction.
- :func:`nnls` adds the constraint ``x >= 0`` (biased: much more accurate per bin on sparse data, but less
  accurate for range queries there, whose sums collect the positive bias of the empty bins; see
  :func:`~dpkit.histograms.hierarchical`'s Error section).
- ``_tree_nnls`` (and the tree least squares behind ``hierarchical(inference="ls")``) solve the same
  problems exactly on a ``b``-ary hierarchy in ``O(h b^h)`` per step.
- :func:`hierarchy_strategy` and :func:`wavelet_strategy` build the strategies used by
  :func:`~dpkit.histograms.hierarchical` and :func:`~dpkit.histograms.privelet` as ``scipy.sparse`` CSR
  matrices, rows in the same order as those releases' ``parts``.

Padding: both builders pad the domain to a power of the branching factor with **public zero** bins, as the
releases do. The padded bins are not unknowns here (their columns are dropped), so the estimate uses that
public knowledge; on a domain that needs no padding it is exactly the closed form / the Haar inverse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["hierarchy_strategy", "least_squares", "nnls", "wavelet_strategy"]

_MAX_LEAVES = 2**26
_DENSE_MAX = 2048  # up to this many unknowns, solve the normal equations exactly (Cholesky)
_BVLS_MAX = 256  # up to this many unknowns, NNLS by the exact active-set method


def _height(m: int, b: int) -> int:
    h, size = 1, b
    while size < m:
        h, size = h + 1, size * b
    return h


def hierarchy_strategy(m: int, b: int = 2, *, root: bool = False) -> sp.csr_matrix:
    """The ``b``-ary hierarchy of interval counts over ``m`` bins, as a sparse 0/1 matrix.

    The domain is padded to ``b^h`` leaves, ``h = max(1, ceil(log_b m))``. Rows are the tree nodes level by
    level, top first, left to right (the root only if ``root``); row ``r`` has ones on the real bins its node
    covers. Without the root the rows match ``hierarchical(...).parts["levels"]`` concatenated.

    >>> hierarchy_strategy(4, 2, root=True).toarray().astype(int).tolist()
    [[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    """
    m = check.integer("m", m, minimum=1)
    b = check.integer("b", b, minimum=2)
    root = check.flag("root", root)
    h = _height(m, b)
    if b**h > _MAX_LEAVES:
        raise InvalidParameter("b", "the padded tree b^h is too large (over 2^26 leaves)")
    leaves = np.arange(m, dtype=np.int64)
    rows, cols, offset = [], [], 0
    for j in range(0 if root else 1, h + 1):
        width = b ** (h - j)
        rows.append(offset + leaves // width)
        cols.append(leaves)
        offset += b**j
    r, c = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix((np.ones(r.size), (r, c)), shape=(offset, m))


def wavelet_strategy(m: int) -> sp.csr_matrix:
    """The integer Haar strategy of Privelet over ``m`` bins (padded to ``2^h``, ``h = max(1, ceil(log2 m))``).

    Row 0 is the total ``T = Σ x``; then, for every internal node ``v`` of the binary tree (top first, left to
    right), ``d_v = (sum of the left half) - (sum of the right half)``. Privelet's coefficients are
    ``h_0 = T / 2^h`` and ``h_v = d_v / size(v)`` (Li et al. §4.2.5: ``(a_ℓ - a_r)/2`` with ``a`` the subtree
    averages); the integer form keeps the discrete noise exact. ``2^h`` rows; square when ``m = 2^h``.

    >>> wavelet_strategy(4).toarray().astype(int).tolist()
    [[1, 1, 1, 1], [1, 1, -1, -1], [1, -1, 0, 0], [0, 0, 1, -1]]
    """
    m = check.integer("m", m, minimum=1)
    h = _height(m, 2)
    if 2**h > _MAX_LEAVES:
        raise InvalidParameter("m", "the padded domain is too large (over 2^26 leaves)")
    leaves = np.arange(m, dtype=np.int64)
    rows, cols, vals = [np.zeros(m, dtype=np.int64)], [leaves], [np.ones(m)]
    offset = 1
    for d in range(h):
        width = 2 ** (h - d)
        rows.append(offset + leaves // width)
        cols.append(leaves)
        vals.append(np.where(leaves % width < width // 2, 1.0, -1.0))
        offset += 2**d
    r, c, v = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    return sp.csr_matrix((v, (r, c)), shape=(offset, m))


def _strategy(strategy: Any) -> sp.csr_matrix:
    if sp.issparse(strategy):
        a = sp.csr_matrix(strategy, dtype=np.float64)
    else:
        if strategy is None or isinstance(strategy, (str, bytes)):
            raise WrongType("strategy", "a 2-D matrix (numpy array or scipy.sparse)")
        arr = check.finite_array("strategy", strategy, ndim=2)
        a = sp.csr_matrix(arr)
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise InvalidParameter("strategy", "must not be empty")
    if a.nnz and not np.all(np.isfinite(a.data)):
        raise InvalidParameter("strategy", "must be finite")
    return a


def _system(strategy: Any, noisy: Any, variances: Any) -> tuple[sp.csr_matrix, np.ndarray]:
    """The whitened system ``(V^-1/2 A, V^-1/2 y)``."""
    a = _strategy(strategy)
    k = a.shape[0]
    y = check.finite_array("noisy", noisy, ndim=1)
    if y.size != k:
        raise InvalidParameter("noisy", "must have one value per strategy row")
    if variances is None or isinstance(variances, (str, bytes)):
        raise WrongType("variances", "a positive number or one positive number per strategy row")
    v = check.finite_array("variances", variances)
    if v.ndim == 0:
        v = np.full(k, float(v))
    if v.ndim != 1 or v.size != k:
        raise InvalidParameter("variances", "must be a scalar or have one value per strategy row")
    if np.any(v <= 0):
        raise InvalidParameter("variances", "must be positive")
    w = 1.0 / np.sqrt(v)
    return sp.csr_matrix(sp.diags(w) @ a), w * y


def least_squares(strategy: Any, noisy: ArrayLike, variances: ArrayLike, *, method: str = "auto") -> np.ndarray:
    """Generalised least squares: ``x̂ = (Aᵀ V⁻¹ A)⁻¹ Aᵀ V⁻¹ y`` (the BLUE of the bin counts).

    ``strategy`` is the public ``k x n`` query matrix ``A`` (dense or ``scipy.sparse``, full column rank),
    ``noisy`` the ``k`` released answers ``y`` and ``variances`` the public noise variances (a scalar or
    ``k`` values; for discrete Laplace noise of scale ``t``: ``2q/(1-q)^2``, ``q = e^{-1/t}``). Returns the
    ``n`` float64 estimates (post-processing: no privacy cost).

    ``method``: ``"normal"`` solves the normal equations by Cholesky (exact; ``O(n^3)``, dense),
    ``"lsmr"`` iterates on the sparse whitened system (``scipy.sparse.linalg.lsmr``, tolerance 1e-14;
    for large trees), ``"auto"`` picks ``"normal"`` up to 2048 unknowns.

    >>> import numpy as np
    >>> a = hierarchy_strategy(2, 2, root=True)          # [x0 + x1, x0, x1]
    >>> least_squares(a, np.array([10.0, 4.0, 5.0]), 1.0).round(6).tolist()
    [4.333333, 5.333333]
    """
    check.choice("method", method, ("auto", "normal", "lsmr"))
    aw, yw = _system(strategy, noisy, variances)
    n = aw.shape[1]
    if method == "normal" or (method == "auto" and n <= _DENSE_MAX):
        import scipy.linalg as la

        gram = (aw.T @ aw).toarray()
        rhs = aw.T @ yw
        try:
            c = la.cho_factor(gram, lower=True, check_finite=False)
        except la.LinAlgError:
            raise InvalidParameter("strategy", "must have full column rank") from None
        return np.asarray(la.cho_solve(c, rhs, check_finite=False), dtype=np.float64)
    from scipy.sparse.linalg import lsmr

    out = lsmr(aw, yw, atol=1e-14, btol=1e-14, conlim=1e12, maxiter=max(10 * n, 1000))
    if out[1] not in (1, 2, 4, 5):  # pragma: no cover - ill-conditioned or not converged
        raise InvalidParameter("strategy", "least squares did not converge (rank-deficient or ill-conditioned)")
    return np.asarray(out[0], dtype=np.float64)


def nnls(strategy: Any, noisy: ArrayLike, variances: ArrayLike) -> np.ndarray:
    """Non-negative weighted least squares: ``argmin_{x >= 0} Σ_i (y_i - (A x)_i)^2 / v_i``.

    Same arguments as :func:`least_squares`; solved with ``scipy.optimize.lsq_linear`` (bounds ``[0, inf)``;
    ``"bvls"``, exact, for up to 256 unknowns; else the interior ``"trf"`` method on the sparse system with
    ``tol=1e-10``: measured 0.4 s for a 4096-bin ``H_16`` and 5.9 s for ``H_2`` on one shared core, where it
    also stopped short of the optimum; ``hierarchical(inference="nnls")`` uses the exact tree solver instead,
    a few ms). The estimate is biased (it cannot go below zero): much more accurate per bin on sparse
    histograms, less accurate for range queries over them. Post-processing.

    >>> import numpy as np
    >>> a = hierarchy_strategy(2, 2, root=True)
    >>> nnls(a, np.array([1.0, 3.0, -4.0]), 1.0).round(6).tolist()
    [2.0, 0.0]
    """
    from scipy.optimize import lsq_linear

    aw, yw = _system(strategy, noisy, variances)
    n = aw.shape[1]
    if n <= _BVLS_MAX:
        res = lsq_linear(aw.toarray(), yw, bounds=(0.0, np.inf), method="bvls", tol=1e-12)
    else:
        res = lsq_linear(aw, yw, bounds=(0.0, np.inf), method="trf", tol=1e-10)
    return np.maximum(np.asarray(res.x, dtype=np.float64), 0.0)


# ------------------------------------------------------------------------------------ b-ary trees
def _tree_gls(levels: list[np.ndarray], variances: list[float], b: int, fixed: np.ndarray) -> np.ndarray:
    """Generalised least squares on a complete ``b``-ary tree, ``O(b^h)``: the leaf estimates minimising
    ``Σ_levels Σ_nodes (y - node sum)^2 / v_level`` with the leaves in ``fixed`` held at zero.

    ``levels`` are the noisy counts of levels ``1..h`` (top first, ``b^j`` nodes; or ``0..h`` when the root is
    observed too, ``levels[0]`` of one node: then there is no unobserved root), ``variances`` their
    per-level noise variances (> 0). Two passes (Gaussian belief propagation on the tree, flat prior):
    bottom-up, each node combines its own observation ``(y, v)`` with its children's summed estimate
    ``(S, V_S)`` into ``z = (V_S y + v S)/(v + V_S)``, variance ``v V_S/(v + V_S)`` (a fixed leaf: ``z = 0``,
    variance 0); top-down, the children share their parent's residual in proportion to their variances,
    ``z_c + (var_c / V_S)(n̄_parent - S)``. With no fixed leaf and equal sibling variances it is
    :func:`~dpkit.histograms.hierarchical`'s closed form.
    """
    h = len(levels)
    free = ~fixed
    z = [np.where(free, levels[-1], 0.0)]
    var = [np.where(free, variances[-1], 0.0)]
    for j in range(h - 2, -2, -1):  # j = -1: the unobserved root (none when levels[0] is an observed root)
        if j < 0 and z[0].size == 1:
            break
        s = z[0].reshape(-1, b).sum(axis=1)
        vs = var[0].reshape(-1, b).sum(axis=1)
        if j < 0:
            z.insert(0, s)
            var.insert(0, vs)
            break
        v = variances[j]
        z.insert(0, (vs * levels[j] + v * s) / (v + vs))
        var.insert(0, v * vs / (v + vs))
    est = z[0]
    for j in range(1, len(z)):
        zc, vc = z[j].reshape(-1, b), var[j].reshape(-1, b)
        vs = vc.sum(axis=1)
        share = np.divide(vc, vs[:, None], out=np.zeros_like(vc), where=vs[:, None] > 0)
        est = (zc + share * (est - zc.sum(axis=1))[:, None]).reshape(-1)
    return np.where(fixed, 0.0, est)


def _tree_gradient(x: np.ndarray, levels: list[np.ndarray], variances: list[float], b: int) -> np.ndarray:
    """``Aᵀ V⁻¹ (A x - y)`` for the tree strategy (levels ``1..h``), ``O(h b^h)``."""
    h = len(levels)
    sums = [x]
    for _ in range(h - 1):
        sums.insert(0, sums[0].reshape(-1, b).sum(axis=1))
    g = np.zeros(1)
    for j in range(h):
        r = (sums[j] - levels[j]) / variances[j]
        g = np.repeat(g, b) + r if j else r
    return g


def _tree_nnls(levels: list[np.ndarray], variances: list[float], b: int, m: int, *,
              max_iter: int = 200, pad: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Non-negative generalised least squares on the ``b``-ary tree of :func:`hierarchy_strategy` (levels
    ``1..h``, top first, padded leaves ``>= m`` held at their public value 0): the same optimum as
    :func:`nnls` on that strategy, in ``O(h b^h)`` per iteration.

    Primal-dual active set (semismooth Newton; Hintermüller, Ito & Kunisch 2002) on the KKT system
    ``g = Aᵀ V⁻¹ (A x - y)``, ``x >= 0``, ``g >= 0``, ``x g = 0``: the active set is
    ``{i : g_i - c x_i > 0}`` (``c`` = the Hessian's diagonal), each step solves the tree least squares with
    those leaves held at zero (:func:`_tree_gls`, exact), until the active set repeats. ``pad`` (a 2-D tree in
    tree order) replaces the suffix ``>= m`` by any mask of leaves held at zero; then every leaf is returned.
    Returns the estimate of the ``m`` real bins and the number of steps, or raises ``ArithmeticError`` when the KKT
    conditions are not met after ``max_iter`` steps (the caller then uses a general solver).
    """
    levels = [np.asarray(v, dtype=np.float64) for v in levels]
    n = levels[-1].size
    if pad is None:  # the padded leaves are the last ones (1-D); a 2-D tree passes its own mask (tree order)
        pad = np.arange(n) >= m
    else:
        m = n
    c = float(sum(1.0 / v for v in variances))
    active = pad.copy()
    x = _tree_gls(levels, variances, b, active)
    g = np.zeros(n)
    for it in range(1, max_iter + 1):
        new = pad | (g - c * x > 0)
        if np.array_equal(new, active) and it > 1:
            break
        active = new
        x = _tree_gls(levels, variances, b, active)
        g = np.where(active & ~pad, _tree_gradient(x, levels, variances, b), 0.0)
    else:
        raise ArithmeticError("active-set iteration did not converge")
    return np.maximum(x[:m], 0.0), it
