"""PriView (Li et al. ch. 6.3): the book's worked example and view-size table, covering designs, consistency,
ripple non-negativity, maximum-entropy reconstruction, and the release (cost, law of the noisy views, typed
errors before any charge). Data are generated with numpy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import dpkit
from dpkit import Accountant, InvalidData, InvalidParameter, PureDP, Replace, WrongType
from dpkit.audit.testing import chi2_pvalue
from dpkit.marginals import Domain, Records, marginal, priview, total_variation
from dpkit.marginals.priview import (
    PriViewModel,
    choose_t,
    covering_design,
    intersections,
    maxent_marginal,
    mutual_consistency,
    overall_consistency,
    reconstruct_marginal,
    ripple,
    view_noise_error,
    view_size_criterion,
)


def _binary(n: int, d: int, seed: int = 0) -> Records:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2, size=(n, d))
    x[:, 1] = x[:, 0] ^ (rng.random(n) < 0.1)  # a correlated pair
    return Records(x, Domain({f"a{i}": 2 for i in range(d)}))


def _proj(table: np.ndarray, attrs: tuple[str, ...], sub: tuple[str, ...]) -> np.ndarray:
    return table.sum(axis=tuple(i for i, a in enumerate(attrs) if a not in sub))


def _assert_consistent(views: list[tuple[str, ...]], tables: list[np.ndarray]) -> None:
    for (v, tv), (u, tu) in itertools.combinations(zip(views, tables, strict=True), 2):
        common = tuple(a for a in v if a in u)
        np.testing.assert_allclose(_proj(tv, v, common), _proj(tu, u, common), rtol=0, atol=1e-8)


# -- the book's worked example (Li et al. §6.3.3) ---------------------------------------------------------------
def test_worked_example_mutual_consistency():
    # T_{V1={a1,a2}} = [.3,.3,.3,.1], T_{V2={a1,a3}} = [.2,.3,.1,.4] (cells in the order 00, 01, 10, 11)
    t1 = np.array([0.3, 0.3, 0.3, 0.1]).reshape(2, 2)
    t2 = np.array([0.2, 0.3, 0.1, 0.4]).reshape(2, 2)
    views = [("a1", "a2"), ("a1", "a3")]
    np.testing.assert_allclose(t1.sum(axis=1), [0.6, 0.4])
    np.testing.assert_allclose(t2.sum(axis=1), [0.5, 0.5])
    tables = [t1.copy(), t2.copy()]
    mutual_consistency(tables, views, ["a1"])
    # the book's "after consistency" rows; the best estimate of T_{a1} is (.55, .45)
    np.testing.assert_allclose(tables[0].ravel(), [0.275, 0.275, 0.325, 0.125], atol=1e-15)
    np.testing.assert_allclose(tables[1].ravel(), [0.225, 0.325, 0.075, 0.375], atol=1e-15)
    np.testing.assert_allclose(tables[0].sum(axis=1), [0.55, 0.45])
    np.testing.assert_allclose(tables[1].sum(axis=1), [0.55, 0.45])
    # "T_{V1} projected on a2 is unchanged" (.6, .4); "T_{V2} projected on a3 is unchanged" (.3, .7)
    np.testing.assert_allclose(tables[0].sum(axis=0), [0.6, 0.4])
    np.testing.assert_allclose(tables[1].sum(axis=0), [0.3, 0.7])


def test_worked_example_refutes_the_printed_denominator():
    # Erratum: the update is printed with denominator 2^{|V_i|} - |A| = 2^2 - 1 = 3. That formula does NOT give
    # the book's own example (.3 - .05/3 = .2833 != .275), nor consistency; 2^{|V_i| - |A|} = 2 does (above).
    printed = 0.3 + (0.55 - 0.6) / (2**2 - 1)
    assert not math.isclose(printed, 0.275)
    assert math.isclose(0.3 + (0.55 - 0.6) / 2 ** (2 - 1), 0.275)


# -- choosing views (§6.3.4) ------------------------------------------------------------------------------------
BOOK_TABLE = {5: (0.283, 0.094), 6: (0.267, 0.067), 7: (0.269, 0.054), 8: (0.286, 0.048), 9: (0.314, 0.045),
              10: (0.356, 0.044), 11: (0.411, 0.046), 12: (0.485, 0.048)}


def test_view_size_table_of_the_book():
    for ell, (pairs, triples) in BOOK_TABLE.items():
        assert round(view_size_criterion(ell, 2), 3) == pairs
        assert round(view_size_criterion(ell, 3), 3) == triples
    # ell = 8 is within 8% of the best for pairs (6) and 10% for triples (10)
    best_pairs = min(view_size_criterion(e, 2) for e in BOOK_TABLE)
    best_triples = min(view_size_criterion(e, 3) for e in BOOK_TABLE)
    assert view_size_criterion(8, 2) <= 1.08 * best_pairs
    assert view_size_criterion(8, 3) <= 1.10 * best_triples


@pytest.mark.parametrize(("d", "ell", "t"), [(12, 8, 2), (20, 8, 2), (15, 8, 3), (12, 6, 4), (9, 4, 2)])
def test_covering_design_covers_every_t_subset(d, ell, t):
    names = [f"x{i}" for i in range(d)]
    views = covering_design(names, ell, t)
    assert all(len(v) <= ell and len(set(v)) == len(v) for v in views)
    assert all(list(v) == sorted(v, key=names.index) for v in views)  # attribute order kept
    for s in itertools.combinations(names, t):
        assert any(set(s) <= set(v) for v in views), s
    assert views == covering_design(names, ell, t)  # deterministic (public)
    # no worse than the trivial bound by much: at least C(d,t)/C(ell,t) blocks are needed
    assert len(views) >= math.ceil(math.comb(d, t) / math.comb(ell, t))


def test_covering_design_small_and_non_binary():
    assert covering_design(["a", "b", "c"], 8, 2) == [("a", "b", "c")]
    sizes = {"a": 10, "b": 10, "c": 3, "d": 2, "e": 4}
    views = covering_design(list(sizes), 4, 2, sizes=sizes, max_cells=120)
    for v in views:
        assert math.prod(sizes[a] for a in v) <= 120
    for s in itertools.combinations(sizes, 2):
        assert any(set(s) <= set(v) for v in views)
    with pytest.raises(InvalidParameter, match="view_size") as exc:
        covering_design(list(sizes), 4, 2, sizes=sizes, max_cells=50)  # {a, b} alone has 100 cells
    assert "'a', 'b'" in str(exc.value)


def test_eq_6_7_and_the_choice_of_t():
    d, ell = 20, 8
    names = [f"x{i}" for i in range(d)]
    views = covering_design(names, ell, 2)
    w = len(views)
    if all(len(v) == ell for v in views):
        book = 2 ** ((ell + 1) / 2) / (1000 * 1.0) * math.sqrt(w * d * (d - 1) / (ell * (ell - 1)))
        assert math.isclose(view_noise_error(1000, 1.0, d, views), book, rel_tol=1e-12)
    # a huge N makes every t's error tiny: the largest t (4) is taken; a tiny N: t = 2
    t_big, _ = choose_t(1e9, 1.0, names, ell)
    t_small, v_small = choose_t(100, 1.0, names, ell)
    assert t_big == 4 and t_small == 2 and v_small == views
    # in between, the chosen t has error <= 0.003 and the next t does not
    n = 2e5
    t, v = choose_t(n, 1.0, names, ell)
    assert view_noise_error(n, 1.0, d, v) <= 0.003
    if t < 4:
        assert view_noise_error(n, 1.0, d, covering_design(names, ell, t + 1)) > 0.003


# -- consistency -------------------------------------------------------------------------------------------------
def _noisy_tables(views, sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(50.0, 10.0, size=tuple(sizes[a] for a in v)) for v in views]


def test_overall_consistency_makes_every_pair_of_views_agree():
    names = [f"x{i}" for i in range(10)]
    views = covering_design(names, 4, 2)
    sizes = dict.fromkeys(names, 2)
    tables = _noisy_tables(views, sizes)
    overall_consistency(tables, views)
    _assert_consistent(views, tables)
    totals = [t.sum() for t in tables]
    np.testing.assert_allclose(totals, totals[0])


def test_overall_consistency_non_binary_and_any_topological_order():
    sizes = {"a": 3, "b": 2, "c": 4, "d": 2, "e": 3}
    views = [("a", "b", "c"), ("b", "c", "d"), ("a", "d", "e"), ("c", "e")]
    tables = _noisy_tables(views, sizes, seed=1)
    other = [t.copy() for t in tables]
    overall_consistency(tables, views)
    _assert_consistent(views, tables)
    # another topological order (reverse within each size) gives the same result (Li et al. §6.3.3)
    order = sorted(intersections(views), key=lambda s: (len(s), [-ord(c) for c in sorted(s)]))
    for common in order:
        mutual_consistency(other, views, common)
    for x, y in zip(tables, other, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-9)


def test_intersections_are_closed_and_topological():
    views = [("a", "b", "c"), ("b", "c", "d"), ("c", "d", "e")]
    sets = intersections(views)
    assert sets[0] == frozenset()
    for x, y in itertools.combinations(sets, 2):
        assert not y < x  # no superset before its subset
    assert frozenset({"c"}) in sets and frozenset({"b", "c"}) in sets and frozenset({"c", "d"}) in sets


# -- ripple non-negativity -------------------------------------------------------------------------------------------
def test_ripple_binary_by_hand():
    # a 2x2 table: the -4 cell is set to 0 and its 2 neighbours (one bit flipped) each lose 4/2
    out = ripple(np.array([[-4.0, 10.0], [10.0, 10.0]]), 0.0)
    np.testing.assert_array_equal(out, [[0.0, 8.0], [8.0, 10.0]])


@pytest.mark.parametrize("shape", [(2, 2, 2, 2, 2), (3, 4, 2)])
def test_ripple_keeps_the_total_and_leaves_nothing_below_theta(shape):
    rng = np.random.default_rng(3)
    table = rng.normal(5.0, 8.0, size=shape)
    out = ripple(table, 0.5)
    assert math.isclose(out.sum(), table.sum(), rel_tol=1e-12)
    assert out.min() >= -0.5
    assert (out[table >= 0] <= table[table >= 0] + 1e-12).all()  # mass only moves down onto neighbours


# -- maximum-entropy reconstruction ------------------------------------------------------------------------------
def test_maxent_is_conditional_independence_for_a_chain():
    dom = Domain({"a": 2, "b": 3, "c": 2})
    rng = np.random.default_rng(4)
    joint = rng.random((2, 3, 2))
    joint *= 1000 / joint.sum()
    ab, bc = joint.sum(axis=2), joint.sum(axis=0)
    est = maxent_marginal(dom, ["c", "a", "b"], {("a", "b"): ab, ("b", "c"): bc}, iters=1000, tol=1e-13)
    expect = ab[:, :, None] * bc[None, :, :] / joint.sum(axis=(0, 2))[None, :, None]
    np.testing.assert_allclose(est, expect, rtol=1e-9)
    # a marginal inside a view is its projection
    np.testing.assert_allclose(maxent_marginal(dom, ["b"], {("a", "b"): ab, ("b", "c"): bc}), ab.sum(axis=0))


# -- LP and least-squares reconstruction (Li et al. §6.3.2's alternatives) ------------------------------------------
def _margins(seed: int = 5) -> tuple[Domain, np.ndarray, np.ndarray, dict]:
    dom = Domain({"a": 3, "b": 4})
    rng = np.random.default_rng(seed)
    joint = 50 + 100 * rng.random((3, 4))
    r, c = joint.sum(axis=1), joint.sum(axis=0)
    return dom, r, c, {("a",): r, ("b",): c}


def test_least_squares_is_the_closed_form_minimum_norm_table():
    # min sum x^2 with row sums r and column sums c: x_ij = r_i/J + c_j/I - N/(IJ) (all positive here)
    dom, r, c, views = _margins()
    n = r.sum()
    expect = r[:, None] / 4 + c[None, :] / 3 - n / 12
    assert (expect > 0).all()
    est = reconstruct_marginal(dom, ["b", "a"], views, method="lsq")
    np.testing.assert_allclose(est, expect, rtol=1e-6)
    # maximum entropy is the independence table r c' / N; the LP meets every constraint (tau = 0), x >= 0
    np.testing.assert_allclose(reconstruct_marginal(dom, ["a", "b"], views), np.outer(r, c) / n, rtol=1e-8)
    lp = reconstruct_marginal(dom, ["a", "b"], views, method="lp")
    assert lp.min() >= 0
    np.testing.assert_allclose(lp.sum(axis=1), r, rtol=1e-7)
    np.testing.assert_allclose(lp.sum(axis=0), c, rtol=1e-7)


def test_least_squares_clips_at_zero_and_stays_minimum_norm():
    # skewed margins: the unconstrained minimum-norm table has negative cells; compare with a generic QP solve
    from scipy import optimize

    dom = Domain({"a": 2, "b": 3, "c": 2})
    rng = np.random.default_rng(9)
    joint = rng.random((2, 3, 2)) ** 4 * 1000
    ab, bc = joint.sum(axis=2), joint.sum(axis=0)
    views = {("a", "b"): ab, ("b", "c"): bc}
    est = reconstruct_marginal(dom, ["a", "b", "c"], views, method="lsq")
    assert est.min() >= 0
    np.testing.assert_allclose(est.sum(axis=2), ab, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(est.sum(axis=0), bc, rtol=1e-6, atol=1e-6)
    n = joint.sum()
    ab1, bc1 = ab / n, bc[:, 0] / n  # in units of the total (well scaled); bc's other column is implied
    cons = [{"type": "eq", "fun": lambda x: x.reshape(2, 3, 2).sum(axis=2).ravel() - ab1.ravel()},
            {"type": "eq", "fun": lambda x: x.reshape(2, 3, 2).sum(axis=0)[:, 0] - bc1}]
    ref = optimize.minimize(lambda x: x @ x, np.full(12, 1 / 12), jac=lambda x: 2 * x, constraints=cons,
                            bounds=[(0, None)] * 12, method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000})
    assert ref.success
    assert abs(float((est**2).sum()) / n**2 - float(ref.fun)) <= 1e-6 * float(ref.fun)
    np.testing.assert_allclose(est.ravel() / n, ref.x, atol=1e-6)
    lp = reconstruct_marginal(dom, ["a", "b", "c"], views, method="lp")
    assert lp.min() >= 0
    np.testing.assert_allclose(lp.sum(axis=2), ab, rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(lp.sum(axis=0), bc, rtol=1e-7, atol=1e-6)


def test_reconstruction_methods_agree_where_a_view_covers_and_refuse_bad_input():
    dom, r, c, _ = _margins()
    joint = np.outer(r, c) / r.sum() + 1.0
    views = {("a", "b"): joint}
    for how in ("maxent", "lsq", "lp"):
        np.testing.assert_allclose(reconstruct_marginal(dom, ["b"], views, method=how), joint.sum(axis=0))
    with pytest.raises(InvalidParameter) as err:
        reconstruct_marginal(dom, ["a"], views, method="simplex")
    assert err.value.param == "method"
    big = Domain({"x": 1024, "y": 1024})
    with pytest.raises(InvalidParameter) as err:
        reconstruct_marginal(big, ["x", "y"], {("x",): np.ones(1024), ("y",): np.ones(1024)}, method="lp")
    assert err.value.param == "attrs"


def test_priview_reconstruction_option_is_post_processing():
    recs = _binary(3000, 8, seed=3)
    acc = Accountant(PureDP(1.0))
    with pytest.raises(InvalidParameter) as err:
        priview(recs, 1.0, view_size=3, t=2, reconstruction="nope", accountant=acc)
    assert err.value.param == "reconstruction" and not acc.receipts
    kw = {"view_size": 3, "t": 2}
    maxent = priview(recs, 1.0, **kw, rng=dpkit.deterministic_source(7))
    lsq = priview(recs, 1.0, **kw, reconstruction="lsq", rng=dpkit.deterministic_source(7))
    assert lsq.params["reconstruction"] == "lsq" and maxent.params["reconstruction"] == "maxent"
    assert lsq.value.views.keys() == maxent.value.views.keys()
    assert all(np.array_equal(lsq.value.views[v], maxent.value.views[v]) for v in lsq.value.views)
    attrs = ("a0", "a1", "a2", "a3", "a4")  # no 3-attribute view covers five attributes
    a, b = lsq.value.project(attrs), maxent.value.project(attrs, method="lsq")
    np.testing.assert_allclose(a, b)
    truth = marginal(recs, attrs)
    for how in ("maxent", "lsq", "lp"):
        est = maxent.value.project(attrs, method=how)
        assert est.shape == truth.shape and est.min() >= 0
        assert total_variation(truth, est) < 0.5


# -- the release ------------------------------------------------------------------------------------------------------
def test_release_cost_parts_and_consistent_model():
    recs = _binary(2000, 10)
    acc = Accountant(PureDP(2.0))
    rel = priview(recs, 1.0, view_size=4, t=2, accountant=acc, rng=dpkit.deterministic_source(2))
    assert rel.cost == PureDP(1.0) and len(acc.receipts) == 1 and acc.spent == PureDP(1.0)
    assert rel.mechanism == "priview" and rel.noise is None
    model = rel.value
    assert isinstance(model, PriViewModel)
    views = rel.parts["views"]
    assert rel.params["w"] == len(views) and rel.params["t"] == 2
    assert list(rel.parts["noisy_views"]) == views
    # Lap(w/eps) per cell: the scale is w / eps (smallest float above it)
    assert rel.scale >= len(views) / 1.0 and math.isclose(rel.scale, len(views), rel_tol=1e-15)
    for v, noisy in rel.parts["noisy_views"].items():
        assert noisy.dtype == np.int64 and noisy.shape == recs.domain.shape_of(v)
    tables = [model.views[v] for v in views]
    _assert_consistent(views, tables)
    # every pair is covered (t = 2): its marginal is a view's projection, the same from every covering view
    for pair in [("a0", "a1"), ("a3", "a9")]:
        covering = [v for v in views if set(pair) <= set(v)]
        assert covering
        np.testing.assert_allclose(model.project(pair), _proj(model.views[covering[0]], covering[0], pair))
        assert model.project(pair).shape == (2, 2)
    # a triple no view covers: max-ent, matching every view on its overlap with the triple
    triple = next(s for s in itertools.combinations(recs.domain.attrs, 3)
                  if not any(set(s) <= set(v) for v in views))
    est = model.project(triple)
    assert est.shape == (2, 2, 2) and (est >= 0).all()
    assert set(model.marginals([triple, ("a0",)])) == {triple, ("a0",)}


def test_noisy_views_follow_the_declared_discrete_laplace_law():
    from dpkit.audit.exact import DiscreteLaplace

    recs = _binary(300, 6, seed=5)
    zs = []
    scale = None
    for seed in range(80):
        rel = priview(recs, 2.0, view_size=3, t=2, rng=dpkit.deterministic_source(100 + seed))
        scale = rel.scale
        for v, noisy in rel.parts["noisy_views"].items():
            zs.append((noisy - marginal(recs, v).astype(np.int64)).ravel())
    z = np.concatenate(zs)
    assert z.size >= 4000
    law = DiscreteLaplace(0, scale)
    edges = np.arange(-12, 12)
    cdf = np.exp(np.asarray(law.logcdf(edges.astype(np.float64)), dtype=np.float64))
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    counts = np.bincount(np.searchsorted(edges, z, side="left"), minlength=edges.size + 1)
    assert chi2_pvalue(counts, probs) > 1e-6


def test_accuracy_at_a_large_epsilon():
    recs = _binary(5000, 10, seed=6)
    rel = priview(recs, 50.0, view_size=4, t=2, rng=dpkit.deterministic_source(7))
    for pair in [("a0", "a1"), ("a2", "a7")]:
        assert total_variation(marginal(recs, pair), rel.value.project(pair)) < 0.02
    # the uncovered triple is reconstructed well when the data are (nearly) independent given the pair
    assert total_variation(marginal(recs, ("a0", "a1", "a5")), rel.value.project(("a0", "a1", "a5"))) < 0.05


def test_t_from_a_noisy_count_and_from_public_n():
    recs = _binary(1000, 12, seed=8)
    rel = priview(recs, 1.0, view_size=6, rng=dpkit.deterministic_source(9))
    assert "noisy_count" in rel.parts
    assert rel.params["epsilon_count"] + rel.params["epsilon_views"] <= 1.0
    assert math.isclose(rel.params["epsilon_count"], 0.01)
    assert rel.params["t"] in (2, 3, 4) and rel.params["w"] == len(rel.parts["views"])
    assert math.isclose(rel.scale, rel.params["w"] / rel.params["epsilon_views"], rel_tol=1e-12)
    # a public rough N: no count is spent, the design is in the plan's parameters
    rel2 = priview(recs, 1.0, view_size=6, n_estimate=1e9, rng=dpkit.deterministic_source(9))
    assert "noisy_count" not in rel2.parts and rel2.params["epsilon_count"] == 0.0 and rel2.params["t"] == 4
    # replace-one: N is public, the per-view sensitivity doubles
    rel3 = priview(recs, 1.0, view_size=6, neighbours=Replace(), rng=dpkit.deterministic_source(9))
    assert "noisy_count" not in rel3.parts and rel3.params["per_view_sensitivity"] == 2
    assert math.isclose(rel3.scale, 2 * rel3.params["w"], rel_tol=1e-12)


def test_one_view_when_every_attribute_fits():
    recs = _binary(200, 5, seed=10)
    rel = priview(recs, 1.0, rng=dpkit.deterministic_source(11))
    assert rel.parts["views"] == [recs.domain.attrs] and rel.params["w"] == 1 and "noisy_count" not in rel.parts


def test_non_binary_domain_is_generalised():
    rng = np.random.default_rng(12)
    dom = Domain({"a": 3, "b": 4, "c": 2, "d": 5, "e": 2, "f": 3})
    recs = Records(rng.integers(0, dom.shape, size=(3000, 6)), dom)
    rel = priview(recs, 5.0, view_size=3, t=2, max_view_cells=40, rng=dpkit.deterministic_source(13))
    views = rel.parts["views"]
    assert all(dom.size(v) <= 40 for v in views)
    _assert_consistent(views, [rel.value.views[v] for v in views])
    assert total_variation(marginal(recs, ("a", "d")), rel.value.project(("a", "d"))) < 0.1


def test_reproducible_and_model_equality():
    recs = _binary(300, 8, seed=14)
    a = priview(recs, 1.0, view_size=4, t=2, rng=dpkit.deterministic_source(15))
    b = priview(recs, 1.0, view_size=4, t=2, rng=dpkit.deterministic_source(15))
    c = priview(recs, 1.0, view_size=4, t=2, rng=dpkit.deterministic_source(16))
    assert a.value == b.value and a.value != c.value
    assert "PriViewModel" in repr(a.value)


@pytest.mark.parametrize(("changes", "error", "param"), [
    ({"records": [[1, 0], [0, 1]]}, WrongType, "records"),
    ({"records": Records(np.zeros((0, 8), np.int64), Domain({f"a{i}": 2 for i in range(8)}))}, InvalidData,
     "records"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"view_size": 0}, InvalidParameter, "view_size"),
    ({"t": 5}, InvalidParameter, "t"),
    ({"theta": -1.0}, InvalidParameter, "theta"),
    ({"count_share": 1.0}, InvalidParameter, "count_share"),
    ({"n_estimate": -3.0}, InvalidParameter, "n_estimate"),
    ({"max_view_cells": 2}, InvalidParameter, "view_size"),
    ({"iters": 0}, InvalidParameter, "iters"),
])
def test_typed_errors_before_any_charge(changes, error, param):
    kwargs = {"records": _binary(50, 8, seed=17), "epsilon": 1.0, "view_size": 4, "t": 2, **changes}
    acc = Accountant(PureDP(5.0))
    with pytest.raises(error) as exc:
        priview(**kwargs, accountant=acc, rng=dpkit.deterministic_source(0))
    assert exc.value.param == param
    assert not acc.receipts and acc.spent == PureDP(0.0)


def test_refused_charge_draws_nothing():
    acc = Accountant(PureDP(0.5))
    with pytest.raises(dpkit.BudgetExceeded):
        priview(_binary(50, 8), 1.0, view_size=4, t=2, accountant=acc)
    assert not acc.receipts
