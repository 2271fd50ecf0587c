"""Opt-in DP diagnostics of :mod:`dpkit.tables` and the public "what the interval covers" notes.

A released interval accounts for the **noise only**. It says nothing about how far the statistic dpkit
computed (clamped to the bounds, after contribution bounding, filters, public keys / bins and dropped missing
values) is from the plain statistic of the raw table. :func:`coverage` lists, from public parameters only,
which of those effects apply to a query; the diagnostics below estimate their size with DP, paid from the
query's own budget (``Query.diagnostics(weight=...)``: one more share of the one charge, shown by ``plan``).

Diagnostics (rows of the result frame with ``statistic = "diagnostic"``; ``bin`` names the kind)
------------------------------------------------------------------------------------------------
``clamped_low`` / ``clamped_high`` (``column`` = the bounded column, one pair per group and per distinct
    ``(column, bounds)`` of a bounded statistic: a sum, mean, variance or quantile, or any kind with
    ``Kind.bounded``): the number of kept rows (after contribution
    bounding) whose value is ``< lo`` / ``> hi`` (NaN and NULL values count in neither).
``dropped_rows`` (user privacy unit only; one number for the whole query, ``group = ""``): ``Σ_u min(d_u, R)``
    where ``d_u`` is the number of rows of unit ``u`` (after filters and the public-key restriction) removed
    by contribution bounding and ``R = max_rows``. At most ``R`` rows are counted per unit, so it is a lower
    bound on the rows dropped (exact when no unit loses more than ``R`` rows).
``dropped_groups`` (user unit, grouped query, when ``max_groups`` applies, i.e. ``G < R``):
    ``Σ_u min(max(n_u - G, 0), G)`` where ``n_u`` is the number of groups unit ``u`` has rows in; the
    ``max(n_u - G, 0)`` groups above ``G`` are the ones the engine's ``dense_rank < G`` step drops. At most
    ``G`` groups are counted per unit.

Sensitivities (add/remove one privacy unit; ``L``, ``L2²``: the count's, :mod:`dpkit.tables._calib`)
-----------------------------------------------------------------------------------------------------
Contribution bounding chooses among a unit's own rows only (keyed hash of the unit's rows and a salt), so
adding or removing unit ``u`` leaves every other unit's kept rows, ``d_v`` and ``n_v`` unchanged.

- Clamped pair: in group ``g`` unit ``u`` keeps ``c_g`` rows (``Σ c_g <= R``, ``c_g <= P``, at most ``G``
  groups); ``a_g`` of them are below ``lo`` and ``b_g`` above ``hi``, disjointly, so ``a_g + b_g <= c_g``.
  The vector ``(low_g, high_g)_g`` moves by ``Σ (a_g + b_g) <= Σ c_g <= L`` in L1 and ``Σ (a_g² + b_g²) <=
  Σ c_g² <= L2²`` in squared L2: **the same sensitivity as one count vector**, for both halves together.
  Each distinct ``(column, bounds)`` pair is one such vector with its own share.
- ``dropped_rows``: only the term ``min(d_u, R)`` changes: **L1 = L2 = R**. (Without the cap the number of
  dropped rows has no bound: a unit with a million rows adds almost a million.)
- ``dropped_groups``: only ``min(max(n_u - G, 0), G)`` changes: **L1 = L2 = G**.

Noise: discrete Laplace of scale ``L1 / share`` (``PureDP`` / ``ApproxDP`` budgets) or discrete Gaussian with
``sigma² >= L2² / (2 share)`` (zCDP), exactly as the query's counts; the diagnostics share is split equally
over the vectors above. 95% intervals: ``value ± halfwidth`` (noise only, like every interval).

Engine: the clamped counts are extra ``sum(if(x < lo, 1, 0))`` metrics of the query's main aggregate (same
engine pass); the dropped counts need per-unit totals before and after bounding: one more engine query
(a join of two per-unit aggregates).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dpkit.core import _exact
from dpkit.core.errors import InvalidParameter
from dpkit.tables import _calib

__all__ = ["INTERVAL_NOTE", "KINDS", "DiagPart", "DiagPlan", "applicable", "coverage", "plan"]

#: The ``bin`` values of diagnostic rows (``statistic == "diagnostic"``).
KINDS = ("clamped_low", "clamped_high", "dropped_rows", "dropped_groups")
STATISTIC = "diagnostic"

#: What every interval covers (results metadata, report, docs).
INTERVAL_NOTE = (
    "Each 95% interval accounts for the random noise only: the statistic that dpkit computed lies in it in "
    "about 95 of 100 releases. It does NOT cover the effect of clamping values to the bounds, of contribution "
    "bounding (rows or groups dropped per privacy unit), of filters, of rows outside the public keys or bins, "
    "or of missing values dropped; where those apply, the released value estimates the clamped, bounded "
    "statistic, which can be far from the plain statistic of the raw data. The coverage notes say which apply "
    "to each query; opt-in diagnostics estimate how many values were clamped and rows dropped."
)


@dataclass(frozen=True)
class DiagPart:
    """One noisy diagnostic vector: ``clamped`` (a low/high pair per group), ``dropped_rows`` or
    ``dropped_groups`` (one number)."""

    kind: str
    column: str
    stat_index: int  # the statistic whose bounds are used (clamped), else -1
    scale: float
    l1: int
    l2_squared: int


@dataclass
class DiagPlan:
    share: float
    noise: str
    parts: list[DiagPart] = field(default_factory=list)


def _clamped_stats(q: Any) -> list[tuple[int, Any]]:
    """``(index, statistic)`` of the first statistic of each distinct ``(column, bounds)`` (statistics with
    privately found bounds each count apart: their bounds are chosen separately)."""
    seen: set[Any] = set()
    out = []
    for i, st in enumerate(q.statistics):
        if not st.kind_class.bounded:
            continue
        key = (st.column, st.bounds) if st.bounds is not None else (st.column, "auto", i)
        if key in seen:
            continue
        seen.add(key)
        out.append((i, st))
    return out


def _dropped_kinds(q: Any, unit: Any, b: _calib.Bounds) -> list[str]:
    if unit is None:
        return []
    kinds = ["dropped_rows"]
    if q.by and b.groups < b.rows:  # the engine's max_groups step runs (Session._bounded)
        kinds.append("dropped_groups")
    return kinds


def applicable(q: Any, unit: Any, b: _calib.Bounds) -> bool:
    """Whether the query has anything to diagnose (a bounded statistic, or a user privacy unit)."""
    return bool(_clamped_stats(q) or _dropped_kinds(q, unit, b))


def plan(q: Any, share: float, noise: str, b: _calib.Bounds, unit: Any) -> DiagPlan:
    """The diagnostic vectors of ``q`` with their sensitivities and noise scales (module docstring)."""
    clamped = _clamped_stats(q)
    dropped = _dropped_kinds(q, unit, b)
    n = len(clamped) + len(dropped)
    if n == 0:  # pragma: no cover - the session gives no share then
        raise InvalidParameter("diagnostics", "nothing to diagnose")
    shares = _exact.split_budget(share, [1] * n, name="weight") if n > 1 else [share]

    def scale(l1: int, l2sq: int, s: float) -> float:
        return _calib.laplace_scale(l1, s) if noise == "laplace" else _calib.gaussian_sigma(l2sq, s)

    dp = DiagPlan(share, noise)
    for (i, st), s in zip(clamped, shares, strict=False):
        dp.parts.append(DiagPart("clamped", st.column, i, scale(b.l1, b.l2_squared, s), b.l1, b.l2_squared))
    for kind, s in zip(dropped, shares[len(clamped):], strict=True):
        c = b.rows if kind == "dropped_rows" else b.groups
        dp.parts.append(DiagPart(kind, "", -1, scale(c, c * c, s), c, c * c))
    return dp


def _mech(noise: str, scale: float) -> str:
    return f"discrete_laplace(scale={scale:.6g})" if noise == "laplace" else f"discrete_gaussian(sigma={scale:.6g})"


def _what(part: DiagPart, p: Any, b: _calib.Bounds) -> str:
    if part.kind == "clamped":
        lo, hi = p.stats[part.stat_index].stat.bounds
        return f"values outside [{lo:g}, {hi:g}]"
    if part.kind == "dropped_rows":
        return f"rows dropped by contribution bounding, at most {b.rows} counted per unit"
    return f"groups dropped by max_groups, at most {b.groups} counted per unit"


def plan_rows(p: Any, share_col: str, confidence: float) -> list[dict[str, Any]]:
    """``Session.plan``'s rows for the diagnostics (``statistic = "diagnostic"``)."""
    dp = p.diagnostics
    if dp is None:
        return []
    per = dp.share / len(dp.parts)
    rows = []
    for part in dp.parts:
        st = p.stats[part.stat_index].stat if part.kind == "clamped" else None
        label = (f"{part.column} (clamped_low, clamped_high)" if part.kind == "clamped" else f"({part.kind})")
        mech = _mech(dp.noise, part.scale)
        if st is not None and st.bounds is None:
            mech = "bounds found privately; " + mech
        rows.append({"query": p.query.name, "statistic": STATISTIC, "column": label, "mechanism": mech,
                     share_col: per, "scale": part.scale,
                     "half_width_95": float(_calib.halfwidth(dp.noise, part.scale, confidence))})
    return rows


