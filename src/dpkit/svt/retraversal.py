"""The standard sparse vector technique with a raised threshold and retraversal (Lyu–Su–Li Sec. 5, "SVT-ReTr").

Non-interactive top-``c`` selection with SVT: a threshold that is too low fills the ``c`` slots with the first
items of the list; one that is too high finds fewer than ``c`` and "wastes" the budget. SVT-ReTr raises the
threshold by ``k`` noise units and, when the list is exhausted before ``c`` items are chosen, scans the items
not yet chosen again, until ``c`` are chosen (or ``max_passes`` passes were made). For experimentation: the
exponential mechanism (:mod:`dpkit.mechanisms.top_k`) is the recommended method for this task, and in Lyu–Su–Li's
experiments even the best increment makes SVT-ReTr no better than it.

The raised threshold is ``T_i + k D`` with ``D`` chosen by ``increment_unit``:

- ``"std"`` (default): the standard deviation of the query noise, ``√2 · query_scale`` (Lyu–Su–Li's
  experiments: "1D means adding one standard deviation of the added noises");
- ``"scale"``: the query noise's Laplace scale ``query_scale`` (their Sec. 5 text: "multiples of the scale
  factor of the Laplace noise injected to each query"). The paper is inconsistent; both are offered.

``D`` depends only on public quantities (``epsilon``, ``cutoff``, ``Δ``, the split), so the raised threshold is
public.

Privacy: ONE sparse vector run, not one per pass
------------------------------------------------
Re-scanning does **not** start a new SVT run and does **not** draw a new threshold noise: the retraversal is the
standard SVT (:class:`~dpkit.svt.SparseVector`, cutoff ``c``, threshold noise drawn once) applied to a longer,
adaptively chosen stream — pass 1 asks every item, pass 2 asks again each item not chosen so far (a new query
with fresh query noise), and so on. Which items pass ``p + 1`` asks is a function of the earlier answers only,
and SVT's guarantee holds for adaptively chosen queries of sensitivity ``Δ``, for *any* number of queries, as
long as it stops at ``c`` ``⊤`` answers. So the whole retraversal is pure ``epsilon``-DP (cost
``PureDP(epsilon)``, charged once), the same as a single pass. ``max_passes`` (public) only bounds the running
time. The tests check this exactly: over every transcript of small instances, the log-ratio between
neighbouring inputs stays below ``epsilon`` and the transcript probabilities sum to one.

Exact law: that of :mod:`dpkit.svt.sparse_vector` on the stream of (item, pass) queries, with per-query
thresholds ``T_i + k D`` rounded to the lattice.

>>> from dpkit.noise import deterministic_source
>>> scores = [50.0, 900.0, 40.0, 700.0, 60.0, 800.0]
>>> rel = sparse_vector_retraversal(scores, 500.0, 1.0, 3, increment=1.0, rng=deterministic_source(6))
>>> sorted(rel.value.tolist()), rel.parts["passes"].tolist()
([1, 3, 5], [0, 0, 0])
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.noise.source import RandomSource
from dpkit.svt import engine
from dpkit.svt.engine import MAX_UNITS, Calibration

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = ["sparse_vector_retraversal"]

_UNITS = ("std", "scale")


def _raise_units(plan: Calibration, increment: float, unit: str) -> int:
    """``k D`` in lattice steps, rounded to the nearest integer (public)."""
    d = plan.t_query * (math.sqrt(2.0) if unit == "std" else 1.0)
    x = increment * d
    if not math.isfinite(x) or x >= MAX_UNITS:
        raise InvalidParameter("increment", "too large for exact lattice arithmetic")
    return round(Fraction(x))


def _sample_retraversal(diffs: np.ndarray, plan: Calibration, rng: RandomSource, count: int,
                        max_passes: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` independent SVT-ReTr runs; ``diffs[i] = u_i - (raised T_i)``. Returns ``(indices, passes)``,
    both ``(count, c)`` int64 arrays padded with ``-1``: the chosen items in the order chosen and the (0-based)
    pass in which each was chosen. Each pass draws query noise for the items still unchosen; the items of a pass
    are asked in list order and the run stops at its ``c``-th ``⊤`` (later noise of that pass is unused)."""
    from dpkit.noise import sample_discrete_laplace

    c, m = plan.cutoff, int(diffs.size)
    out = np.full((count, c), -1, dtype=np.int64)
    passes = np.full((count, c), -1, dtype=np.int64)
    hits = np.zeros(count, dtype=np.int64)
    rho = np.asarray(sample_discrete_laplace(plan.t_threshold, count, rng=rng), dtype=np.int64)
    chosen = np.zeros((count, m), dtype=bool)
    active = np.arange(count) if m else np.arange(0)
    cols = np.arange(m)[None, :]
    for p in range(max_passes):
        if not active.size:
            break
        if count == 1:  # noise only for the items still unchosen
            todo = np.flatnonzero(~chosen[0])
            nu = np.asarray(sample_discrete_laplace(plan.t_query, (1, todo.size), rng=rng), dtype=np.int64)
            hit = engine.compare(diffs[todo][None, :], rho[active], nu)
            idx = todo[None, :]
        else:
            nu = np.asarray(sample_discrete_laplace(plan.t_query, (active.size, m), rng=rng), dtype=np.int64)
            hit = engine.compare(diffs[None, :], rho[active], nu) & ~chosen[active]
            idx = cols
        before = hits.copy()
        runs, where = engine.take_hits(hit, active, idx, hits, out, c)
        chosen[runs, where] = True
        slot = np.arange(c)[None, :]
        passes[(slot >= before[:, None]) & (slot < hits[:, None])] = p  # the entries just recorded
        active = active[(hits[active] < c) & (hits[active] < m)]
    return out, passes


