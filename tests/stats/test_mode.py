"""The mode among public candidates (dpkit.stats.mode): exact privacy under each neighbour relation,
the output law of the public function, accuracy, bad input and accounting."""

from __future__ import annotations

import importlib
import itertools
import math

import numpy as np
import pytest

from dpkit import Accountant, AddRemove, PrivacyUnit, PureDP, Replace
from dpkit.audit.testing import CountingSource, chi2_pvalue, watch_charges
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.mechanisms.selection import SelectionLaw
from dpkit.noise import deterministic_source
from dpkit.stats.modes import mode, mode_count_error

# the module itself (dpkit.stats may export the function mode under the same name)
M = importlib.import_module("dpkit.stats.modes")

P_MIN = 1e-7
TOL = 1e-9


CANDS = ["a", "b", "c"]


def mode_law(values, eps, nb=None, candidates=CANDS, *, monotonic=None):
    """log P[candidate i] of mode() (the mechanism's counting code and its (Δ, monotonic) plan)."""
    items, kind = M._candidates(candidates)
    data = list(values) if kind == "str" else np.asarray(values, dtype=float)
    counts = M._count_matches(data, items, kind)
    delta, mono = M._plan(nb or AddRemove())
    if monotonic is not None:
        mono = monotonic
    return SelectionLaw(counts, delta, eps, 1 if mono else 2).log_probs()


def loss(la, lb):
    return float(np.max(np.abs(la - lb)))


def multisets(grid, max_size):
    for n in range(max_size + 1):
        yield from itertools.combinations_with_replacement(grid, n)


GRID = ("a", "b", "c", "z")  # "z" is not a candidate: ignored


def test_law_is_the_counting_exponential_mechanism():
    eps = 0.9
    for d in [(), ("a",), ("a", "a", "b", "z"), ("c",) * 5]:
        counts = np.array([d.count(c) for c in CANDS], dtype=float)
        mono = eps * counts
        mono -= np.logaddexp.reduce(mono)
        assert np.allclose(mode_law(d, eps), mono, atol=1e-5)  # add/remove: exp(eps count / 1)
        gen = eps * counts / 2
        gen -= np.logaddexp.reduce(gen)
        assert np.allclose(mode_law(d, eps, Replace()), gen, atol=1e-5)  # replace: exp(eps count / 2)


def test_exact_privacy_add_remove_and_unit():
    eps = 1.0
    worst = worst_unit = 0.0
    unit = PrivacyUnit("id", max_rows=2)
    for d in multisets(GRID, 4):
        la = mode_law(d, eps)
        lu = mode_law(d, eps, unit)
        for x in GRID:
            worst = max(worst, loss(la, mode_law((*d, x), eps)))
        for pair in itertools.combinations_with_replacement(GRID, 2):
            worst_unit = max(worst_unit, loss(lu, mode_law((*d, *pair), eps, unit)))
    assert worst <= eps + TOL
    assert worst > 0.9 * eps  # the monotone calibration is tight
    assert worst_unit <= eps + TOL


def test_exact_privacy_replace_and_monotone_variant_is_caught():
    eps = 1.0
    worst = worst_mono = 0.0
    for d in multisets(GRID, 4):
        if not d:
            continue
        la = mode_law(d, eps, Replace())
        lm = mode_law(d, eps, Replace(), monotonic=True)
        for i, x in itertools.product(range(len(d)), GRID):
            swapped = (*d[:i], x, *d[i + 1:])
            worst = max(worst, loss(la, mode_law(swapped, eps, Replace())))
            worst_mono = max(worst_mono, loss(lm, mode_law(swapped, eps, Replace(), monotonic=True)))
    assert worst <= eps + TOL
    # one count up, another down: declaring the counting score monotonic under replace is not private
    assert worst_mono > 1.2 * eps


def test_numeric_candidates_and_ignored_values():
    la = mode_law([1.0, 2.0, 2.0, 7.5, 2.5], 1.0, candidates=[2, 1, 3])
    counts = np.array([2.0, 1.0, 0.0])
    expect = counts - np.logaddexp.reduce(counts)
    assert np.allclose(la, expect, atol=1e-5)
    r = mode([1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 9], [1, 2, 3], 2.0, rng=deterministic_source(1))
    assert r.value == 2 and isinstance(r.value, int) and r.parts["index"] == 1
    r = mode([1.0, math.nan, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], np.array([1.0, 2.0]), 2.0, nan_policy="omit",
             rng=deterministic_source(2))
    assert r.value == 1.0
    r = mode(["x", None, "x"] + ["y"] * 30, ["x", "y"], 1.0, nan_policy="omit", rng=deterministic_source(2))
    assert r.value == "y"


def test_public_mode_distribution_matches_exact_law():
    d = ("a", "a", "b", "z", "z", "z")
    eps, n = 1.0, 600
    rng = deterministic_source(4)
    counts = np.zeros(3, dtype=int)
    for _ in range(n):
        counts[mode(d, CANDS, eps, rng=rng).parts["index"]] += 1
    assert chi2_pvalue(counts, np.exp(mode_law(d, eps))) > P_MIN
    assert chi2_pvalue(counts, np.exp(mode_law(d, 2 * eps))) < P_MIN
    # under replace-one the law is the general (halved) one
    counts = np.zeros(3, dtype=int)
    for _ in range(n):
        counts[mode(d, CANDS, eps, neighbours=Replace(), rng=rng).parts["index"]] += 1
    assert chi2_pvalue(counts, np.exp(mode_law(d, eps, Replace()))) > P_MIN
    assert chi2_pvalue(counts, np.exp(mode_law(d, eps))) < P_MIN


