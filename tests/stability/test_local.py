"""Local sensitivity tools: brute-force checks of the derived formulas, and the auditor catching
noise scaled to the local sensitivity."""

from __future__ import annotations

import numpy as np
import pytest

from dpkit import PrivacyUnit, Replace
from dpkit.audit import Point, audit
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.stability import (
    local_sensitivity_mean,
    local_sensitivity_median,
    ls_at_distance_mean,
    ls_at_distance_median,
)
from dpkit.stability._util import mean_value, median_value

from .helpers import (
    add_remove_neighbours,
    ball,
    local_sensitivity_mean_noise,
    local_sensitivity_median_noise,
    multisets,
    replace_neighbours,
)

GRID = (0.0, 1.0, 2.0, 4.0)
BOUNDS = (0.0, 4.0)


def _med(x):
    return median_value(np.array(sorted(x)), *BOUNDS)


def _mean(x):
    return mean_value(np.array(sorted(x)), *BOUNDS)


def _ls(f, x, step):
    return max(abs(f(x) - f(y)) for y in step(x))


def _ar(x):
    return add_remove_neighbours(x, GRID)


def _rp(x):
    return replace_neighbours(x, GRID)


_LS_CACHE: dict = {}


def _ls_cached(kind, x):
    key = (kind, x)
    if key not in _LS_CACHE:
        f = _med if kind[0] == "med" else _mean
        step = _ar if kind[1] == "ar" else _rp
        _LS_CACHE[key] = _ls(f, x, step)
    return _LS_CACHE[key]


def test_median_local_sensitivity_matches_brute_force():
    # adding a value anywhere in [lo, hi] moves the median to clamp(v, ., .): the extremes are in GRID
    for x in multisets(GRID, 5):
        assert local_sensitivity_median(list(x), BOUNDS) == _ls_cached(("med", "ar"), x)
        if x:
            assert local_sensitivity_median(list(x), BOUNDS, neighbours=Replace()) == _ls_cached(("med", "rp"), x)


def test_median_ls_at_distance_is_exact():
    for x in multisets(GRID, 4):
        for k in range(3):
            brute = max(_ls_cached(("med", "ar"), y) for y in ball(x, k, _ar))
            assert ls_at_distance_median(list(x), BOUNDS, k) == brute
        if x and len(x) <= 3:
            for k in range(3):
                brute_r = max(_ls_cached(("med", "rp"), y) for y in ball(x, k, _rp))
                assert ls_at_distance_median(list(x), BOUNDS, k, neighbours=Replace()) == brute_r


def test_mean_local_sensitivity_matches_brute_force():
    for x in multisets(GRID, 5):
        assert local_sensitivity_mean(list(x), BOUNDS) == pytest.approx(_ls_cached(("mean", "ar"), x), rel=1e-12,
                                                                         abs=1e-15)
        if x:
            assert local_sensitivity_mean(list(x), BOUNDS, neighbours=Replace()) == pytest.approx(
                _ls_cached(("mean", "rp"), x), rel=1e-12)


def test_distance_bounds_dominate_and_are_monotone():
    for x in multisets(GRID, 3):
        for k in range(3):
            brute = max(_ls_cached(("mean", "ar"), y) for y in ball(x, k, _ar))
            assert ls_at_distance_mean(list(x), BOUNDS, k) >= brute - 1e-12
            for y in _ar(x):  # Â(x, k) <= Â(x', k + 1) for neighbours
                assert ls_at_distance_mean(list(x), BOUNDS, k) <= ls_at_distance_mean(list(y), BOUNDS, k + 1)
                assert ls_at_distance_median(list(x), BOUNDS, k) <= ls_at_distance_median(list(y), BOUNDS, k + 1)


