"""Exponential mechanism, report-noisy-max and permute-and-flip: exact laws and exact privacy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from dpkit.audit.testing import P_MIN, chi2_pvalue
from dpkit.core import PureDP
from dpkit.mechanisms import NoInterval, exponential, exponential_utility_bound, permute_and_flip, report_noisy_max
from dpkit.mechanisms.selection import SelectionLaw, _sample_pf, _sample_rnm, sample_exponential

DRAWS = 2000  # public-API loops (one draw per call)
BATCH = 100_000  # the same samplers, many draws per call


def _em_probs(scores, sens, eps, monotonic=False):
    q = np.asarray(scores, dtype=float)
    w = eps * (q - q.max()) / ((1 if monotonic else 2) * sens)
    p = np.exp(w)
    return p / p.sum()


def _law_probs(scores, sens, eps, factor):
    return np.exp(SelectionLaw(np.asarray(scores, dtype=float), sens, eps, factor).log_probs())


def _pf_probs(scores, sens, eps, factor):
    """Exact permute-and-flip law by brute force over permutations (the implemented coin probabilities)."""
    law = SelectionLaw(np.asarray(scores, dtype=float), sens, eps, factor)
    coins = np.exp(-law.limbs.sum(axis=1))
    n = len(scores)
    out = np.zeros(n)
    perms = list(itertools.permutations(range(n)))
    for perm in perms:
        reach = 1.0
        for i in perm:
            out[i] += reach * coins[i]
            reach *= 1.0 - coins[i]
    return out / len(perms)


def _freq(fn, n, k, rng, **kw):
    counts = np.zeros(k, dtype=int)
    for _ in range(n):
        counts[fn(rng=rng, **kw).value] += 1
    return counts


SCORES = [0.0, 2.0, 3.0, 5.0, 6.5]


def _batch_counts(sampler, scores, sens, eps, factor, rng, *extra):
    law = SelectionLaw(np.asarray(scores, dtype=float), sens, eps, factor)
    return np.bincount(sampler(law, *extra, rng, BATCH) if extra else sampler(law, rng, BATCH),
                       minlength=len(scores))


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_frequencies(rng, monotonic):
    p = _em_probs(SCORES, 1.0, 1.0, monotonic)
    # the public function (one draw per call)
    counts = _freq(lambda **k: exponential(SCORES, 1.0, 1.0, monotonic=monotonic, **k), DRAWS, 5, rng)
    assert chi2_pvalue(counts, p) > P_MIN
    # the same sampler, many draws at once: enough power to catch a 10% error in epsilon
    counts = _batch_counts(sample_exponential, SCORES, 1.0, 1.0, 1 if monotonic else 2, rng)
    assert chi2_pvalue(counts, p) > P_MIN
    # power: a 10% wrong epsilon is caught
    assert chi2_pvalue(counts, _em_probs(SCORES, 1.0, 1.1, monotonic)) < P_MIN
    assert chi2_pvalue(counts, _em_probs(SCORES, 1.0, 1 / 1.1, monotonic)) < P_MIN


def test_exponential_law_matches_ideal():
    # the implemented (lattice-rounded) law differs from the ideal one only at the 1e-6 level
    for scores, sens, eps in [(SCORES, 1.0, 1.0), ([1e6, 1e6 + 3, 1e6 - 2], 2.0, 0.5), ([-1e-3, 0, 1e-3], 1e-3, 3)]:
        for factor in (1, 2):
            ideal = _em_probs(scores, sens, eps, monotonic=factor == 1)
            assert np.allclose(_law_probs(scores, sens, eps, factor), ideal, rtol=1e-5, atol=1e-12)


def test_exponential_no_overflow_and_huge_gaps(rng):
    # raw counts in the millions: no exp overflow; the best candidate wins
    scores = [1e9, 2e9, 3e9, 3e9 - 5]
    idx = {exponential(scores, 1.0, 1.0, rng=rng).value for _ in range(50)}
    assert idx <= {2, 3}
    # gaps beyond 2^52 lattice steps go through the exact big-integer path
    scores = [0.0, 1e200, -1e200]
    assert exponential(scores, 1.0, 1.0, rng=rng).value == 1
    assert exponential([5.0], 1.0, 1.0, rng=rng).value == 0


def test_exponential_exact_privacy_general():
    """max |log P_D[i] - log P_D'[i]| <= eps over neighbouring score vectors (|q_i - q'_i| <= Δ)."""
    gen = np.random.default_rng(1)
    eps, sens = 0.7, 1.5
    worst = 0.0
    for _ in range(300):
        q = gen.uniform(-5, 5, 6)
        shift = gen.choice([-1.0, 1.0], 6) * sens * gen.choice([1.0, gen.uniform()], 6)
        a = SelectionLaw(q, sens, eps, 2).log_probs()
        b = SelectionLaw(q + shift, sens, eps, 2).log_probs()
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst <= eps + 1e-9
    # the worst case (one score up by Δ, all others down by Δ) gets close to eps
    q = np.zeros(6)
    shift = np.array([sens] + [-sens] * 5)
    a, b = SelectionLaw(q, sens, eps, 2).log_probs(), SelectionLaw(q + shift, sens, eps, 2).log_probs()
    assert eps * 0.6 < np.max(np.abs(a - b)) <= eps + 1e-9


def test_exponential_exact_privacy_monotonic_tight():
    eps, sens = 1.0, 1.0
    gen = np.random.default_rng(2)
    worst = 0.0
    for _ in range(300):
        q = gen.uniform(-5, 5, 5)
        shift = gen.uniform(0, sens, 5)  # monotonic: all scores move up
        a = SelectionLaw(q, sens, eps, 1).log_probs()
        b = SelectionLaw(q + shift, sens, eps, 1).log_probs()
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst <= eps + 1e-9
    # tight case: many tied candidates, one goes up by Δ
    n = 10_000
    q = np.zeros(n)
    q2 = q.copy()
    q2[0] = sens
    a, b = SelectionLaw(q, sens, eps, 1).log_probs(), SelectionLaw(q2, sens, eps, 1).log_probs()
    loss = float(np.max(np.abs(a - b)))
    assert eps - 1e-3 < loss <= eps + 1e-9
    # declaring monotonic for non-monotonic neighbours breaks the guarantee (loss up to 2 eps)
    q3 = -np.full(n, sens)
    q3[0] = sens
    c = SelectionLaw(q3, sens, eps, 1).log_probs()
    assert float(np.max(np.abs(a - c))) > 1.9 * eps


@pytest.mark.parametrize("monotonic", [False, True])
def test_permute_and_flip_frequencies(rng, monotonic):
    scores = [0.0, 1.0, 2.5, 3.0]
    factor = 1 if monotonic else 2
    counts = _freq(lambda **k: permute_and_flip(scores, 1.0, 1.0, monotonic=monotonic, **k), DRAWS, 4, rng)
    assert chi2_pvalue(counts, _pf_probs(scores, 1.0, 1.0, factor)) > P_MIN
    counts = _batch_counts(_sample_pf, scores, 1.0, 1.0, factor, rng)
    assert chi2_pvalue(counts, _pf_probs(scores, 1.0, 1.0, factor)) > P_MIN
    assert chi2_pvalue(counts, _pf_probs(scores, 1.0, 1.1, factor)) < P_MIN
    assert chi2_pvalue(counts, _pf_probs(scores, 1.0, 1 / 1.1, factor)) < P_MIN
    # permute-and-flip differs from the exponential mechanism (it favours the best candidate more)
    pf, em = _pf_probs(scores, 1.0, 1.0, factor), _em_probs(scores, 1.0, 1.0, monotonic)
    assert pf[3] > em[3]


@pytest.mark.parametrize("factor", [2, 1])
def test_permute_and_flip_exact_privacy(factor):
    eps, sens = 0.9, 1.0
    gen = np.random.default_rng(3)
    worst = 0.0
    for _ in range(150):
        q = np.round(gen.uniform(-3, 3, 4), 1)
        if factor == 2:
            shift = gen.choice([-1.0, 0.0, 1.0], 4) * sens
        else:
            shift = gen.choice([0.0, 1.0], 4) * sens * gen.choice([1.0, -1.0])
        a, b = _pf_probs(q, sens, eps, factor), _pf_probs(q + shift, sens, eps, factor)
        worst = max(worst, float(np.max(np.abs(np.log(a) - np.log(b)))))
    assert worst <= eps + 1e-9


def _lap_cdf(x, b):
    return np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / b), 1 - 0.5 * np.exp(-np.maximum(x, 0) / b))


def _rnm_laplace_probs(scores, b):
    """P[argmax_i (q_i + Lap(b)) = i] by numerical integration on a fine grid (continuous Laplace)."""
    q = np.asarray(scores, dtype=float)
    z = np.linspace(-60 * b, 60 * b, 1_200_001)
    pdf = np.exp(-np.abs(z) / b) / (2 * b)
    out = []
    for i in range(len(q)):
        v = pdf.copy()
        for j in range(len(q)):
            if j != i:
                v *= _lap_cdf(q[i] + z - q[j], b)
        out.append(integrate.simpson(v, x=z))
    p = np.array(out)
    return p / p.sum()


@pytest.mark.parametrize("monotonic", [False, True])
def test_report_noisy_max_laplace_frequencies(rng, monotonic):
    scores = [0.0, 1.0, 2.0, 4.0]
    counts = _freq(lambda **k: report_noisy_max(scores, 1.0, 1.0, monotonic=monotonic, **k), DRAWS, 4, rng)
    b = (1.0 if monotonic else 2.0) / 1.0
    p = _rnm_laplace_probs(scores, b)
    assert chi2_pvalue(counts, p) > P_MIN
    factor = 1 if monotonic else 2
    law = SelectionLaw(np.asarray(scores), 1.0, 1.0, factor)
    t_units = factor * law.d_units / 1.0
    counts = np.bincount(_sample_rnm(law, t_units, rng, BATCH), minlength=4)
    assert chi2_pvalue(counts, p) > P_MIN
    assert chi2_pvalue(counts, _rnm_laplace_probs(scores, 1.1 * b)) < P_MIN
    assert chi2_pvalue(counts, _rnm_laplace_probs(scores, b / 1.1)) < P_MIN
    rel = report_noisy_max(scores, 1.0, 1.0, monotonic=monotonic, rng=rng)
    assert rel.scale == pytest.approx(b, rel=3e-6) and rel.scale >= b
    assert rel.cost == PureDP(1.0)


def test_report_noisy_max_gumbel_is_exponential(rng):
    counts = _freq(lambda **k: report_noisy_max(SCORES, 1.0, 1.0, noise="gumbel", **k), DRAWS, 5, rng)
    assert chi2_pvalue(counts, _em_probs(SCORES, 1.0, 1.0)) > P_MIN
    rel = report_noisy_max(SCORES, 1.0, 1.0, noise="gumbel", monotonic=True, rng=rng)
    assert rel.scale == 1.0 and rel.params["noise"] == "gumbel"


def test_report_noisy_max_ties_lowest_index(rng):
    # with all scores equal and a huge epsilon the noise is almost always 0: ties -> index 0
    wins = [report_noisy_max([3.0, 3.0, 3.0], 1.0, 1e9, rng=rng).value for _ in range(20)]
    assert wins.count(0) >= 19


def test_selection_release_has_no_interval(rng):
    for rel in (exponential([1.0, 2.0], 1.0, 1.0, rng=rng), permute_and_flip([1.0, 2.0], 1.0, 1.0, rng=rng),
                report_noisy_max([1.0, 2.0], 1.0, 1.0, rng=rng)):
        assert isinstance(rel.value, int)
        with pytest.raises(NoInterval):
            rel.interval()


def test_exponential_utility_bound_holds_exactly():
    for monotonic in (False, True):
        q = np.concatenate([[10.0], np.zeros(999)])
        t = exponential_utility_bound(1000, 1.0, 2.0, 0.9, monotonic=monotonic)
        p = _law_probs(q, 1.0, 2.0, 1 if monotonic else 2)
        good = q >= q.max() - t
        assert p[good].sum() >= 0.9
        assert t == pytest.approx((1 if monotonic else 2) / 2.0 * math.log(1000 / 0.1), rel=1e-5)


def test_limbs_are_exact_for_gaps_beyond_two_to_the_31():
    """Widely spread scores (gaps >= 2^31 lattice steps) take the vectorised four-limb path; the limbs
    must add up exactly to kappa * gap."""
    from fractions import Fraction

    from dpkit.mechanisms.selection import SelectionLaw

    scores = np.concatenate([np.linspace(0.0, 1e7, 257), [3.0, 5e6 + 0.25]])
    law = SelectionLaw(scores, 1.0, 1.0, 2)
    assert int(np.max(law.gaps)) >= 2**31 and isinstance(law.gaps, np.ndarray)
    for i in range(scores.size):
        total = sum(Fraction(float(x)) for x in law.limbs[i])
        assert total == Fraction(int(law.gaps[i]) * law.M) * Fraction(2) ** law.E
