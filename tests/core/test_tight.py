"""Tight accounting by privacy-loss distributions (issue #14): events, epsilon_of/delta_of, schedules."""

from __future__ import annotations

import math
import sys

import pytest

import dpkit
from dpkit.core import ZCDP, Accountant, ApproxDP, Ledger, PureDP, Replace
from dpkit.core.composition import gaussian_delta, gaussian_epsilon
from dpkit.core.errors import BudgetExceeded, IncompatibleLoss, InvalidParameter, MissingDependency, WrongType
from dpkit.core.tight import (
    ApproxEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PureEvent,
    RandomizedResponseEvent,
    SubsampledGaussianEvent,
    delta_of,
    epsilon_of,
    event_from_dict,
    lattice_gaussian_event,
    lattice_laplace_event,
    repeat,
)
from dpkit.mechanisms import discrete_gaussian_plan, discrete_laplace_plan, gaussian_plan, laplace_plan
from dpkit.mechanisms.contract import run, sequential, tight_cost
from dpkit.noise import deterministic_source as seeded

pytest.importorskip("dp_accounting")

DPSGD = SubsampledGaussianEvent(0.01, 1.0)
MIXED = [(LaplaceEvent(50.0), 50), GaussianEvent(10.0), repeat(DPSGD, 1000)]


# -- the figures ---------------------------------------------------------------------------------


def test_dpsgd_figure_pld_and_rdp():
    eps = epsilon_of([(DPSGD, 10_000)], 1e-5)
    assert 6.18 <= eps <= 6.20  # issue: 6.19 (dp-accounting at its finest grid: 6.1877)
    fine = epsilon_of([(DPSGD, 10_000)], 1e-5, discretization=1e-4)
    assert fine <= eps <= fine + 0.01
    rdp = epsilon_of([(DPSGD, 10_000)], 1e-5, method="rdp")
    assert rdp == pytest.approx(6.71, abs=0.01)
    assert gaussian_epsilon(1.0, 10_000, 1e-5, sampling_rate=0.01, method="rdp") == pytest.approx(rdp, rel=1e-9)


def test_mixed_workload_figure():
    eps = epsilon_of(MIXED, 1e-5)
    assert eps == pytest.approx(1.95, abs=0.01)
    # summing each mechanism's (epsilon, delta), delta split in two: far above
    summed = 50 * 0.02 + gaussian_epsilon(10.0, 1, 0.5e-5) + gaussian_epsilon(1.0, 1000, 0.5e-5, sampling_rate=0.01)
    assert summed > 3.0 > eps


# -- exact checks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("ratio,delta", [(2.0, 1e-3), (1.0, 1e-5), (50.0, 1e-5)])
def test_laplace_closed_form(ratio, delta):
    exact = max(0.0, 1.0 / ratio + 2.0 * math.log1p(-delta))  # delta(eps) = 1 - exp((eps - eps0)/2)
    got = epsilon_of([LaplaceEvent(ratio)], delta)
    assert exact <= got <= exact + 2e-3
    d = delta_of([LaplaceEvent(ratio)], exact / 2)
    exact_d = -math.expm1((exact / 2 - 1.0 / ratio) / 2)
    assert exact_d <= d <= exact_d + 1e-3


@pytest.mark.parametrize("ratio", [0.5, 2.0, 10.0])
def test_gaussian_balle_wang(ratio):
    exact = gaussian_epsilon(ratio, 1, 1e-5)  # analytic, no dp-accounting
    got = epsilon_of([GaussianEvent(ratio)], 1e-5)
    assert exact - 1e-9 <= got <= exact + 2e-3
    d = delta_of([GaussianEvent(ratio)], 0.5)
    assert gaussian_delta(1 / ratio, 0.5) * (1 - 1e-9) <= d <= gaussian_delta(1 / ratio, 0.5) + 1e-3


