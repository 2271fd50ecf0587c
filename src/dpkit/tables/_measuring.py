"""Measuring a :mod:`dpkit.tables` query: the DP steps on the exact aggregates, after the one charge.

Every random draw of a release happens here, in a fixed order: the salt of contribution bounding (drawn by
``Session.release``), the privately found bounds (:func:`find_bounds`, during the aggregation), the partition
selection (:func:`released_groups`), then each statistic in query order (its kind's
:meth:`~dpkit.tables.kinds.Kind.measure`, through the public plan builders of :mod:`dpkit.stats.aggregates`
drawn with :meth:`~dpkit.mechanisms.contract.Plan.sample`: the query's cost, charged once, covers them), then the
diagnostics.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.mechanisms.contract import Outcome, Plan
from dpkit.stats.aggregates import bucket_quantile_plan
from dpkit.tables import _diagnostics
from dpkit.tables._query import Statistic, default_granularity
from dpkit.tables._results import Rows


def py(v: Any) -> Any:
    """A numpy scalar as the Python value (group keys, bins)."""
    return v.item() if isinstance(v, np.generic) else v


def sort_key(k: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((type(v).__name__, v) for v in k)


def find_bounds(s: Any, p: Any, t: Any) -> None:
    """``bounds=None``: choose ``(lo, hi)`` privately, then calibrate the statistic with them.

    Every value is mapped to its gap of the public ladder ``c_0 < ... < c_{K-1}``: for ``hi`` the gaps
    ``(-inf, c_0], (c_0, c_1], ..., (c_{K-2}, +inf)`` (``hi`` = the upper end ``c_j`` of gap ``j``), for ``lo``
    the gaps ``(-inf, c_1), [c_1, c_2), ..., [c_{K-1}, +inf)`` (``lo`` = ``c_j``, the lower end of gap ``j``,
    gap 0 reaching down to -inf). The gap counts come from one engine pass, and the exponential mechanism
    picks the gap holding the 1% quantile (``lo``) and the one holding the 99% quantile (``hi``), each with the
    rank quality of :mod:`dpkit.stats.order_statistics` (``Δ = 0.99 L``) at half the bound share
    (:func:`dpkit.stats.aggregates.bucket_quantile_plan`). The chosen bounds are DP outputs; the statistic is
    then calibrated with them (post-processing)."""
    from dpkit.tables._bounding import float_
    from dpkit.tables._engine import ibis_module
    from dpkit.tables._planning import stat_plan

    ibis = ibis_module()
    for sp in p.stats:
        st = sp.stat
        if not st.auto_bounds:
            continue
        c = st.candidates
        x = float_(t[st.column])
        # upper gaps (c_{j-1}, c_j] for hi; lower gaps [c_{j-1}, c_j) for lo (so that lo can be a value that
        # is attained, e.g. 0 for nonnegative data); both from one aggregate
        up = ibis.cases(*((x <= v, j) for j, v in enumerate(c[:-1])), else_=len(c) - 1)
        down = ibis.cases(*((x < v, j) for j, v in enumerate(c[1:])), else_=len(c) - 1)
        tt = t.filter(x.notnull()).mutate(_dpk_up=up, _dpk_down=down)
        res = s._run(tt.aggregate(by=["_dpk_up", "_dpk_down"], _n=tt.count()))
        picks = []
        for col, q in (("_dpk_down", Fraction(1, 100)), ("_dpk_up", Fraction(99, 100))):
            counts = np.zeros(len(c), dtype=np.int64)
            for j, n in res[[col, "_n"]].itertuples(index=False, name=None):
                counts[int(j)] += int(n)
            plan = bucket_quantile_plan(counts, q, sensitivity=sp.bound_sensitivity, epsilon=sp.bound_epsilon)
            picks.append(int(plan.sample(s._rng).value))
        lo = c[picks[0]]  # lower end of [c_j, c_{j+1}) (gap 0 also holds everything below c_0)
        hi = c[picks[1]]  # upper end of (c_{j-1}, c_j] (the last gap also holds everything above)
        if not lo < hi:
            hi = c[min(c.index(lo) + 1, len(c) - 1)]
            if not lo < hi:
                lo = c[-2]
        integer = p.query.schema[st.column] == "int"
        resolved = replace(st, bounds=(float(lo), float(hi)),
                           granularity=st.granularity or default_granularity((lo, hi), integer))
        new = stat_plan(resolved, sp.rest_share, p.noise, p.bounds)
        sp.stat, sp.parts, sp.found = resolved, new.parts, (float(lo), float(hi))


def released_groups(s: Any, p: Any, main: Any) -> tuple[list[tuple[Any, ...]], dict[tuple[Any, ...], int]]:
    """The groups released (``[()]`` ungrouped, the public keys, or the privately selected keys) and the row
    of each group present in the main aggregate. Private keys: thresholded noisy distinct-unit counts, in a
    canonical key order."""
    q = p.query
    rows = {}
    if q.by:
        keys = [tuple(py(v) for v in r) for r in main[list(q.by)].itertuples(index=False, name=None)]
        rows = {k: i for i, k in enumerate(keys)}
    else:
        rows = {(): 0} if len(main) else {}
    if q.keys is None:
        return [()], rows
    if q.keys != "private":
        return list(q.keys), rows
    cand = sorted(rows, key=sort_key)
    d = np.array([int(main["_d"].iloc[rows[k]]) for k in cand], dtype=np.int64)
    sel = p.selection
    assert sel is not None
    noisy = d + s._noise(sel["noise"], sel["scale"], len(cand))
    return [k for k, v in zip(cand, noisy, strict=True) if v >= sel["threshold"]], rows


class Measure:
    """What a kind's :meth:`~dpkit.tables.kinds.Kind.measure` works with: the released ``groups`` (``ng`` of
    them, ``by`` the group columns), the exact main-pass metrics per released group (:meth:`metric`), its own
    pass (:meth:`extra`), the noise family ``noise``, :meth:`sample` (draw a plan, uncharged: the query's one
    charge covers it) and :meth:`emit` (one result row)."""

    py = staticmethod(py)

    def __init__(self, s: Any, p: Any, raw: dict[str, Any], groups: list[tuple[Any, ...]],
                 rows: dict[tuple[Any, ...], int], out: Rows) -> None:
        self._s = s
        self._raw = raw
        self.plan = p
        self.noise: str = p.noise
        self.by: list[str] = list(p.query.by)
        self.groups = groups
        self.ng = len(groups)
        self._pos = np.array([rows.get(k, -1) for k in groups], dtype=np.int64)
        self._rows = out

    @property
    def rng(self) -> Any:
        return self._s._rng

    def metric(self, name: str) -> np.ndarray:
        """Exact integers per released group (0 for a public key without rows), as Python ints."""
        col = self._raw["main"][name].to_numpy(dtype=object)
        out = np.zeros(self.ng, dtype=object)
        for j in np.flatnonzero(self._pos >= 0):
            v = col[self._pos[j]]
            out[j] = 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
        return out

    def extra(self, i: int) -> Any:
        """The frame of statistic ``i``'s own engine pass."""
        return self._raw["extra"][i]

    def sample(self, plan: Plan) -> Outcome:
        """Draw ``plan`` from the session's source without charging (the query's one charge covers it)."""
        return plan.sample(self.rng)

    @property
    def unit(self) -> Any:
        """The session's privacy unit (None: one row), for a family's ``neighbours=`` argument."""
        return self._s.unit

    def emit(self, st: Statistic, j: int, bin_: str, value: float, lo: float, hi: float, mech: str,
             column: str | None = None, *, postprocessed: bool = False) -> None:
        """One result row of statistic ``st`` for released group ``j`` (``column``: its ``column`` cell, default
        the kind's :meth:`~dpkit.tables.kinds.Kind.column_text`; ``postprocessed``: the value is a
        post-processing of the noisy release, e.g. made consistent with other rows)."""
        self._rows.emit(st, self.groups[j], bin_, value, lo, hi, mech, column, postprocessed=postprocessed)

    def publish(self, st: Statistic, table: Any) -> None:
        """A released table of statistic ``st`` (a DP output, e.g. synthetic records): ``res.attrs["synthetic"]``
        maps the statistic's label to it."""
        self._rows.synthetic[st.label] = table

    def counts(self, sp: Any, exact: np.ndarray) -> None:
        """Noisy counts of one vector (``sp.parts[0]``), one row per group: ``value ± half-width``."""
        from dpkit.stats.aggregates import integers_plan
        from dpkit.tables._planning import mechanism_text

        part = sp.parts[0]
        noisy = self.sample(integers_plan(exact, part.noise)).value
        hw = part.noise.halfwidth()
        for j in range(self.ng):
            self.emit(sp.stat, j, "", noisy[j], noisy[j] - hw, noisy[j] + hw, mechanism_text(self.noise, part.scale))


def measure(s: Any, p: Any, raw: dict[str, Any]) -> Rows:
    """Every noisy row of the query (statistics in order, then the diagnostics)."""
    q = p.query
    groups, rows = released_groups(s, p, raw["main"])
    prefix = {id(sp.stat): f"bounds [{sp.found[0]:g}, {sp.found[1]:g}] by exponential; "
              for sp in p.stats if sp.found is not None}
    out = Rows(q, prefix)
    m = Measure(s, p, raw, groups, rows, out)
    for i, sp in enumerate(p.stats):
        sp.stat.kind_class.measure(i, sp, m)
    out.records.extend(_diagnostics.records(s, p, raw, m.metric, groups))  # opt-in; noise drawn last
    return out
