"""The standard sparse vector technique (cutoff ``c``), computed exactly on a lattice.

The sparse vector technique (SVT) answers a stream of threshold questions "is ``q_i(D) >= T_i``?" and pays
only for the *yes* answers (at most ``c`` of them): every ``⊥`` is free. This module implements the standard,
provably private version — Lyu, Su & Li 2017, Alg. 7 = Li et al. 2016, Alg. 18::

    rho ~ Lap(Δ/ε₁)                          drawn once, after the accountant was charged
    for each query q_i (threshold T_i):
        nu_i ~ Lap(2cΔ/ε₂)                   (Lap(cΔ/ε₂) if the caller declares the queries monotonic)
        if q_i(D) + nu_i >= T_i + rho:
            answer ⊤  — or, if ε₃ > 0, the numeric answer q_i(D) + Lap(cΔ/ε₃) with FRESH noise
            halt after the c-th ⊤
        else:
            answer ⊥

- :class:`SparseVector`: the interactive object (:meth:`SparseVector.query`, :meth:`SparseVector.error_check`).
- :func:`sparse_vector`: the same over a known list of answers (``Release.value``: the indices of the ``⊤``).
- :class:`AboveThreshold` / :func:`above_threshold`: the case ``c = 1`` with ``⊤/⊥`` answers (a ``bool`` /
  the index of the first ``⊤``).

Interactive use
---------------
>>> from dpkit.noise import deterministic_source
>>> svt = SparseVector(1.0, threshold=100.0, cutoff=2, rng=deterministic_source(7))
>>> found = []
>>> for i, count in enumerate([3.0, 250.0, 40.0, 900.0, 500.0]):
...     if svt.query(count):
...         found.append(i)
...     if svt.halted:
...         break
>>> found, svt.remaining, svt.answered
([1, 3], 0, 4)

With numeric answers (a share ``ε₃`` of the budget, fresh noise), each ``⊤`` carries a noisy value; an
answer is truthy exactly when it is ``⊤``:

>>> svt = SparseVector(1.0, threshold=100.0, cutoff=2, numeric_share=0.5, rng=deterministic_source(8))
>>> answer = svt.query(900.0)
>>> bool(answer), answer.index, round(answer.value, -2)
(True, 0, 900.0)
>>> bool(svt.query(3.0)), svt.remaining
(False, 1)

Guarantee
---------
Pure ``epsilon``-DP (``ε₁ + ε₂ + ε₃ <= epsilon``) for the *whole* run, however many queries are asked (they
may be chosen adaptively from earlier answers, thresholds included), with respect to whatever neighbour
relation the caller's ``sensitivity`` refers to: ``Δ`` must bound ``|q_i(D) - q_i(D')|`` for every query and
every pair of neighbours. dpkit cannot check this: it is the caller's promise (as for
:func:`dpkit.mechanisms.laplace`); answers that move by more than ``Δ`` void the guarantee (a test shows the
loss exceeding ``epsilon``). ``monotonic=True`` is a further promise: for every pair of neighbours, either all
queries satisfy ``q_i(D) <= q_i(D')`` or all satisfy ``q_i(D) >= q_i(D')`` (e.g. counts under add/remove). A
false declaration voids the guarantee (tests show a loss of about ``1.5 epsilon``). The cost
``PureDP(epsilon)`` is charged once, up front, when the object is built (or the function called).

Budget split: ``ε₃ = numeric_share · epsilon`` (default 0: ``⊤/⊥`` answers only), and ``ε₁ : ε₂ = 1 :
(2c)^(2/3)`` (``1 : c^(2/3)`` monotonic) for the rest, which minimises the variance of ``nu - rho``
(Lyu–Su–Li Eq. 12). ``split=(a, b)`` sets ``ε₁ : ε₂ = a : b``; ``split=(a, b, e)`` sets ``ε₁ : ε₂ : ε₃ = a : b :
e`` (public shares, all positive). The numbers are rounded so that, as rationals, ``ε₁ + ε₂ + ε₃ <= epsilon``.

Exact law (what is sampled)
---------------------------
Let ``g = lattice_granularity(Δ)`` (the largest power of two ``<= Δ / 2^20``) and round every threshold and
answer to the lattice ``gZ``: ``T_i -> round_half_even(T_i / g)``, ``u_i = round_half_even(q_i / g)`` (exact:
``g`` is a power of two). Rounding moves each answer by at most ``g/2``, so the rounded answers have integer
sensitivity ``Δu = floor(Δ/g) + 1`` lattice steps (``Δu g <= Δ (1 + 2^-20)``), and rounding, being monotone,
keeps monotonic queries monotonic. With ``DLap(t)`` the discrete Laplace law ``P[k] = (1-r)/(1+r) r^|k|``,
``r = exp(-1/t)`` (exact sampler :func:`dpkit.noise.sample_discrete_laplace`):

- ``rho ~ DLap(t₁)``, ``t₁`` = the smallest float ``>= Δu/ε₁``;
- ``nu_i ~ DLap(t₂)`` independent, ``t₂`` = the smallest float ``>= 2cΔu/ε₂`` (``cΔu/ε₂`` monotonic);
- answer ``⊤`` iff ``u_i + nu_i >= T_i + rho``, compared in exact integer arithmetic;
- numeric answer (``ε₃ > 0``): ``g (u_i + eta_i)``, ``eta_i ~ DLap(t₃)`` fresh, ``t₃`` the smallest float
  ``>= cΔu/ε₃`` (the float nearest the lattice point).

So, with ``a_i = T_i - u_i`` and ``I⊥``, ``I⊤`` the queries answered ``⊥`` / ``⊤`` (``|I⊤| <= c``)::

    P[pattern] = Σ_z P[rho = z] · Π_{i ∈ I⊥} P[nu < a_i + z] · Π_{i ∈ I⊤} P[nu >= a_i + z]

and numeric answers ``v_i`` multiply it by ``Π_{i ∈ I⊤} P[eta = v_i/g - u_i]``. :mod:`dpkit.audit.svt_law`
evaluates this in closed form (no truncation); the tests check it against the sampler.

Privacy proof (Lyu–Su–Li Thm 4.7, verbatim on the integers). Let ``a'_i = T_i - u'_i`` on a neighbour, so
``|a'_i - a_i| <= Δu``. Substitute ``z -> z + Δu`` in the sum for ``D'`` (a bijection of ``Z``):
``P[rho = z] <= e^(Δu/t₁) P[rho = z + Δu]`` and ``Δu/t₁ <= ε₁``; every ``⊥`` factor can only grow
(``a'_i + Δu >= a_i``); every ``⊤`` factor's argument moves by at most ``2Δu`` (``a'_i + Δu <= a_i + 2Δu``) and
the discrete Laplace tail obeys ``P[nu >= w] <= e^(k/t) P[nu >= w + k]``, so the at most ``c`` of them cost
``2cΔu/t₂ <= ε₂``. Monotonic queries (Thm 4.9): if every ``u'_i <= u_i`` use no shift (``⊥`` factors grow,
each ``⊤`` moves by ``<= Δu``, and ``cΔu/t₂ <= ε₂``); if every ``u'_i >= u_i`` use the shift ``Δu``
(``ρ`` costs ``ε₁``, ``⊥`` factors grow, each ``⊤`` moves by ``<= Δu``). Numeric answers are independent of
the comparisons given the pattern and cost ``Δu/t₃ <= ε₃/c`` each. The threshold noise is drawn once: the
proof needs no factor ``c`` on ``t₁`` (Dwork–Roth's variant pays it because it redraws ``rho``; see
:mod:`dpkit.svt.variants`).

Accuracy
--------
:meth:`SparseVector.accuracy`: with probability ``>= 1 - beta`` over the noise, among the first ``m``
queries every ``⊤`` at query ``i`` implies ``q_i >= T_i - alpha`` and every ``⊥`` implies ``q_j <= T_j +
alpha``, with ``alpha = (2a - 1) g``, ``a = ceil(max(t₁, t₂) ln(2(m + 1)/beta))`` (union bound over the ``m +
1`` noise draws, ``P[|DLap(t)| >= a] <= 2 e^(-a/t)``), i.e. ``alpha ≈ 2 max(Δ/ε₁, 2cΔ/ε₂) ln(2(m+1)/beta)``.
A numeric answer is ``q_i`` plus lattice Laplace noise of scale ``numeric_scale``:
``dpkit.mechanisms.accuracy.laplace_halfwidth(numeric_scale, confidence, granularity=g)`` bounds its error.

Misuse guards: the object refuses further queries once ``c`` answers were ``⊤`` (:class:`SVTHalted`, nothing
drawn); a bad value or threshold is refused before any noise is drawn (the object stays usable); it refuses
to be copied or pickled (a copy would share the threshold noise and allow more than ``c`` ``⊤`` answers,
which is not private).

Errata vs the seeds: Near & Abuah's ``above_threshold`` returns ``None`` while their ``sparse`` tests ``== -1``
(a crash); here "no ⊤" is always ``None`` (AboveThreshold) or a shorter index array. Lyu–Su–Li step 3 of the
"four steps" says Alg. 1 where it means Alg. 3 (Li et al.: Alg 12 for Alg 14). The noise in the "error check"
of Hardt–Rothblum / Roth–Roughgarden belongs outside the absolute value (:meth:`SparseVector.error_check`);
Lyu–Su–Li's stated reason ("a ⊤ reveals rho >= -T") is not itself a privacy leak — the ⊤/⊥ answers of the
noise-inside version are still private (tests) — what breaks privacy in those papers is releasing the same
noisy value on ``⊤`` (Alg 3's leak), and the noise inside ``|·|`` makes the check test the noise rather than
the error. The variants without a cutoff, without query noise, with ``c``-free query noise or printing
``q_i + nu_i`` (Lyu–Su–Li Algs 3–6 / Li Algs 14–17, GPTT) are not offered; they exist only as test fixtures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import _common
from dpkit.mechanisms._release import Release, charge, check_bool, check_description, resolve_accountant
from dpkit.noise import source as _source

__all__ = ["AboveThreshold", "SVTAnswer", "SVTHalted", "SparseVector", "above_threshold", "sparse_vector"]

# |value| / g is clamped (queries) or refused (threshold) beyond this many lattice steps.
_MAX_UNITS = 2.0**1000
_SAFE = 2**62  # exact int64 comparison range


class SVTHalted(DPKitError):
    """A query was asked after the sparse vector object halted (its ``c``-th above-threshold answer was given).

    Nothing was drawn and nothing was charged; ask a new object (with its own budget) instead.
    """

    def __init__(self, param: str = "query") -> None:
        self.param = param
        super().__init__(f"{param}: the sparse vector object has halted after its last allowed above-threshold "
                         "answer")


@dataclass(frozen=True)
class SVTAnswer:
    """One answer of an interactive sparse vector object: truthy exactly when it is ``⊤``.

    Attributes: ``above`` (``⊤``), ``index`` (0-based position of the query in the stream), ``value`` (the
    noisy numeric answer of a ``⊤`` when the object was given a numeric share ``ε₃ > 0``, else ``None``).
    """

    above: bool
    index: int
    value: float | None = None

    def __bool__(self) -> bool:
        return self.above

    def __repr__(self) -> str:
        mark = "⊤" if self.above else "⊥"
        extra = "" if self.value is None else f", value={self.value!r}"
        return f"SVTAnswer({mark}, index={self.index}{extra})"


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
    epsilon_numeric: float = 0.0  # ε₃ (numeric answers), 0 for ⊤/⊥ only
    t_numeric: float | None = None  # t₃ in lattice steps
    resample: bool = False  # Dwork–Roth: the threshold noise is redrawn after every ⊤

    @property
    def threshold_scale(self) -> float:
        """Scale of the threshold noise in the queries' units (``t₁ g``)."""
        return self.t_threshold * self.granularity

    @property
    def query_scale(self) -> float:
        """Scale of the query noise in the queries' units (``t₂ g``)."""
        return self.t_query * self.granularity

    @property
    def numeric_scale(self) -> float | None:
        """Scale of the numeric answers' noise in the queries' units (``t₃ g``), or ``None``."""
        return None if self.t_numeric is None else self.t_numeric * self.granularity


