"""Workload-optimised measurement strategies for range queries (HDMM's OPT_0 / p-Identity, McKenna et al. 2018).

A *strategy* ``A`` is a ``q x m`` matrix of linear queries: the mechanism answers ``A x`` with Laplace-type noise
calibrated to ``A``'s largest column L1 norm and estimates the histogram by least squares, ``x̂ = A⁺ y``. For a
workload ``W`` (``k x m``) the expected total squared error of ``W x̂`` is ``Var(z) · ‖A‖_1² · ‖W A⁺‖_F²
= Var(z) · ‖A‖_1² · tr(WᵀW (AᵀA)⁻¹)``. HDMM's p-Identity parameterisation searches

    ``A(Θ) = [I; Θ] D``,  ``Θ >= 0`` (``p x m``),  ``D = diag(1 / (1 + 1ᵀΘ))``

(every column has L1 norm exactly 1, and ``A`` has full column rank through its identity block), minimising
``f(Θ) = tr(WᵀW (AᵀA)⁻¹) = tr(Δ G Δ (I + ΘᵀΘ)⁻¹)`` with ``G = WᵀW`` and ``Δ = D⁻¹`` by L-BFGS-B with an
analytic gradient. With ``M = I + ΘΘᵀ`` (``p x p``) the Woodbury identity gives ``(I + ΘᵀΘ)⁻¹ = I - Θᵀ M⁻¹ Θ`` and
``Θ (I + ΘᵀΘ)⁻¹ = M⁻¹ Θ``, so one evaluation costs ``O(p² m + p³)`` plus the products with ``G``; for the
workload of **all ranges** of ``m`` bins ``G_ij = (min(i, j) + 1)(m - max(i, j))`` (0-based) is semiseparable and
``G B`` costs ``O(m p)`` with two cumulative sums, so ``W`` (``m(m+1)/2 x m``) is never built; the same holds for
the workload of **all prefixes** ``[0, hi)`` (DPBench's prefix workload), ``G_ij = m - max(i, j)``.

2-D rectangle workloads (all ranges on each axis) use HDMM's OPT_⊗ by default: the Kronecker product
``A1 ⊗ A2`` of the two 1-D optima; its error factorises, ``tr((G1 ⊗ G2)((A1ᵀA1)⁻¹ ⊗ (A2ᵀA2)⁻¹)) = f1 · f2``,
and its columns still have L1 norm 1. For grids of at most 8192 cells a p-Identity strategy can instead be
optimised over the flattened grid (``optimize_strategy(workload, (m1, m2))``) with ``G1 ⊗ G2`` applied as an
operator (``O(r m (m1 + m2))`` per product); it is not a Kronecker product and has less error (all rectangles
of 16 × 16 / 32 × 32 / 64 × 64: 1.89 / 2.28 / 2.75× the SVD bound in RMSE instead of 2.02 / 2.57 / 2.97×).

**zCDP / Gaussian noise** (``optimize_strategy(..., norm="l2")``, ``strategy_histogram(counts, rho=...)``): the
sensitivity is the largest column **L2** norm and the problem ``min max_i X_ii · tr(G X⁻¹)`` over ``X = AᵀA`` is
convex with an exact dual (Li & Miklau 2012; Yuan et al. 2016); it is solved to a certified gap of 0.1% by a
multiplicative fixed point on the dual weights, and the square ``m x m`` optimum is measured on an integer
lattice with discrete Gaussian noise. Its expected error is within 0.5-3% (RMSE) of the L2 SVD bound, where no
Laplace strategy comes within 1.7× of the L1 one.

Everything but :func:`strategy_histogram`'s measurement is public computation (no data, no budget).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.linalg as sla
import scipy.optimize as sopt
import scipy.sparse as sp

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, PureDP
from dpkit.histograms import _common
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_gaussian_plan, discrete_gaussian_scale, discrete_laplace_scale

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["Strategy", "optimize_strategy", "strategy_histogram"]

#: Largest domain (bins per axis) for which a strategy is optimised.
_MAX_M = 8192
#: Largest dense workload matrix accepted (``k * m`` entries).
_MAX_DENSE = 50_000_000
#: Integer lattice of the measured strategy: its integer entries have column sums exactly ``_LATTICE`` (1-D) or
#: ``_LATTICE_2D**2`` (2-D), so integer counts give integer answers and discrete noise applies exactly.
_LATTICE = 2**20
_LATTICE_2D = 2**12
#: Largest total count (records) accepted, so that ``A_int x`` and its noise stay well inside int64.
_MAX_TOTAL = 2**40
_MAX_TOTAL_2D = 2**36
_MAX_ITER = 300


# ---------------------------------------------------------------------------------------------- the Gram operator

class _Gram:
    """``G = WᵀW`` as an operator: ``matmul(B)`` for ``B`` of shape ``(m, r)``, and ``diag``. Closed forms
    (``dense=None``): all ranges, ``G_ij = (min(i, j) + 1)(m - max(i, j))``; all prefixes (``prefixes=True``),
    ``G_ij = m - max(i, j)``. Both are ``u_min(i,j) v_max(i,j)`` (semiseparable)."""

    def __init__(self, m: int, dense: np.ndarray | None = None, *, prefixes: bool = False) -> None:
        self.m = m
        self.dense = dense
        i = np.arange(m, dtype=np.float64)
        if dense is None:
            self.u = np.ones(m) if prefixes else i + 1.0          # G_ij = u_min(i,j) * v_max(i,j)
            self.v = m - i
            self.diag = self.u * self.v
        else:
            self.diag = np.diag(dense).copy()

    def matmul(self, b: np.ndarray) -> np.ndarray:
        """``G b`` for ``b`` of shape ``(m, r)``."""
        return self.rmatmul(np.ascontiguousarray(b.T)).T

    def rmatmul(self, b: np.ndarray) -> np.ndarray:
        """``b G`` for ``b`` of shape ``(r, m)`` (``G`` is symmetric), row-wise: contiguous cumulative sums."""
        if self.dense is not None:
            return np.asarray(b @ self.dense)
        lower = np.cumsum(b * self.u, axis=1)                # Σ_{j<=i} u_j b_j
        bv = b * self.v
        upper = np.cumsum(bv, axis=1)
        np.subtract(upper[:, -1:], upper, out=upper)          # Σ_{j>i} v_j b_j
        return np.asarray(self.v * lower + self.u * upper)

    def trace(self) -> float:
        return float(np.sum(self.diag))


class _KronGram(_Gram):
    """``G1 ⊗ G2`` over the row-major flattening of an ``m1 x m2`` grid (every product of a workload query on
    the rows and one on the columns, e.g. all rectangles), as an operator: ``b G`` applies ``G2`` along the
    column axis and ``G1`` along the row axis of ``b`` reshaped to ``(r, m1, m2)``."""

    def __init__(self, g1: _Gram, g2: _Gram) -> None:
        self.m1, self.m2 = g1.m, g2.m
        self.g1, self.g2 = g1, g2
        self.m = g1.m * g2.m
        self.dense = None
        self.diag = np.multiply.outer(g1.diag, g2.diag).ravel()

    def rmatmul(self, b: np.ndarray) -> np.ndarray:
        r = b.shape[0]
        cols = self.g2.rmatmul(b.reshape(r * self.m1, self.m2)).reshape(r, self.m1, self.m2)
        rows = np.ascontiguousarray(cols.transpose(0, 2, 1)).reshape(r * self.m2, self.m1)
        both = self.g1.rmatmul(rows).reshape(r, self.m2, self.m1).transpose(0, 2, 1)
        return np.ascontiguousarray(both).reshape(r, self.m)


def _objective(theta: np.ndarray, delta: np.ndarray, gram: _Gram, *, grad: bool = True
               ) -> tuple[float, np.ndarray | None, np.ndarray | None]:
    """``f = tr(Δ G Δ (I + ΘᵀΘ)⁻¹)`` and its gradients with respect to ``Θ`` (``Δ`` fixed) and to ``δ``."""
    p = theta.shape[0]
    mmat = np.eye(p) + theta @ theta.T
    cho = sla.cho_factor(mmat, lower=True, check_finite=False)
    y = sla.cho_solve(cho, theta, check_finite=False)        # M⁻¹Θ = Θ (I + ΘᵀΘ)⁻¹
    yh = gram.rmatmul(y * delta) * delta                     # Y Δ G Δ  (p x m)
    f = float(np.sum(gram.diag * delta * delta) - np.sum(yh * theta))
    if not grad:
        return f, None, None
    # ∂f/∂Θ (Δ fixed) = -2 Θ X⁻¹ H X⁻¹ = -2 (YH - (YH Θᵀ) Y)
    g_theta = -2.0 * (yh - (yh @ theta.T) @ y)
    # ∂f/∂δ_j = 2 (G Δ X⁻¹)_jj = 2 (G_jj δ_j - Σ_i (Θ Δ G)_ij Y_ij)
    tdg = gram.rmatmul(theta * delta)
    g_delta = 2.0 * (gram.diag * delta - np.sum(tdg * y, axis=0))
    return f, g_theta, g_delta


def _p_identity_objective(flat: np.ndarray, p: int, gram: _Gram, scale: float = 1.0) -> tuple[float, np.ndarray]:
    """HDMM's p-Identity loss ``f(Θ) / scale`` with ``δ = 1 + 1ᵀΘ`` and its full gradient (flattened)."""
    theta = flat.reshape(p, gram.m)
    delta = 1.0 + theta.sum(axis=0)
    f, g_theta, g_delta = _objective(theta, delta, gram)
    assert g_theta is not None and g_delta is not None
    return f / scale, (g_theta + g_delta[None, :]).ravel() / scale


