"""Li et al., *Differential Privacy: From Theory to Practice*, §2.5: ranking of the noisy-average algorithms.

The book's claim (no dataset named): mean L1 error Alg 3 (clamping) < Alg 4 (normalization) < EM (average over
a grid) < Alg 1 (noisy sum / noisy count); at large ε Alg 3 ≈ Alg 4 at about half the error of the other two; at
small ε the EM median (Ex 2.21) estimates the average better than all the average algorithms.

Reproduced on the six numeric Adult columns with public bounds from ``dpkit.datasets.adult_domain()``, under the
book's relation (add/remove one record, dpkit's default), ``--reps`` repetitions per cell, via
``dpkit.stats.mean(values, bounds, epsilon, method=...)``:

* ``"clamp"``: Alg 3 with dpkit's corrected accounting. As printed, Alg 3 is not ε-DP for ε < 2 ln 2 (the lead's
  finding); dpkit recalibrates it and refuses ε <= ln 2, so at ε in {0.01, 0.1} it reports "not private at this ε".
* "Alg 3 as printed (not ε-DP)": a reference row implemented here with numpy's (insecure, float) Laplace:
  A = clamp((S + Lap(Δ/ε)) / C, lo, hi) with the true count C > 0 and Δ = hi - lo. It is a reproduction of the
  printed algorithm, NOT a private release.
* ``"normalized"`` (Alg 4, dpkit's default), ``"exponential"`` (EM average), ``"noisy_ratio"`` (Alg 1) and
  ``"median"`` (the EM median used as an estimate of the mean).

dpkit draws from ``dpkit.deterministic_source(seed)`` (seeded research-only source, insecure).

    .bench-stats-venv/bin/python bench/stats/li_mean_ranking.py            # full, 200 reps
    .bench-stats-venv/bin/python bench/stats/li_mean_ranking.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
from _benchlib import NUMERIC, banner, fmt, load_adult, public_bounds, stat, table, write

import dpkit
from dpkit.core.errors import DPKitError

METHODS = {  # label -> dpkit method (None: the printed Alg 3, implemented below)
    "Alg 3 (clamp, dpkit)": "clamp",
    "Alg 3 as printed (not ε-DP)": None,
    "Alg 4 (normalized)": "normalized",
    "EM average (exponential)": "exponential",
    "Alg 1 (noisy_ratio)": "noisy_ratio",
    "EM median (median)": "median",
    "EM average, 16,384 candidates (option)": "exponential-fine",
}
FINE_CANDIDATES = 16_384
AVERAGE_ALGS = ("Alg 3 (clamp, dpkit)", "Alg 4 (normalized)", "EM average (exponential)", "Alg 1 (noisy_ratio)")
SHORT = {"Alg 3 (clamp, dpkit)": "Alg3", "Alg 3 as printed (not ε-DP)": "Alg3*", "Alg 4 (normalized)": "Alg4",
         "EM average (exponential)": "EM", "Alg 1 (noisy_ratio)": "Alg1", "EM median (median)": "Median",
         "EM average, 16,384 candidates (option)": "EM16k"}


def alg3_as_printed(x: np.ndarray, lo: float, hi: float, eps: float, seed: int) -> float:
    """Li et al. Alg 3 exactly as printed (not ε-DP for ε < 2 ln 2); numpy float Laplace, bench reference only."""
    gen = np.random.default_rng(seed)  # rng-ok: reproduction of a non-private printed algorithm, not a release
    c = len(x)
    if c == 0:  # not reached on Adult; the printed empty-data branch
        u = gen.random()
        p = 0.5 * math.exp(-eps / 2)
        return lo if u < p else hi if u < 2 * p else float(gen.uniform(lo, hi))
    s = float(np.clip(x, lo, hi).sum())
    return float(np.clip((s + gen.laplace(0.0, (hi - lo) / eps)) / c, lo, hi))


def compare(a: tuple[float, float], b: tuple[float, float]) -> str:
    """'<' or '>' when the mean L1 errors differ by more than 2 combined standard errors, else '≈'."""
    if abs(a[0] - b[0]) < 2 * math.hypot(a[1], b[1]):
        return "≈"
    return "<" if a[0] < b[0] else ">"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.1, 1.0])
    ap.add_argument("--columns", nargs="+", default=list(NUMERIC))
    ap.add_argument("--quick", action="store_true", help="smoke run: 5 reps")
    args = ap.parse_args()
    if args.quick:
        args.reps = 5
    data, source = load_adult(args.columns)
    res: dict[tuple[str, float, str], tuple[float, float] | str] = {}
    t0 = time.perf_counter()
    for ci, col in enumerate(args.columns):
        x = data[col]
        lo, hi = public_bounds(col)
        true = float(np.mean(np.clip(x, lo, hi)))
        for ei, eps in enumerate(args.eps):
            for mi, (label, method) in enumerate(METHODS.items()):
                errs = np.empty(args.reps)
                refused = None
                for rep in range(args.reps):
                    seed = ((ci * 10 + ei) * 10 + mi) * 1_000_000 + rep
                    if method is None:
                        est = alg3_as_printed(x, lo, hi, eps, seed)
                    else:
                        try:
                            kw = {"method": method, "rng": dpkit.deterministic_source(seed)}
                            if method == "exponential-fine":
                                kw.update(method="exponential", candidates=FINE_CANDIDATES)
                            est = float(stat("mean")(x, (lo, hi), eps, **kw).value)
                        except DPKitError as exc:
                            refused = f"refused: {type(exc).__name__} ({getattr(exc, 'param', '')})"
                            break
                    errs[rep] = abs(est - true)
                res[(col, eps, label)] = refused or (float(errs.mean()), float(errs.std(ddof=1) / math.sqrt(args.reps)))
            print(f"  done {col} ε={eps} ({time.perf_counter() - t0:.0f} s)", flush=True)

    extra = [
        f"Data: {source}, n = {len(data[args.columns[0]]):,}; public bounds from dpkit.datasets.adult_domain().",
        f"{args.reps} repetitions per cell; figure = mean L1 error |estimate − true mean| ± its standard error; "
        "neighbours: add/remove one record (the book's, dpkit's default).",
        "dpkit randomness: dpkit.deterministic_source(seed), the seeded research-only source (insecure).",
        f"Wall time: {time.perf_counter() - t0:.0f} s.",
    ]
    lines = banner("Li et al. §2.5: noisy-average algorithms on Adult", ["dpkit", "numpy"], extra)

    def cell(v: tuple[float, float] | str) -> str:
        if isinstance(v, str):
            return "not private at this ε" if "refused" in v else v
        return f"{fmt(v[0], 3)} ± {fmt(v[1], 2)}"

    rows = []
    for col in args.columns:
        for eps in args.eps:
            rows.append([col, eps, fmt(float(np.mean(data[col])))] + [cell(res[(col, eps, m)]) for m in METHODS])
    lines += table(["column", "ε", "true mean", *METHODS], rows)
    lines += ["", "Ranking per column and ε (smallest mean L1 error first; `≈` when two neighbours differ by less "
              "than 2 combined standard errors). Alg3* = the printed, non-private Alg 3, used in the book-claim "
              "check only where dpkit's Alg 3 is refused (ε <= ln 2). EM16k = the EM average with "
              f"`candidates={FINE_CANDIDATES}` (a dpkit option; the default is 1024), shown in the ranking only. "
              "Claim columns: yes = every step in the book's direction beyond 2 standard errors; tie = no step "
              "reversed but some within noise; no = some step reversed beyond noise.", ""]

    rank_rows = []
    for col in args.columns:
        for eps in args.eps:
            val = {m: v for m in METHODS if not isinstance(v := res[(col, eps, m)], str)}
            order = sorted(val, key=lambda m: val[m][0])
            parts = [SHORT[order[0]]]
            for a, b in itertools.pairwise(order):
                close = val[b][0] - val[a][0] < 2 * math.hypot(val[a][1], val[b][1])
                parts.append(("≈ " if close else "< ") + SHORT[b])
            alg3 = "Alg 3 (clamp, dpkit)" if "Alg 3 (clamp, dpkit)" in val else "Alg 3 as printed (not ε-DP)"
            chain = [alg3, "Alg 4 (normalized)", "EM average (exponential)", "Alg 1 (noisy_ratio)"]
            steps = [compare(val[a], val[b]) for a, b in itertools.pairwise(chain)]
            claim = "no" if ">" in steps else "yes" if set(steps) == {"<"} else "tie"
            chain_txt = SHORT[chain[0]] + "".join(f" {c} {SHORT[b]}" for c, b in zip(steps, chain[1:], strict=True))
            med = "EM median (median)"
            vs = [compare(val[med], val[m]) for m in AVERAGE_ALGS if m in val]
            med_claim = "yes" if set(vs) == {"<"} else "no" if ">" in vs else "tie"
            rank_rows.append([col, eps, " ".join(parts), f"{claim}: {chain_txt}",
                              med_claim + (" (claim is for small ε)" if eps >= 1 else "")])
    lines += table(["column", "ε", "ranking", "book: Alg3 < Alg4 < EM < Alg1?",
                    "book (small ε): EM median beats every private average?"],
                   rank_rows, ["l", "r", "l", "l", "l"])
    write("li_mean_ranking_quick" if args.quick else "li_mean_ranking", lines)


if __name__ == "__main__":
    main()
