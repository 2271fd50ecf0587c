"""Naive Bayes classifiers from noisy sufficient statistics (issue #14): Gaussian and categorical.

A Naive Bayes model is a function of a few counts and sums per class, so it is trained by releasing those
statistics once with Laplace-family noise and building the model from them (post-processing):

- :func:`gaussian_nb` / :class:`GaussianNB`: per class a noisy record count, noisy per-feature sums and sums of
  squares of the deviations from the **declared** bounds' midpoints; means, variances (floored) and priors from
  them;
- :func:`categorical_nb` / :class:`CategoricalNB`: noisy class-by-level count tables, one per feature, and noisy
  class counts; clamped at zero, smoothed and normalised into log probabilities.

Each record belongs to exactly one class, so the statistics of the classes are computed on disjoint parts of
the data (parallel composition): the noise is calibrated to what one record changes, never multiplied by the
number of classes. The number of records is never used as if it were public.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.privacy import PureDP
from dpkit.learn._base import (
    Estimator,
    ModelClassifier,
    columns,
    feature_bounds,
    labels,
    level_codes,
    level_counts,
    matrix,
    same_arrays,
    unit_sensitivity,
)
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.mechanisms.discrete import discrete_laplace_plan
from dpkit.mechanisms.laplace import laplace_plan

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.noise.source import RandomSource

__all__ = ["CategoricalNB", "CategoricalNBModel", "GaussianNB", "GaussianNBModel", "categorical_nb", "gaussian_nb"]

#: Largest number of cells (classes x levels, all features together) of the categorical tables.
MAX_CELLS = 10_000_000


def _normalise(jll: np.ndarray) -> np.ndarray:
    top = np.max(jll, axis=1, keepdims=True)
    return jll - (top + np.log(np.sum(np.exp(jll - top), axis=1, keepdims=True)))


@dataclass(frozen=True, eq=False)
class GaussianNBModel:
    """A fitted Gaussian Naive Bayes model (the value of :func:`gaussian_nb`).

    ``classes`` (K,), ``class_prior`` (K,), ``theta`` (K, d) means, ``var`` (K, d) variances, ``class_count``
    (K,) the noisy counts clamped at 1 (floats), ``bounds`` (d, 2) the declared feature bounds (test rows are
    clamped into them before scoring, as training rows were).
    """

    classes: np.ndarray
    class_prior: np.ndarray
    theta: np.ndarray
    var: np.ndarray
    class_count: np.ndarray
    bounds: np.ndarray

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GaussianNBModel):
            return NotImplemented
        return same_arrays(self, other, ("classes", "class_prior", "theta", "var", "class_count", "bounds"))

    __hash__ = None  # type: ignore[assignment]

    def joint_log_likelihood(self, X: Any) -> np.ndarray:
        """``log P(class) + log P(x | class)`` for every row and class, shape (n, K) (post-processing)."""
        x = np.clip(columns(X, self.theta.shape[1]), self.bounds[:, 0], self.bounds[:, 1])
        out = np.empty((x.shape[0], self.classes.size))
        for k in range(self.classes.size):
            dev = (x - self.theta[k]) ** 2 / self.var[k]
            out[:, k] = (np.log(self.class_prior[k]) - 0.5 * float(np.sum(np.log(2.0 * np.pi * self.var[k])))
                         - 0.5 * np.sum(dev, axis=1))
        return out

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return _normalise(self.joint_log_likelihood(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes[np.argmax(self.joint_log_likelihood(X), axis=1)]


@dataclass(frozen=True, eq=False)
class CategoricalNBModel:
    """A fitted categorical Naive Bayes model (the value of :func:`categorical_nb`).

    ``classes`` (K,), ``class_prior`` (K,), ``class_count`` (K,) the combined noisy class counts clamped at 1,
    ``category_count`` one (K, V_j) array per feature (noisy counts clamped at 0), ``feature_log_prob`` one
    (K, V_j) array of ``log P(x_j = v | class)`` per feature, ``n_categories`` (d,) the declared level counts.
    """

    classes: np.ndarray
    class_prior: np.ndarray
    class_count: np.ndarray
    category_count: tuple[np.ndarray, ...]
    feature_log_prob: tuple[np.ndarray, ...]
    n_categories: np.ndarray

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CategoricalNBModel):
            return NotImplemented
        return same_arrays(self, other, ("classes", "class_prior", "class_count", "category_count",
                                          "feature_log_prob", "n_categories"))

    __hash__ = None  # type: ignore[assignment]

    def joint_log_likelihood(self, X: Any) -> np.ndarray:
        """``log P(class) + sum_j log P(x_j | class)`` for every row and class, shape (n, K)."""
        codes = level_codes(X, self.n_categories, predict=True)
        out = np.tile(np.log(self.class_prior), (codes.shape[0], 1))
        for j, table in enumerate(self.feature_log_prob):
            out += table[:, codes[:, j]].T
        return out

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return _normalise(self.joint_log_likelihood(X))

    def predict(self, X: Any) -> np.ndarray:
        return self.classes[np.argmax(self.joint_log_likelihood(X), axis=1)]


# -- validation ------------------------------------------------------------------------------------------------
def _share(name: str, value: Any, hi: float = 1.0) -> float:
    v = check.real(name, value)
    if not 0.0 < v < hi:
        raise InvalidParameter(name, f"must lie strictly between 0 and {hi:g}")
    return v


# -- Gaussian Naive Bayes ----------------------------------------------------------------------------------------
def _gaussian_nb_plan(X: Any, y: Any, epsilon: Any, *, classes: Any, bounds: Any, l1_norm: Any, count_share: Any,
                      var_smoothing: Any, neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    if bounds is None:
        raise InvalidParameter("bounds", "is required (declare public feature bounds; dpkit never reads them "
                               "from the data)")
    arr = matrix("X", X)
    n, d = arr.shape
    b = feature_bounds(bounds, d)
    cls, codes = labels(y, classes, n)
    eps = check.epsilon(epsilon)
    norm = float(d) if l1_norm is None else min(float(d), check.positive("l1_norm", l1_norm))
    share = _share("count_share", count_share)
    smooth = check.real("var_smoothing", var_smoothing)
    if not 0.0 < smooth <= 0.25:
        raise InvalidParameter("var_smoothing", "must lie in (0, 0.25] (a fraction of each squared bound width)")
    nb, u = unit_sensitivity(neighbours, accountant)
    k = cls.size
    lo = b[:, 0]
    width = b[:, 1] - b[:, 0]
    z = (np.clip(arr, b[:, 0], b[:, 1]) - lo) / width  # in [0, 1]
    if norm < d:
        length = np.sum(z, axis=1)
        over = length > norm
        if np.any(over):
            z[over] *= (norm / length[over])[:, None]
    counts = np.bincount(codes, minlength=k).astype(np.int64)
    sums = np.zeros((k, d))
    squares = np.zeros((k, d))
    np.add.at(sums, codes, z)
    np.add.at(squares, codes, z * z)
    eps_c, eps_s, eps_q = _exact.split_budget(eps, [share, (1.0 - share) / 2.0, (1.0 - share) / 2.0],
                                              name="count_share")
    count_plan = discrete_laplace_plan(counts, u, eps_c)
    sum_plan = laplace_plan(sums, u * norm, eps_s)
    square_plan = laplace_plan(squares, u * norm, eps_q)
    floor = smooth * width ** 2
    params = {"epsilon": eps, "epsilon_count": eps_c, "epsilon_sum": eps_s, "epsilon_square": eps_q,
              "count_share": share, "var_smoothing": smooth, "l1_norm": norm, "classes": k, "features": d,
              "unit": u, "count_scale": count_plan.scale, "sum_scale": sum_plan.scale,
              "square_scale": square_plan.scale, "granularity_sum": sum_plan.granularity,
              "granularity_square": square_plan.granularity}

    def draw(rng: RandomSource) -> Outcome:
        c_noisy = np.asarray(count_plan.sample(rng).value, dtype=np.int64)
        s_noisy = np.asarray(sum_plan.sample(rng).value, dtype=np.float64)
        q_noisy = np.asarray(square_plan.sample(rng).value, dtype=np.float64)
        c = np.maximum(c_noisy, 1).astype(np.float64)
        zmean = np.clip(s_noisy / c[:, None], 0.0, 1.0)
        zsq = np.clip(q_noisy / c[:, None], 0.0, 1.0)
        # Bhatia-Davis: a variable in [0, 1] with mean m has variance at most m (1 - m)
        zvar = np.clip(zsq - zmean ** 2, 0.0, zmean * (1.0 - zmean))
        theta = lo + width * zmean
        var = np.clip(width ** 2 * zvar, floor, None)
        model = GaussianNBModel(classes=cls, class_prior=c / float(np.sum(c)), theta=theta, var=var,
                                class_count=c, bounds=b)
        parts = {"class_count": c_noisy, "sum": s_noisy * width, "square_sum": q_noisy * width ** 2}
        return Outcome(model, parts=parts)

    return Plan(mechanism="gaussian_nb", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def gaussian_nb(X: Any, y: Any, epsilon: float, *, classes: Any, bounds: Any, l1_norm: float | None = None,
                count_share: float = 0.1, var_smoothing: float = 0.02, neighbours: Neighbours | None = None,
                accountant: Accountant | None = None, rng: RandomSource | None = None,
                description: str = "") -> Release:
    """Gaussian Naive Bayes from noisy per-class counts, sums and sums of squares (pure epsilon-DP).

    Parameters
    ----------
    X:
        Private features, shape (n, d), finite; each value is clamped into its declared bounds.
    y:
        Private labels, one per row, each one of ``classes``.
    epsilon:
        The privacy parameter, > 0.
    classes:
        The public label set (required; dpkit never reads it from the data).
    bounds:
        Public feature bounds (required): one ``(lo, hi)`` for every feature or one pair per feature.
    l1_norm:
        Optional public bound ``L`` on each row's L1 norm once every feature is scaled to ``[0, 1]`` by its bounds
        (``sum_j (x_j - lo_j) / (hi_j - lo_j) <= L``; e.g. the number of one-hot groups plus numeric columns of
        an encoding). A row above it is scaled down towards ``lo``. The sums' sensitivity is ``min(d, L)``
        instead of ``d``: sparse encodings get far less noise. Default: none (``L = d``).
    count_share:
        The share of ``epsilon`` spent on the class counts (default 0.1); the rest is split equally between
        the sums and the sums of squares.
    var_smoothing:
        The variance floor of feature ``j`` is ``var_smoothing * (hi_j - lo_j)^2`` (public; default 0.02,
        at most 0.25, the largest variance a bounded feature can have).
    neighbours:
        Add/remove one record (default, or the accountant's relation), replace one record, or a privacy unit
        of ``max_rows`` records.
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure). Write ``w_j = hi_j - lo_j`` and ``z_ij = (clamp(x_ij) - lo_j) / w_j`` in ``[0, 1]``
    (then scaled down so that ``sum_j z_ij <= L``, a per-record map). Three vectors are released: the class
    counts ``n_k`` (K integers), the sums ``S_kj = sum_{i in k} z_ij`` and the squares ``Q_kj = sum_{i in k}
    z_ij^2`` (K x d each). A record lies in exactly one class (the classes partition the data: parallel
    composition), so adding or removing it changes one count by 1, one row of ``S`` by ``sum_j z_ij <= L`` in
    L1 and one row of ``Q`` by ``sum_j z_ij^2 <= sum_j z_ij <= L``: L1 sensitivities ``1``, ``L``, ``L``
    (``L = min(d, l1_norm)``) whatever K is. Replacing a record (``Replace``) can move two classes: all three
    double; a privacy unit of ``r`` rows multiplies them by ``r``. The counts get discrete Laplace noise at
    ``epsilon_count`` and the sums and squares lattice Laplace noise at ``epsilon_sum`` and ``epsilon_square``
    (:func:`~dpkit.mechanisms.discrete_laplace_plan`, :func:`~dpkit.mechanisms.laplace_plan`, exact samplers),
    where the three are ``epsilon`` split in the proportions ``count_share : (1 - count_share)/2 : (1 -
    count_share)/2`` with an exact sum at most
    ``epsilon``. Sequential composition of the three gives ``epsilon``-DP; the model is post-processing. The
    number of records is never treated as public: every division is by a noisy count.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any noise is drawn; a refused charge
    or an invalid argument draws nothing.

    Output law
    ----------
    ``parts["class_count"]`` is ``n_k + Z_k`` with ``Z_k`` discrete Laplace of scale
    ``params["count_scale"]`` (unit ``u``: 1, 2 under replace-one, ``r`` for a privacy unit);
    ``parts["sum"] / w`` is ``S`` plus lattice Laplace noise of scale ``params["sum_scale"]`` (L1 sensitivity
    ``u L``) and ``parts["square_sum"] / w^2`` is ``Q`` plus independent lattice Laplace noise of scale
    ``params["square_scale"]`` (both reported in data units, multiplied back by ``w_j`` and ``w_j^2``). The
    value is a :class:`GaussianNBModel` built from them: ``c_k = max(noisy n_k, 1)``, ``a = clip(S~_kj / c_k,
    0, 1)``, mean ``theta_kj = lo_j + w_j a``, variance ``var_kj = max(w_j^2 clip(clip(Q~_kj / c_k, 0, 1) -
    a^2, 0, a (1 - a)), var_smoothing w_j^2)`` (``a (1 - a)`` is the largest variance of a ``[0, 1]`` variable
    with mean ``a``, Bhatia-Davis) and prior ``c_k / sum(c)``.

    Error
    -----
    The noise on a class's mean of feature ``j`` is about ``w_j * sum_scale / n_k`` (Laplace, so standard
    deviation ``sqrt(2)`` times that), i.e. ``w_j L / (epsilon_sum n_k)``: it grows with the number of
    features (or the declared ``l1_norm``) and shrinks with the class size. Small classes are dominated by
    noise; the clamps and the floor bias the estimates (means into the bounds, variances up to the floor). The
    variance floor also limits how confident the model can be (a regulariser). No interval is stated for the
    predictions.

    Notes
    -----
    Anchoring at the lower bounds keeps ``z^2 <= z`` in ``[0, 1]``, so the squares have the sensitivity of the
    sums, and a sparse row (one-hot columns mostly at ``lo``) contributes little: this is what ``l1_norm``
    exploits. For a feature that takes only its two bound values the squares equal the sums; they are still
    released (the schema is not assumed). On UCI Adult's 88 features (``L = 12``: 7 one-hot groups and 5
    numeric columns) ``l1_norm`` cuts the noise on the sums about 7-fold.

    References
    ----------
    Vaidya, Shafiq, Basu, Hong, "Differentially private naive Bayes classification", WI-IAT 2013 (noisy
    counts, means and variances per class). Dwork, McSherry, Nissim, Smith 2006 (Laplace mechanism).

    Examples
    --------
    >>> import numpy as np, dpkit
    >>> from dpkit.learn import gaussian_nb
    >>> X = np.array([[0.1, 0.2], [0.2, 0.1], [0.9, 0.8], [0.8, 0.9]] * 50)
    >>> y = np.array([0, 0, 1, 1] * 50)
    >>> rel = gaussian_nb(X, y, 1.0, classes=[0, 1], bounds=(0.0, 1.0), rng=dpkit.deterministic_source(1))
    >>> rel.value.theta.shape, rel.cost
    ((2, 2), PureDP(epsilon=1.0))
    >>> rel.value.predict(np.array([[0.15, 0.1], [0.9, 0.9]])).tolist()
    [0, 1]
    """
    return run(_gaussian_nb_plan(X, y, epsilon, classes=classes, bounds=bounds, l1_norm=l1_norm,
                                 count_share=count_share,
                                 var_smoothing=var_smoothing, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


# -- categorical Naive Bayes -------------------------------------------------------------------------------------
def _categorical_nb_plan(X: Any, y: Any, epsilon: Any, *, classes: Any, categories: Any, alpha: Any,
                         neighbours: Neighbours | None, accountant: Accountant | None) -> Plan:
    arr = matrix("X", X)
    n, d = arr.shape
    levels = level_counts(categories, d)
    codes_x = level_codes(arr, levels)
    cls, codes_y = labels(y, classes, n)
    eps = check.epsilon(epsilon)
    a = check.real("alpha", alpha)
    if not 0.0 < a <= 1e6:
        raise InvalidParameter("alpha", "must lie in (0, 1e6]")
    k = cls.size
    if k * int(np.sum(levels)) > MAX_CELLS:
        raise InvalidParameter("categories", "too many cells (classes x levels) for the count tables")
    nb, u = unit_sensitivity(neighbours, accountant)
    offsets = np.concatenate([[0], np.cumsum(levels)[:-1]])
    total = int(np.sum(levels))
    flat = np.zeros(k * total + k, dtype=np.int64)  # tables (class-major within each feature), then class counts
    for j in range(d):
        cells = k * offsets[j] + codes_y * levels[j] + codes_x[:, j]
        flat[: k * total] += np.bincount(cells, minlength=k * total)
    flat[k * total:] = np.bincount(codes_y, minlength=k)
    plan = discrete_laplace_plan(flat, u * (d + 1), eps)
    params = {"epsilon": eps, "alpha": a, "classes": k, "features": d, "cells": int(flat.size), "unit": u,
              "sensitivity": u * (d + 1), "scale": plan.scale}

    def draw(rng: RandomSource) -> Outcome:
        noisy = np.asarray(plan.sample(rng).value, dtype=np.int64)
        tables = tuple(noisy[k * offsets[j]: k * (offsets[j] + levels[j])].reshape(k, int(levels[j]))
                       for j in range(d))
        direct = noisy[k * total:]
        # the class counts, measured d + 1 times with the same noise variance per cell: inverse-variance weighted
        # (the direct count has weight 1, the row sums of a table with V levels weight 1/V)
        num = direct.astype(np.float64)
        den = 1.0
        for j, t in enumerate(tables):
            num = num + np.sum(t, axis=1) / float(levels[j])
            den += 1.0 / float(levels[j])
        count = np.maximum(num / den, 1.0)
        clamped = tuple(np.maximum(t, 0).astype(np.float64) for t in tables)
        logp = tuple(np.log(t + a) - np.log(np.sum(t + a, axis=1, keepdims=True)) for t in clamped)
        model = CategoricalNBModel(classes=cls, class_prior=count / float(np.sum(count)), class_count=count,
                                   category_count=clamped, feature_log_prob=logp, n_categories=levels)
        return Outcome(model, parts={"tables": tables, "class_count": direct})

    return Plan(mechanism="categorical_nb", cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def categorical_nb(X: Any, y: Any, epsilon: float, *, classes: Any, categories: Any, alpha: float = 1.0,
                   neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                   rng: RandomSource | None = None, description: str = "") -> Release:
    """Categorical Naive Bayes from noisy class-by-level count tables (pure epsilon-DP).

    Parameters
    ----------
    X:
        Private features, shape (n, d): integer level codes, feature ``j`` in ``0 .. categories[j] - 1``.
    y:
        Private labels, one per row, each one of ``classes``.
    epsilon:
        The privacy parameter, > 0.
    classes:
        The public label set (required; dpkit never reads it from the data).
    categories:
        The public number of levels of every feature (required): one integer for all or one per feature. A
        code outside them is refused (:class:`~dpkit.core.errors.InvalidData`), never clamped.
    alpha:
        Additive (Laplace/Lidstone) smoothing of the clamped noisy counts (default 1.0), post-processing.
    neighbours:
        Add/remove one record (default, or the accountant's relation), replace one record, or a privacy unit
        of ``max_rows`` records.
    accountant:
        If given, charged ``PureDP(epsilon)`` before any noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-DP (pure). One integer vector is released: for every feature ``j`` the K x ``V_j`` table of
    counts of (class, level) and, last, the K class counts. A record adds one to exactly one cell of every
    table (its class and its level) and one class count; the classes partition the records (parallel
    composition across classes: K does not enter), so adding or removing one record moves the whole vector by
    ``d + 1`` in L1. Under replace-one the sensitivity doubles (``2 (d + 1)``) and a privacy unit of ``r`` rows
    multiplies it by ``r``. Discrete Laplace noise calibrated to that sensitivity
    (:func:`~dpkit.mechanisms.discrete_laplace_plan`, an exact sampler) gives ``epsilon``-DP; everything after
    is post-processing.

    Cost
    ----
    ``PureDP(epsilon)``, charged once to ``accountant`` (if given) before any noise is drawn; a refused charge
    or an invalid argument draws nothing.

    Output law
    ----------
    Every cell of every table and every class count is released as the true count plus independent discrete
    Laplace noise of scale ``params["scale"]`` (``P[Z = z] ∝ exp(-|z| / t)``, ``t`` about ``u (d + 1) /
    epsilon``): ``parts["tables"]`` (one K x ``V_j`` int array per feature) and ``parts["class_count"]``. The
    value is a :class:`CategoricalNBModel`: the class counts are the inverse-variance combination of the
    released class counts and the row sums of the d tables (weights 1 and ``1 / V_j``), clamped at 1, and give
    the priors; the cells are clamped at 0 and ``log P(x_j = v | k) = log((c_kv + alpha) / sum_v (c_kv +
    alpha))``.

    Error
    -----
    Every count has noise of standard deviation about ``sqrt(2) (d + 1) / epsilon``, the same for every cell, so
    the relative error of a cell is about that over its count: large cells are accurate, cells with counts
    below a few noise scales are dominated by noise (and by ``alpha``). The clamping at 0 biases small cells
    upwards. No interval is stated for the predictions.

    Notes
    -----
    iReduct's Naive Bayes case study (Xiao, Bender, Hay, Gehrke, SIGMOD 2011, Sec. 6.5) releases the same
    marginals (the class marginal and one class x feature marginal per feature) and shows that spending the
    budget to reduce their *relative* errors (noise scales chosen per marginal from noisy counts) gives more
    accurate classifiers than equal noise; its post-processing ``y <- max(y + 1, 1)`` is exactly this
    function's ``max(y, 0) + alpha`` with ``alpha = 1``. This function uses one noise scale for every cell
    (the paper's "Dwork" baseline, whose error it calls near-uniform for sparse tables) and instead combines the
    d + 1 measurements of the class counts; it does not implement iReduct's noise reduction. On UCI Adult a
    simulated TwoPhase allocation (the paper's first-cut relative-error method) gave no gain over one scale
    (``docs/benchmarks.md``, Naive Bayes).

    References
    ----------
    Xiao, Bender, Hay, Gehrke, "iReduct: differential privacy with reduced relative errors", SIGMOD 2011.
    Vaidya et al., WI-IAT 2013.

    Examples
    --------
    >>> import numpy as np, dpkit
    >>> from dpkit.learn import categorical_nb
    >>> X = np.array([[0, 1], [0, 0], [2, 1], [2, 1]] * 50)
    >>> y = np.array([0, 0, 1, 1] * 50)
    >>> rel = categorical_nb(X, y, 1.0, classes=[0, 1], categories=[3, 2], rng=dpkit.deterministic_source(1))
    >>> [t.shape for t in rel.value.feature_log_prob], rel.params["sensitivity"]
    ([(2, 3), (2, 2)], 3)
    >>> rel.value.predict(np.array([[0, 0], [2, 1]])).tolist()
    [0, 1]
    """
    return run(_categorical_nb_plan(X, y, epsilon, classes=classes, categories=categories, alpha=alpha,
                                    neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


# -- estimators ------------------------------------------------------------------------------------------------
class _NBMixin(ModelClassifier):
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Log posterior class probabilities, shape (n, K), columns in ``classes_`` order."""
        return np.asarray(self._model().predict_log_proba(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior class probabilities, shape (n, K), columns in ``classes_`` order."""
        return np.exp(self.predict_log_proba(X))


class GaussianNB(_NBMixin, Estimator):
    """Gaussian Naive Bayes, epsilon-DP (scikit-learn style); ``fit`` calls :func:`gaussian_nb`.

    Fitted attributes (scikit-learn names): ``classes_``, ``class_prior_``, ``class_count_`` (noisy, clamped at
    1), ``theta_``, ``var_``, ``n_features_in_`` and ``release_`` (the :class:`~dpkit.mechanisms.Release`). Each
    ``fit`` charges ``PureDP(epsilon)`` to ``accountant`` (shared by clones). Test rows are clamped into
    ``bounds`` before scoring.
    """

    def __init__(self, epsilon: float = 1.0, *, classes: Any = None, bounds: Any = None, l1_norm: Any = None,
                 count_share: float = 0.1, var_smoothing: float = 0.02, accountant: Any = None,
                 rng: Any = None) -> None:
        self.epsilon = epsilon
        self.classes = classes
        self.bounds = bounds
        self.l1_norm = l1_norm
        self.count_share = count_share
        self.var_smoothing = var_smoothing
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> GaussianNB:
        """Fit on private ``X``, ``y`` (charges ``epsilon``); returns ``self``."""
        rel = gaussian_nb(X, y, self.epsilon, classes=self.classes, bounds=self.bounds, l1_norm=self.l1_norm,
                          count_share=self.count_share, var_smoothing=self.var_smoothing,
                          accountant=self.accountant, rng=self.rng)
        m: GaussianNBModel = rel.value
        self.release_ = rel
        self.classes_ = m.classes
        self.class_prior_ = m.class_prior
        self.class_count_ = m.class_count
        self.theta_ = m.theta
        self.var_ = m.var
        self.n_features_in_ = int(m.theta.shape[1])
        return self


class CategoricalNB(_NBMixin, Estimator):
    """Categorical Naive Bayes, epsilon-DP (scikit-learn style); ``fit`` calls :func:`categorical_nb`.

    Features are integer level codes (``0 .. categories[j] - 1``). Fitted attributes (scikit-learn names):
    ``classes_``, ``class_prior_``, ``class_count_``, ``category_count_``, ``feature_log_prob_``,
    ``n_categories_``, ``n_features_in_`` and ``release_``. Each ``fit`` charges ``PureDP(epsilon)`` to
    ``accountant`` (shared by clones).
    """

    def __init__(self, epsilon: float = 1.0, *, classes: Any = None, categories: Any = None, alpha: float = 1.0,
                 accountant: Any = None, rng: Any = None) -> None:
        self.epsilon = epsilon
        self.classes = classes
        self.categories = categories
        self.alpha = alpha
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> CategoricalNB:
        """Fit on private ``X``, ``y`` (charges ``epsilon``); returns ``self``."""
        rel = categorical_nb(X, y, self.epsilon, classes=self.classes, categories=self.categories,
                             alpha=self.alpha, accountant=self.accountant, rng=self.rng)
        m: CategoricalNBModel = rel.value
        self.release_ = rel
        self.classes_ = m.classes
        self.class_prior_ = m.class_prior
        self.class_count_ = m.class_count
        self.category_count_ = list(m.category_count)
        self.feature_log_prob_ = list(m.feature_log_prob)
        self.n_categories_ = m.n_categories
        self.n_features_in_ = int(m.n_categories.size)
        return self
