"""Differentially private stochastic gradient descent (DP-SGD: Abadi et al. 2016), numpy engine and accounting.

One engine trains every model: at each of ``T`` steps it

1. draws a **Poisson subsample**: every record independently with probability ``q`` (one exact Bernoulli per
   record from dpkit's random source: a 53-bit uniform integer compared with ``floor(q 2^53)``, so the rate
   actually used is ``q' = floor(q 2^53)/2^53 <= q``, and ``q'`` is what the accounting uses);
2. computes the per-example gradients of the sampled records (hand-written and vectorised for the numpy models;
   :mod:`torch.func` for PyTorch models, :class:`DPSGDTrainer`), **clips** each to L2 norm ``C`` and rounds it per
   example onto the power-of-two grid ``g = 2^-26 2^floor(log2 C)``, so that their sum is exact in float64;
3. adds exact **lattice Gaussian** noise (``g`` times a discrete Gaussian, :func:`dpkit.noise.lattice_gaussian`)
   of standard deviation ``sigma S`` per coordinate, ``S`` the rounded clip bound (``C`` plus at most
   ``1.5 sqrt(p) g``), and
4. hands ``noisy sum / batch_size`` to the optimizer (SGD with momentum or Adam: post-processing).

Accounting (add/remove one record): the ``T`` steps are the adaptive composition of ``T`` Poisson-subsampled
Gaussian mechanisms, :class:`~dpkit.core.tight.SubsampledGaussianEvent` ``(q', sigma)`` repeated ``T`` times,
composed by privacy-loss distributions (:func:`dpkit.core.tight.epsilon_of`, dp-accounting) or, as a fallback
needing no dependency, by Rényi DP (Mironov, Talwar & Zhang 2019, integer orders) converted to
``(epsilon, delta)`` (Canonne, Kamath & Steinke 2020, Prop. 12). :func:`dpsgd_epsilon` gives ε for a noise
multiplier and :func:`dpsgd_sigma` calibrates the noise multiplier to a target ε; the whole training is charged
**once**, before the first random bit, as ``ApproxDP(epsilon, delta)``.

With a public ``sampling_rate`` the plan also declares its privacy event, ``Repeated(SubsampledGaussianEvent(q',
sigma), T)`` (:attr:`dpkit.mechanisms.contract.Plan.event`): one plan, one charge, ``T`` events. A schedule
(:meth:`dpkit.core.accountant.Accountant.schedule`, also on a persistent :class:`~dpkit.core.ledger.Ledger`) that
declared at least ``T`` steps dominating it admits the training against those ``T`` steps, so that one ``(ε, δ)``
budget covers analytics and training with tight (PLD) composition; a run with more steps, a larger rate or a
smaller ``sigma`` than declared is refused before anything is drawn.

Why the lattice noise is covered by the continuous event: a coordinate of the noisy sum is a discrete Gaussian
mechanism with parameter ``s = sigma S/g`` and integer shift ``m_j`` (the neighbour's rounded gradient in grid
units); :mod:`dpkit.core.tight` proves that ``GaussianEvent(s/(m_j + 1 + 1e-6))`` dominates it (``s >= 2``). The
coordinates are independent, so the vector mechanism is dominated by the product of these Gaussian pairs, which is
the Gaussian pair with shift ``sqrt(sum_j (m_j + 1 + 1e-6)^2) <= ||m|| + sqrt(p)(1 + 1e-6) <= S/g`` (Minkowski):
the step is dominated by ``GaussianEvent(sigma)``, and by Zhu, Dong & Wang 2022's subsampling theorem for
dominating pairs the subsampled step by ``SubsampledGaussianEvent(q', sigma)``.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.neighbours import AddRemove
from dpkit.core.privacy import ApproxDP
from dpkit.learn._base import ClassifierMixin, Estimator, check_fitted, columns, features, labels
from dpkit.mechanisms.contract import Outcome, Plan, resolve_neighbours, run

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.core.tight import Repeated
    from dpkit.mechanisms import Release
    from dpkit.noise.source import RandomSource

__all__ = ["DPSGDClassifier", "DPSGDModel", "DPSGDTrainer", "dpsgd", "dpsgd_epsilon", "dpsgd_sigma"]

#: Most training rows (every exact per-step sum of per-example values of at most ``2^27`` grid units stays below
#: ``2^53``).
MAX_ROWS = 2**22
#: Most steps of one training.
MAX_STEPS = 100_000
#: Most model parameters (numpy models).
MAX_PARAMS = 2_000_000
#: Range of the noise multiplier ``sigma`` (noise standard deviation / clip bound).
SIGMA_MIN = 0.25
SIGMA_MAX = 1e6
#: Accounting methods.
ACCOUNTING = ("auto", "pld", "rdp")
#: Models of the numpy engine.
MODELS = ("logistic", "mlp")
#: Optimizers (post-processing of the noisy gradients).
OPTIMIZERS = ("sgd", "adam")
#: Relative inflation of float norm bounds (covers the rounding of the clipping's own computation).
_INFLATE = 1.0 + 1e-9
#: The sampling grid: rates are rounded down to multiples of 2^-53.
_RATE_BITS = 53
#: Integer Rényi orders of the RDP fallback.
_ORDERS = (*range(2, 65), 72, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024)


# -- accounting (shared by the numpy engine and the torch adapter) --------------------------------------------------
def _has_dp_accounting() -> bool:
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        return False
    return True


def _method(accounting: Any) -> str:
    m = check.choice("accounting", accounting, ACCOUNTING)
    if m == "auto":
        return "pld" if _has_dp_accounting() else "rdp"
    return m


def _coarse(q: float) -> float:
    """A rate from a noisy count, rounded **down** to 8 values per octave (``m 2^(e-3)``, ``m`` in 8..15): the
    expected batch shrinks by less than 12.5%, and the σ calibration (a PLD bisection) is then shared by every
    count that rounds alike (cached) instead of recomputed for each. Post-processing of the released count."""
    if q >= 1.0:
        return 1.0
    e = math.floor(math.log2(q))
    step = math.ldexp(1.0, e - 3)
    return max(math.floor(q / step), 8) * step


def _rate(q: float) -> float:
    """The rate the sampler realises for a requested ``q``: ``floor(q 2^53)/2^53`` (exact)."""
    t = int(Fraction(q) * 2**_RATE_BITS)
    if t < 1:
        raise InvalidParameter("sampling_rate", "must be at least 2**-53")
    return float(Fraction(t, 2**_RATE_BITS))


def _rdp_epsilon(q: float, sigma: float, steps: int, delta: float) -> float:
    """ε of ``steps`` Poisson-subsampled Gaussian steps by RDP at integer orders (no dependency).

    Mironov, Talwar & Zhang 2019 (Sec. 3.3): for an integer order ``a >= 2`` the sampled Gaussian mechanism is
    ``(a, log(A_a)/(a - 1))``-RDP under add/remove one record, ``A_a = sum_k C(a, k) (1-q)^(a-k) q^k
    exp((k^2 - k)/(2 sigma^2))``; RDP composes additively; Canonne, Kamath & Steinke 2020 (Prop. 12) turn
    ``(a, r)``-RDP into ``(r + log(1 - 1/a) - (log delta + log a)/(a - 1), delta)``-DP; the least over the
    orders, inflated by ``1e-9`` relative (float rounding of the sums)."""
    from scipy.special import gammaln

    best = math.inf
    for a in _ORDERS:
        if q >= 1.0:
            log_a = a * (a - 1) / (2.0 * sigma * sigma)
        else:
            k = np.arange(a + 1, dtype=np.float64)
            lbin = gammaln(a + 1.0) - gammaln(k + 1.0) - gammaln(a - k + 1.0)
            terms = lbin + (a - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2.0 * sigma * sigma)
            top = float(np.max(terms))
            log_a = top + math.log(float(np.sum(np.exp(terms - top))))
        r = steps * max(log_a, 0.0) / (a - 1)
        eps = r + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1)
        best = min(best, eps)
    return max(best, 0.0) * (1.0 + 1e-9) + 1e-12


@functools.lru_cache(maxsize=4096)
def _epsilon_cached(q: float, sigma: float, steps: int, delta: float, method: str) -> float:
    if method == "rdp":
        return _rdp_epsilon(q, sigma, steps, delta)
    from dpkit.core import tight

    return tight.epsilon_of([tight.repeat(tight.SubsampledGaussianEvent(q, sigma), steps)], delta)


def _public(sampling_rate: Any, sigma: Any, steps: Any, delta: Any) -> tuple[float, float, int, float]:
    q = check.probability("sampling_rate", sampling_rate, open_high=False)
    s = check.positive("sigma", sigma)
    if not SIGMA_MIN <= s <= SIGMA_MAX:
        raise InvalidParameter("sigma", f"must be between {SIGMA_MIN:g} and {SIGMA_MAX:g}")
    t = check.integer("steps", steps, minimum=1, maximum=MAX_STEPS)
    d = check.delta(delta, allow_zero=False)
    return _rate(q), s, t, d


def dpsgd_epsilon(sampling_rate: float, sigma: float, steps: int, delta: float, *, accounting: str = "auto") -> float:
    """ε such that ``steps`` DP-SGD steps (Poisson rate ``sampling_rate``, noise multiplier ``sigma``) are
    ``(ε, delta)``-DP under add/remove one record: an upper bound.

    ``sampling_rate`` is first rounded down to the sampler's grid ``2^-53`` (the rate :func:`dpsgd` realises).
    ``accounting``: ``"pld"`` (privacy-loss distributions by dp-accounting, :func:`dpkit.core.tight.epsilon_of`;
    :class:`~dpkit.core.errors.MissingDependency` without it), ``"rdp"`` (Rényi DP at integer orders, no
    dependency; looser) or ``"auto"`` (``"pld"`` when dp-accounting is installed, else ``"rdp"``).

    >>> round(dpsgd_epsilon(0.01, 1.0, 10_000, 1e-5, accounting="rdp"), 2)
    6.72
    """
    q, s, t, d = _public(sampling_rate, sigma, steps, delta)
    return _epsilon_cached(q, s, t, d, _method(accounting))


def _sigma_ok(q: float, s: float, t: int, eps: float, delta: float, method: str) -> bool:
    """Whether noise multiplier ``s`` meets ``(eps, delta)``: by the method's bound, or by the exact δ(ε) of the
    ``t``-fold full Gaussian (rate 1: it dominates every subsampled step; Balle & Wang 2018)."""
    from dpkit.core.composition import gaussian_delta

    if gaussian_delta(math.sqrt(t) / s, eps) <= delta * (1.0 - 1e-9):
        return True
    return _epsilon_cached(q, s, t, delta, method) <= eps


@functools.lru_cache(maxsize=1024)
def _sigma_cached(q: float, t: int, eps: float, delta: float, method: str) -> float:
    def ok(s: float) -> bool:
        return _sigma_ok(q, s, t, eps, delta, method)

    def rdp_ok(s: float) -> bool:
        return _sigma_ok(q, s, t, eps, delta, "rdp")

    # RDP (cheap, looser) first: its sigma is an upper bracket; the PLD is only evaluated above half of it
    # (a PLD at a tiny sigma has a huge support)
    if not (rdp_ok(SIGMA_MAX) or ok(SIGMA_MAX)):
        raise InvalidParameter("epsilon", "too small for this many steps (the noise multiplier would exceed "
                                          f"{SIGMA_MAX:g})")
    if rdp_ok(SIGMA_MIN):
        return SIGMA_MIN
    _, hi = _exact.bisect(rdp_ok, SIGMA_MIN, SIGMA_MAX, rel_tol=1e-4, geometric=True)
    if method == "rdp":
        return hi
    lo = max(SIGMA_MIN, 0.5 * hi)
    if ok(lo):
        return lo
    _, hi = _exact.bisect(ok, lo, hi, rel_tol=1e-4, geometric=True)
    return hi


def dpsgd_sigma(sampling_rate: float, steps: int, epsilon: float, delta: float, *, accounting: str = "auto") -> float:
    """The smallest noise multiplier (to ``1e-4`` relative, always on the safe side) for which ``steps`` DP-SGD
    steps at Poisson rate ``sampling_rate`` are ``(epsilon, delta)``-DP (add/remove), by the bound of
    ``accounting`` (as :func:`dpsgd_epsilon`) or the exact bound of the full (unsampled) Gaussian composition,
    whichever is smaller. :class:`~dpkit.core.errors.InvalidParameter` naming ``epsilon`` if even ``sigma = 1e6``
    does not suffice. Bisection on public parameters only; results are cached.

    >>> s = dpsgd_sigma(0.01, 1000, 1.0, 1e-5, accounting="rdp")
    >>> dpsgd_epsilon(0.01, s, 1000, 1e-5, accounting="rdp") <= 1.0
    True
    """
    q = _rate(check.probability("sampling_rate", sampling_rate, open_high=False))
    t = check.integer("steps", steps, minimum=1, maximum=MAX_STEPS)
    eps = check.epsilon(epsilon)
    d = check.delta(delta, allow_zero=False)
    return _sigma_cached(q, t, eps, d, _method(accounting))


# -- the engine (shared by the numpy models and the torch adapter) -------------------------------------------------
def _pow2_at_most(x: float) -> float:
    _, e = math.frexp(x)
    return math.ldexp(1.0, e - 1)


def grid_of(clip: float) -> float:
    """The per-example rounding grid ``2^-26 2^floor(log2 clip)`` (each clipped coordinate is at most ``2^27``
    grid units)."""
    return _pow2_at_most(clip) * 2.0**-26


def accounted_sensitivity(clip: float, n_params: int) -> float:
    """``S >= clip + 1.5 sqrt(p) g``: the clip bound after per-example rounding (``+ sqrt(p) g/2``) plus the
    ``sqrt(p)(1 + 1e-6) g`` of the lattice-to-Gaussian domination (module docstring), rounded up."""
    g = grid_of(clip)
    r = math.sqrt(n_params) * g
    return _exact.up(clip * _INFLATE + 0.5 * r + r * (1.0 + 1e-6), 4)


def clipped_units(G: np.ndarray, clip: float, grid: float) -> np.ndarray:
    """The per-example gradients ``G`` (rows) clipped to L2 norm ``clip`` and rounded to integers of ``grid``,
    summed over the rows: an exact float64 vector of integers (each entry ``|.| <= 2^27`` per row)."""
    if G.shape[0] == 0:
        return np.zeros(G.shape[1])
    norms = np.sqrt(np.einsum("ij,ij->i", G, G))
    factor = np.where(norms > clip, clip / np.where(norms > 0, norms, 1.0), 1.0)
    units = np.rint(G * (factor / grid)[:, None])
    return units.sum(axis=0)


class _Adapter(Protocol):
    """What the engine needs from a model: its size, the per-step exact sum and the optimizer step."""

    n_params: int

    def units_sum(self, idx: np.ndarray, clip: float, grid: float) -> np.ndarray: ...

    def apply(self, grad: np.ndarray) -> None: ...


@dataclass(frozen=True)
class _Config:
    """Public, validated training parameters."""

    n_params: int
    batch_size: int
    sampling_rate: float | None  # public rate; None: from a charged noisy count
    epochs: float
    steps: int | None
    clip: float
    sigma: float | None  # the noise multiplier, if given
    epsilon_sgd: float | None  # the share of epsilon the steps may use (sigma calibrated)
    delta: float
    count_epsilon: float | None
    accounting: str
    callback: Callable[[dict[str, Any]], Any] | None
    progress: bool


def _schedule(cfg: _Config, n_hat: float | None) -> tuple[float, int]:
    """The realised rate and the number of steps (public: from ``sampling_rate`` or the noisy count)."""
    if cfg.sampling_rate is not None:
        q = cfg.sampling_rate
    else:
        assert n_hat is not None
        q = _coarse(min(1.0, cfg.batch_size / min(max(n_hat, float(cfg.batch_size)), float(MAX_ROWS))))
    q = _rate(q)
    return q, cfg.steps if cfg.steps is not None else _steps_for(cfg.epochs, q)


def _steps_for(epochs: float, q: float) -> int:
    """``ceil(epochs/q)`` steps (within ``1e-9``: the rate's rounding to ``2^-53`` adds no step), in
    ``[1, MAX_STEPS]``."""
    return min(MAX_STEPS, max(1, math.ceil(epochs / q - 1e-9)))


class _Progress:
    def __init__(self, on: bool, total: int) -> None:
        self.on, self.total = on, total
        self.bar: Any = None
        if on:
            try:  # optional: rich's bar when installed (imported by name: no dependency, no stubs)
                import importlib

                self.bar = importlib.import_module("rich.progress").Progress(transient=False)
                self.bar.start()
                self.task = self.bar.add_task("DP-SGD", total=total)
            except ImportError:
                self.bar = None

    def update(self, epoch: int, eps: float) -> None:
        if not self.on:
            return
        if self.bar is not None:
            self.bar.update(self.task, completed=epoch, description=f"DP-SGD eps={eps:.3f}")
        else:
            done = int(30 * epoch / max(self.total, 1))
            sys.stderr.write(f"\rDP-SGD epoch {epoch}/{self.total} [{'#' * done}{'.' * (30 - done)}] eps={eps:.3f}")
            if epoch >= self.total:
                sys.stderr.write("\n")
            sys.stderr.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _train(adapter: _Adapter, n: int, cfg: _Config, rng: RandomSource) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run DP-SGD on ``adapter`` (``n`` private rows): the draw of every DP-SGD plan."""
    from dpkit.mechanisms.laplace import laplace_plan
    from dpkit.noise import lattice_gaussian

    parts: dict[str, Any] = {}
    n_hat = None
    if cfg.count_epsilon is not None:
        n_hat = float(laplace_plan(float(n), 1.0, cfg.count_epsilon).sample(rng).value)
        parts["count"] = n_hat
    q, T = _schedule(cfg, n_hat)
    if cfg.sigma is not None:
        sigma = cfg.sigma
    else:
        assert cfg.epsilon_sgd is not None
        sigma = _sigma_cached(q, T, cfg.epsilon_sgd, cfg.delta, cfg.accounting)
    grid = grid_of(cfg.clip)
    S = accounted_sensitivity(cfg.clip, adapter.n_params)
    noise_sd = _exact.up(sigma * S, 2)
    threshold = np.uint64(int(Fraction(q) * 2**_RATE_BITS))
    per_epoch = max(1, round(1.0 / q))
    epochs = math.ceil(T / per_epoch)
    bar = _Progress(cfg.progress, epochs)
    batch = float(cfg.batch_size)
    sizes = 0
    try:
        for t in range(1, T + 1):
            mask = (rng.uint64(n) >> np.uint64(64 - _RATE_BITS)) < threshold  # exact Bernoulli(q) per record
            idx = np.flatnonzero(mask)
            sizes += idx.size
            total = adapter.units_sum(idx, cfg.clip, grid) * grid  # exact: integers times a power of two
            noisy = lattice_gaussian(total, noise_sd, grid, rng=rng)
            adapter.apply(noisy / batch)
            if t % per_epoch == 0 or t == T:
                if cfg.callback is not None or cfg.progress:
                    eps_now = _epsilon_cached(q, sigma, t, cfg.delta, cfg.accounting) + (cfg.count_epsilon or 0.0)
                    epoch = math.ceil(t / per_epoch)
                    bar.update(epoch, eps_now)
                    if cfg.callback is not None:
                        cfg.callback({"epoch": epoch, "step": t, "steps": T, "epsilon": eps_now,
                                      "delta": cfg.delta})
    finally:
        bar.close()
    eps_spent = _epsilon_cached(q, sigma, T, cfg.delta, cfg.accounting)
    from dpkit.core.tight import SubsampledGaussianEvent

    learnt = {"sigma": sigma, "sampling_rate_used": q, "steps": T, "noise_sd": noise_sd,
              "accounted_sensitivity": S, "grid": grid, "epsilon_steps": eps_spent,
              # the dominating event of each step, repeated `steps` times (for dpkit.core.tight.epsilon_of)
              "event": SubsampledGaussianEvent(q, sigma).to_dict()}
    return parts, learnt


def _plan_event(cfg: _Config, neighbours: Any) -> Repeated | None:
    """The privacy event of a whole training, known before the charge: ``Repeated(SubsampledGaussianEvent(q',
    sigma), T)`` with the realised rate ``q'``, the noise multiplier and the number of steps that :func:`_train`
    will use (the same values: ``_schedule`` keeps a rate already on the grid and the configured steps). Only
    under add/remove-one neighbours (where each step is dominated by the subsampled-Gaussian event, module
    docstring) and with a public rate; ``None`` when the rate comes from a noisy count (the rate and ``T`` are
    then unknown before the draw, and the count is a further Laplace release)."""
    from dpkit.core.tight import Repeated, SubsampledGaussianEvent

    if (not isinstance(neighbours, AddRemove) or cfg.sampling_rate is None or cfg.sigma is None
            or cfg.steps is None or cfg.count_epsilon is not None):
        return None
    return Repeated(SubsampledGaussianEvent(cfg.sampling_rate, cfg.sigma), cfg.steps)


def _config(*, n_params: int, epsilon: Any, delta: Any, sigma: Any, batch_size: Any, sampling_rate: Any,
            epochs: Any, steps: Any, clip: Any, count_share: Any, accounting: Any, callback: Any,
            progress: Any) -> tuple[_Config, ApproxDP, dict[str, Any]]:
    """Validate the public training parameters and compute the one cost (before any charge)."""
    if delta is None:
        raise InvalidParameter("delta", "is required (DP-SGD is (epsilon, delta)-DP)")
    dlt = check.delta(delta, allow_zero=False)
    method = _method(accounting)
    bs = check.integer("batch_size", batch_size, minimum=1, maximum=MAX_ROWS)
    q = None if sampling_rate is None else _rate(check.probability("sampling_rate", sampling_rate, open_high=False))
    ep = check.positive("epochs", epochs)
    if ep > MAX_STEPS:
        raise InvalidParameter("epochs", f"must be at most {MAX_STEPS}")
    T = None if steps is None else check.integer("steps", steps, minimum=1, maximum=MAX_STEPS)
    C = check.positive("clip", clip)
    if C > 1e12 or C < 1e-12:
        raise InvalidParameter("clip", "must be between 1e-12 and 1e12")
    if n_params > MAX_PARAMS:
        raise InvalidParameter("hidden", f"the model must have at most {MAX_PARAMS} parameters")
    if callback is not None and not callable(callback):
        raise WrongType("callback", "a callable taking a dict, or None")
    prog = check.flag("progress", progress)
    params: dict[str, Any] = {"batch_size": bs, "clip": C, "delta": dlt, "accounting": method,
                              "neighbours": "AddRemove"}
    if sigma is not None:
        s = check.positive("sigma", sigma)
        if not SIGMA_MIN <= s <= SIGMA_MAX:
            raise InvalidParameter("sigma", f"must be between {SIGMA_MIN:g} and {SIGMA_MAX:g}")
        if epsilon is not None:
            raise InvalidParameter("sigma", "give either epsilon (sigma calibrated) or sigma, not both")
        if q is None:
            raise InvalidParameter("sampling_rate", "is required with sigma (the cost must be known before "
                                                    "training; a rate from a noisy count is not)")
        steps_pub = T if T is not None else _steps_for(ep, q)
        eps = _epsilon_cached(q, s, steps_pub, dlt, method)
        if not math.isfinite(eps):
            raise InvalidParameter("delta", "too small for this noise (infinite epsilon)")
        cfg = _Config(n_params, bs, q, ep, steps_pub, C, s, None, dlt, None, method, callback, prog)
        params.update(sigma=s, sampling_rate=q, steps=steps_pub, epsilon=eps)
        return cfg, ApproxDP(_exact.up(eps, 1), dlt), params
    if epsilon is None:
        raise InvalidParameter("epsilon", "give epsilon (sigma calibrated) or sigma")
    eps = check.epsilon(epsilon)
    if q is not None:
        steps_pub = T if T is not None else _steps_for(ep, q)
        s = _sigma_cached(q, steps_pub, eps, dlt, method)  # InvalidParameter('epsilon') if unreachable
        cfg = _Config(n_params, bs, q, ep, steps_pub, C, s, None, dlt, None, method, callback, prog)
        params.update(sigma=s, sampling_rate=q, steps=steps_pub, epsilon=eps,
                      epsilon_accounted=_epsilon_cached(q, s, steps_pub, dlt, method))
        return cfg, ApproxDP(eps, dlt), params
    share = check.probability("count_share", count_share)
    eps_count, eps_sgd = _exact.split_budget(eps, [share, 1.0 - share], name="count_share")
    # feasibility before the charge: the largest noise must meet eps_sgd for any rate and the most steps
    from dpkit.core.composition import gaussian_delta

    t_max = T if T is not None else MAX_STEPS
    if gaussian_delta(math.sqrt(t_max) / SIGMA_MAX, eps_sgd) > dlt * (1.0 - 1e-9):
        raise InvalidParameter("epsilon", "too small for this many steps")
    cfg = _Config(n_params, bs, None, ep, T, C, None, eps_sgd, dlt, eps_count, method, callback, prog)
    params.update(epsilon=eps, count_share=share, epochs=ep, steps=T)
    return cfg, ApproxDP(eps, dlt), params


# -- numpy models ------------------------------------------------------------------------------------------------
def _uniform(rng: RandomSource, size: int) -> np.ndarray:
    """``size`` uniforms on [0, 1) from 53 random bits each (dpkit's source)."""
    return (rng.uint64(size) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - np.max(z, axis=1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=1, keepdims=True)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class DPSGDModel:
    """A model trained by :func:`dpsgd` (the release's value; everything here is post-processing).

    ``kind`` is ``"logistic"`` (``weights = (W,)``, ``W`` of shape ``(d + 1, 1)`` for two classes — the score
    of ``classes[1]`` — or ``(d + 1, K)`` softmax; the last row is the intercept) or ``"mlp"`` (``weights =
    (W1, W2)``: ``(d + 1, h)`` into a ReLU layer, then ``(h + 1, K)`` softmax; last rows are biases).
    """

    kind: str
    weights: tuple[np.ndarray, ...]
    classes: np.ndarray

    @property
    def n_features(self) -> int:
        return int(self.weights[0].shape[0] - 1)

    @property
    def coef(self) -> np.ndarray:
        """Linear models: ``(1, d)`` or ``(K, d)`` coefficients."""
        if self.kind != "logistic":
            raise InvalidParameter("kind", "coefficients exist only for the linear model")
        return self.weights[0][:-1].T.copy()

    @property
    def intercept(self) -> np.ndarray:
        if self.kind != "logistic":
            raise InvalidParameter("kind", "intercepts exist only for the linear model")
        return self.weights[0][-1].copy()

    def decision_function(self, X: Any) -> np.ndarray:
        """Scores: 1-D for two classes (the score of ``classes[1]``: the MLP's logit difference), else ``(n, K)``
        logits."""
        Z = _augment(columns(X, self.n_features))
        if self.kind == "logistic":
            s = Z @ self.weights[0]
            return s[:, 0] if s.shape[1] == 1 else s
        H = _augment(np.maximum(Z @ self.weights[0], 0.0))
        s = H @ self.weights[1]
        return s[:, 1] - s[:, 0] if s.shape[1] == 2 else s

    def predict_proba(self, X: Any) -> np.ndarray:
        s = self.decision_function(X)
        if s.ndim == 1:
            p = _sigmoid(s)
            return np.column_stack([1.0 - p, p])
        return _softmax(s)

    def predict(self, X: Any) -> np.ndarray:
        s = self.decision_function(X)
        if s.ndim == 1:
            return self.classes[(s > 0).astype(np.int64)]
        return self.classes[np.argmax(s, axis=1)]


def _augment(X: np.ndarray) -> np.ndarray:
    return np.hstack([X, np.ones((X.shape[0], 1))])


class _NumpyAdapter:
    """A numpy model (``"logistic"`` or ``"mlp"``) with hand-written vectorised per-example gradients and an
    optimizer (post-processing)."""

    def __init__(self, kind: str, Z: np.ndarray, codes: np.ndarray, K: int, hidden: int, optimizer: str,
                 lr: float, momentum: float, betas: tuple[float, float], l2: float) -> None:
        self.kind, self.Z, self.codes, self.K, self.hidden = kind, Z, codes, K, hidden
        d1 = Z.shape[1]
        if kind == "logistic":
            out = 1 if K == 2 else K
            self.shapes: list[tuple[int, int]] = [(d1, out)]
        else:
            self.shapes = [(d1, hidden), (hidden + 1, K)]
        self.n_params = int(sum(a * b for a, b in self.shapes))
        self.theta = np.zeros(self.n_params)
        self.optimizer, self.lr, self.momentum, self.betas, self.l2 = optimizer, lr, momentum, betas, l2
        self.m = np.zeros(self.n_params)
        self.v = np.zeros(self.n_params)
        self.t = 0

    def init(self, rng: RandomSource) -> None:
        """Public random start for the MLP (Glorot-uniform, from dpkit's source; data-independent)."""
        if self.kind != "mlp":
            return
        parts = []
        for a, b in self.shapes:
            lim = math.sqrt(6.0 / (a + b))
            parts.append((2.0 * _uniform(rng, a * b) - 1.0) * lim)
        self.theta = np.concatenate(parts)

    def unpack(self, theta: np.ndarray) -> tuple[np.ndarray, ...]:
        out, at = [], 0
        for a, b in self.shapes:
            out.append(theta[at:at + a * b].reshape(a, b))
            at += a * b
        return tuple(out)

    def per_example(self, idx: np.ndarray) -> np.ndarray:
        """``(len(idx), p)`` per-example gradients of the cross-entropy at the current parameters."""
        Z = self.Z[idx]
        c = self.codes[idx]
        W = self.unpack(self.theta)
        if self.kind == "logistic":
            s = Z @ W[0]
            if self.K == 2:
                r = _sigmoid(s[:, 0]) - (c == 1)
                return r[:, None] * Z
            R = _softmax(s)
            R[np.arange(c.size), c] -= 1.0
            return (Z[:, :, None] * R[:, None, :]).reshape(c.size, -1)
        A = Z @ W[0]
        H = _augment(np.maximum(A, 0.0))
        R = _softmax(H @ W[1])
        R[np.arange(c.size), c] -= 1.0  # d loss / d logits
        g2 = (H[:, :, None] * R[:, None, :]).reshape(c.size, -1)
        dA = (R @ W[1][:-1].T) * (A > 0)
        g1 = (Z[:, :, None] * dA[:, None, :]).reshape(c.size, -1)
        return np.hstack([g1, g2])

    def units_sum(self, idx: np.ndarray, clip: float, grid: float) -> np.ndarray:
        out = np.zeros(self.n_params)
        for start in range(0, idx.size, 1024):  # bounded memory; integer sums are exact in any order
            out += clipped_units(self.per_example(idx[start:start + 1024]), clip, grid)
        return out

    def apply(self, grad: np.ndarray) -> None:
        g = grad + self.l2 * self.theta
        self.t += 1
        if self.optimizer == "sgd":
            self.m = self.momentum * self.m + g
            self.theta = self.theta - self.lr * self.m
        else:
            b1, b2 = self.betas
            self.m = b1 * self.m + (1.0 - b1) * g
            self.v = b2 * self.v + (1.0 - b2) * g * g
            mh = self.m / (1.0 - b1**self.t)
            vh = self.v / (1.0 - b2**self.t)
            self.theta = self.theta - self.lr * mh / (np.sqrt(vh) + 1e-8)


def _dpsgd_plan(X: Any, y: Any, epsilon: Any, *, delta: Any, classes: Any, bounds: Any, norm: Any, model: Any,
                hidden: Any, sigma: Any, batch_size: Any, sampling_rate: Any, epochs: Any, steps: Any, clip: Any,
                optimizer: Any, learning_rate: Any, momentum: Any, l2: Any, count_share: Any, accounting: Any,
                callback: Any, progress: Any, neighbours: Any, accountant: Any) -> Plan:
    nb = resolve_neighbours(neighbours, accountant)
    if not isinstance(nb, AddRemove):
        raise InvalidParameter("neighbours", "DP-SGD's subsampled-Gaussian accounting is for add/remove one "
                                             "record (AddRemove)")
    kind = check.choice("model", model, MODELS)
    h = check.integer("hidden", hidden, minimum=1, maximum=100_000)
    opt = check.choice("optimizer", optimizer, OPTIMIZERS)
    lr = check.positive("learning_rate", learning_rate)
    if lr > 1e6:
        raise InvalidParameter("learning_rate", "must be at most 1e6")
    mom = check.probability("momentum", momentum, open_low=False)
    lam = check.nonnegative("l2", l2)
    if lam > 1e6:
        raise InvalidParameter("l2", "must be at most 1e6")
    Xc, _info = features(X, bounds=bounds, norm=norm)
    n = Xc.shape[0]
    if n > MAX_ROWS:
        raise InvalidData("X", "has too many rows")
    cls, codes = labels(y, classes, n)
    K = int(cls.size)
    Z = _augment(Xc)
    adapter = _NumpyAdapter(kind, Z, codes, K, h, opt, lr, mom, (0.9, 0.999), lam)
    cfg, cost, params = _config(n_params=adapter.n_params, epsilon=epsilon, delta=delta, sigma=sigma,
                                batch_size=batch_size, sampling_rate=sampling_rate, epochs=epochs, steps=steps,
                                clip=clip, count_share=count_share, accounting=accounting, callback=callback,
                                progress=progress)
    params.update(model=kind, hidden=h if kind == "mlp" else None, optimizer=opt, learning_rate=lr, momentum=mom,
                  l2=lam, n_params=adapter.n_params, classes=K)

    def draw(rng: RandomSource) -> Outcome:
        adapter.init(rng)
        parts, learnt = _train(adapter, n, cfg, rng)
        value = DPSGDModel(kind, tuple(w.copy() for w in adapter.unpack(adapter.theta)), cls)
        return Outcome(value, parts=parts, params=learnt)

    return Plan(mechanism="dpsgd", cost=cost, draw=draw, params=params, neighbours=nb,
                privacy_event=_plan_event(cfg, nb))


def dpsgd(X: Any, y: Any, epsilon: float | None = None, *, delta: float | None = None, classes: Any = None,
          bounds: Any = None, norm: float | None = None, model: str = "logistic", hidden: int = 32,
          sigma: float | None = None, batch_size: int = 256, sampling_rate: float | None = None,
          epochs: float = 5.0, steps: int | None = None, clip: float = 1.0, optimizer: str = "sgd",
          learning_rate: float = 0.5, momentum: float = 0.9, l2: float = 0.0, count_share: float = 0.01,
          accounting: str = "auto", callback: Callable[[dict[str, Any]], Any] | None = None,
          progress: bool = False, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
          rng: RandomSource | None = None, description: str = "") -> Release:
    """Train a classifier by DP-SGD (Poisson subsampling, per-example clipping, exact lattice Gaussian noise).

    Parameters
    ----------
    X:
        Private features, 2-D ``(n, d)``, finite. Constrained by the **declared** ``bounds`` (clamped) and/or
        ``norm`` (rows scaled down); dpkit never reads them from the data.
    y:
        Private labels, one per row, each in ``classes``.
    epsilon, delta:
        The budget: ``(epsilon, delta)``-DP; ``delta`` is required. With ``epsilon`` the noise multiplier is
        calibrated (:func:`dpsgd_sigma`); alternatively give ``sigma`` and the cost is :func:`dpsgd_epsilon`.
    classes:
        The public label set (required; at least two labels; more than two: softmax).
    bounds, norm:
        Public per-feature bounds and/or a row L2-norm bound; at least one is required.
    model:
        ``"logistic"`` (logistic regression for two classes, softmax regression otherwise; default) or
        ``"mlp"`` (one ReLU hidden layer of ``hidden`` units, softmax output).
    hidden:
        Hidden width of the MLP (default 32).
    sigma:
        The noise multiplier (noise standard deviation over the clip bound) instead of ``epsilon``; needs
        ``sampling_rate``.
    batch_size:
        The expected batch size ``B`` (public, default 256): the noisy sum is divided by it, and without
        ``sampling_rate`` the rate is ``q = B/N`` rounded down to 8 values per octave, ``N`` a noisy count of
        the rows.
    sampling_rate:
        A public Poisson rate ``q`` (nothing is then spent on a count); rounded down to ``2^-53``.
    epochs, steps:
        ``T = steps`` if given, else ``ceil(epochs/q)`` (default 5 epochs), at most ``100,000``.
    clip:
        The per-example gradient clipping norm ``C`` (default 1).
    optimizer, learning_rate, momentum, l2:
        ``"sgd"`` (heavy-ball momentum ``momentum``, default 0.9) or ``"adam"`` (betas 0.9, 0.999) with step
        ``learning_rate`` (default 0.5), and L2 weight decay ``l2`` added to the noisy gradient (default 0).
    count_share:
        Without ``sampling_rate``: the share of ``epsilon`` spent on the noisy count (default 0.01).
    accounting:
        ``"auto"`` (default: PLD with dp-accounting installed, else RDP), ``"pld"`` or ``"rdp"``.
    callback:
        Called after each epoch (and the last step) with ``{"epoch", "step", "steps", "epsilon", "delta"}``:
        the running ε of the steps so far (post-processing of public parameters).
    progress:
        Print a progress bar per epoch with the running ε (``rich`` if installed, else plain text on stderr).
    neighbours:
        Add/remove one record only (the default; any other relation is refused).
    accountant:
        If given, charged the cost (below) once, before any randomness.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``(epsilon, delta)``-DP under add/remove one record. Each step releases the exact sum of the sampled
    per-example gradients, each clipped to norm ``C`` and rounded per example onto the grid ``g`` (a
    per-record map, norm at most ``C + sqrt(p) g/2``), plus lattice Gaussian noise of standard deviation
    ``sigma S``; the step is dominated by ``SubsampledGaussianEvent(q', sigma)`` (module docstring: discrete
    to continuous Gaussian coordinate by coordinate, Minkowski, then Zhu, Dong & Wang 2022's subsampling of
    dominating pairs) with ``q'`` the realised Poisson rate. The ``T`` steps compose adaptively (each step's
    gradients depend on the released earlier ones; the composition of the fixed sequence of events is
    sound under adaptivity, :mod:`dpkit.core.tight`); ``sigma`` is the smallest (to ``1e-4``) with
    composed ε at most the target, by PLD (or RDP) or by the full Gaussian's exact bound. Without
    ``sampling_rate`` a Laplace count (``count_share epsilon``, pure) fixes ``q`` and ``T`` first, and the
    steps get ``(epsilon (1 - count_share), delta)`` (basic composition). The optimizer, the random start of
    the MLP (public randomness) and the callback are post-processing.

    Cost
    ----
    ``ApproxDP(epsilon, delta)`` (with ``sigma``: ``ApproxDP(dpsgd_epsilon(q, sigma, T, delta), delta)``),
    charged once before any randomness; a refused charge trains nothing. Invalid input raises a typed error
    before the charge. With ``sampling_rate`` the plan's privacy event is
    ``Repeated(SubsampledGaussianEvent(q', sigma), T)``: under a schedule accountant
    (:meth:`~dpkit.core.accountant.Accountant.schedule`) the training is admitted only if the next ``T``
    declared positions all dominate ``SubsampledGaussianEvent(q', sigma)`` (each step is such a mechanism for
    every history, so the fixed declared sequence of curves bounds the run), and it consumes them; otherwise
    (more steps than declared, larger ``q'``, smaller ``sigma``, or no ``sampling_rate``: the rate from a
    noisy count is not known before the charge) it is refused and nothing is drawn.

    Output law
    ----------
    A :class:`DPSGDModel`: the last iterate of ``T`` optimizer steps from 0 (logistic) or a Glorot-uniform
    start (MLP), each on ``(S_t + g Y_t)/B`` with ``S_t`` the exact clipped, rounded gradient sum of the
    step's Poisson sample and ``Y_t`` a vector of independent discrete Gaussians of parameter ``sigma S/g``
    (``Release.params``: ``sigma``, ``noise_sd``, ``grid``, ``sampling_rate_used``, ``steps``,
    ``epsilon_steps``, and ``event``, the recorded :class:`~dpkit.core.tight.SubsampledGaussianEvent` that
    dominates each step, for composing the training with other releases by :func:`dpkit.core.tight.epsilon_of`;
    ``parts["count"]``: the noisy count).

    Error
    -----
    Each step's gradient estimate carries noise of standard deviation ``sigma S/B`` per coordinate, plus the
    clipping bias and the sampling variance; for convex Lipschitz losses the excess risk of DP-SGD is of order
    ``C sqrt(p log(1/delta))/(n epsilon)`` (Bassily, Smith & Thakurta 2014). Measured on Adult:
    ``docs/benchmarks.md``.

    Notes
    -----
    The PyTorch adapter :class:`DPSGDTrainer` runs the same engine on a ``torch.nn.Module`` (optional extra
    ``dpkit[torch]``). The numbers of rows ``n`` and of steps are never divided into a gradient: the noisy sum
    is divided by the public ``batch_size``. Per-example gradients are computed in vectorised batches (numpy
    matrix products; ``vmap`` in torch): the proof treats each clipped, rounded gradient as a function of its
    own record; a BLAS that rounds one row's products differently depending on the other rows of the batch (at
    the last bit) could move another record's rounded gradient by one grid step ``g``. dpkit does not bound
    this (no DP-SGD implementation known to us does); the clipping bound itself holds for every example.

    References
    ----------
    M. Abadi et al. Deep learning with differential privacy. CCS 2016. I. Mironov, K. Talwar, L. Zhang. Rényi
    differential privacy of the sampled Gaussian mechanism, 2019. Y. Zhu, J. Dong, Y.-X. Wang. Optimal
    accounting of differential privacy via characteristic function. AISTATS 2022. C. Canonne, G. Kamath, T.
    Steinke. The discrete Gaussian for differential privacy, 2020. J. Near, C. Abuah. Programming
    Differential Privacy, ch. 13.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.learn import dpsgd
    >>> from dpkit.noise import deterministic_source
    >>> X = np.array([[0.1, 0.9], [0.8, 0.2], [0.2, 0.7], [0.9, 0.1]] * 50)
    >>> y = np.array([0, 1, 0, 1] * 50)
    >>> rel = dpsgd(X, y, 1.0, delta=1e-5, classes=[0, 1], bounds=(0.0, 1.0), batch_size=20,
    ...             sampling_rate=0.1, epochs=2, accounting="rdp", rng=deterministic_source(1))
    >>> rel.value.coef.shape, rel.params["steps"]
    ((1, 2), 20)
    """
    return run(_dpsgd_plan(X, y, epsilon, delta=delta, classes=classes, bounds=bounds, norm=norm, model=model,
                           hidden=hidden, sigma=sigma, batch_size=batch_size, sampling_rate=sampling_rate,
                           epochs=epochs, steps=steps, clip=clip, optimizer=optimizer, learning_rate=learning_rate,
                           momentum=momentum, l2=l2, count_share=count_share, accounting=accounting,
                           callback=callback, progress=progress, neighbours=neighbours, accountant=accountant),
               accountant=accountant, rng=rng, description=description)


class DPSGDClassifier(ClassifierMixin, Estimator):
    """A classifier trained by DP-SGD, scikit-learn style (:func:`dpsgd`).

    ``fit(X, y)`` charges ``accountant`` (if given) once and stores ``release_``, ``model_``, ``classes_``,
    ``n_features_in_`` (and ``coef_``/``intercept_`` for the linear model); ``predict``, ``predict_proba``,
    ``decision_function`` and ``score`` are post-processing. ``classes``, ``delta`` and ``bounds``/``norm``
    must be declared.
    """

    def __init__(self, epsilon: float | None = 1.0, *, delta: float | None = None, classes: Any = None,
                 bounds: Any = None, norm: float | None = None, model: str = "logistic", hidden: int = 32,
                 sigma: float | None = None, batch_size: int = 256, sampling_rate: float | None = None,
                 epochs: float = 5.0, steps: int | None = None, clip: float = 1.0, optimizer: str = "sgd",
                 learning_rate: float = 0.5, momentum: float = 0.9, l2: float = 0.0, count_share: float = 0.01,
                 accounting: str = "auto", callback: Any = None, progress: bool = False, neighbours: Any = None,
                 accountant: Any = None, rng: Any = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.classes = classes
        self.bounds = bounds
        self.norm = norm
        self.model = model
        self.hidden = hidden
        self.sigma = sigma
        self.batch_size = batch_size
        self.sampling_rate = sampling_rate
        self.epochs = epochs
        self.steps = steps
        self.clip = clip
        self.optimizer = optimizer
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.l2 = l2
        self.count_share = count_share
        self.accounting = accounting
        self.callback = callback
        self.progress = progress
        self.neighbours = neighbours
        self.accountant = accountant
        self.rng = rng

    def fit(self, X: Any, y: Any) -> DPSGDClassifier:
        """Fit on private ``X``, ``y`` (one charge); returns ``self``."""
        kw = self.get_params(deep=False)
        rel = dpsgd(X, y, kw.pop("epsilon"), **kw)
        self.release_ = rel
        self.model_ = rel.value
        self.classes_ = rel.value.classes
        self.n_features_in_ = rel.value.n_features
        if rel.value.kind == "logistic":
            self.coef_ = rel.value.coef
            self.intercept_ = rel.value.intercept
        return self

    def decision_function(self, X: Any) -> np.ndarray:
        check_fitted(self, "model_")
        return self.model_.decision_function(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        check_fitted(self, "model_")
        return self.model_.predict_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        check_fitted(self, "model_")
        return self.model_.predict(X)


class DPSGDTrainer:
    """DP-SGD for a PyTorch model (optional extra ``dpkit[torch]``): the same engine, accounting and single
    charge as :func:`dpsgd`, with per-sample gradients from :mod:`torch.func` (``functional_call``, ``vmap``,
    ``grad``). Noise is drawn by dpkit's exact samplers and copied into tensors (never torch's generator);
    Poisson sampling uses dpkit's source.

    ``DPSGDTrainer(module, optimizer, loss_fn, epsilon=..., delta=..., batch_size=..., ...)`` stores its
    arguments (validated at :meth:`fit`); ``fit(X, y)`` (tensors or arrays; ``X`` rows are the records)
    charges ``accountant`` once, trains ``module`` in place through ``optimizer`` and returns the
    :class:`~dpkit.mechanisms.Release` (value: the trained parameters as numpy arrays, by name).
    ``loss_fn(output, target)`` is the loss of a batch (a mean or sum over it); it is called on one record at
    a time. ``device``: ``"cpu"``, ``"cuda"`` or ``None`` (CUDA when available). Importing dpkit never imports
    torch; :class:`~dpkit.core.errors.MissingDependency` at ``fit`` without it.

    The guarantee, cost, privacy event (``Repeated(SubsampledGaussianEvent(q', sigma), T)`` with a public
    ``sampling_rate``: a schedule accountant admits the training against ``T`` declared steps) and output law
    are those of :func:`dpsgd` with the module's parameters in place of the numpy model; the caller must bound
    nothing else (clipping bounds every per-example gradient). Records are the rows of ``X``: no batch
    normalisation or other cross-record layer may be used (per-sample gradients would then not be per-record
    maps).
    """

    def __init__(self, module: Any, optimizer: Any, loss_fn: Any, epsilon: float | None = None, *,
                 delta: float | None = None, sigma: float | None = None, batch_size: int = 256,
                 sampling_rate: float | None = None, epochs: float = 5.0, steps: int | None = None,
                 clip: float = 1.0, count_share: float = 0.01, accounting: str = "auto",
                 callback: Callable[[dict[str, Any]], Any] | None = None, progress: bool = False,
                 device: str | None = None, accountant: Accountant | None = None, rng: RandomSource | None = None,
                 description: str = "") -> None:
        self.module = module
        self.optimizer = optimizer
        self.loss_fn = loss_fn
        self.epsilon = epsilon
        self.delta = delta
        self.sigma = sigma
        self.batch_size = batch_size
        self.sampling_rate = sampling_rate
        self.epochs = epochs
        self.steps = steps
        self.clip = clip
        self.count_share = count_share
        self.accounting = accounting
        self.callback = callback
        self.progress = progress
        self.device = device
        self.accountant = accountant
        self.rng = rng
        self.description = description

    def fit(self, X: Any, y: Any) -> Release:
        """Train the module on private ``X``, ``y`` (one charge, before any randomness)."""
        from dpkit.learn import _torch

        t0 = time.process_time()
        cfg, cost, params = _config(n_params=_torch.n_params(self.module), epsilon=self.epsilon, delta=self.delta,
                                    sigma=self.sigma, batch_size=self.batch_size, sampling_rate=self.sampling_rate,
                                    epochs=self.epochs, steps=self.steps, clip=self.clip,
                                    count_share=self.count_share, accounting=self.accounting,
                                    callback=self.callback, progress=self.progress)
        adapter, n = _torch.adapter(self.module, self.optimizer, self.loss_fn, X, y, self.device)
        params.update(model="torch", n_params=adapter.n_params, device=adapter.device)

        def draw(rng: RandomSource) -> Outcome:
            parts, learnt = _train(adapter, n, cfg, rng)
            learnt["cpu_seconds"] = time.process_time() - t0
            return Outcome(adapter.state(), parts=parts, params=learnt)

        nb = AddRemove()
        plan = Plan(mechanism="dpsgd_torch", cost=cost, draw=draw, params=params, neighbours=nb,
                    privacy_event=_plan_event(cfg, nb))
        return run(plan, accountant=self.accountant, rng=self.rng, description=self.description)
