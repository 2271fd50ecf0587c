"""Sparse vector variants for the tests: the NON-PRIVATE ones of the papers, and their exact laws.

NON-PRIVATE FIXTURES (tests only; never move them into src/): Lyu–Su–Li Algs 3, 4, 5, 6 (= Li et al. Algs 14,
15, 16, 17; Alg 6 with ε₁ = ε₂ is Chen & Machanavajjhala's GPTT) and the "error check" used by Hardt–Rothblum /
Roth–Roughgarden (noise inside the absolute value, the noisy answer released on ⊤). They claim ε-DP and are not
(Alg 4 is ((1+6c)/4)ε-DP); the exact calculator and the statistical auditor must flag them.

Samplers have the auditor's vectorised signature ``fn(data, rng, size)`` (``data`` = the query answers ``q_i(D)``)
and draw continuous Laplace noise from a numpy generator seeded from the dpkit source (test-only; ``# rng-ok``).
Outputs are encoded as one integer per run (:func:`pattern_code`) or, for Alg 3, one float.

``LAWS`` gives, per algorithm, the keyword arguments of :func:`dpkit.audit.svt_law.svt_log_prob` that describe its
exact output law (continuous Laplace), as functions of ``epsilon``, ``cutoff`` and ``Δ``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from dpkit.audit.exact import DiscreteLaplace, Laplace, _log_between, log_integral
from dpkit.noise.source import RandomSource


def numpy_generator(rng: RandomSource) -> np.random.Generator:
    """A numpy generator seeded from 256 bits of the dpkit source (test-only)."""
    return np.random.default_rng(rng.uint64(4))  # rng-ok


# ---------------------------------------------------------------------------------------------
# the printed parameters (Lyu–Su–Li Fig. 1 / Li et al. Fig. 7.1), ε₂ = ε − ε₁
# ---------------------------------------------------------------------------------------------
def alg1_law(epsilon: float, cutoff: int, delta: float = 1.0) -> dict:
    """Lyu–Su–Li Alg 1 (PRIVATE): ε₁ = ε/2, rho ~ Lap(Δ/ε₁), nu ~ Lap(2cΔ/ε₂)."""
    e1 = epsilon / 2
    return {"threshold_scale": delta / e1, "query_scale": 2 * cutoff * delta / (epsilon - e1), "law": "laplace"}


def alg3_law(epsilon: float, cutoff: int, delta: float = 1.0) -> dict:
    """NON-PRIVATE Alg 3 (Roth 2011): ε₁ = ε/2, nu ~ Lap(cΔ/ε₂), prints q_i + nu_i on ⊤."""
    e1 = epsilon / 2
    return {"threshold_scale": delta / e1, "query_scale": cutoff * delta / (epsilon - e1), "law": "laplace",
            "numeric": "query_noise"}


def alg4_law(epsilon: float, cutoff: int, delta: float = 1.0) -> dict:
    """Alg 4 (Lee–Clifton): ε₁ = ε/4, nu ~ Lap(Δ/ε₂) without the c: only ((1+6c)/4)ε-DP."""
    e1 = epsilon / 4
    return {"threshold_scale": delta / e1, "query_scale": delta / (epsilon - e1), "law": "laplace"}


def alg5_law(epsilon: float, cutoff: int = 0, delta: float = 1.0) -> dict:
    """NON-PRIVATE Alg 5 (Stoddard et al.): ε₁ = ε/2, no query noise, no cutoff."""
    return {"threshold_scale": delta / (epsilon / 2), "query_scale": 0.0, "law": "laplace"}


def alg6_law(epsilon: float, cutoff: int = 0, delta: float = 1.0) -> dict:
    """NON-PRIVATE Alg 6 (Chen et al.; GPTT): ε₁ = ε/2, nu ~ Lap(Δ/ε₂), no cutoff."""
    e1 = epsilon / 2
    return {"threshold_scale": delta / e1, "query_scale": delta / (epsilon - e1), "law": "laplace"}


# ---------------------------------------------------------------------------------------------
# samplers (continuous Laplace, as printed)
# ---------------------------------------------------------------------------------------------
def pattern_code(above: np.ndarray, answered: np.ndarray) -> np.ndarray:
    """One integer per run for a ⊤/⊥ transcript: bit i = answer i (⊤ = 1) for the answered queries, plus
    ``answered · 2^m`` (so a run that halted early differs from one answering ⊥ afterwards)."""
    m = above.shape[1]
    bits = (above & (np.arange(m)[None, :] < answered[:, None])).astype(np.int64)
    return bits @ (1 << np.arange(m, dtype=np.int64)) + answered.astype(np.int64) * (1 << m)


def code_of(pattern, m: int) -> int:
    """:func:`pattern_code` of one transcript (a sequence of bools) of a run over ``m`` queries."""
    bits = sum(1 << i for i, b in enumerate(pattern) if b)
    return bits + len(pattern) * (1 << m)


def _run(values, threshold: float, b1: float, b2: float, cutoff: int | None, gen: np.random.Generator,
         size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The common loop: returns (above matrix, answered count, query noise) for ``size`` runs."""
    q = np.asarray(values, dtype=float)
    m = q.size
    rho = gen.laplace(0.0, b1, size)
    nu = gen.laplace(0.0, b2, (size, m)) if b2 > 0 else np.zeros((size, m))
    above = q[None, :] + nu >= threshold + rho[:, None]
    if cutoff is None:
        return above, np.full(size, m), nu
    tops = np.cumsum(above, axis=1)
    reached = tops >= cutoff
    answered = np.where(reached.any(axis=1), np.argmax(reached, axis=1) + 1, m)
    return above, answered, nu


