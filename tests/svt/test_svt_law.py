"""dpkit.audit.svt_law: the closed-form law of sparse vector outputs, checked against independent oracles.

- discrete (lattice) law vs a direct sum over the threshold noise with a rigorous tail bound;
- continuous law vs log-space quadrature (dpkit.audit.exact.log_integral) and Monte Carlo;
- the probabilities of all output patterns sum to one (also at lattice scale, with resampling, per-query
  thresholds); float64 and decimal arithmetic agree; numeric answers (fresh or reused noise).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from conftest import sized
from dpkit.audit.exact import DiscreteLaplace
from dpkit.audit.svt_law import SVTLoss, svt_log_prob, svt_log_probs, svt_max_loss, svt_patterns
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.svt.engine import calibrate as _plan

from .helpers import P_MIN, direct_pattern_log_probs, quadrature_log_prob


def test_patterns_enumeration():
    assert svt_patterns(0, 2) == [()]
    assert svt_patterns(3, 1) == [(True,), (False, True), (False, False, True), (False, False, False)]
    pats = svt_patterns(5, 2)
    assert len(pats) == len(set(pats))
    for p in pats:
        assert sum(p) <= 2 and (sum(p) == 2) == (len(p) < 5 or sum(p) == 2)
        if sum(p) == 2:
            assert p[-1] is True  # the run halts at the c-th ⊤


@pytest.mark.parametrize("resample", [False, True])
def test_discrete_matches_direct_sum(resample):
    gen = np.random.default_rng(31 + resample)
    for _ in range(12):
        t1, t2 = gen.uniform(0.3, 4.0), gen.uniform(0.3, 6.0)
        c = int(gen.integers(1, 4))
        m = int(gen.integers(1, 6))
        u = gen.integers(-8, 9, m)
        thr = gen.integers(-3, 4, m)  # per-query thresholds
        direct, tail = direct_pattern_log_probs(u - thr, c, t1, t2, resample=resample)
        assert tail < -700
        for pattern, ref in direct.items():
            got = svt_log_prob(u, thr, list(pattern), threshold_scale=t1, query_scale=t2,
                               resample_threshold=resample)
            assert got == pytest.approx(ref, abs=1e-11, rel=0)
        total = math.fsum(np.exp(list(direct.values())))
        assert abs(total - 1.0) < 1e-12


def test_discrete_numeric_answers_match_direct_sum():
    """Fresh numeric answers add ln pmf(v - u); Alg-3 answers (the comparison's own noise) fix nu = v - u and
    restrict rho <= v - T: checked against a direct sum."""
    t1, t2, t3 = 1.7, 2.3, 0.9
    u, thr = np.array([-1, 2, 0]), 0
    rho, nu, eta = DiscreteLaplace(0, t1), DiscreteLaplace(0, t2), DiscreteLaplace(0, t3)
    z = np.arange(-3000, 3001, dtype=float)
    for v in (-2, 0, 1, 4):
        # ⊥ ⊥ then numeric v on the third query
        base = rho.logpmf(z) + nu.logcdf(thr - u[0] + z - 1) + nu.logcdf(thr - u[1] + z - 1)
        fresh = float(np.logaddexp.reduce(base + nu.logsf(thr - u[2] + z - 1))) + float(eta.logpmf(v - u[2]))
        got = svt_log_prob(u, thr, [False, False, float(v)], threshold_scale=t1, query_scale=t2, numeric_scale=t3)
        assert got == pytest.approx(fresh, abs=1e-11)
        reuse = float(np.logaddexp.reduce(np.where(z <= v - thr, base, -np.inf))) + float(nu.logpmf(v - u[2]))
        got = svt_log_prob(u, thr, [False, False, float(v)], threshold_scale=t1, query_scale=t2,
                           numeric="query_noise")
        assert got == pytest.approx(reuse, abs=1e-11)
    # a numeric answer off the lattice is impossible
    assert svt_log_prob(u, thr, [False, False, 0.5], threshold_scale=t1, query_scale=t2, numeric_scale=t3) \
        == -math.inf


def test_continuous_matches_quadrature():
    gen = np.random.default_rng(33)
    for trial in range(sized(4, 20)):
        b1, b2 = gen.uniform(0.5, 4.0), gen.uniform(0.5, 6.0)
        m = int(gen.integers(1, 6))
        q = gen.uniform(-3, 3, m)
        thr = float(gen.uniform(-1, 1))
        for pattern in svt_patterns(m, 2)[trial % 2::2]:
            ref = quadrature_log_prob(q, thr, pattern, b1, b2)
            got = svt_log_prob(q, thr, list(pattern), threshold_scale=b1, query_scale=b2, law="laplace")
            assert got == pytest.approx(ref, abs=1e-7)


@pytest.mark.parametrize("law", ["discrete_laplace", "laplace"])
@pytest.mark.parametrize("resample", [False, True])
def test_sums_to_one(law, resample):
    gen = np.random.default_rng(35)
    for _ in range(6):
        t1, t2 = gen.uniform(0.3, 5.0), gen.uniform(0.3, 5.0)
        m, c = int(gen.integers(1, 8)), int(gen.integers(1, 4))
        q = gen.integers(-6, 7, m).astype(float)
        thr = gen.integers(-2, 3, m).astype(float)
        lp = svt_log_probs(q, thr, c, threshold_scale=t1, query_scale=t2, law=law, resample_threshold=resample)
        assert abs(math.fsum(np.exp(list(lp.values()))) - 1.0) < 1e-12


def test_lattice_scale_sums_to_one():
    """At lattice scale (t ~ 10^6 steps, g = 2^-20) with the caller's units and a granularity."""
    plan = _plan(0.7, cutoff=3)
    g = plan.granularity
    lp = svt_log_probs([-3.0, 0.0, 2.5, -1.0, 4.0], 0.25, 3, threshold_scale=plan.threshold_scale,
                       query_scale=plan.query_scale, granularity=g)
    assert abs(math.fsum(np.exp(list(lp.values()))) - 1.0) < 1e-12


def test_float_and_decimal_agree():
    gen = np.random.default_rng(37)
    for law in ("discrete_laplace", "laplace"):
        for _ in range(5):
            t1, t2 = gen.uniform(0.3, 5.0), gen.uniform(0.3, 5.0)
            q = gen.integers(-4, 5, 8).astype(float)
            for pattern in svt_patterns(8, 3)[::7]:
                a = svt_log_prob(q, 0.0, list(pattern), threshold_scale=t1, query_scale=t2, law=law,
                                 precision="float")
                b = svt_log_prob(q, 0.0, list(pattern), threshold_scale=t1, query_scale=t2, law=law,
                                 precision="decimal")
                assert a == pytest.approx(b, abs=1e-10)


def test_long_pattern_decimal_vs_quadrature():
    """J = 40 factors: the decimal path (auto) against log-space quadrature."""
    q = np.r_[np.zeros(30), np.ones(10)]
    pattern = [False] * 30 + [True] * 10
    got = svt_log_prob(q, 0.0, pattern, threshold_scale=2.0, query_scale=2.0, law="laplace")
    ref = quadrature_log_prob(q, 0.0, pattern, 2.0, 2.0)
    assert got == pytest.approx(ref, abs=1e-7)


def test_monte_carlo_continuous():
    """A Monte Carlo sanity check of a few continuous pattern probabilities (binomial test)."""
    gen = np.random.default_rng(39)  # rng-ok: an independent simulation of the continuous law
    n = 400_000
    q, b1, b2 = np.array([0.0, 1.0, -1.0, 0.5]), 2.0, 3.0
    rho = gen.laplace(0, b1, n)
    above = q[None, :] + gen.laplace(0, b2, (n, 4)) >= rho[:, None]
    for pattern in ([False, True], [True, False, True], [False, False, False, False]):
        k = len(pattern)
        hits = int(np.count_nonzero(np.all(above[:, :k] == np.array(pattern), axis=1)))
        p = math.exp(svt_log_prob(q, 0.0, pattern, threshold_scale=b1, query_scale=b2, law="laplace"))
        assert stats.binomtest(hits, n, p).pvalue > P_MIN


def test_max_loss_result():
    res = svt_max_loss([0.0, 0.0], [1.0, 1.0], 0.0, 1, threshold_scale=2.0, query_scale=4.0, law="laplace")
    assert isinstance(res, SVTLoss) and 0 < res.loss <= 1.0 and res.direction in ("D/D'", "D'/D")


BAD = [
    ({"law": "gauss"}, InvalidParameter, "law"),
    ({"threshold_scale": 0.0}, InvalidParameter, "threshold_scale"),
    ({"threshold_scale": math.nan}, InvalidParameter, "threshold_scale"),
    ({"query_scale": -1.0}, InvalidParameter, "query_scale"),
    ({"outputs": "TF"}, WrongType, "outputs"),
    ({"outputs": [True, "x"]}, WrongType, "outputs"),
    ({"values": [0.5, 1.0]}, InvalidParameter, "values"),  # not lattice units, no granularity
    ({"values": [[0.0, 1.0]]}, WrongType, "values"),
    ({"values": [0.0]}, InvalidParameter, "values"),  # fewer answers than outputs
    ({"thresholds": [0.0]}, InvalidParameter, "thresholds"),
    ({"granularity": 0.5, "law": "laplace"}, InvalidParameter, "granularity"),
    ({"outputs": [False, 2.0]}, InvalidParameter, "numeric_scale"),
    ({"numeric": "reuse"}, InvalidParameter, "numeric"),
    ({"precision": "quad"}, InvalidParameter, "precision"),
    ({"resample_threshold": 1}, WrongType, "resample_threshold"),
]


@pytest.mark.parametrize(("override", "error", "param"), BAD)
def test_bad_input(override, error, param):
    kw = {"values": [0.0, 1.0], "thresholds": 0.0, "outputs": [False, True], "threshold_scale": 1.0,
          "query_scale": 1.0}
    kw.update(override)
    with pytest.raises(error) as info:
        svt_log_prob(kw.pop("values"), kw.pop("thresholds"), kw.pop("outputs"), **kw)
    assert info.value.param == param
