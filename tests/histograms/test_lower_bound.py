"""Workload matrices and the singular value lower bound (dpkit.histograms.lower_bound)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.histograms import (
    all_ranges,
    answer,
    hierarchy_strategy,
    prefix_ranges,
    random_ranges,
    svd_lower_bound,
    wavelet_strategy,
    workload_matrix,
)
from dpkit.histograms.lower_bound import range_gram, svd_bound
from dpkit.noise import deterministic_source


def tse(a: np.ndarray, w: np.ndarray, c: float, norm: int) -> float:
    """Total squared error of the matrix mechanism with strategy ``a`` (independent formula):
    c · (max column norm)^2 · tr(WᵀW (AᵀA)⁻¹)."""
    col = np.abs(a).sum(axis=0).max() if norm == 1 else np.sqrt((a * a).sum(axis=0)).max()
    return c * col**2 * float(np.trace(w.T @ w @ np.linalg.inv(a.T @ a)))


def test_workload_matrix_answers_like_answer():
    m = 37
    r = random_ranges(m, 500, rng=deterministic_source(3))
    x = np.arange(m) * 3 % 11
    w = workload_matrix(r, m)
    assert sp.issparse(w) and w.shape == (500, m)
    assert np.array_equal(w @ x, answer(x, r))
    assert workload_matrix(np.zeros((0, 2), dtype=np.int64), 4).shape == (0, 4)


@pytest.mark.parametrize("m", [1, 5, 40])
def test_range_gram_is_wtw(m):
    for r in (all_ranges(m), prefix_ranges(m), random_ranges(m, 300, rng=deterministic_source(m))):
        w = workload_matrix(r, m).toarray()
        assert np.array_equal(range_gram(r, m), w.T @ w)


def test_closed_cases():
    eps, delta = 0.5, 1e-6
    c_lap, c_gauss = 2 / eps**2, 2 * math.log(2 / delta) / eps**2
    # identity workload: all singular values 1, bound n per n queries -> per query c (the flat histogram)
    assert abs(svd_lower_bound(np.eye(6), eps) - c_lap) < 1e-12
    assert abs(svd_lower_bound(np.eye(6), eps, delta) - c_gauss) < 1e-9
    # one total query over n bins: sigma = sqrt(n), bound c; attained by the strategy A = W (sensitivity 1)
    assert abs(svd_lower_bound([[0, 9]], eps, m=9) - c_lap) < 1e-12
    # an orthogonal workload: tight, attained by the identity strategy
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(8, 8)))  # test-only randomness
    assert abs(svd_lower_bound(q, eps, delta, total=True) - c_gauss * 8) < 1e-8
    assert abs(svd_bound(q) - 8) < 1e-9


def test_ranges_with_m_match_the_matrix_form():
    m = 24
    r = all_ranges(m)
    w = workload_matrix(r, m)
    assert abs(svd_lower_bound(r, 1.0, m=m) - svd_lower_bound(w, 1.0)) < 1e-9
    assert abs(svd_lower_bound(r, 1.0, m=m) - svd_lower_bound(w.toarray(), 1.0)) < 1e-9
    assert abs(svd_lower_bound(r, 1.0, m=m, total=True) / r.shape[0] - svd_lower_bound(r, 1.0, m=m)) < 1e-12


def test_2d_rectangle_bound_is_the_kronecker_bound():
    r1, r2 = all_ranges(5), random_ranges(4, 7, rng=deterministic_source(2))
    w = sp.kron(workload_matrix(r1, 5), workload_matrix(r2, 4))
    for delta in (None, 1e-6):
        want = svd_lower_bound(w, 0.8, delta)
        assert abs(svd_lower_bound((r1, r2), 0.8, delta, m=(5, 4)) - want) < 1e-9 * want
    with pytest.raises(InvalidParameter):
        svd_lower_bound(r1, 1.0, m=(5, 4))


def test_bound_is_below_every_strategy():
    m, eps, delta = 32, 1.0, 1e-5
    r = all_ranges(m)
    w = workload_matrix(r, m).toarray()
    c_lap, c_gauss = 2 / eps**2, 2 * math.log(2 / delta) / eps**2
    lap = svd_lower_bound(r, eps, m=m, total=True)
    gauss = svd_lower_bound(r, eps, delta, m=m, total=True)
    strategies = {"identity": np.eye(m), "h2": hierarchy_strategy(m, 2).toarray(),
                  "h4": hierarchy_strategy(m, 4, root=True).toarray(), "haar": wavelet_strategy(m).toarray(),
                  "prefix": workload_matrix(prefix_ranges(m), m).toarray()}
    rng = np.random.default_rng(5)  # test-only randomness: random strategies
    for i in range(20):
        strategies[f"random{i}"] = rng.uniform(0, 1, size=(m + 5, m))
    for name, a in strategies.items():
        assert tse(a, w, c_lap, 1) >= lap * (1 - 1e-9), name
        assert tse(a, w, c_gauss, 2) >= gauss * (1 - 1e-9), name
    # sanity: on all ranges the best of these is within a small factor of the bound (it is not vacuous)
    best = min(tse(a, w, c_lap, 1) for a in strategies.values())
    assert best < 4 * lap
    # flat (identity) error is Σ lengths · 2/eps^2, the (m+2)/3 law
    assert abs(tse(np.eye(m), w, c_lap, 1) / r.shape[0] - c_lap * (m + 2) / 3) < 1e-9


@pytest.mark.parametrize(("args", "kwargs", "err", "param"), [
    ((None, 1.0), {}, WrongType, "workload"),
    (("abc", 1.0), {}, WrongType, "workload"),
    ((np.zeros((0, 3)), 1.0), {}, InvalidData, "workload"),
    ((sp.csr_matrix((0, 3)), 1.0), {}, InvalidParameter, "workload"),
    ((np.eye(3), 0.0), {}, InvalidParameter, "epsilon"),
    ((np.eye(3), 1.0, 1.5), {}, InvalidParameter, "delta"),
    ((np.eye(3), 1.0, 0.0), {}, InvalidParameter, "delta"),
    (([[0, 5]], 1.0), {"m": 4}, InvalidParameter, "ranges"),
    ((np.zeros((0, 2), dtype=np.int64), 1.0), {"m": 4}, InvalidParameter, "workload"),
    (([[0, 1]], 1.0), {"m": 10_000}, InvalidParameter, "m"),
    ((np.array([[1.0, np.inf]]), 1.0), {}, InvalidData, "workload"),
    ((sp.csr_matrix(np.array([[1.0, np.inf]])), 1.0), {}, InvalidParameter, "workload"),
])
def test_bad_input(args, kwargs, err, param):
    with pytest.raises(err) as info:
        svd_lower_bound(*args, **kwargs)
    assert info.value.param == param
