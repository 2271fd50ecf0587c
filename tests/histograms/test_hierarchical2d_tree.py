"""``hierarchical2d(inference='ls'|'nnls')`` on the b²-ary tree (issue #16): the exact tree solvers give the same
optimum as the general sparse solvers on the same noisy levels, with and without the root, padded or not."""

from __future__ import annotations

import numpy as np
import pytest

import dpkit
from dpkit.histograms import hierarchical2d
from dpkit.histograms import inference as inf
from dpkit.histograms.hierarchical import _dlap_variance
from dpkit.histograms.hierarchical2d import _strategy_2d


def _general(rel, b: int, inference: str) -> np.ndarray:
    p = rel.params
    depths, h, w = list(p["level_depths"]), p["height"], p["leaf_block"]
    m1, m2 = p["shape"]
    n = b**h
    idx = np.arange(n) * w
    keep = np.outer(idx < m1, idx < m2)
    a = _strategy_2d(b, depths, h, keep)
    y = np.concatenate([lv.ravel() for lv in rel.parts["levels"]]).astype(np.float64)
    var = np.repeat([_dlap_variance(t) for t in p["level_scales"]], [b ** (2 * j) for j in depths])
    leaf = np.zeros((n, n))
    leaf[keep] = (inf.least_squares if inference == "ls" else inf.nnls)(a, y, var)
    return leaf


@pytest.mark.parametrize("inference", ["ls", "nnls"])
@pytest.mark.parametrize(("shape", "b", "root", "depth"), [((8, 8), 2, False, None), ((8, 8), 2, True, None),
                                                           ((5, 7), 2, True, None), ((9, 9), 3, False, None),
                                                           ((16, 12), 2, False, 3), ((6, 6), 3, True, 1)])
def test_tree_solver_matches_the_general_solver(inference, shape, b, root, depth):
    rng = np.random.default_rng(sum(shape) + b)  # rng-ok: test data
    counts = rng.poisson(0.7, size=shape)  # sparse: nnls clips many leaves
    for seed in range(3):
        rel = hierarchical2d(counts, 0.5, branching=b, inference=inference, root=root, depth=depth,
                             rng=dpkit.deterministic_source(seed))
        want = _general(rel, b, inference)
        got = rel.parts["consistent_levels"][-1]
        assert np.allclose(got, want, atol=1e-6 * (1 + np.abs(want).max())), (seed, np.abs(got - want).max())
        if inference == "nnls":
            assert np.all(got >= 0)
