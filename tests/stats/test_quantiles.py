"""Quantiles, order statistics and the IQR (dpkit.stats.quantiles): exact privacy from the exact output
laws, tight sensitivities, the output law of the public functions, accuracy, bad input and accounting."""

from __future__ import annotations

import importlib
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit.testing import CountingSource, chi2_pvalue, watch_charges
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.noise import deterministic_source
from dpkit.stats.order_statistics import iqr, kth, median, quantile, quantiles, rank_error_bound
from dpkit.stats.order_statistics import max as dp_max
from dpkit.stats.order_statistics import min as dp_min

# the module itself (dpkit.stats may export a function of the same name)
Q = importlib.import_module("dpkit.stats.order_statistics")

P_MIN = 1e-7
TOL = 1e-9


# ---------------------------------------------------------------------------------------------
# exact laws (the same code path as the mechanism: _Space, _record_sensitivity, the score functions)
# ---------------------------------------------------------------------------------------------
def _space(bins=4, candidates=None, bounds=(0.0, 4.0)):
    return Q._Space(bounds[0], bounds[1], None if candidates is not None else bins, candidates)


def _cached(fn):
    memo = {}

    def wrapper(values, *args, candidates=None, **kw):
        cands = None if candidates is None else tuple(candidates)
        key = (tuple(sorted(values)), args, cands, tuple(sorted(kw.items())))
        if key not in memo:
            memo[key] = fn(values, *args, candidates=candidates, **kw)
        return memo[key]

    return wrapper


@_cached
def quantile_law(values, q, eps, nb=None, *, bins=4, candidates=None, bounds=(0.0, 4.0), scale=1):
    """log P[output i] of quantile(); ``scale`` multiplies the sensitivity (broken variants)."""
    sp = _space(bins, candidates, bounds)
    keys = sp.keys(np.asarray(values, dtype=float))
    delta = Q._record_sensitivity(q, nb or AddRemove()) * Fraction(scale)
    scores, declared = Q._quantile_scores(keys, sp.ckeys, q, delta)
    return SelectionLaw(scores, declared, eps, 2).log_probs()


@_cached
def kth_law(values, k, eps, nb=None, *, largest=False, bins=4, candidates=None, bounds=(0.0, 4.0), scale=1):
    sp = _space(bins, candidates, bounds)
    keys = sp.keys(np.asarray(values, dtype=float))
    delta = Q._record_sensitivity(None, nb or AddRemove()) * Fraction(scale)
    scores, declared = Q._rank_scores(keys, sp.ckeys, k, delta, largest)
    return SelectionLaw(scores, declared, eps, 2).log_probs()


class _Impossible(Exception):
    pass


_LAW_CACHE: dict = {}


def _node_log_probs(scores, declared, e):
    key = (scores.tobytes(), declared, e)
    if key not in _LAW_CACHE:
        _LAW_CACHE[key] = SelectionLaw(scores, declared, e, 2).log_probs()
    return _LAW_CACHE[key]


def joint_law(values, qs, eps, nb=None, *, method="recursive", bins=3, candidates=None, bounds=(0.0, 3.0),
              eps_node=None):
    """{tuple of chosen outputs (per distinct q, sorted): log-probability} of quantiles(), by enumerating
    every sequence of EM choices through the mechanism's own recursion (a chooser that follows the
    sequence and adds the exact log-probability of each choice)."""
    sp = _space(bins, candidates, bounds)
    keys = sp.keys(np.asarray(values, dtype=float))
    uniq = sorted(set(qs))
    plan = Q._Plan(eps, nb or AddRemove(), len(uniq), method)
    if eps_node is not None:
        plan.eps_node = eps_node
    out = {}
    for seq in itertools.product(range(sp.size), repeat=len(uniq)):
        it = iter(seq)
        acc = [0.0]

        def choose(scores, declared, e, it=it, acc=acc):
            j = next(it)
            if j >= scores.size:
                raise _Impossible
            acc[0] += _node_log_probs(scores, declared, e)[j]
            return j

        try:
            idx = plan.indices(keys, sp.ckeys, uniq, choose)
        except _Impossible:
            continue
        key = tuple(int(i) for i in idx)
        assert key not in out
        out[key] = acc[0]
    total = math.fsum(math.exp(v) for v in out.values())
    assert abs(total - 1.0) < 1e-9
    return out


def max_loss(la, lb):
    if isinstance(la, dict):
        assert la.keys() == lb.keys()
        return max(abs(la[k] - lb[k]) for k in la)
    return float(np.max(np.abs(np.asarray(la) - np.asarray(lb))))


def multisets(grid, max_size):
    for n in range(max_size + 1):
        yield from itertools.combinations_with_replacement(grid, n)


