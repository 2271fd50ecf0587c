"""Shared helpers for the sparse vector tests: small lattice plans, neighbouring pairs, independent oracles."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.special import logsumexp

from dpkit.audit.exact import DiscreteLaplace, Laplace, log_integral
from dpkit.audit.svt_law import svt_log_prob, svt_patterns
from dpkit.svt.engine import calibrate as _plan

P_MIN = 1e-7


def small_plan(d_units: int, t1: float, t2: float, cutoff: int = 1, *, t3: float | None = None,
               resample: bool = False, monotonic: bool = False):
    """A plan on the unit lattice (g = 1) with small scales, where the discreteness is visible."""
    base = _plan(1.0, cutoff=cutoff)
    return dataclasses.replace(base, granularity=1.0, d_units=d_units, t_threshold=t1, t_query=t2, t_numeric=t3,
                               resample=resample, monotonic=monotonic, cutoff=cutoff)


def law_kwargs(plan, law: str = "discrete_laplace") -> dict:
    """svt_log_prob keyword arguments for a plan, in lattice units."""
    kw = {"threshold_scale": plan.t_threshold, "query_scale": plan.t_query, "law": law,
          "resample_threshold": plan.resample}
    if plan.t_numeric is not None:
        kw["numeric_scale"] = plan.t_numeric
    return kw


def lattice_units(values, plan) -> np.ndarray:
    """The documented rounding rule, recomputed here (not taken from the implementation)."""
    return np.rint(np.asarray(values, dtype=float) / plan.granularity).astype(np.int64)


def neighbour_pairs(gen: np.random.Generator, n: int, sensitivity: float, monotonic: bool, *, m_max: int = 6,
                    spread: float = 4.0, per_query_thresholds: bool = False):
    """``n`` random (q, q', thresholds) with ``|q_i - q'_i| <= Δ`` (one direction when monotonic); every other
    pair moves every answer by exactly ±Δ (the extreme case)."""
    out = []
    for trial in range(n):
        m = int(gen.integers(1, m_max + 1))
        thr = float(gen.uniform(-2, 2)) * sensitivity
        thresholds = thr + (gen.uniform(-1, 1, m) * sensitivity if per_query_thresholds else np.zeros(m))
        q = thresholds + gen.uniform(-spread, spread, m) * sensitivity
        step = gen.choice([-1.0, 1.0], m) if trial % 2 else gen.uniform(-1.0, 1.0, m)
        if monotonic:
            step = np.abs(step) * gen.choice([-1.0, 1.0])
        q_prime = q + step * sensitivity
        out.append((q, q_prime, thresholds))
    return out


def pattern_log_probs(units, t_units, cutoff: int, kw: dict) -> dict[tuple, float]:
    return {p: svt_log_prob(units, t_units, list(p), **kw) for p in svt_patterns(len(units), cutoff)}


def max_pattern_loss(units, units_prime, t_units, cutoff: int, kw: dict) -> float:
    a = pattern_log_probs(units, t_units, cutoff, kw)
    b = pattern_log_probs(units_prime, t_units, cutoff, kw)
    return max(abs(a[p] - b[p]) for p in a)


def direct_pattern_log_probs(diffs, cutoff: int, t1: float, t2: float, *, resample: bool = False
                             ) -> tuple[dict[tuple, float], float]:
    """An independent oracle on the unit lattice: ``ln P[pattern]`` by direct summation over ``|z| <= Z``
    (``diffs[i] = u_i - T_i``), plus ``ln P[|rho| > Z]``, a rigorous bound on what the truncation leaves out
    of every probability (all other factors are <= 1). With ``resample`` the threshold noise is redrawn after
    each ⊤ (computed as a product of segment sums)."""
    rho, nu = DiscreteLaplace(0, t1), DiscreteLaplace(0, t2)
    zmax = math.ceil(t1 * 800)
    z = np.arange(-zmax, zmax + 1, dtype=float)
    base = rho.logpmf(z)
    ge = [nu.logsf(-d + z - 1) for d in diffs]  # P[nu >= T - u + z]
    lt = [nu.logcdf(-d + z - 1) for d in diffs]
    out: dict[tuple, float] = {}

    def rec(prefix: tuple, k: int, acc: np.ndarray, done: float) -> None:
        i = len(prefix)
        if k == cutoff or i == len(diffs):
            out[prefix] = done + (float(logsumexp(acc)) if not (resample and prefix and prefix[-1]) else 0.0)
            return
        top = acc + ge[i]
        if resample:
            rec((*prefix, True), k + 1, base, done + float(logsumexp(top)))
        else:
            rec((*prefix, True), k + 1, top, done)
        rec((*prefix, False), k, acc + lt[i], done)

    rec((), 0, base, 0.0)
    tail = math.log(2.0) - (zmax + 1) / t1 - math.log1p(math.exp(-1.0 / t1))
    return out, tail


def quadrature_log_prob(values, threshold: float, pattern, b1: float, b2: float) -> float:
    """An independent oracle for the continuous law: ``ln ∫ p_rho(z) Π factors dz`` by log-space quadrature
    (:func:`dpkit.audit.exact.log_integral`), split at every ``T - q_i`` and at 0."""
    rho, nu = Laplace(0.0, b1), Laplace(0.0, b2)
    a = [threshold - float(v) for v in values[:len(pattern)]]

    def log_f(z):
        z = np.asarray(z, dtype=float)
        acc = rho.logpdf(z)
        for ai, top in zip(a, pattern, strict=True):
            acc = acc + (nu.logsf(ai + z) if top else nu.logcdf(ai + z))
        return acc

    return log_integral(log_f, points=sorted({0.0, *(-x for x in a)}), scale=min(b1, b2))
