"""The API fuzz suite's findings in dpkit.audit and dpkit.datasets (each raised an untyped error, hung or
returned NaN before the fix)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpkit.audit as A
from dpkit.core.errors import DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.datasets import adult
from dpkit.noise.source import deterministic_source

_SVT = {"threshold_scale": 2.0, "query_scale": 4.0}


def _mech(data, rng, size=1):
    gen = np.random.default_rng(int(rng.uint64(1)[0]))  # rng-ok: a user mechanism
    return float(np.sum(data)) + gen.laplace(0.0, 1.0, size)


def _fails(_data, _rng, size=1):
    raise ValueError("987654.321")


@pytest.mark.parametrize("call, param", [
    (lambda: A.FiniteSet(None), "points"),
    (lambda: A.Interval(0.0, 10**400), "hi"),
    (lambda: A.Interval(0.0, 1.0, lo_closed="yes"), "lo_closed"),
    (lambda: A.Truncated(A.Laplace(0.0, 1.0), None, 1.0), "lo"),
    (lambda: A.log1mexp(None), "x"),
    (lambda: A.log1mexp(math.nan), "x"),
    (lambda: A.log_diff_exp(None, 0.0), "a"),
    (lambda: A.log_diff_exp(0.0, 1.0), "b"),
    (lambda: A.log_integral(None), "log_f"),
    (lambda: A.log_integral(lambda z: 0.0, 0.0, 1.0, grid_size=10**9), "grid_size"),
    (lambda: A.log_integral(lambda z: {}["k"], 0.0, 1.0), "log_f"),
    (lambda: A.max_privacy_loss(A.Laplace(0.0, 1.0), A.Laplace(1.0, 1.0), events=0), "events"),
    (lambda: A.svt_log_prob([0, 2], 1, [True], precision=np.zeros(0), **_SVT), "precision"),
    (lambda: A.svt_log_prob([0, 2], 1, np.array(5.0), **_SVT), "outputs"),
    (lambda: A.svt_log_probs([0, 2, 1], -1.3835324614416304e243, 1, **_SVT), "values"),
    (lambda: A.svt_max_loss([], [1, 1, 2], 1, 1, **_SVT), "values_prime"),
    (lambda: A.svt_patterns(2**63 - 1, 1), "queries"),
    (lambda: A.svt_patterns(60, 30), "queries"),
    (lambda: A.audit(_mech, [0.0], [1.0], trials=200, search_trials=2**53 + 1, vectorized=True), "search_trials"),
    (lambda: A.audit(_fails, [0.0], [1.0], trials=10, vectorized=True, rng=deterministic_source(1)), "mechanism"),
    (lambda: A.audit(_mech, [0.0], [1.0], trials=10, vectorized=True, rng=deterministic_source(1),
                     event=lambda x: x[10**6]), "event"),
    (lambda: A.DiscreteGaussian(0, 5e-324), "sigma"),
    (lambda: adult(columns=-7.2e199), "columns"),
    (lambda: adult(columns=[1]), "columns"),
    (lambda: adult(as_frame=None), "as_frame"),
])
def test_typed_error_naming_the_parameter(call, param):
    with pytest.raises(DPKitError) as info:
        call()
    assert isinstance(info.value, (InvalidParameter, WrongType, InvalidData))
    assert info.value.param == param
    assert "987654" not in str(info.value)
    assert info.value.__cause__ is None


def test_valid_calls_keep_their_values():
    assert A.log1mexp(-math.inf) == 0.0
    assert A.log_diff_exp(math.inf, 0.0) == math.inf
    assert A.log_diff_exp(1.0, -math.inf) == 1.0
    assert A.log_diff_exp(1.0, 0.0) == pytest.approx(math.log(math.e - 1.0))
    assert A.Interval(0, 10**20).hi == 1e20
    assert A.log_integral(lambda z: 0.0, 0.0, 3.0) == pytest.approx(math.log(3.0))
    assert A.log_integral(lambda z: 0.0, 0.0, 3.0, points=[1.0, 2.0]) == pytest.approx(math.log(3.0))
    assert len(A.svt_patterns(20, 3)) == sum(math.comb(20, j) for j in range(3)) + sum(
        math.comb(n - 1, 2) for n in range(3, 21))
    assert A.svt_patterns(2, 5) == [(True, True), (True, False), (False, True), (False, False)]


def test_discrete_laplace_at_a_vanishing_scale_is_a_point_mass():
    d = A.DiscreteLaplace(0, 5e-324)  # logpmf(0) was NaN (0 * -inf)
    assert d.logpmf(0) == 0.0
    assert d.logpmf(1) == -math.inf
    assert A.log_prob(d, A.Point(0.0)) == 0.0
