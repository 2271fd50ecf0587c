"""The plan -> charge -> draw -> Release contract (dpkit.mechanisms.contract) and the exact helpers in core._exact."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpkit import ZCDP, Accountant, ApproxDP, BudgetExceeded, IncompatibleLoss, InvalidParameter, PureDP, WrongType
from dpkit.audit.testing import CountingSource
from dpkit.core import _exact
from dpkit.core.neighbours import AddRemove, Replace
from dpkit.mechanisms.contract import Outcome, Plan, run, sequential, total_cost
from dpkit.mechanisms.laplace import laplace_plan


def _plan(eps: float = 0.5, **kw):
    def draw(rng):
        return int(rng.uint64(1)[0] % 7)

    return Plan(mechanism="toy", cost=PureDP(eps), draw=draw, params={"epsilon": eps}, **kw)


def test_run_charges_before_drawing_and_builds_release():
    acc, src = Accountant(PureDP(1.0)), CountingSource(3)
    seen = []
    orig = acc.charge

    def spy(*a, **k):
        seen.append(src.consumed)
        return orig(*a, **k)

    acc.charge = spy
    r = run(_plan(), accountant=acc, rng=src, description="d")
    assert seen == [0] and src.consumed == 8
    assert r.mechanism == "toy" and r.cost == PureDP(0.5) and r.receipt is not None and not r.secure
    assert r.params == {"epsilon": 0.5} and 0 <= r.value < 7
    assert acc.receipts[0].description == "d" and acc.receipts[0].mechanism == "toy"


def test_refused_charge_draws_nothing():
    acc, src = Accountant(PureDP(0.4)), CountingSource(3)
    with pytest.raises(BudgetExceeded):
        run(_plan(0.5), accountant=acc, rng=src)
    assert src.consumed == 0 and len(acc.receipts) == 0


@pytest.mark.parametrize(("kw", "param"), [({"accountant": 3}, "accountant"), ({"rng": 3}, "rng"),
                                           ({"description": 3}, "description")])
def test_bad_arguments_refused_before_charge(kw, param):
    acc, src = Accountant(PureDP(1.0)), CountingSource(3)
    args = {"accountant": acc, "rng": src, **kw}
    with pytest.raises(WrongType) as info:
        run(_plan(), **args)
    assert info.value.param == param and src.consumed == 0 and len(acc.receipts) == 0


def test_neighbour_relation_must_match_accountant():
    acc, src = Accountant(PureDP(1.0)), CountingSource(3)
    with pytest.raises(InvalidParameter) as info:
        run(_plan(neighbours=Replace()), accountant=acc, rng=src)
    assert info.value.param == "neighbours" and src.consumed == 0 and len(acc.receipts) == 0


def test_plan_validates_its_fields():
    with pytest.raises(WrongType):
        Plan(mechanism="x", cost=0.5, draw=lambda r: 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter):
        Plan(mechanism="x", cost=PureDP(1), draw=lambda r: 0, noise="gaussian-ish")
    with pytest.raises(WrongType):
        run("not a plan")  # type: ignore[arg-type]


def test_outcome_parts_and_interval_reach_release():
    plan = Plan(mechanism="x", cost=PureDP(1), draw=lambda r: Outcome(5.0, parts={"a": 1}, params={"k": 2},
                                                                      interval_fn=lambda c: (4.0, 6.0)))
    r = run(plan, rng=CountingSource(1))
    assert r.value == 5.0 and r.parts == {"a": 1} and r.params == {"k": 2} and r.interval(0.9) == (4.0, 6.0)


def test_laplace_plan_equals_laplace():
    from dpkit import laplace

    a = laplace(3.0, 1.0, 0.5, rng=CountingSource(9))
    b = run(laplace_plan(3.0, 1.0, 0.5), rng=CountingSource(9))
    assert a.value == b.value and a.scale == b.scale and a.params == b.params and a.noise == b.noise


def test_sample_does_not_charge():
    acc = Accountant(PureDP(1.0))
    out = _plan().sample(CountingSource(1))
    assert isinstance(out, Outcome) and len(acc.receipts) == 0


def test_sequential_composes_costs_and_draws_in_order():
    p = sequential("two", [laplace_plan(1.0, 1.0, 0.25), laplace_plan(2.0, 1.0, 0.5)], combine=sum)
    assert p.cost == PureDP(0.75)
    src = CountingSource(4)
    r = run(p, rng=src, accountant=Accountant(PureDP(1.0)))
    a = laplace_plan(1.0, 1.0, 0.25).sample(CountingSource(4))
    assert r.parts["step0"] == a.value and r.value == r.parts["step0"] + r.parts["step1"]
    with pytest.raises(InvalidParameter):
        sequential("x", [_plan(), _plan(neighbours=Replace())])
    with pytest.raises(WrongType):
        sequential("x", [])
    # primitives (neighbours None) compose with any relation; the explicit one is kept
    assert p.neighbours is None
    assert sequential("x", [laplace_plan(1.0, 1.0, 0.25), _plan(neighbours=Replace())]).neighbours == Replace()


def test_plan_refuses_malformed_fields_typed():
    base = {"mechanism": "toy", "cost": PureDP(0.5), "draw": lambda rng: 0}
    for kw in ({"noise": np.zeros(0)}, {"noise": "gauss"}, {"neighbours": 1.5}, {"params": [1]},
               {"mechanism": 3}):
        with pytest.raises((WrongType, InvalidParameter)):
            Plan(**{**base, **kw})


def test_total_cost_is_exact_and_rounded_up():
    t = total_cost([PureDP(0.1)] * 3)
    assert Fraction(t.epsilon) >= 3 * Fraction(0.1) and t.epsilon == _exact.float_at_least(3 * Fraction(0.1))
    assert total_cost([PureDP(1.0), ZCDP(0.5)]) == ZCDP(1.0)
    assert total_cost([PureDP(1.0), ApproxDP(1.0, 1e-6)]) == ApproxDP(2.0, 1e-6)
    with pytest.raises(IncompatibleLoss):
        total_cost([ZCDP(0.1), ApproxDP(1.0, 1e-6)])
    with pytest.raises(InvalidParameter):
        total_cost([])


def test_exact_directed_rounding_and_bisection():
    x = Fraction(1, 3)
    assert Fraction(_exact.div_up(1, 3)) >= x and Fraction(_exact.div_down(1, 3)) <= x
    assert _exact.div_up(1, 3) == math.nextafter(_exact.div_down(1, 3), math.inf)
    assert _exact.up(1.0, 2) == math.nextafter(math.nextafter(1.0, 2), 2) and _exact.down(_exact.up(1.0)) == 1.0
    lo, hi = _exact.bisect(lambda t: t * t >= 2.0, 1.0, 2.0, rel_tol=1e-15)
    assert hi * hi >= 2.0 > lo * lo and hi - lo <= 1e-15 * hi
    lo, hi = _exact.bisect(lambda t: t >= 1e-7, 1e-12, 1.0, geometric=True, rel_tol=1e-9)
    assert hi >= 1e-7 > lo
    assert _exact.expand(lambda t: t >= 100, 1.0, 4.0, limit=1e6) == 256.0
    assert _exact.expand(lambda t: t >= 1e9, 1.0, 4.0, limit=1e6) is None
    assert _exact.expand(lambda t: t <= 0.01, 1.0, 0.25, limit=1e-9) == 0.25**4


def test_release_of_plan_keeps_declared_law():
    p = laplace_plan(np.zeros(3), 1.0, 1.0)
    # a primitive's sensitivity is declared under the caller's relation: its plan takes any (None), so an
    # accountant under replace-one (or add/remove) runs it as before the contract
    assert p.noise == "lattice_laplace" and p.granularity is not None and p.neighbours is None
    for nb in (AddRemove(), Replace()):
        assert run(p, accountant=Accountant(PureDP(1.0), neighbours=nb), rng=CountingSource(2)).cost == p.cost
    r = run(p, rng=CountingSource(2))
    assert r.noise == p.noise and r.scale == p.scale and r.granularity == p.granularity


def test_exact_first_true_is_a_binary_search():
    calls = []

    def ok(k):
        calls.append(k)
        return k * k >= 1000

    assert _exact.first_true(ok, 0, 1000) == 32 and len(calls) <= 11
    assert _exact.first_true(lambda k: True, 5, 9) == 5 and _exact.first_true(lambda k: k >= 9, 5, 9) == 9


def test_outcome_fields_set_release_law_known_only_after_the_draw():
    acc = Accountant(PureDP(1.0))
    plan = Plan(mechanism="x", cost=PureDP(1), scale=2.0, draw=lambda r: Outcome(1.0, fields={"scale": 3.0}))
    r = run(plan, accountant=acc, rng=CountingSource(1))
    assert r.scale == 3.0 and acc.receipts[0].scale == 2.0  # the receipt keeps the plan's public value
    r = run(Plan(mechanism="x", cost=PureDP(1), scale=2.0, draw=lambda r: Outcome(1.0, fields={"scale": None})),
            rng=CountingSource(1))
    assert r.scale is None
    with pytest.raises(InvalidParameter):
        Outcome(1.0, fields={"value": 2.0})
    with pytest.raises(InvalidParameter):
        Outcome(1.0, fields={"noise": "gaussian-ish"})
