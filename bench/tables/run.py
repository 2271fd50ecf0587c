"""Tables benchmark driver (issue #5): every system in its own process, side by side, best of N.

    python bench/tables/run.py --rows 10_000_000 --systems plain_duckdb,floor_duckdb,dpkit_duckdb --repeats 2

Each run is ``systems.py SYSTEM PATH`` in a fresh subprocess (under ``nice``), watched by this driver:
peak memory is the largest resident set of the whole process tree (the Python process and e.g. Spark's JVM),
sampled every 0.1 s; a run whose tree passes ``--mem-cap`` GiB (default 9) or ``--timeout`` seconds is killed
and recorded as such. The load average (1 min) is read before each run. Results are appended as JSON lines to
``bench/tables/results/results.jsonl`` and the table of best-of-N figures is printed as Markdown
(``--table-only`` re-prints it from the JSON lines).

Systems that need another environment (Tumult pins pyspark 3.5 and pandas 1.5) name its Python with
``--python SYSTEM=PATH``; the default is this interpreter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "results.jsonl"
sys.path.insert(0, str(HERE))

from gen_data import data_path  # noqa: E402


def run_one(python: str, system: str, path: Path, *, timeout: float, mem_cap_gib: float, threads: int) -> dict:
    cmd = ["nice", "-n", "5", python, str(HERE / "systems.py"), system, str(path), "--threads", str(threads)]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    status = "ok"
    while proc.poll() is None:
        rss = 0
        try:
            for p in [ps, *ps.children(recursive=True)]:
                try:
                    rss += p.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        peak = max(peak, rss)
        elapsed = time.perf_counter() - t0
        if rss > mem_cap_gib * 2**30 or elapsed > timeout:
            status = "memory cap" if rss > mem_cap_gib * 2**30 else "time limit"
            for p in [*ps.children(recursive=True), ps]:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            break
        time.sleep(0.1)
    out, err = proc.communicate()
    total = time.perf_counter() - t0
    rec: dict = {"system": system, "path": path.name, "status": status, "load1": round(load, 2),
                 "peak_rss_mib": round(peak / 2**20), "process_s": round(total, 2),
                 "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith("{")), None)
    if status == "ok" and proc.returncode == 0 and line:
        rec.update(json.loads(line))
    elif status == "ok":
        rec["status"] = f"failed (exit {proc.returncode})"
        rec["error"] = err.strip().splitlines()[-3:] if err.strip() else []
    if status == "time limit":
        rec["timeout_s"] = timeout
    return rec


def best(records: list[dict]) -> dict[tuple[int, str], dict]:
    """Best (minimum CPU time) successful run per (rows, system); failed ones only when none succeeded."""
    out: dict[tuple[int, str], dict] = {}
    for r in records:
        key = (r.get("rows") or int(r["path"].split("_")[1].split(".")[0]), r["system"])
        cur = out.get(key)
        ok = r["status"] == "ok"
        if cur is None or (ok and (cur["status"] != "ok" or r["cpu_s"] < cur["cpu_s"])):
            out[key] = dict(r, runs=(cur or {}).get("runs", 0) + 1)
        else:
            cur["runs"] = cur.get("runs", 1) + 1
    return out


def table(records: list[dict]) -> str:
    b = best(records)
    lines = ["| rows | system | wall s | CPU s | peak MiB | load | runs | CPU / floor | CPU / dpkit |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for rows in sorted({k[0] for k in b}):
        floor = b.get((rows, "floor_duckdb"))
        dpk = b.get((rows, "dpkit_duckdb"))
        for (r, sysname), rec in sorted(b.items(), key=lambda kv: (kv[0][0], kv[1].get("cpu_s", 1e18))):
            if r != rows:
                continue
            if rec["status"] != "ok":
                lines.append(f"| {rows:,} | {sysname} | {rec['status']} after {rec['process_s']:.0f} s | | "
                             f"{rec['peak_rss_mib']:,} | {rec['load1']} | {rec['runs']} | | |")
                continue
            ref_dp = b.get((rows, "dpkit_spark")) if sysname == "tumult_spark" else dpk
            f = f"{rec['cpu_s'] / floor['cpu_s']:.2f}" if floor and floor["status"] == "ok" else ""
            d = (f"{rec['cpu_s'] / ref_dp['cpu_s']:.2f}" if ref_dp and ref_dp["status"] == "ok"
                 and not sysname.startswith("dpkit") else "")
            lines.append(f"| {rows:,} | {sysname} | {rec['wall_s']:.2f} | {rec['cpu_s']:.2f} | "
                         f"{rec['peak_rss_mib']:,} | {rec['load1']} | {rec['runs']} | {f} | {d} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=lambda s: int(s.replace("_", "")), action="append", default=[])
    ap.add_argument("--systems", default="plain_duckdb,floor_duckdb,dpkit_duckdb,opendp_polars")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--mem-cap", type=float, default=9.0, help="GiB for the whole process tree")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--python", action="append", default=[], help="SYSTEM=PATH of another interpreter")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--results", type=Path, default=RESULTS, help="JSON-lines file to append to and tabulate")
    args = ap.parse_args()
    results = args.results
    pythons = dict(p.split("=", 1) for p in args.python)
    results.parent.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        for rows in args.rows:
            path = data_path(rows)
            if not path.exists():
                sys.exit(f"{path} is missing: python bench/tables/gen_data.py --rows {rows}")
            gave_up: set[str] = set()
            for rep in range(args.repeats):
                for system in args.systems.split(","):
                    if system in gave_up:  # hit the time limit once: no point timing it again
                        continue
                    rec = run_one(pythons.get(system, sys.executable), system, path, timeout=args.timeout,
                                  mem_cap_gib=args.mem_cap, threads=args.threads)
                    rec["repeat"] = rep
                    print(json.dumps({k: v for k, v in rec.items() if k != "head"}), flush=True)
                    with results.open("a") as fh:
                        fh.write(json.dumps(rec, default=str) + "\n")
                    if rec["status"] == "time limit":
                        gave_up.add(system)
    records = [json.loads(ln) for ln in results.read_text().splitlines() if ln.strip()] if results.exists() else []
    print(table(records))


if __name__ == "__main__":
    main()
