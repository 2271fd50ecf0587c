'''The lattice sparse-vector engine: dpkit's one implementation of SVT's noise, comparisons and bookkeeping.

This is a **public internal API** (shared infrastructure, like :mod:`dpkit.core._exact`): the public SVT
algorithms of :mod:`dpkit.svt` (:mod:`~dpkit.svt.sparse_vector`, :mod:`~dpkit.svt.variants`,
:mod:`~dpkit.svt.retraversal`) and other families that run an SVT inside their own plan (``dpkit.stats.bounds``)
import the names below instead of private names of another module. It is not re-exported by
:mod:`dpkit.svt` and is not part of the user-facing API: its functions draw noise **without charging** anything,
so they may only be called inside the ``draw`` of a :class:`~dpkit.mechanisms.contract.Plan` whose declared cost
covers the SVT run (``PureDP(calibration.epsilon)``), or by an interactive :class:`Stream` (which charges once in
its constructor).

The engine
----------
The standard sparse vector technique with cutoff ``c`` (Lyu–Su–Li 2017 Alg. 7 = Li et al. 2016 Alg. 18), and
Dwork–Roth's variant that redraws the threshold noise after every ``⊤`` (``resample=True``), computed exactly on
a lattice. Three steps, each a function here:

1. :func:`calibrate` turns the public parameters (``epsilon``, ``Δ``, ``monotonic``, the split, ``c``, the numeric
   share) into a :class:`Calibration`: the budget split ``ε₁ + ε₂ + ε₃ <= epsilon`` (exact rationals), the
   lattice step ``g``, the answers' sensitivity ``Δu`` in lattice steps and the discrete Laplace scales
   ``t₁, t₂, t₃`` (in lattice steps). Nothing is drawn.
2. :func:`value_units`, :func:`threshold_units` / :func:`threshold_spec` and :func:`diffs` put answers and
   thresholds on the lattice and form the exact integer differences ``d_i = u_i - T_i``
   (:func:`prepare` does all of it for a list of answers).
3. :func:`sample_positives` / :func:`sample_first_above` run the technique on the differences (any number of
   independent runs at once, vectorised); :func:`sample_numeric` draws the numeric answers of the ``⊤``;
   :func:`accuracy` is the ``alpha`` of the accuracy bound; :func:`public_params` the parameters a release
   records. :class:`Stream` is the interactive form (one query at a time).

Exact law
---------
``g = lattice_granularity(Δ)`` (the largest power of two ``<= Δ / 2^20``); thresholds ``T_i -> round_half_even
(T_i / g)``, answers ``u_i = round_half_even(q_i / g)`` (answers beyond ``2^1000 g`` in magnitude are first
clamped, a 1-Lipschitz map); the rounded answers have integer sensitivity ``Δu = floor(Δ/g) + 1``. With
``DLap(t)`` the discrete Laplace law ``P[k] = (1-r)/(1+r) r^|k|``, ``r = exp(-1/t)``
(:func:`dpkit.noise.sample_discrete_laplace`, exact):

- ``rho ~ DLap(t₁)``, ``t₁`` the smallest float ``>= Δu/ε₁`` (``>= cΔu/ε₁`` and redrawn after each ``⊤`` when
  ``resample``);
- ``nu_i ~ DLap(t₂)`` independent, ``t₂`` the smallest float ``>= 2cΔu/ε₂`` (``cΔu/ε₂`` monotonic);
- ``⊤`` iff ``u_i + nu_i >= T_i + rho``, i.e. ``d_i >= rho - nu_i``, compared in exact integer arithmetic
  (differences are clipped to ``±2^62``, which changes no comparison against noise below ``2^61``);
- halt after the ``c``-th ``⊤``;
- numeric answer (``ε₃ > 0``): the float nearest ``g (u_i + eta_i)``, ``eta_i ~ DLap(t₃)`` fresh, ``t₃`` the
  smallest float ``>= cΔu/ε₃``.

The probability of a transcript is given in closed form in :mod:`dpkit.svt.sparse_vector` and evaluated by
:mod:`dpkit.audit.svt_law`; the privacy proof (pure ``ε₁ + ε₂ + ε₃``-DP with respect to the neighbour relation
under which ``Δ`` bounds every answer's change) is in :mod:`dpkit.svt.sparse_vector` (standard) and
:mod:`dpkit.svt.variants` (``resample``). Every function that draws consumes the random source in a fixed,
documented order, so seeded runs are reproducible and the vectorised runs have exactly the sequential law.
'''

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise import source as rng_source

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant, Receipt
    from dpkit.noise.source import RandomSource

