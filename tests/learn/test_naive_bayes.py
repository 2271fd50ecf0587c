"""dpkit.learn.naive_bayes: Gaussian and categorical Naive Bayes from noisy sufficient statistics."""

from __future__ import annotations

import dataclasses
import warnings
from fractions import Fraction

import numpy as np
import pytest

import dpkit
from dpkit.audit import audit
from dpkit.audit.testing import check_mechanism
from dpkit.core import Accountant, InvalidData, InvalidParameter, NotFitted, PureDP, Replace, WrongType
from dpkit.learn import CategoricalNB, GaussianNB, categorical_nb, gaussian_nb
from dpkit.mechanisms import discrete_laplace_scale, laplace_scale
from dpkit.noise import deterministic_source

# -- small fixed data ------------------------------------------------------------------------------------------
# Gaussian: bounds (-1, 1), width 2: parts["sum"] / 2 (exact) is the released lattice value
GX = np.array([[0.5, -0.25, 0.75], [-0.5, 0.25, 0.0], [0.25, 0.5, -0.75], [-1.0, 1.0, 0.5], [0.0, -0.5, 0.25]])
GY = np.array([0, 1, 0, 1, 1])
G_EXTRA = np.array([[1.0, 1.0, 1.0]])  # the worst-case added record (every scaled value at 1), class 1
GX_NEXT, GY_NEXT = np.vstack([GX, G_EXTRA]), np.append(GY, 1)
# categorical: 2 features with 3 and 2 levels
CX = np.array([[0, 1], [2, 0], [1, 1], [2, 1], [0, 0], [1, 0]])
CY = np.array([0, 1, 1, 0, 0, 1])
CX_NEXT, CY_NEXT = np.vstack([CX, [[2, 1]]]), np.append(CY, 1)


def _g_truth(X, y, k=2):
    X = (X + 1.0) / 2.0  # scaled to [0, 1] by the bounds (-1, 1)
    s = np.zeros((k, X.shape[1]))
    q = np.zeros((k, X.shape[1]))
    np.add.at(s, y, X)
    np.add.at(q, y, X * X)
    return np.bincount(y, minlength=k), s, q


def _c_truth(X, y, levels=(3, 2), k=2):
    parts = []
    for j, v in enumerate(levels):
        t = np.zeros((k, v), dtype=np.int64)
        np.add.at(t, (y, X[:, j]), 1)
        parts.append(t.ravel())
    return np.concatenate([*parts, np.bincount(y, minlength=k)])


def _g_part(part, noise, scale_key, granularity_key=None, eps_key=None):
    """gaussian_nb with one part of the release exposed as the value (in units of the scaled features: divided
    by the width 2 or its square, exact), with its declared exact law and cost."""
    unit = {"class_count": 1, "sum": 2.0, "square_sum": 4.0}[part]

    def call(X, y, epsilon, **kw):
        rel = gaussian_nb(X, y, epsilon, **kw)
        p = rel.params
        value = np.asarray(rel.parts[part]).ravel()
        value = value if unit == 1 else value / unit
        return dataclasses.replace(rel, value=value, noise=noise, scale=p[scale_key],
                                   granularity=p[granularity_key] if granularity_key else None,
                                   cost=PureDP(p[eps_key]))
    return call


def _c_flat(X, y, epsilon, **kw):
    rel = categorical_nb(X, y, epsilon, **kw)
    flat = np.concatenate([*(t.ravel() for t in rel.parts["tables"]), rel.parts["class_count"]])
    return dataclasses.replace(rel, value=flat, noise="discrete_laplace", scale=rel.params["scale"])


G_KW = {"classes": [0, 1], "bounds": (-1.0, 1.0)}
C_KW = {"classes": [0, 1], "categories": [3, 2]}


# -- exact law and exact privacy of the released statistics ------------------------------------------------------
@pytest.mark.parametrize("part,noise,scale,gran,eps,index", [
    ("class_count", "discrete_laplace", "count_scale", None, "epsilon_count", 0),
    ("sum", "lattice_laplace", "sum_scale", "granularity_sum", "epsilon_sum", 1),
    ("square_sum", "lattice_laplace", "square_scale", "granularity_square", "epsilon_square", 2),
])
def test_gaussian_parts_follow_their_law_and_each_costs_its_share(part, noise, scale, gran, eps, index):
    truth, nxt = _g_truth(GX, GY), _g_truth(GX_NEXT, GY_NEXT)
    report = check_mechanism(_g_part(part, noise, scale, gran, eps), (GX, GY, 1.0), G_KW,
                             true_value=np.ravel(truth[index]), neighbour={"X": GX_NEXT, "y": GY_NEXT},
                             neighbour_true_value=np.ravel(nxt[index]), checks=["output_law", "privacy"],
                             law_samples=8_000)
    assert report.passed
    assert "exact" in report["privacy"].detail


