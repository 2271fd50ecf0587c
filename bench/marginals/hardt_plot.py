"""Figures and markdown tables of the Hardt ch. 5 reproduction (``bench/marginals/hardt_mwem.py``'s JSON).

Usage: ``.bench-mbi-venv/bin/python bench/marginals/hardt_plot.py RESULTS.json [MORE.json ...] [--markdown]
[--outdir docs/img]`` (matplotlib is in ``.bench-mbi-venv``, not in ``.venv``; ``--no-plot`` needs neither).
Rows of the same (dataset, method, epsilon) from several files (calls with different ``--first-run``) are
pooled. Writes ``<outdir>/hardt_mwem_<dataset>.png``: KL(true || synthetic) against epsilon, the mean over the
runs with a finite KL and a band of one standard deviation (the thesis's Fig 5.2 / 5.3 convention; hollow
markers where some runs were infinite), the uniform distribution and the non-private fit as horizontal lines; and
the total variation distance of the full tables (always finite) beside it. Where the JSON lacks the TV of the
reference lines, they are computed again (``hardt_mwem.load`` / ``ipf``; dpkit must be importable).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

ORDER = ("mildew", "czech", "rochdale", "nltcs")
STYLE = {  # the thesis's colours: red dashed Barak et al., green dot-dashed plain MWEM, blue solid optimized
    "fourier+mw": ("tab:red", "--", "measure all Fourier + MW"),
    "plain": ("tab:green", "-.", "MWEM (Alg 5.1)"),
    "optimized": ("tab:blue", "-", "MWEM optimized (replays)"),
    "optimized+init": ("tab:cyan", "-", "MWEM optimized + noisy init"),
    "smg": ("tab:purple", ":", "dpkit smg ((eps, 1e-9)-DP)"),
}


def _tv_references(rows: dict[tuple[str, str, float], dict]) -> None:
    """The TV of the uniform table and of the non-private fit, for results written before the harness recorded
    them (computed again with the harness's own functions)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hardt_mwem as h

    from dpkit.marginals import all_kway, marginal, total_variation

    done: dict[str, dict[str, float]] = {}
    for (d, _, _), r in rows.items():
        if "tv_nonprivate_fit" in r:
            continue
        if d not in done:
            rec = h.load(d)
            true = marginal(rec)
            fit = h.ipf(true, rec.domain, all_kway(rec.domain, r["k"]), 30)
            done[d] = {"tv_uniform": total_variation(true, np.ones(rec.domain.shape)),
                       "tv_nonprivate_fit": total_variation(true, fit)}
        r.update(done[d])


def pooled(paths: list[str]) -> dict[tuple[str, str, float], dict]:
    out: dict[tuple[str, str, float], dict] = {}
    for p in paths:
        data = json.loads(Path(p).read_text(encoding="utf-8"))
        for r in data["rows"]:
            key = (r["dataset"], r["method"], float(r["epsilon"]))
            if key in out:
                out[key]["kl"] = out[key]["kl"] + r["kl"]
                out[key]["tv"] = out[key]["tv"] + r["tv"]
                out[key]["seconds"] = out[key]["seconds"] + r["seconds"]
            else:
                out[key] = dict(r)
    for r in out.values():
        kl = np.asarray(r["kl"], dtype=float)
        fin = kl[np.isfinite(kl)]
        r["runs"] = int(kl.size)
        r["inf"] = int(kl.size - fin.size)
        r["kl_mean"] = float(fin.mean()) if fin.size else math.inf
        r["kl_sd"] = float(fin.std()) if fin.size else math.nan
        r["kl_median"] = float(np.median(kl))
        r["tv_mean"] = float(np.mean(r["tv"]))
        r["tv_sd"] = float(np.std(r["tv"]))
        r["s_mean"] = float(np.mean(r["seconds"]))
    _tv_references(out)
    return out


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "inf"
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def markdown(rows: dict[tuple[str, str, float], dict]) -> str:
    lines = []
    datasets = sorted({k[0] for k in rows}, key=lambda d: ORDER.index(d) if d in ORDER else 9)
    for d in datasets:
        methods = [m for m in STYLE if any(k[0] == d and k[1] == m for k in rows)]
        eps = sorted({k[2] for k in rows if k[0] == d})
        any_row = next(r for k, r in rows.items() if k[0] == d)
        runs = ", ".join(f"{m} {rows[(d, m, eps[0])]['runs']}" for m in methods if (d, m, eps[0]) in rows)
        lines.append(f"**{d}** (n = {any_row['n']}, d = {any_row['d']}, all {any_row['k']}-way marginals, "
                     f"T = {any_row['rounds']}; runs: {runs}; KL(uniform) = {_fmt(any_row['kl_uniform'])}, "
                     f"non-private fit = {_fmt(any_row['kl_nonprivate_fit'])}; TV(uniform) = "
                     f"{any_row['tv_uniform']:.3f}, non-private fit {any_row['tv_nonprivate_fit']:.3f}). KL mean ± "
                     "sd over the finite runs [runs with KL = inf]; TV of the full table, mean:")
        lines.append("")
        lines.append("| ε | " + " | ".join(m for m in methods) + " |")
        lines.append("|---:|" + "---|" * len(methods))
        for e in eps:
            cells = []
            for m in methods:
                r = rows.get((d, m, e))
                if r is None:
                    cells.append("—")
                    continue
                inf = f" [{r['inf']}/{r['runs']} inf]" if r["inf"] else ""
                kl = "all inf" if not math.isfinite(r["kl_mean"]) else f"{_fmt(r['kl_mean'])} ± {_fmt(r['kl_sd'])}"
                cells.append(f"{kl}{inf}; TV {r['tv_mean']:.3f}")
            lines.append(f"| {e:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(rows: dict[tuple[str, str, float], dict], outdir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    datasets = sorted({k[0] for k in rows}, key=lambda d: ORDER.index(d) if d in ORDER else 9)
    for d in datasets:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        any_row = next(r for k, r in rows.items() if k[0] == d)
        for m, (color, ls, label) in STYLE.items():
            pts = sorted((k[2], r) for k, r in rows.items() if k[0] == d and k[1] == m)
            if not pts:
                continue
            runs = max(r["runs"] for _, r in pts)
            xs = np.array([e for e, r in pts if math.isfinite(r["kl_mean"])])
            ys = np.array([r["kl_mean"] for _, r in pts if math.isfinite(r["kl_mean"])])
            sd = np.array([r["kl_sd"] for _, r in pts if math.isfinite(r["kl_mean"])])
            some_inf = [r["inf"] > 0 for _, r in pts if math.isfinite(r["kl_mean"])]
            if xs.size:
                ax.plot(xs, ys, ls, color=color, label=f"{label} ({runs} runs)")
                ax.fill_between(xs, np.maximum(ys - sd, ys / 10), ys + sd, color=color, alpha=0.15)
                for x, y, hollow in zip(xs, ys, some_inf, strict=True):
                    ax.plot([x], [y], "o", ms=5, color=color, mfc="white" if hollow else color)
            tx = np.array([e for e, _ in pts])
            ty = np.array([r["tv_mean"] for _, r in pts])
            tsd = np.array([r["tv_sd"] for _, r in pts])
            ax2.plot(tx, ty, ls, marker="o", ms=4, color=color, label=label)
            ax2.fill_between(tx, ty - tsd, ty + tsd, color=color, alpha=0.15)
        for a, key, lab in ((ax, "kl_nonprivate_fit", "non-private fit (IPF)"), (ax, "kl_uniform", "uniform"),
                            (ax2, "tv_nonprivate_fit", "non-private fit (IPF)"), (ax2, "tv_uniform", "uniform")):
            a.axhline(any_row[key], color="black" if "fit" in lab else "grey", lw=1.2, label=lab)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("KL(true || synthetic), nats")
        ax.set_title(f"{d}: KL, mean ± sd of the finite runs (hollow: some runs inf; band >= mean/10)",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        ax2.set_xlabel("epsilon")
        ax2.set_ylabel("total variation of the full table")
        ax2.set_title(f"{d}: TV(true, synthetic), mean ± sd", fontsize=9)
        ax2.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = outdir / f"hardt_mwem_{d}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("--outdir", default=str(Path(__file__).resolve().parents[2] / "docs" / "img"))
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    rows = pooled(args.json)
    if args.markdown:
        print(markdown(rows))
    if not args.no_plot:
        for p in plot(rows, Path(args.outdir)):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
