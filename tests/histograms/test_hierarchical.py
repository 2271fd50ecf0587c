"""Hierarchical histograms H_b with constrained inference (dpkit.histograms.hierarchical)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from tests.histograms._helpers import ONE_CHARGE, REFUSAL_CALL, REFUSAL_SECRETS

from conftest import sized
from dpkit.audit.exact import DiscreteLaplace, max_privacy_loss
from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.histograms import hierarchical, optimal_branching, tree_height
from dpkit.histograms.hierarchical import _dlap_variance, _infer
from dpkit.noise import deterministic_source


def v_star(b: int, h: int) -> Fraction:
    """Li et al. Eq. 4.3 approximation (test oracle, written independently of the implementation)."""
    return Fraction((b - 1) * h**3) - Fraction(2 * (b + 1) * h * h, 3)


def inference_map(b: int, sizes: list[int], precisions: list[float]) -> np.ndarray:
    """The exact linear map (rows: noisy nodes, top level first; columns: all inferred nodes) of ``_infer``."""
    n = sum(sizes)
    eye = np.eye(n)
    cuts = np.cumsum([0, *sizes])
    levels = [eye[:, cuts[i]:cuts[i + 1]] for i in range(len(sizes))]
    out = _infer(levels, precisions, b)[-len(sizes):]
    return np.concatenate(out, axis=1)


def tree_matrix(b: int, sizes: list[int]) -> np.ndarray:
    """A (nodes x leaves) 0/1 matrix: node count = sum of its leaves."""
    m = sizes[-1]
    rows = []
    for s in sizes:
        w = m // s
        rows.append(np.kron(np.eye(s), np.ones((1, w))))
    return np.concatenate(rows, axis=0)


# ------------------------------------------------------------------ branching factor oracles
def test_asymptotic_optimal_branching_is_16_8():
    # minimiser of (b-1)/ln^3 b solves ln b = 3(b-1)/b; bisection
    lo, hi = 2.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if math.log(mid) - 3 * (mid - 1) / mid < 0:
            lo = mid
        else:
            hi = mid
    assert abs(lo - 16.801) < 1e-3
    grid = np.linspace(2, 100, 98001)
    assert abs(grid[np.argmin((grid - 1) / np.log(grid) ** 3)] - 16.801) < 2e-3
    # b = 16 vs b = 2: (log2 16)^3 / 15 = 64/15 ≈ 4.27 (leading terms, m = 2^40 where both h are exact)
    ratio = Fraction((2 - 1) * 40**3, (16 - 1) * 10**3)
    assert ratio == Fraction(64, 15) and abs(float(ratio) - 4.27) < 5e-3


@pytest.mark.parametrize("m", [3, 10, 45, 100, 1000, 4096, 5000])
def test_optimal_branching_is_the_brute_force_argmin(m):
    best = min(range(2, m + 1), key=lambda b: (v_star(b, tree_height(m, b)), b))
    assert optimal_branching(m) == best


def test_optimal_branching_large_domain_near_16():
    assert 8 <= optimal_branching(10**6) <= 32
    assert optimal_branching(16**5) == 16


def test_tree_height():
    assert [tree_height(m, 2) for m in (1, 2, 3, 4, 5, 8, 9)] == [1, 1, 2, 2, 3, 3, 4]
    assert tree_height(16**3, 16) == 3 and tree_height(16**3 + 1, 16) == 4


# ------------------------------------------------------------------ constrained inference oracles
def test_fig_4_1_oracle_first_three_leaves():
    # nodes in our order: [n1 (root), n3, n4, n7, n8, n9, n10]
    a = inference_map(2, [1, 2, 4], [1.0, 1.0, 1.0])
    q = a[:, 3:6].sum(axis=1)  # leaves 0..2 after inference
    expected = np.array([9, 8, 1, 4, 4, 11, -10]) / 21.0
    assert np.allclose(q, expected, atol=1e-12)
    assert abs(float(q @ q) - 399 / 441) < 1e-12
    n7 = a[:, 3]
    assert np.allclose(n7, np.array([3, 5, -2, 13, -8, -1, -1]) / 21.0, atol=1e-12)


@pytest.mark.parametrize(("b", "sizes", "prec"), [
    (2, [1, 2, 4], [1.0, 1.0, 1.0]),
    (3, [3, 9, 27], [1.0, 1.0, 1.0]),           # no root (as released): virtual root with precision 0
    (3, [3, 9, 27], [0.2, 0.7, 2.5]),           # unequal (geometric-like) variances
    (2, [2, 4, 8, 16], [0.1, 0.4, 1.0, 3.0]),
])
def test_inference_is_the_generalised_least_squares_blue(b, sizes, prec):
    a = inference_map(b, sizes, prec)
    t = tree_matrix(b, sizes)
    w = np.diag(np.repeat(prec, sizes))
    # BLUE of the leaves: (T' W T)^-1 T' W y; of all nodes: T times that
    gls = t @ np.linalg.solve(t.T @ w @ t, t.T @ w)
    assert np.allclose(a.T, gls, atol=1e-10)


def test_release_is_consistent_and_value_is_the_leaves():
    counts = np.array([5, 0, 3, 9, 1, 1, 0, 7, 2, 4, 0])
    for allocation in ("equal", "geometric"):
        rel = hierarchical(counts, 0.7, branching=3, allocation=allocation, rng=deterministic_source(5))
        lv = rel.parts["consistent_levels"]
        assert [x.size for x in lv] == [3, 9, 27]
        for parent, child in itertools.pairwise(lv):
            assert np.allclose(child.reshape(-1, 3).sum(axis=1), parent, rtol=0, atol=1e-9)
        assert np.array_equal(rel.value, lv[-1][:11]) and rel.value.dtype == np.float64
        assert [x.dtype for x in rel.parts["levels"]] == [np.int64] * 3
    raw = hierarchical(counts, 0.7, branching=3, consistency=False, rng=deterministic_source(5))
    assert "consistent_levels" not in raw.parts
    assert np.array_equal(raw.value, raw.parts["levels"][-1][:11].astype(float))


# ------------------------------------------------------------------ distribution: unbiased, analytic variance
def analytic_variance(b, h, scales, lo, hi, consistency):
    sizes = [b ** (i + 1) for i in range(h)]
    var = np.repeat([_dlap_variance(t) for t in scales], sizes)
    if not consistency:
        c = np.zeros(sum(sizes))
        c[sum(sizes[:-1]) + lo: sum(sizes[:-1]) + hi] = 1.0
    else:
        a = inference_map(b, sizes, [1.0 / _dlap_variance(t) for t in scales])
        c = a[:, sum(sizes[:-1]) + lo: sum(sizes[:-1]) + hi].sum(axis=1)
    return float((c * c) @ var)


def test_unbiased_and_variance_matches_analytic():
    counts = np.array([4, 8, 15, 16, 23, 42, 0, 1, 2, 3, 5, 8, 13])
    lo, hi = 1, 11
    truth = counts[lo:hi].sum()
    r = sized(6000, 60000)
    rng = deterministic_source(2026)
    est = np.empty(r)
    for i in range(r):
        rel = hierarchical(counts, 1.0, branching=4, rng=rng)
        est[i] = rel.value[lo:hi].sum()
    scales = rel.params["level_scales"]
    v = analytic_variance(4, 2, scales, lo, hi, True)
    # unbiased: 6 standard errors (failure probability ~2e-9 by the CLT)
    assert abs(est.mean() - truth) < 6 * math.sqrt(v / r)
    s2 = est.var(ddof=1)
    se = math.sqrt(max(np.mean((est - est.mean()) ** 4) - s2 * s2, 0.0) / r)
    assert abs(s2 - v) < 6 * se
    # power: the raw (no inference) variance and a 2x-wrong scale are both far outside the band
    v_raw = analytic_variance(4, 2, scales, lo, hi, False)
    assert abs(v_raw - v) > 12 * se
    assert abs(v / 4 - v) > 12 * se
    # inference is the BLUE: it reduces the variance of this query
    assert v < v_raw


# ------------------------------------------------------------------ privacy
@pytest.mark.parametrize(("allocation", "neighbours", "sens"), [
    ("equal", None, 1), ("geometric", None, 1), ("equal", Replace(), 2), ("geometric", Replace(), 2)])
def test_exact_privacy_loss_over_the_levels_equals_epsilon(allocation, neighbours, sens):
    eps, b = 0.9, 2
    d = np.array([1, 0, 2, 0])
    # add/remove: one record added to bin 0; replace: a record moves from bin 2 to bin 0 (other subtree)
    d_prime = np.array([2, 0, 2, 0]) if sens == 1 else np.array([2, 0, 1, 0])
    rel = hierarchical(d, eps, branching=b, allocation=allocation, neighbours=neighbours,
                       rng=deterministic_source(1))
    scales = rel.params["level_scales"]
    h = rel.params["height"]
    assert h == 2 and rel.params["sensitivity_per_level"] == sens
    levels_d = [d.reshape(2, 2).sum(axis=1), d]
    levels_dp = [d_prime.reshape(2, 2).sum(axis=1), d_prime]
    # the noisy tree is a product of independent discrete Laplace laws: its worst-case privacy loss is
    # the sum over nodes of the per-node worst losses (all attained at one output point, far in the tails)
    def tree_loss(level_scales):
        total = 0.0
        for t, x, y in zip(level_scales, levels_d, levels_dp, strict=True):
            for u, w in zip(x.tolist(), y.tolist(), strict=True):
                if u != w:
                    grid = np.arange(-30, 31)
                    total += max_privacy_loss(DiscreteLaplace(u, t), DiscreteLaplace(w, t), grid=grid).loss
        return total

    total = tree_loss(scales)
    assert total <= eps * (1 + 1e-12)
    assert total >= eps * (1 - 1e-9)
    # exact rational accounting: sum_l sens / t_l <= sum_l eps_l <= eps
    assert sum(Fraction(sens) / Fraction(t) for t in scales) <= Fraction(eps)
    assert sum(Fraction(e) for e in rel.params["level_epsilons"]) <= Fraction(eps)
    # power: the broken variant that gives every level the full epsilon loses h * epsilon
    assert tree_loss([sens / eps] * h) > 1.9 * eps


def test_level_budgets():
    rel = hierarchical(np.arange(100), 1.0, branching=4, allocation="geometric", rng=deterministic_source(1))
    e = rel.params["level_epsilons"]
    assert rel.params["height"] == 4 and len(e) == 4
    for parent, child in itertools.pairwise(e):
        assert abs(child / parent - 4 ** (1 / 3)) < 1e-12
    assert abs(sum(e) - 1.0) < 1e-12
    eq = hierarchical(np.arange(100), 1.0, branching=4, rng=deterministic_source(1)).params["level_epsilons"]
    assert all(abs(x - 0.25) < 1e-15 for x in eq)
    assert hierarchical(np.arange(100), 1.0, branching="optimal", rng=deterministic_source(1)).params[
        "branching"] == optimal_branching(100)


def test_one_charge_before_randomness_and_refusal_draws_nothing():
    rel = assert_charges_first(hierarchical, ([3, 1, 4, 1, 5, 9, 2, 6], 0.6), {"branching": 2},
                               name="hierarchical_histogram", **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == (8,)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"counts": [1, -2, 3]}, InvalidData, "counts"),
    ({"counts": [1, 2.5, 3]}, InvalidData, "counts"),
    ({"counts": [1, float("nan"), 3]}, InvalidData, "counts"),
    ({"counts": [1, float("inf"), 3]}, InvalidData, "counts"),
    ({"counts": []}, InvalidData, "counts"),
    ({"counts": None}, WrongType, "counts"),
    ({"counts": "abc"}, WrongType, "counts"),
    ({"counts": [[1, 2], [3, 4]]}, InvalidData, "counts"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"epsilon": float("nan")}, InvalidParameter, "epsilon"),
    ({"branching": 1}, InvalidParameter, "branching"),
    ({"branching": 2.0}, WrongType, "branching"),
    ({"branching": "best"}, InvalidParameter, "branching"),
    ({"allocation": "linear"}, InvalidParameter, "allocation"),
    ({"consistency": 1}, WrongType, "consistency"),
    ({"inference": "bayes"}, InvalidParameter, "inference"),
    ({"inference": "nnls", "consistency": False}, InvalidParameter, "inference"),
])
def test_bad_input_typed_errors_nothing_charged(kwargs, err, param):
    assert_refused_cleanly(hierarchical, REFUSAL_CALL, kwargs, error=err, param=param, secrets=REFUSAL_SECRETS)
