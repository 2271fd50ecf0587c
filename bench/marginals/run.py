"""Marginals and synthetic data (issue #13): dpkit's methods side by side with AIM and MST (smartnoise-synth).

Every release runs in a fresh process (``release.py``: one method, one dataset, one epsilon, one seed) and
reports its CPU seconds (``time.process_time`` of that process, all threads) and wall seconds, and the mean total
variation over all 2-way and all 3-way marginals of the fitted model and of the sampled synthetic records,
measured with dpkit's own metric functions. Rows are appended to ``--out`` (JSON lines, one ``O_APPEND`` write
each, so two lanes may share it) as they finish, so an interrupted run resumes where it stopped (a row already
there for the same method/dataset/epsilon/seed is not rerun). ``--report`` prints the table (means over runs,
ratios to AIM) and writes the summary JSON; ``--plot`` the figures; ``--markdown`` prints the Markdown table.

Run in ``.bench-mbi-venv`` (``make bench-marginals``): mbi 1.1.0 (with JAX), smartnoise-synth 1.0.8 (AIM, MST)
and dpkit installed editable.

    python bench/marginals/run.py --methods dpkit_smg,dpkit_mst,indep,resample --runs 5
    python bench/marginals/run.py --methods snsynth_mst,snsynth_aim --datasets titanic,nltcs --runs 2
    python bench/marginals/run.py --methods snsynth_aim --datasets adult --epsilons 1 --runs 1 --timeout 7200
    python bench/marginals/run.py --report --plot --markdown
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = HERE / "results"
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DATASETS = ("titanic", "nltcs", "adult")
PEERS = ("snsynth_aim", "snsynth_mst", "indep", "resample")
METRICS = ("tv2_model", "tv3_model", "tv2_synth", "tv3_synth", "tv2_synth_sample", "tv3_synth_sample")


def dpkit_methods() -> list[str]:
    """dpkit methods present now (``release.DPKIT_METHODS`` that ``dpkit.marginals`` has), as ``dpkit_<name>``."""
    sys.path.insert(0, str(HERE))
    import release

    return ["dpkit_" + n for n in release.available_dpkit()]


def load_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if line:
            rows.append(json.loads(line))
    return rows


def key(row: dict) -> tuple:
    return (row["method"], row["dataset"], float(row["epsilon"]), int(row["seed"]))


def run_one(task, args) -> dict:
    method, dataset, eps, seed = task
    cmd = [sys.executable, str(HERE / "release.py"), "--method", method, "--dataset", dataset,
           "--epsilon", repr(eps), "--delta", repr(args.delta), "--seed", str(seed)]
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"method": method, "dataset": dataset, "epsilon": eps, "seed": seed, "delta": args.delta,
                "error": f"timeout after {args.timeout} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        why = (f"killed by signal {-proc.returncode} (9: e.g. the kernel's OOM killer, see dmesg)"
               if proc.returncode < 0 else f"exit code {proc.returncode}")
        return {"method": method, "dataset": dataset, "epsilon": eps, "seed": seed, "delta": args.delta,
                "error": f"{why} after {time.perf_counter() - t0:.0f} s wall; stderr: " + " | ".join(tail)}
    row = json.loads(lines[-1])
    row["process_wall_s"] = time.perf_counter() - t0
    row["load_before"] = os.getloadavg()[0]
    return row


def run(args) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {key(r) for r in load_rows(out) if "error" not in r}
    methods = args.methods.split(",") if args.methods else list(PEERS) + dpkit_methods()
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else list(range(args.runs))
    tasks = [(m, d, float(e), s) for m, d, e, s in itertools.product(
        methods, args.datasets.split(","), [float(x) for x in args.epsilons.split(",")], seeds)]
    tasks = [t for t in tasks if t not in done]
    print(f"{len(tasks)} releases to run ({len(done)} already in {out}); load {os.getloadavg()}", flush=True)

    def work(task):
        row = run_one(task, args)
        # one O_APPEND write per row: two lanes (two run.py processes) can share one --out
        fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(row) + "\n").encode())
        finally:
            os.close(fd)
        nan = float("nan")
        msg = row.get("error") or (f"cpu {row['cpu_s']:.1f}s wall {row['wall_s']:.1f}s "
                                   f"tv2 {row.get('tv2_model', nan):.4f} tv3 {row.get('tv3_model', nan):.4f} "
                                   f"synth {row.get('tv2_synth', nan):.4f}/{row.get('tv3_synth', nan):.4f}")
        print(f"{task[0]:>14} {task[1]:>8} eps={task[2]:<5} seed={task[3]}: {msg}", flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(work, tasks))


def summarise(rows: list[dict]) -> dict:
    import numpy as np

    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if "error" not in r:
            groups[(r["dataset"], float(r["epsilon"]), r["method"])].append(r)
    summary = {}
    for (d, e, m), rs in sorted(groups.items()):
        s = {"runs": len(rs), "cpu_s": float(np.mean([r["cpu_s"] for r in rs])),
             "wall_s": float(np.mean([r["wall_s"] for r in rs]))}
        for k in METRICS:
            vals = [r[k] for r in rs if k in r]
            if vals:
                s[k] = float(np.mean(vals))
                s[k + "_sd"] = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
        summary[f"{d}|{e:g}|{m}"] = s
    return summary


def table(summary: dict) -> str:
    lines = []
    hdr = (f"{'dataset':>8} {'eps':>5} {'method':>14} {'runs':>4} {'tv2 model':>10} {'tv3 model':>10} "
           f"{'tv2 synth':>10} {'tv3 synth':>10} {'cpu s':>8} {'wall s':>8} {'tv3m/AIM':>9} {'tv3s/AIM':>9} "
           f"{'cpu/AIM':>8}")
    lines.append(hdr)
    for d, e, m, s in _ordered(summary):
        aim = summary.get(f"{d}|{e}|{AIM}")

        def f(x, w=10, p=4):
            return f"{x:>{w}.{p}f}" if isinstance(x, float) else f"{'-':>{w}}"

        def ratio(a, b):
            return a / b if isinstance(a, float) and isinstance(b, float) and b > 0 else None

        r3m = ratio(s.get("tv3_model"), aim.get("tv3_model")) if aim else None
        r3s = ratio(s.get("tv3_synth"), aim.get("tv3_synth")) if aim else None
        rc = ratio(s.get("cpu_s"), aim.get("cpu_s")) if aim else None
        lines.append(f"{d:>8} {e:>5} {m:>14} {s['runs']:>4} {f(s.get('tv2_model'))} {f(s.get('tv3_model'))} "
                     f"{f(s.get('tv2_synth'))} {f(s.get('tv3_synth'))} {f(s['cpu_s'], 8, 1)} "
                     f"{f(s['wall_s'], 8, 1)} {f(r3m, 9, 2)} {f(r3s, 9, 2)} {f(rc, 8, 3)}")
    return "\n".join(lines)


AIM = "snsynth_aim"
ORDER = ("snsynth_aim", "snsynth_mst", "dpkit_smg", "dpkit_mst", "dpkit_priview", "dpkit_direct", "dpkit_mwem",
         "indep", "resample")


def _ordered(summary: dict) -> list[tuple[str, str, str, dict]]:
    """(dataset, eps, method, stats) rows: datasets as DATASETS, eps ascending, methods as ORDER."""
    rows = [(*k.split("|"), s) for k, s in summary.items()]

    def rank(r):
        d, e, m, _ = r
        return (DATASETS.index(d) if d in DATASETS else 9, float(e), ORDER.index(m) if m in ORDER else 99, m)

    return sorted(rows, key=rank)


def markdown(summary: dict) -> str:
    """The summary as a Markdown table (docs/benchmarks.md): ratios to AIM (same dataset and epsilon) where AIM
    ran: each of the model's 2-way and 3-way TV, and CPU seconds."""
    def f(x, p=3):
        return f"{x:.{p}f}" if isinstance(x, float) else "—"

    def ratio(a, b):
        return a / b if isinstance(a, float) and isinstance(b, float) and b > 0 else None

    lines = ["| dataset | ε | method | runs | 2-way TV model | 3-way TV model | 2-/3-way TV records "
             "| 2-/3-way records (i.i.d.) | CPU s | wall s | 2-/3-way model ÷ AIM | CPU ÷ AIM |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for d, e, m, s in _ordered(summary):
        aim = summary.get(f"{d}|{e}|{AIM}", {})
        r2, r3 = ratio(s.get("tv2_model"), aim.get("tv2_model")), ratio(s.get("tv3_model"), aim.get("tv3_model"))
        rc = ratio(s["cpu_s"], aim.get("cpu_s")) if m not in (AIM, "resample") else None
        rr = "—" if m == AIM or (r2 is None and r3 is None) else f"{f(r2, 2)} / {f(r3, 2)}"
        sd = s.get("tv3_model_sd")
        tv3 = f(s.get("tv3_model")) + (f" ± {sd:.3f}" if isinstance(sd, float) else "")
        lines.append(f"| {d} | {e} | {m} | {s['runs']} | {f(s.get('tv2_model'))} | {tv3} | "
                     f"{f(s.get('tv2_synth'))} / {f(s.get('tv3_synth'))} | "
                     f"{f(s.get('tv2_synth_sample'))} / {f(s.get('tv3_synth_sample'))} | "
                     f"{f(s['cpu_s'], 1)} | {f(s['wall_s'], 1)} | {rr} | {f(rc, 3)} |")
    return "\n".join(lines)


def plot(summary: dict, outdir: Path) -> list[Path]:
    """Per dataset: mean TV over all 2-way and all 3-way marginals vs epsilon (solid: model; dashed: records),
    and CPU seconds per release vs epsilon."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    datasets = sorted({k.split("|")[0] for k in summary}, key=lambda d: DATASETS.index(d) if d in DATASETS else 9)
    for d in datasets:
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.3))
        methods = [m for m in ORDER if any(k.startswith(d + "|") and k.endswith("|" + m) for k in summary)]
        methods += sorted({k.split("|")[2] for k in summary if k.startswith(d + "|")} - set(methods))
        colors = {m: f"C{i}" for i, m in enumerate(methods)}

        def pts(m, field, d=d):
            return sorted((float(k.split("|")[1]), s[field]) for k, s in summary.items()
                          if k.startswith(f"{d}|") and k.endswith(f"|{m}") and field in s)

        for ax, kk in zip(axes[:2], (2, 3), strict=True):
            for m in methods:
                for kind, ls in (("model", "-"), ("synth", "--")):
                    if m == "resample" and kind == "model":
                        continue
                    p = pts(m, f"tv{kk}_{kind}")
                    if p:
                        xs, ys = zip(*p, strict=True)
                        ax.plot(xs, ys, ls, marker="o", ms=4, color=colors[m],
                                label=f"{m} ({'model' if kind == 'model' else 'records'})")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("epsilon (delta = 1e-9)")
            ax.set_ylabel(f"mean TV over all {kk}-way marginals")
            ax.set_title(f"{d}: {kk}-way (solid: model, dashed: records)")
            ax.grid(True, which="both", alpha=0.3)
        ax = axes[2]
        for m in methods:
            if m in ("resample",):
                continue
            p = pts(m, "cpu_s")
            if p:
                xs, ys = zip(*p, strict=True)
                ax.plot(xs, ys, "-", marker="o", ms=4, color=colors[m], label=m)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epsilon (delta = 1e-9)")
        ax.set_ylabel("CPU seconds per release")
        ax.set_title(f"{d}: release time (CPU, 2 shared cores)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        axes[1].legend(fontsize=6)
        fig.tight_layout()
        path = outdir / f"marginals_{d}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default="", help="comma-separated; default: the peers and every dpkit method present")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--epsilons", default=",".join(f"{e:g}" for e in EPSILONS))
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--runs", type=int, default=5, help="seeds 0 .. runs-1 (the issue asks at least 5)")
    ap.add_argument("--seeds", default="", help="comma-separated seeds instead of 0 .. runs-1 (to split a cell "
                    "between lanes without duplicating a seed)")
    ap.add_argument("--jobs", type=int, default=1, help="releases at once (1 keeps the timings clean)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per release")
    ap.add_argument("--out", default=str(RESULTS / "runs.jsonl"))
    ap.add_argument("--report", action="store_true", help="only summarise --out (no runs)")
    ap.add_argument("--plot", action="store_true", help="with --report: write docs/img/marginals_<dataset>.png")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    args = ap.parse_args(argv)
    if not args.report:
        run(args)
    rows = load_rows(Path(args.out))
    summary = summarise(rows)
    (Path(args.out).parent / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(table(summary))
    if args.markdown:
        print(markdown(summary))
    errors = [r for r in rows if "error" in r]
    for r in errors:
        print(f"error: {r['method']} {r['dataset']} eps={r['epsilon']} seed={r['seed']}: {r['error']}")
    if args.plot:
        for p in plot(summary, ROOT / "docs" / "img"):
            print(f"wrote {p.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
