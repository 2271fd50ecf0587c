"""MWEM for range queries (dpkit.histograms.mwem): the update (and the thesis erratum), the exact
selection law and its privacy loss, the measurement noise law, accuracy and the contract."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from tests.histograms._helpers import ONE_CHARGE, REFUSAL_CALL, REFUSAL_SECRETS

from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly, chi2_pvalue
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.histograms import all_ranges, answer, mwem, random_ranges
from dpkit.histograms.mwem import DEFAULT_ROUNDS, mw_update, range_answers, selection_scores
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.noise import deterministic_source


# ------------------------------------------------------------------ the multiplicative weights update
def test_update_is_hardt_et_al_with_the_half_factor():
    total = 12.0
    a = np.array([1.0, 2.0, 3.0, 6.0])
    lo, hi, meas = 1, 3, 9.0
    got = np.exp(mw_update(np.log(a), lo, hi, meas, total))
    # independent formula: A[u] exp(q[u] (m - q(A)) / (2 N)), renormalised to N
    q = np.zeros(4)
    q[lo:hi] = 1
    want = a * np.exp(q * (meas - a[lo:hi].sum()) / (2 * total))
    want *= total / want.sum()
    assert np.allclose(got, want, rtol=1e-12)
    # the log-ratio between a cell inside and one outside the range moved by exactly (m - q(A)) / (2N)
    moved = (math.log(got[1] / got[0]) - math.log(a[1] / a[0]))
    assert abs(moved - (meas - 5.0) / (2 * total)) < 1e-12
    # the synthetic answer moves towards the measurement, without overshooting it here
    assert 5.0 < got[lo:hi].sum() < meas


def test_erratum_printed_update_is_a_no_op():
    # Hardt's thesis, Alg 5.1 as printed: x'_t[u] = exp(d_t) x_{t-1}[u], then renormalise: every cell is
    # multiplied by the same factor, so the distribution never changes (the f_t[u] and the 1/2 are lost)
    a = np.array([0.1, 0.2, 0.3, 0.4])
    d_hat = 0.37
    printed = np.exp(d_hat) * a
    printed /= printed.sum()
    assert np.allclose(printed, a, rtol=1e-15)
    fixed = np.exp(mw_update(np.log(a), 0, 2, 0.3 + d_hat, 1.0))  # q = first two cells, q(A) = 0.3
    assert not np.allclose(fixed, a) and fixed[:2].sum() > 0.3


def test_update_is_overflow_safe():
    out = mw_update(np.log(np.full(5, 0.2)), 0, 1, 1e6, 1.0)
    assert np.all(np.isfinite(out)) and abs(np.exp(out).sum() - 1.0) < 1e-9


# ------------------------------------------------------------------ selection: exact law and loss
def selection_law(x, synthetic, eps_sel, factor=2):
    w = all_ranges(len(x))
    scores = selection_scores(range_answers(np.asarray(x, dtype=np.int64), w), range_answers(synthetic, w))
    return SelectionLaw(scores, 1.0, eps_sel, factor).log_probs()


def test_scores_are_exact_and_have_sensitivity_one():
    w = all_ranges(4)
    a = np.array([0.3, 1.7, 2.25, 0.1])
    x = np.array([1, 0, 3, 2])
    s = selection_scores(range_answers(x, w), range_answers(a, w))
    for j in range(4):
        y = x.copy()
        y[j] += 1
        assert np.max(np.abs(selection_scores(range_answers(y, w), range_answers(a, w)) - s)) <= 1.0
    qa = np.round(range_answers(a, w) * 1024) / 1024
    assert np.array_equal(s, np.abs(range_answers(x, w) - qa))


def test_exact_selection_loss_at_most_eps_sel_and_monotone_calibration_exceeds_it():
    eps_sel = 0.7
    synthetic = np.array([2.0, 2.0, 2.0])
    worst, worst_mono = 0.0, 0.0
    for x in [(4, 0, 2), (0, 0, 0), (2, 2, 2), (5, 1, 0), (0, 3, 3), (1, 2, 6)]:
        for j in range(3):
            y = list(x)
            y[j] += 1
            worst = max(worst, float(np.max(np.abs(selection_law(x, synthetic, eps_sel)
                                                   - selection_law(y, synthetic, eps_sel)))))
            worst_mono = max(worst_mono, float(np.max(np.abs(selection_law(x, synthetic, eps_sel, 1)
                                                             - selection_law(y, synthetic, eps_sel, 1)))))
    assert worst <= eps_sel * (1 + 1e-9)
    assert worst >= 0.7 * eps_sel  # measured 0.53 of 0.7: scores move in both directions
    # power: |q(x) - q(A)| is not monotone, so the "monotone" calibration exp(eps q / Δ) loses ~ 2 eps_sel
    assert worst_mono > 1.5 * eps_sel


def test_selection_and_measurement_laws_of_the_implementation():
    # replace-one: n is public, A_0 is uniform with the true total, so the first selection's law is exact
    x = np.array([4, 0, 2])
    eps, rounds = 2.0, 1
    w = all_ranges(3)
    rng = deterministic_source(9)
    n = 2000
    first = Counter()
    noise = []
    for _ in range(n):
        rel = mwem(x, eps, workload=w, rounds=rounds, sweeps=0, neighbours=Replace(), rng=rng)
        q = rel.parts["queries"][0]
        first[q] += 1
        noise.append(rel.parts["measurements"][0] - int(answer(x, w[q:q + 1])[0]))
    eps_sel = rel.params["selection_epsilon"]
    law = np.exp(selection_law(x, np.full(3, 2.0), eps_sel))
    counts = [first[i] for i in range(len(w))]
    assert chi2_pvalue(counts, law) > 1e-7
    assert chi2_pvalue(counts, np.exp(selection_law(x, np.full(3, 2.0), eps_sel, 1))) < 1e-7  # power
    # measurement noise: discrete Laplace with scale t = 1 / eps_meas
    t = rel.params["measurement_scale"]
    assert t >= 1 / rel.params["measurement_epsilon"]
    ks = np.arange(-12, 13)

    def pmf(scale):
        q = math.exp(-1 / scale)
        return (1 - q) / (1 + q) * q ** np.abs(ks)

    obs = [sum(1 for z in noise if z == k) for k in ks]
    assert chi2_pvalue(obs, pmf(t)) > 1e-7
    assert chi2_pvalue(obs, pmf(2 * t)) < 1e-7  # power


# ------------------------------------------------------------------ release
def test_budget_split_is_exact_and_listed():
    rel = mwem(np.arange(8), 1.0, workload=all_ranges(8), rounds=5, rng=deterministic_source(1))
    p = rel.params
    parts = [Fraction(p["total_epsilon"])] + [Fraction(p["selection_epsilon"]), Fraction(p["measurement_epsilon"])] * 5
    assert sum(parts) <= Fraction(1.0)
    assert abs(p["total_epsilon"] - 0.1) < 1e-12 and abs(p["selection_epsilon"] - 0.09) < 1e-12
    assert p["rounds"] == 5 and len(rel.parts["queries"]) == 5 and len(rel.parts["measurements"]) == 5
    assert abs(rel.value.sum() - max(rel.parts["total"], 1)) < 1e-6  # synthetic data keep the noisy total
    rep = mwem(np.arange(8), 1.0, workload=all_ranges(8), rounds=5, neighbours=Replace(), rng=deterministic_source(1))
    assert rep.params["total_epsilon"] == 0.0 and abs(rep.params["selection_epsilon"] - 0.1) < 1e-12
    assert rep.parts["total"] == 28 and abs(rep.value.sum() - 28) < 1e-9
    assert DEFAULT_ROUNDS == mwem([1, 2], 1.0, workload=[[0, 1]], rng=deterministic_source(1)).params["rounds"]


def test_accuracy_beats_uniform_and_sweeps_help():
    m = 512
    x = np.repeat([100, 3, 0, 40, 40, 7], np.diff(np.linspace(0, m, 7).astype(int)))
    w = random_ranges(m, 300, rng=deterministic_source(2))
    truth = answer(x, w)
    uniform = np.abs(answer(np.full(m, x.sum() / m), w) - truth).mean()
    base = np.mean([np.abs(answer(mwem(x, 1.0, workload=w, sweeps=0, rng=deterministic_source(s)).value, w)
                           - truth).mean() for s in range(3)])
    swept = np.mean([np.abs(answer(mwem(x, 1.0, workload=w, rng=deterministic_source(s)).value, w)
                            - truth).mean() for s in range(3)])
    assert base < uniform and swept < 0.6 * base


# ------------------------------------------------------------------ contract
def test_one_charge_before_randomness_and_refusal_draws_nothing():
    rel = assert_charges_first(mwem, ([3, 1, 4, 1, 5, 9, 2, 6], 0.6), {"workload": all_ranges(8)}, name="mwem",
                               **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == (8,)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"counts": [1, -2, 3]}, InvalidData, "counts"),
    ({"counts": None}, WrongType, "counts"),
    ({"counts": [2**42, 12345, 1]}, InvalidData, "counts"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"workload": None}, InvalidParameter, "workload"),
    ({"workload": [[0, 4]]}, InvalidParameter, "workload"),
    ({"workload": np.zeros((0, 2), dtype=np.int64)}, InvalidParameter, "workload"),
    ({"workload": [[0.5, 2]]}, WrongType, "workload"),
    ({"rounds": 0}, InvalidParameter, "rounds"),
    ({"rounds": 2.5}, WrongType, "rounds"),
    ({"total_share": 0.0}, InvalidParameter, "total_share"),
    ({"total_share": 1.0}, InvalidParameter, "total_share"),
    ({"sweeps": -1}, InvalidParameter, "sweeps"),
    ({"average": 1}, WrongType, "average"),
])
def test_bad_input_typed_errors_nothing_charged(kwargs, err, param):
    assert_refused_cleanly(mwem, REFUSAL_CALL, {"workload": [[0, 2], [1, 3]], **kwargs}, error=err, param=param,
                           secrets=REFUSAL_SECRETS)
