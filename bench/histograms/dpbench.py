"""DPBench protocol (Hay et al., SIGMOD 2016) for dpkit's histogram algorithms (issue #6), with OpenDP's b-ary
tree side by side and the matrix-mechanism SVD lower bound as the "best achievable" reference.

Protocol
--------
- Data: the DPBench base histograms in ``../shared/data/dpbench`` (9 one-dimensional, length 4096; 5 two-
  dimensional, 256x256). For a target **scale** (total count) DPBench draws ``scale`` records from the
  multinomial with the base histogram's shape; here numpy's ``default_rng`` does it, seeded by (dataset,
  scale, repetition). Every repetition draws a fresh data sample and runs every algorithm once on it.
- 1-D: scales 10^3 ... 10^7; workloads: 2,000 random ranges (uniform over all ranges, dpkit's
  ``random_ranges``, one fixed draw) and all 4,096 prefixes. Workload-aware algorithms (MWEM, DAWA) get the
  union of both (6,096 queries).
- 2-D: scales 10^4, 10^6, 10^8; workload: 2,000 random rectangles (each axis an independent uniform range).
- ε ∈ {0.01, 0.1, 1}; pure ε-DP, add/remove-one-record neighbours (dpkit's default) for every algorithm.
- Error: DPBench's scaled average per-query error ``||Wx - Wx̂||_1 / (|W| * scale)``
  (``dpkit.histograms.scaled_error``), averaged over repetitions; average ranks over (dataset, ε) cells
  (ties share the average rank; DPBench additionally merges statistically indistinguishable algorithms,
  which is not done here).
- Algorithms are looked up **by name** in ``dpkit.histograms`` (or any of its submodules); one that does not
  exist yet is skipped with a printed note. Every call gets ``rng=dpkit.deterministic_source(seed)`` with a
  seed derived from (dimension, dataset, scale, ε, repetition, algorithm).
- OpenDP 0.16: ``make_b_ary_tree`` (L1, i32) >> ``then_laplace`` (integer vector: discrete Laplace) with the
  scale found so that the measurement's ``map(1) <= ε``, then ``make_consistent_b_ary_tree`` (leaf layer).
  OpenDP cannot be seeded.
- Lower bound: for a workload W (k x n) and any strategy A answered with Laplace noise (the matrix mechanism
  under pure ε-DP), the total squared error is ``(2/ε²) ||A||_1² ||W A⁺||_F² >= (2/ε²) ||A||_2² ||W A⁺||_F²
  >= (2/ε²) (Σ σ_i(W))² / n`` (Li & Miklau, ICDT 2013, Thm. on the SVD bound; ``||A||_1`` and ``||A||_2`` are
  the largest column L1 / L2 norms). Per query: ``MSE >= 2 (Σσ_i)² / (ε² n k)``. It bounds **data-independent
  linear** mechanisms only (data-dependent ones may beat it).

Usage: ``.bench-hist-venv/bin/python bench/histograms/dpbench.py [--quick] [--reps R] [--datasets A,B]
[--dims 1,2] [--jobs J] [--report-only]``. Raw rows are appended to ``bench/histograms/data/raw.jsonl``
(git-ignored) as each (dimension, repetition, dataset) task finishes; a later run skips the tasks already done
(``--fresh`` starts over), so an interrupted run can be resumed or reported as far as it got (``--report-only``);
``--part main|slow`` runs one half. Reports go to ``bench/histograms/results`` and figures to
``docs/img/histograms`` (``--quick``: both to the data folder only).

Slow subset: NoiseFirst, StructureFirst and P-HP (``--slow``) take seconds to a minute per call at 4096 bins, so
they run only on ``--slow-datasets`` at ``--slow-epsilons`` and are compared with every other algorithm on exactly
those data samples. 2-D DAWA on the Hilbert flattening is off by default (``--dawa2d``: dpkit's ``dawa`` needs
gigabytes at 65,536 cells).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import functools
import importlib
import inspect
import json
import math
import os
import pkgutil
import platform
import subprocess
import sys
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
RESULTS = HERE / "results"
RAW_DIR = HERE / "data"  # git-ignored (bench/**/data/)
IMG = ROOT / "docs" / "img" / "histograms"
DPBENCH = ROOT.parent / "shared" / "data" / "dpbench"

DATASETS_1D = {  # DPBench name -> file
    "ADULT": "ADULTFRANK.n4096.npy", "HEPTH": "HEPTH.n4096.npy", "INCOME": "INCOME.n4096.npy",
    "MEDCOST": "MEDCOST.n4096.npy", "NETTRACE": "NETTRACE.n4096.npy", "PATENT": "PATENT.n4096.npy",
    "SEARCH": "SEARCHLOGS.n4096.npy", "BIDS-ALL": "bids.npy", "MD-SAL": "GrossCompenMDSalary1.npy",
}
DATASETS_2D = {
    "ADULT-2D": "Adult_2D_256_256.npy", "BJ-CABS-E": "BeijingTaxiE_256_256.npy", "GOWALLA": "checkin_256_256.npy",
    "MD-SAL-2D": "MDSalary2D_256_256.npy", "STROKE": "Stroke_2D_256_256.npy",
}
SCALES_1D = (10**3, 10**4, 10**5, 10**6, 10**7)
SCALES_2D = (10**4, 10**6, 10**8)
EPSILONS = (0.01, 0.1, 1.0)
N_RANGES = 2000
SEED = 20161  # DPBench, SIGMOD 2016

# label, function name, fixed keyword arguments, data-dependent?, note
ALGS_1D: list[tuple[str, str, dict[str, Any], bool]] = [
    ("Identity", "identity", {}, False),
    ("H2", "hierarchical", {"branching": 2}, False),
    ("Hb", "hierarchical", {"branching": 16}, False),
    ("H-opt", "hierarchical", {"branching": "optimal"}, False),
    ("Privelet", "privelet", {}, False),
    ("DAWA", "dawa", {}, True),
    ("NoiseFirst", "noise_first", {}, True),
    ("StructureFirst", "structure_first", {}, True),
    ("EFPA", "efpa", {}, True),
    ("P-HP", "p_hpartition", {}, True),
    ("MWEM", "mwem", {}, True),
]
ALGS_2D: list[tuple[str, str, dict[str, Any], bool]] = [
    ("Identity", "identity", {}, False),
    ("H2D", "hierarchical2d", {}, False),
    ("QuadTree", "quadtree", {}, False),
    ("Privelet", "privelet", {}, False),
    ("UGrid", "uniform_grid", {}, True),
    ("AGrid", "adaptive_grid", {}, True),
    ("KD-tree", "kd_tree", {}, True),
    ("KD-hybrid", "kd_hybrid", {}, True),
    ("DAWA-Hilbert", "dawa", {}, True),
]
OPENDP_BS = (2, 16)
SLOW_EPS_DEFAULT = "0.1,1"
WORKLOAD_PARAMS = ("workload", "ranges", "queries")


# ---------------------------------------------------------------------------------------------
# algorithm registry
# ---------------------------------------------------------------------------------------------
def lookup(name: str) -> Callable[..., Any] | None:
    """``dpkit.histograms.<name>``, else the first submodule of ``dpkit.histograms`` defining it."""
    import dpkit.histograms as pkg

    f = getattr(pkg, name, None)
    if callable(f):
        return f
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name.startswith("_") or mod.name in ("workloads",):
            continue
        try:
            m = importlib.import_module(f"dpkit.histograms.{mod.name}")
        except Exception:
            continue
        f = getattr(m, name, None)
        if callable(f) and getattr(f, "__module__", "").startswith("dpkit."):
            return f
    return None


def identity_fallback(counts: Any, epsilon: float, *, rng: Any = None) -> Any:
    """Bench-only stand-in while ``dpkit.histograms.identity`` is missing: discrete Laplace on every bin."""
    from dpkit.mechanisms import discrete_laplace

    return discrete_laplace(np.asarray(counts, dtype=np.int64), 1, epsilon, rng=rng)


def registry(dim: int, notes: list[str], dawa2d: bool = False) -> list[dict[str, Any]]:
    """The algorithms of dimension ``dim`` that exist, as dicts (label, fn, kwargs, dep, workload param)."""
    out = []
    for label, name, kw, dep in (ALGS_1D if dim == 1 else ALGS_2D):
        if label == "DAWA-Hilbert" and not dawa2d:
            notes.append("2-D DAWA-Hilbert: not run (dpkit.histograms.dawa's exact window deviations cost O(m^2) "
                         "time, 35 s per call at m = 65,536, and it refuses total x m >= 2^40, i.e. scale "
                         ">= 1.7e7 at 256x256); --dawa2d forces it")
            continue
        f = lookup(name)
        if f is None and name == "identity":
            f = identity_fallback
            notes.append(f"{dim}-D {label}: dpkit.histograms.identity missing; bench stand-in "
                         "(dpkit.mechanisms.discrete_laplace on every bin) used")
        if f is None:
            notes.append(f"{dim}-D {label}: dpkit.histograms.{name} not implemented yet, skipped")
            continue
        if label == "H-opt":
            from dpkit.histograms import optimal_branching

            if optimal_branching(4096) == 16:
                notes.append("1-D H-opt: optimal_branching(4096) = 16, identical to Hb (same seeds would give the "
                             "same release), not run separately")
                continue
        try:
            params = inspect.signature(f).parameters
        except (TypeError, ValueError):
            params = {}
        wparam = next((p for p in WORKLOAD_PARAMS if p in params), None)
        missing = [p for p, v in params.items() if v.default is inspect.Parameter.empty
                   and v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY) and p not in ("counts", "epsilon")
                   and p != wparam and p not in kw and list(params).index(p) >= 2]
        if missing:
            notes.append(f"{dim}-D {label}: {name} needs parameters {missing} the bench does not know, skipped")
            continue
        if name == "mwem" and wparam is None:
            notes.append(f"{dim}-D {label}: mwem takes no workload/ranges/queries parameter, skipped")
            continue
        out.append({"label": label, "name": name, "fn": f, "kw": dict(kw), "dep": dep, "wparam": wparam,
                    "rng": "rng" in params})
    return out


# ---------------------------------------------------------------------------------------------
# data, workloads, Hilbert order
# ---------------------------------------------------------------------------------------------
def base_hist(dim: int, name: str) -> np.ndarray:
    files = DATASETS_1D if dim == 1 else DATASETS_2D
    x = np.load(DPBENCH / f"{dim}D" / files[name])
    return np.asarray(x, dtype=np.float64)


def resample(base: np.ndarray, scale: int, seed: Sequence[int]) -> np.ndarray:
    """DPBench's data generator: ``scale`` records from the multinomial with the base histogram's shape."""
    p = base.ravel() / base.sum()
    g = np.random.default_rng(list(seed))
    return g.multinomial(scale, p).reshape(base.shape).astype(np.int64)


def seed_of(*parts: Any) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def hilbert_order(n: int) -> np.ndarray:
    """Row-major flat indices ``i*n + j`` of an ``n x n`` grid (``n`` a power of two) in Hilbert-curve order:
    consecutive entries are grid neighbours (the classic d -> (x, y) conversion, vectorised)."""
    if n < 1 or n & (n - 1):
        raise ValueError("n must be a power of two")
    t = np.arange(n * n, dtype=np.int64)
    x = np.zeros_like(t)
    y = np.zeros_like(t)
    s = 1
    while s < n:
        rx = 1 & (t // 2)
        ry = 1 & (t ^ rx)
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x = x + s * rx
        y = y + s * ry
        t = t // 4
        s *= 2
    return x * n + y


def _check_hilbert() -> None:
    for n in (2, 4, 16, 256):
        o = hilbert_order(n)
        assert np.array_equal(np.sort(o), np.arange(n * n)), "Hilbert order must be a permutation"
        i, j = np.divmod(o, n)
        assert np.all(np.abs(np.diff(i)) + np.abs(np.diff(j)) == 1), "Hilbert steps must join neighbours"


def rectangles(n: int, count: int, seed: int) -> np.ndarray:
    """``count`` rectangles ``[r0, r1) x [c0, c1)``: each axis an independent uniform random range."""
    from dpkit import deterministic_source
    from dpkit.histograms import random_ranges

    r = random_ranges(n, count, rng=deterministic_source(seed))
    c = random_ranges(n, count, rng=deterministic_source(seed + 1))
    return np.concatenate([r, c], axis=1)


def answer_rect(h: np.ndarray, rects: np.ndarray) -> np.ndarray:
    p = np.zeros((h.shape[0] + 1, h.shape[1] + 1))
    p[1:, 1:] = np.cumsum(np.cumsum(h, axis=0, dtype=np.float64), axis=1)
    r0, r1, c0, c1 = rects.T
    return p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]


# ---------------------------------------------------------------------------------------------
# lower bound (SVD bound, pure ε-DP Laplace matrix mechanism)
# ---------------------------------------------------------------------------------------------
def _overlap(a0: np.ndarray, a1: np.ndarray) -> np.ndarray:
    return np.maximum(0, np.minimum.outer(a1, a1) - np.maximum.outer(a0, a0)).astype(np.float64)


def trace_norm_1d(ranges: np.ndarray) -> float:
    """Σ σ_i(W) of a range workload, from the eigenvalues of the k x k Gram matrix (overlap lengths)."""
    g = _overlap(ranges[:, 0], ranges[:, 1])
    ev = np.linalg.eigvalsh(g)
    return float(np.sqrt(np.clip(ev, 0, None)).sum())


def trace_norm_2d(rects: np.ndarray) -> float:
    g = _overlap(rects[:, 0], rects[:, 1]) * _overlap(rects[:, 2], rects[:, 3])
    ev = np.linalg.eigvalsh(g)
    return float(np.sqrt(np.clip(ev, 0, None)).sum())


def mse_bound(trace_norm: float, n: int, k: int, epsilon: float) -> float:
    """Per-query mean squared error lower bound ``2 (Σσ)² / (ε² n k)`` (sensitivity 1)."""
    return 2.0 * trace_norm**2 / (epsilon**2 * n * k)


# ---------------------------------------------------------------------------------------------
# OpenDP
# ---------------------------------------------------------------------------------------------
_OPENDP: dict[tuple[int, int, float], tuple[Any, Any]] = {}


def opendp_available() -> bool:
    try:
        import opendp.prelude  # noqa: F401
    except ImportError:
        return False
    return True


def opendp_tree(x: np.ndarray, b: int, epsilon: float) -> np.ndarray:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    key = (x.size, b, epsilon)
    if key not in _OPENDP:
        # i32: OpenDP infers i32 for a list of Python ints (counts here are < 2^31)
        t = dp.t.make_b_ary_tree(dp.vector_domain(dp.atom_domain(T=dp.i32)), dp.l1_distance(T=dp.i32),
                                 leaf_count=int(x.size), branching_factor=b)
        layers = float(t.map(1))  # per-record L1 sensitivity of the whole tree = number of layers
        scale = layers / epsilon
        meas = t >> dp.m.then_laplace(scale=scale)
        while meas.map(1) > epsilon:  # pragma: no cover - float safety net
            scale = float(np.nextafter(scale, np.inf))
            meas = t >> dp.m.then_laplace(scale=scale)
        _OPENDP[key] = (meas, dp.t.make_consistent_b_ary_tree(branching_factor=b, TIA=dp.i32, TOA=dp.f64))
    meas, post = _OPENDP[key]
    noisy = meas([int(v) for v in x])
    leaves = np.asarray(post(noisy), dtype=np.float64)
    return leaves[: x.size]


def call_alg(fn: Callable[..., Any], x: np.ndarray, eps: float, kw: dict[str, Any],
             hilbert: np.ndarray | None) -> np.ndarray:
    """One release's estimate (on the Hilbert flattening of a 2-D ``x`` when ``hilbert`` is given)."""
    if hilbert is None:
        return np.asarray(fn(x, eps, **kw).value, dtype=np.float64)
    v = np.asarray(fn(x.ravel()[hilbert], eps, **kw).value, dtype=np.float64)
    out = np.empty(x.size)
    out[hilbert] = v
    return out.reshape(x.shape)


