"""Fourier on any finite domain (bit-encoded attributes): the coefficients against a brute-force transform of the
bit-encoded table, their exact noise law and scale, the replace-one sensitivity against brute force, the
least-squares projection back onto the domain and its exact per-cell variance against explicit linear algebra,
consistency, weighted records, and refusals of domains too large."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np
import pytest

from dpkit import ZCDP, Accountant, InvalidParameter, PrivacyUnit, PureDP, Replace
from dpkit.audit.testing import assert_output_law, assert_private, assert_refused_cleanly
from dpkit.marginals import Domain, Records, all_kway, fourier, fourier_coefficient_sensitivity, marginal
from dpkit.noise import deterministic_source

DOM = Domain({"a": 3, "b": 2, "c": 5})
CODES = np.random.default_rng(21).integers(0, [3, 2, 5], size=(60, 3))
REC = Records(CODES, DOM)
REC_NEXT = Records(np.vstack([CODES, [[2, 1, 4]]]), DOM)


def _bits(size):
    return (size - 1).bit_length()


def _coefficient_sets(sizes, k):
    """Every coefficient as ``(support T, masks)`` in the release's order: supports by size then lexicographic
    (attributes of one level excluded), masks row-major over ``1 .. 2^b - 1`` per attribute."""
    active = [j for j, s in enumerate(sizes) if s >= 2]
    out = []
    for r in range(k + 1):
        for t in itertools.combinations(active, r):
            for masks in itertools.product(*[range(1, 2 ** _bits(sizes[j])) for j in t]):
                out.append((t, masks))
    return out


def _chi(t, masks, x):
    """The parity of the bit-encoded record ``x`` on the bits ``masks`` of the attributes ``t``."""
    return -1 if sum(bin(m & int(x[j])).count("1") for j, m in zip(t, masks, strict=True)) % 2 else 1


def _brute_coefficients(codes, sizes, k, weights=None):
    w = np.ones(len(codes), dtype=np.int64) if weights is None else np.asarray(weights)
    return np.array([sum(int(wi) * _chi(t, m, x) for x, wi in zip(codes.tolist(), w, strict=True))
                     for t, m in _coefficient_sets(sizes, k)], dtype=np.int64)


def _vector(rel):
    return np.concatenate([np.ravel(v) for v in rel.parts["coefficients"].values()]).astype(np.int64)


@functools.wraps(fourier)
def _coefficient_release(*args, **kwargs):
    rel = fourier(*args, **kwargs)
    return dataclasses.replace(rel, value=_vector(rel), noise=rel.params["coefficient_noise"],
                               scale=rel.params["coefficient_scale"])


def _design(sizes, k):
    """The explicit map from the domain's full table (row-major cells) to the coefficients, and the cells."""
    cells = list(itertools.product(*[range(s) for s in sizes]))
    a = np.array([[_chi(t, m, x) for x in cells] for t, m in _coefficient_sets(sizes, k)], dtype=np.float64)
    return a, cells


def _marginal_operator(sizes, attrs_idx, cells):
    shape = tuple(sizes[j] for j in attrs_idx)
    m = np.zeros((math.prod(shape), len(cells)))
    for c, x in enumerate(cells):
        m[np.ravel_multi_index(tuple(x[j] for j in attrs_idx), shape), c] = 1.0
    return m


# -- the coefficients ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("sizes", "k"), [((3, 2, 5), 1), ((3, 2, 5), 2), ((3, 2, 5), 3), ((4, 1, 3, 6), 2),
                                          ((7, 3), 2), ((2, 2, 3), 2)])
def test_coefficients_are_the_brute_force_transform_of_the_bit_encoded_table(sizes, k):
    dom = Domain({f"x{i}": s for i, s in enumerate(sizes)})
    codes = np.random.default_rng(sum(sizes) + k).integers(0, sizes, size=(40, len(sizes)))
    rel = fourier(Records(codes, dom), k, 1e9, rng=deterministic_source(1))  # noise of scale ~1e-8: zero
    true = _brute_coefficients(codes, sizes, k)
    np.testing.assert_array_equal(_vector(rel), true)
    assert rel.params["coefficients"] == true.size
    assert list(rel.value) == all_kway(dom, k)
    for attrs, m in rel.value.items():  # exact coefficients: the projection gives the exact marginals back
        np.testing.assert_allclose(m, marginal(Records(codes, dom), attrs), atol=1e-9)
    t0 = rel.parts["coefficients"][()]
    assert t0.shape == () and int(t0) == 40