# -------------------------------------------------------------------------------------------------------------
# engine side
# -------------------------------------------------------------------------------------------------------------
def metrics(p: Any, t: Any) -> dict[str, Any]:
    """The clamped counts as extra metrics of the main aggregate over the bounded table ``t`` (same pass)."""
    dp = p.diagnostics
    if dp is None:
        return {}
    from dpkit.tables._bounding import float_ as _float
    from dpkit.tables._engine import ibis_module

    ibis = ibis_module()
    out: dict[str, Any] = {}
    for k, part in enumerate(dp.parts):
        if part.kind != "clamped":
            continue
        lo, hi = p.stats[part.stat_index].stat.bounds  # resolved by now when found privately
        x = _float(t[part.column])
        out[f"_dgl{k}"] = ibis.ifelse(x < lo, 1, 0).sum()  # NULL (and NaN -> NULL) counts in neither
        out[f"_dgh{k}"] = ibis.ifelse(x > hi, 1, 0).sum()
    return out


def dropped(session: Any, p: Any, bounded: Any) -> dict[str, int]:
    """The exact ``dropped_rows`` / ``dropped_groups`` totals (one engine query), ``{}`` if not asked."""
    dp = p.diagnostics
    if dp is None:
        return {}
    kinds = [part.kind for part in dp.parts if part.kind != "clamped"]
    if not kinds:
        return {}
    from dpkit.tables._engine import ibis_module

    ibis = ibis_module()
    q = p.query
    b = p.bounds
    uid = session.unit.column
    pre = session._keyed(q)
    before = pre.group_by(uid).aggregate(_dpk_n=pre.count())
    after = bounded.group_by(uid).aggregate(_dpk_k=bounded.count())
    j = before.join(after, uid, how="left")
    j = j.select(uid, "_dpk_n", _dpk_k=j["_dpk_k"].fill_null(0))
    if "dropped_groups" in kinds:
        pairs = pre.select(uid, *q.by).distinct()
        ng = pairs.group_by(uid).aggregate(_dpk_g=pairs.count())
        j = j.join(ng, uid, how="left")
    d = j["_dpk_n"] - j["_dpk_k"]
    aggs = {"_dpk_rows": ibis.cases((d > b.rows, b.rows), else_=d).sum()}
    if "dropped_groups" in kinds:
        h = j["_dpk_g"].fill_null(0) - b.groups
        aggs["_dpk_groups"] = ibis.cases((h < 0, 0), (h > b.groups, b.groups), else_=h).sum()
    res = session._run(j.aggregate(**aggs))
    out = {}
    for kind, col in (("dropped_rows", "_dpk_rows"), ("dropped_groups", "_dpk_groups")):
        if kind in kinds:
            v = res[col].iloc[0]
            out[kind] = 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
    return out


