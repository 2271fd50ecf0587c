"""Attack demonstrations: the linkage attack (a join with auxiliary data) and the differencing attack (two
aggregates that differ by one person), with the differentially private counterpart of the latter.

Near & Abuah ch. 2: removing names is not anonymization. An attacker who holds an auxiliary table with
names and a few quasi-identifiers (a voter list: date of birth, ZIP code, sex) joins it with the
"de-identified" table; every person whose quasi-identifiers match exactly one row is re-identified, and one
matching two rows is narrowed to a coin flip. And releasing only aggregates does not help: ``sum(all)`` minus
``sum(all but Karrie)`` is Karrie's value, however large the groups. Differential privacy bounds what *any*
such attack learns: each answer is ε-DP, the two answers together 2ε-DP, so the attacker's error is that of
two Laplace draws and no test tells a 0 from a 1 with probability above e^{2ε} / (1 + e^{2ε}).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpkit.core.errors import InvalidData, InvalidParameter, WrongType
from dpkit.deid import _data

__all__ = ["Differencing", "Linkage", "differencing_attack", "linkage_attack"]


@dataclass(frozen=True)
class Linkage:
    """The outcome of joining an auxiliary table (people with names) with the data on the keys.

    Per auxiliary person, the number of data rows that match on every key (its *candidates*):
    ``reidentified`` = exactly one (the person's row is found), ``narrowed_to_2``, ``narrowed_3_to_5``,
    ``more_than_5``, ``not_found`` (0; the person is not in the data, or a value differs);
    ``candidates_histogram``: number of candidates -> auxiliary people. Per data record, the number of
    auxiliary identities that match it (the book's "possible identities"): ``records_by_identities``
    (identities -> records) and ``records_unique`` (records with exactly one identity). ``candidates``: the
    candidate count of every auxiliary row, in order (library use; the report shows only counts).
    """

    keys: tuple[str, ...]
    aux_keys: tuple[str, ...]
    data_rows: int
    aux_rows: int
    reidentified: int
    narrowed_to_2: int
    narrowed_3_to_5: int
    more_than_5: int
    not_found: int
    reidentified_share: float
    candidates_histogram: dict[int, int]
    records_by_identities: dict[int, int]
    records_unique: int
    candidates: np.ndarray = field(repr=False)


def _norm_text(a: np.ndarray) -> np.ndarray:
    """Values as text for a join across types (a CSV reader may read ``02139`` as a number in one file and as
    text in another): integral numbers without a decimal point, NULL kept as None."""
    out = np.empty(a.size, dtype=object)
    for i, v in enumerate(a.tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out[i] = None
        elif isinstance(v, float) and v.is_integer():
            out[i] = str(int(v))
        else:
            out[i] = str(v)
    return out


def _date_text(a: np.ndarray) -> np.ndarray:
    """Dates as ISO text: datetime values, and strings that parse as dates (ISO or m/d/Y); other values as text."""
    from dpkit.deid.generalize import _parse_date

    if a.dtype.kind == "M":
        d = a.astype("datetime64[D]")
        return np.array([None if np.isnat(v) else str(v) for v in d], dtype=object)
    out = _norm_text(a)
    for i, v in enumerate(out.tolist()):
        if isinstance(v, str):
            day = _parse_date(v)
            if day is not None:
                out[i] = day.isoformat()
    return out


def _joinable(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    na, nb = a.dtype.kind in "biuf", b.dtype.kind in "biuf"
    if na and nb:
        return a.astype(np.float64) if a.dtype != b.dtype else a, b.astype(np.float64) if a.dtype != b.dtype else b
    if a.dtype.kind == b.dtype.kind == "M":
        return a, b
    if "M" in (a.dtype.kind, b.dtype.kind):  # a reader parsed one side's dates (DuckDB reads 9/7/1967 as a date)
        return _date_text(a), _date_text(b)
    return _norm_text(a), _norm_text(b)


def _hist(x: np.ndarray) -> dict[int, int]:
    if x.size == 0:
        return {}
    s, c = np.unique(x, return_counts=True)
    return {int(a): int(b) for a, b in zip(s, c, strict=True)}


def linkage_attack(data: Any, auxiliary: Any, keys: Any, *, aux_keys: Any = None) -> Linkage:
    """Join ``auxiliary`` (people the attacker can name) with ``data`` on the quasi-identifiers and count who
    is re-identified: the linkage attack of Near & Abuah ch. 2.1, for every auxiliary person at once.

    The join is a group-by of the keys over both tables together (O(n + m) per column plus a sort at most),
    never a row-by-row merge. NULL matches NULL (a missing value is a value the attacker may know). Values of
    different types are compared as text (``2139`` and ``"2139"`` match; a date and a date string match when the
    string is ISO or m/d/Y), so the two tables may come from different readers.

    Parameters
    ----------
    data:
        The "de-identified" table: a pandas DataFrame, a mapping of column name -> 1-D array, a CSV/Parquet
        path, or ``"adult"``.
    auxiliary:
        The attacker's table, in the same forms.
    keys:
        The columns of ``data`` to join on.
    aux_keys:
        The matching columns of ``auxiliary`` in the same order (default: the same names).

    Returns
    -------
    Linkage
        Counts only: how many auxiliary people are re-identified, narrowed to 2, ...

    Examples
    --------
    >>> d = {"dob": ["1/2/60", "1/2/60", "3/4/70"], "zip": [1, 2, 1]}
    >>> aux = {"dob": ["1/2/60", "3/4/70", "5/6/80"]}
    >>> r = linkage_attack(d, aux, ["dob"])
    >>> r.reidentified, r.narrowed_to_2, r.not_found
    (1, 1, 1)
    """
    tab = _data.table(data)
    aux = _data.table(auxiliary, "auxiliary")
    ks = _data.columns_arg(keys, "keys", tab)
    aks = ks if aux_keys is None else _data._columns_arg(aux_keys, "aux_keys", aux.names)
    if aux_keys is None:
        for c in ks:
            if c not in aux.names:
                raise InvalidParameter("aux_keys", f"the auxiliary table has no column {c!r}; name its keys")
    if len(aks) != len(ks):
        raise InvalidParameter("aux_keys", "must name as many columns as keys")
    da = tab.arrays(ks)
    xa = aux.arrays(aks)
    nd = len(da[ks[0]])
    na = len(xa[aks[0]])
    codes, cards = [], []
    for c, ac in zip(ks, aks, strict=True):
        a, b = _joinable(da[c], xa[ac])
        both = np.concatenate([a, b]) if a.dtype == b.dtype else np.concatenate([a.astype(object), b.astype(object)])
        k, u = _data.factorize(both, c, "keys")
        codes.append(k)
        cards.append(u.size)
    ids, groups = _data.combine(codes, cards, nd + na)
    in_data = np.bincount(ids[:nd], minlength=groups)
    in_aux = np.bincount(ids[nd:], minlength=groups)
    cand = in_data[ids[nd:]].astype(np.int64)
    ident = in_aux[ids[:nd]].astype(np.int64)
    return Linkage(keys=tuple(ks), aux_keys=tuple(aks), data_rows=nd, aux_rows=na,
                   reidentified=int((cand == 1).sum()), narrowed_to_2=int((cand == 2).sum()),
                   narrowed_3_to_5=int(((cand >= 3) & (cand <= 5)).sum()), more_than_5=int((cand > 5).sum()),
                   not_found=int((cand == 0).sum()), reidentified_share=float((cand == 1).sum() / na) if na else 0.0,
                   candidates_histogram=_hist(cand), records_by_identities=_hist(ident),
                   records_unique=int((ident == 1).sum()), candidates=cand)


@dataclass(frozen=True)
class Differencing:
    """The differencing attack on one person, without and with differential privacy.

    ``answer_all`` / ``answer_without``: the two exact aggregates (the sum or count over everyone, and over
    everyone but the target); ``revealed`` = their difference; ``target_value``: the target's value (as used by
    the query: clamped to ``bounds`` for a sum); ``exact_error`` = |revealed - target value| (0 up to float
    rounding: the attack recovers the value). With DP each answer is released by dpkit's Laplace mechanism at
    ``epsilon`` (``total_epsilon`` = 2ε for the pair); ``dp_errors``: the attacker's error (noisy difference -
    target value) over ``trials`` independent releases; ``dp_mean_abs_error``, ``dp_error_95`` (95th percentile
    of the absolute error) and, in closed form, ``dp_error_95_exact`` (the difference of two Laplace(b) has
    P(|D| > t) = (1 + t/(2b))·e^{-t/b}). For a count (0/1 values): ``dp_success_rate`` (trials where the rounded
    guess equals the target's bit), ``dp_success_probability`` (its exact value, 1 - (2 + 1/(2b))·e^{-1/(2b)}/4)
    and ``dp_success_bound`` = e^{2ε}/(1 + e^{2ε}), what no attacker can beat from a 2ε-DP pair with a fair prior.
    """

    query: str
    epsilon: float
    total_epsilon: float
    sensitivity: float
    answer_all: float
    answer_without: float
    revealed: float
    target_value: float
    exact_error: float
    trials: int
    dp_mean_abs_error: float
    dp_error_95: float
    dp_error_95_exact: float
    dp_success_rate: float | None
    dp_success_probability: float | None
    dp_success_bound: float | None
    dp_errors: np.ndarray = field(repr=False)


def _diff_tail(t: float, b: float) -> float:
    """P(|Z1 - Z2| > t) for independent Laplace(b)."""
    return (1.0 + t / (2.0 * b)) * math.exp(-t / b)


def differencing_attack(values: Any, target: int, *, epsilon: float = 1.0, bounds: Any = None, trials: int = 1000,
                        rng: Any = None) -> Differencing:
    """Two aggregates that differ by one person reveal that person's value; the same two queries answered with
    dpkit's Laplace mechanism leave the attacker with the noise.

    Without ``bounds`` the values are a 0/1 predicate per row (a count: "how many have income > 50K?" over
    everyone, then over everyone but the target) and each noisy count has sensitivity 1. With ``bounds = (lo,
    hi)`` the query is a sum of the values clamped to the public bounds (Near & Abuah's ``adult['Age'].sum()``
    minus the sum without Karrie), sensitivity max(|lo|, |hi|) under add/remove-one.

    Nothing is charged and no noisy answer is returned: the demonstration repeats the pair of releases
    ``trials`` times (one vectorised :func:`dpkit.laplace` call per query, i.i.d. noise per trial) and keeps only
    the attacker's errors, which are the noise (the data enters only through the lattice rounding of the exact
    answers, at most 2^-20 of the sensitivity). A real deployment answers each query once and charges 2ε.

    Parameters
    ----------
    values:
        1-D numbers, one per row (0/1 or booleans without ``bounds``).
    target:
        The row index of the person attacked.
    epsilon:
        The ε of *each* of the two DP answers (> 0).
    bounds:
        ``(lo, hi)`` public clamping bounds for a sum; None for a count of 0/1 values.
    trials:
        Independent simulated releases (1 .. 1,000,000).
    rng:
        A :class:`~dpkit.noise.RandomSource` (default: the OS CSPRNG).

    Examples
    --------
    >>> from dpkit import deterministic_source
    >>> r = differencing_attack([0, 1, 1, 0, 1], 2, epsilon=1.0, trials=200, rng=deterministic_source(1))  # rng-ok
    >>> r.revealed, r.exact_error, 0.5 < r.dp_success_probability < r.dp_success_bound < 1
    (1.0, 0.0, True)
    """
    from dpkit.core._validate import bounds as _bounds
    from dpkit.mechanisms.laplace import laplace

    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.integer, np.floating)):
        raise WrongType("epsilon", "a positive float")
    try:
        eps = float(epsilon)
    except OverflowError:
        raise InvalidParameter("epsilon", "must be in (0, 100]") from None
    if not (math.isfinite(eps) and 0.0 < eps <= 100.0):
        raise InvalidParameter("epsilon", "must be in (0, 100]")
    nt = _data.int_arg(trials, "trials", 1, 1_000_000)
    a = _data.column_array(values, "values", "values")
    if a.dtype.kind not in "biuf":
        raise WrongType("values", "a 1-D array of numbers")
    x = a.astype(np.float64)
    if x.size < 2:
        raise InvalidData("values", "needs at least two rows")
    if not np.all(np.isfinite(x)):
        raise InvalidData("values", "must be finite (no NaN, None or infinity)")
    t = _data.int_arg(target, "target", 0, x.size - 1)
    if bounds is None:
        if not np.all((x == 0.0) | (x == 1.0)):
            raise InvalidData("values", "a count needs 0/1 values (give bounds for a sum)")
        sens = 1.0
        query = "count"
    else:
        lo, hi = _bounds(bounds, "bounds")
        x = np.clip(x, lo, hi)
        sens = max(abs(lo), abs(hi))
        if sens == 0.0:
            raise InvalidParameter("bounds", "must not both be 0")
        query = "sum"
    if float(np.max(np.abs(x))) * x.size > 1e300:
        raise InvalidData("values", "the sum would overflow")
    total = math.fsum(x.tolist())
    without = math.fsum(np.delete(x, t).tolist())
    revealed = total - without
    value = float(x[t])
    r1 = laplace(np.full(nt, total), sens, eps, rng=rng, description="deid differencing demo: all rows").value
    r2 = laplace(np.full(nt, without), sens, eps, rng=rng,
                 description="deid differencing demo: all but the target").value
    err = np.asarray(r1, dtype=np.float64) - np.asarray(r2, dtype=np.float64) - value
    b = sens / eps
    # P(|D| > t) = 0.05, solved by bisection on the closed form (monotone in t)
    lo_t, hi_t = 0.0, 60.0 * b
    for _ in range(200):
        mid = (lo_t + hi_t) / 2.0
        lo_t, hi_t = (mid, hi_t) if _diff_tail(mid, b) > 0.05 else (lo_t, mid)
    rate = prob = bound = None
    if query == "count":
        guess = (value + err) > 0.5
        rate = float(np.mean(guess == (value == 1.0)))
        prob = 1.0 - (2.0 + 0.5 / b) * math.exp(-0.5 / b) / 4.0
        bound = 1.0 / (1.0 + math.exp(-2.0 * eps))
    return Differencing(query=query, epsilon=eps, total_epsilon=2.0 * eps, sensitivity=sens, answer_all=total,
                        answer_without=without, revealed=revealed, target_value=value,
                        exact_error=abs(revealed - value), trials=nt, dp_mean_abs_error=float(np.mean(np.abs(err))),
                        dp_error_95=float(np.quantile(np.abs(err), 0.95)), dp_error_95_exact=hi_t,
                        dp_success_rate=rate, dp_success_probability=prob, dp_success_bound=bound, dp_errors=err)