def test_self_composition_matches_repetition():
    a = epsilon_of([(GaussianEvent(5.0), 4)], 1e-6)
    b = epsilon_of([GaussianEvent(5.0)] * 4, 1e-6)
    c = epsilon_of([repeat(GaussianEvent(5.0), 4)], 1e-6)
    assert a == pytest.approx(b, rel=1e-6) and a == pytest.approx(c, rel=1e-6)
    assert a >= gaussian_epsilon(5.0, 4, 1e-6) - 1e-9  # 4 Gaussians = one with ratio 5/2


def test_discrete_events_bounds():
    # discrete Gaussian: at least dp-accounting's own truncated PLD, and at most its dominating Gaussian
    from dp_accounting.pld import privacy_loss_distribution as pld

    ours = epsilon_of([(DiscreteGaussianEvent(3.0, 2), 10)], 1e-5)
    theirs = pld.from_discrete_gaussian_mechanism(3.0, 2, value_discretization_interval=1e-3) \
        .self_compose(10).get_epsilon_for_delta(1e-5)
    assert ours == pytest.approx(theirs, abs=1e-3)
    ratio = DiscreteGaussianEvent(3.0, 2).continuous_ratio()
    assert ratio is not None and ours <= epsilon_of([(GaussianEvent(ratio), 10)], 1e-5)
    # discrete Laplace: pure epsilon m/t, its PLD at delta -> 0 approaches it; dominated by its continuous bound
    d = DiscreteLaplaceEvent(2.0, 1)
    assert epsilon_of([d], 1e-12) <= d.pure_epsilon() + 1e-3
    assert epsilon_of([(d, 5)], 1e-5) <= epsilon_of([(LaplaceEvent(1 / d.continuous_epsilon()), 5)], 1e-5)
    assert LaplaceEvent(1 / (d.continuous_epsilon() * (1 + 1e-12))).dominates(d)
    assert not LaplaceEvent(1 / (d.continuous_epsilon() * (1 - 1e-6))).dominates(d)
    # randomized response, pure, approx
    assert epsilon_of([RandomizedResponseEvent(1.0, 4)], 1e-5) <= 1.0 + 1e-3
    assert epsilon_of([PureEvent(0.5)] * 3, 1e-9) <= 1.5 + 1e-3
    assert epsilon_of([ApproxEvent(1.0, 1e-6)] * 3, 1e-5) <= 3.0 + 1e-3
    assert delta_of([ApproxEvent(1.0, 1e-6)], 1.0) >= 1e-6 * (1 - 1e-9)


def test_discrete_laplace_domination_is_sound_numerically():
    # the proven rule: DLap(t, m) <= Laplace(eps0 = m/t + 2 log cosh(1/(2t))); check the privacy profiles
    for t, m in [(1.0, 1), (0.5, 3), (4.0, 2)]:
        a, q = 1 / t, math.exp(-1 / t)
        eps0 = DiscreteLaplaceEvent(t, m).continuous_epsilon()
        for i in range(200):
            e = a * m * i / 200
            j = math.ceil((m - e / a) / 2) - 1
            dd = 1 - (q ** (j + 1) + math.exp(e) * q ** (m - j)) / (1 + q)
            dc = -math.expm1((e - eps0) / 2)
            assert dd <= dc + 1e-15


# -- domination ---------------------------------------------------------------------------------------------


