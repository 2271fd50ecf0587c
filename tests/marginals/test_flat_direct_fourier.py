"""Flat, Direct and Fourier (Li et al. ch. 6; Barak et al. 2007): exact laws, exact privacy, refusals, the
Fourier reconstruction and sensitivity, and Li et al.'s analytic Flat/Direct comparison."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import numpy as np
import pytest

import dpkit
from dpkit import ZCDP, Accountant, InvalidData, InvalidParameter, PrivacyUnit, PureDP, Replace, WrongType
from dpkit.audit.testing import ContractViolation, assert_output_law, assert_private, assert_refused_cleanly
from dpkit.marginals import (
    Domain,
    Records,
    all_kway,
    direct,
    direct_ese,
    flat,
    flat_ese,
    flat_vs_direct_crossover,
    fourier,
    fourier_coefficient_sensitivity,
    fourier_ese,
    marginal,
    table_marginal,
)
from dpkit.noise import deterministic_source

DOM = Domain({"a": 2, "b": 3, "c": 2})
CODES = np.random.default_rng(2).integers(0, [2, 3, 2], size=(40, 3))
REC = Records(CODES, DOM)
REC_NEXT = Records(np.vstack([CODES, [[1, 2, 0]]]), DOM)
WORK = [("b", "a"), ("c", "b"), ("a",)]  # given out of domain order
BDOM = Domain({f"x{i}": 2 for i in range(4)})
BCODES = np.random.default_rng(3).integers(0, 2, size=(50, 4))
BREC = Records(BCODES, BDOM)
BREC_NEXT = Records(np.vstack([BCODES, [[1, 0, 1, 1]]]), BDOM)


def _vector(fn):
    """``fn`` with its dict value concatenated (dict order) into one vector, for the array-based checkers."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        rel = fn(*args, **kwargs)
        return dataclasses.replace(rel, value=np.concatenate([np.ravel(v) for v in rel.value.values()]))

    return call


def _truth(rec, sets):
    return np.concatenate([marginal(rec, a).ravel() for a in sets]).astype(np.int64)


# -- Flat ------------------------------------------------------------------------------------------------------
def test_flat_value_is_the_full_table_with_integer_noise():
    rel = flat(REC, 1.0, rng=deterministic_source(1))
    assert list(rel.value) == [("a", "b", "c")]
    t = rel.value[("a", "b", "c")]
    assert t.shape == (2, 3, 2) and t.dtype == np.float64 and np.all(t == np.rint(t))
    assert rel.cost == PureDP(1.0) and rel.noise == "discrete_laplace" and rel.scale == 1.0
    assert rel.params["cells"] == 12 and rel.coords == 12
    # any marginal by summing; consistent with each other
    ab = table_marginal(rel.value, DOM, ["b", "a"])
    assert ab.shape == (2, 3)
    np.testing.assert_array_equal(table_marginal(rel.value, DOM, ["a"]), ab.sum(axis=1))
    np.testing.assert_array_equal(table_marginal(marginal(REC), DOM, ["c", "a"]), marginal(REC, ["a", "c"]))


def test_flat_laws_are_exact():
    truth = _truth(REC, [DOM.attrs])
    assert_output_law(_vector(flat), (REC, 1.0), true_value=truth, samples=16_000)
    assert_output_law(_vector(flat), (REC,), {"rho": 0.5}, true_value=truth, samples=16_000)
    rel = flat(REC, rho=0.5, rng=deterministic_source(1))
    assert rel.cost == ZCDP(0.5) and rel.noise == "discrete_gaussian" and rel.scale == 1.0


def test_flat_privacy_is_exact():
    out = assert_private(_vector(flat), (REC, 0.7), neighbour={"records": REC_NEXT},
                         true_value=_truth(REC, [DOM.attrs]), neighbour_true_value=_truth(REC_NEXT, [DOM.attrs]))
    assert out.startswith("exact pure privacy loss 0.7")


def test_flat_scales_under_other_relations():
    assert flat(REC, 1.0, neighbours=Replace(), rng=deterministic_source(1)).scale == 2.0
    assert flat(REC, 0.5, neighbours=PrivacyUnit("u", max_rows=3), rng=deterministic_source(1)).scale == 6.0
    sig = flat(REC, rho=0.5, neighbours=Replace(), rng=deterministic_source(1)).scale
    assert sig**2 >= 2.0 and sig == pytest.approx(math.sqrt(2.0))


