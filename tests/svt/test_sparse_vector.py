"""The standard sparse vector technique with cutoff c > 1 (SparseVector, sparse_vector): exact privacy over every
output pattern, exact law of the sampler, numeric answers, per-query thresholds, the error check, the auditor,
and the mechanism contract (charge once up front, halting, validation, nothing drawn on refusal)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import pickle
import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from conftest import sized
from dpkit.audit import audit
from dpkit.audit.svt_law import svt_log_prob, svt_patterns
from dpkit.audit.testing import CountingSource, chi2_pvalue, watch_charges
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import BudgetExceeded, DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms import NoInterval
from dpkit.noise import deterministic_source, lattice_granularity
from dpkit.svt import AboveThreshold, SparseVector, SVTAnswer, SVTHalted, sparse_vector
from dpkit.svt.engine import calibrate as _plan
from dpkit.svt.engine import diffs as _diffs
from dpkit.svt.engine import sample_numeric as _sample_numeric
from dpkit.svt.engine import sample_positives as _sample_positives
from dpkit.svt.engine import value_units as _value_units

from .fixtures import abs_inside_log_probs, code_of, pattern_code
from .helpers import (
    P_MIN,
    direct_pattern_log_probs,
    lattice_units,
    law_kwargs,
    max_pattern_loss,
    neighbour_pairs,
    pattern_log_probs,
    small_plan,
)

svt_module = sys.modules["dpkit.svt.sparse_vector"]
engine_module = sys.modules["dpkit.svt.engine"]  # the plan builders call engine.calibrate


def _pattern_counts(pos: np.ndarray, m: int, c: int) -> tuple[list[tuple], np.ndarray]:
    """Observed counts of each output pattern from (runs, c) position arrays."""
    pats = svt_patterns(m, c)
    index = {code_of(p, m): k for k, p in enumerate(pats)}
    above = np.zeros((pos.shape[0], m), dtype=bool)
    rows, cols = np.nonzero(pos >= 0)
    above[rows, pos[rows, cols]] = True
    tops = (pos >= 0).sum(axis=1)
    answered = np.where(tops == c, pos[np.arange(pos.shape[0]), c - 1] + 1, m)
    codes = pattern_code(above, answered)
    counts = np.bincount([index[int(x)] for x in codes], minlength=len(pats))
    return pats, counts


def _exact(pats, units, t_units, kw) -> np.ndarray:
    return np.exp([svt_log_prob(units, t_units, list(p), **kw) for p in pats])


# ---------------------------------------------------------------------------------------------
# the plan
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("cutoff", [1, 2, 7])
@pytest.mark.parametrize("share", [0.0, 0.25])
def test_plan_scales(cutoff, monotonic, share):
    eps, sens = 0.8, 3.0
    svt = SparseVector(eps, 0.0, cutoff=cutoff, sensitivity=sens, monotonic=monotonic, numeric_share=share,
                       rng=deterministic_source(1))
    g = lattice_granularity(sens)
    du = math.floor(sens / g) + 1
    e1, e2, e3 = (Fraction(x) for x in (svt.epsilon_threshold, svt.epsilon_queries, svt.epsilon_numeric))
    assert e1 > 0 and e2 > 0 and e1 + e2 + e3 <= Fraction(eps)
    assert float(e1 + e2 + e3) == pytest.approx(eps, rel=1e-15)
    assert float(e3) == pytest.approx(share * eps, rel=1e-15)
    ratio = float(cutoff if monotonic else 2 * cutoff) ** (2 / 3)
    assert float(e2 / e1) == pytest.approx(ratio, rel=1e-12)
    factor = cutoff if monotonic else 2 * cutoff
    t1, t2 = svt.threshold_scale / g, svt.query_scale / g
    assert Fraction(t1) >= du / e1 and Fraction(math.nextafter(t1, 0)) < du / e1  # rho drawn once: no c
    assert Fraction(t2) >= factor * du / e2 and Fraction(math.nextafter(t2, 0)) < factor * du / e2
    if share:
        t3 = svt.numeric_scale / g
        assert Fraction(t3) >= cutoff * du / e3 and Fraction(math.nextafter(t3, 0)) < cutoff * du / e3
        assert svt.numeric_scale == pytest.approx(cutoff * sens / float(e3), rel=2.0**-19)
    else:
        assert svt.numeric_scale is None
    assert svt.query_scale == pytest.approx(factor * sens / float(e2), rel=2.0**-19)
    assert svt.cutoff == cutoff and svt.remaining == cutoff and not svt.halted


def test_split_forms():
    svt = SparseVector(1.0, 0.0, cutoff=3, split=(1, 3, 1), rng=deterministic_source(1))
    assert (svt.epsilon_threshold, svt.epsilon_queries, svt.epsilon_numeric) == pytest.approx((0.2, 0.6, 0.2))
    svt = SparseVector(1.0, 0.0, cutoff=3, split=(1, 3), numeric_share=0.5, rng=deterministic_source(1))
    assert (svt.epsilon_threshold, svt.epsilon_queries, svt.epsilon_numeric) == pytest.approx((0.125, 0.375, 0.5))
    # AboveThreshold is the c = 1 case: same plan, same scales
    a = AboveThreshold(0.7, 0.0, rng=deterministic_source(2))
    b = SparseVector(0.7, 0.0, rng=deterministic_source(2))
    assert (a.threshold_scale, a.query_scale) == (b.threshold_scale, b.query_scale)


# ---------------------------------------------------------------------------------------------
# exact privacy (lattice, every pattern with <= c positives)
# ---------------------------------------------------------------------------------------------
def _numeric_worst(units, units_prime, t_units, pattern, kw) -> float:
    """Largest |log-ratio| over numeric answers at the ⊤ positions: each answer just below or just above both
    candidates' lattice values (the Laplace factor's log-ratio is extreme there)."""
    tops = [i for i, b in enumerate(pattern) if b]
    worst = 0.0
    for sides in itertools.product((-1, 1), repeat=len(tops)):
        out: list = list(pattern)
        for i, s in zip(tops, sides, strict=True):
            out[i] = float(max(units[i], units_prime[i]) + 1 if s > 0 else min(units[i], units_prime[i]) - 1)
        a = svt_log_prob(units, t_units, out, **kw)
        b = svt_log_prob(units_prime, t_units, out, **kw)
        worst = max(worst, abs(a - b))
    return worst


@pytest.mark.parametrize("numeric", [False, True])
@pytest.mark.parametrize("per_query", [False, True])
@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize(("epsilon", "sensitivity", "cutoff"), [(1.0, 1.0, 2), (0.3, 2.5, 3)])
def test_exact_privacy_random_pairs(epsilon, sensitivity, cutoff, monotonic, per_query, numeric):
    """Random neighbouring answer vectors, every output pattern with at most c ⊤ (and, with numeric answers,
    the extreme numeric values), both directions: the exact log-ratio never exceeds epsilon."""
    plan = _plan(epsilon, sensitivity, monotonic, cutoff=cutoff, numeric_share=0.3 if numeric else 0.0,
                 allow_numeric=True)
    kw = law_kwargs(plan)
    gen = np.random.default_rng(int(100 * epsilon) + 7 * cutoff + 2 * monotonic + per_query + 3 * numeric)
    worst = 0.0
    for q, q_prime, thr in neighbour_pairs(gen, sized(6, 60), sensitivity, monotonic, m_max=5,
                                           per_query_thresholds=per_query):
        assert np.all(np.abs(q_prime - q) <= sensitivity * (1 + 1e-12))
        u, up, tu = lattice_units(q, plan), lattice_units(q_prime, plan), lattice_units(thr, plan)
        worst = max(worst, max_pattern_loss(u, up, tu, cutoff, kw))
        if numeric:
            for p in svt_patterns(len(u), cutoff):
                if any(p):
                    worst = max(worst, _numeric_worst(u, up, tu, p, kw))
    assert worst <= epsilon + 1e-9


@pytest.mark.parametrize("monotonic", [False, True])
def test_exact_privacy_adversarial_pairs_are_tight(monotonic):
    """⊥^m ⊤^c on q = 0^(m+c) vs q' = Δ^m (-Δ)^c (general) or Δ^m 0^c (monotonic): the loss approaches but
    never exceeds epsilon (0.9998 at m = 16, c = 2)."""
    eps, c = 1.0, 2
    plan = _plan(eps, 1.0, monotonic, cutoff=c)
    kw = law_kwargs(plan)
    losses = []
    for m in (1, 4, 16):
        q = np.zeros(m + c)
        q_prime = np.r_[np.ones(m), np.full(c, 0.0 if monotonic else -1.0)]
        pattern = [False] * m + [True] * c
        losses.append(svt_log_prob(lattice_units(q, plan), 0, pattern, **kw)
                      - svt_log_prob(lattice_units(q_prime, plan), 0, pattern, **kw))
    assert max(losses) <= eps + 1e-9
    assert losses[-1] > 0.999 * eps


def test_exact_privacy_small_lattice_exhaustive():
    """On the unit lattice with small scales (t₁ = Δu/ε₁, t₂ = 2cΔu/ε₂, c = 2): every integer pair with m <= 2
    answers in [-3, 3] and every move in [-Δu, Δu], and random longer ones: the discrete proof holds exactly."""
    gen = np.random.default_rng(5)
    c = 2
    for d_units, eps in ((1, 1.0), (2, 0.6), (1, 3.0)):
        e1 = eps / (1 + (2 * c) ** (2 / 3))
        kw = {"threshold_scale": d_units / e1, "query_scale": 2 * c * d_units / (eps - e1)}
        pairs = [(q, np.add(q, s)) for m in (1, 2) for q in itertools.product(range(-3, 4), repeat=m)
                 for s in itertools.product(range(-d_units, d_units + 1), repeat=m)]
        for _ in range(sized(40, 400)):
            q = gen.integers(-4, 5, gen.integers(3, 5))
            pairs.append((q, q + gen.integers(-d_units, d_units + 1, q.size)))
        cache: dict = {}

        def law(q, kw=kw, cache=cache):
            key = tuple(int(v) for v in q)
            if key not in cache:
                cache[key] = pattern_log_probs(list(key), 0, c, kw)
            return cache[key]

        worst = max(max(abs(law(q)[p] - law(qp)[p]) for p in law(q)) for q, qp in pairs)
        assert worst <= eps + 1e-9, (d_units, eps, worst)


def _adversarial_loss(plan, c: int, m: int = 8) -> float:
    q, q_prime = np.zeros(m + c), np.r_[np.ones(m), -np.ones(c)]
    pattern = [False] * m + [True] * c
    kw = law_kwargs(plan)
    return svt_log_prob(lattice_units(q, plan), 0, pattern, **kw) - \
        svt_log_prob(lattice_units(q_prime, plan), 0, pattern, **kw)


@pytest.mark.parametrize("c", [2, 3])
def test_exact_check_bites(c):
    """Power: the same exact check flags monotonic noise on non-monotonic queries (~1.6 eps), query noise
    without the factor c (Lee–Clifton's mistake, 1.7 eps at c = 2), and answers moving by 2Δ."""
    eps = 1.0
    assert _adversarial_loss(_plan(eps, 1.0, cutoff=c), c) <= eps  # the shipped plan
    assert _adversarial_loss(_plan(eps, 1.0, True, cutoff=c), c) > 1.5 * eps
    plan = _plan(eps, 1.0, cutoff=c)
    assert _adversarial_loss(dataclasses.replace(plan, t_query=plan.t_query / c), c) > 1.5 * eps
    wide = _plan(eps, 1.0, cutoff=c)
    q, q_prime = np.zeros(8 + c), np.r_[2 * np.ones(8), -2 * np.ones(c)]
    kw = law_kwargs(wide)
    pattern = [False] * 8 + [True] * c
    assert svt_log_prob(lattice_units(q, wide), 0, pattern, **kw) - \
        svt_log_prob(lattice_units(q_prime, wide), 0, pattern, **kw) > 1.5 * eps


# ---------------------------------------------------------------------------------------------
# the sampled law is the exact law
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
def test_pattern_law_lattice(monotonic):
    """Positions of the ⊤ answers (c = 2) at lattice scale, chi-square against the exact law; power: 10 % too
    much query noise, or 1.5x the threshold noise, is rejected."""
    c = 2
    plan = _plan(1.0, 1.0, monotonic, cutoff=c)
    q, thr = np.array([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]), np.array([0.3, 0.0, -0.5, 0.0, 0.5, 1.0])
    diffs = _diffs(_value_units(q, plan.granularity), np.rint(thr / plan.granularity))
    n = sized(200_000, 2_000_000)
    pos = _sample_positives(diffs, plan, deterministic_source(50 + monotonic), n)
    pats, counts = _pattern_counts(pos, q.size, c)
    u, tu = lattice_units(q, plan), lattice_units(thr, plan)
    assert chi2_pvalue(counts, _exact(pats, u, tu, law_kwargs(plan))) > P_MIN
    for f1, f2 in ((1.0, 1.1), (1.0, 0.9), (1.5, 1.0)):
        wrong = dataclasses.replace(plan, t_threshold=plan.t_threshold * f1, t_query=plan.t_query * f2)
        assert chi2_pvalue(counts, _exact(pats, u, tu, law_kwargs(wrong))) < P_MIN


def test_pattern_law_small_lattice_ties_and_resampling():
    """With small scales ties are frequent: ``>=`` is checked against the off-by-one ``>``, and the threshold
    noise drawn once against Dwork–Roth's redraw after each ⊤."""
    c = 3
    plan = small_plan(1, 0.7, 1.2, cutoff=c)
    diffs = np.array([-2, -1, 0, -1, 1, 0, -3], dtype=np.int64)
    n = sized(100_000, 1_000_000)
    pos = _sample_positives(diffs, plan, deterministic_source(52), n)
    pats, counts = _pattern_counts(pos, diffs.size, c)
    kw = law_kwargs(plan)
    assert chi2_pvalue(counts, _exact(pats, diffs, 0, kw)) > P_MIN
    assert chi2_pvalue(counts, _exact(pats, diffs - 1, 0, kw)) < P_MIN  # u + nu > T + rho
    assert chi2_pvalue(counts, _exact(pats, diffs, 0, {**kw, "resample_threshold": True})) < P_MIN
    assert np.all((pos >= 0).sum(axis=1) <= c)
    valid = pos >= 0
    assert np.all(valid[:, 1:] <= valid[:, :-1])  # -1 padding last
    assert np.all((pos[:, 1:] > pos[:, :-1]) | ~valid[:, 1:])  # increasing positions


def test_long_stream_blocks():
    """A longer stream (several blocks of query noise, several ⊤ per block, c = 2) gives the exact law too,
    both vectorised over many runs and one run at a time (growing blocks)."""
    c = 2
    plan = small_plan(1, 1.0, 2.0, cutoff=c)
    diffs = np.full(40, -4, dtype=np.int64)
    diffs[[5, 18, 19, 33]] = 2
    direct, tail = direct_pattern_log_probs(diffs, c, plan.t_threshold, plan.t_query)  # independent oracle
    assert tail < -700
    pats = svt_patterns(diffs.size, c)
    exact = np.exp([direct[p] for p in pats])
    assert abs(math.fsum(exact) - 1) < 1e-12
    n = sized(20_000, 200_000)
    many = _sample_positives(diffs, plan, deterministic_source(53), n)
    rng = deterministic_source(54)
    one = np.concatenate([_sample_positives(diffs, plan, rng, 1) for _ in range(sized(2_000, 20_000))])
    for pos in (many, one):
        _pats, counts = _pattern_counts(pos, diffs.size, c)
        assert chi2_pvalue(counts, exact) > P_MIN


def test_interactive_object_law(monkeypatch):
    """The interactive object (one draw per call, per-query thresholds by argument) has the same law."""
    c = 2
    plan = small_plan(1, 0.7, 1.2, cutoff=c)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    q, thr = [-2.0, -1.0, 0.0, 1.0, -1.0], [0.0, -1.0, 0.0, 1.0, 0.0]
    rng = deterministic_source(54)
    n = sized(2_000, 20_000)
    pos = np.full((n, c), -1, dtype=np.int64)
    for r in range(n):
        svt = SparseVector(1.0, None, cutoff=c, rng=rng)
        for v, t in zip(q, thr, strict=True):
            svt.query(v, threshold=t)
            if svt.halted:
                break
        pos[r, :len(svt.positions)] = svt.positions
    pats, counts = _pattern_counts(pos, len(q), c)
    u, tu = np.array(q, dtype=np.int64), np.array(thr, dtype=np.int64)
    assert chi2_pvalue(counts, _exact(pats, u, tu, law_kwargs(plan))) > P_MIN
    assert chi2_pvalue(counts, _exact(pats, u - 1, tu, law_kwargs(plan))) < P_MIN


def test_functional_form_law(monkeypatch):
    c = 2
    plan = small_plan(1, 0.7, 1.2, cutoff=c)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    q = [-2.0, -1.0, 0.0, 1.0, -1.0]
    rng = deterministic_source(55)
    n = sized(2_000, 20_000)
    pos = np.full((n, c), -1, dtype=np.int64)
    for r in range(n):
        idx = sparse_vector(q, 0.0, 1.0, cutoff=c, rng=rng).value
        pos[r, :idx.size] = idx
    pats, counts = _pattern_counts(pos, len(q), c)
    assert chi2_pvalue(counts, _exact(pats, np.array(q, dtype=np.int64), 0, law_kwargs(plan))) > P_MIN


def test_numeric_answers_have_fresh_noise():
    """Numeric answers are u_i + eta with eta ~ DLap(t₃) independent of the comparison: at ⊤ answers on queries far
    below the threshold (where the comparison noise nu is large given ⊤), eta still follows DLap(t₃). Power:
    reusing nu (Alg 3) or a 10 % wrong t₃ is rejected."""
    c = 2
    plan = small_plan(1, 0.8, 1.0, cutoff=c, t3=1.5)
    u = np.array([-3, -4, -3, -2, -3], dtype=np.int64)
    n = sized(200_000, 2_000_000)
    pos = _sample_positives(u, plan, deterministic_source(56), n)
    vals = _sample_numeric(u.astype(float), pos, plan, deterministic_source(57))
    eta = (vals[pos >= 0] - u[pos[pos >= 0]]).astype(np.int64)
    assert eta.size > 1000
    support = np.arange(-12, 13)

    def dlap(t):  # cells: <= -13, -12..12, >= 13
        r = math.exp(-1 / t)
        p = (1 - r) / (1 + r) * np.exp(-np.abs(support) / t)
        tail = r**13 / (1 + r)
        return np.r_[tail, p, tail]

    counts = np.r_[np.count_nonzero(eta < -12), [np.count_nonzero(eta == k) for k in support],
                   np.count_nonzero(eta > 12)]
    assert chi2_pvalue(counts, dlap(1.5)) > P_MIN
    assert chi2_pvalue(counts, dlap(1.65)) < P_MIN
    # Alg 3 would print u + nu with nu >= T - u + rho >= ~3: its eta would be far from centred
    assert abs(float(np.mean(eta))) < 0.05


def test_accuracy_bound_holds():
    c = 2
    plan = _plan(1.0, 1.0, cutoff=c)
    svt = SparseVector(1.0, 0.0, cutoff=c, rng=deterministic_source(1))
    m, beta = 20, 0.05
    alpha = svt.accuracy(m, beta)
    assert alpha == pytest.approx(2 * plan.query_scale * math.log(2 * (m + 1) / beta), rel=1e-3)
    n = sized(20_000, 200_000)
    high = _sample_positives(_diffs(_value_units(np.full(m, alpha * 1.0001), plan.granularity), 0), plan,
                             deterministic_source(58), n)
    low = _sample_positives(_diffs(_value_units(np.full(m, -alpha * 1.0001), plan.granularity), 0), plan,
                            deterministic_source(59), n)
    bad_high = np.count_nonzero(~np.all(high == np.arange(c)[None, :], axis=1))  # a ⊥ before the c-th ⊤
    bad_low = np.count_nonzero(np.any(low >= 0, axis=1))  # any ⊤
    for bad in (bad_high, bad_low):
        assert stats.binomtest(int(bad), n, beta, alternative="greater").pvalue > P_MIN


# ---------------------------------------------------------------------------------------------
# the statistical auditor
# ---------------------------------------------------------------------------------------------
def _svt_mechanism(plan, m: int):
    def mech(data, rng, size):
        d = _diffs(_value_units(np.asarray(data, dtype=float), plan.granularity), 0)
        pos = _sample_positives(d, plan, rng, size)
        c = plan.cutoff
        above = np.zeros((size, m), dtype=bool)
        rows, cols = np.nonzero(pos >= 0)
        above[rows, pos[rows, cols]] = True
        tops = (pos >= 0).sum(axis=1)
        answered = np.where(tops == c, pos[np.arange(size), c - 1] + 1, m)
        return pattern_code(above, answered)

    return mech


def test_auditor_does_not_flag_sparse_vector():
    eps, c, m = 1.0, 2, 4
    plan = _plan(eps, 1.0, cutoff=c)
    d, d_prime = np.zeros(m + c), np.r_[np.ones(m), -np.ones(c)]  # a near-tight pair (exact loss 0.83)
    res = audit(_svt_mechanism(plan, m + c), d, d_prime, trials=sized(200_000, 2_000_000), vectorized=True,
                claimed_epsilon=eps, confidence=1 - 1e-7, rng=deterministic_source(60))
    assert not res.flagged
    assert res.epsilon_lower_bound > 0.3 * eps


def test_auditor_flags_c_free_query_noise():
    """Power: the same pair with query noise Lap(2Δ/ε₂) (no c) is flagged."""
    eps, c, m = 1.0, 3, 4
    plan = _plan(eps, 1.0, cutoff=c)
    wrong = dataclasses.replace(plan, t_query=plan.t_query / c)  # NON-PRIVATE
    res = audit(_svt_mechanism(wrong, m + c), np.zeros(m + c), np.r_[np.ones(m), -np.ones(c)],
                trials=sized(200_000, 2_000_000), vectorized=True, claimed_epsilon=eps, confidence=1 - 1e-7,
                rng=deterministic_source(61))
    assert res.flagged


# ---------------------------------------------------------------------------------------------
# the error check
# ---------------------------------------------------------------------------------------------
def test_error_check_law(monkeypatch):
    """error_check(q̃, q) answers as a query on |q̃ - q| (noise outside |·|): the position of the first ⊤
    over estimates that are exact (error 0) matches that law; the noise-inside check |q̃ - q + nu| >= T + rho,
    whose false-alarm rate at zero error is much higher, is rejected."""
    c = 1
    plan = small_plan(1, 1.0, 2.0, cutoff=c)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    truth = [3.0, -2.0, 5.0, 1.0]
    est = [3.0, -2.0, 5.0, 1.0]  # error 0 everywhere
    thr = 2
    rng = deterministic_source(62)
    n = sized(4_000, 40_000)
    first = np.empty(n, dtype=np.int64)
    for r in range(n):
        svt = SparseVector(1.0, float(thr), cutoff=c, rng=rng)
        first[r] = next((i for i, (e, t) in enumerate(zip(est, truth, strict=True)) if svt.error_check(e, t)), -1)
    counts = np.bincount(np.where(first < 0, len(truth), first), minlength=len(truth) + 1)
    pats = svt_patterns(len(truth), 1)
    order = [tuple([False] * k + [True]) for k in range(len(truth))] + [tuple([False] * len(truth))]
    right = np.exp([svt_log_prob([0] * len(truth), thr, list(p), **law_kwargs(plan)) for p in order])
    assert chi2_pvalue(counts, right) > P_MIN
    inside = abs_inside_log_probs(np.zeros(len(truth), dtype=np.int64), thr, c, plan.t_threshold, plan.t_query)
    wrong = np.exp([inside[p] for p in order])
    assert wrong[0] > 1.3 * right[0]  # more false alarms at zero error
    assert chi2_pvalue(counts, wrong) < P_MIN
    assert set(pats) == set(order)


def test_error_check_reports_the_noisy_true_value(monkeypatch):
    plan = small_plan(1, 1.0, 2.0, cutoff=1, t3=1.5)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    rng = deterministic_source(63)
    eta = []
    for _ in range(sized(3_000, 30_000)):
        svt = SparseVector(1.0, 0.0, cutoff=1, rng=rng)
        ans = svt.error_check(40.0, 10.0)  # error 30: always ⊤
        assert ans.above and ans.index == 0
        eta.append(int(ans.value - 10.0))
    eta = np.array(eta)
    support = np.arange(-10, 11)
    p = np.exp(-np.abs(support) / 1.5)
    assert chi2_pvalue([np.count_nonzero(eta == k) for k in support], p / p.sum()) > P_MIN


def test_error_check_refuses_monotonic():
    src = CountingSource(64)
    svt = SparseVector(1.0, 0.0, cutoff=2, monotonic=True, rng=src)
    before = src.consumed
    with pytest.raises(InvalidParameter) as info:
        svt.error_check(1.0, 2.0)
    assert info.value.param == "monotonic" and src.consumed == before and svt.answered == 0
    at = AboveThreshold(1.0, 0.0, rng=deterministic_source(1))
    assert at.error_check(100.0, 0.0) is True and at.halted
    for bad in ({"estimate": math.nan}, {"true_value": "x"}):
        svt = SparseVector(1.0, 0.0, rng=src)
        kw = {"estimate": 1.0, "true_value": 2.0, **bad}
        before = src.consumed
        with pytest.raises(DPKitError) as info:
            svt.error_check(kw["estimate"], kw["true_value"])
        assert info.value.param == next(iter(bad)) and src.consumed == before


# ---------------------------------------------------------------------------------------------
# contract: charge once up front, halting, thresholds, validation
# ---------------------------------------------------------------------------------------------
def test_charged_once_before_threshold_noise_and_halts_after_c():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(65)
    at_charge = watch_charges(acct, src)
    svt = SparseVector(0.6, 5.0, cutoff=2, numeric_share=0.2, accountant=acct, rng=src)
    assert at_charge == [0] and src.consumed > 0
    assert acct.spent == PureDP(0.6) and len(acct.receipts) == 1
    r = acct.receipts[0]
    assert r.mechanism == "sparse_vector" and r.cost == PureDP(0.6) and r.secure is False
    assert r.params["cutoff"] == 2 and r.params["epsilon_numeric"] == pytest.approx(0.12)
    assert svt.receipt is r and svt.cost == PureDP(0.6)
    a1 = svt.query(-1e6)
    assert isinstance(a1, SVTAnswer) and not a1 and a1.value is None and a1.index == 0
    a2 = svt.query(1e6)
    assert a2 and a2.index == 1 and a2.value == pytest.approx(1e6, abs=100) and svt.remaining == 1
    assert not svt.halted and svt.positions == (1,)
    a3 = svt.query(2e6, threshold=1e7)  # per-call threshold
    assert not a3
    a4 = svt.query(3e6)
    assert a4 and svt.halted and svt.remaining == 0 and svt.positions == (1, 3) and svt.answered == 4
    assert "⊤" in repr(a4) and "⊥" in repr(a3)
    before = src.consumed
    with pytest.raises(SVTHalted) as info:
        svt.query(0.0)
    assert isinstance(info.value, DPKitError) and info.value.param == "query"
    with pytest.raises(SVTHalted):
        svt.error_check(0.0, 1.0)
    assert src.consumed == before and len(acct.receipts) == 1 and at_charge == [0]
    # an exhausted accountant: refused, nothing drawn
    with pytest.raises(BudgetExceeded):
        SparseVector(0.6, 5.0, cutoff=2, accountant=acct, rng=src)
    with pytest.raises(BudgetExceeded):
        sparse_vector([1.0, 2.0], 0.0, 0.6, cutoff=2, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


def test_per_query_threshold_vector_and_none():
    src = CountingSource(66)
    svt = SparseVector(1.0, [0.0, 1e6, 0.0], cutoff=2, rng=src)
    assert list(svt.threshold) == [0.0, 1e6, 0.0]
    assert svt.query(1e5) and not svt.query(1e5) and svt.query(1e5)
    assert svt.halted
    svt = SparseVector(1.0, [0.0], cutoff=3, rng=src)
    assert svt.query(1e5)
    before = src.consumed
    with pytest.raises(InvalidParameter) as info:  # the vector is used up
        svt.query(1.0)
    assert info.value.param == "threshold" and src.consumed == before and svt.answered == 1
    assert svt.query(1e5, threshold=0.0)  # still usable with an explicit threshold
    svt = SparseVector(1.0, None, cutoff=2, rng=src)
    with pytest.raises(InvalidParameter) as info:
        svt.query(1.0)
    assert info.value.param == "threshold"
    before = src.consumed
    for bad, err in ((math.nan, InvalidParameter), (math.inf, InvalidParameter), ("1", WrongType)):
        with pytest.raises(err) as info:
            svt.query(1.0, threshold=bad)
        assert info.value.param == "threshold"
    assert src.consumed == before and svt.answered == 0
    assert not svt.query(-1e6, threshold=0.0)


def test_functional_form_release():
    acct = Accountant(PureDP(2.0))
    src = CountingSource(67)
    rel = sparse_vector([-50.0, 60.0, -40.0, 70.0, 80.0], 10.0, 1.0, cutoff=2, numeric_share=0.5,
                        monotonic=True, accountant=acct, rng=src)
    assert rel.value.tolist() == [1, 3] and rel.value.dtype == np.int64 and rel.mechanism == "sparse_vector"
    assert rel.parts["answers"].shape == (2,)
    assert rel.parts["answers"] == pytest.approx([60.0, 70.0], abs=25)
    assert rel.cost == PureDP(1.0) and acct.spent == PureDP(1.0) and rel.receipt is acct.receipts[-1]
    assert rel.params["queries"] == 5 and rel.params["cutoff"] == 2 and rel.params["monotonic"] is True
    with pytest.raises(NoInterval):
        rel.interval()
    rel = sparse_vector([100.0, -100.0, 100.0], [0.0, -200.0, 1e6], 1.0, cutoff=3, rng=deterministic_source(1))
    assert rel.value.tolist() == [0, 1] and "answers" not in rel.parts
    assert sparse_vector([], 0.0, 1.0, cutoff=2, rng=deterministic_source(1)).value.size == 0


BAD_CONSTRUCTION = [
    ({"cutoff": 0}, InvalidParameter, "cutoff"),
    ({"cutoff": -2}, InvalidParameter, "cutoff"),
    ({"cutoff": 1.5}, WrongType, "cutoff"),
    ({"cutoff": 2.0}, WrongType, "cutoff"),
    ({"cutoff": True}, WrongType, "cutoff"),
    ({"cutoff": "2"}, WrongType, "cutoff"),
    ({"cutoff": 10**18}, InvalidParameter, "epsilon"),  # noise beyond the samplers' range
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": math.nan}, InvalidParameter, "epsilon"),
    ({"threshold": math.nan}, InvalidParameter, "threshold"),
    ({"threshold": -math.inf}, InvalidParameter, "threshold"),
    ({"threshold": [0.0, math.nan]}, InvalidParameter, "threshold"),
    ({"threshold": [[0.0, 1.0]]}, InvalidParameter, "threshold"),
    ({"threshold": ["a", "b"]}, WrongType, "threshold"),
    ({"threshold": "3"}, WrongType, "threshold"),
    ({"sensitivity": 0.0}, InvalidParameter, "sensitivity"),
    ({"monotonic": 1}, WrongType, "monotonic"),
    ({"split": (1.0,)}, WrongType, "split"),
    ({"split": (1.0, 2.0, 3.0, 4.0)}, WrongType, "split"),
    ({"split": (0.0, 1.0)}, InvalidParameter, "split"),
    ({"split": (1.0, -1.0)}, InvalidParameter, "split"),
    ({"split": (1.0, 1.0, 0.0)}, InvalidParameter, "split"),
    ({"split": (1.0, 1.0, -0.5)}, InvalidParameter, "split"),
    ({"split": (1.0, math.nan, 1.0)}, InvalidParameter, "split"),
    ({"split": (1.0, 1e-320)}, InvalidParameter, "split"),
    ({"numeric_share": 1.0}, InvalidParameter, "numeric_share"),
    ({"numeric_share": -0.1}, InvalidParameter, "numeric_share"),
    ({"numeric_share": math.nan}, InvalidParameter, "numeric_share"),
    ({"numeric_share": 1e-320}, InvalidParameter, "numeric_share"),
    ({"numeric_share": "0.5"}, WrongType, "numeric_share"),
    ({"numeric_share": 0.5, "split": (1.0, 1.0, 1.0)}, InvalidParameter, "numeric_share"),
    ({"accountant": "acct"}, WrongType, "accountant"),
    ({"description": 5}, WrongType, "description"),
]


@pytest.mark.parametrize(("override", "error", "param"), BAD_CONSTRUCTION)
def test_bad_construction_charges_and_draws_nothing(override, error, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(68)
    kw = {"epsilon": 1.0, "threshold": 0.0, "cutoff": 2, "accountant": acct, "rng": src}
    kw.update(override)
    eps, thr = kw.pop("epsilon"), kw.pop("threshold")
    with pytest.raises(error) as info:
        SparseVector(eps, thr, **kw)
    assert info.value.param == param
    assert "nan" not in str(info.value).lower() and "1e+18" not in str(info.value)
    assert src.consumed == 0 and acct.receipts == () and acct.spent == PureDP(0.0)
    if np.ndim(thr) == 1 and np.size(thr) == 2 and param == "threshold" and error is InvalidParameter:
        return
    with pytest.raises(error) as info:
        sparse_vector([1.0, 2.0], thr, eps, **kw)
    assert info.value.param == param
    assert src.consumed == 0 and acct.receipts == ()


@pytest.mark.parametrize(("values", "threshold", "error", "param"), [
    ([1.0, math.nan], 0.0, InvalidData, "values"),
    ([math.inf], 0.0, InvalidData, "values"),
    ([[1.0, 2.0]], 0.0, WrongType, "values"),
    (None, 0.0, WrongType, "values"),
    ([1.0, 2.0], [0.0], InvalidParameter, "threshold"),  # one threshold per value
    ([1.0, 2.0], [0.0, math.nan], InvalidParameter, "threshold"),
    ([1.0, 2.0], None, WrongType, "threshold"),
])
def test_bad_values_functional(values, threshold, error, param):
    acct = Accountant(PureDP(1.0))
    src = CountingSource(69)
    with pytest.raises(error) as info:
        sparse_vector(values, threshold, 1.0, cutoff=2, accountant=acct, rng=src)
    assert info.value.param == param
    assert src.consumed == 0 and acct.receipts == ()


@pytest.mark.parametrize(("value", "error"), [(math.nan, InvalidParameter), (-math.inf, InvalidParameter),
                                               (None, WrongType), ("3", WrongType), (True, WrongType),
                                               (np.array([1.0, 2.0]), WrongType)])
def test_bad_query_values(value, error):
    src = CountingSource(70)
    svt = SparseVector(1.0, 0.0, cutoff=2, rng=src)
    before = src.consumed
    with pytest.raises(error) as info:
        svt.query(value)
    assert info.value.param == "value" and "3" not in str(info.value)
    assert src.consumed == before and svt.answered == 0 and not svt.halted
    assert not svt.query(-1e6)  # still usable


def test_copy_and_pickle_refused():
    svt = SparseVector(1.0, 0.0, cutoff=3, rng=deterministic_source(3))
    for attempt in (lambda: copy.copy(svt), lambda: copy.deepcopy(svt), lambda: pickle.dumps(svt)):
        with pytest.raises(WrongType):
            attempt()
    assert "running" in repr(svt) and "rho" not in repr(svt) and "cutoff=3" in repr(svt)
