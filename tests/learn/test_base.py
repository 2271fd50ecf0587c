"""dpkit.learn._base: the estimator protocol, shared accountants under clone, and declared bounds/classes."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dpkit.core import Accountant, InvalidData, InvalidParameter, NotFitted, PureDP, WrongType
from dpkit.learn._base import ClassifierMixin, Estimator, check_fitted, columns, features, labels, targets
from dpkit.noise import deterministic_source


class _Toy(ClassifierMixin, Estimator):
    def __init__(self, epsilon: float = 1.0, *, classes=None, accountant=None, rng=None) -> None:
        self.epsilon = epsilon
        self.classes = classes
        self.accountant = accountant
        self.rng = rng

    def fit(self, X, y):
        self.classes_, _ = labels(y, self.classes, np.asarray(X).shape[0])
        self.accountant.charge(PureDP(self.epsilon), mechanism="toy")
        return self

    def predict(self, X):
        check_fitted(self, "classes_")
        return np.full(np.asarray(X).shape[0], self.classes_[0])


def test_params_roundtrip_and_repr():
    est = _Toy(0.5, classes=[0, 1])
    assert est.get_params() == {"accountant": None, "classes": [0, 1], "epsilon": 0.5, "rng": None}
    assert est.set_params(epsilon=2.0) is est and est.epsilon == 2.0
    assert repr(est) == "_Toy(classes=[0, 1], epsilon=2.0)"
    with pytest.raises(InvalidParameter) as err:
        est.set_params(nope=1)
    assert err.value.param == "nope"


def test_copies_share_the_accountant_and_source():
    acct = Accountant(PureDP(1.0))
    rng = deterministic_source(3)
    est = _Toy(0.6, classes=[0, 1], accountant=acct, rng=rng)
    twin = copy.deepcopy(est)
    assert twin.accountant is acct and twin.rng is rng
    X, y = np.zeros((4, 2)), np.array([0, 1, 1, 0])
    est.fit(X, y)
    from dpkit.core import BudgetExceeded

    with pytest.raises(BudgetExceeded):  # the copy charges the same budget: 0.6 + 0.6 > 1
        twin.fit(X, y)


def test_sklearn_clone_pipeline_share_the_budget():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.base import clone, is_classifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    acct = Accountant(PureDP(1.0))
    est = _Toy(0.25, classes=[0, 1], accountant=acct)
    c = clone(est)
    assert c is not est and c.accountant is acct and c.get_params() == est.get_params()
    assert is_classifier(est)
    pipe = make_pipeline(FunctionTransformer(), c).fit(np.zeros((3, 1)), [0, 1, 0])
    assert pipe.score(np.zeros((3, 1)), [0, 0, 0]) == 1.0
    assert acct.spent.epsilon == pytest.approx(0.25)
    assert sklearn.__version__


def test_not_fitted():
    with pytest.raises(NotFitted) as err:
        _Toy().predict(np.zeros((1, 1)))
    assert err.value.param == "fit" and isinstance(err.value, AttributeError)


def test_features_need_declared_bounds_and_are_constrained():
    X = np.array([[3.0, -4.0], [0.5, 0.5], [10.0, 0.0]])
    with pytest.raises(InvalidParameter) as err:
        features(X)
    assert err.value.param == "bounds"
    out, facts = features(X, bounds=(-1, 1))
    assert np.array_equal(out, [[1, -1], [0.5, 0.5], [1, 0]]) and facts["max_norm"] == pytest.approx(np.sqrt(2))
    out, facts = features(X, norm=1.0)
    assert np.allclose(np.linalg.norm(out, axis=1), [1.0, np.sqrt(0.5), 1.0]) and facts["max_norm"] == 1.0
    assert np.allclose(out[0], [0.6, -0.8])
    out, _ = features(X, bounds=[(0, 5), (-1, 1)])
    assert np.array_equal(out[:, 0], [3, 0.5, 5])
    assert X[2, 0] == 10.0  # the input is not modified


@pytest.mark.parametrize("bad, param", [
    (dict(X=[[np.nan, 1.0]], bounds=(0, 1)), "X"),
    (dict(X=[[np.inf, 1.0]], bounds=(0, 1)), "X"),
    (dict(X=np.zeros((0, 2)), bounds=(0, 1)), "X"),
    (dict(X=[1.0, 2.0], bounds=(0, 1)), "X"),
    (dict(X=[["a", "b"]], bounds=(0, 1)), "X"),
    (dict(X=None, bounds=(0, 1)), "X"),
    (dict(X=[[1.0, 2.0]], bounds=(1, 0)), "bounds"),
    (dict(X=[[1.0, 2.0]], bounds=[(0, 1)] * 3), "bounds"),
    (dict(X=[[1.0, 2.0]], bounds=(0, np.inf)), "bounds"),
    (dict(X=[[1.0, 2.0]], norm=0.0), "norm"),
    (dict(X=[[1.0, 2.0]], norm=-1.0), "norm"),
    (dict(X=[[1.0, 2.0]], norm=np.nan), "norm"),
])
def test_features_bad_input(bad, param):
    with pytest.raises((InvalidData, InvalidParameter, WrongType)) as err:
        features(bad.pop("X"), **bad)
    assert err.value.param == param


def test_labels():
    cls, codes = labels(np.array(["b", "a", "b"]), ["b", "a"], 3)
    assert list(cls) == ["a", "b"] and list(codes) == [1, 0, 1]
    with pytest.raises(InvalidParameter) as err:
        labels([0, 1], None, 2)
    assert err.value.param == "classes"
    with pytest.raises(InvalidParameter):
        labels([0, 0], [0, 0], 2)
    with pytest.raises(InvalidData) as err:
        labels([0, 7], [0, 1], 2)
    assert err.value.param == "y" and "7" not in str(err.value)
    with pytest.raises(InvalidData):
        labels([0, 1, 1], [0, 1], 2)
    with pytest.raises(InvalidData):
        labels([[0, 1]], [0, 1], 1)


def test_targets_and_columns():
    y, b = targets([5.0, -3.0, 0.5], 3, bounds=(0, 1))
    assert np.array_equal(y, [1.0, 0.0, 0.5]) and b == (0.0, 1.0)
    with pytest.raises(InvalidParameter) as err:
        targets([1.0], 1, bounds=None)
    assert err.value.param == "y_bounds"
    with pytest.raises(InvalidData):
        columns(np.zeros((2, 3)), 2)
