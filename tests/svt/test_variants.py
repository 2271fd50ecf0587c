"""Dwork–Roth's sparse vector (threshold noise redrawn after each ⊤) and Near's Sparse: exact privacy (the output
probability is a product over segments), exact law of the samplers, the plan, and the contract."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import sys
from fractions import Fraction

import numpy as np
import pytest

from conftest import sized
from dpkit.audit.svt_law import svt_log_prob, svt_patterns
from dpkit.audit.testing import CountingSource, chi2_pvalue
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import BudgetExceeded, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.svt import AboveThreshold, DworkRothSVT, SparseVector, SVTHalted, dwork_roth_svt, sparse
from dpkit.svt.engine import calibrate as _plan
from dpkit.svt.engine import sample_positives as _sample_positives

from .helpers import P_MIN, lattice_units, law_kwargs, max_pattern_loss, neighbour_pairs, small_plan
from .test_sparse_vector import _exact, _pattern_counts

variants_module = sys.modules["dpkit.svt.variants"]
engine_module = sys.modules["dpkit.svt.engine"]  # the plan builders call engine.calibrate


def _dr_plan(epsilon, sensitivity=1.0, monotonic=False, cutoff=1, split=None):
    return _plan(epsilon, sensitivity, monotonic, split, cutoff, resample=True, default_split=(1.0, 1.0))


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("cutoff", [1, 3])
def test_plan(cutoff, monotonic):
    eps, sens = 0.9, 2.0
    svt = DworkRothSVT(eps, 0.0, cutoff=cutoff, sensitivity=sens, monotonic=monotonic, rng=deterministic_source(1))
    e1, e2 = Fraction(svt.epsilon_threshold), Fraction(svt.epsilon_queries)
    assert e1 + e2 <= Fraction(eps) and float(e1) == pytest.approx(eps / 2, rel=1e-15)
    assert svt.threshold_scale == pytest.approx(cutoff * sens / float(e1), rel=2.0**-19)  # c on the threshold
    factor = cutoff if monotonic else 2 * cutoff
    assert svt.query_scale == pytest.approx(factor * sens / float(e2), rel=2.0**-19)
    # c times the standard SVT's threshold noise at the same split
    std = SparseVector(eps, 0.0, cutoff=cutoff, sensitivity=sens, monotonic=monotonic, split=(1, 1),
                       rng=deterministic_source(1))
    assert svt.threshold_scale == pytest.approx(cutoff * std.threshold_scale, rel=1e-12)
    assert svt.params["resampled_threshold"] is True


def test_sparse_is_above_threshold_restarted():
    """Near's Sparse at epsilon, cutoff c = c runs of AboveThreshold(epsilon / c): same scales (to the ulp);
    with split (1, 1) it is Dwork–Roth's Alg 2."""
    eps, c = 1.2, 4
    rel = sparse([1.0], 0.0, eps, c, rng=deterministic_source(1))
    at = AboveThreshold(eps / c, 0.0, rng=deterministic_source(1))
    assert rel.params["threshold_scale"] == pytest.approx(at.threshold_scale, rel=1e-12)
    assert rel.params["query_scale"] == pytest.approx(at.query_scale, rel=1e-12)
    dr = dwork_roth_svt([1.0], 0.0, eps, cutoff=c, rng=deterministic_source(1))
    same = sparse([1.0], 0.0, eps, c, split=(1, 1), rng=deterministic_source(1))
    assert dr.params["threshold_scale"] == same.params["threshold_scale"]
    assert dr.params["query_scale"] == same.params["query_scale"]
    values = [5.0, 300.0, 2.0, 900.0, 700.0, -3.0]
    for seed in range(5):  # same plan and sampler: the same release
        a = dwork_roth_svt(values, 100.0, eps, cutoff=c, rng=deterministic_source(seed)).value
        b = sparse(values, 100.0, eps, c, split=(1, 1), rng=deterministic_source(seed)).value
        assert a.tolist() == b.tolist()


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize("cutoff", [2, 3])
def test_exact_privacy_random_pairs(cutoff, monotonic):
    """Every pattern with <= c ⊤ (product over segments, each with its own threshold noise), random neighbours."""
    eps, sens = 1.0, 1.5
    plan = _dr_plan(eps, sens, monotonic, cutoff)
    kw = law_kwargs(plan)
    assert kw["resample_threshold"] is True
    gen = np.random.default_rng(70 + cutoff + monotonic)
    worst = 0.0
    for q, q_prime, thr in neighbour_pairs(gen, sized(10, 80), sens, monotonic, m_max=6,
                                           per_query_thresholds=True):
        worst = max(worst, max_pattern_loss(lattice_units(q, plan), lattice_units(q_prime, plan),
                                             lattice_units(thr, plan), cutoff, kw))
    assert worst <= eps + 1e-9


