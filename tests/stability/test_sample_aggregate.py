"""Sample-and-aggregate: exactly ``blocks`` blocks, empty blocks, per-record assignment, exact privacy with
the block assignment fixed by a seeded source, accuracy, the generalised version, accounting, bad input."""

from __future__ import annotations

import importlib
import importlib.util
import math

import numpy as np
import pytest

from dpkit import Accountant, PrivacyUnit, PureDP, Replace
from dpkit.audit import DiscreteLaplace, Lattice, max_privacy_loss
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms import laplace_scale
from dpkit.noise import deterministic_source
from dpkit.stability import li_block_count, sample_aggregate

SA = importlib.import_module("dpkit.stability.sample_and_aggregate")  # the module (the package exports the function)

from .helpers import SECRET, assert_refused, charged_before_draw  # noqa: E402


def test_book_chunking_bug_numbers():
    # Near & Abuah: chunk_size = ceil(n/k), contiguous slices -> fewer than k chunks, noise for k
    n = 32561
    for k, chunks in ((6000, 5427), (1000, 987), (10, 10)):
        size = math.ceil(n / k)
        assert len(range(0, n, size)) == chunks
    assert li_block_count(32561) == 63 and li_block_count(0) == 1


def test_exactly_blocks_blocks_and_empty_blocks_get_the_default():
    rng = deterministic_source(1)
    labels = SA.assign_blocks(3, 10, rng)
    assert labels.min() >= 0 and labels.max() < 10
    data = np.array([4.0, 4.0, 4.0])
    outs = SA.block_outputs(data, labels, 10, np.mean, empty_value=-1.0)
    assert outs.size == 10
    nonempty = np.bincount(labels, minlength=10) > 0
    assert (outs[~nonempty] == -1.0).all() and (outs[nonempty] == 4.0).all()
    r = sample_aggregate([4.0] * 3, np.mean, (0.0, 4.0), 1.0, blocks=10, rng=deterministic_source(2))
    assert r.parts["blocks"] == 10
    assert r.scale == pytest.approx(4.0 / 10 / 1.0, rel=1e-5)  # the noise uses the public 10


def test_assignment_is_uniform_and_per_record():
    labels = SA.assign_blocks(200_000, 7, deterministic_source(3))
    counts = np.bincount(labels, minlength=7)
    from scipy import stats

    assert stats.chisquare(counts).pvalue > 1e-7
    # appending a record never moves the others (power-of-two block counts draw one word per record)
    a = SA.assign_blocks(50, 8, deterministic_source(4))
    b = SA.assign_blocks(51, 8, deterministic_source(4))
    assert (a == b[:50]).all()


@pytest.mark.parametrize("nb", [None, Replace()])
def test_exact_privacy_with_coupled_blocks(nb):
    # block assignment fixed by the seed (m a power of two: the common records keep their blocks);
    # the release law is then the lattice Laplace law at the clipped block mean: compute the exact loss.
    eps, m, lo, hi = 0.8, 8, 0.0, 10.0
    gen = np.random.default_rng(5)  # rng-ok: test data
    sens = SA._sensitivity(lo, hi, m, nb or __import__("dpkit").AddRemove())
    g, scale = laplace_scale(sens, eps)
    worst = 0.0
    for seed in range(30):
        x = gen.uniform(-5, 15, int(gen.integers(1, 40)))
        if nb is None:
            y = np.append(x, gen.uniform(-5, 15))  # add one record at the end
        else:
            y = x.copy()
            y[int(gen.integers(0, x.size))] = gen.uniform(-5, 15)  # replace one record
        means = []
        for data in (x, y):
            labels = SA.assign_blocks(data.size, m, deterministic_source(seed))
            outs = np.clip(SA.block_outputs(data, labels, m, np.median, (lo + hi) / 2), lo, hi)
            means.append(math.fsum(outs.tolist()) / m)
        assert abs(means[0] - means[1]) <= (hi - lo) / m + 1e-12
        # two discrete Laplace laws of the same scale t at centres r, r': the largest pmf ratio is exactly
        # exp(|r - r'|/t) (attained outside the centres); check it with the exact calculator too
        r1, r2 = (int(np.rint(v / g)) for v in means)
        worst = max(worst, abs(r1 - r2) / (scale / g))
        if seed < 3:
            laws = [Lattice(DiscreteLaplace(r, scale / g), g) for r in (r1, r2)]
            pts = g * np.array([min(r1, r2) - 5, min(r1, r2), max(r1, r2), max(r1, r2) + 5])
            loss = max_privacy_loss(laws[0], laws[1], grid=pts).loss
            assert loss == pytest.approx(abs(r1 - r2) / (scale / g), rel=1e-6, abs=1e-12)
    assert worst <= eps


def test_accuracy_and_interval():
    x = np.random.default_rng(6).normal(40, 10, 20_000)  # rng-ok: test data
    rng = deterministic_source(7)
    reps = 100
    vals = np.array([sample_aggregate(x, np.mean, (20.0, 80.0), 1.0, blocks=500, rng=rng).value for _ in range(reps)])
    scale = 60.0 / 500 / 1.0
    # centre: the mean of 500 block means (~ the data mean) ; noise: Laplace(0.12)
    assert abs(np.mean(vals) - x.mean()) < 6 * scale * math.sqrt(2 / reps) + 0.05
    assert 0.7 * scale < np.mean(np.abs(vals - x.mean())) < 1.3 * scale + 0.02
    r = sample_aggregate(x, np.mean, (20.0, 80.0), 1.0, blocks=500, rng=rng)
    lo, hi = r.interval(0.999)
    assert lo < x.mean() < hi