# ---------------------------------------------------------------------------------------------
# the quality itself, computed independently (pure Python, Fractions, straight from the definition)
# ---------------------------------------------------------------------------------------------
def brute_quality(values, q=None, k=None, *, bins=4, bounds=(0.0, 4.0), largest=False):
    lo, hi = bounds
    xs = [min(max(float(v), lo), hi) for v in values]
    n = len(xs)
    t = Fraction(q) * n if q is not None else Fraction(2 * k - 1, 2)
    edges = list(np.linspace(lo, hi, bins + 1))
    out = []
    for i in range(bins):
        a = sum(1 for x in xs if x < edges[i])
        b = n if i == bins - 1 else sum(1 for x in xs if x < edges[i + 1])
        if largest:
            a, b = n - b, n - a
        # -min over ranks j in [a, b] (reals) of |j - t|
        out.append(-max(a - t, t - b, Fraction(0)))
    return out


GRID = (-1.0, 0.5, 1.5, 1.5, 2.5, 3.5, 4.0, 7.0)  # outside the bounds, inside, on an edge


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.75, 1.0])
def test_scores_equal_the_definition_and_law_is_the_exponential_mechanism(q):
    eps = 0.7
    for values in [(), (0.5,), (1.5, 1.5, -3.0), (0.5, 2.5, 3.5, 4.0, 9.0), (0.1, 0.2, 3.9)]:
        qual = np.array([float(v) for v in brute_quality(values, q)])
        delta = max(q, 1 - q)
        ideal = eps * qual / (2 * delta)
        ideal -= np.logaddexp.reduce(ideal)
        got = quantile_law(values, q, eps)
        assert np.allclose(got, ideal, atol=1e-5)  # only the 2^-20 lattices differ


def test_empty_data_gives_the_uniform_law():
    assert np.allclose(np.exp(quantile_law((), 0.3, 1.0, bins=5)), 0.2)
    assert np.allclose(np.exp(kth_law((), 2, 1.0, bins=5)), 0.2)


# ---------------------------------------------------------------------------------------------
# exact privacy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
def test_quantile_exact_privacy_add_remove(q):
    eps = 1.0
    grid = (0.5, 1.5, 2.5, 3.5, 5.0)
    worst = 0.0
    for d in multisets(grid, 3):
        la = quantile_law(d, q, eps)
        for x in grid:
            worst = max(worst, max_loss(la, quantile_law((*d, x), q, eps)))
    assert worst <= eps + TOL


@pytest.mark.parametrize("q", [0.25, 0.5, 0.8])
def test_quantile_exact_privacy_candidates_replace_and_unit(q):
    eps = 0.8
    cands = [0.0, 1.0, 2.0, 4.0]
    grid = (0.0, 1.0, 1.5, 2.0, 4.0)
    worst_ar = worst_rep = worst_unit = 0.0
    unit = PrivacyUnit("id", max_rows=2)
    for d in multisets(grid, 3):
        la = quantile_law(d, q, eps, candidates=cands)
        for x in grid:
            worst_ar = max(worst_ar, max_loss(la, quantile_law((*d, x), q, eps, candidates=cands)))
        lr = quantile_law(d, q, eps, Replace(), candidates=cands)
        lu = quantile_law(d, q, eps, unit, candidates=cands)
        for i, x in itertools.product(range(len(d)), grid):
            swapped = (*d[:i], x, *d[i + 1:])
            worst_rep = max(worst_rep, max_loss(lr, quantile_law(swapped, q, eps, Replace(), candidates=cands)))
        for pair in itertools.combinations_with_replacement(grid, 2):
            worst_unit = max(worst_unit, max_loss(lu, quantile_law((*d, *pair), q, eps, unit, candidates=cands)))
    assert worst_ar <= eps + TOL
    assert worst_rep <= eps + TOL
    assert worst_unit <= eps + TOL


def _tight_pairs(q):
    """Data in bucket 1 (of 64 buckets over [0, 64]), plus one record: the pairs where the rising and the
    falling qualities both move by the full Δ."""
    for b in range(12):
        for x in (0.5, 1.5, 63.5):
            yield (1.5,) * b, x


