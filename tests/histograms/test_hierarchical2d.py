"""2-D hierarchical histograms and Cormode et al.'s quadtree (dpkit.histograms.hierarchical2d)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from tests.histograms._helpers import ONE_CHARGE

from conftest import sized
from dpkit.audit.exact import DiscreteLaplace, max_privacy_loss
from dpkit.audit.testing import CountingSource, assert_charges_first, chi2_pvalue
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import PrivacyUnit, Replace
from dpkit.histograms import hierarchical2d, least_squares, quadtree
from dpkit.histograms.hierarchical import _dlap_variance
from dpkit.histograms.hierarchical2d import _strategy_2d, tree_order
from dpkit.noise import deterministic_source

P_MIN = 1e-7


def dlap_pvalue(z: np.ndarray, t: float) -> float:
    q = math.exp(-1.0 / t)
    k = math.ceil(12 * t) + 2
    ks = np.arange(-k, k + 1)
    probs = np.concatenate([[q ** (k + 1) / (1 + q)], (1 - q) / (1 + q) * q ** np.abs(ks), [q ** (k + 1) / (1 + q)]])
    return chi2_pvalue(np.bincount(np.clip(z, -k - 1, k + 1) + k + 1, minlength=2 * k + 3), probs)


def true_levels(counts, b, side, depths):
    g = np.zeros((side, side), dtype=np.int64)
    g[:counts.shape[0], :counts.shape[1]] = counts
    return [g.reshape(b**j, side // b**j, b**j, side // b**j).sum(axis=(1, 3)) for j in depths]


# ------------------------------------------------------------------ structure
@pytest.mark.parametrize(("level", "b"), [(1, 2), (2, 2), (3, 2), (2, 3)])
def test_tree_order_children_are_consecutive_blocks(level, b):
    n = b**level
    child = tree_order(level, b)
    parent = tree_order(level - 1, b)
    assert sorted(child.tolist()) == list(range(n * n))
    pos = np.empty(n * n // (b * b), dtype=np.int64)
    pos[parent] = np.arange(parent.size)  # grid index -> tree index at the parent level
    r, c = child // n, child % n
    parent_grid = (r // b) * (n // b) + c // b
    assert np.array_equal(pos[parent_grid], np.arange(n * n) // (b * b))


@pytest.mark.parametrize("kwargs", [{}, {"root": True}, {"branching": 3}, {"depth": 2}, {"allocation": "geometric"},
                                    {"inference": "ls"}, {"inference": "nnls"}])
def test_release_is_consistent_and_value_spreads_the_leaves(kwargs):
    counts = (np.arange(35).reshape(5, 7) * 7) % 11
    rel = hierarchical2d(counts, 0.8, rng=deterministic_source(3), **kwargs)
    b = rel.params["branching"]
    lv = rel.parts["consistent_levels"]
    assert [x.shape for x in lv] == [x.shape for x in rel.parts["levels"]]
    for parent, child in itertools.pairwise(lv):
        n = parent.shape[0]
        assert np.allclose(child.reshape(n, b, n, b).sum(axis=(1, 3)), parent, atol=1e-8)
    assert rel.value.shape == (5, 7) and rel.value.dtype == np.float64
    # every leaf block's real cells share its estimate equally (blocks that are all padding are dropped)
    w = rel.params["leaf_block"]
    leaf = lv[-1]
    for i, j in itertools.product(range(leaf.shape[0]), range(leaf.shape[1])):
        cells = rel.value[i * w:(i + 1) * w, j * w:(j + 1) * w]
        if cells.size:
            assert np.allclose(cells, leaf[i, j] / cells.size)
    if kwargs.get("inference") == "nnls":
        assert np.all(rel.value >= 0)


@pytest.mark.parametrize("kwargs", [{}, {"root": True}, {"allocation": "geometric", "branching": 3}])
def test_closed_form_is_the_least_squares_blue_without_padding(kwargs):
    b = kwargs.get("branching", 2)
    counts = np.arange(b**4).reshape(b**2, b**2) % 5
    a = hierarchical2d(counts, 0.5, rng=deterministic_source(4), **kwargs)
    c = hierarchical2d(counts, 0.5, rng=deterministic_source(4), inference="ls", **kwargs)
    assert np.allclose(a.value, c.value, atol=1e-9)
    # and directly: least squares on the node/cell strategy with the exact discrete Laplace variances
    depths = list(a.params["level_depths"])
    strat = _strategy_2d(b, depths, 2, np.ones((b**2, b**2), dtype=bool))
    y = np.concatenate([x.ravel() for x in a.parts["levels"]]).astype(float)
    var = np.repeat([_dlap_variance(t) for t in a.params["level_scales"]], [b ** (2 * j) for j in depths])
    assert np.allclose(least_squares(strat, y, var).reshape(b**2, b**2), a.value, atol=1e-9)


def test_none_inference_is_the_raw_leaves():
    counts = np.arange(16).reshape(4, 4)
    rel = hierarchical2d(counts, 1.0, inference="none", rng=deterministic_source(1))
    assert "consistent_levels" not in rel.parts
    assert np.array_equal(rel.value, rel.parts["levels"][-1].astype(float))


# ------------------------------------------------------------------ budgets
def test_geometric_allocation_and_equal_allocation():
    counts = np.ones((27, 27), dtype=np.int64)
    rel = hierarchical2d(counts, 1.0, branching=3, allocation="geometric", rng=deterministic_source(1))
    e = rel.params["level_epsilons"]
    assert rel.params["level_depths"] == (1, 2, 3)
    for parent, child in itertools.pairwise(e):
        assert abs(child / parent - 3 ** (1 / 3)) < 1e-12
    assert sum(Fraction(x) for x in e) <= Fraction(1.0) and abs(sum(e) - 1.0) < 1e-12
    eq = hierarchical2d(counts, 1.0, branching=3, rng=deterministic_source(1)).params["level_epsilons"]
    assert all(abs(x - 1 / 3) < 1e-15 for x in eq)


@pytest.mark.parametrize("h", [1, 2, 3, 4, 5, 6])
def test_quadtree_budget_is_cormodes_formula(h):
    eps = 0.7
    rel = quadtree(np.zeros((2**h, 2**h), dtype=np.int64), eps, rng=deterministic_source(1))
    assert rel.params["level_depths"] == tuple(range(h + 1)) and rel.params["branching"] == 2
    e = rel.params["level_epsilons"]
    for depth, got in enumerate(e):
        i = h - depth  # Cormode et al. count levels from the leaves (i = 0) to the root (i = h)
        want = 2 ** ((h - i) / 3) * eps * (2 ** (1 / 3) - 1) / (2 ** ((h + 1) / 3) - 1)
        assert abs(got - want) < 1e-12 * eps
    assert sum(Fraction(x) for x in e) <= Fraction(eps)
    assert rel.mechanism == "quadtree"


def test_quadtree_max_depth_coarse_leaves():
    counts = np.arange(64).reshape(8, 8)
    rel = quadtree(counts, 1.0, max_depth=2, rng=deterministic_source(2))
    assert rel.params["height"] == 2 and rel.params["leaf_block"] == 2
    assert [x.shape for x in rel.parts["levels"]] == [(1, 1), (2, 2), (4, 4)]
    assert abs(rel.value.sum() - rel.parts["consistent_levels"][0][0, 0]) < 1e-8
    with pytest.raises(InvalidParameter) as info:
        quadtree(counts, 1.0, max_depth=4, rng=deterministic_source(2))
    assert info.value.param == "max_depth"


# ------------------------------------------------------------------ distribution
@pytest.mark.parametrize("nb", [None, Replace()])
def test_level_noise_is_discrete_laplace_with_the_stated_scales(nb):
    counts = np.zeros((128, 128), dtype=np.int64)
    counts[::3, ::5] = 4
    reps = sized(3, 20)
    rng = deterministic_source(21)
    z_leaf, z_mid = [], []
    for _ in range(reps):
        rel = hierarchical2d(counts, 2.0, inference="none", neighbours=nb, rng=rng)
        truth = true_levels(counts, 2, 128, rel.params["level_depths"])
        z_leaf.append((rel.parts["levels"][-1] - truth[-1]).ravel())
        z_mid.append((rel.parts["levels"][-2] - truth[-2]).ravel())
    t = rel.params["level_scales"][-1]
    sens = rel.params["sensitivity_per_level"]
    assert sens == (2 if nb is not None else 1) and abs(t - sens * 7 / 2.0) < 1e-12
    z = np.concatenate(z_leaf)
    assert dlap_pvalue(z, t) > P_MIN
    assert dlap_pvalue(z, 1.15 * t) < P_MIN and dlap_pvalue(z, t / 1.15) < P_MIN  # power
    assert dlap_pvalue(np.concatenate(z_mid), t) > P_MIN


def test_rectangle_query_unbiased_with_analytic_variance():
    counts = np.array([[4, 8, 15, 16], [23, 42, 0, 1], [2, 3, 5, 8], [13, 21, 34, 55]])
    sl = (slice(0, 3), slice(1, 4))
    truth = counts[sl].sum()
    r = sized(3000, 30000)
    rng = deterministic_source(2027)
    est = np.empty(r)
    for i in range(r):
        rel = hierarchical2d(counts, 1.0, rng=rng)
        est[i] = rel.value[sl].sum()
    depths = list(rel.params["level_depths"])
    strat = _strategy_2d(2, depths, 2, np.ones((4, 4), dtype=bool)).toarray()
    var = np.repeat([_dlap_variance(t) for t in rel.params["level_scales"]], [4**j for j in depths])
    q = np.zeros((4, 4))
    q[sl] = 1
    # BLUE map: x̂ = (Aᵀ V⁻¹ A)⁻¹ Aᵀ V⁻¹ y, so Var(qᵀ x̂) = qᵀ (Aᵀ V⁻¹ A)⁻¹ q
    v = float(q.ravel() @ np.linalg.solve(strat.T @ (strat / var[:, None]), q.ravel()))
    assert abs(est.mean() - truth) < 6 * math.sqrt(v / r)
    s2 = est.var(ddof=1)
    se = math.sqrt(max(np.mean((est - est.mean()) ** 4) - s2 * s2, 0.0) / r)
    assert abs(s2 - v) < 6 * se
    v_raw = float(var[-16:][0] * 9)  # nine noisy leaves without inference
    assert v < v_raw and abs(v_raw - v) > 6 * se  # power: the raw estimator's variance is caught


# ------------------------------------------------------------------ privacy
@pytest.mark.parametrize(("kwargs", "nb", "sens"), [
    ({}, None, 1), ({"allocation": "geometric", "root": True}, None, 1), ({}, Replace(), 2),
    ({"branching": 3}, Replace(), 2)])
def test_exact_privacy_loss_equals_epsilon(kwargs, nb, sens):
    eps = 0.9
    b = kwargs.get("branching", 2)
    side = b * b
    d = np.ones((side, side), dtype=np.int64)
    d2 = d.copy()
    d2[0, 0] += 1
    if sens == 2:
        d2[side - 1, side - 1] -= 1  # the record moves to a cell in another top-level block
    rel = hierarchical2d(d, eps, neighbours=nb, rng=deterministic_source(1), **kwargs)
    scales = rel.params["level_scales"]
    depths = rel.params["level_depths"]
    assert rel.params["sensitivity_per_level"] == sens

    def tree_loss(level_scales):
        total = 0.0
        for t, x, y in zip(level_scales, true_levels(d, b, side, depths), true_levels(d2, b, side, depths),
                           strict=True):
            for u, w in zip(x.ravel().tolist(), y.ravel().tolist(), strict=True):
                if u != w:
                    total += max_privacy_loss(DiscreteLaplace(u, t), DiscreteLaplace(w, t),
                                              grid=np.arange(-40, 41)).loss
        return total

    # replace-one: the moved record changes two nodes per released level (its old and new blocks differ)
    loss = tree_loss(scales)
    assert eps * (1 - 1e-9) <= loss <= eps * (1 + 1e-12)
    assert sum(Fraction(sens) / Fraction(t) for t in scales) <= Fraction(eps)
    assert tree_loss([sens / eps] * len(depths)) > 1.9 * eps  # power: full epsilon per level


def test_privacy_unit_sensitivity():
    rel = hierarchical2d(np.ones((4, 4), dtype=np.int64), 1.0, neighbours=PrivacyUnit("u", max_rows=5),
                         rng=deterministic_source(1))
    assert rel.params["sensitivity_per_level"] == 5


def test_one_charge_before_randomness_and_refusal_draws_nothing():
    for fn, name in ((hierarchical2d, "hierarchical2d"), (quadtree, "quadtree")):
        rel = assert_charges_first(fn, ([[3, 1, 4], [1, 5, 9]], 0.6), name=name, **ONE_CHARGE)
        assert rel.value.dtype == np.float64 and rel.value.shape == np.shape([[3, 1, 4], [1, 5, 9]])


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"counts": [1, 2, 3]}, InvalidData, "counts"),
    ({"counts": [[1, -1], [2, 12345]]}, InvalidData, "counts"),
    ({"counts": [[1, 2.5], [2, 12345]]}, InvalidData, "counts"),
    ({"counts": None}, WrongType, "counts"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"branching": 1}, InvalidParameter, "branching"),
    ({"branching": 2.0}, WrongType, "branching"),
    ({"allocation": "linear"}, InvalidParameter, "allocation"),
    ({"inference": "bayes"}, InvalidParameter, "inference"),
    ({"depth": 0}, InvalidParameter, "depth"),
    ({"depth": 5}, InvalidParameter, "depth"),
    ({"root": 1}, WrongType, "root"),
    ({"branching": 4097}, InvalidParameter, "branching"),
])
def test_bad_input_typed_errors_nothing_charged(kwargs, err, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(1)
    args = {"counts": [[7, 12345], [3, 0]], "epsilon": 1.0, **kwargs}
    counts, eps = args.pop("counts"), args.pop("epsilon")
    with pytest.raises(err) as info:
        hierarchical2d(counts, eps, accountant=acct, rng=src, **args)
    assert info.value.param == param
    assert "12345" not in str(info.value) and "2.5" not in str(info.value)
    assert len(acct.receipts) == 0 and src.consumed == 0