def test_dominates_rules():
    assert LaplaceEvent(10.0).dominates(LaplaceEvent(20.0)) and not LaplaceEvent(20.0).dominates(LaplaceEvent(10.0))
    assert GaussianEvent(1.0).dominates(GaussianEvent(2.0)) and not GaussianEvent(2.0).dominates(GaussianEvent(1.0))
    assert RandomizedResponseEvent(1.0, 2).dominates(RandomizedResponseEvent(0.5, 4))
    assert not RandomizedResponseEvent(1.0, 4).dominates(RandomizedResponseEvent(1.0, 2))
    assert DPSGD.dominates(SubsampledGaussianEvent(0.005, 1.5))
    assert not DPSGD.dominates(SubsampledGaussianEvent(0.02, 1.5))
    assert not DPSGD.dominates(SubsampledGaussianEvent(0.01, 0.9))
    assert GaussianEvent(1.0).dominates(DPSGD)
    assert PureEvent(1.0).dominates(LaplaceEvent(1.0)) and not PureEvent(1.0).dominates(LaplaceEvent(0.5))
    assert PureEvent(1.0).dominates(RandomizedResponseEvent(1.0, 3))
    assert not PureEvent(10.0).dominates(GaussianEvent(100.0))  # a Gaussian is never pure
    assert ApproxEvent(1.0, 1e-5).dominates(ApproxEvent(0.5, 1e-6)) and ApproxEvent(1.0, 0).dominates(PureEvent(1))
    sigma = 1.0 / (0.5 * 0.999)  # analytic Gaussian at (1, 1e-5) needs about sigma/sens = 3.73
    assert ApproxEvent(1.0, 1e-5).dominates(GaussianEvent(4.0)) and not ApproxEvent(1.0, 1e-5).dominates(
        GaussianEvent(sigma))
    assert DiscreteLaplaceEvent(2.0, 3).dominates(DiscreteLaplaceEvent(3.0, 2))
    assert not DiscreteLaplaceEvent(2.0, 3).dominates(DiscreteLaplaceEvent(3.0, 4))
    assert DiscreteGaussianEvent(3.0, 2).dominates(DiscreteGaussianEvent(3.0, 1))
    assert not DiscreteGaussianEvent(3.0, 2).dominates(DiscreteGaussianEvent(4.0, 1))  # not proven: refused
    assert GaussianEvent(0.99).dominates(DiscreteGaussianEvent(3.0, 2))
    assert not GaussianEvent(1.0).dominates(DiscreteGaussianEvent(3.0, 2))  # needs sigma/(m + 1)
    assert not GaussianEvent(1.0).dominates(DiscreteGaussianEvent(1.5, 1))  # sigma < 2: no rule
    assert not LaplaceEvent(1.0).dominates(GaussianEvent(100.0))


def test_lattice_events_dominated_by_nominal_with_margin():
    g = 2.0**-20
    lap = lattice_laplace_event(50.0 * (1 + g), g, 1.0)
    assert lap.scale_over_sensitivity == pytest.approx(50.0, rel=1e-11)
    assert LaplaceEvent(50.0 / (1 + 1e-5)).dominates(lap)
    gau = lattice_gaussian_event(10.0 * (1 + g), g, 1.0)
    assert gau is not None and gau.sigma_over_sensitivity == pytest.approx(10.0, rel=2e-6)
    assert GaussianEvent(10.0 / (1 + 1e-5)).dominates(gau)
    assert lattice_gaussian_event(1.0, 1.0, 1.0) is None  # sigma/g < 2


def test_events_validation_and_serialisation():
    for bad, param in [(lambda: LaplaceEvent(0.0), "scale_over_sensitivity"),
                       (lambda: LaplaceEvent(math.inf), "scale_over_sensitivity"),
                       (lambda: GaussianEvent(-1.0), "sigma_over_sensitivity"),
                       (lambda: DiscreteLaplaceEvent(1.0, 0), "sensitivity"),
                       (lambda: DiscreteGaussianEvent(1e7, 1), "sigma"),
                       (lambda: RandomizedResponseEvent(1.0, 1), "k"),
                       (lambda: SubsampledGaussianEvent(0.0, 1.0), "sampling_rate"),
                       (lambda: SubsampledGaussianEvent(1.5, 1.0), "sampling_rate"),
                       (lambda: PureEvent(-1.0), "epsilon"),
                       (lambda: ApproxEvent(1.0, 1.0), "delta"),
                       (lambda: repeat(GaussianEvent(1.0), 0), "count"),
                       (lambda: epsilon_of([], 1e-5), "events"),
                       (lambda: epsilon_of([GaussianEvent(1.0)], 0.0), "delta"),
                       (lambda: epsilon_of([GaussianEvent(1.0)], 1e-5, method="magic"), "method"),
                       (lambda: epsilon_of([ApproxEvent(1.0, 1e-6)], 1e-5, method="rdp"), "method"),
                       (lambda: epsilon_of([GaussianEvent(1.0)], 1e-5, discretization=0), "discretization")]:
        with pytest.raises((InvalidParameter, WrongType)) as info:
            bad()
        assert info.value.param == param
    with pytest.raises(WrongType) as info:
        epsilon_of(["laplace"], 1e-5)
    assert info.value.param == "events"
    with pytest.raises(WrongType):
        DiscreteLaplaceEvent(1.0, 1.5)
    for e in (LaplaceEvent(2.0), DiscreteGaussianEvent(3.0, 2), DPSGD, RandomizedResponseEvent(1.0, 3),
              ApproxEvent(1.0, 1e-6)):
        assert event_from_dict(e.to_dict()) == e
    with pytest.raises(InvalidParameter):
        event_from_dict({"type": "Nope"})


