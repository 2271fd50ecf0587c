"""Issue #16, histogram rows: the former implementations side by side with the current ones, in one run.

- DAWA: the exact interval costs by direct window sums, ``O(m^2)`` (the former ``window_devs``/``interval_costs``
  and the former per-``k`` numpy DP, copied below) vs the wavelet-matrix costs and the Python-int DP, at 4,096 /
  16,384 / 65,536 bins; the full ``dawa`` call each way, and a check that both give the same release (seed).
- EFPA: the former dense ``m x m`` basis (copied below: dense builder, dense integer product, dense synthesis)
  vs the generated row blocks, at 4,096 / 8,192 bins; first call (after a warm-up call at 8 bins for the lazy
  imports) and second call, each in a fresh subprocess; the peak RSS growth over the warm-up is the calls' own;
  same k and noisy coefficients checked.
- ``hierarchical(inference="nnls")``: the former general solver (``dpkit.histograms.nnls`` on the sparse
  strategy: scipy ``lsq_linear`` "trf", tol 1e-10) vs the exact tree active-set solver, at 4,096 bins with
  b = 2, 4, 16; then accuracy of ``"nnls"`` against the default ``"closed"`` on the DPBench 1-D datasets
  (``../shared/data/dpbench``, resampled as in ``dpbench.py``), mean |error| per query on all prefixes, 2,000
  random ranges and single bins.

CPU seconds are ``time.process_time()`` (all threads of the process). Run: ``OMP_NUM_THREADS=1 nice -n 5
.venv/bin/python bench/histograms/speed16.py`` (``--part dawa|efpa|nnls|accuracy``, ``--reps``). Writes a
Markdown summary to stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DPBENCH = ROOT.parent / "shared" / "data" / "dpbench" / "1D"
FILES = {"ADULT": "ADULTFRANK.n4096.npy", "HEPTH": "HEPTH.n4096.npy", "INCOME": "INCOME.n4096.npy",
         "MEDCOST": "MEDCOST.n4096.npy", "NETTRACE": "NETTRACE.n4096.npy", "PATENT": "PATENT.n4096.npy",
         "SEARCH": "SEARCHLOGS.n4096.npy", "BIDS-ALL": "bids.npy", "MD-SAL": "GrossCompenMDSalary1.npy"}


# ------------------------------------------------------------------------------ former implementations
def old_window_devs(x: np.ndarray, length: int) -> np.ndarray:
    """The former ``dawa.window_devs``: direct ``sum |L x_l - S|`` per window, blocks of 2^22 entries."""
    block = 1 << 22
    w = np.lib.stride_tricks.sliding_window_view(x, length)
    n = w.shape[0]
    s = w.sum(axis=1) if n * length <= block else np.convolve(x, np.ones(length, dtype=np.int64), "valid")
    out = np.empty(n, dtype=np.int64)
    step = max(1, block // length)
    for a in range(0, n, step):
        b = min(n, a + step)
        out[a:b] = np.abs(np.int64(length) * w[a:b] - s[a:b, None]).sum(axis=1)
    return out


def old_interval_costs(x: np.ndarray, lengths: np.ndarray, bits: int = 12) -> np.ndarray:
    from dpkit.histograms.dawa import floor_units

    m = x.size
    out = np.full((lengths.size, m), -1, dtype=np.int64)
    for j, length in enumerate(lengths.tolist()):
        out[j, : m - length + 1] = floor_units(old_window_devs(x, length), length, bits)
    return out


def old_best_partition(noisy: np.ndarray, lengths: np.ndarray) -> list[tuple[int, int]]:
    nl, m = noisy.shape
    best = np.zeros(m + 1, dtype=np.int64)
    arg = np.zeros(m + 1, dtype=np.int64)
    lens = lengths.astype(np.int64)
    rows = np.arange(nl)
    for k in range(1, m + 1):
        ok = lens <= k
        starts = k - lens[ok]
        vals = best[starts] + noisy[rows[ok], starts]
        i = int(np.argmin(vals))
        best[k] = vals[i]
        arg[k] = starts[i]
    buckets = []
    k = m
    while k > 0:
        buckets.append((int(arg[k]), k))
        k = int(arg[k])
    return buckets[::-1]


def old_efpa_basis(m: int, basis: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The former ``efpa_basis``: the dense fixed-point basis, row by row."""
    import math

    t = np.arange(m, dtype=np.int64)
    rows_f = []
    if basis == "dft":
        rows_f.append(np.full(m, 1.0 / math.sqrt(m)))
        for f in range(1, (m - 1) // 2 + 1):
            ang = 2.0 * np.pi * ((f * t) % m) / m
            rows_f += [math.sqrt(2.0 / m) * np.cos(ang), math.sqrt(2.0 / m) * np.sin(ang)]
        if m % 2 == 0 and m > 1:
            rows_f.append(np.where(t % 2 == 0, 1.0, -1.0) / math.sqrt(m))
        rows = np.minimum(m, 2 * np.arange(1, m // 2 + 2) - 1)
    else:
        rows_f.append(np.full(m, 1.0 / math.sqrt(m)))
        for r in range(1, m):
            ang = np.pi * ((r * (2 * t + 1)) % (4 * m)) / (2 * m)
            rows_f.append(math.sqrt(2.0 / m) * np.cos(ang))
        rows = np.arange(1, m + 1)
    b_int = np.rint(np.ldexp(np.array(rows_f), 30)).astype(np.int64)
    l1 = np.cumsum(np.abs(b_int), axis=0).max(axis=1)[rows - 1]
    return b_int, rows, l1


def install_old_efpa() -> Any:
    """Patch ``dpkit.histograms.efpa`` back to the former dense path (cached basis, as before)."""
    import functools

    mod = importlib.import_module("dpkit.histograms.efpa")
    basis_of = functools.lru_cache(maxsize=1)(old_efpa_basis)

    def coefficients(m: int, basis: str, arr: np.ndarray) -> list[int]:
        b_int = basis_of(m, basis)[0]
        out = np.zeros(b_int.shape[0], dtype=object)
        rest = arr.astype(np.int64)
        for shift in range(0, 54, 18):
            out = out + (b_int @ (rest & np.int64((1 << 18) - 1))).astype(object) * (1 << shift)
            rest = rest >> np.int64(18)
        return [int(v) for v in out]

    mod._candidates = lambda m, basis: basis_of(m, basis)[1:]
    mod._coefficients = coefficients
    mod._synthesis = lambda m, basis, noisy: np.ldexp(basis_of(m, basis)[0][:noisy.size].astype(np.float64),
                                                      -30).T @ noisy
    return basis_of


# ------------------------------------------------------------------------------ parts
def cpu(fn: Any) -> tuple[float, Any]:
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def part_dawa(sizes: list[int]) -> list[str]:
    from dpkit.histograms import dawa
    from dpkit.noise import deterministic_source

    mod = importlib.import_module("dpkit.histograms.dawa")
    new_costs, new_dp = mod.interval_costs, mod.best_partition
    lines = ["| bins | costs, former O(m²) | costs, wavelet matrix | DP, former | DP, now | `dawa` call, former |"
             " `dawa` call, now | same release |", "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in sizes:
        g = np.random.default_rng(m)
        x = (g.poisson(5.0, m) * (g.random(m) < 0.3)).astype(np.int64)  # sparse, lumpy
        lens = mod._lengths("auto", m)
        t_oc, oc = cpu(lambda: old_interval_costs(x, lens))  # noqa: B023
        t_nc, nc = cpu(lambda: new_costs(x, lens))  # noqa: B023
        assert np.array_equal(oc, nc)
        noisy = nc + g.integers(-30000, 30000, nc.shape)
        t_od, od = cpu(lambda: old_best_partition(noisy, lens))  # noqa: B023
        t_nd, nd = cpu(lambda: new_dp(noisy, lens))  # noqa: B023
        assert od == nd
        mod.interval_costs, mod.best_partition = old_interval_costs, old_best_partition
        t_of, rel_o = cpu(lambda: dawa(x, 1.0, rng=deterministic_source(1)))  # noqa: B023
        mod.interval_costs, mod.best_partition = new_costs, new_dp
        t_nf, rel_n = cpu(lambda: dawa(x, 1.0, rng=deterministic_source(1)))  # noqa: B023
        same = rel_o.parts["buckets"] == rel_n.parts["buckets"] and np.array_equal(rel_o.value, rel_n.value)
        lines.append(f"| {m:,} | {t_oc:.3f} | {t_nc:.3f} | {t_od:.3f} | {t_nd:.3f} | {t_of:.2f} | {t_nf:.2f} |"
                     f" {'yes' if same else 'NO'} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def efpa_one(impl: str, m: int, basis: str) -> dict[str, Any]:
    """One subprocess: first and second ``efpa`` call, peak RSS, and the release's deterministic parts."""
    from dpkit.histograms import efpa
    from dpkit.noise import deterministic_source

    if impl == "former":
        install_old_efpa()
    efpa(np.arange(8), 1.0, basis=basis, rng=deterministic_source(0))  # warm-up: lazy imports, not the basis
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    g = np.random.default_rng(m)
    x = g.poisson(20.0, m) * (g.random(m) < 0.5)
    t1, rel = cpu(lambda: efpa(x, 1.0, basis=basis, rng=deterministic_source(1)))
    t2, _ = cpu(lambda: efpa(x, 1.0, basis=basis, rng=deterministic_source(2)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return {"first": t1, "second": t2, "rss_mib": rss - base_rss, "k": rel.parts["k"],
            "coefficients": rel.parts["coefficients"].tolist(), "value": rel.value.tolist()}


def part_efpa(sizes: list[int]) -> list[str]:
    lines = ["| bins | basis | first call, former | first call, now | second call, former | second call, now |"
             " peak RSS growth, former | peak RSS growth, now | same k and coefficients | max value difference |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for m in sizes:
        for basis in ("dft", "dct"):
            res = {}
            for impl in ("former", "now"):
                out = subprocess.run([sys.executable, __file__, "--efpa-one", impl, str(m), basis], check=True,
                                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
                res[impl] = json.loads(out.stdout.strip().splitlines()[-1])
            o, n = res["former"], res["now"]
            same = o["k"] == n["k"] and o["coefficients"] == n["coefficients"]
            diff = float(np.max(np.abs(np.array(o["value"]) - np.array(n["value"]))))
            lines.append(f"| {m:,} | {basis} | {o['first']:.2f} | {n['first']:.2f} | {o['second']:.2f} |"
                         f" {n['second']:.2f} | {o['rss_mib']:.0f} MiB | {n['rss_mib']:.0f} MiB |"
                         f" {'yes' if same else 'NO'} | {diff:.1e} |")
            print(lines[-1], file=sys.stderr, flush=True)
    return lines


def part_nnls(branchings: list[int], m: int = 4096) -> list[str]:
    from dpkit.histograms import hierarchical, hierarchy_strategy, nnls
    from dpkit.histograms.hierarchical import _dlap_variance
    from dpkit.histograms.inference import _tree_nnls
    from dpkit.noise import deterministic_source

    lines = ["| bins | b | former `nnls` (lsq_linear trf) | tree active set | steps | objective, former − now |"
             " max |difference| |", "|---:|---:|---:|---:|---:|---:|---:|"]
    g = np.random.default_rng(16)
    x = np.zeros(m, dtype=np.int64)
    x[g.choice(m, 60, replace=False)] = g.integers(1, 200, 60)
    for b in branchings:
        rel = hierarchical(x, 1.0, branching=b, inference="none", rng=deterministic_source(3))
        h = rel.params["height"]
        var = [_dlap_variance(t) for t in rel.params["level_scales"]]
        levels = [lv.astype(float) for lv in rel.parts["levels"]]
        a = hierarchy_strategy(m, b)
        v = np.repeat(var, [b ** (j + 1) for j in range(h)])
        y = np.concatenate(levels)
        t_o, old = cpu(lambda: nnls(a, y, v))  # noqa: B023
        t_n, (new, steps) = cpu(lambda: _tree_nnls(levels, var, b, m))  # noqa: B023

        def obj(z: np.ndarray) -> float:
            return float(np.sum((a @ z - y) ** 2 / v))  # noqa: B023

        lines.append(f"| {m:,} | {b} | {t_o:.2f} | {t_n:.4f} | {steps} | {obj(old) - obj(new):.2e} |"
                     f" {np.abs(old - new).max():.1e} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return lines


def part_accuracy(reps: int) -> list[str]:
    from dpkit.histograms import hierarchical, prefix_ranges, random_ranges
    from dpkit.noise import deterministic_source

    if not DPBENCH.exists():
        return ["(DPBench data not found: accuracy part skipped)"]
    m = 4096
    rr = random_ranges(m, 2000, rng=deterministic_source(20161))
    pr = prefix_ranges(m)
    lines = ["| dataset | zero bins | records | ε | b | prefixes: nnls / closed | ranges: nnls / closed |"
             " bins: nnls / closed |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    ratios: dict[str, list[float]] = {"prefix": [], "range": [], "bin": []}
    for name, f in FILES.items():
        base = np.asarray(np.load(DPBENCH / f), dtype=np.float64)
        for scale in (10**3, 10**5):
            for eps in (0.1, 1.0):
                for b in (16, 2):
                    err = {inf: {"prefix": 0.0, "range": 0.0, "bin": 0.0} for inf in ("closed", "nnls")}
                    zeros = 0.0
                    for rep in range(reps):
                        gen = np.random.default_rng([scale, rep, len(name)])
                        x = gen.multinomial(scale, base / base.sum()).astype(np.int64)
                        zeros += float(np.mean(x == 0)) / reps
                        cx = np.concatenate([[0], np.cumsum(x)])
                        for inf in ("closed", "nnls"):
                            rel = hierarchical(x, eps, branching=b, inference=inf, rng=deterministic_source(rep))
                            c = np.concatenate([[0.0], np.cumsum(rel.value)])
                            for key, w in (("prefix", pr), ("range", rr)):
                                err[inf][key] += float(np.mean(np.abs((c[w[:, 1]] - c[w[:, 0]])
                                                                      - (cx[w[:, 1]] - cx[w[:, 0]])))) / reps
                            err[inf]["bin"] += float(np.mean(np.abs(rel.value - x))) / reps
                    cells = []
                    for key in ("prefix", "range", "bin"):
                        r = err["nnls"][key] / err["closed"][key]
                        ratios[key].append(r)
                        cells.append(f"{r:.2f}")
                    lines.append(f"| {name} | {zeros:.0%} | 10^{int(np.log10(scale))} | {eps} | {b} | "
                                 + " | ".join(cells) + " |")
                    print(lines[-1], file=sys.stderr, flush=True)
    for key, vals in ratios.items():
        arr = np.array(vals)
        lines.append(f"\n{key}: nnls / closed median {np.median(arr):.2f}, range {arr.min():.2f}–{arr.max():.2f},"
                     f" nnls better in {int(np.sum(arr < 1))} of {arr.size} cells")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["all", "dawa", "efpa", "nnls", "accuracy"], default="all")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--efpa-one", nargs=3, metavar=("IMPL", "M", "BASIS"))
    args = ap.parse_args()
    if args.efpa_one:
        impl, m, basis = args.efpa_one
        print(json.dumps(efpa_one(impl, int(m), basis)))
        return
    with open("/proc/loadavg") as fh:
        load0 = fh.read().split()[:3]
    out = [f"load average at start: {' '.join(load0)}"]
    if args.part in ("all", "dawa"):
        out += ["", "#### DAWA (CPU s)", *part_dawa([4096, 16384, 65536])]
    if args.part in ("all", "efpa"):
        out += ["", "#### EFPA (CPU s)", *part_efpa([4096, 8192])]
    if args.part in ("all", "nnls"):
        out += ["", "#### hierarchical nnls inference (CPU s)", *part_nnls([2, 4, 16])]
    if args.part in ("all", "accuracy"):
        out += ["", f"#### nnls vs closed, mean |error| ratio ({args.reps} reps)", *part_accuracy(args.reps)]
    with open("/proc/loadavg") as fh:
        out.append(f"\nload average at end: {' '.join(fh.read().split()[:3])}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