def test_near_mean_formula_misses_removals():
    # u/(n + 1) (Near & Abuah eq. 8.6) is not the local sensitivity under add/remove: remove the 0
    x = [0.0, 10.0, 10.0]
    near = 10.0 / (len(x) + 1)
    assert local_sensitivity_mean(x, (0.0, 10.0)) == pytest.approx(10.0 / 3.0)
    assert local_sensitivity_mean(x, (0.0, 10.0)) > near
    assert ls_at_distance_mean(x, (0.0, 10.0), 0) == pytest.approx(10.0 / 3.0)  # w / n


def test_li_median_example_and_vectorised_k():
    # Li Ex 8.1 (add/remove version): m + 1 zeros then Lambdas -> LS = 0; one zero fewer -> LS = Lambda
    assert local_sensitivity_median([0.0] * 3 + [9.0] * 2, (0.0, 9.0)) == 0.0
    assert local_sensitivity_median([0.0] * 2 + [9.0] * 2, (0.0, 9.0)) == 9.0
    out = ls_at_distance_median([1.0, 2.0, 3.0], (0.0, 5.0), np.array([0, 1, 2, 3, 10]))
    assert isinstance(out, np.ndarray) and out.tolist() == [1.0, 2.0, 3.0, 5.0, 5.0]
    assert local_sensitivity_median([], (0.0, 5.0)) == 5.0  # empty: median lo, adding moves it anywhere


def test_tools_say_not_private():
    for fn in (local_sensitivity_mean, local_sensitivity_median, ls_at_distance_mean, ls_at_distance_median):
        assert "NOT PRIVATE" in fn.__doc__


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"values": [1.0, float("nan")], "bounds": (0.0, 1.0)}, InvalidData, "values"),
    ({"values": [1.0, None], "bounds": (0.0, 1.0)}, InvalidData, "values"),
    ({"values": [1.0, float("inf")], "bounds": (0.0, 1.0)}, InvalidData, "values"),
    ({"values": "abc", "bounds": (0.0, 1.0)}, WrongType, "values"),
    ({"values": [1.0], "bounds": (1.0, 1.0)}, InvalidParameter, "bounds"),
    ({"values": [1.0], "bounds": (0.0, 1.0), "neighbours": PrivacyUnit("u", 2)}, InvalidParameter, "neighbours"),
])
def test_tools_bad_input(kwargs, err, param):
    for fn in (local_sensitivity_mean, local_sensitivity_median):
        with pytest.raises(err) as exc:
            fn(**kwargs)
        assert exc.value.param == param
    with pytest.raises(InvalidParameter) as exc:
        ls_at_distance_median([1.0], (0.0, 1.0), -1)
    assert exc.value.param == "k"
    with pytest.raises(WrongType):
        ls_at_distance_mean([1.0], (0.0, 1.0), 1.5)


def test_auditor_flags_median_with_local_sensitivity_noise():
    # Li's pair: D has LS = 0 (no noise, the output is exactly 0); D' (one zero fewer) has LS = 9
    d = [0.0] * 3 + [9.0] * 2
    d_prime = [0.0] * 2 + [9.0] * 2
    mech = local_sensitivity_median_noise(1.0, (0.0, 9.0))
    res = audit(mech, d, d_prime, trials=20_000, event=Point(0.0), vectorized=True, claimed_epsilon=1.0,
                claimed_delta=1e-3, confidence=1 - 1e-7, rng=deterministic_source(5))
    assert res.flagged and res.epsilon_lower_bound > 5.0


def test_auditor_flags_mean_with_local_sensitivity_noise():
    # n = 1 vs n = 2 (both mean 0): LS = 1/2 vs 1/3 -- the noise scale reveals n
    mech = local_sensitivity_mean_noise(1.0, (0.0, 1.0))
    res = audit(mech, [0.0], [0.0, 0.0], trials=200_000, event=lambda o: np.abs(o) > 2.5, vectorized=True,
                claimed_epsilon=1.0, confidence=1 - 1e-7, rng=deterministic_source(6))
    assert res.flagged  # true log ratio ~ ln(e^-5 / e^-7.5) = 2.5
