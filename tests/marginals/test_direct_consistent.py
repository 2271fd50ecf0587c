"""direct(consistent=True): the least-squares consistent marginals against an explicit pseudo-inverse on the full
table, their exact per-cell standard deviation against the explicit covariance, consistency, unbiasedness,
interval formulas and coverage, and typed refusals before any charge."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpkit import Accountant, NoInterval, PureDP, WrongType
from dpkit.audit.testing import assert_refused_cleanly
from dpkit.marginals import Domain, Records, all_kway, direct, marginal
from dpkit.noise import deterministic_source


def _records(sizes, n=50, seed=0):
    dom = Domain({f"x{i}": s for i, s in enumerate(sizes)})
    codes = np.random.default_rng(seed).integers(0, sizes, size=(n, len(sizes)))
    return Records(codes, dom)


def _operator(sizes, axes):
    """The marginal map from the full table (row-major cells) onto ``axes``."""
    cells = list(itertools.product(*[range(s) for s in sizes]))
    shape = tuple(sizes[j] for j in axes)
    m = np.zeros((math.prod(shape), len(cells)))
    for c, x in enumerate(cells):
        m[np.ravel_multi_index(tuple(x[j] for j in axes), shape), c] = 1.0
    return m


CASES = [
    ((3, 2, 4), [("x0", "x1"), ("x0", "x2"), ("x1", "x2")], "gaussian"),
    ((3, 2, 4), [("x0", "x1"), ("x2",)], "laplace"),
    ((2, 3, 1, 5), [("x0", "x1", "x2"), ("x1", "x3"), ("x0",)], "gaussian"),
    ((4, 3, 2), [("x0", "x1", "x2"), ("x0", "x1"), ("x2",)], "laplace"),
    ((3, 3, 3, 2), [("x0", "x1"), ("x1", "x2"), ("x2", "x3"), ("x0", "x3")], "gaussian"),
]


@pytest.mark.parametrize(("sizes", "work", "noise"), CASES)
def test_value_is_the_least_squares_projection_with_the_stated_cell_std(sizes, work, noise):
    rec = _records(sizes)
    budget = {"rho": 0.1} if noise == "gaussian" else {"epsilon": 0.5}
    rel = direct(rec, work, consistent=True, rng=deterministic_source(3), **budget)
    raw = direct(rec, work, rng=deterministic_source(3), **budget)  # the same draws, unprojected
    sets = list(raw.value)
    for a in sets:
        np.testing.assert_array_equal(rel.parts["noisy"][a], raw.value[a])
    axes = [rec.domain.axes(a) for a in sets]
    m = np.vstack([_operator(sizes, ax) for ax in axes])
    y = np.concatenate([raw.value[a].ravel() for a in sets])
    x_hat = np.linalg.pinv(m) @ y
    cov = np.linalg.pinv(m.T @ m)  # per unit noise variance
    s = raw.params["noise_std"]
    for a, ax in zip(sets, axes, strict=True):
        op = _operator(sizes, ax)
        np.testing.assert_allclose(rel.value[a].ravel(), op @ x_hat, atol=1e-9)
        var = np.diag(op @ cov @ op.T)
        np.testing.assert_allclose(var, var[0], rtol=1e-9)
        assert rel.parts["cell_std"][a] == pytest.approx(s * math.sqrt(var[0]), rel=1e-9)
        assert var[0] <= 1.0 + 1e-12
    assert rel.params["noise_std"] == max(rel.parts["cell_std"].values())
    assert rel.params["measured_noise_std"] == s and rel.params["consistent"] is True
    assert rel.noise is None and rel.scale is None and rel.cost == raw.cost


def test_consistent_unbiased_and_exact_without_noise():
    rec = _records((3, 2, 4), n=80, seed=1)
    work = all_kway(rec.domain, 2)
    rel = direct(rec, work, 0.3, consistent=True, rng=deterministic_source(2))
    v = rel.value
    np.testing.assert_allclose(v[("x0", "x1")].sum(axis=1), v[("x0", "x2")].sum(axis=1), atol=1e-9)
    np.testing.assert_allclose(v[("x0", "x2")].sum(axis=0), v[("x1", "x2")].sum(axis=0), atol=1e-9)
    np.testing.assert_allclose(v[("x0", "x1")].sum(), v[("x1", "x2")].sum(), atol=1e-9)
    exact = direct(rec, work, 1e9, consistent=True, rng=deterministic_source(2))  # noise scale 3e-9: zero
    for a in work:
        np.testing.assert_allclose(exact.value[a], marginal(rec, a), atol=1e-9)


def test_a_set_sharing_no_attribute_keeps_its_raw_cells():
    rec = _records((3, 2, 4), seed=2)
    rel = direct(rec, [("x0", "x1"), ("x2",)], rho=0.5, consistent=True, rng=deterministic_source(4))
    # the only constraint is the common total: each set moves by the mean total difference, spread evenly
    y1, y2 = rel.parts["noisy"][("x0", "x1")], rel.parts["noisy"][("x2",)]
    t = (y1.sum() / 6 + y2.sum() / 4) / (1 / 6 + 1 / 4)
    np.testing.assert_allclose(rel.value[("x2",)], y2 + (t - y2.sum()) / 4, atol=1e-9)
    np.testing.assert_allclose(rel.value[("x0", "x1")], y1 + (t - y1.sum()) / 6, atol=1e-9)


def test_interval_formulas_and_no_simultaneous_interval():
    rec = _records((3, 2, 4), seed=3)
    work = all_kway(rec.domain, 2)
    g = direct(rec, work, rho=0.2, consistent=True, rng=deterministic_source(5))
    lo, hi = g.interval(0.9)
    sigma = direct(rec, work, rho=0.2, rng=deterministic_source(5)).scale
    for a in work:
        v = (g.parts["cell_std"][a] / g.params["measured_noise_std"]) ** 2
        w = sigma * math.sqrt(2 * v * math.log(2 / 0.1))
        np.testing.assert_allclose(hi[a] - g.value[a], w, rtol=1e-6)
        np.testing.assert_allclose(g.value[a] - lo[a], w, rtol=1e-6)
    lap = direct(rec, work, 1.0, consistent=True, rng=deterministic_source(5))
    lo, hi = lap.interval(0.95)
    for a in work:
        np.testing.assert_allclose(hi[a] - lap.value[a], lap.parts["cell_std"][a] / math.sqrt(0.05), rtol=1e-6)
    with pytest.raises(NoInterval):
        lap.interval(0.95, simultaneous=True)


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_interval_coverage(noise):
    rec = _records((3, 2, 2), n=60, seed=4)
    work = all_kway(rec.domain, 2)
    truth = {a: marginal(rec, a) for a in work}
    src = deterministic_source(6)
    budget = {"rho": 0.5} if noise == "gaussian" else {"epsilon": 1.0}
    hits = total = 0
    for _ in range(300):
        rel = direct(rec, work, consistent=True, rng=src, **budget)
        lo, hi = rel.interval(0.8)
        for a in work:
            hits += int(((lo[a] <= truth[a]) & (truth[a] <= hi[a])).sum())
            total += truth[a].size
    assert hits / total >= 0.8  # conservative intervals: observed coverage is well above 0.8


def test_bad_consistent_is_refused_before_any_charge():
    rec = _records((3, 2))
    acct = Accountant(PureDP(5.0))
    assert_refused_cleanly(direct, (rec, [("x0",)], 1.0), {"consistent": "yes"}, error=WrongType,
                           param="consistent")
    direct(rec, [("x0",)], 1.0, consistent=True, accountant=acct, rng=deterministic_source(1))
    assert [r.mechanism for r in acct.receipts] == ["direct"]
