"""Bad inputs raise typed dpkit errors naming the parameter, never echoing a value; the task metric."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit
from dpkit.fairness import (
    bias,
    earthmover,
    fair_classifier,
    lipschitz_violations,
    statistical_parity,
    task_metric,
)

D = np.array([[0.0, 0.5, 1.0], [0.5, 0.0, 0.5], [1.0, 0.5, 0.0]])
L = np.array([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
SECRET = 987654.321


def _bad_metric(kind: str) -> np.ndarray:
    d = D.copy()
    if kind == "nan":
        d[0, 1] = d[1, 0] = np.nan
    elif kind == "negative":
        d[0, 1] = d[1, 0] = -SECRET
    elif kind == "asymmetric":
        d[0, 1] = SECRET
    elif kind == "diagonal":
        d[1, 1] = SECRET
    elif kind == "inf":
        d[0, 2] = d[2, 0] = np.inf
    return d


@pytest.mark.parametrize("kind", ["nan", "negative", "asymmetric", "diagonal", "inf"])
@pytest.mark.parametrize("fn", ["fair", "emd", "bias", "check"])
def test_bad_metric(kind, fn):
    d = _bad_metric(kind)
    calls = {"fair": lambda: fair_classifier(d, L), "emd": lambda: earthmover(d, [0], [1]),
             "bias": lambda: bias(d, [0], [1]), "check": lambda: lipschitz_violations(L * 0 + 0.5, d)}
    with pytest.raises(dpkit.InvalidData) as err:
        calls[fn]()
    assert err.value.param == "metric"
    assert "987654" not in str(err.value)


@pytest.mark.parametrize("metric", [None, "euclidean", np.zeros((2, 3)), np.zeros((2, 2, 2)), [[0.0]] * 2])
def test_metric_shapes_and_types(metric):
    with pytest.raises(dpkit.DPKitError) as err:
        fair_classifier(metric, L)
    assert err.value.param == "metric"


@pytest.mark.parametrize("loss", [None, np.zeros((3, 1)), np.zeros((4, 2)), np.zeros((2, 2)), np.full((3, 2), np.nan),
                                  [[0, 1], [1, 0], [0, "a"]]])
def test_bad_loss(loss):
    """(a 4-individual metric with a 3-row loss is the loss's fault: it has the wrong number of rows)"""
    with pytest.raises(dpkit.DPKitError) as err:
        fair_classifier(D, loss)
    assert err.value.param == "loss"


@pytest.mark.parametrize(("kw", "param"), [({"divergence": "kl"}, "divergence"), ({"time_limit": 0}, "time_limit"),
                                           ({"time_limit": 1e9}, "time_limit"), ({"constraints": "some"},
                                                                                  "constraints"),
                                           ({"weights": [1.0, -1.0, 1.0]}, "weights"),
                                           ({"weights": [5, 5]}, "weights"), ({"outcomes": ["a"]}, "outcomes"),
                                           ({"formulation": "x"}, "formulation")])
def test_bad_options(kw, param):
    with pytest.raises(dpkit.DPKitError) as err:
        fair_classifier(D, L, **kw)
    assert err.value.param == param


def test_groups():
    mu = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert statistical_parity(mu, np.array([True, False, False]), [1]) == pytest.approx(1.0)
    assert statistical_parity(mu, [0.5, 0.5, 0.0], [0.0, 0.0, 1.0]) == pytest.approx(0.0)
    for bad in ([], [3], [0, 0], np.array([False] * 3), [[0]], "S", [0.5, -0.5, 1.0]):
        with pytest.raises(dpkit.DPKitError) as err:
            statistical_parity(mu, bad, [1])
        assert err.value.param == "group_s"


def test_dinf_refuses_huge_distances():
    with pytest.raises(dpkit.InvalidData) as err:
        fair_classifier(D * 100, L, divergence="inf")
    assert err.value.param == "metric"


def test_task_metric():
    f = np.array([[20.0, 1.0], [30.0, 1.0], [40.0, 0.0], [20.0, 1.0]])
    d = task_metric(f, spread=[10.0, 1.0])
    assert d[0, 1] == pytest.approx(1.0) and d[0, 3] == 0.0 and np.array_equal(d, d.T)
    assert task_metric(f, kind="l1", spread=[10.0, 1.0])[1, 2] == pytest.approx(2.0)
    assert task_metric(f, kind="chebyshev", spread=[10.0, 1.0], cap=0.5).max() == 0.5
    z = (f - f.mean(axis=0)) / f.std(axis=0)
    assert np.allclose(task_metric(f, spread="data"), np.sqrt(((z[:, None] - z[None]) ** 2).sum(axis=2)))
    custom = task_metric(f, kind=lambda a, b: np.abs(a[:, None, 0] - b[None, :, 0]))
    assert custom[0, 2] == 20.0
    for kw, param in (({"spread": [0.0, 1.0]}, "spread"), ({"spread": [1.0]}, "spread"), ({"scale": -1}, "scale"),
                      ({"kind": "cosine"}, "kind"), ({"cap": 0}, "cap"),
                      ({"kind": lambda a, b: -np.ones((len(a), len(b)))}, "kind")):
        with pytest.raises(dpkit.DPKitError) as err:
            task_metric(f, **kw)
        assert err.value.param == param
    with pytest.raises(dpkit.InvalidData) as err2:
        task_metric([[1.0, np.nan]])
    assert err2.value.param == "features"