def test_accuracy_gap_bound():
    """With a gap above mode_count_error(beta = 1e-9), the true mode is always returned."""
    k, eps = 1000, 0.5
    t = mode_count_error(k, eps, confidence=1 - 1e-9)
    assert t == pytest.approx(math.log(k / 1e-9) / eps, rel=1e-5)
    assert mode_count_error(k, eps, neighbours=Replace()) == pytest.approx(2 * math.log(k / 0.05) / eps, rel=1e-5)
    cands = list(range(k))
    rng = np.random.default_rng(0)
    data = np.concatenate([rng.integers(0, k, 3000), np.full(math.ceil(t) + 20, 17)])
    counts = np.bincount(data, minlength=k)
    assert counts[17] - np.max(np.delete(counts, 17)) > t
    src = deterministic_source(6)
    for _ in range(40):
        assert mode(data, cands, eps, rng=src).value == 17


DATA = ["secret-1", "secret-2", "secret-1"]
BAD = [
    ((DATA, [], 1.0), {}, InvalidParameter, "candidates"),
    ((DATA, ["a", "a"], 1.0), {}, InvalidParameter, "candidates"),
    ((DATA, [1.0, 1], 1.0), {}, InvalidParameter, "candidates"),
    ((DATA, ["a", 1], 1.0), {}, WrongType, "candidates"),
    ((DATA, [True, False], 1.0), {}, WrongType, "candidates"),
    ((DATA, [1.0, math.nan], 1.0), {}, InvalidParameter, "candidates"),
    ((DATA, [1.0, math.inf], 1.0), {}, InvalidParameter, "candidates"),
    ((DATA, "abc", 1.0), {}, WrongType, "candidates"),
    ((DATA, None, 1.0), {}, WrongType, "candidates"),
    ((DATA, 5, 1.0), {}, WrongType, "candidates"),
    ((DATA, np.zeros((2, 2)), 1.0), {}, InvalidParameter, "candidates"),
    ((DATA, ["a"], 0.0), {}, InvalidParameter, "epsilon"),
    ((DATA, ["a"], math.nan), {}, InvalidParameter, "epsilon"),
    ((DATA, ["a"], "1"), {}, WrongType, "epsilon"),
    ((["secret-1", 3], ["a"], 1.0), {}, WrongType, "values"),
    ((["secret-1", None], ["a"], 1.0), {}, InvalidData, "values"),
    (("secret-1", ["a"], 1.0), {}, WrongType, "values"),
    ((None, ["a"], 1.0), {}, WrongType, "values"),
    (([1.5, math.nan], [1.0], 1.0), {}, InvalidData, "values"),
    (([1.5, math.inf], [1.0], 1.0), {}, InvalidData, "values"),
    ((DATA, [1.0], 1.0), {}, WrongType, "values"),
    ((DATA, ["a"], 1.0), {"nan_policy": "keep"}, InvalidParameter, "nan_policy"),
    ((DATA, ["a"], 1.0), {"neighbours": 1}, WrongType, "neighbours"),
    ((DATA, ["a"], 1.0), {"description": None}, WrongType, "description"),
]


@pytest.mark.parametrize(("args", "kwargs", "err", "param"), BAD)
def test_bad_input_refused_before_charge_and_draw(args, kwargs, err, param):
    acct = Accountant(PureDP(10.0))
    src = CountingSource(1)
    with pytest.raises(err) as exc:
        mode(*args, **kwargs, accountant=acct, rng=src)
    assert exc.value.param == param
    assert "secret" not in str(exc.value) and "1.5" not in str(exc.value)
    assert acct.receipts == () and acct.spent == Accountant(PureDP(10.0)).spent and src.consumed == 0


def test_empty_data_is_uniform_and_valid():
    assert np.allclose(np.exp(mode_law((), 1.0)), 1 / 3)
    assert mode([], ["a", "b"], 1.0, rng=deterministic_source(1)).value in ("a", "b")


@pytest.mark.parametrize("nb", [AddRemove(), Replace(), PrivacyUnit("id", max_rows=3)])
def test_charge_once_before_randomness(nb):
    acct = Accountant(PureDP(1.0), neighbours=nb)
    src = CountingSource(3)
    seen = watch_charges(acct, src)
    rel = mode(["a", "b", "b"], CANDS, 0.6, accountant=acct, rng=src)
    assert seen == [0] and src.consumed > 0
    assert rel.mechanism == "mode" and rel.cost == PureDP(0.6) and acct.spent == PureDP(0.6)
    assert rel.receipt is acct.receipts[-1] and rel.receipt.sensitivity == (3.0 if isinstance(nb, PrivacyUnit)
                                                                            else 1.0)
    assert rel.params == {"epsilon": 0.6, "candidates": 3, "monotonic": not isinstance(nb, Replace)}
    assert rel.scale is None and rel.noise is None and rel.secure is False
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        mode(["a"], CANDS, 0.6, accountant=acct, rng=src)
    assert src.consumed == before and len(acct.receipts) == 1
