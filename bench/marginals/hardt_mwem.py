"""Hardt's thesis ch. 5 protocol (Fig 5.2 / 5.3) for dpkit's MWEM over marginals (issue #13).

Protocol
--------
- Data: the four contingency tables of the thesis's experiments (``../shared/data/contingency``): mildew (6
  binary attributes, n = 70), czech (6, n = 1841), rochdale (8, n = 665) and NLTCS (16, n = 21,574; 65,536
  cells). Each table is expanded to integer-coded records over binary attributes.
- Workload: all k-way marginals (k = 3 by default, which determine every <= 3-way Fourier coefficient of the
  thesis's workload; NLTCS also at k = 2 with ``--nltcs-k 2``). The thesis's workload is the parity (Fourier)
  queries themselves; dpkit's MWEM selects and measures whole marginals (each cell a counting query), so the
  selection's candidates are the C(d, k) marginals rather than the sum_{j<=k} C(d, j) parities.
- Methods (pure epsilon-DP; dpkit's default add/remove neighbours with 10 % of epsilon on the noisy total, or
  ``--public-n``: replace-one, n public as in the thesis's normalized histograms, at L1 sensitivity 2):
  ``plain`` = Alg 5.1 (``sweeps=0, average=True``, uniform start, eps/(2T) per selection and per measurement);
  ``optimized`` = §5.3.2's "iterating the update" (``sweeps`` replays of all measurements after each round,
  last iterate); ``optimized+init`` = the same with the noisy-histogram start (``init="noisy"``,
  ``init_share`` of epsilon). Reference lines: the uniform distribution, and a non-private fit of the true
  workload marginals (iterative proportional fitting: the maximum-entropy distribution with those marginals, in
  the role of Fienberg et al.'s "good non-private" values, which the thesis does not print).
- Metric: ``KL(true || synthetic)`` in nats over the full table (the dense estimate in ``parts["table"]``),
  mean and standard deviation of the finite values (with the number of runs whose estimate underflowed to 0
  on a cell of the data, "inf×k": KL infinite) over ``--runs`` runs (``--nltcs-runs`` for NLTCS); the thesis
  uses 100 and 10.
- epsilon grid and T: not stated in the thesis for the small tables; defaults here are epsilon in
  {0.1, 0.5, 1, 2, 5} and T = 10 (``--rounds``); NLTCS uses ``--nltcs-rounds`` (default 30; the thesis
  plots T = 20, 30, 40).

Usage: ``.venv/bin/python bench/marginals/hardt_mwem.py [--runs 5] [--nltcs-runs 2] [--datasets mildew,czech]
[--epsilons 0.1,1] [--rounds 10] [--sweeps 20] [--json out.json]``. Every call gets
``rng=dpkit.deterministic_source(seed)`` with a seed derived from (dataset, method, epsilon, run).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from dpkit import Replace, deterministic_source
from dpkit.marginals import Domain, Records, all_kway, kl_divergence, marginal, mwem

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "contingency"
SMALL = ("mildew", "czech", "rochdale")


def _from_long(path: Path) -> Records:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    attrs = [c for c in rows[0] if c not in ("Freq", "rownames", "")]
    levels = {a: sorted({r[a] for r in rows}) for a in attrs}
    dom = Domain({a: len(levels[a]) for a in attrs})
    codes = []
    for r in rows:
        code = [levels[a].index(r[a]) for a in attrs]
        codes.extend([code] * int(r["Freq"]))
    return Records(np.asarray(codes, dtype=np.int64), dom)


def _from_patterns(path: Path) -> Records:
    codes = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        bits, count = line.split()
        codes.extend([[int(b) for b in bits]] * int(count))
    d = len(codes[0])
    return Records(np.asarray(codes, dtype=np.int64), Domain({f"x{i}": 2 for i in range(d)}))


def load(name: str) -> Records:
    if name == "nltcs":
        return _from_patterns(DATA / "nltcs_patterns.txt")
    return _from_long(DATA / f"{name}_long.csv")


def ipf(true: np.ndarray, dom: Domain, wl: list[tuple[str, ...]], sweeps: int) -> np.ndarray:
    """Non-private reference: iterative proportional fitting of the true workload marginals from the uniform
    table (the maximum-entropy distribution with those marginals; Fienberg et al.'s kind of fit)."""
    a = np.full(dom.shape, true.sum() / dom.size())
    for _ in range(sweeps):
        for attrs in wl:
            axes = dom.axes(attrs)
            other = tuple(i for i in range(a.ndim) if i not in axes)
            shape = [a.shape[i] if i in axes else 1 for i in range(a.ndim)]
            cur = a.sum(axis=other)
            tgt = true.sum(axis=other)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(cur > 0, tgt / cur, 0.0)
            a = a * ratio.reshape(shape)
    return a


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per (dataset, epsilon, method); thesis: 100")
    ap.add_argument("--nltcs-runs", type=int, default=2, help="runs for NLTCS; thesis: 10")
    ap.add_argument("--datasets", default="mildew,czech,rochdale,nltcs")
    ap.add_argument("--epsilons", default="0.1,0.5,1,2,5")
    ap.add_argument("--k", type=int, default=3, help="workload: all k-way marginals")
    ap.add_argument("--nltcs-k", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--nltcs-rounds", type=int, default=30)
    ap.add_argument("--sweeps", type=int, default=20, help="replays per round of the optimized variants")
    ap.add_argument("--ipf-sweeps", type=int, default=30, help="sweeps of the non-private reference fit")
    ap.add_argument("--init-share", type=float, default=0.1)
    ap.add_argument("--public-n", action="store_true",
                    help="replace-one neighbours (n public, as the thesis's normalized histograms; L1 sensitivity 2)")
    ap.add_argument("--json", default="", help="write the summary rows to this file")
    args = ap.parse_args(argv)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    methods = {
        "plain": {"sweeps": 0, "average": True},
        "optimized": {"sweeps": args.sweeps, "average": False},
        "optimized+init": {"sweeps": args.sweeps, "average": False, "init": "noisy", "init_share": args.init_share},
    }
    rows = []
    nb = Replace() if args.public_n else None
    for name in args.datasets.split(","):
        rec = load(name)
        dom = rec.domain
        nltcs = name == "nltcs"
        k = args.nltcs_k if nltcs else args.k
        rounds = args.nltcs_rounds if nltcs else args.rounds
        runs = args.nltcs_runs if nltcs else args.runs
        wl = all_kway(dom, k)
        true = marginal(rec)
        uniform = kl_divergence(true, np.ones(dom.shape))
        t0 = time.perf_counter()
        nonpriv = kl_divergence(true, ipf(true, dom, wl, args.ipf_sweeps))
        print(f"\n{name}: n={len(rec)}, d={len(dom)}, cells={dom.size()}, workload {len(wl)} {k}-way marginals, "
              f"T={rounds}, runs={runs}; KL(uniform)={uniform:.4f}, non-private {k}-way fit={nonpriv:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        print(f"{'epsilon':>8} " + " ".join(f"{m:>26}" for m in methods) + "   s/run", flush=True)
        for eps in epsilons:
            cells = []
            t1 = time.perf_counter()
            for m, kw in methods.items():
                kls = []
                for r in range(runs):
                    rel = mwem(rec, wl, eps, rounds=rounds, representation="dense", neighbours=nb,
                               rng=deterministic_source(_seed(name, m, eps, r)), **kw)  # type: ignore[arg-type]
                    kls.append(kl_divergence(true, rel.parts["table"]))
                arr = np.asarray(kls)
                fin = arr[np.isfinite(arr)]
                infinite = int(arr.size - fin.size)  # the estimate underflowed to 0 on a cell the data have
                mean = float(np.mean(fin)) if fin.size else math.inf
                std = float(np.std(fin)) if fin.size else math.nan
                median = float(np.median(arr))
                tag = f" inf×{infinite}" if infinite else ""
                cells.append(f"{mean:.4f} ± {std:.4f}{tag}")
                rows.append({"dataset": name, "n": len(rec), "d": len(dom), "k": k, "rounds": rounds, "epsilon": eps,
                             "method": m, "runs": runs, "kl_mean_finite": mean, "kl_std_finite": std,
                             "kl_median": median, "infinite_runs": infinite, "kl_uniform": uniform,
                             "kl_nonprivate_fit": nonpriv})
            per = (time.perf_counter() - t1) / (runs * len(methods))
            print(f"{eps:>8g} " + " ".join(f"{c:>26}" for c in cells) + f"   {per:.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
