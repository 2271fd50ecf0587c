"""dpkit.stats.count and dpkit.stats.sum: sensitivities per relation, exactness, noise laws, exact privacy
ratios, accounting order and refused inputs."""

from __future__ import annotations

import builtins
import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit.exact import DiscreteLaplace, Lattice, max_privacy_loss
from dpkit.audit.testing import watch_charges
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source, sample_discrete_laplace
from dpkit.stats.counts import count
from dpkit.stats.sums import LatticeSum, exact_sum, exact_sum_sensitivity, sum_sensitivity
from dpkit.stats.sums import sum as dp_sum

from .fixtures import P_MIN, SECRET, CountingSource, assert_refused, chi2_pvalue, dlap_binned_pvalue

# ---------------------------------------------------------------------------------------------
# sensitivities
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bounds", "nb", "expected"), [
    ((20, 80), None, 80.0),
    ((20, 80), AddRemove(), 80.0),
    ((-30, 10), AddRemove(), 30.0),
    ((-80, -20), AddRemove(), 80.0),
    ((20, 80), Replace(), 60.0),
    ((-30, 10), Replace(), 40.0),
    ((20, 80), PrivacyUnit("user", max_rows=3), 240.0),
])
def test_sum_sensitivity_formulas(bounds, nb, expected):
    assert sum_sensitivity(bounds, nb) == expected


def test_sum_sensitivity_rounds_up_an_inexact_difference():
    # 0.3 - 0.1 is not a float; the returned sensitivity is the smallest float >= the exact difference
    s = sum_sensitivity((0.1, 0.3), Replace())
    exact = Fraction(0.3) - Fraction(0.1)
    assert Fraction(s) >= exact and Fraction(math.nextafter(s, 0.0)) < exact


def test_upper_minus_lower_rule_is_wrong_under_add_remove():
    # Near & Abuah's "upper - lower": 60 for [20, 80]; adding one record of value 80 moves the sum by 80
    lo, hi, eps = 20.0, 80.0, 1.0
    brute = max(abs(v) for v in (lo, hi))  # |sum(D + {x}) - sum(D)| = |x|, x in [lo, hi]
    assert brute == 80.0 == sum_sensitivity((lo, hi)) > hi - lo
    # exact privacy loss of the released lattice law for D = {} and D' = {80}
    for sens, ok in ((Fraction(60), False), (exact_sum_sensitivity(lo, hi, AddRemove()), True)):
        lat = LatticeSum(sens, eps)
        r0, r1 = lat.centre(Fraction(0)), lat.centre(Fraction(80))
        law0 = Lattice(DiscreteLaplace(r0, lat.t), lat.g)
        law1 = Lattice(DiscreteLaplace(r1, lat.t), lat.g)
        loss = max_privacy_loss(law0, law1, grid=[(r0 - 5) * lat.g, (r1 + 5) * lat.g]).loss
        if ok:
            assert loss <= eps * (1 + 1e-12)
        else:
            assert loss == pytest.approx(eps * 80 / 60, rel=1e-5)  # 1.333 > 1


# ---------------------------------------------------------------------------------------------
# exactness of the sum
# ---------------------------------------------------------------------------------------------


def _fraction_sum(x) -> Fraction:
    return builtins.sum((Fraction(float(v)) for v in np.asarray(x).ravel()), Fraction(0))


def test_exact_sum_matches_rational_arithmetic():
    gen = np.random.default_rng(5)  # rng-ok: test data only
    specials = np.array([5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -0.0, 0.0, 1.0, -1.0])
    for _ in range(60):
        n = int(gen.integers(0, 40))
        x = gen.standard_normal(n) * 10.0 ** gen.integers(-300, 300, n)
        x = np.concatenate([x, specials[: int(gen.integers(0, specials.size + 1))]])
        gen.shuffle(x)
        assert exact_sum(x) == _fraction_sum(x)
    assert exact_sum([]) == 0
    assert exact_sum(np.full(1000, 0.1)) == 1000 * Fraction(0.1)


def test_sum_is_exact_where_float_summation_drifts():
    # 2^16 x (+1), then 2^17 x 2^-37 (each lost in a running float sum: half an ulp of 2^16, ties to even),
    # then 2^16 x (-1): the exact sum is 2^-20 = one lattice step of the bounds (-1, 1); a running float sum
    # says 0. dpkit's release is g * (round(S/g) + Z) with the exact S.
    tiny = 2.0**-37
    x = np.concatenate([np.ones(2**16), np.full(2**17, tiny), -np.ones(2**16)])
    exact = Fraction(2) ** -20
    assert exact_sum(x) == exact
    assert builtins.sum(x.tolist()) == 0.0  # the float drift
    eps = 1.0
    lat = LatticeSum(exact_sum_sensitivity(-1.0, 1.0, AddRemove()), eps)
    assert lat.g == 2.0**-20 and lat.centre(exact) == 1
    rel = dp_sum(x, (-1, 1), eps, rng=deterministic_source(99))
    z = int(sample_discrete_laplace(lat.t, 1, rng=deterministic_source(99))[0])  # the same noise draw
    assert rel.value == (1 + z) * lat.g
    assert rel.granularity == lat.g and rel.scale == lat.b


