"""NoiseFirst and StructureFirst (dpkit.histograms.grouping)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from tests.histograms._helpers import ONE_CHARGE, REFUSAL_CALL, REFUSAL_SECRETS, neighbours

from conftest import sized
from dpkit.audit.exact import DiscreteLaplace
from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly, chi2_pvalue
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.histograms import _common, noise_first, structure_first
from dpkit.histograms.grouping import (
    _cost_matrix,
    _max_cap_exponent,
    _noise_first_merge,
    _private_cap,
    _score_sensitivity,
    sse_sensitivity,
    structure_scores,
    vopt_table,
)
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.noise import deterministic_source


def sse(v) -> float:
    v = np.asarray(v, dtype=float)
    return float(((v - v.mean()) ** 2).sum())


def partitions(m: int, k: int):
    """All edge vectors 0 < b_1 < ... < b_{k-1} < m (test oracle)."""
    for cut in itertools.combinations(range(1, m), k - 1):
        yield (0, *cut, m)


def tables(x, k):
    c = np.asarray(x, dtype=np.int64)
    s = np.concatenate([[0], np.cumsum(c)])
    q = np.concatenate([[0], np.cumsum(c * c)])
    cost = _cost_matrix(s, q)
    return cost, *vopt_table(cost, k)


# ------------------------------------------------------------------ the v-optimal DP against brute force
@pytest.mark.parametrize("seed", range(4))
def test_vopt_dp_is_the_brute_force_optimum(seed):
    x = np.random.default_rng(seed).integers(0, 20, 7)
    cost, e, arg = tables(x, 7)
    for k in range(1, 8):
        best = min(sum(sse(x[a:b]) for a, b in itertools.pairwise(p)) for p in partitions(7, k))
        assert abs(e[k, 7] - best) < 1e-9
        # backtracking gives an optimal partition
        edges, j = [7], 7
        for r in range(k, 0, -1):
            j = int(arg[r, j])
            edges.append(j)
        edges = edges[::-1]
        assert edges[0] == 0 and len(edges) == k + 1
        assert abs(sum(sse(x[a:b]) for a, b in itertools.pairwise(edges)) - best) < 1e-9
    for i in range(8):
        for j in range(8):
            assert (cost[j, i] == np.inf) if i >= j else abs(cost[j, i] - sse(x[i:j])) < 1e-9


# ------------------------------------------------------------------ SSE sensitivity: 2F - 1, not 2F + 1
@pytest.mark.parametrize("cap", [1, 2, 3])
def test_sse_sensitivity_is_the_exact_supremum(cap):
    worst = {}
    for n in range(1, 6):
        w = 0.0
        for x in itertools.product(range(cap + 1), repeat=n):
            for j in range(n):
                y = list(x)
                y[j] = min(cap, y[j] + 1)  # add one record, then clamp to [0, F]
                w = max(w, abs(sse(y) - sse(x)))
        worst[n] = w
        # the derived bound (2F-1)(1-1/n) is attained for every width
        assert abs(w - (2 * cap - 1) * (1 - 1 / n)) < 1e-9
    assert max(worst.values()) < sse_sensitivity(cap) == 2 * cap - 1 < 2 * cap + 1  # Xu et al.'s 2F+1 is loose
    assert sse_sensitivity(cap, 2) == 2 * (2 * cap - 1)


def test_dp_scores_move_by_less_than_the_sensitivity():
    cap, k = 2, 3
    for x in itertools.product(range(cap + 2), repeat=4):
        c = np.minimum(x, cap)
        cost, e, _ = tables(c, k - 1)
        for j in range(4):
            y = c.copy()
            y[j] = min(cap, y[j] + 1)
            cost2, e2, _ = tables(y, k - 1)
            for r in range(2, k + 1):
                for end in range(r, 5):
                    d = np.abs(structure_scores(e, cost, r, end) - structure_scores(e2, cost2, r, end))
                    assert np.all(d <= 2 * cap - 1)


# ------------------------------------------------------------------ exact privacy loss of the boundary choice
def boundary_law(x, k, cap, sens, steps, shrink=1.0):
    """The exact law of StructureFirst's edges for dataset x: product of the implementation's EM laws."""
    m = len(x)
    cost, e, _ = tables(np.minimum(x, cap), k - 1)
    delta = _score_sensitivity(m, k, cap, sens) * shrink
    out = {}

    def rec(r, end, lp, edges):
        if r == 1:
            out[tuple(edges[::-1])] = lp  # ascending, as parts["edges"][1:-1]
            return
        law = SelectionLaw(structure_scores(e, cost, r, end), delta, steps[k - r], 2).log_probs()
        for idx, lq in enumerate(law):
            rec(r - 1, r - 1 + idx, lp + lq, [*edges, r - 1 + idx])

    rec(k, m, 0.0, [])
    return out


def max_boundary_loss(m, k, cap, eps_b, values, replace=False, shrink=1.0):
    steps = _common.split_budget(eps_b, [1.0] * (k - 1))
    sens = 2 if replace else 1
    cache = {}

    def law(x):
        key = tuple(x)
        if key not in cache:
            cache[key] = boundary_law(key, k, cap, sens, steps, shrink)
        return cache[key]

    worst = 0.0
    for x in itertools.product(values, repeat=m):
        for y in neighbours(x, replace):
            a, b = law(x), law(y)
            worst = max(worst, max(abs(a[o] - b[o]) for o in a))
    return worst


@pytest.mark.parametrize("replace", [False, True])
def test_exact_privacy_loss_of_boundaries_within_budget(replace):
    # 4 bins, 3 buckets (two sequential decisions), counts above the cap F = 2 exercise the clamp
    eps_b = 1.0
    loss = max_boundary_loss(4, 3, 2, eps_b, range(4), replace=replace)
    assert 0.05 < loss <= eps_b * (1 + 1e-9)


def test_exact_privacy_loss_of_boundaries_large_epsilon_and_power():
    # 7 bins, 2 buckets, F = 1, large epsilon: the EM law is concentrated and the loss approaches its bound
    eps_b = 80.0
    loss = max_boundary_loss(7, 2, 1, eps_b, range(2))
    assert 0.55 * eps_b < loss <= eps_b * (1 + 1e-9)
    # power: the broken variant with half the sensitivity exceeds the step's epsilon
    assert max_boundary_loss(7, 2, 1, eps_b, range(2), shrink=0.5) > 1.1 * eps_b


def test_private_cap_exact_privacy_loss_and_power():
    eps = 2.0
    worst = worst_half = 0.0
    from dpkit.core.neighbours import AddRemove

    def law(x, shrink):
        arr = np.asarray(x, dtype=np.int64)
        jmax = _max_cap_exponent(len(x))
        caps = 2 ** np.arange(jmax + 1)
        above = (arr[None, :] > caps[:, None]).sum(axis=1)
        scores = -(above + (1 / eps) * np.arange(jmax + 1))
        return SelectionLaw(scores, 1.0 * shrink, eps, 1).log_probs()

    for x in itertools.product([0, 1, 2, 3, 4, 7, 8, 15, 16], repeat=3):
        x = [*x, 0]
        for y in neighbours(x, False):
            worst = max(worst, np.max(np.abs(law(x, 1) - law(y, 1))))
            worst_half = max(worst_half, np.max(np.abs(law(x, 0.5) - law(y, 0.5))))
    assert 0.5 * eps < worst <= eps * (1 + 1e-9)
    assert worst_half > 1.2 * eps
    # the implementation uses these scores: same law
    counts = np.array([3, 0, 9, 1])
    src = deterministic_source(3)
    draws = [_private_cap(counts, eps, 1, AddRemove(), src)[0] for _ in range(sized(3000, 20000))]
    probs = np.exp(law(list(counts), 1))
    obs = np.bincount(np.log2(draws).astype(int), minlength=probs.size)
    assert chi2_pvalue(obs, probs) > 1e-7


# ------------------------------------------------------------------ noise laws
def test_noise_first_noise_is_discrete_laplace():
    counts = np.array([5, 0, 12, 3, 3, 7, 1, 0])
    eps = 0.8
    reps = sized(1500, 15000)
    src = deterministic_source(11)
    z = np.concatenate([noise_first(counts, eps, k=2, rng=src).parts["noisy"] - counts for _ in range(reps)])
    t = 1 / eps
    grid = np.arange(-25, 26)

    def pmf(scale):
        return np.exp([DiscreteLaplace(0, scale).logpmf(v) for v in grid])

    obs = np.array([(z == v).sum() for v in grid])
    assert chi2_pvalue(obs, pmf(t)) > 1e-7
    assert chi2_pvalue(obs, pmf(1.1 * t)) < 1e-7  # power: a 10 % wrong scale is caught


def test_structure_first_bucket_totals_noise_and_uniform_expansion():
    counts = np.array([4, 4, 4, 9, 9, 0, 0, 0])
    eps = 1.0
    reps = sized(1500, 15000)
    src = deterministic_source(12)
    z = []
    for _ in range(reps):
        rel = structure_first(counts, eps, k=3, max_count=16, rng=src)
        edges = rel.parts["edges"]
        totals = np.add.reduceat(counts, edges[:-1])
        z.append(rel.parts["noisy_totals"] - totals)
        widths = np.diff(edges)
        assert np.allclose(rel.value, np.repeat(rel.parts["noisy_totals"] / widths, widths))
    z = np.concatenate(z)
    t = rel.scale
    assert t == pytest.approx(1 / rel.params["budget"]["counts"], rel=1e-12)
    grid = np.arange(-20, 21)

    def pmf(scale):
        return np.exp([DiscreteLaplace(0, scale).logpmf(v) for v in grid])

    obs = np.array([(z == v).sum() for v in grid])
    assert chi2_pvalue(obs, pmf(t)) > 1e-7
    assert chi2_pvalue(obs, pmf(1.15 * t)) < 1e-7


def test_structure_first_boundary_law_matches_the_exact_law():
    counts = (0, 3, 1, 4)
    eps = 3.0
    rel = structure_first(counts, eps, k=3, max_count=2, rng=deterministic_source(1))
    steps = _common.split_budget(rel.params["budget"]["boundaries"], [1.0, 1.0])
    law = boundary_law(counts, 3, 2, 1, steps)
    outcomes = sorted(law)
    src = deterministic_source(21)
    reps = sized(2000, 20000)
    seen = [tuple(structure_first(counts, eps, k=3, max_count=2, rng=src).parts["edges"][1:-1]) for _ in range(reps)]
    obs = np.array([seen.count(o) for o in outcomes])
    assert obs.sum() == reps
    assert chi2_pvalue(obs, np.exp([law[o] for o in outcomes])) > 1e-7


# ------------------------------------------------------------------ NoiseFirst is post-processing
def test_noise_first_merge_uses_only_the_noisy_vector():
    counts = np.array([10, 11, 9, 10, 40, 41, 39, 0, 1, 0, 2, 1])
    rel = noise_first(counts, 0.5, rng=deterministic_source(4))
    noisy = rel.parts["noisy"]
    value, parts = _noise_first_merge(noisy, rel.scale, None, rel.params["max_k"])
    assert np.array_equal(value, rel.value) and parts["k"] == rel.parts["k"]
    # a different dataset with the same noisy vector gets the same release (the merge never sees counts)
    other = noise_first(counts[::-1].copy(), 0.5, rng=deterministic_source(4))
    v2, p2 = _noise_first_merge(other.parts["noisy"], other.scale, None, other.params["max_k"])
    assert np.array_equal(v2, other.value) and p2["k"] == other.parts["k"]
    # the chosen k minimises Xu et al.'s estimate Err(k) = SSE*_k(y) - (m - 2k) sigma^2
    y = noisy.astype(float)
    q = math.exp(-1 / rel.scale)
    var = 2 * q / (1 - q) ** 2
    m = counts.size
    errs = [min(sum(sse(y[a:b]) for a, b in itertools.pairwise(p)) for p in partitions(m, k)) - (m - 2 * k) * var
            for k in range(1, rel.params["max_k"] + 1)]
    assert np.allclose(errs, rel.parts["estimated_error"], atol=1e-6)
    assert rel.parts["k"] == int(np.argmin(errs)) + 1
    # merged bins are bucket means of the noisy vector
    edges = rel.parts["edges"]
    for a, b in itertools.pairwise(edges):
        assert np.allclose(rel.value[a:b], y[a:b].mean())


def test_noise_first_fixed_k():
    rel = noise_first([1, 2, 3, 4, 5, 6], 1.0, k=2, rng=deterministic_source(1))
    assert rel.parts["k"] == 2 and len(rel.parts["edges"]) == 3 and "estimated_error" not in rel.parts


# ------------------------------------------------------------------ accuracy sanity
def test_piecewise_constant_data_beat_the_flat_histogram_at_small_epsilon():
    counts = np.repeat([2, 12, 4, 15], 64)
    eps = 0.1
    reps = sized(12, 40)
    src = deterministic_source(8)
    flat = nf = sf = sfd = 0.0
    for _ in range(reps):
        rel = noise_first(counts, eps, rng=src)
        flat += np.mean((rel.parts["noisy"] - counts) ** 2)
        nf += np.mean((rel.value - counts) ** 2)
        sf += np.mean((structure_first(counts, eps, k=4, max_count=16, rng=src).value - counts) ** 2)
        sfd += np.mean((structure_first(counts, eps, rng=src).value - counts) ** 2)
    # NoiseFirst's error estimate over-fits (selection on noise lowers SSE*_k by more than 2 sigma^2 per
    # bucket), so it tends to pick k = max_k; it still beats the flat histogram (about 0.55x here)
    assert nf < 0.75 * flat
    assert sf < 0.3 * flat  # public cap and k = 4 (about 0.12x)
    assert sfd < 0.75 * flat  # defaults: private cap, k = ceil(m/10) = 26 (about 0.45x)


# ------------------------------------------------------------------ budget split, forced structures
def test_budget_split_and_params():
    rel = structure_first(np.arange(20), 1.0, k=4, max_count=32, rng=deterministic_source(1))
    b = rel.params["budget"]
    assert set(b) == {"boundaries", "counts"} and b["boundaries"] + b["counts"] <= 1.0
    assert abs(b["boundaries"] - 0.5) < 1e-12 and rel.params["boundary_epsilon"] <= b["boundaries"] / 3
    assert rel.parts["max_count"] == 32
    assert rel.parts["score_sensitivity"] >= sse_sensitivity(32)
    auto = structure_first(np.arange(20), 1.0, k=4, structure_share=0.4, rng=deterministic_source(1)).params
    assert set(auto["budget"]) == {"cap", "boundaries", "counts"}
    assert abs(auto["budget"]["cap"] - 0.04) < 1e-12 and abs(auto["budget"]["boundaries"] - 0.36) < 1e-12
    assert sum(auto["budget"].values()) <= 1.0
    for k in (1, 20):  # forced structure: everything goes to the counts
        rel = structure_first(np.arange(20), 1.0, k=k, rng=deterministic_source(1))
        assert rel.params["budget"] == {"counts": 1.0} and len(rel.parts["edges"]) == k + 1
    rep = structure_first(np.arange(20), 1.0, k=4, max_count=8, neighbours=Replace(), rng=deterministic_source(1))
    assert rep.params["sensitivity"] == 2 and rep.parts["score_sensitivity"] >= 2 * 15


def test_score_sensitivity_covers_the_float_error_bound():
    # the float slack is tiny against 2F - 1 even at the largest cap allowed for m = 4096
    m, k, cap = 4096, 410, 2**25
    d = _score_sensitivity(m, k, cap, 1)
    assert sse_sensitivity(cap) < d < 1.02 * sse_sensitivity(cap)


# ------------------------------------------------------------------ charging
@pytest.mark.parametrize(("fn", "kwargs"), [
    (noise_first, {}),
    (structure_first, {"k": 3}),
    (structure_first, {"k": 3, "max_count": 9}),
])
def test_one_charge_before_randomness_and_refusal_draws_nothing(fn, kwargs):
    rel = assert_charges_first(fn, ([3, 1, 4, 1, 5, 9, 2, 6], 0.6), kwargs, name=fn.__name__, **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == (8,)


SHARED_BAD = [
    ({"counts": [1, -2, 3]}, InvalidData, "counts"),
    ({"counts": [1, 2.5, 3]}, InvalidData, "counts"),
    ({"counts": [1, float("nan"), 3]}, InvalidData, "counts"),
    ({"counts": []}, InvalidData, "counts"),
    ({"counts": None}, WrongType, "counts"),
    ({"counts": [[1, 2], [3, 4]]}, InvalidData, "counts"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": float("inf")}, InvalidParameter, "epsilon"),
    ({"k": 0}, InvalidParameter, "k"),
    ({"k": 4}, InvalidParameter, "k"),
    ({"k": 2.0}, WrongType, "k"),
    ({"neighbours": "replace"}, WrongType, "neighbours"),
]
NF_BAD = [
    ({"max_k": 0}, InvalidParameter, "max_k"),
    ({"max_k": 9}, InvalidParameter, "max_k"),
]
SF_BAD = [
    ({"structure_share": 1.0}, InvalidParameter, "structure_share"),
    ({"structure_share": 0.0}, InvalidParameter, "structure_share"),
    ({"max_count": 0}, InvalidParameter, "max_count"),
    ({"max_count": 2**40}, InvalidParameter, "max_count"),
    ({"max_count": 3.5}, WrongType, "max_count"),
]


@pytest.mark.parametrize(("fn", "kwargs", "err", "param"),
                         [(noise_first, *c) for c in SHARED_BAD + NF_BAD]
                         + [(structure_first, *c) for c in SHARED_BAD + SF_BAD])
def test_bad_input_typed_errors_nothing_charged(fn, kwargs, err, param):
    assert_refused_cleanly(fn, REFUSAL_CALL, kwargs, error=err, param=param, secrets=REFUSAL_SECRETS)


# ------------------------------------------------------------------ bench-size defaults
@pytest.mark.slow
def test_defaults_at_bench_size():
    rng = np.random.default_rng(0)
    m = sized(1024, 4096)  # the bench calls the defaults at m = 4096 (DPKIT_FULL=1 runs that size)
    counts = rng.multinomial(10**7, rng.dirichlet(np.full(m, 0.5)))
    src = deterministic_source(1)
    for fn in (noise_first, structure_first):
        rel = fn(counts, 0.1, rng=src)
        assert rel.value.shape == (m,) and np.all(np.isfinite(rel.value))
        assert abs(rel.value.sum() - counts.sum()) < 0.01 * counts.sum()


def test_privacy_unit_scales_the_sensitivities():
    from dpkit.core.neighbours import PrivacyUnit

    nb = PrivacyUnit("user", max_rows=3)
    nf = noise_first([3, 1, 4, 1, 5], 1.0, neighbours=nb, rng=deterministic_source(1))
    assert nf.params["sensitivity"] == 3 and nf.scale == pytest.approx(3.0, rel=1e-12)
    sf = structure_first([3, 1, 4, 1, 5], 1.0, k=2, max_count=8, neighbours=nb, rng=deterministic_source(1))
    assert sf.params["sensitivity"] == 3 and sf.parts["score_sensitivity"] >= 3 * 15
    assert sf.scale == pytest.approx(3.0 / sf.params["budget"]["counts"], rel=1e-12)
    # exact boundary loss when one unit adds up to three records (a chain of three add steps)
    eps_b = 4.0
    steps = [eps_b]
    cache = {}

    def law(x):
        key = tuple(x)
        if key not in cache:
            cache[key] = boundary_law(key, 2, 2, 3, steps)
        return cache[key]

    worst = 0.0
    for x in itertools.product(range(3), repeat=4):
        for add in itertools.combinations_with_replacement(range(4), 3):
            y = list(x)
            for j in add:
                y[j] += 1
            a, b = law(x), law(y)
            worst = max(worst, max(abs(a[o] - b[o]) for o in a))
    assert 0.05 * eps_b < worst <= eps_b * (1 + 1e-9)


def test_noise_first_error_estimate_over_fits_on_constant_data():
    # documented behaviour of Xu et al.'s estimate: on constant data (one true piece) it picks many buckets
    src = deterministic_source(3)
    ks = [noise_first(np.full(128, 50), 0.5, max_k=128, rng=src).parts["k"] for _ in range(3)]
    assert min(ks) > 8