def records(session: Any, p: Any, raw: dict[str, Any], metric: Any, groups: list[tuple[Any, ...]]) \
        -> list[dict[str, Any]]:
    """The noisy diagnostic rows of the result frame (drawn after every statistic's noise)."""
    dp = p.diagnostics
    if dp is None:
        return []
    q = p.query
    out: list[dict[str, Any]] = []

    def rec(column: str, group: tuple[Any, ...] | None, kind: str, value: int, hw: int, mech: str) -> None:
        r = {"query": q.name, "statistic": STATISTIC, "column": column,
             "group": "" if group is None else ", ".join(f"{c}={v}" for c, v in zip(q.by, group, strict=True)),
             "bin": kind, "value": float(value), "lo": float(value - hw), "hi": float(value + hw),
             "mechanism": mech, "postprocessed": False}
        for i, c in enumerate(q.by):
            r[c] = None if group is None else group[i]
        out.append(r)

    ng = len(groups)
    for k, part in enumerate(dp.parts):
        hw = _calib.halfwidth(dp.noise, part.scale)
        mech = f"{_what(part, p, p.bounds)}; {_mech(dp.noise, part.scale)}"
        if part.kind == "clamped":
            low = metric(f"_dgl{k}") + session._noise(dp.noise, part.scale, ng)
            high = metric(f"_dgh{k}") + session._noise(dp.noise, part.scale, ng)
            for j in range(ng):
                rec(part.column, groups[j], "clamped_low", int(low[j]), hw, mech)
                rec(part.column, groups[j], "clamped_high", int(high[j]), hw, mech)
        else:
            v = raw["diagnostics"][part.kind] + int(session._noise(dp.noise, part.scale, 1)[0])
            rec("", None, part.kind, v, hw, mech)
    return out


