"""Workload-optimised strategies (HDMM p-Identity) and strategy_histogram."""

import math

import numpy as np
import pytest
from scipy import stats

from dpkit import InvalidData, InvalidParameter, PureDP, Replace, WrongType, deterministic_source
from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly
from dpkit.histograms import (
    all_ranges,
    answer,
    hierarchy_strategy,
    optimize_strategy,
    prefix_ranges,
    strategy_histogram,
    svd_lower_bound,
    tree_height,
    workload_matrix,
)
from dpkit.histograms import strategy as st
from dpkit.histograms.lower_bound import range_gram

from ._helpers import BAD_2D, ONE_CHARGE, REFUSAL_CALL, REFUSAL_SECRETS, assert_relation_sensitivities


def _brute(theta: np.ndarray, g: np.ndarray) -> float:
    d = 1.0 / (1.0 + theta.sum(axis=0))
    a = np.vstack([np.diag(d), theta * d])
    return float(np.trace(g @ np.linalg.inv(a.T @ a)))


def test_gram_operator_is_the_all_ranges_gram():
    m = 11
    g = range_gram(all_ranges(m), m)
    op = st._Gram(m)
    assert np.allclose(op.matmul(np.eye(m)), g)
    assert np.allclose(op.diag, np.diag(g))


def test_objective_and_gradient_match_brute_force_and_finite_differences():
    m, p = 10, 3
    g = range_gram(all_ranges(m), m)
    op = st._Gram(m)
    theta = (np.arange(p * m, dtype=float) * 0.37 % 1.0).reshape(p, m)
    f, grad = st._p_identity_objective(theta.ravel(), p, op)
    assert f == pytest.approx(_brute(theta, g), rel=1e-10)
    num = np.empty(p * m)
    h = 1e-6
    for i in range(p * m):
        e = np.zeros(p * m)
        e[i] = h
        num[i] = (_brute((theta.ravel() + e).reshape(p, m), g) - _brute((theta.ravel() - e).reshape(p, m), g)) / (2 * h)
    assert np.max(np.abs(num - grad)) <= 1e-6 * np.max(np.abs(grad))
    # a dense workload matrix gives the same loss as the closed-form all-ranges Gram
    dense = st._Gram(m, dense=g)
    assert st._p_identity_objective(theta.ravel(), p, dense)[0] == pytest.approx(f, rel=1e-12)


def _hierarchy_objective(m: int, b: int) -> float:
    """tr(WᵀW (AᵀA)⁻¹) of H_b (least squares, equal budget) normalised to unit column L1 norm (h per column)."""
    g = range_gram(all_ranges(m), m)
    a = hierarchy_strategy(m, b)
    a = a.toarray() if hasattr(a, "toarray") else np.asarray(a)
    h = tree_height(m, b)
    return float(h * h * np.trace(g @ np.linalg.inv(a.T @ a)))


def test_optimised_strategy_on_all_ranges_of_64_bins():
    m = 64
    s = optimize_strategy("all_ranges", m)
    assert s.theta.shape == (4, m) and np.all(s.theta >= 0)
    svdb = svd_lower_bound(all_ranges(m), 1.0, m=m, total=True) / 2.0   # (Σσ)²/m
    identity = m * (m + 1) * (m + 2) / 6.0                               # tr(WᵀW)
    ratio = s.objective / svdb
    # Measured 2.97 in MSE (1.72 in RMSE, the ratio the docs and the 1.5x goal use): the goal
    # is not met by this parameterisation (see docs/histograms.md).
    assert ratio <= 3.05
    assert s.objective < identity
    for b in (2, 4, 8, 16):
        assert s.objective < _hierarchy_objective(m, b)
    assert s.objective == pytest.approx(_brute(s.theta, range_gram(all_ranges(m), m)), rel=1e-9)
    assert optimize_strategy("all_ranges", m) is s  # cached


