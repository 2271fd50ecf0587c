"""Mechanisms for testing the auditors.

NON-PRIVATE FIXTURES: ``pinq_resampling_average``, ``local_sensitivity_median`` and
``half_sensitivity_laplace`` are deliberately broken (each claims epsilon-DP and is not). They
exist only so that the tests can show the auditor catches them; they live under tests/ and
must never be moved into src/.

The ``reference_*`` mechanisms are correct textbook implementations, used as negative controls
(the auditor must not flag them) independently of dpkit.mechanisms.

Every fixture has the auditor's vectorized signature ``fn(data, rng, size)`` and draws its noise
from a numpy generator seeded from the dpkit RandomSource it is given (test-only: numpy noise
is fine here, never in src/).
"""

from __future__ import annotations

import math

import numpy as np

from dpkit.noise.source import RandomSource


def numpy_generator(rng: RandomSource) -> np.random.Generator:
    """A numpy generator seeded from 256 bits of the dpkit source (test-only)."""
    return np.random.default_rng(rng.uint64(4))


# ------------------------------------------------------------------------------------------
# NON-PRIVATE fixtures
# ------------------------------------------------------------------------------------------


def pinq_resampling_average(data, rng: RandomSource, size: int, *, lo: float = -1.0, hi: float = 1.0,
                            epsilon: float = 1.0) -> np.ndarray:
    """NON-PRIVATE. Li et al. Alg 2 (PINQ "NoisyAverage Resampling"): A = (S + Lap((hi - lo)/eps)) / C,
    redrawn until A is in [lo, hi]. The resampling renormalises by a data-dependent mass.

    With D = 30 x {-1}, D' = D + {+1}, range [-1, 1], eps = 1 the log density ratio at output -1
    is 1.457 > 1. (The book's own pair D = {-1}, D' = {-1, 1} has ratio exactly e^eps.)
    """
    x = np.asarray(data, dtype=np.float64)
    gen = numpy_generator(rng)
    s, c = float(np.sum(x)), x.size
    if c == 0:
        return gen.uniform(lo, hi, size)
    b = (hi - lo) / epsilon
    out = np.empty(size)
    todo = np.arange(size)
    while todo.size:
        a = (s + gen.laplace(0.0, b, todo.size)) / c
        ok = (a >= lo) & (a <= hi)
        out[todo[ok]] = a[ok]
        todo = todo[~ok]
    return out


def local_sensitivity(x: np.ndarray) -> float:
    """Local sensitivity of the median of an odd-length sample under replacement of one record."""
    x = np.sort(np.asarray(x, dtype=np.float64))
    m = x.size // 2
    left = x[m] - x[m - 1] if m >= 1 else 0.0
    right = x[m + 1] - x[m] if m + 1 < x.size else 0.0
    return float(max(left, right))


def local_sensitivity_median(data, rng: RandomSource, size: int, *, epsilon: float = 1.0) -> np.ndarray:
    """NON-PRIVATE. The median released with Laplace noise of scale LS(D)/eps (local, not global,
    sensitivity). The replacement neighbours D = [0, 0, 0, 1, 1] (median 0, LS 1) and
    D' = [0, 0, 0, 0, 1] (median 0, LS 0) give Lap(1) noise on D and the exact median 0 on D':
    P[output = 0] is 0 on D and 1 on D', an infinite privacy loss.
    """
    x = np.asarray(data, dtype=np.float64)
    med = float(np.median(x))
    ls = local_sensitivity(x)
    if ls == 0.0:
        return np.full(size, med)
    return med + numpy_generator(rng).laplace(0.0, ls / epsilon, size)


def half_sensitivity_laplace(data, rng: RandomSource, size: int, *, epsilon: float = 1.0,
                             sensitivity: float = 1.0) -> np.ndarray:
    """NON-PRIVATE. A sum with Laplace noise calibrated to HALF the sensitivity: claims eps, is 2 eps."""
    return float(np.sum(data)) + numpy_generator(rng).laplace(0.0, 0.5 * sensitivity / epsilon, size)


def svt_stoddard(queries, rng: RandomSource, size: int, *, epsilon: float = 1.0, threshold: float = 0.0,
                 sensitivity: float = 1.0) -> np.ndarray:
    """NON-PRIVATE. Lyu et al. Alg 5 (Stoddard et al.): threshold noise rho = Lap(2 sensitivity / eps),
    NO query noise and no cutoff; outputs one bool per query (True = above the noisy threshold).
    With q(D) = (0, 1), q(D') = (1, 0) the pattern (False, True) has probability 0.1967 on D and 0 on D'.
    """
    q = np.asarray(queries, dtype=np.float64)
    rho = numpy_generator(rng).laplace(0.0, 2.0 * sensitivity / epsilon, size)
    return q[None, :] >= threshold + rho[:, None]


# ------------------------------------------------------------------------------------------
# correct reference mechanisms (negative controls)
# ------------------------------------------------------------------------------------------


def reference_laplace(data, rng: RandomSource, size: int, *, epsilon: float = 1.0,
                      sensitivity: float = 1.0) -> np.ndarray:
    """Correct: sum + Lap(sensitivity / eps)."""
    return float(np.sum(data)) + numpy_generator(rng).laplace(0.0, sensitivity / epsilon, size)


def reference_gaussian(data, rng: RandomSource, size: int, *, epsilon: float = 0.5, delta: float = 1e-5,
                       sensitivity: float = 1.0) -> np.ndarray:
    """Correct for eps < 1: the classic Gaussian mechanism, sigma = sqrt(2 ln(1.25/delta)) sensitivity / eps."""
    sigma = math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon
    return float(np.sum(data)) + numpy_generator(rng).normal(0.0, sigma, size)


def reference_exponential(scores, rng: RandomSource, size: int, *, epsilon: float = 1.0,
                          sensitivity: float = 1.0) -> np.ndarray:
    """Correct: index i with probability proportional to exp(eps * score_i / (2 sensitivity))."""
    s = np.asarray(scores, dtype=np.float64)
    logits = epsilon * s / (2.0 * sensitivity)
    p = np.exp(logits - logits.max())
    return numpy_generator(rng).choice(s.size, size=size, p=p / p.sum())


def reference_report_noisy_max(scores, rng: RandomSource, size: int, *, epsilon: float = 1.0,
                               sensitivity: float = 1.0) -> np.ndarray:
    """Correct: argmax of score_i + Lap(2 sensitivity / eps)."""
    s = np.asarray(scores, dtype=np.float64)
    noisy = s + numpy_generator(rng).laplace(0.0, 2.0 * sensitivity / epsilon, (size, s.size))
    return np.argmax(noisy, axis=1)
