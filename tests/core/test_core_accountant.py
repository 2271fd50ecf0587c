"""The in-memory Accountant: filter, odometer, definitions, sub-budgets, parallel composition."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.core import (
    RDP,
    ZCDP,
    Accountant,
    AddRemove,
    ApproxDP,
    BudgetExceeded,
    DPKitError,
    IncompatibleLoss,
    InvalidParameter,
    PrivacyUnit,
    PureDP,
    Receipt,
    Replace,
    WrongType,
    compose_homogeneous,
)

PROP = settings(deadline=None, derandomize=True, max_examples=50)


def charge(acc, cost, **kw):
    return acc.charge(cost, mechanism=kw.pop("mechanism", "test"), **kw)


# ---------------------------------------------------------------------------------------------
# filter and odometer


def test_filter_refuses_overspend_and_records_nothing():
    acc = Accountant(PureDP(1.0))
    charge(acc, PureDP(0.6))
    before = (acc.spent, acc.receipts)
    with pytest.raises(BudgetExceeded):
        charge(acc, PureDP(0.5))
    assert (acc.spent, acc.receipts) == before
    assert len(acc.receipts) == 1
    assert acc.can_afford(PureDP(0.4))
    assert not acc.can_afford(PureDP(0.41))
    charge(acc, PureDP(0.4))
    assert acc.spent == PureDP(1.0)
    assert acc.remaining == PureDP(0.0)
    with pytest.raises(BudgetExceeded):
        charge(acc, PureDP(1e-9))
    charge(acc, PureDP(0.0))  # a free charge is always allowed
    assert len(acc.receipts) == 3


def test_odometer():
    acc = Accountant(ApproxDP(2.0, 1e-5))
    assert acc.spent == ApproxDP(0.0, 0.0)
    assert acc.remaining == ApproxDP(2.0, 1e-5)
    charge(acc, PureDP(0.5))
    charge(acc, ApproxDP(0.25, 4e-6))
    assert acc.spent.epsilon == 0.75 and acc.spent.delta == 4e-6
    assert acc.remaining.epsilon == 1.25 and acc.remaining.delta == pytest.approx(6e-6)
    assert acc.budget == ApproxDP(2.0, 1e-5)
    assert isinstance(acc.neighbours, AddRemove)


def test_float_split_tolerance_is_tiny():
    acc = Accountant(PureDP(1.0))
    for _ in range(10):
        charge(acc, PureDP(0.1))  # 10 x 0.1 is a hair above 1.0 exactly
    with pytest.raises(BudgetExceeded):
        charge(acc, PureDP(1e-10))
    acc2 = Accountant(PureDP(1.0))
    with pytest.raises(BudgetExceeded):
        charge(acc2, PureDP(1.0 + 1e-11))  # tolerance is 1e-12 relative, never more
    charge(acc2, PureDP(1.0 + 1e-13))


def test_delta_budget_is_enforced():
    acc = Accountant(ApproxDP(10.0, 1e-5))
    charge(acc, ApproxDP(0.1, 6e-6))
    with pytest.raises(BudgetExceeded):
        charge(acc, ApproxDP(0.1, 5e-6))
    charge(acc, ApproxDP(0.1, 4e-6))
    charge(acc, PureDP(1.0))
    assert acc.spent.delta == pytest.approx(1e-5)


def test_receipt_fields():
    acc = Accountant(PureDP(1.0), name="analysis-1")
    r = acc.charge(PureDP(0.1), mechanism="laplace", sensitivity=1, scale=10.0,
                   params={"lower": 0, "upper": np.int64(5), "bins": np.array([1, 2])}, description="ages",
                   secure=False)
    assert isinstance(r, Receipt)
    assert r.mechanism == "laplace" and r.cost == PureDP(0.1) and r.sensitivity == 1.0 and r.scale == 10.0
    assert r.params == {"lower": 0, "upper": 5, "bins": [1, 2]}
    assert r.description == "ages" and r.secure is False and r.accountant == "analysis-1"
    assert len(r.id) == 32 and r.time.endswith("+00:00")
    assert acc.receipts == (r,)
    assert r.to_dict()["cost"] == {"type": "PureDP", "epsilon": 0.1}


@pytest.mark.parametrize(("kwargs", "param", "err"), [
    ({"cost": 0.5}, "cost", WrongType),
    ({"cost": None}, "cost", WrongType),
    ({"mechanism": 3}, "mechanism", WrongType),
    ({"mechanism": ""}, "mechanism", InvalidParameter),
    ({"sensitivity": -1.0}, "sensitivity", InvalidParameter),
    ({"sensitivity": float("nan")}, "sensitivity", InvalidParameter),
    ({"sensitivity": "1"}, "sensitivity", WrongType),
    ({"scale": float("inf")}, "scale", InvalidParameter),
    ({"params": {"x": object()}}, "params", WrongType),
    ({"params": {"x": float("nan")}}, "params", WrongType),
    ({"params": {1: 2}}, "params", WrongType),
    ({"params": [1, 2]}, "params", WrongType),
    ({"description": None}, "description", WrongType),
    ({"secure": "yes"}, "secure", WrongType),
])
def test_bad_charge_arguments_record_nothing(kwargs, param, err):
    acc = Accountant(PureDP(1.0))
    args = {"cost": PureDP(0.1), "mechanism": "m"} | kwargs
    cost = args.pop("cost")
    with pytest.raises(err) as info:
        acc.charge(cost, **args)
    assert info.value.param == param
    assert acc.receipts == () and acc.spent == PureDP(0.0)


@PROP
@given(secret=st.floats(-1e6, -1e-3))
def test_messages_never_contain_values(secret):
    acc = Accountant(PureDP(1.0))
    for bad in ({"sensitivity": secret}, {"scale": secret}):
        with pytest.raises(DPKitError) as info:
            acc.charge(PureDP(0.1), mechanism="m", **bad)
        assert repr(secret) not in str(info.value) and str(secret) not in str(info.value)
    with pytest.raises(DPKitError) as info:
        acc.charge(PureDP(-secret * 10), mechanism="m")
    assert repr(-secret * 10) not in str(info.value)


@pytest.mark.parametrize(("budget", "slack", "param", "err"), [
    (0.5, 0.0, "budget", WrongType),
    (None, 0.0, "budget", WrongType),
    (RDP((2.0,), (0.1,)), 0.0, "budget", IncompatibleLoss),
    (PureDP(1.0), 1e-6, "slack", InvalidParameter),
    (ZCDP(1.0), 1e-6, "slack", InvalidParameter),
    (ApproxDP(1.0, 1e-6), 1e-5, "slack", InvalidParameter),
    (ApproxDP(1.0, 1e-6), -1e-7, "slack", InvalidParameter),
])
def test_bad_accountant_arguments(budget, slack, param, err):
    with pytest.raises(err) as info:
        Accountant(budget, slack=slack)
    assert info.value.param == param


def test_bad_neighbours():
    with pytest.raises(WrongType) as info:
        Accountant(PureDP(1.0), neighbours="replace")
    assert info.value.param == "neighbours"


# ---------------------------------------------------------------------------------------------
# definitions


def test_pure_budget_accepts_only_pure():
    acc = Accountant(PureDP(1.0))
    for cost in (ApproxDP(0.1, 1e-9), ApproxDP(0.1, 0.0), ZCDP(0.01), RDP((2.0,), (0.1,))):
        with pytest.raises(IncompatibleLoss) as info:
            charge(acc, cost)
        assert info.value.param == "cost"
    assert acc.receipts == ()


def test_zcdp_budget_accepts_zcdp_and_converts_pure():
    acc = Accountant(ZCDP(1.0))
    charge(acc, ZCDP(0.25))
    charge(acc, PureDP(1.0))  # rho = 1/2
    assert acc.spent == ZCDP(0.75)
    assert acc.receipts[1].cost == PureDP(1.0)  # receipts keep the cost as charged
    for cost in (ApproxDP(0.1, 1e-9), RDP((2.0,), (0.1,))):
        with pytest.raises(IncompatibleLoss):
            charge(acc, cost)
    with pytest.raises(BudgetExceeded):
        charge(acc, PureDP(0.75))  # 0.28125 > 0.25 left
    charge(acc, ZCDP(0.25))
    assert acc.remaining == ZCDP(0.0)


def test_zcdp_charge_against_approx_budget_explains_the_fix():
    acc = Accountant(ApproxDP(1.0, 1e-6))
    with pytest.raises(IncompatibleLoss) as info:
        charge(acc, ZCDP(0.01))
    msg = str(info.value)
    assert "(epsilon, delta)" in msg and "to_approx" in msg and "ZCDP budget" in msg
    with pytest.raises(IncompatibleLoss):
        charge(acc, RDP((2.0,), (0.01,)))
    charge(acc, ZCDP(0.01).to_approx(5e-7))  # the fix works


# ---------------------------------------------------------------------------------------------
# advanced / optimal composition with slack


def count_until_refused(acc, cost, limit=100_000):
    n = 0
    while n < limit:
        try:
            charge(acc, cost)
        except BudgetExceeded:
            return n
        n += 1
    raise AssertionError("never refused")


def test_advanced_composition_lets_more_homogeneous_charges_through():
    eps = 0.02
    basic = count_until_refused(Accountant(ApproxDP(1.0, 1e-5)), PureDP(eps))
    assert basic == 50
    acc = Accountant(ApproxDP(1.0, 1e-5), slack=1e-6)
    n = count_until_refused(acc, PureDP(eps))
    assert n > 2.5 * basic
    # exactly the largest k whose optimal composition fits
    assert compose_homogeneous(n, eps, 1e-6) <= 1.0 < compose_homogeneous(n + 1, eps, 1e-6)
    assert acc.spent.epsilon == pytest.approx(compose_homogeneous(n, eps, 1e-6))
    assert acc.spent.delta == 1e-6
    assert len(acc.receipts) == n


def test_slack_is_not_used_while_basic_composition_fits():
    acc = Accountant(ApproxDP(1.0, 1e-5), slack=1e-6)
    for _ in range(50):
        charge(acc, PureDP(0.01))
    assert acc.spent.delta == 0.0
    assert acc.spent.epsilon == pytest.approx(0.5)


def test_heterogeneous_or_mixed_charges_fall_back_to_basic_composition():
    acc = Accountant(ApproxDP(1.0, 1e-5), slack=1e-6)
    for _ in range(150):
        charge(acc, PureDP(0.01))
    spent = acc.spent
    assert spent.delta == 1e-6 and spent.epsilon < 1.0
    # a different epsilon would make the composition heterogeneous: basic sum 1.52 > 1 -> refused
    with pytest.raises(BudgetExceeded):
        charge(acc, PureDP(0.02))
    # an (eps, delta) charge would be an adaptively mixed composition: also basic -> refused
    with pytest.raises(BudgetExceeded):
        charge(acc, ApproxDP(0.01, 1e-9))
    assert acc.spent == spent and len(acc.receipts) == 150
    # under the basic regime heterogeneous charges are fine
    acc2 = Accountant(ApproxDP(1.0, 1e-5), slack=1e-6)
    charge(acc2, PureDP(0.3))
    charge(acc2, PureDP(0.2))
    charge(acc2, ApproxDP(0.5, 9e-6))
    assert acc2.spent == ApproxDP(1.0, 9e-6)


# ---------------------------------------------------------------------------------------------
# sub-budgets and parallel composition


def test_child_reserves_its_budget_up_front():
    parent = Accountant(PureDP(1.0), name="p")
    child = parent.child(PureDP(0.4), description="step 1")
    assert parent.spent == PureDP(0.4)
    assert parent.receipts[0].mechanism == "sub-budget" and parent.receipts[0].description == "step 1"
    assert child.budget == PureDP(0.4) and child.name.startswith("p/child-")
    charge(child, PureDP(0.3))
    with pytest.raises(BudgetExceeded):
        charge(child, PureDP(0.2))
    assert parent.spent == PureDP(0.4)  # children never charge the parent again
    with pytest.raises(BudgetExceeded):
        parent.child(PureDP(0.7))
    assert len(parent.receipts) == 1
    grandchild = child.child(PureDP(0.1))
    charge(grandchild, PureDP(0.1))
    assert child.spent == PureDP(0.4)


def test_child_of_other_definitions():
    parent = Accountant(ZCDP(1.0))
    pure_child = parent.child(PureDP(1.0))  # reserves rho = 0.5
    assert parent.spent == ZCDP(0.5)
    with pytest.raises(IncompatibleLoss):
        pure_child.charge(ZCDP(0.1), mechanism="m")
    with pytest.raises(IncompatibleLoss):
        parent.child(ApproxDP(0.1, 1e-6))
    approx_parent = Accountant(ApproxDP(1.0, 1e-6))
    c = approx_parent.child(ApproxDP(0.5, 5e-7), slack=1e-7)
    assert c.slack == 1e-7
    with pytest.raises(InvalidParameter):
        approx_parent.child(ApproxDP(0.1, 1e-7), slack=1e-6)  # slack above the child's delta
    assert approx_parent.spent == ApproxDP(0.5, 5e-7)


def test_parallel_composition_charges_the_max_not_the_sum():
    parent = Accountant(PureDP(1.0))
    parts = parent.parallel(PureDP(0.5), parts=10, description="per region")
    assert len(parts) == 10
    assert parent.spent == PureDP(0.5)
    assert len(parent.receipts) == 1 and parent.receipts[0].params["parts"] == 10
    for p in parts:
        charge(p, PureDP(0.5))
        with pytest.raises(BudgetExceeded):
            charge(p, PureDP(0.01))
    with pytest.raises(BudgetExceeded):
        parent.parallel(PureDP(0.6), parts=2)


def test_replace_forbids_parallel():
    parent = Accountant(PureDP(1.0), neighbours=Replace())
    with pytest.raises(InvalidParameter) as info:
        parent.parallel(PureDP(0.1), parts=2)
    assert info.value.param == "neighbours" and "Prop 2.7" in str(info.value)
    assert parent.receipts == ()
    assert Replace().histogram_sensitivity == 2 and not Replace().allows_parallel
    assert AddRemove().histogram_sensitivity == 1 and AddRemove().allows_parallel


def test_privacy_unit_parallel_costs_k_times():
    unit = PrivacyUnit("user_id", max_rows=10, max_groups=3, max_rows_per_group=5)
    parent = Accountant(ApproxDP(2.0, 1e-5), neighbours=unit)
    parts = parent.parallel(ApproxDP(0.5, 1e-6), parts=20)
    assert parent.spent.epsilon == pytest.approx(1.5) and parent.spent.delta == pytest.approx(3e-6)
    assert parts[0].neighbours == unit
    assert unit.histogram_sensitivity == 10 and unit.rows_per_group == 5 and unit.allows_parallel
    with pytest.raises(BudgetExceeded):
        parent.parallel(ApproxDP(0.2, 1e-7), parts=2)  # 3 x 0.2 > 0.5 left
    # a unit with at most 2 rows can touch at most 2 parts, whatever max_groups says
    assert PrivacyUnit("u", max_rows=2, max_groups=50).parallel_multiplier == 2


def test_privacy_unit_without_max_groups_refuses_parallel():
    parent = Accountant(PureDP(1.0), neighbours=PrivacyUnit("user_id", max_rows=4))
    with pytest.raises(InvalidParameter) as info:
        parent.parallel(PureDP(0.1), parts=2)
    assert info.value.param == "neighbours" and "max_groups" in str(info.value)


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"column": "", "max_rows": 1}, "column"),
    ({"column": 3, "max_rows": 1}, "column"),
    ({"column": "u", "max_rows": 0}, "max_rows"),
    ({"column": "u", "max_rows": 1.5}, "max_rows"),
    ({"column": "u", "max_rows": 2, "max_groups": 0}, "max_groups"),
    ({"column": "u", "max_rows": 2, "max_rows_per_group": 3}, "max_rows_per_group"),
])
def test_privacy_unit_validation(kwargs, param):
    with pytest.raises(DPKitError) as info:
        PrivacyUnit(**kwargs)
    assert info.value.param == param


def test_parallel_validation():
    parent = Accountant(PureDP(1.0))
    with pytest.raises(InvalidParameter):
        parent.parallel(PureDP(0.1), parts=0)
    with pytest.raises(WrongType):
        parent.parallel(PureDP(0.1), parts=2.0)
    with pytest.raises(IncompatibleLoss):
        parent.parallel(ZCDP(0.1), parts=2)
    assert parent.receipts == ()


# ---------------------------------------------------------------------------------------------
# atomicity under threads, reporting


def test_threads_never_overspend():
    acc = Accountant(PureDP(7.5))
    ok = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def work():
        barrier.wait()
        n = 0
        for _ in range(50):
            try:
                charge(acc, PureDP(0.125))
                n += 1
            except BudgetExceeded:
                pass
        with lock:
            ok.append(n)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(ok) == 60 == len(acc.receipts)
    assert acc.spent == PureDP(7.5)


def test_report_lists_spending():
    acc = Accountant(PureDP(2.0), name="demo")
    charge(acc, PureDP(0.5), mechanism="laplace", description="age histogram")
    charge(acc, PureDP(0.25), mechanism="laplace", description="age histogram")
    charge(acc, PureDP(0.25), mechanism="exponential", description="median")
    text = acc.report()
    assert "laplace" in text and "age histogram" in text and "exponential" in text
    assert "ε=0.75" in text and "spent:      ε=1" in text and "remaining:  ε=1" in text
    assert "(no charges)" in Accountant(PureDP(1.0)).report()


@PROP
@given(st.lists(st.floats(0.0, 0.3), min_size=1, max_size=30))
def test_pure_filter_property(costs):
    acc = Accountant(PureDP(1.0))
    accepted = []
    for c in costs:
        try:
            charge(acc, PureDP(c))
            accepted.append(c)
        except BudgetExceeded:
            assert math.fsum(accepted) + c > 1.0
    assert acc.spent.epsilon == pytest.approx(math.fsum(accepted), rel=1e-15, abs=0)
    assert acc.spent.epsilon <= 1.0 * (1 + 1e-12)
    assert len(acc.receipts) == len(accepted)


def test_report_flags_insecure_randomness_and_converts_zcdp():
    from dpkit.core.accountant import Accountant as _Acc
    from dpkit.core.privacy import ZCDP as _Z
    from dpkit.core.privacy import zcdp_to_approx_epsilon as _conv

    acc = _Acc(_Z(0.5))
    acc.charge(_Z(0.1), mechanism="gaussian", secure=True)
    assert "INSECURE" not in acc.report()
    acc.charge(_Z(0.1), mechanism="gaussian", secure=False)
    text = acc.report()
    assert "1 charge(s) used INSECURE" in text
    assert f"ε={_conv(0.2, 1e-5):.4g} at δ=1e-05" in text


def test_budget_exceeded_states_the_amounts(tmp_path):
    # issue #12's consistency fix: the library's refusal says what was asked, the budget, spent and remaining
    from dpkit.core.ledger import Ledger

    for acc in (Accountant(PureDP(1.0)), Ledger(tmp_path / "l.sqlite", "d", PureDP(1.0))):
        acc.charge(PureDP(0.75), mechanism="x")
        with pytest.raises(BudgetExceeded) as info:
            acc.charge(PureDP(0.5), mechanism="x")
        msg = str(info.value)
        assert "needs ε=0.5" in msg and "budget is ε=1" in msg and "ε=0.75 is spent" in msg
        assert "ε=0.25 remains" in msg and "nothing was charged" in msg
        assert acc.spent == PureDP(0.75)