def test_gaussian_l1_norm_bound_is_exactly_private():
    """With l1_norm = 1.5 the added all-ones row (scaled norm 3) is scaled down to norm 1.5: the sums move by
    exactly the declared sensitivity, and the exact privacy check holds at epsilon_sum."""
    kw = {**G_KW, "l1_norm": 1.5}
    rel = gaussian_nb(GX_NEXT, GY_NEXT, 1.0, rng=deterministic_source(0), **kw)
    assert rel.params["l1_norm"] == 1.5

    def truth(X, y):
        z = (X + 1.0) / 2.0
        norm = z.sum(axis=1)
        z[norm > 1.5] *= (1.5 / norm[norm > 1.5])[:, None]
        s = np.zeros((2, X.shape[1]))
        np.add.at(s, y, z)
        return s.ravel()

    report = check_mechanism(_g_part("sum", "lattice_laplace", "sum_scale", "granularity_sum", "epsilon_sum"),
                             (GX, GY, 1.0), kw, true_value=truth(GX, GY), neighbour={"X": GX_NEXT, "y": GY_NEXT},
                             neighbour_true_value=truth(GX_NEXT, GY_NEXT), checks=["output_law", "privacy"],
                             law_samples=8_000)
    assert report.passed and "exact" in report["privacy"].detail


def test_gaussian_budget_split_is_exact_and_scales_match_the_sensitivities():
    rel = gaussian_nb(GX, GY, 0.7, count_share=0.2, rng=deterministic_source(1), **G_KW)
    p = rel.params
    parts = [Fraction(p["epsilon_count"]), Fraction(p["epsilon_sum"]), Fraction(p["epsilon_square"])]
    assert sum(parts) <= Fraction(0.7) and rel.cost == PureDP(0.7)
    assert float(parts[0] / sum(parts)) == pytest.approx(0.2)
    d = GX.shape[1]
    assert p["count_scale"] == discrete_laplace_scale(1, p["epsilon_count"])
    assert p["sum_scale"] == laplace_scale(float(d), p["epsilon_sum"], 2 * d)[1]
    rep = gaussian_nb(GX, GY, 0.7, count_share=0.2, neighbours=Replace(), rng=deterministic_source(1), **G_KW)
    assert rep.params["unit"] == 2
    assert rep.params["count_scale"] == discrete_laplace_scale(2, p["epsilon_count"])
    assert rep.params["sum_scale"] == pytest.approx(2 * p["sum_scale"], rel=1e-5)


def test_categorical_tables_follow_the_law_and_are_exactly_private():
    report = check_mechanism(_c_flat, (CX, CY, 0.8), C_KW, true_value=_c_truth(CX, CY),
                             neighbour={"X": CX_NEXT, "y": CY_NEXT}, neighbour_true_value=_c_truth(CX_NEXT, CY_NEXT),
                             checks=["output_law", "privacy"])
    assert report.passed and "exact" in report["privacy"].detail
    rel = categorical_nb(CX, CY, 0.8, rng=deterministic_source(2), **C_KW)
    assert rel.params["sensitivity"] == 3 and rel.params["scale"] == discrete_laplace_scale(3, 0.8)
    rep = categorical_nb(CX, CY, 0.8, neighbours=Replace(), rng=deterministic_source(2), **C_KW)
    assert rep.params["sensitivity"] == 6


def test_the_whole_release_under_the_contract():
    def event_g(outs):  # the added record pushes class 1's first mean up
        return np.array([o.theta[1, 0] >= 0.2 for o in outs])

    check_mechanism(gaussian_nb, (GX, GY, 1.0), G_KW, neighbour={"X": GX_NEXT, "y": GY_NEXT}, event=event_g,
                    audit_trials=400)

    def event_c(outs):
        return np.array([o.category_count[0][1, 2] >= 2.0 for o in outs])

    check_mechanism(categorical_nb, (CX, CY, 1.0), C_KW, neighbour={"X": CX_NEXT, "y": CY_NEXT}, event=event_c,
                    audit_trials=400)


