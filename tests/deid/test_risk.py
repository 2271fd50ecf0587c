"""dpkit.deid.risk: the group-by checks against brute-force O(n²) references on random tables (issue #15)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from dpkit.core.errors import DPKitError, InvalidParameter, WrongType
from dpkit.deid import (
    group_sizes,
    is_k_anonymous,
    k_anonymity,
    l_diversity,
    read_table,
    row_classes,
    table_columns,
    uniqueness,
)


def _same(a, b) -> bool:
    na = a is None or (isinstance(a, float) and math.isnan(a))
    nb = b is None or (isinstance(b, float) and math.isnan(b))
    return (na and nb) or (not na and not nb and a == b)


def brute_sizes(rows: list[tuple]) -> list[int]:
    """Per row, the number of rows equal to it on every column (NULL equals NULL): O(n²)."""
    return [sum(all(_same(a, b) for a, b in zip(r, s, strict=True)) for s in rows) for r in rows]


def book_is_k_anonymized(rows: list[tuple], k: int) -> bool:
    """The book's isKAnonymized (Near & Abuah 3.1), with values compared instead of a df.query string."""
    for r in rows:
        if sum(all(_same(a, b) for a, b in zip(r, s, strict=True)) for s in rows) < k:
            return False
    return True


def random_table(seed: int, n: int):
    g = np.random.default_rng(seed)  # rng-ok: test data
    age = g.integers(20, 26, n).astype(float)
    age[g.random(n) < 0.1] = np.nan
    sex = np.array(g.choice(["F", "M", None], n, p=[0.45, 0.45, 0.1]), dtype=object)
    zip_ = g.integers(0, 3, n)
    dx = np.array(g.choice(["flu", "hiv", "cold"], n), dtype=object)
    return {"age": age, "sex": sex, "zip": zip_, "dx": dx}


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_k_anonymity_matches_the_brute_force_checker(seed, k):
    t = random_table(seed, 60 + 7 * seed)
    cols = ["age", "sex", "zip"]
    rows = list(zip(*(t[c].tolist() for c in cols), strict=True))
    sizes = brute_sizes(rows)
    r = k_anonymity(t, cols, k)
    assert r.satisfied == book_is_k_anonymized(rows, k) == is_k_anonymous(t, cols, k)
    assert r.min_group_size == min(sizes)
    assert r.rows_below_k == sum(s < k for s in sizes)
    assert r.groups_below_k == round(sum(1 / s for s in sizes if s < k))
    assert r.groups == round(sum(1 / s for s in sizes)) == len(group_sizes(t, cols))
    assert sorted(group_sizes(t, cols).tolist()) == sorted(
        s for s, cnt in Counter(sizes).items() for _ in range(cnt // s))


@pytest.mark.parametrize("seed", range(5))
def test_uniqueness_and_every_subset_match_brute_force(seed):
    t = random_table(100 + seed, 50)
    cols = ["age", "sex", "zip", "dx"]
    u = uniqueness(t, cols, max_subset_size=3)
    rows = list(zip(*(t[c].tolist() for c in cols), strict=True))
    sizes = brute_sizes(rows)
    assert u.rows == 50 and u.unique_rows == sizes.count(1)
    assert u.max_risk == pytest.approx(1 / min(sizes)) and u.mean_risk == pytest.approx(np.mean([1 / s for s in sizes]))
    assert sum(u.rows_by_size.values()) == 50
    assert len(u.subsets) == 4 + 6 + 4
    got = {s.columns: s.unique_rows for s in u.subsets}
    for r in (1, 2, 3):
        for idx in itertools.combinations(range(4), r):
            sub = [tuple(row[i] for i in idx) for row in rows]
            assert got[tuple(cols[i] for i in idx)] == brute_sizes(sub).count(1)
    assert [s.unique_rows for s in u.subsets] == sorted((s.unique_rows for s in u.subsets), reverse=True)


def test_nulls_form_one_group_and_frames_paths_agree(tmp_path):
    t = {"a": [None, None, 1.0, float("nan")], "b": ["x", "x", "y", "x"]}
    assert sorted(group_sizes(t, ["a", "b"]).tolist()) == [1, 3]
    df = pd.DataFrame({"a": pd.array([None, None, 1, None], dtype="Int64"), "b": ["x", "x", "y", "x"]})
    assert sorted(group_sizes(df, ["a", "b"]).tolist()) == [1, 3]
    p = tmp_path / "t.csv"
    df.to_csv(p, index=False)
    assert sorted(group_sizes(str(p), ["a", "b"]).tolist()) == [1, 3]
    pq = tmp_path / "t.parquet"
    df.to_parquet(pq)
    assert k_anonymity(str(pq), ["a", "b"], 1).groups == 2


def test_adult_bundled_and_a_wide_key_space():
    r = k_anonymity("adult", ["age", "sex", "race"], 2)
    assert r.rows == 32561 and not r.satisfied and r.min_group_size == 1
    g = np.random.default_rng(0)  # rng-ok: test data
    t = {f"c{i}": g.integers(0, 2**40, 1000) for i in range(5)}  # the mixed-radix key would overflow int64
    assert uniqueness(t, list(t), max_subset_size=0).unique_rows == 1000


def test_l_diversity_brute_force():
    t = random_table(7, 80)
    r = l_diversity(t, ["age", "zip"], "dx", 2)
    rows = list(zip(t["age"].tolist(), t["zip"].tolist(), strict=True))
    classes: dict = {}
    for key, d in zip(rows, t["dx"].tolist(), strict=True):
        k2 = ("nan" if isinstance(key[0], float) and math.isnan(key[0]) else key[0], key[1])
        classes.setdefault(k2, []).append(d)
    distinct = [len(set(v)) for v in classes.values()]
    assert r.min_distinct == min(distinct) and r.groups == len(classes)
    assert r.homogeneous_rows == sum(len(v) for v in classes.values() if len(set(v)) == 1)
    assert r.satisfied == (min(distinct) >= 2)


@pytest.mark.parametrize("call", [
    lambda: k_anonymity({"a": [1, 2]}, ["b"], 2),
    lambda: k_anonymity({"a": [1, 2]}, [], 2),
    lambda: k_anonymity({"a": [1, 2]}, ["a", "a"], 2),
    lambda: k_anonymity({"a": [1, 2]}, ["a"], 0),
    lambda: k_anonymity({"a": [1, 2]}, ["a"], 2.5),
    lambda: k_anonymity({"a": [1, 2], "b": [1]}, ["a"], 2),
    lambda: k_anonymity([1, 2], ["a"], 2),
    lambda: k_anonymity({"a": [1.0, float("inf")]}, ["a"], 2),
    lambda: k_anonymity("missing.csv", ["a"], 2),
    lambda: k_anonymity("x.txt", ["a"], 2),
    lambda: l_diversity({"a": [1, 2], "s": [1, 2]}, ["a"], "a", 2),
    lambda: uniqueness({f"c{i}": [1] for i in range(20)}, [f"c{i}" for i in range(20)], max_subset_size=10),
])
def test_bad_input_is_typed_and_names_no_value(call):
    with pytest.raises(DPKitError) as e:
        call()
    assert isinstance(e.value, (InvalidParameter, WrongType, DPKitError))
    assert "inf" not in str(e.value).replace("infinite", "")


def test_unreadable_csv_is_an_engine_error_without_the_line(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_bytes(b"a,b\n1,2\n\xff\xfe secret-987654,3\n")
    with pytest.raises(DPKitError) as e:
        k_anonymity(str(p), ["a", "b"], 2)
    assert "987654" not in str(e.value) and e.value.__cause__ is None


def test_row_classes_match_a_brute_force_partition():
    """Two rows share an id exactly when they agree on every quasi-identifier (NULLs equal to each other)."""
    rng = np.random.default_rng(5)  # rng-ok: test data
    n = 300
    data = {"a": rng.integers(0, 4, n).astype(float), "b": rng.choice(["x", "y", None], n)}
    data["a"][rng.random(n) < 0.1] = np.nan
    ids = row_classes(data, ["a", "b"])
    assert ids.dtype == np.int64 and ids.min() == 0 and ids.max() == np.unique(ids).size - 1

    def key(i):
        a = data["a"][i]
        return ("nan" if np.isnan(a) else a, data["b"][i])

    for i in range(0, n, 7):
        for j in range(n):
            assert (ids[i] == ids[j]) == (key(i) == key(j))
    sizes = np.bincount(ids)
    assert sorted(sizes.tolist()) == sorted(group_sizes(data, ["a", "b"]).tolist())


def test_read_table_and_table_columns(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("zip,age,name\n1,30,x\n1,30,y\n2,40,z\n")
    pytest.importorskip("duckdb")
    assert table_columns(str(p)) == ["zip", "age", "name"]
    cols = read_table(str(p), ["zip", "age"])
    assert set(cols) == {"zip", "age"} and cols["zip"].tolist() == [1, 1, 2]
    assert row_classes(str(p), ["zip", "age"]).tolist() == [0, 0, 1]
    with pytest.raises(InvalidParameter) as info:
        read_table(str(p), ["zip", "secret"])
    assert info.value.param == "columns"
    with pytest.raises(InvalidParameter) as info:
        table_columns(str(tmp_path / "missing.csv"))
    assert info.value.param == "path"
    with pytest.raises(WrongType):
        read_table({"zip": [1]}, ["zip"])
    assert "age" in table_columns("adult") and read_table("adult", "age")["age"].size > 30000
