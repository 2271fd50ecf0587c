"""The flat (identity) histogram (dpkit.histograms.identity)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from tests.histograms._helpers import ONE_CHARGE

from conftest import sized
from dpkit.audit.exact import DiscreteLaplace, max_privacy_loss
from dpkit.audit.testing import CountingSource, assert_charges_first, chi2_pvalue
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import PrivacyUnit, Replace
from dpkit.histograms import identity
from dpkit.noise import deterministic_source

P_MIN = 1e-7


def dlap_pvalue(z: np.ndarray, t: float) -> float:
    """Chi-square p-value of integer samples ``z`` against the discrete Laplace law of scale ``t``
    (cells -K..K plus the two tails)."""
    q = math.exp(-1.0 / t)
    k = math.ceil(12 * t) + 2
    ks = np.arange(-k, k + 1)
    probs = np.concatenate([[q ** (k + 1) / (1 + q)], (1 - q) / (1 + q) * q ** np.abs(ks), [q ** (k + 1) / (1 + q)]])
    cells = np.clip(z, -k - 1, k + 1) + k + 1
    return chi2_pvalue(np.bincount(cells, minlength=2 * k + 3), probs)


def test_shapes_dtypes_and_parts():
    for counts in ([3, 0, 7], [[1, 2, 3], [4, 5, 6]]):
        rel = identity(counts, 0.5, rng=deterministic_source(3))
        arr = np.asarray(counts)
        assert rel.value.shape == arr.shape and rel.value.dtype == np.float64
        assert rel.parts["noisy"].dtype == np.int64 and np.array_equal(rel.parts["noisy"], rel.value)
        assert rel.params["sensitivity"] == 1 and rel.scale == rel.params["scale"] == 2.0
        assert rel.mechanism == "identity_histogram" and rel.cost == PureDP(0.5)
    assert identity([1, 2], 0.5, neighbours=Replace(), rng=deterministic_source(1)).params["sensitivity"] == 2
    unit = PrivacyUnit("user", max_rows=3)
    assert identity([1, 2], 0.5, neighbours=unit, rng=deterministic_source(1)).params["sensitivity"] == 3


@pytest.mark.parametrize(("nb", "sens"), [(None, 1), (Replace(), 2)])
def test_noise_is_discrete_laplace_with_the_stated_scale(nb, sens):
    eps = 0.7
    n = sized(40_000, 400_000)
    counts = np.full(n, 5)
    rel = identity(counts.reshape(-1, 8) if n % 8 == 0 else counts, eps, neighbours=nb, rng=deterministic_source(11))
    z = rel.parts["noisy"].ravel() - 5
    t = rel.scale
    assert t >= sens / eps and Fraction(sens) / Fraction(t) <= Fraction(eps)
    assert dlap_pvalue(z, t) > P_MIN
    assert dlap_pvalue(z, 1.1 * t) < P_MIN  # power: a 10% wrong scale is caught
    assert dlap_pvalue(z, t / 1.1) < P_MIN


@pytest.mark.parametrize(("nb", "d", "d_prime"), [
    (None, [2, 0, 1], [3, 0, 1]),              # add one record to bin 0
    (Replace(), [2, 0, 1], [3, 0, 0]),         # a record moves from bin 2 to bin 0
    (None, [[1, 0], [0, 4]], [[1, 0], [0, 5]]),
    (Replace(), [[1, 0], [0, 4]], [[1, 1], [0, 3]]),
])
def test_exact_privacy_loss_equals_epsilon(nb, d, d_prime):
    eps = 0.9
    rel = identity(d, eps, neighbours=nb, rng=deterministic_source(1))
    t = rel.scale

    def loss(scale):
        total = 0.0
        for u, w in zip(np.ravel(d).tolist(), np.ravel(d_prime).tolist(), strict=True):
            if u != w:
                total += max_privacy_loss(DiscreteLaplace(u, scale), DiscreteLaplace(w, scale),
                                          grid=np.arange(-40, 41)).loss
        return total

    assert eps * (1 - 1e-9) <= loss(t) <= eps * (1 + 1e-12)
    if nb is not None:  # power: calibrating replace-one with the add/remove sensitivity loses 2 epsilon
        assert loss(1.0 / eps) > 1.9 * eps


def test_one_charge_before_randomness_and_refusal_draws_nothing():
    rel = assert_charges_first(identity, ([[3, 1], [4, 1]], 0.6), name="identity_histogram", **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == np.shape([[3, 1], [4, 1]])


def test_interval_covers():
    rel = identity([10, 20, 30], 1.0, rng=deterministic_source(2))
    lo, hi = rel.interval(0.9)
    assert lo.shape == (3,) and np.all(hi - lo > 0)


@pytest.mark.parametrize(("counts", "eps", "err", "param"), [
    ([1, -2, 3], 1.0, InvalidData, "counts"),
    ([1, 2.5, 3], 1.0, InvalidData, "counts"),
    ([1, float("nan")], 1.0, InvalidData, "counts"),
    ([], 1.0, InvalidData, "counts"),
    (None, 1.0, WrongType, "counts"),
    ("abc", 1.0, WrongType, "counts"),
    ([[[1]]], 1.0, InvalidData, "counts"),
    ([1, 12345], 0.0, InvalidParameter, "epsilon"),
    ([1, 12345], float("inf"), InvalidParameter, "epsilon"),
])
def test_bad_input_typed_errors_nothing_charged(counts, eps, err, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(1)
    with pytest.raises(err) as info:
        identity(counts, eps, accountant=acct, rng=src)
    assert info.value.param == param
    assert "12345" not in str(info.value) and "2.5" not in str(info.value)
    assert len(acct.receipts) == 0 and src.consumed == 0