def test_priors_from_the_true_counts_are_caught():
    """A known non-private variant: priors computed from the true class counts (n treated as public). The
    auditor sees the two neighbours' priors differ surely."""

    def leaky(data, rng):
        X, y = data
        gaussian_nb(X, y, 1.0, rng=rng, **G_KW)  # the private model is drawn, but the prior is not from it
        return float(np.mean(y == 1))  # the true prior: no noise at all

    r = audit(leaky, (GX, GY), (GX_NEXT, GY_NEXT), trials=300, claimed_epsilon=1.0, rng=deterministic_source(4),
              event=lambda o: np.asarray(o) >= 0.62)
    assert r.flagged


# -- the fitted models -----------------------------------------------------------------------------------------
def _blobs(n, d, seed):
    gen = np.random.default_rng(seed)
    y = gen.integers(0, 2, n)
    X = gen.normal(0.0, 1.0, (n, d)) + np.where(y[:, None] == 1, 1.0, -1.0)
    return np.clip(X, -4, 4), y


def test_gaussian_accuracy_and_estimates():
    X, y = _blobs(6000, 4, 11)
    Xt, yt = _blobs(4000, 4, 12)
    est = GaussianNB(1.0, classes=[0, 1], bounds=(-4.0, 4.0), var_smoothing=0.005,  # floor 0.32 < var 1
                     rng=deterministic_source(3)).fit(X, y)
    assert est.score(Xt, yt) > 0.93  # Bayes rate about 0.9977; noise at eps = 1 is small at n = 6000
    X2, y2 = _blobs(20000, 4, 13)  # the estimates: at eps = 10 the noise on a mean/variance is about 0.01
    sharp = GaussianNB(10.0, classes=[0, 1], bounds=(-4.0, 4.0), var_smoothing=0.005,
                       rng=deterministic_source(4)).fit(X2, y2)
    assert np.all(np.abs(sharp.theta_ - np.array([[-1.0] * 4, [1.0] * 4])) < 0.15)
    assert np.all(np.abs(sharp.var_ - 1.0) < 0.3)  # clipped at +-4: the true variance is a little below 1
    assert est.class_prior_.sum() == pytest.approx(1.0) and abs(est.class_prior_[0] - 0.5) < 0.05
    proba = est.predict_proba(Xt[:5])
    assert proba.shape == (5, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert np.allclose(np.exp(est.predict_log_proba(Xt[:5])), proba)
    assert est.n_features_in_ == 4 and list(est.classes_) == [0, 1]
    # the variance floor from the bounds: var_smoothing * width^2
    wide = GaussianNB(1.0, classes=[0, 1], bounds=(-4.0, 4.0), var_smoothing=0.25, rng=deterministic_source(3))
    assert np.all(wide.fit(X, y).var_ == 16.0)
    # a declared L1 bound on the scaled rows lowers the sums' sensitivity (and so their noise scale)
    sparse = gaussian_nb(X, y, 1.0, classes=[0, 1], bounds=(-4.0, 4.0), l1_norm=1.5, rng=deterministic_source(3))
    dense = gaussian_nb(X, y, 1.0, classes=[0, 1], bounds=(-4.0, 4.0), rng=deterministic_source(3))
    assert sparse.params["l1_norm"] == 1.5 and dense.params["l1_norm"] == 4.0
    assert sparse.params["sum_scale"] == pytest.approx(dense.params["sum_scale"] * 1.5 / 4.0, rel=1e-5)


def test_categorical_accuracy():
    gen = np.random.default_rng(21)
    n = 5000
    y = gen.integers(0, 3, n)
    X = np.column_stack([np.where(gen.random(n) < 0.8, y, gen.integers(0, 3, n)),
                         np.where(gen.random(n) < 0.7, y + 1, gen.integers(0, 5, n)),
                         gen.integers(0, 2, n)])
    est = CategoricalNB(1.0, classes=[0, 1, 2], categories=[3, 5, 2], rng=deterministic_source(5)).fit(X, y)
    assert est.score(X, y) > 0.85
    assert [t.shape for t in est.feature_log_prob_] == [(3, 3), (3, 5), (3, 2)]
    for t in est.feature_log_prob_:
        assert np.allclose(np.exp(t).sum(axis=1), 1.0)
    assert np.all(est.class_count_ >= 1) and abs(est.class_count_.sum() - n) < 100
    assert est.predict_proba(X[:4]).shape == (4, 3)


def test_string_labels_and_not_fitted():
    with pytest.raises(NotFitted):
        GaussianNB(classes=["a", "b"], bounds=(0, 1)).predict(np.zeros((1, 2)))
    with pytest.raises(NotFitted):
        CategoricalNB(classes=["a", "b"], categories=2).predict_proba(np.zeros((1, 2)))
    y = np.array(["a", "b"] * 20)
    X = np.tile([[0.1], [0.9]], (20, 1))
    est = GaussianNB(5.0, classes=["b", "a"], bounds=(0, 1), rng=deterministic_source(0)).fit(X, y)
    assert list(est.classes_) == ["a", "b"] and est.predict(X[:2]).dtype.kind == "U"


def test_reproducible_and_charged_once():
    acct = Accountant(PureDP(1.0))
    a = gaussian_nb(GX, GY, 0.4, accountant=acct, rng=deterministic_source(9), **G_KW)
    b = gaussian_nb(GX, GY, 0.4, rng=deterministic_source(9), **G_KW)
    assert a.value == b.value and len(acct.receipts) == 1 and acct.spent.epsilon == pytest.approx(0.4)
    c = categorical_nb(CX, CY, 0.5, accountant=acct, rng=deterministic_source(9), **C_KW)
    assert c.value == categorical_nb(CX, CY, 0.5, rng=deterministic_source(9), **C_KW).value
    assert acct.spent.epsilon == pytest.approx(0.9)


# -- bad input: typed errors, nothing charged ------------------------------------------------------------------
G_BAD = [
    ({"X": np.array([[np.nan, 0.0, 0.0]] * 5)}, InvalidData, "X"),
    ({"X": np.array([[np.inf, 0.0, 0.0]] * 5)}, InvalidData, "X"),
    ({"X": None}, WrongType, "X"),
    ({"X": np.zeros((0, 3)), "y": np.zeros(0, dtype=int)}, InvalidData, "X"),
    ({"X": np.zeros(5)}, InvalidData, "X"),
    ({"y": np.array([0, 1, 0, 1])}, InvalidData, "y"),
    ({"y": np.array([0, 1, 0, 1, 7])}, InvalidData, "y"),
    ({"classes": None}, InvalidParameter, "classes"),
    ({"bounds": None}, InvalidParameter, "bounds"),
    ({"bounds": (1.0, -1.0)}, InvalidParameter, "bounds"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"count_share": 1.0}, InvalidParameter, "count_share"),
    ({"var_smoothing": 0.0}, InvalidParameter, "var_smoothing"),
    ({"var_smoothing": 0.3}, InvalidParameter, "var_smoothing"),
    ({"l1_norm": 0.0}, InvalidParameter, "l1_norm"),
    ({"l1_norm": "2"}, WrongType, "l1_norm"),
]
C_BAD = [
    ({"X": np.array([[0, 1.5]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[3, 1]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[-1, 1]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[np.nan, 1]] * 6)}, InvalidData, "X"),
    ({"X": np.zeros((0, 2)), "y": np.zeros(0, dtype=int)}, InvalidData, "X"),
    ({"y": np.array([0, 1, 0, 1, 0, 5])}, InvalidData, "y"),
    ({"categories": None}, InvalidParameter, "categories"),
    ({"categories": [3]}, InvalidParameter, "categories"),
    ({"categories": [3, 0]}, InvalidParameter, "categories"),
    ({"categories": "3"}, WrongType, "categories"),
    ({"classes": [0]}, InvalidParameter, "classes"),
    ({"alpha": 0.0}, InvalidParameter, "alpha"),
    ({"epsilon": float("nan")}, InvalidParameter, "epsilon"),
]