__all__ = [
    "MAX_UNITS",
    "SAFE",
    "Calibration",
    "SVTAnswer",
    "SVTHalted",
    "Stream",
    "accuracy",
    "answer_vector",
    "calibrate",
    "compare",
    "diffs",
    "prepare",
    "public_params",
    "release_params",
    "sample_first_above",
    "sample_numeric",
    "sample_positives",
    "stream_plan",
    "take_hits",
    "threshold_spec",
    "threshold_units",
    "threshold_vector_units",
    "to_float",
    "value_units",
]

#: ``|value| / g`` is clamped (answers) or refused (thresholds) beyond this many lattice steps.
MAX_UNITS = 2.0**1000
SAFE = 2**62  # exact int64 comparison range


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
# the calibration: every public quantity, computed and validated before anything is charged
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Calibration:
    """The public, validated noise calibration of one SVT run (built by :func:`calibrate`; nothing drawn).

    Fields: ``epsilon`` (the whole run's budget), ``epsilon_threshold`` (``ε₁``), ``epsilon_queries``
    (``ε₂``), ``epsilon_numeric`` (``ε₃``, 0 for ``⊤/⊥`` answers only), with ``ε₁ + ε₂ + ε₃ <= epsilon`` exactly;
    ``sensitivity`` (``Δ``), ``monotonic``, ``cutoff`` (``c``), ``granularity`` (``g``), ``d_units`` (``Δu``),
    ``t_threshold`` / ``t_query`` / ``t_numeric`` (``t₁``, ``t₂``, ``t₃`` in lattice steps; ``t_numeric`` is
    ``None`` without numeric answers) and ``resample`` (Dwork–Roth: the threshold noise is redrawn after every
    ``⊤``). A run drawn with it is pure ``PureDP(epsilon)``-DP (module docstring).
    """

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
    e3 = _exact.float_at_most(fe * f3) if f3 else 0.0
    if f3 and not e3 > 0:
        raise InvalidParameter("numeric_share", "too small for this epsilon: the numeric share rounds to zero")
    rest = fe - Fraction(e3)
    fa, fb = Fraction(a), Fraction(b)
    e1 = _exact.float_at_most(rest * fa / (fa + fb))
    e2 = _exact.float_at_most(rest - Fraction(e1))
    if not (e1 > 0 and e2 > 0):
        raise InvalidParameter("split", "too uneven for this epsilon: a share rounds to zero")
    return e1, e2, e3


