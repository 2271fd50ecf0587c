"""Bad input -> typed dpkit errors naming the parameter; nothing charged, no randomness consumed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpkit
from dpkit.audit.testing import CountingSource
from dpkit.core import ZCDP, Accountant, ApproxDP, PureDP
from dpkit.core.errors import DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms import (
    discrete_gaussian,
    discrete_laplace,
    exponential,
    gaussian,
    laplace,
    permute_and_flip,
    randomized_response,
    randomized_response_k,
    report_noisy_max,
)

NAN, INF = math.nan, math.inf

# (mechanism, args, kwargs, expected error type, expected param)
BAD = [
    # laplace
    (laplace, (1.0, 1.0, 0.0), {}, InvalidParameter, "epsilon"),
    (laplace, (1.0, 1.0, -1.0), {}, InvalidParameter, "epsilon"),
    (laplace, (1.0, 1.0, NAN), {}, InvalidParameter, "epsilon"),
    (laplace, (1.0, 1.0, INF), {}, InvalidParameter, "epsilon"),
    (laplace, (1.0, 0.0, 1.0), {}, InvalidParameter, "sensitivity"),
    (laplace, (1.0, -2.0, 1.0), {}, InvalidParameter, "sensitivity"),
    (laplace, (1.0, INF, 1.0), {}, InvalidParameter, "sensitivity"),
    (laplace, (NAN, 1.0, 1.0), {}, InvalidData, "value"),
    (laplace, ([1.0, INF], 1.0, 1.0), {}, InvalidData, "value"),
    (laplace, ([], 1.0, 1.0), {}, InvalidData, "value"),
    (laplace, ("1", 1.0, 1.0), {}, WrongType, "value"),
    (laplace, (None, 1.0, 1.0), {}, WrongType, "value"),
    (laplace, (1.0, "1", 1.0), {}, WrongType, "sensitivity"),
    (laplace, (1.0, 1.0, None), {}, WrongType, "epsilon"),
    (laplace, (1.0, 1.0, True), {}, WrongType, "epsilon"),
    (laplace, (1.0, 1.0, 1.0), {"rng": 42}, WrongType, "rng"),
    (laplace, (1.0, 1.0, 1.0), {"accountant": "acct"}, WrongType, "accountant"),
    (laplace, (1.0, 1.0, 1e-12), {}, InvalidParameter, "epsilon"),  # scale beyond the samplers' range
    # gaussian
    (gaussian, (1.0, 1.0), {}, InvalidParameter, "epsilon"),
    (gaussian, (1.0, 1.0), {"epsilon": 1.0}, InvalidParameter, "delta"),
    (gaussian, (1.0, 1.0), {"epsilon": 1.0, "delta": 0.0}, InvalidParameter, "delta"),
    (gaussian, (1.0, 1.0), {"epsilon": 1.0, "delta": 1.0}, InvalidParameter, "delta"),
    (gaussian, (1.0, 1.0), {"epsilon": 1.0, "delta": -0.1}, InvalidParameter, "delta"),
    (gaussian, (1.0, 1.0), {"epsilon": 1.0, "delta": NAN}, InvalidParameter, "delta"),
    (gaussian, (1.0, 1.0), {"epsilon": 0.0, "delta": 1e-5}, InvalidParameter, "epsilon"),
    (gaussian, (1.0, 1.0), {"rho": 0.0}, InvalidParameter, "rho"),
    (gaussian, (1.0, 1.0), {"rho": -1.0}, InvalidParameter, "rho"),
    (gaussian, (1.0, 1.0), {"rho": NAN}, InvalidParameter, "rho"),
    (gaussian, (1.0, 1.0), {"rho": 0.5, "epsilon": 1.0}, InvalidParameter, "rho"),
    (gaussian, (1.0, 1.0), {"epsilon": 1.0, "delta": 1e-5, "method": "classic"}, InvalidParameter, "epsilon"),
    (gaussian, (1.0, 1.0), {"epsilon": 0.5, "delta": 1e-5, "method": "bogus"}, InvalidParameter, "method"),
    (gaussian, (1.0, 1.0), {"epsilon": 0.5, "delta": 1e-5, "method": 3}, WrongType, "method"),
    (gaussian, (1.0, 0.0), {"rho": 0.5}, InvalidParameter, "sensitivity"),
    (gaussian, ([1.0, NAN], 1.0), {"rho": 0.5}, InvalidData, "value"),
    (gaussian, (np.array([]), 1.0), {"rho": 0.5}, InvalidData, "value"),
    # discrete
    (discrete_laplace, (1.5, 1, 1.0), {}, InvalidData, "value"),
    (discrete_laplace, (1, 1.0, 1.0), {}, WrongType, "sensitivity"),
    (discrete_laplace, (1, 0, 1.0), {}, InvalidParameter, "sensitivity"),
    (discrete_laplace, (1, 1, 0.0), {}, InvalidParameter, "epsilon"),
    (discrete_laplace, ([], 1, 1.0), {}, InvalidData, "value"),
    (discrete_laplace, (2**62, 1, 1.0), {}, InvalidData, "value"),
    (discrete_gaussian, (1, 1), {}, InvalidParameter, "epsilon"),
    (discrete_gaussian, (1, 1), {"rho": -0.1}, InvalidParameter, "rho"),
    (discrete_gaussian, ([1, 2.5], 1), {"rho": 0.1}, InvalidData, "value"),
    (discrete_gaussian, (1, 1), {"epsilon": 1.0, "delta": 1.5}, InvalidParameter, "delta"),
    # selection
    (exponential, ([], 1.0, 1.0), {}, InvalidData, "scores"),
    (exponential, ([1.0, NAN], 1.0, 1.0), {}, InvalidData, "scores"),
    (exponential, ([1.0, INF], 1.0, 1.0), {}, InvalidData, "scores"),
    (exponential, ([[1.0, 2.0]], 1.0, 1.0), {}, InvalidData, "scores"),
    (exponential, ([1.0, 2.0], 0.0, 1.0), {}, InvalidParameter, "sensitivity"),
    (exponential, ([1.0, 2.0], 1.0, -1.0), {}, InvalidParameter, "epsilon"),
    (exponential, ([1.0, 2.0], 1.0, 1.0), {"monotonic": "yes"}, WrongType, "monotonic"),
    (exponential, ("ab", 1.0, 1.0), {}, WrongType, "scores"),
    (report_noisy_max, ([1.0, 2.0], 1.0, 1.0), {"noise": "cauchy"}, InvalidParameter, "noise"),
    (report_noisy_max, ([1.0, 2.0], 1.0, 1.0), {"noise": None}, WrongType, "noise"),
    (report_noisy_max, ([], 1.0, 1.0), {}, InvalidData, "scores"),
    (report_noisy_max, ([1.0, 2.0], 1.0, 0.0), {}, InvalidParameter, "epsilon"),
    (permute_and_flip, ([1.0, NAN], 1.0, 1.0), {}, InvalidData, "scores"),
    (permute_and_flip, ([1.0, 2.0], NAN, 1.0), {}, InvalidParameter, "sensitivity"),
    (permute_and_flip, ([1.0, 2.0], 1.0, 1.0), {"rng": "os"}, WrongType, "rng"),
    # randomized response
    (randomized_response, ([0, 1, 2], 1.0), {}, InvalidData, "bits"),
    (randomized_response, ([0, 1], 0.0), {}, InvalidParameter, "epsilon"),
    (randomized_response, ([], 1.0), {}, InvalidData, "bits"),
    (randomized_response, ([0.5], 1.0), {}, InvalidData, "bits"),
    (randomized_response_k, ([0, 3], 3, 1.0), {}, InvalidData, "values"),
    (randomized_response_k, ([0, -1], 3, 1.0), {}, InvalidData, "values"),
    (randomized_response_k, ([0, 1], 1, 1.0), {}, InvalidParameter, "k"),
    (randomized_response_k, ([0, 1], 2.0, 1.0), {}, WrongType, "k"),
    (randomized_response_k, ([0, 1], 3, INF), {}, InvalidParameter, "epsilon"),
]


def _budget_for(fn, kwargs):
    if fn in (gaussian, discrete_gaussian):
        return ZCDP(100.0) if "rho" in kwargs else ApproxDP(100.0, 0.5)
    return PureDP(100.0)


@pytest.mark.parametrize(("fn", "args", "kwargs", "err", "param"), BAD)
def test_bad_input_is_refused_before_charge_and_draw(fn, args, kwargs, err, param):
    acct = Accountant(_budget_for(fn, kwargs))
    src = CountingSource(1)
    kw = {"accountant": acct, "rng": src}
    kw.update(kwargs)
    with pytest.raises(err) as info:
        fn(*args, **kw)
    assert info.value.param == param
    assert isinstance(info.value, DPKitError)
    assert acct.receipts == ()
    assert src.consumed == 0


def test_error_messages_never_contain_values():
    secret = 987654.321
    with pytest.raises(InvalidData) as info:
        laplace([secret, NAN], 1.0, 1.0)
    assert "987654" not in str(info.value)
    with pytest.raises(InvalidData) as info:
        randomized_response([0, 1, 7777], 1.0)
    assert "7777" not in str(info.value)


# ---- hypothesis: any invalid epsilon / sensitivity is refused with the right parameter ----------------
bad_positive = st.one_of(
    st.floats(max_value=0.0, allow_nan=False),
    st.just(math.nan),
    st.just(math.inf),
    st.just(-math.inf),
)
bad_type = st.one_of(st.none(), st.text(max_size=3), st.booleans(), st.lists(st.floats(), max_size=2))
good_eps = st.floats(min_value=1e-3, max_value=20.0)
good_sens = st.floats(min_value=1e-6, max_value=1e6)

MECHS = {
    "laplace": lambda v, s, e, **k: laplace(v, s, e, **k),
    "gaussian": lambda v, s, e, **k: gaussian(v, s, epsilon=e, delta=1e-6, **k),
    "gaussian_rho": lambda v, s, e, **k: gaussian(v, s, rho=e, **k),
    "exponential": lambda v, s, e, **k: exponential([v, 0.0], s, e, **k),
    "report_noisy_max": lambda v, s, e, **k: report_noisy_max([v, 0.0], s, e, **k),
    "permute_and_flip": lambda v, s, e, **k: permute_and_flip([v, 0.0], s, e, **k),
}
PRIV_PARAM = {"gaussian_rho": "rho"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(MECHS)), eps=bad_positive, sens=good_sens)
def test_property_bad_privacy_parameter(name, eps, sens):
    src = CountingSource(2)
    with pytest.raises((InvalidParameter, WrongType)) as info:
        MECHS[name](1.0, sens, eps, rng=src)
    assert info.value.param == PRIV_PARAM.get(name, "epsilon")
    assert src.consumed == 0


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(MECHS)), sens=st.one_of(bad_positive, bad_type), eps=good_eps)
def test_property_bad_sensitivity(name, sens, eps):
    src = CountingSource(3)
    with pytest.raises((InvalidParameter, WrongType)) as info:
        MECHS[name](1.0, sens, eps, rng=src)
    assert info.value.param == "sensitivity"
    assert src.consumed == 0


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(sorted(MECHS)), bad=st.sampled_from([math.nan, math.inf, -math.inf]),
       sens=good_sens, eps=good_eps)
def test_property_nonfinite_data(name, bad, sens, eps):
    src = CountingSource(4)
    with pytest.raises(InvalidData) as info:
        MECHS[name](bad, sens, eps, rng=src)
    assert info.value.param in ("value", "scores")
    assert src.consumed == 0


@settings(max_examples=30, deadline=None)
@given(value=st.floats(min_value=-1e6, max_value=1e6), sens=good_sens, eps=good_eps)
def test_property_valid_laplace_returns_finite_float(value, sens, eps):
    rel = laplace(value, sens, eps, rng=CountingSource(5))
    assert isinstance(rel.value, float) and math.isfinite(rel.value)
    assert rel.scale >= sens / eps
    assert rel.scale <= sens / eps * (1 + 2.0**-20) * (1 + 1e-15)


@pytest.mark.parametrize("call", [lambda: dpkit.laplace(0.0, 1e308, 0.5),
                                  lambda: dpkit.discrete_laplace(0, 2**1020, 1e-300)])
def test_scale_overflow_is_a_typed_error(call):
    with pytest.raises(dpkit.InvalidParameter):
        call()
