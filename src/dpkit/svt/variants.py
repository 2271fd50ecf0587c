"""Sparse vector variants kept for comparison: Dwork–Roth's (threshold redrawn after every ``⊤``) and Near's Sparse.

Both are private, just noisier than the standard SVT (:mod:`dpkit.svt.sparse_vector`), because they redraw the
threshold noise after every ``⊤`` and must then scale it with ``c``:

- :class:`DworkRothSVT` / :func:`dwork_roth_svt`: Dwork & Roth 2014, Alg 2 (Lyu–Su–Li Alg 2, Li et al. Alg 13)::

      ε₁ = ε₂ = ε/2;  rho ~ Lap(cΔ/ε₁)
      for each query:  nu_i ~ Lap(2cΔ/ε₂)
          if q_i + nu_i >= T_i + rho:  answer ⊤, redraw rho ~ Lap(cΔ/ε₁); halt after the c-th ⊤
          else:                        answer ⊥

  (The printed listing writes ``Lap(2cΔ/ε₁)`` for ``nu`` and ``Lap(cΔ/ε₂)`` for the redrawn ``rho``; equal, since
  ``ε₁ = ε₂``.)
- :func:`sparse`: Near & Abuah, *Programming Differential Privacy* ch. 11: AboveThreshold restarted after
  every ``⊤``, up to ``c`` times, each run at ``ε/c`` (sequential composition). With AboveThreshold's split
  ``ε₁ : ε₂ = a : b`` this is exactly Dwork–Roth's variant with the split ``a : b``; Near's own AboveThreshold
  (``Lap(2/ε)`` threshold, ``Lap(4/ε)`` queries) is the split ``1 : 1``, i.e. Dwork–Roth's Alg 2, while dpkit's
  default is its AboveThreshold's optimum ``1 : 2^(2/3)`` (``1 : 1`` monotonic).

Exact law and proof (on the lattice of :mod:`dpkit.svt.sparse_vector`): ``rho_k ~ DLap(t₁)``, ``t₁`` the smallest
float ``>= cΔu/ε₁``, drawn at the start and after each ``⊤``; ``nu_i ~ DLap(t₂)``, ``t₂ >= 2cΔu/ε₂``
(``cΔu/ε₂`` monotonic); ``⊤`` iff ``u_i + nu_i >= T_i + rho_k``. The run splits into at most ``c`` segments,
each ending at a ``⊤`` (the last one possibly at the end of the stream); given the earlier answers, a segment
is an AboveThreshold run with ``(ε₁/c, ε₂/c)`` on the remaining queries (pure ``(ε₁+ε₂)/c``-DP,
:mod:`dpkit.svt.sparse_vector`), and adaptive sequential composition over the ``<= c`` segments gives pure
``ε₁ + ε₂ <= epsilon``. The probability of an output is the product over its segments of AboveThreshold
probabilities (:func:`dpkit.audit.svt_law.svt_log_prob` with ``resample_threshold=True``).

Accuracy: as for the standard SVT with ``max(t₁, t₂)`` and a union bound over ``m + c`` draws
(:meth:`DworkRothSVT.accuracy`), i.e. ``alpha ≈ 2 max(cΔ/ε₁, 2cΔ/ε₂) ln(2(m+c)/beta)`` — ``c`` times the
standard SVT's threshold noise. Lyu–Su–Li's experiments (and ``docs/benchmarks.md``) show it far less accurate.

>>> from dpkit.noise import deterministic_source
>>> svt = DworkRothSVT(1.0, threshold=100.0, cutoff=2, rng=deterministic_source(4))
>>> [i for i, v in enumerate([3.0, 900.0, 40.0, 800.0]) if svt.query(v)]
[1, 3]
>>> svt.halted
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.core import _validate as check
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.noise.source import RandomSource
from dpkit.svt import engine
from dpkit.svt.engine import SVTAnswer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = ["DworkRothSVT", "dwork_roth_svt", "sparse"]

_DWORK_ROTH_SPLIT = (1.0, 1.0)


class DworkRothSVT(engine.Stream):
    """Dwork–Roth's sparse vector (threshold noise redrawn after every ``⊤``), interactive: pure ``epsilon``-DP,
    at most ``cutoff`` ``⊤`` answers. Private but noisier than :class:`~dpkit.svt.SparseVector`; kept for
    comparison (module docstring: exact law, proof, accuracy).

    Parameters as :class:`~dpkit.svt.SparseVector` (no numeric answers); ``split=(a, b)`` sets ``ε₁ : ε₂``
    (default ``1 : 1``, as printed). Threshold noise ``Lap(cΔ/ε₁)``, query noise ``Lap(2cΔ/ε₂)`` (``Lap(cΔ/ε₂)``
    monotonic), on the lattice. Charged ``PureDP(epsilon)`` once, in the constructor. :meth:`query` and
    :meth:`error_check` return an :class:`~dpkit.svt.SVTAnswer`; after ``cutoff`` ``⊤`` answers they raise
    :class:`~dpkit.svt.SVTHalted` (nothing drawn). Copying and pickling are refused.
    """

    _mechanism = "dwork_roth_svt"

    def __init__(self, epsilon: float, threshold: float | ArrayLike | None = None, *, cutoff: int = 1,
                 sensitivity: float = 1.0, monotonic: bool = False, split: Sequence[float] | None = None,
                 accountant: Accountant | None = None, rng: RandomSource | None = None, description: str = "") -> None:
        plan = engine.calibrate(epsilon, sensitivity, monotonic, split, cutoff, resample=True,
                                default_split=_DWORK_ROTH_SPLIT)
        self._start(plan, threshold, accountant, rng, description)

    def query(self, value: float, threshold: float | None = None) -> SVTAnswer:
        """``⊤`` iff ``value + nu >= T + rho`` (then ``rho`` is redrawn); see :meth:`SparseVector.query`."""
        return self._ask(value, threshold)

    def error_check(self, estimate: float, true_value: float, threshold: float | None = None) -> SVTAnswer:
        """``|estimate - true_value| + nu >= T + rho`` (noise outside the absolute value); see
        :meth:`SparseVector.error_check`."""
        return self._ask_error(estimate, true_value, threshold)


def _resampling_plan(mechanism: str, values: Any, threshold: Any, cal: engine.Calibration) -> Plan:
    """The validated plan of a resampling variant (nothing drawn or charged): cost ``PureDP(cal.epsilon)``, draw
    the engine's run with ``resample`` (threshold noise redrawn after each ``⊤``)."""
    _units, d, thr = engine.prepare(values, threshold, cal)

    def draw(rng: RandomSource) -> Outcome:
        pos = engine.sample_positives(d, cal, rng, 1)[0]
        return Outcome(pos[pos >= 0], fields=engine.NO_SCALE)

    return Plan(mechanism=mechanism, cost=PureDP(cal.epsilon), draw=draw, sensitivity=cal.sensitivity,
                scale=cal.query_scale, params=engine.release_params(cal, thr, d.size), neighbours=None)


