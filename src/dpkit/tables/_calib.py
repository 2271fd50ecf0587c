"""Sensitivities, noise scales, half-widths and the partition-selection threshold of ``dpkit.tables``.

Everything here is a function of public quantities only (the contribution bounds, the clamping bounds,
the granularity, the budget shares); nothing reads data.

Contribution bounds (after the engine has enforced them)
-------------------------------------------------------
``R = max_rows`` rows per privacy unit in all, at most ``G`` groups (``G = min(max_groups, R)``; ``R`` when
``max_groups`` is None: a unit cannot touch more groups than it has rows; 1 for an ungrouped query) and at
most ``P = min(max_rows_per_group, R)`` rows per group (``R`` when unset). Under the default row unit
(add/remove one row) ``R = G = P = 1``.

One unit changes the per-group row counts ``c_g`` (``c_g <= P``, at most ``G`` nonzero, ``Σ c_g <= R``), so

- **L1** of any per-group vector of row counts: ``L = min(R, G·P)`` (fill groups with ``P`` rows until ``R``
  is spent or ``G`` groups are used);
- **L2**: ``max sqrt(Σ c_g²)`` under the same constraints. ``Σ c_g²`` is Schur-convex, so the maximum puts
  ``P`` rows in as many groups as possible: ``k = min(G, R // P)`` full groups and, if ``k < G``, one group
  with the remainder ``R - k P`` (``< P``): ``L2² = k P² + (R - kP)²·[k < G]``. This is at most
  ``sqrt(G)·P`` (the usual bound) and at most ``L``.

A clamped, rounded value contributes at most ``K = max(|lo_u|, |hi_u|)`` integer units per row, so a sum
vector has L1 ``L·K`` and L2 ``L2·K``; a sum of squares ``L·K²`` / ``L2·K²``. A distinct-unit count
changes by at most 1 in each of at most ``G`` groups: L1 ``G``, L2 ``sqrt(G)``. A histogram or contingency
table inside the groups: a unit's ``c_g`` rows of group ``g`` may all fall in one bin, so the same ``L``
and ``L2`` as the counts. The tests check every formula by brute force (adding one unit's rows, after
bounding, to random tables and measuring the largest change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from dpkit.mechanisms.accuracy import discrete_gaussian_halfwidth, discrete_laplace_halfwidth
from dpkit.mechanisms.discrete import discrete_laplace_scale
from dpkit.stats.aggregates import discrete_gaussian_sigma

__all__ = ["Bounds", "gaussian_sigma", "halfwidth", "laplace_scale", "selection_threshold"]


@dataclass(frozen=True)
class Bounds:
    """Enforced contribution bounds ``R``, ``G``, ``P`` (module docstring)."""

    rows: int
    groups: int
    per_group: int

    @property
    def l1(self) -> int:
        return min(self.rows, self.groups * self.per_group)

    @property
    def l2_squared(self) -> int:
        k = min(self.groups, self.rows // self.per_group)
        rest = self.rows - k * self.per_group if k < self.groups else 0
        return k * self.per_group**2 + min(rest, self.per_group) ** 2

    @property
    def l2(self) -> float:
        return math.sqrt(self.l2_squared)


def laplace_scale(l1: int, epsilon: float) -> float:
    """Discrete Laplace scale ``t``: the smallest float ``>= l1 / epsilon`` (integer L1 sensitivity)."""
    return discrete_laplace_scale(int(l1), epsilon)


def gaussian_sigma(l2_squared: Fraction | int, rho: float) -> float:
    """Discrete Gaussian ``sigma``: the smallest float with ``sigma² >= Δ₂² / (2 rho)`` (exact check;
    :func:`dpkit.stats.aggregates.discrete_gaussian_sigma`).

    For integer vectors with L2 sensitivity ``Δ₂`` this is ``rho``-zCDP (Canonne, Kamath & Steinke 2020,
    Thm 14: ``Δ₂² / (2 sigma²)``)."""
    return discrete_gaussian_sigma(l2_squared, rho)


def halfwidth(noise: str, scale: float, confidence: float = 0.95) -> int:
    """Half-width (integer units) of the central interval of one noisy coordinate."""
    if noise == "laplace":
        return discrete_laplace_halfwidth(scale, confidence)
    return discrete_gaussian_halfwidth(scale, confidence)


def _dlap_tail(t: float, k: int) -> float:
    """``P[Z >= k]`` for discrete Laplace of scale ``t`` and ``k >= 1``: ``q^k / (1 + q)``, ``q = e^{-1/t}``."""
    q = math.exp(-1.0 / t)
    return math.exp(-k / t) / (1.0 + q)


def _dgauss_tail(sigma: float, k: int) -> float:
    """An upper bound on ``P[Y >= k]`` for the discrete Gaussian (``k >= 1``): the unnormalised tail
    ``Σ_{y>=k} e^{-y²/(2σ²)} <= e^{-k²/(2σ²)} / (1 - e^{-k/σ²})`` (consecutive terms shrink by at least
    ``e^{-(2k+1)/(2σ²)}``) over a lower bound of the normaliser: ``Σ_y e^{-y²/(2σ²)} >= max(1, sqrt(2π) σ)``
    (Poisson summation: it equals ``sqrt(2π) σ Σ_j e^{-2π²σ²j²}``)."""
    s2 = sigma * sigma
    head = math.exp(-k * k / (2 * s2))
    ratio = math.exp(-k / s2)
    tail = head / (1.0 - ratio) if ratio < 1 else math.inf
    norm = max(1.0, math.sqrt(2 * math.pi) * sigma)
    return min(1.0, tail / norm)


def selection_threshold(noise: str, scale: float, groups: int, delta: float) -> int:
    """The smallest integer threshold ``τ >= 2`` such that a group holding a single unit is released with
    probability at most ``delta / groups``: ``P[1 + Z >= τ] = P[Z >= τ - 1] <= δ / G``.

    Laplace (``Z`` discrete Laplace of scale ``t = G / ε``): ``P[Z >= k] = e^{-k/t} / (1 + e^{-1/t})``, so
    ``τ = 1 + ceil(t · ln(G / (δ (1 + e^{-1/t}))))`` (then checked exactly in floating point with margin).
    Gaussian: the tail bound of :func:`_dgauss_tail`.

    Why ``δ/G``: a unit present in ``D`` but not ``D'`` is the only unit of at most ``G`` groups that
    exist in ``D`` alone (distinct-unit count 1 there); each is released with probability ``<= δ/G``, so
    the event "some group of ``D`` alone is released" has probability ``<= δ`` (union bound). On the
    groups present in both, the noisy distinct-unit counts are the usual ``ε``-DP (or ``ρ``-zCDP)
    mechanism, and thresholding is post-processing.
    """
    target = delta / groups
    tail = _dlap_tail if noise == "laplace" else _dgauss_tail
    if noise == "laplace":
        q = math.exp(-1.0 / scale)
        k = max(1, math.ceil(scale * math.log(1.0 / (target * (1.0 + q)))))
    else:
        k = max(1, math.ceil(scale * math.sqrt(2 * math.log(1.0 / target))))
    while k > 1 and tail(scale, k - 1) <= target * (1 - 1e-9):
        k -= 1
    while tail(scale, k) > target * (1 - 1e-9):  # 1e-9 relative margin for float rounding in the tail
        k += 1
    return k + 1