def test_missing_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(MissingDependency) as info:
        epsilon_of([GaussianEvent(1.0)], 1e-5)
    assert isinstance(info.value, ImportError) and "dp-accounting" in str(info.value)
    acc = Accountant(ApproxDP(1.0, 1e-5))
    with pytest.raises(MissingDependency):
        acc.schedule([GaussianEvent(10.0)], 1e-5)
    assert acc.receipts == ()
    # plans' events need nothing
    assert laplace_plan(1.0, 1.0, 0.5).event is not None


# -- schedules ----------------------------------------------------------------------------------------------


def test_schedule_charges_parent_once_and_admits_in_order():
    acc = Accountant(ApproxDP(3.0, 1e-5))
    child = acc.schedule([(LaplaceEvent(50.0), 2), GaussianEvent(10.0)], 1e-5, description="job")
    (r,) = acc.receipts
    assert r.mechanism == "schedule" and isinstance(r.cost, ApproxDP) and r.cost.delta == 1e-5
    assert r.cost.epsilon == pytest.approx(epsilon_of([(LaplaceEvent(50.0), 2), GaussianEvent(10.0)], 1e-5),
                                           rel=1e-3)
    assert r.params["events"][0] == {"event": LaplaceEvent(50.0).to_dict(), "count": 2}
    assert child.budget == r.cost and child.spent == ApproxDP(0.0, 0.0)
    # a bigger Laplace (less noise) is refused, nothing charged
    with pytest.raises(BudgetExceeded):
        child.charge(PureDP(0.05), mechanism="laplace", event=LaplaceEvent(20.0))
    # out of order: the Gaussian step before any Laplace charge
    with pytest.raises(BudgetExceeded):
        child.charge(ApproxDP(0.5, 1e-6), mechanism="gaussian", event=GaussianEvent(10.0))
    # undeclared kind
    with pytest.raises(BudgetExceeded):
        child.charge(PureDP(0.1), mechanism="rr", event=RandomizedResponseEvent(0.1, 2))
    # no event at all
    with pytest.raises(IncompatibleLoss) as info:
        child.charge(PureDP(0.01), mechanism="laplace")
    assert info.value.param == "event"
    assert child.receipts == ()
    child.charge(PureDP(0.01), mechanism="laplace", event=LaplaceEvent(100.0))  # dominated
    assert child.position == (0, 1)
    child.charge(ApproxDP(0.4, 1e-6), mechanism="gaussian", event=GaussianEvent(12.0))  # closes step 0 early
    assert child.position == (1, 1)
    with pytest.raises(BudgetExceeded):  # exhausted
        child.charge(PureDP(0.01), mechanism="laplace", event=LaplaceEvent(100.0))
    assert len(child.receipts) == 2 and child.receipts[0].params["event"] == LaplaceEvent(100.0).to_dict()
    assert 0 < child.spent.epsilon <= child.budget.epsilon
    assert len(acc.receipts) == 1  # the parent was charged once
    with pytest.raises(IncompatibleLoss):
        child.child(ApproxDP(0.1, 0))
    assert not child.can_afford(PureDP(0.0))