def calibrate(epsilon: Any, sensitivity: Any = 1.0, monotonic: Any = False, split: Any = None, cutoff: Any = 1,
          numeric_share: Any = 0.0, *, allow_numeric: bool = False, resample: bool = False,
          default_split: Any = None) -> Calibration:
    """Validate the public parameters of an SVT run and compute its exact noise scales (nothing is drawn).

    Takes ``epsilon`` (> 0), ``sensitivity`` (``Δ`` > 0), ``monotonic`` (a bool), ``split`` (``None``, ``(a, b)``
    for ``ε₁ : ε₂``, or with ``allow_numeric`` also ``(a, b, e)`` for ``ε₁ : ε₂ : ε₃``), ``cutoff`` (``c`` >= 1)
    and ``numeric_share`` (the fraction of ``epsilon`` for ``ε₃``, in ``[0, 1)``; read only with
    ``allow_numeric``). The default split is ``1 : (2c)^(2/3)`` (``1 : c^(2/3)`` monotonic), the minimiser of the
    variance of ``nu - rho`` (Lyu–Su–Li Eq. 12), or ``default_split = (a, b)`` when given. ``resample=True`` is
    Dwork–Roth's variant (threshold noise ``DLap(cΔu/ε₁)`` redrawn after every ``⊤``, :mod:`dpkit.svt.variants`).

    Guarantees: ``ε₁, ε₂ > 0``, ``ε₁ + ε₂ + ε₃ <= epsilon`` as rationals (each share rounded down),
    ``t₁ >= Δu/ε₁`` (``cΔu/ε₁`` with ``resample``), ``t₂ >= 2cΔu/ε₂`` (``cΔu/ε₂`` monotonic), ``t₃ >= cΔu/ε₃``
    (each the smallest such float), all within the exact samplers' range. Invalid parameters raise
    :class:`~dpkit.core.errors.WrongType` / :class:`~dpkit.core.errors.InvalidParameter` naming the parameter
    (``epsilon``, ``sensitivity``, ``monotonic``, ``cutoff``, ``split``, ``numeric_share``), never a value.
    """
    from dpkit.noise import lattice_granularity

    eps = check.epsilon(epsilon)
    sens = check.positive("sensitivity", sensitivity)
    mono = check.flag("monotonic", monotonic)
    c = check.integer("cutoff", cutoff, minimum=1)
    if default_split is None:
        ratio = float(c if mono else 2 * c) ** (2.0 / 3.0)
    else:
        ratio = default_split[1] / default_split[0]
    a, b, f3 = _shares(split, numeric_share, allow_numeric, ratio)
    e1, e2, e3 = _split(eps, a, b, f3)
    g = float(lattice_granularity(sens))
    d_units = math.floor(Fraction(sens) / Fraction(g)) + 1
    t1 = _exact.div_up(Fraction((c if resample else 1) * d_units), Fraction(e1))
    factor = c if mono else 2 * c
    t2 = _exact.div_up(Fraction(factor * d_units), Fraction(e2))
    t3 = _exact.div_up(Fraction(c * d_units), Fraction(e3)) if e3 > 0 else None
    three_way = split is not None and len(_split_items(split) or ()) == 3
    for t, name in ((t1, "epsilon" if split is None else "split"), (t2, "epsilon" if split is None else "split"),
                    (t3, "split" if three_way else "numeric_share")):
        if t is not None and not (math.isfinite(t) and t <= 2.0**50):  # the samplers' range (t >= 2^20 here)
            raise InvalidParameter(name, "too small (or the cutoff too large, or the split too uneven): the noise "
                                         "scale exceeds the samplers' range")
    return Calibration(eps, e1, e2, sens, mono, c, g, d_units, t1, t2, e3, t3, resample)


def threshold_units(threshold: Any, g: float) -> int:
    """One public threshold in lattice steps: ``round_half_even(threshold / g)`` as an int. Refuses a
    non-real threshold (:class:`WrongType`) or one beyond ``MAX_UNITS`` lattice steps (:class:`InvalidParameter`),
    both naming ``"threshold"``."""
    t = check.real("threshold", threshold)
    if abs(t) / g >= MAX_UNITS:
        raise InvalidParameter("threshold", "too large relative to the sensitivity for exact lattice arithmetic")
    return int(np.rint(t / g))


def threshold_vector_units(thresholds: Any, g: float, size: int | None = None) -> np.ndarray:
    """Per-query thresholds in lattice steps (float64 holding exact integers). ``size`` (when given) is the
    number of answers the thresholds must match; errors name ``"threshold"``."""
    arr = check.public_vector("threshold", thresholds, min_size=0 if size == 0 else 1)
    if size is not None and arr.size != size:
        raise InvalidParameter("threshold", "needs one threshold per value (or a single threshold)")
    if arr.size and float(np.max(np.abs(arr))) / g >= MAX_UNITS:
        raise InvalidParameter("threshold", "too large relative to the sensitivity for exact lattice arithmetic")
    return np.rint(arr / g)