@pytest.mark.parametrize("fn,base,bad,err,param",
                         [(gaussian_nb, {"X": GX, "y": GY, "epsilon": 1.0, **G_KW}, *b) for b in G_BAD]
                         + [(categorical_nb, {"X": CX, "y": CY, "epsilon": 1.0, **C_KW}, *b) for b in C_BAD])
def test_bad_input_is_refused_before_any_charge(fn, base, bad, err, param):
    acct = Accountant(PureDP(10.0))
    with pytest.raises(err) as info:
        fn(**{**base, **bad}, accountant=acct, rng=deterministic_source(0))
    assert info.value.param == param
    assert acct.spent.epsilon == 0 and not acct.receipts


def test_predict_refuses_codes_outside_the_declared_levels():
    est = CategoricalNB(1.0, classes=[0, 1], categories=[3, 2], rng=deterministic_source(0)).fit(CX, CY)
    with pytest.raises(InvalidData):
        est.predict(np.array([[3, 0]]))
    with pytest.raises(InvalidData):
        est.predict(np.array([[0, 0, 0]]))


# -- scikit-learn ------------------------------------------------------------------------------------------------
def test_clone_pipeline_and_grid_search_share_the_budget():
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, y = _blobs(600, 3, 31)
    acct = Accountant(PureDP(100.0))
    est = GaussianNB(1.0, classes=[0, 1], bounds=(-4.0, 4.0), accountant=acct, rng=deterministic_source(1))
    twin = clone(est)
    assert twin.accountant is acct and twin.get_params() == est.get_params()
    pipe = make_pipeline(FunctionTransformer(), twin).fit(X, y)
    assert pipe.score(X, y) > 0.8 and acct.spent.epsilon == pytest.approx(1.0)
    grid = GridSearchCV(est, {"var_smoothing": [0.01, 0.05]}, cv=2).fit(X, y)
    assert grid.best_params_["var_smoothing"] in (0.01, 0.05)
    assert acct.spent.epsilon == pytest.approx(1.0 + 4 * 1.0 + 1.0)  # 2 x 2 folds, then the refit
    cat = CategoricalNB(1.0, classes=[0, 1], categories=[3, 2], accountant=acct, rng=deterministic_source(2))
    GridSearchCV(cat, {"alpha": [0.5, 1.0]}, cv=2).fit(np.vstack([CX] * 10), np.concatenate([CY] * 10))
    assert acct.spent.epsilon == pytest.approx(6.0 + 5.0)