def test_prefix_gram_operator_and_strategy():
    m = 13
    g = range_gram(prefix_ranges(m), m)
    op = st._Gram(m, prefixes=True)
    assert np.allclose(op.matmul(np.eye(m)), g)
    assert np.allclose(op.diag, np.diag(g))
    s = optimize_strategy("prefixes", 64)
    assert s.workload == "prefixes" and s.workload_size == 64 and s.theta.shape == (4, 64)
    g64 = range_gram(prefix_ranges(64), 64)
    assert s.objective == pytest.approx(_brute(s.theta, g64), rel=1e-9)
    # the same optimum as from the dense prefix workload matrix, and better than H_b and the identity
    dense = optimize_strategy(workload_matrix(prefix_ranges(64), 64))
    assert s.objective == pytest.approx(dense.objective, rel=1e-6)
    assert s.objective < np.trace(g64)
    h = hierarchy_strategy(64, 16).toarray()
    assert s.objective < tree_height(64, 16) ** 2 * np.trace(g64 @ np.linalg.inv(h.T @ h))
    svdb = svd_lower_bound(prefix_ranges(64), 1.0, m=64, total=True) / 2.0
    assert s.objective / svdb <= 3.45      # measured 3.40 in MSE (1.84 in RMSE)
    counts = np.array([3, 0, 5, 7, 2, 1, 0, 4, 9, 9, 1, 0])
    rel = strategy_histogram(counts, 1e9, workload="prefixes", rng=deterministic_source(4))
    assert rel.params["workload"] == "prefixes" and np.allclose(rel.value, counts, atol=1e-3)
    expected = rel.params["expected_msae"]
    rel = strategy_histogram(counts, 1.0, workload="prefixes", rng=deterministic_source(4))
    assert rel.params["expected_msae"] == pytest.approx(
        2.0 * optimize_strategy("prefixes", 12).objective / 12, rel=0.01)
    assert expected < rel.params["expected_msae"]
    rel2 = strategy_histogram(np.arange(12).reshape(3, 4), 1.0, workload="prefixes", rng=deterministic_source(4))
    assert rel2.params["workload"] == "prefixes" and rel2.value.shape == (3, 4)


def test_matrix_workload():
    w = workload_matrix(all_ranges(16), 16)
    s = optimize_strategy(w)
    assert s.workload == "matrix" and s.workload_size == 136 and s.m == 16
    assert s.objective <= 16 * 17 * 18 / 6.0  # never worse than the identity strategy
    rel = strategy_histogram(np.arange(16), 1.0, workload=w.toarray(), rng=deterministic_source(2))
    assert rel.value.shape == (16,)


def _noise(rel, counts):
    a, q = rel.parts["strategy"]
    true = np.concatenate([a * counts, q @ counts])
    return rel.parts["measurements"] - true


def _chi2_p(z: np.ndarray, t: float) -> float:
    """Pearson chi-square p-value of integer samples against the discrete Laplace law of scale t."""
    q = math.exp(-1.0 / t)
    edges = np.unique(np.round(stats.laplace.ppf(np.linspace(0.02, 0.98, 30), scale=t)).astype(int))
    # P[Z <= k] of the two-sided geometric law
    def cdf(k):
        k = np.asarray(k, dtype=float)
        return np.where(k < 0, q ** (-k) / (1 + q), 1 - q ** (k + 1) / (1 + q))
    probs = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]]))
    obs = np.bincount(np.searchsorted(edges, z, side="left"), minlength=edges.size + 1)
    exp = probs * z.size
    return float(stats.chi2.sf(np.sum((obs - exp) ** 2 / exp), edges.size))


def test_noise_law_is_discrete_laplace_at_the_declared_scale():
    counts = np.array([3, 0, 5, 7, 2, 1, 0, 4])
    src = deterministic_source(11)
    zs, t = [], None
    for _ in range(1500):
        rel = strategy_histogram(counts, 1.0, rng=src)
        zs.append(_noise(rel, counts))
        t = rel.params["scale"]
    z = np.concatenate(zs)
    assert t == st._LATTICE / 1.0 and rel.params["lattice"] == st._LATTICE
    assert _chi2_p(z, t) > 1e-4
    assert _chi2_p(z, 1.1 * t) < 1e-6 and _chi2_p(z, t / 1.1) < 1e-6
    # measurements are integers on the strategy lattice; every column of B sums to the lattice exactly
    a, q = rel.parts["strategy"]
    assert np.all(a + q.sum(axis=0) == st._LATTICE) and np.all(a >= 1)


def test_expected_error_formula_matches_simulation():
    m = 8
    counts = np.array([3, 0, 5, 7, 2, 1, 0, 4])
    r = all_ranges(m)
    truth = answer(counts, r)
    src = deterministic_source(5)
    errs = []
    for _ in range(800):
        rel = strategy_histogram(counts, 1.0, rng=src)
        errs.append(np.mean((answer(rel.value, r) - truth) ** 2))
    expected = rel.params["expected_msae"]
    assert np.mean(errs) == pytest.approx(expected, rel=0.1)
    s = optimize_strategy("all_ranges", m)
    assert expected == pytest.approx(2.0 * s.objective / len(r), rel=0.01)  # ≈ 2 f / (ε² k)