def test_weighted_records_give_the_expansion_release():
    w = np.random.default_rng(5).integers(0, 6, size=60)
    rw, rx = Records(CODES, DOM, weights=w), Records(np.repeat(CODES, w, axis=0), DOM)
    for k in (1, 2):
        a, b = fourier(rw, k, 1.0, rng=deterministic_source(3)), fourier(rx, k, 1.0, rng=deterministic_source(3))
        np.testing.assert_array_equal(_vector(a), _vector(b))
        for attrs in a.value:
            np.testing.assert_array_equal(a.value[attrs], b.value[attrs])
        exact = fourier(rw, k, 1e9, rng=deterministic_source(1))
        np.testing.assert_array_equal(_vector(exact), _brute_coefficients(CODES, DOM.shape, k, w))
    bdom = Domain({"p": 2, "q": 2})
    bc = np.array([[0, 1], [1, 1], [0, 0]])
    bw = np.array([3, 0, 2])
    a = fourier(Records(bc, bdom, weights=bw), 2, 1.0, rng=deterministic_source(4))
    b = fourier(Records(np.repeat(bc, bw, axis=0), bdom), 2, 1.0, rng=deterministic_source(4))
    assert a.parts["coefficients"] == b.parts["coefficients"]


# -- the noise law and its scale -------------------------------------------------------------------------------
def test_coefficient_law_and_scale_are_exact():
    n = len(_coefficient_sets(DOM.shape, 2))
    assert n == 1 + (3 + 1 + 7) + (3 * 1 + 3 * 7 + 1 * 7) == 43
    rel = fourier(REC, 2, 1.0, rng=deterministic_source(1))
    assert rel.params["coefficients"] == 43 and rel.params["sensitivity_l1"] == 43
    assert rel.params["coefficient_scale"] == 43.0 and rel.params["coefficient_noise"] == "discrete_laplace"
    assert rel.cost == PureDP(1.0) and rel.noise is None and rel.params["bits"] == {"a": 2, "b": 1, "c": 3}
    true = _brute_coefficients(CODES, DOM.shape, 2)
    assert_output_law(_coefficient_release, (REC, 2, 1.0), true_value=true, samples=16_000)
    g = fourier(REC, 2, rho=0.5, rng=deterministic_source(1))
    assert g.cost == ZCDP(0.5) and g.params["coefficient_scale"] == pytest.approx(math.sqrt(43.0))
    assert_output_law(_coefficient_release, (REC, 2), {"rho": 0.5}, true_value=true, samples=16_000)


def test_coefficient_privacy_is_exact():
    out = assert_private(_coefficient_release, (REC, 2, 1.0), neighbour={"records": REC_NEXT},
                         true_value=_brute_coefficients(CODES, DOM.shape, 2),
                         neighbour_true_value=_brute_coefficients(REC_NEXT.codes, DOM.shape, 2))
    assert out.startswith("exact pure privacy loss 1 ") and "43 coordinate" in out


@pytest.mark.parametrize(("sizes", "k"), [((3, 2), 1), ((3, 2), 2), ((3, 3, 2), 2), ((5, 3), 2), ((3, 2, 2, 3), 2),
                                          ((3, 2, 2, 3), 3), ((4, 1, 3), 2), ((6, 5, 3), 2), ((2, 2, 2, 3), 2)])
def test_sensitivity_by_brute_force(sizes, k):
    dom = Domain({f"x{i}": s for i, s in enumerate(sizes)})
    sets = _coefficient_sets(sizes, k)
    pts = list(itertools.product(*[range(s) for s in sizes]))
    vec = {x: np.array([_chi(t, m, x) for t, m in sets]) for x in pts}
    l1 = max(int(np.abs(vec[x] - vec[y]).sum()) for x in pts for y in pts)
    l2sq = max(int(((vec[x] - vec[y]) ** 2).sum()) for x in pts for y in pts)
    assert fourier_coefficient_sensitivity(dom, k, Replace()) == (l1, l2sq)
    assert fourier_coefficient_sensitivity(dom, k) == (len(sets), len(sets))
    assert fourier_coefficient_sensitivity(dom, k, PrivacyUnit("u", max_rows=3)) == (3 * len(sets), 9 * len(sets))
    codes = np.zeros((2, len(sizes)), dtype=np.int64)
    rel = fourier(Records(codes, dom), k, 1.0, neighbours=Replace(), rng=deterministic_source(2))
    assert rel.params["sensitivity_l1"] == l1 and rel.params["sensitivity_exact"] is True


def test_binary_domain_sensitivity_matches_the_binary_formula():
    for d, k in ((3, 1), (4, 2), (5, 3)):
        dom = Domain({f"x{i}": 2 for i in range(d)})
        for nb in (None, Replace(), PrivacyUnit("u", max_rows=2)):
            assert fourier_coefficient_sensitivity(dom, k, nb) == fourier_coefficient_sensitivity(d, k, nb)