def test_schedule_early_stop_and_budget():
    acc = Accountant(ApproxDP(2.0, 1e-5))
    child = acc.schedule([repeat(DPSGD, 1000)], 1e-5)
    for _ in range(3):
        child.charge(ApproxDP(0.1, 1e-7), mechanism="dpsgd_step", event=SubsampledGaussianEvent(0.01, 1.0))
    assert child.spent.epsilon < child.budget.epsilon  # stopped after 3 of 1000 steps
    with pytest.raises(BudgetExceeded):  # a second schedule would not fit in what remains
        acc.schedule([repeat(DPSGD, 1000)], 1e-5)
    assert len(acc.receipts) == 1
    with pytest.raises(IncompatibleLoss):  # a pure budget cannot take an (epsilon, delta) schedule
        Accountant(PureDP(10.0)).schedule([LaplaceEvent(1.0)], 1e-5)
    with pytest.raises(IncompatibleLoss):
        Accountant(ZCDP(10.0)).schedule([GaussianEvent(1.0)], 1e-5)
    with pytest.raises(InvalidParameter) as info:
        Accountant(ApproxDP(10.0, 1e-5), neighbours=Replace()).schedule([DPSGD], 1e-5)
    assert info.value.param == "neighbours"


def test_schedule_with_real_mechanisms():
    acc = Accountant(ApproxDP(2.0, 1e-5))
    child = acc.schedule([(LaplaceEvent(50.0), 2), GaussianEvent(10.0), DiscreteLaplaceEvent(10.0, 1)], 1e-5)
    rng = seeded(7)
    r1 = dpkit.laplace(3.0, 1.0, 0.02, accountant=child, rng=rng)
    assert r1.receipt is not None and r1.receipt.params["event"]["type"] == "LaplaceEvent"
    with pytest.raises(BudgetExceeded):  # epsilon 0.05: scale 20 < 50
        dpkit.laplace(3.0, 1.0, 0.05, accountant=child, rng=rng)
    with pytest.raises(IncompatibleLoss):  # a vector release has no event
        dpkit.laplace([1.0, 2.0], 1.0, 0.02, accountant=child, rng=rng)
    r2 = dpkit.gaussian(3.0, 1.0, rho=1 / 200, accountant=child, rng=rng)  # sigma = 10 x rounded sensitivity
    assert r2.receipt.params["event"]["type"] == "GaussianEvent"
    r3 = run(discrete_laplace_plan(5, 1, 0.1), accountant=child, rng=rng)
    assert r3.receipt.params["event"] == DiscreteLaplaceEvent(10.0, 1).to_dict()
    assert len(child.receipts) == 3 and len(acc.receipts) == 1


def test_ordinary_accountant_receipts_unchanged_by_run():
    acc = Accountant(PureDP(1.0))
    r = dpkit.laplace(3.0, 1.0, 0.1, accountant=acc, rng=seeded(1))
    assert "event" not in r.receipt.params
    rec = acc.charge(PureDP(0.1), mechanism="laplace", event=LaplaceEvent(10.0))
    assert rec.params["event"] == LaplaceEvent(10.0).to_dict()
    with pytest.raises(WrongType) as info:
        acc.charge(PureDP(0.1), mechanism="laplace", event="laplace")
    assert info.value.param == "event"
    assert len(acc.receipts) == 2


def test_schedule_in_ledger_survives_reopen(tmp_path):
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, "d", ApproxDP(3.0, 1e-4)) as led:
        child = led.schedule([(LaplaceEvent(50.0), 3)], 1e-5, description="counts")
        dpkit.laplace(3.0, 1.0, 0.02, accountant=child, rng=seeded(2))
        eps = led.spent.epsilon
        assert eps > 0
    with Ledger(path, "d") as led:
        (r,) = led.receipts
        assert r.mechanism == "schedule" and r.description == "counts"
        assert r.params["events"][0]["event"]["type"] == "LaplaceEvent"
        assert led.spent.epsilon == pytest.approx(eps)  # never reset
        led.schedule([GaussianEvent(10.0)], 1e-5)
        assert len(led.receipts) == 2


