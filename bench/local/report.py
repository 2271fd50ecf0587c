"""Print the bench/local table: dpkit's MSE vs the theoretical variance and vs pure-ldp's MSE (ratios)."""

from __future__ import annotations

import json
from pathlib import Path

RES = Path(__file__).parent / "results"


def main() -> None:
    ours = json.loads((RES / "dpkit.json").read_text())
    peers = {}
    if (RES / "pure_ldp.json").exists():
        for r in json.loads((RES / "pure_ldp.json").read_text())["rows"]:
            peers[(r["data"], r["protocol"], r["epsilon"])] = r
    print("| data | protocol | ε | runs | dpkit MSE | theory | MSE/theory | pure-ldp MSE | dpkit/pure-ldp | "
          "dpkit CPU s (perturb+aggregate) | pure-ldp CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in ours["rows"]:
        eps = round(r["epsilon"], 6)
        p = peers.get((r["data"], r["protocol"], eps))
        theory = "—" if r["theory"] is None else f"{r['theory']:.4g}"
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.3f}"
        pm = "not run" if p is None else f"{p['mse']:.4g}"
        pr = "—" if p is None else f"{r['mse'] / p['mse']:.3f}"
        pc = "—" if p is None else f"{p['cpu_total_s']:.2f}"
        print(f"| {r['data']} | {r['protocol']} | {eps:g} | {r['runs']} | {r['mse']:.4g} | {theory} | {ratio} | {pm} | "
              f"{pr} | {r['cpu_perturb_s'] + r['cpu_aggregate_s']:.2f} | {pc} |")
    print(json.dumps(ours["book"], indent=1))


if __name__ == "__main__":
    main()