def test_flat_refuses_a_large_domain_before_any_charge():
    big = Domain({f"x{i}": 4 for i in range(12)})  # 4^12 = 16.8M cells
    rec = Records(np.zeros((3, 12), np.int64), big)
    err = assert_refused_cleanly(flat, (rec, 1.0), error=InvalidParameter, param="records")
    assert "16777216" in str(err) and "direct" in str(err)
    err = assert_refused_cleanly(flat, (REC, 1.0), {"max_cells": 11}, error=InvalidParameter, param="records")
    assert "12 cells" in str(err)


@pytest.mark.parametrize(("kwargs", "error", "param"), [
    ({"epsilon": None}, InvalidParameter, "epsilon"),
    ({"rho": 0.5}, InvalidParameter, "rho"),  # both given
    ({"noise": "gaussian"}, InvalidParameter, "epsilon"),  # gaussian takes rho
    ({"noise": "cauchy"}, InvalidParameter, "noise"),
    ({"noise": 3}, WrongType, "noise"),
    ({"records": np.zeros((3, 3))}, WrongType, "records"),
    ({"records": Records(np.zeros((0, 3), np.int64), DOM)}, InvalidData, "records"),
])
def test_bad_budget_and_records_are_typed(kwargs, error, param):
    assert_refused_cleanly(flat, (REC, 1.0), kwargs, error=error, param=param)


def test_table_marginal_validates():
    with pytest.raises(InvalidParameter):
        table_marginal(np.zeros((2, 3)), DOM, ["a"])
    with pytest.raises(InvalidParameter):
        table_marginal({("a",): np.zeros(2)}, DOM, ["a"])
    with pytest.raises(InvalidParameter):
        table_marginal(np.zeros((2, 3, 2)), DOM, ["zz"])


# -- Direct ----------------------------------------------------------------------------------------------------
def test_direct_value_and_scale():
    rel = direct(REC, WORK, 1.0, rng=deterministic_source(1))
    assert list(rel.value) == [("a", "b"), ("b", "c"), ("a",)]  # domain order, workload order
    assert [v.shape for v in rel.value.values()] == [(2, 3), (3, 2), (2,)]
    assert rel.scale == 3.0 and rel.cost == PureDP(1.0) and rel.params["marginals"] == 3  # Lap(m / epsilon)
    assert rel.coords == 14
    lo, hi = rel.interval(0.9)
    h = int(rel.halfwidth(0.9))
    np.testing.assert_array_equal(hi[("a",)] - rel.value[("a",)], h)
    np.testing.assert_array_equal(rel.value[("a", "b")] - lo[("a", "b")], h)
    assert rel.halfwidth(0.9, simultaneous=True) > h  # 14 cells, not 1
    g = direct(REC, WORK, rho=0.5, rng=deterministic_source(1))
    assert g.cost == ZCDP(0.5) and g.scale**2 >= 3.0 and g.scale == pytest.approx(math.sqrt(3.0))
    assert direct(REC, WORK, 1.0, neighbours=Replace(), rng=deterministic_source(1)).scale == 6.0


def test_direct_laws_are_exact_and_a_wrong_scale_is_caught():
    truth = _truth(REC, [("a", "b"), ("b", "c"), ("a",)])
    assert_output_law(_vector(direct), (REC, WORK, 1.0), true_value=truth, samples=16_000)
    assert_output_law(_vector(direct), (REC, WORK), {"rho": 0.5}, true_value=truth, samples=16_000)

    def wrong(*args, **kwargs):  # declares a scale 10% below the one used
        rel = _vector(direct)(*args, **kwargs)
        return dataclasses.replace(rel, scale=rel.scale / 1.1)

    with pytest.raises(ContractViolation):
        assert_output_law(wrong, (REC, WORK, 1.0), true_value=truth, samples=16_000)


def test_direct_privacy_is_exact():
    sets = [("a", "b"), ("b", "c"), ("a",)]
    out = assert_private(_vector(direct), (REC, WORK, 1.0), neighbour={"records": REC_NEXT},
                         true_value=_truth(REC, sets), neighbour_true_value=_truth(REC_NEXT, sets))
    assert out.startswith("exact pure privacy loss 1 ") and "3 coordinate" in out
    out = assert_private(_vector(direct), (REC, WORK), {"rho": 0.3}, neighbour={"records": REC_NEXT},
                         true_value=_truth(REC, sets), neighbour_true_value=_truth(REC_NEXT, sets))
    assert out.startswith("exact zCDP rho 0.3")


@pytest.mark.parametrize(("workload", "error"), [
    ([("a", "zz")], InvalidParameter), ([], InvalidParameter), ([("a", "b"), ("b", "a")], InvalidParameter),
    ("ab", WrongType), (3, WrongType)])
