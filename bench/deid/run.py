"""De-identification benchmarks (issue #15): the k-anonymity check on 10 M rows, the book's O(n²) checker, the
book's linkage example on the adult-with-PII sample, and the generalization search on Adult.

    nice -n 5 .venv/bin/python bench/deid/run.py            # ~2-4 min, ~3 GB RAM; results/deid.json
    nice -n 5 .venv/bin/python bench/deid/run.py --rows 1000000   # smaller

Data (from ../shared/data, never in the tests):
- the 10 M rows are drawn **with replacement** from the rows of UCI Adult's ``adult.data`` (32,561 rows), keeping
  the quasi-identifier columns age, sex, race, native-country, education, marital-status (numpy PCG64, seed 0): a
  resample, so the class structure is Adult's scaled up (no new combinations; the table is 5-anonymous);
- a second, synthetic 10 M-row table where nearly every row is unique (age resampled, ZIP uniform on 100,000
  values, birth day uniform on 70 years): the worst case for the group-by (a sort of a sparse key);
- ``adult/sample_adult_with_pii.csv`` (4,999 rows with Name, DOB, SSN, Zip) for the linkage example.
Only dpkit and its [tables] extras are used (DuckDB for the file path). CPU time is ``time.process_time`` (all
threads of the process: DuckDB's threads count too); wall time is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import dpkit
from dpkit import deid

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data" / "adult"
OUT = Path(__file__).resolve().parent / "results"
UCI_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
               "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country",
               "income"]
QIS = ["age", "sex", "race", "native_country", "education", "marital_status"]


def timed(fn: Any) -> tuple[Any, float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    r = fn()
    return r, time.process_time() - c0, time.perf_counter() - w0


def book_is_k_anonymized(df: pd.DataFrame, k: int) -> bool:
    """Near & Abuah ch. 3.1, verbatim: one ``df.query`` per row (O(n²)); works on numeric columns only."""
    for _index, row in df.iterrows():
        query = " & ".join([f"{col} == {row[col]}" for col in df.columns])
        rows = df.query(query)
        if rows.shape[0] < k:
            return False
    return True


def load_uci() -> pd.DataFrame:
    return pd.read_csv(DATA / "uci" / "adult.data", header=None, names=UCI_COLUMNS, skipinitialspace=True,
                       na_values=["?"], keep_default_na=False)


def bench_10m(uci: pd.DataFrame, rows: int, k: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)  # rng-ok: benchmark data
    idx = rng.integers(0, len(uci), rows)
    cols = {c: uci[c].to_numpy(dtype=object if uci[c].dtype == object else None)[idx] for c in QIS}
    out: dict[str, Any] = {"rows": rows, "quasi_identifiers": QIS, "k": k,
                           "data": "resampled with replacement from UCI adult.data (seed 0)"}
    r, cpu, wall = timed(lambda: deid.k_anonymity(cols, QIS, k))
    out["in_memory"] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "satisfied": r.satisfied,
                        "groups": r.groups, "min_group_size": r.min_group_size, "rows_below_k": r.rows_below_k}
    print(f"k-anonymity on {rows:,} rows in memory (object strings): {cpu:.2f} s CPU, {wall:.2f} s wall: {r}")
    r2, cpu2, wall2 = timed(lambda: deid.uniqueness(cols, QIS, max_subset_size=3))
    out["uniqueness_with_subsets"] = {"cpu_s": round(cpu2, 2), "wall_s": round(wall2, 2), "subsets": len(r2.subsets),
                                      "unique_rows": r2.unique_rows}
    print(f"uniqueness + {len(r2.subsets)} subsets: {cpu2:.2f} s CPU, {wall2:.2f} s wall")
    # the hard case: near-unique rows (synthetic ZIP code and birth day, uniform), so the key space is sparse
    # and the classes are found by a sort rather than a bincount
    syn = {"age": cols["age"], "zip": rng.integers(0, 100_000, rows), "dob": rng.integers(0, 365 * 70, rows)}
    r4, cpu4, wall4 = timed(lambda: deid.k_anonymity(syn, ["age", "zip", "dob"], k))
    out["near_unique_synthetic"] = {"columns": "age (resampled), zip uniform on 100,000, dob uniform on 25,550 days",
                                    "cpu_s": round(cpu4, 2), "wall_s": round(wall4, 2), "groups": r4.groups,
                                    "rows_below_k": r4.rows_below_k}
    print(f"k-anonymity on {rows:,} near-unique synthetic rows: {cpu4:.2f} s CPU, {wall4:.2f} s wall: {r4}")
    try:
        import duckdb
    except ImportError:
        return out
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "adult10m.parquet")
        frame = pd.DataFrame(cols)
        duckdb.sql("COPY (SELECT * FROM frame) TO '" + path + "' (FORMAT parquet)")
        del frame
        r3, cpu3, wall3 = timed(lambda: deid.k_anonymity(path, QIS, k))
        assert (r3.groups, r3.rows_below_k) == (r.groups, r.rows_below_k)
        out["duckdb_parquet"] = {"cpu_s": round(cpu3, 2), "wall_s": round(wall3, 2),
                                 "file_mb": round(os.path.getsize(path) / 2**20, 1)}
        print(f"k-anonymity on the Parquet file (DuckDB GROUP BY): {cpu3:.2f} s CPU, {wall3:.2f} s wall")
    return out


def bench_book_checker(uci: pd.DataFrame, n: int) -> dict[str, Any]:
    df = uci[["age", "education_num"]].head(n).copy()
    df.columns = ["age", "edu"]
    ok, cpu, wall = timed(lambda: book_is_k_anonymized(df, 1))
    fast, cpu_f, _ = timed(lambda: deid.k_anonymity(df, ["age", "edu"], 1))
    assert ok == fast.satisfied
    ok2 = book_is_k_anonymized(df.head(100), 2)
    assert ok2 == deid.is_k_anonymous(df.head(100), ["age", "edu"], 2)
    print(f"book's isKAnonymized(k=1) on {n:,} rows (age, edu): {cpu:.2f} s CPU ({wall:.2f} s wall); "
          f"dpkit: {cpu_f * 1000:.1f} ms")
    try:
        book_is_k_anonymized(uci[["sex", "race"]].head(10), 1)
        strings = "ran"
    except Exception as exc:  # the book's f-string query breaks on string values
        strings = type(exc).__name__
    return {"rows": n, "columns": ["age", "edu"], "k": 1, "book_cpu_s": round(cpu, 2), "book_wall_s": round(wall, 2),
            "dpkit_cpu_s": round(cpu_f, 4), "same_answer": True, "book_on_string_columns": strings,
            "extrapolated_book_10m_years": round(cpu * (10_000_000 / n) ** 2 / (365.25 * 86400), 1)}


def bench_linkage() -> dict[str, Any]:
    path = str(DATA / "sample_adult_with_pii.csv")
    pii = pd.read_csv(path, dtype={"Zip": str})
    out: dict[str, Any] = {"rows": len(pii)}
    data = pii.drop(columns=["Name", "SSN"])
    aux = pii[["Name", "SSN", "DOB", "Zip"]]
    for keys in (["DOB"], ["Zip"], ["DOB", "Zip"]):
        (lk, cpu, _) = timed(lambda keys=keys: deid.linkage_attack(data, aux, keys))
        name = "+".join(keys)
        out[name] = {"reidentified": lk.reidentified, "narrowed_to_2": lk.narrowed_to_2,
                     "narrowed_3_to_5": lk.narrowed_3_to_5, "more_than_5": lk.more_than_5,
                     "records_by_identities": lk.records_by_identities, "cpu_s": round(cpu, 4)}
        print(f"linkage on {name}: {lk.reidentified:,} of {lk.aux_rows:,} re-identified, {lk.narrowed_to_2:,} "
              f"narrowed to 2, histogram {lk.candidates_histogram}")
    # the same through the file path (DuckDB reads the CSV; ZIP as a number there, as text in the frame)
    lk = deid.linkage_attack(path, aux, ["DOB", "Zip"])
    out["DOB+Zip_file_path"] = lk.reidentified
    ages = pii["Age"].to_numpy()
    d = deid.differencing_attack(ages, 0, epsilon=1.0, bounds=(0, 125), trials=2000, rng=dpkit.deterministic_source(1))
    out["differencing_age_sum"] = {"sum_all": d.answer_all, "sum_without_row0": d.answer_without,
                                   "revealed_equals_value": d.exact_error == 0.0, "epsilon": 1.0,
                                   "dp_mean_abs_error": round(d.dp_mean_abs_error, 1),
                                   "dp_error_95": round(d.dp_error_95, 1)}
    print(f"differencing on the sum of Age: exact error {d.exact_error}; with DP (ε=1 per answer, bounds 0..125): "
          f"mean |error| {d.dp_mean_abs_error:.1f} years, 95% below {d.dp_error_95:.1f}")
    return out


def bench_generalization() -> dict[str, Any]:
    qis = ["age", "sex", "race", "native_country", "education"]
    out = {}
    for k, s in ((2, 0.0), (5, 0.01), (10, 0.01)):
        r, cpu, _ = timed(lambda k=k, s=s: deid.k_anonymize("adult", qis, k, max_suppression=s))
        out[f"k={k},s={s}"] = {"levels": r.descriptions, "suppressed_rows": r.suppressed_rows,
                               "precision_loss": round(r.precision_loss, 3), "nodes_evaluated": r.nodes_evaluated,
                               "lattice_size": r.lattice_size, "minimal_nodes": len(r.minimal_nodes),
                               "cpu_s": round(cpu, 2)}
        print(f"k_anonymize(adult, k={k}, s={s}): {r.descriptions}, {r.suppressed_rows} suppressed, "
              f"{r.nodes_evaluated}/{r.lattice_size} nodes, {len(r.minimal_nodes)} minimal, {cpu:.2f} s CPU")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--book-rows", type=int, default=5000)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    uci = load_uci()
    machine = f"{platform.machine()}, {os.cpu_count()} cores (shared), Python {platform.python_version()}"
    res: dict[str, Any] = {"machine": machine,
                           "load_before": os.getloadavg(), "numpy": np.__version__, "pandas": pd.__version__}
    try:
        import duckdb

        res["duckdb"] = duckdb.__version__
    except ImportError:
        pass
    res["linkage"] = bench_linkage()
    res["generalization"] = bench_generalization()
    res["book_checker"] = bench_book_checker(uci, args.book_rows)
    res["k_anonymity_10m"] = bench_10m(uci, args.rows, 5)
    res["load_after"] = os.getloadavg()
    (OUT / "deid.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    print(f"written {OUT / 'deid.json'}", file=sys.stderr)


if __name__ == "__main__":
    main()
