"""Issue #16: alternatives to the per-unit ``row_number()`` window for "keep at most k rows per unit, chosen by a
keyed hash order", timed side by side in ONE DuckDB process on the benchmark table (``gen_data.py``).

    python bench/tables/alternatives.py --rows 10_000_000 --repeats 2 [--variants a,b,...]

Every variant computes the benchmark's aggregate (per state: kept rows and the clamped income in lattice units of
1/8) after keeping at most K = 3 rows per user; the variants are interleaved (round robin) so that a change of the
machine's load hits them alike, and the best of ``--repeats`` by CPU time (``time.process_time``: every thread
of this process) is printed as a Markdown table with the ratio to the floor. ``exact`` says whether the kept rows
are a function of the user's own rows and the salt only (ties in the hash broken by the values):

- ``floor``: ``row_number() over (partition by user_id order by random()) <= 3`` (the benchmark's floor; not
  reproducible, not keyed).
- ``window_before``: the SQL dpkit generated before issue #16 (struct hash cast through BIT, every column of the
  table carried through the window, ties broken by the used columns).
- ``window``: the same window on the unit and used columns only, ``hash(salt, unit, used)`` (DuckDB's variadic
  hash), ties broken by the used columns: the exact plan.
- ``window_hash_only``: ordered by the hash alone (NOT exact: the engine's order decides among rows that collide
  in the hash).
- ``qualify``: the exact window written with ``QUALIFY``.
- ``argmin_topk``: ``arg_min({state, income}, {hash, state, income}, 3)`` per user, then ``UNNEST`` (exact).
- ``count_split``: rows of users with at most 3 rows kept without a sort (a partition count), the others through
  the exact window (exact).
- ``threshold_join``: per user the 3rd smallest hash (``min(hash, 3)``), joined back, rows at or below it kept
  (NOT exact: rows tied at the threshold are all kept, so the bound can be exceeded).
- ``rank_gate``: ordered by the hash alone with ``rank()`` and a peer count in the same window (what a
  deterministic tie rule on a one-key sort needs; shown for its cost).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_data import STATES, data_path  # noqa: E402

K = 3
SALT = 12345
UNITS = "CAST(FLOOR(least(greatest(income, 0.0), 200000.0) / 0.125 + 0.5) AS BIGINT)"
AGG = f"SELECT state, count(*) AS n, sum({UNITS}) AS s FROM kept GROUP BY state"
KEYS = ", ".join(f"'{k}'" for k in STATES)
SRC = f"(SELECT * FROM src WHERE state IN ({KEYS}))"
HASH = f"hash({SALT}, user_id, state, income)"
HASH_BEFORE = f"CAST(CAST(HASH({{'_s': {SALT}, '_u': user_id, '_c0': state, '_c1': income}}) AS BIT) AS BIGINT)"
ROWS = f"(SELECT user_id, state, income, {HASH} AS rk FROM {SRC})"


def _window(order: str) -> str:
    return (f"WITH kept AS (SELECT state, income FROM (SELECT state, income, row_number() OVER "
            f"(PARTITION BY user_id ORDER BY {order}) AS rn FROM {ROWS}) WHERE rn <= {K}) {AGG}")


VARIANTS: dict[str, tuple[bool, str]] = {
    "floor": (False, f"WITH kept AS (SELECT state, income FROM (SELECT state, income, row_number() OVER "
                     f"(PARTITION BY user_id ORDER BY r) AS rn FROM (SELECT user_id, state, income, random() AS r "
                     f"FROM src)) WHERE rn <= {K}) {AGG}"),
    "window_before": (True, f"WITH kept AS (SELECT * EXCLUDE (rn, rk) FROM (SELECT *, row_number() OVER "
                            f"(PARTITION BY user_id ORDER BY rk, state, income) AS rn FROM (SELECT *, {HASH_BEFORE} "
                            f"AS rk FROM {SRC})) WHERE rn <= {K}) {AGG}"),
    "window": (True, _window("rk, state, income")),
    "window_hash_only": (False, _window("rk")),
    "qualify": (True, f"WITH kept AS (SELECT state, income FROM {ROWS} QUALIFY row_number() OVER "
                      f"(PARTITION BY user_id ORDER BY rk, state, income) <= {K}) {AGG}"),
    "argmin_topk": (True, f"WITH kept AS (SELECT unnest(x, recursive := true) FROM (SELECT arg_min("
                          f"{{'state': state, 'income': income}}, {{'k': rk, 's': state, 'i': income}}, {K}) AS x "
                          f"FROM {ROWS} GROUP BY user_id)) {AGG}"),
    "count_split": (True, f"WITH h AS (SELECT *, count(*) OVER (PARTITION BY user_id) AS c FROM {ROWS}), "
                          f"kept AS (SELECT state, income FROM h WHERE c <= {K} UNION ALL SELECT state, income FROM "
                          f"(SELECT state, income, row_number() OVER (PARTITION BY user_id ORDER BY rk, state, income)"
                          f" AS rn FROM h WHERE c > {K}) WHERE rn <= {K}) {AGG}"),
    "threshold_join": (False, f"WITH r AS {ROWS}, th AS (SELECT user_id, list_max(min(rk, {K})) AS t FROM r "
                              f"GROUP BY user_id), kept AS (SELECT state, income FROM r JOIN th USING (user_id) "
                              f"WHERE rk <= t) {AGG}"),
    "rank_gate": (False, f"WITH kept AS (SELECT state, income FROM (SELECT state, income, row_number() OVER w AS rn, "
                         f"rank() OVER w AS rk1, count(*) OVER (w RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
                         f"AS cle FROM {ROWS} WINDOW w AS (PARTITION BY user_id ORDER BY rk)) WHERE cle <= {K} OR "
                         f"(rk1 <= {K} AND rn <= {K})) {AGG}"),
}


def main() -> None:
    import duckdb

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=lambda s: int(s.replace("_", "")), default=10_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory", default="6GB")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    names = args.variants.split(",")
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    con.execute(f"SET memory_limit = '{args.memory}'")
    con.execute("SET disabled_optimizers = 'top_n_window_elimination'")  # as on dpkit's connections
    con.execute(f"CREATE VIEW src AS SELECT * FROM read_parquet('{data_path(args.rows)}')")
    best: dict[str, float] = {}
    for rep in range(args.repeats):
        for name in names:
            load = os.getloadavg()[0]
            c0 = time.process_time()
            res = con.execute(VARIANTS[name][1]).fetchall()
            cpu = time.process_time() - c0
            print(f"# {name} repeat {rep}: cpu {cpu:.2f} s, load {load:.1f}, {sorted(res)[0]}", flush=True)
            best[name] = min(best.get(name, float("inf")), cpu)
    floor = best.get("floor")
    print("| plan | exact | CPU s (best) | / floor |\n|---|---|---:|---:|")
    for name in names:
        ratio = f"{best[name] / floor:.2f}" if floor else ""
        print(f"| {name} | {'yes' if VARIANTS[name][0] else 'no'} | {best[name]:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
