"""Planning a :mod:`dpkit.tables` query: the budget split and the calibration of every statistic (public
quantities only; nothing here reads data or draws randomness).

:func:`calibrate` turns a query and a budget into a :class:`QueryPlan`: the noise family, the cost charged, the
contribution bounds (:class:`dpkit.tables._calib.Bounds`), one :class:`StatPlan` per statistic (its share of the
budget and, from its kind's :meth:`~dpkit.tables.kinds.Kind.calibrate`, its noisy integer vectors with their
sensitivities and scales, or its selection parameters), the partition-selection parameters and the diagnostics'
plan. :func:`plan_frame` describes it (``Session.plan``); :func:`solve` finds the smallest budget meeting
half-width targets (``Session.solve``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.core.privacy import ZCDP, ApproxDP, PureDP
from dpkit.stats.aggregates import IntegerNoise, integer_noise
from dpkit.tables import _calib, _diagnostics
from dpkit.tables._query import Query, Statistic

#: The relative lattice rounding of the per-group selections (2^-20), absorbed in the quantiles' epsilon.
LATTICE_BITS = 20


@dataclass
class Part:
    """One noisy integer vector of a statistic: which engine metric, and its calibrated noise."""

    metric: str  # count | distinct | sum | sumsq
    noise: IntegerNoise

    @property
    def scale(self) -> float:
        """Discrete Laplace ``t`` or discrete Gaussian ``sigma`` (integer units)."""
        return self.noise.scale

    @property
    def l1(self) -> int:
        return self.noise.l1

    @property
    def l2_squared(self) -> int:
        return self.noise.l2_squared


@dataclass
class StatPlan:
    stat: Statistic
    share: float  # epsilon (laplace) or rho (gaussian)
    parts: list[Part] = field(default_factory=list)
    em_epsilon: float = 0.0  # quantiles: epsilon of each per-group, per-level selection
    em_sensitivity: list[Fraction] = field(default_factory=list)
    bound_epsilon: float = 0.0  # bounds=None: epsilon of each of the two bound selections
    bound_sensitivity: Fraction = Fraction(0)
    rest_share: float = 0.0  # bounds=None: the share left for the statistic itself
    found: tuple[float, float] | None = None  # bounds=None: the privately chosen bounds


@dataclass
class QueryPlan:
    query: Query
    noise: str  # laplace | gaussian
    cost: Any
    bounds: _calib.Bounds
    stats: list[StatPlan]
    selection: dict[str, Any] | None
    diagnostics: Any = None  # _diagnostics.DiagPlan when asked for (Query.diagnostics)


@dataclass(frozen=True)
class Calibration:
    """What a kind's :meth:`~dpkit.tables.kinds.Kind.calibrate` needs: the noise family, the contribution
    bounds, the noisy-vector factory and the budget conversions."""

    noise: str
    bounds: _calib.Bounds
    lattice_bits: int = LATTICE_BITS

    def part(self, metric: str, l1: int, l2_squared: int, share: float) -> Part:
        """A noisy integer vector of the engine metric ``metric`` with these sensitivities and budget share."""
        return Part(metric, integer_noise(self.noise, l1, l2_squared, share))

    def epsilon(self, share: float) -> float:
        """The pure ε of a selection step paid from ``share`` (ε itself, or an ε whose ε-DP implies ``share``-zCDP)."""
        return share if self.noise == "laplace" else eps_of_rho(share)


def mechanism_text(noise: str, scale: float) -> str:
    """``discrete_laplace(scale=...)`` / ``discrete_gaussian(sigma=...)``: the ``mechanism`` text of a noisy vector."""
    return f"discrete_laplace(scale={scale:.6g})" if noise == "laplace" else f"discrete_gaussian(sigma={scale:.6g})"


def check_budget(budget: Any) -> Any:
    if budget is None:
        raise InvalidParameter("budget", "required: PureDP(eps), ZCDP(rho) or ApproxDP(eps, delta)")
    if not isinstance(budget, (PureDP, ZCDP, ApproxDP)):
        raise WrongType("budget", "PureDP, ZCDP or ApproxDP")
    return budget


def eps_of_rho(rho: float) -> float:
    """An epsilon (rounded down) whose pure epsilon-DP implies rho-zCDP: ``epsilon = sqrt(2 rho)``."""
    return _exact.float_at_most(Fraction(math.sqrt(2 * rho)) * (1 - Fraction(1, 2**40)))


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-10 relative, rounded down) with rho-zCDP => (epsilon, delta)-DP (CKS 2020)."""
    from dpkit.core.privacy import zcdp_to_approx_delta

    def too_big(rho: float) -> bool:  # the conversion's delta exceeds the target: not (epsilon, delta)-DP
        return zcdp_to_approx_delta(rho, epsilon) > delta

    hi = _exact.expand(too_big, max(epsilon, 1.0), 2.0, limit=math.inf)
    assert hi is not None  # the conversion's delta tends to 1 as rho grows
    lo, _ = _exact.bisect(too_big, 0.0, hi, rel_tol=1e-10, max_iter=80)
    if not lo > 0:
        raise InvalidParameter("budget", "too small for Gaussian noise")
    return lo


