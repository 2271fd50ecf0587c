"""Least-squares / NNLS inference and the strategy builders (dpkit.histograms.inference), and hierarchical's
``inference`` option."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.histograms import all_ranges, hierarchical, hierarchy_strategy, least_squares, nnls, wavelet_strategy
from dpkit.histograms.hierarchical import _dlap_variance, _infer
from dpkit.noise import deterministic_source


def closed_form_map(b: int, sizes: list[int], precisions: list[float]) -> np.ndarray:
    """Leaves of ``_infer`` as a linear map of the noisy nodes: rows = nodes, columns = leaves."""
    n = sum(sizes)
    eye = np.eye(n)
    cuts = np.cumsum([0, *sizes])
    return _infer([eye[:, cuts[i]:cuts[i + 1]] for i in range(len(sizes))], precisions, b)[-1]


def ls_map(a, variances) -> np.ndarray:
    """Rows = noisy strategy answers, columns = estimates (least_squares is linear: apply it to unit vectors)."""
    return np.array([least_squares(a, e, variances) for e in np.eye(a.shape[0])])


def avg_range_variance(node_map: np.ndarray, variances: np.ndarray) -> float:
    m = node_map.shape[1]
    r = all_ranges(m)
    pre = np.concatenate([np.zeros((node_map.shape[0], 1)), np.cumsum(node_map, axis=1)], axis=1)
    coef = pre[:, r[:, 1]] - pre[:, r[:, 0]]
    return float(np.mean((coef * coef * variances[:, None]).sum(axis=0)))


# ------------------------------------------------------------------ builders
@pytest.mark.parametrize(("m", "b"), [(1, 2), (5, 2), (8, 2), (9, 3), (10, 3), (17, 4)])
def test_hierarchy_strategy_rows_are_the_released_levels(m, b):
    counts = np.arange(1, m + 1) % 4
    rel = hierarchical(counts, 1.0, branching=b, rng=deterministic_source(1))
    a = hierarchy_strategy(m, b)
    assert sp.isspmatrix_csr(a) or sp.issparse(a)
    h = rel.params["height"]
    leaves = np.zeros(b**h, dtype=np.int64)
    leaves[:m] = counts
    levels = [leaves]
    for _ in range(h - 1):
        levels.insert(0, levels[0].reshape(-1, b).sum(axis=1))
    assert np.array_equal(a @ counts, np.concatenate(levels))
    assert a.shape == (sum(len(x) for x in rel.parts["levels"]), m)
    ar = hierarchy_strategy(m, b, root=True)
    assert ar.shape[0] == a.shape[0] + 1 and np.array_equal(ar.toarray()[0], np.ones(m))


def test_wavelet_strategy_columns():
    a = wavelet_strategy(8).toarray()
    assert a.shape == (8, 8) and np.all(np.abs(a).sum(axis=0) == 4)  # 1 + h entries per bin
    assert np.allclose(a @ a.T, np.diag(np.diag(a @ a.T)))           # orthogonal rows
    assert wavelet_strategy(5).shape == (8, 5)


# ------------------------------------------------------------------ least squares
@pytest.mark.parametrize(("b", "h", "prec"),
                         [(2, 3, [1.0, 1.0, 1.0]), (3, 2, [0.3, 2.0]), (2, 4, [0.1, 0.4, 1.0, 3.0])])
def test_least_squares_equals_the_closed_form_without_padding(b, h, prec):
    m = b**h
    a = hierarchy_strategy(m, b)
    var = np.repeat(1.0 / np.array(prec), [b ** (j + 1) for j in range(h)])
    closed = closed_form_map(b, [b ** (j + 1) for j in range(h)], prec)
    assert np.allclose(ls_map(a, var), closed, atol=1e-10)


def test_least_squares_is_exact_without_noise_and_both_solvers_agree():
    m = 3000
    a = hierarchy_strategy(m, 4)
    x = (np.arange(m) * 7919 % 101).astype(float)
    var = np.linspace(0.5, 3.0, a.shape[0])
    assert np.allclose(least_squares(a, a @ x, var), x, atol=1e-7)  # lsmr (n > 2048)
    y = a @ x + np.sin(np.arange(a.shape[0]))  # deterministic "noise"
    assert np.allclose(least_squares(a, y, var, method="lsmr"), least_squares(a, y, var, method="normal"), atol=1e-7)
    dense = np.vstack([np.ones((1, 50)), np.eye(50)])
    assert np.allclose(least_squares(dense, dense @ x[:50], 1.0), x[:50])


def test_padding_knowledge_makes_ls_at_least_as_good_as_the_closed_form():
    m, b = 5, 2
    h = 3
    sizes = [b ** (j + 1) for j in range(h)]
    closed = closed_form_map(b, sizes, [1.0] * h)[:, :m]
    ls = ls_map(hierarchy_strategy(m, b), 1.0)
    v_closed = avg_range_variance(closed, np.ones(sum(sizes)))
    v_ls = avg_range_variance(ls, np.ones(sum(sizes)))
    assert v_ls < v_closed
    # both unbiased: the estimates reproduce the counts exactly when there is no noise
    a = hierarchy_strategy(m, b).toarray()
    x = np.array([3.0, 0.0, 5.0, 1.0, 2.0])
    assert np.allclose(ls.T @ (a @ x), x) and np.allclose(closed.T @ (a @ x), x)


# ------------------------------------------------------------------ nnls
def test_nnls_kkt_conditions_and_agreement_with_ls_when_feasible():
    a = hierarchy_strategy(8, 2, root=True)
    var = np.linspace(1.0, 2.0, a.shape[0])
    rng = np.random.default_rng(3)  # test-only randomness for the inputs
    for _ in range(20):
        y = a @ rng.integers(0, 4, 8) + rng.normal(0, 3, a.shape[0])
        x = nnls(a, y, var)
        assert np.all(x >= 0)
        # KKT: gradient g = Aᵀ V⁻¹ (A x - y) is >= 0, and zero where x > 0
        g = a.T @ ((a @ x - y) / var)
        assert np.all(g >= -1e-6) and np.all(np.abs(g[x > 1e-9]) < 1e-6)
    y = a @ np.arange(1.0, 9.0)
    assert np.allclose(nnls(a, y, var), least_squares(a, y, var), atol=1e-8)


def test_nnls_large_sparse_path():
    m = 600
    a = hierarchy_strategy(m, 16)
    x = np.zeros(m)
    x[::10] = 50.0
    y = a @ x + np.cos(np.arange(a.shape[0])) * 3
    est = nnls(a, y, 1.0)
    assert est.shape == (m,) and np.all(est >= 0)
    assert np.abs(est - x).mean() < np.abs(least_squares(a, y, 1.0) - x).mean()


@pytest.mark.parametrize(("args", "err", "param"), [
    ((None, [1.0], 1.0), WrongType, "strategy"),
    ((np.ones((3, 2)), [1.0, 2.0], 1.0), InvalidParameter, "noisy"),
    ((np.ones((3, 2)), [1.0, 2.0, 3.0], -1.0), InvalidParameter, "variances"),
    ((np.ones((3, 2)), [1.0, 2.0, 3.0], [1.0, 2.0]), InvalidParameter, "variances"),
    ((np.ones((3, 2)), [1.0, 2.0, 3.0], "x"), WrongType, "variances"),
    ((np.ones((3, 2)), [1.0, float("nan"), 3.0], 1.0), Exception, "noisy"),
    ((np.ones((3, 2)), [1.0, 2.0, 3.0], 1.0), InvalidParameter, "strategy"),  # rank deficient
])
def test_least_squares_bad_input(args, err, param):
    with pytest.raises(err) as info:
        least_squares(*args)
    assert info.value.param == param
    with pytest.raises(InvalidParameter):
        least_squares(np.eye(2), [1.0, 2.0], 1.0, method="qr")


# ------------------------------------------------------------------ hierarchical(inference=...)
def test_hierarchical_inference_options():
    counts = np.array([5, 0, 3, 9, 1, 1, 0, 7, 2])
    runs = {inf: hierarchical(counts, 0.7, branching=3, inference=inf, rng=deterministic_source(5))
            for inf in ("closed", "ls", "nnls", "none")}
    # same seed, same noise: the raw levels agree
    for a, b in itertools.combinations(runs.values(), 2):
        for x, y in zip(a.parts["levels"], b.parts["levels"], strict=True):
            assert np.array_equal(x, y)
    assert np.allclose(runs["closed"].value, runs["ls"].value, atol=1e-9)  # m = b^h: no padding
    assert np.all(runs["nnls"].value >= 0)
    assert np.array_equal(runs["none"].value, runs["none"].parts["levels"][-1].astype(float))
    assert "consistent_levels" not in runs["none"].parts
    for inf in ("ls", "nnls"):
        lv = runs[inf].parts["consistent_levels"]
        for parent, child in itertools.pairwise(lv):
            assert np.allclose(child.reshape(-1, 3).sum(axis=1), parent)
        assert runs[inf].params["inference"] == inf
    legacy = hierarchical(counts, 0.7, branching=3, consistency=False, rng=deterministic_source(5))
    assert np.array_equal(legacy.value, runs["none"].value) and legacy.params["inference"] == "none"
    assert hierarchical(counts, 0.7, rng=deterministic_source(5)).params["inference"] == "closed"


def test_hierarchical_ls_with_padding_differs_from_closed():
    counts = np.array([5, 0, 3, 9, 1])
    a = hierarchical(counts, 0.7, branching=2, inference="closed", rng=deterministic_source(9))
    b = hierarchical(counts, 0.7, branching=2, inference="ls", rng=deterministic_source(9))
    assert not np.allclose(a.value, b.value)
    assert np.all(b.parts["consistent_levels"][-1][5:] == 0)


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"inference": "bayes"}, "inference"), ({"inference": 3}, "inference"),
    ({"inference": "ls", "consistency": False}, "inference"),
])
def test_hierarchical_inference_bad_values(kwargs, param):
    from dpkit.audit.testing import CountingSource

    src = CountingSource(1)
    with pytest.raises(InvalidParameter) as info:
        hierarchical([1, 2, 3], 1.0, rng=src, **kwargs)
    assert info.value.param == param and src.consumed == 0


def test_ls_variance_uses_discrete_laplace_variances():
    # the variance passed to least_squares is the exact discrete Laplace variance of each level
    rel = hierarchical(np.arange(16), 1.0, branching=4, allocation="geometric", inference="ls",
                       rng=deterministic_source(2))
    scales = rel.params["level_scales"]
    a = hierarchy_strategy(16, 4)
    var = np.repeat([_dlap_variance(t) for t in scales], [4, 16])
    y = np.concatenate(rel.parts["levels"]).astype(float)
    assert np.allclose(least_squares(a, y, var), rel.value)


# ------------------------------------------------------------------ exact tree solvers (issue #16)
def _tree_case(m, b, seed, sparse=True):
    from dpkit.histograms.inference import _height

    rng = np.random.default_rng(seed)  # rng-ok (test data)
    h = _height(m, b)
    var = list(rng.uniform(0.5, 4.0, h))
    x = np.zeros(m)
    if sparse:
        x[rng.choice(m, max(1, m // 20), replace=False)] = rng.integers(1, 30, max(1, m // 20))
    else:
        x = rng.integers(0, 10, m).astype(float)
    a = hierarchy_strategy(m, b)
    sizes = [b ** (j + 1) for j in range(h)]
    v = np.repeat(var, sizes)
    y = a @ x + rng.normal(0.0, np.sqrt(v))
    levels = np.split(y, np.cumsum(sizes)[:-1])
    return a, y, v, var, levels, h


@pytest.mark.parametrize(("m", "b"), [(1, 2), (5, 2), (9, 3), (37, 4), (200, 16), (1000, 2)])
def test_tree_gls_is_the_generalised_least_squares_with_held_leaves(m, b):
    from dpkit.histograms.inference import _tree_gls

    a, y, v, var, levels, h = _tree_case(m, b, m)
    pad = np.arange(b**h) >= m
    assert np.allclose(_tree_gls(levels, var, b, pad)[:m], least_squares(a, y, v), atol=1e-9)
    # holding some real leaves at zero = least squares on the remaining columns
    held = pad | (np.arange(b**h) % 3 == 0)
    keep = np.flatnonzero(~held[:m])
    if keep.size:
        ref = least_squares(a[:, keep], y, v)
        got = _tree_gls(levels, var, b, held)
        assert np.allclose(got[keep], ref, atol=1e-9) and np.all(got[held] == 0)


@pytest.mark.parametrize(("m", "b", "sparse"), [(5, 2, True), (9, 3, False), (64, 4, True), (200, 16, True),
                                                (256, 2, True), (256, 2, False)])
def test_tree_nnls_equals_the_exact_active_set_solver(m, b, sparse):
    from dpkit.histograms.inference import _tree_nnls

    a, y, v, var, levels, _ = _tree_case(m, b, 7 * m + b, sparse)
    got, steps = _tree_nnls(levels, var, b, m)
    ref = nnls(a, y, v)  # scipy's bvls: exact for <= 256 unknowns
    assert np.allclose(got, ref, atol=1e-8) and np.all(got >= 0) and steps >= 1


@pytest.mark.parametrize(("m", "b"), [(4096, 16), (4096, 2), (3000, 4)])
def test_tree_nnls_kkt_at_bench_size(m, b):
    from dpkit.histograms.inference import _tree_nnls

    a, y, v, var, levels, _ = _tree_case(m, b, m + b)
    x, steps = _tree_nnls(levels, var, b, m)
    g = a.T @ ((a @ x - y) / v)  # KKT: x >= 0, g >= 0, g = 0 where x > 0
    scale = np.abs(a.T @ (y / v)).max()
    assert np.all(x >= 0) and steps < 50
    assert np.all(g >= -1e-9 * scale) and np.all(np.abs(g[x > 0]) <= 1e-9 * scale)
    # power: the unconstrained solution violates x >= 0 here, and clipping it is not the optimum
    ls = least_squares(a, y, v)
    assert ls.min() < 0
    obj = lambda z: float(np.sum((a @ z - y) ** 2 / v))
    assert obj(x) < obj(np.maximum(ls, 0.0))


def test_hierarchical_nnls_and_ls_use_the_exact_tree_solvers_fast():
    import time

    m = 4096
    x = np.zeros(m, dtype=np.int64)
    x[::97] = 40
    for b in (2, 16):
        t0 = time.process_time()
        rel = hierarchical(x, 1.0, branching=b, inference="nnls", rng=deterministic_source(4))
        assert time.process_time() - t0 < 5.0  # ~0.01 s (was up to ~55 s with the general sparse solver)
        h = rel.params["height"]
        var = np.repeat([_dlap_variance(t) for t in rel.params["level_scales"]], [b ** (j + 1) for j in range(h)])
        a = hierarchy_strategy(m, b)
        y = np.concatenate(rel.parts["levels"]).astype(float)
        g = a.T @ ((a @ rel.value - y) / var)
        scale = np.abs(a.T @ (y / var)).max()
        assert np.all(rel.value >= 0) and np.all(g >= -1e-9 * scale)
        assert np.all(np.abs(g[rel.value > 0]) <= 1e-9 * scale)
        ls = hierarchical(x, 1.0, branching=b, inference="ls", rng=deterministic_source(4))
        assert np.allclose(ls.value, least_squares(a, y, var, method="lsmr"), atol=1e-6)