def _largest_float_at_most(x: Fraction) -> float:
    return _exact.float_at_most(x)


def _shares(split: Any, numeric_share: Any, allow_numeric: bool, default_ratio: float) -> tuple[float, float,
                                                                                              Fraction]:
    """``(a, b, f3)``: ``ε₁ : ε₂ = a : b`` and the fraction ``f3`` of epsilon that goes to ``ε₃``."""
    share = Fraction(0)
    if allow_numeric:
        s = check.real("numeric_share", numeric_share)
        if not 0 <= s < 1:
            raise InvalidParameter("numeric_share", "must be in [0, 1)")
        share = Fraction(s)
    if split is None:
        return 1.0, default_ratio, share
    pair = "a pair (a, b) of positive shares, or None" if not allow_numeric else \
        "a pair (a, b) or a triple (a, b, e) of positive shares, or None"
    items = _split_items(split)
    if items is None or len(items) not in ((2, 3) if allow_numeric else (2,)):
        raise WrongType("split", pair)
    parts = [check.positive("split", v) for v in items]
    if len(parts) == 3:
        if share != 0:
            raise InvalidParameter("numeric_share", "give either numeric_share or a three-way split, not both")
        fa, fb, fe = (Fraction(v) for v in parts)
        return parts[0], parts[1], fe / (fa + fb + fe)
    return parts[0], parts[1], share


