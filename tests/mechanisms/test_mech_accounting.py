"""Accountant integration: the charge happens before the draw; BudgetExceeded -> no randomness used."""

from __future__ import annotations

import pytest

from dpkit.audit.testing import CountingSource, watch_charges
from dpkit.core import ZCDP, Accountant, ApproxDP, InvalidParameter, PureDP, Replace
from dpkit.core.errors import BudgetExceeded, IncompatibleLoss
from dpkit.mechanisms import (
    discrete_gaussian,
    discrete_laplace,
    exponential,
    gaussian,
    laplace,
    permute_and_flip,
    randomized_response,
    randomized_response_k,
    report_noisy_max,
)
from dpkit.noise import deterministic_source

CALLS = [
    ("laplace", lambda **k: laplace([1.0, 2.0], 1.0, 0.6, **k), PureDP(1.0), PureDP(0.6)),
    ("gaussian", lambda **k: gaussian(1.0, 1.0, epsilon=0.6, delta=1e-6, **k), ApproxDP(1.0, 1e-5),
     ApproxDP(0.6, 1e-6)),
    ("gaussian", lambda **k: gaussian([1.0, 2.0], 1.0, rho=0.3, **k), ZCDP(0.5), ZCDP(0.3)),
    ("discrete_laplace", lambda **k: discrete_laplace([1, 2], 2, 0.6, **k), PureDP(1.0), PureDP(0.6)),
    ("discrete_gaussian", lambda **k: discrete_gaussian(3, 1, rho=0.3, **k), ZCDP(0.5), ZCDP(0.3)),
    ("exponential", lambda **k: exponential([1.0, 5.0, 2.0], 1.0, 0.6, **k), PureDP(1.0), PureDP(0.6)),
    ("report_noisy_max", lambda **k: report_noisy_max([1.0, 5.0], 1.0, 0.6, **k), PureDP(1.0), PureDP(0.6)),
    ("report_noisy_max", lambda **k: report_noisy_max([1.0, 5.0], 1.0, 0.6, noise="gumbel", **k), PureDP(1.0),
     PureDP(0.6)),
    ("permute_and_flip", lambda **k: permute_and_flip([1.0, 5.0], 1.0, 0.6, **k), PureDP(1.0), PureDP(0.6)),
    ("randomized_response", lambda **k: randomized_response([0, 1, 1], 0.6, **k), PureDP(1.0), PureDP(0.6)),
    ("randomized_response_k", lambda **k: randomized_response_k([0, 1, 4], 5, 0.6, **k), PureDP(1.0),
     PureDP(0.6)),
]


@pytest.mark.parametrize(("name", "call", "budget", "cost"), CALLS)
def test_charge_then_draw_then_budget_exceeded(name, call, budget, cost):
    # randomized response discloses the number of respondents: DP only under replace-one (mechanisms.response)
    acct = Accountant(budget, neighbours=Replace()) if name.startswith("randomized") else Accountant(budget)
    src = CountingSource(7)
    consumed_at_charge = watch_charges(acct, src)
    rel = call(accountant=acct, rng=src)
    assert consumed_at_charge == [0]  # charged before any randomness was drawn
    assert src.consumed > 0
    assert rel.mechanism == name
    assert rel.cost == cost
    assert rel.receipt is acct.receipts[-1]
    assert rel.receipt.cost == cost
    assert rel.receipt.secure is False and rel.secure is False
    assert rel.receipt.mechanism == name
    # a second identical call would exceed the budget: refused, nothing recorded, nothing drawn
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        call(accountant=acct, rng=src)
    assert src.consumed == before
    assert len(acct.receipts) == 1


def test_incompatible_budget_draws_nothing():
    acct = Accountant(PureDP(1.0))
    src = CountingSource(8)
    with pytest.raises(IncompatibleLoss):
        gaussian(1.0, 1.0, epsilon=0.5, delta=1e-6, accountant=acct, rng=src)
    assert src.consumed == 0
    assert acct.receipts == ()


def test_secure_default_and_receipt_fields():
    acct = Accountant(PureDP(1.0))
    rel = laplace(10.0, 2.0, 0.5, accountant=acct)
    assert rel.secure is True and rel.receipt.secure is True
    assert rel.receipt.sensitivity == 2.0
    assert rel.receipt.scale == rel.scale
    assert rel.receipt.params["epsilon"] == 0.5
    assert acct.spent == PureDP(0.5)


def test_no_accountant_no_receipt():
    rel = laplace(1.0, 1.0, 1.0, rng=deterministic_source(1))
    assert rel.receipt is None
    assert rel.cost == PureDP(1.0)


@pytest.mark.parametrize("relation", [None, "unit"])
def test_randomized_response_refuses_relations_that_hide_n(relation):
    """Its output has one answer per respondent, so it discloses n: an add/remove (or privacy-unit) accountant is
    refused before the charge and before any draw (the earlier add/remove claim was withdrawn, mechanisms.response
    Errata)."""
    from dpkit.core import PrivacyUnit

    nb = PrivacyUnit("user", max_rows=2) if relation == "unit" else None
    acct = Accountant(PureDP(5.0)) if nb is None else Accountant(PureDP(5.0), neighbours=nb)
    src = CountingSource(7)
    for call in (lambda: randomized_response([0, 1, 1], 0.6, accountant=acct, rng=src),
                 lambda: randomized_response_k([0, 1, 4], 5, 0.6, accountant=acct, rng=src)):
        with pytest.raises(InvalidParameter) as info:
            call()
        assert info.value.param == "neighbours"
    assert src.consumed == 0
    assert len(acct.receipts) == 0
