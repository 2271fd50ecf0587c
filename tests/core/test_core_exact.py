"""The one budget splitter (dpkit.core._exact.split_budget): parts > 0 whose exact sum never exceeds the whole."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import sized

from dpkit.core import _exact
from dpkit.core.errors import InvalidParameter, WrongType

TOTALS = st.one_of(
    st.floats(min_value=5e-324, max_value=1.7976931348623157e308, allow_nan=False, allow_infinity=False),
    st.sampled_from([1e308, 1.7976931348623157e308, 1e-300, 2.2250738585072014e-308, 1e-310, 0.1, 1.0, 3.0]),
)
WEIGHTS = st.lists(
    st.one_of(st.floats(min_value=1e-300, max_value=1e300), st.sampled_from([1.0, 9.0, 0.1, 1 / 3, 2 / 3, 1e300])),
    min_size=1, max_size=12,
)


@settings(max_examples=sized(300, 5000), deadline=2000)
@given(total=TOTALS, weights=WEIGHTS)
def test_split_budget_exact_sum_at_most_total_and_parts_positive(total, weights):
    try:
        parts = _exact.split_budget(total, weights)
    except InvalidParameter as exc:  # only when some exact share is below the smallest positive float
        assert exc.param == "epsilon"
        wsum = sum(Fraction(w) for w in weights)
        assert min(Fraction(total) * Fraction(w) / wsum for w in weights) < Fraction(5e-324)
        return
    assert len(parts) == len(weights)
    assert all(isinstance(p, float) and p > 0 and math.isfinite(p) for p in parts)
    assert sum(Fraction(p) for p in parts) <= Fraction(total)
    # each part is the largest float below its exact share: not more than one ulp short
    wsum = sum(Fraction(w) for w in weights)
    for p, w in zip(parts, weights, strict=True):
        exact = Fraction(total) * Fraction(w) / wsum
        assert Fraction(p) <= exact < Fraction(p) + Fraction(math.ulp(p))


def test_split_budget_single_weight_is_total_and_thirds_do_not_overshoot():
    assert _exact.split_budget(0.7, [5.0]) == [0.7]
    parts = _exact.split_budget(1.0, [1.0, 1.0, 1.0])
    assert sum(Fraction(p) for p in parts) <= 1
    # the former stats splitter (float formula, one ulp down) overshot the whole on these (found by search)
    for total, w in ((4.161722627650255, [0.45084502714273167, 0.1, 5.0, 1 / 3, 1 / 3, 5.0]),
                     (2.7416878286630206, [9.0, 0.1, 0.2604977592216915, 5.0, 0.1])):
        from dpkit.stats import _common as sc
        parts = sc.split(total, w)
        assert all(p > 0 for p in parts) and sum(Fraction(p) for p in parts) <= Fraction(total)
    for total in (0.3, 1.1, 2.7, 1e308):
        for w in ([1, 2], [1, 1, 1], [0.1, 0.2, 0.7], [1.0, 9.0]):
            parts = _exact.split_budget(total, w)
            assert sum(Fraction(p) for p in parts) <= Fraction(total)


def test_split_budget_huge_total_returns_quickly():
    t0 = time.perf_counter()
    parts = _exact.split_budget(1.7976931348623157e308, [1.0, 9.0, 1e300])
    assert time.perf_counter() - t0 < 0.5
    assert all(p > 0 for p in parts)


@pytest.mark.parametrize("weights, exc, param", [
    (None, WrongType, "weights"), (3.0, WrongType, "weights"), ("ab", WrongType, "weights"), ([], InvalidParameter,
    "weights"), ([1.0, 0.0], InvalidParameter, "weights"), ([1.0, -1.0], InvalidParameter, "weights"),
    ([1.0, math.nan], InvalidParameter, "weights"), ([1.0, 10**400], InvalidParameter, "weights"),
    ([1.0, True], WrongType, "weights"), ([1.0, np.inf], InvalidParameter, "weights"),
])
def test_split_budget_bad_weights_typed(weights, exc, param):
    with pytest.raises(exc) as info:
        _exact.split_budget(1.0, weights)
    assert info.value.param == param


@pytest.mark.parametrize("total", [0.0, -1.0, math.nan, math.inf, 10**400, None, "1"])
def test_split_budget_bad_total_typed(total):
    with pytest.raises((InvalidParameter, WrongType)) as info:
        _exact.split_budget(total, [1.0, 1.0])
    assert info.value.param == "epsilon"


def test_split_budget_too_small_total_refused():
    with pytest.raises(InvalidParameter) as info:
        _exact.split_budget(5e-324, [1.0, 1.0])
    assert info.value.param == "epsilon"


def test_family_splitters_use_the_exact_one():
    """Both former splitters (histograms and stats) and bounds' split now agree with the core one."""
    from dpkit.histograms import _common as hc
    from dpkit.stats import _common as sc
    for total, w in ((1e308, [1.0, 9.0]), (0.3, [1, 2]), (1.0, [1, 1, 1])):
        assert hc.split_budget(total, w) == _exact.split_budget(total, w)
        assert sc.split(total, w) == _exact.split_budget(total, w)