# ----------------------------------------------------------------------------------------------- the strategy

@dataclass(frozen=True)
class Strategy:
    """An optimised p-Identity strategy ``A = [I; Θ] D`` for one axis of ``m`` bins (public, data-independent).

    ``theta`` is ``Θ`` (``p x m``, non-negative), ``objective`` the float optimum ``tr(WᵀW (AᵀA)⁻¹)`` (the
    expected total squared error of the workload per unit noise variance; the columns of ``A`` have L1 norm 1),
    ``workload_size`` the number ``k`` of workload queries and ``workload`` ``"all_ranges"``, ``"prefixes"`` or
    ``"matrix"``. ``shape`` is ``()`` for a strategy over one axis, ``(m1, m2)`` for a strategy over the
    row-major flattening of an ``m1 x m2`` grid (``m = m1 m2``; its workload is every product of a row query and
    a column query, e.g. all rectangles).

    ``norm`` is ``"l1"`` (the p-Identity strategy above, for Laplace noise) or ``"l2"`` (the L2 matrix
    mechanism's optimum for Gaussian noise, :func:`optimize_strategy` with ``norm="l2"``): then ``a`` is the
    square ``m x m`` strategy with columns of L2 norm 1, ``objective`` is ``tr(WᵀW (AᵀA)⁻¹)`` at that ``a``,
    ``dual`` a certified lower bound on the L2 optimum (so ``objective / dual`` bounds the remaining gap; ``None``
    for a rank-deficient matrix workload, which is regularised), ``p`` is 0 and ``theta`` is empty.
    """

    m: int
    p: int
    theta: np.ndarray
    objective: float
    workload_size: int
    workload: str
    iterations: int
    shape: tuple[int, ...] = ()
    norm: str = "l1"
    a: np.ndarray | None = field(default=None, repr=False)
    dual: float | None = None
    _cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    def matrix(self) -> np.ndarray:
        """The float strategy: ``A = [I; Θ] D`` (``(m + p) x m``, columns of L1 norm 1) for ``norm="l1"``, the
        ``m x m`` L2 strategy (columns of L2 norm 1) for ``norm="l2"``."""
        if self.a is not None:
            return np.array(self.a)
        d = 1.0 / (1.0 + self.theta.sum(axis=0))
        return np.vstack([np.diag(d), self.theta * d])


