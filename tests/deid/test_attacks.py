"""dpkit.deid.attacks: linkage and differencing demonstrations on generated data (issue #15)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit import deterministic_source
from dpkit.core.errors import DPKitError
from dpkit.deid import differencing_attack, linkage_attack


def test_linkage_counts_match_a_brute_force_join():
    g = np.random.default_rng(3)  # rng-ok: test data
    n = 300
    dob = np.array([f"{m}/{d}/19{y}" for m, d, y in zip(g.integers(1, 3, n), g.integers(1, 5, n),
                                                         g.integers(60, 64, n), strict=True)], dtype=object)
    zip_ = g.integers(0, 3, n)
    data = {"dob": dob, "zip": zip_}
    aux = {"DOB": np.concatenate([dob[:100], ["1/1/1999"]]).astype(object), "ZIP": np.concatenate([zip_[:100], [1]])}
    r = linkage_attack(data, aux, ["dob", "zip"], aux_keys=["DOB", "ZIP"])
    pairs = list(zip(dob.tolist(), zip_.tolist(), strict=True))
    cand = [sum(1 for p in pairs if p == (a, b)) for a, b in zip(aux["DOB"].tolist(), aux["ZIP"].tolist(),
                                                                  strict=True)]
    assert r.candidates.tolist() == cand
    assert r.reidentified == cand.count(1) and r.narrowed_to_2 == cand.count(2) and r.not_found == 1
    assert r.aux_rows == 101 and r.data_rows == n
    assert r.reidentified + r.narrowed_to_2 + r.narrowed_3_to_5 + r.more_than_5 + r.not_found == 101


def test_linkage_the_books_karrie_example_and_types_across_readers():
    # the de-identified table and the attacker's list (names) built from one table, as in Near & Abuah 2.1
    data = {"DOB": np.array(["9/7/1967", "9/7/1967", "9/7/1967", "1/2/1970"], dtype=object),
            "Zip": np.array([64152, 67306, 62254, 64152])}
    aux = {"Name": np.array(["Karrie", "B", "C", "D"], dtype=object), "DOB": data["DOB"],
           "Zip": np.array(["64152", "67306", "62254", "64152"], dtype=object)}  # ZIP read as text elsewhere
    both = linkage_attack(data, aux, ["DOB", "Zip"])
    assert both.reidentified == 4  # DOB + ZIP: everyone
    dob = linkage_attack(data, aux, ["DOB"])
    assert dob.candidates.tolist() == [3, 3, 3, 1]  # Karrie: 3 rows on DOB alone
    z = linkage_attack(data, aux, ["Zip"])
    assert z.candidates.tolist() == [2, 1, 1, 2]


def test_differencing_reveals_the_value_and_dp_hides_it():
    bits = np.zeros(10_000, dtype=np.int64)
    bits[::3] = 1
    r = differencing_attack(bits, 3, epsilon=0.5, trials=4000, rng=deterministic_source(11))
    assert r.revealed == 1.0 == r.target_value and r.exact_error == 0.0
    b = 1 / 0.5
    assert r.dp_success_probability == pytest.approx(1 - (2 + 0.5 / b) * math.exp(-0.5 / b) / 4)
    assert r.dp_success_probability < r.dp_success_bound == pytest.approx(math.exp(1) / (1 + math.exp(1)))
    se = math.sqrt(0.25 / 4000)
    assert abs(r.dp_success_rate - r.dp_success_probability) < 6 * se
    # the attacker's error: the difference of two Laplace(2): variance 2 * 2 b^2 = 16
    assert abs(np.var(r.dp_errors) - 16.0) < 16.0 * 6 * math.sqrt(2 / 4000) * 2
    assert abs(r.dp_error_95 - r.dp_error_95_exact) < 0.15 * r.dp_error_95_exact


def test_differencing_a_sum_the_books_age_example():
    ages = np.array([39, 50, 38, 53, 28, 37, 49, 52], dtype=float)
    r = differencing_attack(ages, 0, epsilon=1.0, bounds=(0, 100), trials=500, rng=deterministic_source(2))
    assert r.query == "sum" and r.revealed == 39.0 and r.sensitivity == 100.0
    assert r.dp_success_rate is None and r.dp_mean_abs_error > 50  # noise of scale 100 per answer


@pytest.mark.parametrize("call", [
    lambda: differencing_attack([0, 1, 2], 0),
    lambda: differencing_attack([0, 1], 5),
    lambda: differencing_attack([0, 1], 0, epsilon=0),
    lambda: differencing_attack([0, 1], 0, epsilon=math.nan),
    lambda: differencing_attack([0, 1], 0, trials=0),
    lambda: differencing_attack([0.0, math.nan], 0),
    lambda: differencing_attack([1], 0),
    lambda: differencing_attack([1.0, 2.0], 0, bounds=(3, 1)),
    lambda: linkage_attack({"a": [1]}, {"b": [1]}, ["a"]),
    lambda: linkage_attack({"a": [1]}, {"b": [1]}, ["a"], aux_keys=["b", "b"]),
])
def test_bad_input_is_typed(call):
    with pytest.raises(DPKitError):
        call()


def test_linkage_across_readers_dates_and_numbers(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("DOB,Zip\n9/7/1967,64152\n9/7/1967,67306\n1/2/1970,64152\n")
    aux = {"DOB": np.array(["9/7/1967", "1/2/1970"], dtype=object), "Zip": np.array(["64152", "64152"], dtype=object)}
    r = linkage_attack(str(p), aux, ["DOB", "Zip"])  # Zip read as a number; DOB text (no date sniffing)
    assert r.candidates.tolist() == [1, 1]
    frame_dates = {"DOB": np.array(["1967-09-07", "1970-01-02"], dtype="datetime64[D]"), "Zip": [64152, 64152]}
    assert linkage_attack(str(p), frame_dates, ["DOB", "Zip"]).candidates.tolist() == [1, 1]
