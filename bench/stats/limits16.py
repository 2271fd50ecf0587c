"""Issue #16, statistics rows: speed of the exact sum / mean against numpy, and accuracy of the mean, variance
and quantiles (dpkit's defaults) against OpenDP, diffprivlib and the previous dpkit, side by side in one run.

The previous dpkit runs in a child process with ``PYTHONPATH=<worktree>/src`` (a ``git worktree`` of the commit
before issue #16's changes); both sides use the same data, seeds and machine, in one command:

    git worktree add /tmp/dpkit-before 6b5d50d
    nice -n 5 .bench-stats-venv/bin/python bench/stats/limits16.py --before /tmp/dpkit-before

CPU seconds are ``time.process_time`` (best of 3); the load average is printed. Accuracy: Adult, 200 releases
per cell, median |error|; integer columns are passed with their integer dtype (a public schema fact).

``--speed-only`` measures the speed rows alone, old and new dpkit in ONE process, interleaved round by round
(best of ``--rounds``), so that the load of a shared machine hits both alike. The old tree is imported as the
package ``dpkit_before`` (a copy of ``<before>/src/dpkit`` with its imports renamed):

    git worktree add --detach /tmp/dpkit-sum-before <commit>
    nice -n 5 .venv/bin/python bench/stats/limits16.py --speed-only --before /tmp/dpkit-sum-before --rounds 15
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

import numpy as np

N_SPEED = 10_000_000


def best(f: Any, k: int = 3) -> float:
    out = 1e9
    for _ in range(k):
        t0 = time.process_time()
        f()
        out = min(out, time.process_time() - t0)
    return out


def speed() -> dict[str, float]:
    import dpkit
    from dpkit.stats.sums import exact_sum

    gen = np.random.default_rng(0)  # rng-ok: bench data
    x = gen.normal(40.0, 10.0, N_SPEED)
    xi = np.round(x)
    out: dict[str, float] = {"numpy_mean": best(lambda: np.mean(x))}
    clip = (lambda a: exact_sum(a, clamp=(0.0, 100.0))) if "clamp" in exact_sum.__code__.co_varnames else (
        lambda a: exact_sum(np.clip(a, 0.0, 100.0)))
    out["exact_sum_float"] = best(lambda: clip(x))
    out["exact_sum_int"] = best(lambda: clip(xi))
    out["mean_float"] = best(lambda: dpkit.stats.mean(x, (0, 100), 1.0, rng=dpkit.deterministic_source(1)))
    out["sum_float"] = best(lambda: dpkit.stats.sum(x, (0, 100), 1.0, rng=dpkit.deterministic_source(1)))
    return out


def before_package(before: str) -> Any:
    """The dpkit of the worktree ``before`` imported as ``dpkit_before`` (its sources copied, imports renamed)."""
    dest = tempfile.mkdtemp(prefix="dpkit-before-")
    shutil.copytree(os.path.join(before, "src", "dpkit"), os.path.join(dest, "dpkit_before"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for root, _, files in os.walk(dest):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(re.sub(r"\bdpkit\b", "dpkit_before", text))
    sys.path.insert(0, dest)
    import dpkit_before  # type: ignore[import-not-found]

    return dpkit_before


def speed_interleaved(before: str, rounds: int) -> None:
    """Old and new exact sums, ``stats.sum`` and ``stats.mean`` against numpy's ``mean``, interleaved in one
    process: each round times every function once; the table keeps each one's best round (CPU seconds)."""
    import dpkit
    from dpkit.core._exact import exact_sum

    old = before_package(before)
    from dpkit_before.core._exact import exact_sum as old_sum  # type: ignore[import-not-found]

    gen = np.random.default_rng(0)  # rng-ok: bench data
    x = gen.normal(40.0, 10.0, N_SPEED)
    xi = np.round(x)
    for a in (x, xi):
        assert exact_sum(a, clamp=(0.0, 100.0)) == old_sum(a, clamp=(0.0, 100.0))
    for name in ("mean", "sum"):
        v_new = getattr(dpkit.stats, name)(x, (0, 100), 1.0, rng=dpkit.deterministic_source(1)).value
        v_old = getattr(old.stats, name)(x, (0, 100), 1.0, rng=old.deterministic_source(1)).value
        assert v_new == v_old, (name, v_new, v_old)  # same data, seed and law: the same release
    funcs = {
        "numpy mean": lambda: np.mean(x),
        "exact clamped sum, floats (before)": lambda: old_sum(x, clamp=(0.0, 100.0)),
        "exact clamped sum, floats (now)": lambda: exact_sum(x, clamp=(0.0, 100.0)),
        "exact clamped sum, integer-valued (before)": lambda: old_sum(xi, clamp=(0.0, 100.0)),
        "exact clamped sum, integer-valued (now)": lambda: exact_sum(xi, clamp=(0.0, 100.0)),
        "stats.sum (before)": lambda: old.stats.sum(x, (0, 100), 1.0, rng=old.deterministic_source(1)),
        "stats.sum (now)": lambda: dpkit.stats.sum(x, (0, 100), 1.0, rng=dpkit.deterministic_source(1)),
        "stats.mean (before)": lambda: old.stats.mean(x, (0, 100), 1.0, rng=old.deterministic_source(1)),
        "stats.mean (now)": lambda: dpkit.stats.mean(x, (0, 100), 1.0, rng=dpkit.deterministic_source(1)),
    }
    bests = dict.fromkeys(funcs, math.inf)
    load0 = os.getloadavg()
    for _ in range(rounds):
        for key, f in funcs.items():
            t0 = time.process_time()
            f()
            bests[key] = min(bests[key], time.process_time() - t0)
    load1 = os.getloadavg()
    print(f"before: {old.__file__}\nnow: {dpkit.__file__}\nload average at start {load0}, at end {load1}")
    print(f"\n| CPU seconds, best of {rounds} interleaved rounds, 10^7 values | seconds | × numpy `mean` |")
    print("|---|---:|---:|")
    for key, v in bests.items():
        print(f"| {key} | {v:.4f} | {v / bests['numpy mean']:.2f} |")