@pytest.mark.parametrize("q", [0.1, 0.25, 0.5, 0.9])
def test_quantile_sensitivity_is_attained_and_a_smaller_one_breaks_privacy(q):
    # (1) the quality moves by exactly max(q, 1 - q) on some neighbouring pair (exact, from the definition)
    delta = max(Fraction(q), 1 - Fraction(q))
    moved = max(max(abs(u - v) for u, v in zip(brute_quality(d, q), brute_quality((*d, x), q), strict=True))
                for d in multisets(GRID, 3) for x in GRID)
    assert moved == delta
    # (2) the privacy loss of the implemented law nearly reaches epsilon, and declaring 0.9 Δ exceeds it
    eps, kw = 0.05, {"bins": 64, "bounds": (0.0, 64.0)}
    right = max(max_loss(quantile_law(d, q, eps, **kw), quantile_law((*d, x), q, eps, **kw))
                for d, x in _tight_pairs(q))
    wrong = max(max_loss(quantile_law(d, q, eps, scale=0.9, **kw), quantile_law((*d, x), q, eps, scale=0.9, **kw))
                for d, x in _tight_pairs(q))
    assert 0.95 * eps < right <= eps + TOL
    assert wrong > 1.05 * eps


def test_replace_needs_sensitivity_one():
    """Under replace-one the quality moves by 1 (not max(q, 1-q)): the add/remove Δ would not be private."""
    q, eps = 0.5, 1.0
    moved = max(max(abs(u - v) for u, v in zip(brute_quality(d, q), brute_quality((*d[:-1], x), q), strict=True))
                for d in multisets(GRID, 3) if d for x in GRID)
    assert moved == 1
    kw = {"bins": 64, "bounds": (0.0, 64.0)}
    eps = 0.05
    right = wrong = 0.0
    for d in [(1.5,) * a + (40.5,) * c for a in range(6) for c in range(1, 6)]:
        swapped = (*d[:-1], 0.5)  # one record moves from above the median to below it
        right = max(right, max_loss(quantile_law(d, q, eps, Replace(), **kw),
                                    quantile_law(swapped, q, eps, Replace(), **kw)))
        wrong = max(wrong, max_loss(quantile_law(d, q, eps, Replace(), scale=0.5, **kw),
                                    quantile_law(swapped, q, eps, Replace(), scale=0.5, **kw)))
    assert right <= eps + TOL
    assert wrong > 1.5 * eps  # the add/remove sensitivity 1/2 is not enough under replace-one


@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_kth_exact_privacy_and_tight_sensitivity(k, largest):
    eps = 1.0
    grid = (0.5, 1.5, 2.5, 3.5)
    worst = 0.0
    for d in multisets(grid, 3):
        la = kth_law(d, k, eps, largest=largest)
        for x in grid:
            worst = max(worst, max_loss(la, kth_law((*d, x), k, eps, largest=largest)))
    assert worst <= eps + TOL
    moved = max(max(abs(u - v) for u, v in zip(brute_quality(d, k=k, largest=largest),
                                                  brute_quality((*d, x), k=k, largest=largest), strict=True))
                for d in multisets(grid, 3) for x in grid)
    assert moved == 1


def test_kth_smaller_sensitivity_breaks_privacy():
    eps, kw = 0.05, {"bins": 64, "bounds": (0.0, 64.0)}
    pairs = [((1.5,) * b, x) for b in range(8) for x in (0.5, 1.5, 63.5)]
    right = max(max_loss(kth_law(d, 2, eps, **kw), kth_law((*d, x), 2, eps, **kw)) for d, x in pairs)
    wrong = max(max_loss(kth_law(d, 2, eps, scale=0.9, **kw), kth_law((*d, x), 2, eps, scale=0.9, **kw))
                for d, x in pairs)
    assert 0.95 * eps < right <= eps + TOL
    assert wrong > 1.05 * eps


# ---------------------------------------------------------------------------------------------
# several quantiles: exact joint laws
# ---------------------------------------------------------------------------------------------
JOINT_GRID = (0.5, 1.5, 1.5, 2.5, 3.0)  # ties, and a record on the top edge


@pytest.mark.parametrize(("qs", "method"), [((0.25, 0.5, 0.75), "recursive"), ((0.2, 0.9), "recursive"),
                                            ((0.1, 0.4, 0.6), "independent")])
def test_quantiles_exact_joint_privacy_add_remove(qs, method):
    eps = 1.0
    grid = tuple(sorted(set(JOINT_GRID)))
    laws = {d: joint_law(d, qs, eps, method=method) for d in multisets(grid, 4)}
    worst = 0.0
    for d, la in laws.items():
        if len(d) < 4:
            for x in grid:
                worst = max(worst, max_loss(la, laws[tuple(sorted((*d, x)))]))
    assert worst <= eps + TOL
    if qs == (0.25, 0.5, 0.75):
        # power: every EM at the full epsilon (no split over the L = 2 levels) is caught
        bad = {d: joint_law(d, qs, eps, method=method, eps_node=eps) for d in multisets(grid, 3)}
        worst_bad = max(max_loss(la, bad[tuple(sorted((*d, x)))]) for d, la in bad.items() if len(d) < 3
                        for x in grid)
        assert worst_bad > 1.1 * eps


