"""DP-SGD on UCI Adult (issue #14): dpkit's DP-SGD (numpy engine and PyTorch adapter) against Opacus at the same
(eps, delta), a logistic (linear) model, and non-private scikit-learn as the reference.

The 88 features of ``adult_features.load()`` (every feature in [0, 1], row norm <= sqrt(12), declared to dpkit as
public facts). Every DP-SGD run uses the same schedule: expected batch size 256, Poisson rate q = 256/n (n, the
training split's size, treated as public by all three, as Opacus does), 5 epochs, per-example clip C = 0.5, SGD
with learning rate 4 and momentum 0.9 on the noisy sum divided by 256, zero initial weights; delta = 1e-5. The
noise multiplier is calibrated by each library's own accountant: dpkit by PLD (dp-accounting), Opacus by PRV
(``accountant="prv"``). ``dpkit-numpy-count`` treats n as private instead: the rate comes from a Laplace
count charged 1% of eps, the steps get the rest. The schedule was picked on a held-out quarter of the training
split (dpkit numpy, eps = 1: 0.836 of {lr 0.5-4} x {C 0.5-2} x {B 256, 1024}; iterate averaging gave nothing).

Run in the torch environment (``bench/learn/requirements-torch.txt``; dpkit editable), one thread::

    OMP_NUM_THREADS=1 .bench-torch-venv/bin/python bench/learn/dpsgd.py [--runs 5] [--eps 0.5 1]

Writes ``bench/learn/results/dpsgd.json`` (``--out``) and prints a table: test accuracy (mean, sd over runs) and
CPU seconds per fit (this process; torch limited to one thread). dpkit uses seeded (insecure) sources
(``deterministic_source``) so the figures can be reproduced; Opacus is seeded with ``torch.manual_seed``.
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
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adult_features import ROW_NORM, load

import dpkit
from dpkit.learn import DPSGDTrainer, dpsgd
from dpkit.noise import deterministic_source

OUT = Path(__file__).resolve().parent / "results" / "dpsgd.json"
DELTA = 1e-5
BATCH, EPOCHS, CLIP, LR, MOMENTUM = 256, 5, 0.5, 4.0, 0.9
METHODS = ("dpkit-numpy", "dpkit-numpy-count", "dpkit-torch", "opacus")


def _torch_model(torch: Any, d: int) -> Any:
    model = torch.nn.Linear(d, 1)
    torch.nn.init.zeros_(model.weight)
    torch.nn.init.zeros_(model.bias)
    return model


def _accuracy_torch(torch: Any, model: Any, X: np.ndarray, y: np.ndarray) -> float:
    with torch.no_grad():
        s = model(torch.as_tensor(X, dtype=torch.float32)).numpy()[:, 0]
    return float(np.mean((s > 0) == y))


def fit_numpy(Xtr: np.ndarray, ytr: np.ndarray, eps: float, seed: int, count: bool = False
              ) -> tuple[Any, dict[str, Any]]:
    """dpkit's numpy engine; ``count``: n private, the rate from a noisy count (1% of eps), the rest for the steps."""
    rel = dpsgd(Xtr, ytr, eps, delta=DELTA, classes=[0, 1], bounds=(0.0, 1.0), norm=ROW_NORM, batch_size=BATCH,
                sampling_rate=None if count else BATCH / len(ytr), epochs=EPOCHS, clip=CLIP, learning_rate=LR,
                momentum=MOMENTUM, accounting="pld", rng=deterministic_source(seed))
    return (lambda X: rel.value.predict(X)), {"sigma": rel.params["sigma"], "steps": rel.params["steps"],
                                              "epsilon_steps": rel.params["epsilon_steps"]}


