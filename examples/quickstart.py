"""dpkit quickstart: DP count, mean and histogram of the bundled UCI Adult data under one total budget.

Run with ``python examples/quickstart.py`` (``make demo`` runs the release CLI instead). Every release
is charged to a persistent ledger (SQLite) *before* its noise is drawn; the ledger is printed at the end,
and a final query that would overspend the budget is refused with nothing released.
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
    data = adult(as_frame=False)  # numpy arrays (adult() gives a pandas DataFrame)
    domain = adult_domain()
    ledger_path = Path(tempfile.mkdtemp(prefix="dpkit-demo-")) / "ledger.sqlite"
    ledger = dpkit.Ledger(ledger_path, dataset="uci-adult", budget=TOTAL)
    print(f"UCI Adult (bundled), total budget {TOTAL}, neighbours: {ledger.neighbours.describe()}")
    print(f"ledger: {ledger_path}\n")

    # 1. Count of records: exact discrete Laplace, sensitivity 1 under add/remove-one-record.
    count = dpkit.stats.count(data["age"], 0.2, accountant=ledger, description="number of records")
    lo, hi = count.interval(CONF)
    print(f"count of records       {count.value:10d}   95% interval [{lo}, {hi}]")

    # 2. Mean age (Li et al. Alg 4: noisy centred sum / noisy count). Bounds are public (codebook), not
    #    read from the data; values outside them are clamped. The interval uses only released values.
    bounds = domain["age"]["bounds"]
    mean = dpkit.stats.mean(data["age"], bounds, 0.2, accountant=ledger, description="mean age")
    m_lo, m_hi = mean.interval(CONF)
    print(f"mean age               {mean.value:10.2f}   95% interval [{m_lo:.2f}, {m_hi:.2f}]")

    # 3. Age quartiles by the exponential mechanism (several quantiles at once, recursive splitting).
    quart = dpkit.stats.quantiles(data["age"], [0.25, 0.5, 0.75], bounds, 0.2, accountant=ledger,
                                  description="age quartiles")
    print("age quartiles          " + "  ".join(f"{v:.1f}" for v in quart.value))

    # 4. Histogram of education over the public category list: one record changes one bin by 1,
    #    so the vector has L1 sensitivity 1 (parallel composition over disjoint bins).
    cats = domain["education"]["categories"]
    hist = dpkit.stats.histogram(data["education"], 0.4, categories=cats, accountant=ledger,
                                 description="histogram of education")
    h_lo, h_hi = hist.interval(CONF)
    print(f"\nhistogram of education (95% interval per bin, ±{(h_hi[0] - h_lo[0]) // 2})")
    for i in np.argsort(-hist.value):
        bar = "#" * int(max(0, hist.value[i]) / 400)
        print(f"  {cats[i]:<14}{hist.value[i]:9d}  {bar}")

    # 5. The budget is now spent: a further release is refused and nothing is released.
    print()
    try:
        dpkit.stats.median(data["age"], bounds, 0.1, accountant=ledger)
    except dpkit.BudgetExceeded as exc:
        print(f"refused, as it should be: {exc}")

    # The ledger persists: reopening it (another process, a restart) sees the same spent budget.
    reopened = dpkit.Ledger(ledger_path, dataset="uci-adult")
    print()
    print(reopened.report())


if __name__ == "__main__":
    main()
