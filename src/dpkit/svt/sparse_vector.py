"""AboveThreshold: the sparse vector technique with cutoff ``c = 1``, computed exactly on a lattice.

The sparse vector technique answers a stream of threshold questions "is ``q_i(D) >= T``?" and pays
only for the (first) *yes*: every query before it is answered for free. This module implements the
standard, provably private version (Lyu, Su & Li 2017, Alg. 7 = Li et al. 2016, Alg. 18, with
cutoff ``c = 1`` and no numeric answers)::

    rho ~ Lap(Δ/ε₁)                         drawn once, after the accountant was charged
    for each query q_i:
        nu_i ~ Lap(2cΔ/ε₂)                  (Lap(cΔ/ε₂) if the caller declares the queries monotonic)
        if q_i(D) + nu_i >= T + rho:  answer ⊤ and halt
        else:                          answer ⊥

Guarantee
---------
Pure ``epsilon``-DP (``ε₁ + ε₂ <= epsilon``) for the *whole* run, however many queries are asked,
with respect to whatever neighbour relation the caller's ``sensitivity`` refers to: ``sensitivity``
``Δ`` must bound ``|q_i(D) - q_i(D')|`` for every query and every pair of neighbours. dpkit cannot
check this: it is the caller's promise (as for :func:`dpkit.mechanisms.laplace`). ``monotonic=True``
is a further promise: for every pair of neighbours, either all queries satisfy ``q_i(D) <= q_i(D')``
or all satisfy ``q_i(D) >= q_i(D')`` (e.g. counts under add/remove). A wrong promise voids the
guarantee (tests show a loss of about ``1.5 epsilon`` for monotonic noise on non-monotonic queries).
The cost ``PureDP(epsilon)`` is charged once, up front, when the object is built.

Budget split: ``ε₁ : ε₂ = 1 : (2c)^(2/3)`` (``1 : c^(2/3)`` monotonic), which minimises the variance of
``nu - rho`` (Lyu–Su–Li Eq. 12); ``split=(a, b)`` sets ``ε₁ : ε₂ = a : b`` instead (public shares). The
numbers are rounded so that, as rationals, ``ε₁ + ε₂ <= epsilon``.

Exact law (what is sampled)
---------------------------
Let ``g = lattice_granularity(Δ)`` (the largest power of two ``<= Δ / 2^20``), and round the threshold
and every query answer to the lattice ``gZ``: ``T_u = round_half_even(T / g)``, ``u_i =
round_half_even(q_i / g)`` (exact: ``g`` is a power of two). Rounding moves each answer by at most
``g/2``, so ``|u_i(D) - u_i(D')| <= Δ/g + 1``, an integer; hence the rounded answers have integer
sensitivity ``Δu = floor(Δ/g) + 1`` lattice steps (``Δu g <= Δ (1 + 2^-20)``), and rounding, being
monotone, keeps monotonic queries monotonic. Then, with ``DLap(t)`` the discrete Laplace law
``P[k] = (1-r)/(1+r) r^|k|``, ``r = exp(-1/t)`` (exact sampler :func:`dpkit.noise.sample_discrete_laplace`):

- ``rho ~ DLap(t₁)``, ``t₁`` = the smallest float ``>= Δu/ε₁``;
- ``nu_i ~ DLap(t₂)`` independent, ``t₂`` = the smallest float ``>= 2cΔu/ε₂`` (``cΔu/ε₂`` monotonic);
- answer ``⊤`` iff ``u_i + nu_i >= T_u + rho``, compared in exact integer arithmetic.

So, for ``k`` leading ``⊥`` answers followed by ``⊤`` (``P[all m ⊥]`` is the same sum without the
last factor)::

    P[⊥^k ⊤] = Σ_z P[rho = z] · Π_{i<k} P[nu < T_u + z - u_i] · P[nu >= T_u + z - u_k].

Privacy proof (Lyu–Su–Li Thm 4.7/4.9, verbatim on the integers): with the shift ``z -> z + Δu``,
``P[rho = z] <= e^(Δu/t₁) P[rho = z + Δu]`` and ``Δu/t₁ <= ε₁``; every ``⊥`` factor can only grow
(``u_i' <= u_i + Δu``); the ``⊤`` factor's argument moves by at most ``2Δu`` and the discrete Laplace
tail obeys ``P[nu >= a] <= e^(k/t) P[nu >= a + k]`` (because its pmf does), which costs
``2Δu/t₂ <= ε₂``. In the monotonic case one of the two shifts ``0`` or ``Δu`` makes either the ``⊥``
factors or the ``⊤`` factor move by at most ``Δu`` only. The tests compute this law in closed form
(no truncation) and check ``max |ln P_D/P_D'| <= epsilon`` on random neighbouring pairs.

Accuracy
--------
:meth:`AboveThreshold.accuracy`: with probability ``>= 1 - beta`` over the noise, among the first ``m``
queries a ``⊤`` at query ``i`` implies ``q_i >= T - alpha`` and every ``⊥`` implies ``q_j <= T + alpha``,
with ``alpha = (2a - 1) g``, ``a = ceil(max(t₁, t₂) ln(2(m + 1)/beta))`` (union bound over the ``m + 1``
noise draws, ``P[|DLap(t)| >= a] <= 2 e^(-a/t)``), i.e. ``alpha ≈ 2 max(Δ/ε₁, 2Δ/ε₂) ln(2(m+1)/beta)``.

Misuse guards: the object refuses further queries once halted (:class:`SVTHalted`, nothing drawn), and
refuses to be copied or pickled (a copy would share the threshold noise and allow more than ``c``
``⊤`` answers, which is not private).

Erratum vs the seeds: Near & Abuah's ``above_threshold`` returns ``None`` while their ``sparse`` tests
``== -1`` (a crash); here "no ⊤" is always ``None``. The Lyu–Su–Li / Li et al. variants without a
cutoff, without query noise, with ``c``-free query noise or printing ``q_i + nu_i`` (Algs 3–6 /
14–17) are not offered; they exist only as test fixtures.

Example
-------
>>> from dpkit.noise import deterministic_source
>>> svt = AboveThreshold(1.0, threshold=10.0, rng=deterministic_source(1))
>>> [svt.query(v) for v in (-50.0, -40.0, 60.0)]
[False, False, True]
>>> svt.halted, svt.position
(True, 2)
>>> above_threshold([-50.0, 60.0, 70.0], 10.0, 1.0, rng=deterministic_source(2)).value
1
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release, charge, check_bool, check_description, resolve_accountant
from dpkit.noise import source as _source

__all__ = ["AboveThreshold", "SVTHalted", "above_threshold"]

# |value| / g is clamped (queries) or refused (threshold) beyond this many lattice steps.
_MAX_UNITS = 2.0**1000
_SAFE = 2**62  # exact int64 comparison range


class SVTHalted(DPKitError):
    """A query was asked after the sparse vector object halted (its ``⊤`` answer was given).

    Nothing was drawn and nothing was charged; ask a new object (with its own budget) instead.
    """

    def __init__(self, param: str = "query") -> None:
        self.param = param
        super().__init__(f"{param}: the sparse vector object has halted after its above-threshold answer")


# ---------------------------------------------------------------------------------------------
# the plan: every public quantity, computed and validated before anything is charged
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    epsilon: float
    epsilon_threshold: float  # ε₁ allotted to the threshold noise
    epsilon_queries: float  # ε₂ allotted to the query noise
    sensitivity: float
    monotonic: bool
    cutoff: int
    granularity: float  # g
    d_units: int  # Δu, the rounded answers' sensitivity in lattice steps
    t_threshold: float  # t₁ in lattice steps
    t_query: float  # t₂ in lattice steps

    @property
    def threshold_scale(self) -> float:
        """Scale of the threshold noise in the queries' units (``t₁ g``)."""
        return self.t_threshold * self.granularity

    @property
    def query_scale(self) -> float:
        """Scale of the query noise in the queries' units (``t₂ g``)."""
        return self.t_query * self.granularity


