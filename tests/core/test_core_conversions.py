"""Conversions between privacy-loss definitions (privacy.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.core import (
    RDP,
    ZCDP,
    ApproxDP,
    DPKitError,
    InvalidParameter,
    PureDP,
    gaussian_epsilon,
    rdp_to_approx_epsilon,
    zcdp_to_approx_delta,
    zcdp_to_approx_epsilon,
)
from dpkit.core.privacy import _DEFAULT_ORDERS

PROP = settings(deadline=None, derandomize=True, max_examples=40)


def exact_gaussian_eps(rho: float, delta: float) -> float:
    """The true epsilon of the Gaussian mechanism that is exactly rho-zCDP (sigma^2 = 1 / (2 rho))."""
    return gaussian_epsilon(1.0 / math.sqrt(2 * rho), 1, delta)


def test_pure_to_zcdp():
    assert PureDP(1.0).to_zcdp() == ZCDP(0.5)
    assert PureDP(0.0).to_zcdp() == ZCDP(0.0)
    assert PureDP(0.3).to_approx() == ApproxDP(0.3, 0.0)


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.1, 0.5, 1.0, 5.0])
@pytest.mark.parametrize("delta", [1e-10, 1e-6, 1e-3])
def test_zcdp_to_approx_cks_bounds(rho, delta):
    eps = ZCDP(rho).to_approx(delta).epsilon
    loose = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert eps < loose  # CKS 2020 is strictly better than Bun-Steinke's rho + 2 sqrt(rho ln 1/delta)
    # and it is valid: never below the exact epsilon of the Gaussian mechanism, which is rho-zCDP
    assert eps >= exact_gaussian_eps(rho, delta) * (1 - 1e-9)
    # and self-consistent
    assert zcdp_to_approx_delta(rho, eps) <= delta * (1 + 1e-9)


def test_zcdp_zero_and_validation():
    assert ZCDP(0.0).to_approx(1e-5).epsilon == 0.0
    with pytest.raises(InvalidParameter) as info:
        ZCDP(0.5).to_approx(0.0)
    assert info.value.param == "delta"
    with pytest.raises(InvalidParameter):
        ZCDP(-0.5)


@pytest.mark.parametrize("sigma", [0.7, 2.0, 10.0])
@pytest.mark.parametrize("delta", [1e-8, 1e-5])
def test_rdp_to_approx_balle(sigma, delta):
    # the Gaussian mechanism's RDP curve alpha / (2 sigma^2)
    orders = _DEFAULT_ORDERS
    curve = RDP(orders, tuple(a / (2 * sigma**2) for a in orders))
    eps = curve.to_approx(delta).epsilon
    # Balle et al. 2020 Thm 21 improves on Mironov's eps(a) + ln(1/delta) / (a - 1)
    mironov = min(e + math.log(1 / delta) / (a - 1) for a, e in zip(curve.orders, curve.epsilons, strict=True))
    assert eps < mironov
    # valid: not below the true epsilon of that Gaussian
    assert eps >= exact_gaussian_eps(1 / (2 * sigma**2), delta) * (1 - 1e-9)
    # formula check at the best order
    a = np.array(orders)
    e = a / (2 * sigma**2)
    expected = np.min(e + np.log((a - 1) / a) - (math.log(delta) + np.log(a)) / (a - 1))
    assert eps == pytest.approx(max(0.0, expected), rel=1e-12)


def test_zcdp_to_rdp_roundtrip():
    r = ZCDP(0.25).to_rdp()
    assert all(e == pytest.approx(0.25 * a) for a, e in zip(r.orders, r.epsilons, strict=True))
    # CKS minimises the same bound as Balle et al. over all alpha > 1, the RDP route over a grid of orders
    assert r.to_approx(1e-5).epsilon >= ZCDP(0.25).to_approx(1e-5).epsilon * (1 - 1e-6)


@pytest.mark.parametrize(("orders", "epsilons", "param"), [
    ([1.0], [0.5], "orders"),              # order 1 made the bound NaN -> silently 0 (fixed)
    ([2.0], [float("nan")], "epsilons"),
    ([2.0], [-5.0], "epsilons"),
    ([0.5], [1.0], "orders"),
    ([], [], "orders"),
    ([2.0, 3.0], [1.0], "orders"),
])
def test_rdp_to_approx_rejects_invalid_curves(orders, epsilons, param):
    with pytest.raises(DPKitError) as info:
        rdp_to_approx_epsilon(orders, epsilons, 1e-5)
    assert info.value.param == param


@PROP
@given(rho=st.floats(1e-6, 20.0), delta=st.floats(1e-12, 0.5))
def test_zcdp_conversion_properties(rho, delta):
    eps = zcdp_to_approx_epsilon(rho, delta)
    assert 0 <= eps < rho + 2 * math.sqrt(rho * math.log(1 / delta)) + 1e-12
    assert zcdp_to_approx_delta(rho, eps) <= delta * (1 + 1e-9)
    assert zcdp_to_approx_epsilon(rho * 1.5, delta) >= eps * (1 - 1e-9)


@PROP
@given(bad=st.one_of(st.none(), st.text(max_size=3), st.just(float("nan")), st.just(float("inf")),
                     st.floats(max_value=-1e-300), st.booleans()))
def test_loss_validation_names_the_parameter(bad):
    for make, param in [(lambda v: PureDP(v), "epsilon"), (lambda v: ApproxDP(v, 1e-5), "epsilon"),
                        (lambda v: ApproxDP(1.0, v), "delta"), (lambda v: ZCDP(v), "rho")]:
        with pytest.raises(DPKitError) as info:
            make(bad)
        assert info.value.param == param
        if isinstance(bad, float) and math.isfinite(bad):
            assert repr(bad) not in str(info.value)
