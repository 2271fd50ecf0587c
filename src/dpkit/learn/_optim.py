"""Deterministic optimisation helpers of :mod:`dpkit.learn` (no randomness, no budget): the two margin losses of
the linear classifiers and a damped Newton solver for smooth strongly convex objectives.

Everything here is post-processing or a public computation; privacy is argued where these are called.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["LOSSES", "loss_d1", "loss_d2", "loss_value", "newton"]

#: The margin losses ``l(z)`` of ``z = y w.x`` (``y`` in {-1, +1}): both decreasing, convex, 1-Lipschitz.
LOSSES = ("logistic", "huber")


def loss_value(kind: str, z: np.ndarray, h: float) -> np.ndarray:
    """``l(z)``: logistic ``log(1 + e^-z)``; Huber hinge (Chaudhuri et al. 2011, eq. 7) ``0`` for
    ``z > 1 + h``, ``(1 + h - z)^2 / (4h)`` for ``|1 - z| <= h``, ``1 - z`` for ``z < 1 - h``."""
    if kind == "logistic":
        return np.logaddexp(0.0, -z)
    out = np.where(z > 1.0 + h, 0.0, (1.0 + h - z) ** 2 / (4.0 * h))
    return np.where(z < 1.0 - h, 1.0 - z, out)


def loss_d1(kind: str, z: np.ndarray, h: float) -> np.ndarray:
    """``l'(z)`` (in ``[-1, 0]``)."""
    if kind == "logistic":
        return -0.5 * (1.0 - np.tanh(0.5 * z))  # -1 / (1 + e^z), stable for any z
    out = np.where(z > 1.0 + h, 0.0, -(1.0 + h - z) / (2.0 * h))
    return np.where(z < 1.0 - h, -1.0, out)


def loss_d2(kind: str, z: np.ndarray, h: float) -> np.ndarray:
    """``l''(z)`` (at most ``c``: ``1/4`` logistic, ``1/(2h)`` Huber)."""
    if kind == "logistic":
        s = 0.5 * (1.0 + np.tanh(0.5 * z))
        return s * (1.0 - s)
    return np.where(np.abs(1.0 - z) <= h, 1.0 / (2.0 * h), 0.0)


def newton(fun: Callable[[np.ndarray], tuple[float, np.ndarray, np.ndarray]], w0: np.ndarray, *,
           max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """Minimise a smooth strongly convex ``fun(w) -> (value, gradient, Hessian)`` by Newton's method with a
    backtracking (Armijo) line search, from ``w0``; stops when the Newton decrement is below ``tol`` (relative
    to ``1 + |value|``) or after ``max_iter`` steps. Deterministic."""
    w = np.array(w0, dtype=np.float64)
    f, g, H = fun(w)
    for _ in range(max_iter):
        try:
            step = np.linalg.solve(H, g)
        except np.linalg.LinAlgError:
            step = g
        dec = float(g @ step)
        if not np.isfinite(dec) or dec <= tol * (1.0 + abs(f)):
            break
        t = 1.0
        while True:
            w_new = w - t * step
            f_new, g_new, H_new = fun(w_new)
            if f_new <= f - 0.25 * t * dec or t < 1e-12:
                break
            t *= 0.5
        w, f, g, H = w_new, f_new, g_new, H_new
    return w