#: scikit-learn checks that cannot hold for these DP estimators, and why (measured with scikit-learn 1.9)
_DECLARED = "the check fits labels or data outside the declared classes/levels: refused, since dpkit never reads " \
            "them from the data"
_TYPED = "dpkit raises its own typed errors (InvalidData/WrongType naming the parameter, never data values), not " \
         "scikit-learn's messages"
GAUSSIAN_EXPECTED = {
    "check_classifiers_classes": _DECLARED,
    "check_classifiers_one_label": _DECLARED,
    "check_classifiers_regression_target": _DECLARED,
    "check_classifiers_train": _DECLARED,
    "check_classifier_data_not_an_array": _DECLARED,
    "check_fit_idempotent": "each fit draws fresh noise (a randomized fit)",
    "check_n_features_in_after_fitting": _TYPED,
    "check_supervised_y_2d": _TYPED + " (a 2-D y is refused, not raveled)",
    "check_dtype_object": _TYPED + " (string features are refused)",
    "check_complex_data": _TYPED,
    "check_requires_y_none": _TYPED,
    "check_estimators_unfitted": "dpkit's NotFitted (an AttributeError) is not scikit-learn's NotFittedError",
    "check_estimators_empty_data_messages": _TYPED,
    "check_fit2d_predict1d": _TYPED,
    "check_estimator_sparse_tag": "sparse input is refused with a typed error (not scikit-learn's message)",
    "check_estimator_sparse_array": "sparse input is refused with a typed error (not scikit-learn's message)",
    "check_estimator_sparse_matrix": "sparse input is refused with a typed error (not scikit-learn's message)",
}
_CODES = "the check fits real-valued features: categorical_nb takes integer level codes below the declared counts"
CATEGORICAL_EXPECTED = {**GAUSSIAN_EXPECTED, **{name: _CODES for name in (
    "check_dict_unchanged", "check_dont_overwrite_parameters", "check_estimators_dtypes",
    "check_estimators_fit_returns_self", "check_estimators_nan_inf", "check_estimators_overwrite_params",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_1sample",
    "check_fit_score_takes_y", "check_n_features_in", "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input", "check_fit_check_is_fitted")}}


@pytest.mark.slow
@pytest.mark.parametrize("est,expected", [
    (GaussianNB(1.0, classes=[0, 1, 2], bounds=(-10.0, 10.0)), GAUSSIAN_EXPECTED),
    (CategoricalNB(1.0, classes=[0, 1, 2], categories=20), CATEGORICAL_EXPECTED)], ids=["gaussian", "categorical"])
def test_sklearn_check_estimator(est, expected):
    pytest.importorskip("sklearn")
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, expected_failed_checks=expected, on_fail=None)
    unexpected = [r for r in results if r["status"] == "failed"]
    assert not unexpected, [(r["check_name"], str(r["exception"])[:200]) for r in unexpected]
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert len(passed) >= (25 if isinstance(est, GaussianNB) else 12)
    assert {"check_get_params_invariance", "check_set_params", "check_no_attributes_set_in_init"} <= passed


def test_dpkit_errors_name_no_data_value():
    X = GX.copy()
    X[0, 0] = 987654.321
    with pytest.raises(InvalidData) as info:
        gaussian_nb(X, np.array([0, 1, 0, 1, 9]), 1.0, **G_KW)
    assert "987654" not in str(info.value)
    assert isinstance(dpkit.learn.GaussianNB(), GaussianNB)
