"""The fairness LP (Fig 8.1) against brute force, its constraints, its reductions and the classifier it returns."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from tests.fairness import _brute

import dpkit
from dpkit.fairness import (
    FairClassifier,
    SolverError,
    fair_classifier,
    lipschitz_violations,
    sample_categorical,
    statistical_parity,
)


@pytest.mark.parametrize("divergence", ["tv", "inf"])
@pytest.mark.parametrize("seed", range(6))
def test_two_outcome_lp_matches_vertex_enumeration(divergence, seed):
    gen = np.random.default_rng(seed)  # rng-ok: test instances
    n = 2 + seed % 3  # 2, 3, 4 individuals
    d = _brute.random_metric(gen, n, scale=0.8 if divergence == "tv" else 1.5)
    loss = gen.normal(size=(n, 2))
    w = gen.random(n) + 0.1
    w /= w.sum()
    brute = _brute.fair_lp_two_outcomes(d, loss, divergence, w)
    for formulation in ("auto", "aux"):
        clf = fair_classifier(d, loss, divergence=divergence, weights=w, formulation=formulation)
        assert clf.objective == pytest.approx(brute, abs=1e-7)
        assert clf.lipschitz is not None and clf.lipschitz.max_violation <= 1e-7
        assert lipschitz_violations(clf.probabilities, d, divergence=divergence, tolerance=1e-7).ok
        if divergence == "inf":
            assert clf.lipschitz.linear_violation <= 1e-7


@pytest.mark.parametrize("divergence", ["tv", "inf"])
def test_three_outcomes_no_worse_than_a_grid_search(divergence):
    """Two individuals, three outcomes: every feasible grid point is no better than the LP optimum (and the LP's
    solution is feasible, so the LP optimum is the true one up to the grid's resolution)."""
    gen = np.random.default_rng(7)  # rng-ok: test instance
    d = np.array([[0.0, 0.3], [0.3, 0.0]])
    loss = gen.normal(size=(2, 3))
    clf = fair_classifier(d, loss, divergence=divergence)
    step = 40
    simplex = [np.array([a, b, step - a - b]) / step for a in range(step + 1) for b in range(step + 1 - a)]
    grid = np.array(simplex)
    p, q = grid[:, None, :], grid[None, :, :]
    if divergence == "tv":
        ok = 0.5 * np.abs(p - q).sum(axis=2) <= 0.3 + 1e-12
    else:
        e = math.exp(0.3)
        ok = np.all(p <= e * q + 1e-12, axis=2) & np.all(q <= e * p + 1e-12, axis=2)
    val = 0.5 * ((grid @ loss[0])[:, None] + (grid @ loss[1])[None, :])
    best = float(np.min(np.where(ok, val, np.inf)))
    assert clf.objective <= best + 1e-9
    assert clf.objective >= best - 0.1  # the grid is within its resolution of the optimum
    assert clf.lipschitz.max_violation <= 1e-7


def test_three_outcome_tv_equals_subset_formulation():
    """A second, independent TV formulation (D_tv(P, Q) = max_B P(B) - Q(B), one row per subset of outcomes and
    ordered pair, no auxiliary variables) solved directly with scipy gives the same optimum."""
    from scipy.optimize import linprog

    gen = np.random.default_rng(11)  # rng-ok: test instance
    n, k = 4, 3
    d = _brute.random_metric(gen, n, scale=0.7)
    loss = gen.normal(size=(n, k))
    rows, rhs = [], []
    for x, y in itertools.permutations(range(n), 2):
        for size in range(1, k):
            for sub in itertools.combinations(range(k), size):
                r = np.zeros(n * k)
                for a in sub:
                    r[x * k + a] += 1.0
                    r[y * k + a] -= 1.0
                rows.append(r)
                rhs.append(d[x, y])
    a_eq = np.kron(np.eye(n), np.ones(k))
    res = linprog(loss.reshape(-1) / n, A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=a_eq, b_eq=np.ones(n),
                  bounds=(0, 1), method="highs-ipm")
    clf = fair_classifier(d, loss)
    assert clf.objective == pytest.approx(res.fun, abs=1e-7)
    clf_inf = fair_classifier(d, loss, divergence="inf")
    assert clf_inf.objective >= clf.objective - 1e-9  # D_inf-Lipschitz implies D_tv-Lipschitz (Lemma 8.2.5)


@pytest.mark.parametrize("divergence", ["tv", "inf"])
def test_lazy_constraints_give_the_same_optimum(divergence):
    gen = np.random.default_rng(3)  # rng-ok: test instance
    n = 60
    d = _brute.random_metric(gen, n, scale=1.2 if divergence == "tv" else 3.0)
    loss = gen.normal(size=(n, 3))
    full = fair_classifier(d, loss, divergence=divergence)
    lazy = fair_classifier(d, loss, divergence=divergence, constraints="lazy")
    assert lazy.objective == pytest.approx(full.objective, abs=1e-6)
    assert lazy.lipschitz.max_violation <= 1e-7
    assert lazy.lp.pairs_kept <= full.lp.pairs_kept
    assert lazy.lp.rounds >= 1


def test_vacuous_tv_pairs_are_dropped_and_counted():
    pos = np.array([0.0, 0.3, 1.5, 1.6])
    d = np.abs(pos[:, None] - pos[None, :])
    loss = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    clf = fair_classifier(d, loss)
    assert clf.lp.pairs_total == 6
    assert clf.lp.pairs_kept == 2  # (0,1) at 0.3 and (2,3) at 0.1; the four cross pairs have d >= 1
    assert clf.lp.pairs_dropped == 4
    assert clf.lp.variables == 4 and clf.lp.constraints == 4 and clf.lp.nonzeros == 8
    assert any("d(x, y) >= 1" in note for note in clf.lp.notes)
    # dropping them changed nothing: the same optimum as brute force with every pair
    assert clf.objective == pytest.approx(_brute.fair_lp_two_outcomes(d, loss, "tv"), abs=1e-9)
    inf = fair_classifier(d * 0.5, loss, divergence="inf")
    assert inf.lp.pairs_dropped == 0 and inf.lp.pairs_kept == 6


def test_lp_sizes_follow_the_formulas():
    gen = np.random.default_rng(5)  # rng-ok: test instance
    n, k = 7, 3
    d = _brute.random_metric(gen, n, scale=0.5)
    loss = gen.normal(size=(n, k))
    p = n * (n - 1) // 2
    tv = fair_classifier(d, loss)
    assert (tv.lp.variables, tv.lp.constraints) == (n * k + p * k, p * (k + 1) + n)
    inf = fair_classifier(d, loss, divergence="inf")
    assert (inf.lp.variables, inf.lp.constraints) == (n * k, 2 * p * k + n)
    assert inf.lp.nonzeros == 4 * p * k + n * k
    assert tv.lp.solve_seconds >= 0 and tv.lp.status == 0


def test_zero_distance_forces_equal_treatment_and_the_unconstrained_case():
    d = np.zeros((3, 3))
    loss = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    clf = fair_classifier(d, loss)
    assert np.allclose(clf.probabilities, clf.probabilities[0], atol=1e-9)
    far = np.ones((3, 3)) - np.eye(3)  # every pair at TV distance 1: unconstrained, the pointwise optimum
    free = fair_classifier(far, loss)
    assert free.objective == pytest.approx(float(np.mean(loss.min(axis=1))), abs=1e-12)
    assert free.lp.pairs_kept == 0


def test_parity_of_a_lipschitz_classifier_and_labels():
    d = np.array([[0.0, 0.1, 0.9], [0.1, 0.0, 0.9], [0.9, 0.9, 0.0]])
    loss = np.array([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    clf = fair_classifier(d, loss, outcomes=["accept", "reject"])
    assert clf.outcomes == ("accept", "reject")
    gap = statistical_parity(clf.probabilities, [0, 1], [2])
    assert 0 <= gap <= 0.9 + 1e-9
    labels = clf.sample([0, 1, 2, 2], rng=dpkit.deterministic_source(1))
    assert set(labels.tolist()) <= {"accept", "reject"}
    assert clf.predict_proba(2).shape == (1, 2)
    assert clf.expected_loss(loss) == pytest.approx(clf.objective)


def test_time_limit_hit_is_a_typed_error():
    gen = np.random.default_rng(0)  # rng-ok: test instance
    d = _brute.random_metric(gen, 150, scale=0.5)
    loss = gen.normal(size=(150, 2))
    with pytest.raises(SolverError) as err:
        fair_classifier(d, loss, time_limit=1e-9)
    assert err.value.param == "time_limit" and err.value.status == 1


def test_categorical_sampler_is_exact_and_has_power():
    """The exact sampler's law is w / Σw: a binomial test at p < 1e-7 passes, and a law 3 % off is rejected."""
    from scipy.stats import binomtest

    rng = dpkit.deterministic_source(99)
    mu = np.array([[1 / 3, 2 / 3]] * 1)
    clf = FairClassifier(mu)
    m = 20_000
    draws = clf.sample(np.zeros(m, dtype=np.int64), rng=rng)
    hits = int(np.sum(draws == 0))
    assert binomtest(hits, m, 1 / 3).pvalue > 1e-7
    assert binomtest(hits, m, 1 / 3 * 1.09).pvalue < 1e-7  # power: a 9 % wrong law is caught at this size
    # tiny and huge-denominator weights: exact integers over the common power-of-two denominator
    assert sample_categorical([0.0, 5e-324, 0.0], rng=rng) == 1
    assert sample_categorical([1e-300, 1.0], rng=rng) in (0, 1)


def test_classifier_validation():
    with pytest.raises(dpkit.InvalidData) as e:
        FairClassifier([[0.5, 0.6]])
    assert e.value.param == "probabilities"
    with pytest.raises(dpkit.InvalidParameter) as e2:
        FairClassifier([[0.5, 0.5]], outcomes=["a"])
    assert e2.value.param == "outcomes"
    clf = FairClassifier([[0.5, 0.5]])
    with pytest.raises(dpkit.InvalidParameter):
        clf.predict_proba(3)
    with pytest.raises(dpkit.WrongType):
        clf.sample(rng="seed")