def test_sum_clamps_and_reproduces_the_lattice_law():
    x = [-5.0, 0.25, 3.0, 7.5, 42.0]  # clamped to (0, 4): 0 + 0.25 + 3 + 4 + 4
    lat = LatticeSum(Fraction(4), 0.7)
    rel = dp_sum(x, (0, 4), 0.7, rng=deterministic_source(3))
    assert rel.value == float(lat.draw(lat.centre(Fraction(45, 4)), 1, deterministic_source(3))[0])
    assert rel.mechanism == "sum" and rel.noise == "lattice_laplace" and rel.cost == PureDP(0.7)
    # the calibration of dpkit.mechanisms.laplace: b >= (Δ + g)/ε, 2^-20 relative above Δ/ε
    assert Fraction(rel.scale) >= (4 + Fraction(rel.granularity)) / Fraction(0.7)
    assert rel.scale <= 4 / 0.7 * (1 + 2.0**-19)


@pytest.mark.slow
def test_sum_noise_law_and_power():
    eps = 0.8
    lat = LatticeSum(exact_sum_sensitivity(-2.0, 3.0, AddRemove()), eps)
    r = lat.centre(exact_sum(np.array([-2.0, 1.5, 3.0, 0.125])))
    n = 20_000
    draws = lat.draw(r, n, deterministic_source(17))
    z = np.rint(draws / lat.g).astype(np.int64) - r
    assert np.all(draws == (r + z) * lat.g)  # on the lattice, centred at the exact rounded sum
    assert lat.t == pytest.approx(3.0 / eps / lat.g, rel=2e-6)
    assert dlap_binned_pvalue(z, lat.t) > P_MIN
    assert dlap_binned_pvalue(z, 1.15 * lat.t) < P_MIN  # power: a 15 % wrong scale is caught


def test_sum_interval_coverage():
    eps, conf = 1.0, 0.9
    lat = LatticeSum(Fraction(10), eps)
    truth = Fraction(1234567, 8)
    draws = lat.draw(lat.centre(truth), 4000, deterministic_source(4))
    h = lat.halfwidth(conf)
    covered = np.abs(draws - float(truth)) <= h
    assert covered.mean() >= conf - 6 * math.sqrt(conf * (1 - conf) / draws.size)
    assert covered.mean() <= conf + 6 * math.sqrt(conf * (1 - conf) / draws.size)  # and not absurdly wide
    rel = dp_sum([1.0, 2.0], (0, 10), eps, rng=deterministic_source(1))
    lo, hi = rel.interval(conf)
    assert hi - lo == pytest.approx(2 * h, rel=1e-9)


@pytest.mark.parametrize("nb", [AddRemove(), Replace(), PrivacyUnit("u", max_rows=2)])
def test_sum_privacy_exact_on_extreme_neighbours(nb):
    lo, hi, eps = -3.0, 5.0, 0.9
    lat = LatticeSum(exact_sum_sensitivity(lo, hi, nb), eps)
    base = [0.3, -2.9, 4.1]
    if isinstance(nb, Replace):
        pairs = [([*base, lo], [*base, hi]), ([*base, hi], [*base, lo])]
    else:
        k = 2 if isinstance(nb, PrivacyUnit) else 1
        pairs = [(base, base + [v] * k) for v in (lo, hi, 0.7)]
    for d, d_prime in pairs:
        r, r2 = (lat.centre(exact_sum(np.clip(v, lo, hi))) for v in (d, d_prime))
        law, law2 = (Lattice(DiscreteLaplace(c, lat.t), lat.g) for c in (r, r2))
        grid = [(min(r, r2) - 3) * lat.g, r * lat.g, r2 * lat.g, (max(r, r2) + 3) * lat.g]
        assert max_privacy_loss(law, law2, grid=grid).loss <= eps * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------
# count
# ---------------------------------------------------------------------------------------------


def _dlap_probs(t, ks):
    q = math.exp(-1.0 / t)
    return (1 - q) / (1 + q) * q ** np.abs(ks)


def test_count_noise_law_and_power():
    eps, n_rec, trials = 1.0, 7, 3000
    src = deterministic_source(21)
    vals = np.array([count(["r"] * n_rec, eps, rng=src).value for _ in range(trials)]) - n_rec
    ks = np.arange(-25, 26)
    counts = np.array([(vals == k).sum() for k in ks])
    assert counts.sum() == trials
    assert chi2_pvalue(counts, _dlap_probs(1.0 / eps, ks)) > P_MIN
    assert chi2_pvalue(counts, _dlap_probs(1.2 / eps, ks)) < P_MIN  # power: 20 % wrong scale


