"""KD-tree with noisy medians and the KD-hybrid (dpkit.histograms.kdtree)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from tests.histograms._helpers import BAD_2D, ONE_CHARGE, assert_relation_sensitivities

from conftest import sized
from dpkit.audit.testing import assert_charges_first, assert_refused_cleanly, chi2_pvalue
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.histograms import kd_hybrid, kd_tree
from dpkit.histograms.kdtree import _infer, _noisy_medians
from dpkit.mechanisms.discrete import discrete_laplace
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.noise import deterministic_source


# ------------------------------------------------------------------ oracle: the law of the tree shape
def node_options(d, rect, kind, pref, eps, sens):
    """Possible splits of one node with their probabilities (ideal exponential mechanism, exp(eps q / 2Δ))."""
    r0, r1, c0, c1 = rect
    if kind == "quad":
        return [(((r0 + r1) // 2, (c0 + c1) // 2), 1.0)]
    ext = (r1 - r0, c1 - c0)
    axis = pref if ext[pref] >= 2 else (1 - pref if ext[1 - pref] >= 2 else pref)
    lo, hi = (r0, r1) if axis == 0 else (c0, c1)
    if hi - lo < 2:
        return [((axis, hi), 1.0)]
    if hi - lo == 2:
        return [((axis, lo + 1), 1.0)]
    n = int(d[r0:r1, c0:c1].sum())
    opts = []
    for p in range(lo + 1, hi):
        left = int(d[r0:p, c0:c1].sum()) if axis == 0 else int(d[r0:r1, c0:p].sum())
        opts.append(((axis, p), -abs(2 * left - n)))
    top = max(q for _, q in opts)
    w = np.array([math.exp(eps * (q - top) / (2 * sens)) for _, q in opts])
    w /= w.sum()
    return [(o[0], float(x)) for o, x in zip(opts, w, strict=True)]


def children(rect, kind, split):
    r0, r1, c0, c1 = rect
    if kind == "quad":
        pr, pc = split
        return [(r0, pr, c0, pc), (r0, pr, pc, c1), (pr, r1, c0, pc), (pr, r1, pc, c1)]
    axis, p = split
    if axis == 0:
        return [(r0, p, c0, c1), (p, r1, c0, c1)]
    return [(r0, r1, c0, p), (r0, r1, p, c1)]


def shape_law(d, kinds, median_eps, sens):
    """{shape: probability}; a shape is a tuple over levels of the tuple of every node's split."""
    out: dict = {}

    def rec(level, nodes, kd_i, key, prob):
        if level == len(kinds):
            out[key] = out.get(key, 0.0) + prob
            return
        kind = kinds[level]
        eps = median_eps[kd_i] if kind == "kd" else None
        opts = [node_options(d, r, kind, kd_i % 2, eps, sens) for r in nodes]
        for combo in itertools.product(*opts):
            p = prob * math.prod(x for _, x in combo)
            splits = tuple(s for s, _ in combo)
            kids = [c for r, s in zip(nodes, splits, strict=True) for c in children(r, kind, s)]
            rec(level + 1, kids, kd_i + (kind == "kd"), (*key, splits), p)

    rec(0, [(0, d.shape[0], 0, d.shape[1])], 0, (), 1.0)
    return out


def released_shape(rel):
    key = []
    for kind, split in zip(rel.params["levels"], rel.parts["splits"], strict=True):
        a, b = split
        key.append(tuple((int(x), int(y)) for x, y in zip(a.tolist(), b.tolist(), strict=True)))
        assert kind in ("kd", "quad")
    return tuple(key)


def max_loss(p, q):
    worst = 0.0
    for k in set(p) | set(q):
        a, b = p.get(k, 0.0), q.get(k, 0.0)
        if (a == 0) != (b == 0):
            return math.inf
        if a > 0:
            worst = max(worst, abs(math.log(a) - math.log(b)))
    return worst


CASES = [
    # (grid, neighbour change: list of (cell, +1/-1)), tiny grids: 1x5 and 3x3
    (np.array([[3, 0, 4, 1, 2]]), [((0, 1), +1)]),
    (np.array([[3, 0, 4, 1, 2]]), [((0, 4), +1)]),
    (np.array([[2, 0, 1], [0, 3, 0], [1, 1, 2]]), [((1, 1), +1)]),
    (np.array([[2, 0, 1], [0, 3, 0], [1, 1, 2]]), [((0, 2), +1)]),
]


