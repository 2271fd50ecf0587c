"""Tests of the statistical auditor (dpkit.audit.statistical).

Sizing (so CI never flakes): every audit uses confidence 1 - 1e-7, so a mechanism that really is
(eps, delta)-DP is flagged with probability < 1e-7 by construction (Clopper–Pearson bounds on an
event chosen on a separate batch). The broken fixtures' trial counts were chosen from pre-runs so
that the expected lower bound clears the claimed epsilon by many standard deviations (see the
comments at each test). All randomness is seeded, so the results are also reproducible.
"""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest
from scipy import stats

import dpkit.audit.exact
import dpkit.audit.statistical
from dpkit.audit import AuditResult, HalfLine, audit, clopper_pearson, epsilon_lower_bound
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.noise.source import deterministic_source

from .fixtures import (
    half_sensitivity_laplace,
    local_sensitivity_median,
    pinq_resampling_average,
    reference_exponential,
    reference_gaussian,
    reference_laplace,
    reference_report_noisy_max,
    svt_stoddard,
)

CONF = 1 - 1e-7


def _audit(mech, d, d_prime, trials, claimed, seed, **kw):
    return audit(mech, d, d_prime, trials=trials, vectorized=kw.pop("vectorized", True), claimed_epsilon=claimed,
                 confidence=CONF, rng=deterministic_source(seed), **kw)


# ---------------------------------------------------------------------------------------------
# Clopper–Pearson
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (57, 1000), (999, 1000)])
def test_clopper_pearson_matches_scipy(k, n):
    lo, hi = clopper_pearson(k, n, confidence=0.99)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.99, method="exact")
    assert lo == pytest.approx(ci.low, abs=1e-12)
    assert hi == pytest.approx(ci.high, abs=1e-12)


def test_clopper_pearson_zero_successes_closed_form():
    _, hi = clopper_pearson(0, 1000, confidence=1 - 2e-7)
    assert hi == pytest.approx(1 - 1e-7 ** (1 / 1000), rel=1e-9)


def test_epsilon_lower_bound():
    assert epsilon_lower_bound(0, 0, 100) == 0.0
    assert epsilon_lower_bound(10, 50, 100) == 0.0  # evidence the other way round: trivial bound
    lb = epsilon_lower_bound(50_000, 10_000, 100_000, confidence=0.99)
    assert 1.5 < lb < math.log(5)
    # delta reduces the bound
    assert epsilon_lower_bound(50_000, 10_000, 100_000, confidence=0.99, delta=0.1) < lb
    assert epsilon_lower_bound(50_000, 10_000, 100_000, confidence=0.99, delta=0.49) == pytest.approx(0.0, abs=0.1)


# ---------------------------------------------------------------------------------------------
# the broken fixtures are flagged
# ---------------------------------------------------------------------------------------------


def test_flags_pinq_resampling_average():
    # Li et al. Alg 2, D = 30 x {-1}, D' = D + {+1}, eps = 1: true worst log ratio 1.457 (density at -1).
    # Pre-runs at 500k trials: bound 1.27-1.31 (sd ~0.02) on the event "output <= -0.998".
    d = [-1.0] * 30
    r = _audit(pinq_resampling_average, d, [*d, 1.0], 500_000, 1.0, seed=11)
    assert r.flagged
    assert 1.15 < r.epsilon_lower_bound < 1.457
    assert r.direction == "D/D'" and "<=" in r.event
    assert r.search_trials == 500_000 and r.trials == 500_000


def test_book_pair_for_pinq_is_not_flagged():
    # the book's own pair D = {-1}, D' = {-1, 1} has worst ratio exactly e^eps: no violation to find
    r = _audit(pinq_resampling_average, [-1.0], [-1.0, 1.0], 200_000, 1.0, seed=12)
    assert not r.flagged


