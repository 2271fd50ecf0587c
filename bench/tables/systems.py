"""One benchmark run of one system, in its own process (called by ``run.py``; usable by hand).

    python bench/tables/systems.py SYSTEM PATH [--threads N]

prints one JSON line: ``system``, ``rows``, ``setup_s`` (imports excluded; Spark session start, or nothing),
``wall_s`` and ``cpu_s`` (the timed query: reading the Parquet file, per-user bounding, aggregation and, for the
DP systems, noise; ``cpu_s`` is user+system time of this process and every child process, e.g. Spark's JVM),
and ``groups`` / ``head`` for a sanity check.

The task, identical for every system: the table of ``gen_data.py`` (user_id, state, age, income; 5 rows per
user on average). Privacy unit = one user; each user keeps at most 3 rows (chosen at random); per state (50
public keys): a count, the sum of income clamped to [0, 200000] and the mean of the clamped income; epsilon = 1
in all (pure DP).

Systems:
    plain_duckdb      plain GROUP BY in DuckDB, no bounding, no noise (lower bound for any engine)
    floor_duckdb      the same per-user bounding as dpkit (row_number() over a random order, rank <= 3) and the
                      clamped aggregates, no noise: what dpkit costs on DuckDB without the DP part
    dpkit_duckdb      dpkit.tables on DuckDB (Parquet path)
    dpkit_duckdb_before  the same code on another dpkit source tree (``BENCH_DPKIT_BEFORE_SRC``, e.g. ``git archive
                      <commit> src | tar -x -C /tmp/before`` -> ``/tmp/before/src``): before/after in one run
    dpkit_spark       dpkit.tables on Spark local (a pyspark DataFrame read from the Parquet file)
    opendp_polars     OpenDP's Polars Context (truncate_per_group(3), dp.len / dp.sum / dp.mean, public keys)
    pipelinedp_local  PipelineDP's LocalBackend on Python tuples (max_partitions_contributed=1,
                      max_contributions_per_partition=3: the same bound here since a user's rows share one state)
    tumult_spark      Tumult Analytics on Spark local (AddRowsWithID + MaxRowsPerID(3); count, sum, average
                      as three queries of epsilon 1/3: Tumult answers one aggregation per query)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gen_data import INCOME_BOUNDS, STATES  # noqa: E402

LO, HI = INCOME_BOUNDS
MAX_ROWS = 3
EPSILON = 1.0
SPARK_DRIVER_MEMORY = os.environ.get("BENCH_SPARK_MEMORY", "6g")
DUCKDB_MEMORY = os.environ.get("BENCH_DUCKDB_MEMORY", "6GB")


def tree_cpu() -> float:
    """User + system CPU seconds of this process and all its live descendants."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def spark_session(threads: int):
    from pyspark.sql import SparkSession

    # Spark's Python workers must run this venv's interpreter (Tumult ships Python UDFs to them)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (
        SparkSession.builder.master(f"local[{threads}]")
        .appName("dpkit-bench-tables")
        .config("spark.driver.memory", SPARK_DRIVER_MEMORY)
        .config("spark.sql.shuffle.partitions", str(max(2, 2 * threads)))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-XX:+UseParallelGC")
        .getOrCreate()
    )


def _duckdb(threads: int):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
    con.execute("SET disabled_optimizers = 'top_n_window_elimination'")  # as on dpkit's connections
    return con


def _clamp(col: str) -> str:
    return f"least(greatest({col}, {LO}), {HI})"


# ------------------------------------------------------------------------------------------------------ systems
def plain_duckdb(path: str, threads: int, ctx: dict):
    con = _duckdb(threads)
    return con.execute(
        f"SELECT state, count(*) AS n, sum({_clamp('income')}) AS s, avg({_clamp('income')}) AS m "
        f"FROM read_parquet('{path}') GROUP BY state ORDER BY state"
    ).fetchall()[:3]


def floor_duckdb(path: str, threads: int, ctx: dict):
    con = _duckdb(threads)
    return con.execute(
        f"WITH u AS (SELECT user_id, state, income, random() AS u FROM read_parquet('{path}')), "
        f"r AS (SELECT state, income, row_number() OVER (PARTITION BY user_id ORDER BY u) AS rk FROM u) "
        f"SELECT state, count(*) AS n, sum({_clamp('income')}) AS s, avg({_clamp('income')}) AS m "
        f"FROM r WHERE rk <= {MAX_ROWS} GROUP BY state ORDER BY state"
    ).fetchall()[:3]


def _dpkit_release(source):
    import dpkit
    from dpkit.tables import Session, unit_of

    s = Session(source, budget=dpkit.PureDP(EPSILON), unit=unit_of("user_id", max_rows=MAX_ROWS))
    q = (
        s.query("income by state")
        .group_by("state", keys=STATES)
        .count()
        .sum("income", bounds=(LO, HI))
        .mean("income", bounds=(LO, HI))
    )
    res = s.release(q, budget=dpkit.PureDP(EPSILON))
    return res[["statistic", "group", "value"]].head(6).values.tolist()


def dpkit_duckdb(path: str, threads: int, ctx: dict):
    import ibis

    # What dpkit does for a Parquet path (its own DuckDB connection, the top-n window rewrite off), plus the
    # benchmark's thread count and memory limit, which a path source cannot take.
    con = ibis.duckdb.connect(threads=threads, memory_limit=DUCKDB_MEMORY)
    con.raw_sql("SET disabled_optimizers = 'top_n_window_elimination'")
    return _dpkit_release(con.read_parquet(path))


def dpkit_duckdb_before(path: str, threads: int, ctx: dict):
    return dpkit_duckdb(path, threads, ctx)  # main() put the other source tree first on sys.path


