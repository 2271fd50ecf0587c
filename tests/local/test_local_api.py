"""dpkit.local: compatibility with dpkit.mechanisms' randomized response, categories, bad input, the contract."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit
from dpkit import InvalidData, InvalidParameter, WrongType
from dpkit.local import (
    GRR,
    OLH,
    OUE,
    RAPPOR,
    BinaryRR,
    Reports,
    TwoCoinRR,
    UnaryEncoding,
    aggregate,
    frequencies,
    heavy_hitters,
    perturb,
    randomized_response,
    randomized_response_k,
)
from dpkit.mechanisms import randomized_response as mech_rr
from dpkit.mechanisms import randomized_response_k as mech_rr_k

SECRET = 987654.321


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_draws_as_the_mechanisms(seed):
    bits = np.array([[0, 1, 1], [1, 0, 0]])
    a = mech_rr(bits, 0.8, rng=dpkit.deterministic_source(seed)).value
    b = randomized_response(bits, 0.8, rng=dpkit.deterministic_source(seed)).value
    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    vals = [0, 3, 4, 2, 1] * 20
    a = mech_rr_k(vals, 5, 1.0, rng=dpkit.deterministic_source(seed)).value
    b = randomized_response_k(vals, 5, 1.0, rng=dpkit.deterministic_source(seed)).value
    assert np.array_equal(a, b)
    assert mech_rr(True, 1.0, rng=dpkit.deterministic_source(seed)).value == \
        randomized_response(True, 1.0, rng=dpkit.deterministic_source(seed)).value
    # categories: the same draws, mapped to the categories
    c = randomized_response_k(np.array(["v", "y", "z", "x", "w"] * 20), ["v", "w", "x", "y", "z"], 1.0,
                              rng=dpkit.deterministic_source(seed)).value
    assert list(c) == [["v", "w", "x", "y", "z"][i] for i in a]


def test_categorical_binary_and_mixed_types():
    out = randomized_response(["yes", "no", "yes"], 50.0, categories=("no", "yes"),
                              rng=dpkit.deterministic_source(0)).value
    assert list(out) == ["yes", "no", "yes"]
    mixed = [None, ("t", 1), 2.5]
    out = randomized_response_k([("t", 1), None], mixed, 50.0, rng=dpkit.deterministic_source(0)).value
    assert out.dtype == object and list(out) == [("t", 1), None]
    assert randomized_response_k("b", ["a", "b"], 50.0, rng=dpkit.deterministic_source(0)).value == "b"


BAD = [
    (lambda: randomized_response_k(["a", SECRET], ["a", "b"], 1.0), InvalidData, "values"),
    (lambda: randomized_response_k([], ["a", "b"], 1.0), InvalidData, "values"),
    (lambda: randomized_response_k(["a"], ["a"], 1.0), InvalidParameter, "categories"),
    (lambda: randomized_response_k(["a"], ["a", "a"], 1.0), InvalidParameter, "categories"),
    (lambda: randomized_response_k(["a"], [[1], [2]], 1.0), WrongType, "categories"),
    (lambda: randomized_response_k(["a"], "ab", 1.0), WrongType, "categories"),
    (lambda: randomized_response_k(["a"], [float("nan"), 1.0], 1.0), InvalidParameter, "categories"),
    (lambda: randomized_response_k(["a"], ["a", "b"], 0.0), InvalidParameter, "epsilon"),
    (lambda: randomized_response([0, 2], 1.0), InvalidData, "values"),
    (lambda: randomized_response([0], 1.0, categories=[1, 2, 3]), InvalidParameter, "categories"),
    (lambda: GRR(float("nan"), ["a", "b"]), InvalidParameter, "epsilon"),
    (lambda: GRR(1.0, 1), InvalidParameter, "categories"),
    (lambda: GRR(1e9, 3), InvalidParameter, "epsilon"),
    (lambda: UnaryEncoding(3, p=0.25, q=0.75), InvalidParameter, "q"),
    (lambda: UnaryEncoding(3, p=1.0, q=0.5), InvalidParameter, "p"),
    (lambda: UnaryEncoding(3, 1.0, p=0.75, q=0.25), InvalidParameter, "epsilon"),
    (lambda: UnaryEncoding(3), InvalidParameter, "epsilon"),
    (lambda: UnaryEncoding(3, 1.0, variant="xue"), InvalidParameter, "variant"),
    (lambda: TwoCoinRR(truth=1.0), InvalidParameter, "truth"),
    (lambda: BinaryRR(1.0, [1, 2, 3]), InvalidParameter, "categories"),
    (lambda: RAPPOR(3, f=0.5, p=0.5, q=0.5), InvalidParameter, "q"),
    (lambda: RAPPOR(3, f=1.0), InvalidParameter, "f"),
    (lambda: OLH(1.0, 3, g=1), InvalidParameter, "g"),
    (lambda: perturb(["a", SECRET], OUE(1.0, ["a", "b"])), InvalidData, "values"),
    (lambda: perturb(["a"], "oue"), WrongType, "protocol"),
    (lambda: aggregate(np.array([0, 1])), WrongType, "reports"),
    (lambda: OUE(1.0, 3).aggregate(GRR(1.0, 3).perturb([0, 1]).value), InvalidParameter, "reports"),
    (lambda: Reports(OUE(1.0, 3), [[0, 1]]), InvalidData, "data"),
    (lambda: Reports(OUE(1.0, 3), [[0, 2, 1]]), InvalidData, "data"),
    (lambda: Reports(OLH(1.0, 3), [0, 1]), InvalidParameter, "seeds"),
    (lambda: Reports(GRR(1.0, 3), [0, 3]), InvalidData, "data"),
    (lambda: frequencies(["a"], 1.0), InvalidParameter, "categories"),
    (lambda: frequencies(["a"], 1.0, categories=["a", "b"], protocol="xyz"), InvalidParameter, "protocol"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_is_typed_and_secret_free(i):
    call, err, param = BAD[i]
    with pytest.raises(err) as info:
        call()
    assert info.value.param == param
    assert "987654" not in str(info.value)


def test_refused_charge_draws_nothing():
    acc = dpkit.Accountant(dpkit.PureDP(0.5), neighbours=dpkit.Replace())
    with pytest.raises(dpkit.BudgetExceeded):
        perturb(["a", "b"], OUE(1.0, ["a", "b"]), accountant=acc)
    assert acc.spent == dpkit.PureDP(0.0) or acc.spent.epsilon == 0.0


def test_reports_round_trip_from_collected_arrays():
    rng = dpkit.deterministic_source(5)
    for proto in [GRR(1.0, 4), OUE(1.0, 4), OLH(1.0, 4), RAPPOR(4, f=0.5, bits=8, cohorts=2)]:
        rep = proto.perturb([0, 1, 2, 3] * 10, rng=rng).value
        again = Reports(proto, rep.data, seeds=rep.seeds,
                        cohorts=rep.cohorts if isinstance(proto, RAPPOR) else None)
        assert again == rep
        assert np.array_equal(aggregate(again).counts, aggregate(rep).counts)
        assert np.isfinite(proto.log_prob(rep[0], 2))
    assert list(GRR(1.0, ["x", "y"]).perturb(["x"] * 3, rng=rng).value.categories()) in (
        [a, b, c] for a in "xy" for b in "xy" for c in "xy")


def test_docs_guide_example_runs():
    """The worked example of docs/guides/local.md (kept in step by hand)."""
    occupations = ["Sales", "Tech-support", "Craft-repair", "?"]
    values = np.array(occupations * 500, dtype=object)
    rel = frequencies(values, 1.0, categories=occupations, rng=dpkit.deterministic_source(0))
    est = rel.parts["estimate"]
    assert est.protocol == "grr" and len(est.counts) == 4


@pytest.mark.parametrize("relation", ["addremove", "unit", "explicit"])
def test_relations_that_hide_n_are_refused(relation):
    """A batch of reports discloses n: only replace-one is DP (dpkit.local.frequency). Add/remove and privacy
    units are refused before the charge and before any draw, for every local mechanism."""
    from dpkit.audit.testing import CountingSource

    if relation == "unit":
        acc = dpkit.Accountant(dpkit.PureDP(10.0), neighbours=dpkit.PrivacyUnit("user", max_rows=3))
        kw = {"accountant": acc}
    elif relation == "addremove":
        acc = dpkit.Accountant(dpkit.PureDP(10.0))
        kw = {"accountant": acc}
    else:
        acc = None
        kw = {"neighbours": dpkit.AddRemove()}
    src = CountingSource(3)
    calls = [lambda: perturb(["a", "b"], OUE(1.0, ["a", "b"]), rng=src, **kw),
             lambda: frequencies(["a", "b"], 1.0, categories=["a", "b"], rng=src, **kw),
             lambda: heavy_hitters(["a", "b"], 1.0, categories=["a", "b"], k=1, rng=src, **kw),
             lambda: randomized_response(["no", "yes"], 1.0, categories=("no", "yes"), rng=src, **kw),
             lambda: randomized_response_k(["a", "b"], ["a", "b", "c"], 1.0, rng=src, **kw)]
    for call in calls:
        with pytest.raises(dpkit.InvalidParameter) as info:
            call()
        assert info.value.param == "neighbours"
    assert src.consumed == 0
    if acc is not None:
        assert len(acc.receipts) == 0


def test_default_relation_is_replace_one():
    rel = perturb(["a", "b"], OUE(1.0, ["a", "b"]), rng=dpkit.deterministic_source(1))
    assert rel.cost == dpkit.PureDP(1.0)
    acc = dpkit.Accountant(dpkit.PureDP(1.0), neighbours=dpkit.Replace())
    perturb(["a", "b"], OUE(1.0, ["a", "b"]), accountant=acc, rng=dpkit.deterministic_source(1))
    assert acc.spent == dpkit.PureDP(1.0)