def test_direct_bad_workloads(workload, error):
    assert_refused_cleanly(direct, (REC, WORK, 1.0), {"workload": workload}, error=error, param="workload")


# -- Fourier ---------------------------------------------------------------------------------------------------
def _chi(s, x):
    return -1 if sum(x[i] for i in s) % 2 else 1


def _true_coefficients(rec, k):
    d = len(rec.domain)
    return {s: sum(_chi(s, x) for x in rec.codes.tolist())
            for j in range(k + 1) for s in itertools.combinations(range(d), j)}


def _reconstruct(coef, a, k):
    """The marginal on index set ``a`` from coefficients ``{index set: value}`` (inverse Walsh–Hadamard)."""
    out = np.zeros((2,) * k)
    for cell in itertools.product((0, 1), repeat=k):
        x = dict(zip(a, cell, strict=True))
        out[cell] = sum(coef[s] * _chi(s, x) for j in range(k + 1) for s in itertools.combinations(a, j)) / 2**k
    return out


def test_fourier_reconstruction_is_the_inverse_transform():
    k = 2
    true = _true_coefficients(BREC, k)
    for a in itertools.combinations(range(4), k):  # the formula gives the exact marginals from exact coefficients
        np.testing.assert_array_equal(_reconstruct(true, a, k), marginal(BREC, [f"x{i}" for i in a]))
    rel = fourier(BREC, k, 1.0, rng=deterministic_source(4))
    names = {f"x{i}": i for i in range(4)}
    noisy = {tuple(names[x] for x in s): c for s, c in rel.parts["coefficients"].items()}
    assert set(noisy) == set(true) and all(isinstance(c, int) for c in noisy.values())
    assert list(rel.value) == all_kway(BDOM, k)
    for attrs, m in rel.value.items():
        np.testing.assert_array_equal(m, _reconstruct(noisy, tuple(names[x] for x in attrs), k))


def test_fourier_marginals_are_consistent():
    rel = fourier(BREC, 3, 0.5, rng=deterministic_source(5))
    v = rel.value
    total = rel.parts["coefficients"][()]
    for m in v.values():
        assert m.sum() == total
    np.testing.assert_array_equal(v[("x0", "x1", "x2")].sum(axis=(1, 2)), v[("x0", "x1", "x3")].sum(axis=(1, 2)))
    np.testing.assert_array_equal(v[("x0", "x1", "x2")].sum(axis=0), v[("x1", "x2", "x3")].sum(axis=2))


@functools.wraps(fourier)
def _coefficient_release(*args, **kwargs):
    """fourier, with the value replaced by its noisy coefficient vector and the coefficient law it declares."""
    rel = fourier(*args, **kwargs)
    vec = np.array(list(rel.parts["coefficients"].values()), dtype=np.int64)
    return dataclasses.replace(rel, value=vec, noise=rel.params["coefficient_noise"],
                               scale=rel.params["coefficient_scale"])


def _true_vector(rec, k):
    return np.array(list(_true_coefficients(rec, k).values()), dtype=np.int64)


def test_fourier_coefficient_laws_are_exact():
    rel = fourier(BREC, 2, 1.0, rng=deterministic_source(1))
    assert rel.params["coefficients"] == 11 and rel.params["coefficient_scale"] == 11.0  # N / epsilon
    assert rel.noise is None and rel.cost == PureDP(1.0)
    assert_output_law(_coefficient_release, (BREC, 2, 1.0), true_value=_true_vector(BREC, 2), samples=16_000)
    g = fourier(BREC, 2, rho=0.5, rng=deterministic_source(1))
    assert g.cost == ZCDP(0.5) and g.params["coefficient_scale"] == pytest.approx(math.sqrt(11.0))
    assert_output_law(_coefficient_release, (BREC, 2), {"rho": 0.5}, true_value=_true_vector(BREC, 2),
                      samples=16_000)


def test_fourier_privacy_is_exact():
    out = assert_private(_coefficient_release, (BREC, 2, 1.0), neighbour={"records": BREC_NEXT},
                         true_value=_true_vector(BREC, 2), neighbour_true_value=_true_vector(BREC_NEXT, 2))
    assert out.startswith("exact pure privacy loss 1 ") and "11 coordinate" in out  # every coefficient moves
    out = assert_private(_coefficient_release, (BREC, 2), {"rho": 0.5}, neighbour={"records": BREC_NEXT},
                         true_value=_true_vector(BREC, 2), neighbour_true_value=_true_vector(BREC_NEXT, 2))
    assert out.startswith("exact zCDP rho 0.5")