def test_exact_check_needs_c_on_the_threshold_noise():
    """Tight pair (⊥^m ⊤)^c: Dwork–Roth's plan stays below epsilon; redrawing a threshold noise of scale Δ/ε₁
    (without the c) costs about c ε₁ + ε₂ = 2 eps at c = 3."""
    eps, c, m = 1.0, 3, 12
    q = np.zeros((m + 1) * c)
    q_prime = np.tile(np.r_[np.ones(m), -1.0], c)
    pattern = ([False] * m + [True]) * c
    plan = _dr_plan(eps, 1.0, False, c)

    def loss(p):
        kw = law_kwargs(p)
        return svt_log_prob(lattice_units(q, p), 0, pattern, **kw) - \
            svt_log_prob(lattice_units(q_prime, p), 0, pattern, **kw)

    good = loss(plan)
    assert 0.9 * eps < good <= eps + 1e-9
    bad = loss(dataclasses.replace(plan, t_threshold=plan.t_threshold / c))
    assert bad > 1.8 * eps


def test_sampled_law_resamples():
    """The vectorised sampler with plan.resample has the product-over-segments law, not the drawn-once law."""
    c = 3
    plan = small_plan(1, 0.7, 1.2, cutoff=c, resample=True)
    diffs = np.array([-2, -1, 0, -1, 1, 0, -3], dtype=np.int64)
    n = sized(100_000, 1_000_000)
    pos = _sample_positives(diffs, plan, deterministic_source(71), n)
    pats, counts = _pattern_counts(pos, diffs.size, c)
    kw = law_kwargs(plan)
    assert chi2_pvalue(counts, _exact(pats, diffs, 0, kw)) > P_MIN
    assert chi2_pvalue(counts, _exact(pats, diffs, 0, {**kw, "resample_threshold": False})) < P_MIN


def test_interactive_law(monkeypatch):
    c = 2
    plan = small_plan(1, 0.7, 1.2, cutoff=c, resample=True)
    monkeypatch.setattr(engine_module, "calibrate", lambda *a, **k: plan)
    q = [-2.0, 0.0, -1.0, 1.0, -1.0]
    rng = deterministic_source(72)
    n = sized(2_000, 20_000)
    pos = np.full((n, c), -1, dtype=np.int64)
    for r in range(n):
        svt = DworkRothSVT(1.0, 0.0, cutoff=c, rng=rng)
        for v in q:
            if svt.halted:
                break
            svt.query(v)
        pos[r, :len(svt.positions)] = svt.positions
    pats, counts = _pattern_counts(pos, len(q), c)
    assert chi2_pvalue(counts, _exact(pats, np.array(q, dtype=np.int64), 0, law_kwargs(plan))) > P_MIN
    assert set(pats) == set(svt_patterns(len(q), c))


def test_accuracy_counts_the_redraws():
    svt = DworkRothSVT(1.0, 0.0, cutoff=4, rng=deterministic_source(1))
    m, beta = 20, 0.05
    t = max(svt.threshold_scale, svt.query_scale)
    assert svt.accuracy(m, beta) == pytest.approx(2 * t * math.log(2 * (m + 4) / beta), rel=1e-3)


def test_contract():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(73)
    svt = DworkRothSVT(0.5, 10.0, cutoff=2, accountant=acct, rng=src)
    assert acct.receipts[0].mechanism == "dwork_roth_svt" and acct.spent == PureDP(0.5)
    assert svt.query(1e7) and not svt.query(-1e7) and svt.query(1e7)
    assert svt.halted and svt.positions == (0, 2)
    before = src.consumed
    with pytest.raises(SVTHalted):
        svt.query(1.0)
    assert src.consumed == before
    rel = sparse([1e7, -1e7, 1e7, 1e7], 0.0, 0.5, 2, accountant=acct, rng=src)
    assert rel.value.tolist() == [0, 2] and rel.mechanism == "sparse" and acct.spent == PureDP(1.0)
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        dwork_roth_svt([1.0], 0.0, 0.5, accountant=acct, rng=src)
    with pytest.raises(BudgetExceeded):
        DworkRothSVT(0.5, 0.0, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 2
    for attempt in (lambda: copy.copy(svt), lambda: pickle.dumps(svt)):
        with pytest.raises(WrongType):
            attempt()


@pytest.mark.parametrize(("override", "error", "param"), [
    ({"cutoff": 0}, InvalidParameter, "cutoff"),
    ({"cutoff": 2.5}, WrongType, "cutoff"),
    ({"threshold": math.nan}, InvalidParameter, "threshold"),
    ({"split": (1.0, 0.0)}, InvalidParameter, "split"),
    ({"split": (1.0, 1.0, 1.0)}, WrongType, "split"),  # no numeric answers in these variants
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
])
def test_bad_input(override, error, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(74)
    kw = {"epsilon": 1.0, "threshold": 0.0, "cutoff": 2, "accountant": acct, "rng": src}
    kw.update(override)
    eps, thr, c = kw.pop("epsilon"), kw.pop("threshold"), kw.pop("cutoff")
    for call in (lambda: DworkRothSVT(eps, thr, cutoff=c, **kw),
                 lambda: dwork_roth_svt([1.0], thr, eps, cutoff=c, **kw),
                 lambda: sparse([1.0], thr, eps, c, **kw)):
        with pytest.raises(error) as info:
            call()
        assert info.value.param == param
    assert src.consumed == 0 and acct.receipts == ()
