"""k-means (issue #14): dpkit's dplloyd, eugkm and GkM (``dpkit.stability.gkm``) against non-private
scikit-learn KMeans and diffprivlib's KMeans, by Li et al. / Su et al. 2016's protocol.

Quality: NICV = (1/N) sum_x min_j ||x - o_j||^2 (Li et al. Eq 5.1; lower is better) of the released centres on
the clustered data itself. Data:

- ``adult``: UCI Adult's training split, its 5 numeric features (age, education-num, capital-gain,
  capital-loss, hours-per-week) scaled to [0, 1] by public bounds (the first 5 columns of
  ``adult_features.load()``), N = 32,561, d = 5;
- ``mixture``: a public synthetic mixture (seed 2016): 5 Gaussian clusters (sd 0.05, centres uniform in
  [0.15, 0.85]^2, weights 0.1/0.15/0.2/0.25/0.3) clamped to [0, 1]^2, N = 50,000, d = 2.

Methods: ``hybrid`` is ``dpkit.learn.KMeans(5, epsilon=eps, bounds=(0, 1))`` with its defaults (EUGkM with 30%
of eps as the start of 3 DPLloyd rounds); ``dplloyd`` Li et al.'s Algorithm 6 (5 equal rounds, spread start);
``eugkm``; ``gkm`` (centres clamped into the box, post-processing).

k = 5, eps in {0.1, 0.5, 1, 2, 5}, ``--runs`` runs (default 10), pure eps-DP for every private method; bounds
[0, 1]^d declared to dpkit and diffprivlib alike. CPU seconds per fit (this process). Run in the peers'
environment, one BLAS thread::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .bench-learn-venv/bin/python bench/learn/kmeans.py \\
        [--runs 10] [--eps 0.1 0.5 1 2 5] [--data adult mixture]

Writes ``bench/learn/results/kmeans.json`` (``--out``) and prints a table with each method's NICV relative to
diffprivlib's. dpkit uses seeded (insecure) sources (``deterministic_source``) so the figures can be
reproduced; diffprivlib and scikit-learn get ``random_state``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adult_features import load

import dpkit
from dpkit.learn import KMeans, dplloyd, eugkm
from dpkit.learn.kmeans import nicv
from dpkit.noise import deterministic_source
from dpkit.stability import gkm

OUT = Path(__file__).resolve().parent / "results" / "kmeans.json"
K = 5
METHODS = ["sklearn", "hybrid", "dplloyd", "eugkm", "gkm", "diffprivlib"]
LABELS = {"sklearn": "sklearn KMeans (non-private)", "hybrid": "dpkit KMeans() default (hybrid)",
          "dplloyd": "dpkit dplloyd", "eugkm": "dpkit eugkm",
          "gkm": "dpkit gkm (stability)", "diffprivlib": "diffprivlib KMeans"}


def mixture(n: int = 50_000, seed: int = 2016) -> np.ndarray:
    """The public synthetic mixture (seeded; benchmark data, not dpkit code)."""
    gen = np.random.default_rng(seed)
    centres = gen.uniform(0.15, 0.85, size=(K, 2))
    comp = gen.choice(K, size=n, p=[0.1, 0.15, 0.2, 0.25, 0.3])
    return np.clip(centres[comp] + gen.normal(0.0, 0.05, size=(n, 2)), 0.0, 1.0)


def datasets(names: list[str]) -> dict[str, np.ndarray]:
    out = {}
    if "adult" in names:
        out["adult"] = load()[0][:, :5]
    if "mixture" in names:
        out["mixture"] = mixture()
    return out


def timed(fit: Callable[[], np.ndarray]) -> tuple[np.ndarray, float]:
    t0 = time.process_time()
    centres = fit()
    return np.asarray(centres, dtype=np.float64), time.process_time() - t0


def fitter(method: str, X: np.ndarray, eps: float, seed: int) -> Callable[[], np.ndarray]:
    d = X.shape[1]
    if method == "sklearn":
        from sklearn.cluster import KMeans as SKMeans

        return lambda: SKMeans(K, n_init=10, random_state=seed).fit(X).cluster_centers_
    if method == "hybrid":
        return lambda: KMeans(K, epsilon=eps, bounds=(0.0, 1.0), rng=deterministic_source(seed)).fit(X).cluster_centers_
    if method == "dplloyd":
        return lambda: dplloyd(X, K, eps, bounds=(0.0, 1.0), rng=deterministic_source(seed)).value.centers
    if method == "eugkm":
        return lambda: eugkm(X, K, eps, bounds=(0.0, 1.0), rng=deterministic_source(seed)).value.centers
    if method == "gkm":
        return lambda: np.clip(gkm(X, K, (0.0, 1.0), eps, rng=deterministic_source(seed)).value, 0.0, 1.0)
    if method == "diffprivlib":
        from diffprivlib.models import KMeans as DPKMeans

        bounds = (np.zeros(d), np.ones(d))
        return lambda: DPKMeans(n_clusters=K, epsilon=eps, bounds=bounds, random_state=seed).fit(X).cluster_centers_
    raise SystemExit(f"unknown method {method}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--data", nargs="+", default=["adult", "mixture"])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")  # diffprivlib's PrivacyLeakWarning etc.
    versions: dict[str, Any] = {"dpkit": getattr(dpkit, "__version__", "?"), "numpy": np.__version__,
                                "python": platform.python_version()}
    try:
        import sklearn

        versions["scikit-learn"] = sklearn.__version__
        import diffprivlib

        versions["diffprivlib"] = diffprivlib.__version__
    except ImportError:
        pass
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    for name, X in datasets(args.data).items():
        for method in args.methods:
            for eps in ([None] if method == "sklearn" else args.eps):
                runs = 3 if method == "sklearn" else args.runs
                vals, cpu = [], []
                for seed in range(runs):
                    centres, sec = timed(fitter(method, X, eps if eps is not None else 1.0, seed))
                    vals.append(nicv(X, centres))
                    cpu.append(sec)
                row = {"data": name, "n": int(X.shape[0]), "d": int(X.shape[1]), "method": method, "eps": eps,
                       "runs": runs, "nicv_mean": float(np.mean(vals)), "nicv_std": float(np.std(vals)),
                       "nicv": [float(v) for v in vals], "cpu_mean": float(np.mean(cpu))}
                results.append(row)
                print(f"{name:8s} {LABELS[method]:30s} eps={eps!s:5s} NICV {row['nicv_mean']:.4f} "
                      f"± {row['nicv_std']:.4f}  CPU {row['cpu_mean']:.3f}s", flush=True)
    meta = {"k": K, "versions": versions, "load_before": load_before, "load_after": os.getloadavg(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared)",
            "command": "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .bench-learn-venv/bin/python bench/learn/kmeans.py "
                       + " ".join(sys.argv[1:])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    table(results)


def table(results: list[dict[str, Any]]) -> None:
    """Markdown table: NICV mean (ratio to diffprivlib) per data set, method and eps."""
    for name in dict.fromkeys(r["data"] for r in results):
        rows = [r for r in results if r["data"] == name]
        eps_list = sorted({r["eps"] for r in rows if r["eps"] is not None})
        ref = {r["eps"]: r["nicv_mean"] for r in rows if r["method"] == "diffprivlib"}
        print(f"\n{name}: NICV (x diffprivlib's), CPU s per fit")
        print("| method | " + " | ".join(f"eps={e:g}" for e in eps_list) + " | CPU s |")
        print("|---|" + "---|" * (len(eps_list) + 1))
        for method in dict.fromkeys(r["method"] for r in rows):
            mine = {r["eps"]: r for r in rows if r["method"] == method}
            if None in mine:
                cells = [f"{mine[None]['nicv_mean']:.4f}"] * len(eps_list)
            else:
                cells = [f"{mine[e]['nicv_mean']:.4f}" + (f" ({mine[e]['nicv_mean'] / ref[e]:.2f})" if e in ref else "")
                         if e in mine else "" for e in eps_list]
            cpu = np.mean([r["cpu_mean"] for r in mine.values()])
            print(f"| {LABELS[method]} | " + " | ".join(cells) + f" | {cpu:.3f} |")


if __name__ == "__main__":
    main()
