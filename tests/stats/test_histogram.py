"""dpkit.stats.histogram: bins (numeric edges, categories), noise law, sensitivity per relation, exact privacy,
post-processing flag, accounting and refused inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit.exact import DiscreteLaplace, max_privacy_loss
from dpkit.audit.testing import watch_charges
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source, sample_discrete_laplace
from dpkit.stats.histograms import histogram

from .fixtures import P_MIN, SECRET, CountingSource, assert_refused, chi2_pvalue


def _noise(t, size, seed):
    return np.asarray(sample_discrete_laplace(t, size, rng=deterministic_source(seed)), dtype=np.int64)


def _dlap_probs(t, ks):
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(ks)


def test_edges_follow_numpys_convention():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 1.999, 2.0, 3.0, 3.0, 3.5])  # -1 and 3.5 are outside [0, 3]: dropped
    edges = [0.0, 1.0, 2.0, 3.0]
    rel = histogram(x, 1.0, edges=edges, rng=deterministic_source(1))
    true = np.histogram(x, bins=edges)[0]
    assert true.tolist() == [2, 2, 3]  # last bin closed: 3.0 counted
    assert np.array_equal(rel.value - _noise(rel.scale, 3, 1), true)
    assert rel.value.dtype == np.int64 and rel.noise == "discrete_laplace" and rel.mechanism == "histogram"


def test_categories_with_strings_missing_and_unknown_values():
    vals = ["a", "b", None, "a", "zz", float("nan"), "b", "a"]
    rel = histogram(vals, 2.0, categories=["a", "b", "c"], nan_policy="omit", rng=deterministic_source(2))
    assert np.array_equal(rel.value - _noise(rel.scale, 3, 2), [3, 2, 0])  # "zz" goes to no bin
    num = histogram(np.array([1, 2, 2, 7]), 2.0, categories=[2, 1], rng=deterministic_source(3))
    assert np.array_equal(num.value - _noise(num.scale, 2, 3), [2, 1])
    tuples = np.empty(3, dtype=object)  # records that are tuples: pass a 1-D object array
    tuples[:] = [("x", 1), ("y", 2), ("x", 1)]
    objs = histogram(tuples, 2.0, categories=[("x", 1), ("y", 2)], rng=deterministic_source(4))
    assert np.array_equal(objs.value - _noise(objs.scale, 2, 4), [2, 1])


@pytest.mark.parametrize(("nb", "sens"), [(AddRemove(), 1), (Replace(), 2), (PrivacyUnit("u", max_rows=3), 3)])
def test_sensitivity_per_relation_and_exact_privacy(nb, sens):
    eps = 0.7
    rel = histogram(["a", "b"], eps, categories=["a", "b", "c"], neighbours=nb, rng=deterministic_source(5))
    assert rel.scale == pytest.approx(sens / eps) and rel.scale >= sens / eps
    # worst neighbour: add/remove moves one bin by 1 (a unit: up to max_rows in total, any split);
    # replace moves one record from one bin to another. The loss of independent coordinates adds up.
    moves = {1: [(1,)], 2: [(1, -1)], 3: [(3,), (2, 1), (1, 1, 1)]}[sens]
    for move in moves:
        loss = sum(max_privacy_loss(DiscreteLaplace(5, rel.scale), DiscreteLaplace(5 + m, rel.scale),
                                    grid=np.arange(-10, 25)).loss for m in move)
        assert loss <= eps * (1 + 1e-12)
    assert loss >= eps * (1 - 1e-9)  # tight


def test_noise_law_and_power():
    eps, k = 1.0, 20_000
    cats = list(range(k))
    rel = histogram(np.zeros(0), eps, categories=cats, rng=deterministic_source(6))  # k iid noise draws
    ks = np.arange(-30, 31)
    counts = np.bincount(np.clip(rel.value, -30, 30) + 30, minlength=ks.size)
    assert chi2_pvalue(counts, _dlap_probs(1.0 / eps, ks)) > P_MIN
    assert chi2_pvalue(counts, _dlap_probs(1.15 / eps, ks)) < P_MIN  # power


def test_interval_and_nonnegative_post_processing():
    edges = np.linspace(0.0, 1.0, 501)
    rel = histogram(np.zeros(0), 0.5, edges=edges, nonnegative=True, rng=deterministic_source(7))
    raw = histogram(np.zeros(0), 0.5, edges=edges, rng=deterministic_source(7))
    assert np.array_equal(rel.value, np.maximum(raw.value, 0)) and np.any(raw.value < 0)
    lo, hi = rel.interval(0.9, simultaneous=True)
    assert np.all((lo <= 0) & (0 <= hi))  # still covers the true (zero) counts
    lo1, hi1 = raw.interval(0.9)
    assert 0.85 <= np.mean((lo1 <= 0) & (0 <= hi1)) <= 1.0


def test_charged_once_before_any_randomness():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(7)
    seen = watch_charges(acct, src)
    rel = histogram([0.1, 0.7], 0.6, edges=[0, 0.5, 1], accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0 and rel.cost == PureDP(0.6) and acct.spent == PureDP(0.6)
    assert rel.receipt.mechanism == "histogram" and rel.receipt.params["bins"] == 2
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        histogram([0.1, 0.7], 0.6, edges=[0, 0.5, 1], accountant=acct, rng=src)
    assert src.consumed == before


def _edges_call(values, *, edges=(0, 1, 2), epsilon=1.0, **kw):
    return histogram(values, epsilon, edges=edges, **kw)


def _cats_call(values, *, categories=("a", "b"), epsilon=1.0, **kw):
    return histogram(values, epsilon, categories=categories, **kw)


BAD_EDGES = [
    (lambda f: f([SECRET, float("nan")]), InvalidData, "values"),
    (lambda f: f([SECRET, None]), InvalidData, "values"),
    (lambda f: f([SECRET, float("inf")]), InvalidData, "values"),
    (lambda f: f(np.array([[SECRET, 1.0]])), InvalidData, "values"),
    (lambda f: f([SECRET, "a"]), WrongType, "values"),
    (lambda f: f([SECRET], edges=[0, 1, 1]), InvalidParameter, "edges"),
    (lambda f: f([SECRET], edges=[2, 1]), InvalidParameter, "edges"),
    (lambda f: f([SECRET], edges=[0]), InvalidParameter, "edges"),
    (lambda f: f([SECRET], edges=[0, float("inf")]), InvalidParameter, "edges"),
    (lambda f: f([SECRET], edges=[[0, 1], [2, 3]]), InvalidParameter, "edges"),
    (lambda f: f([SECRET], edges="0,1"), WrongType, "edges"),
    (lambda f: f([SECRET], edges=["a", "b"]), WrongType, "edges"),
    (lambda f: f([SECRET], epsilon=0.0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon=-1.0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], nonnegative=1), WrongType, "nonnegative"),
    (lambda f: f([SECRET], categories=["a"]), InvalidParameter, "edges"),  # both given
]

BAD_CATEGORIES = [
    (lambda f: f(["x", None]), InvalidData, "values"),
    (lambda f: f(["x", float("nan")]), InvalidData, "values"),
    (lambda f: f([["x", "y"]]), InvalidData, "values"),
    (lambda f: f(np.array([["x", "y"]])), InvalidData, "values"),
    (lambda f: f("xy"), WrongType, "values"),
    (lambda f: f(None), WrongType, "values"),
    (lambda f: f([{SECRET}]), WrongType, "values"),
    (lambda f: f(["x"], categories=["a", "a"]), InvalidParameter, "categories"),
    (lambda f: f(["x"], categories=[1, 1.0]), InvalidParameter, "categories"),
    (lambda f: f(["x"], categories=[]), InvalidParameter, "categories"),
    (lambda f: f(["x"], categories=["a", None]), InvalidParameter, "categories"),
    (lambda f: f(["x"], categories=[["a"]]), WrongType, "categories"),
    (lambda f: f(["x"], categories="ab"), WrongType, "categories"),
    (lambda f: f(["x"], epsilon=float("nan")), InvalidParameter, "epsilon"),
]


@pytest.mark.parametrize(("fn", "bad"), [(_edges_call, b) for b in BAD_EDGES]
                         + [(_cats_call, b) for b in BAD_CATEGORIES])
def test_refused_inputs_charge_and_draw_nothing(fn, bad):
    assert_refused(fn, *bad)


def test_neither_edges_nor_categories_is_refused():
    with pytest.raises(InvalidParameter) as exc:
        histogram([1.0], 1.0, rng=CountingSource(1))
    assert exc.value.param == "edges"
