"""Composition theorems: DRV advanced composition, KOV optimal composition, zCDP, Gaussian."""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.core import (
    DPKitError,
    InvalidParameter,
    MissingDependency,
    WrongType,
    advanced_composition,
    compose_homogeneous,
    gaussian_delta,
    gaussian_epsilon,
    kov_delta,
    optimal_composition,
    zcdp_compose,
    zcdp_to_approx_epsilon,
)

PROP = settings(deadline=None, derandomize=True, max_examples=60)


# ---------------------------------------------------------------------------------------------
# Independent reference: brute-force hockey-stick divergence of k-fold eps-randomised response.


def brute_delta(k: int, eps: float, eps_g: float) -> float:
    """sum over all 2^k outcomes of max(0, P(o) - e^eps_g Q(o)), P, Q the k-fold RR laws."""
    p_good = math.exp(eps) / (1 + math.exp(eps))
    total = 0.0
    for bits in itertools.product((0, 1), repeat=k):
        bad = sum(bits)
        p = p_good ** (k - bad) * (1 - p_good) ** bad
        q = p_good**bad * (1 - p_good) ** (k - bad)
        total += max(0.0, p - math.exp(eps_g) * q)
    return total


def kov_delta_i(k: int, eps: float, i: int) -> float:
    """KOV 2015 Thm 3.3: delta_i at eps_g = (k - 2i) eps, as printed (pure case)."""
    s = sum(math.comb(k, j) * (math.exp((k - j) * eps) - math.exp((k - 2 * i + j) * eps)) for j in range(i))
    return s / (1 + math.exp(eps)) ** k


# ---------------------------------------------------------------------------------------------
# DRV


def test_advanced_composition_formula():
    k, eps, dp = 100, 0.1, 1e-5
    expected = math.sqrt(2 * k * math.log(1 / dp)) * eps + k * eps * (math.exp(eps) - 1)
    assert advanced_composition(k, eps, dp) == pytest.approx(expected, rel=1e-14)
    # the programming-DP book's example: k=500, eps=1 (large eps: DRV is worse than basic)
    assert advanced_composition(500, 1.0, 1e-5) > 500
    assert compose_homogeneous(500, 1.0, 1e-5) <= 500
    assert advanced_composition(0, 1.0, 1e-5) == 0.0
    assert advanced_composition(5, 0.0, 1e-5) == 0.0
    assert advanced_composition(5, 800.0, 1e-5) == math.inf


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5])
def test_advanced_composition_rejects_bad_delta(bad):
    with pytest.raises(InvalidParameter) as info:
        advanced_composition(3, 0.1, bad)
    assert info.value.param == "delta_prime"