def threshold_spec(threshold: Any, g: float, size: int | None = None) -> tuple[Any, Any]:
    """A threshold argument (one real, a 1-D array of per-query thresholds, or ``None``) validated and put on the
    lattice: ``(public form, lattice units)`` — a float and an int, a float64 copy and a float64 array of
    units, or ``(None, None)``. Errors name ``"threshold"``."""
    if threshold is None:
        return None, None
    try:
        ndim = np.ndim(threshold)
    except (TypeError, ValueError):  # ragged nesting
        raise WrongType("threshold", "a real number or a 1-D array of real numbers") from None
    if ndim == 0 and not isinstance(threshold, (list, tuple)):
        t = check.real("threshold", threshold)
        return t, threshold_units(t, g)
    units = threshold_vector_units(threshold, g, size)
    return np.asarray(threshold, dtype=np.float64).copy(), units


def value_units(arr: np.ndarray, g: float) -> np.ndarray:
    """Answers (a finite float array) in lattice steps: ``round_half_even(clip(arr, ±2^1000 g) / g)`` (float64
    holding exact integers). Clamping is 1-Lipschitz, so the caller's sensitivity promise still holds."""
    lim = MAX_UNITS * g
    return np.rint(np.clip(arr, -lim, lim) / g)


def diffs(units: np.ndarray, t_units: Any) -> np.ndarray:
    """The differences ``d_i = u_i - T_i`` as int64, clipped to ``±2^62`` (exact for comparisons against
    ``|rho - nu| < 2^62``); ``units`` from :func:`value_units`, ``t_units`` one threshold or one per answer, in
    lattice steps. An empty ``units`` gives an empty array."""
    if units.size == 0:
        return np.zeros(0, dtype=np.int64)
    t_arr = np.broadcast_to(np.asarray(t_units, dtype=np.float64), units.shape)
    if float(np.max(np.abs(units))) < 2.0**60 and float(np.max(np.abs(t_arr))) < 2.0**60:
        return units.astype(np.int64) - t_arr.astype(np.int64)
    return np.array([max(-SAFE, min(SAFE, int(v) - int(t))) for v, t in zip(units.tolist(), t_arr.tolist(),
                                                                              strict=True)], dtype=np.int64)


def compare(cols: np.ndarray, rho: np.ndarray, nu: np.ndarray) -> np.ndarray:
    """The ``⊤`` test ``u - T >= rho - nu`` elementwise, exactly in integers: ``cols`` the differences
    (broadcast against ``nu``), ``rho`` one threshold noise per run (row), ``nu`` the query noise. Draws nothing."""
    if nu.size and int(np.max(np.abs(nu))) + int(np.max(np.abs(rho))) < SAFE:
        return cols >= (rho[:, None] - nu)
    cols = np.broadcast_to(cols, nu.shape)  # pragma: no cover - needs noise beyond 2^61, probability ~exp(-2^10)
    return np.array([[int(c) >= int(r) - int(v) for c, v in zip(crow, row, strict=True)]  # pragma: no cover
                     for r, crow, row in zip(rho, cols, nu, strict=True)], dtype=bool).reshape(nu.shape)


