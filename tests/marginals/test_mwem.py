"""MWEM for marginals (dpkit.marginals.mwem): the corrected update (and the thesis erratum), the selection's exact
privacy loss, the implementation's laws, convergence, the budget split and the contract (one charge first,
typed errors before any charge)."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from dpkit import InvalidData, InvalidParameter, PrivacyUnit, PureDP, Replace, WrongType
from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly, chi2_pvalue
from dpkit.core.privacy import ZCDP
from dpkit.marginals import Domain, Records, all_kway, marginal, mwem
from dpkit.marginals.mwem import (
    DEFAULT_ROUNDS,
    MAX_DENSE_CELLS,
    mw_update,
    selection_scores,
    table_marginal,
)
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.noise import deterministic_source

DOM = Domain({"a": 2, "b": 3, "c": 2})


def _records(n: int = 300, seed: int = 0) -> Records:
    g = np.random.default_rng(seed)
    a = g.integers(0, 2, n)
    c = g.integers(0, 2, n)
    b = (a + c + g.integers(0, 2, n)) % 3  # b depends on a and c
    return Records(np.column_stack([a, b, c]), DOM)


# ------------------------------------------------------------------ the multiplicative weights update
def test_update_matches_the_corrected_formula_on_a_tiny_table():
    total = 12.0
    a = np.array([[1.0, 2.0], [3.0, 6.0]])  # attributes (x, y), 2 x 2
    meas = np.array([2.0, 10.0])  # the marginal on y (axis 1): synthetic (4, 8)
    got = np.exp(mw_update(np.log(a), (1,), meas, total))
    # each cell c of the marginal is the counting query q_c; A[u] exp(q_c[u] (m_c - q_c(A)) / (2 N)), renormalised
    want = a.copy()
    qa = a.sum(axis=0)
    for c in range(2):
        q = np.zeros((2, 2))
        q[:, c] = 1
        want = want * np.exp(q * (meas[c] - qa[c]) / (2 * total))
    want *= total / want.sum()
    assert np.allclose(got, want, rtol=1e-12)
    # the log-ratio of a cell in y=1 to one in y=0 moved by exactly ((10 - 8) - (2 - 4)) / (2N)
    moved = math.log(got[0, 1] / got[0, 0]) - math.log(a[0, 1] / a[0, 0])
    assert abs(moved - 4.0 / (2 * total)) < 1e-12
    # within a cell of the marginal the ratios are kept; the marginal moves towards the measurement
    assert abs(got[1, 1] / got[0, 1] - 3.0) < 1e-12
    assert 8.0 < got[:, 1].sum() < 10.0 and abs(got.sum() - total) < 1e-12


def test_erratum_printed_update_is_a_no_op():
    # Alg 5.1 as printed: x'_t[u] = exp(d_t) x_{t-1}[u], then renormalise: the same factor everywhere, no change
    a = np.array([[0.1, 0.2], [0.3, 0.4]])
    d_hat = 0.37
    printed = np.exp(d_hat) * a
    printed /= printed.sum()
    assert np.allclose(printed, a, rtol=1e-15)
    fixed = np.exp(mw_update(np.log(a), (0,), np.array([0.3 + d_hat, 0.7 - d_hat]), 1.0))
    assert not np.allclose(fixed, a) and fixed[0].sum() > 0.3


def test_update_is_overflow_safe():
    out = mw_update(np.log(np.full((2, 3), 1 / 6)), (0,), np.array([1e6, 0.0]), 1.0)
    assert np.all(np.isfinite(out)) and abs(np.exp(out).sum() - 1.0) < 1e-9


# ------------------------------------------------------------------ selection: scores, exact law and loss
def test_scores_are_exact_l1_errors_with_sensitivity_one():
    rec = _records(40)
    wl = all_kway(DOM, 2)
    synth = np.random.default_rng(3).random(DOM.shape) * 3
    s = selection_scores([marginal(rec, w) for w in wl], [table_marginal(synth, DOM.axes(w)) for w in wl])
    for w, si in zip(wl, s, strict=True):
        qa = np.round(table_marginal(synth, DOM.axes(w)) * 1024) / 1024
        assert si == np.abs(marginal(rec, w) - qa).sum()
    for row in ([0, 0, 0], [1, 2, 1], [0, 1, 1]):  # add one record: every score moves by at most 1
        more = Records(np.vstack([rec.codes, row]), DOM)
        s2 = selection_scores([marginal(more, w) for w in wl], [table_marginal(synth, DOM.axes(w)) for w in wl])
        assert np.max(np.abs(s2 - s)) <= 1.0


TINY = Domain({"a": 2, "b": 2})
TINY_WL = [("a",), ("b",), ("a", "b")]


def _law(counts, eps_sel, sens, factor=2):
    """The exact first-round selection law on TINY from a uniform synthetic table of total 3."""
    rec = Records(np.array([(i, j) for i in range(2) for j in range(2) for _ in range(counts[2 * i + j])],
                           dtype=np.int64).reshape(-1, 2), TINY)
    synth = np.full((2, 2), 0.75)
    s = selection_scores([marginal(rec, w) for w in TINY_WL], [table_marginal(synth, TINY.axes(w)) for w in TINY_WL])
    return SelectionLaw(s, float(sens), eps_sel, factor).log_probs()


def test_exact_selection_loss_at_most_eps_sel_on_a_tiny_domain():
    eps_sel = 0.7
    worst_add, worst_rep, worst_mono = 0.0, 0.0, 0.0
    for x in [(3, 0, 0, 0), (0, 0, 0, 0), (1, 1, 1, 1), (2, 0, 1, 0), (0, 3, 3, 0), (5, 1, 0, 2)]:
        for j in range(4):
            y = list(x)
            y[j] += 1
            d = float(np.max(np.abs(_law(x, eps_sel, 1) - _law(y, eps_sel, 1))))
            worst_add = max(worst_add, d)
            worst_mono = max(worst_mono, float(np.max(np.abs(_law(x, eps_sel, 1, 1) - _law(y, eps_sel, 1, 1)))))
            for i in range(4):  # replace-one: move one record from cell i to cell j (L1 sensitivity 2)
                if i != j and x[i] > 0:
                    z = list(y)
                    z[i] -= 1
                    worst_rep = max(worst_rep, float(np.max(np.abs(_law(x, eps_sel, 2) - _law(z, eps_sel, 2)))))
    assert worst_add <= eps_sel * (1 + 1e-9) and worst_rep <= eps_sel * (1 + 1e-9)
    assert worst_add >= 0.5 * eps_sel  # the bound is not vacuous here
    assert worst_mono > 1.2 * eps_sel  # power: the L1 score is not monotone, the factor 2 is needed


def test_selection_and_measurement_laws_of_the_implementation():
    # replace-one: n = 3 is public and A_0 is uniform with total 3, so the first selection's law is exact
    counts = (2, 0, 1, 0)
    rec = Records(np.array([[0, 0], [0, 0], [1, 0]]), TINY)
    first: Counter[tuple[str, ...]] = Counter()
    noise = []
    rng = deterministic_source(9)
    for _ in range(1500):
        rel = mwem(rec, TINY_WL, 3.0, rounds=1, sweeps=0, neighbours=Replace(), rng=rng)
        q = rel.parts["queries"][0]
        first[q] += 1
        noise.extend((rel.parts["measurements"][0] - marginal(rec, q)).ravel().tolist())
    eps_sel = rel.params["selection_epsilon"]
    assert eps_sel == rel.params["selection_epsilon"] == 1.5 and rel.params["l1_sensitivity"] == 2
    obs = [first[w] for w in TINY_WL]
    assert chi2_pvalue(obs, np.exp(_law(counts, eps_sel, 2))) > 1e-7
    assert chi2_pvalue(obs, np.exp(_law(counts, eps_sel, 2, 1))) < 1e-7  # power
    t = rel.params["measurement_scale"]
    assert t >= 2 / rel.params["measurement_epsilon"]
    ks = np.arange(-12, 13)

    def pmf(scale):
        q = math.exp(-1 / scale)
        return (1 - q) / (1 + q) * q ** np.abs(ks)

    obs_noise = [sum(1 for z in noise if z == k) for k in ks]
    assert chi2_pvalue(obs_noise, pmf(t)) > 1e-7
    assert chi2_pvalue(obs_noise, pmf(2 * t)) < 1e-7  # power


# ------------------------------------------------------------------ release
def test_large_epsilon_converges_to_the_true_workload_marginals():
    rec = _records()
    wl = all_kway(DOM, 2)
    rel = mwem(rec, wl, 1e5, rounds=12, sweeps=50, neighbours=Replace(), rng=deterministic_source(1))
    for w in wl:
        assert np.max(np.abs(rel.value[w] - marginal(rec, w))) < 1e-6
    # add/remove: the noisy total is nearly exact too, the estimate keeps it
    rel = mwem(rec, wl, 1e5, rounds=12, sweeps=50, rng=deterministic_source(2))
    err = max(np.max(np.abs(rel.value[w] - marginal(rec, w))) for w in wl)
    assert err < 0.01 and abs(rel.parts["total"] - len(rec)) <= 1


def test_value_format_and_options():
    rec = _records()
    wl = [("c", "a"), ("b",), ("a", "c")]  # domain order, duplicates answered once
    for kw in ({}, {"average": True, "sweeps": 0}, {"init": "noisy"}, {"rho": 0.5}):
        eps = None if "rho" in kw else 1.0
        rel = mwem(rec, wl, eps, rounds=4, rng=deterministic_source(3), **kw)
        assert list(rel.value) == [("a", "c"), ("b",)]
        assert rel.value[("a", "c")].shape == (2, 2) and rel.value[("b",)].dtype == np.float64
        total = max(rel.parts["total"], 1)
        assert all(abs(v.sum() - total) < 1e-6 for v in rel.value.values())
        assert rel.parts["table"].shape == DOM.shape and len(rel.parts["measurements"]) == 4
        assert all(q in [("a", "c"), ("b",)] for q in rel.parts["queries"])
        assert rel.cost == (ZCDP(0.5) if "rho" in kw else PureDP(1.0)) and rel.scale is None
    assert DEFAULT_ROUNDS == mwem(rec, wl, 1.0, rng=deterministic_source(1)).params["rounds"]


def test_budget_split_is_exact_and_listed():
    rec = _records()
    rel = mwem(rec, all_kway(DOM, 2), 1.0, rounds=5, init="noisy", rng=deterministic_source(1))
    p = rel.params
    parts = [Fraction(p["total_epsilon"]), Fraction(p["init_epsilon"])]
    parts += [Fraction(p["selection_epsilon"]), Fraction(p["measurement_epsilon"])] * 5
    assert sum(parts) <= Fraction(1.0)
    assert abs(p["total_epsilon"] - 0.1) < 1e-12 and abs(p["init_epsilon"] - 0.1) < 1e-12
    assert abs(p["selection_epsilon"] - 0.08) < 1e-12 and abs(p["measurement_epsilon"] - 0.08) < 1e-12
    rep = mwem(rec, all_kway(DOM, 2), 1.0, rounds=5, neighbours=Replace(), rng=deterministic_source(1))
    assert rep.params["total_epsilon"] == 0.0 and abs(rep.params["selection_epsilon"] - 0.1) < 1e-12
    assert rep.parts["total"] == len(rec)
    # zCDP: rho split the same way; the selection spends eps_sel with eps_sel^2 / 8 <= rho_sel
    z = mwem(rec, all_kway(DOM, 2), None, rho=0.3, rounds=3, rng=deterministic_source(1)).params
    zparts = [Fraction(z["total_rho"])] + [Fraction(z["selection_rho"]), Fraction(z["measurement_rho"])] * 3
    assert sum(zparts) <= Fraction(0.3)
    assert Fraction(z["selection_epsilon"]) ** 2 / 8 <= Fraction(z["selection_rho"])
    assert z["selection_epsilon"] > 0.999999 * math.sqrt(8 * z["selection_rho"])
    assert z["measurement_noise"] == "discrete_gaussian"
    unit = mwem(rec, all_kway(DOM, 2), 1.0, rounds=2, neighbours=PrivacyUnit("user", max_rows=3),
                rng=deterministic_source(1)).params
    assert unit["l1_sensitivity"] == 3 and unit["l2_sensitivity"] == 3.0


def test_replay_and_last_iterate_beat_the_plain_algorithm():
    rec = _records(2000)
    wl = all_kway(DOM, 2)

    def err(**kw):
        out = []
        for s in range(4):
            v = mwem(rec, wl, 2.0, rounds=6, rng=deterministic_source(s), **kw).value
            out.append(np.mean([np.abs(v[w] - marginal(rec, w)).sum() for w in wl]))
        return float(np.mean(out))

    uniform = np.mean([np.abs(np.full(DOM.shape_of(w), len(rec) / DOM.size(w)) - marginal(rec, w)).sum()
                       for w in wl])
    plain = err(sweeps=0, average=True)
    optimized = err(sweeps=20)
    assert plain < uniform and optimized < 0.6 * plain


# ------------------------------------------------------------------ contract
def test_one_charge_before_randomness_and_refusal_draws_nothing():
    rel = assert_charges_first(mwem, (_records(30), all_kway(DOM, 2), 0.6), {"rounds": 3}, name="mwem_marginals",
                               cost=PureDP(0.6), budget=PureDP(1.0))
    assert set(rel.value) == set(all_kway(DOM, 2))
    assert_charges_first(mwem, (_records(30), all_kway(DOM, 1), None), {"rho": 0.3, "rounds": 2},
                         name="mwem_marginals", cost=ZCDP(0.3), budget=ZCDP(0.5))


REC = Records(np.array([[1, 2, 1], [0, 1, 0], [1, 0, 0]]), DOM)
BIG = Domain({f"x{i}": 4 for i in range(12)})  # 4^12 = 16,777,216 cells


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"records": [[1, 2, 1]]}, WrongType, "records"),
    ({"records": Records(np.zeros((0, 3), np.int64), DOM)}, InvalidData, "records"),
    ({"workload": None}, WrongType, "workload"),
    ({"workload": "ab"}, WrongType, "workload"),
    ({"workload": ["a", "b"]}, WrongType, "workload"),
    ({"workload": []}, InvalidParameter, "workload"),
    ({"workload": [("a", "zz")]}, InvalidParameter, "workload"),
    ({"workload": [()]}, InvalidParameter, "workload"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": None}, InvalidParameter, "epsilon"),
    ({"rho": 0.5}, InvalidParameter, "epsilon"),
    ({"epsilon": None, "rho": -1.0}, InvalidParameter, "rho"),
    ({"rounds": 0}, InvalidParameter, "rounds"),
    ({"rounds": 2.5}, WrongType, "rounds"),
    ({"sweeps": -1}, InvalidParameter, "sweeps"),
    ({"average": 1}, WrongType, "average"),
    ({"init": "zeros"}, InvalidParameter, "init"),
    ({"total_share": 1.0}, InvalidParameter, "total_share"),
    ({"init_share": 0.0}, InvalidParameter, "init_share"),
    ({"init": "noisy", "init_share": 0.5, "total_share": 0.5}, InvalidParameter, "total_share"),
    ({"selection_share": 1.0}, InvalidParameter, "selection_share"),
    ({"representation": "sparse"}, InvalidParameter, "representation"),
    ({"fit_iters": 0}, InvalidParameter, "fit_iters"),
])
def test_bad_input_typed_errors_nothing_charged(kwargs, err, param):
    kw = {"workload": [("a", "b")], **kwargs}
    args = (kw.pop("records", REC), kw.pop("workload"), kw.pop("epsilon", 1.0))
    assert_refused_cleanly(mwem, args, kw, error=err, param=param)


def test_dense_refuses_a_large_domain_naming_its_size():
    rec = Records(np.zeros((2, 12), np.int64), BIG)
    assert BIG.size() > MAX_DENSE_CELLS
    exc = assert_refused_cleanly(mwem, (rec, [("x0", "x1")], 1.0), {"representation": "dense"},
                                 error=InvalidParameter, param="records")
    assert "16777216" in str(exc) and "factored" in str(exc)


# ------------------------------------------------------------------ factored representation (graphical model)
def test_factored_converges_to_the_true_workload_marginals():
    rec = _records()
    wl = all_kway(DOM, 2)
    rel = mwem(rec, wl, 1e5, rounds=6, representation="factored", fit_iters=500, neighbours=Replace(),
               rng=deterministic_source(1))
    assert rel.params["representation"] == "factored" and "model" in rel.parts and "table" not in rel.parts
    for w in wl:
        assert np.max(np.abs(rel.value[w] - marginal(rec, w))) < 1e-6
        assert np.allclose(rel.parts["model"].project(w), rel.value[w])


def test_auto_picks_the_factored_model_for_a_large_domain():
    g = np.random.default_rng(5)
    codes = g.integers(0, 4, (400, 12))
    codes[:, 1] = (codes[:, 0] + g.integers(0, 2, 400)) % 4  # x1 depends on x0
    rec = Records(codes, BIG)
    wl = [("x0", "x1"), ("x2", "x3"), ("x0",), ("x5", "x7")]
    rel = mwem(rec, wl, 2.0, rounds=3, average=True, rng=deterministic_source(4))
    assert rel.params["representation"] == "factored" and rel.params["domain_size"] == 4**12
    assert list(rel.value) == wl and rel.value[("x0", "x1")].shape == (4, 4)
    total = max(rel.parts["total"], 1)
    assert all(abs(v.sum() - total) < 1e-6 * total for v in rel.value.values())
    small = mwem(_records(), all_kway(DOM, 2), 1.0, rounds=2, rng=deterministic_source(1))
    assert small.params["representation"] == "dense"


def test_factored_refusals_before_any_charge():
    rec = Records(np.zeros((2, 12), np.int64), BIG)
    assert_refused_cleanly(mwem, (rec, [("x0", "x1")], 1.0), {"init": "noisy"}, error=InvalidParameter,
                           param="init")
    huge = Domain({f"y{i}": 64 for i in range(5)})  # one marginal of 64^4 = 16,777,216 cells
    rec = Records(np.zeros((2, 5), np.int64), huge)
    assert_refused_cleanly(mwem, (rec, [("y0", "y1", "y2", "y3")], 1.0), error=InvalidParameter, param="workload")