def dwork_roth_svt(values: ArrayLike, threshold: float | ArrayLike, epsilon: float, *, cutoff: int = 1,
                   sensitivity: float = 1.0, monotonic: bool = False, split: Sequence[float] | None = None,
                   accountant: Accountant | None = None, rng: RandomSource | None = None,
                   description: str = "") -> Release:
    """Dwork–Roth's sparse vector over a known list of answers: ``Release.value`` is an int64 array of the
    indices of the ``⊤`` answers (at most ``cutoff``). For comparison only: :func:`~dpkit.svt.sparse_vector` is
    more accurate.

    Parameters
    ----------
    values:
        The answers ``q_i(D)`` in order (a 1-D array of finite reals; may be empty).
    threshold:
        One public threshold or one per value.
    epsilon, cutoff, sensitivity, monotonic, split:
        As for :class:`DworkRothSVT` (default split ``1 : 1``, as printed).
    accountant, rng, description:
        The accountant charged (or ``None``), the random source (default: the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP (``ε₁ + ε₂ <= epsilon``) with respect to the neighbour relation under which
    ``sensitivity`` bounds every answer's change: each of the ``<= c`` segments ending at a ``⊤`` is an
    AboveThreshold run at ``(ε₁/c, ε₂/c)``, and adaptive sequential composition sums them (module docstring).

    Cost
    ----
    ``PureDP(epsilon)``, charged once, before any noise is drawn.

    Output law
    ----------
    ``rho_k ~ DLap(t₁)``, ``t₁ >= cΔu/ε₁``, drawn at the start and after each ``⊤``; ``nu_i ~ DLap(t₂)``,
    ``t₂ >= 2cΔu/ε₂`` (``cΔu/ε₂`` monotonic); ``⊤`` iff ``u_i + nu_i >= T_i + rho_k``, on the lattice of
    :mod:`dpkit.svt.engine`; halt after the ``c``-th ``⊤``.

    Error
    -----
    As for :func:`~dpkit.svt.sparse_vector` with ``max(t₁, t₂)`` and a union bound over ``m + c`` draws:
    ``params["alpha_95"]``, ``≈ 2 max(cΔ/ε₁, 2cΔ/ε₂) ln(2(m+c)/0.05)`` — ``c`` times the standard SVT's
    threshold noise. ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.
    """
    cal = engine.calibrate(epsilon, sensitivity, monotonic, split, cutoff, resample=True,
                           default_split=_DWORK_ROTH_SPLIT)
    plan = _resampling_plan("dwork_roth_svt", values, threshold, cal)
    return run(plan, accountant=accountant, rng=rng, description=description)