def _split_items(split: Any) -> tuple[Any, ...] | None:
    """The entries of a public split (tuple, list or 1-D array), or None when it is not such a sequence."""
    if isinstance(split, (str, bytes, dict, set, frozenset)) or (isinstance(split, np.ndarray) and split.ndim != 1):
        return None
    try:
        return tuple(split)
    except TypeError:
        return None


def _split(epsilon: float, a: float, b: float, f3: Fraction) -> tuple[float, float, float]:
    fe = Fraction(epsilon)
    e3 = _largest_float_at_most(fe * f3) if f3 else 0.0
    if f3 and not e3 > 0:
        raise InvalidParameter("numeric_share", "too small for this epsilon: the numeric share rounds to zero")
    rest = fe - Fraction(e3)
    fa, fb = Fraction(a), Fraction(b)
    e1 = _largest_float_at_most(rest * fa / (fa + fb))
    e2 = _largest_float_at_most(rest - Fraction(e1))
    if not (e1 > 0 and e2 > 0):
        raise InvalidParameter("split", "too uneven for this epsilon: a share rounds to zero")
    return e1, e2, e3


def _plan(epsilon: Any, sensitivity: Any = 1.0, monotonic: Any = False, split: Any = None, cutoff: Any = 1,
          numeric_share: Any = 0.0, *, allow_numeric: bool = False, resample: bool = False,
          default_split: Any = None) -> _Plan:
    """Validate the public parameters and compute the exact noise scales (nothing is drawn).

    ``resample=True`` is Dwork–Roth's variant (threshold noise ``DLap(cΔu/ε₁)`` redrawn after every ``⊤``,
    :mod:`dpkit.svt.variants`)."""
    from dpkit.noise import lattice_granularity

    eps = check.epsilon(epsilon)
    sens = check.positive("sensitivity", sensitivity)
    mono = check_bool("monotonic", monotonic)
    c = check.integer("cutoff", cutoff, minimum=1)
    if default_split is None:
        ratio = float(c if mono else 2 * c) ** (2.0 / 3.0)
    else:
        ratio = default_split[1] / default_split[0]
    a, b, f3 = _shares(split, numeric_share, allow_numeric, ratio)
    e1, e2, e3 = _split(eps, a, b, f3)
    g = float(lattice_granularity(sens))
    d_units = math.floor(Fraction(sens) / Fraction(g)) + 1
    t1 = _common.div_up(Fraction((c if resample else 1) * d_units), Fraction(e1))
    factor = c if mono else 2 * c
    t2 = _common.div_up(Fraction(factor * d_units), Fraction(e2))
    t3 = _common.div_up(Fraction(c * d_units), Fraction(e3)) if e3 > 0 else None
    three_way = split is not None and len(_split_items(split) or ()) == 3
    for t, name in ((t1, "epsilon" if split is None else "split"), (t2, "epsilon" if split is None else "split"),
                    (t3, "split" if three_way else "numeric_share")):
        if t is not None and not (math.isfinite(t) and t <= 2.0**50):  # the samplers' range (t >= 2^20 here)
            raise InvalidParameter(name, "too small (or the cutoff too large, or the split too uneven): the noise "
                                         "scale exceeds the samplers' range")
    return _Plan(eps, e1, e2, sens, mono, c, g, d_units, t1, t2, e3, t3, resample)


def _threshold_units(threshold: Any, g: float) -> int:
    t = check.real("threshold", threshold)
    if abs(t) / g >= _MAX_UNITS:
        raise InvalidParameter("threshold", "too large relative to the sensitivity for exact lattice arithmetic")
    return int(np.rint(t / g))


