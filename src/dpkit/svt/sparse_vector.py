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

from typing import TYPE_CHECKING, Any

from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.noise.source import RandomSource
from dpkit.svt import engine
from dpkit.svt.engine import SVTAnswer, SVTHalted

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant

__all__ = ["AboveThreshold", "SVTAnswer", "SVTHalted", "SparseVector", "above_threshold", "sparse_vector"]

class SparseVector(engine.Stream):
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

    Notes
    -----
    Use :meth:`query` with each answer ``q_i(D)`` (or :meth:`error_check` with an estimate and the true
    answer); both return an :class:`SVTAnswer` (truthy iff ``⊤``). After ``cutoff`` ``⊤`` answers the object
    is halted and further calls raise :class:`SVTHalted`. The exact law, the proof and the accuracy bound are
    in the module docstring.

    All attributes are public: ``epsilon``, ``threshold``, ``cutoff``, ``sensitivity``, ``monotonic``,
    ``epsilon_threshold`` (ε₁), ``epsilon_queries`` (ε₂), ``epsilon_numeric`` (ε₃), ``threshold_scale``,
    ``query_scale``, ``numeric_scale``, ``granularity``, ``cost``, ``receipt``, ``secure``, ``answered``,
    ``halted``, ``remaining`` (``⊤`` answers left), ``positions`` (indices of the ``⊤`` answers).
    """

    _mechanism = "sparse_vector"

    def __init__(self, epsilon: float, threshold: float | ArrayLike | None = None, *, cutoff: int = 1,
                 sensitivity: float = 1.0, monotonic: bool = False, split: Sequence[float] | None = None,
                 numeric_share: float = 0.0, accountant: Accountant | None = None, rng: RandomSource | None = None,
                 description: str = "") -> None:
        plan = engine.calibrate(epsilon, sensitivity, monotonic, split, cutoff, numeric_share, allow_numeric=True)
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


class AboveThreshold(engine.Stream):
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

    Notes
    -----
    Use :meth:`query` with each answer ``q_i(D)``; it returns ``False`` (``⊥``) or ``True`` (``⊤``). After
    the first ``True`` the object is halted and :meth:`query` raises :class:`SVTHalted`. The exact law,
    the proof, and the accuracy bound are in the module docstring; :meth:`accuracy` computes ``alpha``.

    All attributes are public: ``epsilon``, ``threshold``, ``sensitivity``, ``monotonic``, ``cutoff`` (1),
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

    def __init__(self, epsilon: float, threshold: float | ArrayLike, *, sensitivity: float = 1.0,
                 monotonic: bool = False, split: Sequence[float] | None = None, accountant: Accountant | None = None,
                 rng: RandomSource | None = None, description: str = "") -> None:
        plan = engine.calibrate(epsilon, sensitivity, monotonic, split)
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
def _above_threshold_plan(values: Any, threshold: Any, epsilon: Any, sensitivity: Any, monotonic: Any,
                          split: Any) -> Plan:
    """The validated plan of :func:`above_threshold` (nothing drawn or charged)."""
    cal = engine.calibrate(epsilon, sensitivity, monotonic, split)
    _units, d, thr = engine.prepare(values, threshold, cal)

    def draw(rng: RandomSource) -> Outcome:
        idx = int(engine.sample_first_above(d, cal, rng, 1)[0])
        return Outcome(None if idx < 0 else idx, fields=engine.NO_SCALE)

    return Plan(mechanism="above_threshold", cost=PureDP(cal.epsilon), draw=draw, sensitivity=cal.sensitivity,
                scale=cal.query_scale, params=engine.release_params(cal, thr, d.size), neighbours=None)


def above_threshold(values: ArrayLike, threshold: float | ArrayLike, epsilon: float, *, sensitivity: float = 1.0,
                    monotonic: bool = False, split: Sequence[float] | None = None, accountant: Accountant | None = None,
                    rng: RandomSource | None = None, description: str = "") -> Release:
    """AboveThreshold over a known sequence of answers: ``Release.value`` is the index of the first
    above-threshold answer, or ``None`` if every answer is below.

    Parameters
    ----------
    values:
        The answers ``q_i(D)`` in order (a 1-D array of finite reals; may be empty).
    threshold:
        One public threshold or one per value.
    epsilon, sensitivity, monotonic, split:
        As for :class:`AboveThreshold` (``split=(a, b)`` sets ``ε₁ : ε₂``; default ``1 : 2^(2/3)``, ``1 : 1``
        monotonic).
    accountant, rng, description:
        The accountant charged (or ``None``), the random source (default: the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP (``ε₁ + ε₂ <= epsilon``) with respect to the neighbour relation under which
    ``sensitivity`` bounds every answer's change (the caller's promise; the accountant's relation is recorded).
    Proof: Lyu–Su–Li Thm 4.7 (Thm 4.9 monotonic) on the integers, module docstring.

    Cost
    ----
    ``PureDP(epsilon)``, charged once, before any noise is drawn, however many values there are.

    Output law
    ----------
    The engine's exact lattice law with cutoff 1 (:mod:`dpkit.svt.engine`, module docstring): ``rho ~ DLap(t₁)``,
    then ``nu_i ~ DLap(t₂)`` fresh per answer until the first ``i`` with ``u_i + nu_i >= T_i + rho``; the value is
    that ``i`` (``None`` if none). ``params`` records the split and the scales.

    Error
    -----
    With probability ``>= 0.95``, a returned index ``i`` has ``q_i >= T_i - alpha`` and every earlier answer
    ``q_j <= T_j + alpha``, ``alpha = params["alpha_95"]`` (module docstring, for ``m = len(values)``;
    ``≈ 2 max(Δ/ε₁, 2Δ/ε₂) ln(2(m+1)/0.05)``). ``Release.interval()`` raises
    :class:`~dpkit.mechanisms.NoInterval`.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> above_threshold([-50.0, 60.0, 70.0], 10.0, 1.0, rng=deterministic_source(2)).value
    1
    """
    plan = _above_threshold_plan(values, threshold, epsilon, sensitivity, monotonic, split)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _sparse_vector_plan(values: Any, threshold: Any, epsilon: Any, cutoff: Any, sensitivity: Any, monotonic: Any,
                        split: Any, numeric_share: Any) -> Plan:
    """The validated plan of :func:`sparse_vector` (nothing drawn or charged)."""
    cal = engine.calibrate(epsilon, sensitivity, monotonic, split, cutoff, numeric_share, allow_numeric=True)
    units, d, thr = engine.prepare(values, threshold, cal)

    def draw(rng: RandomSource) -> Outcome:
        pos = engine.sample_positives(d, cal, rng, 1)[0]
        idx = pos[pos >= 0]
        parts: dict[str, Any] = {}
        if cal.t_numeric is not None:
            parts["answers"] = engine.sample_numeric(units, idx, cal, rng)
        return Outcome(idx, parts=parts, fields=engine.NO_SCALE)

    return Plan(mechanism="sparse_vector", cost=PureDP(cal.epsilon), draw=draw, sensitivity=cal.sensitivity,
                scale=cal.query_scale, params=engine.release_params(cal, thr, d.size), neighbours=None)


def sparse_vector(values: ArrayLike, threshold: float | ArrayLike, epsilon: float, *, cutoff: int = 1,
                  sensitivity: float = 1.0, monotonic: bool = False, split: Sequence[float] | None = None,
                  numeric_share: float = 0.0, accountant: Accountant | None = None, rng: RandomSource | None = None,
                  description: str = "") -> Release:
    """The standard sparse vector technique over a known list of answers.

    ``Release.value`` is an int64 array of the indices of the ``⊤`` answers, in order (at most ``cutoff``;
    fewer when the list ran out first). With a numeric share (``numeric_share`` or a three-way ``split``)
    ``Release.parts["answers"]`` holds the noisy numeric answers of those queries (fresh lattice Laplace noise,
    scale ``params["numeric_scale"]``). For non-interactive top-c selection prefer the exponential mechanism
    (:mod:`dpkit.mechanisms.top_k`): it is more accurate (Lyu–Su–Li Sec. 5–6).

    Parameters
    ----------
    values:
        The answers ``q_i(D)`` in order (a 1-D array of finite reals; may be empty).
    threshold:
        One public threshold or one per value.
    epsilon, cutoff, sensitivity, monotonic, split, numeric_share:
        As for :class:`SparseVector`.
    accountant, rng, description:
        The accountant charged (or ``None``), the random source (default: the OS CSPRNG), the receipt's note.

    Guarantee
    ---------
    Pure ``epsilon``-DP (``ε₁ + ε₂ + ε₃ <= epsilon``) with respect to the neighbour relation under which
    ``sensitivity`` bounds every answer's change (the caller's promise; ``monotonic`` a further one). Proof:
    Lyu–Su–Li Thm 4.7 / 4.9 on the integers, module docstring; numeric answers cost ``ε₃/c`` each.

    Cost
    ----
    ``PureDP(epsilon)``, charged once, before any noise is drawn, however many values there are.

    Output law
    ----------
    The engine's exact lattice law (:mod:`dpkit.svt.engine`; transcript probability in the module docstring):
    ``rho ~ DLap(t₁)`` once, ``nu_i ~ DLap(t₂)`` fresh per answer, ``⊤`` iff ``u_i + nu_i >= T_i + rho``, halt
    after the ``cutoff``-th ``⊤``; then the numeric answers ``g (u_i + eta_i)``, ``eta_i ~ DLap(t₃)``, of the
    ``⊤`` in order. ``params`` records the split and the scales.

    Error
    -----
    With probability ``>= 0.95`` every ``⊤`` at ``i`` has ``q_i >= T_i - alpha`` and every ``⊥`` before the run
    halts ``q_j <= T_j + alpha``, ``alpha = params["alpha_95"]`` (module docstring, ``m = len(values)``;
    ``≈ 2 max(Δ/ε₁, 2cΔ/ε₂) ln(2(m+1)/0.05)``). A numeric answer's error is lattice Laplace of scale
    ``params["numeric_scale"]``: ``dpkit.mechanisms.accuracy.laplace_halfwidth(numeric_scale, confidence,
    granularity=g)`` bounds it. ``Release.interval()`` raises :class:`~dpkit.mechanisms.NoInterval`.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> rel = sparse_vector([5.0, 300.0, 2.0, 900.0, 700.0], 100.0, 1.0, cutoff=2, rng=deterministic_source(3))
    >>> rel.value.tolist()
    [1, 3]
    """
    plan = _sparse_vector_plan(values, threshold, epsilon, cutoff, sensitivity, monotonic, split, numeric_share)
    return run(plan, accountant=accountant, rng=rng, description=description)