def _lattice(strategy: Strategy, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer strategy ``[diag(a); Q]`` with every column summing to exactly ``n``: ``Q = floor(n Θ D)``,
    ``a = n - 1ᵀQ >= 1`` (so it has full column rank)."""
    theta = strategy.theta
    d = 1.0 / (1.0 + theta.sum(axis=0))
    q = np.floor(theta * d * n).astype(np.int64)
    a = n - q.sum(axis=0)
    return a, q


def _lattice_objective(a: np.ndarray, q: np.ndarray, n: int, gram: _Gram) -> float:
    """``tr(G (ÃᵀÃ)⁻¹)`` of the lattice strategy ``Ã = [diag(a); Q] / n`` (columns of L1 norm exactly 1):
    ``ÃᵀÃ = diag(a/n) (I + Θ'ᵀΘ') diag(a/n)`` with ``Θ' = Q / a``, so it is :func:`_objective` at
    ``(Θ', n/a)``."""
    f, _, _ = _objective(q / a, n / a.astype(np.float64), gram, grad=False)
    return f


def _initial(p: int, m: int) -> np.ndarray:
    """A deterministic, quasi-random start in ``[0, 1)`` (no random source: the optimisation is public)."""
    k = np.arange(p * m, dtype=np.float64)
    return np.asarray(((k * 0.6180339887498949) % 1.0).reshape(p, m))


def _optimize(gram: _Gram, p: int, max_iter: int) -> tuple[np.ndarray, float, int]:
    m = gram.m
    x0 = _initial(p, m).ravel()
    # the loss is normalised by tr(G) (the identity strategy's), so L-BFGS-B's first steps stay moderate: Θ = 0
    # (the identity) is a KKT point of the bounded problem and a huge first step would land on it
    res = sopt.minimize(_p_identity_objective, x0, args=(p, gram, gram.trace()), jac=True, method="L-BFGS-B",
                        bounds=sopt.Bounds(0.0, np.inf), options={"maxiter": max_iter, "maxcor": 10})
    theta = np.maximum(np.asarray(res.x).reshape(p, m), 0.0)
    f = _objective(theta, 1.0 + theta.sum(axis=0), gram, grad=False)[0]
    if not f < gram.trace():  # a local optimum worse than the identity strategy (Θ = 0): keep the identity
        theta, f = np.zeros((p, m)), gram.trace()
    return theta, f, int(res.nit)


#: The workloads with a closed-form Gram matrix: name -> (prefixes?, number of queries as a function of m).
_CLOSED = {"all_ranges": False, "prefixes": True}


def _closed_gram(workload: str, m: int) -> tuple[_Gram, int]:
    """The Gram operator and the number of queries of a named workload over ``m`` bins."""
    prefixes = _CLOSED[workload]
    return _Gram(m, prefixes=prefixes), (m if prefixes else m * (m + 1) // 2)


def _grid_gram(workload: str, m1: int, m2: int) -> tuple[_Gram, int]:
    """The Kronecker Gram operator and size of a named workload's products over an ``m1 x m2`` grid."""
    (g1, k1), (g2, k2) = _closed_gram(workload, m1), _closed_gram(workload, m2)
    return _KronGram(g1, g2), k1 * k2


@functools.lru_cache(maxsize=8)
def _grid_strategy(workload: str, m1: int, m2: int, p: int, max_iter: int) -> Strategy:
    gram, k = _grid_gram(workload, m1, m2)
    theta, f, nit = _optimize(gram, p, max_iter)
    theta.setflags(write=False)
    return Strategy(m=m1 * m2, p=p, theta=theta, objective=f, workload_size=k, workload=workload, iterations=nit,
                    shape=(m1, m2))


@functools.lru_cache(maxsize=16)
def _closed_strategy(workload: str, m: int, p: int, max_iter: int) -> Strategy:
    gram, k = _closed_gram(workload, m)
    theta, f, nit = _optimize(gram, p, max_iter)
    theta.setflags(write=False)
    return Strategy(m=m, p=p, theta=theta, objective=f, workload_size=k, workload=workload, iterations=nit)


def _default_p(m: int) -> int:
    return max(1, min(m // 16, 64))


# ------------------------------------------------------------------------------- the L2 (Gaussian) optimum

#: Default relative gap (primal / dual - 1) at which the L2 fixed point stops.
_L2_TOL = 1e-3


def _dense(gram: _Gram) -> np.ndarray:
    """``G`` as a dense ``m x m`` array (closed forms: ``G_ij = min(u_i, u_j) min(v_i, v_j)``, as ``u`` is
    non-decreasing and ``v`` decreasing)."""
    if gram.dense is not None:
        return gram.dense
    return np.asarray(np.minimum.outer(gram.u, gram.u) * np.minimum.outer(gram.v, gram.v))


def _l2_optimize(gram: _Gram, tol: float, max_iter: int) -> tuple[np.ndarray, float, float | None, int]:
    """The L2 matrix mechanism's optimum ``min tr(G X⁻¹)`` over ``X ≻ 0`` with ``max_i X_ii <= 1``.

    Dual: ``max_p (tr R_p)²`` over the simplex, ``R_p = (P^½ G P^½)^½``, ``P = diag(p)`` (Li & Miklau 2012's
    L2 bound, weighted). For any ``p`` the primal candidate ``X = P^{-½} R_p P^{-½}`` with its diagonal scaled to
    1 (``X' = E X E``, ``E = diag(X_ii)^{-½}``, i.e. the strategy's columns normalised) costs
    ``tr(G X'⁻¹) = Σ_kl λ_k λ_l^{-½} M_kl²`` with ``P^½ G P^½ = V Λ Vᵀ`` and ``M = Vᵀ diag((R_jj / p_j)^½) V``
    (one eigendecomposition and one product per iteration). The weights follow the multiplicative fixed point
    ``p <- p (R_jj / (tr R · p_j))^ω`` (``ω = 1`` is ``p <- diag(R) / tr R``, whose fixed points are the dual
    optimum; ``ω = 2`` converges in a few iterations here and falls back to 1 if the dual ever decreases),
    stopping when the best primal is within ``1 + tol`` of the best dual (a certified gap) or after
    ``max_iter`` iterations. Returns ``(A, objective, dual, iterations)`` with ``A = R^½ diag(R_jj)^{-½}``
    (symmetric factor, ``AᵀA = X'``, columns of L2 norm 1) and ``objective = tr(G (AᵀA)⁻¹)`` recomputed from
    ``A``. A rank-deficient ``G`` (a matrix workload that leaves some direction unqueried) is regularised by
    ``10⁻⁶ tr(G) / m`` on its diagonal so that the strategy has full rank; ``dual`` is then ``None``."""
    m = gram.m
    g = _dense(gram)
    dual_valid = True
    if gram.dense is not None:
        lam_g = np.linalg.eigvalsh(g)
        if lam_g[0] <= 1e-10 * lam_g[-1]:
            g = g + (1e-6 * float(np.trace(g)) / m) * np.eye(m)
            dual_valid = False
    p = np.full(m, 1.0 / m)
    best: tuple[float, np.ndarray, np.ndarray, np.ndarray] | None = None
    dual = 0.0
    prev = 0.0
    omega = 2.0
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported
        d = np.sqrt(p)
        lam, v = np.linalg.eigh(d[:, None] * g * d[None, :])
        lam = np.maximum(lam, lam[-1] * 1e-15)
        sq = np.sqrt(lam)
        dg = (v * v) @ sq                                     # diag(R)
        tr = float(sq.sum())                                  # tr(R)
        e = np.sqrt(dg / p)
        mm = v.T @ (e[:, None] * v)
        primal = float(np.sum((lam[:, None] / sq[None, :]) * mm * mm))
        if best is None or primal < best[0]:
            best = (primal, lam, v, dg)
        dual = max(dual, tr * tr)
        if best[0] <= dual * (1.0 + tol):
            break
        if tr * tr < prev:
            omega = 1.0
        prev = tr * tr
        pn = p * (dg / (tr * p)) ** omega
        p = pn / pn.sum()
    assert best is not None
    _, lam, v, dg = best
    a = (v * lam ** 0.25) @ v.T / np.sqrt(dg)[None, :]
    a /= np.sqrt(np.einsum("ij,ij->j", a, a))[None, :]      # columns of L2 norm 1 (to rounding)
    ainv = sla.lu_solve(sla.lu_factor(a, check_finite=False), np.eye(m), check_finite=False)
    f = float(np.sum(gram.matmul(ainv) * ainv))             # tr(G A⁻¹ A⁻ᵀ) with the true G
    return a, f, (dual if dual_valid else None), it


def _l2_strategy(gram: _Gram, k: int, workload: str, tol: float, max_iter: int) -> Strategy:
    a, f, dual, nit = _l2_optimize(gram, tol, max_iter)
    a.setflags(write=False)
    theta = np.zeros((0, gram.m))
    theta.setflags(write=False)
    return Strategy(m=gram.m, p=0, theta=theta, objective=f, workload_size=k, workload=workload, iterations=nit,
                    norm="l2", a=a, dual=dual)


@functools.lru_cache(maxsize=16)
def _closed_strategy_l2(workload: str, m: int, tol: float, max_iter: int) -> Strategy:
    gram, k = _closed_gram(workload, m)
    return _l2_strategy(gram, k, workload, tol, max_iter)


def _workload_gram(workload: Any) -> tuple[_Gram, int]:
    if sp.issparse(workload):
        w = sp.csr_matrix(workload, dtype=np.float64)
        if w.nnz and not np.all(np.isfinite(w.data)):
            raise InvalidParameter("workload", "must be finite")
    else:
        if workload is None or isinstance(workload, (bytes, bool)):
            raise WrongType("workload", "'all_ranges' or a 2-D workload matrix (numpy array or scipy.sparse)")
        w = check.finite_array("workload", workload, ndim=2)
    k, m = (int(s) for s in w.shape)
    if k == 0 or m == 0:
        raise InvalidParameter("workload", "must not be empty")
    if m > _MAX_M:
        raise InvalidParameter("workload", f"must have at most {_MAX_M} columns (bins)")
    if not sp.issparse(w) and k * m > _MAX_DENSE:
        raise InvalidParameter("workload", f"a dense workload must have at most {_MAX_DENSE} entries")
    g = w.T @ w
    g = g.toarray() if sp.issparse(g) else np.asarray(g, dtype=np.float64)
    if not np.any(g):
        raise InvalidParameter("workload", "must not be all zero")
    return _Gram(m, dense=np.asarray(g, dtype=np.float64)), k


def _check_named(workload: str, m: Any) -> None:
    """A named workload is one of the closed forms and needs ``m``."""
    if workload not in _CLOSED:
        raise InvalidParameter("workload", "must be 'all_ranges', 'prefixes' or a workload matrix")
    if m is None:
        raise InvalidParameter("m", "is required for a named workload")


def _bins(m: Any) -> int:
    """A 1-D number of bins, at most ``_MAX_M``."""
    m = check.integer("m", m, minimum=1)
    if m > _MAX_M:
        raise InvalidParameter("m", f"must be <= {_MAX_M}")
    return int(m)


def _check_matrix_m(m: Any, gram: _Gram) -> None:
    """With a workload matrix, ``m`` (optional) is 1-D and equals its number of columns."""
    if isinstance(m, tuple):
        raise InvalidParameter("m", "a grid (m1, m2) needs a named workload")
    if m is not None and check.integer("m", m, minimum=1) != gram.m:
        raise InvalidParameter("m", "must equal the workload's number of columns")


def optimize_strategy(workload: Any = "all_ranges", m: int | tuple[int, int] | None = None, *,
                      p: int | None = None, max_iter: int = _MAX_ITER, norm: str = "l1",
                      tol: float = _L2_TOL) -> Strategy:
    """Optimise HDMM's p-Identity strategy ``A = [I; Θ] D`` for a workload (public; no data, no privacy cost).

    ``workload`` is ``"all_ranges"`` (all ``m(m+1)/2`` ranges of ``m`` bins: give ``m``; ``WᵀW`` has a closed
    form and ``W`` is never built; the result is cached by ``(workload, m, p, max_iter)``), ``"prefixes"`` (the
    ``m`` prefixes ``[0, hi)``, ``G_ij = m - max(i, j)``, also closed-form and cached) or a ``k x m`` workload matrix
    (numpy or scipy.sparse; ``m`` is its number of columns, and if given must agree). With a named workload and
    ``m = (m1, m2)`` the strategy is optimised over the row-major flattening of the ``m1 x m2`` grid for every
    product of a row query and a column query (``"all_ranges"``: all rectangles), with the Gram matrix
    ``G1 ⊗ G2`` as an operator: not a Kronecker product of two 1-D strategies, so it can do better than
    :func:`strategy_histogram`'s default (e.g. all rectangles of 32 × 32: 2.27× the SVD bound in RMSE instead
    of 2.57×); ``m1 m2 <= 8192``. ``p`` is the number of
    extra strategy rows (default ``max(1, min(m // 16, 64))``: HDMM's ``m/16``, capped for
    speed); ``max_iter`` bounds the L-BFGS-B iterations.
    At most 8192 bins. The start is deterministic, so the result is reproducible.

    ``norm="l2"`` (for Gaussian noise, :func:`strategy_histogram` with ``rho``) computes instead the exact
    optimum of the **L2** matrix mechanism, ``min max_i X_ii · tr(WᵀW X⁻¹)`` over ``X = AᵀA ≻ 0``: by duality
    (Li & Miklau 2012; Yuan et al. 2016) ``X = Λ^{-½} (Λ^½ G Λ^½)^½ Λ^{-½}`` for the optimal dual weights ``Λ``,
    found by the multiplicative fixed point ``p <- diag(R) / tr R`` (over-relaxed, one symmetric
    eigendecomposition of ``m x m`` per iteration) and stopped at a **certified** relative gap
    ``objective / dual <= 1 + tol`` (default ``1e-3``) or after ``max_iter`` iterations; the strategy is the
    square ``m x m`` factor ``A = R^½ diag(R_jj)^{-½}`` (``R = (P^½ G P^½)^½``, columns of L2 norm 1). 1-D only
    (2-D counts use the Kronecker product of two 1-D L2 strategies); ``p`` must not be given. It reaches 1.011 /
    1.009 / 1.007 / 1.005 × the L2 SVD bound in RMSE on all ranges of m = 64 / 256 / 1024 / 4096 bins and 1.029
    / 1.022 / 1.016 / 1.012 on prefixes (measured, ``bench/histograms/strategy_ratios.py --part gauss``;
    the bound itself is that far from the optimum, which the dual certifies), in 2 (all ranges) or 3 (prefixes)
    iterations; time is ``O(m³)`` per iteration (m = 1024: 1 s; m = 4096: 50 s / 112 s on one shared core).
    ``max_iter`` caps the iterations (each one ``m x m`` eigendecomposition); a rank-deficient matrix workload
    (regularised by ``1e-6 tr(G)/m`` on the diagonal, no dual reported) needs more: 20 iterations, 474 s, for
    2,000 random ranges of 4096 bins. Cached like the L1 path for named workloads.

    Returns a :class:`Strategy` whose ``objective`` is ``tr(WᵀW (AᵀA)⁻¹)``: with noise of variance ``V`` per
    measurement at sensitivity 1 (L1 column norms for ``"l1"``, L2 for ``"l2"``), the expected total squared
    error of the workload answered by least squares is ``V · objective`` (``/ workload_size`` per query).

    >>> s = optimize_strategy("all_ranges", 64)
    >>> s.theta.shape, s.objective < 64 * 65 / 2 * (64 + 2) / 3      # beats the identity strategy
    ((4, 64), True)
    >>> s2 = optimize_strategy("prefixes", 64, norm="l2")
    >>> s2.matrix().shape, s2.objective <= s2.dual * (1 + 1e-3)        # certified within 0.1% of the optimum
    ((64, 64), True)
    """
    max_iter = check.integer("max_iter", max_iter, minimum=1)
    norm = check.choice("norm", norm, ("l1", "l2"))
    if norm == "l2":
        return _optimize_l2(workload, m, p, max_iter, tol)
    if isinstance(workload, str):
        _check_named(workload, m)
        if isinstance(m, tuple):
            if len(m) != 2:
                raise InvalidParameter("m", "a grid is given as (m1, m2)")
            m1, m2 = (check.integer("m", v, minimum=1) for v in m)
            if m1 * m2 > _MAX_M:
                raise InvalidParameter("m", f"the grid must have at most {_MAX_M} cells")
            p = _default_p(m1 * m2) if p is None else check.integer("p", p, minimum=1)
            if p > m1 * m2:
                raise InvalidParameter("p", "must be at most the number of cells")
            return _grid_strategy(workload, m1, m2, p, max_iter)
        m = _bins(m)
        p = _default_p(m) if p is None else check.integer("p", p, minimum=1)
        if p > m:
            raise InvalidParameter("p", "must be at most m")
        return _closed_strategy(workload, m, p, max_iter)
    gram, k = _workload_gram(workload)
    _check_matrix_m(m, gram)
    p = _default_p(gram.m) if p is None else check.integer("p", p, minimum=1)
    if p > gram.m:
        raise InvalidParameter("p", "must be at most the number of bins")
    theta, f, nit = _optimize(gram, p, max_iter)
    theta.setflags(write=False)
    return Strategy(m=gram.m, p=p, theta=theta, objective=f, workload_size=k, workload="matrix", iterations=nit)


def _optimize_l2(workload: Any, m: Any, p: Any, max_iter: int, tol: Any) -> Strategy:
    tol = check.positive("tol", tol)
    if tol >= 1.0:
        raise InvalidParameter("tol", "must be < 1 (a relative gap)")
    if p is not None:
        raise InvalidParameter("p", "is not used with norm='l2' (the strategy is square, m x m)")
    if isinstance(workload, str):
        _check_named(workload, m)
        if isinstance(m, tuple):
            raise InvalidParameter("m", "norm='l2' strategies are 1-D (2-D counts use the Kronecker product of two)")
        m = _bins(m)
        return _closed_strategy_l2(workload, m, tol, max_iter)
    gram, k = _workload_gram(workload)
    _check_matrix_m(m, gram)
    return _l2_strategy(gram, k, "matrix", tol, max_iter)


# ------------------------------------------------------------------------------------------ least squares

def _solver(a: np.ndarray, q: np.ndarray, n: int) -> Any:
    """``y -> (ÃᵀÃ)⁻¹ Ãᵀ y`` for ``Ã = [diag(a); Q] / n`` along axis 0 of ``y`` (``(m + p, r)``), by Woodbury:
    ``(D² + QᵀQ)⁻¹ = D⁻² - D⁻² Qᵀ (I + Q D⁻² Qᵀ)⁻¹ Q D⁻²`` with ``D = diag(a)`` (the ``1/n`` cancels)."""
    m = a.size
    af = a.astype(np.float64)
    qf = q.astype(np.float64)
    qd = qf / (af * af)                                     # Q D⁻²
    cho = sla.cho_factor(np.eye(q.shape[0]) + qd @ qf.T, lower=True)

    def solve(y: np.ndarray) -> np.ndarray:
        rhs = af[:, None] * y[:m] + qf.T @ y[m:]             # Ãᵀ y (times n)
        u = rhs / (af * af)[:, None]
        return np.asarray(u - qd.T @ sla.cho_solve(cho, qf @ u))

    return solve


# --------------------------------------------------------------------------------------------- the mechanism

def _dlap_variance(t: float) -> float:
    """Variance ``2q/(1-q)^2``, ``q = e^{-1/t}``, of the discrete Laplace law of scale ``t``."""
    q = math.exp(-1.0 / t)
    return 2.0 * q / (1.0 - q) ** 2


def _given_strategy(strategy: Any, m: int, ranges: bool, *, norm: str | None = None) -> Strategy:
    if not isinstance(strategy, Strategy):
        raise WrongType("strategy", "a Strategy from optimize_strategy (one per axis for 2-D counts)")
    if strategy.m != m:
        raise InvalidParameter("strategy", "was optimised for a different number of bins")
    if norm == "l1" and strategy.norm != "l1":
        raise InvalidParameter("strategy", "with epsilon (pure DP) the strategy must be optimize_strategy(..., "
                                           "norm='l1'); a norm='l2' strategy needs rho")
    return strategy


def strategy_histogram(counts: ArrayLike, epsilon: float | None = None, *, rho: float | None = None,
                       workload: Any = "all_ranges", strategy: Any = None, neighbours: Neighbours | None = None,
                       accountant: Accountant | None = None, rng: RandomSource | None = None,
                       description: str = "") -> Release:
    """Workload-optimised strategy histogram (HDMM's OPT_0 p-Identity; OPT_⊗ in 2-D), answered by least squares;
    with ``rho``, the zCDP variant: the L2 matrix mechanism's optimal strategy with discrete Gaussian noise.

    Parameters
    ----------
    counts:
        The true bin counts: a 1-D or 2-D array of non-negative integers over a **public** domain (its shape is
        public); at most 8192 bins per axis and ``2^40`` records in total (``2^36`` in 2-D).
    epsilon:
        The privacy parameter, > 0, for pure ``epsilon``-DP (Laplace path). Give exactly one of ``epsilon`` and
        ``rho``.
    rho:
        The zCDP parameter, > 0 (Gaussian path): ``rho``-zCDP with the L2-optimal strategy. Pure
        ``epsilon``-DP implies ``epsilon²/2``-zCDP, so ``rho = epsilon²/2`` is the like-for-like comparison.
    workload:
        ``"all_ranges"`` (all ranges in 1-D; all rectangles, i.e. every product of a row range and a column
        range, in 2-D), ``"prefixes"`` (all prefixes ``[0, hi)``; in 2-D every product of two prefixes) or, for
        1-D counts, a ``k x m`` workload matrix. Public.
    strategy:
        A :class:`Strategy` from :func:`optimize_strategy` (for 2-D counts a pair of them, rows then columns,
        measured as their Kronecker product, or one grid strategy ``optimize_strategy(workload, (m1, m2))`` over
        the flattened grid, which has less error); default: optimised here for ``workload`` (cached for
        ``"all_ranges"`` and ``"prefixes"``; Kronecker in 2-D). Public. With ``rho`` the strategy must come from
        ``optimize_strategy(..., norm="l2")`` (2-D: a pair of them; grid strategies are L1 only), and with
        ``epsilon`` from the default ``norm="l1"``.
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record).
    accountant:
        If given, charged ``PureDP(epsilon)`` (or ``ZCDP(rho)``) once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        Free text written into the receipt.

    Guarantee
    ---------
    Pure ``epsilon``-DP. The measured strategy is an **integer** matrix ``B = [diag(a); Q]`` (1-D) whose every
    column sums to exactly ``n = 2^20`` (``Q = floor(n Θ D)``, ``a = n - 1ᵀQ >= 1``): the float HDMM optimum
    ``A = [I; Θ] D`` scaled to the integer lattice, up to rounding. Changing one record moves the histogram by
    ``e_j`` (add/remove), ``e_j - e_i`` (replace-one) or at most ``max_rows`` in L1 (privacy unit), so ``B x``
    moves by at most ``s · n`` in L1 (``s`` = 1, 2, ``max_rows``); ``B x`` is integer, and the geometric
    mechanism with scale ``t >= s n / epsilon`` (exact rational check) is ``epsilon``-DP for it. In 2-D the
    strategy is ``B1 ⊗ B2`` with column sums exactly ``n² = 2^24`` (``n = 2^12`` per axis), or, with one grid
    strategy, the 1-D construction over the row-major flattened grid (``n = 2^20``). Least squares is
    post-processing.

    With ``rho``: ``rho``-zCDP. The measured strategy is the square integer matrix ``B = round(n A)`` (``n = 2^20``;
    2-D: ``B1 ⊗ B2`` with ``n = 2^12`` per axis) of the L2 optimum ``A`` (columns of L2 norm 1, so
    ``|B_ij| <= n``). Its L2 sensitivity is computed exactly from the integers: add/remove
    ``Δ² = max_j ||B e_j||²`` (an integer sum of squares); replace-one in 1-D the exact
    ``Δ² = max_{i != j} ||b_i - b_j||²`` (``BᵀB`` is exact in float64, every partial sum being an integer below
    2^53), in 2-D the bound ``(2 max_j ||b_j||)²``; a privacy unit of ``max_rows`` rows ``(max_rows Δ)²``; then
    ``Δ`` is the smallest float with ``Δ² >=`` that integer (exact rational check). ``B x`` is an integer
    vector that moves by an integer vector of L2 norm ``<= Δ``, and the discrete Gaussian with
    ``Δ² / (2 sigma²) <= rho`` (:func:`~dpkit.mechanisms.discrete_gaussian_plan`) is ``rho``-zCDP for it
    (Canonne, Kamath & Steinke 2020). Least squares (``B⁻¹ y``) is post-processing. Same record limits as
    the Laplace path (``|B_ij| <= n``, so ``B x`` stays below ``2^60`` in int64).

    Cost
    ----
    ``PureDP(epsilon)`` (or ``ZCDP(rho)``), charged **once**, before any randomness (one measurement of all
    strategy rows). Refused inputs (both or neither of ``epsilon``/``rho``, ``rho <= 0``/nan/inf, a strategy of
    the other norm, ...) raise a typed error naming the parameter and charge nothing.

    Output law
    ----------
    ``y = B x + Z`` with ``Z`` independent discrete Laplace, ``P[Z = k] ∝ exp(-|k|/t)``, ``t`` the smallest
    float ``>= s · n / epsilon`` (:func:`~dpkit.mechanisms.discrete_laplace_plan`, sampled inside the draw);
    in 2-D ``y = B1 X B2ᵀ + Z`` (grid strategy: ``y = B vec(X) + Z``, ``vec`` row-major). The
    :class:`Release`'s ``value`` is the least-squares estimate
    ``x̂ = B⁺ y`` (float64, same shape as ``counts``; in 2-D ``B1⁺ y B2⁺ᵀ``), computed with the Woodbury
    identity in ``O(m p²)``; ``parts["measurements"]`` holds the noisy integer answers ``y`` (1-D: the ``m``
    identity rows first, then the ``p`` rows of ``Q``; 2-D: the ``(m1+p1) x (m2+p2)`` array, or the
    ``m1 m2 + p`` vector with a grid strategy) and
    ``parts["strategy"]`` the integer strategy ``(a, Q)`` (2-D: one pair per axis). ``params`` holds the
    lattice ``n``, ``p``, the sensitivity and scale and the expected errors below.

    With ``rho``: ``y = B x + Z`` (2-D: ``B1 X B2ᵀ + Z``) with ``Z`` independent discrete Gaussian,
    ``P[Z = k] ∝ exp(-k²/(2 sigma²))``, ``sigma`` the smallest float with ``Δ²/(2 sigma²) <= rho``; ``value`` is
    ``x̂ = B⁻¹ y`` (LU factors cached with the strategy; 2-D ``B1⁻¹ y B2⁻ᵀ``); ``parts["measurements"]`` holds
    ``y`` (int64, ``m`` entries; 2-D ``m1 x m2``) and ``parts["strategy"]`` the integer ``B`` (2-D: the pair);
    ``params`` holds ``rho``, ``norm="l2"``, the lattice, ``sensitivity`` (``Δ``), ``sensitivity_squared`` (the
    exact integer), ``scale`` (``sigma``) and the expected errors.

    Error
    -----
    Unbiased; data-independent. The expected total squared error of the workload answered from ``x̂`` is
    exactly ``Var(Z) / n² · f(B)`` (2-D Kronecker: ``Var(Z) / n⁴ · f(B1) f(B2)``; grid strategy: ``f(B)`` with
    ``WᵀW = G1 ⊗ G2``) with ``Var(Z) = 2q/(1-q)^2``,
    ``q = e^{-1/t}`` (≈ ``2 (s n / epsilon)²``) and ``f(B) = tr(WᵀW (B̃ᵀB̃)⁻¹)``, ``B̃ = B / n`` (the HDMM
    objective at the lattice strategy, within rounding of the float optimum ``Strategy.objective``); so the
    mean squared error per workload query is ``params["expected_msae"]`` ≈ ``2 s² f / (epsilon² k)``
    (``params["expected_total_squared_error"]``: the total). In RMSE, as a ratio to the SVD lower bound
    (:func:`~dpkit.histograms.svd_lower_bound`) at m = 64, 256, 1024, 4096: all ranges 1.72, 1.98, 2.25, 2.59
    (MSE 2.97, 3.92, 5.06, 6.73), prefixes 1.84, 2.10, 2.36, 2.69, against 2.09, 2.19, 2.76, 2.78 and 2.06,
    2.57, 2.68, 3.15 for :func:`~dpkit.histograms.hierarchical` (b = 16, least squares); all rectangles of a
    256 × 256 grid 3.92 (QuadTree measured ≈ 11.7); with a grid strategy (``optimize_strategy(w, (m1, m2))``)
    16 × 16 / 32 × 32 / 64 × 64: 1.89 / 2.28 / 2.75, against 2.02 / 2.57 / 2.97 for the Kronecker default.
    Measured on DPBench's nine 4096-bin datasets (median of 135 cells): 2.91 on its 2,000 random ranges and
    2.56 on its prefixes, against Hb's 3.12 and 2.95 on the same samples. No p-Identity, general, signed or
    weighted-hierarchy strategy found comes within 1.5× of the bound under pure DP (at m = 64 all converge to
    ≥ 1.72; see ``docs/histograms.md``). Interval support is not provided on this path.

    With ``rho``: unbiased, data-independent; the expected total squared error is exactly
    ``Var(Z) · tr(WᵀW (BᵀB)⁻¹)`` (``Var(Z)`` the discrete Gaussian's variance, ``sigma²`` to double precision for
    ``sigma >= 8``, which holds unless ``rho`` is astronomically large), ``params["expected_total_squared_error"]``
    and per query ``params["expected_msae"]``. As an RMSE ratio to the zCDP SVD bound
    (``svd_lower_bound(..., rho=rho)``, ``(Σσ)²/(m k) / (2 rho)``), measured on the lattice ``B`` itself, at
    m = 64 / 256 / 1024 / 4096: all ranges 1.011 / 1.009 / 1.007 / 1.005, prefixes 1.029 / 1.022 / 1.016 /
    1.012 (the float optimum is certified within 0.1% of the true L2 optimum, so no linear strategy with
    Gaussian noise can do more than that better). On DPBench (9 datasets, 4096 bins, eps in {0.01, 0.1, 1} and
    ``rho = eps²/2``, 2 repetitions), median over 135 cells of the realised RMSE over that bound: 1.11 on the
    2,000 random ranges (expected 1.14: the bound of a 2,000-query sample is lower per query than all ranges')
    and 1.007 on the prefixes, 0.27× the RMSE of the Laplace path at ``epsilon`` on the same samples (a weaker
    guarantee: ``epsilon²/2``-zCDP is implied by, not equal to, ``epsilon``-DP). Per-bin intervals:
    ``Release.interval(confidence)`` gives
    ``x̂_j ± sigma ||row_j(B⁻¹)|| sqrt(2 ln(2/(1 - confidence)))`` (each ``x̂_j - x_j`` is a combination of
    independent discrete Gaussians, which are ``sigma²``-sub-Gaussian; conservative, widened by ``1e-9``
    relative for the float error of the solve; not simultaneous).

    References
    ----------
    McKenna, Miklau, Hay & Machanavajjhala, "Optimizing error of high-dimensional statistical queries under
    differential privacy", PVLDB 2018 (HDMM).
    Li & Miklau, "An adaptive mechanism for accurate query answering under differential privacy", PVLDB 2012
    (the L2 matrix mechanism's SVD bound and its weighted, exact form); Yuan, Yang, Zhang, Hao, Xu & Li,
    "Optimizing batch linear queries under exact and approximate differential privacy", ACM TODS 2016 (the
    L2 problem ``min tr(G X⁻¹)`` s.t. ``diag(X) <= 1`` as a convex program).
    Canonne, Kamath & Steinke, "The discrete Gaussian for differential privacy", NeurIPS 2020.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = strategy_histogram([3, 1, 4, 1, 5, 9, 2, 6], 1.0, rng=deterministic_source(1))
    >>> rel.value.shape, rel.parts["measurements"].shape, rel.params["p"]
    ((8,), (9,), 1)
    >>> rel = strategy_histogram([3, 1, 4, 1, 5, 9, 2, 6], rho=0.5, rng=deterministic_source(1))
    >>> rel.value.shape, rel.parts["strategy"].shape, rel.params["norm"]
    ((8,), (8, 8), 'l2')
    """
    if rho is not None or epsilon is None:
        arr = _common.counts(counts, ndim=(1, 2))
        if epsilon is not None:
            raise InvalidParameter("rho", "give either epsilon (pure DP) or rho (zCDP), not both")
        if rho is None:
            raise InvalidParameter("epsilon", "give epsilon (pure DP) or rho (zCDP)")
        nb = _common.resolve_neighbours(neighbours, accountant)
        plan = _gauss_plan(arr, rho, workload=workload, strategy=strategy, nb=nb)
        return run(plan, accountant=accountant, rng=rng, description=description)
    return run(_strategy_plan(counts, epsilon, workload=workload, strategy=strategy, neighbours=neighbours,
                              accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def _gram_1d(workload: Any, m: int, ranges: bool) -> tuple[_Gram, int]:
    """The Gram matrix and query count of a 1-D workload over ``m`` bins (named or a matrix)."""
    if ranges:
        return _closed_gram(workload, m)
    gram, k = _workload_gram(workload)
    if gram.m != m:
        raise InvalidParameter("workload", "must have one column per bin")
    return gram, k


def _check_size_and_workload(arr: np.ndarray, workload: Any) -> bool:
    """The checks both noise paths make on validated counts and the workload; ``True`` for a named workload."""
    if int(np.sum(arr)) > (_MAX_TOTAL if arr.ndim == 1 else _MAX_TOTAL_2D):
        raise InvalidData("counts", "total too large for the integer strategy (2^40 records in 1-D, 2^36 in 2-D)")
    if any(int(s) > _MAX_M for s in arr.shape):
        raise InvalidData("counts", f"at most {_MAX_M} bins per axis")
    ranges = isinstance(workload, str)
    if ranges and workload not in _CLOSED:
        raise InvalidParameter("workload", "must be 'all_ranges', 'prefixes' or a workload matrix")
    if not ranges and arr.ndim == 2:
        raise InvalidParameter("workload", "2-D counts take workload='all_ranges' (all rectangles) or 'prefixes'")
    return ranges


def _strategy_plan(counts: Any, epsilon: float, *, workload: Any, strategy: Any, neighbours: Neighbours | None,
                   accountant: Accountant | None) -> Plan:
    """The validated plan of :func:`strategy_histogram` (nothing drawn or charged)."""
    arr = _common.counts(counts, ndim=(1, 2))
    epsilon = check.epsilon(epsilon)
    ranges = _check_size_and_workload(arr, workload)
    nb = _common.resolve_neighbours(neighbours, accountant)
    sens = _common.record_sensitivity(nb)
    if arr.ndim == 1:
        m = int(arr.size)
        gram, k = _gram_1d(workload, m, ranges)
        if strategy is None:
            strat = optimize_strategy(workload, m) if ranges else optimize_strategy(workload)
        else:
            strat = _given_strategy(strategy, m, ranges, norm="l1")
        strategies = [strat]
        grams = [gram]
        n = _LATTICE
    elif isinstance(strategy, Strategy) and strategy.shape:   # one strategy over the flattened grid
        if strategy.shape != arr.shape:
            raise InvalidParameter("strategy", "was optimised for a different grid (optimize_strategy(w, (m1, m2)))")
        gram, k = _grid_gram(workload, *(int(s) for s in arr.shape))
        strategies, grams, n = [strategy], [gram], _LATTICE
    else:
        if strategy is None:
            strategies = [optimize_strategy(workload, int(s)) for s in arr.shape]
        else:
            if not isinstance(strategy, (tuple, list)) or len(strategy) != 2:
                raise WrongType("strategy", "a pair of Strategy objects (rows, columns) or one grid Strategy for "
                                            "2-D counts")
            strategies = [_given_strategy(s, int(mi), True, norm="l1") for s, mi in zip(strategy, arr.shape,
                                                                                       strict=True)]
        parts = [_closed_gram(workload, int(s)) for s in arr.shape]
        grams = [g for g, _ in parts]
        k = math.prod(ki for _, ki in parts)
        n = _LATTICE_2D
    lattices = [_lattice(s, n) for s in strategies]
    lattice = n ** len(lattices)
    t = discrete_laplace_scale(sens * lattice, epsilon)
    f = math.prod(_lattice_objective(a, q, n, g) for (a, q), g in zip(lattices, grams, strict=True))
    total = _dlap_variance(t) / float(lattice) ** 2 * f
    params = {"epsilon": epsilon, "shape": tuple(int(x) for x in arr.shape), "sensitivity": sens,
              "lattice": lattice, "p": tuple(s.p for s in strategies) if len(strategies) == 2 else strategies[0].p,
              "scale": t, "workload": workload if ranges else "matrix",
              "expected_total_squared_error": total, "expected_msae": total / k}
    solvers = [_solver(a, q, n) for a, q in lattices]

    def draw(rng: RandomSource) -> Outcome:
        if len(lattices) == 1:                               # 1-D, or one strategy over the flattened grid
            a, q = lattices[0]
            flat = arr.ravel()
            true = np.concatenate([a * flat, q @ flat])
            y = _common.noisy_counts(true, sens * lattice, epsilon, rng)
            value = solvers[0](y.astype(np.float64)[:, None])[:, 0].reshape(arr.shape)
            return Outcome(value, parts={"measurements": y, "strategy": lattices[0]})
        (a1, q1), (a2, q2) = lattices
        b1 = np.vstack([np.diag(a1), q1])
        b2 = np.vstack([np.diag(a2), q2])
        true2 = b1 @ arr @ b2.T
        y2 = _common.noisy_counts(true2, sens * lattice, epsilon, rng)
        rows = solvers[0](y2.astype(np.float64))             # (m1, m2 + p2)
        value2 = solvers[1](rows.T).T                        # (m1, m2)
        return Outcome(value2, parts={"measurements": y2, "strategy": tuple(lattices)})

    return Plan(mechanism="strategy_histogram", cost=PureDP(epsilon), draw=draw, sensitivity=float(sens * lattice),
                scale=t, params=params, neighbours=nb)


# ------------------------------------------------------------------------------ the zCDP (Gaussian) path

@dataclass(frozen=True)
class _L2Lattice:
    """The integer strategy ``B = round(n A)`` of an L2 strategy and what its measurement needs (public)."""

    b: np.ndarray            # int64, m x m
    lu: Any                  # scipy LU factors of B (float; the entries are integers < 2^53)
    inv: np.ndarray          # B⁻¹ (float)
    col: int                 # max_j ||b_j||² (exact integer)
    pair: int                # max_{i != j} ||b_i - b_j||² (exact integer; 4 col when m = 1)
    rows: np.ndarray         # squared row norms of B⁻¹ (float), for the per-bin interval


def _l2_lattice(strategy: Strategy, n: int) -> _L2Lattice:
    """``B = round(n A)`` (``A`` with columns of L2 norm 1, so ``|B_ij| <= n``), cached on the strategy."""
    key = ("lattice", n)
    hit = strategy._cache.get(key)
    if hit is not None:
        return hit
    assert strategy.a is not None
    b = np.rint(strategy.a * n).astype(np.int64)
    bf = b.astype(np.float64)
    sq = np.sum(b * b, axis=0)                                  # exact: |B_ij| <= n = 2^20 (2^40 per term)
    m = b.shape[1]
    if m > 1:
        # BᵀB in float is exact: every partial sum is an integer of absolute value <= ||b_i|| ||b_j|| < 2^42
        gb = bf.T @ bf
        if not np.all(gb == np.rint(gb)):  # pragma: no cover - impossible for integers below 2^53
            raise InvalidParameter("strategy", "lattice Gram matrix is not exact")
        gi = gb.astype(np.int64)
        dist = sq[:, None] + sq[None, :] - 2 * gi
        np.fill_diagonal(dist, 0)
        pair = int(dist.max())
    else:
        pair = 4 * int(sq[0])
    lu = sla.lu_factor(bf, check_finite=False)
    if np.any(np.diag(lu[0]) == 0):
        raise InvalidParameter("strategy", "its integer lattice is singular (use a smaller domain)")
    inv = sla.lu_solve(lu, np.eye(m), check_finite=False)
    out = _L2Lattice(b=b, lu=lu, inv=inv, col=int(sq.max()), pair=pair, rows=np.einsum("ij,ij->i", inv, inv))
    strategy._cache[key] = out
    return out


def _l2_lattice_objective(strategy: Strategy, lat: _L2Lattice, n: int, gram: _Gram, name: Any) -> float:
    """``tr(G (BᵀB)⁻¹) = Σ (G B⁻¹) ∘ B⁻¹`` (cached per lattice ``n`` and named workload)."""
    key = ("objective", n, name)
    if name is not None and key in strategy._cache:
        return float(strategy._cache[key])
    f = float(np.sum(gram.matmul(lat.inv) * lat.inv))
    if name is not None:
        strategy._cache[key] = f
    return f


def _dgauss_variance(sigma: float) -> float:
    """``Var(Z)`` of the discrete Gaussian ``P[Z = k] ∝ exp(-k² / (2 sigma²))``: ``sigma²`` to double precision
    for ``sigma >= 8`` (the Poisson-summation deficit is below ``e^{-1000}`` relative), else summed directly."""
    if sigma >= 8.0:
        return sigma * sigma
    k = np.arange(-int(40 * sigma) - 2, int(40 * sigma) + 3, dtype=np.float64)
    w = np.exp(-k * k / (2.0 * sigma * sigma))
    return float(np.sum(k * k * w) / np.sum(w))


def _sqrt_up(s: int) -> float:
    """The smallest float ``x`` with ``x² >= s`` (exact rational check; ``s`` a non-negative integer)."""
    return _exact.up_until(lambda x: Fraction(x) ** 2 >= s, math.sqrt(s))


def _l2_given(strategy: Any, m: int) -> Strategy:
    strat = _given_strategy(strategy, m, True)
    if strat.norm != "l2":
        raise InvalidParameter("strategy", "with rho (zCDP) the strategy must be optimize_strategy(..., norm='l2')")
    return strat


def _gauss_plan(arr: np.ndarray, rho: Any, *, workload: Any, strategy: Any, nb: Neighbours) -> Plan:
    """The validated zCDP plan of :func:`strategy_histogram` (``rho`` given; counts already validated)."""
    rho = check.positive("rho", rho)
    ranges = _check_size_and_workload(arr, workload)
    replace = _common.is_replace(nb)
    rows = 1 if replace else _common.unit_rows(nb)
    if arr.ndim == 1:
        m = int(arr.size)
        gram, k = _gram_1d(workload, m, ranges)
        if strategy is None:
            strat = optimize_strategy(workload, m, norm="l2") if ranges else optimize_strategy(workload, norm="l2")
        else:
            strat = _l2_given(strategy, m)
        strategies, grams, n = [strat], [gram], _LATTICE
    else:
        if strategy is None:
            strategies = [optimize_strategy(workload, int(s), norm="l2") for s in arr.shape]
        else:
            if isinstance(strategy, Strategy):
                raise InvalidParameter("strategy", "with rho (zCDP), 2-D counts take a pair of norm='l2' strategies")
            if not isinstance(strategy, (tuple, list)) or len(strategy) != 2:
                raise WrongType("strategy", "a pair of Strategy objects (rows, columns) for 2-D counts")
            strategies = [_l2_given(s, int(mi)) for s, mi in zip(strategy, arr.shape, strict=True)]
        parts = [_closed_gram(workload, int(s)) for s in arr.shape]
        grams = [g for g, _ in parts]
        k = math.prod(ki for _, ki in parts)
        n = _LATTICE_2D
    lats = [_l2_lattice(s, n) for s in strategies]
    col = math.prod(lat.col for lat in lats)
    if replace:   # 1-D: the exact max_{i != j} ||b_i - b_j||²; 2-D: the bound (2 max_j ||b_j||)²
        sens_sq = lats[0].pair if len(lats) == 1 else 4 * col
    else:
        sens_sq = rows * rows * col
    sens = _sqrt_up(sens_sq)
    coords = int(arr.size)
    sigma = discrete_gaussian_scale(sens, rho=rho, coords=coords)
    f = math.prod(_l2_lattice_objective(s, lat, n, g, workload if ranges else None)
                  for s, lat, g in zip(strategies, lats, grams, strict=True))
    var = _dgauss_variance(sigma)
    total = var * f
    params = {"rho": rho, "shape": tuple(int(x) for x in arr.shape), "norm": "l2", "sensitivity": sens,
              "sensitivity_squared": sens_sq, "lattice": n ** len(lats), "scale": sigma,
              "workload": workload if ranges else "matrix", "expected_total_squared_error": total,
              "expected_msae": total / k}
    if len(lats) == 1:
        rn = np.sqrt(lats[0].rows).reshape(arr.shape)
    else:
        rn = np.sqrt(np.multiply.outer(lats[0].rows, lats[1].rows))

    def interval(value: np.ndarray) -> Any:
        def fn(confidence: float) -> tuple[np.ndarray, np.ndarray]:
            # each x̂_j - x_j = Σ_i (B⁻¹)_ji Z_i is sub-Gaussian with variance proxy sigma² ||row_j(B⁻¹)||²
            # (the discrete Gaussian is sigma²-sub-Gaussian, Canonne-Kamath-Steinke 2020); widened by 1e-9
            # relative for the float error of the LU solve
            h = rn * sigma * math.sqrt(2.0 * math.log(2.0 / (1.0 - confidence)))
            h = h * (1.0 + 1e-9) + 1e-9 * np.abs(value)
            return value - h, value + h
        return fn

    def draw(rng: RandomSource) -> Outcome:
        if len(lats) == 1:
            lat = lats[0]
            true = lat.b @ arr
            y = np.asarray(discrete_gaussian_plan(true, sens, rho=rho).sample(rng).value, dtype=np.int64)
            value = sla.lu_solve(lat.lu, y.astype(np.float64), check_finite=False)
            return Outcome(value, parts={"measurements": y, "strategy": lat.b}, interval_fn=interval(value))
        l1, l2 = lats
        true2 = l1.b @ arr @ l2.b.T
        y2 = np.asarray(discrete_gaussian_plan(true2, sens, rho=rho).sample(rng).value, dtype=np.int64)
        rows_ = sla.lu_solve(l1.lu, y2.astype(np.float64), check_finite=False)
        value2 = sla.lu_solve(l2.lu, rows_.T, check_finite=False).T
        return Outcome(value2, parts={"measurements": y2, "strategy": (l1.b, l2.b)}, interval_fn=interval(value2))

    return Plan(mechanism="strategy_histogram", cost=ZCDP(rho), draw=draw, sensitivity=sens, scale=sigma,
                params=params, neighbours=nb)
