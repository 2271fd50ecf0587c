"""Differentially private variance and standard deviation of bounded values.

The values are clamped to the public ``bounds = (lo, hi)`` and centred at the midpoint ``mid``:
``y = x - mid`` with ``|y| <= r = Δ/2`` (``Δ = hi - lo``). Three noisy sums are released (exact sums,
public lattices, :class:`dpkit.stats.sums.LatticeSum` and the discrete Laplace count):

- ``C̃ = n + DLap(k/ε_C)`` (add/remove sensitivity ``k``),
- ``Ã = Σy + Lap(k r/ε_A)`` (``|y| <= r``),
- ``B̃ = Σy² + Lap(k r²/ε_B)`` (``0 <= y² <= r²``),

with ``k = max_rows`` of a privacy unit (else 1) and the budget split
``(ε_C, ε_A, ε_B) = (0.3, 0.2, 0.5)·ε``. Why this split: linearising
``v̂ = B̃/C̃ - (Ã/C̃)²`` gives the error ``(δB - 2ȳ δA + (2ȳ² - m₂) δC)/n``; with Laplace noise the
total is minimised by ``ε_i ∝ a_i^(2/3)`` for the coefficients ``a_B = r²``, ``a_A = 2|ȳ| r``,
``a_C = |m₂ - 2ȳ²|``, and for data spread over the range (``ȳ`` small, ``m₂ ~ r²/3``) that is about
half the budget on ``Σy²``, most of the rest on the count.

The estimate is ``v = clip(B̃/C̃ - (Ã/C̃)², 0, r²)`` (centring makes it shift-invariant and keeps the
cancellation small), then the ``ddof`` correction ``v·C̃/(C̃ - ddof)`` (post-processing). When
``C̃ <= 1 + ddof`` there is no usable information and the variance of the uniform law on
``[lo, hi]``, ``Δ²/12``, is returned. ``std`` is the square root of the variance release.

Under replace-one neighbours ``n`` is public: only ``Ã`` (sensitivity ``2r``) and ``B̃``
(sensitivity ``r²``) are released, split ``(0.3, 0.7)·ε``, and divided by the exact ``n``.

Guarantee: pure ``epsilon``-DP (basic composition of the parts, each rounded down), cost
``PureDP(epsilon)`` charged once. The near-textbook recipe (Near & Abuah ch. 12: noisy count, noisy sum,
noisy sum of squared deviations from a *noisy* mean) is replaced by the centred single pass above,
which needs no intermediate mean.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.privacy import PureDP
from dpkit.mechanisms._release import Release
from dpkit.stats import _common
from dpkit.stats.means import _centred
from dpkit.stats.sums import LatticeSum, exact_sum, float_up, widen

__all__ = ["std", "variance"]

SPLIT = (0.3, 0.2, 0.5)  # count, Σy, Σy²   (add/remove, privacy unit)
SPLIT_REPLACE = (0.3, 0.7)  # Σy, Σy²       (replace-one)
_SLACK = 2.0**-40


class _VariancePlan:
    def __init__(self, x: np.ndarray, lo: float, hi: float, eps: float, nb: Any, ddof: int) -> None:
        y, _mid, r = _centred(x, lo, hi)
        R = float_up(Fraction(r) ** 2)
        y2 = np.minimum(y * y, R)  # fl(y²) <= fl(r²) <= R: the minimum is only a guard
        self.r, self.R, self.ddof = r, R, ddof
        self.n = int(x.size)
        self.uniform_var = (hi - lo) ** 2 / 12.0 if math.isfinite((hi - lo) ** 2) else R / 3.0
        self.replace = _common.is_replace(nb)
        k = _common.unit_rows(nb)
        if self.replace:
            eps_a, eps_b = _common.split(eps, SPLIT_REPLACE)
            self.lat_a = LatticeSum(2 * Fraction(r), eps_a)
            self.lat_b = LatticeSum(Fraction(R), eps_b)
            self.t_count = None
        else:
            eps_c, eps_a, eps_b = _common.split(eps, SPLIT)
            from dpkit.mechanisms.discrete import discrete_laplace_scale

            self.t_count = discrete_laplace_scale(k, eps_c)
            self.lat_a = LatticeSum(k * Fraction(r), eps_a)
            self.lat_b = LatticeSum(k * Fraction(R), eps_b)
        self.ra = self.lat_a.centre(exact_sum(y))
        self.rb = self.lat_b.centre(exact_sum(y2))

    @property
    def scale(self) -> float:
        return self.lat_b.b

    def estimate(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Post-processing of the released parts (vectorised)."""
        c = np.asarray(c, dtype=np.float64)
        ok = c > 1 + self.ddof
        cs = np.where(ok, c, 2.0 + self.ddof)
        with np.errstate(over="ignore", invalid="ignore"):
            v = np.clip(b / cs - (a / cs) ** 2, 0.0, self.R)
            v = v * (cs / (cs - self.ddof))
        return np.where(ok, v, self.uniform_var)

    def draw(self, rng: Any, size: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        from dpkit.noise import sample_discrete_laplace

        parts: dict[str, np.ndarray] = {}
        if self.t_count is not None:
            c = self.n + np.asarray(sample_discrete_laplace(self.t_count, size, rng=rng), dtype=np.int64)
            parts["count"] = c
        else:
            c = np.full(size, self.n, dtype=np.int64)
        a = self.lat_a.draw(self.ra, size, rng)
        b = self.lat_b.draw(self.rb, size, rng)
        parts["centred_sum"] = a
        parts["centred_sum_of_squares"] = b
        return self.estimate(a, b, c), parts

    def interval_fn(self, a: float, b: float, c: int | None) -> Any:
        """Conservative interval for the exact (ddof-corrected) variance of the clamped data, from
        the released parts: union bound over the noisy parts, worst case of ``B/n - (A/n)²`` over the
        box, clipped to ``[0, r²]`` before the ``ddof`` factor. Valid when the true ``n > ddof``."""
        lat_a, lat_b, t, R, ddof, n_pub = self.lat_a, self.lat_b, self.t_count, self.R, self.ddof, self.n

        def interval(confidence: float) -> tuple[float, float]:
            from dpkit.mechanisms.accuracy import discrete_laplace_halfwidth

            parts = 2 if t is None else 3
            each = 1.0 - (1.0 - confidence) / parts
            if t is None:
                n_lo = n_hi = n_pub
            else:
                h = discrete_laplace_halfwidth(t, each)
                n_lo, n_hi = max(int(c) - h, 1), int(c) + h
            if n_hi <= ddof or (n_pub == 0 and t is None):
                return 0.0, R * (ddof + 1)
            ha, hb = lat_a.halfwidth(each), lat_b.halfwidth(each)
            a_lo, a_hi = widen(a - ha, a + ha)
            b_lo, b_hi = widen(b - hb, b + hb)
            b_lo, b_hi = max(b_lo, 0.0), b_hi
            # A/n over the box: its square's min and max
            q_lo, q_hi = sorted([a_lo / n_lo, a_lo / n_hi, a_hi / n_lo, a_hi / n_hi])[::3]
            sq_min = 0.0 if q_lo <= 0.0 <= q_hi else min(q_lo * q_lo, q_hi * q_hi)
            sq_max = max(q_lo * q_lo, q_hi * q_hi)
            v_hi = (b_hi / n_lo) - sq_min
            v_lo = (b_lo / n_hi) - sq_max
            v_lo, v_hi = widen(v_lo, v_hi, _SLACK * max(R, abs(v_lo), abs(v_hi)))
            v_lo, v_hi = max(v_lo, 0.0), min(max(v_hi, 0.0), R)
            v_lo = min(v_lo, v_hi)  # only when the parts' intervals missed (an empty box): keep a <= b
            f_lo = n_hi / (n_hi - ddof) if n_hi > ddof else 1.0
            f_hi = n_lo / (n_lo - ddof) if n_lo > ddof else float(ddof + 1)
            return max(0.0, math.nextafter(v_lo * f_lo, -math.inf)), math.nextafter(v_hi * f_hi, math.inf)

        return interval


def _release(name: str, values: Any, bounds: Any, epsilon: float, ddof: Any, neighbours: Any, accountant: Any,
             rng: Any, nan_policy: str, description: Any) -> Release:
    lo, hi = _common.bounds(bounds)
    eps = check.epsilon(epsilon)
    ddof = check.integer("ddof", ddof, minimum=0)
    nb = _common.neighbours_of(neighbours, accountant)
    accountant, rng, description = _common.setup(accountant, rng, description)
    x = _common.data(values, nan_policy=nan_policy)
    plan = _VariancePlan(x, lo, hi, eps, nb, ddof)
    cost = PureDP(eps)
    params = {"epsilon": eps, "bounds": [lo, hi], "ddof": ddof, "neighbours": nb.describe(),
              "split": list(SPLIT_REPLACE if plan.replace else SPLIT)}
    receipt = _common.pay(accountant, cost, mechanism=name, rng=rng, params=params, scale=plan.scale,
                          description=description)
    out, parts_arr = plan.draw(rng, 1)
    parts = {k: (int(v[0]) if v.dtype.kind == "i" else float(v[0])) for k, v in parts_arr.items()}
    parts["centre"] = _centred(np.zeros(0), lo, hi)[1]
    var_interval = plan.interval_fn(parts["centred_sum"], parts["centred_sum_of_squares"], parts.get("count"))
    value = float(out[0])
    if name == "std":
        value = math.sqrt(value)

        def interval(confidence: float) -> tuple[float, float]:
            a, b = var_interval(confidence)
            return math.nextafter(math.sqrt(a), -math.inf) if a > 0 else 0.0, math.nextafter(math.sqrt(b), math.inf)

        fn = interval
    else:
        fn = var_interval
    return Release(value=value, mechanism=name, scale=plan.scale, cost=cost, receipt=receipt, secure=rng.secure,
                   params=params, parts=parts, interval_fn=fn)


def variance(values: Any, bounds: Any, epsilon: float, *, ddof: int = 0, neighbours: Any = None,
             accountant: Any = None, rng: Any = None, nan_policy: str = "raise", description: str = "") -> Release:
    """Differentially private variance of ``values`` clamped to ``bounds = (lo, hi)`` (see the module docstring).

    Guarantee: pure ``epsilon``-DP, cost ``PureDP(epsilon)``; add/remove one record (default; ``n`` private),
    privacy unit (sensitivities × ``max_rows``) or replace-one (``n`` public). ``ddof`` (integer >= 0) as in
    numpy, applied as post-processing. ``Release.parts``: the noisy centred sum, sum of squares, count
    (not under replace-one) and the centre.

    Error bound: ``Release.interval(c)`` holds the exact variance of the clamped data with probability
    ``>= c`` (when ``n > ddof``): union bound over the parts (``(1-c)/3`` each), the worst case of
    ``B/n - (A/n)²`` over their intervals, clipped to ``[0, r²]`` (``r = Δ/2``), times the ``ddof`` factor.
    Roughly ``|error| <~ (b_B + 2 r b_A + r² b_C) ln(3/(1-c)) / n`` with the parts' scales ``b``.

    >>> from dpkit.noise import deterministic_source
    >>> r = variance([0.0, 10.0] * 500, (0, 10), 1.0, rng=deterministic_source(4))
    >>> r.mechanism, 20.0 < r.value <= 25.0
    ('variance', True)
    """
    return _release("variance", values, bounds, epsilon, ddof, neighbours, accountant, rng, nan_policy, description)


def std(values: Any, bounds: Any, epsilon: float, *, ddof: int = 0, neighbours: Any = None,
        accountant: Any = None, rng: Any = None, nan_policy: str = "raise", description: str = "") -> Release:
    """Differentially private standard deviation: the square root of :func:`variance` (same guarantee,
    cost, parts; ``interval`` is the square root of the variance interval).

    >>> from dpkit.noise import deterministic_source
    >>> r = std([0.0, 10.0] * 500, (0, 10), 1.0, rng=deterministic_source(4))
    >>> r.mechanism, 4.4 < r.value <= 5.0
    ('std', True)
    """
    return _release("std", values, bounds, epsilon, ddof, neighbours, accountant, rng, nan_policy, description)