def _threshold_vector_units(thresholds: Any, g: float, size: int | None = None) -> np.ndarray:
    """Per-query thresholds in lattice steps (float64 holding exact integers)."""
    arr = check.public_vector("threshold", thresholds, min_size=0 if size == 0 else 1)
    if size is not None and arr.size != size:
        raise InvalidParameter("threshold", "needs one threshold per value (or a single threshold)")
    if arr.size and float(np.max(np.abs(arr))) / g >= _MAX_UNITS:
        raise InvalidParameter("threshold", "too large relative to the sensitivity for exact lattice arithmetic")
    return np.rint(arr / g)


def _thresholds_spec(threshold: Any, g: float, size: int | None = None) -> tuple[Any, Any]:
    """``(public form, lattice units)``: a scalar (int units), a vector (float64 array of units) or None."""
    if threshold is None:
        return None, None
    try:
        ndim = np.ndim(threshold)
    except (TypeError, ValueError):  # ragged nesting
        raise WrongType("threshold", "a real number or a 1-D array of real numbers") from None
    if ndim == 0 and not isinstance(threshold, (list, tuple)):
        t = check.real("threshold", threshold)
        return t, _threshold_units(t, g)
    units = _threshold_vector_units(threshold, g, size)
    return np.asarray(threshold, dtype=np.float64).copy(), units


def _value_units(arr: np.ndarray, g: float) -> np.ndarray:
    """Answers in lattice steps (float64 holding exact integers). Values beyond ``2^1000 g`` in magnitude
    are first clamped to it: clamping is 1-Lipschitz, so the sensitivity promise still holds."""
    lim = _MAX_UNITS * g
    return np.rint(np.clip(arr, -lim, lim) / g)


def _diffs(units: np.ndarray, t_units: Any) -> np.ndarray:
    """``u_i - T_i`` as int64, clipped to ``±2^62`` (exact for comparisons against ``|rho - nu| < 2^62``);
    ``t_units`` is one threshold or one per answer, in lattice steps."""
    if units.size == 0:
        return np.zeros(0, dtype=np.int64)
    t_arr = np.broadcast_to(np.asarray(t_units, dtype=np.float64), units.shape)
    if float(np.max(np.abs(units))) < 2.0**60 and float(np.max(np.abs(t_arr))) < 2.0**60:
        return units.astype(np.int64) - t_arr.astype(np.int64)
    return np.array([max(-_SAFE, min(_SAFE, int(v) - int(t))) for v, t in zip(units.tolist(), t_arr.tolist(),
                                                                              strict=True)], dtype=np.int64)


