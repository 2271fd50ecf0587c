"""dpkit.local: unbiased aggregation and the exact variance formula; the one-call curator and heavy hitters."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpkit
from dpkit.local import (
    GRR,
    OLH,
    OUE,
    RAPPOR,
    SUE,
    BinaryRR,
    TwoCoinRR,
    UnaryEncoding,
    aggregate,
    choose_protocol,
    frequencies,
    heavy_hitters,
)

Z_MAX = 6.0  # per category, Bonferroni over <= 8 categories: a correct estimator fails with p < 1e-7
CATS = ["a", "b", "c", "d", "e"]
TRUE = np.array([5000, 2500, 1500, 1000, 0])


def _values(cats=CATS, true=TRUE):
    return np.repeat(np.array(cats, dtype=object), true)


@pytest.mark.parametrize("proto", [GRR(1.0, CATS), OUE(1.0, CATS), SUE(1.0, CATS), OLH(1.0, CATS),
                                   UnaryEncoding(CATS, p=0.75, q=0.25)], ids=repr)
def test_unbiased_with_exact_variance(proto):
    rng = dpkit.deterministic_source(21)
    est = aggregate(proto.perturb(_values(), rng=rng).value)
    var = proto.variance(TRUE, int(TRUE.sum()))
    assert np.allclose(est.exact_variance(TRUE), var)
    z = (est.counts - TRUE) / np.sqrt(var)
    assert np.all(np.abs(z) < Z_MAX)
    # the stated (plug-in) variance is close to the exact one
    assert np.allclose(est.variance, var, rtol=0.15)
    # power: a 25% wrong q* would bias the counts beyond Z_MAX
    p, q = proto.support_probabilities
    n = TRUE.sum()
    support = est.counts * (p - q) + n * q
    wrong = (support - n * q * 1.25) / (p - q)
    assert abs((wrong[0] - TRUE[0]) / math.sqrt(var[0])) > Z_MAX or abs(wrong[4] / math.sqrt(var[4])) > Z_MAX


@pytest.mark.parametrize("proto", [GRR(1.0, 4), OUE(1.0, 4), OLH(1.0, 4), TwoCoinRR(), BinaryRR(0.5)], ids=repr)
def test_variance_matches_the_formula(proto):
    """R repetitions: (R-1) s^2 / sigma^2 ~ chi-square(R-1) (normal estimates); two-sided p > 1e-7."""
    rng = dpkit.deterministic_source(22)
    true = np.array([300, 150, 50, 0])[: proto.k]
    true = true if proto.k == 4 else np.array([300, 200])
    vals = np.repeat(np.arange(proto.k), true)
    reps = 300
    ests = np.array([aggregate(proto.perturb(vals, rng=rng).value).counts for _ in range(reps)])
    var = proto.variance(true, int(true.sum()))
    lo, hi = stats.chi2.ppf([5e-8, 1 - 5e-8], reps - 1) / (reps - 1)
    ratio = ests.var(axis=0, ddof=1) / var
    assert np.all((ratio > lo) & (ratio < hi)), ratio
    mean_z = (ests.mean(axis=0) - true) / np.sqrt(var / reps)
    assert np.all(np.abs(mean_z) < Z_MAX)


def test_oue_and_olh_variance_for_rare_values():
    n, eps = 10_000, 1.0
    rare = 4 * n * math.exp(eps) / (math.exp(eps) - 1) ** 2
    assert OUE(eps, 50).variance(np.zeros(50), n)[0] == pytest.approx(rare)
    olh = OLH(eps, 50)
    assert olh.g == 4  # round(e + 1)
    assert olh.variance(np.zeros(50), n)[0] == pytest.approx(rare, rel=0.1)  # g is rounded
    grr = GRR(eps, 50).variance(np.zeros(50), n)[0]
    assert grr == pytest.approx(n * (math.exp(eps) + 50 - 2) / (math.exp(eps) - 1) ** 2)


def test_rappor_decodes_the_candidates():
    rng = dpkit.deterministic_source(23)
    cats = ["a", "b", "c", "d"]
    true = np.array([6000, 3000, 1000, 0])
    proto = RAPPOR(cats, f=0.25, p=0.25, q=0.75, hashes=2, bits=16, cohorts=4)
    est = aggregate(proto.perturb(_values(cats, true), rng=rng).value)
    assert np.all(est.counts >= 0)
    assert np.all(np.isfinite(est.stderr))
    assert np.all(np.abs(est.counts - true) < 6 * est.stderr + 1.0)
    assert est.support is None
    with pytest.raises(dpkit.InvalidParameter):
        est.exact_variance(true)


def test_interval_and_helpers():
    rng = dpkit.deterministic_source(24)
    est = aggregate(GRR(2.0, CATS).perturb(_values(), rng=rng).value)
    lo, hi = est.interval(0.99)
    assert np.all(lo < est.counts) and np.all(est.counts < hi)
    assert est["a"] == est.counts[0] and est.top(2) == ["a", "b"]
    assert est.as_dict()["c"] == est.counts[2]
    assert np.allclose(est.frequencies.sum() * est.n, est.counts.sum())
    with pytest.raises(dpkit.InvalidParameter):
        est["zzz"]


def test_auto_rule():
    assert choose_protocol(1.0, 5).name == "grr"  # 5 < 3e + 2 = 10.15
    assert choose_protocol(1.0, 11).name == "oue"
    assert choose_protocol(1.0, 11, n=10**7).name == "olh"
    assert choose_protocol(1.0, 11, protocol="sue").name == "sue"
    assert choose_protocol(np.log(3), 15).name == "oue"  # 15 >= 3*3 + 2 = 11


def test_frequencies_release():
    rng = dpkit.deterministic_source(25)
    acc = dpkit.Accountant(dpkit.PureDP(2.0), neighbours=dpkit.Replace())
    rel = frequencies(_values(), 1.0, categories=CATS, accountant=acc, rng=rng)
    assert rel.params["protocol"] == "grr" and acc.spent == dpkit.PureDP(1.0)
    est = rel.parts["estimate"]
    assert np.array_equal(rel.value, est.counts)
    lo, hi = rel.interval(0.95)
    assert np.all(lo < hi)
    assert np.all(np.abs(rel.value - TRUE) < Z_MAX * est.stderr)
    rel2 = frequencies(_values(), 1.0, protocol=OLH(1.0, CATS), rng=rng)
    assert rel2.params["protocol"] == "olh"
    with pytest.raises(dpkit.InvalidParameter):
        frequencies(_values(), 2.0, protocol=OLH(1.0, CATS))


def test_heavy_hitters():
    rng = dpkit.deterministic_source(26)
    rel = heavy_hitters(_values(), 2.0, categories=CATS, k=2, rng=rng)
    assert rel.value == ["a", "b"]
    assert len(rel.parts["counts"]) == 2 and np.all(rel.parts["stderr"] > 0)
    rel = heavy_hitters(_values(), 2.0, categories=CATS, k=None, threshold=1200, rng=rng)
    assert rel.value[:3] == ["a", "b", "c"] and "e" not in rel.value


