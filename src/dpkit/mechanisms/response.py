"""Randomized response (local DP) and its unbiased estimators: the integer primitives.

:mod:`dpkit.local` (issue #15) is the home of local DP: its ``randomized_response(_k)`` take any hashable
categories and draw with these primitives' sampler (the same outputs on the same seeded source for 0/1 and
``0..k-1``); its protocols (GRR, unary encoding, OLH, RAPPOR) add aggregation with exact variances.

Guarantee
---------
Each respondent's answer is randomized on its own: the mechanism is ``epsilon``-**local** DP per
respondent (for any two possible true answers ``v, v'`` of one person and any output ``o``,
``P[o | v] <= e^epsilon P[o | v']``). When a curator runs it on a whole column and charges an
accountant, the charge is ``PureDP(epsilon)`` under **replace-one** neighbours (bounded DP, the number of
respondents ``n`` public): one respondent's output changes law within ``e^epsilon`` and the others' do not
change.

It is **not** differentially private under add/remove neighbours, nor under a privacy unit (add/remove of a
unit's records): the output holds one answer per respondent, so it discloses ``n``, and a dataset with one
more record yields an output of another length (an event of probability 1 under one neighbour and 0 under the
other: no finite ε). The plans therefore declare ``neighbours=Replace()``, and a charge against an accountant
with another relation is refused (:class:`~dpkit.core.errors.InvalidParameter` naming ``neighbours``) before
anything is charged or drawn.

Errata (issue #15): the earlier text of this module claimed ``PureDP(epsilon)`` under add/remove ("the other
respondents' outputs do not depend on the added/removed person"); that argument ignores that the added
person's answer itself appears, and it was withdrawn.

Exact samplers
--------------
Binary RR keeps the bit with probability ``e^ε/(1+e^ε)``; k-ary RR keeps the value with probability
``e^ε/(e^ε+k-1)`` and otherwise reports a uniformly random *other* value. Both are the law
``P[o] ∝ e^ε`` for ``o = v`` and ``∝ 1`` otherwise, sampled exactly by rejection: propose ``o``
uniformly among the ``k`` values (``rng.below``, exact), accept ``o = v`` always and ``o != v`` iff
``Bernoulli(exp(-ε))`` succeeds (``dpkit.noise.sample_bernoulli_exp``, exact). The accepted proposal
has exactly the stated law; the expected number of rounds is ``k / (1 + (k-1)e^-ε) <= k``.
For ``k = 2`` this is: with a fair coin propose "keep" or "flip"; a flip is accepted with probability
``e^-ε``; so ``P[flip] = e^-ε / (1 + e^-ε) = 1/(1+e^ε)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter
from dpkit.core.neighbours import Replace
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise.source import RandomSource

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = [
    "RREstimate",
    "randomized_response",
    "randomized_response_k",
    "randomized_response_k_plan",
    "randomized_response_plan",
    "rr_estimate_proportion",
    "rr_k_estimate_frequencies",
    "rr_keep_probability",
]


def rr_keep_probability(epsilon: float, k: int = 2) -> float:
    """``e^ε / (e^ε + k - 1)``: the probability that k-ary RR reports the true value."""
    eps = check.epsilon(epsilon)
    k = check.integer("k", k, minimum=2)
    return float(1.0 / (1.0 + (k - 1) * math.exp(-eps)))


def _rr_sample(true: np.ndarray, k: int, eps: float, rng: RandomSource) -> np.ndarray:
    from dpkit.noise import sample_bernoulli_exp

    n = true.size
    outp = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    while todo.size:
        prop = rng.below(k, todo.size)
        keep = prop == true[todo]
        ok = keep.copy()
        other = np.flatnonzero(~keep)
        if other.size:
            ok[other] = np.asarray(sample_bernoulli_exp(np.full(other.size, eps), rng=rng), dtype=bool)
        outp[todo[ok]] = prop[ok]
        todo = todo[~ok]
    return outp


def _plan(values: np.ndarray, scalar: bool, k: int, eps: float, mechanism: str) -> Plan:
    params = {"epsilon": eps, "k": k, "respondents": int(values.size), "local": True}

    def draw(rng: RandomSource) -> Any:
        noisy = _rr_sample(values.reshape(-1), k, eps, rng).reshape(values.shape)
        return _common.out(noisy, scalar, int)

    return Plan(mechanism=mechanism, cost=PureDP(eps), draw=draw, sensitivity=None, scale=None, noise=None,
                params=params, neighbours=Replace())


def _require_replace(accountant: Any) -> None:
    """Refuse an accountant whose neighbour relation is not replace-one (nothing charged): a local protocol
    discloses the number of respondents, so it is DP only under replace-one (module docstring)."""
    from dpkit.core.accountant import Accountant

    if isinstance(accountant, Accountant) and not isinstance(accountant.neighbours, Replace):
        raise InvalidParameter("neighbours", "randomized response discloses the number of respondents, so it is "
                               "epsilon-DP only under replace-one neighbours (n public): charge an accountant "
                               "created with neighbours=dpkit.Replace()")


def randomized_response(bits: ArrayLike, epsilon: float, *, accountant: Accountant | None = None,
                        rng: RandomSource | None = None, description: str = "") -> Release:
    """Binary randomized response: each bit (0/1 or bool) is kept with probability ``e^ε/(1+e^ε)``
    and flipped otherwise (exact sampler, module docstring).

    Parameters
    ----------
    bits:
        The respondents' true bits: a 0/1 integer (or bool) scalar or array.
    epsilon:
        The local privacy parameter, > 0.
    accountant:
        If given, charged ``PureDP(epsilon)`` once for the whole array before anything is drawn. Its neighbour
        relation must be replace-one (``dpkit.Accountant(budget, neighbours=dpkit.Replace())``): another relation
        is refused, nothing charged (module docstring).
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-local DP per respondent: for any two true bits ``v, v'`` of one person and any output
    ``o``, ``P[o | v] <= e^epsilon P[o | v']`` (the keep/flip probabilities' ratio is ``e^epsilon``).
    Each respondent's output depends on their bit only, so as a central mechanism over the array it is
    ``epsilon``-DP under replace-one (``n`` public); it is not DP under add/remove, because the output discloses
    ``n`` (module docstring).

    Cost
    ----
    ``PureDP(epsilon)``, charged once for the whole array to ``accountant`` (if given) before any random
    bit is drawn; a refused charge draws nothing.

    Output law
    ----------
    Independently per respondent, the output equals the true bit with probability ``e^ε/(1+e^ε)`` and
    the other bit otherwise, sampled exactly by rejection (module docstring). ``Release.value``: an int
    (scalar input) or an int64 array of 0/1 of the input's shape; ``Release.scale`` and ``Release.noise``
    are ``None``.

    Error
    -----
    The raw output is not an estimate. :func:`rr_estimate_proportion` estimates the true proportion
    without bias, with variance ``π(1-π) / (n (2p-1)²)``, ``p = e^ε/(1+e^ε)``, ``π`` the expected share
    of 1s in the output; :meth:`RREstimate.interval` is a normal-approximation interval.
    ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.
    """
    plan = randomized_response_plan(bits, epsilon)
    _require_replace(accountant)
    return run(plan, accountant=accountant, rng=rng, description=description)


def randomized_response_plan(bits: ArrayLike, epsilon: float) -> Plan:
    """The validated plan of :func:`randomized_response` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`randomized_response`, which is ``run(randomized_response_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``Replace()``: the guarantee holds under
    replace-one only (module docstring).
    """
    arr, scalar = _common.int_values("bits", bits)
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) > 1):
        raise InvalidData("bits", "must contain only 0/1 (or booleans)")
    eps = check.epsilon(epsilon)
    return _plan(arr, scalar, 2, eps, "randomized_response")


def randomized_response_k(values: ArrayLike, k: int, epsilon: float, *, accountant: Accountant | None = None,
                          rng: RandomSource | None = None, description: str = "") -> Release:
    """k-ary randomized response (generalised RR / direct encoding) over the public domain ``{0..k-1}``:
    each value is kept with probability ``e^ε/(e^ε+k-1)``, else replaced by a uniformly random *other*
    value (exact sampler, module docstring).

    Parameters
    ----------
    values:
        The respondents' true values: integers in ``[0, k)`` (scalar or array).
    k:
        The size of the public domain, >= 2.
    epsilon:
        The local privacy parameter, > 0.
    accountant:
        If given, charged ``PureDP(epsilon)`` once for the whole array before anything is drawn. Its neighbour
        relation must be replace-one (``dpkit.Accountant(budget, neighbours=dpkit.Replace())``): another relation
        is refused, nothing charged (module docstring).
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).
    description:
        A free-text note written into the receipt.

    Guarantee
    ---------
    ``epsilon``-local DP per respondent: ``P[o | v] / P[o | v']`` is at most ``e^epsilon`` for any output
    ``o`` (the law is ``∝ e^ε`` at ``o = v`` and ``∝ 1`` elsewhere). As a central mechanism over the
    array it is ``epsilon``-DP under replace-one (``n`` public); it is not DP under add/remove, because the
    output discloses ``n`` (module docstring).

    Cost
    ----
    ``PureDP(epsilon)``, charged once for the whole array to ``accountant`` (if given) before any random
    bit is drawn; a refused charge draws nothing.

    Output law
    ----------
    Independently per respondent, ``P[o = v] = e^ε/(e^ε+k-1)`` and ``P[o = w] = 1/(e^ε+k-1)`` for each
    ``w != v``, sampled exactly by rejection (module docstring). ``Release.value``: an int (scalar
    input) or an int64 array; ``Release.scale`` and ``Release.noise`` are ``None``.

    Error
    -----
    The raw output is not an estimate. :func:`rr_k_estimate_frequencies` estimates the true frequencies
    without bias, with variance ``π_v(1-π_v) / (n (p-q)²)`` (``p``, ``q`` the keep and per-other
    probabilities above). ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.
    """
    plan = randomized_response_k_plan(values, k, epsilon)
    _require_replace(accountant)
    return run(plan, accountant=accountant, rng=rng, description=description)


def randomized_response_k_plan(values: ArrayLike, k: int, epsilon: float) -> Plan:
    """The validated plan of :func:`randomized_response_k` (nothing drawn or charged).

    Same parameters (validated here, with the same errors), guarantee, cost, output law and error as
    :func:`randomized_response_k`, which is ``run(randomized_response_k_plan(...))``: run it with
    :func:`~dpkit.mechanisms.contract.run`, or draw it inside a composite plan whose cost covers it with
    :meth:`~dpkit.mechanisms.contract.Plan.sample`. ``Plan.neighbours`` is ``Replace()``: the guarantee holds under
    replace-one only (module docstring).
    """
    arr, scalar = _common.int_values("values", values)
    k = check.integer("k", k, minimum=2)
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= k):
        raise InvalidData("values", "must contain only integers in [0, k)")
    eps = check.epsilon(epsilon)
    return _plan(arr, scalar, k, eps, "randomized_response_k")


# ---------------------------------------------------------------------------------------------
# estimators (post-processing: free)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RREstimate:
    """An unbiased randomized-response estimate with its (plug-in) variance.

    ``value``: the estimate (float, or array for k-ary frequencies); ``variance``: the plug-in estimate
    of its variance, ``π̂(1-π̂) / (n (p-q)²)`` with ``π̂`` the observed frequency (the exact variance is
    the same formula with the true ``π``; see :meth:`exact_variance`); ``n``: number of responses.
    """

    value: float | np.ndarray
    variance: float | np.ndarray
    n: int
    keep: float
    other: float

    @property
    def stderr(self) -> float | np.ndarray:
        return np.sqrt(self.variance)

    def exact_variance(self, true_frequency: ArrayLike) -> float | np.ndarray:
        """The estimator's exact variance if the true frequency (proportion) were ``true_frequency``."""
        theta = np.asarray(true_frequency, dtype=np.float64)
        pi = self.other + (self.keep - self.other) * theta
        return pi * (1.0 - pi) / (self.n * (self.keep - self.other) ** 2)

    def interval(self, confidence: float = 0.95) -> tuple[float | np.ndarray, float | np.ndarray]:
        """Normal-approximation interval ``value ± z stderr`` (approximate; good for large ``n``)."""
        from scipy import special

        conf = check.probability("confidence", confidence)
        z = float(special.ndtri(1.0 - (1.0 - conf) / 2.0))
        h = z * self.stderr
        return self.value - h, self.value + h


def _responses(name: str, data: Any, k: int) -> np.ndarray:
    arr = check.integer_array(name, data).reshape(-1)
    if int(arr.min()) < 0 or int(arr.max()) >= k:
        raise InvalidData(name, "must contain only integers in [0, k)")
    return arr


@check.numeric_guard("epsilon", "too small: the estimator's denominator p - q rounds to zero")
def rr_estimate_proportion(noisy_bits: ArrayLike, epsilon: float) -> RREstimate:
    """Unbiased estimate of the true proportion of 1s from binary RR outputs.

    With ``p = e^ε/(1+e^ε)`` and observed proportion ``π̂``: ``θ̂ = (π̂ - (1-p)) / (2p - 1)``,
    ``E[θ̂] = θ``, ``Var[θ̂] = π(1-π) / (n (2p-1)²)`` with ``π = (1-p) + (2p-1)θ``. Post-processing (no
    cost). The estimate can fall outside [0, 1]; clip it yourself if you need to (this adds bias).
    """
    arr = _responses("noisy_bits", noisy_bits, 2)
    eps = check.epsilon(epsilon)
    p = rr_keep_probability(eps, 2)
    q = 1.0 - p
    if not p - q > 0:
        raise InvalidParameter("epsilon", "too small: the estimator's denominator p - q rounds to zero")
    n = int(arr.size)
    pi = float(np.mean(arr))
    est = (pi - q) / (p - q)
    var = pi * (1.0 - pi) / (n * (p - q) ** 2)
    return RREstimate(value=est, variance=var, n=n, keep=p, other=q)


@check.numeric_guard("epsilon", "too small: the estimator's denominator p - q rounds to zero")
def rr_k_estimate_frequencies(noisy: ArrayLike, k: int, epsilon: float) -> RREstimate:
    """Unbiased estimates of the true frequencies (proportions) of ``0..k-1`` from k-ary RR outputs.

    With ``p = e^ε/(e^ε+k-1)``, ``q = 1/(e^ε+k-1)`` and observed frequencies ``π̂_v``:
    ``θ̂_v = (π̂_v - q) / (p - q)``, ``Var[θ̂_v] = π_v(1-π_v) / (n (p-q)²)``. Post-processing (no cost).
    Multiply by ``n`` for counts.
    """
    k = check.size_limit("k", k, 10**7, minimum=2)  # the estimate holds k frequencies
    arr = _responses("noisy", noisy, k)
    eps = check.epsilon(epsilon)
    p = rr_keep_probability(eps, k)
    q = float(1.0 / (math.exp(eps) + k - 1)) if eps < 700 else 0.0
    if not p - q > 0:
        raise InvalidParameter("epsilon", "too small: the estimator's denominator p - q rounds to zero")
    n = int(arr.size)
    pi = np.bincount(arr, minlength=k).astype(np.float64) / n
    est = (pi - q) / (p - q)
    var = pi * (1.0 - pi) / (n * (p - q) ** 2)
    return RREstimate(value=est, variance=var, n=n, keep=p, other=q)