def contribution_bounds(unit: Any, q: Query) -> _calib.Bounds:
    """``R``, ``G``, ``P`` enforced for the query (:mod:`dpkit.tables._calib`)."""
    if unit is None:
        return _calib.Bounds(1, 1, 1)
    r = unit.max_rows
    if not q.by:
        return _calib.Bounds(r, 1, r)
    g = min(unit.max_groups, r) if unit.max_groups is not None else r
    return _calib.Bounds(r, g, min(unit.rows_per_group, r))


def stat_plan(stat: Statistic, share: float, noise: str, b: _calib.Bounds) -> StatPlan:
    """The calibration of one statistic for its budget ``share`` (its kind's ``calibrate``)."""
    sp = StatPlan(stat, share)
    if stat.auto_bounds:
        # a third of the share finds (lo, hi): two exponential-mechanism quantiles (1% and 99%) over the
        # gaps of a public ladder, computed on all bounded rows (a unit moves them by <= L rows)
        b_share, sp.rest_share = _exact.split_budget(share, [1, 2], name="weight")
        eps_b = b_share if noise == "laplace" else eps_of_rho(b_share)
        sp.bound_epsilon = _exact.split_budget(eps_b, [1, 1], name="weight")[0]
        sp.bound_sensitivity = b.l1 * Fraction(99, 100)
        if not sp.bound_epsilon > 0:
            raise InvalidParameter("budget", "too small to find bounds")
        return sp
    stat.kind_class.calibrate(sp, Calibration(noise, b))
    return sp


def calibrate(q: Query, budget: Any, noise: str | None, unit: Any) -> QueryPlan:
    """The plan of ``q`` under ``budget`` (``noise``: None for the budget's default family)."""
    budget = check_budget(budget)
    zcdp_only = [st for st in q.statistics if st.kind_class.needs_zcdp(st)]
    if noise is None:
        approx = isinstance(budget, ApproxDP) and budget.delta > 0
        noise = "gaussian" if isinstance(budget, ZCDP) or (zcdp_only and approx) else "laplace"
    if noise not in ("laplace", "gaussian"):
        raise InvalidParameter("noise", "must be None, 'laplace' or 'gaussian'")
    if zcdp_only and noise != "gaussian":
        raise InvalidParameter("budget", f"{zcdp_only[0].label} is a zCDP mechanism: give a ZCDP(rho) budget, or "
                                         "an ApproxDP(epsilon, delta) budget with delta > 0 (spent as rho-zCDP)")
    private = q.keys == "private"
    if private and not (isinstance(budget, ApproxDP) and budget.delta > 0):
        raise InvalidParameter("keys", "private keys (partition selection) need an ApproxDP budget with delta > 0")
    delta_sel = 0.0
    if isinstance(budget, ZCDP):
        if noise != "gaussian":
            raise InvalidParameter("noise", "a ZCDP budget takes Gaussian noise")
        total = budget.rho
    elif noise == "laplace":
        total = budget.epsilon
    else:  # Gaussian noise under an (epsilon, delta) budget: rho-zCDP converted, delta split with selection
        if not (isinstance(budget, ApproxDP) and budget.delta > 0):
            raise InvalidParameter("noise", "Gaussian noise needs a ZCDP budget or an ApproxDP budget, delta > 0")
        delta_sel = budget.delta / 2 if private else 0.0
        total = rho_for(budget.epsilon, budget.delta - delta_sel)
    b = contribution_bounds(unit, q)
    diag = q.diagnostics_weight is not None and _diagnostics.applicable(q, unit, b)
    weights = ([s.weight for s in q.statistics] + ([q.diagnostics_weight] if diag else [])
               + ([q.selection_weight] if private else []))
    shares = _exact.split_budget(total, weights, name="weight")
    plans = [stat_plan(stat, share, noise, b) for stat, share in zip(q.statistics, shares, strict=False)]
    selection = None
    if private:
        share_sel = shares[-1]
        if noise == "laplace":
            scale = _calib.laplace_scale(b.groups, share_sel)
            delta_sel = budget.delta
        else:
            scale = _calib.gaussian_sigma(b.groups, share_sel)  # distinct-unit counts: L2² = G
        tau = _calib.selection_threshold(noise, scale, b.groups, delta_sel)
        selection = {"noise": noise, ("epsilon" if noise == "laplace" else "rho"): share_sel,
                     "delta": delta_sel, "scale": scale, "threshold": tau, "groups": b.groups}
    if isinstance(budget, ApproxDP) and (private or noise == "gaussian"):
        cost: Any = ApproxDP(budget.epsilon, budget.delta)
    elif noise == "gaussian":
        cost = ZCDP(budget.rho)
    else:
        cost = PureDP(budget.epsilon)
    dplan = _diagnostics.plan(q, shares[len(q.statistics)], noise, b, unit) if diag else None
    return QueryPlan(q, noise, cost, b, plans, selection, dplan)