@pytest.mark.parametrize(("d", "k"), [(3, 1), (4, 2), (5, 2), (5, 3), (6, 4)])
def test_fourier_replace_sensitivity_by_brute_force(d, k):
    sets = [s for j in range(k + 1) for s in itertools.combinations(range(d), j)]
    pts = list(itertools.product((0, 1), repeat=d))
    l1 = max(sum(abs(_chi(s, x) - _chi(s, y)) for s in sets) for x in pts for y in pts)
    l2sq = max(sum((_chi(s, x) - _chi(s, y)) ** 2 for s in sets) for x in pts for y in pts)
    assert fourier_coefficient_sensitivity(d, k, Replace()) == (l1, l2sq)
    assert fourier_coefficient_sensitivity(d, k) == (len(sets), len(sets))
    assert fourier_coefficient_sensitivity(d, k, PrivacyUnit("u", max_rows=2)) == (2 * len(sets), 4 * len(sets))


def test_fourier_refuses_too_large_domains_and_bad_k():  # non-binary domains: tests/marginals/test_fourier_general
    huge = Records([[0, 0, 0]], Domain({"a": 2**28, "b": 2, "c": 2}))
    err = assert_refused_cleanly(fourier, (huge, 2, 1.0), error=InvalidParameter, param="records")
    assert "direct" in str(err) and str(3 * 2**28 + 1) in str(err)  # the coefficient count is named
    assert_refused_cleanly(fourier, (BREC, 5, 1.0), error=InvalidParameter, param="k")
    assert_refused_cleanly(fourier, (BREC, 0, 1.0), error=InvalidParameter, param="k")


def test_one_charge_before_the_draw():
    acc = Accountant(PureDP(2.5))
    flat(REC, 1.0, accountant=acc, rng=deterministic_source(1))
    direct(REC, WORK, 0.5, accountant=acc, rng=deterministic_source(1))
    fourier(BREC, 2, 1.0, accountant=acc, rng=deterministic_source(1))
    assert [r.mechanism for r in acc.receipts] == ["flat", "direct", "fourier"]
    assert acc.spent == PureDP(2.5)
    with pytest.raises(dpkit.BudgetExceeded):
        flat(REC, 0.1, accountant=acc, rng=deterministic_source(1))


# -- Li et al.'s analytic comparison -----------------------------------------------------------------------------
def test_flat_vs_direct_crossover_matches_li_et_al():
    assert [flat_vs_direct_crossover(k) for k in (2, 3, 4, 5)] == [16, 26, 36, 46]
    for k in (2, 3, 4, 5):
        c = flat_vs_direct_crossover(k)
        assert direct_ese(c - 1, k) >= flat_ese(c - 1, k)
        assert all(direct_ese(d, k) < flat_ese(d, k) for d in range(c, c + 60))
    assert flat_ese(16, 2, 2.0) == 2**16 * 2 / 4 and direct_ese(16, 2, 2.0) == 4 * 120**2 * 2 / 4
    assert fourier_ese(16, 2) == 137**2 * 2.0


@pytest.mark.parametrize("method", ["flat", "direct", "fourier"])
def test_ese_formulas_match_simulation(method):
    """The summed squared error of one 2-way marginal of 4 binary attributes (all 6 2-way marginals released by
    Direct and Fourier) against the analytic ESE, with Li et al.'s ``V_u = 2 t²`` replaced by the exact variance
    ``2q/(1-q)²`` of the discrete Laplace law of scale ``t`` (8% below it at Flat's ``t = 1``, within 0.5% at
    Direct's 6 and Fourier's 11)."""
    d, k, eps, runs = 4, 2, 1.0, 1000
    work = all_kway(BDOM, k)
    true = {a: marginal(BREC, a) for a in work}
    src = deterministic_source(9)
    sq = []
    for _ in range(runs):
        if method == "flat":
            rel = flat(BREC, eps, rng=src)
            est = {a: table_marginal(rel.value, BDOM, a) for a in work}
        elif method == "direct":
            est = direct(BREC, work, eps, rng=src).value
        else:
            est = fourier(BREC, k, eps, rng=src).value
        sq.append(np.mean([np.sum((est[a] - true[a]) ** 2) for a in work]))
    t = {"flat": 1.0, "direct": 6.0, "fourier": 11.0}[method] / eps
    q = math.exp(-1.0 / t)
    exact_over_li = (2 * q / (1 - q) ** 2) / (2 * t * t)
    expect = {"flat": flat_ese, "direct": direct_ese, "fourier": fourier_ese}[method](d, k, eps) * exact_over_li
    assert np.mean(sq) == pytest.approx(expect, rel=0.1)