def test_flags_local_sensitivity_median():
    # D' gives exactly the median 0; D gives 0 + Lap(1): "output == 0" has probability 1 vs 0.
    r = _audit(local_sensitivity_median, [0.0, 0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 1.0], 2_000, 1.0, seed=13)
    assert r.flagged
    assert r.event.startswith("output == 0") and r.direction == "D'/D"
    assert r.counts == (0, 2_000)
    assert r.epsilon_lower_bound > 4.5  # = ln(p_lo / p_hi) with p_hi = 1 - (alpha/2)^(1/n)


def test_flags_half_sensitivity_laplace():
    # noise for sensitivity 1/2 at claimed eps = 1: true eps = 2. Pre-runs at 50k: bound ~1.88.
    r = _audit(half_sensitivity_laplace, [0.0], [1.0], 50_000, 1.0, seed=14)
    assert r.flagged
    assert 1.6 < r.epsilon_lower_bound <= 2.0


def test_flags_svt_without_query_noise_on_output_patterns():
    # Lyu et al. Alg 5 (vector outputs): the pattern (False, True) has probability 0.197 on D, 0 on D'
    # (and symmetrically (True, False) on D' but not on D); either pattern is found.
    r = _audit(svt_stoddard, [0.0, 1.0], [1.0, 0.0], 5_000, 1.0, seed=15)
    assert r.flagged
    assert r.event in ("output == (False, True)", "output == (True, False)")
    assert min(r.counts) == 0
    assert r.epsilon_lower_bound > 3.0


# ---------------------------------------------------------------------------------------------
# correct mechanisms are not flagged (reference implementations and dpkit.mechanisms)
# ---------------------------------------------------------------------------------------------


def test_does_not_flag_reference_laplace():
    r = _audit(reference_laplace, [0.0], [1.0], 200_000, 1.0, seed=21)
    assert not r.flagged
    assert 0.8 < r.epsilon_lower_bound <= 1.0  # the audit is tight for Laplace


def test_does_not_flag_reference_gaussian():
    r = _audit(reference_gaussian, [0.0], [1.0], 200_000, 0.5, seed=22, claimed_delta=1e-5)
    assert not r.flagged


EM_D = [1.0] + [0.0] * 19  # worst-case-like pair for selection: true ln ratio 0.948 at eps = 1
EM_D_PRIME = [0.0] + [1.0] * 19


def test_does_not_flag_reference_exponential_and_noisy_max():
    for mech, seed in ((reference_exponential, 23), (reference_report_noisy_max, 24)):
        r = _audit(mech, EM_D, EM_D_PRIME, 200_000, 1.0, seed=seed)
        assert not r.flagged


def test_does_not_flag_dpkit_laplace():
    from dpkit.mechanisms import laplace

    def mech(data, rng, size):
        # an array of identical values: `size` independent draws in one call
        return laplace(np.full(size, float(np.sum(data))), 1.0, 1.0, rng=rng)

    r = _audit(mech, [0.0], [1.0], 200_000, 1.0, seed=31)
    assert not r.flagged
    assert r.epsilon_lower_bound > 0.8


def test_does_not_flag_dpkit_gaussian():
    from dpkit.mechanisms import gaussian

    def mech(data, rng, size):
        return gaussian(np.full(size, float(np.sum(data))), 1.0, epsilon=1.0, delta=1e-5, rng=rng)

    r = _audit(mech, [0.0], [1.0], 200_000, 1.0, seed=32, claimed_delta=1e-5)
    assert not r.flagged


@pytest.mark.parametrize("name", ["exponential", "report_noisy_max"])
def test_does_not_flag_dpkit_selection(name):
    import dpkit.mechanisms as mechanisms

    fn = getattr(mechanisms, name)

    def mech(scores, rng):  # plain per-call mechanism (returns a Release; the auditor unwraps .value)
        return fn(scores, 1.0, 1.0, rng=rng)

    r = _audit(mech, EM_D, EM_D_PRIME, 4_000, 1.0, seed=33, vectorized=False)
    assert not r.flagged


# ---------------------------------------------------------------------------------------------
# API behaviour
# ---------------------------------------------------------------------------------------------