def test_quantiles_exact_joint_privacy_replace_and_unit():
    eps, qs = 1.0, (0.25, 0.5, 0.75)
    grid = tuple(sorted(set(JOINT_GRID)))
    unit = PrivacyUnit("id", max_rows=2)
    worst_rep = worst_unit = 0.0
    for method in ("recursive", "independent"):
        rep = {d: joint_law(d, qs, eps, Replace(), method=method) for d in multisets(grid, 3)}
        for d, la in rep.items():
            for i, x in itertools.product(range(len(d)), grid):
                worst_rep = max(worst_rep, max_loss(la, rep[tuple(sorted((*d[:i], x, *d[i + 1:])))]))
        uni = {d: joint_law(d, qs, eps, unit, method=method) for d in multisets(grid, 3)}
        for d, la in uni.items():
            if len(d) <= 1:
                for pair in itertools.combinations_with_replacement(grid, 2):
                    worst_unit = max(worst_unit, max_loss(la, uni[tuple(sorted((*d, *pair)))]))
    assert worst_rep <= eps + TOL
    assert worst_unit <= eps + TOL


def test_recursive_levels_and_node_epsilon():
    assert [Q._levels(k) for k in (1, 2, 3, 4, 7, 8, 15, 16)] == [1, 2, 2, 3, 3, 4, 4, 5]
    plan = Q._Plan(1.0, AddRemove(), 7, "auto")
    assert plan.method == "recursive" and plan.levels == 3 and 3 * plan.eps_node <= 1.0
    assert Q._Plan(1.0, AddRemove(), 2, "auto").method == "independent"
    rep = Q._Plan(1.0, Replace(), 3, "recursive")
    assert 2 * 2 * rep.eps_node <= 1.0
    unit = Q._Plan(1.0, PrivacyUnit("id", max_rows=3), 3, "recursive")
    assert unit.eps_node < 0.5 and unit.eps_node * (1 + 6 * 2**-20) <= 0.5


def test_public_quantiles_follow_the_analysed_recursion():
    """The public function makes exactly the choices of the analysed recursion (same random stream)."""
    x = np.random.default_rng(3).normal(50, 15, 500)
    qs = [0.9, 0.1, 0.5, 0.3, 0.7, 0.5]
    for method in ("recursive", "independent"):
        rel = quantiles(x, qs, (0, 100), 1.0, bins=64, method=method, rng=deterministic_source(11))
        sp = _space(64, None, (0.0, 100.0))
        plan = Q._Plan(1.0, AddRemove(), 5, method)
        idx = plan.indices(sp.keys(x), sp.ckeys, sorted(set(qs)), Q._em(deterministic_source(11)))
        uniq = sorted(set(qs))
        expect = np.sort(idx)[[uniq.index(q) for q in qs]]
        assert rel.parts["index"].tolist() == expect.tolist()
        assert rel.params["method"] == method


def test_public_quantiles_joint_distribution():
    qs, eps, d = (0.25, 0.5, 0.75), 1.0, (0.5, 0.5, 1.5, 1.5, 1.5, 1.5, 2.5, 2.5)
    law = joint_law(d, qs, eps)
    keys = sorted(law)
    n = 400  # non-centrality vs the 2 epsilon law: 0.49 per draw, ~195 in all (critical value ~52)
    rng = deterministic_source(5)
    counts = dict.fromkeys(keys, 0)
    for _ in range(n):
        rel = quantiles(d, qs, (0.0, 3.0), eps, bins=3, method="recursive", rng=rng)
        counts[tuple(rel.parts["index"].tolist())] += 1
    obs = [counts[k] for k in keys]
    assert chi2_pvalue(obs, [math.exp(law[k]) for k in keys]) > P_MIN
    wrong = joint_law(d, qs, 2 * eps)
    assert chi2_pvalue(obs, [math.exp(wrong[k]) for k in keys]) < P_MIN


# ---------------------------------------------------------------------------------------------
# distribution of the public quantile()
# ---------------------------------------------------------------------------------------------
def test_quantile_distribution_matches_exact_law():
    d = (0.5, 1.5, 1.5, 1.5, 2.5, 3.5, 3.5, 9.0)
    q, eps, n = 0.4, 1.0, 500  # non-centrality vs the 2 epsilon law: 0.49 per draw, ~245 in all
    rng = deterministic_source(7)
    idx = np.zeros(4, dtype=int)
    for _ in range(n):
        rel = quantile(d, q, (0.0, 4.0), eps, bins=4, rng=rng)
        i = int(rel.parts["index"])
        lo, hi = rel.parts["buckets"]
        assert lo == i and hi == i + 1 and lo <= rel.value <= hi
        idx[i] += 1
    assert chi2_pvalue(idx, np.exp(quantile_law(d, q, eps))) > P_MIN
    assert chi2_pvalue(idx, np.exp(quantile_law(d, q, 2 * eps))) < P_MIN