# ---------------------------------------------------------------------------------------------
# KOV optimal composition


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
def test_kov_delta_matches_brute_force(k, eps):
    for eps_g in [0.0, 0.05, eps / 2, eps, 1.7 * eps, (k - 1) * eps, k * eps, k * eps + 0.1]:
        assert kov_delta(k, eps, eps_g) == pytest.approx(brute_delta(k, eps, eps_g), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("k", [2, 5, 9, 20])
def test_kov_delta_matches_theorem_breakpoints(k):
    eps = 0.3
    for i in range(0, k // 2 + 1):
        assert kov_delta(k, eps, (k - 2 * i) * eps) == pytest.approx(kov_delta_i(k, eps, i), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize(("k", "eps", "delta"), [(1, 1.0, 1e-5), (2, 0.5, 1e-3), (5, 0.2, 1e-4), (8, 0.5, 1e-2),
                                                 (8, 1.0, 1e-6), (6, 0.05, 0.1)])
def test_optimal_composition_is_tight_by_brute_force(k, eps, delta):
    r = optimal_composition(k, eps, delta)
    assert brute_delta(k, eps, r) <= delta * (1 + 1e-9)  # valid
    if r > 0:
        assert brute_delta(k, eps, r - 1e-6) > delta  # and not loose


def test_optimal_composition_k1_closed_form():
    # one eps-DP mechanism is (eps_g, delta)-DP with eps_g = ln(e^eps - delta (1 + e^eps)) (randomised response)
    eps, delta = 1.0, 1e-5
    r = optimal_composition(1, eps, delta)
    assert r == pytest.approx(math.log(math.exp(eps) - delta * (1 + math.exp(eps))), rel=1e-9)
    assert r <= eps
    assert optimal_composition(1, eps, 0.0) == eps
    assert compose_homogeneous(1, eps, 0.0) == eps
    assert compose_homogeneous(1, eps, 1e-5) == pytest.approx(eps, abs=1e-4)


def test_optimal_composition_at_breakpoint():
    # Thm 3.3: at delta = delta_i exactly, the optimum is (k - 2i) eps
    k, eps, i = 10, 0.2, 2
    d = kov_delta_i(k, eps, i)
    assert optimal_composition(k, eps, d) == pytest.approx((k - 2 * i) * eps, rel=1e-6)


@pytest.mark.parametrize(("k", "eps", "delta"), [(10, 0.1, 1e-5), (100, 0.1, 1e-5), (1000, 0.01, 1e-6),
                                                 (10_000, 0.01, 1e-6), (10_000, 1.0, 1e-6), (50, 2.0, 1e-3)])
def test_optimal_never_worse_than_basic_or_drv(k, eps, delta):
    r = optimal_composition(k, eps, delta)
    assert 0 <= r <= k * eps
    assert r <= advanced_composition(k, eps, delta)
    assert compose_homogeneous(k, eps, delta) == min(k * eps, advanced_composition(k, eps, delta), r)


def test_large_k_is_stable_and_sublinear():
    r = optimal_composition(10_000, 0.01, 1e-6)
    assert math.isfinite(r)
    assert 4.0 < r < advanced_composition(10_000, 0.01, 1e-6) < 100
    # (the exact optimum is also self-consistent with its delta)
    assert kov_delta(10_000, 0.01, r) <= 1e-6


@PROP
@given(k=st.integers(1, 300), eps=st.floats(0.001, 3.0), delta=st.floats(1e-10, 0.5))
def test_optimal_composition_properties(k, eps, delta):
    r = optimal_composition(k, eps, delta)
    assert 0 <= r <= k * eps
    assert r <= advanced_composition(k, eps, delta) * (1 + 1e-12)
    assert optimal_composition(k + 1, eps, delta) >= r * (1 - 1e-9)  # monotone in k
    assert optimal_composition(k, eps * 1.1, delta) >= r * (1 - 1e-9)  # monotone in eps
    assert optimal_composition(k, eps, delta / 2) >= r * (1 - 1e-9)  # a smaller delta costs more eps


@PROP
@given(k=st.integers(1, 300), eps=st.floats(0.001, 3.0), delta=st.floats(1e-10, 0.5))
def test_compose_homogeneous_properties(k, eps, delta):
    c = compose_homogeneous(k, eps, delta)
    assert 0 <= c <= k * eps
    assert compose_homogeneous(k + 1, eps, delta) >= c * (1 - 1e-9)
    assert compose_homogeneous(k, eps, 0.0) == k * eps


@PROP
@given(bad=st.one_of(st.none(), st.text(max_size=3), st.floats(allow_nan=True), st.booleans(),
                     st.lists(st.integers(), max_size=2)))
def test_composition_validation(bad):
    for fn, args in [(advanced_composition, (bad, 0.1, 1e-5)), (optimal_composition, (bad, 0.1, 1e-5)),
                     (compose_homogeneous, (bad, 0.1, 1e-5))]:
        with pytest.raises(DPKitError) as info:
            fn(*args)
        assert info.value.param == "k"
    for fn in (advanced_composition, optimal_composition, compose_homogeneous):
        if isinstance(bad, float) and 0 <= bad < math.inf:
            continue
        with pytest.raises(DPKitError) as info:
            fn(3, bad, 1e-5)
        assert info.value.param == "epsilon"
        assert repr(bad) not in str(info.value) or repr(bad) in ("None", "True", "False")


@pytest.mark.parametrize("bad_k", [-1, 2.0, True])
def test_composition_rejects_bad_k(bad_k):
    with pytest.raises((InvalidParameter, WrongType)):
        optimal_composition(bad_k, 0.1, 1e-5)


def test_optimal_composition_rejects_bad_delta():
    for bad in (-1e-9, 1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidParameter) as info:
            optimal_composition(3, 0.1, bad)
        assert info.value.param == "delta"


# ---------------------------------------------------------------------------------------------
# zCDP


def test_zcdp_compose():
    from dpkit.core import ZCDP

    assert zcdp_compose([0.1, 0.2, 0.3]) == pytest.approx(0.6, rel=1e-15)
    assert zcdp_compose([ZCDP(0.5), 0.25]) == 0.75
    assert zcdp_compose([]) == 0.0
    with pytest.raises(InvalidParameter):
        zcdp_compose([0.1, -0.1])
    with pytest.raises(WrongType):
        zcdp_compose(0.1)
    with pytest.raises(WrongType):
        zcdp_compose("abc")


@PROP
@given(st.lists(st.floats(0, 10), max_size=20))
def test_zcdp_compose_is_exactly_rounded_sum(rhos):
    assert zcdp_compose(rhos) == float(sum(Fraction(r) for r in rhos))


# ---------------------------------------------------------------------------------------------
# Gaussian


@pytest.mark.parametrize(("sigma", "steps", "delta"), [(1.0, 1, 1e-5), (2.0, 10, 1e-5), (5.0, 100, 1e-6),
                                                      (0.5, 1, 1e-3)])
def test_exact_gaussian_epsilon(sigma, steps, delta):
    eps = gaussian_epsilon(sigma, steps, delta)
    mu = math.sqrt(steps) / sigma
    assert gaussian_delta(mu, eps) <= delta  # valid
    assert gaussian_delta(mu, eps * (1 - 1e-6)) > delta  # tight
    # never worse than the zCDP route (k Gaussians are (k / 2 sigma^2)-zCDP)
    assert eps <= zcdp_to_approx_epsilon(steps / (2 * sigma**2), delta)


def test_gaussian_classic_calibration_is_conservative():
    # sigma = sqrt(2 ln(1.25/delta)) / eps gives (eps, delta)-DP for eps < 1 (Dwork & Roth Thm A.1)
    eps, delta = 0.5, 1e-5
    sigma = math.sqrt(2 * math.log(1.25 / delta)) / eps
    assert gaussian_epsilon(sigma, 1, delta) < eps


def test_gaussian_epsilon_validation():
    with pytest.raises(InvalidParameter) as info:
        gaussian_epsilon(0.0, 1, 1e-5)
    assert info.value.param == "sigma_over_sensitivity"
    with pytest.raises(InvalidParameter) as info:
        gaussian_epsilon(1.0, 0, 1e-5)
    assert info.value.param == "steps"
    with pytest.raises(InvalidParameter) as info:
        gaussian_epsilon(1.0, 1, 0.0)
    assert info.value.param == "delta"
    with pytest.raises(InvalidParameter) as info:
        gaussian_epsilon(1.0, 1, 1e-5, sampling_rate=0.0)
    assert info.value.param == "sampling_rate"
    with pytest.raises(InvalidParameter) as info:
        gaussian_epsilon(1.0, 1, 1e-5, method="magic")
    assert info.value.param == "method"


def test_gaussian_subsampled_without_dp_accounting(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)  # makes `import dp_accounting` fail
    with pytest.raises(MissingDependency) as info:
        gaussian_epsilon(1.0, 100, 1e-5, sampling_rate=0.01)
    assert isinstance(info.value, ImportError)
    assert "dp-accounting" in str(info.value)
    # the unsampled case needs nothing
    assert gaussian_epsilon(1.0, 100, 1e-5) > 0


def test_gaussian_with_dp_accounting():
    pytest.importorskip("dp_accounting")
    exact = gaussian_epsilon(2.0, 10, 1e-5)
    pld = gaussian_epsilon(2.0, 10, 1e-5, method="pld")
    rdp = gaussian_epsilon(2.0, 10, 1e-5, method="rdp")
    assert exact <= pld * (1 + 1e-9) <= rdp * (1 + 1e-9)
    assert pld == pytest.approx(exact, rel=1e-3)
    sampled = gaussian_epsilon(1.0, 1000, 1e-5, sampling_rate=0.01)
    assert 0 < sampled < gaussian_epsilon(1.0, 1000, 1e-5)
    assert gaussian_epsilon(1.0, 1000, 1e-5, sampling_rate=0.01, method="rdp") >= sampled * (1 - 1e-9)