def _retraversal_plan(values: Any, threshold: Any, epsilon: Any, cutoff: Any, increment: Any, increment_unit: Any,
                      max_passes: Any, sensitivity: Any, monotonic: Any, split: Any) -> Plan:
    """The validated plan of :func:`sparse_vector_retraversal` (nothing drawn or charged)."""
    cal = engine.calibrate(epsilon, sensitivity, monotonic, split, cutoff)
    arr = engine.answer_vector(values)
    if threshold is None:
        raise WrongType("threshold", "a real number or a 1-D array of per-item thresholds")
    thr, t_units = engine.threshold_spec(threshold, cal.granularity, size=arr.size)
    k = check.nonnegative("increment", increment)
    check.choice("increment_unit", increment_unit, tuple(_UNITS))
    passes = check.integer("max_passes", max_passes, minimum=1)
    raise_units = _raise_units(cal, k, increment_unit)
    # a public function of public quantities (float-rounded only beyond 2^53 lattice steps)
    raised = np.asarray(t_units, dtype=np.float64) + raise_units
    if raised.size and float(np.max(np.abs(raised))) >= MAX_UNITS:
        raise InvalidParameter("threshold", "too large relative to the sensitivity for exact lattice arithmetic")
    d = engine.diffs(engine.value_units(arr, cal.granularity), raised)
    params = engine.public_params(cal, thr)
    params.update({"queries": int(arr.size), "increment": k, "increment_unit": increment_unit,
                   "raised_by": float(Fraction(raise_units) * Fraction(cal.granularity)), "max_passes": passes})

    def draw(rng: RandomSource) -> Outcome:
        idx, pas = _sample_retraversal(d, cal, rng, 1, passes)
        keep = idx[0] >= 0
        return Outcome(idx[0][keep], parts={"passes": pas[0][keep]}, fields=engine.NO_SCALE)

    return Plan(mechanism="sparse_vector_retraversal", cost=PureDP(cal.epsilon), draw=draw,
                sensitivity=cal.sensitivity, scale=cal.query_scale, params=params, neighbours=None)


def sparse_vector_retraversal(values: ArrayLike, threshold: float | ArrayLike, epsilon: float, cutoff: int, *,
                              increment: float = 0.0, increment_unit: str = "std", max_passes: int = 100,
                              sensitivity: float = 1.0, monotonic: bool = False, split: Sequence[float] | None = None,
                              accountant: Accountant | None = None, rng: RandomSource | None = None,
                              description: str = "") -> Release:
    """SVT with a raised threshold and retraversal (Lyu–Su–Li "SVT-ReTr"): choose up to ``cutoff`` items.

    Returns a :class:`~dpkit.mechanisms.Release`: ``value`` the chosen indices (int64, in the order chosen),
    ``parts["passes"]`` the pass (0-based) in which each was chosen, ``params["raised_by"]`` the raise ``k D``
    in the scores' units.

    Parameters
    ----------
    values:
        The items' scores ``q_i(D)`` (1-D, finite), each of sensitivity ``sensitivity``.
    threshold:
        The public threshold ``T`` (or one per item) before raising.
    epsilon, cutoff, sensitivity, monotonic, split:
        As for :func:`~dpkit.svt.sparse_vector` (no numeric answers; default split ``1 : (2c)^(2/3)``,
        ``1 : c^(2/3)`` monotonic — Lyu–Su–Li's SVT-ReTr uses ``1 : c^(2/3)`` with monotonic counts).
    increment:
        ``k >= 0``: the threshold is raised to ``T_i + k D`` (module docstring).
    increment_unit:
        ``"std"`` (``D = √2 · query_scale``) or ``"scale"`` (``D = query_scale``).
    max_passes:
        Public bound on the number of passes (>= 1); the run may end with fewer than ``cutoff`` items.
    accountant, rng, description:
        The accountant charged (or ``None``), the random source (default: the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP however many passes are made, with respect to the neighbour relation under which
    ``sensitivity`` bounds every score's change: the retraversal is ONE standard SVT run (threshold noise drawn
    once, cutoff ``c``) on an adaptively chosen stream of (item, pass) queries (module docstring).

    Cost
    ----
    ``PureDP(epsilon)``, charged once, before any noise is drawn.

    Output law
    ----------
    That of :mod:`dpkit.svt.engine` on the stream of (item, pass) queries with per-query thresholds ``T_i + k D``
    rounded to the lattice: ``rho ~ DLap(t₁)`` once; each pass draws fresh ``nu ~ DLap(t₂)`` for the items not
    yet chosen, asked in list order; stop at the ``c``-th ``⊤`` or after ``max_passes`` passes.

    Error
    -----
    None stated for the selection as a whole (it is experimental; Lyu–Su–Li find it no better than the
    exponential mechanism, :mod:`dpkit.mechanisms.top_k`). Each comparison is off by at most the SVT's
    ``alpha`` (:meth:`dpkit.svt.SparseVector.accuracy`) from the raised threshold with the stated probability.
    """
    plan = _retraversal_plan(values, threshold, epsilon, cutoff, increment, increment_unit, max_passes, sensitivity,
                             monotonic, split)
    return run(plan, accountant=accountant, rng=rng, description=description)