def _compare(cols: np.ndarray, rho: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """``u - T >= rho - nu`` elementwise (``cols`` = ``u - T``, rows of ``nu`` per run), exactly."""
    if nu.size and int(np.max(np.abs(nu))) + int(np.max(np.abs(rho))) < _SAFE:
        return cols >= (rho[:, None] - nu)
    cols = np.broadcast_to(cols, nu.shape)  # pragma: no cover - needs noise beyond 2^61, probability ~exp(-2^10)
    return np.array([[int(c) >= int(r) - int(v) for c, v in zip(crow, row, strict=True)]  # pragma: no cover
                     for r, crow, row in zip(rho, cols, nu, strict=True)], dtype=bool).reshape(nu.shape)


def _sample_positives(diffs: np.ndarray, plan: _Plan, rng: Any, count: int = 1,
                      cutoff: int | None = None) -> np.ndarray:
    """``count`` independent runs of the sparse vector technique on the same answers; ``diffs[i] = u_i - T_i``.

    Returns a ``(count, c)`` int64 array: the indices of each run's ``⊤`` answers in order, padded with
    ``-1``. Each run draws its threshold noise first, then query noise block by block from its current
    position; with ``plan.resample`` (Dwork–Roth) a fresh threshold noise is drawn after each ``⊤`` and the
    run restarts after it. Noise drawn after a run's last ``⊤`` (the rest of a block) is never used. The law is
    exactly the sequential one (module docstring)."""
    from dpkit.noise import sample_discrete_laplace

    c = plan.cutoff if cutoff is None else cutoff
    m = int(diffs.size)
    out = np.full((count, c), -1, dtype=np.int64)
    rho = np.asarray(sample_discrete_laplace(plan.t_threshold, count, rng=rng), dtype=np.int64)
    hits = np.zeros(count, dtype=np.int64)
    start = np.zeros(count, dtype=np.int64)
    active = np.arange(count) if m else np.arange(0)
    block = 16 if count == 1 else max(1, (1 << 18) // count)
    restarted = False
    while active.size:
        idx = start[active, None] + np.arange(block)[None, :]
        valid = idx < m
        cols = diffs[np.minimum(idx, m - 1)]
        nu = np.asarray(sample_discrete_laplace(plan.t_query, idx.shape, rng=rng), dtype=np.int64)
        hit = _compare(cols, rho[active], nu) & valid
        if plan.resample or c == 1:  # one ⊤ per row: the first
            any_hit = hit.any(axis=1)
            first = np.argmax(hit, axis=1)
            rows = active[any_hit]
            out[rows, hits[rows]] = idx[any_hit, first[any_hit]]
            hits[rows] += 1
            start[active] = np.where(any_hit, idx[np.arange(active.size), first] + 1, start[active] + block)
            restarted = bool(plan.resample and rows.size)
            if restarted:
                again = rows[hits[rows] < c]
                rho[again] = np.asarray(sample_discrete_laplace(plan.t_threshold, again.size, rng=rng),
                                        dtype=np.int64)
        else:  # every ⊤ in the block, up to the cutoff
            _take_hits(hit, active, idx, hits, out, c)
            start[active] += block
        active = active[(hits[active] < c) & (start[active] < m)]
        if count == 1:  # blocks grow while nothing happens; after a redraw of rho (Dwork–Roth) start small again
            block = 16 if restarted else min(block * 4, 1 << 16)
    return out


def _take_hits(hit: np.ndarray, active: np.ndarray, idx: np.ndarray, hits: np.ndarray, out: np.ndarray,
               c: int) -> tuple[np.ndarray, np.ndarray]:
    """Record each row's ``⊤`` columns of ``hit`` in order, up to the cutoff: ``out[run, hits[run] + j]`` gets the
    query index ``idx[row, col]`` (``idx`` broadcasts against ``hit``); ``hits`` is updated. Returns the
    ``(runs, query indices)`` recorded."""
    r, k = np.nonzero(hit)
    if not r.size:
        return r, r
    first_of_row = np.r_[True, r[1:] != r[:-1]]
    grp = np.cumsum(first_of_row) - 1
    rank = np.arange(r.size) - np.flatnonzero(first_of_row)[grp]
    runs = active[r]
    keep = rank < (c - hits[runs])
    runs, rank = runs[keep], rank[keep]
    where = np.broadcast_to(idx, hit.shape)[r[keep], k[keep]]
    out[runs, hits[runs] + rank] = where
    np.add.at(hits, runs, 1)
    return runs, where


def _sample_first_above(diffs: np.ndarray, plan: _Plan, rng: Any, count: int = 1) -> np.ndarray:
    """``count`` independent runs of AboveThreshold (cutoff 1) on the same answers; ``diffs[i] = u_i - T_u``.
    Returns the index of the first ``⊤`` of each run, ``-1`` when every answer is ``⊥``."""
    return _sample_positives(diffs, plan, rng, count, cutoff=1)[:, 0]


def _sample_numeric(units: np.ndarray, positions: np.ndarray, plan: _Plan, rng: Any) -> np.ndarray:
    """Numeric answers ``g (u_i + eta)``, ``eta ~ DLap(t₃)`` fresh, at every ``positions >= 0`` (NaN elsewhere)."""
    from dpkit.noise import sample_discrete_laplace

    out = np.full(positions.shape, np.nan)
    mask = positions >= 0
    if plan.t_numeric is None or not mask.any():
        return out
    eta = np.asarray(sample_discrete_laplace(plan.t_numeric, int(mask.sum()), rng=rng), dtype=np.int64)
    base = units[positions[mask]]
    out[mask] = [_to_float(int(b) + int(e), plan.granularity) for b, e in zip(base.tolist(), eta.tolist(),
                                                                              strict=True)]
    return out


def _to_float(k: int, g: float) -> float:
    """The float nearest the lattice point ``k g`` (exact when ``|k| < 2^53``)."""
    try:
        return float(Fraction(k) * Fraction(g))
    except OverflowError:  # pragma: no cover - needs |k g| > 1.8e308
        return math.copysign(math.inf, k)


@check.numeric_guard("beta")
def _accuracy(plan: _Plan, queries: Any, beta: Any) -> float:
    m = check.integer("queries", queries, minimum=1)
    b = check.probability("beta", beta)
    draws = m + (plan.cutoff if plan.resample else 1)
    t = max(plan.t_threshold, plan.t_query)
    a = math.ceil(t * math.log(2.0 * draws / b) * (1.0 + 1e-12)) + 1
    return _common.up((2 * a - 1) * plan.granularity, 2)


def _params(plan: _Plan, threshold: Any) -> dict[str, Any]:
    if threshold is None or np.ndim(threshold) == 0:
        thr: Any = threshold
    else:
        thr = f"per-query ({np.size(threshold)} thresholds)"
    params = {"epsilon": plan.epsilon, "threshold": thr, "sensitivity": plan.sensitivity,
              "monotonic": plan.monotonic, "cutoff": plan.cutoff, "epsilon_threshold": plan.epsilon_threshold,
              "epsilon_queries": plan.epsilon_queries, "threshold_scale": plan.threshold_scale,
              "query_scale": plan.query_scale, "granularity": plan.granularity}
    if plan.t_numeric is not None:
        params["epsilon_numeric"] = plan.epsilon_numeric
        params["numeric_scale"] = plan.numeric_scale
    if plan.resample:
        params["resampled_threshold"] = True
    return params


# ---------------------------------------------------------------------------------------------
# the interactive objects
# ---------------------------------------------------------------------------------------------
class _SVTStream:
    """Shared machinery of the interactive sparse vector objects (plan, charge, threshold noise, stream)."""

    _mechanism = "sparse_vector"

    def _start(self, plan: _Plan, threshold: Any, accountant: Any, rng: Any, description: Any,
               threshold_required: bool = False) -> None:
        """Validate the rest, charge once, then draw the threshold noise."""
        if threshold is None and threshold_required:
            raise WrongType("threshold", "a real number or a 1-D array of per-query thresholds")
        thr, units = _thresholds_spec(threshold, plan.granularity)
        desc = check_description(description)
        rng = _source.resolve(rng)
        accountant = resolve_accountant(accountant)
        self._plan = plan
        self._threshold = thr
        self._t_units = units
        self._rng = rng
        self._cost = PureDP(plan.epsilon)
        self._params = _params(plan, thr)
        self._receipt = charge(accountant, self._cost, mechanism=self._mechanism, sensitivity=plan.sensitivity,
                               scale=plan.query_scale, params=self._params, secure=rng.secure, description=desc)
        self._rho = self._draw(plan.t_threshold)
        self._answered = 0
        self._hits: list[int] = []

    def _draw(self, t: float) -> int:
        from dpkit.noise import sample_discrete_laplace

        return int(sample_discrete_laplace(t, 1, rng=self._rng)[0])

    def _threshold_for(self, threshold: Any) -> int:
        if threshold is not None:
            return _threshold_units(threshold, self._plan.granularity)
        if self._t_units is None:
            raise InvalidParameter("threshold", "this object has no default threshold: give one with each query")
        if isinstance(self._t_units, np.ndarray):
            if self._answered >= self._t_units.size:
                raise InvalidParameter("threshold", "the per-query thresholds are used up: give one with the query")
            return int(self._t_units[self._answered])
        return int(self._t_units)

    def _unit(self, name: str, value: Any) -> int:
        v = check.real(name, value)
        return int(_value_units(np.array([v]), self._plan.granularity)[0])

    def _ask(self, value: Any, threshold: Any) -> SVTAnswer:
        if self.halted:
            raise SVTHalted("query")
        u = self._unit("value", value)
        return self._answer(u, u, threshold)

    def _ask_error(self, estimate: Any, true_value: Any, threshold: Any) -> SVTAnswer:
        if self.halted:
            raise SVTHalted("query")
        if self._plan.monotonic:
            raise InvalidParameter("monotonic", "error_check needs monotonic=False: |estimate - true value| moves "
                                                "in both directions between neighbours")
        e = self._unit("estimate", estimate)
        u = self._unit("true_value", true_value)
        return self._answer(abs(e - u), u, threshold)

    def _answer(self, tested: int, reported: int, threshold: Any) -> SVTAnswer:
        """Compare ``tested`` (lattice units) with the threshold; on ``⊤`` report ``reported`` with fresh noise."""
        t_units = self._threshold_for(threshold)  # validated before any noise is drawn
        nu = self._draw(self._plan.t_query)
        index = self._answered
        above = tested + nu >= t_units + self._rho  # exact integer arithmetic
        value = None
        if above:
            self._hits.append(index)
            if self._plan.t_numeric is not None:
                value = _to_float(reported + self._draw(self._plan.t_numeric), self._plan.granularity)
            if self._plan.resample and not self.halted:
                self._rho = self._draw(self._plan.t_threshold)
        self._answered += 1
        return SVTAnswer(bool(above), index, value)

    def accuracy(self, queries: int, beta: float = 0.05) -> float:
        """``alpha`` such that, with probability ``>= 1 - beta``, over the first ``queries`` answers a ``⊤``
        at ``i`` implies ``q_i >= T_i - alpha`` and each ``⊥`` implies ``q_j <= T_j + alpha``."""
        return _accuracy(self._plan, queries, beta)

    # -- public state ---------------------------------------------------------------------------
    @property
    def halted(self) -> bool:
        """Whether ``cutoff`` answers were ``⊤`` (further queries raise :class:`SVTHalted`)."""
        return len(self._hits) >= self._plan.cutoff

    @property
    def remaining(self) -> int:
        """How many more ``⊤`` answers the object may give."""
        return self._plan.cutoff - len(self._hits)

    @property
    def positions(self) -> tuple[int, ...]:
        """Indices (0-based, in query order) of the ``⊤`` answers so far."""
        return tuple(self._hits)

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
    def threshold(self) -> Any:
        """The default threshold: a float, a copy of the per-query thresholds, or ``None``."""
        t = self._threshold
        return t.copy() if isinstance(t, np.ndarray) else t

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
        thr = self._params["threshold"]
        return (f"{type(self).__name__}(epsilon={self.epsilon!r}, threshold={thr!r}, cutoff={self.cutoff}, "
                f"sensitivity={self.sensitivity!r}, monotonic={self.monotonic!r}: {state}, "
                f"{self.answered} answered)")

    # -- copying would duplicate the threshold noise (more than c ⊤ answers): refused ---------
    def __copy__(self) -> Any:
        raise WrongType(type(self).__name__, "a single-use object: copying it would break the privacy guarantee")

    def __deepcopy__(self, memo: Any) -> Any:
        raise WrongType(type(self).__name__, "a single-use object: copying it would break the privacy guarantee")

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise WrongType(type(self).__name__, "a single-use object: pickling it would break the privacy guarantee")


class SparseVector(_SVTStream):
    """The standard sparse vector technique (Lyu–Su–Li Alg 7, Li et al. Alg 18), interactive: pure
    ``epsilon``-DP for the whole run, at most ``cutoff`` positive answers.

    Parameters
    ----------
    epsilon:
        Total privacy parameter of the whole run (``ε₁ + ε₂ + ε₃ <= epsilon``), > 0.
    threshold:
        The public threshold ``T`` (a finite real), or a 1-D array of per-query thresholds ``T_i`` (query ``i``
        uses ``T_i``), or ``None`` (every query then gives its own ``threshold=``). A ``threshold=`` given
        with a query overrides the default. Thresholds may be chosen adaptively; they are public.
    cutoff:
        ``c``, the number of ``⊤`` answers after which the object halts (an integer >= 1).
    sensitivity:
        ``Δ``: the largest change of any query's answer between neighbouring datasets, under the neighbour
        relation the caller (or the accountant) uses. A promise dpkit cannot check.
    monotonic:
        Declare that between any two neighbours all answers move in the same direction (counts under
        add/remove). Halves the query noise; a false declaration voids the guarantee.
    split:
        ``(a, b)``: ``ε₁ : ε₂ = a : b`` (the numeric share taken first); ``(a, b, e)``: ``ε₁ : ε₂ : ε₃``. Default
        ``1 : (2c)^(2/3)`` (``1 : c^(2/3)`` monotonic).
    numeric_share:
        The fraction of ``epsilon`` spent on numeric answers (``ε₃``, in ``[0, 1)``). With ``ε₃ > 0`` every ``⊤``
        carries ``q_i + `` lattice Laplace noise of scale ``cΔ/ε₃`` (fresh noise).
    accountant:
        Charged ``PureDP(epsilon)`` once, in the constructor, before the threshold noise is drawn.
    rng:
        A :class:`~dpkit.noise.source.RandomSource` (default: the OS CSPRNG).

    Use :meth:`query` with each answer ``q_i(D)`` (or :meth:`error_check` with an estimate and the true
    answer); both return an :class:`SVTAnswer` (truthy iff ``⊤``). After ``cutoff`` ``⊤`` answers the object
    is halted and further calls raise :class:`SVTHalted`. The exact law, the proof and the accuracy bound are
    in the module docstring.

    Attributes (all public): ``epsilon``, ``threshold``, ``cutoff``, ``sensitivity``, ``monotonic``,
    ``epsilon_threshold`` (ε₁), ``epsilon_queries`` (ε₂), ``epsilon_numeric`` (ε₃), ``threshold_scale``,
    ``query_scale``, ``numeric_scale``, ``granularity``, ``cost``, ``receipt``, ``secure``, ``answered``,
    ``halted``, ``remaining`` (``⊤`` answers left), ``positions`` (indices of the ``⊤`` answers).
    """

    _mechanism = "sparse_vector"

    def __init__(self, epsilon: float, threshold: Any = None, *, cutoff: int = 1, sensitivity: float = 1.0,
                 monotonic: bool = False, split: Any = None, numeric_share: float = 0.0, accountant: Any = None,
                 rng: Any = None, description: str = "") -> None:
        plan = _plan(epsilon, sensitivity, monotonic, split, cutoff, numeric_share, allow_numeric=True)
        self._start(plan, threshold, accountant, rng, description)

    def query(self, value: float, threshold: float | None = None) -> SVTAnswer:
        """Answer "is ``value`` (= ``q_i(D)``) at least the threshold?" with fresh query noise.

        ``value`` must be a finite real (else :class:`~dpkit.core.errors.WrongType` /
        :class:`~dpkit.core.errors.InvalidParameter` naming ``"value"``; nothing drawn, the object stays usable);
        ``threshold`` (optional) overrides the default threshold for this query. Raises :class:`SVTHalted`
        (nothing drawn) once ``cutoff`` answers were ``⊤``.
        """
        return self._ask(value, threshold)

    def error_check(self, estimate: float, true_value: float, threshold: float | None = None) -> SVTAnswer:
        """The error check of iterative mechanisms (PMW, MWEM, the median mechanism): is the error of an
        estimate above the threshold? Tests ``|estimate - true_value| + nu >= T + rho`` — the noise *outside*
        the absolute value (Lyu–Su–Li Sec. 3.4) — i.e. a standard query ``r = |estimate - true_value|``.

        ``estimate`` (``q̃_i``, computed from public or already released values only) and ``true_value``
        (``q_i(D)``, sensitivity ``Δ``) are rounded to the lattice first; ``r`` then has sensitivity ``Δ`` (reverse
        triangle inequality) but is *not* monotonic, so the object must have ``monotonic=False``
        (else :class:`~dpkit.core.errors.InvalidParameter` naming ``"monotonic"``, nothing drawn). With a numeric
        share, a ``⊤`` carries the noisy **true value** ``q_i(D) + `` fresh noise (what an update step needs; any
        sensitivity-``Δ`` value may be reported, the proof is unchanged).
        """
        return self._ask_error(estimate, true_value, threshold)

    @property
    def epsilon_numeric(self) -> float:
        return self._plan.epsilon_numeric

    @property
    def numeric_scale(self) -> float | None:
        return self._plan.numeric_scale


class AboveThreshold(_SVTStream):
    """Interactive AboveThreshold (sparse vector technique, cutoff 1): pure ``epsilon``-DP. The case ``c = 1``
    of :class:`SparseVector` with ``⊤/⊥`` answers as ``bool``.

    Parameters
    ----------
    epsilon:
        Total privacy parameter of the whole run (``ε₁ + ε₂ <= epsilon``), > 0.
    threshold:
        The public threshold ``T`` (a finite real) or a vector of per-query thresholds; a ``threshold=`` given
        with a query overrides it.
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

    Example
    -------
    >>> from dpkit.noise import deterministic_source
    >>> svt = AboveThreshold(1.0, threshold=10.0, rng=deterministic_source(1))
    >>> [svt.query(v) for v in (-50.0, -40.0, 60.0)]
    [False, False, True]
    >>> svt.halted, svt.position
    (True, 2)
    """

    _mechanism = "above_threshold"

    def __init__(self, epsilon: float, threshold: Any, *, sensitivity: float = 1.0, monotonic: bool = False,
                 split: Any = None, accountant: Any = None, rng: Any = None, description: str = "") -> None:
        plan = _plan(epsilon, sensitivity, monotonic, split)
        self._start(plan, threshold, accountant, rng, description, threshold_required=True)

    def query(self, value: float, threshold: float | None = None) -> bool:
        """Answer "is ``value`` (= ``q_i(D)``) above the threshold?" with fresh query noise.

        ``value`` must be a finite real (else :class:`~dpkit.core.errors.WrongType` /
        :class:`~dpkit.core.errors.InvalidParameter` naming ``"value"``; nothing drawn, the object stays
        usable). Raises :class:`SVTHalted` (nothing drawn) once the ``⊤`` answer has been given.
        """
        return self._ask(value, threshold).above

    def error_check(self, estimate: float, true_value: float, threshold: float | None = None) -> bool:
        """``|estimate - true_value| + nu >= T + rho`` (noise outside the absolute value); see
        :meth:`SparseVector.error_check`."""
        return self._ask_error(estimate, true_value, threshold).above

    @property
    def position(self) -> int | None:
        """Index (0-based, in query order) of the above-threshold answer, or ``None`` so far."""
        return self._hits[0] if self._hits else None


# ---------------------------------------------------------------------------------------------
# the functional forms
# ---------------------------------------------------------------------------------------------
def _values_1d(values: Any) -> np.ndarray:
    arr = check.finite_array("values", values, allow_empty=True)
    if arr.ndim > 1:
        raise WrongType("values", "a 1-D array of real numbers")
    return arr.reshape(-1)


def _prepared(values: Any, threshold: Any, plan: _Plan) -> tuple[np.ndarray, np.ndarray, Any]:
    """``(answers in lattice units, diffs, public threshold)``, validated (nothing drawn)."""
    arr = _values_1d(values)
    if threshold is None:
        raise WrongType("threshold", "a real number or a 1-D array of per-query thresholds")
    thr, t_units = _thresholds_spec(threshold, plan.granularity, size=arr.size)
    units = _value_units(arr, plan.granularity)
    return units, _diffs(units, t_units), thr


def _charged_run(mechanism: str, values: Any, threshold: Any, plan: Any, accountant: Any, rng: Any,
                 description: Any) -> tuple[np.ndarray, np.ndarray, dict[str, Any], PureDP, Any, Any]:
    """The functional forms' common start: validate the answers, thresholds, description, source and
    accountant, then charge ``PureDP(plan.epsilon)`` once (before any randomness).
    Returns ``(units, diffs, params, cost, receipt, rng)``."""
    units, diffs, thr = _prepared(values, threshold, plan)
    desc = check_description(description)
    rng = _source.resolve(rng)
    accountant = resolve_accountant(accountant)
    params = _params(plan, thr)
    params["queries"] = int(diffs.size)
    params["alpha_95"] = _accuracy(plan, max(1, int(diffs.size)), 0.05)
    cost = PureDP(plan.epsilon)
    receipt = charge(accountant, cost, mechanism=mechanism, sensitivity=plan.sensitivity, scale=plan.query_scale,
                     params=params, secure=rng.secure, description=desc)
    return units, diffs, params, cost, receipt, rng


def above_threshold(values: Any, threshold: Any, epsilon: float, *, sensitivity: float = 1.0,
                    monotonic: bool = False, split: Any = None, accountant: Any = None, rng: Any = None,
                    description: str = "") -> Release:
    """AboveThreshold over a known sequence of answers: ``Release.value`` is the index of the first
    above-threshold answer, or ``None`` if every answer is below.

    ``values`` are the answers ``q_i(D)`` in order (a 1-D array of finite reals; may be empty); ``threshold``
    one public threshold or one per value. Same law, guarantee (pure ``epsilon``-DP, cost ``PureDP(epsilon)``
    charged once before any noise), and parameters as :class:`AboveThreshold`; see the module docstring for
    the exact law and the accuracy bound (``alpha`` for ``m = len(values)`` is in
    ``Release.params["alpha_95"]``, ``beta = 0.05``). ``Release.interval()`` raises
    :class:`~dpkit.mechanisms.NoInterval`.

    >>> from dpkit.noise import deterministic_source
    >>> above_threshold([-50.0, 60.0, 70.0], 10.0, 1.0, rng=deterministic_source(2)).value
    1
    """
    plan = _plan(epsilon, sensitivity, monotonic, split)
    _units, diffs, params, cost, receipt, rng = _charged_run("above_threshold", values, threshold, plan, accountant,
                                                            rng, description)
    idx = int(_sample_first_above(diffs, plan, rng, 1)[0])
    return Release(value=None if idx < 0 else idx, mechanism="above_threshold", scale=None, cost=cost,
                   receipt=receipt, secure=rng.secure, noise=None, params=params)


def sparse_vector(values: Any, threshold: Any, epsilon: float, *, cutoff: int = 1, sensitivity: float = 1.0,
                  monotonic: bool = False, split: Any = None, numeric_share: float = 0.0, accountant: Any = None,
                  rng: Any = None, description: str = "") -> Release:
    """The standard sparse vector technique over a known list of answers.

    ``Release.value`` is an int64 array of the indices of the ``⊤`` answers, in order (at most ``cutoff``;
    fewer when the list ran out first). With a numeric share (``numeric_share`` or a three-way ``split``)
    ``Release.parts["answers"]`` holds the noisy numeric answers of those queries (fresh lattice Laplace noise,
    scale ``params["numeric_scale"]``). Same law, guarantee (pure ``epsilon``-DP, cost ``PureDP(epsilon)``
    charged once before any noise) and parameters as :class:`SparseVector`; ``threshold`` is one public
    threshold or one per value. ``params["alpha_95"]`` is the accuracy bound for ``m = len(values)``,
    ``beta = 0.05``. For non-interactive top-c selection prefer the exponential mechanism
    (:mod:`dpkit.mechanisms.top_k`): it is more accurate (Lyu–Su–Li Sec. 5–6).

    >>> from dpkit.noise import deterministic_source
    >>> rel = sparse_vector([5.0, 300.0, 2.0, 900.0, 700.0], 100.0, 1.0, cutoff=2, rng=deterministic_source(3))
    >>> rel.value.tolist()
    [1, 3]
    """
    plan = _plan(epsilon, sensitivity, monotonic, split, cutoff, numeric_share, allow_numeric=True)
    units, diffs, params, cost, receipt, rng = _charged_run("sparse_vector", values, threshold, plan, accountant,
                                                            rng, description)
    pos = _sample_positives(diffs, plan, rng, 1)[0]
    idx = pos[pos >= 0]
    parts: dict[str, Any] = {}
    if plan.t_numeric is not None:
        parts["answers"] = _sample_numeric(units, idx, plan, rng)
    return Release(value=idx, mechanism="sparse_vector", scale=None, cost=cost, receipt=receipt, secure=rng.secure,
                   noise=None, params=params, parts=parts)
