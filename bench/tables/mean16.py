"""Issue #16: the ``mean`` kind of ``dpkit.tables`` (default ``method="centred"``; ``method="auto"``, per group
the centred sum or the pooled noisy ratio at the midpoint, chosen from the released stage-1 values; and the kind's
estimator before issue #16, ``method="noisy_ratio"``) against ``dpkit.stats.mean`` (default ``"centred"``, and
``"normalized"``, its default before issue #16), interleaved in one process, on the bundled Adult data.

Every release is a real one: ``Session.release`` of an ungrouped ``Query.mean`` (DuckDB, row unit, add/remove
one row, ``PureDP(ε)``), and ``dpkit.stats.mean(..., epsilon=ε)``; bounds from ``dpkit.datasets.adult_domain``
(age and hours per week ``[0, 100]``, capital gain ``[0, 99999]``), integer columns with their integer dtype
(granularity 1). Error: ``|release - mean of the clamped values|``; the median over the releases of a cell.
Seeds are fixed (``deterministic_source``, insecure, for reproducibility only).

Grouped part (``--grouped-releases``, 0 to skip): the two tables estimators by ``native_country`` (42 public
keys, groups of 1 to 29,170 rows: the small-``n ε`` regime where a private centre can miss) for age and capital
gain, and the share of incomes above 50K (a 0/1 column, bounds ``[0, 1]``) by ``race`` (5 keys, 271 to 27,816
rows); errors pooled by group size (``n < 100``, ``100 <= n < 1000``, ``n >= 1000``; groups of fewer than 10
rows left out).

Many-draw part (``--draws``, 0 to skip): the kind's own DP step (``Mean.measure``) on Adult's exact aggregates,
given ``--draws`` times as identical public groups of one call: each group draws independent noise of exactly
the law of an ungrouped release (the row unit's sensitivities), so the medians have about ±2.5 % of Monte-Carlo
noise instead of ±10 % at 200 releases (no engine involved: the exact aggregates are computed once).

    nice -n 5 .venv/bin/python bench/tables/mean16.py [--releases 200] [--grouped-releases 100] [--draws 4000]
        [--out bench/tables/results/mean16.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

import dpkit
from dpkit.datasets import adult, adult_domain
from dpkit.tables import Session

COLUMNS = ("age", "hours_per_week", "capital_gain")
EPSILONS = (0.1, 1.0)
TABLES = ("centred", "noisy_ratio", "auto")
ARMS = ("tables centred", "tables noisy_ratio", "tables auto", "stats centred", "stats normalized")


class _Groups:
    """The part of ``dpkit.tables._measuring.Measure`` a kind's ``measure`` uses: exact metrics given, rows kept."""

    def __init__(self, metrics: dict[str, list[int]], noise: str, bounds: Any, seed: int) -> None:
        self._metrics, self.noise, self.rows = metrics, noise, []  # type: list[float]
        self.ng = len(next(iter(metrics.values())))
        self.plan = type("P", (), {"bounds": bounds})()
        self.rng = dpkit.deterministic_source(seed)

    def metric(self, name: str) -> np.ndarray:
        return np.array(self._metrics[name], dtype=object)

    def sample(self, plan: Any) -> Any:
        return plan.sample(self.rng)

    def emit(self, st: Any, j: int, bin_: str, value: float, *rest: Any, **kw: Any) -> None:
        self.rows.append(value)


def many_draws(frame: Any, dom: Any, draws: int) -> list[dict[str, Any]]:
    from dpkit.tables.kinds import get_kind

    out = []
    print("| column | ε | tables centred | tables noisy_ratio | tables auto | centred / noisy_ratio | auto / better |",
          flush=True)
    for k, col in enumerate(COLUMNS):
        lo, hi = (float(v) for v in dom[col]["bounds"])
        x = np.clip(frame[col].to_numpy(), lo, hi)  # integer columns, granularity 1: the units are the values
        truth = float(x.mean())
        for e, eps in enumerate(EPSILONS):
            med = {}
            for i, m in enumerate(TABLES):
                s = Session(frame, budget=dpkit.PureDP(1.0))
                plan = s._calibrate(s.query().mean(col, (lo, hi), method=m), dpkit.PureDP(eps))
                g = _Groups({"_s0": [int(x.sum())] * draws, "_c0": [int(x.size)] * draws}, "laplace", plan.bounds,
                            9000 + 100 * k + 10 * e + i)
                get_kind("mean").measure(0, plan.stats[0], g)
                med[m] = float(np.median(np.abs(np.array(g.rows) - truth)))
            out.append({"column": col, "epsilon": eps, "draws": draws, **med})
            print(f"| {col} | {eps:g} | {med['centred']:.4g} | {med['noisy_ratio']:.4g} | {med['auto']:.4g} | "
                  f"{med['centred'] / med['noisy_ratio']:.2f} | "
                  f"{med['auto'] / min(med['centred'], med['noisy_ratio']):.2f} |", flush=True)
    return out


