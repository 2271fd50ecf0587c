"""dpkit.deid.generalize: hierarchies, the book's truncation, and the lattice search against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from dpkit.core.errors import DPKitError
from dpkit.deid import (
    Bins,
    Dates,
    Digits,
    Prefix,
    Suppress,
    default_hierarchy,
    generalize,
    is_k_anonymous,
    k_anonymize,
    truncate_digits,
)
from dpkit.deid.generalize import _prepare


def test_truncate_digits_is_the_books_generalize():
    # Near & Abuah 3.2: int(int(y / 10**d) * 10**d) on the toy data
    age, pre, post = [42, 52, 36, 24, 73], [4, 24, 31, 2, 3], [25, 94, 57, 62, 70]
    assert truncate_digits(age, 1).tolist() == [40, 50, 30, 20, 70]
    assert truncate_digits(pre, 1).tolist() == [0, 20, 30, 0, 0]
    assert truncate_digits(post, 1).tolist() == [20, 90, 50, 60, 70]
    assert truncate_digits(age, 2).tolist() == [0] * 5
    book = [int(int(y / 10**1) * 10**1) for y in [-37, 57, 94, 36]]
    assert truncate_digits([-37, 57, 94, 36], 1).tolist() == book == [-30, 50, 90, 30]  # truncation, not rounding
    assert truncate_digits([36.9, -0.5], 1).tolist() == [30, 0]


def test_toy_data_is_not_2_anonymous_after_depth_1():
    df = {"age": truncate_digits([42, 52, 36, 24, 73], 1), "pre": truncate_digits([4, 24, 31, 2, 3], 1),
          "post": truncate_digits([25, 94, 57, 62, 70], 1)}
    assert is_k_anonymous(df, ["age", "pre", "post"], 1) and not is_k_anonymous(df, ["age", "pre", "post"], 2)


@pytest.mark.parametrize("h, values", [
    (Bins(2), np.array([1.0, 2, 3, 7, 8, 30, -5])),
    (Bins(0.5), np.array([0.1, 0.2, 0.9, 1.7, 2.3])),
    (Digits(), np.array([64152, 64159, 64200, 63000, 5.0])),
    (Prefix(), np.array(["64152", "64159", "6420", "a", "abc"], dtype=object)),
    (Dates(), np.array(["9/7/1967", "9/8/1967", "10/1/1967", "1968-01-02"], dtype=object)),
    (Suppress(), np.array(["F", "M"], dtype=object)),
])
def test_levels_are_nested_partitions(h, values):
    col = _prepare("c", values, h)
    prev = None
    for lv in range(col.top + 1):
        codes = col.codes[lv]
        if prev is not None:  # every group of the previous level lies inside one group of this one
            for g in np.unique(prev):
                assert len(np.unique(codes[prev == g])) == 1
        prev = codes
    assert len(np.unique(col.codes[col.top])) == 1


def test_labels_and_defaults():
    assert generalize({"z": np.array(["64152", "64159"], dtype=object)}, {"z": 2}, {"z": Prefix()})["z"].tolist() == \
        ["641**", "641**"]
    assert generalize({"a": [37, 5]}, {"a": 3}, {"a": Bins(2)})["a"].tolist() == ["[32, 40)", "[0, 8)"]
    assert generalize({"d": ["9/7/1967"]}, {"d": 1}, {"d": Dates()})["d"].tolist() == ["1967-09"]
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    out = generalize(df, {"b": 1})
    assert isinstance(out, pd.DataFrame) and out["b"].tolist() == ["*", "*"] and out["a"].tolist() == [1, 2]
    assert isinstance(default_hierarchy(np.array(["2020-01-01"], dtype="datetime64[D]")), Dates)
    with pytest.raises(DPKitError):
        generalize({"d": ["not a date"]}, {"d": 1}, {"d": Dates()})


def _brute_node_ok(t, cols, hs, node, k, allowed):
    keys = []
    for c, lv in zip(cols, node, strict=True):
        col = _prepare(c, np.asarray(sorted(set(t[c].tolist())), dtype=t[c].dtype), hs[c])
        uniq = sorted(set(t[c].tolist()))
        pos = {u: i for i, u in enumerate(uniq)}
        keys.append([int(col.codes[lv][pos[v]]) for v in t[c].tolist()])
    rows = list(zip(*keys, strict=True))
    supp = sum(1 for r in rows if sum(1 for s in rows if s == r) < k)
    return supp <= allowed


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k, s", [(2, 0.0), (3, 0.1), (4, 0.05)])
def test_search_finds_exactly_the_minimal_k_anonymous_nodes(seed, k, s):
    g = np.random.default_rng(seed)  # rng-ok: test data
    n = 40
    t = {"age": g.integers(18, 60, n), "zip": np.array([str(x) for x in g.integers(100, 140, n)], dtype=object),
         "sex": np.array(g.choice(["F", "M"], n), dtype=object)}
    cols = ["age", "zip", "sex"]
    hs = {"age": Bins(4), "zip": Prefix(), "sex": Suppress()}
    r = k_anonymize(t, cols, k, max_suppression=s, hierarchies=hs)
    tops = [r.top_levels[c] for c in cols]
    allowed = math.floor(s * n)
    ok = {v for v in itertools.product(*(range(tp + 1) for tp in tops)) if _brute_node_ok(t, cols, hs, v, k, allowed)}
    minimal = {v for v in ok if not any(w != v and all(a <= b for a, b in zip(w, v, strict=True)) for w in ok)}
    assert {tuple(m[c] for c in cols) for m in r.minimal_nodes} == minimal
    assert r.exhaustive and r.lattice_size == math.prod(tp + 1 for tp in tops)
    best = tuple(r.levels[c] for c in cols)
    assert best in minimal
    loss = [np.mean([a / b for a, b in zip(v, tops, strict=True)]) for v in minimal]
    assert r.precision_loss == pytest.approx(min(loss))
    # the returned table is k-anonymous on the generalized columns, with the suppressed rows removed
    assert r.suppressed_rows <= allowed and len(r.table["age"]) == n - r.suppressed_rows
    assert is_k_anonymous(r.table, cols, k)


def test_no_solution_and_node_limit():
    t = {"a": [1, 2, 3]}
    r = k_anonymize(t, ["a"], 5)
    assert r.levels is None and r.minimal_nodes == ()
    g = np.random.default_rng(1)  # rng-ok: test data
    t2 = {"a": g.integers(0, 1000, 200), "b": g.integers(0, 1000, 200)}
    r2 = k_anonymize(t2, ["a", "b"], 5, max_nodes=3)
    assert not r2.exhaustive and r2.nodes_evaluated == 3


def test_book_adult_clipped_depth_1_is_7_anonymous():
    # Near & Abuah 3.4: clip age to 60, generalize (age, edu) at depth 1, first 500 rows -> 7-anonymous
    from dpkit.datasets import adult

    a = adult(as_frame=False, columns=["age", "education_num"])
    age = truncate_digits(np.minimum(a["age"][:500], 60), 1)
    edu = truncate_digits(a["education_num"][:500], 1)
    assert is_k_anonymous({"age": age, "edu": edu}, ["age", "edu"], 7)
    age1000 = truncate_digits(a["age"][:1000], 1)
    assert not is_k_anonymous({"age": age1000, "edu": truncate_digits(a["education_num"][:1000], 1)},
                              ["age", "edu"], 2)


@pytest.mark.parametrize("call", [
    lambda: k_anonymize({"a": [1, 2]}, ["a"], 1),
    lambda: k_anonymize({"a": [1, 2]}, ["a"], 2, max_suppression=1.0),
    lambda: k_anonymize({"a": [1, 2]}, ["a"], 2, hierarchies={"b": Bins()}),
    lambda: k_anonymize({"a": [1, 2]}, ["a"], 2, hierarchies={"a": "bins"}),
    lambda: Bins(0),
    lambda: Bins(float("nan")),
    lambda: truncate_digits([1.0, float("nan")], 1),
    lambda: truncate_digits(["a"], 1),
    lambda: truncate_digits([1], -1),
    lambda: generalize({"a": [1]}, {"a": 99}),
])
def test_bad_input_is_typed(call):
    with pytest.raises(DPKitError):
        call()


def test_frames_nulls_and_date_strings():
    df = pd.DataFrame({"dob": ["9/7/1967", "9/8/1967", "10/1/1967", "10/9/1967", None, None],
                       "sex": ["F", "F", "M", "M", None, None], "other": [1, 2, 3, 4, 5, 6]})
    assert isinstance(default_hierarchy(df["dob"].dropna().tolist()), Dates)
    r = k_anonymize(df, ["dob", "sex"], 2)
    assert r.levels == {"dob": 1, "sex": 0} and r.suppressed_rows == 0  # month; NULL stays a group of its own
    assert isinstance(r.table, pd.DataFrame) and r.table["dob"].tolist()[:4] == ["1967-09", "1967-09", "1967-10",
                                                                                 "1967-10"]
    assert r.table["other"].tolist() == [1, 2, 3, 4, 5, 6] and r.table["dob"].isna().sum() == 2
