"""A_samp (Smith & Thakurta 2013; Li et al. Alg 20): the mode of ``f`` over many subsamples, (epsilon, delta)-DP.

For a function ``f`` with a *discrete* output (a label, a selected feature, a rounded value):

1. ``q = epsilon/(32 ln(1/delta))``, ``m = ln(n/delta)/q²``;
2. draw ``m`` subsamples, each containing each record independently with probability ``q``, and redraw
   until every record is in at most ``2 m q`` of them;
3. count the values ``f(D_i)``; with the top two counts ``c1 >= c2``, ``d = (c1 - c2)/(4 m q) - 1``;
4. if ``d + Lap(1/epsilon) > ln(1/delta)/epsilon`` return the most frequent value, else ``⊥``.

Implementation (exact, and why it is private)
---------------------------------------------
- The redraw condition is a product of per-record conditions (record ``i``'s membership vector only),
  and the vectors are independent, so "redraw everything until all records are fine" has the same law
  as "redraw each record's vector until it is fine": the latter is what is implemented (records in
  order, dpkit randomness). Each record is thus in at most ``c = floor(2 m q)`` subsamples, and the
  membership vectors of the other records have the same law with or without it: couple them.
- Adding, removing or replacing one record then changes at most ``c`` subsamples, each of which moves
  one vote, so the gap ``G = c1 - c2`` moves by at most ``2c`` (Li's ``d`` has sensitivity
  ``2c/(4mq) <= 1``). If ``G > 2c`` every neighbour has the same unique mode.
- The test is propose-test-release on the integer ``D = G - 2c``: pass iff ``D + Z >= T`` with
  ``Z ~ DLap(2c/epsilon_test)`` (exact) and ``T`` the smallest integer with ``P[Z >= T] <= delta``.
  If ``D <= 0`` it passes with probability ``<= delta``; if ``D >= 1`` the mode is the same for every
  neighbour and the pass probability changes by at most ``e^{epsilon_test}``. Hence
  ``(epsilon, delta)``-DP. Li's continuous test ``d + Lap(1/epsilon) > ln(1/delta)/epsilon`` is the
  same test in units of ``4mq`` (it passes an unstable input with probability ``delta/2``).
- ``q`` is rounded down to a multiple of ``2^-62`` (exact Bernoulli draws from 62-bit words); ``q``
  and ``m`` only affect utility, never privacy.

``m`` depends on ``n``, which is private under add/remove: the caller gives a public ``n_bound`` (or
``subsamples`` directly); without either, ``n`` comes from a noisy count paid from ``count_share`` of
epsilon (and ``m`` is clamped into ``[ceil(1/(2q)), max_subsamples]``). Under replace ``n`` is public.

Erratum (Li et al. §8.3): the worked example says ``q = epsilon/(64 ln(1/delta)) ≈ 0.0011`` for
``epsilon = 1``, ``delta = 1e-6``, while Algorithm 20 uses ``32``: ``q ≈ 0.0023`` (:func:`a_samp_rate`).
Either way ``m = ln(n/delta)/q²`` is in the millions (5.4e6 for ``n = 1e6``), each subsample holds about
0.2% of the data, and ``f`` must return the same value on almost all of them: the mechanism needs
absurd stability and is impractical at real sizes. Calls are refused (before any charge) when ``m``
exceeds ``max_subsamples`` or ``n_bound * m`` exceeds ``max_work`` membership draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidParameter, WrongType
from dpkit.core.neighbours import Replace
from dpkit.core.privacy import ApproxDP
from dpkit.mechanisms import Release
from dpkit.mechanisms.contract import Outcome, Plan, run
from dpkit.noise.source import RandomSource
from dpkit.stability import _util
from dpkit.stability.sample_and_aggregate import records

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpkit.core.accountant import Accountant
    from dpkit.core.neighbours import Neighbours

__all__ = ["a_samp", "a_samp_rate", "a_samp_subsamples"]

_Q_BITS = 62
_CHUNK_WORDS = 1 << 22


def a_samp_rate(epsilon: float, delta: float, *, constant: float = 32.0) -> float:
    """Smith & Thakurta's sampling rate ``q = epsilon/(constant ln(1/delta))`` (Li Alg 20: ``constant = 32``).

    >>> round(a_samp_rate(1.0, 1e-6), 4), round(a_samp_rate(1.0, 1e-6, constant=64), 4)  # Li's text: 0.0011
    (0.0023, 0.0011)
    """
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    c = check.positive("constant", constant)
    return eps / (c * math.log(1.0 / dlt))


@check.numeric_guard("rate")
def a_samp_subsamples(n: int, rate: float, delta: float) -> int:
    """``m = ceil(ln(n/delta)/q²)`` (Li Alg 20) for a public ``n``.

    >>> a_samp_subsamples(10**6, a_samp_rate(1.0, 1e-6), 1e-6)
    5400461
    """
    n = check.integer("n", n, minimum=1)
    q = check.probability("rate", rate)
    dlt = _util.approx_delta(delta)
    return math.ceil(math.log(n / dlt) / (q * q))


def _q_units(q: float) -> int:
    if not 0.0 <= q <= 1.0:  # the default rate epsilon/(32 ln(1/delta)) exceeds 1 for a huge epsilon
        raise InvalidParameter("epsilon", "too large for subsampling: the sampling rate exceeds 1 (pass rate)")
    return math.floor(q * 2.0**_Q_BITS)


def _memberships(n: int, m: int, q_units: int, cap: int, rng: RandomSource) -> np.ndarray:
    """``n x m`` membership matrix: Bernoulli(q_units/2^62) entries, each row redrawn until it has
    ``<= cap`` ones (rows in record order)."""
    out = np.zeros((n, m), dtype=bool)
    threshold = np.uint64(q_units)
    rows_per_chunk = max(1, _CHUNK_WORDS // max(m, 1))
    for start in range(0, n, rows_per_chunk):
        stop = min(n, start + rows_per_chunk)
        todo = np.arange(start, stop)
        while todo.size:
            words = rng.uint64(todo.size * m).reshape(todo.size, m) >> np.uint64(64 - _Q_BITS)
            rows = words < threshold
            ok = rows.sum(axis=1) <= cap
            out[todo[ok]] = rows[ok]
            todo = todo[~ok]
    return out


def _key(v: Any) -> Hashable:
    if isinstance(v, np.generic):
        v = v.item()
    try:
        hash(v)
    except TypeError:
        raise WrongType("func", "a callable returning a hashable (discrete) value") from None
    return v


def a_samp(values: ArrayLike, func: Callable[[np.ndarray], Hashable], epsilon: float, delta: float, *,
           n_bound: int | None = None, rate: float | None = None, subsamples: int | None = None,
           max_subsamples: int = 100_000, max_work: int = 50_000_000, count_share: float = 0.1,
           neighbours: Neighbours | None = None, accountant: Accountant | None = None, rng: RandomSource | None = None,
           nan_policy: str = "raise", description: str = "") -> Release:
    """A_samp: the most frequent value of ``func`` over random subsamples, if it is stable; (epsilon, delta)-DP.

    Parameters
    ----------
    values:
        1-D data or a 2-D array of record rows.
    func:
        subsample -> a hashable value (it sees private subsamples; it should accept an empty one; an
        unhashable result raises ``WrongType`` after the charge, which then stays spent).
    epsilon, delta:
        The total privacy parameters.
    n_bound:
        A public bound on ``n`` for the subsample count.
    rate:
        The public sampling rate ``q`` (default :func:`a_samp_rate`).
    subsamples:
        The public ``m``; else ``ceil(ln(n_bound/delta)/q²)`` from the public ``n_bound``; else (add/remove)
        from a noisy count paid from ``count_share`` of epsilon; under replace from the public ``n``.
    max_subsamples, max_work:
        Public caps on ``m`` and on the ``n m`` membership draws.
    count_share:
        The share of ``epsilon`` for the noisy count.
    neighbours, accountant, rng, nan_policy, description:
        Add/remove (default) or replace; privacy units are refused. The accountant charged, the random source,
        the missing-value policy, the receipt's note.

    Guarantee
    ---------
    ``(epsilon, delta)``-DP under add/remove (default) or replace (Smith & Thakurta 2013, Li Alg 20; module
    docstring): each record is in at most ``c`` subsamples, so the gap ``G - 2c`` has sensitivity ``2c``; the
    test on it is a PTR step (an unstable input passes with probability ``<= delta``), composed with the noisy
    count.

    Cost
    ----
    ``ApproxDP(epsilon, delta)``, charged once before any randomness (count + test); it stays spent when the
    result is ``⊥``.

    Output law
    ----------
    Memberships are Bernoulli(``q``) (``q`` rounded down to a multiple of ``2^-62``), each record's row redrawn
    until it is in ``<= c = floor(2 m q)`` subsamples; the gap is tested with exact discrete Laplace noise of
    scale ``2c/epsilon_test`` against the certified threshold. ``Release.value`` is the mode of ``func`` over
    the subsamples, or ``None`` (``⊥``) when the test fails; ``parts`` has ``passed``, ``noisy_gap`` (``G -
    2c`` plus the test noise), ``threshold``, ``subsamples``, ``rate``, ``cap`` (``c``) and ``noisy_count``
    (when counted).

    Error
    -----
    Accuracy (Smith & Thakurta): if ``f`` is ``q``-subsampling stable (``f(sub) = f(data)`` with probability
    ``>= 3/4`` on a ``q``-subsample), the release is ``f(data)`` with probability ``>= 1 - 3 delta``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpkit.noise import deterministic_source
    >>> x = np.ones(1000)
    >>> r = a_samp(x, lambda s: int(s.size > 0 and s.mean() > 0.5), 1.0, 1e-3, rate=0.01, subsamples=300,
    ...            rng=deterministic_source(0))
    >>> r.value, r.parts["passed"]
    (1, True)
    """
    plan = _a_samp_plan(values, func, epsilon, delta, n_bound, rate, subsamples, max_subsamples, max_work,
                        count_share, neighbours, accountant, nan_policy)
    return run(plan, accountant=accountant, rng=rng, description=description)


def _a_samp_plan(values: Any, func: Any, epsilon: Any, delta: Any, n_bound: Any, rate: Any, subsamples: Any,
                 max_subsamples: Any, max_work: Any, count_share: Any, neighbours: Neighbours | None,
                 accountant: Accountant | None, nan_policy: Any) -> Plan:
    """The validated plan of :func:`a_samp` (nothing drawn or charged)."""
    nb = _util.relation(neighbours, accountant, "a_samp")
    func = _util.check_callable("func", func)
    data = records(values, nan_policy)
    eps = check.epsilon(epsilon)
    dlt = _util.approx_delta(delta)
    max_subsamples = check.integer("max_subsamples", max_subsamples, minimum=1)
    max_work = check.integer("max_work", max_work, minimum=1)
    n = int(data.shape[0])
    if n_bound is not None:
        n_bound = check.integer("n_bound", n_bound, minimum=1)
    if subsamples is not None:
        subsamples = check.integer("subsamples", subsamples, minimum=1)
    replace = isinstance(nb, Replace)
    need_count = subsamples is None and n_bound is None and not replace
    if need_count:
        cshare = _util.share("count_share", count_share)
        eps_count, eps_test = _exact.split_budget(eps, (cshare, 1.0 - cshare), name="count_share", total_name="epsilon")
    else:
        eps_count, eps_test = None, eps
    q = check.probability("rate", rate) if rate is not None else a_samp_rate(eps_test, dlt)
    q_units = _q_units(q)
    if q_units < 1:
        raise InvalidParameter("rate", "too small (below 2^-62)")
    q = q_units / 2.0**_Q_BITS
    if subsamples is not None:
        m: int | None = subsamples
    elif n_bound is not None:
        m = a_samp_subsamples(n_bound, q, dlt)
    elif replace:
        m = a_samp_subsamples(max(n, 1), q, dlt)
    else:
        m = None
    if m is not None:
        _check_m(m, q, max_subsamples)
        work_n = n_bound if n_bound is not None else (n if replace else None)
        if work_n is not None and work_n * m > max_work:
            raise InvalidParameter("max_work", "n_bound * subsamples membership draws exceed max_work: A_samp is "
                                   "impractical at this size (raise max_work to insist)")
    if m is None and _cap(min(max_subsamples, math.ceil(1.0 / (2.0 * q))), q) < 1:
        # the subsample count drawn after the charge is capped by max_subsamples (and max_work): refuse now a
        # cap that would leave 2 * subsamples * rate < 1 then
        raise InvalidParameter("max_subsamples", "too small for this rate: 2 * max_subsamples * rate must be >= 1")
    cap_of = _cap
    params: dict[str, Any] = {"epsilon": eps, "delta": dlt, "rate": q, "subsamples": m, "n_bound": n_bound,
                              "epsilon_test": eps_test, "neighbours": nb.describe()}
    if eps_count is not None:
        params["epsilon_count"] = eps_count
    m_public = m

    def draw(rng: RandomSource) -> Outcome:
        m = m_public
        parts: dict[str, Any] = {}
        if m is None:
            from dpkit.mechanisms import discrete_laplace_plan

            assert eps_count is not None  # m unknown before the draw: a share of epsilon for the count
            noisy = int(discrete_laplace_plan(n, 1, eps_count).sample(rng).value)
            parts["noisy_count"] = noisy
            m = a_samp_subsamples(max(noisy, 1), q, dlt)
            # max_work bounds the membership draws n*m; the released noisy count stands in for n (post-processing)
            m = min(max(m, math.ceil(1.0 / (2.0 * q))), max_subsamples, max(math.ceil(1.0 / (2.0 * q)),
                                                                              max_work // max(noisy, 1)))
        c = cap_of(m, q)
        members = _memberships(n, m, q_units, c, rng).T.copy()
        counts: dict[Hashable, int] = {}
        for i in range(m):
            try:
                key = _key(func(data[members[i]]))
            except DPKitError:
                raise
            except Exception:  # the user's function: its own error text may quote a record
                raise WrongType("func", "a callable returning a hashable value for each subsample (it raised an "
                                        "exception; the charge stands)") from None
            counts[key] = counts.get(key, 0) + 1
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        c1 = ranked[0][1]
        c2 = ranked[1][1] if len(ranked) > 1 else 0
        gap = c1 - c2 - 2 * c
        from dpkit.mechanisms import discrete_laplace_plan, discrete_laplace_scale

        t = discrete_laplace_scale(2 * c, eps_test)
        threshold = _util.dlap_threshold(t, dlt)
        # the geometric mechanism on the gap (sensitivity 2c, epsilon_test): scale t, one exact draw
        noisy_gap = int(discrete_laplace_plan(gap, 2 * c, eps_test).sample(rng).value)
        passed = noisy_gap >= threshold
        parts.update(passed=passed, noisy_gap=noisy_gap, threshold=threshold, subsamples=m, rate=q, cap=c)
        return Outcome(ranked[0][0] if passed else None, parts=parts)

    return Plan(mechanism="a_samp", cost=ApproxDP(eps, dlt), draw=draw, params=params, neighbours=nb)


def _cap(m: int, q: float) -> int:
    """The per-record limit ``c = floor(2 m q)``."""
    return math.floor(2.0 * m * q)


def _check_m(m: int, q: float, max_subsamples: int) -> None:
    if m > max_subsamples:
        raise InvalidParameter("subsamples", "A_samp needs more subsamples than max_subsamples (m = ln(n/delta)/q^2 "
                               "is impractical here; pass subsamples/rate explicitly or raise max_subsamples)")
    if _cap(m, q) < 1:
        raise InvalidParameter("subsamples", "2 * subsamples * rate must be >= 1")
