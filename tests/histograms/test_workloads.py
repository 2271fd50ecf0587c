"""Workloads and metrics of dpkit.histograms.workloads."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.histograms import (
    all_ranges,
    answer,
    mae,
    msae,
    prefix_ranges,
    random_ranges,
    relative_error,
    scaled_error,
)
from dpkit.noise import deterministic_source


@pytest.mark.parametrize("m", [1, 2, 3, 7, 64, 257])
def test_all_ranges_count_and_average_length(m):
    r = all_ranges(m)
    assert r.shape == (m * (m + 1) // 2, 2)
    assert len({tuple(x) for x in r.tolist()}) == r.shape[0]
    assert np.all((r[:, 0] >= 0) & (r[:, 0] < r[:, 1]) & (r[:, 1] <= m))
    # closed form (Li et al. §4.2.1): average query length over all ranges = (m+2)/3, exactly
    assert Fraction(int((r[:, 1] - r[:, 0]).sum()), r.shape[0]) == Fraction(m + 2, 3)


def test_prefix_ranges():
    assert prefix_ranges(3).tolist() == [[0, 1], [0, 2], [0, 3]]


def test_answer_matches_direct_sums():
    h = np.arange(1, 11) ** 2
    r = all_ranges(10)
    expected = [h[lo:hi].sum() for lo, hi in r.tolist()]
    assert answer(h, r).tolist() == expected
    assert answer(h, np.zeros((0, 2), dtype=int)).shape == (0,)


def test_random_ranges_uniform_over_all_ranges():
    m, n = 4, 100_000
    r = random_ranges(m, n, deterministic_source(3))
    assert r.shape == (n, 2) and r.dtype == np.int64
    assert np.all((r[:, 0] < r[:, 1]) & (r[:, 1] <= m) & (r[:, 0] >= 0))
    idx = {tuple(x): i for i, x in enumerate(all_ranges(m).tolist())}
    counts = np.bincount([idx[tuple(x)] for x in r.tolist()], minlength=len(idx))
    k = len(idx)
    chi2 = float(((counts - n / k) ** 2 / (n / k)).sum())
    # chi-square with 9 df: P[chi2 > 50] ~ 1e-7; a non-uniform sampler (e.g. lo, length uniform) fails
    assert chi2 < 50.0
    assert random_ranges(m, 0, deterministic_source(1)).shape == (0, 2)
    # power: the naive "uniform lo, then uniform hi > lo" sampler is far from uniform over ranges
    rng = np.random.default_rng(0)  # test-only
    lo = rng.integers(0, m, n)
    hi = lo + 1 + (rng.random(n) * (m - lo)).astype(int)
    bad = np.bincount([idx[(a, b)] for a, b in zip(lo.tolist(), hi.tolist(), strict=True)], minlength=k)
    assert float(((bad - n / k) ** 2 / (n / k)).sum()) > 50.0


def test_metrics():
    t = np.array([10.0, 0.0, 5.0])
    y = np.array([12.0, 1.0, 5.0])
    assert mae(t, y) == pytest.approx(1.0)
    assert msae(t, y) == pytest.approx(5.0 / 3)
    assert relative_error(t, y, 2.0) == pytest.approx((2 / 10 + 1 / 2 + 0) / 3)
    assert scaled_error(t, y, 15) == pytest.approx(1.0 / 15)


@pytest.mark.parametrize(("call", "err", "param"), [
    (lambda: all_ranges(0), InvalidParameter, "m"),
    (lambda: all_ranges(2.5), WrongType, "m"),
    (lambda: all_ranges(10_000), InvalidParameter, "m"),
    (lambda: random_ranges(3, -1, deterministic_source(1)), InvalidParameter, "count"),
    (lambda: answer([1, 2, 3], [[0, 4]]), InvalidParameter, "ranges"),
    (lambda: answer([1, 2, 3], [[2, 2]]), InvalidParameter, "ranges"),
    (lambda: answer([1, 2, 3], [[0.0, 1.0]]), WrongType, "ranges"),
    (lambda: answer([1, 2, 3], [0, 1]), InvalidParameter, "ranges"),
    (lambda: answer([1, float("nan"), 3], [[0, 1]]), InvalidData, "hist"),
    (lambda: mae([1, 2], [1]), InvalidParameter, "noisy"),
    (lambda: mae([], []), InvalidData, "true"),
    (lambda: relative_error([1], [1], 0), InvalidParameter, "theta"),
    (lambda: scaled_error([1], [1], -3), InvalidParameter, "total"),
])
def test_bad_input(call, err, param):
    with pytest.raises(err) as info:
        call()
    assert info.value.param == param