def test_plan_events():
    assert laplace_plan(1.0, 1.0, 0.5).event.scale_over_sensitivity == pytest.approx(2.0, rel=1e-5)
    assert laplace_plan([1.0, 2.0], 1.0, 0.5).event is None
    g = gaussian_plan(1.0, 2.0, epsilon=1.0, delta=1e-5).event
    assert isinstance(g, GaussianEvent)
    assert ApproxEvent(1.0, 1e-5).dominates(GaussianEvent(g.sigma_over_sensitivity * (1 + 1e-5)))
    assert discrete_laplace_plan(3, 2, 0.5).event == DiscreteLaplaceEvent(4.0, 2)
    dg = discrete_gaussian_plan(3, 1, rho=0.5).event
    assert isinstance(dg, DiscreteGaussianEvent) and dg.sensitivity == 1
    assert sequential("two", [laplace_plan(1.0, 1.0, 0.5), laplace_plan(2.0, 1.0, 0.5)]).event is None


def test_tight_cost_of_fixed_plans():
    plans = [laplace_plan(float(i), 1.0, 0.02) for i in range(50)] + [gaussian_plan(0.0, 1.0, rho=1 / 200)]
    cost = tight_cost(plans, 1e-5)
    assert isinstance(cost, ApproxDP) and cost.delta == 1e-5
    assert cost.epsilon == pytest.approx(epsilon_of([(LaplaceEvent(50.0), 50), GaussianEvent(10.0)], 1e-5),
                                         rel=1e-3)
    assert cost.epsilon < 50 * 0.02 + gaussian_epsilon(10.0, 1, 0.5e-5)
    with pytest.raises(InvalidParameter) as info:
        tight_cost([sequential("s", plans[:2])], 1e-5)
    assert info.value.param == "plans"
    with pytest.raises(WrongType):
        tight_cost([], 1e-5)


# -- repeated events: one release of T steps (DP-SGD) against T declared steps ------------------------------------


def test_repeated_event_normalisation_and_serialisation():
    from dpkit.core.tight import Repeated, as_repeated

    assert as_repeated(DPSGD) == Repeated(DPSGD, 1)
    assert as_repeated((DPSGD, 7)) == Repeated(DPSGD, 7) == as_repeated(repeat(DPSGD, 7))
    r = Repeated(DPSGD, 1000)
    assert Repeated.from_dict(r.to_dict()) == r and r.to_dict()["count"] == 1000
    assert "x 1000" in str(r)
    for bad, err in [("dpsgd", WrongType), ((DPSGD, 0), InvalidParameter), ((DPSGD, 1.5), WrongType),
                     ((DPSGD,), WrongType)]:
        with pytest.raises(err) as info:
            as_repeated(bad)
        assert info.value.param == "event"
    with pytest.raises(InvalidParameter):
        Repeated.from_dict(DPSGD.to_dict())


def test_schedule_admits_a_repeated_charge_against_its_declared_steps():
    acc = Accountant(ApproxDP(3.0, 1e-4))
    child = acc.schedule([(LaplaceEvent(50.0), 2), repeat(DPSGD, 1000), GaussianEvent(10.0)], 1e-5)
    child.charge(PureDP(0.02), mechanism="laplace", event=LaplaceEvent(50.0))
    run_ = repeat(SubsampledGaussianEvent(0.01, 1.0), 1000)
    # refused, nothing recorded: more steps than declared, a larger rate, a smaller noise multiplier
    for bad in (repeat(DPSGD, 1001), repeat(SubsampledGaussianEvent(0.02, 1.0), 10),
                (SubsampledGaussianEvent(0.01, 0.9), 10)):
        with pytest.raises(BudgetExceeded):
            child.charge(ApproxDP(0.5, 1e-5), mechanism="dpsgd", event=bad)
    assert len(child.receipts) == 1 and child.position == (0, 1)
    rec = child.charge(ApproxDP(0.5, 1e-5), mechanism="dpsgd", event=run_)  # closes step 0, takes all of step 1
    assert rec.params["event"] == run_.to_dict()
    assert child.position == (1, 1000)
    with pytest.raises(BudgetExceeded):  # step 1 is full; GaussianEvent(10) dominates only sigma >= 10 steps
        child.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=(DPSGD, 2))
    child.charge(ApproxDP(0.1, 1e-6), mechanism="gaussian", event=GaussianEvent(10.0))
    assert child.position == (2, 1)
    assert len(acc.receipts) == 1 and child.spent.epsilon <= child.budget.epsilon


