"""Li et al. ch. 6's analytic checks (issue #13), computed with dpkit and checked by simulation.

1. **Direct vs Flat crossover.** The book's expected squared error (ESE, summed over the cells of one k-way
   marginal of ``d`` binary attributes): Flat ``2^d V_u``, Direct ``2^k C(d,k)² V_u`` (``V_u`` the variance of
   unit-scale noise). Direct wins from ``d >= 16, 26, 36, 46`` for ``k = 2, 3, 4, 5``
   (:func:`dpkit.marginals.flat_vs_direct_crossover`). The simulation releases :func:`dpkit.marginals.flat` and
   :func:`dpkit.marginals.direct` (all 2-way marginals) on generated binary records for ``d`` around the k = 2
   crossover and measures the mean ESE per marginal over ``--runs`` runs, next to the formula evaluated with the
   noise variance dpkit actually uses (the discrete Laplace at the release's scale ``b``:
   ``2 e^{-1/b} / (1 - e^{-1/b})²``, slightly below the continuous ``2 b²``).
2. **PriView's view-size table** (§6.3.4): ``2^(ℓ/2) / (ℓ(ℓ-1))`` (pairs) and ``2^(ℓ/2) / (ℓ(ℓ-1)(ℓ-2))``
   (triples) for ``ℓ = 5 .. 12`` (:func:`dpkit.marginals.priview.view_size_criterion`), against the book's
   printed values.

Usage: ``.venv/bin/python bench/marginals/li_checks.py [--runs 20] [--epsilon 1] [--json out.json]``. Needs no
shared data (the records are generated). Every release uses ``dpkit.deterministic_source`` (reproducible).
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import dpkit
from dpkit.marginals import (
    Domain,
    Records,
    all_kway,
    direct,
    direct_ese,
    flat,
    flat_ese,
    flat_vs_direct_crossover,
    marginal,
    table_marginal,
)
from dpkit.marginals.priview import view_size_criterion

BOOK_VIEW_TABLE = {  # Li et al. §6.3.4, as printed (ℓ: (pairs, triples))
    5: (0.283, 0.094), 6: (0.267, 0.067), 7: (0.269, 0.054), 8: (0.286, 0.048),
    9: (0.314, 0.045), 10: (0.356, 0.044), 11: (0.411, 0.046), 12: (0.485, 0.048),
}


def discrete_laplace_var(b: float) -> float:
    """Variance of ``P[Z = k] ∝ exp(-|k|/b)``."""
    q = math.exp(-1.0 / b)
    return 2.0 * q / (1.0 - q) ** 2


def records(d: int, n: int, seed: int) -> Records:
    """Correlated binary records (a noisy chain ``x_{i+1} = x_i XOR flip``), generated, not read."""
    gen = np.random.default_rng(seed)
    x = np.empty((n, d), dtype=np.int64)
    x[:, 0] = gen.integers(0, 2, n)
    for i in range(1, d):
        x[:, i] = x[:, i - 1] ^ (gen.random(n) < 0.2)
    return Records(x, Domain({f"a{i}": 2 for i in range(d)}))


def simulate(d: int, k: int, eps: float, runs: int, n: int) -> dict:
    recs = records(d, n, seed=d)
    work = all_kway(recs.domain, k)
    truth = {a: marginal(recs, a) for a in work}
    flat_err, direct_err, flat_var, direct_var = [], [], [], []
    t0 = time.process_time()
    for r in range(runs):
        rf = flat(recs, eps, rng=dpkit.deterministic_source(10_000 * d + r))
        table = rf.value[recs.domain.attrs]
        flat_err.append(np.mean([np.sum((table_marginal(table, recs.domain, a) - truth[a]) ** 2) for a in work]))
        flat_var.append(discrete_laplace_var(rf.scale))
        rd = direct(recs, work, eps, rng=dpkit.deterministic_source(20_000 * d + r))
        direct_err.append(np.mean([np.sum((rd.value[a] - truth[a]) ** 2) for a in work]))
        direct_var.append(discrete_laplace_var(rd.scale))
    cpu = time.process_time() - t0
    m = len(work)
    return {
        "d": d, "k": k, "epsilon": eps, "runs": runs, "n": n, "cpu_s": cpu,
        "flat_ese_sim": float(np.mean(flat_err)), "flat_ese_sim_se": float(np.std(flat_err) / math.sqrt(runs)),
        "flat_ese_formula_dpkit_noise": float(2**d * np.mean(flat_var)),
        "flat_ese_book": flat_ese(d, k, eps),
        "direct_ese_sim": float(np.mean(direct_err)),
        "direct_ese_sim_se": float(np.std(direct_err) / math.sqrt(runs)),
        "direct_ese_formula_dpkit_noise": float(2**k * np.mean(direct_var)),
        "direct_ese_book": direct_ese(d, k, eps),
        "marginals": m,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--dims", default="12,14,15,16,17,18")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    out: dict = {"crossover": {}, "view_table": {}, "simulation": []}
    print("1. Direct vs Flat: smallest d with 2^k C(d,k)^2 < 2^d (book: 16, 26, 36, 46)")
    print("| k | crossover d (dpkit) | book | Flat ESE at d | Direct ESE at d | at d-1: Flat | Direct |")
    print("|---|---|---|---|---|---|---|")
    book = {2: 16, 3: 26, 4: 36, 5: 46}
    for k in (2, 3, 4, 5):
        d = flat_vs_direct_crossover(k)
        out["crossover"][k] = d
        print(f"| {k} | {d} | {book[k]} | {flat_ese(d, k):.4g} | {direct_ese(d, k):.4g} | "
              f"{flat_ese(d - 1, k):.4g} | {direct_ese(d - 1, k):.4g} |")

    print("\n2. PriView view size: 2^(l/2)/(l(l-1)) and 2^(l/2)/(l(l-1)(l-2)) vs the book's table")
    print("| l | pairs (dpkit) | book | triples (dpkit) | book |")
    print("|---|---|---|---|---|")
    for ell, (bp, bt) in BOOK_VIEW_TABLE.items():
        p, t = view_size_criterion(ell, 2), view_size_criterion(ell, 3)
        out["view_table"][ell] = {"pairs": p, "triples": t, "book_pairs": bp, "book_triples": bt}
        print(f"| {ell} | {p:.3f} | {bp:.3f} | {t:.3f} | {bt:.3f} |")

    eps = args.epsilon
    print(f"\n3. Simulation, k = 2, epsilon = {eps}, n = {args.n}, {args.runs} runs per d: mean ESE per 2-way "
          "marginal (± standard error); formula = 2^d Var (Flat), 2^k Var (Direct) with dpkit's discrete "
          "Laplace variance at the release's scale; book = the same with V_u = 2/eps^2")
    print("| d | Flat sim | Flat formula | Flat book | Direct sim | Direct formula | Direct book | "
          "winner (sim) | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in (int(x) for x in args.dims.split(",")):
        row = simulate(d, 2, eps, args.runs, args.n)
        out["simulation"].append(row)
        win = "Direct" if row["direct_ese_sim"] < row["flat_ese_sim"] else "Flat"
        print(f"| {d} | {row['flat_ese_sim']:.4g} ± {row['flat_ese_sim_se']:.2g} | "
              f"{row['flat_ese_formula_dpkit_noise']:.4g} | {row['flat_ese_book']:.4g} | "
              f"{row['direct_ese_sim']:.4g} ± {row['direct_ese_sim_se']:.2g} | "
              f"{row['direct_ese_formula_dpkit_noise']:.4g} | {row['direct_ese_book']:.4g} | {win} | "
              f"{row['cpu_s']:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