def plan_frame(p: QueryPlan, confidence: float) -> Any:
    """``Session.plan``'s frame: one row per statistic (its kind's ``plan_row``), partition selection and the
    diagnostics."""
    import pandas as pd

    return pd.DataFrame(plan_rows(p, confidence))


def plan_rows(p: QueryPlan, confidence: float) -> list[dict[str, Any]]:
    """The rows of :func:`plan_frame` as plain dicts (no pandas needed: ``dpkit plan`` prints these)."""
    share_col = "rho" if p.noise == "gaussian" else "epsilon"
    rows = []
    for sp in p.stats:
        st = sp.stat
        if st.auto_bounds:
            rows.append({"query": p.query.name, "statistic": st.kind, "column": st.column,
                         "mechanism": f"exponential bounds (epsilon={sp.bound_epsilon:.6g} each) + discrete_{p.noise}",
                         share_col: sp.share, "scale": float("nan"), "half_width_95": float("nan")})
            continue
        r = st.kind_class.plan_row(sp, p.noise, confidence)
        rows.append({"query": p.query.name, "statistic": st.kind, "column": r["column"], "mechanism": r["mechanism"],
                     share_col: sp.share, "scale": r["scale"], "half_width_95": r["half_width_95"]})
    if p.selection is not None:
        sel = p.selection
        rows.append({"query": p.query.name, "statistic": "partition_selection", "column": ",".join(p.query.by),
                     "mechanism": f"thresholded_{mechanism_text(sel['noise'], sel['scale'])[:-1]}, "
                                  f"threshold={sel['threshold']})",
                     share_col: sel.get(share_col, float("nan")), "scale": sel["scale"],
                     "half_width_95": float("nan")})
    rows.extend(_diagnostics.plan_rows(p, share_col, confidence))
    return rows


# -------------------------------------------------------------------------------------------------------------
# solve
# -------------------------------------------------------------------------------------------------------------
@dataclass
class Solution:
    """What :meth:`Session.solve` found: the total ``budget``, one budget per query (``budgets``), the queries
    re-weighted so that ``release(queries[i], budget=budgets[i])`` gives every statistic its share
    (``queries``), and the per-statistic ``split`` (a DataFrame)."""

    budget: Any
    budgets: list[Any]
    queries: list[Query]
    split: Any


def min_share(st: Statistic, target: float, noise: str, b: _calib.Bounds, conf: float) -> float:
    """The smallest share whose half-width (value units, one cell) is at most ``target`` (geometric bisection
    on the release's own calibration)."""
    sp0 = stat_plan(st, 1.0, noise, b)
    part = sp0.parts[0]
    g = st.granularity if part.metric == "sum" and st.granularity is not None else 1.0
    h = math.floor(target / g + 1e-12)
    if h < 0:
        raise InvalidParameter("targets", "too small")

    def ok(share: float) -> bool:
        try:
            p = stat_plan(st, share, noise, b).parts[0]
        except InvalidParameter:
            return False
        return p.noise.halfwidth(conf) <= h

    hi = _exact.expand(ok, 1.0, 4.0, limit=1e12)
    if hi is None:
        raise InvalidParameter("targets", "unreachable half-width")
    lo = _exact.expand(lambda x: not ok(x), 1e-12, 0.25, limit=1e-300)
    if lo is None:  # pragma: no cover - ok all the way down: the first ladder point below 1e-300
        lo = 1e-12
        while lo >= 1e-300:
            lo *= 0.25
    _, hi = _exact.bisect(ok, lo, hi, rel_tol=0.0, max_iter=200, geometric=True)
    return hi


