"""Differentially private linear regression: sufficient-statistics perturbation and the functional mechanism.

Both methods release a noisy copy of the regression's second-moment statistics (``ZᵀZ`` and ``Zᵀy``, with ``Z``
the features and a constant column for the intercept), computed **exactly in integers** on a public lattice, then
solve a repaired (positive definite) system, so the fit never diverges:

- ``method="ssp"``: sufficient-statistics perturbation. The upper triangle of ``ZᵀZ`` (which holds the count and
  the feature sums when there is an intercept) and ``Zᵀy`` get discrete Laplace noise (pure ``epsilon``-DP, L1
  sensitivity) or discrete Gaussian noise (``(epsilon, delta)``-DP or ``rho``-zCDP, L2 sensitivity); the noisy
  Gram matrix's eigenvalues are floored at a public multiple of the noise's spectral scale.
- ``method="functional"``: the functional mechanism (Zhang et al. 2012; Li et al. 2016, Algorithm 5): Laplace
  noise ``Δ/ε`` on every coefficient of the degree-1 and degree-2 monomials of the squared loss, with features and
  targets normalised to ``[-1, 1]``; a noisy quadratic that is not positive definite is regularised and its
  non-positive directions trimmed.

:class:`LinearRegression` is the scikit-learn-style estimator over :func:`linear_regression`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter
from dpkit.learn._base import Estimator, RegressorMixin, check_fitted, columns, features, targets
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.mechanisms import Release
    from dpkit.noise.source import RandomSource

__all__ = ["LinearModel", "LinearRegression", "linear_regression"]

#: The methods of :func:`linear_regression`.
METHODS = ("ssp", "functional")
#: Most features (the noisy Gram matrix has ``(d + 1)(d + 2)/2`` coordinates).
MAX_FEATURES = 2000
#: Most rows: every exact sum stays below ``2**60`` (int64, with room for the noise).
MAX_ROWS = 2**23
#: Target size of one row's sensitivity in lattice units (``2**36``): the exact sums of a chunk of ``2**14`` rows
#: stay below ``2**53`` (exact in float64) and the noise scale in units stays within the samplers' range.
_UNITS = 2.0**36
_CHUNK = 2**14
#: Relative inflation of every float sensitivity bound (covers the rounding of the bound's own computation).
_INFLATE = 1.0 + 1e-9


@dataclass(frozen=True)
class LinearModel:
    """A fitted linear model ``y ≈ X @ coef + intercept`` (the value of :func:`linear_regression`)."""

    coef: np.ndarray
    intercept: float

    def predict(self, X: Any) -> np.ndarray:
        """``X @ coef + intercept`` (post-processing)."""
        return columns(X, int(self.coef.shape[0])) @ self.coef + self.intercept


@dataclass(frozen=True)
class _Geometry:
    """Public facts about one row ``z = (x - center, tau)`` and its target ``y - y_center``."""

    center: np.ndarray  # subtracted from the features (zeros, or the bounds' midpoints)
    tau: float | None  # the constant column (None: no intercept)
    l1: float  # bound on sum |z_j|
    l2sq: float  # bound on sum z_j²
    l4: float  # bound on sum z_j⁴
    zmax: float  # bound on max |z_j|
    y_center: float
    y_radius: float  # |y - y_center| <= y_radius


def _box_facts(a: np.ndarray, c: float) -> tuple[float, float, float, float]:
    """(l1, l2sq, l4, zmax) for rows with ``|z_j| <= a_j`` and ``||z||_2 <= c`` (either may be inf)."""
    d = a.size
    l2sq = min(float(np.sum(a * a)), c * c)
    l1 = min(float(np.sum(a)), math.sqrt(d) * math.sqrt(l2sq))
    l4 = min(float(np.sum(a**4)), l2sq * l2sq)
    zmax = min(float(np.max(a)), math.sqrt(l2sq))
    return l1, l2sq, l4, zmax


def _gram_sens(l1: float, l2sq: float, l4: float, l2: bool) -> float:
    """A bound on one row's contribution to the upper triangle of ``zzᵀ``: L1 ``((Σ|z|)² + Σz²)/2`` or L2
    ``sqrt((||z||⁴ + Σz⁴)/2)``."""
    return math.sqrt((l2sq * l2sq + l4) / 2.0) if l2 else (l1 * l1 + l2sq) / 2.0


def _geometry(info: dict[str, Any], d: int, fit_intercept: bool, y_lo: float, y_hi: float,
              l2: bool) -> _Geometry:
    b = info["bounds"]
    c = float(info["norm"]) if info["norm"] is not None else math.inf
    a0 = np.max(np.abs(b), axis=1) if b is not None else np.full(d, c)
    options = [(np.zeros(d), _box_facts(a0, c))]
    if fit_intercept and b is not None:
        mid = (b[:, 0] + b[:, 1]) / 2.0
        half = (b[:, 1] - b[:, 0]) / 2.0
        options.append((mid, _box_facts(half, c + float(np.sqrt(np.sum(mid * mid))))))
    # the centre with the smaller bound on the Gram part's sensitivity (public facts only)
    center, (l1, l2sq, l4, zmax) = min(options, key=lambda o: _gram_sens(o[1][0], o[1][1], o[1][2], l2))
    if not fit_intercept:
        return _Geometry(center, None, l1, l2sq, l4, zmax, 0.0, max(abs(y_lo), abs(y_hi)))
    tau = zmax if b is not None else c / math.sqrt(d)
    return _Geometry(center, tau, l1 + tau, l2sq + tau * tau, l4 + tau**4, max(zmax, tau),
                     (y_lo + y_hi) / 2.0, (y_hi - y_lo) / 2.0)


def _pow2_at_least(x: float) -> float:
    """The smallest power of two >= x (x > 0)."""
    m, e = math.frexp(x)  # x = m 2^e, 0.5 <= m < 1
    return math.ldexp(1.0, e - 1) if m == 0.5 else math.ldexp(1.0, e)


def _units(Z: np.ndarray, y: np.ndarray, q: float, qy: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows and targets truncated (toward zero) to the lattices ``q Z`` and ``qy Z``, as int64 multiples."""
    U = np.trunc(Z / q).astype(np.int64)
    v = np.trunc(y / qy).astype(np.int64)
    return U, v


