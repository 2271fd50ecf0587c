"""AboveThreshold (sparse vector technique, cutoff 1): exact privacy, exact law, auditor, contract.

The exact law of the first above-threshold position is computed in closed form (no truncation) by
:mod:`dpkit.audit.svt_law` (the calculator first written here, now public and generalised to cutoff c, numeric
answers, resampled thresholds and continuous Laplace). It is cross-checked against a direct sum over ``z`` with
a rigorous tail bound (``dpkit.audit.exact.DiscreteLaplace``) and against the total probability 1.

NON-PRIVATE FIXTURES (tests only): "monotonic noise on non-monotonic queries" and "no query noise"
(Lyu–Su–Li Alg. 5 / Li et al. Alg. 16) are built from the private sampler with a wrong plan; the exact
calculator or the auditor must flag them.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import math
import pickle
import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from conftest import sized
from dpkit.audit import audit
from dpkit.audit.exact import DiscreteLaplace
from dpkit.audit.svt_law import svt_log_prob
from dpkit.audit.testing import CountingSource, chi2_pvalue, watch_charges
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import BudgetExceeded, DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms import NoInterval
from dpkit.noise import deterministic_source, lattice_granularity
from dpkit.svt import AboveThreshold, SVTHalted, above_threshold
from dpkit.svt.engine import calibrate as _plan
from dpkit.svt.engine import diffs as _diffs
from dpkit.svt.engine import sample_first_above as _sample_first_above
from dpkit.svt.engine import threshold_units as _threshold_units
from dpkit.svt.engine import value_units as _value_units

P_MIN = 1e-7
svt_module = sys.modules["dpkit.svt.sparse_vector"]  # the package attribute is the function
engine_module = sys.modules["dpkit.svt.engine"]  # the plan builders call engine.calibrate


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def first_above_log_probs(diffs, t1: float, t2: float) -> np.ndarray:
    """``ln P[first ⊤ at k]`` for k = 0..m-1, then ``ln P[no ⊤]``; ``diffs[i] = u_i - T_u``. Closed form, no
    truncation: :func:`dpkit.audit.svt_law.svt_log_prob` (moved there from this file and generalised)."""
    d = [int(x) for x in diffs]
    m = len(d)
    kw = {"threshold_scale": t1, "query_scale": t2}
    out = [svt_log_prob(d, 0, [False] * k + [True], **kw) for k in range(m)]
    out.append(svt_log_prob(d, 0, [False] * m, **kw))
    return np.array(out)


def direct_log_probs(diffs, t1: float, t2: float) -> tuple[np.ndarray, float]:
    """The same by direct summation over ``|z| <= Z``; also returns ``ln P[|rho| > Z]``, a rigorous bound
    on what the truncation leaves out of every probability (all other factors are <= 1)."""
    rho, nu = DiscreteLaplace(0, t1), DiscreteLaplace(0, t2)
    zmax = math.ceil(t1 * 800)
    z = np.arange(-zmax, zmax + 1, dtype=float)
    acc = rho.logpmf(z)
    out = []
    cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for d in diffs:
        a = -int(d)
        if a not in cache:  # P[nu > a+z-1] = P[nu >= a+z], P[nu <= a+z-1]
            cache[a] = (nu.logsf(a + z - 1), nu.logcdf(a + z - 1))
        log_ge, log_lt = cache[a]
        out.append(float(logsumexp(acc + log_ge)))
        acc = acc + log_lt
    out.append(float(logsumexp(acc)))
    tail = math.log(2.0) - (zmax + 1) / t1 - math.log1p(math.exp(-1.0 / t1))
    return np.array(out), tail


def lattice_diffs(queries, threshold: float, plan) -> np.ndarray:
    """What the mechanism compares: rounded answers minus the rounded threshold, in lattice steps
    (recomputed here from the documented rule, not taken from the implementation)."""
    g = plan.granularity
    u = np.rint(np.asarray(queries, dtype=float) / g)
    return (u - np.rint(threshold / g)).astype(np.int64)


def max_loss(q, q_prime, threshold: float, plan) -> float:
    a = first_above_log_probs(lattice_diffs(q, threshold, plan), plan.t_threshold, plan.t_query)
    b = first_above_log_probs(lattice_diffs(q_prime, threshold, plan), plan.t_threshold, plan.t_query)
    return float(np.max(np.abs(a - b)))


def small_plan(d_units: int, t1: float, t2: float):
    """A plan on the unit lattice (g = 1) with small scales, where the discreteness is visible."""
    base = _plan(1.0)
    return dataclasses.replace(base, granularity=1.0, d_units=d_units, t_threshold=t1, t_query=t2)


def positions(samples: np.ndarray, m: int) -> np.ndarray:
    return np.bincount(np.where(samples < 0, m, samples), minlength=m + 1)


# ---------------------------------------------------------------------------------------------
# the oracle itself
# ---------------------------------------------------------------------------------------------
def test_oracle_matches_direct_sum_and_sums_to_one():
    gen = np.random.default_rng(11)
    for _ in range(12):
        t1, t2 = gen.uniform(0.3, 4.0), gen.uniform(0.3, 6.0)
        d = gen.integers(-8, 9, gen.integers(1, 6))
        closed = first_above_log_probs(d, t1, t2)
        direct, tail = direct_log_probs(d, t1, t2)
        assert tail < -700
        np.testing.assert_allclose(closed, direct, rtol=0, atol=1e-12)
        assert abs(math.fsum(np.exp(closed)) - 1.0) < 1e-12
    # at lattice scale (t ~ 10^6 steps) the closed form still sums to one
    plan = _plan(0.7)
    lp = first_above_log_probs(lattice_diffs([-3.0, 0.0, 2.5, -1.0], 0.25, plan), plan.t_threshold, plan.t_query)
    assert abs(math.fsum(np.exp(lp)) - 1.0) < 1e-12


# ---------------------------------------------------------------------------------------------
# the plan: lattice, sensitivity in steps, scales, split
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (0.1, 3.0), (2.5, 1e-3), (0.3, 7.5e6)])
def test_plan_scales(epsilon, sensitivity, monotonic):
    svt = AboveThreshold(epsilon, 0.0, sensitivity=sensitivity, monotonic=monotonic, rng=deterministic_source(1))
    g = lattice_granularity(sensitivity)
    assert svt.granularity == g
    d_units = math.floor(sensitivity / g) + 1
    e1, e2 = Fraction(svt.epsilon_threshold), Fraction(svt.epsilon_queries)
    assert e1 > 0 and e2 > 0 and e1 + e2 <= Fraction(epsilon)
    assert float(e1 + e2) == pytest.approx(epsilon, rel=1e-15)
    ratio = 1.0 if monotonic else 2.0 ** (2.0 / 3.0)
    assert float(e2 / e1) == pytest.approx(ratio, rel=1e-12)
    t1, t2 = svt.threshold_scale / g, svt.query_scale / g
    factor = 1 if monotonic else 2
    assert Fraction(t1) >= d_units / e1 and Fraction(math.nextafter(t1, 0)) < d_units / e1
    assert Fraction(t2) >= factor * d_units / e2 and Fraction(math.nextafter(t2, 0)) < factor * d_units / e2
    # the scales exceed the textbook Δ/ε₁ and 2Δ/ε₂ (Δ/ε₂ monotonic) by at most 2^-20 relative
    assert svt.threshold_scale == pytest.approx(sensitivity / float(e1), rel=2.0**-19)
    assert svt.query_scale == pytest.approx(factor * sensitivity / float(e2), rel=2.0**-19)
    assert svt.cutoff == 1 and svt.monotonic is monotonic and svt.sensitivity == sensitivity


def test_split_override():
    svt = AboveThreshold(1.0, 0.0, split=(1, 3), rng=deterministic_source(1))
    assert svt.epsilon_threshold == pytest.approx(0.25, rel=1e-15)
    assert svt.epsilon_queries == pytest.approx(0.75, rel=1e-15)
    assert Fraction(svt.epsilon_threshold) + Fraction(svt.epsilon_queries) <= 1


# ---------------------------------------------------------------------------------------------
# (a) exact privacy
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (0.3, 2.5), (3.0, 0.01)])
def test_exact_privacy_random_pairs(epsilon, sensitivity, monotonic):
    """Random neighbouring answer vectors (|q_i - q'_i| <= Δ; one direction when monotonic), every output
    pattern ⊥^k ⊤ and ⊥^m, both directions: the exact log-ratio never exceeds epsilon."""
    plan = _plan(epsilon, sensitivity, monotonic)
    gen = np.random.default_rng(int(epsilon * 100 + sensitivity * 10 + monotonic))
    worst = 0.0
    for trial in range(sized(25, 150)):
        m = int(gen.integers(1, 7))
        threshold = float(gen.uniform(-2, 2)) * sensitivity
        q = threshold + gen.uniform(-4, 4, m) * sensitivity
        if trial % 2:  # extreme moves: every answer changes by exactly ±Δ
            step = gen.choice([-1.0, 1.0], m)
        else:
            step = gen.uniform(-1.0, 1.0, m)
        if monotonic:
            step = np.abs(step) * gen.choice([-1.0, 1.0])
        q_prime = q + step * sensitivity
        assert np.all(np.abs(q_prime - q) <= sensitivity * (1 + 1e-12))
        worst = max(worst, max_loss(q, q_prime, threshold, plan))
    assert worst <= epsilon + 1e-9


@pytest.mark.parametrize("monotonic", [False, True])
def test_exact_privacy_adversarial_pairs_are_tight(monotonic):
    """The pattern ⊥^m ⊤ on q = 0^(m+1) vs q' = Δ^m (-Δ) (general noise) or q' = Δ^m 0 (monotonic noise,
    a monotonic pair): the loss approaches but never exceeds epsilon; all-⊥ outputs approach but never
    exceed epsilon₁ (Lemma 1)."""
    eps = 1.0
    plan = _plan(eps, 1.0, monotonic)
    losses = []
    for m in (1, 2, 4, 8):
        q = np.zeros(m + 1)
        q_prime = np.r_[np.ones(m), 0.0 if monotonic else -1.0]
        losses.append(max_loss(q, q_prime, 0.0, plan))
    assert max(losses) <= eps + 1e-9
    assert losses[-1] > 0.99 * eps  # tight: 0.9945 (general), 0.9963 (monotonic) at m = 8, -> epsilon
    # all-⊥ outputs cost at most ε₁ (Lemma 1), and that is tight too
    lp = first_above_log_probs(lattice_diffs(np.zeros(12), 0.0, plan), plan.t_threshold, plan.t_query)
    lpp = first_above_log_probs(lattice_diffs(np.ones(12), 0.0, plan), plan.t_threshold, plan.t_query)
    assert lp[-1] - lpp[-1] <= plan.epsilon_threshold + 1e-9
    assert lp[-1] - lpp[-1] > 0.9 * plan.epsilon_threshold


def test_exact_privacy_small_lattice_exhaustive():
    """On the unit lattice with small scales (t = Δu/ε₁, 2Δu/ε₂) every integer pair with m <= 2 answers
    in [-3, 3] and every move in [-Δu, Δu]: the discrete-noise proof holds exactly."""
    gen = np.random.default_rng(3)
    for d_units, eps, exhaustive in ((1, 1.0, 2), (2, 0.6, 1), (1, 3.0, 1)):
        e1, e2 = eps / (1 + 2 ** (2 / 3)), eps * 2 ** (2 / 3) / (1 + 2 ** (2 / 3))
        t1, t2 = d_units / e1, 2 * d_units / e2
        pairs = [(q, np.add(q, step)) for m in range(1, exhaustive + 1)
                 for q in itertools.product(range(-3, 4), repeat=m)
                 for step in itertools.product(range(-d_units, d_units + 1), repeat=m)]
        for _ in range(sized(60, 600)):  # and random longer ones
            q = gen.integers(-4, 5, gen.integers(2, 5))
            pairs.append((q, q + gen.integers(-d_units, d_units + 1, q.size)))
        law = functools.lru_cache(maxsize=None)(lambda q, t1=t1, t2=t2: first_above_log_probs(q, t1, t2))
        worst = 0.0
        for q, q_prime in pairs:
            loss = np.abs(law(tuple(int(v) for v in q)) - law(tuple(int(v) for v in q_prime)))
            worst = max(worst, float(np.max(loss)))
        assert worst <= eps + 1e-9, (d_units, eps, worst)


def test_exact_check_bites_monotonic_noise_on_non_monotonic_queries():
    """Declaring monotonic=True for answers that move in both directions halves the query noise; the
    exact calculator shows the loss reaching ~1.5 epsilon."""
    eps = 1.0
    plan = _plan(eps, 1.0, monotonic=True)
    q = np.zeros(9)
    q_prime = np.r_[np.ones(8), -1.0]
    loss = max_loss(q, q_prime, 0.0, plan)
    assert loss > 1.4 * eps
    # the same answers are fine with the general noise
    assert max_loss(q, q_prime, 0.0, _plan(eps, 1.0, monotonic=False)) <= eps + 1e-9


def test_exact_check_bites_wrong_sensitivity():
    """Answers that move by 2Δ while Δ was declared: loss above epsilon."""
    plan = _plan(1.0, 1.0)
    assert max_loss(np.zeros(9), np.r_[2 * np.ones(8), -2.0], 0.0, plan) > 1.5


# ---------------------------------------------------------------------------------------------
# (b) the sampled law is the exact law
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("monotonic", [False, True])
def test_first_position_law_lattice(monotonic):
    plan = _plan(1.0, 1.0, monotonic)
    q, threshold = np.array([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0]), 0.3
    diffs = _diffs(_value_units(q, plan.granularity), _threshold_units(threshold, plan.granularity))
    np.testing.assert_array_equal(diffs, lattice_diffs(q, threshold, plan))
    n = sized(200_000, 2_000_000)
    counts = positions(_sample_first_above(diffs, plan, deterministic_source(5 + monotonic), n), q.size)
    exact = np.exp(first_above_log_probs(diffs, plan.t_threshold, plan.t_query))
    assert chi2_pvalue(counts, exact) > P_MIN
    # power: 10 % too much query noise, or 1.5x the threshold noise, is rejected
    for f1, f2 in ((1.0, 1.1), (1.0, 0.9), (1.5, 1.0)):
        wrong = np.exp(first_above_log_probs(diffs, plan.t_threshold * f1, plan.t_query * f2))
        assert chi2_pvalue(counts, wrong) < P_MIN


def test_first_position_law_small_lattice_ties():
    """With small scales ties u + nu == T + rho are frequent: ``>=`` (answer ⊤ on a tie) is checked
    against the off-by-one variant ``>``."""
    plan = small_plan(1, 0.5, 1.0)
    diffs = np.array([-2, -1, -1, 0, 1], dtype=np.int64)
    n = sized(100_000, 1_000_000)
    counts = positions(_sample_first_above(diffs, plan, deterministic_source(8), n), diffs.size)
    exact = np.exp(first_above_log_probs(diffs, 0.5, 1.0))
    assert chi2_pvalue(counts, exact) > P_MIN
    strict = np.exp(first_above_log_probs(diffs - 1, 0.5, 1.0))  # u + nu > T + rho
    assert chi2_pvalue(counts, strict) < P_MIN


def test_interactive_object_law(monkeypatch):
    """The interactive object (one draw per call) has the same law, on the small lattice where the
    tie rule matters."""
    plan = small_plan(1, 0.5, 1.0)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    q = [-2.0, -1.0, -1.0, 0.0, 1.0]
    rng = deterministic_source(9)
    n = sized(1_000, 20_000)
    pos = np.empty(n, dtype=np.int64)
    for r in range(n):
        svt = AboveThreshold(1.0, 0.0, rng=rng)
        for v in q:
            if svt.query(v):
                break
        pos[r] = -1 if svt.position is None else svt.position
    counts = positions(pos, len(q))
    exact = np.exp(first_above_log_probs(np.array(q, dtype=np.int64), 0.5, 1.0))
    assert chi2_pvalue(counts, exact) > P_MIN
    strict = np.exp(first_above_log_probs(np.array(q, dtype=np.int64) - 1, 0.5, 1.0))
    assert chi2_pvalue(counts, strict) < P_MIN


def test_functional_form_law(monkeypatch):
    plan = small_plan(1, 0.5, 1.0)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    q = [-2.0, -1.0, -1.0, 0.0, 1.0]
    rng = deterministic_source(10)
    n = sized(1_000, 20_000)
    pos = np.array([-1 if (v := above_threshold(q, 0.0, 1.0, rng=rng).value) is None else v for _ in range(n)])
    counts = positions(pos, len(q))
    exact = np.exp(first_above_log_probs(np.array(q, dtype=np.int64), 0.5, 1.0))
    assert chi2_pvalue(counts, exact) > P_MIN


def test_long_stream_blocks():
    """A long stream (blocks of query noise) gives the exact law too, including 'no ⊤ at all'."""
    plan = small_plan(1, 1.0, 2.0)
    diffs = np.full(300, -6, dtype=np.int64)
    diffs[250] = 3
    n = sized(20_000, 200_000)
    counts = positions(_sample_first_above(diffs, plan, deterministic_source(12), n), diffs.size)
    direct, tail = direct_log_probs(diffs, 1.0, 2.0)
    assert tail < -700
    assert chi2_pvalue(counts, np.exp(direct)) > P_MIN


def test_accuracy_bound_holds():
    plan = _plan(1.0, 1.0)
    svt = AboveThreshold(1.0, 0.0, rng=deterministic_source(1))
    m, beta = 20, 0.05
    alpha = svt.accuracy(m, beta)
    assert alpha == pytest.approx(2 * plan.query_scale * math.log(2 * (m + 1) / beta), rel=1e-3)
    n = sized(20_000, 200_000)
    # every answer just above T + alpha: a ⊥ anywhere would violate the statement
    high = _sample_first_above(_diffs(_value_units(np.full(m, alpha * 1.0001), plan.granularity), 0),
                               plan, deterministic_source(13), n)
    # every answer just below T - alpha: any ⊤ violates it
    low = _sample_first_above(_diffs(_value_units(np.full(m, -alpha * 1.0001), plan.granularity), 0),
                              plan, deterministic_source(14), n)
    for bad in (np.count_nonzero(high != 0), np.count_nonzero(low >= 0)):
        assert stats.binomtest(int(bad), n, beta, alternative="greater").pvalue > P_MIN
    assert above_threshold([1.0] * m, 0.0, 1.0, rng=deterministic_source(2)).params["alpha_95"] == \
        pytest.approx(alpha, rel=1e-15)


# ---------------------------------------------------------------------------------------------
# (c) the statistical auditor
# ---------------------------------------------------------------------------------------------
def _svt_mechanism(plan, threshold: float = 0.0):
    def mech(data, rng, size):
        d = _diffs(_value_units(np.asarray(data, dtype=float), plan.granularity),
                   _threshold_units(threshold, plan.granularity))
        return _sample_first_above(d, plan, rng, size)

    return mech


def test_auditor_does_not_flag_above_threshold():
    eps = 1.0
    plan = _plan(eps, 1.0)
    d, d_prime = np.zeros(9), np.r_[np.ones(8), -1.0]  # the near-tight pair above
    res = audit(_svt_mechanism(plan), d, d_prime, trials=sized(200_000, 2_000_000), vectorized=True,
                claimed_epsilon=eps, confidence=1 - 1e-7, rng=deterministic_source(21))
    assert not res.flagged
    assert res.epsilon_lower_bound > 0.5 * eps  # the auditor does see most of the loss


def test_auditor_flags_monotonic_noise_on_non_monotonic_queries():
    eps = 2.0
    plan = _plan(eps, 1.0, monotonic=True)  # NON-PRIVATE for these answers
    res = audit(_svt_mechanism(plan), np.zeros(5), np.r_[np.ones(4), -1.0], trials=sized(200_000, 2_000_000),
                vectorized=True, claimed_epsilon=eps, confidence=1 - 1e-7, rng=deterministic_source(22))
    assert res.flagged


def test_auditor_flags_no_query_noise():
    """Lyu–Su–Li Alg. 5 (Stoddard et al.): no query noise. q(D) = (0, Δ), q(D') = (Δ, 0): the output
    "⊥ then ⊤" is impossible on D'."""
    plan = dataclasses.replace(_plan(1.0), t_query=2.0**-400)  # NON-PRIVATE fixture
    res = audit(_svt_mechanism(plan), [0.0, 1.0], [1.0, 0.0], trials=sized(50_000, 500_000), vectorized=True,
                claimed_epsilon=1.0, confidence=1 - 1e-7, rng=deterministic_source(23))
    assert res.flagged and res.epsilon_lower_bound > 3.0


# ---------------------------------------------------------------------------------------------
# (d) contract: charge once up front, halting, validation
# ---------------------------------------------------------------------------------------------
def test_charged_once_before_threshold_noise_and_halts():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(3)
    at_charge = watch_charges(acct, src)
    svt = AboveThreshold(0.6, 5.0, accountant=acct, rng=src)
    assert at_charge == [0]
    assert src.consumed > 0  # rho drawn after the charge
    assert acct.spent == PureDP(0.6) and len(acct.receipts) == 1
    r = acct.receipts[0]
    assert r.mechanism == "above_threshold" and r.cost == PureDP(0.6) and r.secure is False
    assert svt.receipt is r and svt.cost == PureDP(0.6) and svt.secure is False
    assert "5.0" not in repr(svt.receipt.params.get("rho", ""))  # no private state in the receipt
    answers = [svt.query(v) for v in (-100.0, -90.0, -80.0)]
    assert answers == [False, False, False] and not svt.halted and svt.position is None
    assert svt.query(1e6) is True
    assert svt.halted and svt.position == 3 and svt.answered == 4
    before = src.consumed
    with pytest.raises(SVTHalted) as info:
        svt.query(0.0)
    assert isinstance(info.value, DPKitError) and info.value.param == "query"
    assert src.consumed == before
    assert len(acct.receipts) == 1 and at_charge == [0]  # queries never charge
    # a second object does not fit in the remaining budget: refused, nothing drawn
    with pytest.raises(BudgetExceeded):
        AboveThreshold(0.6, 5.0, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


def test_functional_form_charges_once_and_release():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(4)
    rel = above_threshold([-50.0, -40.0, 60.0, 70.0], 10.0, 0.5, monotonic=True, accountant=acct, rng=src)
    assert rel.value == 2 and rel.mechanism == "above_threshold"
    assert rel.cost == PureDP(0.5) and acct.spent == PureDP(0.5) and rel.receipt is acct.receipts[-1]
    assert rel.params["queries"] == 4 and rel.params["monotonic"] is True and rel.secure is False
    assert set(rel.params) >= {"epsilon", "threshold", "sensitivity", "epsilon_threshold", "epsilon_queries"}
    with pytest.raises(NoInterval):
        rel.interval()
    assert above_threshold([], 0.0, 1.0, rng=deterministic_source(1)).value is None
    assert above_threshold([-1e9] * 5, 0.0, 1.0, rng=deterministic_source(1)).value is None


BAD_CONSTRUCTION = [
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"epsilon": math.nan}, InvalidParameter, "epsilon"),
    ({"epsilon": math.inf}, InvalidParameter, "epsilon"),
    ({"epsilon": "1"}, WrongType, "epsilon"),
    ({"epsilon": None}, WrongType, "epsilon"),
    ({"epsilon": True}, WrongType, "epsilon"),
    ({"epsilon": 1e-12}, InvalidParameter, "epsilon"),  # noise beyond the samplers' range
    ({"threshold": math.nan}, InvalidParameter, "threshold"),
    ({"threshold": math.inf}, InvalidParameter, "threshold"),
    ({"threshold": None}, WrongType, "threshold"),
    ({"threshold": "3"}, WrongType, "threshold"),
    ({"threshold": 1e300, "sensitivity": 1e-300}, InvalidParameter, "threshold"),
    ({"sensitivity": 0.0}, InvalidParameter, "sensitivity"),
    ({"sensitivity": -1.0}, InvalidParameter, "sensitivity"),
    ({"sensitivity": math.nan}, InvalidParameter, "sensitivity"),
    ({"sensitivity": [1.0]}, WrongType, "sensitivity"),
    ({"monotonic": "yes"}, WrongType, "monotonic"),
    ({"monotonic": 1}, WrongType, "monotonic"),
    ({"split": (1.0,)}, WrongType, "split"),
    ({"split": "ab"}, WrongType, "split"),
    ({"split": 2.0}, WrongType, "split"),
    ({"split": (0.0, 1.0)}, InvalidParameter, "split"),
    ({"split": (1.0, -1.0)}, InvalidParameter, "split"),
    ({"split": (math.nan, 1.0)}, InvalidParameter, "split"),
    ({"split": (1.0, 1e-320)}, InvalidParameter, "split"),
    ({"split": (1.0, 1e-300)}, InvalidParameter, "split"),
    ({"accountant": "acct"}, WrongType, "accountant"),
    ({"description": 5}, WrongType, "description"),
]


@pytest.mark.parametrize(("override", "error", "param"), BAD_CONSTRUCTION)
def test_bad_construction_charges_and_draws_nothing(override, error, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(5)
    kw = {"epsilon": 1.0, "threshold": 0.0, "sensitivity": 1.0, "accountant": acct, "rng": src}
    kw.update(override)
    eps, thr = kw.pop("epsilon"), kw.pop("threshold")
    with pytest.raises(error) as info:
        AboveThreshold(eps, thr, **kw)
    assert info.value.param == param
    assert "1e+300" not in str(info.value) and "nan" not in str(info.value).lower()
    assert src.consumed == 0 and acct.receipts == () and acct.spent == PureDP(0.0)
    with pytest.raises(error) as info:
        above_threshold([1.0, 2.0], thr, eps, **kw)
    assert info.value.param == param
    assert src.consumed == 0 and acct.receipts == ()


def test_bad_rng_refused():
    acct = Accountant(PureDP(1.0))
    with pytest.raises(WrongType) as info:
        AboveThreshold(1.0, 0.0, accountant=acct, rng="not a source")
    assert info.value.param == "rng" and acct.receipts == ()


@pytest.mark.parametrize(("value", "error"), [(math.nan, InvalidParameter), (math.inf, InvalidParameter),
                                               (-math.inf, InvalidParameter), (None, WrongType), ("3", WrongType),
                                               ([1.0, 2.0], WrongType), (True, WrongType),
                                               (np.array([1.0, 2.0]), WrongType)])
def test_bad_query_values(value, error):
    src = CountingSource(6)
    svt = AboveThreshold(1.0, 0.0, rng=src)
    before = src.consumed
    with pytest.raises(error) as info:
        svt.query(value)
    assert info.value.param == "value" and "3" not in str(info.value)
    assert src.consumed == before and svt.answered == 0 and not svt.halted
    assert svt.query(-1e6) is False  # still usable
    assert svt.query(np.float32(1e6)) is True and svt.query is not None


@pytest.mark.parametrize(("values", "error"), [([1.0, math.nan], InvalidData), ([math.inf], InvalidData),
                                                (None, WrongType), ("abc", WrongType), ([[1.0, 2.0]], WrongType),
                                                ([1.0, None], WrongType)])
def test_bad_values_functional(values, error):
    acct = Accountant(PureDP(1.0))
    src = CountingSource(7)
    with pytest.raises(error) as info:
        above_threshold(values, 0.0, 1.0, accountant=acct, rng=src)
    assert info.value.param == "values"
    assert src.consumed == 0 and acct.receipts == ()


def test_huge_answers_are_clamped_not_refused():
    svt = AboveThreshold(1.0, 0.0, sensitivity=1e-300, rng=deterministic_source(3))
    assert svt.query(-1e300) is False
    assert svt.query(1e300) is True
    assert above_threshold([-1e300, 1e300], 0.0, 1.0, sensitivity=1e-300, rng=deterministic_source(3)).value == 1


def test_copy_and_pickle_refused():
    svt = AboveThreshold(1.0, 0.0, rng=deterministic_source(3))
    for attempt in (lambda: copy.copy(svt), lambda: copy.deepcopy(svt), lambda: pickle.dumps(svt)):
        with pytest.raises(WrongType):
            attempt()
    assert "running" in repr(svt) and "rho" not in repr(svt)
