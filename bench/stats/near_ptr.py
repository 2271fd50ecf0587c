"""Near & Abuah, *Programming Differential Privacy*, ch. 8: PTR, smooth sensitivity and sample-and-aggregate
for the mean age of Adult, against the global-sensitivity mean.

The book's setting: ``u = 100`` (ages clipped to [0, 100]), proposed bound ``b = 0.005``, ``ε = 1``,
``δ = 1/n²`` (n = 32,561); sample-and-aggregate of the mean at k ∈ {10, 1000, 6000} blocks with output bounds
[l, u] = [20, 80]; 100 trials each; figure = |percent error| against the true mean age (median and 90th
percentile over the trials).

All mechanisms are dpkit's (``dpkit.stability`` and ``dpkit.stats``), which fix the book's errata (see
``dpkit.stability``'s docstring): the PTR threshold, the PTR charge (the test and the release each spend
budget; ``ε`` below is the **total** charged), ``k`` from 0 in the smooth sensitivity, the add/remove local
sensitivity of the mean, and exactly ``k`` random blocks in sample-and-aggregate. The book's printed
quantities are shown beside dpkit's.

dpkit draws from ``dpkit.deterministic_source(seed)`` (seeded research-only source, insecure).

    .bench-stats-venv/bin/python bench/stats/near_ptr.py            # full, 100 trials
    .bench-stats-venv/bin/python bench/stats/near_ptr.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _benchlib import banner, fmt, load_adult, table, write
from _benchlib import stat as dpkit_stat

import dpkit
from dpkit import stability as st

U, B, EPS = 100.0, 0.005, 1.0
SAA_BOUNDS = (20.0, 80.0)
SAA_BLOCKS = (10, 1000, 6000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="smoke run: 5 trials")
    args = ap.parse_args()
    if args.quick:
        args.trials = 5
    data, source = load_adult(["age"])
    age = data["age"]
    n = age.size
    delta = 1.0 / n**2
    true = float(np.mean(np.clip(age, 0.0, U)))

    # ------------------------------------------------------------------ the book's quantities vs dpkit's
    beta = st.smooth_beta(EPS, delta)
    plan_rows = [
        ["PTR threshold, book: ln(2/δ)/(2ε) = ln(2n²)/2", "10.737", fmt(st.book_ptr_threshold(EPS, delta), 6)],
        ["PTR: P[test passes on an unstable data set] with the book's threshold (must be ≤ δ = "
         f"{delta:.3g})", "—", fmt(st.book_ptr_pass_probability(EPS, delta), 4)],
        ["PTR threshold, dpkit (exact discrete; test at ε_test = 1, the book's test budget)", "—",
         str(st.ptr_threshold(1.0, delta))],
        ["PTR threshold, dpkit at total ε = 1 (ε_test = 0.5)", "—", str(st.ptr_threshold(0.5, delta))],
        ["continuous correct threshold ln(1/(2δ))/ε_test, ε_test = 1", "—",
         fmt(float(np.log(1.0 / (2.0 * delta))), 6)],
        ["distance to high local sensitivity, book's dist_to_high_ls", "12,562",
         f"{st.book_ptr_mean_distance(n, U, B):,}"],
        ["distance to high local sensitivity, dpkit (add/remove: w/max(n−k, 2) > b)", "—",
         f"{int(st.ptr_mean_distance(age, U, B)):,}"],
        ["smooth sensitivity 2S, book (u/(n−k+1), k < 200, β = ε/(2 ln(2/δ)))", "0.006142128861863522",
         repr(2 * st.book_smooth_sensitivity_mean(n, U, EPS, delta))],
        [f"smooth sensitivity 2S, dpkit (w/max(n−k, 2), all k, β = {beta:.6g}; never released)", "—",
         repr(2 * st.smooth_sensitivity_mean(age, (0.0, U), beta))],
    ]

    # ------------------------------------------------------------------------------- the trials
    def ptr(total_eps: float) -> Callable[[int], float | None]:
        def run(seed: int) -> float | None:
            r = st.ptr_mean(age, U, B, total_eps, delta, rng=dpkit.deterministic_source(seed))
            return None if r.value is None else float(r.value)

        return run

    def gs_avg(seed: int) -> float:
        """Near's gs_avg: noisy clipped sum (sensitivity u) at ε/2 over noisy count at ε/2 (dpkit's sum/count)."""
        rng = dpkit.deterministic_source(seed)
        s = dpkit_stat("sum")(age, (0.0, U), EPS / 2, rng=rng).value
        c = dpkit_stat("count")(age, EPS / 2, rng=rng).value
        return float(s) / float(c)

    def dpkit_mean(seed: int) -> float:
        return float(dpkit_stat("mean")(age, (0.0, U), EPS, rng=dpkit.deterministic_source(seed)).value)

    def smooth(seed: int) -> float:
        return float(st.smooth_mean(age, (0.0, U), EPS, delta, rng=dpkit.deterministic_source(seed)).value)

    def saa(k: int) -> Callable[[int], float]:
        def run(seed: int) -> float:
            r = st.sample_aggregate(age, np.mean, SAA_BOUNDS, EPS, blocks=k, rng=dpkit.deterministic_source(seed))
            return float(r.value)

        return run

    methods: list[tuple[str, str, Callable[[int], Any]]] = [
        ("PTR mean, b = 0.005 (dpkit ptr_mean, ε_test = ε_release = 0.5)", f"({EPS:g}, 1/n²)", ptr(EPS)),
        ("PTR mean, the book's noise (ε_test = ε_release = 1; the book charges only 1)", "(2, 1/n²)", ptr(2 * EPS)),
        ("global-sensitivity mean, Near's gs_avg (dpkit sum and count at ε/2 each)", f"{EPS:g}", gs_avg),
        ("dpkit.stats.mean, default (normalized, Li Alg 4)", f"{EPS:g}", dpkit_mean),
        ("smooth-sensitivity mean (dpkit smooth_mean)", f"({EPS:g}, 1/n²)", smooth),
    ] + [(f"sample-and-aggregate, k = {k} blocks, [l, u] = [20, 80]", f"{EPS:g}", saa(k)) for k in SAA_BLOCKS]

    rows = []
    t0 = time.perf_counter()
    for mi, (label, cost, fn) in enumerate(methods):
        ts = time.perf_counter()
        outs = [fn(mi * 1_000_000 + t) for t in range(args.trials)]
        passed = np.array([o for o in outs if o is not None], dtype=np.float64)
        pct = np.abs(passed - true) / true * 100.0
        med = float(np.median(pct)) if pct.size else float("nan")
        p90 = float(np.percentile(pct, 90)) if pct.size else float("nan")
        rows.append([label, cost, f"{passed.size}/{args.trials}", fmt(med, 3), fmt(p90, 3),
                     f"{time.perf_counter() - ts:.1f}"])
        print(f"  done {label} ({time.perf_counter() - t0:.0f} s)", flush=True)

    extra = [
        f"Data: {source}, Adult age, n = {n:,}; true mean of ages clipped to [0, 100]: {true:.6f}.",
        f"{args.trials} trials per method; u = {U:g}, b = {B:g}, ε = {EPS:g}, δ = 1/n² = {delta:.4g}.",
        "dpkit randomness: dpkit.deterministic_source(seed), the seeded research-only source (insecure).",
        f"Wall time: {time.perf_counter() - t0:.0f} s.",
    ]
    lines = banner("Near & Abuah ch. 8: PTR, smooth sensitivity, sample-and-aggregate (Adult age)",
                   ["dpkit", "numpy"], extra)
    lines += table(["quantity", "book", "computed"], plan_rows, ["l", "r", "r"])
    lines += ["", "PTR, smooth sensitivity: (ε, δ) charged in total. ⊥ results are counted in \"passed\" and left "
              "out of the error columns.", ""]
    lines += table(["method", "(ε, δ) charged", "passed", "median |% error|", "p90 |% error|", "time (s)"], rows,
                   ["l", "r", "r", "r", "r", "r"])
    write("near_ptr_quick" if args.quick else "near_ptr", lines)


if __name__ == "__main__":
    main()
