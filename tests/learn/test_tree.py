"""dpkit.learn.tree: DiffPID3 decision trees and PrivPfC grid classifiers."""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings

import numpy as np
import pytest

import dpkit
from dpkit.audit import audit
from dpkit.audit.testing import check_mechanism
from dpkit.core import Accountant, InvalidData, InvalidParameter, NotFitted, PureDP, Replace, WrongType
from dpkit.learn import DecisionTreeClassifier, PrivPfCClassifier, diffpid3, privpfc
from dpkit.learn.tree import QUALITY_SENSITIVITY, _quality_terms
from dpkit.mechanisms import discrete_laplace_scale
from dpkit.noise import deterministic_source

# -- small fixed data ------------------------------------------------------------------------------------------
TX = np.array([[0, 1], [2, 0], [1, 1], [2, 1], [0, 0], [1, 0]])
TY = np.array([0, 1, 1, 0, 0, 1])
TX_NEXT, TY_NEXT = np.vstack([TX, [[2, 1]]]), np.append(TY, 1)
KW = {"classes": [0, 1], "categories": [3, 2]}

# a deterministic 2,000-row set with 3 binary attributes, each predicting y on part of the rows
_I = np.arange(2000)
EX = np.column_stack([_I % 2, (_I // 2) % 2, (_I // 4) % 2])
_R = _I % 20
EY = np.where(_R < 9, EX[:, 0], np.where(_R < 15, EX[:, 1], EX[:, 2]))

#: chi-square critical values at p = 1e-7 (df -> value), so a correct sampler fails with probability < 1e-7
_CHI2 = {2: 32.24, 7: 45.67}


def _chi2(freq: np.ndarray, p: np.ndarray) -> float:
    exp = p * freq.sum()
    return float(np.sum((freq - exp) ** 2 / exp))


def _planted(n, seed):
    gen = np.random.default_rng(seed)
    X = gen.integers(0, 4, (n, 6))
    y = ((X[:, 1] >= 2) ^ (X[:, 3] == 0)).astype(np.int64)
    flip = gen.random(n) < 0.05
    return X, np.where(flip, 1 - y, y)


# -- exact laws and exact privacy of the released counts -------------------------------------------------------
def _root(X, y, epsilon, **kw):
    """diffpid3 as a single leaf: the root's noisy record count and class counts (three discrete Laplace counts at
    epsilon / 2 each: L1 sensitivity 2 at scale 2 / epsilon, so epsilon in all)."""
    rel = diffpid3(X, y, epsilon, max_depth=0, **kw)
    value = np.concatenate([rel.parts["node_count"][:1], rel.parts["leaf_counts"][0]])
    return dataclasses.replace(rel, value=value, noise="discrete_laplace", scale=rel.params["scale"])


def test_diffpid3_counts_follow_their_law_and_are_exactly_private():
    truth = np.array([6, 3, 3])
    nxt = np.array([7, 3, 4])
    report = check_mechanism(_root, (TX, TY, 0.8), KW, true_value=truth, neighbour={"X": TX_NEXT, "y": TY_NEXT},
                             neighbour_true_value=nxt, checks=["output_law", "privacy"])
    assert report.passed and "exact" in report["privacy"].detail
    rel = diffpid3(TX, TY, 0.8, max_depth=0, rng=deterministic_source(0), **KW)
    assert rel.params["epsilon_level"] == pytest.approx(0.4) and rel.params["scale"] == discrete_laplace_scale(1, 0.4)
    # the budget per level: epsilon / (2 (d' + 1)), d' = min(max_depth, d)
    assert diffpid3(TX, TY, 1.2, max_depth=1, rng=deterministic_source(0), **KW).params["epsilon_level"] == \
        pytest.approx(0.3)
    deep = diffpid3(TX, TY, 1.2, max_depth=9, rng=deterministic_source(0), **KW).params
    assert deep["depth"] == 2 and deep["epsilon_level"] == pytest.approx(0.2)
    rep = diffpid3(TX, TY, 0.8, max_depth=0, neighbours=Replace(), rng=deterministic_source(0), **KW)
    assert rep.params["unit"] == 2 and rep.params["scale"] == discrete_laplace_scale(2, 0.4)


def _cells(X, y, epsilon, **kw):
    rel = privpfc(X, y, epsilon, max_attributes=0, **kw)
    return dataclasses.replace(rel, value=rel.parts["cell_counts"].ravel(), noise="discrete_laplace",
                               scale=rel.params["cell_scale"], cost=PureDP(rel.params["epsilon_cells"]))


def _total(X, y, epsilon, **kw):
    rel = privpfc(X, y, epsilon, max_attributes=0, **kw)
    return dataclasses.replace(rel, value=rel.parts["noisy_n"], noise="discrete_laplace",
                               scale=rel.params["count_scale"], cost=PureDP(rel.params["epsilon_count"]))


def test_privpfc_counts_follow_their_law_and_are_exactly_private():
    report = check_mechanism(_cells, (TX, TY, 1.0), KW, true_value=np.array([3, 3]),
                             neighbour={"X": TX_NEXT, "y": TY_NEXT}, neighbour_true_value=np.array([3, 4]),
                             checks=["output_law", "privacy"])
    assert report.passed and "exact" in report["privacy"].detail
    report = check_mechanism(_total, (TX, TY, 1.0), KW, true_value=6, neighbour={"X": TX_NEXT, "y": TY_NEXT},
                             neighbour_true_value=7, checks=["output_law", "privacy"], law_samples=8_000)
    assert report.passed
    p = privpfc(TX, TY, 1.0, rng=deterministic_source(0), **KW).params
    assert p["epsilon_count"] + p["epsilon_select"] + p["epsilon_cells"] <= 1.0
    assert (p["epsilon_count"], p["epsilon_select"], p["epsilon_cells"]) == pytest.approx((0.03, 0.37, 0.6))
    assert p["quality_sensitivity"] == QUALITY_SENSITIVITY
    rep = privpfc(TX, TY, 1.0, neighbours=Replace(), rng=deterministic_source(0), **KW).params
    assert rep["quality_sensitivity"] == 2 * QUALITY_SENSITIVITY and rep["cell_scale"] == discrete_laplace_scale(2, 0.6)


# -- the exponential mechanisms: selection frequencies against the exact law ---------------------------------
def _purity(a, criterion):
    t = np.zeros((2, 2))
    np.add.at(t, (EX[:, a], EY), 1)
    if criterion == "max":
        return t.max(axis=1).sum()
    tot = t.sum(axis=1)
    return -float(np.sum(tot - (t * t).sum(axis=1) / tot))


@pytest.mark.parametrize("criterion,factor", [("max", 1.0), ("gini", 4.0)])
def test_diffpid3_split_attribute_has_the_exact_exponential_law(criterion, factor):
    """The root's attribute: P[a] ∝ exp(eps' q_a / Delta) for the monotone max score (Delta = 1), exp(eps' q_a /
    (2 * 2)) for Gini (Delta = 2, not monotone). The root never stops here (N / (t K) = 500 >> sqrt 2 / eps')."""
    eps = 0.08
    q = np.array([_purity(a, criterion) for a in range(3)])
    law = np.exp((eps / 4) * (q - q.max()) / factor)
    law /= law.sum()
    assert law.min() > 0.03  # a spread law: the test has power
    trials = 1500
    freq = np.zeros(3)
    for s in range(trials):
        rel = diffpid3(EX, EY, eps, classes=[0, 1], categories=2, max_depth=1, criterion=criterion,
                       rng=deterministic_source(10_000 + s))
        freq[int(rel.value.feature[0])] += 1
    assert _chi2(freq, law) < _CHI2[2], (freq / trials, law)
    # a twice-too-sharp law (the monotone form for Gini, or eps instead of eps') is rejected
    wrong = np.exp((eps / 4) * (q - q.max()) * 2 / factor)
    assert _chi2(freq, wrong / wrong.sum()) > _CHI2[2]


def _expected_correct(table, b):
    """Independent statement of PrivPfC's quality: sum over cells of the expected number of records classified
    correctly when Laplace(b) noise on both counts decides the cell's label."""
    m1, m2 = table.max(axis=1), table.min(axis=1)
    x = m1 - m2
    swap = 0.5 * (1 + x / (2 * b)) * np.exp(-x / b)  # P[Lap(b) - Lap(b) > x]
    return float(np.sum(m1 * (1 - swap) + m2 * swap))


def test_privpfc_selects_one_grid_with_the_exact_law_and_the_corrected_sign():
    """Errata: Li et al. print p_i = exp(-q_i eps_sh / 2). The quality counts correct classifications (higher is
    better), so the grid is drawn with P ∝ exp(+eps_sh q / (2 * 1.089)): the frequencies match this law, the best
    grid is the most frequent, and the printed law is rejected."""
    eps, kw = 0.05, {"classes": [0, 1], "categories": 2, "shares": (0.2, 0.4, 0.4), "cell_factor": 1000.0}
    ref = privpfc(EX, EY, eps, rng=deterministic_source(0), **kw)
    b, eps_sh = ref.params["cell_scale"], ref.params["epsilon_select"]
    grids = [()] + [s for k in (1, 2, 3) for s in itertools.combinations(range(3), k)]
    assert [g for g, _ in ref.parts["pool"]] == grids
    q = []
    for g in grids:
        idx = np.zeros(EX.shape[0], dtype=np.int64)
        for j in g:
            idx = idx * 2 + EX[:, j]
        t = np.zeros((2 ** len(g), 2))
        np.add.at(t, (idx, EY), 1)
        q.append(_expected_correct(t, b))
    qa = np.array(q)
    law = np.exp(eps_sh * (qa - qa.max()) / (2 * QUALITY_SENSITIVITY))
    law /= law.sum()
    assert law.min() > 0.005 and law.max() < 0.3
    trials = 2000
    freq = np.zeros(len(grids))
    for s in range(trials):
        freq[privpfc(EX, EY, eps, rng=deterministic_source(20_000 + s), **kw).parts["selected"]] += 1
    assert _chi2(freq, law) < _CHI2[7], (freq / trials, law)
    assert int(np.argmax(freq)) == int(np.argmax(qa))
    printed = np.exp(-(qa - qa.min()) * eps_sh / 2)
    assert _chi2(freq, printed / printed.sum()) > _CHI2[7]


def test_quality_matches_the_expected_correct_count_and_its_sensitivity():
    gen = np.random.default_rng(5)
    for b in (0.3, 1.0, 7.0, 60.0):
        t = gen.integers(0, 50, (20, 2))
        assert _quality_terms(t, b) == pytest.approx(_expected_correct(t.astype(float), b), rel=1e-12)
    # exhaustive: adding one record to one class of one cell moves the quality by at most 1 + c (c = 0.08891)
    worst = 0.0
    for b in (0.25, 1.0, 3.0, 10.0):
        grid = np.array(list(itertools.product(range(80), repeat=2)))
        base = np.array([_quality_terms(row[None, :], b) for row in grid])
        for cls in (0, 1):
            up = grid.copy()
            up[:, cls] += 1
            moved = np.array([_quality_terms(row[None, :], b) for row in up]) - base
            worst = max(worst, float(np.max(np.abs(moved))))
    c = math.exp(-(1 + math.sqrt(3))) * (1 + math.sqrt(3)) / 2
    assert 1.0 + c - 1e-3 < worst <= 1.0 + c + 1e-12 <= QUALITY_SENSITIVITY
    # three classes: the top two only, still within the bound
    t3 = np.array(list(itertools.product(range(12), repeat=3)))
    for b in (0.5, 2.0):
        base = np.array([_quality_terms(r[None, :], b) for r in t3])
        for cls in range(3):
            up = t3.copy()
            up[:, cls] += 1
            moved = np.array([_quality_terms(r[None, :], b) for r in up]) - base
            assert np.max(np.abs(moved)) <= QUALITY_SENSITIVITY


# -- the whole release and the auditor ---------------------------------------------------------------------------
def _class1(outs):
    return np.array([float(np.sum(o.counts[:, 1])) >= 4.0 for o in outs])


@pytest.mark.parametrize("fn,kw", [(diffpid3, {"max_depth": 2}), (privpfc, {})], ids=["diffpid3", "privpfc"])
def test_the_whole_release_under_the_contract(fn, kw):
    check_mechanism(fn, (TX, TY, 1.0), {**KW, **kw}, neighbour={"X": TX_NEXT, "y": TY_NEXT}, event=_class1,
                    audit_trials=400)


def test_leaf_labels_from_the_true_counts_are_caught():
    """A known non-private variant: the leaf labelled with the true majority (SuLQ-free ID3 with exact counts).
    Three of each class: the tie goes to class 0; the added class-1 record makes it class 1 surely."""

    def leaky(data, rng):
        X, y = data
        diffpid3(X, y, 1.0, max_depth=0, rng=rng, **KW)
        return int(np.argmax(np.bincount(y, minlength=2)))

    r = audit(leaky, (TX, TY), (TX_NEXT, TY_NEXT), trials=300, claimed_epsilon=1.0, rng=deterministic_source(4),
              event=lambda o: np.asarray(o) == 1)
    assert r.flagged


def test_too_little_noise_is_caught_by_the_contract_event():
    """The contract's event catches a tree whose counts get 20 times too little noise for the claimed epsilon."""

    def loud(data, rng):
        X, y = data
        return diffpid3(X, y, 20.0, max_depth=0, rng=rng, **KW).value

    r = audit(loud, (TX, TY), (TX_NEXT, TY_NEXT), trials=600, claimed_epsilon=1.0, rng=deterministic_source(6),
              event=_class1)
    assert r.flagged


# -- the fitted models -----------------------------------------------------------------------------------------
def test_accuracy_on_a_planted_rule():
    X, y = _planted(6000, 1)
    Xt, yt = _planted(4000, 2)
    tree = DecisionTreeClassifier(1.0, classes=[0, 1], categories=4, max_depth=3,
                                  rng=deterministic_source(3)).fit(X, y)
    assert tree.score(Xt, yt) > 0.9  # Bayes rate 0.95
    assert tree.tree_.feature[0] in (1, 3) and tree.n_features_in_ == 6 and tree.node_count_ > 1
    grid = PrivPfCClassifier(1.0, classes=[0, 1], categories=4, rng=deterministic_source(4)).fit(X, y)
    assert grid.score(Xt, yt) > 0.9
    assert {1, 3} <= set(grid.features_)
    for est in (tree, grid):
        proba = est.predict_proba(Xt[:50])
        assert proba.shape == (50, 2) and np.allclose(proba.sum(axis=1), 1.0)
        assert np.array_equal(est.classes_[np.argmax(proba, axis=1)], est.predict(Xt[:50]))
    gini = DecisionTreeClassifier(1.0, classes=[0, 1], categories=4, max_depth=3, criterion="gini",
                                  rng=deterministic_source(5)).fit(X, y)
    assert gini.score(Xt, yt) > 0.9


def test_hierarchy_levels_and_small_epsilon():
    """A coarse level that keeps the rule: under heavy cell noise its grid (2 cells) has the higher quality than the
    finest level's (8 cells), is drawn more often, and predictions go through the map."""
    n = 600
    i = np.arange(n)
    X = np.column_stack([i % 8, (i // 8) % 2])
    y = np.where(i % 5 == 0, (X[:, 0] < 4), (X[:, 0] >= 4)).astype(np.int64)  # the rule on 80% of the rows
    half = {0: [np.arange(8) // 4]}
    kw = {"classes": [0, 1], "categories": [8, 2], "hierarchies": half, "max_attributes": 1,
          "shares": (0.2, 0.3, 0.5), "cell_factor": 1000.0}
    b = privpfc(X, y, 0.1, rng=deterministic_source(0), **kw).params["cell_scale"]
    fine = np.zeros((8, 2), dtype=np.int64)
    np.add.at(fine, (X[:, 0], y), 1)
    coarse = np.zeros((2, 2), dtype=np.int64)
    np.add.at(coarse, (X[:, 0] // 4, y), 1)
    assert _quality_terms(coarse, b) > _quality_terms(fine, b) + 30
    picks = {(0,): 0, (8,): 0, (2,): 0, (): 0}
    for s in range(300):
        g = privpfc(X, y, 0.1, rng=deterministic_source(100 + s), **kw).value
        picks[g.shape if g.features == (0,) else ()] += 1  # () counts the one-cell grid and attribute 1's
        if g.features == (0,) and g.shape == (2,):
            assert np.array_equal(g.maps[0], half[0][0])
    assert picks[(2,)] > picks[(8,)]
    g = privpfc(X, y, 50.0, rng=deterministic_source(1), **{**kw, "shares": (0.03, 0.37, 0.6)}).value
    assert g.features == (0,) and g.predict(np.array([[1, 0], [6, 1]])).tolist() == [0, 1]


def test_max_nodes_caps_the_tree_and_empty_grids_fall_back():
    X, y = _planted(4000, 3)
    rel = diffpid3(X, y, 5.0, classes=[0, 1], categories=4, max_depth=4, max_nodes=9, rng=deterministic_source(1))
    assert rel.value.node_count <= 9 and rel.params["nodes"] == rel.value.node_count
    # a one-cell grid (no attribute) predicts its noisy majority everywhere
    g = privpfc(X, y, 1.0, classes=[0, 1], categories=4, max_attributes=0, rng=deterministic_source(2)).value
    assert g.features == () and g.counts.shape == (1, 2) and len(set(g.predict(X[:20]).tolist())) == 1


def test_string_labels_and_not_fitted():
    with pytest.raises(NotFitted):
        DecisionTreeClassifier(classes=["a", "b"], categories=2).predict(np.zeros((1, 2)))
    with pytest.raises(NotFitted):
        PrivPfCClassifier(classes=["a", "b"], categories=2).predict_proba(np.zeros((1, 2)))
    y = np.array(["a", "b"] * 100)
    X = np.tile([[0], [1]], (100, 1))
    est = DecisionTreeClassifier(5.0, classes=["b", "a"], categories=2, rng=deterministic_source(0)).fit(X, y)
    assert list(est.classes_) == ["a", "b"] and est.predict(X[:2]).tolist() == ["a", "b"]
    grid = PrivPfCClassifier(5.0, classes=["a", "b"], categories=2, rng=deterministic_source(0)).fit(X, y)
    assert grid.predict(X[:2]).tolist() == ["a", "b"]


def test_reproducible_and_charged_once():
    acct = Accountant(PureDP(2.0))
    a = diffpid3(TX, TY, 0.4, accountant=acct, rng=deterministic_source(9), **KW)
    assert a.value == diffpid3(TX, TY, 0.4, rng=deterministic_source(9), **KW).value
    assert len(acct.receipts) == 1 and acct.spent.epsilon == pytest.approx(0.4)
    b = privpfc(TX, TY, 0.5, accountant=acct, rng=deterministic_source(9), **KW)
    assert b.value == privpfc(TX, TY, 0.5, rng=deterministic_source(9), **KW).value
    assert len(acct.receipts) == 2 and acct.spent.epsilon == pytest.approx(0.9)


# -- bad input: typed errors, nothing charged ------------------------------------------------------------------
COMMON_BAD = [
    ({"X": np.array([[0, 1.5]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[3, 1]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[-1, 1]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[np.nan, 1]] * 6)}, InvalidData, "X"),
    ({"X": np.array([[np.inf, 1]] * 6)}, InvalidData, "X"),
    ({"X": None}, WrongType, "X"),
    ({"X": np.zeros((0, 2)), "y": np.zeros(0, dtype=int)}, InvalidData, "X"),
    ({"X": np.zeros(6)}, InvalidData, "X"),
    ({"y": np.array([0, 1, 0, 1, 0])}, InvalidData, "y"),
    ({"y": np.array([0, 1, 0, 1, 0, 5])}, InvalidData, "y"),
    ({"categories": None}, InvalidParameter, "categories"),
    ({"categories": [3]}, InvalidParameter, "categories"),
    ({"categories": "3"}, WrongType, "categories"),
    ({"classes": None}, InvalidParameter, "classes"),
    ({"classes": [0]}, InvalidParameter, "classes"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"epsilon": float("nan")}, InvalidParameter, "epsilon"),
]
TREE_BAD = [
    ({"max_depth": -1}, InvalidParameter, "max_depth"),
    ({"max_depth": 1.5}, WrongType, "max_depth"),
    ({"criterion": "entropy"}, InvalidParameter, "criterion"),
    ({"max_nodes": 0}, InvalidParameter, "max_nodes"),
]
PFC_BAD = [
    ({"hierarchies": {0: [[0, 0]]}}, InvalidParameter, "hierarchies"),
    ({"hierarchies": {0: [[0, 0, 2]]}}, InvalidParameter, "hierarchies"),
    ({"hierarchies": {5: [[0, 0, 1]]}}, InvalidParameter, "hierarchies"),
    ({"hierarchies": [[0, 0, 1]]}, WrongType, "hierarchies"),
    ({"max_attributes": -1}, InvalidParameter, "max_attributes"),
    ({"max_grids": 0}, InvalidParameter, "max_grids"),
    ({"max_cells": 0}, InvalidParameter, "max_cells"),
    ({"cell_factor": 0.0}, InvalidParameter, "cell_factor"),
    ({"shares": (1.0, 1.0)}, InvalidParameter, "shares"),
    ({"shares": (1.0, -1.0, 1.0)}, InvalidParameter, "shares"),
    ({"shares": None}, WrongType, "shares"),
]


@pytest.mark.parametrize("fn,bad,err,param",
                         [(diffpid3, *b) for b in COMMON_BAD + TREE_BAD]
                         + [(privpfc, *b) for b in COMMON_BAD + PFC_BAD])
def test_bad_input_is_refused_before_any_charge(fn, bad, err, param):
    acct = Accountant(PureDP(10.0))
    base = {"X": TX, "y": TY, "epsilon": 1.0, **KW}
    with pytest.raises(err) as info:
        fn(**{**base, **bad}, accountant=acct, rng=deterministic_source(0))
    assert info.value.param == param
    assert acct.spent.epsilon == 0 and not acct.receipts


def test_estimator_refuses_an_unknown_method_before_any_charge():
    acct = Accountant(PureDP(10.0))
    with pytest.raises(InvalidParameter) as info:
        DecisionTreeClassifier(1.0, method="sulq", accountant=acct, **KW).fit(TX, TY)
    assert info.value.param == "method" and not acct.receipts


def test_predict_refuses_codes_outside_the_declared_levels_and_errors_name_no_value():
    est = DecisionTreeClassifier(1.0, rng=deterministic_source(0), **KW).fit(TX, TY)
    with pytest.raises(InvalidData):
        est.predict(np.array([[3, 0]]))
    with pytest.raises(InvalidData):
        PrivPfCClassifier(1.0, rng=deterministic_source(0), **KW).fit(TX, TY).predict(np.array([[0, 0, 0]]))
    X = TX.copy()
    X[0, 0] = 987654
    with pytest.raises(InvalidData) as info:
        diffpid3(X, TY, 1.0, **KW)
    assert "987654" not in str(info.value)


# -- scikit-learn ------------------------------------------------------------------------------------------------
def test_clone_pipeline_and_grid_search_share_the_budget():
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, y = _planted(800, 9)
    acct = Accountant(PureDP(100.0))
    est = DecisionTreeClassifier(1.0, classes=[0, 1], categories=4, max_depth=2, accountant=acct,
                                 rng=deterministic_source(1))
    twin = clone(est)
    assert twin.accountant is acct and twin.get_params() == est.get_params()
    pipe = make_pipeline(FunctionTransformer(), twin).fit(X, y)
    assert pipe.score(X, y) > 0.6 and acct.spent.epsilon == pytest.approx(1.0)
    grid = GridSearchCV(est, {"max_depth": [1, 2]}, cv=2).fit(X, y)
    assert grid.best_params_["max_depth"] in (1, 2)
    assert acct.spent.epsilon == pytest.approx(1.0 + 4 * 1.0 + 1.0)  # 2 x 2 folds, then the refit
    pfc = PrivPfCClassifier(1.0, classes=[0, 1], categories=4, accountant=acct, rng=deterministic_source(2))
    GridSearchCV(pfc, {"max_attributes": [1, 2]}, cv=2).fit(X, y)
    assert acct.spent.epsilon == pytest.approx(6.0 + 5.0)


#: scikit-learn checks that cannot hold for these DP estimators, and why (measured with scikit-learn 1.9: exactly
#: these fail)
_DECLARED = "the check fits labels or data outside the declared classes/levels: refused, since dpkit never reads " \
            "them from the data"
_TYPED = "dpkit raises its own typed errors (InvalidData/WrongType naming the parameter, never data values), not " \
         "scikit-learn's messages"
_CODES = "the check fits real-valued features: the trees take integer level codes below the declared counts"
EXPECTED = {
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
    **{name: _CODES for name in (
        "check_dict_unchanged", "check_dont_overwrite_parameters", "check_estimators_dtypes",
        "check_estimators_fit_returns_self", "check_estimators_nan_inf", "check_estimators_overwrite_params",
        "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_fit2d_1feature",
        "check_fit2d_1sample", "check_fit_score_takes_y", "check_n_features_in", "check_positive_only_tag_during_fit",
        "check_readonly_memmap_input", "check_fit_check_is_fitted")},
}


@pytest.mark.slow
@pytest.mark.parametrize("est", [DecisionTreeClassifier(1.0, classes=[0, 1, 2], categories=20, max_depth=2),
                                 PrivPfCClassifier(1.0, classes=[0, 1, 2], categories=20, max_attributes=1)],
                         ids=["diffpid3", "privpfc"])
def test_sklearn_check_estimator(est):
    pytest.importorskip("sklearn")
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(est, expected_failed_checks=EXPECTED, on_fail=None)
    unexpected = [r for r in results if r["status"] == "failed"]
    assert not unexpected, [(r["check_name"], str(r["exception"])[:200]) for r in unexpected]
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert len(passed) >= 16  # measured: 16 pass, the EXPECTED ones fail, the rest are skipped
    assert {"check_get_params_invariance", "check_set_params", "check_no_attributes_set_in_init"} <= passed
    assert isinstance(dpkit.learn.DecisionTreeClassifier(), DecisionTreeClassifier)