def fit_dpkit_torch(torch: Any, Xtr: np.ndarray, ytr: np.ndarray, eps: float, seed: int) -> tuple[Any, dict]:
    model = _torch_model(torch, Xtr.shape[1])
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def loss(out: Any, target: Any) -> Any:
        return torch.nn.functional.binary_cross_entropy_with_logits(out[:, 0], target.to(out.dtype))

    rel = DPSGDTrainer(model, opt, loss, eps, delta=DELTA, batch_size=BATCH, sampling_rate=BATCH / len(ytr),
                       epochs=EPOCHS, clip=CLIP, accounting="pld", device="cpu",
                       rng=deterministic_source(seed)).fit(Xtr, ytr)
    return None, {"sigma": rel.params["sigma"],
                  "steps": rel.params["steps"], "model": model}


def fit_opacus(torch: Any, Xtr: np.ndarray, ytr: np.ndarray, eps: float, seed: int) -> tuple[Any, dict]:
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(seed)
    model = _torch_model(torch, Xtr.shape[1])
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    data = TensorDataset(torch.as_tensor(Xtr, dtype=torch.float32), torch.as_tensor(ytr, dtype=torch.float32))
    loader = DataLoader(data, batch_size=BATCH)
    engine = PrivacyEngine(accountant="prv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = engine.make_private_with_epsilon(module=model, optimizer=opt, data_loader=loader,
                                                              target_epsilon=eps, target_delta=DELTA,
                                                              epochs=EPOCHS, max_grad_norm=CLIP)
        lossf = torch.nn.BCEWithLogitsLoss()
        steps = 0
        for _ in range(EPOCHS):
            for xb, yb in loader:
                opt.zero_grad()
                if len(yb):
                    lossf(model(xb)[:, 0], yb).backward()
                opt.step()
                steps += 1
    return None, {"sigma": float(opt.noise_multiplier), "steps": steps,
                  "epsilon_accounted": float(engine.get_epsilon(DELTA)), "model": model}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    Xtr, ytr, Xte, yte, _ = load()
    rows: list[dict[str, Any]] = []
    from sklearn.linear_model import LogisticRegression

    t0 = time.process_time()
    ref = LogisticRegression(max_iter=2000).fit(Xtr, ytr)
    rows.append({"method": "sklearn (non-private)", "eps": None, "accuracy": [float(ref.score(Xte, yte))],
                 "cpu_s": [time.process_time() - t0]})
    for eps in args.eps:
        for method in args.methods:
            accs, cpus, info = [], [], {}
            for seed in range(args.runs):
                t0 = time.process_time()
                if method.startswith("dpkit-numpy"):
                    pred, info = fit_numpy(Xtr, ytr, eps, seed, count=method.endswith("count"))
                    cpus.append(time.process_time() - t0)
                    accs.append(float(np.mean(pred(Xte) == yte)))
                else:
                    fit = fit_dpkit_torch if method == "dpkit-torch" else fit_opacus
                    _, info = fit(torch, Xtr, ytr, eps, seed)
                    cpus.append(time.process_time() - t0)
                    model = info.pop("model")
                    if hasattr(model, "_module"):
                        model = model._module
                    accs.append(_accuracy_torch(torch, model, Xte, yte))
                print(f"eps={eps} {method} seed={seed}: acc={accs[-1]:.4f} cpu={cpus[-1]:.1f}s {info}", flush=True)
            rows.append({"method": method, "eps": eps, "accuracy": accs, "cpu_s": cpus, **info})
    print(f"\n{'method':<24}{'eps':>5}{'accuracy':>18}{'cpu s/fit':>11}{'sigma':>8}{'steps':>7}")
    for r in rows:
        a = np.array(r["accuracy"])
        print(f"{r['method']:<24}{r['eps'] or '-':>5}{a.mean():>11.4f} ± {a.std():.4f}"
              f"{np.mean(r['cpu_s']):>11.2f}{r.get('sigma', float('nan')):>8.3f}{r.get('steps', 0):>7}")
    meta = {"runs": args.runs, "delta": DELTA, "batch": BATCH, "epochs": EPOCHS, "clip": CLIP, "lr": LR,
            "momentum": MOMENTUM, "dpkit": dpkit.__version__, "torch": torch.__version__,
            "opacus": __import__("opacus").__version__, "python": platform.python_version(),
            "cpus": os.cpu_count(), "command": " ".join(sys.argv)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
