"""Hardt's thesis ch. 5 protocol (Fig 5.2 / 5.3) for dpkit's MWEM over marginals (issue #13).

Protocol
--------
- Data: the four contingency tables of the thesis's experiments (``../shared/data/contingency``): mildew (6
  binary attributes, n = 70), czech (6, n = 1841), rochdale (8, n = 665) and NLTCS (16, n = 21,574; 65,536
  cells). Each table is expanded to integer-coded records over binary attributes.
- Workload: all k-way marginals (k = 3 by default, which determine every <= 3-way Fourier coefficient of the
  thesis's workload; NLTCS also at k = 2 with ``--nltcs-k 2``). The thesis's workload is the parity (Fourier)
  queries themselves; dpkit's MWEM selects and measures whole marginals (each cell a counting query), so the
  selection's candidates are the C(d, k) marginals rather than the sum_{j<=k} C(d, j) parities.
- Methods (pure epsilon-DP unless stated; dpkit's default add/remove neighbours, or ``--public-n``: replace-one,
  n public as in the thesis's normalized histograms):

  ``fourier+mw`` = Fig 5.2's "modified Barak et al." baseline: :func:`dpkit.marginals.fourier` measures every
  parity coefficient of weight <= k with the same discrete Laplace noise (uniform accuracy; L1 sensitivity the
  number of coefficients), then multiplicative weights (Hardt–Rothblum) fits a dense table to all of them
  from the uniform start: ``--fit-passes`` passes over the parities in a fixed order, each the thesis's update
  for the even-parity counting query ``q_S[u] = 1{sum_{i in S} u_i even}`` (``A[u] <- A[u] exp(q_S[u] (m_S -
  q_S(A)) / (2 N))``, ``m_S = (N + c^_S) / 2``, ``N`` the noisy coefficient of the empty set, at least 1, or
  ``n`` with ``--public-n``), renormalised to ``N``. Post-processing of the Fourier release only.
  ``plain`` = Alg 5.1 (``sweeps=0, average=True``, uniform start, eps/(2T) per selection and per measurement);
  ``optimized`` = §5.3.2's "iterating the update" (``sweeps`` replays of all measurements after each round,
  last iterate); ``optimized+init`` = the same with the noisy-histogram start (``init="noisy"``,
  ``init_share`` of epsilon).
  ``smg`` = dpkit's own select-measure-generate release (:func:`dpkit.marginals.smg`, defaults, workload the
  same k-way marginals): rho-zCDP, run at (epsilon, ``--delta``)-DP via its ``epsilon``/``delta`` parameters
  (the Canonne–Kamath–Steinke conversion to the largest rho implying (epsilon, delta)-DP). This row is
  *approximate* DP (delta = 1e-9 by default) on the same epsilon axis as pure-DP rows: not a like-for-like
  privacy guarantee. KL of its graphical model's full table (``model.project`` of every attribute).

  Reference lines: the uniform distribution, and a non-private fit of the true workload marginals (iterative
  proportional fitting: the maximum-entropy distribution with those marginals, in the role of Fienberg et
  al.'s "good non-private" values, which the thesis does not print).
- Metric: ``KL(true || synthetic)`` in nats over the full table (the dense estimate in ``parts["table"]``),
  mean and standard deviation of the finite values (with the number of runs whose estimate underflowed to 0
  on a cell of the data, "inf×k": KL infinite) over ``--runs`` runs (``--nltcs-runs`` for NLTCS); the thesis
  uses 100 and 10. Also recorded, always finite: the total variation distance of the full tables.
- epsilon grid and T: not stated in the thesis for the small tables; defaults here are epsilon in
  {0.1, 0.5, 1, 2, 5} and T = 10 (``--rounds``); NLTCS uses ``--nltcs-rounds`` (default 30; the thesis
  plots T = 20, 30, 40).

Usage: ``.venv/bin/python bench/marginals/hardt_mwem.py [--runs 5] [--nltcs-runs 2] [--datasets mildew,czech]
[--epsilons 0.1,1] [--rounds 10] [--sweeps 20] [--methods fourier+mw,plain,optimized,optimized+init,smg]
[--json out.json]``. Every call gets ``rng=dpkit.deterministic_source(seed)`` with a seed derived from (dataset,
method, epsilon, run). The JSON (rewritten after every (dataset, epsilon)) holds every run's KL and seconds;
``bench/marginals/hardt_plot.py`` draws the figures and the markdown table from it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
import zlib
from pathlib import Path

import numpy as np

from dpkit import Replace, deterministic_source
from dpkit.marginals import Domain, Records, all_kway, fourier, kl_divergence, marginal, mwem, smg, total_variation

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "contingency"
SMALL = ("mildew", "czech", "rochdale")
METHODS = ("fourier+mw", "plain", "optimized", "optimized+init", "smg")


def _from_long(path: Path) -> Records:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    attrs = [c for c in rows[0] if c not in ("Freq", "rownames", "")]
    levels = {a: sorted({r[a] for r in rows}) for a in attrs}
    dom = Domain({a: len(levels[a]) for a in attrs})
    codes = []
    for r in rows:
        code = [levels[a].index(r[a]) for a in attrs]
        codes.extend([code] * int(r["Freq"]))
    return Records(np.asarray(codes, dtype=np.int64), dom)


def _from_patterns(path: Path) -> Records:
    codes = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        bits, count = line.split()
        codes.extend([[int(b) for b in bits]] * int(count))
    d = len(codes[0])
    return Records(np.asarray(codes, dtype=np.int64), Domain({f"x{i}": 2 for i in range(d)}))


def load(name: str) -> Records:
    if name == "nltcs":
        return _from_patterns(DATA / "nltcs_patterns.txt")
    return _from_long(DATA / f"{name}_long.csv")


def ipf(true: np.ndarray, dom: Domain, wl: list[tuple[str, ...]], sweeps: int) -> np.ndarray:
    """Non-private reference: iterative proportional fitting of the true workload marginals from the uniform
    table (the maximum-entropy distribution with those marginals; Fienberg et al.'s kind of fit)."""
    a = np.full(dom.shape, true.sum() / dom.size())
    for _ in range(sweeps):
        for attrs in wl:
            axes = dom.axes(attrs)
            other = tuple(i for i in range(a.ndim) if i not in axes)
            shape = [a.shape[i] if i in axes else 1 for i in range(a.ndim)]
            cur = a.sum(axis=other)
            tgt = true.sum(axis=other)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(cur > 0, tgt / cur, 0.0)
            a = a * ratio.reshape(shape)
    return a


def parity_mw_fit(dom: Domain, coefficients: dict[tuple[str, ...], int], total: float, passes: int) -> np.ndarray:
    """Multiplicative weights fit of a dense table (total ``total``, uniform start) to noisy parity coefficients
    ``c^_S`` (``S`` non-empty; the empty set's is the total): ``passes`` passes over them in a fixed order, each
    the MWEM update of the even-parity counting query ``q_S = (1 + chi_S) / 2`` measured as ``(N + c^_S) / 2``:
    ``A[u] <- A[u] exp(q_S[u] (c^_S - chi_S(A)) / (4 N))``, renormalised to ``N`` (a factor common to all
    cells cancels: the even cells are multiplied by ``exp(s - |s|)``, the odd ones by ``exp(-s - |s|)``,
    ``s = (c^_S - chi_S(A)) / (8 N)``; exact log weights are kept beside the table, which is re-synchronised
    from them after every pass and whenever its sum leaves [1e-150, 1e150] N)."""
    d = len(dom)
    bits = (np.arange(dom.size())[:, None] >> (d - 1 - np.arange(d))[None, :]) & 1  # cell -> attribute values
    chis, targets = [], []
    for s, c in coefficients.items():
        if s:
            chis.append((1 - 2 * (bits[:, list(dom.axes(s))].sum(axis=1) & 1)).astype(np.int8))
            targets.append(float(c))
    log_a = np.zeros(dom.size())  # exact log weights (up to a constant); ``a`` follows them multiplicatively
    a = np.full(dom.size(), total / dom.size())
    mass = total  # the current sum of ``a``, tracked without re-summing
    for _ in range(passes):
        for chi8, c in zip(chis, targets, strict=True):
            chi = chi8.astype(np.float64)
            raw = float(chi @ a)
            step = (c - raw * total / mass) / (8.0 * total)  # chi_S of the table scaled to N
            log_a += step * chi
            up, down = math.exp(min(0.0, 2.0 * step)), math.exp(min(0.0, -2.0 * step))  # exp(+-step - |step|)
            a *= np.where(chi8 > 0, up, down)
            mass = 0.5 * (mass + raw) * up + 0.5 * (mass - raw) * down
            if not 1e-150 < mass / total < 1e150:  # re-synchronise before the table under- or overflows
                a = np.exp(log_a - log_a.max())
                mass = float(a.sum())
        a = np.exp(log_a - log_a.max())  # re-synchronised from the logs once per pass (no drift, no underflow
        a *= total / a.sum()  # of the whole table; single cells below 1e-308 of the largest stay 0)
        mass = total
    return a.reshape(dom.shape)


def _seed(*parts: object) -> int:
    return zlib.crc32(repr(parts).encode()) & 0x7FFFFFFF


def release_table(method: str, rec: Records, wl: list[tuple[str, ...]], k: int, eps: float, *, rounds: int,
                  passes: int, args: argparse.Namespace, nb: Replace | None, rng: object) -> np.ndarray:
    """The dense estimate of the full contingency table released by ``method`` at ``eps``."""
    dom = rec.domain
    if method == "fourier+mw":
        rel = fourier(rec, k, eps, neighbours=nb, rng=rng)  # type: ignore[arg-type]
        coef = rel.parts["coefficients"]
        total = float(len(rec)) if nb is not None else float(max(coef[()], 1))
        return parity_mw_fit(dom, coef, total, passes)
    if method == "smg":
        rel = smg(rec, epsilon=eps, delta=args.delta, workload=wl, neighbours=nb, rng=rng)  # type: ignore[arg-type]
        return np.asarray(rel.value.project(dom.attrs), dtype=np.float64)
    kw: dict[str, object] = {
        "plain": {"sweeps": 0, "average": True},
        "optimized": {"sweeps": args.sweeps, "average": False},
        "optimized+init": {"sweeps": args.sweeps, "average": False, "init": "noisy", "init_share": args.init_share},
    }[method]
    rel = mwem(rec, wl, eps, rounds=rounds, representation="dense", neighbours=nb,
               rng=rng, **kw)  # type: ignore[arg-type]
    return np.asarray(rel.parts["table"], dtype=np.float64)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per (dataset, epsilon, method); thesis: 100")
    ap.add_argument("--nltcs-runs", type=int, default=2, help="runs for NLTCS; thesis: 10")
    ap.add_argument("--smg-runs", type=int, default=None, help="runs of smg (default --runs; it is slower)")
    ap.add_argument("--nltcs-smg-runs", type=int, default=None, help="runs of smg on NLTCS (default --nltcs-runs)")
    ap.add_argument("--first-run", type=int, default=0,
                    help="index of the first run (seeds): a later call adds runs to an earlier one's")
    ap.add_argument("--datasets", default="mildew,czech,rochdale,nltcs")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--epsilons", default="0.1,0.5,1,2,5")
    ap.add_argument("--nltcs-epsilons", default="", help="epsilon grid for NLTCS (default: --epsilons)")
    ap.add_argument("--k", type=int, default=3, help="workload: all k-way marginals")
    ap.add_argument("--nltcs-k", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--nltcs-rounds", type=int, default=30)
    ap.add_argument("--sweeps", type=int, default=20, help="replays per round of the optimized variants")
    ap.add_argument("--fit-passes", type=int, default=300, help="MW passes over the parities of fourier+mw")
    ap.add_argument("--nltcs-fit-passes", type=int, default=30, help="the same on NLTCS (696 parities)")
    ap.add_argument("--delta", type=float, default=1e-9, help="delta of the (approximate-DP) smg rows")
    ap.add_argument("--ipf-sweeps", type=int, default=30, help="sweeps of the non-private reference fit")
    ap.add_argument("--init-share", type=float, default=0.1)
    ap.add_argument("--public-n", action="store_true",
                    help="replace-one neighbours (n public, as the thesis's normalized histograms; L1 sensitivity 2)")
    ap.add_argument("--json", default="", help="write the summary rows (with every run's KL) to this file")
    args = ap.parse_args(argv)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    nltcs_eps = [float(e) for e in args.nltcs_epsilons.split(",")] if args.nltcs_epsilons else epsilons
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; known: {', '.join(METHODS)}")
    rows: list[dict[str, object]] = []
    nb = Replace() if args.public_n else None
    meta = {"command": " ".join(sys.argv), "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "public_n": args.public_n, "delta_smg": args.delta, "sweeps": args.sweeps,
            "init_share": args.init_share}

    def dump() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1), encoding="utf-8")

    for name in args.datasets.split(","):
        rec = load(name)
        dom = rec.domain
        nltcs = name == "nltcs"
        k = args.nltcs_k if nltcs else args.k
        rounds = args.nltcs_rounds if nltcs else args.rounds
        runs = args.nltcs_runs if nltcs else args.runs
        smg_runs = (args.nltcs_smg_runs if nltcs else args.smg_runs)
        smg_runs = runs if smg_runs is None else smg_runs
        passes = args.nltcs_fit_passes if nltcs else args.fit_passes
        wl = all_kway(dom, k)
        true = marginal(rec)
        uniform = kl_divergence(true, np.ones(dom.shape))
        t0 = time.perf_counter()
        fit = ipf(true, dom, wl, args.ipf_sweeps)
        nonpriv = kl_divergence(true, fit)
        tv_ref = {"tv_uniform": total_variation(true, np.ones(dom.shape)),
                  "tv_nonprivate_fit": total_variation(true, fit)}
        ncoef = sum(math.comb(len(dom), j) for j in range(1, k + 1))
        print(f"\n{name}: n={len(rec)}, d={len(dom)}, cells={dom.size()}, workload {len(wl)} {k}-way marginals "
              f"({ncoef} non-empty parities), T={rounds}, runs={runs} (smg {smg_runs}); KL(uniform)={uniform:.4f}, "
              f"non-private {k}-way fit={nonpriv:.4f} ({time.perf_counter() - t0:.1f} s)", flush=True)
        print(f"{'epsilon':>8} " + " ".join(f"{m:>24}" for m in methods), flush=True)
        for eps in (nltcs_eps if nltcs else epsilons):
            cells = []
            for m in methods:
                kls, tvs, secs = [], [], []
                first = args.first_run
                m_runs = smg_runs if m == "smg" else runs
                for r in range(first, first + m_runs):
                    t1 = time.perf_counter()
                    table = release_table(m, rec, wl, k, eps, rounds=rounds, passes=passes, args=args, nb=nb,
                                          rng=deterministic_source(_seed(name, m, eps, r)))
                    secs.append(time.perf_counter() - t1)
                    kls.append(kl_divergence(true, table))
                    tvs.append(total_variation(true, table))
                arr = np.asarray(kls)
                fin = arr[np.isfinite(arr)]
                infinite = int(arr.size - fin.size)  # the estimate underflowed to 0 on a cell the data have
                mean = float(np.mean(fin)) if fin.size else math.inf
                std = float(np.std(fin)) if fin.size else math.nan
                median = float(np.median(arr))
                tag = f" inf×{infinite}" if infinite else ""
                cells.append(f"{mean:.4f} ± {std:.4f}{tag} ({np.mean(secs):.2f}s)")
                rows.append({"dataset": name, "n": len(rec), "d": len(dom), "k": k, "rounds": rounds, "epsilon": eps,
                             "method": m, "runs": m_runs, "first_run": first, "fit_passes": passes,
                             "privacy": "approx" if m == "smg" else "pure",
                             "delta": args.delta if m == "smg" else 0.0, "kl_mean_finite": mean,
                             "kl_std_finite": std, "kl_median": median, "infinite_runs": infinite,
                             "kl_uniform": uniform, "kl_nonprivate_fit": nonpriv, **tv_ref,
                             "seconds_mean": float(np.mean(secs)),
                             "kl": [float(x) for x in arr], "tv": tvs, "tv_mean": float(np.mean(tvs)),
                             "tv_std": float(np.std(tvs)), "seconds": secs})
            print(f"{eps:>8g} " + " ".join(f"{c:>24}" for c in cells), flush=True)
            dump()
    meta["finished_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    dump()
    return 0


if __name__ == "__main__":
    sys.exit(main())