def _largest_float_at_most(x: Fraction) -> float:
    f = float(x)
    while Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _split(epsilon: float, split: Any, monotonic: bool, cutoff: int) -> tuple[float, float]:
    if split is None:
        a, b = 1.0, float(cutoff if monotonic else 2 * cutoff) ** (2.0 / 3.0)
    else:
        if isinstance(split, (str, bytes)) or not hasattr(split, "__len__") or len(split) != 2:
            raise WrongType("split", "a pair (a, b) of positive shares, or None")
        a = check.positive("split", split[0])
        b = check.positive("split", split[1])
    fa, fb, fe = Fraction(a), Fraction(b), Fraction(epsilon)
    e1 = _largest_float_at_most(fe * fa / (fa + fb))
    e2 = _largest_float_at_most(fe - Fraction(e1))
    if not (e1 > 0 and e2 > 0):
        raise InvalidParameter("split", "too uneven for this epsilon: a share rounds to zero")
    return e1, e2


def _plan(epsilon: Any, sensitivity: Any = 1.0, monotonic: Any = False, split: Any = None,
          cutoff: int = 1) -> _Plan:
    """Validate the public parameters and compute the exact noise scales (nothing is drawn)."""
    from dpkit.noise import lattice_granularity

    eps = check.epsilon(epsilon)
    sens = check.positive("sensitivity", sensitivity)
    mono = check_bool("monotonic", monotonic)
    e1, e2 = _split(eps, split, mono, cutoff)
    g = float(lattice_granularity(sens))
    d_units = math.floor(Fraction(sens) / Fraction(g)) + 1
    t1 = _common.div_up(Fraction(d_units), Fraction(e1))
    factor = cutoff if mono else 2 * cutoff
    t2 = _common.div_up(Fraction(factor * d_units), Fraction(e2))
    for t in (t1, t2):
        if not (math.isfinite(t) and t <= 2.0**50):  # the samplers' range (t >= 2^20 here)
            raise InvalidParameter("epsilon" if split is None else "split",
                                   "too small (or the split too uneven): the noise scale exceeds the samplers' range")
    return _Plan(eps, e1, e2, sens, mono, cutoff, g, d_units, t1, t2)


