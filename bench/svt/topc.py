"""Top-c selection with the sparse vector technique and the exponential mechanism (Lyu, Su & Li 2017, §6).

Reproduces the paper's Fig. 4 (interactive: SVT-DPBook and SVT-S with the budget splits 1:1, 1:3, 1:c,
1:c^(2/3)) and Fig. 5 (non-interactive: the exponential mechanism and SVT with retraversal) on

- (a) a Zipf score vector: 10,000 items, score_i ∝ 1/i, integer counts summing to 10^6 records;
- (b) item frequencies of ``../shared/data/itemsets/retail.dat`` (88,162 transactions, 16,470 items);
- (c) item frequencies of ``../shared/data/itemsets/mushroom.dat`` (8,124 transactions, 119 items; only
  the c < 119 columns exist).

A transaction is one record; an item's score is the number of transactions containing it, so every score
has sensitivity 1 under add/remove-one-transaction and the scores are monotonic (all move the same way).
ε = 0.1, threshold T = mean of the c-th and (c+1)-th true scores, items visited in a random order
(seeded numpy shuffle per run), ``--runs`` runs (100 by default). Metrics, mean ± std over runs:

- SER = 1 − Σ_{i∈S} q_i / Σ_{i∈Top_c} q_i (the paper's avgScore(S)/avgScore(Top_c) with the average
  taken over the c slots: an SVT run that stops with fewer than c positives scores 0 in the empty slots);
- FNR = fraction of the true top-c that is missed (ties at the c-th score: any item tied with it counts
  as a true top-c item, up to the number of top-c slots held by that score).

Every selection is made by dpkit's own mechanisms with a deterministic dpkit random source (the noise
is exact; only the item order uses numpy). ``--quick`` runs 10 runs and c ∈ {25, 50, 100}.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = HERE / "results"
DATA = ROOT.parent / "shared" / "data" / "itemsets"
EPSILON = 0.1
CS = (25, 50, 100, 200, 300)


# ---------------------------------------------------------------------------------------------
# score vectors
# ---------------------------------------------------------------------------------------------
def zipf_scores(items: int = 10_000, records: int = 1_000_000) -> np.ndarray:
    """Integer counts ∝ 1/i summing exactly to ``records``: floor of the exact shares, then the
    leftover units go one each to the items with the largest fractional parts (largest-remainder
    rounding; ties to the lower rank)."""
    w = 1.0 / np.arange(1, items + 1)
    share = records * w / w.sum()
    base = np.floor(share).astype(np.int64)
    left = records - int(base.sum())
    frac = share - base
    base[np.argsort(-frac, kind="stable")[:left]] += 1
    assert int(base.sum()) == records
    return base


def itemset_scores(path: Path) -> np.ndarray:
    """Item supports of a FIMI transaction file (one transaction per line; items separated by blanks
    or commas): the number of transactions that contain each item (an item repeated in a transaction
    counts once), in order of first appearance."""
    counts: Counter[str] = Counter()
    with path.open(encoding="ascii") as fh:
        for line in fh:
            items = {t for t in re.split(r"[,\s]+", line.strip()) if t}
            counts.update(items)
    return np.array(list(counts.values()), dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------------
def metrics(scores: np.ndarray, selected: np.ndarray, c: int) -> tuple[float, float]:
    """(SER, FNR) of the selected items (indices into ``scores``) for the true top ``c``."""
    top = np.sort(scores)[::-1]
    top_sum = float(top[:c].sum())
    sel = scores[np.asarray(selected, dtype=np.int64)]
    ser = 1.0 - float(sel.sum()) / top_sum
    kth = top[c - 1]
    above = int(np.sum(sel > kth))
    slots_tied = int(np.sum(top[:c] == kth))
    hits = above + min(int(np.sum(sel == kth)), slots_tied)
    return ser, 1.0 - hits / c


# ---------------------------------------------------------------------------------------------
# methods: each maps (ordered scores, c, threshold, rng) to the selected positions, via dpkit
# ---------------------------------------------------------------------------------------------
def em_method(scores: np.ndarray, c: int, threshold: float, rng: Any) -> np.ndarray:
    from dpkit.mechanisms.top_k import exponential_top_k

    return exponential_top_k(scores, c, 1.0, EPSILON, monotonic=True, rng=rng).value


METHODS: dict[str, tuple[str, Callable[..., np.ndarray]]] = {}
ENTRY_POINTS: dict[str, str] = {"EM": "dpkit.mechanisms.top_k.exponential_top_k(monotonic=True)"}


def build_methods(increments: list[float]) -> None:
    """Fill METHODS (name -> (setting, fn)); the SVT methods come from :mod:`bench.svt._svt_methods`."""
    sys.path.insert(0, str(HERE))
    import _svt_methods

    METHODS.clear()
    for name, fn, entry in _svt_methods.interactive():
        METHODS[name] = ("interactive", fn)
        ENTRY_POINTS[name] = entry
    METHODS["EM"] = ("non-interactive", em_method)
    for name, fn, entry in _svt_methods.retraversal(increments):
        METHODS[name] = ("non-interactive", fn)
        ENTRY_POINTS[name] = entry


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def run_dataset(name: str, scores: np.ndarray, cs: list[int], runs: int, seed: int) -> dict[str, Any]:
    from dpkit.noise import deterministic_source

    res: dict[str, dict[int, tuple[float, float, float, float]]] = {m: {} for m in METHODS}
    thresholds: dict[int, float] = {}
    timing: dict[str, float] = dict.fromkeys(METHODS, 0.0)
    n = scores.size
    for c in cs:
        if c >= n:
            continue
        top = np.sort(scores)[::-1]
        threshold = (float(top[c - 1]) + float(top[c])) / 2.0
        thresholds[c] = threshold
        gen = np.random.default_rng([seed, c, n])  # item order only (public randomness of the benchmark)
        orders = [gen.permutation(n) for _ in range(runs)]
        for m, (_, fn) in METHODS.items():
            rng = deterministic_source(seed * 1_000_003 + zlib.crc32(f"{name}/{c}/{m}".encode()))
            ser, fnr = np.empty(runs), np.empty(runs)
            t0 = time.perf_counter()
            for r, order in enumerate(orders):
                ordered = scores[order]
                sel = fn(ordered, c, threshold, rng)
                ser[r], fnr[r] = metrics(ordered, sel, c)
            timing[m] += time.perf_counter() - t0
            res[m][c] = (ser.mean(), ser.std(), fnr.mean(), fnr.std())
    return {"name": name, "n": n, "res": res, "timing": timing, "thresholds": thresholds}


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
def machine() -> str:
    model, cpus = platform.processor() or "?", str(os.cpu_count())
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        model = fields.get("Model name", model).strip()
        cpus = fields.get("CPU(s)", cpus).strip()
    except OSError:  # pragma: no cover
        pass
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{model}, {cpus} CPUs (load average {load})"


def versions() -> str:
    out = [f"Python {platform.python_version()}"]
    for lib in ("numpy", "dpkit"):
        try:
            out.append(f"{lib} {metadata.version(lib)}")
        except metadata.PackageNotFoundError:  # pragma: no cover
            out.append(f"{lib} ?")
    return ", ".join(out)


def tables(ds: dict[str, Any], cs: list[int]) -> list[str]:
    cols = [c for c in cs if c < ds["n"]]
    lines = []
    for label, k in (("SER", 0), ("FNR", 2)):
        lines += [f"**{ds['name']}: {label}** (mean ± std over runs)", ""]
        lines.append("| method | setting | " + " | ".join(f"c={c}" for c in cols) + " |")
        lines.append("|---|---|" + "---:|" * len(cols))
        for m, (setting, _) in METHODS.items():
            cells = [f"{ds['res'][m][c][k]:.3f} ± {ds['res'][m][c][k + 1]:.3f}" for c in cols]
            lines.append(f"| {m} | {setting} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="10 runs, c in {25, 50, 100}")
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--increments", default="1,3,5",
                    help="SVT-ReTr threshold increments, in units of the query noise's standard deviation")
    ap.add_argument("--datasets", default="zipf,retail,mushroom")
    ap.add_argument("--out", default=None, help="default bench/svt/results/topc.md (topc_quick.md with --quick)")
    args = ap.parse_args(argv)
    runs = 10 if args.quick else args.runs
    cs = [25, 50, 100] if args.quick else list(CS)
    build_methods([float(x) for x in args.increments.split(",") if x])

    datasets = []
    t_all = time.perf_counter()
    for name in args.datasets.split(","):
        if name == "zipf":
            scores, src = zipf_scores(), "synthetic: 10,000 items, score ∝ 1/i, 10^6 records (largest remainder)"
        else:
            path = DATA / f"{name}.dat"
            if not path.exists():
                print(f"[skip] {path} not found")
                continue
            scores, src = itemset_scores(path), f"{path.name}: item supports"
        t0 = time.perf_counter()
        ds = run_dataset(name, scores, cs, runs, args.seed)
        ds["source"] = src
        ds["top"] = int(scores.max())
        ds["seconds"] = time.perf_counter() - t0
        datasets.append(ds)
        print(f"[{name}] {scores.size} items, total support {int(scores.sum())}, {ds['seconds']:.1f} s", flush=True)
    total = time.perf_counter() - t_all

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "python bench/svt/topc.py " + " ".join(sys.argv[1:] if argv is None else argv)
    lines = [
        "# Top-c selection: SVT vs the exponential mechanism (Lyu, Su & Li 2017, §6)",
        "",
        f"- Command: `{cmd.strip()}`",
        f"- Date: {now}; machine: {machine()}; {versions()}",
        f"- ε = {EPSILON}, Δ = 1 (item supports, monotonic), {runs} runs per cell, threshold = mean of the c-th "
        "and (c+1)-th true scores, items in a fresh random order per run; total time "
        f"{total:.0f} s.",
        "- Entry points (all dpkit): " + "; ".join(f"{m}: `{e}`" for m, e in ENTRY_POINTS.items()),
        "",
    ]
    for ds in datasets:
        lines += [f"### {ds['name']} ({ds['n']} items; {ds['source']})", ""]
        top = ", ".join(f"c={c}: {t:g}" for c, t in ds["thresholds"].items())
        lines += [f"Largest score {ds['top']}; thresholds T (mean of the c-th and (c+1)-th scores): {top}.", ""]
        lines += tables(ds, cs)
        lines.append("Seconds per method (all c, all runs): "
                     + ", ".join(f"{m} {t:.1f}" for m, t in ds["timing"].items()))
        lines.append("")
    text = "\n".join(lines).rstrip() + "\n"
    print(text)
    out = Path(args.out) if args.out else RESULTS / ("topc_quick.md" if args.quick else "topc.md")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"(written to {out})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