def dpkit_spark(path: str, threads: int, ctx: dict):
    spark = ctx["spark"]
    return _dpkit_release(spark.read.parquet(path))


def opendp_polars(path: str, threads: int, ctx: dict):
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    income = pl.col("income").cast(pl.Int64).fill_null(0)  # integer cents-free dollars: exact integer sums
    context = dp.Context.compositor(
        data=pl.scan_parquet(path).select("user_id", "state", "income"),
        privacy_unit=dp.unit_of(contributions=1, identifier="user_id"),
        privacy_loss=dp.loss_of(epsilon=EPSILON),
        split_evenly_over=1,
        # max_length: a public upper bound on rows per group (needed for sums); 10^9 here
        margins=[dp.polars.Margin(by=[], max_length=10**9), dp.polars.Margin(by=["state"], max_length=10**9)],
    )
    q = (
        context.query()
        .truncate_per_group(MAX_ROWS)
        .group_by("state")
        .agg(dp.len(), income.dp.sum((int(LO), int(HI))).alias("s"), income.dp.mean((int(LO), int(HI))).alias("m"))
        .with_keys(pl.LazyFrame({"state": STATES}))
    )
    df = q.release().collect().sort("state")
    return df.head(3).rows()


def pipelinedp_local(path: str, threads: int, ctx: dict):
    import pipeline_dp
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["user_id", "state", "income"])
    rows = list(zip(t.column("user_id").to_pylist(), t.column("state").to_pylist(), t.column("income").to_pylist(),
                    strict=True))
    del t
    acc = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=0)
    engine = pipeline_dp.DPEngine(acc, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM, pipeline_dp.Metrics.MEAN],
        max_partitions_contributed=1,
        max_contributions_per_partition=MAX_ROWS,
        min_value=LO,
        max_value=HI,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1], value_extractor=lambda r: r[2]
    )
    res = engine.aggregate(rows, params, extractors, public_partitions=STATES)
    acc.compute_budgets()
    out = sorted(res)
    return [(k, str(v)[:120]) for k, v in out[:3]]


def tumult_spark(path: str, threads: int, ctx: dict):
    from tmlt.analytics import AddRowsWithID, KeySet, MaxRowsPerID, PureDPBudget, QueryBuilder, Session

    spark = ctx["spark"]
    df = spark.read.parquet(path).select("user_id", "state", "income")
    sess = Session.from_dataframe(
        privacy_budget=PureDPBudget(EPSILON), source_id="t", dataframe=df,
        protected_change=AddRowsWithID(id_column="user_id"),
    )
    keys = KeySet.from_dict({"state": STATES})
    eps3 = PureDPBudget(EPSILON / 3)

    def grouped():
        return QueryBuilder("t").enforce(MaxRowsPerID(MAX_ROWS)).groupby(keys)

    outs = [
        sess.evaluate(grouped().count(), eps3),
        sess.evaluate(grouped().sum("income", low=LO, high=HI), eps3),
        sess.evaluate(grouped().average("income", low=LO, high=HI), eps3),
    ]
    pdfs = [o.toPandas().sort_values("state") for o in outs]
    return [list(map(str, p.head(2).values.tolist())) for p in pdfs]


SYSTEMS = {
    "plain_duckdb": plain_duckdb,
    "floor_duckdb": floor_duckdb,
    "dpkit_duckdb": dpkit_duckdb,
    "dpkit_duckdb_before": dpkit_duckdb_before,
    "dpkit_spark": dpkit_spark,
    "opendp_polars": opendp_polars,
    "pipelinedp_local": pipelinedp_local,
    "tumult_spark": tumult_spark,
}
NEEDS_SPARK = {"dpkit_spark", "tumult_spark"}
# imported before the clock starts (import time is not query time)
IMPORTS = {
    "plain_duckdb": ["duckdb"], "floor_duckdb": ["duckdb"],
    "dpkit_duckdb": ["duckdb", "ibis", "dpkit.tables"], "dpkit_duckdb_before": ["duckdb", "ibis", "dpkit.tables"],
    "dpkit_spark": ["ibis", "dpkit.tables", "pyspark.sql"],
    "opendp_polars": ["polars", "opendp.prelude"], "pipelinedp_local": ["pipeline_dp", "pyarrow.parquet"],
    "tumult_spark": ["tmlt.analytics", "pyspark.sql"],
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("system", choices=sorted(SYSTEMS))
    ap.add_argument("path")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(args.path).metadata.num_rows
    ctx: dict = {}
    import importlib

    if args.system.endswith("_before"):
        before = os.environ.get("BENCH_DPKIT_BEFORE_SRC")
        if not before:
            sys.exit("dpkit_duckdb_before needs BENCH_DPKIT_BEFORE_SRC (a dpkit source tree's src folder)")
        sys.path.insert(0, before)
    for mod in IMPORTS[args.system]:
        importlib.import_module(mod)
    t0 = time.perf_counter()
    if args.system in NEEDS_SPARK:
        ctx["spark"] = spark_session(args.threads)
        ctx["spark"].range(1).count()  # JVM and session fully up before the clock starts
    setup = time.perf_counter() - t0
    c0, w0 = tree_cpu(), time.perf_counter()
    head = SYSTEMS[args.system](str(Path(args.path).resolve()), args.threads, ctx)
    wall, cpu = time.perf_counter() - w0, tree_cpu() - c0
    print(json.dumps({"system": args.system, "rows": rows, "setup_s": round(setup, 3), "wall_s": round(wall, 3),
                      "cpu_s": round(cpu, 3), "head": head}, default=str), flush=True)
    if "spark" in ctx:
        ctx["spark"].stop()


if __name__ == "__main__":
    main()
