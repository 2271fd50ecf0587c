"""Statistical privacy auditor: a Clopper–Pearson lower confidence bound on epsilon.

If a mechanism M is (eps, delta)-DP then for every event S and neighbouring D, D'

    P[M(D) in S] <= e^eps · P[M(D') in S] + delta,

so ``eps >= ln((P[M(D) in S] - delta) / P[M(D') in S])``. :func:`audit` runs the mechanism
many times on D and on D', counts how often the output falls in S, and replaces the two
probabilities by one-sided Clopper–Pearson bounds (a lower bound for the numerator, an upper
bound for the denominator). The result is a lower confidence bound on the mechanism's true
epsilon: with probability at least ``confidence`` (over the mechanism's randomness) the true
epsilon is at least ``epsilon_lower_bound``. So if a mechanism really is (eps, delta)-DP, the
audit wrongly *flags* it (bound above the claimed eps) with probability at most
``1 - confidence``, whatever the sample size.

When no event is given, the auditor *searches* for a good one on a first batch of runs
(thresholds ``output <= t`` / ``output >= t`` at many quantiles, and equality with any value
that occurs repeatedly, in both directions D/D' and D'/D), then counts the chosen event on a
**fresh** batch, so the confidence statement stays valid (the search batch is never reused).

An audit can only *refute* a privacy claim, never prove one: not being flagged means only that
this pair of inputs and these events did not reveal a violation at this sample size.

Example
-------
>>> import numpy as np
>>> from dpkit.audit import audit
>>> from dpkit.noise.source import deterministic_source
>>> def half_noise_laplace(data, rng, size):
...     # claims eps = 1 for a sensitivity-1 sum but adds noise for sensitivity 1/2: NOT 1-DP
...     gen = np.random.default_rng(int(rng.uint64(1)[0]))  # rng-ok: a user mechanism under audit
...     return float(np.sum(data)) + gen.laplace(0.0, 0.5, size)
>>> result = audit(half_noise_laplace, [0.0], [1.0], trials=200_000, vectorized=True,
...                claimed_epsilon=1.0, confidence=1 - 1e-7, rng=deterministic_source(1))
>>> result.flagged, round(result.epsilon_lower_bound, 1) > 1.5
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from dpkit.core import _validate as check
from dpkit.core.errors import DPKitError, InvalidData, InvalidParameter, WrongType
from dpkit.noise.source import RandomSource, resolve

__all__ = ["AuditResult", "audit", "clopper_pearson", "epsilon_lower_bound"]


# ---------------------------------------------------------------------------------------------
# Clopper–Pearson
# ---------------------------------------------------------------------------------------------


def _cp_lower(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) lower Clopper–Pearson bounds for k successes out of n."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(all="ignore"):
        lo = stats.beta.ppf(alpha, k, n - k + 1.0)
    return np.where(k <= 0, 0.0, np.nan_to_num(lo, nan=0.0))


def _cp_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """One-sided (1 - alpha) upper Clopper–Pearson bounds for k successes out of n."""
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(all="ignore"):
        hi = stats.beta.ppf(1.0 - alpha, k + 1.0, n - k)
    return np.where(k >= n, 1.0, np.nan_to_num(hi, nan=1.0))


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided exact (Clopper–Pearson) confidence interval for a binomial proportion.

    Each side holds with probability at least ``1 - (1 - confidence) / 2``.

    >>> lo, hi = clopper_pearson(0, 1000, confidence=0.95)
    >>> lo, round(hi, 5)
    (0.0, 0.00368)
    """
    trials = check.integer("trials", trials, minimum=1)
    successes = check.integer("successes", successes, minimum=0)
    if successes > trials:
        raise InvalidParameter("successes", "must be <= trials")
    confidence = check.probability("confidence", confidence)
    alpha = (1.0 - confidence) / 2.0
    return float(_cp_lower(successes, trials, alpha)), float(_cp_upper(successes, trials, alpha))