def test_auto_blocks_use_a_noisy_count_and_are_charged():
    acct = Accountant(PureDP(1.0))
    x = np.full(10_000, 40.0)
    r = sample_aggregate(x, np.mean, (20.0, 80.0), 1.0, accountant=acct, rng=deterministic_source(8))
    assert "noisy_count" in r.parts and abs(r.parts["noisy_count"] - 10_000) < 200
    assert r.parts["blocks"] == li_block_count(r.parts["noisy_count"])
    assert acct.spent == PureDP(1.0) and len(acct.receipts) == 1
    assert r.params["epsilon_count"] + r.params["epsilon_aggregate"] <= 1.0
    r = sample_aggregate(x, np.mean, (20.0, 80.0), 1.0, neighbours=Replace(), rng=deterministic_source(8))
    assert "noisy_count" not in r.parts and r.parts["blocks"] == li_block_count(10_000)  # n public under replace


def test_privacy_unit_multiplies_the_sensitivity():
    r = sample_aggregate(np.ones(100), np.mean, (0.0, 1.0), 1.0, blocks=50, neighbours=PrivacyUnit("u", 3),
                         rng=deterministic_source(9))
    assert r.scale == pytest.approx(3 / 50, rel=1e-5)


def test_generalised_sample_and_aggregate_finds_bounds():
    if importlib.util.find_spec("dpkit.stats.bounds") is None:
        pytest.skip("dpkit.stats.bounds (bounds_for) not available yet")
    x = np.random.default_rng(10).normal(40, 10, 20_000)  # rng-ok: test data
    acct = Accountant(PureDP(2.0))
    r = sample_aggregate(x, np.mean, None, 2.0, blocks=400, bounds_candidates=np.arange(20.0, 100.0, 2.0),
                         bounds_origin=20.0 - 1.0, accountant=acct, rng=deterministic_source(11))
    lo, hi = r.parts["output_bounds"]
    assert lo < x.mean() < hi and hi - lo < 40
    assert abs(r.value - x.mean()) < 5.0
    assert acct.spent == PureDP(2.0) and len(acct.receipts) == 1
    assert r.params["epsilon_bounds"] + r.params["epsilon_aggregate"] <= 2.0


@pytest.mark.parametrize("call", [
    lambda **k: sample_aggregate(np.arange(100.0), np.mean, (0.0, 100.0), 0.8, blocks=10, **k),
    lambda **k: sample_aggregate(np.arange(100.0), np.median, (0.0, 100.0), 0.8, **k),
])
def test_charged_once_before_any_randomness(call):
    charged_before_draw(call, PureDP(1.0), PureDP(0.8))


@pytest.mark.parametrize(("kwargs", "err", "param"), [
    ({"values": [SECRET, float("nan")]}, InvalidData, "values"),
    ({"values": [SECRET, None]}, InvalidData, "values"),
    ({"values": [SECRET, float("inf")]}, InvalidData, "values"),
    ({"values": "abc"}, WrongType, "values"),
    ({"values": np.array([[SECRET, np.nan]])}, InvalidData, "values"),
    ({"func": 3}, WrongType, "func"),
    ({"output_bounds": (1.0, 1.0)}, InvalidParameter, "output_bounds"),
    ({"output_bounds": (2.0, 1.0)}, InvalidParameter, "output_bounds"),
    ({"output_bounds": "ab"}, WrongType, "output_bounds"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"blocks": 0}, InvalidParameter, "blocks"),
    ({"blocks": "many"}, InvalidParameter, "blocks"),
    ({"blocks": 2.5}, WrongType, "blocks"),
    ({"empty_value": 5.0}, InvalidParameter, "empty_value"),
    ({"blocks": "auto", "count_share": 1.0}, InvalidParameter, "count_share"),
    ({"output_bounds": None, "bounds_share": 0.0}, InvalidParameter, "bounds_share"),
    ({"output_bounds": None, "bounds_candidates": [3.0, 2.0]}, InvalidParameter, "bounds_candidates"),
    ({"output_bounds": None, "bounds_candidates": [1.0, 2.0], "bounds_origin": 5.0}, InvalidParameter,
     "bounds_candidates"),
    ({"output_bounds": None, "bounds_origin": float("nan")}, InvalidParameter, "bounds_origin"),
    ({"description": 1}, WrongType, "description"),
])
def test_bad_input_refused_before_anything(kwargs, err, param):
    base = {"values": [SECRET, 2.0, 3.0], "func": np.mean, "output_bounds": (0.0, 4.0), "epsilon": 1.0,
            "blocks": 4}
    base.update(kwargs)
    assert_refused(sample_aggregate, base, err, param, budget=PureDP(10.0))


def test_two_dimensional_records():
    rows = np.column_stack([np.full(1000, 2.0), np.full(1000, 3.0)])
    r = sample_aggregate(rows, lambda b: float(b[:, 0].mean() + b[:, 1].mean()), (0.0, 10.0), 1.0, blocks=20,
                         rng=deterministic_source(12))
    assert abs(r.value - 5.0) < 3.0
