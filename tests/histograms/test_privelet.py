"""Privelet: Haar wavelet histograms (dpkit.histograms.privelet)."""

from __future__ import annotations

import itertools
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
from dpkit.histograms import least_squares, privelet, wavelet_strategy
from dpkit.histograms.hierarchical import _dlap_variance
from dpkit.histograms.privelet import haar_forward, haar_inverse, privelet_sensitivity
from dpkit.noise import deterministic_source

P_MIN = 1e-7


def dlap_pvalue(z: np.ndarray, t: float) -> float:
    q = math.exp(-1.0 / t)
    k = math.ceil(12 * t) + 2
    ks = np.arange(-k, k + 1)
    probs = np.concatenate([[q ** (k + 1) / (1 + q)], (1 - q) / (1 + q) * q ** np.abs(ks), [q ** (k + 1) / (1 + q)]])
    return chi2_pvalue(np.bincount(np.clip(z, -k - 1, k + 1) + k + 1, minlength=2 * k + 3), probs)


def haar_matrix(n: int) -> np.ndarray:
    """The integer Haar matrix, written independently: row 0 all ones; then per node (top first, left to
    right) +1 on the left half of its support and -1 on the right half."""
    rows = [np.ones(n)]
    width = n
    while width >= 2:
        for start in range(0, n, width):
            r = np.zeros(n)
            r[start:start + width // 2] = 1
            r[start + width // 2:start + width] = -1
            rows.append(r)
        width //= 2
    return np.array(rows)


# ------------------------------------------------------------------ the transform
def test_book_reconstruction_example_and_erratum():
    # Li et al. §4.2.5 (Fig 4.2): h0 = 5, h1 = 1 and the third leaf is 6. With leaves [7, 5, 6, 2]:
    # h0 = mean = 5, h1 = (a_l - a_r)/2 = (6 - 4)/2 = 1, h2 = (7 - 5)/2 = 1, h3 = (6 - 2)/2 = 2.
    leaves = np.array([7, 5, 6, 2])
    c = haar_forward(leaves)
    sizes = np.array([4, 4, 2, 2])  # h0 = T/4, h_v = d_v/size(v)
    h = c / sizes
    assert h.tolist() == [5.0, 1.0, 1.0, 2.0]
    # the path to the third leaf v3 goes right at the root (-h1), then left at node 3 (+h3):
    assert h[0] - h[1] + h[3] == 6 == leaves[2]
    # the printed "v4 = h0 - h1 + h4" names a coefficient that a 4-leaf tree does not have (and v4 = 2):
    assert len(h) == 4 and h[0] - h[1] - h[3] == 2 == leaves[3]
    assert haar_inverse(c).tolist() == leaves.tolist()


@pytest.mark.parametrize("n", [2, 4, 8, 32])
def test_forward_matches_the_haar_matrix_and_inverts(n):
    x = deterministic_source(n).below(50, n).astype(np.int64)
    assert np.array_equal(haar_forward(x), (haar_matrix(n) @ x).astype(np.int64))
    assert np.array_equal(haar_inverse(haar_forward(x)), x.astype(float))
    assert np.array_equal(wavelet_strategy(n).toarray(), haar_matrix(n))
    batch = np.stack([x, x[::-1]])
    assert np.array_equal(haar_forward(batch)[1], haar_forward(x[::-1]))


def test_transform_needs_a_power_of_two():
    with pytest.raises(InvalidParameter):
        haar_forward([1, 2, 3])
    with pytest.raises(InvalidParameter):
        haar_inverse([1.0])


# ------------------------------------------------------------------ sensitivity (brute force)
def tensor_columns(shape_padded, shape_real):
    a1, a2 = haar_matrix(shape_padded[0]), haar_matrix(shape_padded[1])
    cols = []
    for i, j in itertools.product(range(shape_real[0]), range(shape_real[1])):
        cols.append(np.kron(a1[:, i], a2[:, j]))
    return np.array(cols)


@pytest.mark.parametrize("m", [2, 3, 4, 5, 8, 13, 16])
def test_1d_sensitivity_is_exact_by_brute_force(m):
    h = max(1, math.ceil(math.log2(m)))
    a = haar_matrix(2**h)[:, :m]
    add = max(np.abs(a[:, i]).sum() for i in range(m))
    rep = max(np.abs(a[:, i] - a[:, j]).sum() for i in range(m) for j in range(m) if i != j)
    assert add == privelet_sensitivity((h,)) == 1 + h
    assert rep == privelet_sensitivity((h,), replace=True) == 2 * h
    assert privelet_sensitivity((h,), rows=3) == 3 * (1 + h)


@pytest.mark.parametrize("shape", [(2, 2), (3, 5), (4, 4), (4, 8), (8, 2), (5, 7)])
def test_2d_sensitivity_is_exact_by_brute_force(shape):
    hs = tuple(max(1, math.ceil(math.log2(n))) for n in shape)
    cols = tensor_columns(tuple(2**h for h in hs), shape)
    add = np.abs(cols).sum(axis=1).max()
    diffs = np.abs(cols[:, None, :] - cols[None, :, :]).sum(axis=2)
    assert add == privelet_sensitivity(hs) == (1 + hs[0]) * (1 + hs[1])
    assert diffs.max() == privelet_sensitivity(hs, replace=True) == 2 * (1 + hs[0]) * (1 + hs[1]) - 4


# ------------------------------------------------------------------ release
def test_release_shapes_and_reconstruction():
    rel = privelet([3, 1, 4, 1, 5], 1.0, rng=deterministic_source(4))
    assert rel.value.shape == (5,) and rel.value.dtype == np.float64
    c = rel.parts["coefficients"]
    assert c.dtype == np.int64 and c.shape == (8,)
    assert np.allclose(rel.value, haar_inverse(c)[:5])
    rel2 = privelet(np.arange(15).reshape(3, 5), 1.0, rng=deterministic_source(4))
    c2 = rel2.parts["coefficients"]
    assert rel2.value.shape == (3, 5) and c2.shape == (4, 8) and rel2.params["heights"] == (2, 3)
    assert np.allclose(rel2.value, haar_inverse(haar_inverse(c2).T).T[:3, :5])
    assert rel2.params["sensitivity"] == 12 and rel2.scale == 12.0


def test_reconstruction_is_least_squares_on_the_wavelet_strategy():
    m = 16
    rel = privelet(np.arange(m) % 5, 0.5, rng=deterministic_source(8))
    var = _dlap_variance(rel.scale)
    ls = least_squares(wavelet_strategy(m), rel.parts["coefficients"].astype(float), var)
    assert np.allclose(ls, rel.value, atol=1e-9)


@pytest.mark.parametrize(("shape", "nb"), [((4096,), None), ((64, 64), None), ((4096,), Replace())])
def test_coefficient_noise_is_discrete_laplace_with_the_stated_scale(shape, nb):
    eps = 1.3
    reps = sized(10, 60)
    counts = np.zeros(shape, dtype=np.int64)
    counts.ravel()[::7] = 3
    x = counts.ravel() if len(shape) == 1 else counts
    true = haar_forward(x) if len(shape) == 1 else haar_forward(haar_forward(x).T).T
    rng = deterministic_source(13)
    z = []
    for _ in range(reps):
        rel = privelet(counts, eps, neighbours=nb, rng=rng)
        z.append((rel.parts["coefficients"] - true).ravel())
    z = np.concatenate(z)
    t = rel.scale
    assert Fraction(rel.params["sensitivity"]) / Fraction(t) <= Fraction(eps)
    assert dlap_pvalue(z, t) > P_MIN
    assert dlap_pvalue(z, 1.15 * t) < P_MIN  # power
    assert dlap_pvalue(z, t / 1.15) < P_MIN


def test_leaf_variance_matches_analytic():
    # leaf = T/2^h ± d_root/2^h ± d_1/2^(h-1) ± ... ± d_(h-1)/2: Var = V(t) (4^-h + Σ_{k=1..h} 4^-k)
    h, eps = 3, 1.0
    r = sized(4000, 40_000)
    rng = deterministic_source(5)
    vals = np.empty(r)
    for i in range(r):
        vals[i] = privelet([0, 1, 2, 3, 4, 5, 6, 7], eps, rng=rng).value[2]
    t = 4.0  # (1 + h) / eps
    v = _dlap_variance(t) * (4.0**-h + sum(4.0**-k for k in range(1, h + 1)))
    assert abs(vals.mean() - 2) < 6 * math.sqrt(v / r)
    s2 = vals.var(ddof=1)
    se = math.sqrt(max(np.mean((vals - vals.mean()) ** 4) - s2 * s2, 0.0) / r)
    assert abs(s2 - v) < 6 * se
    assert abs(s2 - 1.25 * v) > 6 * se  # power: a 25% wrong variance (or the 2^-h-only formula) is caught
    assert abs(s2 - _dlap_variance(t) * (h + 1) / 4**h) > 6 * se


# ------------------------------------------------------------------ privacy
@pytest.mark.parametrize(("shape", "nb"), [((4,), None), ((4,), Replace()), ((5,), Replace()),
                                           ((2, 4), None), ((2, 4), Replace())])
def test_exact_privacy_loss_equals_epsilon(shape, nb):
    eps = 0.8
    d = np.ones(shape, dtype=np.int64)
    rel = privelet(d, eps, neighbours=nb, rng=deterministic_source(1))
    t, sens = rel.scale, rel.params["sensitivity"]
    padded = rel.params["padded_shape"]
    replace = nb is not None
    cells = list(itertools.product(*[range(n) for n in shape]))

    def coef(x):
        y = np.zeros(padded, dtype=np.int64)
        y[tuple(slice(0, n) for n in shape)] = x
        c = haar_forward(y)
        return c if len(shape) == 1 else haar_forward(c.T).T

    base = coef(d)
    worst = 0
    worst_pair = None
    for i in cells:
        for j in (cells if replace else [None]):
            if j == i:
                continue
            d2 = d.copy()
            d2[i] += 1
            if j is not None:
                d2[j] -= 1
            delta = int(np.abs(coef(d2) - base).sum())
            if delta > worst:
                worst, worst_pair = delta, d2
    assert worst == sens
    # the release is a bijection of the coefficients (m = 2^h) or a function of them: its loss is at most
    # the product law's, which is attained coordinate by coordinate at one output point
    c1, c2 = base.ravel(), coef(worst_pair).ravel()
    loss = sum(max_privacy_loss(DiscreteLaplace(int(u), t), DiscreteLaplace(int(w), t), grid=np.arange(-60, 61)).loss
               for u, w in zip(c1, c2, strict=True) if u != w)
    assert eps * (1 - 1e-9) <= loss <= eps * (1 + 1e-12)
    # power: calibrating replace-one with the add/remove sensitivity (1 + h) leaks when h > 1
    if replace and len(shape) == 1 and rel.params["heights"][0] > 1:
        naive_t = (1 + rel.params["heights"][0]) / eps
        assert worst / naive_t > eps * 1.2


def test_privacy_unit_scales_the_sensitivity():
    rel = privelet([1, 2, 3, 4], 1.0, neighbours=PrivacyUnit("u", max_rows=4), rng=deterministic_source(1))
    assert rel.params["sensitivity"] == 12


def test_one_charge_before_randomness_and_refusal_draws_nothing():
    rel = assert_charges_first(privelet, ([[3, 1], [4, 1]], 0.6), name="privelet", **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == np.shape([[3, 1], [4, 1]])


@pytest.mark.parametrize(("counts", "eps", "err", "param"), [
    ([1, -2, 3], 1.0, InvalidData, "counts"),
    ([1, 2.5, 3], 1.0, InvalidData, "counts"),
    ([], 1.0, InvalidData, "counts"),
    (None, 1.0, WrongType, "counts"),
    ([[[1]]], 1.0, InvalidData, "counts"),
    ([1, 12345], -1.0, InvalidParameter, "epsilon"),
    (np.zeros((65, 33), dtype=np.int8), 1.0, InvalidParameter, "counts"),  # padded 128 x 64 > the cap below
])
def test_bad_input_typed_errors_nothing_charged(counts, eps, err, param, monkeypatch):
    import importlib

    monkeypatch.setattr(importlib.import_module("dpkit.histograms.privelet"), "_MAX_CELLS", 4096)
    acct = Accountant(PureDP(10.0))
    src = CountingSource(1)
    with pytest.raises(err) as info:
        privelet(counts, eps, accountant=acct, rng=src)
    assert info.value.param == param
    assert "12345" not in str(info.value) and "2.5" not in str(info.value)
    assert len(acct.receipts) == 0 and src.consumed == 0
