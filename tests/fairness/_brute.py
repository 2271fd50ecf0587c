"""Independent brute-force solvers for tiny fairness LPs (tests only).

``vertex_min`` enumerates every vertex of a bounded polytope {x : G x <= h} in dimension <= 4 (all subsets of m
rows, solved exactly with numpy, kept when feasible) and returns the best objective: an optimum of a bounded LP
is attained at a vertex. The constraint rows are written here directly from the definitions (Hardt's thesis
Fig 8.1, Def 8.3.3), not with dpkit's sparse builders.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def vertex_min(c: np.ndarray, g: np.ndarray, h: np.ndarray, tol: float = 1e-9) -> float:
    m = c.size
    combos = np.array(list(itertools.combinations(range(g.shape[0]), m)), dtype=np.int64)
    a = g[combos]  # (C, m, m): every choice of m tight rows, solved at once
    ok = np.abs(np.linalg.det(a)) >= 1e-12
    a, rhs = a[ok], h[combos[ok]]
    x = np.linalg.solve(a, rhs[:, :, None])[:, :, 0]
    feasible = np.all(x @ g.T <= h[None, :] + tol, axis=1)
    return float(np.min(x[feasible] @ c)) if np.any(feasible) else math.inf


def box_rows(n: int) -> tuple[list[np.ndarray], list[float]]:
    """0 <= p_x <= 1."""
    rows, rhs = [], []
    for x in range(n):
        e = np.zeros(n)
        e[x] = 1.0
        rows += [e, -e]
        rhs += [1.0, 0.0]
    return rows, rhs


def two_outcome_rows(d: np.ndarray, divergence: str) -> tuple[np.ndarray, np.ndarray]:
    """Constraint rows on p_x = μ_x(0) for every ordered pair, from the definitions, plus the box."""
    n = d.shape[0]
    rows, rhs = box_rows(n)
    for x in range(n):
        for y in range(n):
            if x == y:
                continue
            r = np.zeros(n)
            if divergence == "tv":  # D_tv = |p_x - p_y| <= d  (one direction per ordered pair)
                r[x], r[y] = 1.0, -1.0
                rows.append(r)
                rhs.append(d[x, y])
            else:  # p_x <= e^d p_y and (1 - p_x) <= e^d (1 - p_y)
                e = math.exp(d[x, y])
                r[x], r[y] = 1.0, -e
                rows.append(r)
                rhs.append(0.0)
                r2 = np.zeros(n)
                r2[x], r2[y] = -1.0, e
                rows.append(r2)
                rhs.append(e - 1.0)
    return np.array(rows), np.array(rhs)


def fair_lp_two_outcomes(d: np.ndarray, loss: np.ndarray, divergence: str, w: np.ndarray | None = None) -> float:
    """opt of the fairness LP with A = {0, 1}: min Σ_x w_x (p_x L(x,0) + (1 - p_x) L(x,1))."""
    n = d.shape[0]
    w = np.full(n, 1.0 / n) if w is None else w
    g, h = two_outcome_rows(d, divergence)
    return vertex_min(w * (loss[:, 0] - loss[:, 1]), g, h) + float(np.sum(w * loss[:, 1]))


def bias_two_outcomes(d: np.ndarray, s: np.ndarray, t: np.ndarray, divergence: str) -> float:
    g, h = two_outcome_rows(d, divergence)
    return -vertex_min(-(s - t), g, h)


def random_metric(rng: np.random.Generator, n: int, dim: int = 2, scale: float = 1.0, cap: float | None = None
                  ) -> np.ndarray:
    pts = rng.random((n, dim))
    d = np.sqrt(((pts[:, None, :] - pts[None, :, :]) ** 2).sum(axis=2)) * scale
    if cap is not None:
        d = np.minimum(d, cap)
    d = np.minimum(d, d.T)
    np.fill_diagonal(d, 0.0)
    return d
