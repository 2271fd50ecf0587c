"""Linear regression on UCI Adult (issue #14): dpkit's linear_regression (sufficient statistics, Gaussian and
Laplace; functional mechanism) against non-private scikit-learn and diffprivlib's LinearRegression.

Target hours-per-week (public bounds [1, 99]), the other 87 features of ``adult_features.load(regression=True)``
(every feature declared in [0, 1]; dpkit also gets the public row-norm bound sqrt(12); diffprivlib is given the
same per-feature bounds and target bounds). eps in {0.1, 0.5, 1, 2, 5}, delta = 1e-5 for dpkit's Gaussian
variant, 10 runs; test RMSE (hours) and CPU seconds per fit. ``--extra-eps 5000`` adds the issue's point where
diffprivlib still diverges.

Run in the peers' environment (dpkit editable, diffprivlib 0.6.6, scikit-learn < 1.8), one BLAS thread::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .bench-learn-venv/bin/python bench/learn/regression.py \
        [--runs 10] [--eps 0.1 0.5 1 2 5] [--extra-eps 5000 --extra-runs 3]

Writes ``bench/learn/results/regression.json`` and prints a table. dpkit uses seeded (insecure) sources
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adult_features import ROW_NORM, load

import dpkit
from dpkit.learn import linear_regression

OUT = Path(__file__).resolve().parent / "results" / "regression.json"
Y_BOUNDS = (1.0, 99.0)
DELTA = 1e-5
METHODS = ("dpkit ssp (eps, 1e-5)", "dpkit ssp (pure eps)", "dpkit functional (pure eps)", "diffprivlib")


def rmse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((pred - y) ** 2)))


def timed(fit: Callable[[], Any]) -> tuple[Any, float]:  # CPU seconds of one fit (this process, all threads)
    t0 = time.process_time()
    model = fit()
    return model, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--extra-eps", type=float, nargs="*", default=[5000.0])
    ap.add_argument("--extra-runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    Xtr, ytr, Xte, yte, _names = load(regression=True)
    d = Xtr.shape[1]
    rows: list[dict[str, Any]] = []

    from sklearn.linear_model import LinearRegression as SkLR

    m, cpu = timed(lambda: SkLR().fit(Xtr, ytr))
    rows.append({"method": "sklearn", "eps": None, "run": 0, "rmse": rmse(m.predict(Xte), yte), "cpu_s": cpu})
    print(rows[-1], flush=True)
    constant = rmse(np.full(yte.shape, 50.0), yte)  # predicting the midpoint of the public bounds

    try:
        import diffprivlib
        from diffprivlib.models import LinearRegression as DplLR
        dpl_version = diffprivlib.__version__
    except ImportError:  # pragma: no cover - run outside the peers' environment
        DplLR, dpl_version = None, None

    def dpkit_fit(eps: float, seed: int, **kw: Any) -> Any:
        return linear_regression(Xtr, ytr, eps, bounds=(0.0, 1.0), norm=ROW_NORM, y_bounds=Y_BOUNDS,
                                 rng=dpkit.deterministic_source(seed), **kw).value

    grid = [(eps, args.runs) for eps in args.eps] + [(eps, args.extra_runs) for eps in args.extra_eps]
    for eps, runs in grid:
        for r in range(runs):
            seed = 1000 * r + round(100 * eps)
            for name, kw in (("dpkit ssp (eps, 1e-5)", {"delta": DELTA}), ("dpkit ssp (pure eps)", {}),
                             ("dpkit functional (pure eps)", {"method": "functional"})):
                model, cpu = timed(lambda kw=kw, e=eps, s=seed: dpkit_fit(e, s, **kw))
                rows.append({"method": name, "eps": eps, "run": r, "rmse": rmse(model.predict(Xte), yte),
                             "cpu_s": cpu})
            if DplLR is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m, cpu = timed(lambda e=eps, s=seed: DplLR(epsilon=e, bounds_X=([0.0] * d, [1.0] * d),
                                                               bounds_y=Y_BOUNDS, random_state=s + 2).fit(Xtr, ytr))
                rows.append({"method": "diffprivlib", "eps": eps, "run": r, "rmse": rmse(m.predict(Xte), yte),
                             "cpu_s": cpu})
        print(f"eps={eps:g} done", flush=True)

    summary: dict[str, dict[str, dict[str, list[float]]]] = {}
    for row in rows:
        key = "nonprivate" if row["eps"] is None else f"{row['eps']:g}"
        cell = summary.setdefault(row["method"], {}).setdefault(key, {"rmse": [], "cpu": []})
        cell["rmse"].append(row["rmse"])
        cell["cpu"].append(row["cpu_s"])
    table = {m: {k: {"mean_rmse": float(np.mean(v["rmse"])), "median_rmse": float(np.median(v["rmse"])),
                     "std_rmse": float(np.std(v["rmse"])),
                     "max_rmse": float(np.max(v["rmse"])), "mean_cpu_s": float(np.mean(v["cpu"])),
                     "runs": len(v["rmse"])} for k, v in cells.items()} for m, cells in summary.items()}
    meta = {"command": "python bench/learn/regression.py " + " ".join(sys.argv[1:]), "runs": args.runs,
            "eps": args.eps, "extra_eps": args.extra_eps, "extra_runs": args.extra_runs, "delta": DELTA,
            "train_rows": int(Xtr.shape[0]), "test_rows": int(Xte.shape[0]), "features": d,
            "constant_midpoint_rmse": constant,
            "dpkit_revision": os.popen("git -C " + str(Path(__file__).resolve().parent) + " rev-parse --short HEAD")
            .read().strip(), "diffprivlib": dpl_version, "python": platform.python_version(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "load_1min": os.getloadavg()[0]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "summary": table, "rows": rows}, indent=1))

    sk = table["sklearn"]["nonprivate"]
    print(f"\nsklearn (non-private) RMSE {sk['mean_rmse']:.3f} h, {sk['mean_cpu_s']:.3f} s; midpoint constant "
          f"{constant:.3f} h. Test RMSE mean (median, max) over runs; CPU s per fit; ratio = dpkit ssp (eps, delta) / "
          "diffprivlib")
    print(" | ".join(["eps", *METHODS, "ratio"]))
    for eps, _ in grid:
        k = f"{eps:g}"
        cells = [k]
        for name in METHODS:
            v = table.get(name, {}).get(k)
            cells.append(f"{v['mean_rmse']:.4g} (median {v['median_rmse']:.4g}, max {v['max_rmse']:.4g}) "
                         f"{v['mean_cpu_s']:.3f}s" if v else "-")
        dp = table.get("diffprivlib", {}).get(k)
        ratio = table[METHODS[0]][k]["mean_rmse"] / dp["mean_rmse"] if dp else float("nan")
        cells.append(f"{ratio:.3g}")
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
