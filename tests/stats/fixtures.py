"""Test-only helpers for the dpkit.stats tests.

NON-PRIVATE FIXTURES: ``pinq_resampling_average`` (Li et al. Alg 2) and ``printed_clamp_plan`` (Li Alg 3
with the book's calibration) are deliberately broken. They exist only so that the tests can show that the
auditor or the exact calculator catches them; they live under tests/ and must never move into src/.

Also: the bad-input check of the BAD tables (``assert_refused``, a thin adapter over
:func:`dpkit.audit.testing.assert_refused_cleanly`), exact closed-form laws used by the privacy tests, and
re-exports of dpkit.audit.testing's byte-counting source and chi-square helper.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dpkit import PureDP
from dpkit.audit.testing import P_MIN, SECRET, CountingSource, assert_refused_cleanly, chi2_pvalue

__all__ = ["P_MIN", "SECRET", "SECRET_TEXTS", "CountingSource", "assert_refused", "chi2_pvalue", "clamp_mean_logpmf",
           "dlap_binned_pvalue", "dlap_cdf", "printed_clamp_plan"]

# P_MIN (1e-7): a correct implementation fails a statistical test with probability < 1e-7; SECRET: a data value
# that must never appear in an error message, in any of these forms:
SECRET_TEXTS = ("987654", "987,654", "9.87")


def assert_refused(fn, call, err, param):
    """``call(f)`` must raise ``err`` naming ``param``, with no data value in the message, nothing charged
    and no randomness drawn: ``f(values, **kw)`` runs ``fn`` through
    :func:`dpkit.audit.testing.assert_refused_cleanly` (an accountant of the relation given as
    ``neighbours=``, if any, and a byte-counting source), which makes those checks, then raises the error."""
    calls = []

    def f(values, **kw):
        calls.append(values)
        raise assert_refused_cleanly(fn, (values,), kw, error=err, param=param, secrets=SECRET_TEXTS,
                                     budget=PureDP(10.0), seed=2)

    with pytest.raises(err):
        call(f)
    assert calls


def dlap_cdf(t: float, k: np.ndarray) -> np.ndarray:
    """P[Z <= k] for the discrete Laplace law of scale t (P[Z = k] ∝ exp(-|k|/t)), integers k."""
    k = np.asarray(k, dtype=np.float64)
    q = math.exp(-1.0 / t)
    with np.errstate(over="ignore"):
        lower = q ** (-k) / (1.0 + q)  # k <= -1: P[Z <= k] = q^|k| / (1 + q)
        upper = 1.0 - q ** (k + 1.0) / (1.0 + q)  # k >= 0
        return np.where(k < 0, lower, upper)


def dlap_binned_pvalue(z: np.ndarray, t: float, bins: int = 40) -> float:
    """Chi-square p-value of integer samples ``z`` against the discrete Laplace law of scale ``t``,
    on ``bins`` cells of roughly equal probability (cell edges at integer quantiles)."""
    z = np.asarray(z, dtype=np.int64)
    span = max(1, math.ceil(t * 12))
    qs = np.unique(np.round(np.linspace(-span, span, bins + 1)).astype(np.int64))
    # cells: (-inf, qs[0]], (qs[0], qs[1]], ..., (qs[-1], inf)
    cdf = dlap_cdf(t, qs)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    idx = np.searchsorted(qs, z, side="left")
    counts = np.bincount(idx, minlength=qs.size + 1)
    return chi2_pvalue(counts, probs)


# ------------------------------------------------------------------------------------------
# Li et al. Alg 3: the exact output law of dpkit's sampler (closed form, log space)
# ------------------------------------------------------------------------------------------
_LOG_HALF = math.log(0.5)


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x < 0."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.where(x > -0.693, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _log_le(b: np.ndarray, lq: float) -> np.ndarray:
    """log P[W <= b] for W = floor(2Y), Y ~ Lap(beta) (lq = log q = -1/(2 beta))."""
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        return np.where(b >= 0, np.log1p(-0.5 * np.exp((b + 1.0) * lq)), _LOG_HALF + (-1.0 - b) * lq)


def clamp_mean_logpmf(s_units: int, n: int, lo_u: int, hi_u: int, beta: float, gamma: float) -> np.ndarray:
    """Exact log pmf of ``j`` over ``lo_u..hi_u`` for dpkit's Alg 3 sampler (``_ClampPlan``), in closed form.

    n >= 1: ``j = clip(floor((W + 2 s + n) / (2n)))`` with ``P[W = w] = (1-q) q^w / 2`` for ``w >= 0`` and
    ``P[W = -1-w] = P[W = w]``, ``q = exp(-1/(2 beta))``; so ``j`` is the cell of ``W`` between the
    boundaries ``a_j = 2 n j - 2 s - n``. An interior cell ``[a, a + 2n - 1]`` on one side of the
    symmetry point has mass ``q^d (1 - q^(2n)) / 2`` with ``d = a`` (``a >= 0``) or ``d = -a - 2n``
    (``a + 2n - 1 <= -1``); a cell containing both 0 and -1 has mass ``1 - (q^-a + q^(a+2n))/2``.
    n = 0: endpoint masses ``e^-gamma/2`` plus the uniform on ``[lo_u, hi_u]`` rounded to the grid.
    """
    j = np.arange(lo_u, hi_u + 1, dtype=np.int64)
    if n == 0:
        m = hi_u - lo_u
        lu = math.log(-math.expm1(-gamma)) - math.log(m)
        out = np.full(j.size, lu)
        out[0] = out[-1] = np.logaddexp(_LOG_HALF - gamma, lu - math.log(2.0))
        return out
    lq = -1.0 / (2.0 * beta)
    width = 2 * n
    a = (width * j - 2 * s_units - n)[1:-1]  # interior cells [a, a + width - 1]
    b = a + width - 1
    d = np.where(a >= 0, a, -1 - b)
    out = np.empty(j.size)
    out[1:-1] = _LOG_HALF + d * lq + float(_log1mexp(np.array(width * lq)))
    straddle = np.flatnonzero((a < 0) & (b >= 0))
    for i in straddle:
        ai, bi = float(a[i]), float(b[i])
        out[1 + i] = math.log1p(-0.5 * (math.exp(-ai * lq) + math.exp((bi + 1.0) * lq)))
    a_first = width * (lo_u + 1) - 2 * s_units - n  # j = lo_u: W <= a_first - 1
    a_last = width * hi_u - 2 * s_units - n  # j = hi_u: W >= a_last, i.e. -1 - W <= -1 - a_last
    out[0] = float(_log_le(np.array(a_first - 1), lq))
    out[-1] = float(_log_le(np.array(-1 - a_last), lq))
    return out


def printed_clamp_plan(values: Any, lo: float, hi: float, epsilon: float) -> Any:
    """NON-PRIVATE. dpkit's exact Alg 3 sampler with the book's calibration ``ε₀ = ε`` (no correction):
    ``max(ε, ln 2 + ε/2)``-DP only."""
    from fractions import Fraction

    from dpkit.core._exact import float_at_least, float_at_most
    from dpkit.core.neighbours import AddRemove
    from dpkit.stats.means import _ClampPlan

    plan = _ClampPlan(np.asarray(values, dtype=np.float64), lo, hi, max(epsilon, 2.0), AddRemove())
    plan.eps0 = epsilon
    plan.beta = float_at_least(Fraction(plan.M) / Fraction(epsilon))
    plan.gamma = float_at_most(Fraction(plan.M) / (2 * Fraction(plan.beta)))
    return plan


