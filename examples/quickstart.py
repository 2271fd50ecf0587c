"""dpkit quickstart: DP count, mean and histogram of the bundled UCI Adult data under one total budget.

Run with ``make demo`` (or ``python examples/quickstart.py``). Every release is charged to a persistent
ledger (SQLite) *before* its noise is drawn; the ledger is printed at the end, and a final query that
would overspend the budget is refused with nothing released.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import dpkit
from dpkit.datasets import adult, adult_domain

TOTAL = dpkit.PureDP(1.0)   # the whole budget for this dataset
CONF = 0.95


def main() -> None:
    data = adult()
    domain = adult_domain()
    ledger_path = Path(tempfile.mkdtemp(prefix="dpkit-demo-")) / "ledger.sqlite"
    ledger = dpkit.Ledger(ledger_path, dataset="uci-adult", budget=TOTAL)
    print(f"UCI Adult (bundled), total budget {TOTAL}, neighbours: {ledger.neighbours.describe()}")
    print(f"ledger: {ledger_path}\n")

    # 1. Count of records: sensitivity 1 under add/remove-one-record.
    count = dpkit.laplace(len(data["age"]), sensitivity=1, epsilon=0.2, accountant=ledger,
                          description="number of records")
    lo, hi = count.interval(CONF)
    print(f"count of records       {float(count):10.1f}   95% interval [{lo:.1f}, {hi:.1f}]")

    # 2. Mean age = noisy clamped sum / noisy count (Li et al. Alg 1). Bounds are public (codebook), not
    #    read from the data. Each part gets a 97.5% interval, so the ratio interval holds with >= 95%.
    a_lo, a_hi = domain["age"]["bounds"]
    ages = np.clip(data["age"], a_lo, a_hi)
    total = dpkit.laplace(float(ages.sum()), sensitivity=max(abs(a_lo), abs(a_hi)), epsilon=0.3,
                          accountant=ledger, description="sum of age, clamped to [0, 100]")
    s_lo, s_hi = total.interval(0.975)
    c_lo, c_hi = count.interval(0.975)
    mean = float(total) / float(count)
    print(f"mean age               {mean:10.2f}   95% interval [{s_lo / c_hi:.2f}, {s_hi / c_lo:.2f}]")

    # 3. Histogram of education over the public category list: one record changes one bin by 1,
    #    so the vector has L1 sensitivity 1 (parallel composition over disjoint bins).
    cats = domain["education"]["categories"]
    counts = np.array([np.sum(data["education"] == c) for c in cats], dtype=float)
    hist = dpkit.laplace(counts, sensitivity=1, epsilon=0.5, accountant=ledger,
                         description="histogram of education")
    h_lo, h_hi = hist.interval(CONF)
    print(f"\nhistogram of education (95% interval per bin, ±{(h_hi[0] - h_lo[0]) / 2:.1f})")
    order = np.argsort(-hist.value)
    for i in order:
        bar = "#" * int(max(0.0, hist.value[i]) / 400)
        print(f"  {cats[i]:<14}{hist.value[i]:9.1f}  {bar}")

    # 4. The budget is now spent: a further release is refused and nothing is released.
    print()
    try:
        dpkit.laplace(float(np.mean(ages)), sensitivity=1, epsilon=0.1, accountant=ledger)
    except dpkit.BudgetExceeded as exc:
        print(f"refused, as it should be: {exc}")

    # The ledger persists: reopening it (another process, a restart) sees the same spent budget.
    reopened = dpkit.Ledger(ledger_path, dataset="uci-adult")
    print()
    print(reopened.report())


if __name__ == "__main__":
    main()
