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


# --- exact_sum (issue #16: blockwise fixed-grid levels, still exact) ---
def _ref_sum(a):
    from fractions import Fraction
    return sum((Fraction(float(v)) for v in a), Fraction(0))


def _adversarial():
    import numpy as np

    rng = np.random.default_rng(16)  # rng-ok: test data
    return [
        rng.normal(0, 1, 70_000),
        np.concatenate([rng.normal(0, 1e300, 500), rng.normal(0, 1e-300, 500), [5e-324, -5e-324, 0.0, -0.0]]),
        np.array([1e308, 1e308, -1e308, -1e308, 1.0]),
        np.array([1.7976931348623157e308, -1.7976931348623157e308, 5e-324]),
        np.array([5e-324] * 1000 + [-1e-320, 2.2250738585072014e-308]),
        np.array([-0.0, -0.0, 0.0]),
        np.array([1.0, 1e-16] * 40_000),  # cancellation-free tiny parts a float sum would drop
        np.array([1e16, 1.0, -1e16, -1.0, 2.0**-60] * 1000),  # catastrophic cancellation
        rng.uniform(-1, 1, 50_000) * np.exp2(rng.integers(-1070, 1020, 50_000)),
        np.array([2.0**k for k in range(-1074, 1024)]),
        np.round(rng.normal(40, 10, 100_000)),
        np.array([]),
    ]


def test_exact_sum_matches_fractions_on_adversarial_inputs():
    from dpkit.core._exact import _exact_sum_pieces, exact_sum

    for a in _adversarial():
        want = _ref_sum(a)
        assert exact_sum(a) == want
        assert _exact_sum_pieces(a) == want


def test_exact_sum_clamp_is_the_sum_of_the_clamped_values():
    import numpy as np

    from dpkit.core._exact import exact_sum

    for a in _adversarial()[:8]:
        for lo, hi in [(-0.5, 0.25), (0.0, 100.0), (-1e308, 1e308), (-5e-324, 5e-324), (0.0, 0.0)]:
            assert exact_sum(a, clamp=(lo, hi)) == _ref_sum(np.clip(a, lo, hi))


def test_exact_sum_ten_million_values_is_correctly_rounded_like_fsum():
    import math

    import numpy as np

    from dpkit.core._exact import _exact_sum_pieces, exact_sum

    rng = np.random.default_rng(7)  # rng-ok: test data
    x = rng.normal(40.0, 10.0, 10_000_000)
    x[::1000] *= 1e-30  # tiny magnitudes: remainders beyond the two levels
    x[1::1000] = -0.0
    got = exact_sum(x, clamp=(0.0, 100.0))
    c = np.clip(x, 0.0, 100.0)
    assert got == _exact_sum_pieces(c)
    assert float(got) == math.fsum(c.tolist())


def test_exact_sum_refuses_non_finite():
    import math

    import pytest

    from dpkit.core._exact import exact_sum
    from dpkit.core.errors import InvalidData

    for bad in ([1.0, math.nan], [math.inf, 1.0]):
        with pytest.raises(InvalidData):
            exact_sum(bad)
    with pytest.raises(InvalidData):
        exact_sum([1.0, math.nan], clamp=(0.0, 1.0))
