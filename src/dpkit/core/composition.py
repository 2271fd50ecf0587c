"""Composition theorems: how privacy losses add up over several releases.

Every function here returns an *upper bound* on the privacy loss that is valid for the
adaptive composition of the given mechanisms (the analyst may choose each mechanism after
seeing the previous outputs).

- :func:`advanced_composition`: Dwork, Rothblum & Vadhan 2010 (Dwork & Roth Thm 3.20),
  exact form ``eps' = sqrt(2 k ln(1/delta')) eps + k eps (e^eps - 1)`` for k ε-DP mechanisms,
  at the cost of an additional ``delta'``.
- :func:`optimal_composition`: Kairouz, Oh & Viswanath 2015 (Thm 3.3) — the *exact*
  optimal (tightest possible) ε for the k-fold adaptive composition of ε-DP mechanisms at a
  given δ. The k-fold composition of ε-randomised response dominates every such
  composition, and its privacy profile is, for every ``eps_g`` (not only at the theorem's
  breakpoints ``(k - 2i) eps``),

  ``delta(eps_g) = (1 + e^eps)^-k  sum_{l=0}^{k} C(k, l) max(0, e^{(k-l) eps} - e^{eps_g} e^{l eps})``

  (the hockey-stick divergence of two product Bernoulli laws). At ``eps_g = (k - 2i) eps``
  this is the theorem's ``delta_i``. We return the smallest ``eps_g >= 0`` with
  ``delta(eps_g) <= delta`` over the continuous ``eps_g``: a binary search over the
  breakpoints ``(k - 2i) eps`` finds the interval, inside which ``delta = A - e^{eps_g} B``
  is solved in closed form; the candidate is verified (and, if rounding requires, moved up)
  with the sum evaluated in log space (log-binomial coefficients, ``log(1 - e^x)`` per term,
  log-sum-exp), which is stable for k up to 10^5 and beyond. To absorb floating-point error
  the returned value satisfies the *computed* ``delta(eps_g) <= delta (1 - 1e-9)``: it is
  never below the exact optimum by more than a negligible amount and in practice above it.
- :func:`compose_homogeneous`: the minimum of basic (``k eps``), DRV and KOV.
- :func:`zcdp_compose`: zCDP adds (Bun & Steinke 2016, Lemma 2.3): ``rho = sum rho_i``.
- :func:`gaussian_epsilon`: tight ε of k (optionally Poisson-subsampled) Gaussian steps.
  Without subsampling it is exact and needs nothing extra (k Gaussians of noise multiplier σ
  are one Gaussian with ``mu = sqrt(k) / sigma``; Balle & Wang 2018's analytic privacy
  profile). With subsampling it delegates to Google's ``dp-accounting`` (PLD or RDP
  accountant), an optional extra: ``pip install dpkit[accounting]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, MissingDependency, WrongType

__all__ = [
    "MissingDependency",
    "advanced_composition",
    "compose_homogeneous",
    "gaussian_delta",
    "gaussian_epsilon",
    "kov_delta",
    "optimal_composition",
    "zcdp_compose",
]

#: Relative safety margin on delta used by the numerical searches (see module docstring).
_REL_MARGIN = 1e-9


def _k(k: Any) -> int:
    return check.integer("k", k, minimum=0)


_PLD_MAX_STEPS = 10**6

#: The exact KOV computation holds arrays of size k + 1: larger k is refused by :func:`kov_delta` and
#: :func:`optimal_composition` (and skipped by :func:`compose_homogeneous`, which then uses min(kε, DRV)).
KOV_MAX_K = 10**6


def _kov_k(k: Any) -> int:
    k = _k(k)
    if k > KOV_MAX_K:
        raise InvalidParameter("k", f"must be <= {KOV_MAX_K} for the exact (KOV) computation")
    return k


def advanced_composition(k: int, epsilon: float, delta_prime: float) -> float:
    """Dwork–Rothblum–Vadhan advanced composition (exact form).

    The adaptive composition of ``k`` mechanisms, each ε-DP, is (ε', δ')-DP with
    ``ε' = sqrt(2 k ln(1/δ')) ε + k ε (e^ε − 1)``. (For (ε, δ)-DP mechanisms the same ε'
    holds with total δ ``k δ + δ'``.)

    Parameters: ``k`` integer >= 0, ``epsilon`` >= 0, ``delta_prime`` in (0, 1).
    Returns ``inf`` when ``e^ε`` overflows.
    """
    k = _k(k)
    epsilon = check.nonnegative("epsilon", epsilon)
    delta_prime = check.delta(delta_prime, "delta_prime", allow_zero=False)
    if k == 0 or epsilon == 0:
        return 0.0
    try:
        growth = math.expm1(epsilon)
    except OverflowError:
        return math.inf
    return math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) * epsilon + k * epsilon * growth


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x < 0, accurate everywhere (Mächler 2012)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):  # np.where evaluates both branches
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


class _KOV:
    """The privacy profile of the k-fold composition of ε-randomised response, in log space."""

    def __init__(self, k: int, epsilon: float) -> None:
        from scipy import special

        # Terms l with (k - 2l) eps > eps_g >= 0 can be non-zero, i.e. l < k/2.
        lmax = (k - 1) // 2
        ls = np.arange(lmax + 1, dtype=float)
        log_p = -np.logaddexp(0.0, -epsilon)  # log(e^eps / (1 + e^eps))
        log_q = -np.logaddexp(0.0, epsilon)   # log(1 / (1 + e^eps))
        log_binom = special.gammaln(k + 1.0) - special.gammaln(ls + 1.0) - special.gammaln(k - ls + 1.0)
        self.log_pmf = log_binom + (k - ls) * log_p + ls * log_q  # log P[l "bad" coordinates]
        self.gaps = (k - 2.0 * ls) * epsilon                        # privacy loss of those outcomes
        # On an interval where l = 0..j are active, delta(eps_g) = A_j - e^{eps_g} B_j.
        self.log_a = np.logaddexp.accumulate(self.log_pmf)
        self.log_b = np.logaddexp.accumulate(self.log_pmf - self.gaps)

    def log_delta(self, eps_g: float) -> float:
        active = self.gaps > eps_g
        if not np.any(active):
            return -math.inf
        terms = self.log_pmf[active] + _log1mexp(eps_g - self.gaps[active])
        from scipy import special

        return float(special.logsumexp(terms))

    def smallest_epsilon(self, log_target: float) -> float:
        """Smallest eps_g >= 0 with (computed) log delta(eps_g) <= log_target."""
        f = lambda e: self.log_delta(e) - log_target
        if f(0.0) <= 0:
            return 0.0
        gaps = self.gaps
        left = np.maximum(np.append(gaps[1:], 0.0), 0.0)  # interval j is [left_j, gaps_j)
        # smallest j with delta(left_j) > target (delta(left_j) grows with j; true for the last j)
        j = _exact.first_true(lambda i: f(float(left[i])) > 0, 0, len(gaps) - 1)
        right = float(gaps[j])
        # closed form on the interval: e^{eps_g} B_j = A_j - target
        x = log_target - self.log_a[j]
        if x < 0:
            c = float(self.log_a[j] + _log1mexp(np.array(x)) - self.log_b[j])
            c = min(max(c, float(left[j])), right)
            for _ in range(8):  # absorb rounding: step up until the stable evaluation agrees
                if f(c) <= 0:
                    return c
                c = min(right, c + 1e-13 * max(1.0, abs(c)))
        r = _smallest_feasible(f, float(left[j]), right)
        if f(r) > 0:  # pragma: no cover - only if rounding broke monotonicity; k*eps is always feasible
            r = _smallest_feasible(f, r, float(gaps[0]))
        return r


def kov_delta(k: int, epsilon: float, epsilon_g: float) -> float:
    """The exact δ at which the k-fold adaptive composition of ε-DP mechanisms is (ε_g, δ)-DP
    (Kairouz, Oh & Viswanath 2015; hockey-stick divergence of k-fold ε-randomised response)."""
    k = _kov_k(k)
    epsilon = check.nonnegative("epsilon", epsilon)
    epsilon_g = check.nonnegative("epsilon_g", epsilon_g)
    if k == 0 or epsilon == 0:
        return 0.0
    return math.exp(_KOV(k, epsilon).log_delta(epsilon_g))


def _smallest_feasible(f: Any, lo: float, hi: float) -> float:
    """Smallest x in [lo, hi] with f(x) <= 0 for a non-increasing f with f(hi) <= 0 (:func:`_exact.bisect`
    to a relative 1e-15; returns a point where f <= 0 holds as computed)."""

    def ok(x: float) -> bool:
        return f(x) <= 0

    if ok(lo):
        return lo
    return _exact.bisect(ok, lo, hi, rel_tol=1e-15, max_iter=300)[1]


def optimal_composition(k: int, epsilon: float, delta: float) -> float:
    """Optimal composition (Kairouz, Oh & Viswanath 2015, Thm 3.3): the smallest ε_g such that the
    adaptive composition of ``k`` ε-DP mechanisms is (ε_g, δ)-DP.

    This is exact for the class of all ε-DP mechanisms (it is attained by randomised response),
    so it is never larger than ``k ε`` nor than :func:`advanced_composition` at the same δ.
    See the module docstring for the formula and the numerical method.

    Parameters: ``k`` integer >= 0 (at most ``KOV_MAX_K``), ``epsilon`` >= 0, ``delta`` in [0, 1) (δ = 0 gives
    ``k ε``).
    """
    k = _kov_k(k)
    epsilon = check.nonnegative("epsilon", epsilon)
    delta = check.delta(delta)
    if k == 0 or epsilon == 0:
        return 0.0
    if delta == 0 or not math.isfinite(k * epsilon):
        return k * epsilon
    return _KOV(k, epsilon).smallest_epsilon(math.log(delta) + math.log1p(-_REL_MARGIN))


def compose_homogeneous(k: int, epsilon: float, delta_prime: float) -> float:
    """The best ε we know for k adaptive ε-DP mechanisms at extra δ': ``min(k ε, DRV, KOV)``.

    ``delta_prime`` in [0, 1); with ``delta_prime = 0`` this is basic composition ``k ε``.
    """
    k = _k(k)
    epsilon = check.nonnegative("epsilon", epsilon)
    delta_prime = check.delta(delta_prime, "delta_prime")
    basic = k * epsilon
    if delta_prime == 0 or k == 0 or epsilon == 0:
        return basic
    drv = advanced_composition(k, epsilon, delta_prime)
    if k > KOV_MAX_K:  # the exact computation is too large; min(basic, DRV) is still a valid bound
        return min(basic, drv)
    return min(basic, drv, optimal_composition(k, epsilon, delta_prime))


def zcdp_compose(rhos: Iterable[float]) -> float:
    """zCDP composition: the adaptive composition of ρ_i-zCDP mechanisms is (Σ ρ_i)-zCDP.

    ``rhos``: an iterable of reals >= 0 (or :class:`~dpkit.core.privacy.ZCDP` objects).
    """
    from dpkit.core.privacy import ZCDP

    if isinstance(rhos, (str, bytes)) or not isinstance(rhos, Iterable):
        raise WrongType("rhos", "an iterable of real numbers")
    try:
        items = list(rhos)
    except TypeError:  # e.g. a 0-d array
        raise WrongType("rhos", "an iterable of real numbers") from None
    values = [check.nonnegative("rhos", r.rho if isinstance(r, ZCDP) else r) for r in items]
    return math.fsum(values)


# ----------------------------------------------------------------------------------------------
# Gaussian steps


def gaussian_delta(mu: float, epsilon: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with ``mu = sensitivity / sigma`` (Balle & Wang 2018):
    ``Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``."""
    mu = check.positive("mu", mu)
    epsilon = check.nonnegative("epsilon", epsilon)
    return math.exp(_gaussian_log_delta(mu, epsilon))


def _gaussian_log_delta(mu: float, epsilon: float) -> float:
    from scipy import special

    la = float(special.log_ndtr(mu / 2.0 - epsilon / mu))
    lb = float(special.log_ndtr(-mu / 2.0 - epsilon / mu))
    x = epsilon + lb - la
    if x >= 0:  # only through rounding when delta is ~0
        return -math.inf
    return la + float(_log1mexp(np.array(x)))


def _exact_gaussian_epsilon(mu: float, delta: float) -> float:
    target = math.log(delta) + math.log1p(-_REL_MARGIN)
    f = lambda e: _gaussian_log_delta(mu, e) - target
    hi = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta)) + 1.0  # zCDP bound: feasible
    top = _exact.expand(lambda e: f(e) <= 0, hi, 2.0, limit=math.inf)  # defensive: hi is feasible already
    assert top is not None  # the limit is infinite
    return _smallest_feasible(f, 0.0, top)