@pytest.mark.parametrize(("d", "change"), CASES)
@pytest.mark.parametrize(("fn", "kwargs"), [
    (kd_tree, {"depth": 2}), (kd_tree, {"depth": 3}),
    (kd_hybrid, {"kd_levels": 1, "quad_levels": 1}),
    (kd_hybrid, {"kd_levels": 1, "quad_levels": 1, "order": "quad_first"}),
])
@pytest.mark.parametrize("neighbours", [None, Replace()])
def test_exact_privacy_of_every_tree_shape(d, change, fn, kwargs, neighbours):
    d_prime = d.copy()
    for cell, delta in change:
        d_prime[cell] += delta
    if neighbours is not None:                 # replace-one: the added record left another cell
        d_prime.flat[int(np.argmax(d.ravel()))] -= 1
    eps = 1.5
    rel = fn(d, eps, neighbours=neighbours, median_share=0.5, rng=deterministic_source(1), **kwargs)
    sens = rel.params["sensitivity"]
    assert sens == (1 if neighbours is None else 2)
    kinds, med = rel.params["levels"], rel.params["median_epsilons"]
    p, q = shape_law(d, kinds, med, sens), shape_law(d_prime, kinds, med, sens)
    assert abs(sum(p.values()) - 1) < 1e-12
    assert max_loss(p, q) <= sum(med) * (1 + 1e-12)
    assert sum(med) + sum(rel.params["count_epsilons"]) <= eps
    # the released shapes are among the oracle's
    assert released_shape(rel) in p


def test_budget_per_level_is_needed():
    # a broken variant that gives EVERY KD level the whole median budget exceeds it
    d = np.array([[2, 1, 1, 2, 0, 3, 2, 2]])
    d_prime = d.copy()
    d_prime[0, 1] += 1
    kinds = ("kd", "kd", "kd")
    good = max_loss(shape_law(d, kinds, [1 / 3] * 3, 1), shape_law(d_prime, kinds, [1 / 3] * 3, 1))
    broken = max_loss(shape_law(d, kinds, [1.0] * 3, 1), shape_law(d_prime, kinds, [1.0] * 3, 1))
    assert 0.5 < good <= 1.0 and broken > 2.0


def test_replace_one_needs_sensitivity_two():
    # a moved record changes L - R by 2 within a node: calibrating to 1 breaks the per-level bound
    d = np.array([[3, 0, 3, 0, 0]])
    d_prime = np.array([[2, 0, 3, 1, 0]])
    med = [1.0]
    assert 0.5 < max_loss(shape_law(d, ("kd",), med, 2), shape_law(d_prime, ("kd",), med, 2)) <= 1.0
    assert max_loss(shape_law(d, ("kd",), med, 1), shape_law(d_prime, ("kd",), med, 1)) > 1.5


def test_non_private_medians_leak_the_shape():
    # power: the exact median (the exponential mechanism with an unbounded budget) is not DP at all
    d = np.array([[3, 0, 4, 1, 2]])
    d_prime = np.array([[3, 1, 4, 1, 2]])
    assert max_loss(shape_law(d, ("kd",), [1e6], 1), shape_law(d_prime, ("kd",), [1e6], 1)) == math.inf
    assert max_loss(shape_law(d, ("kd",), [1.0], 1), shape_law(d_prime, ("kd",), [1.0], 1)) <= 1.0


def test_tree_shape_law_matches_the_oracle():
    d = np.array([[3, 0, 4, 1, 2]])
    r = sized(1500, 10000)
    rng = deterministic_source(5)
    seen: dict = {}
    for _ in range(r):
        rel = kd_tree(d, 2.0, depth=2, median_share=0.5, rng=rng)
        k = released_shape(rel)
        seen[k] = seen.get(k, 0) + 1
    law = shape_law(d, rel.params["levels"], rel.params["median_epsilons"], 1)
    keys = sorted(law)
    assert set(seen) <= set(law)
    obs = [seen.get(k, 0) for k in keys]
    assert chi2_pvalue(obs, [law[k] for k in keys]) > 1e-7
    wrong = shape_law(d, rel.params["levels"], [2 * e for e in rel.params["median_epsilons"]], 1)
    assert chi2_pvalue(obs, [wrong[k] for k in keys]) < 1e-7


