"""Naive Bayes on UCI Adult (issue #14): dpkit's GaussianNB and CategoricalNB against non-private scikit-learn and
diffprivlib's GaussianNB, eps in {0.1, 0.5, 1, 2, 5}, 10 runs, test accuracy and CPU seconds per fit.

- GaussianNB (dpkit, diffprivlib, scikit-learn): the issue's 88 features (``adult_features.load``), every feature
  declared in [0, 1] (public bounds; diffprivlib is given the same bounds; it reads the classes from the data),
  dpkit also told the public row L1 bound 12 (``L1_NORM``).
- CategoricalNB (dpkit, scikit-learn): a public discretisation of the same rows: each one-hot group back to its
  level (all zeros, a missing value, is one more level) and the 5 numeric columns binned on fixed edges in their
  original units (``EDGES``: round census values chosen without looking at the data): 12 features, 138 levels.

Run in the peers' environment (dpkit editable, diffprivlib 0.6.6, scikit-learn < 1.8)::

    .bench-learn-venv/bin/python bench/learn/naive_bayes.py [--runs 10] [--eps 0.1 0.5 1 2 5]

Writes ``bench/learn/results/naive_bayes.json`` and prints a table. ``--twophase`` runs only a side experiment
(iReduct's TwoPhase relative-error allocation for the categorical tables, simulated; ``naive_bayes_twophase.json``).
dpkit uses seeded (insecure) sources
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
from adult_features import CATEGORICAL, NUMERIC_BOUNDS, load

import dpkit
from dpkit.learn import CategoricalNB, GaussianNB

#: Public bin edges (original units) of the numeric columns: a value v falls in bin searchsorted(edges, v, "right").
EDGES = {"age": [25, 30, 35, 40, 45, 50, 55, 60, 65],
         "education-num": [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
         "capital-gain": [1, 3000, 5000, 7000, 10000, 20000],
         "capital-loss": [1, 1500, 1800, 2000, 2500],
         "hours-per-week": [20, 30, 35, 40, 41, 45, 50, 60]}
OUT = Path(__file__).resolve().parent / "results" / "naive_bayes.json"
#: Public: every row has 7 one-hot groups (at most one 1 each) and 5 numeric columns in [0, 1], so its L1 norm is
#: at most 12 (dpkit's GaussianNB l1_norm; diffprivlib has no such option and uses the bounds alone).
L1_NORM = 12.0


def discretise(X: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[int]]:
    """Level codes (n, 12) and the number of levels of each column, from public facts only."""
    cols, cats = [], []
    for j, c in enumerate(NUMERIC_BOUNDS):
        lo, hi = NUMERIC_BOUNDS[c]
        v = np.rint(lo + X[:, j] * (hi - lo))  # the integer census value
        cols.append(np.searchsorted(EDGES[c], v, side="right"))
        cats.append(len(EDGES[c]) + 1)
    for c in CATEGORICAL:
        idx = [i for i, n in enumerate(names) if n.startswith(c + "=")]
        block = X[:, idx]
        cols.append(np.where(block.sum(axis=1) > 0, block.argmax(axis=1), len(idx)))
        cats.append(len(idx) + 1)
    return np.column_stack(cols).astype(np.int64), cats


def timed(fit):  # CPU seconds of one fit (this process, all threads)
    t0 = time.process_time()
    model = fit()
    return model, time.process_time() - t0


def twophase_check(runs: int, eps_list: list[float], out: Path) -> None:
    """A side experiment (not a dpkit method): does iReduct's relative-error budget allocation help the categorical
    model on Adult? Numpy simulation with continuous Laplace noise (not dpkit's exact samplers): "uniform" (one
    scale for every cell, as categorical_nb) against TwoPhase (Xiao et al. 2011, Sec. 3.2 and 5): phase 1 at
    share * eps uniform, per-marginal scales lambda_i proportional to sqrt(|M_i| / sum_j 1 / max(delta, y_ij)) from
    the phase-1 noisy cells (delta = 1e-4 x the noisy total, as the paper's 1e-4 |T|) scaled to spend the rest,
    phase 2 per marginal, inverse-variance combination; same post-processing as categorical_nb (alpha = 1)."""
    Xtr, ytr, Xte, yte, names = load()
    C, cats = discretise(Xtr, names)
    Ct, _ = discretise(Xte, names)
    k, d = 2, len(cats)
    tabs = []
    for j, v in enumerate(cats):
        t = np.zeros((k, v))
        np.add.at(t, (ytr, C[:, j]), 1)
        tabs.append(t)
    cc = np.bincount(ytr, minlength=k).astype(float)

    def accuracy(tables: list[np.ndarray], counts: np.ndarray) -> float:
        num, den = counts.copy(), 1.0
        for j, t in enumerate(tables):
            num, den = num + t.sum(1) / cats[j], den + 1 / cats[j]
        c = np.maximum(num / den, 1)
        ll = np.tile(np.log(c / c.sum()), (len(Ct), 1))
        for j, t in enumerate(tables):
            tt = np.maximum(t, 0) + 1.0
            ll += (np.log(tt) - np.log(tt.sum(1, keepdims=True)))[:, Ct[:, j]].T
        return float(np.mean(ll.argmax(1) == yte))

    gen = np.random.default_rng(0)
    res: dict[str, dict[str, list[float]]] = {}
    for eps in eps_list:
        for _ in range(runs):
            b = (d + 1) / eps
            res.setdefault(f"{eps:g}", {}).setdefault("uniform", []).append(
                accuracy([t + gen.laplace(0, b, t.shape) for t in tabs], cc + gen.laplace(0, b, k)))
            for share in (0.03, 0.1):
                e1 = eps * share
                b1 = (d + 1) / e1
                y1 = [t + gen.laplace(0, b1, t.shape) for t in tabs]
                c1 = cc + gen.laplace(0, b1, k)
                dl = max(1e-4 * c1.sum(), 1.0)
                w = np.array([np.sqrt(m.size / np.sum(1 / np.maximum(dl, m))) for m in [*y1, c1[None, :]]])
                lam = np.sum(1 / w) / (eps - e1) * w  # sum_i 1 / lambda_i = eps - e1 (each marginal: sensitivity 1)
                y2 = [t + gen.laplace(0, lam[i], t.shape) for i, t in enumerate(tabs)]
                c2 = cc + gen.laplace(0, lam[-1], k)
                comb = [(lam[i] ** 2 * y1[i] + b1 ** 2 * y2[i]) / (lam[i] ** 2 + b1 ** 2) for i in range(d)]
                cc2 = (lam[-1] ** 2 * c1 + b1 ** 2 * c2) / (lam[-1] ** 2 + b1 ** 2)
                res[f"{eps:g}"].setdefault(f"twophase {share:g}", []).append(accuracy(comb, cc2))
    summary = {e: {m: {"mean": float(np.mean(v)), "min": float(np.min(v))} for m, v in r.items()}
               for e, r in res.items()}
    for e, r in summary.items():
        print(e, {m: (round(v["mean"], 4), round(v["min"], 4)) for m, v in r.items()})
    out.write_text(json.dumps({"runs": runs, "summary": summary, "accuracy": res}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--twophase", action="store_true", help="run only the iReduct TwoPhase side experiment")
    args = ap.parse_args()
    if args.twophase:
        twophase_check(args.runs, args.eps, args.out.with_name("naive_bayes_twophase.json"))
        return

    Xtr, ytr, Xte, yte, names = load()
    Ctr, cats = discretise(Xtr, names)
    Cte, _ = discretise(Xte, names)
    d = Xtr.shape[1]
    majority = float(max(np.mean(yte == 0), np.mean(yte == 1)))
    rows: list[dict] = []

    from sklearn.naive_bayes import CategoricalNB as SkCNB
    from sklearn.naive_bayes import GaussianNB as SkGNB

    for name, fit, Xb in (("sklearn GaussianNB", lambda: SkGNB().fit(Xtr, ytr), Xte),
                          ("sklearn CategoricalNB", lambda: SkCNB(min_categories=cats).fit(Ctr, ytr), Cte)):
        m, cpu = timed(fit)
        rows.append({"method": name, "eps": None, "run": 0, "accuracy": float(m.score(Xb, yte)), "cpu_s": cpu})
        print(rows[-1], flush=True)

    try:
        import diffprivlib
        from diffprivlib.models import GaussianNB as DplGNB
        dpl_version = diffprivlib.__version__
    except ImportError:  # pragma: no cover - run outside the peers' environment
        DplGNB, dpl_version = None, None

    for eps in args.eps:
        for r in range(args.runs):
            seed = 1000 * r + round(100 * eps)
            m, cpu = timed(lambda eps=eps, seed=seed: GaussianNB(eps, classes=[0, 1], bounds=(0.0, 1.0),
                                                                 l1_norm=L1_NORM,
                                                                 rng=dpkit.deterministic_source(seed)).fit(Xtr, ytr))
            rows.append({"method": "dpkit GaussianNB", "eps": eps, "run": r, "accuracy": float(m.score(Xte, yte)),
                         "cpu_s": cpu})
            m, cpu = timed(lambda eps=eps, seed=seed: CategoricalNB(eps, classes=[0, 1], categories=cats,
                                                 rng=dpkit.deterministic_source(seed + 1)).fit(Ctr, ytr))
            rows.append({"method": "dpkit CategoricalNB", "eps": eps, "run": r,
                         "accuracy": float(m.score(Cte, yte)), "cpu_s": cpu})
            if DplGNB is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m, cpu = timed(lambda eps=eps, seed=seed: DplGNB(epsilon=eps, bounds=([0.0] * d, [1.0] * d),
                                                  random_state=seed + 2).fit(Xtr, ytr))
                rows.append({"method": "diffprivlib GaussianNB", "eps": eps, "run": r,
                             "accuracy": float(m.score(Xte, yte)), "cpu_s": cpu})
        print(f"eps={eps} done", flush=True)

    summary: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        key = "nonprivate" if row["eps"] is None else f"{row['eps']:g}"
        cell = summary.setdefault(row["method"], {}).setdefault(key, {"acc": [], "cpu": []})  # type: ignore[dict-item]
        cell["acc"].append(row["accuracy"])  # type: ignore[attr-defined]
        cell["cpu"].append(row["cpu_s"])  # type: ignore[attr-defined]
    table = {m: {k: {"mean_accuracy": float(np.mean(v["acc"])), "std_accuracy": float(np.std(v["acc"])),
                     "min_accuracy": float(np.min(v["acc"])), "mean_cpu_s": float(np.mean(v["cpu"])),
                     "runs": len(v["acc"])} for k, v in cells.items()} for m, cells in summary.items()}
    meta = {"command": "python bench/learn/naive_bayes.py " + " ".join(sys.argv[1:]), "runs": args.runs,
            "eps": args.eps, "majority_class": majority, "train_rows": int(Xtr.shape[0]),
            "test_rows": int(Xte.shape[0]), "gaussian_features": d, "categorical_levels": cats,
            "dpkit_revision": os.popen("git -C " + str(Path(__file__).resolve().parent) + " rev-parse --short HEAD")
            .read().strip(), "diffprivlib": dpl_version, "python": platform.python_version(),
            "load_1min": os.getloadavg()[0]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "summary": table, "rows": rows}, indent=1))

    print(f"\nmajority class {majority:.4f}; accuracy mean (min) over {args.runs} runs; CPU s per fit")
    head = ["eps", "dpkit GNB", "dpkit CNB", "diffprivlib GNB", "GNB/dpl"]
    print(" | ".join(head))
    for eps in args.eps:
        k = f"{eps:g}"
        g, c = table["dpkit GaussianNB"][k], table["dpkit CategoricalNB"][k]
        dp = table.get("diffprivlib GaussianNB", {}).get(k)
        cells = [k, f"{g['mean_accuracy']:.4f} ({g['min_accuracy']:.4f}) {g['mean_cpu_s']:.3f}s",
                 f"{c['mean_accuracy']:.4f} ({c['min_accuracy']:.4f}) {c['mean_cpu_s']:.3f}s"]
        if dp:
            cells += [f"{dp['mean_accuracy']:.4f} ({dp['min_accuracy']:.4f}) {dp['mean_cpu_s']:.3f}s",
                      f"{g['mean_accuracy'] / dp['mean_accuracy']:.3f}"]
        print(" | ".join(cells))
    for name in ("sklearn GaussianNB", "sklearn CategoricalNB"):
        v = table[name]["nonprivate"]
        print(f"{name} (non-private): {v['mean_accuracy']:.4f} {v['mean_cpu_s']:.3f}s")


if __name__ == "__main__":
    main()
