"""Clipping bounds chosen privately, and statistics that find their own bounds.

Sums and means need public clamping bounds. Taking them from the data (min/max) is not private
(Near & Abuah ch. 6). These functions choose them with a charged DP step over *public* candidates,
fixed before the data is looked at (Near & Abuah ch. 11; Lyu, Su & Li 2017 for the sparse vector
technique):

- :func:`clipping_bound`: an upper bound ``b`` for values that are at least ``lower``;
- :func:`bounds_for`: a pair ``(lo, hi)``, searching both sides of a public ``origin``;
- :func:`auto_mean` / :func:`auto_sum`: find bounds with part of the budget, then compute the mean / sum.

The sparse-vector bound finder (``method="svt"``)
-------------------------------------------------
Values are clamped below at ``lower`` (``x -> max(x, lower)``), and ``clipsum(b) = Σ_i min(x_i, b)``.
For public candidates ``lower < b_0 < b_1 < ... < b_{K-1}`` the ``j``-th query (``j = 0 .. K-2``) is

    q_j(D) = (clipsum(b_j) - clipsum(b_{j+1})) / (b_{j+1} - b_j) = - Σ_i φ_j(x_i),
    φ_j(x) = clip((x - b_j) / (b_{j+1} - b_j), 0, 1),

roughly minus the number of records above ``b_j`` (records between two candidates count fractionally);
it measures how much the clipped sum would still grow by raising the bound. Near & Abuah's
``clipsum(b) - clipsum(b + 1)`` is the special case of consecutive integer candidates.

*Sensitivity 1, monotonic* (add/remove one record): adding ``x`` changes ``clipsum(b_j) -
clipsum(b_{j+1})`` by ``min(x, b_j) - min(x, b_{j+1}) ∈ [-(b_{j+1} - b_j), 0]``, so every ``q_j`` moves by
``-φ_j(x) ∈ [-1, 0]``: sensitivity 1, and **all queries move in the same direction** (down when a record is
added, up when one is removed). The queries are therefore monotonic and the sparse vector technique
runs with ``monotonic=True`` (half the query noise). Under ``Replace`` a query moves by
``φ_j(x_old) - φ_j(x_new) ∈ [-1, 1]`` in either direction (sensitivity 1, not monotonic); under a
``PrivacyUnit`` of at most ``k`` rows by at most ``k``, monotonically.

*Exactness*: each record's ``φ_j(x)`` is rounded to a multiple of ``2^-20`` (an integer
``k_j(x) ∈ [0, 2^20]``, any deterministic rounding) and the integers are summed exactly, so
``q_j = -2^-20 Σ_i k_j(x_i)`` is computed without rounding error and the two claims above hold
exactly, not just up to floating-point error (tested exhaustively on small data). This needs fewer than
``2^33`` records.

The bound is ``b_j`` for the first ``j`` whose query is above ``threshold`` in
:func:`dpkit.svt.above_threshold` (pure DP, cost independent of the number of candidates); **if no query
passes, the largest candidate is returned**. Default threshold: ``-4`` query-noise scales
(``-8/epsilon`` records under add/remove): stop once the mass above ``b_j`` is at most a few noise scales.
Near & Abuah use ``threshold = 0`` (stop only once nothing is left above, up to noise); on a geometric
grid that overshoots by factors of 2 whenever the threshold noise is high, which a small negative
threshold avoids, at the price of clipping a handful of records. Pass ``threshold=0`` to reproduce
their runs.

Accuracy (``method="svt"``): with ``alpha = Release.params["alpha"]`` (``beta = 0.05``, see
:meth:`dpkit.svt.AboveThreshold.accuracy`), with probability at least 95 % the returned ``b_j`` (if some
query passed) satisfies ``Σ_i φ_j(x_i) <= -threshold + alpha`` (hence at most ``-threshold + alpha``
records exceed ``b_{j+1}``), and every smaller candidate ``b_i`` had ``Σ φ_i > -threshold - alpha``.

The quantile bound finder (``method="quantile"``)
-------------------------------------------------
The exponential-mechanism quantile :func:`dpkit.stats.order_statistics.quantile` (``q = 0.99`` by default) over
the *gaps* between the candidates: each record is mapped to its gap (``[lower, b_0]``, ``(b_0, b_1]``, ...,
``(b_{K-2}, b_{K-1}]``, values above ``b_{K-1}`` joining the last), the gaps are the quantile's ``K`` unit
buckets, and the bound is the upper end ``b_j`` of the chosen gap, so that it lies above the
``q``-quantile when the gap is the right one. (Point candidates would not do: on a grid that extends far
beyond the data every candidate above the data has the same rank and the same quality, and the
exponential mechanism would pick among them uniformly.) The map is per record, so the guarantee is that
function's (pure DP, ``Δ = max(q, 1 - q)`` under add/remove); its rank-error bound
(:func:`dpkit.stats.order_statistics.rank_error_bound`) holds for the gaps: with probability ``1 - β`` at least
``q n - R`` records are ``<= b_j`` and at most ``q n + R`` are ``<= b_{j-1}``.

Default candidates: ``lower + 2^k`` for ``k = -10, ..., 40`` (51 values from ``lower + 0.001`` to
``lower + 1.1e12``): data-independent, and within a factor of two of any spread between 1e-3 and 1e12.
Give your own (e.g. ``range(1, 150, 5)`` for ages) when you know the scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.core.privacy import PureDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.noise.source import RandomSource
from dpkit.stats import _common

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours
    from dpkit.svt.engine import Calibration

__all__ = ["auto_mean", "auto_sum", "bounds_for", "clipping_bound", "default_candidates"]

_UNIT_BITS = 20
_UNIT = 1 << _UNIT_BITS  # per-record contribution φ_j(x) in steps of 2^-20
_MAX_RECORDS = 2**33  # n * 2^20 < 2^53: exact float sums
_METHODS = ("svt", "quantile")
_MEAN_METHODS = ("normalized", "centred", "clamp", "noisy_ratio", "exponential", "median")
_DEFAULT_EXPONENTS = range(-10, 41)
_THRESHOLD_SCALES = 4.0


def default_candidates(lower: float = 0.0) -> np.ndarray:
    """``lower + 2^k`` for ``k = -10 .. 40`` (strictly increasing float64; refused when ``lower`` is so
    large that some of them coincide)."""
    lower = check.real("lower", lower)
    return _candidates(None, lower, "candidates")


def _candidates(candidates: Any, lower: float, name: str) -> np.ndarray:
    if candidates is None:
        cands = np.array([lower + math.ldexp(1.0, k) for k in _DEFAULT_EXPONENTS])
        if not (np.all(np.isfinite(cands)) and np.all(np.diff(cands) > 0) and cands[0] > lower):
            raise InvalidParameter("lower", "too large in magnitude for the default candidates; pass candidates")
        return cands
    if isinstance(candidates, (str, bytes)) or check.safe_ndim(candidates) != 1:
        raise WrongType(name, "a 1-D sequence of increasing finite reals")
    cands = check.finite_array(name, candidates)
    if cands.size < 2:
        raise InvalidParameter(name, "needs at least two candidates")
    with np.errstate(over="ignore"):
        gaps = np.diff(cands)
        span = float(cands[-1]) - lower
    if not np.all(gaps > 0):
        raise InvalidParameter(name, "must be strictly increasing")
    if not cands[0] > lower:
        raise InvalidParameter(name, "must all be above lower (or origin)")
    if not np.all(np.isfinite(gaps)) or not math.isfinite(span):
        raise InvalidParameter(name, "range too wide for float arithmetic")
    return cands


def _method(method: Any, allowed: tuple[str, ...], name: str = "method") -> str:
    if not isinstance(method, str):
        raise WrongType(name, "a str")
    if method not in allowed:
        raise InvalidParameter(name, "must be one of " + ", ".join(repr(m) for m in allowed))
    return method


def _quantile_level(q: Any) -> float:
    return check.probability("q", q)


def _data(values: Any, nan_policy: str) -> np.ndarray:
    x = _common.data(values, nan_policy=nan_policy)
    if x.size >= _MAX_RECORDS:
        raise InvalidData("values", "too many records for exact bound queries (at most 2^33)")
    return x


def _bound_queries(x: np.ndarray, cands: np.ndarray, lower: float) -> np.ndarray:
    """``q_j = -2^-20 Σ_i k_j(x_i)`` for ``j = 0 .. K-2`` (exact; see the module docstring).

    ``k_j(x) = 0`` for ``x <= b_j``, ``2^20`` for ``x >= b_{j+1}``, else ``round((x - b_j)/(b_{j+1} - b_j) 2^20)``
    clipped to ``[0, 2^20]``. Each record lies strictly inside at most one gap, so this is O(n log K)."""
    if x.size >= _MAX_RECORDS:
        raise InvalidData("values", "too many records for exact bound queries (at most 2^33)")
    x = np.maximum(x, lower)
    k = cands.size
    xs = np.sort(x)
    # records at or above each b_{j+1}: full contribution to query j
    above = xs.size - np.searchsorted(xs, cands[1:], side="left")
    totals = above.astype(np.float64) * _UNIT
    # records strictly inside a gap (b_j, b_{j+1}): a partial contribution to query j only
    j = np.searchsorted(cands, xs, side="right") - 1  # b_j <= x < b_{j+1}
    inside = (j >= 0) & (j <= k - 2) & (xs > cands[np.clip(j, 0, k - 1)])
    if inside.any():
        jj = j[inside]
        lo, hi = cands[jj], cands[jj + 1]
        frac = (xs[inside] - lo) / (hi - lo)
        units = np.clip(np.rint(frac * _UNIT), 0, _UNIT)
        totals += np.bincount(jj, weights=units, minlength=k - 1)[: k - 1]
    return -totals / _UNIT  # exact: totals are integers < 2^53, _UNIT a power of two


def _gap_keys(x: np.ndarray, cands: np.ndarray, lower: float) -> np.ndarray:
    """Each record's gap, as the centre ``j + 1/2`` of the unit bucket ``[j, j+1)``: gap 0 is
    ``[lower, b_0]``, gap ``j`` is ``(b_{j-1}, b_j]``, and values above ``b_{K-1}`` join the last gap. A
    per-record map, so every sensitivity of the quantile statistic is unchanged."""
    j = np.minimum(np.searchsorted(cands, np.maximum(x, lower), side="left"), cands.size - 1)
    return j.astype(np.float64) + 0.5


def _svt_settings(epsilon: float, nb: Neighbours, threshold: Any) -> tuple[float, bool, Calibration, float]:
    """(sensitivity, monotonic, calibration, threshold) for the bound queries under the neighbour relation
    (the calibration is :func:`dpkit.svt.engine.calibrate`'s; nothing is drawn)."""
    from dpkit.svt import engine

    sens = float(_common.unit_rows(nb))
    mono = not _common.is_replace(nb)
    plan = engine.calibrate(epsilon, sens, mono)
    if threshold is None:
        thr = -_THRESHOLD_SCALES * plan.query_scale
    else:
        thr = check.real("threshold", threshold)
    engine.threshold_units(thr, plan.granularity)  # refuse an out-of-range threshold before any charge
    return sens, mono, plan, thr


def _svt_index(x: np.ndarray, cands: np.ndarray, lower: float, plan: Calibration, threshold: float, rng: RandomSource,
               count: int = 1) -> np.ndarray:
    """Index into ``cands`` of the chosen bound, for ``count`` independent runs (the largest candidate
    when no query passes). The data-dependent part is only ``_bound_queries``; the sweep is the SVT engine's
    (:func:`dpkit.svt.engine.sample_first_above`, which charges nothing: only inside a paid-for plan)."""
    from dpkit.svt import engine

    queries = _bound_queries(x, cands, lower)
    diffs = engine.diffs(engine.value_units(queries, plan.granularity),
                         engine.threshold_units(threshold, plan.granularity))
    first = engine.sample_first_above(diffs, plan, rng, count)
    return np.where(first < 0, cands.size - 1, first)


# ---------------------------------------------------------------------------------------------
# one side: the validated, uncharged core shared by the public functions
# ---------------------------------------------------------------------------------------------
class _Side:
    """Everything public about one bound search, validated before any charge."""

    def __init__(self, epsilon: float, cands: np.ndarray, lower: float, method: str, threshold: Any, q: float,
                 nb: Neighbours) -> None:
        self.epsilon, self.cands, self.lower, self.method, self.q, self.nb = epsilon, cands, lower, method, q, nb
        self.plan: Calibration | None = None  # the SVT calibration and threshold (method "svt" only)
        self.threshold: float | None = None
        self.alpha: float | None = None
        if method == "svt":
            _sens, _mono, self.plan, self.threshold = _svt_settings(epsilon, nb, threshold)
            from dpkit.svt import engine

            self.alpha = engine.accuracy(self.plan, max(1, cands.size - 1), 0.05)
        elif threshold is not None:
            raise InvalidParameter("threshold", "only used by method='svt'")

    def prepare(self, x: np.ndarray) -> Callable[[RandomSource], tuple[float, int | None]]:
        """Validate this search on ``x`` (every check of the sub-mechanism, before any charge) and return its
        draw: ``rng -> (bound, index)`` (``index`` into the candidates for ``"svt"``, else ``None``). The draw
        charges nothing: only inside a plan whose cost covers ``PureDP(self.epsilon)``."""
        cands = self.cands
        if self.method == "svt":
            lower, plan, threshold = self.lower, self.plan, self.threshold
            assert plan is not None and threshold is not None  # set by __init__ for method "svt"

            def svt(rng: RandomSource) -> tuple[float, int | None]:
                idx = int(_svt_index(x, cands, lower, plan, threshold, rng)[0])
                return float(cands[idx]), idx

            return svt
        from dpkit.stats.order_statistics import _quantile_plan

        k = cands.size
        sub = _quantile_plan(_gap_keys(x, cands, self.lower), self.q, (0.0, float(k)), self.epsilon, bins=k,
                             neighbours=self.nb, accountant=None)

        def quantile(rng: RandomSource) -> tuple[float, int | None]:
            return float(cands[min(int(sub.sample(rng).parts["index"]), k - 1)]), None

        return quantile

    def params(self) -> dict[str, Any]:
        p: dict[str, Any] = {"method": self.method, "lower": self.lower, "candidates": int(self.cands.size),
                             "epsilon": self.epsilon}
        if self.method == "svt":
            assert self.plan is not None  # set by __init__ for method "svt"
            p.update(threshold=self.threshold, alpha=self.alpha, monotonic=self.plan.monotonic)
        else:
            p["q"] = self.q
        return p


def _exact_split(epsilon: float, share: float) -> tuple[float, float]:
    """``(a, b)`` with ``a ≈ share·epsilon``, ``a, b > 0`` and ``a + b <= epsilon`` exactly."""
    a, b = _exact.split_budget(epsilon, [share, 1.0 - share], name="bounds_share", total_name="epsilon")
    return a, b


# ---------------------------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------------------------
def clipping_bound(values: ArrayLike, epsilon: float, *, candidates: ArrayLike | None = None, method: str = "svt",
                   lower: float = 0.0, threshold: float | None = None, q: float = 0.99,
                   neighbours: Neighbours | None = None, accountant: Accountant | None = None,
                   rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """A private upper clipping bound for ``values``, chosen among public candidates.

    Parameters
    ----------
    values:
        1-D real data. Values below ``lower`` are clamped to it.
    epsilon:
        Privacy parameter (> 0); the whole search costs ``PureDP(epsilon)``, whatever the number of
        candidates.
    candidates:
        Strictly increasing public candidates, all ``> lower`` (at least two). Default
        ``lower + 2^k``, ``k = -10 .. 40`` (:func:`default_candidates`).
    method:
        ``"svt"`` (default; sparse vector sweep, see the module docstring) or ``"quantile"`` (the
        exponential-mechanism ``q``-quantile over the candidates; needs :mod:`dpkit.stats.quantiles`).
    lower:
        Public lower end of the data (default 0).
    threshold:
        ``"svt"`` only: the sweep stops at the first ``b_j`` with ``-Σ φ_j(x) + noise >= threshold + noise``,
        i.e. about ``-threshold`` records' worth of mass above ``b_j``. Default: ``-4`` query-noise scales,
        ``-8k/epsilon`` under add/remove (``k`` = rows per privacy unit, else 1) and ``≈ -13.04/epsilon``
        under replace (general noise ``2/ε₂``, ``ε₂ = epsilon 2^(2/3)/(1 + 2^(2/3))``). Near & Abuah use 0.
    q:
        ``"quantile"`` only: the quantile level (default 0.99).
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`).

    Guarantee
    ---------
    Pure ``epsilon``-DP under the neighbour relation (explicit, the accountant's, or add/remove by default):
    ``"svt"`` is AboveThreshold on the bound queries, which have sensitivity ``unit_rows(neighbours)`` and
    are monotonic except under ``Replace`` (module docstring); ``"quantile"`` is
    :func:`dpkit.stats.quantile` on a per-record map of the data.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness is drawn, whatever the number of candidates.

    Output law
    ----------
    ``"svt"``: the exact lattice AboveThreshold law of the bound queries (:mod:`dpkit.svt.engine`); the value is
    the candidate ``b_j`` of the first query above the threshold (the largest candidate when no query passed)
    and ``parts["index"]`` its position. ``"quantile"``: the upper end of the gap chosen by the exponential
    mechanism. The value is a float.

    Error
    -----
    ``params["alpha"]`` (``"svt"``): with probability at least 95 % the returned ``b_j`` leaves at most
    ``-threshold + alpha`` records' worth of mass above it (module docstring); ``"quantile"``: the rank
    error of :func:`dpkit.stats.order_statistics.rank_error_bound` on the gaps. No interval.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> ages = [23, 35, 41, 29, 52, 67, 38, 44, 31, 90] * 300
    >>> clipping_bound(ages, 1.0, rng=deterministic_source(3)).value
    128.0
    """
    plan = _clipping_bound_plan(values, epsilon, candidates=candidates, method=method, lower=lower,
                                threshold=threshold, q=q, neighbours=neighbours, accountant=accountant,
                                nan_policy=nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _clipping_bound_plan(values: Any, epsilon: Any, *, candidates: Any = None, method: Any = "svt", lower: Any = 0.0,
                         threshold: Any = None, q: Any = 0.99, neighbours: Neighbours | None = None,
                         accountant: Accountant | None = None, nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`clipping_bound` (nothing charged or drawn)."""
    nb = _common.neighbours_of(neighbours, accountant)
    x = _data(values, nan_policy)
    eps = check.epsilon(epsilon)
    low = check.real("lower", lower)
    cands = _candidates(candidates, low, "candidates")
    meth = _method(method, _METHODS)
    level = _quantile_level(q)
    side = _Side(eps, cands, low, meth, threshold, level, nb)
    search = side.prepare(x)

    def draw(rng: RandomSource) -> Outcome:
        value, idx = search(rng)
        return Outcome(value, parts={} if idx is None else {"index": idx})

    return Plan(mechanism="clipping_bound", cost=PureDP(eps), draw=draw, sensitivity=float(_common.unit_rows(nb)),
                params=side.params(), neighbours=nb)


def _mirror(cands: np.ndarray, origin: float) -> np.ndarray:
    """Candidates for the lower side as an upper search on ``-x`` above ``-origin``: ``b - 2 origin``."""
    out = cands - 2.0 * origin
    if not (np.all(np.isfinite(out)) and np.all(np.diff(out) > 0) and out[0] > -origin):
        raise InvalidParameter("candidates", "cannot be mirrored about origin in float arithmetic")
    return out


def _two_sided(epsilon: float, candidates: Any, method: str, origin: Any, threshold: Any, q: Any,
               nb: Neighbours) -> tuple[_Side, _Side, float]:
    org = check.real("origin", origin)
    cands = _candidates(candidates, org, "candidates")
    meth = _method(method, _METHODS)
    level = _quantile_level(q)
    e_hi, e_lo = _exact_split(epsilon, 0.5)
    upper = _Side(e_hi, cands, org, meth, threshold, level, nb)
    lower_side = _Side(e_lo, _mirror(cands, org), -org, meth, threshold, level, nb)
    return upper, lower_side, org


def bounds_for(values: ArrayLike, epsilon: float, *, candidates: ArrayLike | None = None, method: str = "svt",
               origin: float = 0.0, threshold: float | None = None, q: float = 0.99,
               neighbours: Neighbours | None = None, accountant: Accountant | None = None,
               rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """Private clamping bounds ``(lo, hi)`` for ``values``: both sides searched around a public ``origin``.

    ``hi`` is :func:`clipping_bound` of the values above ``origin`` (``lower=origin``) over ``candidates``
    (strictly increasing, all ``> origin``; default ``origin + 2^k``, ``k = -10 .. 40``); ``lo`` is
    ``origin`` minus the same search on the mirrored data ``2 origin - x`` (so the candidates for ``lo``
    are ``2 origin - b_j``: symmetric about ``origin``). Each side gets half of ``epsilon`` (rounded so
    that the halves add up to at most ``epsilon``); ``threshold`` and ``q`` apply to each side. Values on
    the other side of ``origin`` count as ``origin`` in each search, so data entirely above ``origin``
    gets ``lo = origin - b_0`` (close to ``origin``).

    Parameters
    ----------
    values, epsilon, neighbours, accountant, rng, nan_policy, description:
        As for :func:`clipping_bound`.
    candidates, method, threshold, q:
        As for :func:`clipping_bound`, for each side.
    origin:
        The public centre of the search (default 0).

    Guarantee
    ---------
    Pure ``epsilon``-DP under the neighbour relation: sequential composition of the two searches (each
    :func:`clipping_bound`'s guarantee at its half; the mirroring is a per-record map).

    Cost
    ----
    ``PureDP(epsilon)``, charged once before any randomness is drawn (``params["epsilon_each"]`` is each side's
    share).

    Output law
    ----------
    ``hi`` drawn first, then ``lo``, each by :func:`clipping_bound`'s law. ``Release.value`` is the tuple
    ``(lo, hi)``, ``lo < origin < hi``; ``parts`` holds ``"lower"`` and ``"upper"``.

    Error
    -----
    ``params["alpha"]`` (``"svt"``) is each side's accuracy (see :func:`clipping_bound`). No interval.

    Examples
    --------
    >>> from dpkit.noise import deterministic_source
    >>> bounds_for([-3.0, 1.5, 2.0, -0.5] * 500, 1.0, rng=deterministic_source(4)).value
    (-4.0, 2.0)
    """
    plan = _bounds_for_plan(values, epsilon, candidates=candidates, method=method, origin=origin,
                            threshold=threshold, q=q, neighbours=neighbours, accountant=accountant,
                            nan_policy=nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _bounds_for_plan(values: Any, epsilon: Any, *, candidates: Any = None, method: Any = "svt", origin: Any = 0.0,
                     threshold: Any = None, q: Any = 0.99, neighbours: Neighbours | None = None,
                     accountant: Accountant | None = None, nan_policy: Any = "raise") -> Plan:
    """The validated plan of :func:`bounds_for` (nothing charged or drawn)."""
    nb = _common.neighbours_of(neighbours, accountant)
    x = _data(values, nan_policy)
    eps = check.epsilon(epsilon)
    upper, lower_side, org = _two_sided(eps, candidates, method, origin, threshold, q, nb)
    search_hi = upper.prepare(x)
    search_lo = lower_side.prepare(-x)
    params = {"epsilon": eps, "origin": org, **{k: v for k, v in upper.params().items() if k != "epsilon"},
              "epsilon_each": upper.epsilon}

    def draw(rng: RandomSource) -> Outcome:
        hi = search_hi(rng)[0]
        lo = -search_lo(rng)[0]
        return Outcome((lo, hi), parts={"lower": lo, "upper": hi})

    return Plan(mechanism="bounds_for", cost=PureDP(eps), draw=draw, sensitivity=float(_common.unit_rows(nb)),
                params=params, neighbours=nb)


def _inner_plan(kind: str, x: np.ndarray, bounds: tuple[float, float], epsilon: float, method: str | None,
                nb: Neighbours) -> Plan:
    """The second step's plan (drawn with ``sample`` inside the statistic's plan: no charge of its own)."""
    if kind == "mean":
        from dpkit.stats.means import _mean_plan

        return _mean_plan(x, bounds, epsilon, method=method, neighbours=nb, accountant=None)
    from dpkit.stats.sums import _sum_plan

    return _sum_plan(x, bounds, epsilon, neighbours=nb, accountant=None)


def _auto_plan(kind: str, values: Any, epsilon: Any, bounds_share: Any, candidates: Any, method: Any, bound_method: Any,
               lower: Any, origin: Any, threshold: Any, q: Any, neighbours: Neighbours | None,
               accountant: Accountant | None, nan_policy: Any) -> Plan:
    """The validated plan of :func:`auto_mean` / :func:`auto_sum` (``kind``), nothing charged or drawn. The
    second step's scale depends on the released bounds, so the draw's outcome carries it in ``fields``
    (``Release.scale``); the receipt has none."""
    nb = _common.neighbours_of(neighbours, accountant)
    x = _data(values, nan_policy)
    eps = check.epsilon(epsilon)
    share = check.probability("bounds_share", bounds_share)
    e_bounds, e_stat = _exact_split(eps, share)
    meth = _method(method, _MEAN_METHODS) if kind == "mean" else None
    bmeth = _method(bound_method, _METHODS, "bound_method")
    if lower is None:
        upper, lower_side, org = _two_sided(e_bounds, candidates, bmeth, origin, threshold, q, nb)
    else:
        low = check.real("lower", lower)
        check.real("origin", origin)
        upper = _Side(e_bounds, _candidates(candidates, low, "candidates"), low, bmeth, threshold,
                      _quantile_level(q), nb)
        lower_side, org = None, None
    search_hi = upper.prepare(x)
    search_lo = None if lower_side is None else lower_side.prepare(-x)
    if lower_side is None:
        widest = (float(lower), float(upper.cands[-1]))
    else:
        assert org is not None  # two-sided search: _two_sided returned the origin
        widest = (org - float(upper.cands[-1] - org), float(upper.cands[-1]))
    _inner_plan(kind, x, widest, e_stat, meth, nb)  # the second step's checks, before the charge
    params: dict[str, Any] = {"epsilon": eps, "bounds_share": share, "epsilon_bounds": e_bounds,
                              "epsilon_" + kind: e_stat, "bound_method": bmeth, "lower": lower, "origin": org}
    if kind == "mean":
        params["method"] = meth
    if bmeth == "svt":
        params.update(threshold=upper.threshold, alpha=upper.alpha)

    def draw(rng: RandomSource) -> Outcome:
        hi = search_hi(rng)[0]
        lo = float(lower) if search_lo is None else -search_lo(rng)[0]
        step = _inner_plan(kind, x, (lo, hi), e_stat, meth, nb)
        inner = step.release(step.sample(rng), secure=rng.secure)
        return Outcome(inner.value, parts={"bounds": (lo, hi), **dict(inner.parts)},
                       interval_fn=lambda confidence: inner.interval(confidence), fields={"scale": inner.scale})

    return Plan(mechanism="auto_" + kind, cost=PureDP(eps), draw=draw, params=params, neighbours=nb)


def _auto(kind: str, values: Any, epsilon: float, bounds_share: Any, candidates: Any, method: Any, bound_method: str,
          lower: Any, origin: Any, threshold: Any, q: Any, neighbours: Neighbours | None, accountant: Accountant | None,
          rng: RandomSource | None, nan_policy: str, description: str) -> Release:
    plan = _auto_plan(kind, values, epsilon, bounds_share, candidates, method, bound_method, lower, origin,
                      threshold, q, neighbours, accountant, nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def auto_mean(values: ArrayLike, epsilon: float, *, bounds_share: float = 1 / 3, candidates: ArrayLike | None = None,
              method: str = "normalized", bound_method: str = "svt", lower: float | None = None, origin: float = 0.0,
              threshold: float | None = None, q: float = 0.99, neighbours: Neighbours | None = None,
              accountant: Accountant | None = None, rng: RandomSource | None = None, nan_policy: str = "raise",
              description: str = "") -> Release:
    """A private mean that finds its own clamping bounds (Near & Abuah's ``auto_avg``, generalised).

    ``bounds_share · epsilon`` goes to :func:`bounds_for` (both sides around ``origin``; or, when ``lower``
    is given, to :func:`clipping_bound` above ``lower``, with bounds ``(lower, b)``), the rest to
    :func:`dpkit.stats.means.mean` with ``method`` on the data clamped to the bounds found. ``candidates``,
    ``bound_method`` (``"svt"``/``"quantile"``), ``threshold`` and ``q`` go to the bound search.

    Parameters
    ----------
    values, epsilon, neighbours, accountant, rng, nan_policy, description:
        As for :func:`clipping_bound`.
    bounds_share:
        The fraction of ``epsilon`` for the bound search (default 1/3).
    candidates, bound_method, threshold, q:
        The bound search's ``candidates``, ``method``, ``threshold`` and ``q`` (:func:`clipping_bound`).
    method:
        The mean's method (:func:`dpkit.stats.means.mean`).
    lower:
        ``None`` (default): search both sides around ``origin`` (:func:`bounds_for`); else the public lower
        bound, and only the upper one is searched.
    origin:
        The centre of a two-sided search (default 0).

    Guarantee
    ---------
    Pure ``epsilon``-DP under the neighbour relation: adaptive sequential composition of the bound search
    (``epsilon_bounds``) and the mean with the released bounds (``epsilon_mean``); the two parts add up to
    at most ``epsilon`` exactly.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before anything is drawn.

    Output law
    ----------
    The bound search's law (``hi`` first, then ``lo``), then :func:`dpkit.stats.means.mean`'s law on the data
    clamped to the released bounds. ``Release.value`` is the mean; ``parts["bounds"]`` the bounds found
    (released too), with the mean's own parts; ``Release.scale`` is the mean's.

    Error
    -----
    ``Release.interval(confidence)`` is the mean's: it covers the mean of the data **clamped to the released
    bounds** (clipping bias is not included). Accuracy of the bounds: ``params["alpha"]`` (see
    :func:`clipping_bound`).

    Errata
    ------
    Vs Near & Abuah's ``auto_avg``: their candidate grid ``range(1, 150000, 5)`` makes the search
    linear in the spread (very slow for capital gain); the default here is geometric, and the bound's
    query is normalised by the gap so any grid has sensitivity 1.
    """
    return _auto("mean", values, epsilon, bounds_share, candidates, method, bound_method, lower, origin, threshold,
                 q, neighbours, accountant, rng, nan_policy, description)


def auto_sum(values: ArrayLike, epsilon: float, *, bounds_share: float = 1 / 3, candidates: ArrayLike | None = None,
             bound_method: str = "svt", lower: float | None = None, origin: float = 0.0, threshold: float | None = None,
             q: float = 0.99, neighbours: Neighbours | None = None, accountant: Accountant | None = None,
             rng: RandomSource | None = None, nan_policy: str = "raise", description: str = "") -> Release:
    """A private sum that finds its own clamping bounds: as :func:`auto_mean`, with
    :func:`dpkit.stats.sums.sum` for the second part.

    Parameters
    ----------
    values, epsilon, bounds_share, candidates, bound_method, lower, origin, threshold, q:
        As for :func:`auto_mean`.
    neighbours, accountant, rng, nan_policy, description:
        As for every statistic (:mod:`dpkit.stats`).

    Guarantee
    ---------
    Pure ``epsilon``-DP (adaptive sequential composition of the bound search and the sum, at most ``epsilon``
    in total exactly), under the neighbour relation.

    Cost
    ----
    ``PureDP(epsilon)``, charged once before anything is drawn.

    Output law
    ----------
    The bound search's law, then :func:`dpkit.stats.sums.sum`'s lattice Laplace law with the released bounds.
    ``Release.value`` is the sum; ``parts["bounds"]`` the bounds found; ``Release.scale`` is the sum's.

    Error
    -----
    ``Release.interval(confidence)`` is the sum's: it covers the sum of the data **clamped to the released
    bounds** (clipping bias is not included). Accuracy of the bounds: ``params["alpha"]``.
    """
    return _auto("sum", values, epsilon, bounds_share, candidates, None, bound_method, lower, origin, threshold,
                 q, neighbours, accountant, rng, nan_policy, description)