def test_explicit_event_both_directions_and_no_search():
    r = _audit(half_sensitivity_laplace, [0.0], [1.0], 50_000, 1.0, seed=41, event=HalfLine(1.0, ">="))
    assert r.search_trials == 0 and r.direction == "D'/D" and r.event == "output >= 1"
    assert r.flagged
    r2 = _audit(half_sensitivity_laplace, [1.0], [0.0], 50_000, 1.0, seed=41, event=lambda x: x >= 1.0)
    assert r2.direction == "D/D'" and r2.event == "<lambda>"
    assert r2.epsilon_lower_bound == pytest.approx(r.epsilon_lower_bound, abs=0.15)


def test_per_call_mode_and_release_unwrapping():
    class FakeRelease:
        mechanism = "fake"

        def __init__(self, value):
            self.value = value

    def mech(data, rng):
        gen = np.random.default_rng(rng.uint64(2))
        return FakeRelease(float(np.sum(data)) + gen.laplace(0.0, 0.5))

    r = _audit(mech, [0.0], [1.0], 3_000, 1.0, seed=42, vectorized=False)
    assert isinstance(r, AuditResult)
    assert r.trials == 3_000 and r.flagged
    assert "epsilon >=" in str(r) and "VIOLATION" in str(r)


def test_no_claim_is_never_flagged():
    r = audit(half_sensitivity_laplace, [0.0], [1.0], trials=2_000, vectorized=True, rng=deterministic_source(1))
    assert r.claimed_epsilon is None and not r.flagged and r.epsilon_lower_bound > 0.5


def test_search_trials_separate():
    r = audit(half_sensitivity_laplace, [0.0], [1.0], trials=2_000, search_trials=500, vectorized=True,
              rng=deterministic_source(2))
    assert r.search_trials == 500 and r.trials == 2_000


def test_docstring_examples():
    for mod in (dpkit.audit.exact, dpkit.audit.statistical):
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
        assert res.failed == 0 and res.attempted > 0


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


def _ok(data, rng, size):
    return np.zeros(size)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"trials": 0}, InvalidParameter, "trials"),
    ({"trials": 1.5}, WrongType, "trials"),
    ({"trials": 10, "confidence": 1.0}, InvalidParameter, "confidence"),
    ({"trials": 10, "confidence": 0.0}, InvalidParameter, "confidence"),
    ({"trials": 10, "claimed_epsilon": -1.0}, InvalidParameter, "claimed_epsilon"),
    ({"trials": 10, "claimed_delta": 1.0}, InvalidParameter, "claimed_delta"),
    ({"trials": 10, "search_trials": 0}, InvalidParameter, "search_trials"),
    ({"trials": 10, "rng": 42}, WrongType, "rng"),
    ({"trials": 10, "event": "x > 1"}, WrongType, "event"),
    ({"trials": 10, "vectorized": 1}, WrongType, "vectorized"),
])
def test_bad_parameters_are_named(kwargs, err, param):
    kwargs.setdefault("vectorized", True)
    with pytest.raises(err) as e:
        audit(_ok, [0.0], [1.0], **kwargs)
    assert e.value.param == param


def test_bad_mechanism_and_outputs():
    with pytest.raises(WrongType) as e:
        audit("laplace", [0.0], [1.0], trials=10)
    assert e.value.param == "mechanism"
    with pytest.raises(InvalidData) as e:
        audit(lambda d, rng, size: np.zeros(size - 1), [0.0], [1.0], trials=10, vectorized=True)
    assert e.value.param == "mechanism"
    with pytest.raises(InvalidData) as e:
        audit(lambda d, rng, size: np.full(size, np.nan), [0.0], [1.0], trials=10, vectorized=True)
    assert e.value.param == "mechanism"
    with pytest.raises(WrongType) as e:
        audit(_ok, [0.0], [1.0], trials=10, vectorized=True, event=lambda x: x * 2.0)
    assert e.value.param == "event"
    with pytest.raises(InvalidParameter) as e:
        clopper_pearson(11, 10)
    assert e.value.param == "successes"
