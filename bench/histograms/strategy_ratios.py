"""Workload-optimised strategies (``dpkit.histograms.strategy_histogram``) against Hb and the SVD lower bound.

Two parts (issue #13, "workload-optimal strategies for range queries"):

- ``exact``: the expected per-query error of identity, Hb (b = 16, least squares, equal budget) and the
  optimised p-Identity strategy for all ranges and all prefixes of m bins, ``‖A‖_1² tr(WᵀW (AᵀA)⁻¹) / k``,
  as an RMSE ratio to the SVD bound ``(Σσᵢ)² / (m k)`` (both times 2/ε²); no sampling. ``--l2`` adds the
  Gaussian (zCDP) picture: the exact optimum of the L2 matrix mechanism (dual ``max_p ‖W diag(p)^½‖_tr²`` by
  the fixed point ``p_j ∝ (S^½)_jj``, ``S = D G D``; primal ``X = D⁻¹ S^½ D⁻¹``) over the L2 SVD bound.
- ``grid``: all rectangles (and all prefix products) of an n x n grid: the Kronecker product of the 1-D
  optima (``strategy_histogram``'s 2-D default) against one p-Identity strategy over the flattened grid
  (``optimize_strategy(workload, (n, n))``), RMSE ratios to the SVD bound (the product of the 1-D bounds).
- ``search``: the attempts to get closer to the bound at small m (all ranges): p-Identity with other p, random
  starts and signed ``Θ``; general non-negative or signed strategies of q rows with columns normalised to L1
  norm 1 (dense objective, L-BFGS-B); hierarchy-shaped starts; exact weighted hierarchies (every ordered
  factorisation of m into power-of-2 branching factors, per-level weights optimised, closed form through
  nested block projections). Prints MSE and RMSE ratios to the SVD bound.
- ``gauss`` (``gauss-exact`` + ``gauss-dpbench``): the zCDP path, ``strategy_histogram(rho=...)`` with the L2
  optimum (``optimize_strategy(..., norm="l2")``) measured on its integer lattice with discrete Gaussian noise:
  (a) the exact expected RMSE of the lattice strategy over the zCDP SVD bound ``(Σσ)² / (m k) / (2ρ)`` at each
  m, with the optimisation time; (b) DPBench as in ``dpbench`` with ``rho = eps²/2`` (the zCDP guarantee that
  pure eps-DP implies): realised RMSE over the zCDP bound, and over the Laplace strategy's and Hb's RMSE at the
  same eps on the same samples (same seeds).
- ``dpbench``: realised RMSE on DPBench's 1-D data with the protocol, workloads, seeds and bound of
  ``bench/histograms/dpbench.py`` (one strategy per workload: ``"all_ranges"`` for the 2,000 random ranges,
  ``"prefixes"`` for the prefixes), Hb on the same samples.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python bench/histograms/strategy_ratios.py
[--part exact|grid|search|dpbench|both|gauss|gauss-exact|gauss-dpbench] [--m 64,256,1024,4096] [--l2]
[--reps 2] [--search-m 64] [--grid 16,32,64]`` (one BLAS thread: numpy's threads oversubscribe a shared
machine; ``both`` is exact + dpbench).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def gram(kind: str, m: int) -> tuple[np.ndarray, int]:
    i = np.arange(m)
    if kind == "all":
        return ((np.minimum.outer(i, i) + 1) * (m - np.maximum.outer(i, i))).astype(float), m * (m + 1) // 2
    return (m - np.maximum.outer(i, i)).astype(float), m


def svd_sum(kind: str, g: np.ndarray) -> float:
    m = g.shape[0]
    if kind == "prefix":  # singular values of the lower-triangular all-ones matrix, closed form
        k = np.arange(1, m + 1)
        return float(np.sum(1.0 / (2 * np.sin((2 * k - 1) * np.pi / (2 * (2 * m + 1))))))
    return float(np.sqrt(np.clip(np.linalg.eigvalsh(g), 0, None)).sum())


def block_t(g: np.ndarray, s: int) -> float:
    """``tr(G P_s)``: ``P_s`` the projection on vectors constant on consecutive blocks of ``s`` bins."""
    m = g.shape[0]
    c = np.zeros((m + 1, m + 1))
    c[1:, 1:] = g.cumsum(0).cumsum(1)
    e = np.arange(0, m + 1, s)
    a, b = e[:-1], e[1:]
    return float((c[b, b] - c[a, b] - c[b, a] + c[a, a]).sum() / s)


def hb_error(g: np.ndarray, k: int) -> float:
    """Per-query error of H_16 (levels 1..h, equal weights, least squares) in units of 2/ε²."""
    from dpkit.histograms import hierarchy_strategy, tree_height

    m = g.shape[0]
    h = tree_height(m, 16)
    if 16**h == m:  # no padding: A^T A = sum_l s_l P_l (nested projections), exact in O(m^2)
        sizes = [16 ** (h - j) for j in range(1, h + 1)]
        t = [block_t(g, s) for s in sizes]
        c = [t[0]] + [t[j] - t[j - 1] for j in range(1, h)]
        lam = [sum(sizes[j:]) for j in range(h)]
        return h * h * sum(ci / li for ci, li in zip(c, lam, strict=True)) / k
    a = hierarchy_strategy(m, 16).toarray()
    return h * h * float(np.sum(g * np.linalg.inv(a.T @ a))) / k


def l2_optimum(g: np.ndarray) -> tuple[float, float]:
    """(dual, primal) of the L2 matrix mechanism over the L2 SVD bound (MSE ratios)."""
    m = g.shape[0]

    def sq(p: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        d = np.sqrt(p)
        lam, v = np.linalg.eigh(d[:, None] * g * d[None, :])
        r = (v * np.sqrt(np.clip(lam, 0, None))) @ v.T
        return float(np.sqrt(np.clip(lam, 0, None)).sum()), np.diag(r).copy(), r

    p = np.full(m, 1.0 / m)
    f0, dg, r = sq(p)
    f = f0
    for _ in range(200):
        pn = np.maximum(dg, 0) / dg.sum()
        fn, dgn, rn = sq(pn)
        if fn < f * (1 + 1e-9):
            if fn >= f:
                p, f, dg, r = pn, fn, dgn, rn
            break
        p, f, dg, r = pn, fn, dgn, rn
    d = np.sqrt(p)
    x = r / d[:, None] / d[None, :]
    primal = float(np.trace(np.linalg.solve(x, g)) * np.max(np.diag(x)))
    return (f / f0) ** 2, primal / f0**2


def exact(ms: list[int], l2: bool) -> None:
    from dpkit.histograms import optimize_strategy

    head = "| m | workload | identity | Hb | p-Identity (p, iterations) | optimisation s |"
    print(head + (" L2 opt / L2 bound |" if l2 else ""))
    print("|---|---|---:|---:|---:|---:|" + ("---:|" if l2 else ""))
    for m in ms:
        for kind in ("all", "prefix"):
            g, k = gram(kind, m)
            ss = svd_sum(kind, g)
            b = ss * ss / (m * k)
            t0 = time.perf_counter()
            s = optimize_strategy("all_ranges" if kind == "all" else "prefixes", m)
            sec = time.perf_counter() - t0
            name = "all ranges" if kind == "all" else "prefixes"
            row = (f"| {m} | {name} | {math.sqrt(np.trace(g) / k / b):.3f} | {math.sqrt(hb_error(g, k) / b):.3f} | "
                   f"{math.sqrt(s.objective / k / b):.3f} ({s.p}, {s.iterations}) | {sec:.1f} |")
            if l2:
                dual, primal = l2_optimum(g)
                row += f" {math.sqrt(dual):.4f}–{math.sqrt(primal):.4f} |"
            print(row, flush=True)


def grid(ns: list[int]) -> None:
    """2-D all rectangles / all prefix products on n x n: Kronecker default vs one grid strategy (flattened)."""
    from dpkit.histograms import optimize_strategy

    print("| grid | workload | Kronecker of 1-D p-Identity | grid p-Identity (p, iterations) | optimisation s |")
    print("|---|---|---:|---:|---:|")
    for n in ns:
        for kind, name in (("all", "all_ranges"), ("prefix", "prefixes")):
            g, k = gram(kind, n)
            ss = svd_sum(kind, g)
            b = ss * ss / (n * k)
            one = optimize_strategy(name, n)
            t0 = time.perf_counter()
            s = optimize_strategy(name, (n, n))
            sec = time.perf_counter() - t0
            print(f"| {n} × {n} | {'all rectangles' if kind == 'all' else 'prefix products'} | "
                  f"{one.objective / k / b:.3f} | {math.sqrt(s.objective / s.workload_size) / b:.3f} "
                  f"({s.p}, {s.iterations}) | {sec:.1f} |", flush=True)


def _fit(fg, z0: np.ndarray, maxiter: int = 3000) -> np.ndarray:
    import scipy.optimize as so

    res = so.minimize(fg, z0, jac=True, method="L-BFGS-B", bounds=so.Bounds(0.0, np.inf),
                      options={"maxiter": maxiter, "maxcor": 20})
    return np.asarray(res.x)


def _pid(m: int, p: int, th0: np.ndarray, signed: bool) -> float:
    """p-Identity from ``th0``; signed: ``Θ = Θ⁺ - Θ⁻``, column L1 norm ``1 + Σ|Θ|``. Returns tr(G (AᵀA)⁻¹)."""
    from dpkit.histograms import strategy as st

    gr = st._Gram(m)
    tr = gr.trace()
    if not signed:
        z = _fit(lambda v: st._p_identity_objective(v, p, gr, tr), th0.ravel())
        th = z.reshape(p, m)
        return st._objective(th, 1 + th.sum(0), gr, grad=False)[0]

    def fg(v: np.ndarray) -> tuple[float, np.ndarray]:
        tp, tn = v[: p * m].reshape(p, m), v[p * m:].reshape(p, m)
        f, gt, gd = st._objective(tp - tn, 1 + (tp + tn).sum(0), gr)
        assert gt is not None and gd is not None
        return f / tr, np.concatenate([(gt + gd).ravel(), (-gt + gd).ravel()]) / tr

    z = _fit(fg, np.concatenate([th0.ravel(), np.zeros(p * m)]))
    th = z[: p * m].reshape(p, m) - z[p * m:].reshape(p, m)
    return st._objective(th, 1 + np.abs(th).sum(0), gr, grad=False)[0]


def _general(g: np.ndarray, b0: np.ndarray, signed: bool) -> float:
    """A general q x m strategy B (signed: B⁺ - B⁻), columns scaled to L1 norm 1, dense objective."""
    import scipy.linalg as sla

    q, m = b0.shape
    tr = float(np.trace(g))

    def fg(v: np.ndarray) -> tuple[float, np.ndarray]:
        if signed:
            bp, bn = v[: q * m].reshape(q, m), v[q * m:].reshape(q, m)
            b, col = bp - bn, (bp + bn).sum(0)
        else:
            b = v.reshape(q, m)
            col = b.sum(0)
        d = 1.0 / np.maximum(col, 1e-300)
        a = b * d
        c = sla.cho_factor(a.T @ a)
        xg = sla.cho_solve(c, g)
        h = sla.cho_solve(c, xg.T)
        ga = -2 * a @ h
        t = (ga * b).sum(0) * d * d
        gb = ga * d
        grad = np.concatenate([(gb - t).ravel(), (-gb - t).ravel()]) if signed else (gb - t).ravel()
        return float(np.trace(xg)) / tr, grad / tr

    z0 = np.concatenate([np.maximum(b0, 0).ravel(), np.maximum(-b0, 0).ravel()]) if signed else b0.ravel()
    z0 = z0 + 1e-9
    return fg(_fit(fg, z0))[0] * tr


def _weighted_hierarchies(g: np.ndarray) -> tuple[float, list[int], np.ndarray]:
    """Best (error, branchings, weights) over ordered power-of-2 factorisations of m, per-level weights."""
    import itertools

    import scipy.optimize as so

    m = g.shape[0]
    levels = m.bit_length() - 1
    t = {2**i: block_t(g, 2**i) for i in range(levels + 1)}
    best: tuple[float, list[int], np.ndarray] | None = None
    for cuts in itertools.product((0, 1), repeat=levels - 1):
        parts, cur = [], 1
        for c in cuts:
            if c:
                parts.append(cur)
                cur = 1
            else:
                cur += 1
        parts.append(cur)
        sizes, rem = [], m
        for e in parts:
            rem //= 2**e
            sizes.append(rem)
        tt = [t[sz] for sz in sizes]
        cc = np.array([tt[0]] + [tt[j] - tt[j - 1] for j in range(1, len(tt))])
        sz = np.array(sizes, dtype=float)

        def f(lw: np.ndarray, cc: np.ndarray = cc, sz: np.ndarray = sz) -> float:
            w = np.exp(lw)
            lam = np.cumsum((w * w * sz)[::-1])[::-1]
            return float(w.sum() ** 2 * np.sum(cc / lam))

        r = so.minimize(f, np.zeros(len(sizes)), method="BFGS")
        if best is None or r.fun < best[0]:
            w = np.exp(r.x)
            best = (float(r.fun), [2**e for e in parts], w / w.sum())
    assert best is not None
    return best


def search(m: int) -> None:
    from dpkit.histograms import hierarchy_strategy
    from dpkit.histograms import strategy as st

    g, _ = gram("all", m)
    ss = svd_sum("all", g)
    bound = ss * ss / m   # total, in units of 2/ε²
    rng = np.random.default_rng(0)

    def show(label: str, f: float) -> None:
        print(f"m={m} {label}: MSE {f / bound:.3f}, RMSE {math.sqrt(f / bound):.3f} times the SVD bound", flush=True)

    for p in sorted({max(1, m // 16), m // 8, m // 4, m // 2, m}):
        for start in ("quasi-random", "random"):
            th0 = st._initial(p, m) if start == "quasi-random" else rng.random((p, m))
            for signed in (False, True):
                show(f"p-Identity p={p} {start} start{' signed' if signed else ''}", _pid(m, p, th0, signed))
    for q in (m + m // 16, m + m // 4, 2 * m, 3 * m):
        for trial in range(3):
            for signed in (False, True):
                b0 = rng.random((q, m)) ** 4 * (rng.choice([-1.0, 1.0], (q, m)) if signed else 1.0)
                b0[:m] += 3 * np.eye(m)
                show(f"general q={q} start {trial}{' signed' if signed else ''}", _general(g, b0, signed))
    for b in (2, 4, 8):
        h = hierarchy_strategy(m, b).toarray()[:-m]
        show(f"p-Identity from a b={b} tree start (p={h.shape[0]})", _pid(m, h.shape[0], 0.5 * h + 0.01, False))
    f, br, w = _weighted_hierarchies(g)
    show(f"best weighted hierarchy, branchings {br}, weights {np.round(w, 3).tolist()}", f)


def _dpbench_workloads(bench: Any) -> tuple[int, dict[str, np.ndarray], dict[str, str]]:
    """DPBench's 1-D workloads at 4096 bins (its 2,000 random ranges and all prefixes) and their named forms."""
    from dpkit import deterministic_source
    from dpkit.histograms import prefix_ranges, random_ranges

    m = 4096
    wl = {"ranges": random_ranges(m, bench.N_RANGES, rng=deterministic_source(bench.SEED)), "prefix": prefix_ranges(m)}
    return m, wl, {"ranges": "all_ranges", "prefix": "prefixes"}


