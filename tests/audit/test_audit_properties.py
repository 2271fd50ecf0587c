"""Property-based tests (hypothesis) of the auditor's public statistics and its validation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.audit import clopper_pearson, epsilon_lower_bound, privacy_loss
from dpkit.audit.exact import HalfLine, Laplace, Point
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType

counts = st.integers(min_value=1, max_value=10_000).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(0, n)))
confidences = st.floats(min_value=0.5, max_value=1 - 1e-9)


@settings(derandomize=True, max_examples=200, deadline=None)
@given(counts, confidences)
def test_clopper_pearson_is_a_sub_interval_of_unit_containing_the_estimate(nk, conf):
    n, k, _ = nk
    lo, hi = clopper_pearson(k, n, conf)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


@settings(derandomize=True, max_examples=100, deadline=None)
@given(counts)
def test_clopper_pearson_widens_with_confidence(nk):
    n, k, _ = nk
    lo1, hi1 = clopper_pearson(k, n, 0.9)
    lo2, hi2 = clopper_pearson(k, n, 0.999)
    assert lo2 <= lo1 and hi1 <= hi2


@settings(derandomize=True, max_examples=200, deadline=None)
@given(counts, confidences, st.floats(min_value=0, max_value=0.5))
def test_epsilon_lower_bound_is_nonnegative_and_below_the_plugin_ratio(nkk, conf, delta):
    n, a, b = nkk
    lb = epsilon_lower_bound(a, b, n, confidence=conf, delta=delta)
    assert lb >= 0.0 and math.isfinite(lb)
    if a > 0 and b > 0:
        # never above the plug-in estimate ln(p_D / p_D')
        assert lb <= max(0.0, math.log(a / b)) + 1e-12


@settings(derandomize=True, max_examples=100, deadline=None)
@given(st.floats(min_value=-10, max_value=10), st.floats(min_value=0.05, max_value=5.0))
def test_laplace_shift_by_sensitivity_has_loss_at_most_epsilon(x, eps):
    # Laplace(0, 1/eps) vs Laplace(1, 1/eps): every point and half-line has |loss| <= eps.
    a, b = Laplace(0.0, 1.0 / eps), Laplace(1.0, 1.0 / eps)
    for event in (Point(x), HalfLine(x, ">="), HalfLine(x, "<=")):
        loss = privacy_loss(a, b, event)
        assert abs(loss) <= eps * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize(
    ("call", "param", "kind"),
    [
        (lambda: clopper_pearson(1, 0), "trials", InvalidParameter),
        (lambda: clopper_pearson(5, 4), "successes", InvalidParameter),
        (lambda: clopper_pearson(1, 10, 1.0), "confidence", InvalidParameter),
        (lambda: clopper_pearson(1, 10, float("nan")), "confidence", InvalidParameter),
        (lambda: clopper_pearson(1.5, 10), "successes", WrongType),
        (lambda: epsilon_lower_bound(1, 1, 10, delta=1.0), "delta", InvalidParameter),
        (lambda: epsilon_lower_bound(-1, 1, 10), "count_d", InvalidParameter),
        (lambda: epsilon_lower_bound(1, None, 10), "count_d_prime", WrongType),
    ],
)
def test_bad_input_names_the_parameter(call, param, kind):
    with pytest.raises(kind) as info:
        call()
    assert isinstance(info.value, DPKitError)
    assert info.value.param == param