def test_replace_sensitivity_falls_back_to_the_stated_bound_when_enumeration_is_too_large(monkeypatch):
    import importlib

    fm = importlib.import_module("dpkit.marginals.fourier")  # the module (the package's name is the function)

    dom = Domain({"a": 3, "b": 5, "c": 2})
    exact = fourier_coefficient_sensitivity(dom, 2, Replace())
    monkeypatch.setattr(fm, "MAX_REPLACE_STATES", 2)
    n = fourier_coefficient_sensitivity(dom, 2)[0]
    assert fourier_coefficient_sensitivity(dom, 2, Replace()) == (2 * (n - 1), 4 * (n - 1))
    assert 2 * (n - 1) >= exact[0]
    rel = fourier(Records([[0, 0, 0]], dom), 2, 1.0, neighbours=Replace(), rng=deterministic_source(1))
    assert rel.params["sensitivity_exact"] is False and rel.params["sensitivity_l1"] == 2 * (n - 1)


# -- the projection onto the domain, its exact variance --------------------------------------------------------
@pytest.mark.parametrize(("sizes", "k", "noise"), [((3, 2, 5), 2, "laplace"), ((3, 2, 5), 1, "gaussian"),
                                                   ((4, 1, 3), 2, "gaussian"), ((3, 3, 2), 3, "laplace")])
def test_estimate_is_the_least_squares_projection_and_its_cell_std_is_exact(sizes, k, noise):
    dom = Domain({f"x{i}": s for i, s in enumerate(sizes)})
    codes = np.random.default_rng(7).integers(0, sizes, size=(30, len(sizes)))
    budget = {"epsilon": 0.5} if noise == "laplace" else {"rho": 0.05}
    rel = fourier(Records(codes, dom), k, rng=deterministic_source(11), **budget)
    a, cells = _design(sizes, k)
    y = _vector(rel).astype(np.float64)
    x_hat = np.linalg.pinv(a) @ y  # the least-squares table on the domain's cells (minimum norm)
    cov = np.linalg.pinv(a.T @ a)  # per unit coefficient variance
    t = rel.params["coefficient_scale"]
    if noise == "laplace":  # the exact standard deviation of the discrete Laplace law of scale t
        q = math.exp(-1.0 / t)
        coef_std = math.sqrt(2 * q) / (1 - q)
    else:
        coef_std = t
    worst = 0.0
    for idx in itertools.combinations(range(len(sizes)), k):
        attrs = tuple(f"x{i}" for i in idx)
        m = _marginal_operator(sizes, idx, cells)
        np.testing.assert_allclose(rel.value[attrs].ravel(), m @ x_hat, atol=1e-8)
        var = np.diag(m @ cov @ m.T)
        np.testing.assert_allclose(var, var[0], rtol=1e-10)  # the same variance in every cell
        assert rel.parts["cell_std"][attrs] == pytest.approx(coef_std * math.sqrt(var[0]), rel=1e-10)
        worst = max(worst, rel.parts["cell_std"][attrs])
    assert rel.params["noise_std"] == worst


def test_cell_std_reduces_to_the_binary_and_power_of_two_cases():
    rel = fourier(Records([[0, 1, 3]], Domain({"a": 2, "b": 4, "c": 4})), 2, 1.0, rng=deterministic_source(1))
    q = math.exp(-1.0 / rel.params["coefficient_scale"])
    coef_std = math.sqrt(2 * q) / (1 - q)
    for attrs, std in rel.parts["cell_std"].items():  # power-of-two sizes: the inverse transform, 2^-B variance
        cells = math.prod(Domain({"a": 2, "b": 4, "c": 4}).shape_of(attrs))
        assert std == pytest.approx(coef_std / math.sqrt(cells), rel=1e-12)


def test_marginals_are_consistent_and_unbiased():
    rel = fourier(REC, 2, 0.5, rng=deterministic_source(5))
    v = rel.value
    np.testing.assert_allclose(v[("a", "b")].sum(axis=1), v[("a", "c")].sum(axis=1), atol=1e-9)
    np.testing.assert_allclose(v[("a", "c")].sum(axis=0), v[("b", "c")].sum(axis=0), atol=1e-9)
    np.testing.assert_allclose(v[("a", "b")].sum(), v[("b", "c")].sum(), atol=1e-9)
    # unbiased with the stated std: the mean over 400 releases of the (a, c) marginal, within 6 standard errors
    src = deterministic_source(6)
    runs = 400
    est = np.mean([fourier(REC, 2, rho=2.0, rng=src).value[("a", "c")] for _ in range(runs)], axis=0)
    std = fourier(REC, 2, rho=2.0, rng=deterministic_source(1)).parts["cell_std"][("a", "c")]
    assert np.abs(est - marginal(REC, ("a", "c"))).max() < 6 * std / math.sqrt(runs)