def test_least_squares_is_exact_without_noise():
    counts = np.array([3, 0, 5, 7, 2, 1, 0, 4, 9, 9, 1, 0, 0, 2, 3, 8, 1, 1, 0, 6])
    s = optimize_strategy("all_ranges", counts.size, p=3)
    a, q = st._lattice(s, st._LATTICE)
    y = np.concatenate([a * counts, q @ counts]).astype(float)
    assert np.allclose(st._solver(a, q, st._LATTICE)(y[:, None])[:, 0], counts, atol=1e-3)


def test_two_dimensional_kronecker_strategy():
    counts = np.arange(48).reshape(6, 8)
    rel = strategy_histogram(counts, 1.0, rng=deterministic_source(3))
    assert rel.value.shape == (6, 8)
    assert rel.parts["measurements"].shape == (6 + 1, 8 + 1)
    assert rel.params["lattice"] == st._LATTICE_2D ** 2
    (a1, q1), (a2, q2) = rel.parts["strategy"]
    b1, b2 = np.vstack([np.diag(a1), q1]), np.vstack([np.diag(a2), q2])
    assert np.all(np.kron(b1, b2).sum(axis=0) == st._LATTICE_2D ** 2)
    # huge epsilon: almost no noise, the estimate is the data
    rel = strategy_histogram(counts, 1e9, rng=deterministic_source(3))
    assert np.allclose(rel.value, counts, atol=1e-3)


def test_kronecker_gram_operator():
    g1, g2 = st._Gram(5), st._Gram(3, prefixes=True)
    op = st._KronGram(g1, g2)
    dense = np.kron(g1.matmul(np.eye(5)), g2.matmul(np.eye(3)))
    b = (np.arange(60, dtype=float) * 0.37 % 1.0).reshape(4, 15)
    assert np.allclose(op.rmatmul(b), b @ dense)
    assert np.allclose(op.matmul(b.T), dense @ b.T)
    assert np.allclose(op.diag, np.diag(dense))


