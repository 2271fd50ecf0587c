"""Propose-test-release: thresholds (correct and the book's), distances, the exact joint law of
(noisy distance, pass/fail, output) on small instances, the IQR Scale algorithm, accounting, bad input."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpkit import Accountant, ApproxDP, PrivacyUnit, Replace
from dpkit.core._exact import split_budget
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms import laplace_scale
from dpkit.noise import deterministic_source
from dpkit.stability import (
    book_ptr_mean_distance,
    book_ptr_pass_probability,
    book_ptr_threshold,
    local_sensitivity_mean,
    propose_test_release,
    ptr_iqr_scale,
    ptr_mean,
    ptr_mean_distance,
    ptr_threshold,
)
from dpkit.stability import ptr as P
from dpkit.stability._util import mean_value

from .helpers import (
    SECRET,
    CountingSource,
    add_remove_neighbours,
    assert_refused,
    ball,
    charged_before_draw,
    dlap_logpmf,
    multisets,
    replace_neighbours,
    shifted_release_delta,
)

# ---------------------------------------------------------------------------------------------
# thresholds
# ---------------------------------------------------------------------------------------------


def _tail_mp(t, m):
    mpmath.mp.dps = 50
    q = mpmath.exp(-1 / mpmath.mpf(t))
    return q**m / (1 + q)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1 / 32561**2), (0.5, 1 / 32561**2), (0.1, 1e-6), (3.0, 0.3),
                                            (0.37, 1e-12), (1e-3, 1e-5)])
def test_threshold_is_the_smallest_certified_one(eps, delta):
    T = ptr_threshold(eps, delta)
    t = P._test_scale(eps)
    assert _tail_mp(t, T) <= delta
    if T > 1:
        assert _tail_mp(t, T - 1) > delta


def test_book_threshold_erratum_numbers():
    n = 32561
    delta = 1.0 / n**2
    assert book_ptr_threshold(1.0, delta) == pytest.approx(10.73744412245554, rel=1e-15)
    p = book_ptr_pass_probability(1.0, delta)
    assert p == pytest.approx(math.sqrt(delta / 8), rel=1e-12)  # ½ exp(-ln(2/δ)/2)
    assert p == pytest.approx(1.0858185884747829e-05, rel=1e-12)
    assert p > 10_000 * delta  # P[pass | D = 0] must be <= delta
    correct = math.log(1 / (2 * delta))  # continuous Laplace, epsilon_test = 1
    assert correct == pytest.approx(20.088593883791194, rel=1e-12)
    assert 0.5 * math.exp(-correct) == pytest.approx(delta, rel=1e-12)
    assert ptr_threshold(1.0, delta) == 21  # exact discrete, epsilon_test = 1
    assert ptr_threshold(0.5, delta) == 41  # the default split of epsilon = 1


# ---------------------------------------------------------------------------------------------
# the mean's distance
# ---------------------------------------------------------------------------------------------


def test_near_distance_reproduced():
    from dpkit.datasets import adult

    ages = np.asarray(adult(as_frame=False)["age"], dtype=np.float64)
    assert book_ptr_mean_distance(32561, 100.0, 0.005) == 12562
    assert ptr_mean_distance(ages, 100.0, 0.005) == 12562  # add/remove bound w/max(n-k, 2) > b
    assert ptr_mean_distance(ages, 100.0, 50.0) == math.inf  # w/2 <= b: no unstable data set
    assert ptr_mean_distance(ages, 100.0, 0.005, neighbours=Replace()) == math.inf  # w/n <= b


def test_mean_distance_properties_brute_force():
    grid = (0.0, 1.0, 3.0)
    bounds = (0.0, 3.0)
    for b in (0.4, 0.75, 1.0, 1.4, 3.0):
        for x in multisets(grid, 5):
            d = ptr_mean_distance(list(x), 3.0, b)
            if d >= 1:
                assert local_sensitivity_mean(list(x), bounds) <= b
            for y in add_remove_neighbours(x, grid):
                dy = ptr_mean_distance(list(y), 3.0, b)
                assert d == dy == math.inf or abs(d - dy) <= 1


# ---------------------------------------------------------------------------------------------
# exact joint law of (noisy distance, output)
# ---------------------------------------------------------------------------------------------


def _test_pmf(plan, dist, nd):
    d = plan.cap if dist >= plan.cap else dist
    return np.exp(dlap_logpmf(nd - d, plan.t))


def _nd_window(plan, d1, d2):
    k = math.ceil(45 * plan.t)  # mass outside: < e^-45
    a, b = (min(plan.cap, d) for d in (d1, d2))
    return np.arange(min(a, b) - k, max(a, b) + k + 1)


def _rel(kind1, kind2, a, c, tl):
    if kind1[0] == "lap" and kind2[0] == "lap":
        return shifted_release_delta(a, c, tl, kind2[1] - kind1[1])
    if kind1 == kind2:
        return np.maximum(0.0, a - c)
    return np.asarray(a, dtype=np.float64)


def ptr_delta(plan, x1, x2, eps, tl):
    """delta(eps) of PTR between data sets given as (distance, release kind) -- full output law."""
    (d1, k1), (d2, k2) = x1, x2
    nd = _nd_window(plan, d1, d2)
    p1, p2 = _test_pmf(plan, d1, nd), _test_pmf(plan, d2, nd)
    fail = nd < plan.threshold
    out = float(np.sum(np.maximum(0.0, p1[fail] - math.exp(eps) * p2[fail])))
    out += float(np.sum(_rel(k1, k2, p1[~fail], math.exp(eps) * p2[~fail], tl)))
    return out + 1e-15


def scale_delta(plan, x1, x2, eps, tl):
    """delta(eps) of the two-grid Scale algorithm (full output: noisy distances, grid, value or ⊥)."""
    (da1, da2, k1), (db1, db2, k2) = x1, x2
    e = math.exp(eps)
    n1, n2 = _nd_window(plan, da1, db1), _nd_window(plan, da2, db2)
    a1, b1 = _test_pmf(plan, da1, n1), _test_pmf(plan, db1, n1)
    a2, b2 = _test_pmf(plan, da2, n2), _test_pmf(plan, db2, n2)
    f1, f2 = n1 < plan.threshold, n2 < plan.threshold
    out = float(np.sum(_rel(k1, k2, a1[~f1], e * b1[~f1], tl)))
    A = np.outer(a1[f1], a2[~f2])
    B = np.outer(b1[f1], b2[~f2])
    out += float(np.sum(_rel(k1, k2, A, e * B, tl)))
    A = np.outer(a1[f1], a2[f2])
    B = np.outer(b1[f1], b2[f2])
    out += float(np.sum(np.maximum(0.0, A - e * B)))
    return out + 1e-15


def _mean_instance(x, plan, b, sens, lo, hi):
    xs = np.array(sorted(x))
    g, _ = laplace_scale(sens, plan.eps_release)
    d = P._mean_distance(xs.size, lo, hi, b, False)
    return (d, ("lap", int(np.rint(mean_value(xs, lo, hi) / g))))


@pytest.mark.parametrize(("eps", "delta", "share"), [(1.0, 0.05, 0.5), (2.0, 1e-3, 0.3)])
def test_ptr_mean_exact_delta_every_neighbour_pair(eps, delta, share):
    grid = (0.0, 1.0, 2.0)
    lo, hi, b = 0.0, 2.0, 2.0 / 3.5  # c = 3: D = n - 3 for n >= 3
    plan = P._plan(eps, delta, share)
    sens = b  # lattice sensitivity used by the mechanism (up to the tiny float slack)
    g, scale = laplace_scale(sens, plan.eps_release)
    tl = scale / g
    worst = 0.0
    for x in multisets(grid, 6):
        ix = _mean_instance(x, plan, b, sens, lo, hi)
        for y in add_remove_neighbours(x, grid):
            iy = _mean_instance(y, plan, b, sens, lo, hi)
            worst = max(worst, ptr_delta(plan, ix, iy, eps, tl), ptr_delta(plan, iy, ix, eps, tl))
    assert worst <= delta


def test_book_ptr_variant_is_caught():
    # Near's PTR: threshold ln(2/δ)/(2ε), test and release at ε each, claimed (ε, δ)
    eps, delta = 1.0, 1e-4
    t = P._test_scale(eps)
    plan = P._Plan(eps, eps, t, math.ceil(book_ptr_threshold(eps, delta)), 10**6)
    g, scale = laplace_scale(1.0, eps)
    tl = scale / g
    unstable = (0, ("lap", 0))  # D = 0: LS > b, the neighbour's value is far away
    neighbour = (1, ("lap", int(5.0 / g)))
    assert ptr_delta(plan, unstable, neighbour, eps, tl) > 10 * delta
    # and even with the correct threshold, the pair is (2ε, δ), not (ε, δ)
    good = P._Plan(eps, eps, t, ptr_threshold(eps, delta), 10**6)
    stable_a, stable_b = (30, ("lap", 0)), (31, ("lap", int(1.0 / g)))
    assert ptr_delta(good, stable_a, stable_b, eps, tl) > delta
    assert ptr_delta(good, stable_a, stable_b, 2 * eps, tl) <= delta


def test_exact_calculator_helper_matches_enumeration():
    t = 3.5
    for shift in (-4, 0, 3, 9):
        for a, c in ((0.3, 0.2), (0.1, 0.5), (0.4, 0.4), (0.0, 0.1)):
            k = np.arange(-400, 401)
            brute = np.sum(np.maximum(0.0, a * np.exp(dlap_logpmf(k, t)) - c * np.exp(dlap_logpmf(k - shift, t))))
            assert float(shifted_release_delta(a, c, t, shift)) == pytest.approx(brute, abs=1e-15)


# ---------------------------------------------------------------------------------------------
# propose_test_release / ptr_mean behaviour, accuracy, accounting
# ---------------------------------------------------------------------------------------------


def test_general_ptr_pass_fail_and_budget_spent_on_bottom():
    acct = Accountant(ApproxDP(10.0, 1e-3))
    rng = deterministic_source(3)
    r = propose_test_release(5.0, 0, 1.0, 1.0, 1e-6, accountant=acct, rng=rng)
    assert r.value is None and r.parts["passed"] is False and r.cost == ApproxDP(1.0, 1e-6)
    assert acct.spent == ApproxDP(1.0, 1e-6) and len(acct.receipts) == 1  # ⊥ is still charged
    r = propose_test_release(5.0, math.inf, 1.0, 1.0, 1e-6, accountant=acct, rng=rng)
    assert r.parts["passed"] is True and abs(r.value - 5.0) < 40
    assert r.params["epsilon_test"] + r.params["epsilon_release"] <= 1.0
    assert r.params["threshold"] == ptr_threshold(r.params["epsilon_test"], 1e-6)
    lo, hi = r.interval(0.95)
    assert lo < r.value < hi


def test_ptr_mean_release_law():
    x = np.full(4000, 40.0)
    rng = deterministic_source(4)
    eps, b = 1.0, 0.05
    reps = 400
    rels = [ptr_mean(x, 100.0, b, eps, 1e-6, rng=rng) for _ in range(reps)]
    assert all(r.parts["passed"] for r in rels)
    z = np.array([abs(r.value - 40.0) / r.scale for r in rels])
    assert stats.kstest(z, "expon").pvalue > 1e-7
    assert stats.kstest(z * 2, "expon").pvalue < 1e-7  # the release at the full epsilon would be caught
    assert rels[0].scale == pytest.approx(b / 0.5, rel=1e-5)


def test_ptr_mean_fails_on_small_data():
    rng = deterministic_source(5)
    outs = [ptr_mean([1.0, 2.0, 3.0], 100.0, 0.005, 1.0, 1e-6, rng=rng) for _ in range(50)]
    assert all(r.value is None for r in outs)


@pytest.mark.parametrize("call", [
    lambda **k: ptr_mean([40.0] * 3000, 100.0, 0.05, 0.8, 1e-6, **k),
    lambda **k: propose_test_release(1.0, 100, 0.5, 0.8, 1e-6, **k),
    lambda **k: ptr_iqr_scale(np.arange(500.0), 0.8, 1e-6, **k),
])
def test_charged_once_before_any_randomness(call):
    charged_before_draw(call, ApproxDP(1.0, 1.5e-6), ApproxDP(0.8, 1e-6))


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"values": [SECRET, float("nan")]}, InvalidData, "values"),
    ({"values": [SECRET, None]}, InvalidData, "values"),
    ({"values": [SECRET, float("inf")]}, InvalidData, "values"),
    ({"values": "abc"}, WrongType, "values"),
    ({"upper": 0.0}, InvalidParameter, "bounds"),
    ({"upper": float("nan")}, InvalidParameter, "upper"),
    ({"bound": 0.0}, InvalidParameter, "bound"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"delta": 0.0}, InvalidParameter, "delta"),
    ({"delta": 1.5}, InvalidParameter, "delta"),
    ({"test_share": 1.0}, InvalidParameter, "test_share"),
    ({"test_share": "half"}, WrongType, "test_share"),
    ({"_neighbours": PrivacyUnit("u", 3)}, InvalidParameter, "neighbours"),
])
def test_ptr_mean_bad_input(kwargs, err, param):
    base = {"values": [SECRET, 2.0], "upper": 1e6, "bound": 1.0, "epsilon": 1.0, "delta": 1e-6}
    base.update(kwargs)
    assert_refused(ptr_mean, base, err, param)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"f_value": float("nan")}, InvalidParameter, "f_value"),
    ({"f_value": None}, WrongType, "f_value"),
    ({"distance": -1}, InvalidParameter, "distance"),
    ({"distance": 1.5}, WrongType, "distance"),
    ({"distance": True}, WrongType, "distance"),
    ({"bound": -1.0}, InvalidParameter, "bound"),
    ({"epsilon": float("inf")}, InvalidParameter, "epsilon"),
    ({"delta": 0.0}, InvalidParameter, "delta"),
])
def test_general_ptr_bad_input(kwargs, err, param):
    base = {"f_value": SECRET, "distance": 3, "bound": 1.0, "epsilon": 1.0, "delta": 1e-6}
    base.update(kwargs)
    assert_refused(propose_test_release, base, err, param)


# ---------------------------------------------------------------------------------------------
# the IQR Scale algorithm (Li Alg 21 / Dwork & Lei)
# ---------------------------------------------------------------------------------------------


def _iqr(y):
    return P.iqr_value(np.array(sorted(y)))


def test_iqr_reach_bounds_contain_every_reachable_iqr():
    grid = (0.0, 1.0, 2.0, 5.0)
    cache: dict = {}

    def reach(z, replace):
        if (z, replace) not in cache:
            cache[(z, replace)] = P._iqr_reach(np.array(z), 3, replace)
        return cache[(z, replace)]

    for x in multisets(grid, 5):
        for replace in (False, True):
            smin, smax = reach(x, replace)
            step = (lambda z: replace_neighbours(z, grid)) if replace else (lambda z: add_remove_neighbours(z, grid))
            for d in range(3):
                vals = [_iqr(y) for y in ball(x, d, step)]
                assert smin[d] <= min(vals) and max(vals) <= smax[d]
            if len(x) <= 4:
                for y in step(x):  # Smax(x, d) <= Smax(x', d+1), Smin(x, d) >= Smin(x', d+1)
                    smin_y, smax_y = reach(y, replace)
                    assert (smax[:3] <= smax_y[1:4]).all() and (smin[:3] >= smin_y[1:4]).all()


def test_iqr_level_bounds_are_monotone_and_distance_is_at_most_n_plus_one():
    gen = np.random.default_rng(9)  # rng-ok: test data
    for _ in range(20):
        xs = np.sort(np.round(gen.normal(0, 3, int(gen.integers(0, 40))), 1))
        for replace in (False, True):
            lv = np.array([P._iqr_level(xs, d, replace) for d in range(60)])
            assert (lv[1:, 0] <= lv[:-1, 0]).all() and (lv[1:, 1] >= lv[:-1, 1]).all()
        for c in (1.0, P._SQRT2):
            assert P._scale_distance(xs, c, 10**6, False) <= xs.size + 1


def test_scale_distance_sensitivity_one_and_stability():
    grid = (0.0, 1.0, 1.5, 2.0, 4.0)
    cap = 12
    cache: dict = {}

    def dist(z, c):
        if (z, c) not in cache:
            cache[(z, c)] = P._scale_distance(np.array(z), c, cap, False)
        return cache[(z, c)]

    for x in multisets(grid, 6):
        for c in (1.0, P._SQRT2):
            d = dist(x, c)
            bx = P._bucket(_iqr(x), c)
            for y in add_remove_neighbours(x, grid):
                dy = dist(y, c)
                assert abs(d - dy) <= 1
                if d >= 1:
                    assert P._bucket(_iqr(y), c) == bx


@pytest.mark.parametrize(("eps", "delta", "share"), [(1.5, 0.05, 0.5), (3.0, 1e-3, 2 / 3)])
def test_scale_exact_delta_every_neighbour_pair(eps, delta, share):
    grid = (0.0, 1.0, 1.5, 2.0, 4.0)
    parts = split_budget(eps, (share / 2, share / 2, 1 - share), name="test_share")
    plan = P._plan(eps, delta, share, test_delta=delta / 2, parts=(min(parts[:2]), parts[2]))
    sens = 1.0 + 2.0**-30
    g, scale = laplace_scale(sens, plan.eps_release)
    tl = scale / g
    claimed = 2 * plan.eps_test + plan.eps_release
    assert claimed <= eps

    def inst(x):
        xs = np.array(sorted(x))
        s = P.iqr_value(xs)
        kind = ("zero", 0) if s == 0 else ("lap", int(np.rint(math.log2(s) / g)))
        return (P._scale_distance(xs, 1.0, plan.cap, False), P._scale_distance(xs, P._SQRT2, plan.cap, False), kind)

    cache: dict = {}

    def cached(z):
        if z not in cache:
            cache[z] = inst(z)
        return cache[z]

    done: dict = {}
    worst = 0.0
    for x in multisets(grid, 4):
        for y in add_remove_neighbours(x, grid):
            ix, iy = cached(x), cached(y)
            for a, b in ((ix, iy), (iy, ix)):
                if (a, b) not in done:
                    done[(a, b)] = scale_delta(plan, a, b, claimed, tl)
                worst = max(worst, done[(a, b)])
    assert worst <= delta


def test_scale_exact_epsilon_needs_both_tests():
    # clumps [0]*k + [1.2]*k put D_1, D_2 anywhere from 1 to ~17 steps: the epsilon part is exercised.
    # The charged 2 eps_test + eps_release holds exactly; eps_test + eps_release would not.
    eps, delta, share = 1.0, 1e-2, 0.8
    grid = (0.0, 0.5, 1.2, 3.0, 8.0)
    parts = split_budget(eps, (share / 2, share / 2, 1 - share), name="test_share")
    plan = P._plan(eps, delta, share, test_delta=delta / 2, parts=(min(parts[:2]), parts[2]))
    g, scale = laplace_scale(1.0 + 2.0**-30, plan.eps_release)
    tl = scale / g

    def inst(x):
        xs = np.array(sorted(x))
        kind = ("lap", int(np.rint(math.log2(P.iqr_value(xs)) / g)))
        return (P._scale_distance(xs, 1.0, plan.cap, False), P._scale_distance(xs, P._SQRT2, plan.cap, False), kind)

    worst_claimed = worst_single = 0.0
    for k in range(2, 26, 2):
        x = tuple([0.0] * k + [1.2] * k)
        ix = inst(x)
        for y in set(add_remove_neighbours(x, grid)):
            iy = inst(y)
            for a, b in ((ix, iy), (iy, ix)):
                worst_claimed = max(worst_claimed, scale_delta(plan, a, b, 2 * plan.eps_test + plan.eps_release, tl))
                worst_single = max(worst_single, scale_delta(plan, a, b, plan.eps_test + plan.eps_release, tl))
    assert worst_claimed <= delta < worst_single


def test_scale_accuracy_and_bottom():
    rng = deterministic_source(6)
    x = np.random.default_rng(1).normal(0, 10, 5000)  # rng-ok: test data; IQR ~ 13.5
    iqr = P.iqr_value(np.sort(x))
    rels = [ptr_iqr_scale(x, 3.0, 1e-6, rng=rng) for _ in range(300)]
    assert all(r.parts["passed"] for r in rels)
    for r in rels:
        lo, hi = r.interval(1 - 1e-9)
        assert lo <= iqr <= hi
    z = np.array([math.log2(r.value / iqr) / r.scale for r in rels])  # log2 scale: ~ Lap(1) up to O(g)
    assert stats.kstest(np.abs(z), "expon").pvalue > 1e-7
    assert stats.kstest(np.abs(z) * 2, "expon").pvalue < 1e-7
    small = [ptr_iqr_scale([1.0, 2.0, 3.0, 7.0], 1.0, 1e-6, rng=rng) for _ in range(20)]
    assert all(r.value is None and r.parts["passed"] is False for r in small)


def test_li_printed_scale_threshold_is_wrong():
    # R0 = A0 + Lap(1/ε) compared with 1 + ln(1/ε): at ε = 1 the threshold is 1, whatever δ;
    # an unstable data set (A0 = 1) passes with probability P[Lap(1) > 0] = 1/2
    eps = 1.0
    printed = 1 + math.log(1 / eps)
    assert 0.5 * math.exp(-eps * (printed - 1)) == 0.5
    fixed = 1 + math.log(1 / 1e-6) / eps  # Dwork–Lei: P[Lap(1/ε) > ln(1/δ)/ε] = δ/2
    assert 0.5 * math.exp(-eps * (fixed - 1)) == pytest.approx(0.5e-6)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"values": [SECRET, float("nan")]}, InvalidData, "values"),
    ({"values": [SECRET, float("inf")]}, InvalidData, "values"),
    ({"values": None}, WrongType, "values"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"delta": 0.0}, InvalidParameter, "delta"),
    ({"test_share": 0.0}, InvalidParameter, "test_share"),
    ({"_neighbours": PrivacyUnit("u", 3)}, InvalidParameter, "neighbours"),
])
def test_scale_bad_input(kwargs, err, param):
    base = {"values": [SECRET, 2.0, 3.0], "epsilon": 1.0, "delta": 1e-6}
    base.update(kwargs)
    assert_refused(ptr_iqr_scale, base, err, param)


def test_replace_relation_runs():
    rng = deterministic_source(8)
    r = ptr_iqr_scale(np.arange(3000.0), 3.0, 1e-6, neighbours=Replace(), rng=rng)
    assert r.parts["passed"]
    acct = Accountant(ApproxDP(5.0, 1e-3), neighbours=Replace())
    r = ptr_mean([40.0] * 100, 100.0, 1.5, 1.0, 1e-6, accountant=acct, rng=CountingSource(1))
    assert r.parts["passed"]  # under replace LS = w/n = 1 <= b: D = inf
