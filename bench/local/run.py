"""Local DP benchmark (issue #15): frequency-estimation error vs the theoretical variance, per protocol and ε.

    nice -n 5 .venv/bin/python bench/local/run.py            # dpkit (writes results/dpkit.json)
    nice -n 5 .bench-local-venv/bin/python bench/local/peers.py   # pure-ldp (writes results/pure_ldp.json)
    .venv/bin/python bench/local/report.py                    # the table, with the ratios

Adult occupation: 15 categories incl. '?', n = 32,561. Retail: the first item of each of the 88,162
transactions, over the 16,470-item domain. Error = mean over categories of (ĉ − c)², averaged over runs; theory =
mean over categories of the exact variance (c p*(1−p*) + (n−c) q*(1−q*))/(p*−q*)².
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import _data

import dpkit
from dpkit.local import GRR, OLH, OUE, RAPPOR, SUE, TwoCoinRR, UnaryEncoding

EPS = (0.5, 1.0, 2.0, 4.0)
OUT = Path(__file__).parent / "results"


def rappor_for(eps: float, k: int) -> RAPPOR:
    """RAPPOR without instantaneous RR, h = 2, m = 32, 4 cohorts, f from ε = 2h ln((1−f/2)/(f/2))."""
    f = 2.0 / (1.0 + math.exp(eps / 4.0))
    return RAPPOR(k, f=f, hashes=2, bits=32, cohorts=4)


def run(name: str, proto, codes: np.ndarray, runs: int, seed: int) -> dict:
    true = np.bincount(codes, minlength=proto.k).astype(float)
    n = int(codes.size)
    mse, t_pert, t_agg, stated = [], [], [], []
    for r in range(runs):
        rng = dpkit.deterministic_source(seed + r)
        t0 = time.process_time()
        rep = proto.perturb(codes, rng=rng).value
        t1 = time.process_time()
        est = proto.aggregate(rep)
        t2 = time.process_time()
        mse.append(float(np.mean((est.counts - true) ** 2)))
        stated.append(float(np.nanmean(est.variance)))
        t_pert.append(t1 - t0)
        t_agg.append(t2 - t1)
    theory = None if isinstance(proto, RAPPOR) else float(np.mean(proto.variance(true, n)))
    row = {"protocol": name, "epsilon": proto.epsilon, "runs": runs, "n": n, "k": proto.k,
           "mse": float(np.mean(mse)), "mse_runs": mse, "theory": theory,
           "ratio": None if theory is None else float(np.mean(mse)) / theory,
           "stated_var": float(np.mean(stated)), "cpu_perturb_s": float(np.mean(t_pert)),
           "cpu_aggregate_s": float(np.mean(t_agg))}
    print(json.dumps({k: v for k, v in row.items() if k != "mse_runs"}), flush=True)
    return row


def book(cats: list[str], codes: np.ndarray) -> dict:
    """Near & Abuah ch. 14: two-coin RR (ε = ln 3) on 'is Sales', and unary encoding p = .75, q = .25."""
    sales = (codes == cats.index("Sales")).astype(np.int64)
    rr = TwoCoinRR()
    ests = []
    for r in range(20):
        rep = rr.perturb(sales, rng=dpkit.deterministic_source(100 + r)).value
        ests.append(float(rr.aggregate(rep).counts[1]))
    var_rr = float(rr.variance(np.bincount(sales, minlength=2), sales.size)[1])
    ue = UnaryEncoding(len(cats), p=0.75, q=0.25)
    ue_est = []
    for r in range(20):
        rep = ue.perturb(codes, rng=dpkit.deterministic_source(200 + r)).value
        ue_est.append(ue.aggregate(rep).counts)
    ue_est = np.array(ue_est)
    true = np.bincount(codes, minlength=len(cats)).astype(float)
    out = {"rr_true_sales": int(sales.sum()), "rr_estimates_first5": ests[:5], "rr_mean": float(np.mean(ests)),
           "rr_sd_empirical": float(np.std(ests, ddof=1)), "rr_sd_theory": math.sqrt(var_rr),
           "rr_epsilon": rr.epsilon, "ue_epsilon": ue.epsilon,
           "ue_sd_empirical_mean": float(np.mean(np.std(ue_est - true, axis=0, ddof=1))),
           "ue_sd_theory": float(np.sqrt(ue.variance(true, codes.size)).mean()),
           "ue_sd_book_formula": math.sqrt(codes.size * 0.25 * 0.75) / 0.5,
           "ue_negative_small_bins": {c: float(ue_est[0, i]) for i, c in enumerate(cats) if true[i] < 200}}
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    quick = "--quick" in sys.argv
    cats, occ = _data.adult_occupation()
    k_retail, retail = _data.retail_first_items()
    rows = []
    for eps in EPS:
        k = len(cats)
        for name, proto in [("grr", GRR(eps, k)), ("sue", SUE(eps, k)), ("oue", OUE(eps, k)), ("olh", OLH(eps, k)),
                            ("rappor", rappor_for(eps, k))]:
            rows.append({"data": "adult", **run(name, proto, occ, 2 if quick else 5, 1000)})
    for eps in EPS:
        rows.append({"data": "retail", **run("grr", GRR(eps, k_retail), retail, 2 if quick else 5, 2000)})
        rows.append({"data": "retail", **run("olh", OLH(eps, k_retail), retail, 1 if quick else 2, 3000)})
    res = {"machine": platform.platform(), "python": platform.python_version(), "rows": rows,
           "book": book(cats, occ)}
    OUT.mkdir(exist_ok=True)
    (OUT / "dpkit.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
