"""Inference from noisy marginals (dpkit.marginals.inference): exact fits, dense references, exact sampling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import nnls

import dpkit
from dpkit.core.errors import DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.marginals import Domain, marginal
from dpkit.marginals.inference import GraphicalModel, Measurement, estimate


def _dense_marginal(dom: Domain, joint: np.ndarray, attrs: tuple[str, ...]) -> np.ndarray:
    axes = tuple(i for i, a in enumerate(dom.attrs) if a not in attrs)
    return joint.sum(axis=axes)


def _matrix(dom: Domain, attrs: tuple[str, ...]) -> np.ndarray:
    """The 0/1 matrix mapping the flattened full table to the flattened marginal on ``attrs``."""
    cells = dom.size()
    idx = np.array(np.unravel_index(np.arange(cells), dom.shape))
    sub = np.ravel_multi_index(tuple(idx[list(dom.axes(attrs))]), dom.shape_of(attrs))
    m = np.zeros((dom.size(attrs), cells))
    m[sub, np.arange(cells)] = 1.0
    return m


def test_noiseless_tree_distribution_is_fitted_exactly():
    rs = np.random.default_rng(0)
    dom = Domain({"a": 3, "b": 4, "c": 2, "d": 5})
    pab = rs.dirichlet(np.ones(12)).reshape(3, 4)
    pc = rs.dirichlet(np.ones(2), size=4)
    pd = rs.dirichlet(np.ones(5), size=4)
    joint = 1000.0 * np.einsum("ab,bc,bd->abcd", pab, pc, pd)
    sets = [("a", "b"), ("b", "c"), ("b", "d")]
    ms = [Measurement(s, _dense_marginal(dom, joint, s), 1.0) for s in sets]
    model = estimate(dom, ms, iters=500)
    assert model.total == pytest.approx(1000.0)
    for s in [*sets, ("a", "c", "d"), ("a", "d"), ("c",), ("a", "b", "c", "d")]:
        np.testing.assert_allclose(model.project(s), _dense_marginal(dom, joint, s), atol=1e-6)


def test_noisy_fit_matches_dense_least_squares_and_maximum_entropy():
    rs = np.random.default_rng(1)
    dom = Domain({"a": 2, "b": 3, "c": 4, "d": 2})
    n = 5000.0
    joint = rs.dirichlet(np.full(dom.size(), 3.0)).reshape(dom.shape) * n
    sets = [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d"), ("a",)]
    stds = [5.0, 3.0, 8.0, 4.0, 2.0]
    ms, rows, rhs = [], [], []
    for s, sd in zip(sets, stds, strict=True):
        m = _matrix(dom, s)
        y = m @ joint.ravel() + rs.normal(0.0, sd, m.shape[0])
        ms.append(Measurement(s, y.reshape(dom.shape_of(s)), sd))
        rows.append(m / sd)
        rhs.append(y / sd)
    # dense weighted least squares over all non-negative tables of total n (the sum as a heavy row)
    a = np.vstack([*rows, 1e4 * np.ones((1, dom.size()))])
    x, _ = nnls(a, np.concatenate([*rhs, [1e4 * n]]), maxiter=10_000)
    model = estimate(dom, ms, total=n, iters=1000)

    def loss(fn):
        return sum(0.5 * np.sum(((fn(s) - m.values.ravel()) / m.std) ** 2) for s, m in zip(sets, ms, strict=True))

    assert loss(lambda s: model.project(s).ravel()) <= loss(lambda s: _matrix(dom, s) @ x) + 1e-6
    for s in sets:  # the optimal measured marginals are unique (strictly convex in them)
        np.testing.assert_allclose(model.project(s).ravel(), _matrix(dom, s) @ x, atol=1e-3)
    # the model's joint is the maximum-entropy table with those marginals (dense IPF from uniform)
    q = np.full(dom.size(), n / dom.size())
    for _ in range(500):
        for s in [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")]:
            m = _matrix(dom, s)
            q = q * (m.T @ ((m @ x) / (m @ q)))
    np.testing.assert_allclose(model.project(dom.attrs).ravel(), q, rtol=1e-4)


def test_projection_of_non_clique_sets_is_exact_marginalisation():
    rs = np.random.default_rng(2)
    dom = Domain({"a": 2, "b": 3, "c": 2, "d": 3, "e": 2})
    pots = {("a", "b"): rs.normal(size=(2, 3)), ("b", "c"): rs.normal(size=(3, 2)),
            ("c", "d"): rs.normal(size=(2, 3)), ("d", "e"): rs.normal(size=(3, 2))}
    model = GraphicalModel(dom, pots, 123.0)
    grids = np.meshgrid(*[np.arange(k) for k in dom.shape], indexing="ij")
    logp = sum(th[tuple(grids[dom.attrs.index(a)] for a in c)] for c, th in pots.items())
    joint = np.exp(logp - logp.max())
    joint = 123.0 * joint / joint.sum()
    for s in [("a", "e"), ("a", "c", "e"), ("b", "d"), ("a", "b", "c", "d", "e"), ("e",), ()]:
        np.testing.assert_allclose(model.project(s), _dense_marginal(dom, joint, s), rtol=1e-10, atol=1e-12)
    assert model.junction_tree and set(model.cliques) == set(pots)


@pytest.mark.parametrize("method", ["sample", "round"])
def test_synthetic_records_follow_the_model_without_artefacts(method):
    rs = np.random.default_rng(3)
    dom = Domain({"a": 3, "b": 4, "c": 3})
    # a chain a - b - c: a and c are independent given b
    pots = {("a", "b"): rs.normal(size=(3, 4)), ("b", "c"): rs.normal(size=(4, 3))}
    model = GraphicalModel(dom, pots, 1.0)
    n = 60_000
    recs = model.synthetic(n, dpkit.deterministic_source(11), method=method)
    assert len(recs) == n and recs.domain == dom
    for s in [("a", "b"), ("b", "c"), ("a", "b", "c")]:
        obs = marginal(recs, s).ravel()
        exp = model.project(s).ravel() * n
        _, p = stats.chisquare(obs, exp)
        assert p > 1e-7, (s, p)
    # no correlation the model lacks: within each b, a and c independent (chi-square on the a x c tables)
    for b in range(4):
        rows = recs.codes[recs.codes[:, 1] == b]
        table = np.zeros((3, 3))
        np.add.at(table, (rows[:, 0], rows[:, 2]), 1)
        _, p, _, _ = stats.chi2_contingency(table)
        assert p > 1e-7, (b, p)
    # no row-order artefact: consecutive rows are independent (a of row i vs c of row i+1)
    table = np.zeros((3, 3))
    np.add.at(table, (recs.codes[:-1, 0], recs.codes[1:, 2]), 1)
    assert stats.chi2_contingency(table)[1] > 1e-7


def test_round_method_counts_are_near_their_expectations():
    dom = Domain({"a": 4})
    model = GraphicalModel(dom, {("a",): np.log([0.1, 0.2, 0.3, 0.4])}, 1.0)
    counts = marginal(model.synthetic(1000, dpkit.deterministic_source(1), method="round"), ["a"])
    np.testing.assert_allclose(counts, [100, 200, 300, 400], atol=1)


def test_synthetic_is_reproducible_with_a_seeded_source():
    dom = Domain({"a": 3, "b": 2})
    model = GraphicalModel(dom, {("a", "b"): np.arange(6.0).reshape(3, 2) / 5}, 10.0)
    r1 = model.synthetic(50, dpkit.deterministic_source(5)).codes
    r2 = model.synthetic(50, dpkit.deterministic_source(5)).codes
    np.testing.assert_array_equal(r1, r2)


def test_total_is_estimated_from_the_measurements_by_inverse_variance():
    dom = Domain({"a": 2, "b": 2})
    m1 = Measurement(("a",), np.array([40.0, 60.0]), 1.0)  # total 100, variance 2
    m2 = Measurement(("a", "b"), np.array([[25.0, 25.0], [30.0, 30.0]]), 1.0)  # total 110, variance 4
    model = estimate(dom, [m1, m2], iters=5)
    assert model.total == pytest.approx((100 / 2 + 110 / 4) / (1 / 2 + 1 / 4))


def test_query_measurements_and_the_l1_loss():
    dom = Domain({"a": 3})
    q = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    m = Measurement(("a",), np.array([70.0, 30.0, 20.0]), 1.0, q)
    model = estimate(dom, [m], iters=300)
    np.testing.assert_allclose(model.project(["a"]), [20.0, 50.0, 30.0], atol=1e-4)
    l1 = estimate(dom, [Measurement(("a",), np.array([20.0, 50.0, 30.0]), 1.0)], total=100.0, iters=300, loss="l1")
    np.testing.assert_allclose(l1.project(["a"]), [20.0, 50.0, 30.0], atol=1.0)


def test_warm_start_and_extra_cliques():
    rs = np.random.default_rng(4)
    dom = Domain({"a": 2, "b": 3, "c": 2})
    joint = rs.dirichlet(np.ones(12)).reshape(2, 3, 2) * 500
    m1 = Measurement(("a", "b"), _dense_marginal(dom, joint, ("a", "b")), 1.0)
    first = estimate(dom, [m1], iters=200, cliques=[("b", "c")])
    assert ("b", "c") in first.cliques
    m2 = Measurement(("b", "c"), _dense_marginal(dom, joint, ("b", "c")), 1.0)
    again = estimate(dom, [m1, m2], iters=0, warm_start=first)
    np.testing.assert_allclose(again.project(["a", "b"]), first.project(["a", "b"]))
    second = estimate(dom, [m1, m2], iters=300, warm_start=first)
    np.testing.assert_allclose(second.project(["b", "c"]), m2.values, atol=1e-6)


def test_bad_measurements_are_refused_with_typed_errors():
    dom = Domain({"a": 2, "b": 3})
    good = np.ones((2, 3))
    with pytest.raises(InvalidParameter):
        estimate(dom, [Measurement(("a", "z"), good, 1.0)])
    with pytest.raises(InvalidParameter):
        estimate(dom, [Measurement(("b", "a"), good.T, 1.0)])  # not in domain order
    with pytest.raises(InvalidData):
        estimate(dom, [Measurement(("a", "b"), np.ones((3, 2)), 1.0)])
    with pytest.raises(InvalidData):
        estimate(dom, [Measurement(("a", "b"), np.ones(5), 1.0)])
    for std in (0.0, -1.0, float("nan")):
        with pytest.raises(InvalidParameter):
            Measurement(("a",), np.ones(2), std)
    with pytest.raises(InvalidData):
        Measurement(("a",), np.array([1.0, np.nan]), 1.0)
    with pytest.raises(WrongType):
        estimate(dom, [("a", np.ones(2), 1.0)])
    with pytest.raises(InvalidData):
        Measurement(("a",), np.ones(2), 1.0, np.ones((3, 2)))
    with pytest.raises(InvalidParameter, match="iters"):
        estimate(dom, [Measurement(("a",), np.ones(2), 1.0)], iters=10**9)
    with pytest.raises(InvalidParameter, match="total"):
        estimate(dom, [], iters=1)


def test_too_large_junction_tree_is_refused_naming_its_size():
    dom = Domain({f"x{i}": 10 for i in range(8)})
    ms = [Measurement((a, b), np.ones((10, 10)), 1.0) for i, a in enumerate(dom.attrs) for b in dom.attrs[i + 1:]]
    with pytest.raises(InvalidParameter, match=r"100000000 cells over 8 attributes \(tree width 7\)") as err:
        estimate(dom, ms, total=10.0, iters=1)
    assert isinstance(err.value, DPKitError)
    # the same cycle fits under a raised limit on a smaller domain
    small = Domain({"a": 2, "b": 2, "c": 2})
    cyc = [Measurement(s, np.full((2, 2), 5.0), 1.0) for s in [("a", "b"), ("b", "c"), ("a", "c")]]
    with pytest.raises(InvalidParameter, match="8 cells"):
        estimate(small, cyc, iters=1, max_cells=4)
    assert estimate(small, cyc, iters=10).total == pytest.approx(20.0)


def test_model_constructor_validates():
    dom = Domain({"a": 2, "b": 3})
    with pytest.raises(InvalidParameter):
        GraphicalModel(dom, {("a",): np.zeros(3)}, 1.0)
    with pytest.raises(InvalidParameter):
        GraphicalModel(dom, {("a",): np.zeros(2)}, -1.0)
    with pytest.raises(InvalidData):
        GraphicalModel(dom, {("a",): [np.nan, 0.0]}, 1.0)
    model = GraphicalModel(dom, {("a",): np.log([0.25, 0.75])}, 8.0)
    np.testing.assert_allclose(model.project(["a", "b"]), [[2 / 3] * 3, [2.0] * 3])
    with pytest.raises(InvalidParameter):
        model.synthetic(10, dpkit.deterministic_source(1), method="bogus")


def test_warm_started_fits_with_vanishing_cells_stay_finite_and_optimal():
    """Regression (2026-11-27): noisy 3-way measurements of small cells drive those cells' mass to about 0 in a
    warm start, where the preconditioned direction g / p is unbounded; an accepted step then set
    log-potentials of about 1e298, belief propagation cancelled to all-zero tables and the marginals were NaN
    (smg on NLTCS). Now a preconditioned step moves no log-potential by more than 32 nats: the potentials stay
    moderate, every marginal is finite, and the final fit reaches the dense least-squares optimum."""
    dom = Domain({"a": 2, "b": 2, "c": 2, "d": 2})
    g = np.random.default_rng(2)  # seeds 2, 3 and 5 broke the previous code (test data only)
    n = 20000.0
    p = g.dirichlet(np.ones(16) * 0.3).reshape(2, 2, 2, 2)
    ms = [Measurement((a,), _dense_marginal(dom, n * p, (a,)) + g.normal(0, 200.0, 2), 200.0) for a in "abcd"]
    model = estimate(dom, ms, total=n, iters=50)
    for s in [("a", "b", "c"), ("b", "c", "d"), ("a", "c", "d")]:
        ms.append(Measurement(s, _dense_marginal(dom, n * p, s) + g.normal(0, 300.0, (2, 2, 2)), 300.0))
        model = estimate(dom, ms, total=n, iters=50, warm_start=model)
        assert max(float(np.abs(t).max()) for t in model.potentials.values()) < 1e4
        for k in (1, 2, 3):
            for attrs in itertools.combinations(dom.attrs, k):
                v = model.project(attrs)
                assert np.all(np.isfinite(v)) and v.sum() == pytest.approx(n)
    model = estimate(dom, ms, total=n, iters=2000, warm_start=model)
    rows = [_matrix(dom, m.attrs) / m.std for m in ms]
    rhs = [m.values.ravel() / m.std for m in ms]
    x, _ = nnls(np.vstack([*rows, 1e4 * np.ones((1, dom.size()))]), np.concatenate([*rhs, [1e4 * n]]),
                maxiter=10_000)

    def loss(fn):
        return sum(0.5 * np.sum(((fn(m.attrs) - m.values.ravel()) / m.std) ** 2) for m in ms)

    best = loss(lambda s: _matrix(dom, s) @ x)
    assert loss(lambda s: model.project(s).ravel()) <= best * (1 + 1e-4) + 1e-6
