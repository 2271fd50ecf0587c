"""Lattice Laplace/Gaussian: outputs on g*Z, exact law of the lattice noise, granularity."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from noise_stats import P_REJECT, chi2_pvalue, dgauss_cdf, dlap_cdf

from dpkit.core.errors import InvalidParameter
from dpkit.noise import deterministic_source, lattice_gaussian, lattice_granularity, lattice_laplace


def _lattice_units(out: np.ndarray, values: np.ndarray, g: float) -> np.ndarray:
    z = (out - np.rint(values / g) * g) / g
    assert np.all(z == np.rint(z)), "output off the lattice"
    return z.astype(np.int64)


def test_granularity_examples():
    assert lattice_granularity(1.0) == 2.0**-20
    assert lattice_granularity(1.0, coords=1, bits=0) == 1.0
    assert lattice_granularity(3.0, bits=0) == 2.0
    assert lattice_granularity(0.1, coords=3, bits=10) == 2.0**-15  # 0.1/3072 = 3.26e-5
    assert lattice_granularity(2.0**-30, bits=20) == 2.0**-50


@settings(max_examples=60, deadline=None)
@given(
    sens=st.floats(min_value=1e-200, max_value=1e200, allow_nan=False, allow_infinity=False),
    coords=st.integers(1, 10**6),
    bits=st.integers(0, 60),
)
def test_granularity_is_largest_power_of_two_below(sens, coords, bits):
    g = lattice_granularity(sens, coords=coords, bits=bits)
    x = Fraction(sens) / (coords * 2**bits)
    assert math.frexp(g)[0] == 0.5
    assert Fraction(g) <= x < 2 * Fraction(g)


@pytest.mark.parametrize(("scale", "g"), [(3.0, 1.0), (1.0, 2.0**-5), (10.0, 2.0**-20)])
def test_lattice_laplace_law(scale, g):
    gen = np.random.Generator(np.random.PCG64(1))
    values = gen.normal(0, 1000, 100_000)
    out = lattice_laplace(values, scale, g, rng=deterministic_source(31))
    assert out.dtype == np.float64 and out.shape == values.shape
    z = _lattice_units(out, values, g)
    t = scale / g
    assert chi2_pvalue(z, dlap_cdf(t), int(60 * t) + 60) > P_REJECT


@pytest.mark.parametrize(("sigma", "g"), [(2.0, 1.0), (1.0, 2.0**-5)])
def test_lattice_gaussian_law(sigma, g):
    values = np.linspace(-50, 50, 100_000)
    out = lattice_gaussian(values, sigma, g, rng=deterministic_source(32))
    z = _lattice_units(out, values, g)
    s = sigma / g
    assert chi2_pvalue(z, dgauss_cdf(s), int(20 * s) + 20) > P_REJECT


def test_lattice_gaussian_fine_grid_is_close_to_normal():
    from scipy import stats

    g = lattice_granularity(1.0)  # 2**-20
    out = lattice_gaussian(np.zeros(50_000), 3.0, g, rng=deterministic_source(33))
    assert np.all(out / g == np.rint(out / g))
    assert stats.kstest(out / 3.0, "norm").pvalue > P_REJECT


def test_rounding_is_half_even_and_exact():
    g = 2.0**-3
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49, 7.0]) * g
    # scale/g = 2**-400: P[Z != 0] ~ 2 exp(-2**400), so the output is the rounded value
    out = lattice_laplace(values, 2.0**-403, g, rng=deterministic_source(34))
    assert (out / g).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 0.0, 7.0]
    out = lattice_gaussian(values, 2.0**-403, g, rng=deterministic_source(34))
    assert (out / g).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 0.0, 7.0]


def test_huge_values_stay_on_lattice():
    g = 2.0**-10
    values = np.array([1e15, -3e17, 2.0**60 + 2.0**10])
    out = lattice_laplace(values, 1.0, g, rng=deterministic_source(35))
    # far beyond 2**53 lattice units the float is the correctly rounded lattice point
    assert np.all(np.abs(out - values) < 1e4)


def test_shapes_and_scalars():
    src = deterministic_source(36)
    assert lattice_laplace(1.0, 1.0, 2.0**-4, rng=src).shape == ()
    assert lattice_gaussian(np.zeros((3, 4)), 1.0, 2.0**-4, rng=src).shape == (3, 4)
    assert lattice_laplace([], 1.0, 2.0**-4, rng=src).shape == (0,)


@pytest.mark.parametrize("g", [0.3, 3.0, 2.0**-3 * 1.5, -0.25, 0.0, float("nan"), float("inf")])
def test_granularity_must_be_power_of_two(g):
    with pytest.raises(InvalidParameter) as e:
        lattice_laplace([1.0], 1.0, g, rng=deterministic_source(1))
    assert e.value.param == "granularity"


def test_scale_in_lattice_units_bounded():
    with pytest.raises(InvalidParameter) as e:
        lattice_laplace([1.0], 1.0, 2.0**-60)
    assert e.value.param == "scale"
    with pytest.raises(InvalidParameter) as e:
        lattice_gaussian([1.0], 1.0, 2.0**-60)
    assert e.value.param == "sigma"


def test_values_too_large_for_granularity():
    with pytest.raises(InvalidParameter) as e:
        lattice_laplace([1e300], 2.0**-1000, 2.0**-1020)
    assert e.value.param == "granularity"


def test_output_is_a_function_of_the_exact_lattice_point():
    from dpkit.noise.lattice import _combine

    g = 2.0**-4
    # r = 1, z = 2**53 + 1: the lattice point 2**53 + 2 is a float; naive float arithmetic
    # (fl(z) = 2**53, then 2**53 + 1 rounds to 2**53) would give a different value
    out = _combine(np.array([g, 3 * g, 0.0]), g, np.array([2**53 + 1, 2**53 - 1, -(2**60) - 3]))
    assert out[0] == out[1] == (2.0**53 + 2) * g
    assert out[2] == float(-(2**60) - 3) * g
