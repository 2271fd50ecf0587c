"""The engine-choice quick check of issue #5 (docs/decisions/0001-table-engine.md): Ibis vs narwhals.

The same task over a DuckDB relation of the benchmark table (Parquet): per-user bounding (each user keeps the
3 rows of smallest random key: rank <= 3 over user_id) and the clamped group-by sum of income by state,
against the plain group-by. Written four ways, every one executed by DuckDB:

    sql_plain        hand-written SQL, plain group-by
    sql_bounded      hand-written SQL, bounded
    narwhals_plain   narwhals over the DuckDB relation, plain group-by
    narwhals_bounded narwhals: rank("ordinal").over("user_id") of a random key column; narwhals has no
                     random() or hash() expression, so the random key has to be made in DuckDB SQL first
    ibis_plain       ibis on DuckDB, plain group-by
    ibis_bounded     ibis: ibis.random() / .hash() and row_number().over(group_by=..., order_by=...)

    python bench/tables/narwhals_check.py --rows 10_000_000 --repeats 2

Prints wall and CPU seconds (best of N by CPU) for each, with the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_data import data_path  # noqa: E402

HI = 200_000.0


def variants(path: str) -> dict:
    import duckdb
    import ibis
    import narwhals as nw

    def con():
        c = duckdb.connect()
        c.execute("SET disabled_optimizers = 'top_n_window_elimination'")  # as dpkit does on its connections
        return c

    def sql_plain():
        return con().sql(f"SELECT state, sum(least(greatest(income, 0), {HI})) AS s FROM read_parquet('{path}') "
                         "GROUP BY state").fetchall()

    def sql_bounded():
        return con().sql(
            f"WITH u AS (SELECT user_id, state, income, random() AS k FROM read_parquet('{path}')), "
            "r AS (SELECT state, income, row_number() OVER (PARTITION BY user_id ORDER BY k) AS rk FROM u) "
            f"SELECT state, sum(least(greatest(income, 0), {HI})) AS s FROM r WHERE rk <= 3 GROUP BY state"
        ).fetchall()

    def narwhals_plain():
        lf = nw.from_native(con().sql(f"SELECT * FROM read_parquet('{path}')"))
        out = lf.group_by("state").agg(nw.col("income").clip(0, HI).sum().alias("s"))
        return out.collect().rows()

    def narwhals_bounded():
        # the random key cannot be expressed in narwhals: it comes from DuckDB SQL
        rel = con().sql(f"SELECT user_id, state, income, random() AS k FROM read_parquet('{path}')")
        lf = nw.from_native(rel)
        out = (
            lf.with_columns(rk=nw.col("k").rank("ordinal").over("user_id"))
            .filter(nw.col("rk") <= 3)
            .group_by("state")
            .agg(nw.col("income").clip(0, HI).sum().alias("s"))
        )
        return out.collect().rows()

    def ibis_plain():
        t = ibis.duckdb.from_connection(con()).read_parquet(path)
        return t.group_by("state").aggregate(s=t.income.clip(0, HI).sum()).execute()

    def ibis_bounded():
        t = ibis.duckdb.from_connection(con()).read_parquet(path)
        t = t.mutate(k=ibis.random())
        t = t.mutate(rk=ibis.row_number().over(group_by=t.user_id, order_by=t.k)).filter(lambda x: x.rk < 3)
        return t.group_by("state").aggregate(s=t.income.clip(0, HI).sum()).execute()

    return {f.__name__: f for f in (sql_plain, sql_bounded, narwhals_plain, narwhals_bounded, ibis_plain,
                                    ibis_bounded)}


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=lambda s: int(s.replace("_", "")), default=10_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    path = str(data_path(args.rows))
    vs = variants(path)
    best: dict[str, tuple[float, float, float]] = {}
    for _ in range(args.repeats):
        for name, f in vs.items():
            load = os.getloadavg()[0]
            c0, w0 = cpu(), time.perf_counter()
            f()
            w, c = time.perf_counter() - w0, cpu() - c0
            if name not in best or c < best[name][1]:
                best[name] = (w, c, load)
            print(f"{name:18s} wall {w:7.2f} s  cpu {c:7.2f} s  load {load:.1f}", flush=True)
    print("\n| variant | wall s | CPU s | load | CPU / plain of the same API |\n|---|---:|---:|---:|---:|")
    for name, (w, c, load) in best.items():
        plain = best[name.replace("bounded", "plain")][1]
        print(f"| {name} | {w:.2f} | {c:.2f} | {load:.1f} | {c / plain:.1f} |")


if __name__ == "__main__":
    main()