def test_repeated_charge_spans_consecutive_dominating_steps_and_is_atomic():
    acc = Accountant(ApproxDP(5.0, 1e-4))
    child = acc.schedule([repeat(DPSGD, 300), repeat(SubsampledGaussianEvent(0.02, 1.0), 800),
                          LaplaceEvent(10.0)], 1e-5)
    child.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=repeat(DPSGD, 100))
    assert child.position == (0, 100)
    # 100 + 1001 > 300 + 800: refused as a whole, the position does not move
    with pytest.raises(BudgetExceeded):
        child.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=repeat(DPSGD, 1001))
    assert child.position == (0, 100) and len(child.receipts) == 1
    # 200 left in step 0, then 800 of step 1 (which dominates DP-SGD at rate 0.01)
    child.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=repeat(DPSGD, 1000))
    assert child.position == (1, 800)
    # a rate-0.02 run could not have started in step 0 (0.01 does not dominate it), nor skip a step
    fresh = acc.schedule([repeat(DPSGD, 10), repeat(SubsampledGaussianEvent(0.02, 1.0), 10)], 1e-5)
    with pytest.raises(BudgetExceeded):
        fresh.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=repeat(SubsampledGaussianEvent(0.02, 1.0), 5))
    assert fresh.receipts == ()
    # a single event and a count-1 repeated event are the same charge
    fresh.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=repeat(DPSGD, 1))
    fresh.charge(ApproxDP(0.1, 1e-6), mechanism="dpsgd", event=DPSGD)
    assert fresh.position == (0, 2)


def test_ordinary_accountant_records_a_repeated_event():
    acc = Accountant(ApproxDP(1.0, 1e-5))
    rec = acc.charge(ApproxDP(0.5, 1e-6), mechanism="dpsgd", event=(DPSGD, 10))
    assert rec.params["event"] == {"type": "Repeated", "event": DPSGD.to_dict(), "count": 10}
    assert acc.spent == ApproxDP(0.5, 1e-6)


def test_plan_with_a_declared_repeated_event_and_tight_cost():
    from dpkit.core.tight import Repeated
    from dpkit.mechanisms.contract import Plan

    plan = Plan(mechanism="steps", cost=ApproxDP(1.0, 1e-5), draw=lambda rng: 0.0, privacy_event=(DPSGD, 1000))
    assert plan.event == Repeated(DPSGD, 1000)
    assert Plan(mechanism="one", cost=ApproxDP(1.0, 1e-5), draw=lambda rng: 0.0,
                privacy_event=GaussianEvent(2.0)).event == GaussianEvent(2.0)
    with pytest.raises(WrongType) as info:
        Plan(mechanism="bad", cost=ApproxDP(1.0, 1e-5), draw=lambda rng: 0.0, privacy_event="dpsgd")
    assert info.value.param == "privacy_event"
    plans = [laplace_plan(float(i), 1.0, 0.02) for i in range(50)] + [gaussian_plan(0.0, 1.0, rho=1 / 200), plan]
    cost = tight_cost(plans, 1e-5)
    assert cost.epsilon == pytest.approx(epsilon_of(MIXED, 1e-5), rel=1e-3)
    assert cost.epsilon == pytest.approx(1.95, abs=0.01)