def test_value_is_uniform_inside_the_bucket():
    rng = deterministic_source(8)
    vals = np.array([quantile([5.0] * 50, 0.5, (0.0, 10.0), 20.0, bins=1, rng=rng).value for _ in range(400)])
    assert stats.kstest(vals, stats.uniform(0, 10).cdf).pvalue > P_MIN
    # candidates: the release is a candidate
    r = quantile([1, 2, 3], 0.5, (0, 10), 1.0, candidates=[0, 2, 5, 10], rng=rng)
    assert r.value in (0.0, 2.0, 5.0, 10.0) and "buckets" not in r.parts


def test_clamping_and_nan_omit():
    assert np.array_equal(quantile_law((-5.0, 0.5, 100.0), 0.5, 1.0), quantile_law((0.0, 0.5, 4.0), 0.5, 1.0))
    r = quantile([1.0, math.nan, 2.0], 0.5, (0, 4), 1.0, nan_policy="omit", rng=deterministic_source(1))
    assert 0.0 <= r.value <= 4.0


# ---------------------------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------------------------
def _bracket_ok(xs_sorted, y, w, t, r):
    """The documented guarantee: n_{< y - w} <= t + R and n_{<= y + w} >= t - R."""
    below = np.searchsorted(xs_sorted, y - w, side="left")
    at_or_below = np.searchsorted(xs_sorted, y + w, side="right")
    return below <= t + r and at_or_below >= t - r


@pytest.mark.slow
def test_median_accuracy_within_the_stated_bound():
    x = np.sort(np.random.default_rng(0).normal(50.0, 10.0, 10_000))
    runs = 60
    conf = 1 - 1e-9  # failure probability per run 1e-9
    r = rank_error_bound(1024, 1.0, q=0.5, confidence=conf)
    assert 27.6 < r < 27.8  # (2 * 0.5 / 1) ln(1024 / 1e-9)
    rng = deterministic_source(21)
    errs = []
    for _ in range(runs):
        rel = median(x, (0.0, 100.0), 1.0, rng=rng)
        assert _bracket_ok(x, rel.value, 100.0 / 1024, 0.5 * x.size, r)
        errs.append(abs(rel.value - np.median(x)))
    assert np.mean(errs) < 0.3  # a few bucket widths (0.098) on a sd-10 sample


def test_rank_error_bound_values():
    assert rank_error_bound(1024, 1.0) == pytest.approx(math.log(1024 / 0.05), rel=1e-5)
    assert rank_error_bound(1024, 1.0, q=0.9) == pytest.approx(1.8 * math.log(1024 / 0.05), rel=1e-5)
    assert rank_error_bound(1024, 1.0, q=None) == pytest.approx(2 * math.log(1024 / 0.05), rel=1e-5)
    assert rank_error_bound(10, 0.5, neighbours=Replace()) == pytest.approx(4 * math.log(10 / 0.05), rel=1e-5)


SURE = 1 - 1e-9  # confidence of the accuracy checks: a correct implementation fails with probability ~1e-8


def test_quantiles_accuracy_and_order():
    x = np.random.default_rng(1).uniform(0, 100, 5000)
    xs = np.sort(x)
    qs = [0.9, 0.1, 0.5, 0.5, 0.25]
    w = 100 / 1024
    for method in ("recursive", "independent"):
        rel = quantiles(x, qs, (0, 100), 2.0, method=method, rng=deterministic_source(3))
        v = rel.value
        assert v.shape == (5,) and v[2] == v[3]
        order = np.argsort(qs, kind="stable")
        assert np.all(np.diff(v[order]) >= 0)
        assert rel.cost == PureDP(2.0) and rel.params["qs"] == tuple(qs)
        plan = Q._Plan(2.0, AddRemove(), 4, method)
        r = rank_error_bound(1024, plan.eps_node, q=None, confidence=SURE)  # Δ <= 1 for every q'
        if method == "recursive":
            tied = np.max(np.bincount(_space(1024, None, (0.0, 100.0)).keys(x)))
            bound = plan.levels * r + (plan.levels - 1) * (tied / 2 + 1)  # the documented bound
        else:
            bound = r
        for y, q in zip(v, qs, strict=True):
            assert _bracket_ok(xs, y, w, q * x.size, bound)
        assert np.max(np.abs(v - np.quantile(x, qs))) < 1.0  # typical accuracy on this sample


