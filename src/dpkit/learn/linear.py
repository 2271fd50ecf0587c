"""Differentially private linear classifiers: logistic regression and a (Huber-smoothed) linear SVM.

Three training methods, one contract (validate and cost everything up front, one charge, all randomness in
``draw``):

- ``method="gd"`` (default): noisy full-batch gradient descent (Near & Abuah ch. 13). Each step sums the
  per-example gradients, each clipped to L2 norm ``clip`` (or, with ``clip=None``, bounded exactly by the
  declared row norm), rounded per example onto a power-of-two grid so that the sum is exact, and adds lattice
  (discrete) Gaussian noise; the steps are composed in zCDP (total ``rho = rho_count + T rho_step``). The noisy
  sum is divided by a noisy count (a small share of the budget) under add/remove, never by the private ``n``.
- ``method="objective"``: objective perturbation, Chaudhuri, Monteleoni & Sarwate 2011 (JMLR), Algorithm 1, pure
  ``epsilon``-DP, with the paper's ``epsilon'`` adjustment and its extra-regularisation fallback.
- ``method="expsearch"``: private local search (Li et al. 2016, Algorithm 10, ExpSearch) with the enhanced
  exponential mechanism (EEM), pure ``epsilon``-DP, quality ``-J`` (the loss is minimised).

More than two classes: one-vs-rest, one binary model per class, the budget split equally (sequential
composition). :class:`LogisticRegression` and :class:`LinearSVC` are the scikit-learn-style estimators.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import PrivacyUnit
from dpkit.core.privacy import ZCDP, ApproxDP, PrivacyLoss, PureDP, approx_to_zcdp_rho
from dpkit.learn import _optim
from dpkit.learn._base import ClassifierMixin, Estimator, check_fitted, columns, features, labels
from dpkit.mechanisms.contract import Outcome, Plan, is_replace, resolve_neighbours, run, unit_rows

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.mechanisms import Release
    from dpkit.noise.source import RandomSource

__all__ = ["LinearClassifier", "LinearSVC", "LogisticRegression", "linear_svc", "logistic_regression"]

#: The training methods.
METHODS = ("gd", "objective", "expsearch")
#: Most training rows: every exact per-step sum (per-example values of at most ``2**31`` grid units) stays below
#: ``2**53``, so it is exact in float64 in any order.
MAX_ROWS = 2**22
#: Most features.
MAX_FEATURES = 5000
#: Most steps (gd) or rounds (expsearch).
MAX_STEPS = 100_000
#: Relative inflation of float norm bounds (covers the rounding of their own computation and of the clipping).
_INFLATE = 1.0 + 1e-9
#: Public defaults of noisy gradient descent (chosen by theory and measured on synthetic data and on Adult's
#: training split: docs/benchmarks.md).
GD_STEPS = 500
GD_MOMENTUM = 0.9
GD_STEP_SIZE = 2.0
GD_CLIP = 1.0
#: Defaults of ExpSearch.
ES_ROUNDS = 40
ES_DECAY = 0.95
ES_STEP = 1.0
#: Objective perturbation's default regulariser: Lambda = OBJ_KAPPA c / (N epsilon).
OBJ_KAPPA = 30.0


@dataclass(frozen=True)
class LinearClassifier:
    """A fitted linear classifier (the value of :func:`logistic_regression` and :func:`linear_svc`).

    ``coef`` is ``(1, d)`` for two classes (the score of ``classes[1]``) or ``(K, d)`` one-vs-rest;
    ``intercept`` has one entry per row of ``coef``; ``loss`` is ``"logistic"`` or ``"huber"``.
    """

    coef: np.ndarray
    intercept: np.ndarray
    classes: np.ndarray
    loss: str

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores ``X @ coef.T + intercept``: 1-D for two classes, ``(n, K)`` otherwise (post-processing)."""
        s = columns(X, self.coef.shape[1]) @ self.coef.T + self.intercept
        return s[:, 0] if self.coef.shape[0] == 1 else s

    def predict(self, X: Any) -> np.ndarray:
        """The class with the largest score (two classes: ``classes[1]`` where the score is > 0)."""
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes[(s > 0).astype(np.int64)]
        return self.classes[np.argmax(s, axis=1)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Logistic models: the sigmoid of the scores, ``(n, K)`` (one-vs-rest: normalised to sum to 1)."""
        if self.loss != "logistic":
            raise InvalidParameter("loss", "probabilities need a logistic model")
        s = self.decision_function(X)
        if s.ndim == 1:
            p = 0.5 * (1.0 + np.tanh(0.5 * s))
            return np.column_stack([1.0 - p, p])
        p = 0.5 * (1.0 + np.tanh(0.5 * s))
        tot = p.sum(axis=1, keepdims=True)
        return np.where(tot > 0, p / np.where(tot > 0, tot, 1.0), 1.0 / p.shape[1])


# -- validation ------------------------------------------------------------------------------------------------
def _budget(method: str, epsilon: Any, delta: Any, rho: Any, accountant: Any) -> tuple[PrivacyLoss, dict[str, Any]]:
    """The declared cost and its public parameters: zCDP for gd (rho, or (epsilon, delta) converted by the CKS
    2020 bound, charged as ApproxDP unless the accountant keeps a zCDP budget), PureDP(epsilon) otherwise."""
    if method == "gd":
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise InvalidParameter("rho", "give either rho or (epsilon, delta), not both")
            r = check.positive("rho", rho)
            return ZCDP(r), {"rho": r}
        if epsilon is None or delta is None:
            raise InvalidParameter("epsilon" if epsilon is None else "delta",
                                   "method='gd' needs rho, or both epsilon and delta")
        eps = check.epsilon(epsilon)
        dlt = check.delta(delta, allow_zero=False)
        r = approx_to_zcdp_rho(eps, dlt)
        if not r > 0:
            raise InvalidParameter("epsilon", "with this delta: too small for a positive zCDP budget")
        from dpkit.core.accountant import Accountant

        zc = isinstance(accountant, Accountant) and isinstance(accountant.budget, ZCDP)
        return (ZCDP(r) if zc else ApproxDP(eps, dlt)), {"rho": r, "epsilon": eps, "delta": dlt}
    if rho is not None:
        raise InvalidParameter("rho", f"method={method!r} is pure epsilon-DP: give epsilon")
    if epsilon is None:
        raise InvalidParameter("epsilon", "is required")
    eps = check.epsilon(epsilon)
    if delta is not None:
        check.delta(delta)  # accepted (a pure guarantee implies every (epsilon, delta)); not used
    return PureDP(eps), {"epsilon": eps}


def _choice(name: str, value: Any, options: tuple[str, ...]) -> str:
    if not isinstance(value, str):
        raise WrongType(name, "a str")
    if value not in options:
        raise InvalidParameter(name, "must be one of " + ", ".join(repr(o) for o in options))
    return value


def _pow2_at_most(x: float) -> float:
    """The largest power of two <= x (x > 0 finite)."""
    _, e = math.frexp(x)  # x = m 2^e, 0.5 <= m < 1
    return math.ldexp(1.0, e - 1)


@dataclass(frozen=True)
class _Data:
    Z: np.ndarray          # (n, d + 1): features and the intercept column (value ``intercept_scaling``)
    codes: np.ndarray      # class index per row
    classes: np.ndarray
    coord_bound: np.ndarray  # public bound on |Z_ij| per column
    row_bound: float       # public bound on ||Z_i||_2
    scale: float           # intercept_scaling
    fit_intercept: bool


def _data(X: Any, y: Any, classes: Any, bounds: Any, norm: Any, fit_intercept: Any,
          intercept_scaling: Any) -> _Data:
    Xc, info = features(X, bounds=bounds, norm=norm)
    n, d = Xc.shape
    if n > MAX_ROWS:
        raise InvalidData("X", "has too many rows")
    if d > MAX_FEATURES:
        raise InvalidData("X", f"must have at most {MAX_FEATURES} columns")
    cls, codes = labels(y, classes, n)
    if not isinstance(fit_intercept, (bool, np.bool_)):
        raise WrongType("fit_intercept", "a bool")
    s = check.positive("intercept_scaling", intercept_scaling)
    if s > 1e6:
        raise InvalidParameter("intercept_scaling", "must be at most 1e6")
    max_norm = float(info["max_norm"])
    a = np.full(d, max_norm)
    if info["bounds"] is not None:
        a = np.minimum(a, np.max(np.abs(info["bounds"]), axis=1))
    if fit_intercept:
        Z = np.hstack([Xc, np.full((n, 1), s)])
        a = np.append(a, s)
        row = math.sqrt(max_norm**2 + s**2)
    else:
        Z, row = Xc, max_norm
    return _Data(Z, codes, cls, a * _INFLATE, row * _INFLATE, s, bool(fit_intercept))


def _outputs(data: _Data, W: np.ndarray, loss: str) -> LinearClassifier:
    """Split the augmented weights into coef/intercept (the intercept column has value ``scale``)."""
    if data.fit_intercept:
        coef, intercept = W[:, :-1].copy(), W[:, -1] * data.scale
    else:
        coef, intercept = W.copy(), np.zeros(W.shape[0])
    return LinearClassifier(coef=coef, intercept=intercept, classes=data.classes, loss=loss)


def _targets(data: _Data) -> list[np.ndarray]:
    """The +-1 labels of each binary problem (one for two classes; one-vs-rest otherwise)."""
    K = data.classes.size
    if K == 2:
        return [np.where(data.codes == 1, 1.0, -1.0)]
    return [np.where(data.codes == k, 1.0, -1.0) for k in range(K)]


# -- method="gd" -----------------------------------------------------------------------------------------------
def _gd(data: _Data, loss: str, h: float, rho_step: float, count_rho: float | None, steps: int, step_size: float,
        momentum: float, l2: float, clip: float, k_rows: int, replace: bool, rng: RandomSource
        ) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    from dpkit.mechanisms.gaussian import gaussian_plan

    Z = data.Z
    n, p = Z.shape
    parts: dict[str, Any] = {}
    if count_rho is None:  # replace-one: n is public
        n_hat = float(n)
    else:
        noisy = gaussian_plan(float(n), float(k_rows), rho=count_rho).sample(rng).value
        parts["count"] = float(noisy)
        n_hat = max(float(noisy), 1.0)
    q = _pow2_at_most(clip) * 2.0**-26  # per-example grid: |units| <= 2^27 per coordinate
    sens = _exact.up((clip * _INFLATE + math.sqrt(p) * q / 2.0) * (2 * k_rows if replace else k_rows), 4)
    norms = np.sqrt(np.einsum("ij,ij->i", Z, Z))
    sigma = None
    W = np.zeros((len(_targets(data)), p))
    for j, yy in enumerate(_targets(data)):
        w = np.zeros(p)
        v = np.zeros(p)
        for _ in range(steps):
            look = w + momentum * v
            g1 = _optim.loss_d1(loss, yy * (Z @ look), h) * yy  # per-example gradient = g1_i Z_i
            size = np.abs(g1) * norms
            factor = np.where(size > clip, clip / np.where(size > 0, size, 1.0), 1.0)
            units = np.rint((g1 * factor)[:, None] * Z / q)
            total = units.sum(axis=0) * q  # exact: integers below 2^53 times a power of two
            plan = gaussian_plan(total, sens, rho=rho_step)
            sigma = plan.scale
            noisy_sum = np.asarray(plan.sample(rng).value, dtype=np.float64)
            grad = noisy_sum / n_hat + l2 * look
            v = momentum * v - step_size * grad
            w = w + v
        W[j] = w
    return W, parts, {"sigma": sigma, "sum_sensitivity": sens, "grid": q}


# -- method="objective" ----------------------------------------------------------------------------------------
def _objective_terms(eps: float, n_pub: float, lam: float, c: float) -> tuple[float, float]:
    """Chaudhuri et al. 2011, Algorithm 1, steps 1-2: ``(epsilon', Delta)`` for budget ``eps``, ``n`` rows,
    regulariser ``Lambda`` and loss curvature bound ``c``."""
    r = c / (n_pub * lam)
    eps1 = eps - math.log1p(2.0 * r + r * r)
    if eps1 > 0:
        return _exact.down(eps1, 4), 0.0
    extra = c / (n_pub * math.expm1(eps / 4.0)) - lam
    return eps / 2.0, _exact.up(max(extra, 0.0), 4)


def _gamma_norm(shape: int, rng: RandomSource) -> float:
    """A Gamma(``shape``, 1) variable as the sum of ``shape`` exponentials, each ``g (K + U)`` with ``K`` exactly
    geometric of ratio ``e^-g`` (a discrete Laplace variable of scale ``1/g`` conditioned on ``>= 0``) and ``U``
    uniform on [0, 1) from 53 random bits, ``g = 2^-20``: the density of each exponential is within a factor
    ``e^(+-g)`` of ``e^-x`` everywhere. Only dpkit's sources are used."""
    from dpkit.noise import sample_discrete_laplace

    g = 2.0**-20
    ks = np.empty(0, dtype=np.int64)
    while ks.size < shape:
        z = np.asarray(sample_discrete_laplace(1.0 / g, 2 * (shape - ks.size), rng=rng), dtype=np.int64)
        ks = np.concatenate([ks, z[z >= 0]])
    ks = ks[:shape]
    u = (rng.uint64(shape) >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return float(g * (np.sum(ks.astype(np.float64)) + np.sum(u)))


def _direction(p: int, rng: RandomSource) -> np.ndarray:
    """A direction uniform on the unit sphere of R^p (to within the lattice: a vector of lattice Gaussians of
    sigma 1 on the grid ``2^-30``, normalised)."""
    from dpkit.noise import lattice_gaussian

    while True:
        v = lattice_gaussian(np.zeros(p), 1.0, 2.0**-30, rng=rng)
        nv = float(np.linalg.norm(v))
        if nv > 0:
            return v / nv


def _objective(data: _Data, loss: str, h: float, eps_each: float, count_eps: float | None, lam_arg: float | None,
               rng: RandomSource) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    from dpkit.mechanisms.laplace import laplace_plan

    Z = data.Z / data.row_bound  # rows of norm <= 1 (the paper's assumption), by the declared bound
    n, p = Z.shape
    parts: dict[str, Any] = {}
    if count_eps is None:
        n_pub = float(n)
    else:
        noisy = float(laplace_plan(float(n), 1.0, count_eps).sample(rng).value)
        parts["count"] = noisy
        n_pub = max(noisy, 1.0)
    c = 0.25 if loss == "logistic" else 1.0 / (2.0 * h)
    # default Lambda = 30 c/(N eps): the Jacobian term log(1 + 2c/(N Lambda) + ...) then costs about eps/15
    lam = OBJ_KAPPA * c / (n_pub * eps_each) if lam_arg is None else lam_arg
    eps1, extra = _objective_terms(eps_each, n_pub, lam, c)
    beta = eps1 / 2.0
    W = np.zeros((len(_targets(data)), p))
    reg = n_pub * (lam + extra)
    for j, yy in enumerate(_targets(data)):
        b = (_gamma_norm(p, rng) / beta) * _direction(p, rng)  # density proportional to exp(-beta ||b||)
        A = yy[:, None] * Z

        def fun(w: np.ndarray, A: np.ndarray = A, b: np.ndarray = b) -> tuple[float, np.ndarray, np.ndarray]:
            z = A @ w
            val = float(np.sum(_optim.loss_value(loss, z, h)) + 0.5 * reg * (w @ w) + b @ w)
            grad = A.T @ _optim.loss_d1(loss, z, h) + reg * w + b
            hess = (A * _optim.loss_d2(loss, z, h)[:, None]).T @ A + reg * np.eye(p)
            return val, grad, hess

        W[j] = _optim.newton(fun, np.zeros(p))
    W = W / data.row_bound  # back to the unscaled features
    return W, parts, {"epsilon_prime": eps1, "extra_regularization": extra, "n_used": n_pub, "c": c, "l2": lam}


# -- method="expsearch" ----------------------------------------------------------------------------------------
def _sup_margin(w: np.ndarray, data: _Data) -> float:
    """A public bound on ``|w . z|`` over the data domain."""
    return min(float(np.linalg.norm(w)) * data.row_bound, float(np.abs(w) @ data.coord_bound)) * _INFLATE


def _expsearch(data: _Data, loss: str, h: float, eps_round: float, rounds: int, step: float, decay: float,
               k_rows: int, rng: RandomSource) -> tuple[np.ndarray, dict[str, Any], dict[str, Any]]:
    from dpkit.mechanisms.selection import exponential_plan

    Z = data.Z
    n, p = Z.shape
    a = data.coord_bound
    W = np.zeros((len(_targets(data)), p))
    used = {"delta2": 0, "delta1": 0}
    zero = float(_optim.loss_value(loss, np.zeros(1), h)[0])
    for j, yy in enumerate(_targets(data)):
        w = np.zeros(p)
        s = step
        for _ in range(rounds):
            cands = np.concatenate([w + s * np.eye(p), w - s * np.eye(p)])  # w +- s e_j
            # EEM (Li et al. 2016): Delta = min(Delta1, Delta2), both over the data domain, never the dataset
            m = np.array([_sup_margin(c, data) for c in cands])
            lo = _optim.loss_value(loss, m, h)
            hi = _optim.loss_value(loss, -m, h)
            delta1 = float(np.max(hi - lo))
            delta2 = 2.0 * s * float(np.max(a))
            z0 = yy * (Z @ w)
            if delta2 <= delta1:  # per-record contributions L_c(x) - L_w(x), in [-s a_j, s a_j]
                base, bound = _optim.loss_value(loss, z0, h), np.concatenate([s * a, s * a])
                lower, delta = -bound, delta2
                used["delta2"] += 1
            else:  # per-record contributions L_c(x) - l(0), in [l(m_c) - l(0), l(-m_c) - l(0)]
                base, lower, bound, delta = np.full(n, zero), lo - zero, hi - zero, delta1
                used["delta1"] += 1
            q = _pow2_at_most(delta) * 2.0**-30
            zc = z0[:, None] + (yy[:, None] * Z) @ np.concatenate([s * np.eye(p), -s * np.eye(p)]).T
            contrib = _optim.loss_value(loss, zc, h) - base[:, None]
            units = np.clip(np.rint(contrib / q), np.floor(lower / q), np.ceil(bound / q))
            scores = -units.sum(axis=0) * q  # quality -J (exact sums): the loss is minimised
            sens = _exact.up((delta + 2.0 * q) * k_rows, 4)
            pick = int(exponential_plan(scores, sens, eps_round).sample(rng).value)
            w = cands[pick]
            s *= decay
        W[j] = w
    return W, {}, {"rounds_delta1": used["delta1"], "rounds_delta2": used["delta2"]}


# -- the plan ----------------------------------------------------------------------------------------------------
def _linear_plan(loss: str, X: Any, y: Any, epsilon: Any, *, delta: Any, rho: Any, classes: Any, bounds: Any,
                 norm: Any, method: Any, l2: Any, steps: Any, step_size: Any, momentum: Any, clip: Any,
                 count_share: Any, decay: Any, huber: Any, fit_intercept: Any, intercept_scaling: Any,
                 neighbours: Any, accountant: Any) -> Plan:
    method = _choice("method", method, METHODS)
    nb = resolve_neighbours(neighbours, accountant)
    replace = is_replace(nb)
    k_rows = unit_rows(nb)
    cost, params = _budget(method, epsilon, delta, rho, accountant)
    h = check.positive("huber", huber) if loss == "huber" else 0.5
    data = _data(X, y, classes, bounds, norm, fit_intercept, intercept_scaling)
    K = 1 if data.classes.size == 2 else data.classes.size
    name = "logistic_regression" if loss == "logistic" else "linear_svc"
    params.update(method=method, models=K, neighbours=type(nb).__name__, fit_intercept=data.fit_intercept,
                  intercept_scaling=data.scale, row_bound=data.row_bound)
    if loss == "huber":
        params["huber"] = h
    rng_fn: Any
    if method == "gd":
        T = GD_STEPS if steps is None else check.integer("steps", steps, minimum=1, maximum=MAX_STEPS)
        eta = check.positive("step_size", step_size) if step_size is not None else GD_STEP_SIZE
        mom = check.probability("momentum", momentum, open_low=False) if momentum is not None else 0.0
        lam = 0.0 if l2 is None else check.nonnegative("l2", l2)
        C = min(GD_CLIP if clip is None else check.positive("clip", clip), data.row_bound)
        share = check.probability("count_share", count_share)
        rho_total = params["rho"]
        if replace:
            count_rho = None
            rho_main = rho_total
        else:
            count_rho, rho_main = _exact.split_budget(rho_total, [share, 1.0 - share], name="count_share",
                                                      total_name="epsilon" if "epsilon" in params else "rho")
        rho_step = _exact.float_at_most(Fraction(rho_main) / (K * T))
        if not rho_step > 0:
            raise InvalidParameter("steps", "too many for this budget")
        from dpkit.mechanisms.contract import check_noise_scale

        check_noise_scale("steps", C * math.sqrt(1.0 / (2.0 * rho_step)))
        params.update(steps=T, step_size=eta, momentum=mom, l2=lam, clip=C, count_share=None if replace else share,
                      rho_step=rho_step, output="last iterate")

        def rng_fn(rng: RandomSource) -> Any:
            return _gd(data, loss, h, rho_step, count_rho, T, eta, mom, lam, C, k_rows, replace, rng)
    elif method == "objective":
        if isinstance(nb, PrivacyUnit) and k_rows > 1:
            raise InvalidParameter("neighbours", "objective perturbation covers one record per neighbour step")
        lam_arg = None if l2 is None else check.positive("l2", l2)
        eps = params["epsilon"]
        if replace:
            count_eps, eps_main = None, eps
        else:
            share = check.probability("count_share", count_share)
            count_eps, eps_main = _exact.split_budget(eps, [share, 1.0 - share], name="count_share")
        eps_each = _exact.float_at_most(Fraction(eps_main) / K)
        params.update(l2=lam_arg, count_share=None if replace else share, epsilon_each=eps_each)

        def rng_fn(rng: RandomSource) -> Any:
            return _objective(data, loss, h, eps_each, count_eps, lam_arg, rng)
    else:
        r = ES_ROUNDS if steps is None else check.integer("steps", steps, minimum=1, maximum=MAX_STEPS)
        s0 = ES_STEP if step_size is None else check.positive("step_size", step_size)
        beta = ES_DECAY if decay is None else check.probability("decay", decay, open_high=False)
        eps_round = _exact.float_at_most(Fraction(params["epsilon"]) / (K * r))
        if not eps_round > 0:
            raise InvalidParameter("steps", "too many for this budget")
        params.update(steps=r, step_size=s0, decay=beta, epsilon_round=eps_round)

        def rng_fn(rng: RandomSource) -> Any:
            return _expsearch(data, loss, h, eps_round, r, s0, beta, k_rows, rng)

    def draw(rng: RandomSource) -> Outcome:
        W, parts, learnt = rng_fn(rng)
        return Outcome(_outputs(data, W, loss), parts=parts, params=learnt)

    return Plan(mechanism=name, cost=cost, draw=draw, params=params, neighbours=nb)


def logistic_regression(X: Any, y: Any, epsilon: float | None = None, *, delta: float | None = None,
                        rho: float | None = None, classes: Any = None, bounds: Any = None, norm: float | None = None,
                        method: str = "gd", l2: float | None = None, steps: int | None = None,
                        step_size: float | None = None, momentum: float = GD_MOMENTUM, clip: float | None = None,
                        count_share: float = 0.02, decay: float | None = None, fit_intercept: bool = True,
                        intercept_scaling: float = 1.0, neighbours: Neighbours | None = None,
                        accountant: Accountant | None = None, rng: RandomSource | None = None,
                        description: str = "") -> Release:
    """Differentially private (L2-regularised) logistic regression.

    Minimises the logistic loss ``l(z) = log(1 + e^-z)`` of the margins ``z = y w.x`` (``y`` in {-1, +1};
    ``|l'| <= 1``, ``l'' <= 1/4``) by noisy gradient descent, objective perturbation or private local search
    (module docstring). More than two classes: one-vs-rest, one model per class, each with ``1/K`` of the
    budget (sequential composition).

    Parameters
    ----------
    X:
        Private features, 2-D ``(n, d)``, finite. Constrained by the **declared** ``bounds`` (clamped) and/or
        ``norm`` (rows scaled down to L2 norm ``norm``); dpkit never reads them from the data.
    y:
        Private labels, one per row, each in ``classes``.
    epsilon, delta, rho:
        The budget. ``method="gd"``: ``rho`` (``rho``-zCDP), or ``epsilon`` and ``delta`` (converted to the
        largest ``rho`` whose zCDP implies ``(epsilon, delta)``-DP, Canonne, Kamath & Steinke 2020).
        ``"objective"``/``"expsearch"``: ``epsilon`` (pure); a ``delta`` is accepted and not used.
    classes:
        The public label set (required; at least two labels). More than two: one-vs-rest.
    bounds, norm:
        Public per-feature bounds ``(lo, hi)`` (one pair or one per feature) and/or a bound on each row's L2
        norm; at least one is required.
    method:
        ``"gd"`` (noisy gradient descent, default), ``"objective"`` (objective perturbation) or
        ``"expsearch"`` (private local search).
    l2:
        The L2 regularisation ``Lambda`` of the averaged loss ``(1/n) sum l + (Lambda/2) ||w||^2`` (the
        intercept included). ``None``: 0 for ``"gd"``; for ``"objective"`` (which needs ``> 0``) ``Lambda = 30
        c/(N epsilon)`` with ``N`` the public ``n`` (replace-one) or the noisy count and ``epsilon`` each model's
        budget, so the paper's Jacobian term ``log(1 + 2c/(N Lambda) + ...)`` costs about ``epsilon/15`` (the 30
        measured on a held-out quarter of Adult's training split; the value used is in ``params["l2"]``); not
        used by ``"expsearch"`` (its quality is the plain loss sum).
    steps:
        ``"gd"``: gradient steps ``T`` per model (default 500); ``"expsearch"``: rounds ``r`` (default 40).
    step_size:
        ``"gd"``: the learning rate ``eta`` on the averaged loss (default 2.0: ``1/L`` for rows of norm at most 1
        with the intercept column, ``L = (1 + 1)/4`` the logistic loss's smoothness bound; the clipped gradient
        keeps steps of at most ``eta clip`` before noise); ``"expsearch"``: the first search step ``s``
        (default 1.0).
    momentum:
        ``"gd"``: Nesterov momentum in ``[0, 1)`` (default 0.9; post-processing of the noisy gradients).
    clip:
        ``"gd"``: per-example gradient clipping norm ``C`` (``None``: 1.0); never above the exact bound ``R``
        (every per-example gradient of a 1-Lipschitz margin loss has norm at most ``||z_i|| <= R``, so with
        ``clip >= R`` nothing is clipped). The default 1 is the Lipschitz constant
        of the loss times a unit row: it keeps every well-scaled example whole and was measured best of
        {0.5, 1, 2, R} on Adult's training split (docs/benchmarks.md).
    count_share:
        The share of the budget spent on a noisy count under add/remove (``"gd"`` and ``"objective"``;
        default 0.02). Under replace-one ``n`` is public and nothing is spent on it.
    decay:
        ``"expsearch"``: the step decay ``beta`` in (0, 1] (default 0.95).
    fit_intercept, intercept_scaling:
        Fit an intercept (default) as the weight of a constant column of value ``intercept_scaling`` (default
        1; the column counts in the row bound).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record). Replace-one makes ``n``
        public; a :class:`~dpkit.core.neighbours.PrivacyUnit` of ``k`` rows multiplies the sensitivities by
        ``k`` (``"objective"`` refuses ``k > 1``).
    accountant:
        If given, charged the cost (below) once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    Under add/remove one record (default), replace-one, or a privacy unit of ``k`` rows (via ``unit_rows``):

    - ``"gd"``: ``rho``-zCDP (charged as ``ApproxDP(epsilon, delta)`` when given so, or ``ZCDP`` if the
      accountant keeps a zCDP budget). Each step releases the exact sum of the per-example gradients (each
      clipped to norm ``C`` in floats, then rounded per example onto the grid ``q = 2^-26 2^floor(log2 C)``: a
      per-record map) plus lattice Gaussian noise calibrated to the sum's L2 sensitivity ``k (C + sqrt(p) q/2)``
      (twice that under replace-one) with ``rho_step``; the noisy count (Gaussian, sensitivity ``k``) gets
      ``count_share rho``. zCDP composes additively: ``rho_count + K T rho_step <= rho`` exactly (``K`` models).
      The iterates are post-processing of the noisy sums, so every later step may depend on them.
    - ``"objective"``: ``epsilon``-DP. Chaudhuri et al. 2011, Theorem 9: with rows of norm at most 1 (the
      features and intercept column divided by the public row bound ``R``), a loss with ``|l'| <= 1`` and
      ``l'' <= c``, the minimiser's gradient condition maps the output one-to-one to ``b``; between replace-one
      neighbours ``||b - b'|| <= 2`` (density ratio ``e^(epsilon')``) and the Jacobian ratio is at most
      ``(1 + c/(n Lambda))^2`` (the ``log(1 + 2c/(n Lambda) + c^2/(n^2 Lambda^2))`` term). Under add/remove one
      record ``n`` is private: a Laplace count (``count_share epsilon``) gives a public ``N`` used in place of
      ``n`` everywhere (objective, ``epsilon'``, ``Delta``); adding a record then moves ``b`` by at most 1 and
      the Jacobian by at most ``1 + c/(N Lambda)``, both covered by the paper's replace-one terms.
    - ``"expsearch"``: ``epsilon``-DP: ``r`` exponential mechanisms of ``epsilon/(K r)`` each (sequential
      composition); each candidate set is public (built from the previous public choices). Quality ``-J(w) =
      -sum_i L_w(x_i)``; the enhanced exponential mechanism (EEM, Li et al. 2016 §5.4) uses ``Delta = min(Delta1,
      Delta2)`` computed from the **data domain** (the declared bounds/norm), never the dataset: ``Delta2 =
      max |L_w(x) - L_w'(x)| <= 2 s max_j a_j`` (1-Lipschitz loss, candidates differ by ``s`` in one or two
      coordinates, ``a_j`` the public bound on ``|x_j|``); ``Delta1 = max_w (l(-m_w) - l(m_w))``, ``m_w`` the
      public bound on ``|w.x|``. Each record's contribution is computed as ``L_w(x) - L_ref(x)`` (a
      candidate-independent shift, which leaves the mechanism's law unchanged), rounded to a grid of ``2^-30
      Delta`` and clamped into its proven range, so the scores are exact sums of bounded terms; the declared
      sensitivity is ``k (Delta + 2q)``.

    Cost
    ----
    ``"gd"``: ``ApproxDP(epsilon, delta)`` (or ``ZCDP(rho)``; ``ZCDP`` of the converted ``rho`` when the
    accountant keeps a zCDP budget); ``"objective"``/``"expsearch"``: ``PureDP(epsilon)``. Charged once, before
    any randomness; a refused charge draws nothing. Invalid input raises a typed error before the charge.

    Output law
    ----------
    A :class:`LinearClassifier` (``coef`` ``(1, d)`` for two classes, ``(K, d)`` one-vs-rest; ``intercept``).
    ``"gd"``: Nesterov-accelerated descent ``v <- mu v - eta g``, ``w <- w + v``, from 0, with ``g = S_t/N +
    Lambda w`` at the look-ahead point, ``S_t`` the noisy gradient sum and ``N`` the noisy count clamped to
    ``>= 1`` (replace-one: ``n``); the last iterate is returned (``parts["count"]``: the noisy count).
    ``"objective"``: the minimiser (Newton's method to a relative decrement of ``1e-10``) of
    ``sum_i l(y_i w.z_i) + N (Lambda + Delta)/2 ||w||^2 + b.w`` over the scaled rows ``z_i``, with ``||b|| ~
    Gamma(p, 2/epsilon')`` and a uniform direction (density proportional to ``exp(-epsilon' ||b||/2)``).
    ``"expsearch"``: the last point of the search, from 0.

    Error
    -----
    ``"gd"``: each step's gradient carries noise of standard deviation ``sigma/N`` per coordinate,
    ``sigma = k C / sqrt(2 rho_step)`` (``Release.params["sigma"]``), plus the clipping bias when ``clip <
    R``; with ``T`` steps the excess empirical risk of noisy GD on a convex Lipschitz loss is of order
    ``R sqrt(p T/rho)/N`` (Bassily, Smith & Thakurta 2014), so the error falls as ``1/(N sqrt(rho))``.
    ``"objective"``: the perturbation ``b/N`` has expected norm ``2p/(N epsilon')``; Chaudhuri et al. 2011
    bound the excess risk by ``O(p log(p/delta)/(N epsilon Lambda))``. ``"expsearch"``: each round picks a
    candidate within ``2 Delta (ln(2p) + t)/epsilon_round`` of the best quality with probability
    ``1 - e^-t``. Measured accuracies on UCI Adult: ``docs/benchmarks.md``.

    Errata
    ------
    - Objective perturbation: Li et al. (§5.2.1) state ``b ~ exp(-beta ||b||)`` with ``beta = epsilon/Delta``
      and a proof without the Jacobian of the change of variables; this implements Chaudhuri et al. 2011's
      Algorithm 1 (the ``epsilon'`` adjustment for the Jacobian, the extra regularisation ``Delta`` when
      ``epsilon' <= 0``, ``beta = epsilon'/2``), tested in ``tests/learn/test_linear.py``.
    - ExpSearch: Li et al. print that the exponential mechanism "aims to maximize J"; ``J`` is a loss, so the
      quality is ``-J`` (tested). EEM's ``Delta1``/``Delta2`` are maxima over the data **domain**; the book's
      "x in the input dataset" would make the mechanism data-dependent.

    Notes
    -----
    The objective-perturbation output is the numerical minimiser (the proof assumes the exact one), and ``b``
    is sampled to within the lattice (exponentials on a ``2^-20`` grid with a uniform fill, direction from
    lattice Gaussians on ``2^-30``), not as real numbers. ``b`` is never released.

    References
    ----------
    K. Chaudhuri, C. Monteleoni, A. D. Sarwate. Differentially private empirical risk minimization. JMLR 12,
    2011. N. Li, M. Lyu, D. Su, W. Yang. Differential Privacy: From Theory to Practice, 2016, ch. 5.
    J. Near, C. Abuah. Programming Differential Privacy, ch. 13. M. Bun, T. Steinke. Concentrated differential
    privacy, 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.learn import logistic_regression
    >>> from dpkit.noise import deterministic_source
    >>> X = np.array([[0.1, 0.9], [0.8, 0.2], [0.2, 0.7], [0.9, 0.1]] * 50)
    >>> y = np.array([0, 1, 0, 1] * 50)
    >>> rel = logistic_regression(X, y, 1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 1.0),
    ...                           rng=deterministic_source(1))
    >>> rel.value.coef.shape
    (1, 2)
    """
    return run(_linear_plan("logistic", X, y, epsilon, delta=delta, rho=rho, classes=classes, bounds=bounds,
                            norm=norm, method=method, l2=l2, steps=steps, step_size=step_size, momentum=momentum,
                            clip=clip, count_share=count_share, decay=decay, huber=None,
                            fit_intercept=fit_intercept, intercept_scaling=intercept_scaling,
                            neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


def linear_svc(X: Any, y: Any, epsilon: float | None = None, *, delta: float | None = None, rho: float | None = None,
               classes: Any = None, bounds: Any = None, norm: float | None = None, method: str = "gd",
               l2: float | None = None, steps: int | None = None, step_size: float | None = None,
               momentum: float = GD_MOMENTUM, clip: float | None = None, count_share: float = 0.02,
               decay: float | None = None, huber: float = 0.5, fit_intercept: bool = True,
               intercept_scaling: float = 1.0, neighbours: Neighbours | None = None,
               accountant: Accountant | None = None, rng: RandomSource | None = None,
               description: str = "") -> Release:
    """Differentially private linear support vector classifier with the Huber hinge loss.

    The hinge loss is smoothed as in Chaudhuri et al. 2011 (eq. 7), ``l(z) = 0`` for ``z > 1 + h``, ``(1 + h -
    z)^2/(4h)`` for ``|1 - z| <= h``, ``1 - z`` for ``z < 1 - h`` (``|l'| <= 1``, ``l'' <= c = 1/(2h)``), so
    objective perturbation applies; trained like :func:`logistic_regression` (same methods, one-vs-rest for
    more than two classes with the budget split equally).

    Parameters
    ----------
    X:
        Private features, 2-D ``(n, d)``, finite. Constrained by the **declared** ``bounds`` (clamped) and/or
        ``norm`` (rows scaled down to L2 norm ``norm``); dpkit never reads them from the data.
    y:
        Private labels, one per row, each in ``classes``.
    epsilon, delta, rho:
        The budget. ``method="gd"``: ``rho`` (``rho``-zCDP), or ``epsilon`` and ``delta`` (converted to the
        largest ``rho`` whose zCDP implies ``(epsilon, delta)``-DP, Canonne, Kamath & Steinke 2020).
        ``"objective"``/``"expsearch"``: ``epsilon`` (pure); a ``delta`` is accepted and not used.
    classes:
        The public label set (required; at least two labels). More than two: one-vs-rest.
    bounds, norm:
        Public per-feature bounds ``(lo, hi)`` (one pair or one per feature) and/or a bound on each row's L2
        norm; at least one is required.
    method:
        ``"gd"`` (noisy gradient descent, default), ``"objective"`` (objective perturbation) or
        ``"expsearch"`` (private local search).
    l2:
        The L2 regularisation ``Lambda`` of the averaged loss ``(1/n) sum l + (Lambda/2) ||w||^2`` (the
        intercept included). ``None``: 0 for ``"gd"``; for ``"objective"`` (which needs ``> 0``) ``Lambda = 30
        c/(N epsilon)`` with ``N`` the public ``n`` (replace-one) or the noisy count and ``epsilon`` each model's
        budget, so the paper's Jacobian term ``log(1 + 2c/(N Lambda) + ...)`` costs about ``epsilon/15`` (the 30
        measured on a held-out quarter of Adult's training split; the value used is in ``params["l2"]``); not
        used by ``"expsearch"`` (its quality is the plain loss sum).
    steps:
        ``"gd"``: gradient steps ``T`` per model (default 500); ``"expsearch"``: rounds ``r`` (default 40).
    step_size:
        ``"gd"``: the learning rate ``eta`` on the averaged loss (default 2.0: ``1/L`` for rows of norm at most 1
        with the intercept column, ``L = (1 + 1)/4`` the logistic loss's smoothness bound; the clipped gradient
        keeps steps of at most ``eta clip`` before noise); ``"expsearch"``: the first search step ``s``
        (default 1.0).
    momentum:
        ``"gd"``: Nesterov momentum in ``[0, 1)`` (default 0.9; post-processing of the noisy gradients).
    clip:
        ``"gd"``: per-example gradient clipping norm ``C`` (``None``: 1.0); never above the exact bound ``R``
        (every per-example gradient of a 1-Lipschitz margin loss has norm at most ``||z_i|| <= R``, so with
        ``clip >= R`` nothing is clipped). The default 1 is the Lipschitz constant
        of the loss times a unit row: it keeps every well-scaled example whole and was measured best of
        {0.5, 1, 2, R} on Adult's training split (docs/benchmarks.md).
    count_share:
        The share of the budget spent on a noisy count under add/remove (``"gd"`` and ``"objective"``;
        default 0.02). Under replace-one ``n`` is public and nothing is spent on it.
    decay:
        ``"expsearch"``: the step decay ``beta`` in (0, 1] (default 0.95).
    fit_intercept, intercept_scaling:
        Fit an intercept (default) as the weight of a constant column of value ``intercept_scaling`` (default
        1; the column counts in the row bound).
    neighbours:
        The neighbour relation (default: the accountant's, else add/remove one record). Replace-one makes ``n``
        public; a :class:`~dpkit.core.neighbours.PrivacyUnit` of ``k`` rows multiplies the sensitivities by
        ``k`` (``"objective"`` refuses ``k > 1``).
    accountant:
        If given, charged the cost (below) once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.
    huber:
        The Huber width ``h > 0`` (default 0.5).

    Guarantee
    ---------
    Under add/remove one record (default), replace-one, or a privacy unit of ``k`` rows (via ``unit_rows``):

    - ``"gd"``: ``rho``-zCDP (charged as ``ApproxDP(epsilon, delta)`` when given so, or ``ZCDP`` if the
      accountant keeps a zCDP budget). Each step releases the exact sum of the per-example gradients (each
      clipped to norm ``C`` in floats, then rounded per example onto the grid ``q = 2^-26 2^floor(log2 C)``: a
      per-record map) plus lattice Gaussian noise calibrated to the sum's L2 sensitivity ``k (C + sqrt(p) q/2)``
      (twice that under replace-one) with ``rho_step``; the noisy count (Gaussian, sensitivity ``k``) gets
      ``count_share rho``. zCDP composes additively: ``rho_count + K T rho_step <= rho`` exactly (``K`` models).
      The iterates are post-processing of the noisy sums, so every later step may depend on them.
    - ``"objective"``: ``epsilon``-DP. Chaudhuri et al. 2011, Theorem 9: with rows of norm at most 1 (the
      features and intercept column divided by the public row bound ``R``), a loss with ``|l'| <= 1`` and
      ``l'' <= c``, the minimiser's gradient condition maps the output one-to-one to ``b``; between replace-one
      neighbours ``||b - b'|| <= 2`` (density ratio ``e^(epsilon')``) and the Jacobian ratio is at most
      ``(1 + c/(n Lambda))^2`` (the ``log(1 + 2c/(n Lambda) + c^2/(n^2 Lambda^2))`` term). Under add/remove one
      record ``n`` is private: a Laplace count (``count_share epsilon``) gives a public ``N`` used in place of
      ``n`` everywhere (objective, ``epsilon'``, ``Delta``); adding a record then moves ``b`` by at most 1 and
      the Jacobian by at most ``1 + c/(N Lambda)``, both covered by the paper's replace-one terms.
    - ``"expsearch"``: ``epsilon``-DP: ``r`` exponential mechanisms of ``epsilon/(K r)`` each (sequential
      composition); each candidate set is public (built from the previous public choices). Quality ``-J(w) =
      -sum_i L_w(x_i)``; the enhanced exponential mechanism (EEM, Li et al. 2016 §5.4) uses ``Delta = min(Delta1,
      Delta2)`` computed from the **data domain** (the declared bounds/norm), never the dataset: ``Delta2 =
      max |L_w(x) - L_w'(x)| <= 2 s max_j a_j`` (1-Lipschitz loss, candidates differ by ``s`` in one or two
      coordinates, ``a_j`` the public bound on ``|x_j|``); ``Delta1 = max_w (l(-m_w) - l(m_w))``, ``m_w`` the
      public bound on ``|w.x|``. Each record's contribution is computed as ``L_w(x) - L_ref(x)`` (a
      candidate-independent shift, which leaves the mechanism's law unchanged), rounded to a grid of ``2^-30
      Delta`` and clamped into its proven range, so the scores are exact sums of bounded terms; the declared
      sensitivity is ``k (Delta + 2q)``.

    Cost
    ----
    As :func:`logistic_regression`: ``ApproxDP(epsilon, delta)``/``ZCDP(rho)`` for ``"gd"``,
    ``PureDP(epsilon)`` otherwise, charged once before any randomness.

    Output law
    ----------
    A :class:`LinearClassifier` (``coef`` ``(1, d)`` for two classes, ``(K, d)`` one-vs-rest; ``intercept``).
    ``"gd"``: Nesterov-accelerated descent ``v <- mu v - eta g``, ``w <- w + v``, from 0, with ``g = S_t/N +
    Lambda w`` at the look-ahead point, ``S_t`` the noisy gradient sum and ``N`` the noisy count clamped to
    ``>= 1`` (replace-one: ``n``); the last iterate is returned (``parts["count"]``: the noisy count).
    ``"objective"``: the minimiser (Newton's method to a relative decrement of ``1e-10``) of
    ``sum_i l(y_i w.z_i) + N (Lambda + Delta)/2 ||w||^2 + b.w`` over the scaled rows ``z_i``, with ``||b|| ~
    Gamma(p, 2/epsilon')`` and a uniform direction (density proportional to ``exp(-epsilon' ||b||/2)``).
    ``"expsearch"``: the last point of the search, from 0.

    Error
    -----
    ``"gd"``: each step's gradient carries noise of standard deviation ``sigma/N`` per coordinate,
    ``sigma = k C / sqrt(2 rho_step)`` (``Release.params["sigma"]``), plus the clipping bias when ``clip <
    R``; with ``T`` steps the excess empirical risk of noisy GD on a convex Lipschitz loss is of order
    ``R sqrt(p T/rho)/N`` (Bassily, Smith & Thakurta 2014), so the error falls as ``1/(N sqrt(rho))``.
    ``"objective"``: the perturbation ``b/N`` has expected norm ``2p/(N epsilon')``; Chaudhuri et al. 2011
    bound the excess risk by ``O(p log(p/delta)/(N epsilon Lambda))``. ``"expsearch"``: each round picks a
    candidate within ``2 Delta (ln(2p) + t)/epsilon_round`` of the best quality with probability
    ``1 - e^-t``. Measured accuracies on UCI Adult: ``docs/benchmarks.md``.

    Errata
    ------
    - Objective perturbation: Li et al. (§5.2.1) state ``b ~ exp(-beta ||b||)`` with ``beta = epsilon/Delta``
      and a proof without the Jacobian of the change of variables; this implements Chaudhuri et al. 2011's
      Algorithm 1 (the ``epsilon'`` adjustment for the Jacobian, the extra regularisation ``Delta`` when
      ``epsilon' <= 0``, ``beta = epsilon'/2``), tested in ``tests/learn/test_linear.py``.
    - ExpSearch: Li et al. print that the exponential mechanism "aims to maximize J"; ``J`` is a loss, so the
      quality is ``-J`` (tested). EEM's ``Delta1``/``Delta2`` are maxima over the data **domain**; the book's
      "x in the input dataset" would make the mechanism data-dependent.

    Notes
    -----
    The objective-perturbation output is the numerical minimiser (the proof assumes the exact one), and ``b``
    is sampled to within the lattice (exponentials on a ``2^-20`` grid with a uniform fill, direction from
    lattice Gaussians on ``2^-30``), not as real numbers. ``b`` is never released.

    References
    ----------
    K. Chaudhuri, C. Monteleoni, A. D. Sarwate. Differentially private empirical risk minimization. JMLR 12,
    2011. N. Li, M. Lyu, D. Su, W. Yang. Differential Privacy: From Theory to Practice, 2016, ch. 5.
    J. Near, C. Abuah. Programming Differential Privacy, ch. 13. M. Bun, T. Steinke. Concentrated differential
    privacy, 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.learn import linear_svc
    >>> from dpkit.noise import deterministic_source
    >>> X = np.array([[0.1, 0.9], [0.8, 0.2], [0.2, 0.7], [0.9, 0.1]] * 50)
    >>> y = np.array([0, 1, 0, 1] * 50)
    >>> rel = linear_svc(X, y, 1.0, classes=[0, 1], norm=1.0, method="objective",
    ...                  rng=deterministic_source(1))
    >>> rel.cost
    PureDP(epsilon=1.0)
    """
    return run(_linear_plan("huber", X, y, epsilon, delta=delta, rho=rho, classes=classes, bounds=bounds,
                            norm=norm, method=method, l2=l2, steps=steps, step_size=step_size, momentum=momentum,
                            clip=clip, count_share=count_share, decay=decay, huber=huber,
                            fit_intercept=fit_intercept, intercept_scaling=intercept_scaling,
                            neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


class _LinearEstimator(ClassifierMixin, Estimator):
    _fn: Any = None

    model_: LinearClassifier

    def _fit(self, X: Any, y: Any) -> Any:
        kw = self.get_params(deep=False)
        rel = type(self)._fn(X, y, kw.pop("epsilon"), **kw)
        self.release_ = rel
        self.model_ = rel.value
        self.coef_ = rel.value.coef
        self.intercept_ = rel.value.intercept
        self.classes_ = rel.value.classes
        self.n_features_in_ = int(rel.value.coef.shape[1])
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores ``X @ coef_.T + intercept_`` (1-D for two classes); post-processing."""
        check_fitted(self, "coef_")
        return self.model_.decision_function(X)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted classes (post-processing; :class:`~dpkit.core.errors.NotFitted` before fit)."""
        check_fitted(self, "coef_")
        return self.model_.predict(X)


class LogisticRegression(_LinearEstimator):
    """Differentially private logistic regression, scikit-learn style (:func:`logistic_regression`).

    ``fit(X, y)`` charges ``accountant`` (if given) once and stores ``release_``, ``coef_``, ``intercept_``,
    ``classes_`` and ``n_features_in_``; ``predict``, ``predict_proba``, ``decision_function`` and ``score``
    are post-processing. ``classes`` and ``bounds``/``norm`` must be declared.
    """

    _fn = staticmethod(logistic_regression)

    def __init__(self, epsilon: float | None = 1.0, *, delta: float | None = None, rho: float | None = None,
                 classes: Any = None, bounds: Any = None, norm: float | None = None, method: str = "gd",
                 l2: float | None = None, steps: int | None = None, step_size: float | None = None,
                 momentum: float = GD_MOMENTUM, clip: float | None = None, count_share: float = 0.02,
                 decay: float | None = None, fit_intercept: bool = True, intercept_scaling: float = 1.0,
                 neighbours: Any = None, accountant: Any = None, rng: Any = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.classes = classes
        self.bounds = bounds
        self.norm = norm
        self.method = method
        self.l2 = l2
        self.steps = steps
        self.step_size = step_size
        self.momentum = momentum
        self.clip = clip
        self.count_share = count_share
        self.decay = decay
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.neighbours = neighbours
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> LogisticRegression:
        """Fit on private ``X``, ``y`` (one charge); returns ``self``."""
        return self._fit(X, y)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``(n, K)`` (sigmoid of the scores; one-vs-rest normalised); post-processing."""
        check_fitted(self, "coef_")
        return self.model_.predict_proba(X)


class LinearSVC(_LinearEstimator):
    """Differentially private linear SVM with the Huber hinge, scikit-learn style (:func:`linear_svc`).

    ``fit(X, y)`` charges ``accountant`` (if given) once and stores ``release_``, ``coef_``, ``intercept_``,
    ``classes_`` and ``n_features_in_``; ``predict``, ``decision_function`` and ``score`` are post-processing.
    """

    _fn = staticmethod(linear_svc)

    def __init__(self, epsilon: float | None = 1.0, *, delta: float | None = None, rho: float | None = None,
                 classes: Any = None, bounds: Any = None, norm: float | None = None, method: str = "gd",
                 l2: float | None = None, steps: int | None = None, step_size: float | None = None,
                 momentum: float = GD_MOMENTUM, clip: float | None = None, count_share: float = 0.02,
                 decay: float | None = None, huber: float = 0.5, fit_intercept: bool = True,
                 intercept_scaling: float = 1.0, neighbours: Any = None, accountant: Any = None,
                 rng: Any = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.classes = classes
        self.bounds = bounds
        self.norm = norm
        self.method = method
        self.l2 = l2
        self.steps = steps
        self.step_size = step_size
        self.momentum = momentum
        self.clip = clip
        self.count_share = count_share
        self.decay = decay
        self.huber = huber
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.neighbours = neighbours
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> LinearSVC:
        """Fit on private ``X``, ``y`` (one charge); returns ``self``."""
        return self._fit(X, y)