def test_batched_medians_have_the_exponential_mechanism_law():
    # three nodes of a level, drawn together, each with exactly the law of dpkit.mechanisms.exponential
    nodes = [np.array([-5.0, -1.0, 0.0, -2.0]), np.array([-3.0, -3.0]), np.array([0.0, -1.0, -4.0, -9.0, -2.0, -1.0])]
    scores = np.concatenate(nodes)
    lens = np.array([x.size for x in nodes])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    rng = deterministic_source(9)
    r = sized(3000, 20000)
    draws = np.stack([_noisy_medians(scores - 7.0, starts, lens, 1, 1.2, rng) for _ in range(r)])
    for j, x in enumerate(nodes):
        law = np.exp(SelectionLaw(x, 1.0, 1.2, 2).log_probs())
        obs = np.bincount(draws[:, j], minlength=x.size)
        assert chi2_pvalue(obs, law) > 1e-7
        ideal = np.exp(1.2 * x / 2)
        assert np.allclose(law, ideal / ideal.sum(), rtol=1e-5)
        if x.size > 2:
            wrong = np.exp(2.4 * x / 2)
            assert chi2_pvalue(obs, wrong / wrong.sum()) < 1e-7
    # nodes are independent: the joint of nodes 0 and 2 factorises
    joint = np.zeros((4, 6))
    np.add.at(joint, (draws[:, 0], draws[:, 2]), 1)
    from scipy.stats import chi2_contingency
    keep = joint.sum(axis=1) > 0
    assert chi2_contingency(joint[keep][:, joint.sum(axis=0) > 0]).pvalue > 1e-7


