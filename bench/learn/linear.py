"""Linear classifiers on UCI Adult (issue #14): dpkit's logistic_regression (noisy gradient descent, objective
perturbation, ExpSearch) and linear_svc (noisy GD) against non-private scikit-learn and diffprivlib's
LogisticRegression.

The 88 features of ``adult_features.load()`` (every feature declared in [0, 1]; dpkit also gets the public
row-norm bound sqrt(12); diffprivlib gets ``data_norm=sqrt(12)``, the same public fact). eps in {0.1, 0.5, 1, 2,
5}, delta = 1e-5 for dpkit's gradient descent (pure eps for the other methods and for diffprivlib), ``--runs``
runs (``--light-runs`` for the CPU-heavy ExpSearch and SVC); test accuracy and CPU seconds per fit.

Run in the peers' environment (dpkit editable, diffprivlib 0.6.6, scikit-learn < 1.8), one BLAS thread::

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 .bench-learn-venv/bin/python bench/learn/linear.py \
        [--runs 10] [--light-runs 3] [--eps 0.1 0.5 1 2 5] [--methods gd objective expsearch svc-gd diffprivlib]

Writes ``bench/learn/results/linear.json`` (``--out``) and prints a table. dpkit uses seeded (insecure) sources
(``deterministic_source``) so the figures can be reproduced; diffprivlib gets ``random_state``. ``--tune``
instead evaluates on a held-out quarter of the **training** split (the honest way to pick defaults).
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
from dpkit.learn import linear_svc, logistic_regression

OUT = Path(__file__).resolve().parent / "results" / "linear.json"
DELTA = 1e-5
LABELS = {"gd": "dpkit LR gd (eps, 1e-5)", "objective": "dpkit LR objective (pure eps)",
          "expsearch": "dpkit LR expsearch (pure eps)", "svc-gd": "dpkit SVC gd (eps, 1e-5)",
          "diffprivlib": "diffprivlib LR (pure eps)"}


def timed(fit: Callable[[], Any]) -> tuple[Any, float]:  # CPU seconds of one fit (this process, all threads)
    t0 = time.process_time()
    model = fit()
    return model, time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 0.5, 1.0, 2.0, 5.0])
    ap.add_argument("--methods", nargs="+", default=list(LABELS))
    ap.add_argument("--light-runs", type=int, default=3, help="runs of the CPU-heavy expsearch and svc-gd")
    ap.add_argument("--tune", action="store_true", help="hold out a quarter of the training split")
    ap.add_argument("--kw", type=json.loads, default={}, help="extra dpkit keywords (JSON), e.g. tuning")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    Xtr, ytr, Xte, yte, _names = load()
    if args.tune:  # a public, fixed split of the training rows: never looks at the test split
        cut = (3 * Xtr.shape[0]) // 4
        Xtr, ytr, Xte, yte = Xtr[:cut], ytr[:cut], Xtr[cut:], ytr[cut:]
    rows: list[dict[str, Any]] = []

    from sklearn.linear_model import LogisticRegression as SkLR

    m, cpu = timed(lambda: SkLR(max_iter=1000).fit(Xtr, ytr))
    rows.append({"method": "sklearn", "eps": None, "run": 0, "acc": float(m.score(Xte, yte)), "cpu_s": cpu})
    print(rows[-1], flush=True)
    majority = float(max(np.mean(yte), 1 - np.mean(yte)))

    try:
        import diffprivlib
        from diffprivlib.models import LogisticRegression as DplLR
        dpl_version = diffprivlib.__version__
    except ImportError:  # pragma: no cover - run outside the peers' environment
        DplLR, dpl_version = None, None

    def dpkit_fit(method: str, eps: float, seed: int) -> Any:
        fn = linear_svc if method == "svc-gd" else logistic_regression
        kw: dict[str, Any] = {"method": "gd" if method == "svc-gd" else method, **args.kw}
        if kw["method"] == "gd":
            kw["delta"] = DELTA
        return fn(Xtr, ytr, eps, classes=[0, 1], bounds=(0.0, 1.0), norm=ROW_NORM,
                  rng=dpkit.deterministic_source(seed), **kw).value

    for eps in args.eps:
        for r in range(args.runs):
            seed = 1000 * r + round(100 * eps)
            for method in args.methods:
                if method in ("expsearch", "svc-gd") and r >= args.light_runs:
                    continue
                if method == "diffprivlib":
                    if DplLR is None:
                        continue
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        m, cpu = timed(lambda e=eps, s=seed: DplLR(epsilon=e, data_norm=ROW_NORM,
                                                                   random_state=s + 2).fit(Xtr, ytr))
                    acc = float(m.score(Xte, yte))
                else:
                    model, cpu = timed(lambda me=method, e=eps, s=seed: dpkit_fit(me, e, s))
                    acc = float(np.mean(model.predict(Xte) == yte))
                rows.append({"method": LABELS[method], "eps": eps, "run": r, "acc": acc, "cpu_s": cpu})
                print(rows[-1], flush=True)
        print(f"eps={eps:g} done", flush=True)

    summary: dict[str, dict[str, dict[str, list[float]]]] = {}
    for row in rows:
        key = "nonprivate" if row["eps"] is None else f"{row['eps']:g}"
        cell = summary.setdefault(row["method"], {}).setdefault(key, {"acc": [], "cpu": []})
        cell["acc"].append(row["acc"])
        cell["cpu"].append(row["cpu_s"])
    table = {m: {k: {"mean_acc": float(np.mean(v["acc"])), "std_acc": float(np.std(v["acc"])),
                     "min_acc": float(np.min(v["acc"])), "mean_cpu_s": float(np.mean(v["cpu"])),
                     "runs": len(v["acc"])} for k, v in cells.items()} for m, cells in summary.items()}
    meta = {"command": "python bench/learn/linear.py " + " ".join(sys.argv[1:]), "runs": args.runs,
            "eps": args.eps, "delta": DELTA, "tune_split": args.tune, "extra_kw": args.kw,
            "train_rows": int(Xtr.shape[0]), "test_rows": int(Xte.shape[0]), "features": int(Xtr.shape[1]),
            "majority_class_acc": majority,
            "dpkit_revision": os.popen("git -C " + str(Path(__file__).resolve().parent) + " rev-parse --short HEAD")
            .read().strip(), "diffprivlib": dpl_version, "python": platform.python_version(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "load_1min": os.getloadavg()[0]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "summary": table, "rows": rows}, indent=1))

    sk = table["sklearn"]["nonprivate"]
    print(f"\nsklearn (non-private) accuracy {sk['mean_acc']:.4f}, {sk['mean_cpu_s']:.2f} s; majority class "
          f"{majority:.4f}. Test accuracy mean (min) over runs; CPU s per fit; ratio = dpkit LR gd / diffprivlib")
    names = [LABELS[m] for m in args.methods]
    print(" | ".join(["eps", *names, "ratio"]))
    for eps in args.eps:
        k = f"{eps:g}"
        cells = [k]
        for name in names:
            v = table.get(name, {}).get(k)
            cells.append(f"{v['mean_acc']:.4f} ({v['min_acc']:.4f}) {v['mean_cpu_s']:.2f}s" if v else "-")
        dp = table.get(LABELS["diffprivlib"], {}).get(k)
        gd = table.get(LABELS["gd"], {}).get(k)
        cells.append(f"{gd['mean_acc'] / dp['mean_acc']:.3f}" if dp and gd else "-")
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