@pytest.mark.parametrize(("nb", "scale"), [(AddRemove(), 1 / 0.5), (PrivacyUnit("u", max_rows=4), 4 / 0.5)])
def test_count_scale_and_exact_privacy(nb, scale):
    rel = count([1, 2, 3], 0.5, neighbours=nb, rng=deterministic_source(1))
    assert rel.scale == pytest.approx(scale) and rel.scale >= scale
    assert rel.noise == "discrete_laplace" and isinstance(rel.value, int)
    k = round(rel.scale * 0.5)
    law, law2 = DiscreteLaplace(3, rel.scale), DiscreteLaplace(3 + k, rel.scale)
    loss = max_privacy_loss(law, law2, grid=np.arange(-10, 20)).loss
    assert loss <= 0.5 * (1 + 1e-12) and loss >= 0.5 * (1 - 1e-9)  # tight
    lo, hi = rel.interval(0.95)
    assert hi - lo == 2 * (hi - rel.value) and isinstance(lo, int)


def test_count_omits_missing_and_accepts_any_records():
    src = deterministic_source(5)
    rel = count(["a", None, float("nan"), 3, object()], 2.0, nan_policy="omit", rng=src)
    z = int(sample_discrete_laplace(rel.scale, 1, rng=deterministic_source(5))[0])
    assert rel.value == 3 + z
    rel_empty = count([], 1.0, rng=deterministic_source(6))
    assert isinstance(rel_empty.value, int)


def test_count_is_refused_under_replace():
    acct = Accountant(PureDP(1.0), neighbours=Replace())
    src = CountingSource(1)
    with pytest.raises(InvalidParameter) as exc:
        count([1, 2], 0.5, accountant=acct, rng=src)
    assert exc.value.param == "neighbours" and "public" in str(exc.value)
    assert acct.spent == PureDP(0.0) and acct.receipts == () and src.consumed == 0


# ---------------------------------------------------------------------------------------------
# accounting and refused inputs
# ---------------------------------------------------------------------------------------------

CALLS = [
    ("count", lambda **k: count([1.0, 2.0, 3.0], 0.6, **k)),
    ("sum", lambda **k: dp_sum([1.0, 2.0, 3.0], (0, 5), 0.6, **k)),
]


@pytest.mark.parametrize(("name", "call"), CALLS)
def test_charged_once_before_any_randomness(name, call):
    acct = Accountant(PureDP(1.0))
    src = CountingSource(7)
    seen = watch_charges(acct, src)
    rel = call(accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0
    assert rel.cost == PureDP(0.6) and acct.spent == PureDP(0.6)
    assert rel.receipt is acct.receipts[-1] and rel.receipt.mechanism == name and rel.secure is False
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        call(accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1


BAD = [
    (lambda f: f([SECRET, float("nan")]), InvalidData, "values"),
    (lambda f: f([SECRET, None]), InvalidData, "values"),
    (lambda f: f(np.array([[SECRET, 1.0]])), InvalidData, "values"),
    (lambda f: f([SECRET], epsilon=0.0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon=-1.0), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon=float("inf")), InvalidParameter, "epsilon"),
    (lambda f: f([SECRET], epsilon="1"), WrongType, "epsilon"),
    (lambda f: f("abc"), WrongType, "values"),
    (lambda f: f(None), WrongType, "values"),
    (lambda f: f([SECRET], nan_policy="skip"), InvalidParameter, "nan_policy"),
    (lambda f: f([SECRET], neighbours="replace"), WrongType, "neighbours"),
    (lambda f: f([SECRET], description=3), WrongType, "description"),
]

BAD_SUM = [
    (lambda f: f([SECRET, float("inf")]), InvalidData, "values"),
    (lambda f: f([SECRET, "x"]), WrongType, "values"),
    (lambda f: f([SECRET], bounds=(5, 5)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(5, 1)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(0, float("inf"))), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(float("nan"), 1)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=(-1e308, 1e308)), InvalidParameter, "bounds"),
    (lambda f: f([SECRET], bounds=5), WrongType, "bounds"),
    (lambda f: f([SECRET], bounds=(0, 1e300), neighbours=PrivacyUnit("u", 2**62)), InvalidParameter, "bounds"),
]


def _count_call(values, *, epsilon=1.0, **kw):
    return count(values, epsilon, **kw)


def _sum_call(values, *, bounds=(0, 1), epsilon=1.0, **kw):
    return dp_sum(values, bounds, epsilon, **kw)


@pytest.mark.parametrize(("fn", "bad"), [(_count_call, b) for b in BAD] + [(_sum_call, b) for b in BAD + BAD_SUM])
def test_refused_inputs_charge_and_draw_nothing(fn, bad):
    assert_refused(fn, *bad)


def test_nan_and_none_are_dropped_with_omit():
    rel = dp_sum([1.0, float("nan"), None, 2.0], (0, 4), 1.0, nan_policy="omit", rng=deterministic_source(8))
    lat = LatticeSum(Fraction(4), 1.0)
    assert rel.value == float(lat.draw(lat.centre(Fraction(3)), 1, deterministic_source(8))[0])


def test_empty_sum_is_a_valid_release():
    rel = dp_sum([], (-1, 1), 1.0, rng=deterministic_source(9))
    assert math.isfinite(rel.value) and rel.value % rel.granularity == 0