def test_iqr_min_max_kth():
    x = np.random.default_rng(2).uniform(20, 80, 4000)
    xs = np.sort(x)
    rng = deterministic_source(4)
    w = 100 / 1024
    r = iqr(x, (0, 100), 1.0, rng=rng)
    assert r.mechanism == "iqr" and r.value == r.parts["q75"] - r.parts["q25"] >= 0
    for q, key in ((0.25, "q25"), (0.75, "q75")):
        assert _bracket_ok(xs, r.parts[key], w, q * x.size, rank_error_bound(1024, 0.5, q=q, confidence=SURE))
    assert abs(r.value - (np.quantile(x, 0.75) - np.quantile(x, 0.25))) < 1.0
    for fn, top in ((dp_min, False), (dp_max, True)):
        rel = fn(x, (0, 100), 1.0, confidence=SURE, rng=rng)
        k = rel.params["k"]
        rr = rank_error_bound(1024, 1.0, q=None, confidence=SURE)
        assert k - 0.5 > rr >= k - 1.5
        side = np.sort(x if not top else -x)
        y = rel.value if not top else -rel.value
        # at least one record <= y + w, at most 2R + 1 records < y - w (mirrored for max)
        assert np.searchsorted(side, y + w, side="right") >= 1
        assert np.searchsorted(side, y - w, side="left") <= 2 * rr + 1
    assert dp_min(x, (0, 100), 1.0, rng=rng).params["k"] == 21  # K = 1024, ε = 1, β = 0.05
    rr = rank_error_bound(1024, 1.0, q=None, confidence=SURE)
    r = kth(x, 100, (0, 100), 1.0, rng=rng)
    assert _bracket_ok(xs, r.value, w, 99.5, rr)
    r = kth(x, 100, (0, 100), 1.0, largest=True, candidates=np.arange(101), rng=rng)
    assert r.value == round(r.value)
    assert _bracket_ok(np.sort(-x), -r.value, 0.0, 99.5, rank_error_bound(101, 1.0, q=None, confidence=SURE))


def test_adult_ages_median_is_accurate():
    from dpkit.datasets import adult

    ages = np.asarray(adult(as_frame=False, columns=["age"])["age"], dtype=float)
    rng = deterministic_source(9)
    for eps in (0.1, 1.0):
        vals = [median(ages, (0, 100), eps, candidates=np.arange(101), rng=rng).value for _ in range(4)]
        assert np.max(np.abs(np.array(vals) - np.median(ages))) <= 1.0


