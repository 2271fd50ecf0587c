"""GkM: accuracy on separated clusters, the L1 sensitivity k d / m under coupled blocks (exact),
the auditor on a tiny instance, accounting, bad input."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from conftest import sized
from dpkit import PrivacyUnit, PureDP, Replace
from dpkit.audit import audit
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.noise import deterministic_source
from dpkit.stability import gkm

from .helpers import SECRET, assert_refused, charged_before_draw

K = importlib.import_module("dpkit.stability.kmeans")
SA = importlib.import_module("dpkit.stability.sample_and_aggregate")


def _clusters(seed, n=4000):
    gen = np.random.default_rng(seed)  # rng-ok: test data
    a = gen.normal([2.0, 2.0], 0.3, (n // 2, 2))
    b = gen.normal([8.0, 7.0], 0.3, (n // 2, 2))
    return np.concatenate([a, b])


def test_recovers_separated_clusters_and_interval():
    pts = _clusters(1)
    r = gkm(pts, 2, (0.0, 10.0), 4.0, blocks=100, init=[[1.0, 1.0], [9.0, 9.0]], rng=deterministic_source(2))
    assert r.value.shape == (2, 2)
    # noise per coordinate: Lap(k d w/(m eps)) = Lap(2 * 2 * 10 / 400) = Lap(0.1); tolerance 10 scales
    assert np.allclose(r.value, [[2.0, 2.0], [8.0, 7.0]], atol=1.0)
    lo, hi = r.interval(0.999)
    assert lo.shape == (2, 2) and (lo <= r.value).all() and (r.value <= hi).all()
    assert r.parts["blocks"] == 100 and r.cost == PureDP(4.0)


def test_l1_sensitivity_is_k_d_over_m_with_coupled_blocks():
    # m a power of two: appending a record keeps every other record's block; the block-averaged,
    # normalised centroids then move by at most k d / m in L1 (Li Eq 8.2 omits d)
    k, d, m = 3, 2, 8
    gen = np.random.default_rng(3)  # rng-ok: test data
    start = gen.uniform(0, 1, (k, d))
    worst = 0.0
    for seed in range(40):
        x = gen.uniform(0, 1, (int(gen.integers(1, 30)), d))
        y = np.concatenate([x, gen.uniform(0, 1, (1, d))])
        avgs = []
        for data in (x, y):
            labels = SA.assign_blocks(data.shape[0], m, deterministic_source(seed))
            avgs.append(K._block_average(data, labels, m, start, 5))
        worst = max(worst, float(np.abs(avgs[0] - avgs[1]).sum()))
    assert 0 < worst <= k * d / m
    assert K._sens(k, d, m, Replace()) == pytest.approx(k * d / m, rel=1e-9)
    assert K._sens(k, d, m, PrivacyUnit("u", 3)) == pytest.approx(3 * k * d / m, rel=1e-9)


@pytest.mark.slow
def test_auditor_does_not_flag_gkm():
    def mech(data, rng):
        return float(gkm(data, 1, (0.0, 1.0), 1.0, blocks=2, iterations=1, init=[[0.5]], rng=rng).value[0, 0])

    d = np.array([[0.0], [0.0], [0.0]])
    d_prime = np.array([[0.0], [0.0], [0.0], [1.0]])
    res = audit(mech, d, d_prime, trials=sized(600, 40_000), event=lambda o: o > 0.6, claimed_epsilon=1.0,
                confidence=1 - 1e-7, rng=deterministic_source(4))
    assert not res.flagged


@pytest.mark.parametrize("call", [
    lambda **k: gkm(_clusters(5, 400), 2, (0.0, 10.0), 0.8, blocks=5, **k),
    lambda **k: gkm(_clusters(5, 400), 2, (0.0, 10.0), 0.8, **k),
])
def test_charged_once_before_any_randomness(call):
    charged_before_draw(call, PureDP(1.0), PureDP(0.8))


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"points": [[SECRET, np.nan]]}, InvalidData, "points"),
    ({"points": [[SECRET, np.inf]]}, InvalidData, "points"),
    ({"points": np.zeros((2, 2, 2))}, InvalidData, "points"),
    ({"points": "abc"}, WrongType, "points"),
    ({"points": None}, WrongType, "points"),
    ({"k": 0}, InvalidParameter, "k"),
    ({"k": 1.5}, WrongType, "k"),
    ({"bounds": (1.0, 1.0)}, InvalidParameter, "bounds"),
    ({"bounds": ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])}, WrongType, "bounds"),
    ({"bounds": 3.0}, WrongType, "bounds"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"iterations": 0}, InvalidParameter, "iterations"),
    ({"blocks": 0}, InvalidParameter, "blocks"),
    ({"init": [[0.0, 0.0]]}, InvalidParameter, "init"),
    ({"init": [[0.0, np.nan], [1.0, 1.0]]}, InvalidParameter, "init"),
    ({"blocks": "auto", "count_share": 0.0}, InvalidParameter, "count_share"),
])
def test_bad_input_refused_before_anything(kwargs, err, param):
    base = {"points": [[SECRET, 1.0], [2.0, 3.0]], "k": 2, "bounds": (0.0, 1e6), "epsilon": 1.0, "blocks": 2}
    base.update(kwargs)
    assert_refused(gkm, base, err, param, budget=PureDP(10.0))


def test_lloyd_sorts_and_keeps_empty_clusters():
    c = K.lloyd(np.array([[0.9, 0.1], [0.95, 0.2]]), np.array([[0.9, 0.0], [0.1, 0.5]]), 3)
    assert c[0, 0] <= c[1, 0]
    assert np.allclose(c[0], [0.1, 0.5])  # the empty cluster kept its start