def _dpbench_samples(bench: Any, wl: dict[str, np.ndarray], reps: int, t0: float) -> Iterator[tuple]:
    """Every (dataset, scale, repetition, ε) cell of the 1-D DPBench grid: the data sample, its true answers and
    Hb's release, with the seeds of ``dpbench.py``; prints progress after each dataset."""
    from dpkit import deterministic_source
    from dpkit.histograms import answer, hierarchical

    for ds in bench.DATASETS_1D:
        base = bench.base_hist(1, ds)
        for scale in bench.SCALES_1D:
            for rep in range(reps):
                x = bench.resample(base, scale, (bench.SEED, 1, zlib.crc32(ds.encode()), scale, rep))
                truth = {w: answer(x, q) for w, q in wl.items()}
                for eps in bench.EPSILONS:
                    hb = hierarchical(x, eps, branching=16,
                                      rng=deterministic_source(bench.seed_of(1, ds, scale, eps, rep, "Hb"))).value
                    yield ds, scale, rep, eps, x, truth, hb
        print(f"{ds} done at {time.perf_counter() - t0:.0f} s", flush=True)


def dpbench(reps: int) -> None:
    import dpbench as bench

    from dpkit import deterministic_source
    from dpkit.histograms import (
        answer,
        optimize_strategy,
        strategy_histogram,
    )

    m, wl, named = _dpbench_workloads(bench)
    t0 = time.perf_counter()
    strat = {w: optimize_strategy(named[w], m) for w in wl}
    print(f"strategies optimised in {time.perf_counter() - t0:.0f} s", flush=True)
    tn = {w: bench.trace_norm_1d(q) for w, q in wl.items()}
    cells: dict[tuple, list[dict[str, float]]] = {}
    for ds, scale, rep, eps, x, truth, hb in _dpbench_samples(bench, wl, reps, t0):
        for w, q in wl.items():
            rel = strategy_histogram(x, eps, workload=named[w], strategy=strat[w], rng=deterministic_source(
                bench.seed_of(1, ds, scale, eps, rep, "Strategy-" + w)))
            cells.setdefault((w, ds, scale, eps), []).append({
                "s": float(np.mean((answer(rel.value, q) - truth[w]) ** 2)),
                "h": float(np.mean((answer(hb, q) - truth[w]) ** 2)),
                "e": rel.params["expected_msae"], "b": bench.mse_bound(tn[w], m, len(q), eps)})
    for w in wl:
        cs = [c for key, c in cells.items() if key[0] == w]
        rs = [math.sqrt(np.mean([r["s"] for r in c]) / c[0]["b"]) for c in cs]
        rh = [math.sqrt(np.mean([r["h"] for r in c]) / c[0]["b"]) for c in cs]
        re = [math.sqrt(c[0]["e"] / c[0]["b"]) for c in cs]
        rr = [math.sqrt(np.mean([r["s"] for r in c]) / np.mean([r["h"] for r in c])) for c in cs]
        print(f"{w}: {len(cs)} cells x {reps} reps; RMSE / SVD bound, median [min, max]: strategy {np.median(rs):.3f} "
              f"[{min(rs):.3f}, {max(rs):.3f}] (expected {np.median(re):.3f}), Hb {np.median(rh):.3f} "
              f"[{min(rh):.3f}, {max(rh):.3f}]; strategy RMSE / Hb RMSE {np.median(rr):.3f} "
              f"[{min(rr):.3f}, {max(rr):.3f}]")
        pooled = [(r["s"] / r["b"], r["h"] / r["b"]) for c in cs for r in c]
        print(f"  pooled over cells and repetitions: strategy {math.sqrt(np.mean([x for x, _ in pooled])):.3f}, "
              f"Hb {math.sqrt(np.mean([y for _, y in pooled])):.3f}")


