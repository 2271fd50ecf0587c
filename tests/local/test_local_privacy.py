"""dpkit.local: exact per-report likelihood ratios (every protocol) and the samplers' laws (chi-square)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special

import dpkit
from dpkit.audit.testing import P_MIN, chi2_pvalue
from dpkit.local import GRR, OLH, OUE, RAPPOR, SUE, BinaryRR, TwoCoinRR, UnaryEncoding
from dpkit.local._domain import bernoulli, seeded_hash, value_keys

CATS = ["a", "b", "c"]
SEEDS = [0, 1, 7, 2**63 + 5, 2**64 - 1, 123456789, 99, 31337]


def _report_space(proto):
    """Every report (with its public seed / cohort) of a small protocol, grouped by the conditioning."""
    if isinstance(proto, OLH):
        return [[(s, y) for y in range(proto.g)] for s in SEEDS]
    if isinstance(proto, RAPPOR):
        return [[(c, np.array(b, dtype=bool)) for b in itertools.product([0, 1], repeat=proto.bits)]
                for c in range(proto.cohorts)]
    if isinstance(proto, UnaryEncoding):
        return [[np.array(b, dtype=bool) for b in itertools.product([0, 1], repeat=proto.k)]]
    return [list(range(proto.k))]


def _max_loss(proto):
    """Exact max over report groups, values v != v' and reports of ln P[o | v] - ln P[o | v']; also checks that
    each conditional law sums to one."""
    worst = -math.inf
    for group in _report_space(proto):
        lp = np.array([[proto.log_prob(o, v) for o in group] for v in proto.categories])
        assert np.allclose(special.logsumexp(lp, axis=1), 0.0, atol=1e-9)
        for i, j in itertools.permutations(range(proto.k), 2):
            finite = np.isfinite(lp[j])
            assert np.all(np.isfinite(lp[i]) <= finite)  # no report impossible under v' but possible under v
            worst = max(worst, float(np.max(lp[i][finite] - lp[j][finite])))
    return worst


PROTOCOLS = [
    GRR(1.3, ["a", "b", "c", "d"]), GRR(0.2, 5), BinaryRR(0.7, ("no", "yes")), TwoCoinRR(("no", "yes")),
    TwoCoinRR(truth=0.3), OUE(1.1, CATS), SUE(1.1, CATS), UnaryEncoding(CATS, p=0.75, q=0.25),
    UnaryEncoding(CATS, p=0.6, q=0.1), OLH(1.5, ["a", "b", "c", "d"]), OLH(0.4, CATS, g=3),
    RAPPOR(CATS, f=0.5, p=0.5, q=0.75, hashes=2, bits=4, cohorts=2), RAPPOR(CATS, f=0.25, hashes=1, bits=4),
]


@pytest.mark.parametrize("proto", PROTOCOLS, ids=repr)
def test_exact_per_report_ratio_within_epsilon(proto):
    loss = _max_loss(proto)
    assert loss <= proto.epsilon + 1e-9
    if not isinstance(proto, RAPPOR):  # the bound is attained (RAPPOR's h|ln r| only when filters are disjoint)
        assert loss >= proto.epsilon - 1e-9


def test_two_coin_is_ln3_and_book_probabilities():
    proto = TwoCoinRR(("no", "yes"))
    assert proto.epsilon == pytest.approx(math.log(3), abs=1e-15) and proto.epsilon >= math.log(3)
    assert math.exp(proto.log_prob(1, "yes")) == pytest.approx(0.75)


def test_unary_epsilon_formula_of_the_book():
    assert UnaryEncoding(CATS, p=0.75, q=0.25).epsilon == pytest.approx(math.log(9), rel=1e-15)


class _LnPOverQ(UnaryEncoding):
    """A known non-private variant: unary encoding that claims ln(p/q), forgetting the (1-q)/(1-p) factor."""

    @property
    def epsilon(self):
        p, q = self.support_probabilities
        return math.log(p / q)


def test_wrong_unary_epsilon_is_caught():
    bad = _LnPOverQ(CATS, p=0.75, q=0.25)
    assert bad.epsilon == pytest.approx(math.log(3))
    assert _max_loss(bad) > bad.epsilon + 0.5  # ln 9 > ln 3: the exact ratio test flags it


def test_rappor_epsilon_infinity():
    r = RAPPOR(CATS, f=0.5, hashes=2, bits=8)
    assert r.epsilon_permanent == pytest.approx(4 * math.log(3))
    assert r.epsilon == pytest.approx(r.epsilon_permanent)  # without instantaneous RR, one report is the PRR


# ---------------------------------------------------------------------------------------------------------------
# the samplers' laws
# ---------------------------------------------------------------------------------------------------------------
N = 12_000


def _pattern_counts(proto, reports, group):
    if isinstance(proto, RAPPOR):
        group = [o[1] for o in group]
    keys = {(o.tobytes() if isinstance(o, np.ndarray) else o): i for i, o in enumerate(group)}
    counts = np.zeros(len(group))
    for i in range(len(reports)):
        r = reports[i]
        if isinstance(proto, RAPPOR):
            r = r[1]
        counts[keys[r.tobytes() if isinstance(r, np.ndarray) else r]] += 1
    return counts


@pytest.mark.parametrize("proto", [p for p in PROTOCOLS if not isinstance(p, OLH)], ids=repr)
def test_sampler_law_chi_square(proto):
    rng = dpkit.deterministic_source(11)
    v = proto.categories[1]
    if isinstance(proto, RAPPOR):
        proto = RAPPOR(CATS, f=proto.params["f"], p=proto.params["p"] if proto.irr else None,
                       q=proto.params["q"] if proto.irr else None, hashes=proto.hashes, bits=proto.bits)
    group = _report_space(proto)[0]
    reports = proto.perturb([v] * N, rng=rng).value
    counts = _pattern_counts(proto, reports, group)
    probs = np.exp([proto.log_prob(o, v) for o in group])
    assert chi2_pvalue(counts, probs) > P_MIN


def test_sampler_law_has_power():
    """A 10 % wrong epsilon in the law is rejected (OUE's zero bits)."""
    rng = dpkit.deterministic_source(12)
    proto = OUE(1.0, CATS)
    group = _report_space(proto)[0]
    counts = _pattern_counts(proto, proto.perturb(["b"] * 40_000, rng=rng).value, group)
    wrong = OUE(1.1, CATS)
    assert chi2_pvalue(counts, np.exp([wrong.log_prob(o, "b") for o in group])) < P_MIN


def test_olh_law_given_the_seed():
    """(y - H_s(v)) mod g is 0 with probability p and uniform on the rest (GRR over g), whatever the seed."""
    rng = dpkit.deterministic_source(13)
    proto = OLH(1.5, ["a", "b", "c", "d"])
    rep = proto.perturb(["c"] * N, rng=rng).value
    h = seeded_hash(rep.seeds, value_keys([2]), proto.g)
    diff = (rep.data - h) % proto.g
    p, _ = proto.support_probabilities
    probs = [p] + [(1 - p) / (proto.g - 1)] * (proto.g - 1)
    assert chi2_pvalue(np.bincount(diff, minlength=proto.g), probs) > P_MIN


def test_olh_hash_collisions_are_one_over_g():
    """The public hash family: over random seeds, two categories collide with probability 1/g (unbiasedness)."""
    rng = dpkit.deterministic_source(14)
    g, n = 5, 200_000
    seeds = rng.uint64(n)
    from scipy import stats

    for u, v in [(0, 1), (3, 17), (100, 101)]:
        coll = int(np.sum(seeded_hash(seeds, value_keys([u]), g) == seeded_hash(seeds, value_keys([v]), g)))
        assert stats.binomtest(coll, n, 1 / g).pvalue > P_MIN
        # and each value is uniform on [g]
        assert chi2_pvalue(np.bincount(seeded_hash(seeds, value_keys([u]), g), minlength=g), [1 / g] * g) > P_MIN


@pytest.mark.parametrize("prob", [0.75, 0.1, 2.0**-70 + 0.5, 1e-3])
def test_exact_dyadic_bernoulli(prob):
    from fractions import Fraction

    from scipy import stats

    rng = dpkit.deterministic_source(15)
    n = 100_000
    hits = int(bernoulli(Fraction(prob), n, rng).sum())
    assert stats.binomtest(hits, n, prob).pvalue > P_MIN
    assert stats.binomtest(hits, n, prob * 1.1 if prob < 0.5 else prob * 0.95).pvalue < P_MIN or prob < 0.01


def test_bernoulli_tie_path_is_exact():
    """A probability whose first 64 bits equal the word (forced tie) is decided by further words."""
    from fractions import Fraction

    from dpkit.local._domain import _refine

    rng = dpkit.deterministic_source(16)
    assert not any(_refine(Fraction(0), rng) for _ in range(10))
    frac = np.mean([_refine(Fraction(1, 3), rng) for _ in range(3000)])
    assert abs(frac - 1 / 3) < 6 * math.sqrt(2 / 9 / 3000)