def sample_positives(diffs: np.ndarray, cal: Calibration, rng: RandomSource, count: int = 1,
                     cutoff: int | None = None) -> np.ndarray:
    """``count`` independent runs of the sparse vector technique on the same answers; ``diffs[i] = u_i - T_i``.

    Returns a ``(count, c)`` int64 array: the indices of each run's ``⊤`` answers in order, padded with
    ``-1``. Each run draws its threshold noise first, then query noise block by block from its current
    position; with ``cal.resample`` (Dwork–Roth) a fresh threshold noise is drawn after each ``⊤`` and the
    run restarts after it. Noise drawn after a run's last ``⊤`` (the rest of a block) is never used. The law is
    exactly the sequential one (module docstring). ``cutoff`` overrides ``cal.cutoff`` (1: AboveThreshold).

    Draw order (pinned by seeded tests): ``count`` threshold noises, then per block a ``(runs, block)`` array of
    query noises (block 16 for one run, growing 4x while no run ends; ``2^18 / count`` for many runs), then,
    with ``resample``, the fresh threshold noises of the runs that got a ``⊤``. Charges nothing."""
    from dpkit.noise import sample_discrete_laplace

    c = cal.cutoff if cutoff is None else cutoff
    m = int(diffs.size)
    out = np.full((count, c), -1, dtype=np.int64)
    rho = np.asarray(sample_discrete_laplace(cal.t_threshold, count, rng=rng), dtype=np.int64)
    hits = np.zeros(count, dtype=np.int64)
    start = np.zeros(count, dtype=np.int64)
    active = np.arange(count) if m else np.arange(0)
    block = 16 if count == 1 else max(1, (1 << 18) // count)
    restarted = False
    while active.size:
        idx = start[active, None] + np.arange(block)[None, :]
        valid = idx < m
        cols = diffs[np.minimum(idx, m - 1)]
        nu = np.asarray(sample_discrete_laplace(cal.t_query, idx.shape, rng=rng), dtype=np.int64)
        hit = compare(cols, rho[active], nu) & valid
        if cal.resample or c == 1:  # one ⊤ per row: the first
            any_hit = hit.any(axis=1)
            first = np.argmax(hit, axis=1)
            rows = active[any_hit]
            out[rows, hits[rows]] = idx[any_hit, first[any_hit]]
            hits[rows] += 1
            start[active] = np.where(any_hit, idx[np.arange(active.size), first] + 1, start[active] + block)
            restarted = bool(cal.resample and rows.size)
            if restarted:
                again = rows[hits[rows] < c]
                rho[again] = np.asarray(sample_discrete_laplace(cal.t_threshold, again.size, rng=rng),
                                        dtype=np.int64)
        else:  # every ⊤ in the block, up to the cutoff
            take_hits(hit, active, idx, hits, out, c)
            start[active] += block
        active = active[(hits[active] < c) & (start[active] < m)]
        if count == 1:  # blocks grow while nothing happens; after a redraw of rho (Dwork–Roth) start small again
            block = 16 if restarted else min(block * 4, 1 << 16)
    return out


def take_hits(hit: np.ndarray, active: np.ndarray, idx: np.ndarray, hits: np.ndarray, out: np.ndarray,
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


def sample_first_above(diffs: np.ndarray, cal: Calibration, rng: RandomSource, count: int = 1) -> np.ndarray:
    """``count`` independent runs of AboveThreshold (cutoff 1) on the same answers; ``diffs[i] = u_i - T_i``.
    Returns the index of the first ``⊤`` of each run, ``-1`` when every answer is ``⊥``. Same law and draw order
    as :func:`sample_positives` with ``cutoff=1``; charges nothing."""
    return sample_positives(diffs, cal, rng, count, cutoff=1)[:, 0]


def sample_numeric(units: np.ndarray, positions: np.ndarray, cal: Calibration, rng: RandomSource) -> np.ndarray:
    """Numeric answers: the float nearest ``g (u_i + eta)``, ``eta ~ DLap(t₃)`` fresh, at every ``positions >= 0``
    (NaN elsewhere); ``units`` from :func:`value_units`. Draws one noise per ``⊤`` (in the order of
    ``positions``, row-major) and nothing without numeric answers. Charges nothing."""
    from dpkit.noise import sample_discrete_laplace

    out = np.full(positions.shape, np.nan)
    mask = positions >= 0
    if cal.t_numeric is None or not mask.any():
        return out
    eta = np.asarray(sample_discrete_laplace(cal.t_numeric, int(mask.sum()), rng=rng), dtype=np.int64)
    base = units[positions[mask]]
    out[mask] = [to_float(int(b) + int(e), cal.granularity) for b, e in zip(base.tolist(), eta.tolist(),
                                                                              strict=True)]
    return out


def to_float(k: int, g: float) -> float:
    """The float nearest the lattice point ``k g`` (exact when ``|k| < 2^53``)."""
    try:
        return float(Fraction(k) * Fraction(g))
    except OverflowError:  # pragma: no cover - needs |k g| > 1.8e308
        return math.copysign(math.inf, k)


@check.numeric_guard("beta")
def accuracy(cal: Calibration, queries: Any, beta: Any) -> float:
    """``alpha`` such that, with probability ``>= 1 - beta`` over the noise, among the first ``queries`` answers
    every ``⊤`` at ``i`` implies ``q_i >= T_i - alpha`` and every ``⊥`` implies ``q_j <= T_j + alpha``:
    ``alpha = (2a - 1) g`` with ``a = ceil(max(t₁, t₂) ln(2 draws / beta)) + 1`` and ``draws = queries + 1``
    (``queries + c`` with ``resample``) — a union bound over the noise draws with ``P[|DLap(t)| >= a] <= 2
    e^(-a/t)``, the float rounded up. ``queries`` an int >= 1, ``beta`` in (0, 1) (errors name them)."""
    m = check.integer("queries", queries, minimum=1)
    b = check.probability("beta", beta)
    draws = m + (cal.cutoff if cal.resample else 1)
    t = max(cal.t_threshold, cal.t_query)
    a = math.ceil(t * math.log(2.0 * draws / b) * (1.0 + 1e-12)) + 1
    return _exact.up((2 * a - 1) * cal.granularity, 2)


def public_params(cal: Calibration, threshold: Any) -> dict[str, Any]:
    """The public parameters a release or receipt of an SVT run records: the calibration (budget split, scales,
    granularity, cutoff, ...) and the threshold (a float, ``None``, or ``"per-query (m thresholds)"`` for a
    vector, whose values are public but not copied into the receipt)."""
    if threshold is None or np.ndim(threshold) == 0:
        thr: Any = threshold
    else:
        thr = f"per-query ({np.size(threshold)} thresholds)"
    params = {"epsilon": cal.epsilon, "threshold": thr, "sensitivity": cal.sensitivity,
              "monotonic": cal.monotonic, "cutoff": cal.cutoff, "epsilon_threshold": cal.epsilon_threshold,
              "epsilon_queries": cal.epsilon_queries, "threshold_scale": cal.threshold_scale,
              "query_scale": cal.query_scale, "granularity": cal.granularity}
    if cal.t_numeric is not None:
        params["epsilon_numeric"] = cal.epsilon_numeric
        params["numeric_scale"] = cal.numeric_scale
    if cal.resample:
        params["resampled_threshold"] = True
    return params


def release_params(cal: Calibration, threshold: Any, queries: int) -> dict[str, Any]:
    """:func:`public_params` plus what a run over a known list of ``queries`` answers records: ``queries`` and
    ``alpha_95`` (:func:`accuracy` for ``max(1, queries)`` answers, ``beta = 0.05``)."""
    params = public_params(cal, threshold)
    params["queries"] = int(queries)
    params["alpha_95"] = accuracy(cal, max(1, int(queries)), 0.05)
    return params


# ---------------------------------------------------------------------------------------------
# the interactive form
# ---------------------------------------------------------------------------------------------
class Stream:
    """Base of the interactive sparse vector objects (:class:`~dpkit.svt.SparseVector`,
    :class:`~dpkit.svt.AboveThreshold`, :class:`~dpkit.svt.DworkRothSVT`).

    A subclass's constructor computes a :class:`Calibration` and calls :meth:`_start`, which validates the
    threshold, then runs (:func:`~dpkit.mechanisms.contract.run`) a plan whose cost is ``PureDP(cal.epsilon)``
    and whose draw is the threshold noise ``rho``: the whole run is charged once, before any noise. Each query
    then draws its query noise (and, on ``⊤``, its numeric noise and, with ``resample``, a fresh ``rho``) from
    the same source, without further charges; the object halts after ``c`` ``⊤`` answers (:class:`SVTHalted`)
    and refuses to be copied or pickled (a copy would share ``rho``).
    """

    _mechanism = "sparse_vector"

    def _start(self, plan: Calibration, threshold: Any, accountant: Accountant | None, rng: RandomSource | None,
               description: str, threshold_required: bool = False) -> None:
        """Validate the rest, charge once, then draw the threshold noise."""
        if threshold is None and threshold_required:
            raise WrongType("threshold", "a real number or a 1-D array of per-query thresholds")
        thr, units = threshold_spec(threshold, plan.granularity)
        rng = rng_source.resolve(rng)
        self._plan = plan
        self._threshold = thr
        self._t_units = units
        self._rng = rng
        self._cost = PureDP(plan.epsilon)
        self._params = public_params(plan, thr)
        start = stream_plan(self._mechanism, plan, self._params)
        rel = run(start, accountant=accountant, rng=rng, description=description)
        self._receipt = rel.receipt
        self._rho = int(rel.value)
        self._answered = 0
        self._hits: list[int] = []

    def _draw(self, t: float) -> int:
        from dpkit.noise import sample_discrete_laplace

        return int(sample_discrete_laplace(t, 1, rng=self._rng)[0])

    def _threshold_for(self, threshold: Any) -> int:
        if threshold is not None:
            return threshold_units(threshold, self._plan.granularity)
        if self._t_units is None:
            raise InvalidParameter("threshold", "this object has no default threshold: give one with each query")
        if isinstance(self._t_units, np.ndarray):
            if self._answered >= self._t_units.size:
                raise InvalidParameter("threshold", "the per-query thresholds are used up: give one with the query")
            return int(self._t_units[self._answered])
        return int(self._t_units)

    def _unit(self, name: str, value: Any) -> int:
        v = check.real(name, value)
        return int(value_units(np.array([v]), self._plan.granularity)[0])

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
                value = to_float(reported + self._draw(self._plan.t_numeric), self._plan.granularity)
            if self._plan.resample and not self.halted:
                self._rho = self._draw(self._plan.t_threshold)
        self._answered += 1
        return SVTAnswer(bool(above), index, value)

    def accuracy(self, queries: int, beta: float = 0.05) -> float:
        """``alpha`` such that, with probability ``>= 1 - beta``, over the first ``queries`` answers a ``⊤``
        at ``i`` implies ``q_i >= T_i - alpha`` and each ``⊥`` implies ``q_j <= T_j + alpha``."""
        return accuracy(self._plan, queries, beta)

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
    def threshold(self) -> float | np.ndarray | None:
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
    def receipt(self) -> Receipt | None:
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



#: The SVT releases' ``Outcome.fields``: the receipt records the query noise scale, the :class:`Release` has no
#: single additive scale (its value is a set of indices), as before the contract.
NO_SCALE: dict[str, Any] = {"scale": None}


def stream_plan(mechanism: str, cal: Calibration, params: dict[str, Any]) -> Plan:
    """The plan that starts an interactive run: cost ``PureDP(cal.epsilon)`` (the whole run), draw the threshold
    noise ``rho ~ DLap(t₁)`` (an int, kept inside the object, never released). Receipt: ``sensitivity`` ``Δ``,
    ``scale`` the query noise scale, ``params`` as given; ``neighbours`` ``None``: the relation the caller's ``Δ``
    refers to (the accountant's, whatever it is)."""
    def draw(rng: RandomSource) -> int:
        from dpkit.noise import sample_discrete_laplace

        return int(sample_discrete_laplace(cal.t_threshold, 1, rng=rng)[0])

    return Plan(mechanism=mechanism, cost=PureDP(cal.epsilon), draw=draw, sensitivity=cal.sensitivity,
                scale=cal.query_scale, params=params, neighbours=None)


# ---------------------------------------------------------------------------------------------
# answers over a known list
# ---------------------------------------------------------------------------------------------
def answer_vector(values: Any) -> np.ndarray:
    """The answers ``q_i(D)`` of a run over a known list: a 1-D float array of finite reals (may be empty).
    Errors (:class:`WrongType` / :class:`~dpkit.core.errors.InvalidData`) name ``"values"``, never a value."""
    arr = check.finite_array("values", values, allow_empty=True)
    if arr.ndim > 1:
        raise WrongType("values", "a 1-D array of real numbers")
    return arr.reshape(-1)


def prepare(values: Any, threshold: Any, cal: Calibration) -> tuple[np.ndarray, np.ndarray, Any]:
    """Validate a list of answers and its threshold(s) and put them on ``cal``'s lattice: returns ``(units, d,
    public threshold)`` — :func:`value_units`, the differences :func:`diffs` and the public form of the
    threshold (:func:`threshold_spec`). A missing threshold is a :class:`WrongType` naming ``"threshold"``.
    Nothing is drawn."""
    arr = answer_vector(values)
    if threshold is None:
        raise WrongType("threshold", "a real number or a 1-D array of per-query thresholds")
    thr, t_units = threshold_spec(threshold, cal.granularity, size=arr.size)
    units = value_units(arr, cal.granularity)
    return units, diffs(units, t_units), thr