def test_empirical_cell_variance_matches_the_stated_std():
    src = deterministic_source(8)
    runs = 600
    draws = np.array([fourier(REC, 2, rho=1.0, rng=src).value[("b", "c")].ravel() for _ in range(runs)])
    std = fourier(REC, 2, rho=1.0, rng=deterministic_source(1)).parts["cell_std"][("b", "c")]
    ratio = draws.var(axis=0, ddof=1).mean() / std**2  # 10 cells, each chi2(599)/599: sd of the mean <= 0.058
    assert 0.7 < ratio < 1.3


# -- refusals --------------------------------------------------------------------------------------------------
def test_too_large_domains_are_refused_with_the_size_and_a_method_that_fits():
    acct = Accountant(PureDP(10.0))
    big = Records([[0, 0, 0]], Domain({"a": 2**15, "b": 2**14, "c": 2}))
    err = assert_refused_cleanly(fourier, (big, 2, 1.0), error=InvalidParameter, param="k")
    n = 1 + (2**15 - 1) + (2**14 - 1) + 1 + (2**15 - 1) * (2**14 - 1) + (2**15 - 1) + (2**14 - 1)
    assert str(n) in str(err) and "lower k" in str(err) and "direct" in str(err)
    fourier(big, 1, 1.0, accountant=acct, rng=deterministic_source(1))  # k = 1 fits
    huge = Records([[0]], Domain({"a": 2**28}))
    err = assert_refused_cleanly(fourier, (huge, 1, 1.0), error=InvalidParameter, param="records")
    assert "direct" in str(err) and "lower k" not in str(err)
    assert [r.mechanism for r in acct.receipts] == ["fourier"]


# -- intervals -------------------------------------------------------------------------------------------------
def test_interval_formulas_binary_and_general():
    from dpkit import NoInterval

    bin_rec = Records(np.random.default_rng(9).integers(0, 2, size=(40, 4)), Domain({f"x{i}": 2 for i in range(4)}))
    for rec in (REC, bin_rec):
        g = fourier(rec, 2, rho=0.3, rng=deterministic_source(2))
        lo, hi = g.interval(0.9)
        sigma = g.params["coefficient_scale"]
        for a, v in g.value.items():
            var = 2.0**-2 if rec is bin_rec else (g.parts["cell_std"][a] / sigma) ** 2
            np.testing.assert_allclose(hi[a] - v, sigma * math.sqrt(2 * var * math.log(2 / 0.1)), rtol=1e-6)
            np.testing.assert_allclose(v - lo[a], sigma * math.sqrt(2 * var * math.log(2 / 0.1)), rtol=1e-6)
        lap = fourier(rec, 2, 1.0, rng=deterministic_source(2))
        lo, hi = lap.interval(0.95)
        q = math.exp(-1.0 / lap.params["coefficient_scale"])
        s = math.sqrt(2 * q) / (1 - q)
        for a, v in lap.value.items():
            var = 2.0**-2 if rec is bin_rec else (lap.parts["cell_std"][a] / s) ** 2
            np.testing.assert_allclose(hi[a] - v, s * math.sqrt(var / 0.05), rtol=1e-6)
        with pytest.raises(NoInterval):
            lap.interval(0.95, simultaneous=True)


def test_interval_coverage():
    truth = {a: marginal(REC, a) for a in all_kway(DOM, 2)}
    src = deterministic_source(12)
    hits = total = 0
    for _ in range(200):
        rel = fourier(REC, 2, rho=1.0, rng=src)
        lo, hi = rel.interval(0.8)
        for a, t in truth.items():
            hits += int(((lo[a] <= t) & (t <= hi[a])).sum())
            total += t.size
    assert hits / total >= 0.8  # conservative (sub-Gaussian) intervals: observed coverage is well above 0.8


def test_one_level_domains():
    rec = Records([[0, 0], [0, 0], [0, 0]], Domain({"a": 1, "b": 1}))
    assert fourier_coefficient_sensitivity(rec.domain, 1, Replace()) == (1, 1)
    assert fourier_coefficient_sensitivity(rec.domain, 2) == (1, 1)
    for nb in (None, Replace()):
        rel = fourier(rec, 2, 1e9, neighbours=nb, rng=deterministic_source(1))
        assert rel.params["coefficients"] == 1 and rel.value[("a", "b")].tolist() == [[3.0]]
