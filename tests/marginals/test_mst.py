"""MST (dpkit.marginals.mst): one charge first, the budget split, the tree on a chain, compression, refusals."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpkit import ZCDP, Accountant, ApproxDP, InvalidData, InvalidParameter, Replace, WrongType
from dpkit.audit.testing import assert_charges_first
from dpkit.core.privacy import zcdp_to_approx_delta
from dpkit.marginals import Domain, Records, all_kway, marginal, mean_total_variation, mst, total_variation
from dpkit.marginals.mst import rho_for_approx
from dpkit.noise import deterministic_source


def _chain(n: int = 4000, seed: int = 0) -> Records:
    """a -> b -> c strongly dependent; e independent of everything."""
    g = np.random.default_rng(seed)
    a = g.integers(0, 3, n)
    b = (a + (g.random(n) < 0.1)) % 4
    c = (2 * b + (g.random(n) < 0.1)) % 5
    e = g.integers(0, 2, n)
    return Records(np.column_stack([a, b, c, e]), Domain({"a": 3, "b": 4, "c": 5, "e": 2}))


def test_one_charge_before_any_draw():
    rel = assert_charges_first(mst, (_chain(500),), {"rho": 0.5}, cost=ZCDP(0.5), name="mst")
    assert len(rel.parts["tree"]) == 3


def test_budget_split_exact_and_approx_conversion():
    rel = mst(_chain(300), epsilon=1.0, delta=1e-9, rng=deterministic_source(1))
    assert rel.cost == ApproxDP(1.0, 1e-9)
    p = rel.params
    rho = p["rho"]
    assert zcdp_to_approx_delta(rho, 1.0) <= 1e-9
    assert rho == rho_for_approx(1.0, 1e-9)
    total = Fraction(p["one_way_rho"]) + Fraction(p["two_way_rho"]) + 3 * Fraction(p["selection_rho"])
    assert total <= Fraction(rho)
    assert p["one_way_rho"] == pytest.approx(rho / 3) and p["selection_rho"] == pytest.approx(rho / 9)
    assert Fraction(p["selection_epsilon"]) ** 2 / 8 <= Fraction(p["selection_rho"])
    # sigma_1 = sqrt(d) / sqrt(2 rho_1) (d = 4 one-way marginals)
    assert p["one_way_std"] == pytest.approx(2.0 / np.sqrt(2 * p["one_way_rho"]), rel=1e-9)
    assert p["two_way_std"] == pytest.approx(np.sqrt(3.0) / np.sqrt(2 * p["two_way_rho"]), rel=1e-9)


def test_large_budget_finds_the_chain_and_fits_the_marginals():
    rec = _chain()
    rel = mst(rec, 1e4, rng=deterministic_source(2))
    tree = {frozenset(e) for e in rel.parts["tree"]}
    assert {frozenset(("a", "b")), frozenset(("b", "c"))} <= tree
    model = rel.value
    for e in rel.parts["tree"]:
        assert total_variation(marginal(rec, e), model.project(e)) < 0.01
    assert mean_total_variation(rec, model.project, all_kway(rec.domain, 2)) < 0.02
    assert model.total == pytest.approx(len(rec), rel=0.01)


def test_replace_one_doubles_l1_and_scales_l2():
    rec = _chain(300)
    a = mst(rec, 1.0, rng=deterministic_source(3)).params
    b = mst(rec, 1.0, neighbours=Replace(), rng=deterministic_source(3)).params
    assert (a["l1_sensitivity"], b["l1_sensitivity"]) == (1, 2)
    assert b["one_way_std"] == pytest.approx(np.sqrt(2) * a["one_way_std"], rel=1e-9)


def test_compression_merges_rare_levels_and_spreads_them_uniformly():
    g = np.random.default_rng(4)
    n = 3000
    x = np.where(g.random(n) < 0.5, 0, 1)
    x[:3] = [5, 6, 7]  # three rare levels (out of 8 attributes levels, 2..7 nearly empty)
    y = (x + (g.random(n) < 0.2)) % 2
    rec = Records(np.column_stack([x, y, g.integers(0, 2, n)]), Domain({"x": 8, "y": 2, "z": 2}))
    rel = mst(rec, 0.05, rng=deterministic_source(5))
    cdom = rel.parts["compressed_domain"]
    assert cdom.to_dict()["x"] == 3  # levels 0, 1 kept, 2..7 merged
    assert list(rel.parts["levels"]["x"]) == [0, 1, 2, 2, 2, 2, 2, 2]
    px = rel.value.project(("x",))
    assert px.shape == (8,)
    np.testing.assert_allclose(px[2:], px[2], rtol=1e-9)
    off = mst(rec, 0.05, compress=False, rng=deterministic_source(5))
    assert off.parts["compressed_domain"] == rec.domain


def test_one_and_two_attributes():
    g = np.random.default_rng(6)
    one = Records(g.integers(0, 3, (100, 1)), Domain({"a": 3}))
    rel = mst(one, 1.0, rng=deterministic_source(1))
    assert rel.parts["tree"] == [] and rel.params["one_way_rho"] == 1.0
    two = Records(g.integers(0, 2, (100, 2)), Domain({"a": 2, "b": 2}))
    rel = mst(two, 1.0, rng=deterministic_source(1))
    assert rel.parts["tree"] == [("a", "b")] and rel.params["selection_steps"] == 0
    assert rel.params["one_way_rho"] == rel.params["two_way_rho"] == 0.5


@pytest.mark.parametrize(("kwargs", "error", "param"), [
    ({"records": [[0, 1]]}, WrongType, "records"),
    ({"records": Records(np.zeros((0, 2), np.int64), Domain({"a": 2, "b": 2}))}, InvalidData, "records"),
    ({"epsilon": 1.0}, InvalidParameter, "delta"),
    ({"rho": 1.0, "epsilon": 1.0, "delta": 1e-9}, InvalidParameter, "rho"),
    ({}, InvalidParameter, "rho"),
    ({"rho": -1.0}, InvalidParameter, "rho"),
    ({"records": Records(np.zeros((1, 2), np.int64), Domain({"a": 5000, "b": 5000}))}, InvalidParameter,
     "records"),
    ({"iters": -1}, InvalidParameter, "iters"),
    ({"total": 0.5}, InvalidParameter, "total"),
    ({"total": float("inf")}, InvalidParameter, "total"),
    ({"total": "10"}, WrongType, "total"),
])
def test_refusals_before_any_charge(kwargs, error, param):
    acct = Accountant(ZCDP(10.0))
    args = {"records": _chain(50), **({"rho": 1.0} if not {"rho", "epsilon"} & set(kwargs) and kwargs else {})}
    args.update(kwargs)
    with pytest.raises(error) as exc:
        mst(**args, accountant=acct, rng=deterministic_source(1))
    assert exc.value.param == param
    assert acct.spent == ZCDP(0.0) or not acct.receipts


def test_a_public_total_is_the_models_total():
    rec = _chain(300)
    rel = mst(rec, 1.0, total=1234.0, iters=50, rng=deterministic_source(2))
    assert rel.value.total == pytest.approx(1234.0)
    assert rel.value.project(("a",)).sum() == pytest.approx(1234.0)
    free = mst(rec, 1.0, iters=50, rng=deterministic_source(2))
    assert abs(free.value.total - 300) < 100