# -------------------------------------------------------------------------------------------------------------
# coverage notes (public parameters only)
# -------------------------------------------------------------------------------------------------------------
def coverage(q: Any, unit: Any, nan_policy: str, found: dict[str, tuple[float, float]] | None = None) \
        -> dict[str, Any]:
    """What the intervals of ``q`` do not cover, from public parameters (and privately found bounds, which
    are DP outputs): ``{"interval", "clamped", "bounding", "filtered", "public_keys", "outside_bins",
    "missing_dropped", "notes"}``; ``notes`` are plain sentences for the report."""
    found = found or {}
    clamped = []
    for st in q.statistics:
        if not st.kind_class.bounded:
            continue
        bounds = st.bounds if st.bounds is not None else found.get(st.label)
        clamped.append({"statistic": st.kind, "column": st.column,
                        "bounds": [float(bounds[0]), float(bounds[1])] if bounds is not None else None,
                        "private_bounds": st.bounds is None})
    bounding = None
    if unit is not None:
        bounding = {"column": unit.column, "max_rows": unit.max_rows, "max_groups": unit.max_groups,
                    "max_rows_per_group": unit.max_rows_per_group}
    outside = [st.label for st in q.statistics if st.kind_class.public_bins]
    used = any(st.column or st.columns for st in q.statistics)
    cov = {"interval": "noise only", "clamped": clamped, "bounding": bounding, "filtered": bool(q.filters),
           "public_keys": bool(q.by) and q.keys != "private", "outside_bins": outside,
           "missing_dropped": nan_policy == "omit" and used}
    notes = []
    for c in clamped:
        b = c["bounds"]
        where = f"[{b[0]:g}, {b[1]:g}]" if b is not None else "bounds found privately"
        notes.append(f"{c['statistic']}({c['column']}): values are clamped to {where}"
                     + (" (found privately)" if c["private_bounds"] and b is not None else "")
                     + "; the value estimates the clamped statistic.")
    if bounding is not None:
        lim = [f"max_rows={unit.max_rows}"]
        if unit.max_groups is not None:
            lim.append(f"max_groups={unit.max_groups}")
        if unit.max_rows_per_group is not None:
            lim.append(f"max_rows_per_group={unit.max_rows_per_group}")
        notes.append(f"contribution bounding per {unit.column} ({', '.join(lim)}): rows above these limits were "
                     "dropped before counting, so counts and sums can be lower than in the raw data.")
    if q.filters:
        notes.append("a filter removed rows: the statistics describe the filtered rows.")
    if cov["public_keys"]:
        notes.append("rows whose group key is not among the public keys are not counted.")
    if outside:
        notes.append(f"{', '.join(outside)}: values outside the public bins or domains are not counted.")
    if cov["missing_dropped"]:
        notes.append("missing values (NULL/NaN) were dropped per statistic (nan_policy = omit).")
    cov["notes"] = notes
    return cov