COLS = {"age": (0.0, 100.0), "hours_per_week": (0.0, 100.0), "capital_gain": (0.0, 99_999.0)}
QS = {"q25": 0.25, "median": 0.5, "q75": 0.75}


def data() -> dict[str, np.ndarray]:
    from dpkit.datasets import adult

    d = adult(as_frame=False, columns=list(COLS))
    return {c: np.asarray(d[c]).astype(np.int64) for c in COLS}


def dpkit_errors(reps: int, eps_list: list[float]) -> dict[str, list[float]]:
    import dpkit

    d = data()
    out: dict[str, list[float]] = {}
    for c, (lo, hi) in COLS.items():
        x = d[c]
        for ei, eps in enumerate(eps_list):
            for stat in ("mean", "variance", *QS):
                true = float(np.mean(x)) if stat == "mean" else float(np.var(x)) if stat == "variance" else float(
                    np.quantile(x, QS[stat]))
                errs = []
                for rep in range(reps):
                    rng = dpkit.deterministic_source(1_000_000 * ei + rep)
                    if stat in ("mean", "variance"):
                        v = getattr(dpkit.stats, stat)(x, (lo, hi), eps, rng=rng).value
                    else:
                        v = dpkit.stats.quantile(x, QS[stat], (lo, hi), eps, rng=rng).value
                    errs.append(abs(float(v) - true))
                out[f"{c}|{eps}|{stat}"] = errs
    return out


