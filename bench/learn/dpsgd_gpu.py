"""DP-SGD through PyTorch on a GPU (issue #14's "not measured"): dpkit's ``DPSGDTrainer`` on CPU and on CUDA, the
same seeds, side by side in one process.

Two models on UCI Adult's 88 features (``adult_features.load``; row norm <= sqrt(12)), the schedule of
``dpsgd.py`` (expected batch 256, Poisson rate 256/n, 5 epochs, clip 0.5, delta 1e-5, epsilon 1, SGD with
momentum 0.9 on the noisy sum / 256):

- ``linear``: ``nn.Linear(88, 1)`` in float64, learning rate 4 (``dpsgd.py``'s dpkit-torch row). The engine draws
  the same Poisson samples and the same lattice noise on both devices (dpkit's seeded source); per-example
  gradients are rounded to the lattice on the device, so the two fits agree exactly unless a float64 gradient
  lands within a rounding of a lattice half-point on one device and not the other.
- ``mlp``: 88 -> 256 -> 256 -> 1 (ReLU, float32, 88,833 parameters), learning rate 0.5, the same schedule, and
  ``mlp-4096``: the same network with expected batch 4096 (rate 4096/n, learning rate 2 on the sum / 4096), where
  a GPU has room to work.

Prints one JSON line per fit (device, model, seed, test accuracy, wall and process CPU seconds of the fit) and a
summary; ``--out`` writes them. The accounting (sigma by PLD, dp-accounting) is computed once per model before
the timed fits (the trainer then checks that sigma gives epsilon <= 1 itself). Run where PyTorch sees a GPU::

    python bench/learn/dpsgd_gpu.py --data .devdata/adult_uci --seeds 0 1 2 --out results/dpsgd_gpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from adult_features import load

from dpkit.learn import DPSGDTrainer, dpsgd_sigma
from dpkit.noise import deterministic_source

DELTA, EPS, EPOCHS, CLIP, MOMENTUM = 1e-5, 1.0, 5, 0.5, 0.9
MODELS = {  # name: (expected batch, learning rate, float64?)
    "linear": (256, 4.0, True),
    "mlp": (256, 0.5, False),
    "mlp-4096": (4096, 2.0, False),
}


def _module(torch: Any, name: str, d: int) -> Any:
    torch.manual_seed(0)  # the public initial weights only; never privacy noise
    if name == "linear":
        m = torch.nn.Linear(d, 1).double()
        torch.nn.init.zeros_(m.weight)
        torch.nn.init.zeros_(m.bias)
        return m
    return torch.nn.Sequential(torch.nn.Linear(d, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 1))


def _loss(torch: Any) -> Any:
    def loss(out: Any, target: Any) -> Any:
        return torch.nn.functional.binary_cross_entropy_with_logits(out[:, 0], target.to(out.dtype))

    return loss


def _accuracy(torch: Any, module: Any, X: np.ndarray, y: np.ndarray, device: str) -> float:
    dtype = next(module.parameters()).dtype
    with torch.no_grad():
        s = module(torch.as_tensor(X, dtype=dtype, device=device)).cpu().numpy()[:, 0]
    return float(np.mean((s > 0) == y))


def fit(torch: Any, name: str, device: str, seed: int, data: tuple[np.ndarray, ...], sigma: float | None) -> dict:
    Xtr, ytr, Xte, yte = data
    batch, lr, _ = MODELS[name]
    module = _module(torch, name, Xtr.shape[1])
    opt = torch.optim.SGD(module.parameters(), lr=lr, momentum=MOMENTUM)  # on the noisy sum / batch
    tr = DPSGDTrainer(module, opt, _loss(torch), epsilon=None if sigma else EPS, delta=DELTA, sigma=sigma,
                      batch_size=batch, sampling_rate=batch / len(ytr), accounting="pld", epochs=EPOCHS, clip=CLIP,
                      device=device,                      rng=deterministic_source(seed), progress=False)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    w0, c0 = time.perf_counter(), time.process_time()
    rel = tr.fit(Xtr, ytr)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return {"model": name, "device": device, "seed": seed, "accuracy": _accuracy(torch, module, Xte, yte, device),
            "wall_s": wall, "cpu_s": cpu, "steps": rel.params.get("steps"), "sigma": rel.params.get("sigma"),
            "params": int(sum(p.numel() for p in module.parameters()))}


def main(argv: list[str] | None = None) -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with adult.data/.test/.names")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--devices", nargs="+", default=["cpu", "cuda"])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    Xtr, ytr, Xte, yte, _ = load(data=args.data)
    data = (Xtr, ytr, Xte, yte)
    info = {"torch": torch.__version__, "python": platform.python_version(), "cpu_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    print(json.dumps(info), flush=True)
    rows = []
    for name in args.models:
        # sigma once, by the trainer's own rule (PLD, ceil(epochs / rate) steps), outside the timed fits
        rate = MODELS[name][0] / len(ytr)
        sigma = dpsgd_sigma(rate, math.ceil(EPOCHS / rate - 1e-9), EPS, DELTA, accounting="pld")
        for device in args.devices:
            if device.startswith("cuda") and not torch.cuda.is_available():
                continue
            for seed in args.seeds:
                row = fit(torch, name, device, seed, data, sigma)
                rows.append(row)
                print(json.dumps(row), flush=True)
    for name in args.models:
        for device in args.devices:
            rs = [r for r in rows if r["model"] == name and r["device"] == device]
            if rs:
                acc = np.array([r["accuracy"] for r in rs])
                sd = acc.std(ddof=1) if len(acc) > 1 else 0.0
                wall, cpu = np.mean([r["wall_s"] for r in rs]), np.mean([r["cpu_s"] for r in rs])
                print(f"{name:9s} {device:5s} acc {acc.mean():.4f} ± {sd:.4f} wall {wall:7.2f} s  cpu {cpu:7.2f} s")
    same = [(a["model"], a["seed"]) for a in rows for b in rows
            if a["model"] == b["model"] and a["seed"] == b["seed"] and a["device"] == "cpu"
            and b["device"].startswith("cuda") and a["accuracy"] == b["accuracy"]]
    print("same test accuracy on CPU and GPU:", same)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"info": info, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
