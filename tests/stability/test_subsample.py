"""A_samp: Li's constants (erratum), the caps, the per-record membership limit, the gap's sensitivity under
coupled subsamples, the test threshold, stable/unstable behaviour, the auditor, accounting, bad input."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from conftest import sized
from dpkit import Accountant, ApproxDP, PrivacyUnit, Replace
from dpkit.audit import audit
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.stability import a_samp, a_samp_rate, a_samp_subsamples

from .helpers import SECRET, CountingSource, assert_refused, charged_before_draw, dlap_cdf

A = importlib.import_module("dpkit.stability.subsample")


def test_li_rate_erratum_numbers():
    q32 = a_samp_rate(1.0, 1e-6)
    q64 = a_samp_rate(1.0, 1e-6, constant=64)
    assert q32 == pytest.approx(0.0022619504265794367, rel=1e-12)  # Alg 20's 32: ~0.0023
    assert q64 == pytest.approx(0.0011309752132897183, rel=1e-12)  # Li's example (64): ~0.0011
    assert a_samp_subsamples(10**6, q32, 1e-6) == 5400461  # millions of subsamples


def test_realistic_sizes_are_refused_before_anything():
    assert_refused(a_samp, {"values": np.zeros(50), "func": len, "epsilon": 1.0, "delta": 1e-6,
                            "n_bound": 10**6}, InvalidParameter, "subsamples")
    assert_refused(a_samp, {"values": np.zeros(50), "func": len, "epsilon": 1.0, "delta": 1e-6,
                            "n_bound": 10**4, "rate": 0.05, "subsamples": 50_000}, InvalidParameter, "max_work")


def test_memberships_respect_the_cap_and_the_rate():
    q = 0.1
    qu = A._q_units(q)
    m = A._memberships(2000, 50, qu, 8, deterministic_source(1))
    per_record = m.sum(axis=1)
    assert per_record.max() <= 8
    # conditioned Binomial(50, 0.1) on <= 8: mean ~ 4.85
    k = np.arange(0, 9)
    from scipy import stats

    pk = stats.binom.pmf(k, 50, q)
    mean = float((k * pk).sum() / pk.sum())
    assert abs(per_record.mean() - mean) < 6 * math.sqrt(4.5 / 2000)
    # appending a record keeps the other rows (rows drawn in record order)
    a = A._memberships(30, 40, qu, 10, deterministic_source(2))
    b = A._memberships(31, 40, qu, 10, deterministic_source(2))
    assert (a == b[:30]).all()


def _gap(data, func, m, q, cap, seed):
    members = A._memberships(len(data), m, A._q_units(q), cap, deterministic_source(seed)).T
    counts: dict = {}
    for i in range(m):
        key = func(np.asarray(data)[members[i]])
        counts[key] = counts.get(key, 0) + 1
    top = [*sorted(counts.values(), reverse=True), 0]
    return top[0] - top[1]


def test_gap_sensitivity_is_two_cap_under_coupling():
    m, q = 60, 0.2
    cap = A._cap(m, q)
    gen = np.random.default_rng(3)  # rng-ok: test data

    def func(s):
        return int(s.sum() > 1.5)

    worst = 0
    for seed in range(40):
        x = list(gen.integers(0, 2, int(gen.integers(3, 15))).astype(float))
        y = [*x, 1.0]
        worst = max(worst, abs(_gap(x, func, m, q, cap, seed) - _gap(y, func, m, q, cap, seed)))
    assert 0 < worst <= 2 * cap


def test_threshold_bounds_the_unstable_pass_probability():
    for eps, delta, cap in ((1.0, 1e-3, 6), (0.5, 1e-6, 20)):
        from dpkit.mechanisms import discrete_laplace_scale

        t = discrete_laplace_scale(2 * cap, eps)
        T = A._util.dlap_threshold(t, delta)
        # an unstable input (gap <= 2c, i.e. D <= 0) passes iff D + Z >= T: probability <= P[Z >= T]
        assert 1 - dlap_cdf(T - 1, t) <= delta < 1 - dlap_cdf(T - 2, t)


def test_stable_function_is_released_and_unstable_gives_bottom():
    rng = deterministic_source(4)
    x = np.ones(1000)
    stable = [a_samp(x, lambda s: int(s.size > 0), 1.0, 1e-3, rate=0.01, subsamples=300, rng=rng)
              for _ in range(5)]
    assert all(r.value == 1 and r.parts["passed"] for r in stable)
    y = np.arange(1000.0)
    unstable = [a_samp(y, lambda s: int(s.sum()) % 2, 1.0, 1e-3, rate=0.01, subsamples=300, rng=rng)
                for _ in range(5)]
    assert all(r.value is None and not r.parts["passed"] for r in unstable)
    r = unstable[0]
    assert r.parts["subsamples"] == 300 and r.parts["cap"] == 6 and r.parts["threshold"] >= 1


def test_noisy_count_and_replace_paths():
    acct = Accountant(ApproxDP(2.0, 1e-3))
    r = a_samp(np.ones(300), lambda s: 1, 1.0, 1e-3, rate=0.05, max_subsamples=400, accountant=acct,
               rng=deterministic_source(5))
    assert "noisy_count" in r.parts and r.parts["subsamples"] <= 400
    assert r.params["epsilon_count"] + r.params["epsilon_test"] <= 1.0
    assert acct.spent == ApproxDP(1.0, 1e-3)
    r = a_samp(np.ones(50), lambda s: 1, 1.0, 1e-3, rate=0.05, neighbours=Replace(), rng=deterministic_source(6))
    assert "noisy_count" not in r.parts and r.parts["subsamples"] == a_samp_subsamples(50, 0.05, 1e-3)


@pytest.mark.slow
def test_auditor_does_not_flag_a_samp():
    def mech(data, rng):
        r = a_samp(data, lambda s: int(s.sum() >= 2), 1.0, 0.05, rate=0.3, subsamples=20, rng=rng)
        return -1 if r.value is None else r.value

    d = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    d_prime = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    res = audit(mech, d, d_prime, trials=sized(600, 20_000), claimed_epsilon=1.0, claimed_delta=0.05,
                confidence=1 - 1e-7, rng=deterministic_source(7))
    assert not res.flagged


@pytest.mark.parametrize("call", [
    lambda **k: a_samp(np.ones(100), lambda s: 1, 0.8, 1e-6, rate=0.05, subsamples=100, **k),
    lambda **k: a_samp(np.ones(100), lambda s: 1, 0.8, 1e-6, rate=0.05, max_subsamples=200, **k),
])
def test_charged_once_before_any_randomness(call):
    charged_before_draw(call, ApproxDP(1.0, 1.5e-6), ApproxDP(0.8, 1e-6))


def test_bottom_is_still_charged():
    acct = Accountant(ApproxDP(1.0, 1e-3))
    r = a_samp(np.arange(100.0), lambda s: int(s.sum()) % 2, 1.0, 1e-3, rate=0.05, subsamples=100,
               accountant=acct, rng=CountingSource(1))
    assert r.value is None and acct.spent == ApproxDP(1.0, 1e-3)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"values": [SECRET, float("nan")]}, InvalidData, "values"),
    ({"values": [SECRET, None]}, InvalidData, "values"),
    ({"values": [SECRET, float("inf")]}, InvalidData, "values"),
    ({"values": "abc"}, WrongType, "values"),
    ({"func": None}, WrongType, "func"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"delta": 0.0}, InvalidParameter, "delta"),
    ({"delta": 1.0}, InvalidParameter, "delta"),
    ({"rate": 1.0}, InvalidParameter, "rate"),
    ({"rate": 0.0}, InvalidParameter, "rate"),
    ({"subsamples": 0}, InvalidParameter, "subsamples"),
    ({"subsamples": 2, "rate": 0.1}, InvalidParameter, "subsamples"),
    ({"n_bound": 0}, InvalidParameter, "n_bound"),
    ({"max_subsamples": 0}, InvalidParameter, "max_subsamples"),
    ({"_neighbours": PrivacyUnit("u", 2)}, InvalidParameter, "neighbours"),
])
def test_bad_input_refused_before_anything(kwargs, err, param):
    base = {"values": [SECRET, 2.0, 3.0], "func": len, "epsilon": 1.0, "delta": 1e-6, "rate": 0.1,
            "subsamples": 100}
    base.update(kwargs)
    assert_refused(a_samp, base, err, param)