def alg3_sampler(epsilon: float = 1.0, threshold: float = 0.0, delta: float = 1.0):
    """NON-PRIVATE Alg 3 with c = 1, encoded for the auditor: the printed value ``q_m + nu_m`` when the ⊤ is
    at the LAST query (after m ⊥), else ``1000 + position`` (no ⊤: ``2000``). Post-processing of the output."""
    kw = alg3_law(epsilon, 1, delta)

    def mech(data, rng, size):
        gen = numpy_generator(rng)
        above, _answered, nu = _run(data, threshold, kw["threshold_scale"], kw["query_scale"], 1, gen, size)
        m = above.shape[1]
        pos = np.where(above.any(axis=1), np.argmax(above, axis=1), -1)
        q = np.asarray(data, dtype=float)
        out = np.where(pos < 0, 2000.0, 1000.0 + pos)
        last = pos == m - 1
        out[last] = q[m - 1] + nu[last, m - 1]
        return out

    return mech


def pattern_sampler(law_kw: dict, cutoff: int | None, threshold: float = 0.0):
    """Alg 4 (``cutoff`` given), 5 or 6 (``cutoff=None``): the transcript as :func:`pattern_code`."""

    def mech(data, rng, size):
        gen = numpy_generator(rng)
        above, answered, _nu = _run(data, threshold, law_kw["threshold_scale"], law_kw["query_scale"], cutoff,
                                    gen, size)
        return pattern_code(above, answered)

    return mech


# ---------------------------------------------------------------------------------------------
# the error check with the noise INSIDE the absolute value (Hardt–Rothblum, Roth–Roughgarden)
# ---------------------------------------------------------------------------------------------
def abs_inside_log_probs(r, threshold: int, cutoff: int, t1: float, t2: float) -> dict[tuple, float]:
    """Exact ``ln P[pattern]`` of the ⊤/⊥ check ``|r_i + nu_i| >= T + rho`` (noise inside |·|) on the integer
    lattice (rho ~ DLap(t1), nu ~ DLap(t2), r_i = q̃_i − q_i(D) integers), every pattern with ≤ c ⊤.

    Direct sum over |z| <= Z with Z so large that P[|rho| > Z] < e^-700 (all other factors are <= 1)."""
    rho, nu = DiscreteLaplace(0, t1), DiscreteLaplace(0, t2)
    zmax = math.ceil(t1 * 710) + 1
    z = np.arange(-zmax, zmax + 1)
    base = rho.logpmf(z.astype(float))
    bots = []
    for ri in r:  # ⊥: -(T+z) < r + nu < T+z  <=>  -T-z-r+1 <= nu <= T+z-r-1
        lo, hi = -threshold - z - int(ri) + 1, threshold + z - int(ri) - 1
        bots.append(np.array([_log_between(nu, float(a), float(b)) for a, b in zip(lo, hi, strict=True)]))
    tops = [np.array([math.log(-math.expm1(v)) if v < 0 else -math.inf for v in b]) for b in bots]
    out: dict[tuple, float] = {}

    def rec(prefix: tuple, k: int, acc: np.ndarray) -> None:
        i = len(prefix)
        if k == cutoff or i == len(r):
            out[prefix] = float(logsumexp(acc))
            return
        rec((*prefix, True), k + 1, acc + tops[i])
        rec((*prefix, False), k, acc + bots[i])

    rec((), 0, base)
    return out


def pmw_reuse_log_density(errors, threshold: float, value: float, b1: float, b2: float) -> float:
    """NON-PRIVATE (the check as used in PMW / the median mechanism): ``⊥`` for every error ``r_i = q̃_i − q_i(D)``
    in ``errors[:-1]`` (``|r_i + nu_i| < T + rho``), then ``⊤`` on the last query, which releases the SAME noisy
    value: the released error ``v = r_m + nu_m`` (so ``nu_m = v − r_m``, and ``|v| >= T + rho``). Continuous
    Laplace; returns ``ln`` of the density at ``v`` (quadrature in log space over rho)."""
    rho, nu = Laplace(0.0, b1), Laplace(0.0, b2)
    r = np.asarray(errors, dtype=float)
    cap = abs(value) - threshold  # rho <= |v| - T

    def log_f(z):
        s = threshold + z
        if s <= 0:
            return -math.inf
        acc = rho.logpdf(z)
        for ri in r[:-1]:
            acc += _log_between(nu, -s - ri, s - ri, lo_closed=False, hi_closed=False)
        return acc

    pts = sorted({-threshold, cap, *(float(-threshold + abs(ri)) for ri in r)})
    val = log_integral(log_f, -threshold, cap, points=[p for p in pts if -threshold < p < cap], scale=b1)
    return val + nu.logpdf(value - r[-1])
