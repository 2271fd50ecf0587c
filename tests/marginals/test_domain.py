"""The marginals domain model: domains, records, exact marginals, workloads and metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit import InvalidData, InvalidParameter, WrongType
from dpkit.marginals import (
    Domain,
    Records,
    all_kway,
    jensen_shannon,
    kl_divergence,
    l1_error,
    marginal,
    mean_total_variation,
    total_variation,
)

DOM = Domain({"a": 2, "b": 3, "c": 4})


def _records(n: int = 500, seed: int = 1) -> Records:
    g = np.random.default_rng(seed)
    return Records(np.column_stack([g.integers(0, s, n) for s in DOM.shape]), DOM)


def test_domain_basics():
    assert DOM.attrs == ("a", "b", "c") and DOM.shape == (2, 3, 4) and len(DOM) == 3 and "b" in DOM
    assert DOM.size() == 24 and DOM.size(["c", "a"]) == 8 and DOM.canonical(["c", "a"]) == ("a", "c")
    assert DOM.project(["c", "a"]).to_dict() == {"a": 2, "c": 4} and DOM.axes(["c", "b"]) == (1, 2)
    assert Domain([("x", 5)]).shape == (5,)


@pytest.mark.parametrize(("arg", "err"), [({}, InvalidParameter), ("ab", WrongType), ({"a": 0}, InvalidParameter),
                                          ({"a": 2.5}, WrongType), ({"": 2}, WrongType), (3, WrongType)])
def test_domain_refuses_bad_sizes(arg, err):
    with pytest.raises(err) as info:
        Domain(arg)
    assert info.value.param == "domain"


def test_canonical_refuses_unknown_or_repeated():
    for bad, err in ((["z"], InvalidParameter), (["a", "a"], InvalidParameter), ([1], WrongType), (3, WrongType)):
        with pytest.raises(err) as info:
            DOM.canonical(bad)
        assert info.value.param == "attrs"


def test_marginal_matches_a_direct_count():
    r = _records()
    m = marginal(r, ["c", "a"])
    assert m.shape == (2, 4) and m.sum() == len(r)
    for i in range(2):
        for k in range(4):
            assert m[i, k] == np.sum((r.codes[:, 0] == i) & (r.codes[:, 2] == k))
    assert marginal(r).shape == (2, 3, 4) and np.allclose(marginal(r).sum(axis=(1, 2)), marginal(r, ["a"]))
    assert marginal(Records(np.zeros((0, 3), np.int64), DOM), ["b"]).tolist() == [0.0, 0.0, 0.0]


def test_records_refuse_out_of_domain_and_missing_without_echo():
    for codes, err in (([[0, 3, 0]], InvalidData), ([[0, 987654, 0]], InvalidData), ([[0, np.nan, 0]], InvalidData),
                       ([[0, 1]], InvalidData), ([[0, 1.5, 0]], InvalidData), ([["x", "y", "z"]], WrongType)):
        with pytest.raises(err) as info:
            Records(codes, DOM)
        assert info.value.param == "records" and "987654" not in str(info.value)


def test_from_frame_and_project():
    pd = pytest.importorskip("pandas")
    r = _records(50)
    df = pd.DataFrame(r.codes, columns=list(DOM.attrs))
    r2 = Records.from_frame(df[["c", "b", "a"]], DOM)
    assert np.array_equal(r2.codes, r.codes)
    p = r.project(["c", "a"])
    assert p.domain.attrs == ("a", "c") and np.array_equal(marginal(p), marginal(r, ["a", "c"]))
    with pytest.raises(InvalidData):
        Records.from_frame(df[["a", "b"]], DOM)


def test_workloads():
    assert all_kway(DOM, 2) == [("a", "b"), ("a", "c"), ("b", "c")] and len(all_kway(DOM, 3)) == 1
    with pytest.raises(InvalidParameter):
        all_kway(DOM, 4)


def test_metrics():
    t = np.array([1.0, 1.0, 2.0])
    assert total_variation(t, t) == 0.0 and total_variation(t, 2 * t) == 0.0
    assert math.isclose(total_variation([1.0, 0.0], [0.0, 1.0]), 1.0)
    assert math.isclose(total_variation(t, [1.0, 1.0, -5.0]), 0.5)  # negative estimate clipped to 0
    assert l1_error(t, [0.0, 1.0, 2.0]) == 1.0
    assert kl_divergence(t, t) == 0.0 and kl_divergence([1.0, 1.0], [1.0, 0.0]) == math.inf
    assert math.isclose(kl_divergence([1.0, 1.0], [1.0, 3.0]), 0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    assert 0.0 < jensen_shannon([1.0, 0.0], [0.0, 1.0]) <= math.log(2) + 1e-12
    with pytest.raises(InvalidParameter):
        total_variation([1.0, 2.0], [1.0, 2.0, 3.0])
    r = _records()
    assert mean_total_variation(r, r, all_kway(DOM, 2)) == 0.0
    assert mean_total_variation(r, lambda a: marginal(r, a), all_kway(DOM, 2)) == 0.0
    assert mean_total_variation(r, _records(seed=2), all_kway(DOM, 2)) > 0.0