def _exact_sums(U: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``UᵀU`` and ``Uᵀv`` exactly (int64): float64 products of chunks of ``2**14`` rows whose entries are at most
    ``2**38`` each are integers below ``2**53``, so exact in any summation order; the chunks add in int64."""
    p = U.shape[1]
    G = np.zeros((p, p), dtype=np.int64)
    b = np.zeros(p, dtype=np.int64)
    for start in range(0, U.shape[0], _CHUNK):
        Uf = U[start:start + _CHUNK].astype(np.float64)
        vf = v[start:start + _CHUNK].astype(np.float64)
        G += (Uf.T @ Uf).astype(np.int64)
        b += (Uf.T @ vf).astype(np.int64)
    return G, b


def _privacy(method: str, epsilon: Any, delta: Any, rho: Any) -> tuple[str, dict[str, Any]]:
    """``("laplace" | "gaussian", keyword arguments of the primitive plan)``."""
    if method == "functional":
        if delta is not None or rho is not None:
            raise InvalidParameter("delta" if delta is not None else "rho",
                                   "must be None: the functional mechanism is pure epsilon-DP (Laplace noise)")
        return "laplace", {"epsilon": check.epsilon(epsilon)}
    if rho is not None:
        if epsilon is not None or delta is not None:
            raise InvalidParameter("rho", "give either rho, or epsilon (with or without delta), not both")
        return "gaussian", {"rho": check.positive("rho", rho)}
    if epsilon is None:
        raise InvalidParameter("epsilon", "is required (or give rho for zCDP)")
    eps = check.epsilon(epsilon)
    if delta is None:
        return "laplace", {"epsilon": eps}
    return "gaussian", {"epsilon": eps, "delta": check.delta(delta, allow_zero=False)}


def _linear_regression_plan(X: Any, y: Any, epsilon: Any = None, *, delta: Any = None, rho: Any = None,
                            bounds: Any = None, norm: Any = None, y_bounds: Any = None, method: Any = "ssp",
                            fit_intercept: Any = True, floor: Any = 1.0, neighbours: Neighbours | None = None,
                            accountant: Accountant | None = None) -> Plan:
    method = check.choice("method", method, METHODS)
    fit_intercept = check.flag("fit_intercept", fit_intercept)
    law, privacy = _privacy(method, epsilon, delta, rho)
    floor = check.positive("floor", floor)
    if floor > 1e6:
        raise InvalidParameter("floor", "must be at most 1e6")
    nb = resolve_neighbours(neighbours, accountant)
    k = unit_rows(nb) * (2 if is_replace(nb) else 1)  # rows one neighbour step changes (replace: out and in)
    if y_bounds is None:
        raise InvalidParameter("y_bounds", "is required (declare public target bounds; dpkit never reads them "
                               "from the data)")
    Xc, info = features(X, bounds=bounds, norm=norm)
    n, d = Xc.shape
    if d > MAX_FEATURES:
        raise InvalidData("X", f"must have at most {MAX_FEATURES} columns for linear_regression")
    if n > MAX_ROWS:
        raise InvalidData("X", "has too many rows for exact integer sums (at most 2**23)")
    yc, (y_lo, y_hi) = targets(y, n, bounds=y_bounds)
    geo = _geometry(info, d, fit_intercept, y_lo, y_hi, l2=(law == "gaussian"))
    Z = Xc - geo.center
    if geo.tau is not None:
        Z = np.hstack([Z, np.full((n, 1), geo.tau)])
    p = Z.shape[1]
    iu = np.triu_indices(p)

    if method == "ssp":
        l2 = law == "gaussian"
        g_real = _gram_sens(geo.l1, geo.l2sq, geo.l4, l2) * _INFLATE
        cross_real = (math.sqrt(geo.l2sq) if l2 else geo.l1) * geo.y_radius * _INFLATE
        q = _pow2_at_least(math.sqrt(g_real / _UNITS))
        qy = _pow2_at_least(cross_real * q / g_real)  # the cross part's sensitivity <= the Gram part's, in units
        U, v = _units(Z, yc - geo.y_center, q, qy)
        G, b = _exact_sums(U, v)
        stats = np.concatenate([G[iu], b])
        g_u, cross_u = g_real / (q * q), cross_real / (q * qy)
        scale_of = (q * q, q * qy)  # real units of one lattice step: Gram part, cross part
    else:
        # normalise as the functional mechanism's bound assumes: |z_j| <= 1 and |y| <= 1
        zeta, r = geo.zmax, geo.y_radius
        l1n = geo.l1 / zeta * _INFLATE
        delta_real = l1n * l1n + 2.0 * l1n
        q = _pow2_at_least(math.sqrt(delta_real / _UNITS))
        qy = q
        U, v = _units(Z / zeta, (yc - geo.y_center) / r, q, q)
        G, b = _exact_sums(U, v)
        off = np.where(iu[0] == iu[1], 1, 2).astype(np.int64)  # w_j w_l (j < l) appears twice in the square
        stats = np.concatenate([G[iu] * off, -2 * b])
        g_u, cross_u = delta_real / (q * q), 0.0
        scale_of = (q * q, q * q)
    if law == "laplace":
        sens_u: float = float(math.ceil(k * (g_u + cross_u)))
    else:
        sens_u = k * math.sqrt(g_u * g_u + cross_u * cross_u) * _INFLATE

    from dpkit.mechanisms import discrete_gaussian_plan, discrete_laplace_plan

    if law == "laplace":
        inner = discrete_laplace_plan(stats, int(sens_u), privacy["epsilon"])
        entry_sd = math.sqrt(2.0) * float(inner.scale or 0.0)  # sd of a discrete Laplace of scale t: <= sqrt(2) t
    else:
        inner = discrete_gaussian_plan(stats, sens_u, **privacy)
        entry_sd = float(inner.scale or 0.0)
    if method == "functional":
        entry_sd /= 2.0  # the quadratic form's off-diagonal entries are half the noisy coefficients
    kappa = floor * 2.0 * math.sqrt(p) * entry_sd * scale_of[0]  # noise spectral scale, real Gram units
    ntri = iu[0].size
    center, tau, y_center = geo.center.copy(), geo.tau, geo.y_center
    zeta_r = (geo.zmax, geo.y_radius)

    def draw(rng: RandomSource) -> Outcome:
        noisy = np.asarray(inner.sample(rng).value, dtype=np.int64)
        tri = noisy[:ntri].astype(np.float64) * scale_of[0]
        lin = noisy[ntri:].astype(np.float64) * scale_of[1]
        M = np.zeros((p, p))
        if method == "ssp":
            M[iu] = tri
            M = M + np.triu(M, 1).T
            lam, V = np.linalg.eigh(M)
            w = V @ ((V.T @ lin) / np.maximum(lam, kappa))  # eigenvalue floor: A = V max(Λ, κ) Vᵀ
            trimmed = int(np.sum(lam < kappa))
        else:
            M[iu] = np.where(iu[0] == iu[1], tri, tri / 2.0)
            M = M + np.triu(M, 1).T
            lam, V = np.linalg.eigh(M)
            keep = lam > 0.0  # spectral trimming of the non-positive directions, then the ridge κ
            wn = -0.5 * (V[:, keep] @ ((V[:, keep].T @ lin) / (lam[keep] + kappa)))
            w = wn * (zeta_r[1] / zeta_r[0])
            trimmed = int(np.sum(~keep))
        coef = np.array(w[:d], dtype=np.float64)
        intercept = 0.0
        if tau is not None:
            intercept = float(y_center + tau * w[d] - center @ coef)
        parts = {"gram": M, "linear": lin, "statistics": noisy}
        return Outcome(LinearModel(coef, intercept), parts=parts, params={"trimmed": trimmed})

    params: dict[str, Any] = {
        "method": method, "noise": inner.noise, "fit_intercept": fit_intercept, "features": d, "floor": floor,
        "kappa": kappa, "unit": q, "y_unit": qy, "sensitivity_units": float(sens_u),
        "noise_scale_units": float(inner.scale or 0.0), "tau": tau, "y_center": y_center,
        "centered": bool(np.any(center != 0.0)), "rows_per_step": k, "y_radius": geo.y_radius,
        "zeta": geo.zmax if method == "functional" else None, **privacy}
    return Plan(mechanism=f"linear_regression_{method}", cost=inner.cost, draw=draw, sensitivity=float(sens_u),
                scale=float(inner.scale or 0.0), params=params, neighbours=nb)


def linear_regression(X: Any, y: Any, epsilon: float | None = None, *, delta: float | None = None,
                      rho: float | None = None, bounds: Any = None, norm: float | None = None, y_bounds: Any = None,
                      method: str = "ssp", fit_intercept: bool = True, floor: float = 1.0,
                      neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                      rng: RandomSource | None = None, description: str = "") -> Release:
    """Differentially private least-squares linear regression (sufficient statistics or functional mechanism).

    Parameters
    ----------
    X:
        Private features, shape ``(n, d)`` (finite; ``1 <= d <= 2000``, ``n <= 2**23``). Constrained by the
        **declared** ``bounds`` and/or ``norm`` (clamped / rows scaled down), never by the data.
    y:
        Private targets, ``n`` finite reals, clamped into ``y_bounds``.
    epsilon, delta, rho:
        ``epsilon`` alone: pure ``epsilon``-DP (discrete Laplace noise). ``epsilon`` and ``delta``
        (``0 < delta < 1``): ``(epsilon, delta)``-DP (discrete Gaussian noise). ``rho`` alone: ``rho``-zCDP
        (discrete Gaussian). ``method="functional"`` takes ``epsilon`` only.
    bounds:
        Public feature bounds: one ``(lo, hi)`` for every feature or one pair per feature.
    norm:
        A public bound on each row's L2 norm (rows longer are scaled down). At least one of ``bounds`` and
        ``norm`` is required.
    y_bounds:
        Public target bounds ``(lo, hi)`` (required).
    method:
        ``"ssp"`` (sufficient-statistics perturbation, default) or ``"functional"`` (Zhang et al. 2012).
    fit_intercept:
        Fit an intercept (a constant column ``tau`` appended to the features; default True).
    floor:
        Multiplier of the noise's spectral scale used by the repair (default 1; ``> 0``, see Output law).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record). Replace-one and privacy
        units with ``max_rows`` rows are supported.
    accountant:
        If given, charged the cost before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    The release is a post-processing of one vector of exact integer statistics perturbed by the discrete Laplace
    mechanism (pure ``epsilon``-DP) or the discrete Gaussian mechanism (``(epsilon, delta)``-DP through the
    zCDP conversion, or ``rho``-zCDP; Canonne, Kamath & Steinke 2020). The neighbour relation is add/remove one
    record by default; replace-one doubles the sensitivity (one row out, one in); a privacy unit of at most
    ``max_rows`` rows multiplies it by ``max_rows``. Proof idea: every row is mapped, by a public function of the
    declared bounds only, to ``z = (x - m, tau)`` and ``y - c``, then truncated toward zero onto public lattices
    (so every bound below still holds); the statistic is a sum of per-row terms computed exactly in integers, so
    a neighbour step changes it by at most the declared number of rows' terms, whose L1 (Laplace) or L2
    (Gaussian) norm is bounded from the declared bounds: for the upper triangle of ``zzᵀ``, L1
    ``((Σ|z_j|)² + Σz_j²)/2`` and L2 ``sqrt((||z||⁴ + Σz_j⁴)/2)``; for ``z y``, ``|y| Σ|z_j|`` and
    ``|y| ||z||``; for the functional mechanism's coefficients ``(Σ|z_j|)² + 2|y|Σ|z_j|`` after normalisation.
    The count ``n`` is private: it is the noisy ``tau²`` corner of the Gram matrix, never divided by.

    Cost
    ----
    One charge, before any noise: ``PureDP(epsilon)``, ``ApproxDP(epsilon, delta)`` or ``ZCDP(rho)``.

    Output law
    ----------
    ``m`` is ``0`` or the bounds' midpoints (whichever gives the smaller sensitivity bound; midpoints only with an
    intercept), ``tau`` the largest per-feature bound of ``|x - m|`` (``norm / sqrt(d)`` without ``bounds``),
    ``c`` the midpoint of ``y_bounds`` with an intercept (else 0). **ssp**: the upper triangle of ``UᵀU`` and
    ``Uᵀv`` (``U``, ``v`` the rows and targets in lattice units ``q`` and ``q_y``, powers of two chosen from the
    sensitivity bound so that the ``Zᵀy`` part's sensitivity is between a half and all of the Gram part's) plus
    independent discrete Laplace (scale ``t = Δ₁/ε``, ``params["noise_scale_units"]``) or discrete Gaussian
    noise on every coordinate; the noisy Gram matrix ``A`` is symmetrised from its upper triangle, its
    eigenvalues are floored at ``κ = floor · 2 sqrt(p) · sd`` (``p`` columns, ``sd`` the noise's standard
    deviation per Gram entry: ``√2 t q²`` or ``σ q²``; ``2 sqrt(p) sd`` is the spectral norm of such a noise
    matrix), ``A⁺ = V max(Λ, κ) Vᵀ``, and ``w = A⁺⁻¹ b``. **functional**: the coefficients of the degree-2
    monomials (``Σz_j²`` and ``2Σz_j z_l``, ``j < l``) and degree-1 monomials (``-2Σy z_j``) of
    ``Σ(y - zᵀw)²``, with ``|z_j| <= 1`` (divided by the largest bound) and ``|y| <= 1`` (divided by
    ``(hi - lo)/2``), plus discrete Laplace noise of scale ``Δ/ε``; the quadratic ``wᵀMw + ℓᵀw`` is minimised
    on the eigen-directions of ``M`` with positive eigenvalues (spectral trimming) with the ridge ``κ`` (as
    above, with the sd of an off-diagonal entry of ``M``): ``w = -½ Σ_{λ>0} v (vᵀℓ)/(λ + κ)``; then rescaled.
    Both return ``coef = w[:d]`` and ``intercept = c + tau w[d] - m·coef``. ``parts``: ``gram`` (the repaired
    system's symmetric noisy matrix before the repair), ``linear``, ``statistics`` (the noisy integer vector);
    ``params["trimmed"]``: how many eigenvalues were floored or trimmed (a function of released values).
    ``Release.scale`` and ``Release.sensitivity``-style receipts are in lattice units (``params["noise_scale_units"]``,
    ``params["sensitivity_units"]``; one unit is ``params["unit"]²`` in the Gram matrix); ``Release.noise`` is
    ``None`` (the value is a fitted model; the law is that of ``parts["statistics"]``, ``params["noise"]``).

    Error
    -----
    The noisy statistics are unbiased up to the truncation onto the lattices (at most one unit ``q`` per feature,
    a relative ``2**-18``-ish of the bounds, toward zero). The coefficient error is about
    ``||A⁻¹|| (||E_b|| + ||E_A|| ||w||)`` with ``E`` the noise (per entry ``√2 t q²`` or ``σ q²``): it falls as
    ``1/(n ε)``; directions of the true Gram matrix with eigenvalues below ``κ`` are shrunk (a ridge bias), which
    is what keeps the fit bounded: ``||w|| <= ||b|| / κ``. The pure-DP sensitivities grow as ``(Σ|z_j|)²``
    (about ``d²`` for box bounds), the Gaussian ones as ``||z||²``. No confidence interval is stated.

    Errata
    ------
    Li et al. (2016) print, for the functional mechanism on linear regression, ``Δ = 2 max_t Σ_{j=1}^U Σ_φ
    ||λ_φt||₁ <= 2(1 + 2d + d²)``, assuming each feature in ``[-1, 1]`` (Zhang et al.: ``||x||₂ <= 1``) and
    ``y ∈ [-1, 1]``, without an intercept, under replace-one neighbours (the leading 2). The sum starts at degree
    1, but the bound's ``1`` is the degree-0 coefficient ``y²``, which is neither in the objective that is
    minimised nor released here: the bound of the printed sum is ``2(2d + d²)``. Under add/remove one record the
    factor 2 is not needed (``2d + d²``). ``Φ₂`` lists ``ω_i ω_j`` for all ordered pairs; the monomials
    ``ω_j ω_l`` and ``ω_l ω_j`` are one coefficient ``2Σ z_j z_l`` here (the same L1 bound ``(Σ|z_j|)²``).
    For declared bounds the bound is derived, not printed: ``Δ = k((Σ|z_j|)² + 2Σ|z_j|)`` after normalisation
    (``k`` = 2 for replace-one), which is below the printed constant. The book leaves a noisy quadratic that is
    not positive definite unhandled; the repair above is dpkit's (Zhang et al. regularise and trim the spectrum;
    their re-run of the mechanism would cost more budget and is not done).

    Notes
    -----
    O(n d²) time in one pass (chunks of ``2**14`` rows in float64 BLAS, exact because every partial sum is an
    integer below ``2**53``). Predictions are not clipped to ``y_bounds``.

    References
    ----------
    Zhang, Zhang, Xiao, Yang & Winslett, "Functional mechanism: regression analysis under differential privacy",
    PVLDB 5(11), 2012. Li, Lyu, Su & Yang, "Differential Privacy: From Theory to Practice", 2016, §5.2.2.
    Sheffet, "Private approximations of the 2nd-moment matrix using existing techniques in linear regression",
    2017; Wang, "Revisiting differentially private linear regression", NeurIPS 2018 (sufficient statistics).

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.learn import linear_regression
    >>> X = np.array([[0.1, 0.9], [0.4, 0.2], [0.8, 0.5], [0.3, 0.3]] * 50)
    >>> y = X @ np.array([2.0, -1.0]) + 0.5
    >>> rel = linear_regression(X, y, 1.0, delta=1e-6, bounds=(0.0, 1.0), y_bounds=(-1.0, 3.0))
    >>> rel.value.coef.shape, rel.cost
    ((2,), ApproxDP(epsilon=1.0, delta=1e-06))
    """
    return run(_linear_regression_plan(X, y, epsilon, delta=delta, rho=rho, bounds=bounds, norm=norm,
                                       y_bounds=y_bounds, method=method, fit_intercept=fit_intercept, floor=floor,
                                       neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


class LinearRegression(RegressorMixin, Estimator):
    """Differentially private least-squares linear regression, scikit-learn style (:func:`linear_regression`).

    ``fit(X, y)`` charges ``accountant`` (if given) once and stores ``release_``, ``coef_``, ``intercept_`` and
    ``n_features_in_``; ``predict`` and ``score`` (R²) are post-processing. Parameters as in
    :func:`linear_regression`; ``bounds``/``norm`` and ``y_bounds`` must be declared.
    """

    def __init__(self, epsilon: float | None = 1.0, *, delta: float | None = None, rho: float | None = None,
                 bounds: Any = None, norm: float | None = None, y_bounds: Any = None, method: str = "ssp",
                 fit_intercept: bool = True, floor: float = 1.0, neighbours: Any = None, accountant: Any = None,
                 rng: Any = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.bounds = bounds
        self.norm = norm
        self.y_bounds = y_bounds
        self.method = method
        self.fit_intercept = fit_intercept
        self.floor = floor
        self.neighbours = neighbours
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> LinearRegression:
        """Fit on private ``X``, ``y`` (one charge); returns ``self``."""
        rel = linear_regression(X, y, self.epsilon, delta=self.delta, rho=self.rho, bounds=self.bounds,
                                norm=self.norm, y_bounds=self.y_bounds, method=self.method,
                                fit_intercept=self.fit_intercept, floor=self.floor, neighbours=self.neighbours,
                                accountant=self.accountant, rng=self.rng)
        self.release_ = rel
        self.coef_ = rel.value.coef
        self.intercept_ = rel.value.intercept
        self.n_features_in_ = int(rel.value.coef.shape[0])
        return self

    def predict(self, X: Any) -> np.ndarray:
        """``X @ coef_ + intercept_`` (post-processing; raises :class:`~dpkit.core.errors.NotFitted` before fit)."""
        check_fitted(self, "coef_")
        return columns(X, self.n_features_in_) @ self.coef_ + self.intercept_