# ---------------------------------------------------------------------------------------------
# bad input: typed errors, the parameter named, no value in the message, nothing charged or drawn
# ---------------------------------------------------------------------------------------------
DATA = [12.345, 67.891, 23.456]
B = (0.0, 100.0)
BAD = [
    (quantile, (DATA, -0.1, B, 1.0), {}, InvalidParameter, "q"),
    (quantile, (DATA, 1.5, B, 1.0), {}, InvalidParameter, "q"),
    (quantile, (DATA, math.nan, B, 1.0), {}, InvalidParameter, "q"),
    (quantile, (DATA, "0.5", B, 1.0), {}, WrongType, "q"),
    (quantile, (DATA, None, B, 1.0), {}, WrongType, "q"),
    (quantile, (DATA, 0.5, B, 0.0), {}, InvalidParameter, "epsilon"),
    (quantile, (DATA, 0.5, B, -1.0), {}, InvalidParameter, "epsilon"),
    (quantile, (DATA, 0.5, B, math.nan), {}, InvalidParameter, "epsilon"),
    (quantile, (DATA, 0.5, (1.0, 1.0), 1.0), {}, InvalidParameter, "bounds"),
    (quantile, (DATA, 0.5, (2.0, 1.0), 1.0), {}, InvalidParameter, "bounds"),
    (quantile, (DATA, 0.5, (0.0, math.inf), 1.0), {}, InvalidParameter, "bounds"),
    (quantile, (DATA, 0.5, "ab", 1.0), {}, WrongType, "bounds"),
    (quantile, (DATA, 0.5, None, 1.0), {}, WrongType, "bounds"),
    (quantile, (DATA, 0.5, B, 1.0), {"bins": 0}, InvalidParameter, "bins"),
    (quantile, (DATA, 0.5, B, 1.0), {"bins": 2.5}, WrongType, "bins"),
    (quantile, (DATA, 0.5, B, 1.0), {"bins": True}, WrongType, "bins"),
    (quantile, (DATA, 0.5, B, 1.0), {"bins": 2**30}, InvalidParameter, "bins"),
    (quantile, (DATA, 0.5, (1.0, 1.0 + 1e-10), 1.0), {"bins": 2**20}, InvalidParameter, "bins"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [3.0, 1.0, 2.0]}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [1.0, 1.0]}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [1.0, math.nan]}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [1.0, math.inf]}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": []}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [50.0, 150.0]}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [[1.0, 2.0]]}, InvalidParameter, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": ["a", "b"]}, WrongType, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": "abc"}, WrongType, "candidates"),
    (quantile, (DATA, 0.5, B, 1.0), {"candidates": [1.0, 2.0], "bins": 8}, InvalidParameter, "bins"),
    (quantile, ([1.0, math.nan], 0.5, B, 1.0), {}, InvalidData, "values"),
    (quantile, ([1.0, None], 0.5, B, 1.0), {}, InvalidData, "values"),
    (quantile, ([1.0, math.inf], 0.5, B, 1.0), {}, InvalidData, "values"),
    (quantile, (["a", "b"], 0.5, B, 1.0), {}, WrongType, "values"),
    (quantile, (None, 0.5, B, 1.0), {}, WrongType, "values"),
    (quantile, (DATA, 0.5, B, 1.0), {"nan_policy": "skip"}, InvalidParameter, "nan_policy"),
    (quantile, (DATA, 0.5, B, 1.0), {"description": 3}, WrongType, "description"),
    (quantile, (DATA, 0.5, B, 1.0), {"neighbours": "replace"}, WrongType, "neighbours"),
    (quantile, (DATA, 0.5, B, 1.0), {"neighbours": PrivacyUnit("id", max_rows=2**21)}, InvalidParameter,
     "neighbours"),
    (quantiles, (DATA, [], B, 1.0), {}, InvalidParameter, "qs"),
    (quantiles, (DATA, [0.5, 1.2], B, 1.0), {}, InvalidParameter, "qs"),
    (quantiles, (DATA, [0.5, math.nan], B, 1.0), {}, InvalidParameter, "qs"),
    (quantiles, (DATA, ["a"], B, 1.0), {}, WrongType, "qs"),
    (quantiles, (DATA, 0.5, B, 1.0), {}, InvalidParameter, "qs"),
    (quantiles, (DATA, [0.5], B, 1.0), {"method": "fast"}, InvalidParameter, "method"),
    (quantiles, (DATA, [0.5], B, 1.0), {"method": 1}, WrongType, "method"),
    (quantiles, (DATA, [0.25, 0.75], B, 5e-324), {}, InvalidParameter, "epsilon"),
    (kth, (DATA, 0, B, 1.0), {}, InvalidParameter, "k"),
    (kth, (DATA, -3, B, 1.0), {}, InvalidParameter, "k"),
    (kth, (DATA, 1.5, B, 1.0), {}, WrongType, "k"),
    (kth, (DATA, 2**41, B, 1.0), {}, InvalidParameter, "k"),
    (kth, (DATA, 1, B, 1.0), {"largest": "yes"}, WrongType, "largest"),
    (median, (DATA, B, 0.0), {}, InvalidParameter, "epsilon"),
    (iqr, (DATA, (3.0, 3.0), 1.0), {}, InvalidParameter, "bounds"),
    (iqr, (DATA, B, 1.0), {"method": "x"}, InvalidParameter, "method"),
    (dp_min, (DATA, B, 1.0), {"confidence": 1.0}, InvalidParameter, "confidence"),
    (dp_max, (DATA, B, 1.0), {"confidence": 0.0}, InvalidParameter, "confidence"),
    (dp_max, ([math.nan], B, 1.0), {}, InvalidData, "values"),
]


