"""Decision trees on UCI Adult (issue #14): dpkit's DiffPID3 (DecisionTreeClassifier) and PrivPfC
(PrivPfCClassifier) against non-private scikit-learn DecisionTreeClassifier and diffprivlib's DecisionTreeClassifier
and RandomForestClassifier, eps in {0.1, 0.5, 1, 2, 5}, 10 runs, test accuracy and CPU seconds per fit.

Features: the same public discretisation as the categorical Naive Bayes benchmark (``naive_bayes.discretise``):
each one-hot group of ``adult_features.load`` back to its level (all zeros, a missing value, is one more level) and
the 5 numeric columns binned on fixed public edges in their original units (``naive_bayes.EDGES``: round census
values chosen without looking at the data; equal-width bins of the declared bounds put almost every capital gain
and loss in the first bin): 12 categorical features, 138 levels. PrivPfC is also told public coarser levels of the
5 binned numeric columns (adjacent bins merged in pairs, then in fours: ``hierarchies``). PrivPfC runs twice: with
its defaults (grids of at most 3 attributes, pool of at most 2,000) and with grids of up to 4 attributes (pool of
at most 20,000; the whole enumeration fits).

Every tree has depth at most ``--depth`` (default 5). scikit-learn and diffprivlib treat the level codes as ordered
numbers (diffprivlib is given the public bounds ``(0, levels - 1)`` and the classes, so it reads nothing from the
data); diffprivlib's tree is also run on the issue's 88 features (one-hot groups, numeric columns in [0, 1], bounds
``(0, 1)``), its natural input. Run in the peers' environment (dpkit editable, diffprivlib 0.6.6, scikit-learn < 1.8)::

    .bench-learn-venv/bin/python bench/learn/tree.py [--runs 10] [--eps 0.1 0.5 1 2 5]

Writes ``bench/learn/results/tree.json`` and prints a table. dpkit uses seeded (insecure) sources
(``deterministic_source``) so the figures can be reproduced; diffprivlib gets ``random_state``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adult_features import load
from naive_bayes import discretise

import dpkit
from dpkit.learn import DecisionTreeClassifier, PrivPfCClassifier

OUT = Path(__file__).resolve().parent / "results" / "tree.json"
NUMERIC = 5  # the first 5 columns of ``discretise`` are the binned numeric ones


def hierarchies(cats: list[int]) -> dict[int, list[np.ndarray]]:
    """Public coarser levels of the binned numeric columns: adjacent bins merged in pairs, then in fours."""
    out: dict[int, list[np.ndarray]] = {}
    for j in range(NUMERIC):
        maps = [np.arange(cats[j]) // w for w in (2, 4) if cats[j] > w]
        out[j] = maps
    return out


def timed(fit):  # CPU seconds of one fit (this process, all threads)
    t0 = time.process_time()
    model = fit()
    return model, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--depth", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-peers", action="store_true", help="skip diffprivlib")
    args = ap.parse_args()

    Xtr, ytr, Xte, yte, names = load()
    Ctr, cats = discretise(Xtr, names)
    Cte, _ = discretise(Xte, names)
    hier = hierarchies(cats)
    majority = float(max(np.mean(yte == 0), np.mean(yte == 1)))
    bounds = ([0.0] * len(cats), [float(v - 1) for v in cats])
    rows: list[dict] = []

    from sklearn.tree import DecisionTreeClassifier as SkTree

    for name, fit, Xb in (("sklearn DecisionTree", lambda: SkTree(max_depth=args.depth, random_state=0).fit(Ctr, ytr),
                           Cte),
                          ("sklearn DecisionTree (88 features)",
                           lambda: SkTree(max_depth=args.depth, random_state=0).fit(Xtr, ytr), Xte),
                          ("sklearn DecisionTree (no depth limit, 50 per leaf)",
                           lambda: SkTree(min_samples_leaf=50, random_state=0).fit(Ctr, ytr), Cte)):
        m, cpu = timed(fit)
        rows.append({"method": name, "eps": None, "run": 0, "accuracy": float(m.score(Xb, yte)), "cpu_s": cpu})
        print(rows[-1], flush=True)

    dpl_version = None
    if not args.no_peers:
        try:
            import diffprivlib
            from diffprivlib.models import DecisionTreeClassifier as DplTree
            from diffprivlib.models import RandomForestClassifier as DplForest
            dpl_version = diffprivlib.__version__
        except ImportError:  # pragma: no cover - run outside the peers' environment
            pass

    for eps in args.eps:
        for r in range(args.runs):
            seed = 1000 * r + round(100 * eps)
            m, cpu = timed(lambda eps=eps, seed=seed: DecisionTreeClassifier(
                eps, classes=[0, 1], categories=cats, max_depth=args.depth,
                rng=dpkit.deterministic_source(seed)).fit(Ctr, ytr))
            rows.append({"method": "dpkit DiffPID3", "eps": eps, "run": r, "accuracy": float(m.score(Cte, yte)),
                         "cpu_s": cpu, "nodes": m.node_count_})
            m, cpu = timed(lambda eps=eps, seed=seed: PrivPfCClassifier(
                eps, classes=[0, 1], categories=cats, hierarchies=hier,
                rng=dpkit.deterministic_source(seed + 1)).fit(Ctr, ytr))
            rows.append({"method": "dpkit PrivPfC", "eps": eps, "run": r, "accuracy": float(m.score(Cte, yte)),
                         "cpu_s": cpu, "grid": [names_of(j) for j in m.features_],
                         "cells": int(m.grid_.counts.shape[0]), "pool": int(m.release_.params["pool_size"])})
            m, cpu = timed(lambda eps=eps, seed=seed: PrivPfCClassifier(
                eps, classes=[0, 1], categories=cats, hierarchies=hier, max_attributes=4, max_grids=20_000,
                rng=dpkit.deterministic_source(seed + 1)).fit(Ctr, ytr))
            rows.append({"method": "dpkit PrivPfC (4 attributes)", "eps": eps, "run": r,
                         "accuracy": float(m.score(Cte, yte)), "cpu_s": cpu, "grid": [names_of(j) for j in m.features_],
                         "cells": int(m.grid_.counts.shape[0]), "pool": int(m.release_.params["pool_size"])})
            if dpl_version is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m, cpu = timed(lambda eps=eps, seed=seed: DplTree(
                        max_depth=args.depth, epsilon=eps, bounds=bounds, classes=[0, 1],
                        random_state=seed + 2).fit(Ctr, ytr))
                    rows.append({"method": "diffprivlib DecisionTree", "eps": eps, "run": r,
                                 "accuracy": float(m.score(Cte, yte)), "cpu_s": cpu})
                    m, cpu = timed(lambda eps=eps, seed=seed: DplForest(
                        n_estimators=10, max_depth=args.depth, epsilon=eps, bounds=bounds, classes=[0, 1],
                        random_state=seed + 3).fit(Ctr, ytr))
                    rows.append({"method": "diffprivlib RandomForest", "eps": eps, "run": r,
                                 "accuracy": float(m.score(Cte, yte)), "cpu_s": cpu})
                    m, cpu = timed(lambda eps=eps, seed=seed: DplTree(
                        max_depth=args.depth, epsilon=eps, bounds=(0.0, 1.0), classes=[0, 1],
                        random_state=seed + 4).fit(Xtr, ytr))
                    rows.append({"method": "diffprivlib DecisionTree (88 features)", "eps": eps, "run": r,
                                 "accuracy": float(m.score(Xte, yte)), "cpu_s": cpu})
        print(f"eps={eps} done", flush=True)

    summary: dict[str, dict[str, dict[str, list[float]]]] = {}
    for row in rows:
        key = "nonprivate" if row["eps"] is None else f"{row['eps']:g}"
        cell = summary.setdefault(row["method"], {}).setdefault(key, {"acc": [], "cpu": []})
        cell["acc"].append(row["accuracy"])
        cell["cpu"].append(row["cpu_s"])
    table = {m: {k: {"mean_accuracy": float(np.mean(v["acc"])), "std_accuracy": float(np.std(v["acc"])),
                     "min_accuracy": float(np.min(v["acc"])), "mean_cpu_s": float(np.mean(v["cpu"])),
                     "runs": len(v["acc"])} for k, v in cells.items()} for m, cells in summary.items()}
    meta = {"command": "python bench/learn/tree.py " + " ".join(sys.argv[1:]), "runs": args.runs, "eps": args.eps,
            "depth": args.depth, "majority_class": majority, "train_rows": int(Ctr.shape[0]),
            "test_rows": int(Cte.shape[0]), "levels": cats,
            "dpkit_revision": os.popen("git -C " + str(Path(__file__).resolve().parent) + " rev-parse --short HEAD")
            .read().strip(), "diffprivlib": dpl_version, "python": platform.python_version(),
            "load_1min": os.getloadavg()[0]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "summary": table, "rows": rows}, indent=1))

    print(f"\nmajority class {majority:.4f}; sklearn DecisionTree (depth {args.depth}) "
          f"{table['sklearn DecisionTree']['nonprivate']['mean_accuracy']:.4f}")
    for m in table:
        if m.startswith("sklearn"):
            print(f"{m}: {table[m]['nonprivate']['mean_accuracy']:.4f}")
    methods = [m for m in table if not m.startswith("sklearn")]
    print("eps  " + "  ".join(f"{m:>26}" for m in methods))
    for eps in args.eps:
        key = f"{eps:g}"
        cells = []
        for m in methods:
            c = table[m].get(key)
            cells.append(f"{c['mean_accuracy']:.4f}±{c['std_accuracy']:.4f} {c['mean_cpu_s']:6.2f}s" if c else "-")
        print(f"{key:>4} " + "  ".join(f"{c:>26}" for c in cells))


COLUMN_NAMES = ["age", "education-num", "capital-gain", "capital-loss", "hours-per-week", "workclass",
                "marital-status", "occupation", "relationship", "race", "sex", "native-country"]


def names_of(j: int) -> str:
    return COLUMN_NAMES[j]


if __name__ == "__main__":
    main()