def solve(session: Any, queries: Any, targets: Mapping[str, float], confidence: float) -> Solution:
    """``Session.solve`` (see there)."""
    import pandas as pd

    conf = check.probability("confidence", confidence)
    if isinstance(queries, Query):
        queries = [queries]
    if not isinstance(queries, Sequence) or not queries:
        raise WrongType("queries", "a query or a list of queries")
    qs = [session._check_query(q) for q in queries]
    if not isinstance(targets, Mapping) or not targets:
        raise WrongType("targets", "a non-empty mapping label -> half-width")
    tg = {}
    for k, v in targets.items():
        if not isinstance(k, str):
            raise WrongType("targets", "string labels")
        tg[k] = check.positive("targets", v)
    sb = session.accountant.budget
    unit = session.unit
    noise = "gaussian" if isinstance(sb, ZCDP) else "laplace"
    used: set[str] = set()
    found: list[list[float | None]] = []
    for q in qs:
        b = contribution_bounds(unit, q)
        row: list[float | None] = []
        for st in q.statistics:
            key = f"{q.name}:{st.label}" if f"{q.name}:{st.label}" in tg else st.label
            if key not in tg:
                row.append(None)
                continue
            used.add(key)
            if not st.kind_class.fixed_halfwidth or st.auto_bounds:
                raise InvalidParameter("targets", f"{st.label} has no data-independent half-width")
            row.append(min_share(st, tg[key], noise, b, conf) * (1 + 1e-9))
        found.append(row)
    unused = set(tg) - used
    if unused:
        raise InvalidParameter("targets", f"no statistic matches {sorted(unused)[0]!r}")
    rates = [s / st.weight for q, row in zip(qs, found, strict=True) for st, s in zip(q.statistics, row,
                                                                                     strict=True) if s]
    if not rates:
        raise InvalidParameter("targets", "no statistic was targeted")
    rate = min(rates)
    out_q: list[Query] = []
    budgets: list[Any] = []
    split_rows: list[dict[str, Any]] = []
    total = 0.0
    for q, row in zip(qs, found, strict=True):
        stats = []
        for st, s in zip(q.statistics, row, strict=True):
            share = s if s is not None else st.weight * rate
            stats.append(replace(st, weight=share))
            split_rows.append({"query": q.name, "statistic": st.kind, "column": st.column,
                               "label": st.label, "target": tg.get(f"{q.name}:{st.label}", tg.get(st.label)),
                               ("rho" if noise == "gaussian" else "epsilon"): share})
        nq = replace(q, statistics=tuple(stats))
        qtotal = sum(st.weight for st in stats)
        if q.keys == "private":
            nq = replace(nq, selection_weight=q.selection_weight * rate)
            qtotal += nq.selection_weight
        if q.diagnostics_weight is not None and _diagnostics.applicable(q, unit, contribution_bounds(unit, q)):
            nq = replace(nq, diagnostics_weight=q.diagnostics_weight * rate)
            qtotal += nq.diagnostics_weight
        total += qtotal
        out_q.append(nq)
        if noise == "gaussian":
            budgets.append(ZCDP(qtotal))
        elif q.keys == "private":
            if not isinstance(sb, ApproxDP):
                raise InvalidParameter("keys", "private keys need an ApproxDP session budget")
            budgets.append(ApproxDP(qtotal, sb.delta))
        else:
            budgets.append(PureDP(qtotal))
    if noise == "gaussian":
        tb: Any = ZCDP(total)
    elif any(isinstance(b, ApproxDP) for b in budgets):
        tb = ApproxDP(total, sum(b.delta for b in budgets if isinstance(b, ApproxDP)))
    else:
        tb = PureDP(total)
    return Solution(tb, budgets, out_q, pd.DataFrame(split_rows))
