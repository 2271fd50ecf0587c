"""Issue #16: the mean's estimators under add/remove on Adult with many draws (the vectorised sampler of
``dpkit.stats.means``; the same law as ``dpkit.stats.mean``), against dpkit's replace-one release (the mechanism
the replace-one peers run: Laplace of scale (hi - lo)/(n ε) on the mean).

    nice -n 5 .venv/bin/python bench/stats/mean_centred_check.py [--draws 4000]
"""

from __future__ import annotations

import argparse

import numpy as np

import dpkit
from dpkit.core.neighbours import AddRemove, Replace
from dpkit.datasets import adult, adult_domain
from dpkit.stats.means import _plan


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=4000)
    args = ap.parse_args()
    d = adult(as_frame=False)
    print("| column | ε | normalized (before #16) | centred (default) | replace-one | centred / normalized |"
          " centred / replace-one |\n|---|---:|---:|---:|---:|---:|---:|")
    for col in ("age", "hours_per_week", "capital_gain"):
        x = np.asarray(d[col], dtype=np.float64)
        lo, hi = (float(v) for v in adult_domain()[col]["bounds"])
        mu = float(x.mean())
        for eps in (0.01, 0.1, 1.0):
            med = []
            for method, nb in (("normalized", AddRemove()), ("centred", AddRemove()), ("normalized", Replace())):
                v = _plan(x, lo, hi, eps, method, 1024, nb).draw(dpkit.deterministic_source(3), args.draws)[0]
                med.append(float(np.median(np.abs(v - mu))))
            print(f"| {col} | {eps} | {med[0]:.4g} | {med[1]:.4g} | {med[2]:.4g} | {med[1] / med[0]:.2f} |"
                  f" {med[1] / med[2]:.2f} |")


if __name__ == "__main__":
    main()
