"""Print the markdown table of bench/fairness/results/*.json (rows in file order)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "results"


def main() -> None:
    files = sys.argv[1:] or sorted(str(p) for p in HERE.glob("lp_scaling*.json"))
    print("| n | D | constraints | variables | rows | nonzeros | pairs kept / total | rounds | HiGHS CPU s | "
          "HiGHS wall s | total wall s | objective (unconstrained) | parity by sex (unconstrained) | max violation |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in files:
        for r in json.loads(Path(f).read_text())["rows"]:
            lp = r.get("lp") or {}
            if r["ok"]:
                obj = f"{r['objective']:.4f} ({r['unconstrained_objective']:.4f})"
                par = f"{r['parity_sex']:.3f} ({r['unconstrained_parity_sex']:.3f})"
                viol = f"{r['max_violation'] if r['divergence'] == 'tv' else r['linear_violation']:.1e}"
            else:
                obj, par, viol = "stopped: " + r["error"].split(":")[0] + " (" + r["error"].split(": ", 1)[1][:60] \
                    + ")", "", ""
            print(f"| {r['n']} | {r['divergence']} | {r['constraints']} | {lp.get('variables', '')} | "
                  f"{lp.get('constraints', '')} | {lp.get('nonzeros', '')} | "
                  f"{lp.get('pairs_kept', '')} / {lp.get('pairs_total', '')} | {lp.get('rounds', '')} | "
                  f"{lp.get('solve_seconds', 0):.2f} | {lp.get('solve_wall_seconds', 0):.1f} | "
                  f"{r['total_wall_s']:.1f} | {obj} | {par} | {viol} |")


if __name__ == "__main__":
    main()
