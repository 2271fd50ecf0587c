"""dpkit.stats.variance and dpkit.stats.std: the exact square sum, the budget split, the sensitivities per
relation (brute force, tight), the exact joint privacy loss on neighbours, the parts' laws, the auditor on
the whole statistic, interval coverage, ddof, accounting and refused inputs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from conftest import sized
from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit import audit
from dpkit.audit.exact import DiscreteLaplace, Lattice, max_privacy_loss
from dpkit.audit.testing import watch_charges
from dpkit.core import _exact
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.stats.sums import LatticeSum
from dpkit.stats.variances import (
    COUNT_SHARE,
    SHARE_MAX,
    SHARE_MIN,
    SHARE_STEPS,
    _VariancePlan,
    exact_square_sum,
    std,
    variance,
)

from .fixtures import P_MIN, SECRET, CountingSource, assert_refused, chi2_pvalue

CONF = 1 - 1e-7
SHARES = range(SHARE_MIN, SHARE_MAX + 1)


def test_exact_square_sum_is_exact():
    g = np.random.default_rng(5)
    v = g.standard_normal(4000) * np.exp2(g.integers(-1074, 510, 4000))  # subnormals to near overflow
    v[:8] = [0.0, 5e-324, -2.0**-460, 2.0**-450, -(2.0**53 - 1), 1.3e154, 0.1, -(2.0**-450)]
    v = np.concatenate([v, g.integers(-(2**53), 2**53, 500).astype(np.float64), g.random(500)])
    assert exact_square_sum(v) == sum(Fraction(float(a)) ** 2 for a in v)
    assert exact_square_sum([]) == 0 and exact_square_sum([5e-324]) == Fraction(2) ** -2148


def test_public_functions_are_the_plan():
    x = np.array([1.0, 4.0, 9.5, 3.25, 7.0] * 20)
    for nb in (AddRemove(), Replace()):
        plan = _VariancePlan(x, 0.0, 10.0, 1.5, nb, 1)
        v, parts = plan.draw(deterministic_source(3), 1)
        rel = variance(x, (0, 10), 1.5, ddof=1, neighbours=nb, rng=deterministic_source(3))
        assert rel.value == float(v[0]) and rel.mechanism == "variance"
        assert rel.parts["sum_of_squares_about_centre"] == parts["sum_of_squares_about_centre"][0]
        assert rel.parts["centre_offset"] == parts["centre_offset"][0] and rel.parts["midpoint"] == 5.0
        assert rel.parts["centre"] == 5.0 + rel.parts["centre_offset"]
        assert rel.parts["mean_share"] == parts["mean_share_index"][0] / SHARE_STEPS
        assert ("count" in rel.parts) == (nb == AddRemove()) and rel.scale == parts["scale"][0]
        s = std(x, (0, 10), 1.5, ddof=1, neighbours=nb, rng=deterministic_source(3))
        assert s.value == math.sqrt(rel.value) and s.mechanism == "std" and s.parts == rel.parts
        a, b = rel.interval(0.9)
        sa, sb = s.interval(0.9)
        assert sa <= math.sqrt(a) and sb >= math.sqrt(b) and sa == pytest.approx(math.sqrt(a))


@pytest.mark.parametrize(("nb", "k"), [(AddRemove(), 1), (PrivacyUnit("u", max_rows=3), 3), (Replace(), None)])
def test_budget_split_and_declared_sensitivities(nb, k):
    lo, hi, eps = 20.0, 80.0, 0.7
    plan = _VariancePlan(np.array([30.0, 70.0]), lo, hi, eps, nb, 0)
    r = 30.0
    fe = Fraction(eps)
    if k is None:  # replace-one: n public, no count; Σy moves by up to 2r
        assert plan.t_count is None
        eps_c, sum_sens, k = Fraction(0), 2 * r, 1
    else:
        eps_c = Fraction(k) / Fraction(plan.t_count)  # the count's effective ε
        assert eps_c <= fe * COUNT_SHARE and eps_c == pytest.approx(float(fe * COUNT_SHARE))
        sum_sens = k * r
    for si in SHARES:
        lat = plan.sum_lattice(si)
        assert lat.sensitivity == sum_sens and lat.epsilon <= fe * Fraction(si, SHARE_STEPS)
        assert eps_c + Fraction(lat.epsilon) + Fraction(plan.eps_square[si]) <= fe  # exact
        assert plan.eps_square[si] == pytest.approx(eps - float(eps_c) - si / SHARE_STEPS * eps)
        for c in (-r, -0.875, 0.0, 12.5, r):
            sq, _ = plan.square_part(c, si)
            assert abs(c) <= r and sq.sensitivity == k * (r + abs(c)) ** 2 and sq.epsilon == plan.eps_square[si]
            # each part's lattice release is exactly its ε: shifts of (s + g)/g lattice steps cost <= ε
            for part in (lat, sq):
                assert Fraction(part.sensitivity + part.g) / Fraction(part.t * part.g) <= Fraction(part.epsilon)


def _grid(lo, hi):
    return [lo + (hi - lo) * f for f in (0.0, 0.25, 0.5, 0.75, 1.0)] + [lo + 0.3 * (hi - lo)]


def _neighbours(values, nb, max_n):
    """Pairs (D, D') of neighbouring multisets over ``values`` with |D| <= max_n."""
    for n in range(max_n + 1):
        for d in itertools.combinations_with_replacement(values, n):
            if nb == "add":
                for v in values:
                    yield list(d), [*d, v]
            else:
                for i, v in itertools.product(range(n), values):
                    yield list(d), [*d[:i], v, *d[i + 1:]]


@pytest.mark.parametrize("nb", ["add", "replace"])
def test_sensitivities_hold_and_are_tight_by_enumeration(nb):
    """Brute force over small datasets on a grid: the centred sum and the sum of squares about every
    centre move by at most the declared sensitivities, and some pair reaches them (so 0.9× would be
    violated)."""
    lo, hi = -1.0, 3.0  # mid 1, r 2
    plan = _VariancePlan(np.zeros(0), lo, hi, 1.0, Replace() if nb == "replace" else AddRemove(), 0)
    r = Fraction(plan.r)
    ys = [Fraction(v - 1.0) for v in _grid(lo, hi)]  # the plan's y = fl(x - mid)
    centres = sorted({Fraction(c) for c in (-2.0, -1.5, -1 / 3, 0.0, 0.5, 1.999, 2.0)} | set(ys))
    worst_sum = Fraction(0)
    worst_sq = {c: Fraction(0) for c in centres}
    for d, d2 in _neighbours(ys, nb, 2):
        worst_sum = max(worst_sum, abs(sum(d2, Fraction(0)) - sum(d, Fraction(0))))
        for c in centres:
            worst_sq[c] = max(worst_sq[c], abs(sum((y - c) ** 2 for y in d2) - sum((y - c) ** 2 for y in d)))
    sum_sens = plan.sum_lattice(SHARE_MIN).sensitivity
    assert worst_sum == sum_sens  # r (add/remove) or 2r (replace): holds, and tight
    for c in centres:
        exact = (r + abs(c)) ** 2
        declared = plan.square_part(float(c), SHARE_MIN)[0].sensitivity
        assert declared == _exact.float_at_least(exact)  # the smallest float >= (r + |c|)²
        assert worst_sq[c] <= exact
        if c in ys:  # a record at c and the far bound are on the grid: the bound is reached
            assert worst_sq[c] == exact and worst_sq[c] > Fraction(9, 10) * Fraction(declared)


@pytest.mark.parametrize("ddof", [0, 1])
def test_direct_variance_sensitivity_in_the_docstring(ddof):
    """The replace-one sensitivity of the variance itself (the centre-free design the module docstring
    compares with): (b - a)²(n - 1)/(n (n - ddof)), attained."""
    vals = [Fraction(v) for v in (0.0, 1.0, 2.5, 4.0)]

    def var(d):
        m = sum(d, Fraction(0)) / len(d)
        return sum((v - m) ** 2 for v in d) / (len(d) - ddof)

    for n in (2, 3, 4):
        worst = max(abs(var(d2) - var(d)) for d, d2 in _neighbours(vals, "replace", n) if len(d) == n)
        assert worst == Fraction(16 * (n - 1), n * (n - ddof))


def _max_joint_loss(p, p2, shares, centres):
    """Exact worst-case privacy loss of the joint release (count, sum, sum of squares) between the plans
    of two neighbours, over the given shares and centres: for each part a discrete Laplace shift by ``d``
    lattice steps has largest log pmf ratio ``d/t`` (attained), and the losses add at the joint output
    where all three are attained (the later parts' laws depend on earlier outputs only through the
    public share and centre). The lattice centres do not depend on the share (only the scales do)."""
    loss_c = 0.0 if p.t_count is None else abs(p.n - p2.n) / p.t_count
    shift_s = abs(p.r_sum - p2.r_sum)
    shift_b = {c: abs(p.square_part(c, SHARE_MIN)[1] - p2.square_part(c, SHARE_MIN)[1]) for c in centres}
    worst = 0.0
    for si in shares:
        lat, lat2 = p.sum_lattice(si), p2.sum_lattice(si)
        assert (lat.g, lat.t) == (lat2.g, lat2.t)  # public lattices
        for c in centres:
            (sq, rb), (sq2, rb2) = p.square_part(c, si), p2.square_part(c, si)
            assert (sq.g, sq.t) == (sq2.g, sq2.t) and abs(rb - rb2) == shift_b[c]
            worst = max(worst, loss_c + shift_s / lat.t + shift_b[c] / sq.t)
    return worst


@pytest.mark.parametrize("nb", [AddRemove(), Replace(), PrivacyUnit("u", max_rows=2)])
def test_exact_joint_privacy_loss_on_neighbours(nb):
    lo, hi, eps = -1.0, 3.0, 0.9
    kind = "replace" if nb == Replace() else "add"
    k = 2 if isinstance(nb, PrivacyUnit) else 1
    base = _VariancePlan(np.zeros(0), lo, hi, eps, nb, 0)
    centres = [-base.r, -base.r / 2, -0.125, -2.0**-10, 0.0, 2.0**-10, 0.75, base.r]
    worst = 0.0
    for d, d2 in _neighbours(_grid(lo, hi), kind, 2):
        if k == 2:
            d2 = [*d2, d2[-1]]  # a unit of two records
        p, p2 = (_VariancePlan(np.array(v, dtype=np.float64), lo, hi, eps, nb, 0) for v in (d, d2))
        worst = max(worst, _max_joint_loss(p, p2, SHARES, centres))
    assert worst <= eps * (1 + 1e-12)
    assert worst >= 0.99 * eps  # the worst pair (a record at a bound, centre at the other) is near ε
    # the exact calculator agrees on one part
    p, p2 = (_VariancePlan(np.array(v), lo, hi, eps, nb, 0) for v in ([hi, hi], [hi, lo] if kind == "replace"
                                                                      else [hi, hi, lo, lo][: 2 + k]))
    (sq, rb), (_, rb2) = p.square_part(base.r, SHARE_MAX), p2.square_part(base.r, SHARE_MAX)
    laws = [Lattice(DiscreteLaplace(c, sq.t), sq.g) for c in (rb, rb2)]
    grid = [(min(rb, rb2) - 2) * sq.g, rb * sq.g, rb2 * sq.g, (max(rb, rb2) + 2) * sq.g]
    loss = max_privacy_loss(*laws, grid=grid).loss
    assert loss == pytest.approx(abs(rb - rb2) / sq.t, rel=1e-9) and loss <= sq.epsilon * (1 + 1e-12)
    assert loss > 0.99 * sq.epsilon
    # a sensitivity 10 % too small (the broken variant) is violated by this pair
    small = LatticeSum(Fraction(sq.sensitivity) * Fraction(9, 10), sq.epsilon)
    c = Fraction(base.r)
    v, v2 = (q.Q - 2 * c * q.P + q.n * c * c for q in (p, p2))
    assert abs(small.centre(v) - small.centre(v2)) / small.t > 1.05 * small.epsilon


def _dlap_cdf(t, k):
    """P[Z <= k] for discrete Laplace of (per-element) scale t."""
    q = np.exp(-1.0 / np.asarray(t, dtype=np.float64))
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(k < 0, q ** np.abs(k) / (1 + q), 1.0 - q ** (k + 1.0) / (1 + q))


def _pit_pvalue(z, t, seed, bins=50):
    """Randomised probability integral transform of integer draws z against discrete Laplace laws of
    scales t (one per draw): uniform on [0, 1] iff the laws are right; chi-square on equal bins."""
    u = np.random.default_rng(seed).random(z.size)
    lo, hi = _dlap_cdf(t, z - 1), _dlap_cdf(t, z)
    w = lo + u * (hi - lo)
    counts = np.bincount(np.minimum((w * bins).astype(np.int64), bins - 1), minlength=bins)
    return chi2_pvalue(counts, np.full(bins, 1.0 / bins))


@pytest.mark.parametrize("nb", [AddRemove(), Replace()])
def test_parts_have_the_stated_laws(nb):
    lo, hi, eps = -2.0, 6.0, 0.8
    x = np.array([-1.5, 0.0, 2.5, 5.75, 6.0, 3.0] * 50)
    plan = _VariancePlan(x, lo, hi, eps, nb, 0)
    size = sized(20_000, 200_000)
    _, parts = plan.draw(deterministic_source(43), size)
    si, ci = parts["mean_share_index"], parts["centre_offset"]
    s, b = parts["centred_sum"], parts["sum_of_squares_about_centre"]
    g_s = plan.sum_lattice(SHARE_MIN).g
    z_s = np.rint(s / g_s).astype(np.int64) - plan.r_sum
    assert np.all(s == (plan.r_sum + z_s) * g_s)
    t_s = np.array([plan.sum_lattice(int(i)).t for i in si])
    # the share and the centre are the stated functions of the released count and sum
    m = parts["count"] if "count" in parts else np.full(size, x.size)
    assert np.array_equal(si, plan.share_index(m)) and np.array_equal(ci, plan.centre(s, m))
    sq = [plan.square_part(c, int(i)) for c, i in zip(ci, si, strict=True)]
    g_b = np.array([q.g for q, _ in sq])
    z_b = np.rint(b / g_b).astype(np.int64) - np.array([rb for _, rb in sq])
    t_b = np.array([q.t for q, _ in sq])
    y = np.clip(x, lo, hi) - 2.0
    c0 = Fraction(ci[0])
    assert sq[0][1] == round(sum((Fraction(v) - c0) ** 2 for v in y) / Fraction(g_b[0]))
    for z, t, seed in ((z_s, t_s, 1), (z_b, t_b, 2)):
        assert _pit_pvalue(z, t, seed) > P_MIN
        assert _pit_pvalue(z, 1.15 * t, seed) < P_MIN  # power: a 15 % wrong scale is caught
    if "count" in parts:
        ks = np.arange(-150, 151)
        cnt = np.bincount(np.clip(parts["count"] - x.size, -150, 150) + 150, minlength=ks.size)
        probs = np.diff(np.concatenate([[0.0], _dlap_cdf(plan.t_count, ks[:-1]), [1.0]]))
        assert chi2_pvalue(cnt, probs) > P_MIN
        probs_wrong = np.diff(np.concatenate([[0.0], _dlap_cdf(1.15 * plan.t_count, ks[:-1]), [1.0]]))
        assert chi2_pvalue(cnt, probs_wrong) < P_MIN


def test_estimate_is_postprocessing_with_ddof():
    x = np.linspace(0.0, 10.0, 11)
    p0 = _VariancePlan(x, 0.0, 10.0, 1.0, AddRemove(), 0)
    p1 = _VariancePlan(x, 0.0, 10.0, 1.0, AddRemove(), 1)
    b = np.array([300.0, 80.0, 10.0, -5.0])
    c = np.array([12, 2, 1, 5])
    v0, v1 = p0.estimate(b, c), p1.estimate(b, c)
    assert v0[0] == pytest.approx(300 / 12) and v1[0] == pytest.approx(300 / 11)
    assert v0[1] == 25.0 and v1[1] == pytest.approx(100 / 12)  # clipped at r² = 25; C~ = 2 <= 1 + ddof
    assert v0[2] == v1[2] == pytest.approx(100 / 12)  # no information: Δ²/12
    assert v0[3] == 0.0 == v1[3]  # clipped at 0


def test_replace_with_public_tiny_n_draws_no_noise():
    src = CountingSource(1)
    one = variance([3.0], (0, 5), 1.0, neighbours=Replace(), rng=src)
    assert one.value == 0.0 and one.interval(0.99) == (0.0, 0.0) and one.parts == {}
    undefined = variance([3.0], (0, 5), 1.0, ddof=1, neighbours=Replace(), rng=src)
    assert undefined.value == pytest.approx(25 / 12) and src.consumed == 0


@pytest.mark.parametrize(("nb", "ddof", "skew"), [(AddRemove(), 0, False), (AddRemove(), 1, True),
                                                  (Replace(), 1, False), (Replace(), 0, True),
                                                  (PrivacyUnit("u", max_rows=2), 0, False)])
def test_interval_covers_the_true_variance(nb, ddof, skew):
    lo, hi, eps, conf = 0.0, 10.0, 1.0, 0.9
    x = np.clip(np.linspace(0.5, 9.0, 80) ** 1.1, lo, hi)
    if skew:
        x = np.where(np.arange(80) % 8 == 0, 9.5, 0.25)  # piled against the lower bound
    truth = float(np.var(x, ddof=ddof))
    plan = _VariancePlan(x, lo, hi, eps, nb, ddof)
    trials = 1500
    v, parts = plan.draw(deterministic_source(8), trials)
    hits = width = 0.0
    for i in range(trials):
        c = int(parts["count"][i]) if "count" in parts else None
        a, b = plan.interval_fn(c, float(parts["centred_sum"][i]), int(parts["mean_share_index"][i]),
                                float(parts["centre_offset"][i]), float(parts["sum_of_squares_about_centre"][i]))(conf)
        assert 0.0 <= a <= b
        hits += a <= truth <= b
        width += b - a
    assert hits / trials >= conf - 6 * math.sqrt(conf * (1 - conf) / trials)
    assert width / trials < 25.0  # informative (the range of possible variances is [0, 25])
    assert np.all((v >= 0.0) & (v <= 25.0 * (1 + ddof)))


def test_accuracy_on_skewed_and_centred_data():
    """The estimate's error matches the stated noise scale k M²/(ε_B n) (median |Laplace| = b ln 2), and
    the bias from the centre's error is small next to it."""
    g = np.random.default_rng(3)
    n, eps, reps = 4000, 1.0, 400
    for x, far in ((np.where(g.random(n) < 0.05, 90.0, 1.0), 99.0), (g.uniform(40.0, 60.0, n), 50.0)):
        plan = _VariancePlan(x, 0.0, 100.0, eps, Replace(), 0)
        v, parts = plan.draw(deterministic_source(11), reps)
        err = np.abs(v - np.var(x))
        b = float(np.median(parts["scale"])) / n
        assert far**2 / eps / n * 0.9 < b < far**2 / eps / n * 1.2
        assert stats.binomtest(int((err <= b * math.log(2)).sum()), reps, 0.5).pvalue > P_MIN
        assert abs(np.median(v - np.var(x))) < 0.5 * b


@pytest.mark.slow
@pytest.mark.parametrize("nb", [AddRemove(), Replace()])
def test_auditor_does_not_flag_the_variance(nb):
    lo, hi, eps = -1.0, 1.0, 1.0

    def mech(data, rng, size):
        return _VariancePlan(np.asarray(data, dtype=np.float64), lo, hi, eps, nb, 0).draw(rng, size)[0]

    d, d2 = ([lo, hi], [lo, hi, hi]) if nb == AddRemove() else ([lo, hi, 0.5], [lo, hi, lo])
    r = audit(mech, d2, d, trials=sized(60_000, 1_000_000), vectorized=True, claimed_epsilon=eps,
              confidence=CONF, rng=deterministic_source(6))
    assert not r.flagged


@pytest.mark.parametrize("fn", [variance, std])
@pytest.mark.parametrize("nb", [AddRemove(), Replace()])
def test_empty_input_gives_a_valid_release(fn, nb):
    rel = fn([], (-2, 5), 1.0, neighbours=nb, rng=deterministic_source(4))
    assert math.isfinite(rel.value) and rel.value >= 0.0
    a, b = rel.interval(0.9)
    assert 0.0 <= a <= b


@pytest.mark.parametrize(("bounds", "epsilon", "param"), [((-1e200, 1e200), 0.5, "bounds"),
                                                          ((-1e154, 1e154), 0.5, "bounds"),
                                                          ((0.0, 1.0), 1e-12, "epsilon")])
def test_out_of_range_parameters_are_refused_before_charging(bounds, epsilon, param):
    acct = Accountant(PureDP(1.0))
    src = CountingSource(1)
    with pytest.raises(InvalidParameter) as exc:
        variance([1.0], bounds, epsilon, accountant=acct, rng=src)
    assert exc.value.param == param and acct.spent == PureDP(0.0) and src.consumed == 0


@pytest.mark.parametrize("fn", [variance, std])
@pytest.mark.parametrize("nb", [AddRemove(), Replace()])
def test_charged_once_before_any_randomness(fn, nb):
    acct = Accountant(PureDP(2.0), neighbours=nb)
    src = CountingSource(7)
    seen = watch_charges(acct, src)
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
    (lambda f: f([SECRET], neighbours="replace"), WrongType, "neighbours"),
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
