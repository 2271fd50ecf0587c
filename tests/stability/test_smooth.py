"""Smooth sensitivity: the smooth bound (brute force), the exact (epsilon, delta) of the lattice release for
every add/remove neighbour of small data sets, Near & Abuah's numbers, accuracy, accounting, bad input."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from scipy import stats

from dpkit import ApproxDP, PrivacyUnit, PureDP, Replace
from dpkit.core.errors import IncompatibleLoss, InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.stability import (
    book_smooth_sensitivity_mean,
    ls_at_distance_median,
    smooth_beta,
    smooth_mean,
    smooth_median,
    smooth_sensitivity_mean,
    smooth_sensitivity_median,
)
from dpkit.stability import smooth as S
from dpkit.stability.local import mean_bound

from .helpers import (
    SECRET,
    add_remove_neighbours,
    assert_refused,
    charged_before_draw,
    delta_two_dlap,
    multisets,
    replace_neighbours,
)

# ---------------------------------------------------------------------------------------------
# the smooth bound
# ---------------------------------------------------------------------------------------------


def _brute_replace_max(xs, lo, hi, beta, c):
    n = xs.size
    m = (n + 1) // 2
    pad = np.concatenate(([lo], xs, [hi]))
    best = -math.inf
    for i in range(0, m + 1):
        for j in range(max(m, i + 1), n + 2):
            best = max(best, math.exp(-beta * (j - i - 1)) * (pad[j] - pad[i] + c))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_median_smooth_max_equals_direct_max_over_all_k(seed):
    gen = np.random.default_rng(seed)  # rng-ok: test data
    n = int(gen.integers(0, 60))
    xs = np.sort(np.round(gen.uniform(0, 10, n), 1 if seed % 2 else 0))  # ties when rounded
    for beta in (0.01, 0.1, 0.7):
        for c in (0.0, 0.05):
            direct = max(math.exp(-beta * k) * (ls_at_distance_median(xs, (0.0, 10.0), k) + c)
                         for k in range(0, n + 3))
            assert S._median_smooth_max(xs, 0.0, 10.0, beta, c, False) == pytest.approx(direct, rel=1e-13)
            direct_r = max(math.exp(-beta * k) * (ls_at_distance_median(xs, (0.0, 10.0), k, neighbours=Replace())
                                                  + c) for k in range(0, n + 3)) if n else c
            brute_r = _brute_replace_max(xs, 0.0, 10.0, beta, c) if n else c
            assert brute_r == pytest.approx(direct_r, rel=1e-13)
            if n:
                assert S._median_smooth_max(xs, 0.0, 10.0, beta, c, True) == pytest.approx(brute_r, rel=1e-13)


def test_mean_smooth_max_closed_form_and_pruning():
    for n in (0, 1, 2, 3, 10, 57, 400):
        for beta in (0.001, 0.05, 0.9):
            k = np.arange(0, n + 3, dtype=np.float64)
            for c in (0.0, 0.3):
                full = float(np.max(np.exp(-beta * k) * (mean_bound(n, 7.0, k, False) + c)))
                assert S._mean_smooth_max(n, 7.0, beta, c, False) == pytest.approx(full, rel=1e-13)


@pytest.mark.parametrize("replace", [False, True])
def test_smooth_bounds_are_beta_smooth_upper_bounds(replace):
    grid = (0.0, 1.0, 3.0, 8.0)
    beta = 0.3
    step = (lambda x: replace_neighbours(x, grid)) if replace else (lambda x: add_remove_neighbours(x, grid))
    nb = Replace() if replace else None
    for x in multisets(grid, 3 if replace else 4):
        if replace and not x:
            continue
        sx = smooth_sensitivity_median(list(x), (0.0, 8.0), beta, neighbours=nb)
        mx = smooth_sensitivity_mean(list(x), (0.0, 8.0), beta, neighbours=nb)
        fx_med = S._util.median_value(np.array(x), 0.0, 8.0)
        fx_mean = S._util.mean_value(np.array(x), 0.0, 8.0)
        for y in step(x):
            sy = smooth_sensitivity_median(list(y), (0.0, 8.0), beta, neighbours=nb)
            my = smooth_sensitivity_mean(list(y), (0.0, 8.0), beta, neighbours=nb)
            assert sx <= math.exp(beta) * sy * (1 + 1e-12) and mx <= math.exp(beta) * my * (1 + 1e-12)
            assert abs(fx_med - S._util.median_value(np.array(y), 0.0, 8.0)) <= sx
            assert abs(fx_mean - S._util.mean_value(np.array(y), 0.0, 8.0)) <= mx * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------
# exact privacy of the lattice release, every add/remove neighbour of small data sets
# ---------------------------------------------------------------------------------------------

GRID = (0.0, 2.0, 3.0, 8.0)
BOUNDS = (0.0, 8.0)
G = 0.25


def _law(kind, x, eps, delta, nb=None, granularity=G):
    setup = S._Setup("t", list(x), BOUNDS, eps, delta, granularity, nb, None, "raise",
                     a_max_of_w=1.0 if kind == "median" else 0.5, a_max_replace=1.0)
    return S._median_law(setup) if kind == "median" else S._mean_law(setup)


def _worst_delta(law_of, eps, step, data):
    worst = 0.0
    for x in data:
        r, t = law_of(x)
        for y in step(x):
            r2, t2 = law_of(y)
            worst = max(worst, delta_two_dlap(r, t, r2, t2, eps), delta_two_dlap(r2, t2, r, t, eps))
    return worst


@pytest.mark.parametrize(("kind", "eps", "delta"), [("median", 1.0, 1e-2), ("median", 0.5, 1e-6),
                                                    ("mean", 1.0, 1e-2), ("mean", 2.0, 1e-3)])
def test_exact_delta_of_every_neighbour_pair_is_at_most_delta(kind, eps, delta):
    data = multisets(GRID, 4)
    worst = _worst_delta(lambda x: _law(kind, x, eps, delta), eps, lambda x: add_remove_neighbours(x, GRID), data)
    assert worst <= delta


def test_exact_delta_under_replace():
    data = [x for x in multisets(GRID, 3) if x]
    worst = _worst_delta(lambda x: _law("median", x, 1.0, 1e-2, Replace()), 1.0,
                         lambda x: replace_neighbours(x, GRID), data)
    assert worst <= 1e-2


def test_exact_calculator_catches_unsmoothed_and_oversmoothed_variants():
    eps, delta = 1.0, 1e-2

    def local_law(x):  # noise scaled to LS (+2g): NOT private
        xs = np.array(sorted(x))
        ls = float(ls_at_distance_median(xs, BOUNDS, 0))
        f = S._util.median_value(xs, *BOUNDS)
        return round(f / G), 2 * (ls + 2 * G) / (eps * G)

    def big_beta_law(x):  # beta = epsilon (no ln(2/delta) factor): NOT (eps, delta)-DP
        xs = np.array(sorted(x))
        sp = S._median_smooth_max(xs, *BOUNDS, eps, 2 * G, False)
        f = S._util.median_value(xs, *BOUNDS)
        return round(f / G), 2 * sp / (eps * G)

    data = multisets(GRID, 4)
    step = lambda x: add_remove_neighbours(x, GRID)
    assert _worst_delta(local_law, eps, step, data) > 10 * delta
    assert _worst_delta(big_beta_law, eps, step, data) > delta


# ---------------------------------------------------------------------------------------------
# Near & Abuah's numbers (Adult ages, u = 100, epsilon = 1, delta = 1/n²)
# ---------------------------------------------------------------------------------------------


def test_near_smooth_sensitivity_numbers():
    from dpkit.datasets import adult

    ages = np.asarray(adult(as_frame=False)["age"], dtype=np.float64)
    n = ages.size
    assert n == 32561
    delta = 1.0 / n**2
    near = 2 * book_smooth_sensitivity_mean(n, 100.0, 1.0, delta)
    assert near == pytest.approx(0.006142128861863522, rel=1e-15)  # = 200/32562 (k = 0)
    ours = 2 * smooth_sensitivity_mean(ages, (0.0, 100.0), smooth_beta(1.0, delta))
    assert ours == pytest.approx(200.0 / 32561, rel=1e-15)  # removals: w/n, maximum at k = 0
    nrs = 2 * smooth_sensitivity_mean(ages, (0.0, 100.0), 1.0 / (2 * math.log(2 / delta)))
    assert nrs == ours
    assert ours > 0.005 and near > 0.005  # larger than the PTR bound b = 0.005 Near proposes


def test_beta_is_a_hair_below_nrs():
    for eps, delta in ((1.0, 1e-6), (0.1, 1e-9), (3.0, 0.2)):
        L = max(1.0, math.log(2 / delta))
        b = smooth_beta(eps, delta)
        assert 0 < b < eps / (2 * L) and math.expm1(b) <= eps / (2 * L)


# ---------------------------------------------------------------------------------------------
# accuracy and the release law
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["median", "mean"])
def test_release_law_is_discrete_laplace_of_the_smooth_scale(kind):
    x = np.linspace(0.0, 10.0, 1001)
    eps, delta = 1.0, 1e-6
    fn = smooth_median if kind == "median" else smooth_mean
    setup = S._Setup("t", x, (0.0, 10.0), eps, delta, None, None, None, "raise",
                     a_max_of_w=1.0 if kind == "median" else 0.5)
    r, t = S._median_law(setup) if kind == "median" else S._mean_law(setup)
    g = setup.g
    rng = deterministic_source(7)
    reps = 800
    vals = np.array([fn(x, (0.0, 10.0), eps, delta, rng=rng).value for _ in range(reps)])
    z = np.abs(vals / g - r) / t  # ~ Exp(1) up to O(1/t) (t ~ 1e6 here)
    assert stats.kstest(z, "expon").pvalue > 1e-7
    assert stats.kstest(z / 2, "expon").pvalue < 1e-7  # a 2x scale error (no factor 2 in 2S) is caught
    assert stats.kstest(z * 1.5, "expon").pvalue < 1e-7
    rel = fn(x, (0.0, 10.0), eps, delta, rng=rng)
    assert rel.scale is None and rel.noise is None  # the scale is private
    assert set(rel.params) == {"epsilon", "delta", "bounds", "beta", "granularity", "neighbours"}
    f = 5.0
    lo, hi = rel.interval(0.9)
    assert lo < f < hi or abs(rel.value - f) > 0  # interval is computed from public quantities
    covered = sum(1 for v in vals if abs(v - f) <= (hi - lo) / 2)
    assert covered >= 0.9 * reps - 6 * math.sqrt(0.09 * reps)


def test_smooth_median_loses_to_the_em_median():
    if importlib.util.find_spec("dpkit.stats.order_statistics") is None:
        pytest.skip("dpkit.stats.quantiles (EM median) not available")
    from dpkit.stats.order_statistics import median

    x = np.random.default_rng(3).normal(0.0, 1.0, 1001)  # rng-ok: test data
    true = float(np.sort(x)[500])
    rng = deterministic_source(8)
    reps = 150
    sm = np.mean([abs(smooth_median(x, (-10.0, 10.0), 1.0, 1e-6, rng=rng).value - true) for _ in range(reps)])
    em = np.mean([abs(median(x, (-10.0, 10.0), 1.0, rng=rng).value - true) for _ in range(reps)])
    assert em < sm  # Li et al. §8.1; the EM median is also pure DP


# ---------------------------------------------------------------------------------------------
# accounting and bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [smooth_median, smooth_mean])
def test_charged_once_before_any_randomness(fn):
    rel = charged_before_draw(lambda **k: fn([1.0, 2.0, 3.0], (0.0, 5.0), 0.7, 1e-6, **k), ApproxDP(1.0, 1.5e-6),
                              ApproxDP(0.7, 1e-6))
    assert rel.mechanism == fn.__name__


@pytest.mark.parametrize("fn", [smooth_median, smooth_mean])
@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"values": [1.0, float("nan")]}, InvalidData, "values"),
    ({"values": [SECRET, None]}, InvalidData, "values"),
    ({"values": [SECRET, float("inf")]}, InvalidData, "values"),
    ({"values": "abc"}, WrongType, "values"),
    ({"values": None}, WrongType, "values"),
    ({"bounds": (1.0, 1.0)}, InvalidParameter, "bounds"),
    ({"bounds": (2.0, 1.0)}, InvalidParameter, "bounds"),
    ({"bounds": 3.0}, WrongType, "bounds"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"epsilon": 1e-9}, InvalidParameter, "epsilon"),
    ({"delta": 0.0}, InvalidParameter, "delta"),
    ({"delta": 1.0}, InvalidParameter, "delta"),
    ({"granularity": 0.3}, InvalidParameter, "granularity"),
    ({"granularity": 2.0**-60}, InvalidParameter, "granularity"),
    ({"_neighbours": PrivacyUnit("user", 2)}, InvalidParameter, "neighbours"),
    ({"description": 3}, WrongType, "description"),
])
def test_bad_input_refused_before_anything(fn, kwargs, err, param):
    base = {"values": [SECRET, 2.0, 3.0], "bounds": (0.0, 1e6), "epsilon": 1.0, "delta": 1e-6}
    base.update(kwargs)
    assert_refused(fn, base, err, param)


def test_pure_budget_refuses_the_approx_charge():
    from dpkit import Accountant

    from .helpers import CountingSource

    acct, src = Accountant(PureDP(5.0)), CountingSource(1)
    with pytest.raises(IncompatibleLoss):
        smooth_median([1.0, 2.0], (0.0, 3.0), 1.0, 1e-6, accountant=acct, rng=src)
    assert src.consumed == 0 and acct.receipts == ()


def test_empty_data_and_replace():
    rng = deterministic_source(9)
    r = smooth_median([], (0.0, 1.0), 1.0, 1e-3, rng=rng)
    assert isinstance(r.value, float)
    r = smooth_mean([0.5] * 50, (0.0, 1.0), 1.0, 1e-3, neighbours=Replace(), rng=rng)
    assert abs(r.value - 0.5) < 0.5