@pytest.mark.parametrize(("fn", "args", "kwargs", "err", "param"), BAD)
def test_bad_input_refused_before_charge_and_draw(fn, args, kwargs, err, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(1)
    with pytest.raises(err) as exc:
        fn(*args, **kwargs, accountant=acct, rng=src)
    assert exc.value.param == param
    msg = str(exc.value)
    for v in ("12.345", "67.891", "23.456", "2147483648", "1e-10"):
        assert v not in msg
    assert acct.receipts == () and acct.spent == Accountant(PureDP(10.0)).spent
    assert src.consumed == 0


def test_neighbours_must_match_accountant():
    acct = Accountant(PureDP(1.0), neighbours=Replace())
    with pytest.raises(InvalidParameter) as exc:
        median(DATA, B, 0.5, neighbours=AddRemove(), accountant=acct)
    assert exc.value.param == "neighbours" and acct.receipts == ()


def test_unknown_keyword_is_a_type_error():
    with pytest.raises(TypeError):
        median(DATA, B, 1.0, q=0.3)


# ---------------------------------------------------------------------------------------------
# accounting: one charge of exactly epsilon, before any randomness; refused -> nothing drawn
# ---------------------------------------------------------------------------------------------
CALLS = [
    ("quantile", lambda **k: quantile(DATA, 0.3, B, 0.6, **k)),
    ("quantile", lambda **k: quantile([], 0.3, B, 0.6, candidates=[0, 50, 100], **k)),
    ("quantiles", lambda **k: quantiles(DATA, [0.1, 0.5, 0.9], B, 0.6, **k)),
    ("quantiles", lambda **k: quantiles(DATA, [0.1, 0.5, 0.9], B, 0.6, method="independent", **k)),
    ("median", lambda **k: median(DATA, B, 0.6, **k)),
    ("iqr", lambda **k: iqr(DATA, B, 0.6, **k)),
    ("kth", lambda **k: kth(DATA, 2, B, 0.6, **k)),
    ("min", lambda **k: dp_min(DATA, B, 0.6, **k)),
    ("max", lambda **k: dp_max(DATA, B, 0.6, bins=64, **k)),
]


@pytest.mark.parametrize(("name", "call"), CALLS)
def test_charge_once_before_randomness(name, call):
    acct = Accountant(PureDP(1.0))
    src = CountingSource(3)
    seen = watch_charges(acct, src)
    rel = call(accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0
    assert rel.mechanism == name and rel.cost == PureDP(0.6) and acct.spent == PureDP(0.6)
    assert rel.receipt is acct.receipts[-1] and rel.receipt.mechanism == name
    assert rel.secure is False and rel.scale is None and rel.noise is None
    assert "values" not in rel.params
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        call(accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


def test_release_fields_and_params():
    rel = quantile(DATA, 0.3, B, 0.6, bins=16, rng=deterministic_source(1))
    assert rel.params == {"epsilon": 0.6, "q": 0.3, "bounds": (0.0, 100.0), "bins": 16}
    assert isinstance(rel.value, float)
    rel = quantiles(DATA, [0.5, 0.1], B, 0.6, candidates=[0, 10, 20, 50, 100], rng=deterministic_source(1))
    assert rel.params["candidates"] == 5 and rel.value.dtype == np.float64 and rel.value[0] >= rel.value[1]


# --- issue #16: the integer grid of an integer-typed column -----------------------------------------------
def test_integer_dtype_uses_the_integer_grid_and_is_exact_on_ties():
    import numpy as np

    import dpkit
    from dpkit.noise import deterministic_source

    x = np.array([0] * 900 + list(range(1, 101)), dtype=np.int64)  # 90% zeros: the median is the lower bound
    r = dpkit.stats.median(x, (0, 99_999), 1.0, rng=deterministic_source(4))
    assert r.params["integer"] is True and r.params["candidates"] == 100_000
    assert r.value == 0.0
    q = dpkit.stats.quantiles(x, [0.25, 0.5], (0, 99_999), 1.0, rng=deterministic_source(4))
    assert list(q.value) == [0.0, 0.0]
    k = dpkit.stats.kth(x, 5, (0, 100), 1.0, rng=deterministic_source(4))
    assert float(k.value).is_integer()


def test_integer_grid_only_for_integer_schemas_and_default_bins():
    import numpy as np
    import pytest

    import dpkit
    from dpkit.core.errors import WrongType
    from dpkit.noise import deterministic_source

    xi = np.arange(100, dtype=np.int32)
    floats = dpkit.stats.quantile(xi.astype(float), 0.5, (0, 100), 1.0, rng=deterministic_source(1))
    assert floats.params.get("bins") == 1024 and "integer" not in floats.params
    as_list = dpkit.stats.quantile(list(range(100)), 0.5, (0, 100), 1.0, rng=deterministic_source(1))
    assert as_list.params.get("bins") == 1024  # a list carries no schema
    off = dpkit.stats.quantile(xi, 0.5, (0, 100), 1.0, integer=False, rng=deterministic_source(1))
    assert off.params.get("bins") == 1024
    forced = dpkit.stats.quantile(xi.astype(float), 0.5, (0.5, 100.5), 1.0, integer=True, rng=deterministic_source(1))
    assert forced.params["candidates"] == 100 and float(forced.value).is_integer()
    own_bins = dpkit.stats.quantile(xi, 0.5, (0, 100), 1.0, bins=10, rng=deterministic_source(1))
    assert own_bins.params.get("bins") == 10
    wide = dpkit.stats.quantile(xi, 0.5, (0, 2**21), 1.0, rng=deterministic_source(1))
    assert wide.params.get("bins") == 1024  # more than 2^20 integers: the buckets
    with pytest.raises(WrongType):
        dpkit.stats.quantile(xi, 0.5, (0, 100), 1.0, integer="yes")