def test_grid_strategy_beats_the_kronecker_product():
    m = 16
    s = optimize_strategy("all_ranges", (m, m))
    assert s.shape == (m, m) and s.m == m * m and s.workload_size == (m * (m + 1) // 2) ** 2
    assert optimize_strategy("all_ranges", (m, m)) is s  # cached
    g = np.kron(range_gram(all_ranges(m), m), range_gram(all_ranges(m), m))
    assert s.objective == pytest.approx(_brute(s.theta, g), rel=1e-9)
    one = optimize_strategy("all_ranges", m)
    svdb = (svd_lower_bound(all_ranges(m), 1.0, m=m, total=True) / 2.0) ** 2
    # measured: 1.89x the SVD bound in RMSE, against 2.02x for the Kronecker product of the 1-D optima
    assert math.sqrt(s.objective / svdb) <= 1.9
    assert s.objective < 0.9 * one.objective ** 2


def test_grid_strategy_histogram():
    counts = np.arange(48).reshape(6, 8)
    s = optimize_strategy("all_ranges", (6, 8))
    rel = strategy_histogram(counts, 1.0, strategy=s, rng=deterministic_source(3))
    assert rel.value.shape == (6, 8) and rel.params["p"] == s.p and rel.params["lattice"] == st._LATTICE
    assert rel.parts["measurements"].shape == (48 + s.p,)
    a, q = rel.parts["strategy"]
    assert np.all(a + q.sum(axis=0) == st._LATTICE)
    kron = strategy_histogram(counts, 1.0, rng=deterministic_source(3))
    assert rel.params["expected_msae"] <= kron.params["expected_msae"] * (1 + 1e-9)  # both the identity here
    big = np.arange(192).reshape(12, 16)
    grid = strategy_histogram(big, 1.0, strategy=optimize_strategy("all_ranges", (12, 16)), rng=deterministic_source(3))
    assert grid.params["expected_msae"] < 0.95 * strategy_histogram(big, 1.0).params["expected_msae"]
    k = (6 * 7 // 2) * (8 * 9 // 2)
    assert rel.params["expected_msae"] == pytest.approx(2.0 * s.objective / k, rel=0.01)
    # almost no noise: the estimate is the data
    assert np.allclose(strategy_histogram(counts, 1e9, strategy=s, rng=deterministic_source(3)).value, counts,
                       atol=1e-3)
    # simulated error matches the stated expectation
    rects = [(r0, r1, c0, c1) for r0 in range(6) for r1 in range(r0 + 1, 7)
             for c0 in range(8) for c1 in range(c0 + 1, 9)]

    def answers(x):
        p = np.zeros((7, 9))
        p[1:, 1:] = np.cumsum(np.cumsum(x, axis=0), axis=1)
        return np.array([p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0] for r0, r1, c0, c1 in rects])
    truth = answers(counts)
    src = deterministic_source(8)
    errs = [np.mean((answers(strategy_histogram(counts, 1.0, strategy=s, rng=src).value) - truth) ** 2)
            for _ in range(300)]
    assert np.mean(errs) == pytest.approx(rel.params["expected_msae"], rel=0.15)
    with pytest.raises(InvalidParameter):
        strategy_histogram(counts, 1.0, strategy=optimize_strategy("all_ranges", (8, 6)))
    with pytest.raises(WrongType):  # a 1-D strategy is not a grid strategy
        strategy_histogram(counts, 1.0, strategy=optimize_strategy("all_ranges", 48))
    with pytest.raises(InvalidParameter):
        optimize_strategy("all_ranges", (100, 100))
    with pytest.raises(InvalidParameter):
        optimize_strategy(np.ones((3, 4)), (2, 2))


def test_one_charge_before_any_draw():
    assert_charges_first(strategy_histogram, ([3, 1, 4, 1, 5, 9, 2, 6], 0.6), name="strategy_histogram",
                         **ONE_CHARGE)
    assert_charges_first(strategy_histogram, (np.arange(12).reshape(3, 4), 0.6), name="strategy_histogram",
                         **ONE_CHARGE)
    assert_charges_first(strategy_histogram, (np.arange(12).reshape(3, 4), 0.6),
                         {"strategy": optimize_strategy("all_ranges", (3, 4))}, name="strategy_histogram",
                         **ONE_CHARGE)


def test_sensitivities_by_relation():
    assert_relation_sensitivities(strategy_histogram, [3, 1, 4, 1, 5])
    rel = strategy_histogram([3, 1, 4, 1, 5], 0.5, neighbours=Replace(), rng=deterministic_source(1))
    assert rel.params["scale"] == 2 * st._LATTICE / 0.5


@pytest.mark.parametrize(("changes", "error", "param"), [
    ({"counts": [12345, -2, 3]}, InvalidData, "counts"),
    ({"counts": [12345, 2.5, 3]}, InvalidData, "counts"),
    ({"counts": [2**41, 1, 3]}, InvalidData, "counts"),
    ({"counts": None}, WrongType, "counts"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"workload": "suffixes"}, InvalidParameter, "workload"),
    ({"workload": np.ones((2, 5))}, InvalidParameter, "workload"),
    ({"workload": np.zeros((2, 3))}, InvalidParameter, "workload"),
    ({"workload": None}, WrongType, "workload"),
    ({"strategy": "hdmm"}, WrongType, "strategy"),
    ({"strategy": optimize_strategy("all_ranges", 5, p=1)}, InvalidParameter, "strategy"),
])
def test_typed_errors(changes, error, param):
    args = {"counts": REFUSAL_CALL[0], "epsilon": REFUSAL_CALL[1], **changes}
    assert_refused_cleanly(strategy_histogram, (args.pop("counts"), args.pop("epsilon")), args, error=error,
                           param=param, secrets=REFUSAL_SECRETS, budget=PureDP(1.0))


@pytest.mark.parametrize(("changes", "error", "param"), BAD_2D)
def test_typed_errors_2d(changes, error, param):
    args = {"counts": [[1, 2], [3, 4]], "epsilon": 1.0, **changes}
    if param == "counts" and error is InvalidData and np.ndim(args["counts"]) == 1:
        return  # 1-D counts are valid here
    assert_refused_cleanly(strategy_histogram, (args.pop("counts"), args.pop("epsilon")), args, error=error,
                           param=param, secrets=REFUSAL_SECRETS, budget=PureDP(1.0))


def test_optimize_strategy_typed_errors():
    with pytest.raises(InvalidParameter) as e:
        optimize_strategy("all_ranges")
    assert e.value.param == "m"
    with pytest.raises(InvalidParameter):
        optimize_strategy("all_ranges", 8, p=9)
    with pytest.raises(InvalidParameter):
        optimize_strategy("all_ranges", 10**5)
    with pytest.raises(InvalidParameter):
        optimize_strategy("prefixes")
    with pytest.raises(InvalidParameter):
        optimize_strategy("suffixes", 8)
    with pytest.raises(InvalidParameter):
        optimize_strategy(np.ones((3, 4)), 5)
    with pytest.raises(WrongType):
        optimize_strategy(None)
    with pytest.raises(InvalidData):
        optimize_strategy(np.ones((3, 4)) * np.nan)