def sparse(values: ArrayLike, threshold: float | ArrayLike, epsilon: float, cutoff: int, *, sensitivity: float = 1.0,
           monotonic: bool = False, split: Sequence[float] | None = None, accountant: Accountant | None = None,
           rng: RandomSource | None = None, description: str = "") -> Release:
    """Near & Abuah's ``sparse``: AboveThreshold at ``ε/cutoff`` restarted after each ``⊤``, up to ``cutoff``
    times. ``Release.value`` is an int64 array of the indices of the ``⊤`` answers (Near's list of indices; an
    empty array, not ``-1``, when none).

    Parameters
    ----------
    values:
        The answers ``q_i(D)`` in order (a 1-D array of finite reals; may be empty).
    threshold:
        One public threshold or one per value.
    epsilon, cutoff, sensitivity, monotonic:
        As for :func:`dwork_roth_svt`.
    split:
        Each AboveThreshold run's ``ε₁ : ε₂`` (default dpkit's ``1 : 2^(2/3)``, ``1 : 1`` monotonic; ``(1, 1)``
        reproduces Near's ``Lap(2/ε)``/``Lap(4/ε)`` and Dwork–Roth's Alg 2).
    accountant, rng, description:
        The accountant charged (or ``None``), the random source (default: the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP by sequential composition of the ``<= cutoff`` AboveThreshold runs at ``ε/cutoff``
    (each pure DP under the relation for which ``sensitivity`` holds); module docstring.

    Cost
    ----
    ``PureDP(epsilon)``, charged once, before any noise is drawn.

    Output law
    ----------
    Exactly Dwork–Roth's variant with the split ``a : b`` (:func:`dwork_roth_svt`, module docstring), on the
    lattice of :mod:`dpkit.svt.engine`.

    Error
    -----
    As for :func:`dwork_roth_svt`: ``params["alpha_95"]`` bounds the error of every answer with probability
    ``>= 0.95``. ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> sparse([5.0, 300.0, 2.0, 900.0, 700.0], 100.0, 1.0, 2, rng=deterministic_source(5)).value.tolist()
    [1, 3]
    """
    mono = check.flag("monotonic", monotonic)
    default = (1.0, 1.0) if mono else (1.0, 2.0 ** (2.0 / 3.0))
    cal = engine.calibrate(epsilon, sensitivity, mono, split, cutoff, resample=True, default_split=default)
    plan = _resampling_plan("sparse", values, threshold, cal)
    return run(plan, accountant=accountant, rng=rng, description=description)
