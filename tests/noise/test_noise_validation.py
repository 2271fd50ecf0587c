"""Validation: typed dpkit errors naming the parameter, raised before any random draw."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.core.errors import DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.noise import (
    RandomSource,
    deterministic_source,
    lattice_gaussian,
    lattice_granularity,
    lattice_laplace,
    sample_bernoulli_exp,
    sample_discrete_gaussian,
    sample_discrete_laplace,
    secure_source,
)


class Counting(RandomSource):
    name = "counting"

    def __init__(self) -> None:
        self.draws = 0
        self._inner = deterministic_source(0)

    def _fill_into(self, buf: memoryview) -> None:
        self.draws += len(buf)
        self._inner._fill_into(buf)


BAD_SCALES = [
    (0.0, InvalidParameter),
    (-1.0, InvalidParameter),
    (float("nan"), InvalidParameter),
    (float("inf"), InvalidParameter),
    (2.0**51, InvalidParameter),
    (1e-300, InvalidParameter),
    ("1.0", WrongType),
    (None, WrongType),
    (True, WrongType),
    ([1.0], WrongType),
    (1 + 2j, WrongType),
]


@pytest.mark.parametrize(("bad", "err"), BAD_SCALES)
def test_bad_scale(bad, err):
    src = Counting()
    with pytest.raises(err) as e:
        sample_discrete_laplace(bad, 10, rng=src)
    assert e.value.param == "scale"
    with pytest.raises(err) as e:
        sample_discrete_gaussian(bad, 10, rng=src)
    assert e.value.param == "sigma"
    with pytest.raises(err) as e:
        lattice_laplace([0.0], bad, 2.0**-10, rng=src)
    assert e.value.param == "scale"
    with pytest.raises(err) as e:
        lattice_gaussian([0.0], bad, 2.0**-10, rng=src)
    assert e.value.param == "sigma"
    assert src.draws == 0


@pytest.mark.parametrize(
    ("bad", "err"),
    [
        (-1, InvalidParameter),
        (2.5, WrongType),
        ("3", WrongType),
        ((2, -1), InvalidParameter),
        ([2, 3], WrongType),
        (None, WrongType),
    ],
)
def test_bad_size(bad, err):
    src = Counting()
    with pytest.raises(err) as e:
        sample_discrete_laplace(1.0, bad, rng=src)
    assert e.value.param == "size"
    with pytest.raises(err) as e:
        sample_discrete_gaussian(1.0, bad, rng=src)
    assert e.value.param == "size"
    assert src.draws == 0


@pytest.mark.parametrize("bad", [object(), np.random.default_rng(0), 42, "os"])
def test_bad_rng(bad):
    with pytest.raises(WrongType) as e:
        sample_discrete_laplace(1.0, 3, rng=bad)
    assert e.value.param == "rng"
    with pytest.raises(WrongType) as e:
        sample_bernoulli_exp([1.0], rng=bad)
    assert e.value.param == "rng"
    with pytest.raises(WrongType) as e:
        lattice_laplace([1.0], 1.0, 0.5, rng=bad)
    assert e.value.param == "rng"


@pytest.mark.parametrize(
    ("bad", "err"),
    [
        ([-0.1], InvalidParameter),
        ([float("nan")], InvalidParameter),
        ([float("inf")], InvalidParameter),
        ("x", WrongType),
        (None, WrongType),
        ([1, "a"], WrongType),
        ([[1, 2], [3]], WrongType),
    ],
)
def test_bad_gamma(bad, err):
    src = Counting()
    with pytest.raises(err) as e:
        sample_bernoulli_exp(bad, rng=src)
    assert e.value.param == "gamma"
    assert src.draws == 0


@pytest.mark.parametrize(
    ("bad", "err"),
    [([np.nan], InvalidData), ([np.inf], InvalidData), ("abc", WrongType), (None, WrongType), ([1 + 1j], WrongType)],
)
def test_bad_values(bad, err):
    src = Counting()
    with pytest.raises(err) as e:
        lattice_laplace(bad, 1.0, 2.0**-4, rng=src)
    assert e.value.param == "values"
    with pytest.raises(err) as e:
        lattice_gaussian(bad, 1.0, 2.0**-4, rng=src)
    assert e.value.param == "values"
    assert src.draws == 0


@pytest.mark.parametrize(
    ("args", "param"),
    [
        ((0.0,), "sensitivity"),
        ((1.0, 0), "coords"),
        ((1.0, 1, -1), "bits"),
        ((float("nan"),), "sensitivity"),
        ((1e-300, 1, 60), "sensitivity"),
    ],
)
def test_bad_granularity_args(args, param):
    with pytest.raises(DPKitError) as e:
        lattice_granularity(*args)
    assert e.value.param == param


def test_messages_never_contain_values():
    secret = 123.456789
    for call in [
        lambda: sample_discrete_laplace(-secret, 3),
        lambda: lattice_laplace([secret, float("nan")], 1.0, 0.5),
        lambda: sample_bernoulli_exp([-secret]),
    ]:
        with pytest.raises(DPKitError) as e:
            call()
        assert "123" not in str(e.value)


def test_default_rng_is_secure_and_works():
    assert secure_source().secure
    x = sample_discrete_laplace(2.0, 5)
    assert x.shape == (5,) and x.dtype == np.int64
    assert sample_bernoulli_exp(0.0).dtype == bool


@settings(max_examples=40, deadline=None)
@given(
    shape=st.one_of(st.integers(0, 70), st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple)),
    scale=st.floats(min_value=2.0**-30, max_value=2.0**50),
)
def test_laplace_shapes(shape, scale):
    x = sample_discrete_laplace(scale, shape, rng=deterministic_source(1))
    expect = (shape,) if isinstance(shape, int) else shape
    assert x.shape == expect and x.dtype == np.int64


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(0, 5), min_size=0, max_size=3).map(tuple),
    sigma=st.floats(min_value=2.0**-30, max_value=2.0**50),
)
def test_gaussian_shapes(shape, sigma):
    x = sample_discrete_gaussian(sigma, shape, rng=deterministic_source(2))
    assert x.shape == shape and x.dtype == np.int64


@settings(max_examples=40, deadline=None)
@given(
    g=st.one_of(
        st.floats(min_value=0, max_value=1e6),
        st.lists(st.floats(min_value=0, max_value=50), max_size=20),
        st.lists(st.lists(st.floats(min_value=0, max_value=50), min_size=2, max_size=2), max_size=5),
    )
)
def test_bernoulli_shapes(g):
    out = sample_bernoulli_exp(g, rng=deterministic_source(3))
    assert out.shape == np.shape(g) and out.dtype == bool


@settings(max_examples=60, deadline=None)
@given(scale=st.one_of(st.floats(), st.integers(-5, 5), st.none(), st.text(max_size=2), st.booleans()))
def test_scale_validation_property(scale):
    ok = (
        isinstance(scale, (int, float))
        and not isinstance(scale, bool)
        and math.isfinite(scale)
        and 2.0**-400 <= scale <= 2.0**50
    )
    src = Counting()
    if ok:
        assert sample_discrete_laplace(scale, 4, rng=src).shape == (4,)
    else:
        with pytest.raises(DPKitError) as e:
            sample_discrete_laplace(scale, 4, rng=src)
        assert e.value.param == "scale"
        assert src.draws == 0