def peer_errors(reps: int, eps_list: list[float]) -> dict[str, list[float]]:
    import diffprivlib.tools as dpl
    import opendp.prelude as dp

    dp.enable_features("contrib")
    d = data()
    out: dict[str, list[float]] = {}
    for c, (lo, hi) in COLS.items():
        x = d[c].astype(np.float64)
        n = x.size
        for eps in eps_list:
            for stat in ("mean", "variance"):
                true = float(np.mean(x)) if stat == "mean" else float(np.var(x))
                dom = dp.vector_domain(dp.atom_domain(bounds=(lo, hi)), size=n)
                t = dp.t.make_mean(dom, dp.symmetric_distance()) if stat == "mean" else dp.t.make_variance(
                    dom, dp.symmetric_distance(), ddof=0)
                m = dp.binary_search_chain(lambda s, t=t: t >> dp.m.then_laplace(scale=s), d_in=2, d_out=eps)
                out[f"{c}|{eps}|{stat}|odp-R"] = [abs(float(m(x)) - true) for _ in range(reps)]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    f = dpl.mean if stat == "mean" else dpl.var
                    out[f"{c}|{eps}|{stat}|dpl-R"] = [abs(float(f(x, epsilon=eps, bounds=(lo, hi), random_state=r))
                                                         - true) for r in range(reps)]
            atom = dp.atom_domain(T=float, nan=False)
            cands = np.linspace(lo, hi, 1025).tolist()
            for stat, q in QS.items():
                m = dp.binary_search_chain(lambda s, q=q, atom=atom, cands=cands: dp.m.make_private_quantile(
                    dp.vector_domain(atom), dp.symmetric_distance(), dp.max_divergence(), cands, q, s), d_in=1,
                    d_out=eps)
                true = float(np.quantile(x, q))
                out[f"{c}|{eps}|{stat}|odp-AR"] = [abs(float(m(x)) - true) for _ in range(reps)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="/tmp/dpkit-before", help="worktree of the previous dpkit")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    ap.add_argument("--worker", action="store_true", help="internal: measure the dpkit on sys.path, print JSON")
    ap.add_argument("--speed-only", action="store_true", help="the speed rows only, before and now in one process")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds for --speed-only (best of)")
    args = ap.parse_args()
    if args.speed_only:
        speed_interleaved(args.before, args.rounds)
        return
    if args.worker:
        import dpkit

        print(json.dumps({"file": dpkit.__file__, "speed": speed(), "acc": dpkit_errors(args.reps, args.eps)}))
        return
    env = dict(os.environ, PYTHONPATH=os.path.join(args.before, "src"))
    cmd = [sys.executable, __file__, "--worker", "--reps", str(args.reps), "--eps", *map(str, args.eps)]
    load0 = os.getloadavg()
    before = json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)
    after = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    peers = peer_errors(args.reps, args.eps)
    load1 = os.getloadavg()
    print(f"before: {before['file']}\nafter: {after['file']}\nload at start {load0}, at end {load1}")
    print("\n| CPU seconds (best of 3), 10^7 values | previous dpkit | × numpy | dpkit now | × numpy |")
    print("|---|---:|---:|---:|---:|")
    for k in ("numpy_mean", "exact_sum_float", "exact_sum_int", "sum_float", "mean_float"):
        b, a = before["speed"][k], after["speed"][k]
        print(f"| {k} | {b:.4f} | {b / before['speed']['numpy_mean']:.1f} | {a:.4f} | "
              f"{a / after['speed']['numpy_mean']:.1f} |")
    print("\n| column | ε | statistic | previous dpkit (add/remove) | dpkit now (add/remove) | OpenDP | diffprivlib |"
          " now / best peer |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for key in after["acc"]:
        med = float(np.median(after["acc"][key]))
        old = float(np.median(before["acc"][key]))
        c, eps, stat = key.split("|")
        odp = peers.get(f"{key}|odp-R") or peers.get(f"{key}|odp-AR")
        dpl = peers.get(f"{key}|dpl-R")
        o = float(np.median(odp)) if odp else float("nan")
        p = float(np.median(dpl)) if dpl else float("nan")
        bp = np.nanmin([o, p])
        ratio = (med / bp) if bp > 0 else (1.0 if med == 0 else float("inf"))
        print(f"| {c} | {eps} | {stat} | {old:.4g} | {med:.4g} | {o:.4g} | {p:.4g} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
