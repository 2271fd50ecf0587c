"""Top-k selection by the exponential mechanism without replacement (exact law, exact privacy, contract)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from conftest import sized
from dpkit.audit.testing import P_MIN, CountingSource, chi2_pvalue, watch_charges
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import BudgetExceeded, DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms import NoInterval, exponential_utility_bound
from dpkit.mechanisms import top_k as tk
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.mechanisms.top_k import _exact_bounds, _float_bounds, _race_top_k, _sequential_top_k, exponential_top_k

SCORES = [0.0, 2.0, 3.0, 5.0, 6.5]
NAN, INF = math.nan, math.inf


# ---------------------------------------------------------------------------------------------
# the exact law of the ordered selection (product of per-round exponential-mechanism probabilities)
# ---------------------------------------------------------------------------------------------
def _log_weights(scores, sens, eps, k, monotonic):
    """``-κ n_i`` exactly as implemented (lattice-rounded integer gaps, κ rounded down)."""
    law = SelectionLaw(np.asarray(scores, dtype=float), sens, eps, (1 if monotonic else 2) * k)
    return -np.asarray(law.gaps, dtype=float) * law.kappa


def _ideal_log_weights(scores, sens, eps, k, monotonic):
    return eps * np.asarray(scores, dtype=float) / ((1 if monotonic else 2) * k * sens)


def _log_prob(lw, seq):
    """log P[ordered selection = seq] for log-weights ``lw`` (log space)."""
    left = list(range(len(lw)))
    total = 0.0
    for y in seq:
        sub = lw[left]
        m = sub.max()
        total += lw[y] - (m + math.log(np.exp(sub - m).sum()))
        left.remove(y)
    return total


def _outcomes(n, k):
    return list(itertools.permutations(range(n), k))


def _law(lw, k):
    outs = _outcomes(len(lw), k)
    p = np.exp([_log_prob(lw, s) for s in outs])
    return outs, p


def _counts(draws, outs):
    index = {o: j for j, o in enumerate(outs)}
    c = np.zeros(len(outs), dtype=int)
    for row in draws:
        c[index[tuple(int(x) for x in row)]] += 1
    return c


def test_oracle_is_the_product_of_exponential_mechanisms():
    # the implemented (lattice) weights equal the ideal ones to ~1e-6, and the oracle sums to one
    for k, mono in [(1, False), (2, True), (3, False)]:
        lw = _log_weights(SCORES, 1.0, 1.0, k, mono)
        ideal = _ideal_log_weights(SCORES, 1.0, 1.0, k, mono)
        assert np.allclose(lw - lw.max(), ideal - ideal.max(), atol=1e-6)
        _, p = _law(lw, k)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(("k", "monotonic"), [(1, False), (2, True), (3, False), (5, True)])
def test_race_matches_exact_ordered_law(rng, k, monotonic):
    n_draws = sized(60_000, 400_000)
    eps = 1.5
    lw = _log_weights(SCORES, 1.0, eps, k, monotonic)
    outs, p = _law(lw, k)
    law = SelectionLaw(np.asarray(SCORES), 1.0, eps, (1 if monotonic else 2) * k)
    draws = _race_top_k(law, k, rng, n_draws)
    assert draws.shape == (n_draws, k)
    counts = _counts(draws, outs)
    assert chi2_pvalue(counts, p) > P_MIN
    # power: the law at 2 epsilon (a missing factor 2 / a forgotten ε/k split) is rejected
    _, p2 = _law(_log_weights(SCORES, 1.0, 2 * eps, k, monotonic), k)
    assert chi2_pvalue(counts, p2) < P_MIN
    # and so is the law that would ignore the order of selection (uniform order within the set)
    if k >= 2:
        sets: dict[frozenset, float] = {}
        for o, q in zip(outs, p, strict=True):
            sets[frozenset(o)] = sets.get(frozenset(o), 0.0) + q
        p_unordered = np.array([sets[frozenset(o)] / math.factorial(k) for o in outs])
        assert chi2_pvalue(counts, p_unordered) < P_MIN


def test_public_function_matches_exact_law(rng):
    n_draws = sized(1_000, 30_000)
    lw = _log_weights(SCORES, 1.0, 1.0, 2, False)
    outs, p = _law(lw, 2)
    draws = [exponential_top_k(SCORES, 2, 1.0, 1.0, rng=rng).value for _ in range(n_draws)]
    assert chi2_pvalue(_counts(draws, outs), p) > P_MIN


@pytest.mark.slow
def test_sequential_reference_matches_exact_law(rng):
    """Re-building the exponential-mechanism law on the remaining candidates each round: same law."""
    n_draws = sized(600, 40_000)
    scores = np.array([0.0, 1.0, 2.5, 3.0])
    lw = _log_weights(scores, 1.0, 2.0, 2, True)
    outs, p = _law(lw, 2)
    draws = [_sequential_top_k(scores, 1.0, 2.0, 2, 2, rng) for _ in range(n_draws)]
    counts = _counts(draws, outs)
    assert chi2_pvalue(counts, p) > P_MIN


@pytest.mark.slow
@pytest.mark.parametrize("margin", [0.05, 1e3])
def test_exact_refinement_path_has_the_same_law(rng, monkeypatch, margin):
    """Widening the float key intervals sends candidates (some at 0.05, all at 1e3) through the exact
    decimal refinement; the law must not change."""
    monkeypatch.setattr(tk, "_MARGIN", margin)
    scores = [0.0, 1.0, 2.5]
    n_draws = sized(800, 20_000) if margin < 1 else sized(250, 4_000)
    lw = _log_weights(scores, 1.0, 2.0, 2, False)
    outs, p = _law(lw, 2)
    law = SelectionLaw(np.asarray(scores), 1.0, 2.0, 4)
    draws = _race_top_k(law, 2, rng, n_draws)
    assert chi2_pvalue(_counts(draws, outs), p) > P_MIN


def test_float_key_intervals_enclose_the_exact_ones():
    """The float fast path's [lo, hi] contains the rigorous decimal enclosure of κ n + ln(-ln U) over the
    same 53-bit interval of U, across the whole range of U (edges included) and of κ n."""
    gen = np.random.default_rng(5)  # rng-ok: test fixture
    words = [0, 1, 2, 3, 2**20, 2**51, 2**52 - 1, 2**52, 2**52 + 1, 2**53 - 3, 2**53 - 2, 2**53 - 1]
    words += [int(x) for x in gen.integers(0, 2**53, 60)] + [2**53 - int(x) for x in gen.integers(1, 2**30, 20)]
    for g in (0.0, 2.0**-60, 0.37, 1.0, 3.75, 123456.5, 2.0**40 + 0.25, 1e200):
        a = np.array(words, dtype=np.float64)
        lo, hi = _float_bounds(np.full(a.size, g), a)
        for j, w in enumerate(words):
            e_lo, e_hi = _exact_bounds(Fraction(g), w, 53)
            assert lo[j] <= e_lo <= e_hi <= hi[j]
            assert lo[j] < hi[j]


def test_refinement_resolves_forced_ties_exactly(monkeypatch):
    # with a huge margin every candidate overlaps every other: the output is still a valid ordering
    monkeypatch.setattr(tk, "_MARGIN", 1e6)
    rel = exponential_top_k([5.0, 5.0, 5.0, 5.0], 4, 1.0, 1.0, rng=CountingSource(3))
    assert sorted(rel.value.tolist()) == [0, 1, 2, 3]


def test_huge_gaps_beyond_float_range():
    # κ n_i overflows float64 for two candidates: they are ordered in exact arithmetic
    src = CountingSource(5)
    for _ in range(5):
        assert exponential_top_k([0.0, 1e294, -1e294, 5.0], 4, 1.0, 1e20, rng=src).value.tolist() == [1, 3, 0, 2]


def test_large_instance_is_fast_and_distinct(rng):
    gen = np.random.default_rng(11)  # rng-ok: test fixture
    scores = np.floor(1e6 / (9.79 * np.arange(1, 16_471))) + gen.integers(0, 3, 16_470)
    rel = exponential_top_k(scores, 300, 1.0, 0.1, monotonic=True, rng=rng)
    v = rel.value
    assert v.dtype == np.int64 and v.shape == (300,) and len(set(v.tolist())) == 300
    assert v[0] == 0  # the best item (score ~1e5, far ahead) is first with overwhelming probability
    assert rel.params["alpha_95"] == pytest.approx(
        exponential_utility_bound(16_470, 1.0, 0.1 / 300, 1 - 0.05 / 300, monotonic=True))


def test_k_equals_n_and_single_candidate(rng):
    v = exponential_top_k(SCORES, 5, 1.0, 1.0, rng=rng).value
    assert sorted(v.tolist()) == [0, 1, 2, 3, 4]
    src = CountingSource(1)
    rel = exponential_top_k([3.0], 1, 1.0, 1.0, rng=src)
    assert rel.value.tolist() == [0]


def test_release_fields(rng):
    rel = exponential_top_k(SCORES, 2, 1.0, 0.8, monotonic=True, rng=rng, description="top items")
    assert rel.mechanism == "exponential_top_k"
    assert rel.cost == PureDP(0.8)
    assert rel.scale is None and rel.secure is False
    assert rel.params["k"] == 2 and rel.params["epsilon_per_round"] == pytest.approx(0.4)
    assert rel.params["monotonic"] is True and rel.params["candidates"] == 5
    with pytest.raises(NoInterval):
        rel.interval()


# ---------------------------------------------------------------------------------------------
# exact privacy: max |log P_D(y) - log P_D'(y)| over all ordered outputs y
# ---------------------------------------------------------------------------------------------
def _max_loss(q, q2, sens, eps, k, monotonic):
    a, b = _log_weights(q, sens, eps, k, monotonic), _log_weights(q2, sens, eps, k, monotonic)
    return max(abs(_log_prob(a, s) - _log_prob(b, s)) for s in _outcomes(len(q), k))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_exact_privacy_general(k):
    gen = np.random.default_rng(20 + k)  # rng-ok: test fixture (neighbouring score vectors)
    eps, sens = 0.8, 1.5
    worst = 0.0
    for _ in range(60):
        q = gen.uniform(-4, 4, 5)
        shift = gen.choice([-1.0, 1.0], 5) * sens * gen.choice([1.0, gen.uniform()], 5)
        worst = max(worst, _max_loss(q, q + shift, sens, eps, k, False))
    assert worst <= eps + 1e-9
    # a near-worst case (one score up by Δ, the others down by Δ) uses a good part of the budget
    q = np.zeros(5)
    shift = np.array([sens] + [-sens] * 4)
    assert 0.25 * eps < _max_loss(q, q + shift, sens, eps, k, False) <= eps + 1e-9


@pytest.mark.parametrize("k", [1, 2, 3])
def test_exact_privacy_monotonic(k):
    gen = np.random.default_rng(40 + k)  # rng-ok: test fixture
    eps, sens = 1.0, 1.0
    worst = 0.0
    for _ in range(60):
        q = gen.uniform(-4, 4, 5)
        shift = gen.uniform(0, sens, 5) * gen.choice([-1.0, 1.0])  # all scores move the same way
        worst = max(worst, _max_loss(q, q + shift, sens, eps, k, True))
    assert worst <= eps + 1e-9


def test_monotonic_rate_on_non_monotonic_scores_exceeds_epsilon():
    """Power check: the monotonic exponent on scores that move in both directions is not ε-DP."""
    eps, sens, k, n = 1.0, 1.0, 2, 400
    q = np.zeros(n)
    q2 = -np.full(n, sens)
    q2[:2] = sens  # candidates 0, 1 up by Δ, every other down by Δ
    a, b = _log_weights(q, sens, eps, k, True), _log_weights(q2, sens, eps, k, True)
    loss = abs(_log_prob(a, (0, 1)) - _log_prob(b, (0, 1)))
    assert loss > 1.8 * eps
    # the same neighbours with the general (non-monotonic) rate stay within ε
    a, b = _log_weights(q, sens, eps, k, False), _log_weights(q2, sens, eps, k, False)
    assert abs(_log_prob(a, (0, 1)) - _log_prob(b, (0, 1))) <= eps + 1e-9


# ---------------------------------------------------------------------------------------------
# accounting: one charge, before any randomness; a refused charge draws nothing
# ---------------------------------------------------------------------------------------------
def test_one_charge_before_any_draw():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(7)
    seen = watch_charges(acct, src)
    rel = exponential_top_k(SCORES, 3, 1.0, 0.6, accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0
    assert len(acct.receipts) == 1 and rel.receipt is acct.receipts[-1]
    assert rel.receipt.cost == PureDP(0.6) and rel.receipt.mechanism == "exponential_top_k"
    assert rel.receipt.secure is False
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        exponential_top_k(SCORES, 3, 1.0, 0.6, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


# ---------------------------------------------------------------------------------------------
# bad input: typed error naming the parameter, no value in the message, nothing charged or drawn
# ---------------------------------------------------------------------------------------------
BAD = [
    (([1.0, 2.0], 0, 1.0, 1.0), {}, InvalidParameter, "k"),
    (([1.0, 2.0], -1, 1.0, 1.0), {}, InvalidParameter, "k"),
    (([1.0, 2.0], 3, 1.0, 1.0), {}, InvalidParameter, "k"),
    (([1.0, 2.0], 1.0, 1.0, 1.0), {}, WrongType, "k"),
    (([1.0, 2.0], True, 1.0, 1.0), {}, WrongType, "k"),
    (([1.0, 2.0], None, 1.0, 1.0), {}, WrongType, "k"),
    (([1.0, NAN], 1, 1.0, 1.0), {}, InvalidData, "scores"),
    (([1.0, INF], 1, 1.0, 1.0), {}, InvalidData, "scores"),
    (([], 1, 1.0, 1.0), {}, InvalidData, "scores"),
    (([[1.0, 2.0]], 1, 1.0, 1.0), {}, InvalidData, "scores"),
    (("ab", 1, 1.0, 1.0), {}, WrongType, "scores"),
    ((None, 1, 1.0, 1.0), {}, WrongType, "scores"),
    (([1e300, 0.0], 1, 1.0, 1.0), {}, InvalidData, "scores"),  # beyond exact lattice arithmetic
    (([1.0, 2.0], 1, 0.0, 1.0), {}, InvalidParameter, "sensitivity"),
    (([1.0, 2.0], 1, NAN, 1.0), {}, InvalidParameter, "sensitivity"),
    (([1.0, 2.0], 1, "1", 1.0), {}, WrongType, "sensitivity"),
    (([1.0, 2.0], 1, 1.0, 0.0), {}, InvalidParameter, "epsilon"),
    (([1.0, 2.0], 1, 1.0, -1.0), {}, InvalidParameter, "epsilon"),
    (([1.0, 2.0], 1, 1.0, NAN), {}, InvalidParameter, "epsilon"),
    (([1.0, 2.0], 1, 1.0, INF), {}, InvalidParameter, "epsilon"),
    (([1.0, 2.0], 1, 1.0, None), {}, WrongType, "epsilon"),
    (([1.0, 2.0], 1, 1.0, 1.0), {"monotonic": "yes"}, WrongType, "monotonic"),
    (([1.0, 2.0], 1, 1.0, 1.0), {"description": 3}, WrongType, "description"),
    (([1.0, 2.0], 1, 1.0, 1.0), {"rng": 42}, WrongType, "rng"),
    (([1.0, 2.0], 1, 1.0, 1.0), {"accountant": "acct"}, WrongType, "accountant"),
]


@pytest.mark.parametrize(("args", "kwargs", "err", "param"), BAD)
def test_bad_input_refused_before_charge_and_draw(args, kwargs, err, param):
    acct = Accountant(PureDP(100.0))
    src = CountingSource(1)
    kw = {"accountant": acct, "rng": src}
    kw.update(kwargs)
    with pytest.raises(err) as info:
        exponential_top_k(*args, **kw)
    assert isinstance(info.value, DPKitError)
    assert info.value.param == param
    assert acct.receipts == ()
    assert src.consumed == 0


def test_error_messages_carry_no_value():
    secret = 987654.321
    with pytest.raises(InvalidData) as info:
        exponential_top_k([secret, NAN], 1, 1.0, 1.0)
    assert "987654" not in str(info.value)
    with pytest.raises(InvalidParameter) as info:
        exponential_top_k([secret, 1.0], 3, 1.0, 1.0)
    assert "987654" not in str(info.value) and "3" not in str(info.value)