def grouped_cells(frame: Any, dom: Any, releases: int) -> list[dict[str, Any]]:
    frame = frame.assign(high_income=frame["income"].str.contains(">50K").astype("int64"))
    out = []
    print("| column | by | ε | size | groups | centred | noisy_ratio | auto | centred / noisy_ratio | auto / better | "
          "mean abs: centred / noisy_ratio / auto |", flush=True)
    for k, (col, by, bounds) in enumerate((("age", "native_country", dom["age"]["bounds"]),
                                           ("capital_gain", "native_country", dom["capital_gain"]["bounds"]),
                                           ("high_income", "race", (0, 1)))):
        keys = sorted(frame[by].dropna().unique().tolist())
        sizes = frame.groupby(by).size()
        lo, hi = (float(v) for v in bounds)
        truth = frame.assign(_x=frame[col].clip(lo, hi)).groupby(by)["_x"].mean()
        for e, eps in enumerate(EPSILONS):
            err: dict[str, list[np.ndarray]] = {m: [] for m in TABLES}
            seeds = [7000 + 10 * k + 2 * e, 7001 + 10 * k + 2 * e, 8000 + 10 * k + e]  # the first two as before
            sessions = {m: Session(frame, budget=dpkit.PureDP(1e9), rng=dpkit.deterministic_source(seeds[i]))
                        for i, m in enumerate(err)}
            for _ in range(releases):
                for m, s in sessions.items():
                    q = s.query().group_by(by, keys=keys).mean(col, (lo, hi), method=m)
                    r = s.release(q, budget=dpkit.PureDP(eps)).set_index(by)["value"]
                    err[m].append(np.abs(r.reindex(keys).to_numpy() - truth.reindex(keys).to_numpy()))
            n = sizes.reindex(keys).to_numpy()
            for name, sel in (("n < 100", (n >= 10) & (n < 100)), ("100 <= n < 1000", (n >= 100) & (n < 1000)),
                              ("n >= 1000", n >= 1000)):
                if not sel.any():
                    continue
                med = {m: float(np.median(np.concatenate([a[sel] for a in err[m]]))) for m in err}
                mae = {m: float(np.mean(np.concatenate([a[sel] for a in err[m]]))) for m in err}
                row = {"column": col, "by": by, "epsilon": eps, "size": name, "groups": int(sel.sum()),
                       "releases": releases, **med, "mean_abs": mae}
                out.append(row)
                print(f"| {col} | {by} | {eps:g} | {name} | {row['groups']} | {med['centred']:.4g} | "
                      f"{med['noisy_ratio']:.4g} | {med['auto']:.4g} | {med['centred'] / med['noisy_ratio']:.2f} | "
                      f"{med['auto'] / min(med['centred'], med['noisy_ratio']):.2f} | "
                      + " / ".join(f"{mae[m]:.4g}" for m in TABLES) + " |", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--grouped-releases", type=int, default=100)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    frame = adult(as_frame=True)
    dom = adult_domain()
    load0 = os.getloadavg()
    cpu0, wall0 = time.process_time(), time.time()
    cells: list[dict[str, Any]] = []
    seed = 0
    for col in COLUMNS:
        lo, hi = (float(v) for v in dom[col]["bounds"])
        x = frame[col].to_numpy()
        truth = float(np.clip(x, lo, hi).mean())
        for eps in EPSILONS:
            seed += 1
            sessions = {m: Session(frame, budget=dpkit.PureDP(1e9), rng=dpkit.deterministic_source(100 * seed + k))
                        for k, m in enumerate(TABLES)}
            src = {m: dpkit.deterministic_source(100 * seed + 10 + k) for k, m in enumerate(("centred", "normalized"))}
            err: dict[str, list[float]] = {a: [] for a in ARMS}
            cpu: dict[str, float] = {a: 0.0 for a in ARMS}
            for _ in range(args.releases):  # the four arms interleaved, release by release
                for m, s in sessions.items():
                    t0 = time.process_time()
                    res = s.release(s.query().mean(col, (lo, hi), method=m), budget=dpkit.PureDP(eps))
                    v = float(res["value"].iloc[0])
                    cpu[f"tables {m}"] += time.process_time() - t0
                    err[f"tables {m}"].append(abs(v - truth))
                for m, rng in src.items():
                    t0 = time.process_time()
                    v = dpkit.stats.mean(x, (lo, hi), eps, method=m, rng=rng).value
                    cpu[f"stats {m}"] += time.process_time() - t0
                    err[f"stats {m}"].append(abs(v - truth))
            row = {"column": col, "epsilon": eps, "releases": args.releases, "truth": truth,
                   **{a: float(np.median(err[a])) for a in ARMS},
                   "cpu_per_release": {a: cpu[a] / args.releases for a in ARMS}}
            cells.append(row)
            print(f"| {col} | {eps:g} | " + " | ".join(f"{row[a]:.4g}" for a in ARMS)
                  + f" | {row['tables centred'] / row['tables noisy_ratio']:.2f}"
                  + f" | {row['tables auto'] / min(row['tables centred'], row['tables noisy_ratio']):.2f}"
                  + f" | {row['tables centred'] / row['stats centred']:.2f} |", flush=True)
    many = many_draws(frame, dom, args.draws) if args.draws else []
    grouped = grouped_cells(frame, dom, args.grouped_releases) if args.grouped_releases else []
    out = {"cells": cells, "many_draws": many, "grouped": grouped, "load_start": load0, "load_end": os.getloadavg(),
           "cpu_s": time.process_time() - cpu0, "wall_s": time.time() - wall0, "dpkit": dpkit.__version__}
    print(json.dumps({k: v for k, v in out.items() if k not in ("cells", "grouped", "many_draws")}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