def _threshold_units(threshold: Any, g: float) -> int:
    t = check.real("threshold", threshold)
    if abs(t) / g >= _MAX_UNITS:
        raise InvalidParameter("threshold", "too large relative to the sensitivity for exact lattice arithmetic")
    return int(np.rint(t / g))


def _value_units(arr: np.ndarray, g: float) -> np.ndarray:
    """Answers in lattice steps (float64 holding exact integers). Values beyond ``2^1000 g`` in magnitude
    are first clamped to it: clamping is 1-Lipschitz, so the sensitivity promise still holds."""
    lim = _MAX_UNITS * g
    return np.rint(np.clip(arr, -lim, lim) / g)


def _diffs(units: np.ndarray, t_units: int) -> np.ndarray:
    """``u_i - T_u`` as int64, clipped to ``±2^62`` (exact for comparisons against ``|rho - nu| < 2^62``)."""
    if units.size == 0:
        return np.zeros(0, dtype=np.int64)
    if float(np.max(np.abs(units))) < 2.0**60 and abs(t_units) < 2**60:
        return units.astype(np.int64) - np.int64(t_units)
    return np.array([max(-_SAFE, min(_SAFE, int(v) - t_units)) for v in units.tolist()], dtype=np.int64)


def _sample_first_above(diffs: np.ndarray, plan: _Plan, rng: Any, count: int = 1) -> np.ndarray:
    """``count`` independent runs of AboveThreshold on the same answers; ``diffs[i] = u_i - T_u``.

    Returns the index of the first ``⊤`` of each run, ``-1`` when every answer is ``⊥``. Each run draws
    its threshold noise first, then query noise block by block for the runs still going; noise after a
    run's ``⊤`` is never drawn for it. The law is exactly the sequential one (module docstring)."""
    from dpkit.noise import sample_discrete_laplace

    rho = np.asarray(sample_discrete_laplace(plan.t_threshold, count, rng=rng), dtype=np.int64)
    out = np.full(count, -1, dtype=np.int64)
    m = int(diffs.size)
    active = np.arange(count)
    start = 0
    block = 16 if count == 1 else max(1, (1 << 18) // count)
    while start < m and active.size:
        cols = diffs[start:start + block]
        nu = np.asarray(sample_discrete_laplace(plan.t_query, (active.size, cols.size), rng=rng), dtype=np.int64)
        r = rho[active]
        if nu.size and int(np.max(np.abs(nu))) + int(np.max(np.abs(r))) < _SAFE:
            hit = cols[None, :] >= (r[:, None] - nu)  # u + nu >= T + rho  <=>  u - T >= rho - nu
        else:  # pragma: no cover - needs noise beyond 2^61, probability ~exp(-2^10)
            hit = np.array([[int(c) >= int(rr) - int(v) for c, v in zip(cols, row, strict=True)]
                            for rr, row in zip(r, nu, strict=True)], dtype=bool).reshape(nu.shape)
        any_hit = hit.any(axis=1)
        out[active[any_hit]] = start + np.argmax(hit[any_hit], axis=1)
        active = active[~any_hit]
        start += cols.size
        if count == 1:
            block *= 4
    return out


def _accuracy(plan: _Plan, queries: Any, beta: Any) -> float:
    m = check.integer("queries", queries, minimum=1)
    b = check.probability("beta", beta)
    t = max(plan.t_threshold, plan.t_query)
    a = math.ceil(t * math.log(2.0 * (m + 1) / b) * (1.0 + 1e-12)) + 1
    return _common.up((2 * a - 1) * plan.granularity, 2)


def _params(plan: _Plan, threshold: float) -> dict[str, Any]:
    return {"epsilon": plan.epsilon, "threshold": threshold, "sensitivity": plan.sensitivity,
            "monotonic": plan.monotonic, "cutoff": plan.cutoff, "epsilon_threshold": plan.epsilon_threshold,
            "epsilon_queries": plan.epsilon_queries, "threshold_scale": plan.threshold_scale,
            "query_scale": plan.query_scale, "granularity": plan.granularity}


# ---------------------------------------------------------------------------------------------
# the interactive object
# ---------------------------------------------------------------------------------------------
class AboveThreshold:
    """Interactive AboveThreshold (sparse vector technique, cutoff 1): pure ``epsilon``-DP.

    Parameters
    ----------
    epsilon:
        Total privacy parameter of the whole run (``ε₁ + ε₂ <= epsilon``), > 0.
    threshold:
        The public threshold ``T`` (a finite real).
    sensitivity:
        ``Δ``: the largest change of any query's answer between neighbouring datasets, under the
        neighbour relation the caller (or the accountant) uses. A promise dpkit cannot check.
    monotonic:
        Declare that between any two neighbours all answers move in the same direction (counts under
        add/remove). Halves the query noise; a false declaration voids the guarantee.
    split:
        ``(a, b)``: ``ε₁ : ε₂ = a : b`` (public shares). Default ``1 : 2^(2/3)`` (``1 : 1`` monotonic).
    accountant:
        Charged ``PureDP(epsilon)`` once, in the constructor, before the threshold noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).

    Use :meth:`query` with each answer ``q_i(D)``; it returns ``False`` (``⊥``) or ``True`` (``⊤``). After
    the first ``True`` the object is halted and :meth:`query` raises :class:`SVTHalted`. The exact law,
    the proof, and the accuracy bound are in the module docstring; :meth:`accuracy` computes ``alpha``.

    Attributes (all public): ``epsilon``, ``threshold``, ``sensitivity``, ``monotonic``, ``cutoff`` (1),
    ``epsilon_threshold``, ``epsilon_queries``, ``threshold_scale``, ``query_scale``, ``granularity``,
    ``cost``, ``receipt``, ``secure``, ``answered`` (queries answered so far), ``halted``, ``position``
    (index of the ``⊤`` answer, or ``None``).
    """

    def __init__(self, epsilon: float, threshold: float, *, sensitivity: float = 1.0, monotonic: bool = False,
                 split: Any = None, accountant: Any = None, rng: Any = None, description: str = "") -> None:
        plan = _plan(epsilon, sensitivity, monotonic, split)
        t = check.real("threshold", threshold)
        t_units = _threshold_units(t, plan.granularity)
        desc = check_description(description)
        rng = _source.resolve(rng)
        accountant = resolve_accountant(accountant)
        self._plan = plan
        self._threshold = t
        self._t_units = t_units
        self._rng = rng
        self._cost = PureDP(plan.epsilon)
        self._params = _params(plan, t)
        self._receipt = charge(accountant, self._cost, mechanism="above_threshold", sensitivity=plan.sensitivity,
                               scale=plan.query_scale, params=self._params, secure=rng.secure, description=desc)
        from dpkit.noise import sample_discrete_laplace

        self._rho = int(sample_discrete_laplace(plan.t_threshold, 1, rng=rng)[0])
        self._answered = 0
        self._hits: list[int] = []

    # -- the stream -----------------------------------------------------------------------------
    def query(self, value: float) -> bool:
        """Answer "is ``value`` (= ``q_i(D)``) above the threshold?" with fresh query noise.

        ``value`` must be a finite real (else :class:`~dpkit.core.errors.WrongType` /
        :class:`~dpkit.core.errors.InvalidParameter` naming ``"value"``; nothing drawn, the object stays
        usable). Raises :class:`SVTHalted` (nothing drawn) once the ``⊤`` answer has been given.
        """
        if self.halted:
            raise SVTHalted("query")
        v = check.real("value", value)
        u = int(_value_units(np.array([v]), self._plan.granularity)[0])
        from dpkit.noise import sample_discrete_laplace

        nu = int(sample_discrete_laplace(self._plan.t_query, 1, rng=self._rng)[0])
        above = u + nu >= self._t_units + self._rho
        if above:
            self._hits.append(self._answered)
        self._answered += 1
        return bool(above)

    def accuracy(self, queries: int, beta: float = 0.05) -> float:
        """``alpha`` such that, with probability ``>= 1 - beta``, over the first ``queries`` answers a
        ``⊤`` at ``i`` implies ``q_i >= T - alpha`` and each ``⊥`` implies ``q_j <= T + alpha``."""
        return _accuracy(self._plan, queries, beta)

    # -- public state ---------------------------------------------------------------------------
    @property
    def halted(self) -> bool:
        return len(self._hits) >= self._plan.cutoff

    @property
    def position(self) -> int | None:
        """Index (0-based, in query order) of the above-threshold answer, or ``None`` so far."""
        return self._hits[0] if self._hits else None

    @property
    def answered(self) -> int:
        return self._answered

    @property
    def cutoff(self) -> int:
        return self._plan.cutoff

    @property
    def epsilon(self) -> float:
        return self._plan.epsilon

    @property
    def threshold(self) -> float:
        return self._threshold

    @property
    def sensitivity(self) -> float:
        return self._plan.sensitivity

    @property
    def monotonic(self) -> bool:
        return self._plan.monotonic

    @property
    def epsilon_threshold(self) -> float:
        return self._plan.epsilon_threshold

    @property
    def epsilon_queries(self) -> float:
        return self._plan.epsilon_queries

    @property
    def threshold_scale(self) -> float:
        return self._plan.threshold_scale

    @property
    def query_scale(self) -> float:
        return self._plan.query_scale

    @property
    def granularity(self) -> float:
        return self._plan.granularity

    @property
    def cost(self) -> PureDP:
        return self._cost

    @property
    def receipt(self) -> Any:
        return self._receipt

    @property
    def secure(self) -> bool:
        return bool(self._rng.secure)

    @property
    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def __repr__(self) -> str:
        state = "halted" if self.halted else "running"
        return (f"AboveThreshold(epsilon={self.epsilon!r}, threshold={self.threshold!r}, "
                f"sensitivity={self.sensitivity!r}, monotonic={self.monotonic!r}: {state}, "
                f"{self.answered} answered)")

    # -- copying would duplicate the threshold noise (more than c ⊤ answers): refused ---------
    def __copy__(self) -> AboveThreshold:
        raise WrongType("AboveThreshold", "a single-use object: copying it would break the privacy guarantee")

    def __deepcopy__(self, memo: Any) -> AboveThreshold:
        raise WrongType("AboveThreshold", "a single-use object: copying it would break the privacy guarantee")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise WrongType("AboveThreshold", "a single-use object: pickling it would break the privacy guarantee")


# ---------------------------------------------------------------------------------------------
# the functional form
# ---------------------------------------------------------------------------------------------
def above_threshold(values: Any, threshold: float, epsilon: float, *, sensitivity: float = 1.0,
                    monotonic: bool = False, split: Any = None, accountant: Any = None, rng: Any = None,
                    description: str = "") -> Release:
    """AboveThreshold over a known sequence of answers: ``Release.value`` is the index of the first
    above-threshold answer, or ``None`` if every answer is below.

    ``values`` are the answers ``q_i(D)`` in order (a 1-D array of finite reals; may be empty). Same
    law, guarantee (pure ``epsilon``-DP, cost ``PureDP(epsilon)`` charged once before any noise), and
    parameters as :class:`AboveThreshold`; see the module docstring for the exact law and the accuracy
    bound (``alpha`` for ``m = len(values)`` is in ``Release.params["alpha_95"]``, ``beta = 0.05``).
    ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.
    """
    plan = _plan(epsilon, sensitivity, monotonic, split)
    arr = check.finite_array("values", values, allow_empty=True)
    if arr.ndim > 1:
        raise WrongType("values", "a 1-D array of real numbers")
    arr = arr.reshape(-1)
    t = check.real("threshold", threshold)
    t_units = _threshold_units(t, plan.granularity)
    desc = check_description(description)
    rng = _source.resolve(rng)
    accountant = resolve_accountant(accountant)
    diffs = _diffs(_value_units(arr, plan.granularity), t_units)
    params = _params(plan, t)
    params["queries"] = int(arr.size)
    params["alpha_95"] = _accuracy(plan, max(1, int(arr.size)), 0.05)
    cost = PureDP(plan.epsilon)
    receipt = charge(accountant, cost, mechanism="above_threshold", sensitivity=plan.sensitivity,
                     scale=plan.query_scale, params=params, secure=rng.secure, description=desc)
    idx = int(_sample_first_above(diffs, plan, rng, 1)[0])
    return Release(value=None if idx < 0 else idx, mechanism="above_threshold", scale=None, cost=cost,
                   receipt=receipt, secure=rng.secure, noise=None, params=params)
