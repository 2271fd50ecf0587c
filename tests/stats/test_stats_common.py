"""The shared helpers of dpkit.stats: data and bounds validation, neighbour resolution, budget split."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms._release import Release
from dpkit.stats import _common


def test_data_accepts_lists_arrays_and_empty():
    assert _common.data([1, 2.5, 3]).tolist() == [1.0, 2.5, 3.0]
    assert _common.data(np.arange(3, dtype=np.int32)).dtype == np.float64
    assert _common.data([]).size == 0
    assert _common.data(np.zeros(0)).size == 0


@pytest.mark.parametrize("bad", [[1.0, float("nan")], [1.0, None]])
def test_data_missing_values_raise_or_are_omitted(bad):
    with pytest.raises(InvalidData) as exc:
        _common.data(bad)
    assert exc.value.param == "values" and "1.0" not in str(exc.value)
    assert _common.data(bad, nan_policy="omit").tolist() == [1.0]


@pytest.mark.parametrize("bad", [[1.0, float("inf")], [[1.0, 2.0]]])
def test_data_refuses_infinite_and_multidimensional(bad):
    with pytest.raises(InvalidData):
        _common.data(bad)


@pytest.mark.parametrize("bad", ["abc", None, [1.0, "x"], np.array([True, False]), np.array([1j])])
def test_data_refuses_non_numeric(bad):
    with pytest.raises(WrongType):
        _common.data(bad)


def test_data_refuses_unknown_nan_policy():
    with pytest.raises(InvalidParameter) as exc:
        _common.data([1.0], nan_policy="skip")
    assert exc.value.param == "nan_policy"


@pytest.mark.parametrize("bad", [(1.0, 1.0), (2.0, 1.0), (0.0, float("inf")), (float("nan"), 1.0),
                                 (-1e308, 1e308)])
def test_bounds_invalid(bad):
    with pytest.raises((InvalidParameter, WrongType)) as exc:
        _common.bounds(bad)
    assert exc.value.param == "bounds"


@pytest.mark.parametrize("bad", [1.0, (1.0,), "ab", (1.0, 2.0, 3.0)])
def test_bounds_wrong_shape(bad):
    with pytest.raises(WrongType):
        _common.bounds(bad)


def test_neighbours_resolution():
    assert isinstance(_common.neighbours_of(None, None), AddRemove)
    acc = Accountant(PureDP(1.0), neighbours=Replace())
    assert isinstance(_common.neighbours_of(None, acc), Replace)
    with pytest.raises(InvalidParameter) as exc:
        _common.neighbours_of(AddRemove(), acc)
    assert exc.value.param == "neighbours"
    unit = PrivacyUnit("user", max_rows=3)
    assert _common.unit_rows(unit) == 3 and _common.unit_rows(AddRemove()) == 1


def test_split_never_exceeds_the_total():
    for eps in (0.1, 1.0, 0.3, 7.7):
        parts = _common.split(eps, (1, 2, 3))
        assert sum(parts) <= eps and all(p > 0 for p in parts)
        assert parts[2] == pytest.approx(eps / 2)
    with pytest.raises(InvalidParameter):
        _common.split(1.0, (1, 0))


def test_release_interval_fn_is_used_for_composite_releases():
    r = Release(value=2.0, mechanism="composite", scale=None, cost=PureDP(1.0),
                interval_fn=lambda c: (2.0 - c, 2.0 + c))
    assert r.interval(0.9) == (pytest.approx(1.1), pytest.approx(2.9))
    with pytest.raises(InvalidParameter):
        r.interval(1.5)