def _eps_lb(count_num: np.ndarray, count_den: np.ndarray, n: int, alpha_each: float, delta: float) -> np.ndarray:
    p_lo = _cp_lower(count_num, n, alpha_each) - delta
    p_hi = _cp_upper(count_den, n, alpha_each)
    with np.errstate(all="ignore"):
        lb = np.log(np.maximum(p_lo, 0.0)) - np.log(p_hi)
    return np.maximum(np.nan_to_num(lb, nan=0.0, neginf=0.0), 0.0)


def epsilon_lower_bound(count_d: int, count_d_prime: int, trials: int, *, confidence: float = 0.999999,
                        delta: float = 0.0) -> float:
    """The Clopper–Pearson lower confidence bound on epsilon from fixed-event counts.

    ``count_d`` of ``trials`` runs on D and ``count_d_prime`` of ``trials`` runs on D' fell in an
    event S *chosen before these runs*. Returns ``max(0, ln((p_lo(D) - delta) / p_hi(D')))`` where
    each one-sided bound holds with probability ``1 - (1 - confidence) / 2``, so the result is
    below the true epsilon with probability at least ``confidence``. (Only the D/D' direction:
    swap the counts for the other one.)

    >>> round(epsilon_lower_bound(50_000, 10_000, 100_000, confidence=1 - 1e-7), 2)
    1.54
    """
    trials = check.integer("trials", trials, minimum=1)
    for name, c in (("count_d", count_d), ("count_d_prime", count_d_prime)):
        if check.integer(name, c, minimum=0) > trials:
            raise InvalidParameter(name, "must be <= trials")
    confidence = check.probability("confidence", confidence)
    delta = check.delta(delta)
    alpha_each = (1.0 - confidence) / 2.0
    return float(_eps_lb(np.array(count_d), np.array(count_d_prime), trials, alpha_each, delta))


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes:
        epsilon_lower_bound: with probability >= ``confidence`` the mechanism's true epsilon
            (at the claimed delta) is at least this (0 when no violation evidence was found).
        event: a description of the event that was counted.
        direction: ``"D/D'"`` (the event is more likely on D) or ``"D'/D"``.
        counts: ``(count on D, count on D')`` in the evaluation batch.
        trials: runs per input in the evaluation batch.
        search_trials: runs per input spent choosing the event (0 when the event was given).
        confidence, claimed_epsilon, claimed_delta: as passed to :func:`audit`.
        flagged: ``epsilon_lower_bound > claimed_epsilon`` (False when no claim was given).
        details: extra diagnostics: ``p_hat`` (the two observed frequencies) and, after a search,
            ``search_bound`` (the chosen event's bound on the search batch, optimistic by selection).
    """

    epsilon_lower_bound: float
    event: str
    direction: str
    counts: tuple[int, int]
    trials: int
    search_trials: int
    confidence: float
    claimed_epsilon: float | None
    claimed_delta: float
    flagged: bool
    details: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __str__(self) -> str:
        verdict = ""
        if self.claimed_epsilon is not None:
            verdict = (" -> VIOLATION of the claimed epsilon" if self.flagged else
                       " -> no violation found")
        return (f"epsilon >= {self.epsilon_lower_bound:.4g} (confidence {self.confidence:.10g}) from event "
                f"[{self.event}] ({self.direction}), counts D={self.counts[0]}, D'={self.counts[1]} "
                f"of {self.trials} runs each{verdict}")


# ---------------------------------------------------------------------------------------------
# running the mechanism
# ---------------------------------------------------------------------------------------------


def _unwrap(out: Any) -> Any:
    """A dpkit ``Release`` (anything with ``.value`` and ``.mechanism``) becomes its value."""
    if hasattr(out, "value") and hasattr(out, "mechanism") and not isinstance(out, np.ndarray):
        return out.value
    return out


#: At most this many runs per input (each output is kept in memory).
MAX_TRIALS = 10**8


def _run(mechanism: Callable[..., Any], data: Any, n: int, rng: RandomSource, vectorized: bool,
         which: str) -> np.ndarray:
    try:
        return _run_unchecked(mechanism, data, n, rng, vectorized, which)
    except DPKitError:
        raise
    except (MemoryError, RecursionError):
        raise InvalidData("mechanism", f"its outputs could not be collected (on {which})") from None
    except Exception:  # the caller's mechanism failed: its message may hold data, so it is not chained
        raise InvalidData("mechanism", f"raised an error or returned outputs that are not an array (on {which})") \
            from None


def _run_unchecked(mechanism: Callable[..., Any], data: Any, n: int, rng: RandomSource, vectorized: bool,
                   which: str) -> np.ndarray:
    if vectorized:
        out = np.asarray(_unwrap(mechanism(data, rng, size=n)))
        if out.ndim == 0 or out.shape[0] != n:
            raise InvalidData("mechanism", f"a vectorized mechanism must return `size` outputs (on {which})")
    else:
        outs = [_unwrap(mechanism(data, rng)) for _ in range(n)]
        try:
            out = np.asarray(outs)
        except ValueError:
            out = np.empty(n, dtype=object)
            out[:] = [tuple(np.ravel(o)) if np.ndim(o) else o for o in outs]
    if out.dtype.kind in "fc" and not np.all(np.isfinite(out)):
        raise InvalidData("mechanism", f"returned NaN or infinite outputs (on {which})")
    return out


def _event_mask(event: Any, outputs: np.ndarray, which: str) -> np.ndarray:
    fn = event.contains if callable(getattr(event, "contains", None)) else event
    try:
        mask = np.asarray(fn(outputs))
    except DPKitError:
        raise
    except Exception:  # the caller's event failed (its message may hold outputs): not chained
        raise InvalidData("event", f"raised an error on the mechanism's outputs (on {which})") from None
    if mask.dtype != bool:
        raise WrongType("event", "a function returning a bool array (one entry per output)")
    if mask.ndim != 1 or mask.shape[0] != outputs.shape[0]:
        # allow per-coordinate masks only if they reduce to one entry per output
        raise InvalidData("event", f"must return one bool per output (on {which})")
    return mask


def _describe(event: Any) -> str:
    desc = getattr(event, "description", None)
    if isinstance(desc, str):
        return desc
    if hasattr(event, "contains"):
        return str(event)
    return getattr(event, "__name__", None) or repr(event)


# ---------------------------------------------------------------------------------------------
# event search
# ---------------------------------------------------------------------------------------------


@dataclass
class _Candidate:
    description: str
    mask: Callable[[np.ndarray], np.ndarray]


def _numeric_2d(x: np.ndarray) -> np.ndarray | None:
    if x.dtype.kind not in "biuf":
        return None
    return x.reshape(x.shape[0], -1).astype(np.float64)


def _keys(x: np.ndarray) -> list[Any]:
    if x.ndim == 1 and x.dtype != object:
        return x.tolist()
    if x.dtype == object and x.ndim == 1:
        return [o if isinstance(o, (str, bytes, int, float, tuple)) else repr(o) for o in x]
    return [tuple(r) for r in x.reshape(x.shape[0], -1).tolist()]


def _equals(x: np.ndarray, v: Any) -> np.ndarray:
    """Rows of x equal to the key v (vectorised for numeric outputs)."""
    x2 = _numeric_2d(x) if x.dtype != object else None
    if x2 is not None:
        row = np.asarray(v if isinstance(v, tuple) else (v,), dtype=np.float64)
        if row.shape[0] == x2.shape[1]:
            return np.all(x2 == row, axis=1)
    return np.array([k == v for k in _keys(x)], dtype=bool)


def _search(a: np.ndarray, b: np.ndarray, n: int, alpha_each: float, delta: float,
            max_equality: int) -> tuple[_Candidate, str, float]:
    """Choose the event and direction with the best Clopper–Pearson epsilon bound on the search batch."""
    best: tuple[float, _Candidate | None, str] = (-1.0, None, "D/D'")

    def consider(ca: np.ndarray, cb: np.ndarray, make: Callable[[int], _Candidate]) -> None:
        nonlocal best
        for num, den, direction in ((ca, cb, "D/D'"), (cb, ca, "D'/D")):
            lb = _eps_lb(num, den, n, alpha_each, delta)
            # tie-break towards events with more mass in the numerator (a stabler fresh estimate)
            score = lb + 1e-9 * num / n
            i = int(np.argmax(score))
            if best[1] is None or score[i] > best[0]:
                best = (float(score[i]), make(i), direction)

    # equality events (discrete outputs, point masses): values seen at least twice, most frequent first
    vals: list[Any] = []
    a2, b2 = _numeric_2d(a), _numeric_2d(b)
    if a2 is not None and b2 is not None and a2.shape[1] == b2.shape[1]:
        both = np.concatenate([a2, b2])
        if both.shape[1] == 1:  # 1-D unique is much faster than unique over rows
            uniq, inv = np.unique(both[:, 0], return_inverse=True)
            uniq = uniq[:, None]
        else:
            uniq, inv = np.unique(both, axis=0, return_inverse=True)
        inv = inv.ravel()
        ca_all = np.bincount(inv[:n], minlength=uniq.shape[0]).astype(np.float64)
        cb_all = np.bincount(inv[n:], minlength=uniq.shape[0]).astype(np.float64)
        tot = ca_all + cb_all
        keep = np.nonzero(tot >= 2)[0]
        keep = keep[np.argsort(-tot[keep], kind="stable")][:max_equality]
        scalar = a.ndim == 1
        for r in uniq[keep]:
            key = tuple(r.tolist())
            vals.append(key[0] if scalar else key)
        ca, cb = ca_all[keep], cb_all[keep]
        if a.dtype.kind in "biu":  # show integer / bool keys as such
            conv = bool if a.dtype.kind == "b" else int
            vals = [conv(v) if scalar else tuple(conv(t) for t in v) for v in vals]
    else:
        counts: dict[Any, list[int]] = {}
        for k in _keys(a):
            counts.setdefault(k, [0, 0])[0] += 1
        for k in _keys(b):
            counts.setdefault(k, [0, 0])[1] += 1
        repeated = [(k, c) for k, c in counts.items() if c[0] + c[1] >= 2]
        repeated.sort(key=lambda kc: -(kc[1][0] + kc[1][1]))
        repeated = repeated[:max_equality]
        vals = [k for k, _ in repeated]
        ca = np.array([c[0] for _, c in repeated], dtype=np.float64)
        cb = np.array([c[1] for _, c in repeated], dtype=np.float64)
    if vals:

        def make_eq(i: int) -> _Candidate:
            v = vals[i]

            def eq(x: np.ndarray, v: Any = v) -> np.ndarray:
                return _equals(x, v)

            return _Candidate(f"output == {v!r}", eq)

        consider(ca, cb, make_eq)

    # threshold events per numeric coordinate
    if a2 is not None and b2 is not None and a2.shape[1] == b2.shape[1]:
        dims = a2.shape[1]
        shape = a.shape[1:]
        if dims > 64:
            dims = 64  # keep the search bounded; later coordinates can be audited with an explicit event
        m = 2 * n
        tail = np.geomspace(min(0.5, 1.0 / m), 0.5, 120)
        levels = np.unique(np.clip(np.concatenate([tail, 1.0 - tail, np.linspace(0, 1, 201)]), 0.0, 1.0))
        for j in range(dims):
            col_a, col_b = np.sort(a2[:, j]), np.sort(b2[:, j])
            pooled = np.concatenate([col_a, col_b])
            ts = np.unique(np.quantile(pooled, levels, method="inverted_cdf"))
            suffix = f"[{j}]" if a2.shape[1] > 1 else ""
            le_a = np.searchsorted(col_a, ts, side="right").astype(np.float64)
            le_b = np.searchsorted(col_b, ts, side="right").astype(np.float64)
            ge_a = n - np.searchsorted(col_a, ts, side="left").astype(np.float64)
            ge_b = n - np.searchsorted(col_b, ts, side="left").astype(np.float64)

            def make_le(i: int, j: int = j, ts: np.ndarray = ts, suffix: str = suffix) -> _Candidate:
                t = float(ts[i])

                def le(x: np.ndarray, t: float = t, j: int = j) -> np.ndarray:
                    return _numeric_column(_reshape(x, shape), j) <= t

                return _Candidate(f"output{suffix} <= {t!r}", le)

            def make_ge(i: int, j: int = j, ts: np.ndarray = ts, suffix: str = suffix) -> _Candidate:
                t = float(ts[i])

                def ge(x: np.ndarray, t: float = t, j: int = j) -> np.ndarray:
                    return _numeric_column(_reshape(x, shape), j) >= t

                return _Candidate(f"output{suffix} >= {t!r}", ge)

            consider(le_a, le_b, make_le)
            consider(ge_a, ge_b, make_ge)

    if best[1] is None:  # pragma: no cover - every output repeats or is numeric
        raise InvalidData("mechanism", "outputs are neither numeric nor repeated: give an explicit event")
    return best[1], best[2], best[0]


def _numeric_column(x: np.ndarray, j: int) -> np.ndarray:
    """Column ``j`` of the numeric 2-D view of outputs already known to be numeric."""
    arr = _numeric_2d(x)
    if arr is None:  # pragma: no cover - the candidate is only built for numeric outputs
        raise WrongType("mechanism", "numeric outputs")
    return arr[:, j]


def _reshape(x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if x.shape[1:] != shape:
        raise InvalidData("mechanism", "returned outputs of a different shape in the evaluation batch")
    return x


# ---------------------------------------------------------------------------------------------
# the auditor
# ---------------------------------------------------------------------------------------------


def audit(mechanism: Callable[..., Any], d: Any, d_prime: Any, *, trials: int,
          event: Callable[[np.ndarray], np.ndarray] | Any | None = None,
          confidence: float = 0.999999, rng: RandomSource | None = None,
          claimed_epsilon: float | None = None, claimed_delta: float = 0.0,
          vectorized: bool = False, search_trials: int | None = None,
          max_equality_events: int = 1000) -> AuditResult:
    """Audit a mechanism on one pair of neighbouring inputs; return a lower confidence bound on epsilon.

    Args:
        mechanism: ``mechanism(data, rng)`` -> one output, or with ``vectorized=True``
            ``mechanism(data, rng, size=n)`` -> ``n`` independent outputs (an array whose first
            axis has length n). Outputs are numbers, numeric vectors, or hashable values; a dpkit
            ``Release`` is replaced by its ``.value``. ``rng`` is the :class:`RandomSource` passed
            in; use it for all randomness (e.g. ``dpkit.mechanisms.laplace(..., rng=rng)``).
        d, d_prime: the two neighbouring inputs, passed to ``mechanism`` unchanged.
        trials: runs per input used to count the event (the evaluation batch).
        event: ``event(outputs) -> bool array`` (one entry per output), or an event object of
            :mod:`dpkit.audit.exact` (``HalfLine``, ``Interval``, ``Point``, ``FiniteSet``). Both
            directions (D/D' and D'/D) are evaluated, with the error split between them.
            ``None`` (default): search for an event on ``search_trials`` extra runs per input,
            then count it on ``trials`` fresh runs.
        confidence: probability that the returned bound is below the true epsilon (in (0, 1)).
        rng: randomness source handed to the mechanism (default: the secure source).
        claimed_epsilon: the epsilon the mechanism claims; ``flagged`` says whether the bound exceeds it.
        claimed_delta: the claimed delta; the bound then uses ``ln((p_lo(D) - delta) / p_hi(D'))``.
        vectorized: call ``mechanism(data, rng, size=n)`` once instead of n single calls.
        search_trials: runs per input for the event search (default: ``trials``).
        max_equality_events: at most this many "output == v" candidates (the most frequent values).

    Returns:
        :class:`AuditResult`.

    Raises:
        WrongType / InvalidParameter naming the parameter (``trials`` < 1, ``confidence`` outside
        (0, 1), ``claimed_delta`` outside [0, 1), a non-callable ``mechanism``, ...);
        InvalidData("mechanism", ...) when the mechanism returns unusable outputs.

    Example:
        >>> import numpy as np
        >>> from dpkit.audit import audit, HalfLine
        >>> from dpkit.noise.source import deterministic_source
        >>> def laplace_sum(data, rng, size):        # a correct eps = 1 Laplace mechanism
        ...     gen = np.random.default_rng(int(rng.uint64(1)[0]))  # rng-ok: a user mechanism
        ...     return float(np.sum(data)) + gen.laplace(0.0, 1.0, size)
        >>> r = audit(laplace_sum, [0.0], [1.0], trials=100_000, vectorized=True, claimed_epsilon=1.0,
        ...           event=HalfLine(1.0, ">="), rng=deterministic_source(7))
        >>> r.flagged, 0.8 < r.epsilon_lower_bound <= 1.0
        (False, True)
    """
    if not callable(mechanism):
        raise WrongType("mechanism", "a callable mechanism(data, rng) (or mechanism(data, rng, size=n))")
    trials = check.size_limit("trials", trials, MAX_TRIALS, minimum=1)
    confidence = check.probability("confidence", confidence)
    if claimed_epsilon is not None:
        claimed_epsilon = check.nonnegative("claimed_epsilon", claimed_epsilon)
    claimed_delta = check.delta(claimed_delta, "claimed_delta")
    if not isinstance(vectorized, bool):
        raise WrongType("vectorized", "a bool")
    if search_trials is None:
        search_trials = trials
    search_trials = check.size_limit("search_trials", search_trials, MAX_TRIALS, minimum=1)
    max_equality_events = check.size_limit("max_equality_events", max_equality_events, MAX_TRIALS)
    if event is not None and not (callable(event) or callable(getattr(event, "contains", None))):
        raise WrongType("event", "a callable outputs -> bool array, an exact-module event, or None")
    rng = resolve(rng)
    alpha = 1.0 - confidence

    details: dict[str, Any] = {}
    if event is None:
        a = _run(mechanism, d, search_trials, rng, vectorized, "d")
        b = _run(mechanism, d_prime, search_trials, rng, vectorized, "d_prime")
        if a.shape[1:] != b.shape[1:]:
            raise InvalidData("mechanism", "returned outputs of different shapes on d and d_prime")
        cand, direction, search_score = _search(a, b, search_trials, alpha / 2.0, claimed_delta,
                                                max_equality_events)
        details["search_bound"] = search_score
        del a, b
        mask_fn: Callable[[np.ndarray], np.ndarray] = cand.mask
        description = cand.description
        directions = [direction]
        used_search = search_trials
    else:
        contains = getattr(event, "contains", None)
        mask_fn = contains if callable(contains) else event
        description = _describe(event)
        directions = ["D/D'", "D'/D"]
        used_search = 0

    a = _run(mechanism, d, trials, rng, vectorized, "d")
    b = _run(mechanism, d_prime, trials, rng, vectorized, "d_prime")
    ca = int(np.count_nonzero(_event_mask(mask_fn, a, "d")))
    cb = int(np.count_nonzero(_event_mask(mask_fn, b, "d_prime")))
    # Bonferroni: two one-sided bounds per direction evaluated
    alpha_each = alpha / (2.0 * len(directions))
    best_lb, best_dir = -1.0, directions[0]
    for direction in directions:
        num, den = (ca, cb) if direction == "D/D'" else (cb, ca)
        lb = float(_eps_lb(np.array(num), np.array(den), trials, alpha_each, claimed_delta))
        if lb > best_lb:
            best_lb, best_dir = lb, direction
    flagged = claimed_epsilon is not None and best_lb > claimed_epsilon
    details["p_hat"] = (ca / trials, cb / trials)
    return AuditResult(
        epsilon_lower_bound=best_lb,
        event=description,
        direction=best_dir,
        counts=(ca, cb),
        trials=trials,
        search_trials=used_search,
        confidence=confidence,
        claimed_epsilon=claimed_epsilon,
        claimed_delta=claimed_delta,
        flagged=bool(flagged),
        details=details,
    )
