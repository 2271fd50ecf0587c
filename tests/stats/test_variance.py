"""dpkit.stats.variance and dpkit.stats.std: parts' laws and sensitivities per relation, exact privacy of
each part, the auditor on the whole statistic, interval coverage, ddof, accounting and refused inputs."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from conftest import sized
from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit import audit
from dpkit.audit.exact import DiscreteLaplace, Lattice, max_privacy_loss
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.stats.sums import exact_sum
from dpkit.stats.variances import SPLIT, SPLIT_REPLACE, _VariancePlan, std, variance

from .fixtures import P_MIN, SECRET, CountingSource, assert_refused, chi2_pvalue, dlap_binned_pvalue

CONF = 1 - 1e-7


def _dlap_probs(t, ks):
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(ks)


def test_public_functions_are_the_plan():
    x = np.array([1.0, 4.0, 9.5, 3.25, 7.0] * 20)
    plan = _VariancePlan(x, 0.0, 10.0, 1.5, AddRemove(), 1)
    v, parts = plan.draw(deterministic_source(3), 1)
    rel = variance(x, (0, 10), 1.5, ddof=1, rng=deterministic_source(3))
    assert rel.value == float(v[0]) and rel.mechanism == "variance"
    assert rel.parts["count"] == parts["count"][0] and rel.parts["centre"] == 5.0
    assert rel.parts["centred_sum_of_squares"] == parts["centred_sum_of_squares"][0]
    s = std(x, (0, 10), 1.5, ddof=1, rng=deterministic_source(3))
    assert s.value == math.sqrt(rel.value) and s.mechanism == "std" and s.parts == rel.parts
    a, b = rel.interval(0.9)
    sa, sb = s.interval(0.9)
    assert sa <= math.sqrt(a) * (1 + 1e-15) and sb >= math.sqrt(b) and sa == pytest.approx(math.sqrt(a))


@pytest.mark.parametrize(("nb", "k"), [(AddRemove(), 1), (PrivacyUnit("u", max_rows=3), 3), (Replace(), None)])
def test_sensitivities_and_split(nb, k):
    lo, hi, eps = 20.0, 80.0, 1.0
    plan = _VariancePlan(np.array([30.0, 70.0]), lo, hi, eps, nb, 0)
    r = 30.0  # |x - mid| <= Δ/2
    if k is None:  # replace-one: n public; Σy moves by up to 2r, Σy² by up to r²
        assert plan.t_count is None
        assert plan.lat_a.sensitivity == 2 * r and plan.lat_b.sensitivity == r * r
        assert plan.lat_a.epsilon + plan.lat_b.epsilon <= eps
        assert plan.lat_b.epsilon == pytest.approx(SPLIT_REPLACE[1] * eps)
    else:
        assert plan.lat_a.sensitivity == k * r and plan.lat_b.sensitivity == k * r * r
        assert plan.t_count == pytest.approx(k / (SPLIT[0] * eps))
        assert plan.lat_a.epsilon + plan.lat_b.epsilon + k / plan.t_count <= eps * (1 + 1e-15)
    # brute force on extreme neighbours: the centred parts move by at most the declared sensitivities
    base = np.array([25.0, 50.0, 79.0])
    y = lambda v: np.clip(v, lo, hi) - 50.0
    for extra in (lo, hi, 50.0):
        d2 = np.append(base, extra)
        assert abs(exact_sum(y(d2)) - exact_sum(y(base))) <= r
        assert abs(exact_sum(y(d2) ** 2) - exact_sum(y(base) ** 2)) <= r * r


def test_each_part_is_exactly_private_on_extreme_neighbours():
    lo, hi, eps = -1.0, 3.0, 0.9
    base = np.array([0.5, 2.9, -0.8])
    for extra in (lo, hi, 1.0):
        p, p2 = (_VariancePlan(v, lo, hi, eps, AddRemove(), 0) for v in (base, np.append(base, extra)))
        total = 0.0
        for lat, c, c2 in ((p.lat_a, p.ra, p2.ra), (p.lat_b, p.rb, p2.rb)):
            laws = [Lattice(DiscreteLaplace(v, lat.t), lat.g) for v in (c, c2)]
            grid = [(min(c, c2) - 2) * lat.g, c * lat.g, c2 * lat.g, (max(c, c2) + 2) * lat.g]
            loss = max_privacy_loss(*laws, grid=grid).loss
            assert loss <= lat.epsilon * (1 + 1e-12)
            total += loss
        total += max_privacy_loss(DiscreteLaplace(3, p.t_count), DiscreteLaplace(4, p.t_count),
                                  grid=np.arange(-5, 12)).loss
        assert total <= eps * (1 + 1e-12)


@pytest.mark.slow
def test_parts_have_the_stated_laws():
    lo, hi, eps = -2.0, 6.0, 0.8
    x = np.array([-1.5, 0.0, 2.5, 5.75, 6.0, 3.0])
    plan = _VariancePlan(x, lo, hi, eps, AddRemove(), 0)
    n = sized(20_000, 200_000)
    _, parts = plan.draw(deterministic_source(43), n)
    b = parts["centred_sum_of_squares"]
    z = np.rint(b / plan.lat_b.g).astype(np.int64) - plan.rb
    assert np.all(b == (plan.rb + z) * plan.lat_b.g)
    y = np.clip(x, lo, hi) - 2.0
    assert plan.rb == round(exact_sum(y * y) / Fraction(plan.lat_b.g))
    assert dlap_binned_pvalue(z, plan.lat_b.t) > P_MIN
    assert dlap_binned_pvalue(z, 1.15 * plan.lat_b.t) < P_MIN  # power
    ks = np.arange(-150, 151)
    cnt = np.bincount(np.clip(parts["count"] - x.size, -150, 150) + 150, minlength=ks.size)
    assert chi2_pvalue(cnt, _dlap_probs(plan.t_count, ks)) > P_MIN
    assert chi2_pvalue(cnt, _dlap_probs(1.15 * plan.t_count, ks)) < P_MIN


def test_estimate_is_postprocessing_with_ddof():
    x = np.linspace(0.0, 10.0, 11)
    p0 = _VariancePlan(x, 0.0, 10.0, 1.0, AddRemove(), 0)
    p1 = _VariancePlan(x, 0.0, 10.0, 1.0, AddRemove(), 1)
    a = np.array([3.0, 0.0, 0.0, 1e9])
    b = np.array([300.0, 80.0, 10.0, 0.0])
    c = np.array([12, 2, 1, 5])
    v0, v1 = p0.estimate(a, b, c), p1.estimate(a, b, c)
    assert v0[0] == pytest.approx(300 / 12 - (3 / 12) ** 2) and v1[0] == pytest.approx(v0[0] * 12 / 11)
    assert v0[1] == 25.0 and v1[1] == pytest.approx(100 / 12)  # clipped at r² = 25; C~ = 2 <= 1 + ddof
    assert v0[2] == v1[2] == pytest.approx(100 / 12)  # no information: Δ²/12
    assert v0[3] == 0.0  # clipped at 0


@pytest.mark.parametrize(("nb", "ddof"), [(AddRemove(), 0), (AddRemove(), 1), (Replace(), 1),
                                          (PrivacyUnit("u", max_rows=2), 0)])
def test_interval_covers_the_true_variance(nb, ddof):
    lo, hi, eps, conf = 0.0, 10.0, 1.0, 0.9
    x = np.clip(np.linspace(0.5, 9.0, 80) ** 1.1, lo, hi)
    truth = float(np.var(x, ddof=ddof))
    plan = _VariancePlan(x, lo, hi, eps, nb, ddof)
    trials = 1500
    v, parts = plan.draw(deterministic_source(8), trials)
    hits = width = 0.0
    for i in range(trials):
        c = int(parts["count"][i]) if "count" in parts else None
        a, b = plan.interval_fn(float(parts["centred_sum"][i]), float(parts["centred_sum_of_squares"][i]), c)(conf)
        assert 0.0 <= a <= b
        hits += a <= truth <= b
        width += b - a
    assert hits / trials >= conf - 6 * math.sqrt(conf * (1 - conf) / trials)
    assert width / trials < 25.0  # informative (the range of possible variances is [0, 25])
    assert np.all((v >= 0.0) & (v <= 25.0 * (1 + ddof)))


@pytest.mark.slow
def test_auditor_does_not_flag_the_variance():
    lo, hi, eps = -1.0, 1.0, 1.0

    def mech(data, rng, size):
        return _VariancePlan(np.asarray(data, dtype=np.float64), lo, hi, eps, AddRemove(), 0).draw(rng, size)[0]

    d = [lo, hi]
    r = audit(mech, [*d, hi], d, trials=sized(100_000, 1_000_000), vectorized=True, claimed_epsilon=eps,
              confidence=CONF, rng=deterministic_source(6))
    assert not r.flagged


@pytest.mark.parametrize("fn", [variance, std])
@pytest.mark.parametrize("nb", [AddRemove(), Replace()])
def test_empty_input_gives_a_valid_release(fn, nb):
    rel = fn([], (-2, 5), 1.0, neighbours=nb, rng=deterministic_source(4))
    assert math.isfinite(rel.value) and rel.value >= 0.0
    a, b = rel.interval(0.9)
    assert 0.0 <= a <= b


def test_bounds_too_wide_for_squares_are_refused_before_charging():
    acct = Accountant(PureDP(1.0))
    with pytest.raises(InvalidParameter) as exc:
        variance([1.0], (-1e200, 1e200), 0.5, accountant=acct, rng=CountingSource(1))
    assert exc.value.param == "bounds" and acct.spent == PureDP(0.0)


@pytest.mark.parametrize("fn", [variance, std])
def test_charged_once_before_any_randomness(fn):
    acct = Accountant(PureDP(2.0))
    src = CountingSource(7)
    seen = []
    original = acct.charge

    def spy(*a, **k):
        seen.append(src.consumed)
        return original(*a, **k)

    acct.charge = spy
    rel = fn([1.0, 2.0, 3.0], (0, 5), 1.2, accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0
    assert rel.cost == PureDP(1.2) and acct.spent == PureDP(1.2) and len(acct.receipts) == 1
    assert rel.receipt.mechanism == fn.__name__
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        fn([1.0, 2.0, 3.0], (0, 5), 1.2, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


BAD = [
    (lambda f: f([SECRET, float("nan")]), InvalidData, "values"),
    (lambda f: f([SECRET, None]), InvalidData, "values"),
    (lambda f: f([SECRET, float("inf")]), InvalidData, "values"),
    (lambda f: f(np.array([[SECRET, 1.0]])), InvalidData, "values"),
    (lambda f: f([SECRET, "a"]), WrongType, "values"),
    (lambda f: f([SECRET], bounds=(1, 1)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(1, 0)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(0, float("inf"))), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], epsilon=0.0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon=-2.0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], ddof=-1), InvalidParameter, "ddof"),
    (lambda f: f([SECRET], ddof=0.5), WrongType, "ddof"),
    (lambda f: f([SECRET], nan_policy="ignore"), InvalidParameter, "nan_policy"),
]


@pytest.mark.parametrize("fn", [variance, std])
@pytest.mark.parametrize("bad", BAD)
def test_refused_inputs_charge_and_draw_nothing(fn, bad):
    def call(values, *, bounds=(0, 10), epsilon=1.0, **kw):
        return fn(values, bounds, epsilon, **kw)

    assert_refused(call, *bad)


def test_omit_drops_missing_values():
    a = variance([1.0, None, float("nan"), 3.0], (0, 4), 1.0, nan_policy="omit", rng=deterministic_source(2))
    b = variance([1.0, 3.0], (0, 4), 1.0, rng=deterministic_source(2))
    assert a.value == b.value
