"""The pure-ldp package (Cormode, Maddock et al.) on the same data and ε as bench/local/run.py.

    nice -n 5 .bench-local-venv/bin/python bench/local/peers.py

pure-ldp's clients privatise one item at a time (Python's ``random``/``np.random``) and its servers aggregate one
report at a time (OLH: one xxhash per report and domain item). Adult: DE (= GRR), SUE, OUE, OLH, 5 runs.
Retail: DE only (its OLH server needs 88,162 x 16,470 Python xxhash calls per run, its UE client 16,470 random
draws per user: not run). Compatibility shim: pure-ldp 1.2.0 hashes ``str`` with ``xxhash.xxh32``, which
xxhash >= 2 refuses; the shim encodes the string as UTF-8 first (the digest xxhash 1.x computed).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _data
import xxhash

_xxh32 = xxhash.xxh32


def _xxh32_str(data, seed=0):  # pure-ldp 1.2.0 passes str; xxhash >= 2 wants bytes (same digest of the UTF-8)
    return _xxh32(data.encode() if isinstance(data, str) else data, seed=seed)


xxhash.xxh32 = _xxh32_str

from pure_ldp.frequency_oracles import (  # noqa: E402
    DEClient,
    DEServer,
    LHClient,
    LHServer,
    UEClient,
    UEServer,
)

EPS = (0.5, 1.0, 2.0, 4.0)


def pair(name: str, eps: float, d: int):
    if name == "grr":
        return DEClient(eps, d), DEServer(eps, d)
    if name in ("sue", "oue"):
        return UEClient(eps, d, use_oue=name == "oue"), UEServer(eps, d, use_oue=name == "oue")
    return LHClient(eps, d, use_olh=True), LHServer(eps, d, use_olh=True)


def run(name: str, eps: float, codes: np.ndarray, d: int, runs: int, seed: int) -> dict:
    import random

    true = np.bincount(codes, minlength=d).astype(float)
    mse, t_all = [], []
    for r in range(runs):
        random.seed(seed + r)
        np.random.seed(seed + r)  # noqa: NPY002 (pure-ldp draws from numpy's global state)
        client, server = pair(name, eps, d)
        t0 = time.process_time()
        for x in codes.tolist():
            server.aggregate(client.privatise(x + 1))  # pure-ldp's default index_mapper is x - 1
        est = np.array([server.estimate(i + 1, suppress_warnings=True) for i in range(d)])
        t_all.append(time.process_time() - t0)
        mse.append(float(np.mean((est - true) ** 2)))
    row = {"protocol": name, "epsilon": eps, "runs": runs, "n": int(codes.size), "k": d, "mse": float(np.mean(mse)),
           "mse_runs": mse, "cpu_total_s": float(np.mean(t_all))}
    print(json.dumps({k: v for k, v in row.items() if k != "mse_runs"}), flush=True)
    return row


def main() -> None:
    cats, occ = _data.adult_occupation()
    k_retail, retail = _data.retail_first_items()
    rows = []
    for eps in EPS:
        for name in ("grr", "sue", "oue", "olh"):
            rows.append({"data": "adult", **run(name, eps, occ, len(cats), 5, 1000)})
    for eps in EPS:
        rows.append({"data": "retail", **run("grr", eps, retail, k_retail, 5, 2000)})
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "pure_ldp.json").write_text(json.dumps({"rows": rows}, indent=1))


if __name__ == "__main__":
    main()