# ---------------------------------------------------------------------------------------------
# one task: (dimension, repetition, dataset) over every scale, ε and algorithm
# ---------------------------------------------------------------------------------------------
def run_task(dim: int, rep: int, dataset: str, scales: Sequence[int], epsilons: Sequence[float],
             with_opendp: bool, only: Sequence[str] | None = None, skip: Sequence[str] = (),
             dawa2d: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for every scale, ε and algorithm (``only``: just these labels; ``skip``: not these)."""
    from dpkit import deterministic_source
    from dpkit.histograms import answer, prefix_ranges, random_ranges

    notes: list[str] = []
    algs = [a for a in registry(dim, notes, dawa2d) if a["label"] not in skip and (only is None or a["label"] in only)]
    with_opendp = with_opendp and (only is None or any(o.startswith("OpenDP") for o in only))
    base = base_hist(dim, dataset)
    rows: list[dict[str, Any]] = []
    if dim == 1:
        m = base.size
        workloads = {"ranges": random_ranges(m, N_RANGES, rng=deterministic_source(SEED)), "prefix": prefix_ranges(m)}
        union = np.concatenate([workloads["ranges"], workloads["prefix"]])
        ans = answer
    else:
        n = base.shape[0]
        workloads = {"rects": rectangles(n, N_RANGES, SEED)}
        order = hilbert_order(n)
        flat_union = random_ranges(n * n, N_RANGES, rng=deterministic_source(SEED + 7))
        ans = answer_rect
    failures: dict[str, int] = defaultdict(int)
    for scale in scales:
        x = resample(base, scale, (SEED, dim, zlib.crc32(dataset.encode()), scale, rep))
        truth = {w: ans(x, q) for w, q in workloads.items()}
        for eps in epsilons:
            runs: list[tuple[str, Callable[[], np.ndarray]]] = []
            for a in algs:
                if failures[a["label"]] >= 3:
                    continue
                kw = dict(a["kw"])
                if a["rng"]:
                    kw["rng"] = deterministic_source(seed_of(dim, dataset, scale, eps, rep, a["label"]))
                hil = None
                if dim == 1 and a["wparam"]:
                    kw[a["wparam"]] = union
                elif a["label"] == "DAWA-Hilbert":
                    hil = order
                    if a["wparam"]:
                        kw[a["wparam"]] = flat_union
                runs.append((a["label"], functools.partial(call_alg, a["fn"], x, eps, kw, hil)))
            if dim == 1 and with_opendp:
                runs += [(f"OpenDP b={b}", functools.partial(opendp_tree, x, b, eps)) for b in OPENDP_BS]
            for label, go in runs:
                t0 = time.perf_counter()
                try:
                    est = go()
                except Exception as e:
                    failures[label] += 1
                    notes.append(f"{dim}-D {label} failed on {dataset} scale={scale} eps={eps}: "
                                 f"{type(e).__name__}: {str(e)[:160]}")
                    continue
                sec = time.perf_counter() - t0
                if est.shape != x.shape:
                    failures[label] += 1
                    notes.append(f"{dim}-D {label}: output shape {est.shape} != {x.shape}")
                    continue
                for w, q in workloads.items():
                    e = ans(est, q) - truth[w]
                    rows.append({"dim": dim, "workload": w, "dataset": dataset, "scale": scale, "eps": eps,
                                 "rep": rep, "alg": label, "err": float(np.mean(np.abs(e)) / scale),
                                 "mse": float(np.mean(e**2)), "sec": sec})
    return rows, notes


# ---------------------------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------------------------
def fmt(v: float | None, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    a = abs(v)
    if a != 0 and (a < 1e-3 or a >= 1e6):
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    return out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]


def gmean(v: Sequence[float]) -> float:
    v = [x for x in v if x > 0 and math.isfinite(x)]
    return float(np.exp(np.mean(np.log(v)))) if v else float("nan")


def sci(s: int) -> str:
    return f"10^{round(math.log10(s))}"


def machine() -> str:
    model = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:  # pragma: no cover
        pass
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{model}, nproc {os.cpu_count()}; load average at report time {load}"


def versions() -> str:
    out = [f"python {platform.python_version()}"]
    for n in ("numpy", "scipy", "opendp", "matplotlib"):
        try:
            out.append(f"{n} {metadata.version(n)}")
        except metadata.PackageNotFoundError:
            out.append(f"{n} not installed")
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False).stdout.strip()
        out.append(f"dpkit @ {rev} (+ working tree)")
    except OSError:  # pragma: no cover
        pass
    return ", ".join(out)


def aggregate(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """(dim, workload, dataset, scale, eps, alg) -> mean err, mse, sec and the number of repetitions."""
    acc: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        acc[(r["dim"], r["workload"], r["dataset"], r["scale"], r["eps"], r["alg"])].append(r)
    out = {}
    for k, rs in acc.items():
        e = np.array([r["err"] for r in rs])
        out[k] = {"err": float(e.mean()), "sd": float(e.std(ddof=1)) if e.size > 1 else float("nan"),
                  "mse": float(np.mean([r["mse"] for r in rs])), "sec": float(np.median([r["sec"] for r in rs])),
                  "n": int(e.size)}
    return out


def ranks(agg: dict[tuple, dict[str, Any]], dim: int, wl: str, algs: list[str]) -> dict[int, dict[str, float]]:
    """Average rank per scale (and ``0`` = overall) over every (dataset, ε) cell where all ``algs`` ran."""
    from scipy.stats import rankdata

    cells: dict[tuple, dict[str, float]] = defaultdict(dict)
    for (d, w, ds, s, e, a), v in agg.items():
        if d == dim and w == wl and a in algs:
            cells[(ds, s, e)][a] = v["err"]
    per: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (_ds, s, _e), errs in cells.items():
        if len(errs) != len(algs):
            continue
        r = rankdata([errs[a] for a in algs])
        for a, rv in zip(algs, r, strict=True):
            per[s][a].append(float(rv))
            per[0][a].append(float(rv))
    return {s: {a: float(np.mean(v)) for a, v in d.items()} for s, d in per.items()}


def report(rows: list[dict[str, Any]], notes: list[str], args: argparse.Namespace, wall: float) -> None:
    agg = aggregate(rows)
    ran = {(r["dim"], r["alg"]) for r in rows}
    # a task run before an algorithm landed says "not implemented yet": drop that note if a later task ran it
    notes = [n for n in notes if "not implemented yet" not in n
             or (int(n[0]), n.split(":", 1)[0].split(" ", 1)[1]) not in ran]
    RESULTS.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = [
        "# DPBench protocol: dpkit histogram algorithms (issue #6)", "",
        f"- Command: `{Path(sys.executable).parent.parent.name}/bin/python bench/histograms/dpbench.py "
        f"{' '.join(sys.argv[1:])}`",
        f"- Date: {now}" + ("" if args.report_only else f"; wall time of the run {wall / 60:.1f} min"),
        f"- Machine: {machine()}",
        f"- Versions: {versions()}",
        "- Error: DPBench scaled average per-query error, mean |Wx − Wx̂| / scale, averaged over repetitions "
        "(geometric mean over datasets where aggregated). Lower is better.",
        "",
    ]
    if notes:
        head += ["Notes (algorithms skipped or failing):", ""] + [f"- {n}" for n in sorted(set(notes))] + [""]
    lines = list(head)
    csv = ["dim,workload,dataset,scale,eps,alg,mean_scaled_err,sd_scaled_err,mean_mse,median_sec,reps"]
    for (d, w, ds, s, e, a), v in sorted(agg.items(), key=lambda kv: tuple(map(str, kv[0]))):
        csv.append(f"{d},{w},{ds},{s},{e},{a},{v['err']:.6g},{v['sd']:.3g},{v['mse']:.6g},{v['sec']:.4g},{v['n']}")
    stem = "dpbench_quick" if args.quick else "dpbench"  # a smoke test never overwrites the real results
    out_dir = RAW_DIR if args.quick else RESULTS  # and its files stay in the git-ignored data folder
    (out_dir / f"{stem}.csv").write_text("\n".join(csv) + "\n", encoding="utf-8")

    for dim, wls in ((1, ("prefix", "ranges")), (2, ("rects",))):
        present = sorted({a for (d, *_rest, a) in agg if d == dim},
                         key=lambda a: ([x[0] for x in ALGS_1D + ALGS_2D].index(a), a) if not a.startswith("OpenDP")
                         else (99, a))
        if not present:
            continue
        ncells = {a: sum(1 for k in agg if k[0] == dim and k[1] == wls[0] and k[5] == a) for a in present}
        full = max(ncells.values())
        partial = [a for a in present if ncells[a] < full]  # the slow subset (or failures)
        present = [a for a in present if a not in partial]
        dp_algs = [a for a in present if not a.startswith("OpenDP")]
        main_keys = [k for k in agg if k[0] == dim and k[5] in present]
        scales = sorted({k[3] for k in main_keys})
        epss = sorted({k[4] for k in main_keys})
        datasets = sorted({k[2] for k in main_keys})
        nrep = sorted({agg[k]["n"] for k in main_keys})
        lines += [f"## {dim}-D ({'4096 bins' if dim == 1 else '256x256'}; datasets: {', '.join(datasets)}; "
                  f"repetitions per cell: {', '.join(map(str, nrep))})", ""]
        for wl in wls:
            lines += [f"### {dim}-D, workload `{wl}`: scaled error (geometric mean over datasets)", ""]
            hdr = ["algorithm"] + [f"{sci(s)}, ε={e:g}" for s in scales for e in epss]
            body = []
            for a in present:
                body.append([a] + [fmt(gmean([agg[(dim, wl, ds, s, e, a)]["err"] for ds in datasets
                                              if (dim, wl, ds, s, e, a) in agg])) for s in scales for e in epss])
            lines += [*table(hdr, body), ""]
            rk = ranks(agg, dim, wl, dp_algs)
            lines += [f"### {dim}-D, workload `{wl}`: average rank (1 = best; over datasets × ε; dpkit only)", ""]
            hdr = ["algorithm", "data-dependent"] + [sci(s) for s in scales] + ["overall"]
            dep = {x[0]: x[3] for x in (ALGS_1D if dim == 1 else ALGS_2D)}
            order = sorted(dp_algs, key=lambda a: rk.get(0, {}).get(a, 99))
            body = [[a, "yes" if dep.get(a) else "no"] + [fmt(rk.get(s, {}).get(a)) for s in scales]
                    + [fmt(rk.get(0, {}).get(a))] for a in order]
            lines += [*table(hdr, body), ""]
        if partial:
            lines += subset_section(rows, dim, wls, partial, dp_algs)
        # per-dataset detail (first workload)
        wl = wls[0]
        lines += [f"### {dim}-D, workload `{wl}`: best algorithm per dataset, scale and ε", ""]
        hdr = ["dataset"] + [f"{sci(s)}, ε={e:g}" for s in scales for e in epss]
        body = []
        for ds in datasets:
            row = [ds]
            for s in scales:
                for e in epss:
                    c = {a: agg[(dim, wl, ds, s, e, a)]["err"] for a in dp_algs if (dim, wl, ds, s, e, a) in agg}
                    row.append(min(c, key=c.get) if c else "—")
            body.append(row)
        lines += [*table(hdr, body), ""]
        # runtime
        lines += [f"### {dim}-D runtime per call (median seconds over all calls; single thread of a shared machine)",
                  ""]
        sec = defaultdict(list)
        for r in rows:
            if r["dim"] == dim and r["workload"] == wls[0]:
                sec[r["alg"]].append(r["sec"])
        body = [[a, fmt(float(np.median(sec[a]))), fmt(float(np.max(sec[a]))), len(sec[a])] for a in present + partial]
        lines += [*table(["algorithm", "median s", "max s", "calls"], body), ""]
        if dim == 1:
            lines += opendp_section(agg, rows, datasets, scales, epss)
        lines += bound_section(agg, dim, wls, datasets, scales, epss, dp_algs, cross_check=not args.quick)
    text = "\n".join(lines).rstrip() + "\n"
    print(text)
    (out_dir / f"{stem}.md").write_text(text, encoding="utf-8")
    print(f"(written to {out_dir / stem}.md and .csv)")
    if not args.no_plots:
        plots(agg, args)


def subset_section(rows: list[dict[str, Any]], dim: int, wls: Sequence[str], partial: list[str],
                   dp_algs: list[str]) -> list[str]:
    """Algorithms run on a subset of the cells (too slow for the full grid): compared with every other
    algorithm on exactly those cells and data samples (the same repetitions)."""
    keep = {(r["dataset"], r["scale"], r["eps"], r["rep"]) for r in rows if r["dim"] == dim and r["alg"] in partial}
    agg = aggregate([r for r in rows if r["dim"] == dim and (r["dataset"], r["scale"], r["eps"], r["rep"]) in keep])
    cells = sorted({k[2:5] for k in agg if k[0] == dim and k[1] == wls[0] and k[5] in partial},
                   key=lambda c: (c[1], c[2], c[0]))
    dss = sorted({c[0] for c in cells})
    scs = sorted({c[1] for c in cells})
    eps = sorted({c[2] for c in cells})
    nrep = sorted({agg[k]["n"] for k in agg if k[0] == dim and k[5] in partial})
    algs = dp_algs + partial
    out = [f"### {dim}-D slow algorithms on a subset: {', '.join(partial)}", "",
           f"Run on datasets {', '.join(dss)}, scales {', '.join(sci(s) for s in scs)}, ε "
           f"{', '.join(f'{e:g}' for e in eps)}, repetitions {', '.join(map(str, nrep))}; every other algorithm's "
           "numbers below are from the same data samples (same repetitions) on the same cells.", ""]
    for wl in wls:
        hdr = ["algorithm"] + [f"{sci(s)}, ε={e:g}" for s in scs for e in eps] + ["avg rank"]
        sub = {k: v for k, v in agg.items() if k[0] == dim and k[1] == wl and k[2:5] in set(cells)}
        rk = ranks(sub, dim, wl, [a for a in algs if any(k[5] == a for k in sub)]).get(0, {})
        body = []
        for a in sorted(algs, key=lambda a: rk.get(a, 99)):
            body.append([a] + [fmt(gmean([sub[(dim, wl, ds, s, e, a)]["err"] for ds in dss
                                          if (dim, wl, ds, s, e, a) in sub])) for s in scs for e in eps]
                        + [fmt(rk.get(a))])
        out += [f"Workload `{wl}` (scaled error, geometric mean over these datasets; average rank over these "
                "cells):", "", *table(hdr, body), ""]
    return out


def opendp_section(agg: dict, rows: list, datasets: list, scales: list, epss: list) -> list[str]:
    pairs = [("H2", "OpenDP b=2"), ("Hb", "OpenDP b=16")]
    have = {k[5] for k in agg}
    pairs = [(a, b) for a, b in pairs if a in have and b in have]
    if not pairs:
        return []
    out = ["### dpkit vs OpenDP 0.16 b-ary tree with consistency (same ε, same data samples)", "",
           "Error ratio = dpkit scaled error / OpenDP scaled error (geometric mean over datasets; < 1: dpkit more "
           "accurate). dpkit H_b releases levels 1..h (no root), OpenDP all h+1 layers including the root, "
           "each layer with discrete Laplace noise; both apply constrained inference.", ""]
    hdr = ["pair", "workload"] + [f"{sci(s)}, ε={e:g}" for s in scales for e in epss] + ["all"]
    body = []
    for a, b in pairs:
        for wl in ("prefix", "ranges"):
            cells, allr = [], []
            for s in scales:
                for e in epss:
                    r = [agg[(1, wl, ds, s, e, a)]["err"] / agg[(1, wl, ds, s, e, b)]["err"] for ds in datasets
                         if (1, wl, ds, s, e, a) in agg and (1, wl, ds, s, e, b) in agg]
                    cells.append(fmt(gmean(r)))
                    allr += r
            body.append([f"{a} / {b}", wl, *cells, fmt(gmean(allr))])
    out += [*table(hdr, body), ""]
    sec = defaultdict(list)
    for r in rows:
        if r["dim"] == 1 and r["workload"] == "prefix":
            sec[r["alg"]].append(r["sec"])
    body = [[f"{a} / {b}", fmt(float(np.median(sec[a]))), fmt(float(np.median(sec[b]))),
             fmt(float(np.median(sec[a]) / np.median(sec[b])))] for a, b in pairs]
    out += ["Time per release at m = 4096 (median seconds; OpenDP's includes converting the numpy vector to a "
            "Python list):", ""]
    out += [*table(["pair", "dpkit s", "OpenDP s", "time ratio"], body), ""]
    return out


_TN: dict[tuple[int, str], tuple[float, int, int]] = {}


def trace_norms(dim: int, wls: Sequence[str]) -> dict[str, tuple[float, int, int]]:
    from dpkit import deterministic_source
    from dpkit.histograms import prefix_ranges, random_ranges

    cache = RAW_DIR / "trace_norms.json"
    if not _TN and cache.exists():
        for k, v in json.loads(cache.read_text()).items():
            _TN[(int(k.split("|")[0]), k.split("|")[1])] = tuple(v)
    out = {}
    for wl in wls:
        if (dim, wl) not in _TN:
            if wl == "prefix":
                q = prefix_ranges(4096)
                _TN[(dim, wl)] = (trace_norm_1d(q), 4096, len(q))
            elif wl == "ranges":
                q = random_ranges(4096, N_RANGES, rng=deterministic_source(SEED))
                _TN[(dim, wl)] = (trace_norm_1d(q), 4096, len(q))
            else:
                q = rectangles(256, N_RANGES, SEED)
                _TN[(dim, wl)] = (trace_norm_2d(q), 256 * 256, len(q))
        out[wl] = _TN[(dim, wl)]
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({f"{d}|{w}": list(v) for (d, w), v in _TN.items()}))
    return out


def bound_section(agg: dict, dim: int, wls: Sequence[str], datasets: list, scales: list, epss: list,
                  dp_algs: list[str], cross_check: bool = True) -> list[str]:
    tn = trace_norms(dim, wls)
    dep = {x[0]: x[3] for x in (ALGS_1D if dim == 1 else ALGS_2D)}
    indep = [a for a in dp_algs if not dep.get(a)]
    out = [f"### {dim}-D: dpkit's best vs the SVD lower bound (Laplace matrix mechanism, pure ε-DP)", "",
           "Bound per query: MSE ≥ 2 (Σσᵢ(W))² / (ε² n k). Figure: RMSE of the best algorithm in each "
           "(dataset, scale, ε) cell divided by the bound's RMSE, median over datasets (best data-independent "
           "algorithm / best of all). < 1 is possible only for data-dependent algorithms.", ""]
    for wl in wls:
        t, n, k = tn[wl]
        out.append(f"- `{wl}`: Σσᵢ = {t:.6g}, n = {n}, k = {k}; bound RMSE at ε = 1: "
                   f"{math.sqrt(mse_bound(t, n, k, 1.0)):.4g} (scales as 1/ε)")
    out.append("")
    hdr = ["workload"] + [f"{sci(s)}, ε={e:g}" for s in scales for e in epss]
    body = []
    for wl in wls:
        t, n, k = tn[wl]
        row = [wl]
        for s in scales:
            for e in epss:
                lb = math.sqrt(mse_bound(t, n, k, e))
                bi, ba = [], []
                for ds in datasets:
                    c = {a: agg[(dim, wl, ds, s, e, a)]["mse"] for a in dp_algs if (dim, wl, ds, s, e, a) in agg}
                    ci = [c[a] for a in indep if a in c]
                    if ci:
                        bi.append(math.sqrt(min(ci)) / lb)
                    if c:
                        ba.append(math.sqrt(min(c.values())) / lb)
                row.append(f"{fmt(float(np.median(bi)) if bi else None)} / {fmt(float(np.median(ba)) if ba else None)}")
        body.append(row)
    out += [*table(hdr, body), ""]
    if dim == 1 and cross_check:
        try:  # cross-check the bench's k x k Gram computation with dpkit's own (n x n Gram) bound
            from dpkit import deterministic_source
            from dpkit.histograms import prefix_ranges, random_ranges, svd_lower_bound

            qs = {"prefix": prefix_ranges(4096),
                  "ranges": random_ranges(4096, N_RANGES, rng=deterministic_source(SEED))}
            for wl in wls:
                t, n, k = tn[wl]
                theirs = svd_lower_bound(qs[wl], 1.0, m=4096)
                out.append(f"- cross-check `{wl}`: dpkit.histograms.svd_lower_bound(ε=1) = {theirs:.6g}, bench "
                           f"{mse_bound(t, n, k, 1.0):.6g} (per-query MSE)")
            out.append("")
        except Exception as e:
            out += [f"(dpkit.histograms.svd_lower_bound not usable: {type(e).__name__})", ""]
    return out


def plots(agg: dict, args: argparse.Namespace) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib missing: no figures)")
        return
    img = RAW_DIR if args.quick else IMG
    img.mkdir(parents=True, exist_ok=True)
    styles = ["o", "s", "^", "v", "D", "x", "+", "*", "p", "h", "<", ">", "o", "s"]
    for dim, wls in ((1, ("prefix", "ranges")), (2, ("rects",))):
        keys = [k for k in agg if k[0] == dim]
        if not keys:
            continue
        scales = sorted({k[3] for k in keys})
        epss = sorted({k[4] for k in keys})
        datasets = sorted({k[2] for k in keys})
        algs = [a for a in [x[0] for x in (ALGS_1D if dim == 1 else ALGS_2D)] + [f"OpenDP b={b}" for b in OPENDP_BS]
                if any(k[5] == a for k in keys)]
        tab = plt.get_cmap("tab10").colors
        palette = [c for i, c in enumerate(tab) if i != 7] + ["black", "goldenrod", "teal", "navy"]  # grey: OpenDP
        fig, axes = plt.subplots(len(wls), len(scales), figsize=(2.6 * len(scales) + 2.3, 2.5 * len(wls) + 0.6),
                                 squeeze=False, sharey="row")
        for i, wl in enumerate(wls):
            for j, s in enumerate(scales):
                ax = axes[i][j]
                for n, a in enumerate(algs):
                    y = [gmean([agg[(dim, wl, ds, s, e, a)]["err"] for ds in datasets
                                if (dim, wl, ds, s, e, a) in agg]) for e in epss]
                    sub = sorted({k[2] for k in keys if k[5] == a})
                    label = a if len(sub) == len(datasets) else f"{a} ({len(sub)} datasets)"
                    ax.plot(epss, y, styles[n % len(styles)], label=label, ms=3.5, lw=1,
                            ls=":" if len(sub) < len(datasets) else "-",
                            color="0.45" if a.startswith("OpenDP") else palette[n % len(palette)])
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_title(f"{dim}-D {wl}, scale {sci(s)}", fontsize=8)
                ax.tick_params(labelsize=7)
                if j == 0:
                    ax.set_ylabel("scaled error (geo-mean)", fontsize=7)
                if i == len(wls) - 1:
                    ax.set_xlabel("ε", fontsize=7)
        h, lab = axes[0][0].get_legend_handles_labels()
        fig.legend(h, lab, loc="center right", fontsize=7, frameon=False)
        fig.tight_layout(rect=(0, 0, 1 - 2.3 / (2.6 * len(scales) + 1.6), 1))
        suffix = "_quick" if args.quick else ""
        path = img / f"dpbench_{dim}d{suffix}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        print(f"(figure {path.relative_to(ROOT)}: {path.stat().st_size / 1024:.0f} KB)")


def _job(t: tuple, sc1: list[int], sc2: list[int], epsilons: list[float], slow_eps: list[float], with_opendp: bool,
         slow: list[str], dawa2d: bool) -> tuple[list, list]:
    d, r, name, kind = t
    if kind == "main":
        return run_task(d, r, name, sc1 if d == 1 else sc2, epsilons, with_opendp, skip=slow, dawa2d=dawa2d)
    return run_task(d, r, name, sc1, slow_eps, False, only=slow)


# ---------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: 1 dataset per dimension, 2 scales, 1 rep")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--datasets", default="", help="comma-separated DPBench names (default: all)")
    ap.add_argument("--dims", default="1,2")
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--scales1d", default="", help="comma-separated 1-D scales (default 1e3..1e7)")
    ap.add_argument("--scales2d", default="", help="comma-separated 2-D scales (default 1e4,1e6,1e8)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    ap.add_argument("--no-opendp", action="store_true")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--slow", default="NoiseFirst,StructureFirst,P-HP",
                    help="labels too slow for the full grid: run only on the slow subset (default NF, SF)")
    ap.add_argument("--slow-datasets", default="HEPTH,NETTRACE,SEARCH")
    ap.add_argument("--slow-epsilons", default=SLOW_EPS_DEFAULT)
    ap.add_argument("--slow-reps", type=int, default=1)
    ap.add_argument("--dawa2d", action="store_true", help="also run DAWA on the Hilbert flattening (65,536 bins)")
    ap.add_argument("--fresh", action="store_true", help="discard the raw rows of earlier runs (default: keep them "
                    "and run only the tasks not yet done)")
    ap.add_argument("--part", choices=("all", "main", "slow"), default="all",
                    help="run the main grid, the slow subset or both (the report always covers every raw row)")
    ap.add_argument("--report-only", action="store_true", help="only rebuild the report from the raw rows")
    args = ap.parse_args(argv)
    _check_hilbert()
    dims = [int(d) for d in args.dims.split(",") if d]
    epsilons = [float(e) for e in args.epsilons.split(",") if e]
    sc1 = [int(float(s)) for s in args.scales1d.split(",") if s] or list(SCALES_1D)
    sc2 = [int(float(s)) for s in args.scales2d.split(",") if s] or list(SCALES_2D)
    want = [d.strip() for d in args.datasets.split(",") if d.strip()]
    ds = {1: [d for d in DATASETS_1D if not want or d in want], 2: [d for d in DATASETS_2D if not want or d in want]}
    reps = args.reps
    if args.quick:
        ds = {1: ds[1][:1], 2: ds[2][:1]}
        sc1, sc2, reps = [10**3, 10**5], [10**4, 10**6], 1
    with_opendp = not args.no_opendp and opendp_available()
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    raw = RAW_DIR / ("raw_quick.jsonl" if args.quick else "raw.jsonl")
    notes: list[str] = []
    if not with_opendp and not args.no_opendp:
        notes.append("OpenDP not installed: its columns are missing")
    done: set[tuple] = set()
    rows: list[dict[str, Any]] = []
    if args.fresh and raw.exists() and not args.report_only:
        raw.unlink()
    if raw.exists() and not args.quick:
        for line in raw.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("task"):
                done.add(tuple(rec["task"]))
                notes += rec.get("notes", [])
            else:
                rows.append(rec)
    elif raw.exists():
        raw.unlink()  # --quick always starts afresh
    t0 = time.time()
    slow = [x for x in args.slow.split(",") if x]
    tasks = [(d, r, name, "main") for r in range(reps) for d in dims for name in ds[d]] if args.part != "slow" else []
    if slow and 1 in dims and not args.quick and args.part != "main":
        sds = [d for d in args.slow_datasets.split(",") if d in ds[1]] or ds[1][:1]
        kind = "slow" if args.slow_epsilons == SLOW_EPS_DEFAULT else f"slow@{args.slow_epsilons}"
        tasks += [(1, r, name, kind) for r in range(args.slow_reps) for name in sds]
    tasks = [t for t in tasks if t not in done]
    slow_eps = [float(e) for e in args.slow_epsilons.split(",") if e]

    def job(t: tuple) -> tuple[list, list]:
        return _job(t, sc1, sc2, epsilons, slow_eps, with_opendp, slow, args.dawa2d)

    if not args.report_only:
        for d in dims:
            registry(d, notes, args.dawa2d)  # print the registry once
        for n in sorted(set(notes)):
            print("note:", n)
        print(f"{len(tasks)} tasks (dimension, repetition, dataset); 1-D scales {sc1}, 2-D scales {sc2}, "
              f"ε {epsilons}, OpenDP {'on' if with_opendp else 'off'}", flush=True)

        def record(task: tuple, res: tuple[list, list]) -> None:
            r, nt = res
            rows.extend(r)
            notes.extend(nt)
            with raw.open("a", encoding="utf-8") as fh:
                for x in r:
                    fh.write(json.dumps(x) + "\n")
                fh.write(json.dumps({"task": list(task), "notes": nt}) + "\n")
            print(f"[{time.time() - t0:7.0f}s] done {task} ({len(r)} rows)", flush=True)

        if args.jobs <= 1:
            for t in tasks:
                record(t, job(t))
        else:
            with cf.ProcessPoolExecutor(args.jobs) as ex:
                futs = {ex.submit(_job, t, sc1, sc2, epsilons, slow_eps, with_opendp, slow, args.dawa2d): t
                        for t in tasks}
                for f in cf.as_completed(futs):
                    record(futs[f], f.result())
    report(rows, notes, args, time.time() - t0)


if __name__ == "__main__":
    main()
