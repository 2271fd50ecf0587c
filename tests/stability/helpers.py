"""Test-only helpers for tests/stability.

NON-PRIVATE FIXTURES: ``local_sensitivity_median_noise`` and ``local_sensitivity_mean_noise`` add noise
scaled to the *local* sensitivity (Li Ex 8.1, Near & Abuah §8.2). They are deliberately broken and exist
only so that the tests can show the auditor catching them; they must never move into src/.

Also: the contract checks of the stability tests as calls of dpkit.audit.testing (``assert_refused``,
``charged_before_draw``; its byte-counting source is re-exported), brute-force neighbour enumeration, and exact
privacy-loss calculators for discrete-Laplace output laws.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dpkit import ApproxDP
from dpkit.audit.testing import SECRET, CountingSource, assert_charges_first, assert_refused_cleanly

__all__ = ["SECRET", "SECRET_TEXTS", "CountingSource", "add_remove_neighbours", "assert_refused", "ball",
           "charged_before_draw", "delta_two_dlap", "dlap_cdf", "dlap_logpmf", "local_sensitivity_mean_noise",
           "local_sensitivity_median_noise", "multisets", "replace_neighbours", "shifted_release_delta"]

SECRET_TEXTS = ("987654", "987,654", "9.87")  # SECRET (a data value) in the forms no error message may show


def assert_refused(fn: Callable[..., Any], kwargs: dict[str, Any], err: type, param: str,
                   budget: Any = None) -> None:
    """``fn(**kwargs, accountant=acct, rng=src)`` raises ``err`` naming ``param``; no data value in the
    message; nothing charged; no randomness drawn (:func:`dpkit.audit.testing.assert_refused_cleanly`; the
    accountant's relation is ``kwargs["_neighbours"]`` when given)."""
    kwargs = dict(kwargs)
    nb = kwargs.pop("_neighbours", None)
    assert_refused_cleanly(fn, (), kwargs, error=err, param=param, secrets=SECRET_TEXTS,
                           budget=budget if budget is not None else ApproxDP(100.0, 0.5), neighbours=nb, seed=2)


def charged_before_draw(call: Callable[..., Any], budget: Any, cost: Any) -> Any:
    """Run ``call(accountant=, rng=)`` and check: one charge of exactly ``cost``, made before any byte
    was drawn; a second call that exceeds the budget draws nothing (:func:`dpkit.audit.testing.assert_charges_first`).
    Returns the release."""
    return assert_charges_first(call, cost=cost, budget=budget, seed=11)


# ---------------------------------------------------------------------------------------------
# brute-force neighbours on a grid of values
# ---------------------------------------------------------------------------------------------


def add_remove_neighbours(x: tuple[float, ...], grid: Iterable[float]) -> list[tuple[float, ...]]:
    out = [tuple(sorted(x[:i] + x[i + 1:])) for i in range(len(x))]
    out += [tuple(sorted((*x, v))) for v in grid]
    return out


def replace_neighbours(x: tuple[float, ...], grid: Iterable[float]) -> list[tuple[float, ...]]:
    g = list(grid)
    return [tuple(sorted((*x[:i], v, *x[i + 1:]))) for i in range(len(x)) for v in g]


def ball(x: tuple[float, ...], k: int, step: Callable[[tuple[float, ...]], list[tuple[float, ...]]]) -> set:
    seen = {tuple(sorted(x))}
    frontier = set(seen)
    for _ in range(k):
        nxt = set()
        for y in frontier:
            for z in step(y):
                if z not in seen:
                    seen.add(z)
                    nxt.add(z)
        frontier = nxt
    return seen


def multisets(grid: Iterable[float], max_n: int) -> list[tuple[float, ...]]:
    g = sorted(grid)
    out: list[tuple[float, ...]] = []
    for n in range(max_n + 1):
        out += list(itertools.combinations_with_replacement(g, n))
    return out


# ---------------------------------------------------------------------------------------------
# exact privacy calculators for discrete-Laplace laws (log space)
# ---------------------------------------------------------------------------------------------


def dlap_logpmf(k: np.ndarray, t: float) -> np.ndarray:
    """ln P[Z = k] for Z ~ DLap(t): ln tanh(1/(2t)) - |k|/t."""
    return math.log(math.tanh(0.5 / t)) - np.abs(k) / t


def dlap_cdf(k: Any, t: float) -> np.ndarray:
    """P[Z <= k], Z ~ DLap(t), vectorised (P[Z >= m] = q^m/(1+q) for m >= 1)."""
    k = np.asarray(k, dtype=np.float64)
    q = math.exp(-1.0 / t)
    upper = q ** np.maximum(k + 1, 0) / (1 + q)  # P[Z >= k+1] for k >= 0
    lower = q ** np.maximum(-k, 0) / (1 + q)  # P[Z <= k] = P[Z >= -k] for k <= -1
    return np.where(k >= 0, 1.0 - upper, lower)


def delta_two_dlap(r: int, t: float, r2: int, t2: float, eps: float, width: float = 60.0) -> float:
    """``sum_k max(0, P(k) - e^eps P'(k))`` for P = DLap(t) at r and P' = DLap(t2) at r2, by enumeration
    over a window of ``width`` scales plus a bound on the mass outside it."""
    tt = max(t, t2)
    lo = min(r, r2) - math.ceil(width * tt)
    hi = max(r, r2) + math.ceil(width * tt)
    k = np.arange(lo, hi + 1)
    lp = dlap_logpmf(k - r, t)
    lq = dlap_logpmf(k - r2, t2)
    body = float(np.sum(np.maximum(0.0, np.exp(lp) - np.exp(lq + eps))))
    outside = 2.0 * math.exp(-(hi - max(r, r2)) / t)  # >= P-mass outside the window
    return body + outside


def shifted_release_delta(a: np.ndarray, c: np.ndarray, t: float, shift: int) -> np.ndarray:
    """``sum_k max(0, a p(k) - c p(k - shift))`` for p = DLap(t) (same scale), closed form, vectorised
    over arrays ``a, c >= 0``. The ratio p(k)/p(k - shift) is monotone in k, so the positive set is a
    half-line."""
    a = np.asarray(a, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    if shift < 0:  # mirror k -> -k
        return shifted_release_delta(a, c, t, -shift)
    out = np.zeros(np.broadcast(a, c).shape)
    a, c = np.broadcast_to(a, out.shape), np.broadcast_to(c, out.shape)
    pos = a > 0
    if shift == 0:
        return np.where(pos, np.maximum(0.0, a - c), 0.0)
    logq = -1.0 / t
    with np.errstate(divide="ignore", invalid="ignore"):
        psi = np.where(pos & (c > 0), np.log(c / a) / logq, np.inf)  # ratio > c/a <=> phi(k) < psi
    # phi(k) = |k| - |k - shift|: -shift (k <= 0), 2k - shift (0..shift), shift (k >= shift)
    all_pos = psi > shift
    none = psi <= -shift
    kstar = np.ceil((psi + shift) / 2.0) - 1
    kstar = np.clip(np.where(np.isfinite(kstar), kstar, 0), 0, shift)
    part = a * dlap_cdf(kstar, t) - c * dlap_cdf(kstar - shift, t)
    res = np.where(all_pos, a - c, np.where(none, 0.0, part))
    return np.where(pos, np.maximum(res, 0.0), 0.0)


# ---------------------------------------------------------------------------------------------
# NON-PRIVATE fixtures: noise scaled to the local sensitivity
# ---------------------------------------------------------------------------------------------


def local_sensitivity_median_noise(epsilon: float, bounds: tuple[float, float]) -> Callable[..., np.ndarray]:
    """``median + Lap(LS/epsilon)`` (NOT private): vectorised mechanism for ``dpkit.audit.audit``."""
    from dpkit.noise import lattice_laplace
    from dpkit.stability import local_sensitivity_median
    from dpkit.stability._util import median_value, sorted_clipped

    def mech(data: Any, rng: Any, size: int) -> np.ndarray:
        xs, lo, hi = sorted_clipped(data, bounds, "raise")
        f = median_value(xs, lo, hi)
        ls = local_sensitivity_median(data, bounds)
        if ls == 0.0:
            return np.full(size, f)
        return lattice_laplace(np.full(size, f), ls / epsilon, 2.0**-20, rng=rng)

    return mech


def local_sensitivity_mean_noise(epsilon: float, bounds: tuple[float, float]) -> Callable[..., np.ndarray]:
    """``mean + Lap(LS/epsilon)`` (NOT private): the noise scale reveals n."""
    from dpkit.noise import lattice_laplace
    from dpkit.stability import local_sensitivity_mean
    from dpkit.stability._util import mean_value, sorted_clipped

    def mech(data: Any, rng: Any, size: int) -> np.ndarray:
        xs, lo, hi = sorted_clipped(data, bounds, "raise")
        f = mean_value(xs, lo, hi)
        ls = local_sensitivity_mean(data, bounds)
        return lattice_laplace(np.full(size, f), ls / epsilon, 2.0**-20, rng=rng)

    return mech
