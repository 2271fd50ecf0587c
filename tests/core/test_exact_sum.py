"""dpkit.core._exact.exact_sum (issue #16, second pass): every path of the blockwise method is exact bit for bit.

The paths: a block all on the first grid (integer-valued data); the remainders summed in float under the test
"no non-zero value below 2^(e-33)" (for non-negative values in one pass, with +0 in a second pass, for mixed signs
on |x|, skipped when the bounds exclude zero); the second level and the per-exponent remainders when the test
fails (tiny values, subnormals); NaN and infinities (refused, or clamped unless ``strict=True``); bounds at the
ends of the float range. Each case is checked against the exact rational sum of the clamped values."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import sized

from dpkit.core._exact import _BLOCK, _exact_sum_pieces, exact_sum
from dpkit.core.errors import InvalidData

SUB = 5e-324
MAX = 1.7976931348623157e308


def _fraction_sum(a) -> Fraction:
    return sum((Fraction(float(v)) for v in np.asarray(a, dtype=np.float64).tolist()), Fraction(0))


def _want(a, clamp=None) -> Fraction:
    c = np.asarray(a, dtype=np.float64) if clamp is None else np.clip(np.asarray(a, dtype=np.float64), *clamp)
    return _exact_sum_pieces(c) if c.size > 5000 else _fraction_sum(c)


def _blocks(*parts):
    """Whole blocks (each part repeated or cut to _BLOCK values), then a short tail of the first part."""
    out = [np.resize(np.asarray(p, dtype=np.float64), _BLOCK) for p in parts]
    return np.concatenate([*out, out[0][:777]])


def _rng(seed):
    return np.random.default_rng(seed)  # rng-ok: test data


def test_reference_is_exact():
    a = np.concatenate([_rng(1).normal(0, 1, 3000), [SUB, -SUB, 1e300, -1e300, 0.5]])
    assert _exact_sum_pieces(a) == _fraction_sum(a)


@pytest.mark.parametrize("clamp", [(0.0, 100.0), (-0.0, 100.0), (-50.0, 100.0), (1.0, 100.0), (-100.0, -1.0),
                                   (-100.0, 0.0), (0.25, 0.75), (1e-40, 1.0)])
def test_every_block_kind_in_one_array(clamp):
    g = _rng(2)
    normal = g.normal(40, 30, _BLOCK)
    ints = np.round(g.normal(40, 30, _BLOCK))
    with_pos_zero = normal.copy()
    with_pos_zero[::97] = 0.0
    with_neg_zero = normal.copy()
    with_neg_zero[::89] = -0.0
    tiny = normal.copy()
    tiny[5] = 1e-30  # below 2^(e-33): the float sum of the remainders is not certified, the second level runs
    tiny[7] = -3e-31
    subn = normal.copy()
    subn[3] = SUB  # off every grid: per-exponent remainders
    subn[9] = 7 * SUB
    cancel = np.tile([99.999999999, -99.999999999, 1e-9, 3.3, -3.3], _BLOCK // 5 + 1)
    for order in ((ints, normal, with_pos_zero, with_neg_zero, tiny, subn, cancel, ints),
                  (normal, ints, subn, tiny, with_pos_zero, cancel),
                  (tiny, ints, normal)):
        a = _blocks(*order)
        assert exact_sum(a, clamp=clamp) == _want(a, clamp)
        assert exact_sum(-a, clamp=clamp) == _want(-a, clamp)
        assert exact_sum(a[::3], clamp=clamp) == _want(a[::3], clamp)  # a strided view


def test_without_clamp_the_bound_comes_from_the_data():
    g = _rng(3)
    for a in (np.abs(g.normal(40, 10, 3 * _BLOCK + 5)),  # x >= 0
              g.normal(0, 10, 2 * _BLOCK + 1),  # mixed signs
              1.0 + g.random(2 * _BLOCK),  # bounds exclude zero: no test needed
              np.concatenate([g.random(_BLOCK), [0.0] * 100, [1e-300, SUB], g.random(_BLOCK)]),
              np.concatenate([np.round(g.normal(0, 1e6, _BLOCK)), g.normal(0, 1e6, _BLOCK)]),
              np.array([MAX, -MAX, MAX, 1.0, SUB]),
              np.array([SUB, 3 * SUB, -2 * SUB]),
              np.array([-0.0, 0.0, -0.0])):
        assert exact_sum(a) == _want(a)


def test_values_at_the_certified_threshold():
    # bounds [0, 100): e = 7, the test's threshold is 2^(7-33) = 2^-26; values on both sides of it
    t = 2.0**-26
    for extra in ([t], [math.nextafter(t, 0.0)], [math.nextafter(t, 1.0)], [t * (1 + 2**-52), 0.0],
                  [math.nextafter(t, 0.0), -0.0], [2.0**-1022], [SUB, 0.0]):
        a = np.concatenate([_rng(4).uniform(0, 100, _BLOCK - len(extra)), extra, _rng(5).uniform(0, 100, 99)])
        assert exact_sum(a, clamp=(0.0, 100.0)) == _want(a, (0.0, 100.0))
        assert exact_sum(a) == _want(a)
        assert exact_sum(-a, clamp=(-100.0, 100.0)) == _want(-a, (-100.0, 100.0))


def test_worst_case_remainders_fill_the_certified_grid():
    # every remainder as large as the first grid allows, with the finest bits the test lets through
    e = 7
    s1 = 2.0 ** (e - 46)
    t = 2.0 ** (e - 33)
    big = np.full(_BLOCK, math.nextafter(2.0**e - s1 / 2, 0.0))  # remainders near s1/2, one sign
    fine = np.full(_BLOCK, t * (1 + 2**-52))  # ulp = 2^(e-85), the certified grid
    mixed = np.concatenate([big[: _BLOCK // 2], fine[: _BLOCK // 2]])
    for a in (big, fine, mixed, np.concatenate([big, fine, mixed])):
        assert exact_sum(a, clamp=(0.0, 127.0)) == _want(a, (0.0, 127.0))
        assert exact_sum(a) == _want(a)


@pytest.mark.parametrize("scale", [2.0**1015, 1e300, 2.0**1016, 1e-290, 2.0**-981, 2.0**-982, 1e-300, 1e-310])
def test_bounds_near_the_ends_of_the_float_range(scale):
    g = _rng(6)
    a = np.concatenate([g.uniform(-1, 1, 2 * _BLOCK) * scale, [scale, -scale, SUB, 0.0, MAX, -MAX]])
    for clamp in ((-scale, scale), (0.0, scale), (scale / 2, scale)):
        assert exact_sum(a, clamp=clamp) == _want(a, clamp)
    small = a[np.abs(a) <= scale]
    assert exact_sum(small) == _want(small)


def test_huge_sums_and_cancellation_across_blocks():
    g = _rng(7)
    x = g.uniform(0, 1e15, 4 * _BLOCK)
    a = np.concatenate([x, -x[::-1], [0.5, 2.0**-40]])
    assert exact_sum(a) == Fraction(1, 2) + Fraction(2.0**-40)
    assert exact_sum(a, clamp=(-1e15, 1e15)) == _want(a, (-1e15, 1e15))
    big = np.full(3 * _BLOCK, MAX / 4)  # sums far beyond the float range
    assert exact_sum(big) == 3 * _BLOCK * Fraction(MAX / 4)
    assert exact_sum(big, clamp=(-MAX, MAX)) == 3 * _BLOCK * Fraction(MAX / 4)


def test_nan_is_refused_in_every_path_and_inf_with_strict():
    g = _rng(8)
    ints = np.round(g.normal(40, 10, _BLOCK))
    floats = g.normal(40, 10, _BLOCK)
    for first in (ints, floats):
        for pos in (3, _BLOCK + 3, 2 * _BLOCK + 3):
            a = np.concatenate([first, floats, ints, floats[:50]])
            a[pos] = math.nan
            for clamp in (None, (0.0, 100.0), (-100.0, 100.0), (1.0, 100.0), (0.0, 0.0)):
                with pytest.raises(InvalidData):
                    exact_sum(a, clamp=clamp)
                with pytest.raises(InvalidData):
                    exact_sum(a, clamp=clamp, strict=True)
            for bad in (math.inf, -math.inf):
                a[pos] = bad
                with pytest.raises(InvalidData):
                    exact_sum(a)
                with pytest.raises(InvalidData):
                    exact_sum(a, clamp=(0.0, 100.0), strict=True)
                clamped = a.copy()
                clamped[pos] = 100.0 if bad > 0 else 0.0
                assert exact_sum(a, clamp=(0.0, 100.0)) == _want(clamped, (0.0, 100.0))  # clamped, as documented
    # strict: sums that overflow are checked value by value, not refused
    a = np.full(10, 1e308)
    assert exact_sum(a, clamp=(-MAX, MAX), strict=True) == 10 * Fraction(1e308)


@settings(max_examples=sized(60, 600), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lo=st.sampled_from([0.0, -1.0, 1.0, -1e10, 1e-20]),
       width=st.sampled_from([1.0, 100.0, 2.0**40, 3e-5]), kind=st.integers(0, 4))
def test_random_mixtures_against_fractions(seed, lo, width, kind):
    g = _rng(seed)
    hi = lo + width
    n = int(g.integers(1, 2 * _BLOCK + 100))
    x = g.normal(lo + width / 2, width, n)
    if kind == 1:
        x = np.round(x)
    elif kind == 2:
        x[g.integers(0, n, 20)] = g.choice([0.0, -0.0, SUB, -SUB, 1e-300, lo, hi], 20)
    elif kind == 3:
        x *= np.exp2(g.integers(-60, 5, n))
    elif kind == 4:
        x = np.concatenate([x, -x])
    assert exact_sum(x, clamp=(lo, hi)) == _want(x, (lo, hi))
    assert exact_sum(x, clamp=(lo, hi), strict=True) == _want(x, (lo, hi))


def test_ten_million_benchmark_vector_matches_fsum():
    g = _rng(16)
    x = g.normal(40.0, 10.0, 10_000_000)
    want = _exact_sum_pieces(np.clip(x, 0.0, 100.0))
    assert exact_sum(x, clamp=(0.0, 100.0)) == want
    assert exact_sum(x, clamp=(0.0, 100.0), strict=True) == want
    assert float(want) == math.fsum(np.clip(x, 0.0, 100.0).tolist())
    xi = np.round(x)
    assert exact_sum(xi, clamp=(0.0, 100.0)) == _exact_sum_pieces(np.clip(xi, 0.0, 100.0))


# --- dpkit.stats.mean reads a plain float64 array once: exact_sum(strict=True) instead of real_data + exact_sum ---
def _outcome(call):
    try:
        r = call()
    except Exception as exc:  # the error itself is compared
        return type(exc), str(exc)
    return r.value, r.params, r.parts, r.cost


@pytest.mark.parametrize("method", ["centred", "exponential", "normalized", "clamp"])
@pytest.mark.parametrize("neighbours", [None, "replace"])
def test_stats_mean_fused_read_same_errors_and_releases_as_before(method, neighbours):
    import dpkit.stats.means as means
    from dpkit import Accountant, PureDP, Replace, deterministic_source, stats

    nb = Replace() if neighbours else None
    g = _rng(9)
    base = g.normal(4.0, 3.0, 3 * _BLOCK + 11)
    cases = [base, np.round(base)]
    for pos in (0, _BLOCK + 5, base.size - 1):
        for bad in (math.nan, math.inf, -math.inf):
            a = base.copy()
            a[pos] = bad
            cases.append(a)
    nan2 = base.copy()
    nan2[[3, 4 * 7]] = math.nan
    cases.append(nan2)
    slow = means._uses_clamped_sum
    for a in cases:
        for policy in ("raise", "omit", "bogus"):
            for eps in (3.0, -1.0):
                def call(values, policy=policy, eps=eps):
                    acc = Accountant(PureDP(10.0), neighbours=nb) if nb is not None else Accountant(PureDP(10.0))
                    r = stats.mean(values, (0.0, 10.0), eps, method=method, neighbours=nb, nan_policy=policy,
                                   accountant=acc, rng=deterministic_source(3))
                    assert acc.spent == PureDP(eps)
                    return r
                fused = _outcome(lambda a=a: call(a))
                try:
                    means._uses_clamped_sum = lambda *args: False  # the former path: real_data, then the sum
                    plain = _outcome(lambda a=a: call(a))
                finally:
                    means._uses_clamped_sum = slow
                assert fused == plain
                assert fused == _outcome(lambda a=a: call(a.tolist()))  # a list never takes the fused read
