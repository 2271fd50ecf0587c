"""SVT with a raised threshold and retraversal: the whole run is ONE sparse vector run (cutoff c) on a longer,
adaptively chosen stream. Checked exactly: every transcript's probability (the SVT law on the (item, pass)
stream) sums to one and the log-ratio between neighbours never exceeds epsilon, whatever the number of passes;
the sampler has that law; the raise D is the query noise's std or scale; the contract."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from conftest import sized
from dpkit.audit.svt_law import svt_log_prob
from dpkit.audit.testing import CountingSource, chi2_pvalue
from dpkit.core import Accountant, PureDP
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.svt import sparse_vector_retraversal
from dpkit.svt.engine import calibrate as _plan
from dpkit.svt.retraversal import _sample_retraversal

from .helpers import P_MIN, lattice_units, law_kwargs, neighbour_pairs, small_plan


def transcripts(m: int, c: int, max_passes: int) -> list[list[tuple[int, bool, int]]]:
    """Every transcript of a retraversal run over m items: lists of (item, ⊤?, pass), in the order asked."""
    out: list[list[tuple[int, bool, int]]] = []

    def run_pass(p: int, k: int, chosen: frozenset, seq: list) -> None:
        if k == c or len(chosen) == m or p == max_passes:
            out.append(seq)
            return
        todo = [i for i in range(m) if i not in chosen]

        def step(j: int, k: int, chosen: frozenset, seq: list) -> None:
            if k == c:
                out.append(seq)
                return
            if j == len(todo):
                run_pass(p + 1, k, chosen, seq)
                return
            i = todo[j]
            step(j + 1, k + 1, chosen | {i}, [*seq, (i, True, p)])
            step(j + 1, k, chosen, [*seq, (i, False, p)])

        step(0, k, chosen, seq)

    run_pass(0, 0, frozenset(), [])
    return out


def transcript_log_probs(diffs, c: int, max_passes: int, kw: dict) -> dict[tuple, float]:
    """``{(chosen items in order, their passes): ln P}`` — the standard SVT law on the expanded stream."""
    out = {}
    for seq in transcripts(len(diffs), c, max_passes):
        values = [int(diffs[i]) for i, _, _ in seq]
        lp = svt_log_prob(values, 0, [b for _, b, _ in seq], **kw) if seq else 0.0
        key = (tuple(i for i, b, _ in seq if b), tuple(p for _, b, p in seq if b))
        out[key] = lp
    return out


def test_enumerator_and_law_sum_to_one():
    plan = small_plan(1, 1.0, 2.0, cutoff=2)
    diffs = np.array([-3, 0, -1])
    lp = transcript_log_probs(diffs, 2, 3, law_kwargs(plan))
    assert abs(math.fsum(np.exp(list(lp.values()))) - 1.0) < 1e-12
    assert ((0, 1), (0, 0)) in lp and ((1, 0), (0, 1)) in lp


@pytest.mark.parametrize("monotonic", [False, True])
@pytest.mark.parametrize(("cutoff", "passes"), [(1, 3), (2, 2), (2, 4)])
def test_exact_privacy_whole_retraversal(cutoff, passes, monotonic):
    """Over every transcript (= every release: the chosen items, in order, and their passes), random neighbouring
    score vectors: the log-ratio stays below epsilon however many passes — one SVT run, not one per pass."""
    eps, sens = 1.0, 1.0
    plan = _plan(eps, sens, monotonic, cutoff=cutoff)
    kw = law_kwargs(plan)
    gen = np.random.default_rng(80 + 3 * cutoff + passes + monotonic)
    worst = 0.0
    for q, q_prime, thr in neighbour_pairs(gen, sized(8, 60), sens, monotonic, m_max=3):
        raised = thr + 1.5 * plan.query_scale  # a raised threshold: several passes are likely
        d = lattice_units(q, plan) - lattice_units(raised, plan)
        dp = lattice_units(q_prime, plan) - lattice_units(raised, plan)
        a = transcript_log_probs(d, cutoff, passes, kw)
        b = transcript_log_probs(dp, cutoff, passes, kw)
        assert abs(math.fsum(np.exp(list(a.values()))) - 1.0) < 1e-11
        worst = max(worst, max(abs(a[k] - b[k]) for k in a))
    assert worst <= eps + 1e-9


def test_exact_privacy_small_lattice_many_passes():
    """Unit lattice, small scales (t₁ = 1/ε₁, t₂ = 2c/ε₂, ε = 1, c = 2), four passes over three items."""
    eps, c = 1.0, 2
    e1 = eps / (1 + (2 * c) ** (2 / 3))
    kw = {"threshold_scale": 1 / e1, "query_scale": 2 * c / (eps - e1)}
    gen = np.random.default_rng(84)
    worst = 0.0
    for _ in range(sized(15, 150)):
        d = gen.integers(-6, 2, 3)
        dp = d + gen.integers(-1, 2, 3)
        a, b = transcript_log_probs(d, c, 4, kw), transcript_log_probs(dp, c, 4, kw)
        worst = max(worst, max(abs(a[k] - b[k]) for k in a))
    assert worst <= eps + 1e-9


def _sample_keys(diffs, plan, rng, n: int, passes: int, one_at_a_time: bool) -> Counter:
    if one_at_a_time:
        rows = [_sample_retraversal(diffs, plan, rng, 1, passes) for _ in range(n)]
        idx = np.concatenate([r[0] for r in rows])
        pas = np.concatenate([r[1] for r in rows])
    else:
        idx, pas = _sample_retraversal(diffs, plan, rng, n, passes)
    keys: Counter = Counter()
    for i_row, p_row in zip(idx.tolist(), pas.tolist(), strict=True):
        keep = [k for k, v in enumerate(i_row) if v >= 0]
        keys[(tuple(i_row[k] for k in keep), tuple(p_row[k] for k in keep))] += 1
    return keys


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_sampled_law(one_at_a_time):
    """The sampler's (chosen items, passes) against the exact transcript law; power: a sampler that redrew the
    threshold noise at every pass (a fresh SVT per pass) has another law, rejected here."""
    c, passes = 2, 4
    plan = small_plan(1, 1.0, 2.0, cutoff=c)
    diffs = np.array([-3, -1, -4, 0])
    kw = law_kwargs(plan)
    lp = transcript_log_probs(diffs, c, passes, kw)
    keys = list(lp)
    n = sized(100_000, 1_000_000) if not one_at_a_time else sized(5_000, 50_000)
    got = _sample_keys(diffs, plan, deterministic_source(85 + one_at_a_time), n, passes, one_at_a_time)
    assert set(got) <= set(keys)
    counts = np.array([got[k] for k in keys])
    assert chi2_pvalue(counts, np.exp([lp[k] for k in keys])) > P_MIN
    if not one_at_a_time:
        # a fresh threshold noise per pass: product over passes of single-pass SVT laws
        fresh = {}
        for k in keys:
            items, pas = k
            total = 0.0
            remaining = list(range(diffs.size))
            left = c
            for p in range(passes):
                if left == 0 or not remaining:
                    break
                chosen_now = [i for i, pp in zip(items, pas, strict=True) if pp == p]
                out = []
                for i in remaining:
                    hit = i in chosen_now
                    out.append(hit)
                    if hit and len([o for o in out if o]) == left:
                        break
                total += svt_log_prob([int(diffs[i]) for i in remaining[:len(out)]], 0, out, **kw)
                left -= len(chosen_now)
                remaining = [i for i in remaining if i not in chosen_now]
            fresh[k] = total
        assert abs(math.fsum(np.exp(list(fresh.values()))) - 1.0) < 1e-9
        assert chi2_pvalue(counts, np.exp([fresh[k] for k in keys])) < P_MIN


def test_raise_units_and_release():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(86)
    scores = [50.0, 900.0, 40.0, 700.0, 60.0, 800.0]
    rel = sparse_vector_retraversal(scores, 500.0, 0.5, 3, increment=2.0, accountant=acct, rng=src)
    qs = rel.params["query_scale"]
    assert rel.params["raised_by"] == pytest.approx(2.0 * math.sqrt(2.0) * qs, rel=1e-6)
    assert rel.mechanism == "sparse_vector_retraversal" and acct.spent == PureDP(0.5) and len(acct.receipts) == 1
    assert rel.value.dtype == np.int64 and rel.parts["passes"].shape == rel.value.shape
    rel = sparse_vector_retraversal(scores, 500.0, 0.5, 3, increment=2.0, increment_unit="scale",
                                    rng=deterministic_source(1))
    assert rel.params["raised_by"] == pytest.approx(2.0 * qs, rel=1e-6)
    # c > number of items: every item is chosen eventually
    rel = sparse_vector_retraversal([1.0, 2.0, 3.0], 0.0, 1.0, 5, max_passes=1000, rng=deterministic_source(2))
    assert sorted(rel.value.tolist()) == [0, 1, 2]
    # an unreachable threshold: at most max_passes passes, possibly nothing chosen
    rel = sparse_vector_retraversal([1.0, 2.0, 3.0], 1e6, 1.0, 2, max_passes=3, rng=deterministic_source(3))
    assert rel.value.size == 0
    assert sparse_vector_retraversal([], 0.0, 1.0, 2, rng=deterministic_source(4)).value.size == 0
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        sparse_vector_retraversal(scores, 500.0, 0.6, 3, accountant=acct, rng=src)
    assert src.consumed == before


@pytest.mark.parametrize(("override", "error", "param"), [
    ({"increment": -1.0}, InvalidParameter, "increment"),
    ({"increment": math.nan}, InvalidParameter, "increment"),
    ({"increment": 1e308}, InvalidParameter, "increment"),
    ({"increment_unit": "sd"}, InvalidParameter, "increment_unit"),
    ({"max_passes": 0}, InvalidParameter, "max_passes"),
    ({"max_passes": 1.5}, WrongType, "max_passes"),
    ({"cutoff": 0}, InvalidParameter, "cutoff"),
    ({"threshold": math.nan}, InvalidParameter, "threshold"),
    ({"threshold": None}, WrongType, "threshold"),
    ({"values": [1.0, math.nan]}, InvalidData, "values"),
])
def test_bad_input(override, error, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(87)
    kw = {"values": [1.0, 2.0], "threshold": 0.0, "epsilon": 1.0, "cutoff": 2, "accountant": acct, "rng": src}
    kw.update(override)
    with pytest.raises(error) as info:
        sparse_vector_retraversal(kw.pop("values"), kw.pop("threshold"), kw.pop("epsilon"), kw.pop("cutoff"), **kw)
    assert info.value.param == param
    assert src.consumed == 0 and acct.receipts == ()