def gaussian_epsilon(sigma_over_sensitivity: float, steps: int, delta: float,
                     sampling_rate: float | None = None, *, method: str = "auto") -> float:
    """ε at ``delta`` of ``steps`` adaptive Gaussian steps with noise multiplier
    ``sigma_over_sensitivity`` (σ / L2-sensitivity), each optionally on a Poisson subsample of
    rate ``sampling_rate`` (add/remove neighbours).

    ``method``:

    - ``"auto"`` (default): exact analytic Gaussian accounting when there is no subsampling
      (no extra dependency); the ``dp-accounting`` PLD accountant otherwise.
    - ``"pld"`` / ``"rdp"``: always use ``dp-accounting``'s privacy-loss-distribution or Rényi
      accountant (both return upper bounds; PLD is tighter).

    Raises :class:`MissingDependency` (an ``ImportError``) when ``dp-accounting`` is needed but not
    installed (``pip install dp-accounting`` or the ``accounting`` extra).
    """
    sigma = check.positive("sigma_over_sensitivity", sigma_over_sensitivity)
    steps = check.integer("steps", steps, minimum=1)
    delta = check.delta(delta, allow_zero=False)
    if sampling_rate is not None:
        sampling_rate = check.probability("sampling_rate", sampling_rate, open_high=False)
    check.choice("method", method, ("auto", "pld", "rdp"))
    if method == "auto" and (sampling_rate is None or sampling_rate == 1.0):
        mu = math.sqrt(steps) / sigma
        if not 0.0 < mu < math.inf:
            raise InvalidParameter("sigma_over_sensitivity", "outside the range the accountant supports")
        return _exact_gaussian_epsilon(mu, delta)
    if steps > _PLD_MAX_STEPS:
        raise InvalidParameter("steps", f"must be <= {_PLD_MAX_STEPS} with subsampling or method 'pld'/'rdp'")
    try:
        import dp_accounting
        from dp_accounting import pld, rdp
    except ImportError as exc:
        raise MissingDependency(
            "gaussian_epsilon with subsampling (or method 'pld'/'rdp') needs the optional dependency "
            "dp-accounting: pip install dp-accounting (or dpkit[accounting])") from exc
    try:  # dp-accounting's numerics fail in its own ways at extreme (finite) parameters
        event: Any = dp_accounting.GaussianDpEvent(sigma)
        if sampling_rate is not None and sampling_rate < 1.0:
            event = dp_accounting.PoissonSampledDpEvent(sampling_rate, event)
        event = dp_accounting.SelfComposedDpEvent(event, steps)
        accountant = rdp.RdpAccountant() if method == "rdp" else pld.PLDAccountant()
        accountant.compose(event)
        eps = float(accountant.get_epsilon(delta))
    except (ArithmeticError, ValueError, MemoryError):
        raise InvalidParameter("sigma_over_sensitivity", "with these steps, delta and sampling_rate: outside the "
                                                         "range the accountant supports") from None
    if not eps >= 0:  # NaN
        raise InvalidParameter("sigma_over_sensitivity", "with these steps, delta and sampling_rate: outside the "
                                                         "range the accountant supports")
    return eps