# ------------------------------------------------------------------ constrained inference
def tree_matrix(fanouts):
    """(nodes x leaves) 0/1 matrix, root first, children of node i at f*i .. f*i+f-1."""
    sizes = [1]
    for f in fanouts:
        sizes.append(sizes[-1] * f)
    m = sizes[-1]
    return np.concatenate([np.kron(np.eye(s), np.ones((1, m // s))) for s in sizes], axis=0), sizes


@pytest.mark.parametrize("fanouts", [[2, 2, 2], [2, 4], [4, 2, 2]])
def test_inference_is_the_generalised_least_squares_estimate(fanouts):
    t, sizes = tree_matrix(fanouts)
    g = np.random.default_rng(4)
    y = g.normal(10, 5, t.shape[0])
    var = g.uniform(0.2, 5.0, t.shape[0])
    cuts = np.cumsum([0, *sizes])
    est = _infer([y[cuts[i]:cuts[i + 1]] for i in range(len(sizes))],
                 [var[cuts[i]:cuts[i + 1]] for i in range(len(sizes))], fanouts)
    w = np.diag(1 / var)
    gls = t @ np.linalg.solve(t.T @ w @ t, t.T @ w @ y)
    assert np.allclose(np.concatenate(est), gls, atol=1e-9)


def test_inference_treats_empty_nodes_as_exact_zeros():
    fanouts = [2, 2]
    t, _ = tree_matrix(fanouts)
    g = np.random.default_rng(5)
    y = g.normal(10, 5, 7)
    var = g.uniform(0.5, 3.0, 7)
    y[6], var[6] = 0.0, 0.0                       # the last leaf is empty (known 0)
    est = _infer([y[:1], y[1:3], y[3:]], [var[:1], var[1:3], var[3:]], fanouts)
    assert est[2][3] == 0.0
    keep = [0, 1, 2, 3, 4, 5]                     # GLS with the empty leaf removed from the unknowns
    tt = t[keep][:, :3]
    w = np.diag(1 / var[keep])
    gls = tt @ np.linalg.solve(tt.T @ w @ tt, tt.T @ w @ y[keep])
    assert np.allclose(np.concatenate(est)[keep], gls, atol=1e-9)


def test_release_is_consistent_and_painted_per_leaf():
    g = np.random.default_rng(2)
    counts = g.poisson(3.0, (13, 9))
    for fn, kw in [(kd_tree, {"depth": 5}), (kd_hybrid, {"kd_levels": 2, "quad_levels": 2}),
                   (kd_hybrid, {"kd_levels": 2, "quad_levels": 2, "order": "quad_first"})]:
        rel = fn(counts, 1.0, rng=deterministic_source(3), **kw)
        assert rel.value.shape == (13, 9) and rel.value.dtype == np.float64
        est = rel.parts["consistent_levels"]
        fans = [2 if k == "kd" else 4 for k in rel.params["levels"]]
        for j, f in enumerate(fans):
            assert np.allclose(est[j + 1].reshape(-1, f).sum(axis=1), est[j], atol=1e-8)
        leaves = rel.parts["leaves"]
        area = (leaves[:, 1] - leaves[:, 0]) * (leaves[:, 3] - leaves[:, 2])
        assert area.sum() == 13 * 9                # the leaves partition the grid
        cover = np.zeros((13, 9), dtype=int)
        for (r0, r1, c0, c1), e, a in zip(leaves.tolist(), est[-1].tolist(), area.tolist(), strict=True):
            cover[r0:r1, c0:c1] += 1
            if a:
                assert np.allclose(rel.value[r0:r1, c0:c1], e / a, atol=1e-12)
            else:
                assert e == 0.0                     # empty leaves are exact zeros
        assert (cover == 1).all()
        assert abs(rel.value.sum() - est[0][0]) < 1e-8
        assert [x.dtype for x in rel.parts["levels"]] == [np.int64] * len(est)


def test_budget_split_geometric_and_equal():
    d = np.ones((8, 8), dtype=int)
    rel = kd_tree(d, 1.0, depth=4, median_share=0.2, rng=deterministic_source(1))
    med, cnt = rel.params["median_epsilons"], rel.params["count_epsilons"]
    assert len(med) == 4 and len(cnt) == 5
    assert all(abs(x - 0.05) < 1e-12 for x in med)
    for a, b in itertools.pairwise(cnt):
        assert abs(b / a - 2 ** (1 / 3)) < 1e-9
    assert abs(sum(cnt) - 0.8) < 1e-12 and sum(med) + sum(cnt) <= 1.0
    hyb = kd_hybrid(d, 1.0, kd_levels=1, quad_levels=2, allocation="geometric", rng=deterministic_source(1))
    c = hyb.params["count_epsilons"]
    assert abs(c[1] / c[0] - 2 ** (1 / 3)) < 1e-9 and abs(c[2] / c[1] - 4 ** (1 / 3)) < 1e-9
    eq = kd_tree(d, 1.0, depth=3, allocation="equal", rng=deterministic_source(1)).params["count_epsilons"]
    assert max(eq) - min(eq) < 1e-15


def test_hybrid_order_erratum_and_quadtree_midpoints():
    d = np.arange(64).reshape(8, 8) % 7
    rel = kd_hybrid(d, 1.0, kd_levels=2, quad_levels=1, rng=deterministic_source(1))
    assert rel.params["order"] == "kd_first" and rel.params["levels"] == ("kd", "kd", "quad")
    book = kd_hybrid(d, 1.0, kd_levels=2, quad_levels=1, order="quad_first", rng=deterministic_source(1))
    assert book.params["levels"] == ("quad", "kd", "kd")
    assert [x.tolist() for x in book.parts["splits"][0]] == [[4], [4]]       # data-independent midpoints
    assert np.allclose(book.params["median_epsilons"], rel.params["median_epsilons"], rtol=1e-12)


def clustered_128():
    g = np.random.default_rng(7)
    pts = np.concatenate([g.normal([40, 40], [3, 2], (20000, 2)), g.normal([90, 75], [12, 12], (20000, 2)),
                          g.uniform(0, 128, (20000, 2))])
    pts = np.clip(pts, 0, 127.99).astype(int)
    counts = np.zeros((128, 128), dtype=np.int64)
    np.add.at(counts, (pts[:, 0], pts[:, 1]), 1)
    r = np.sort(g.integers(0, 129, (1500, 2)), axis=1)
    c = np.sort(g.integers(0, 129, (1500, 2)), axis=1)
    ok = (r[:, 0] < r[:, 1]) & (c[:, 0] < c[:, 1])
    r, c = r[ok], c[ok]

    def answer(x):
        p = np.zeros((129, 129))
        p[1:, 1:] = np.asarray(x, float).cumsum(0).cumsum(1)
        return p[r[:, 1], c[:, 1]] - p[r[:, 0], c[:, 1]] - p[r[:, 1], c[:, 0]] + p[r[:, 0], c[:, 0]]

    return counts, answer


def test_kd_first_hybrid_beats_the_books_order_on_clustered_data():
    counts, answer = clustered_128()
    truth = answer(counts)
    rng = deterministic_source(13)
    err = {"kd_first": 0.0, "quad_first": 0.0}
    for _ in range(4):
        for order in err:
            est = kd_hybrid(counts, 0.1, kd_levels=4, quad_levels=4, order=order, rng=rng).value
            err[order] += float(np.mean(np.abs(answer(est) - truth)))
    assert err["kd_first"] < err["quad_first"]


def test_accuracy_sanity_trees_beat_identity_at_small_epsilon():
    counts, answer = clustered_128()
    truth = answer(counts)
    rng = deterministic_source(14)
    err = {"identity": 0.0, "kd_tree": 0.0, "kd_hybrid": 0.0}
    for _ in range(3):
        ident = np.asarray(discrete_laplace(counts, 1, 0.05, rng=rng).value, float)
        err["identity"] += float(np.mean(np.abs(answer(ident) - truth)))
        err["kd_tree"] += float(np.mean(np.abs(answer(kd_tree(counts, 0.05, rng=rng).value) - truth)))
        err["kd_hybrid"] += float(np.mean(np.abs(answer(kd_hybrid(counts, 0.05, rng=rng).value) - truth)))
    assert err["kd_tree"] < err["identity"] and err["kd_hybrid"] < err["identity"]


def test_large_totals_and_full_depth():
    counts = np.full((256, 256), 10**8 // 65536, dtype=np.int64)
    counts[100:120, 30:40] += 1000
    for fn, kw in [(kd_tree, {}), (kd_hybrid, {}), (kd_tree, {"depth": 16})]:
        rel = fn(counts, 1.0, rng=deterministic_source(2), **kw)
        assert rel.value.shape == (256, 256) and np.isfinite(rel.value).all()
        assert abs(rel.value.sum() - counts.sum()) < 1e4


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("fn", [kd_tree, kd_hybrid])
def test_one_charge_before_randomness_and_refusal_draws_nothing(fn):
    rel = assert_charges_first(fn, (np.arange(30).reshape(5, 6), 0.6), name=fn.__name__, **ONE_CHARGE)
    assert rel.value.dtype == np.float64 and rel.value.shape == (5, 6)


@pytest.mark.parametrize("fn", [kd_tree, kd_hybrid])
def test_neighbour_relations_set_the_sensitivity(fn):
    assert_relation_sensitivities(fn, np.arange(12).reshape(3, 4))


BAD = [
    *BAD_2D,
    ({"median_share": 0.0}, InvalidParameter, "median_share"),
    ({"median_share": 1.0}, InvalidParameter, "median_share"),
    ({"allocation": "linear"}, InvalidParameter, "allocation"),
]


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    *BAD, ({"depth": 0}, InvalidParameter, "depth"), ({"depth": 21}, InvalidParameter, "depth"),
    ({"depth": 2.5}, WrongType, "depth")])
def test_kd_tree_bad_input(kwargs, err, param):
    _bad(kd_tree, kwargs, err, param)


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    *BAD, ({"kd_levels": 0}, InvalidParameter, "kd_levels"), ({"quad_levels": -1}, InvalidParameter, "quad_levels"),
    ({"kd_levels": 10, "quad_levels": 6}, InvalidParameter, "quad_levels"),
    ({"order": "reversed"}, InvalidParameter, "order")])
def test_kd_hybrid_bad_input(kwargs, err, param):
    _bad(kd_hybrid, kwargs, err, param)


def _bad(fn, kwargs, err, param):
    assert_refused_cleanly(fn, ([[7, 12345], [3, 0]], 1.0), kwargs, error=err, param=param, secrets=("12345",))