def gauss_exact(ms: list[int]) -> None:
    """(a) Expected RMSE of ``strategy_histogram(rho=...)`` (the integer lattice B actually measured, add/remove)
    over the zCDP SVD bound ``(Σσ)² / (m k) / (2ρ)``; also the float L2 optimum and its certified dual."""
    from dpkit.histograms import optimize_strategy, strategy_histogram

    print("| m | workload | lattice B: expected RMSE / L2 SVD bound | float optimum (dual) | iterations | "
          "optimisation s | lattice s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for m in ms:
        for kind in ("all", "prefix"):
            name = "all_ranges" if kind == "all" else "prefixes"
            g, k = gram(kind, m)
            ss = svd_sum(kind, g)
            del g
            bound = ss * ss / (m * k) / 2.0   # per query, rho = 1
            t0 = time.perf_counter()
            s = optimize_strategy(name, m, norm="l2")
            sec = time.perf_counter() - t0
            t0 = time.perf_counter()
            rel = strategy_histogram(np.zeros(m, dtype=np.int64), rho=1.0, workload=name, strategy=s)
            lat = time.perf_counter() - t0
            assert s.dual is not None
            print(f"| {m} | {'all ranges' if kind == 'all' else 'prefixes'} | "
                  f"{math.sqrt(rel.params['expected_msae'] / bound):.4f} | "
                  f"{math.sqrt(s.objective / k / 2.0 / bound):.4f} ({math.sqrt(s.dual / k / 2.0 / bound):.4f}) | "
                  f"{s.iterations} | {sec:.1f} | {lat:.1f} |", flush=True)


def gauss_dpbench(reps: int) -> None:
    """(b) DPBench 1-D: strategy_histogram(rho = eps²/2) against the zCDP SVD bound, and its RMSE against the
    Laplace strategy_histogram(eps) and Hb(eps) on the same samples (the same seeds as ``dpbench``)."""
    import dpbench as bench

    from dpkit import deterministic_source
    from dpkit.histograms import (
        answer,
        optimize_strategy,
        strategy_histogram,
    )

    m, wl, named = _dpbench_workloads(bench)
    t0 = time.perf_counter()
    lap = {w: optimize_strategy(named[w], m) for w in wl}
    gau = {w: optimize_strategy(named[w], m, norm="l2") for w in wl}
    print(f"strategies optimised in {time.perf_counter() - t0:.0f} s", flush=True)
    tn = {w: bench.trace_norm_1d(q) for w, q in wl.items()}
    cells: dict[tuple, list[dict[str, float]]] = {}
    for ds, scale, rep, eps, x, truth, hb in _dpbench_samples(bench, wl, reps, t0):
        for w, q in wl.items():
            rl = strategy_histogram(x, eps, workload=named[w], strategy=lap[w], rng=deterministic_source(
                bench.seed_of(1, ds, scale, eps, rep, "Strategy-" + w)))
            rg = strategy_histogram(x, rho=eps * eps / 2.0, workload=named[w], strategy=gau[w],
                                    rng=deterministic_source(
                                        bench.seed_of(1, ds, scale, eps, rep, "StrategyG-" + w)))
            cells.setdefault((w, ds, scale, eps), []).append({
                "g": float(np.mean((answer(rg.value, q) - truth[w]) ** 2)),
                "s": float(np.mean((answer(rl.value, q) - truth[w]) ** 2)),
                "h": float(np.mean((answer(hb, q) - truth[w]) ** 2)),
                "e": rg.params["expected_msae"],
                "b": bench.mse_bound(tn[w], m, len(q), eps) / 2.0})   # zCDP bound at rho = eps²/2
    for w in wl:
        cs = [c for key, c in cells.items() if key[0] == w]
        rg = [math.sqrt(np.mean([r["g"] for r in c]) / c[0]["b"]) for c in cs]
        re = [math.sqrt(c[0]["e"] / c[0]["b"]) for c in cs]
        rs = [math.sqrt(np.mean([r["g"] for r in c]) / np.mean([r["s"] for r in c])) for c in cs]
        rh = [math.sqrt(np.mean([r["g"] for r in c]) / np.mean([r["h"] for r in c])) for c in cs]
        print(f"{w}: {len(cs)} cells x {reps} reps; zCDP strategy RMSE / zCDP SVD bound, median [min, max]: "
              f"{np.median(rg):.3f} [{min(rg):.3f}, {max(rg):.3f}] (expected {np.median(re):.3f}); its RMSE / "
              f"Laplace strategy RMSE {np.median(rs):.3f} [{min(rs):.3f}, {max(rs):.3f}], / Hb RMSE "
              f"{np.median(rh):.3f} [{min(rh):.3f}, {max(rh):.3f}]")
        pooled = [r["g"] / r["b"] for c in cs for r in c]
        print(f"  pooled over cells and repetitions: {math.sqrt(np.mean(pooled)):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("exact", "grid", "search", "dpbench", "both", "gauss", "gauss-exact",
                                       "gauss-dpbench"), default="both")
    ap.add_argument("--m", default="64,256,1024,4096")
    ap.add_argument("--l2", action="store_true")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--search-m", type=int, default=64)
    ap.add_argument("--grid", default="16,32,64")
    args = ap.parse_args()
    if args.part in ("exact", "both"):
        exact([int(v) for v in args.m.split(",")], args.l2)
    if args.part == "grid":
        grid([int(v) for v in args.grid.split(",")])
    if args.part == "search":
        search(args.search_m)
    if args.part in ("dpbench", "both"):
        dpbench(args.reps)
    if args.part in ("gauss", "gauss-exact"):
        gauss_exact([int(v) for v in args.m.split(",")])
    if args.part in ("gauss", "gauss-dpbench"):
        gauss_dpbench(args.reps)


if __name__ == "__main__":
    main()
