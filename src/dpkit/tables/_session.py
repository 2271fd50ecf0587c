"""The :class:`Session` of :mod:`dpkit.tables`: plan, solve and release DP queries over a real table.

Guarantee of :meth:`Session.release`
------------------------------------
- Neighbour relation: add/remove one row (``unit=None``), or add/remove all rows of one privacy unit
  (``unit=unit_of(column, max_rows=R, max_groups=G, max_rows_per_group=P)``), enforced in the engine
  before any aggregate (:mod:`dpkit.tables._engine`).
- Definition and cost: the query's ``budget``: ``PureDP(ε)`` (discrete Laplace noise: ε-DP), ``ZCDP(ρ)``
  (discrete Gaussian noise: ρ-zCDP), or ``ApproxDP(ε, δ)`` (discrete Laplace; δ is spent only by private
  partition selection, else the charge is ``PureDP(ε)``). The budget is split over the statistics in
  proportion to their ``weight`` (and ``selection_weight`` for private keys); sequential composition.
- **One charge** of the session's accountant for the whole query, before any aggregate is computed and
  before any random byte is drawn; a refused charge raises and computes nothing. The only data read before
  the charge is one validation pass over the whole source (:meth:`Session.check`): every source column the
  query reads is converted on every row, so that a value that does not parse or a file that is not UTF-8
  fails before the charge (:class:`~dpkit.core.errors.EngineError` naming the column, whatever the
  ``nan_policy``), and under ``nan_policy="raise"`` (and for the unit column always) missing values are
  :class:`~dpkit.core.errors.InvalidData` naming the column, as every dpkit statistic does. Its outcome is
  only pass or a typed refusal; nothing is charged for a refusal. Every engine call is behind the engine
  boundary (:func:`dpkit.tables._engine.guarded`): no engine text, which may quote a record, escapes.
- Sensitivities: :mod:`dpkit.tables._calib` (exact integers on the public granularity lattice).
- Means: noisy clamped sum / noisy count (half the statistic's share each); variance: noisy count, sum
  and sum of squares (a third each). Quantiles: the exponential mechanism per group over ``bins``
  equal-width buckets of the public bounds with the rank quality of :mod:`dpkit.stats.order_statistics`;
  a unit touching ``c_g`` rows of ``r`` groups moves group ``g``'s quality by at most ``c_g max(q, 1-q)``,
  and the exponential mechanism's loss is at most ``ε d / Δ`` for a change ``d <= Δ``, so declaring
  ``Δ = L max(q, 1-q)`` (``L`` the count L1) makes the ``r`` per-group selections ε-DP together; each
  level gets ``ε / #levels`` and the per-group lattice rounding is absorbed by a factor
  ``1 / (1 + 2r / 2^20)``.
- Private keys (partition selection): the noisy distinct-unit count of every non-empty group (L1 ``G``)
  is compared with a threshold ``τ`` (``_calib.selection_threshold``): ``τ = 1 + ceil(t ln(G / (δ (1 +
  e^{-1/t}))))`` for discrete Laplace of scale ``t = G / ε_sel``, so a group that only one unit creates is
  released with probability at most ``δ / G`` and the ``<= G`` groups a unit can create cost ``δ`` in all.
  With ``noise="gaussian"`` and an ``ApproxDP(ε, δ)`` budget (thresholded Gaussian): the whole query is
  calibrated as ``ρ``-zCDP with ``ρ`` the largest value converting to ``(ε, δ/2)`` (CKS 2020), the
  distinct-unit counts get discrete Gaussian noise (L2 ``sqrt(G)``) and the threshold keeps the release
  probability of a one-unit group below ``(δ/2) / G`` (``_calib._dgauss_tail``): ``(ε, δ)``-DP in all,
  charged as ``ApproxDP(ε, δ)``. Outside the event "a group of one side only is released" (probability
  ``<= δ_sel``) the output is that of the zCDP mechanism on the common groups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.accountant import Accountant
from dpkit.core.errors import BudgetExceeded, InvalidData, InvalidParameter, WrongType
from dpkit.core.ledger import Ledger
from dpkit.core.neighbours import AddRemove, PrivacyUnit
from dpkit.core.privacy import ZCDP, ApproxDP, PureDP
from dpkit.noise import sample_discrete_gaussian, sample_discrete_laplace
from dpkit.noise import source as _source
from dpkit.stats import _common as _stats_common
from dpkit.stats.order_statistics import _exact_scores
from dpkit.stats.sums import float_down
from dpkit.tables import _calib, _diagnostics
from dpkit.tables._engine import guarded, ibis_module, kind_of, load_source, no_columns, source_checker
from dpkit.tables._identity import source_fingerprint
from dpkit.tables._query import Query, Statistic, default_granularity

__all__ = ["Session", "Solution", "unit_of"]

NAN_POLICIES = check.NAN_POLICIES  # ("raise", "omit"); "drop" is accepted as an alias of "omit"
RESULT_COLUMNS = ["query", "statistic", "column", "group", "bin", "value", "lo", "hi", "mechanism", "postprocessed"]
_LATTICE_BITS = 20


def unit_of(column: str, *, max_rows: int, max_groups: int | None = None,
            max_rows_per_group: int | None = None) -> PrivacyUnit:
    """The user-level privacy unit: all rows with the same ``column`` value; each unit is bounded in the
    engine to ``max_rows`` rows, ``max_groups`` groups and ``max_rows_per_group`` rows per group."""
    return PrivacyUnit(column, max_rows, max_groups, max_rows_per_group)


# -------------------------------------------------------------------------------------------------------------
# calibration (public)
# -------------------------------------------------------------------------------------------------------------
@dataclass
class _Part:
    """One noisy vector of a statistic: which engine metric, its integer sensitivity and noise scale."""

    metric: str  # count | distinct | sum | sumsq
    scale: float  # discrete Laplace t or discrete Gaussian sigma (integer units)
    l1: int
    l2_squared: int


@dataclass
class _StatPlan:
    stat: Statistic
    share: float  # epsilon (laplace) or rho (gaussian)
    parts: list[_Part] = field(default_factory=list)
    em_epsilon: float = 0.0  # quantiles: epsilon of each per-group, per-level selection
    em_sensitivity: list[Fraction] = field(default_factory=list)
    bound_epsilon: float = 0.0  # bounds=None: epsilon of each of the two bound selections
    bound_sensitivity: Fraction = Fraction(0)
    rest_share: float = 0.0  # bounds=None: the share left for the statistic itself
    found: tuple[float, float] | None = None  # bounds=None: the privately chosen bounds


@dataclass
class _Plan:
    query: Query
    noise: str  # laplace | gaussian
    cost: Any
    bounds: _calib.Bounds
    stats: list[_StatPlan]
    selection: dict[str, Any] | None
    diagnostics: Any = None  # _diagnostics.DiagPlan when asked for (Query.diagnostics)


def _budget(budget: Any) -> Any:
    if budget is None:
        raise InvalidParameter("budget", "required: PureDP(eps), ZCDP(rho) or ApproxDP(eps, delta)")
    if not isinstance(budget, (PureDP, ZCDP, ApproxDP)):
        raise WrongType("budget", "PureDP, ZCDP or ApproxDP")
    return budget


def _mech(noise: str, scale: float) -> str:
    return f"discrete_laplace(scale={scale:.6g})" if noise == "laplace" else f"discrete_gaussian(sigma={scale:.6g})"


# -------------------------------------------------------------------------------------------------------------
# the session
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


class Session:
    """A DP session over one table (see ``docs/tables.md``).

    Parameters
    ----------
    source:
        A ``.csv``/``.csv.gz``/``.parquet`` path (read by DuckDB), ``"adult"`` (the bundled UCI Adult), a pandas /
        Polars / Arrow table (registered in an in-memory DuckDB), an ibis table on any backend, or a
        ``pyspark.sql.DataFrame`` (through ibis' PySpark backend).
    budget:
        The session's total budget (``PureDP``, ``ZCDP`` or ``ApproxDP``); may be omitted with ``ledger``.
    unit:
        None (add/remove one row) or :func:`unit_of` (all rows of one unit, bounded in the engine).
    ledger:
        A :class:`~dpkit.core.ledger.Ledger` (or :class:`~dpkit.core.accountant.Accountant`) to charge instead of
        a fresh in-memory accountant; its neighbour relation must be the session's. With a (writable)
        ``Ledger`` the source's identity (:func:`~dpkit.tables.source_fingerprint`: a file's SHA-256, or a
        content hash of a frame or database table computed in its engine) is registered under the ledger's
        dataset when the session opens; the same data already registered under *another* dataset is refused
        with :class:`~dpkit.core.errors.LedgerError` (it would get a fresh budget), nothing charged.
    rng:
        The random source (None: the OS CSPRNG; ``deterministic_source(seed)`` for tests).
    nan_policy:
        ``"raise"`` (missing values in an aggregated column are :class:`~dpkit.core.errors.InvalidData` naming
        the column, before any charge) or ``"omit"`` (dropped per statistic; ``"drop"``, the earlier name, is an
        alias).
    allow_known_source:
        With a ``Ledger``: accept a source whose identity is already registered under another dataset (only for
        a truly different population that happens to have identical contents; recorded in the ledger).
    """

    def __init__(self, source: Any, budget: Any = None, unit: PrivacyUnit | None = None, ledger: Any = None,
                 rng: Any = None, nan_policy: str = "raise", allow_known_source: bool = False) -> None:
        if not isinstance(allow_known_source, bool):
            raise WrongType("allow_known_source", "a bool")
        nan_policy = check.nan_policy(nan_policy)
        if unit is not None and not isinstance(unit, PrivacyUnit):
            raise WrongType("unit", "None or unit_of(column, max_rows=...)")
        neighbours = unit if unit is not None else AddRemove()
        if ledger is not None:
            if not isinstance(ledger, Accountant):
                raise WrongType("ledger", "a dpkit Ledger (or Accountant)")
            if budget is not None and _budget(budget) != ledger.budget:
                raise InvalidParameter("budget", "differs from the ledger's budget")
            if ledger.neighbours != neighbours:
                raise InvalidParameter("ledger", "its neighbour relation differs from the session's unit")
            self._acc = ledger
        else:
            self._acc = Accountant(_budget(budget), neighbours=neighbours, name="dpkit.tables")
        self._rng = _source.resolve(rng)
        self._unit = unit
        self._nan = nan_policy
        self._source = source
        self._table, self._con, self._owned = load_source(source)
        schema = guarded(lambda: self._table.schema(), what="reading the schema")
        self._schema = {c: kind_of(t) for c, t in schema.items()}
        if not self._schema:
            raise no_columns()
        if unit is not None and unit.column not in self._schema:
            raise InvalidParameter("unit", f"unknown column {unit.column!r}")
        self._fingerprint: str | None = None
        if isinstance(self._acc, Ledger) and not self._acc.readonly:
            # the ledger is bound to the data: the same source under another dataset name is refused here,
            # before anything is charged (LedgerError naming the other dataset), unless allow_known_source
            fp, kind = source_fingerprint(source, self._table)
            self._acc.register_source(fp, kind, allow_known=allow_known_source)
            self._fingerprint = fp
        self._raw_used: list[str] = []  # the source columns of the last checked query (to name a failure)
        self.reads = 0  # engine queries run by this session (tests check that none runs before a charge)

    # ---------------------------------------------------------------- public attributes
    @property
    def columns(self) -> dict[str, str]:
        """The public schema ``{name: kind}``."""
        return dict(self._schema)

    @property
    def source_fingerprint(self) -> str | None:
        """The source's identity recorded in the ledger (``"sha256:..."``; :mod:`dpkit.tables._identity`), or None
        when the session charges an in-memory accountant."""
        return self._fingerprint

    @property
    def accountant(self) -> Accountant:
        return self._acc

    @property
    def unit(self) -> PrivacyUnit | None:
        return self._unit

    @property
    def table(self) -> Any:
        """The underlying ibis table (reading it directly is *not* private)."""
        return self._table

    def query(self, name: str = "query") -> Query:
        """A new, empty query named ``name``."""
        if not isinstance(name, str):
            raise WrongType("name", "a string")
        if not name or len(name) > 200:
            raise InvalidParameter("name", "must be a non-empty string of at most 200 characters")
        return Query(session=self, name=name, schema=dict(self._schema))

    # ---------------------------------------------------------------- expression helpers
    def _derived(self, q: Query, upto_filters: bool = True) -> Any:
        t = self._table
        for name, e in q.derives:
            t = t.mutate(**{name: e.compile(t)})
        if upto_filters:
            for f in q.filters:
                t = t.filter(f.compile(t))
        return t

    def _expression_type(self, q: Query, e: Any, param: str) -> str:
        t = self._derived(q, upto_filters=False)
        failed = False
        try:
            expr = e.compile(t)
            dtype = expr.type()
        except Exception:  # ibis' type errors; raised below, outside the except (no chained text)
            failed = True
        if failed:
            raise WrongType(param, "an expression whose operand types match (e.g. no arithmetic on strings)") \
                from None
        if param == "expression" and not dtype.is_boolean():
            raise WrongType("expression", "a boolean filter expression")
        return kind_of(dtype)

    def _check_query(self, q: Any) -> Query:
        if not isinstance(q, Query):
            raise WrongType("query", "a dpkit.tables Query")
        if q.session is not self:
            raise InvalidParameter("query", "was built by another session")
        if not q.statistics:
            raise InvalidParameter("query", "has no statistics")
        return q

    # ---------------------------------------------------------------- calibration
    def _bounds(self, q: Query) -> _calib.Bounds:
        u = self._unit
        if u is None:
            return _calib.Bounds(1, 1, 1)
        r = u.max_rows
        if not q.by:
            return _calib.Bounds(r, 1, r)
        g = min(u.max_groups, r) if u.max_groups is not None else r
        return _calib.Bounds(r, g, min(u.rows_per_group, r))

    def _calibrate(self, q: Query, budget: Any, noise: str | None = None) -> _Plan:
        q = self._check_query(q)
        budget = _budget(budget)
        if noise is None:
            noise = "gaussian" if isinstance(budget, ZCDP) else "laplace"
        if noise not in ("laplace", "gaussian"):
            raise InvalidParameter("noise", "must be None, 'laplace' or 'gaussian'")
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
            total = _rho_for(budget.epsilon, budget.delta - delta_sel)
        b = self._bounds(q)
        diag = q.diagnostics_weight is not None and _diagnostics.applicable(q, self._unit, b)
        weights = ([s.weight for s in q.statistics] + ([q.diagnostics_weight] if diag else [])
                   + ([q.selection_weight] if private else []))
        shares = _exact.split_budget(total, weights, name="weight")
        plans = []
        for stat, share in zip(q.statistics, shares, strict=False):
            plans.append(self._stat_plan(stat, share, noise, b))
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
        dplan = _diagnostics.plan(q, shares[len(q.statistics)], noise, b, self._unit) if diag else None
        return _Plan(q, noise, cost, b, plans, selection, dplan)

    def _stat_plan(self, stat: Statistic, share: float, noise: str, b: _calib.Bounds) -> _StatPlan:
        sp = _StatPlan(stat, share)

        def part(metric: str, l1: int, l2sq: int, s: float) -> _Part:
            scale = _calib.laplace_scale(l1, s) if noise == "laplace" else _calib.gaussian_sigma(l2sq, s)
            return _Part(metric, scale, l1, l2sq)

        k = stat.kind
        if stat.auto_bounds:
            # a third of the share finds (lo, hi): two exponential-mechanism quantiles (1% and 99%) over the
            # gaps of a public ladder, computed on all bounded rows (a unit moves them by <= L rows)
            b_share, sp.rest_share = _exact.split_budget(share, [1, 2], name="weight")
            eps_b = b_share if noise == "laplace" else _eps_of_rho(b_share)
            sp.bound_epsilon = _exact.split_budget(eps_b, [1, 1], name="weight")[0]
            sp.bound_sensitivity = b.l1 * Fraction(99, 100)
            if not sp.bound_epsilon > 0:
                raise InvalidParameter("budget", "too small to find bounds")
            return sp
        if k in ("count", "histogram", "contingency"):
            sp.parts = [part("count", b.l1, b.l2_squared, share)]
        elif k == "count_distinct":
            sp.parts = [part("distinct", b.groups, b.groups, share)]
        elif k in ("sum", "mean", "variance"):
            n_parts = {"sum": 1, "mean": 2, "variance": 3}[k]
            sub = _exact.split_budget(share, [1] * n_parts, name="weight") if n_parts > 1 else [share]
            u = stat.units
            if k == "sum":
                sp.parts = [part("sum", b.l1 * u, b.l2_squared * u * u, sub[0])]
            else:
                sp.parts = [part("count", b.l1, b.l2_squared, sub[0]), part("sum", b.l1 * u, b.l2_squared * u * u,
                                                                             sub[1])]
                if k == "variance":
                    sp.parts.append(part("sumsq", b.l1 * u * u, b.l2_squared * u**4, sub[2]))
        elif k == "quantile":
            eps = share if noise == "laplace" else _eps_of_rho(share)
            per = _exact.split_budget(eps, [1] * len(stat.levels), name="weight") if len(stat.levels) > 1 else [eps]
            r = b.groups
            e = per[0]
            if r >= 2:
                e = float_down(Fraction(e) / (1 + Fraction(2 * r, 2**_LATTICE_BITS)))
            if not e > 0:
                raise InvalidParameter("budget", "too small to split over the quantile levels")
            sp.em_epsilon = e
            sp.em_sensitivity = [b.l1 * max(Fraction(x), 1 - Fraction(x)) for x in stat.levels]
            if any(d == 0 for d in sp.em_sensitivity):  # pragma: no cover - max(q, 1-q) >= 1/2
                raise InvalidParameter("levels", "invalid")
        return sp

    # ---------------------------------------------------------------- plan
    def plan(self, query: Query, budget: Any, confidence: float = 0.95, *, noise: str | None = None) -> Any:
        """One row per statistic: mechanism, budget share, noise scale (value units) and the 95% half-width
        of one cell (NaN where it depends on private sizes: means, variances, quantiles). Reads nothing and
        charges nothing."""
        import pandas as pd

        conf = _stats_common.check.probability("confidence", confidence)
        p = self._calibrate(query, budget, noise)
        share_col = "rho" if p.noise == "gaussian" else "epsilon"
        rows = []
        for sp in p.stats:
            st = sp.stat
            if st.kind == "quantile" or st.auto_bounds:
                mech = (f"exponential(epsilon={sp.em_epsilon:.6g})" if st.kind == "quantile" else
                        f"exponential bounds (epsilon={sp.bound_epsilon:.6g} each) + discrete_{p.noise}")
                rows.append({"query": p.query.name, "statistic": st.kind, "column": st.column, "mechanism": mech,
                             share_col: sp.share, "scale": float("nan"), "half_width_95": float("nan")})
                continue
            main = sp.parts[-1] if st.kind == "sum" else sp.parts[0]
            if st.kind in ("mean", "variance"):
                main = sp.parts[1]
            g = st.granularity if main.metric == "sum" else 1.0
            hw = float("nan")
            if st.kind in ("count", "count_distinct", "histogram", "contingency", "sum"):
                hw = _calib.halfwidth(p.noise, main.scale, conf) * g
            rows.append({"query": p.query.name, "statistic": st.kind, "column": st.column or ",".join(st.columns),
                         "mechanism": _mech(p.noise, main.scale * g), share_col: sp.share, "scale": main.scale * g,
                         "half_width_95": hw})
        if p.selection is not None:
            sel = p.selection
            rows.append({"query": p.query.name, "statistic": "partition_selection", "column": ",".join(p.query.by),
                         "mechanism": f"thresholded_{_mech(sel['noise'], sel['scale'])[:-1]}, "
                                      f"threshold={sel['threshold']})",
                         share_col: sel.get(share_col, float("nan")), "scale": sel["scale"],
                         "half_width_95": float("nan")})
        rows.extend(_diagnostics.plan_rows(p, share_col, conf))
        return pd.DataFrame(rows)

    # ---------------------------------------------------------------- solve
    def solve(self, queries: Any, targets: Mapping[str, float], confidence: float = 0.95) -> Solution:
        """The smallest total budget with which every targeted statistic's 95% half-width (one cell, value
        units) is at most its target, and the split achieving it.

        ``targets`` maps a statistic label (``"count"``, ``"sum(income)"``, ``"histogram(age)"``; see
        ``Statistic.label``) or ``"<query name>:<label>"`` to a half-width. Under basic (or zCDP) composition
        the cheapest split gives each targeted statistic exactly its smallest sufficient share (found by
        bisection on the release's own scale and half-width functions), so the total is their sum.
        Statistics without a target (and partition selection) get ``weight ×`` the smallest per-weight share
        among the targeted ones. The noise family is the session budget's (Laplace for PureDP/ApproxDP,
        Gaussian for zCDP)."""
        import pandas as pd

        conf = _stats_common.check.probability("confidence", confidence)
        if isinstance(queries, Query):
            queries = [queries]
        if not isinstance(queries, Sequence) or not queries:
            raise WrongType("queries", "a query or a list of queries")
        qs = [self._check_query(q) for q in queries]
        if not isinstance(targets, Mapping) or not targets:
            raise WrongType("targets", "a non-empty mapping label -> half-width")
        tg = {}
        for k, v in targets.items():
            if not isinstance(k, str):
                raise WrongType("targets", "string labels")
            tg[k] = _stats_common.check.positive("targets", v)
        sb = self._acc.budget
        noise = "gaussian" if isinstance(sb, ZCDP) else "laplace"
        used: set[str] = set()
        found: list[list[float | None]] = []
        for q in qs:
            b = self._bounds(q)
            row: list[float | None] = []
            for st in q.statistics:
                key = f"{q.name}:{st.label}" if f"{q.name}:{st.label}" in tg else st.label
                if key not in tg:
                    row.append(None)
                    continue
                used.add(key)
                if st.kind in ("mean", "variance", "quantile") or st.auto_bounds:
                    raise InvalidParameter("targets", f"{st.label} has no data-independent half-width")
                row.append(self._min_share(st, tg[key], noise, b, conf) * (1 + 1e-9))
            found.append(row)
        unused = set(tg) - used
        if unused:
            raise InvalidParameter("targets", f"no statistic matches {sorted(unused)[0]!r}")
        rates = [s / st.weight for q, row in zip(qs, found, strict=True) for st, s in zip(q.statistics, row,
                                                                                         strict=True) if s]
        if not rates:
            raise InvalidParameter("targets", "no statistic was targeted")
        rate = min(rates)
        out_q, budgets, split_rows = [], [], []
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
            if q.diagnostics_weight is not None and _diagnostics.applicable(q, self._unit, self._bounds(q)):
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

    def _min_share(self, st: Statistic, target: float, noise: str, b: _calib.Bounds, conf: float) -> float:
        sp0 = self._stat_plan(st, 1.0, noise, b)
        part = sp0.parts[0]
        g = st.granularity if part.metric == "sum" else 1.0
        h = math.floor(target / g + 1e-12)
        if h < 0:
            raise InvalidParameter("targets", "too small")

        def ok(share: float) -> bool:
            try:
                p = self._stat_plan(st, share, noise, b).parts[0]
            except InvalidParameter:
                return False
            return _calib.halfwidth(noise, p.scale, conf) <= h

        lo, hi = 1e-12, 1.0
        while not ok(hi):
            hi *= 4
            if hi > 1e12:
                raise InvalidParameter("targets", "unreachable half-width")
        while ok(lo):
            lo /= 4
            if lo < 1e-300:  # pragma: no cover
                break
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if mid <= lo or mid >= hi:
                break
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return hi

    # ---------------------------------------------------------------- release
    def check(self, query: Query) -> None:
        """Run the data checks that :meth:`release` runs before its charge (the whole source parses with the
        declared schema in every column the query reads; NULL privacy-unit ids; missing values in the
        aggregated columns and private group keys under ``nan_policy="raise"``) without charging or releasing
        anything. Raises ``EngineError`` or ``InvalidData`` naming the column; the message holds no data value.
        A caller that charges for several queries at once (the release CLI) runs this for each one first."""
        if not isinstance(query, Query):
            raise WrongType("query", "a dpkit.tables Query")
        self._validate_data(query)

    def release(self, query: Query, budget: Any, *, postprocess: Mapping[str, Any] | None = None,
                noise: str | None = None) -> Any:
        """Release ``query`` under ``budget``: ε-DP (``PureDP``, discrete Laplace), ρ-zCDP (``ZCDP``, discrete
        Gaussian) or (ε, δ)-DP (``ApproxDP``; δ for private keys or ``noise="gaussian"``), under the session's
        neighbour relation (one row, or one privacy unit bounded in the engine). Cost: exactly ``budget`` (the
        ``PureDP`` part of an ``ApproxDP`` budget when no δ is needed), charged **once** before any aggregate
        is computed or any random byte drawn, split over the statistics by their weights (module docstring).
        Returns the long result frame of ``docs/tables.md``; ``res.attrs["receipt"]`` lists the receipt ids."""
        post = _postprocess(postprocess)
        p = self._calibrate(query, budget, noise)
        q = p.query
        if not self._acc.can_afford(p.cost):  # refused before anything is read (raises IncompatibleLoss too)
            raise BudgetExceeded("the charge would exceed the privacy budget; nothing was read, charged or released")
        self._validate_data(q)
        params = {"query": q.name, "statistics": [s.label for s in q.statistics], "noise": p.noise,
                  "unit": self._unit.to_dict() if self._unit is not None else {"type": "AddRemove"},
                  "bounds": {"rows": p.bounds.rows, "groups": p.bounds.groups, "per_group": p.bounds.per_group}}
        receipt = _stats_common.pay(self._acc, p.cost, mechanism="tables.query", rng=self._rng, params=params,
                                    description=q.name)
        salt = int(self._rng.uint64(1)[0] & np.uint64(2**62 - 1))
        raw = self._aggregate(p, salt)
        frame = self._noisy(p, raw, post)
        frame.attrs["receipt"] = [receipt.id] if receipt is not None else []
        frame.attrs["cost"] = str(p.cost)
        found = {sp.stat.label: sp.found for sp in p.stats if sp.found is not None}
        if found:
            frame.attrs["bounds"] = found
        frame.attrs["coverage"] = _diagnostics.coverage(q, self._unit, self._nan, found)
        if p.selection is not None:
            frame.attrs["selection"] = dict(p.selection)
        return frame

    # ---------------------------------------------------------------- engine
    def _run(self, expr: Any, what: str = "computing the aggregates") -> Any:
        self.reads += 1
        return guarded(lambda: expr.execute(), what=what, refine=self._refine)

    def _refine(self, kind: str) -> tuple[str, str | None]:
        """After an engine failure: dpkit's own checks name the kind (UTF-8) and the column (one at a time)."""
        return source_checker(self._source, self._table, self._raw_used)(kind)

    def _used_columns(self, q: Query) -> list[str]:
        cols: list[str] = []
        for st in q.statistics:
            for c in ((st.column,) if st.column else ()) + st.columns:
                if c not in cols:
                    cols.append(c)
        return cols

    def _raw_columns(self, q: Query) -> list[str]:
        """The source's columns the query reads (statistics, groups, unit, filters and derives)."""
        names = [*self._used_columns(q), *q.by, *([self._unit.column] if self._unit is not None else [])]
        for e in [*q.filters, *(e for _, e in q.derives)]:
            names.extend(sorted(e.names))
        return [c for c in dict.fromkeys(names) if c in self._schema]

    def _validate_data(self, q: Query) -> None:
        """The pre-charge validation pass (see the module docstring), one engine query over the whole source:
        every source column the query reads is converted on every row (``count(col)``), so that a value that
        does not parse as the declared type, or bytes that are not UTF-8, fail here, before any charge, whatever
        the ``nan_policy`` (:class:`EngineError` naming the column, found by re-reading the columns one at a
        time); derived columns the statistics read are computed on every kept row (an overflow fails here); then
        NULL unit ids always, and missing values in aggregated columns (and private group keys) under
        ``nan_policy="raise"``, among the rows the filters keep. (A file reader converts a column it reads on
        every row, before any filter, as the release's own scan does.)"""
        ibis = ibis_module()
        self._raw_used = self._raw_columns(q)
        t = self._derived(q)
        checks: dict[str, Any] = {"_rows": t.count()}
        derived = dict(q.derives)
        for i, c in enumerate(self._raw_used):
            if c not in derived:
                checks[f"_r{i}"] = t[c].count()
        for i, c in enumerate(c for c in dict.fromkeys([*self._used_columns(q), *q.by]) if c in derived):
            checks[f"_v{i}"] = t[c].max() if t[c].type().is_numeric() else t[c].count()
        names: list[str] = []
        if self._unit is not None:
            names.append(self._unit.column)
        if self._nan == "raise":
            for c in self._used_columns(q) + (list(q.by) if q.keys == "private" else []):
                if c not in names:
                    names.append(c)
        for i, c in enumerate(names):
            col = t[c]
            bad = col.isnull()
            if q.schema.get(c) == "float" and col.type().is_floating():
                bad = bad | col.isnan()
            checks[f"_m{i}"] = ibis.ifelse(bad, 1, 0).sum()  # Postgres cannot cast boolean to bigint
        res = self._run(t.aggregate(**checks), what="checking the source")
        for i, c in enumerate(names):
            v = res[f"_m{i}"].iloc[0]
            if v is not None and not (isinstance(v, float) and math.isnan(v)) and int(v) > 0:
                if self._unit is not None and c == self._unit.column:
                    raise InvalidData(c, "the privacy-unit column contains NULL ids")
                raise InvalidData(c, "contains missing values (NULL/NaN); pass nan_policy='omit' to drop them")

    def _keyed(self, q: Query) -> Any:
        """The derived, filtered rows of the query's groups (public keys listed; private keys not missing):
        the rows contribution bounding chooses from."""
        t = self._derived(q)
        if q.by and q.keys != "private":
            if len(q.by) == 1:
                t = t.filter(t[q.by[0]].isin([k[0] for k in q.keys]))
            else:
                for j, c in enumerate(q.by):
                    t = t.filter(t[c].isin(sorted({k[j] for k in q.keys}, key=repr)))
        elif q.keys == "private":
            for c in q.by:
                t = t.filter(t[c].notnull())
                if t[c].type().is_floating():
                    t = t.filter(~t[c].isnan())
        return t

    def _bounded(self, q: Query, salt: int) -> Any:
        ibis = ibis_module()
        t = self._keyed(q)
        u = self._unit
        if u is None:
            return t
        b = self._bounds(q)
        uid = t[u.column]
        used = [c for c in list(q.by) + self._used_columns(q) if c != u.column]
        used = list(dict.fromkeys(used))
        lit = ibis.literal(salt, "int64")
        rowkey = _key_hash(t, {"_s": lit, "_u": uid, **{f"_c{i}": t[c] for i, c in enumerate(used)}})
        t = t.mutate(_dpk_rk=rowkey)
        order = [t["_dpk_rk"], *(t[c] for c in used)]
        by_groups = bool(q.by) and b.groups < b.rows
        by_rows_in_group = bool(q.by) and b.per_group < b.rows
        if by_groups:
            gkey = _key_hash(t, {"_s": lit, "_u": uid, **{f"_g{i}": t[c] for i, c in enumerate(q.by)}})
            t = t.mutate(_dpk_gk=gkey)
            rank = ibis.dense_rank().over(group_by=t[u.column], order_by=[t["_dpk_gk"], *(t[c] for c in q.by)])
            t = t.mutate(_dpk_gr=rank).filter(lambda x: x["_dpk_gr"] < b.groups).drop("_dpk_gr", "_dpk_gk")
        if by_rows_in_group:
            order = [t["_dpk_rk"], *(t[c] for c in used)]
            rn = ibis.row_number().over(group_by=[t[u.column], *(t[c] for c in q.by)], order_by=order)
            t = t.mutate(_dpk_rg=rn).filter(lambda x: x["_dpk_rg"] < b.per_group).drop("_dpk_rg")
        if not (by_groups and by_rows_in_group and b.groups * b.per_group <= b.rows):  # else implied
            order = [t["_dpk_rk"], *(t[c] for c in used)]
            rn = ibis.row_number().over(group_by=t[u.column], order_by=order)
            t = t.mutate(_dpk_rn=rn).filter(lambda x: x["_dpk_rn"] < b.rows).drop("_dpk_rn")
        return t.drop("_dpk_rk")

    def _units_expr(self, t: Any, st: Statistic) -> Any:
        col = t[st.column]
        lo_u, hi_u = st.unit_range
        if self._schema_kind(st.column, t) == "int" and st.granularity == 1.0:
            return _clip(col.cast("int64"), lo_u, hi_u)
        x = _float(col)
        lo, hi = st.bounds  # type: ignore[misc]
        v = ((_clip(x, lo, hi) / st.granularity) + 0.5).floor().cast("int64")
        # clipped again on the integer lattice: the bound K holds whatever the engine's float arithmetic
        return _clip(v, lo_u, hi_u)

    @staticmethod
    def _schema_kind(c: str, t: Any) -> str:
        return kind_of(t[c].type())

    def _aggregate(self, p: _Plan, salt: int) -> dict[str, Any]:
        """All exact aggregates of the query: one engine query for the counts, distinct counts and sums, one
        per histogram / contingency table / quantile statistic."""
        q = p.query
        t = self._bounded(q, salt)
        cached = None
        auto = any(s.auto_bounds for s in q.statistics)
        if (self._unit is not None or auto) and any(s.kind in ("histogram", "contingency", "quantile")
                                                    or s.auto_bounds for s in q.statistics):
            # several passes over the bounded table: materialise it once (the windows run once)
            keep = list(dict.fromkeys([*q.by, *self._used_columns(q)]
                                      + ([self._unit.column] if self._unit is not None else [])))
            try:
                cached = t.select(*keep).cache()
                self.reads += 1
                t = cached
            except (Exception, MemoryError):  # pragma: no cover - no caching (or no memory for it): recompute
                cached = None
        try:
            if auto:
                self._find_bounds(p, t)
            raw = self._passes(p, t)
            if p.diagnostics is not None:
                raw["diagnostics"] = _diagnostics.dropped(self, p, t)
            return raw
        finally:
            if cached is not None:
                try:
                    cached.release()
                except Exception:  # pragma: no cover
                    pass

    def _find_bounds(self, p: _Plan, t: Any) -> None:
        """``bounds=None``: choose ``(lo, hi)`` privately, then calibrate the statistic with them.

        Every value is mapped to its gap of the public ladder ``c_0 < ... < c_{K-1}``: for ``hi`` the gaps
        ``(-inf, c_0], (c_0, c_1], ..., (c_{K-2}, +inf)`` (``hi`` = the upper end ``c_j`` of gap ``j``), for ``lo``
        the gaps ``(-inf, c_1), [c_1, c_2), ..., [c_{K-1}, +inf)`` (``lo`` = ``c_j``, the lower end of gap ``j``,
        gap 0 reaching down to -inf). The gap counts come from one engine pass, and the exponential mechanism
        picks the gap holding the 1% quantile (``lo``) and the one holding the 99% quantile (``hi``), each with the
        rank quality of :mod:`dpkit.stats.order_statistics` (``Δ = 0.99 L``) at half the bound share. The
        chosen bounds are DP outputs; the statistic is then calibrated with them (post-processing)."""
        from dpkit.mechanisms.selection import exponential

        ibis = ibis_module()
        for sp in p.stats:
            st = sp.stat
            if not st.auto_bounds:
                continue
            c = st.candidates
            x = _float(t[st.column])
            # upper gaps (c_{j-1}, c_j] for hi; lower gaps [c_{j-1}, c_j) for lo (so that lo can be a value that
            # is attained, e.g. 0 for nonnegative data); both from one aggregate
            up = ibis.cases(*((x <= v, j) for j, v in enumerate(c[:-1])), else_=len(c) - 1)
            down = ibis.cases(*((x < v, j) for j, v in enumerate(c[1:])), else_=len(c) - 1)
            tt = t.filter(x.notnull()).mutate(_dpk_up=up, _dpk_down=down)
            res = self._run(tt.aggregate(by=["_dpk_up", "_dpk_down"], _n=tt.count()))
            picks = []
            for col, q in (("_dpk_down", Fraction(1, 100)), ("_dpk_up", Fraction(99, 100))):
                counts = np.zeros(len(c), dtype=np.int64)
                for j, n in res[[col, "_n"]].itertuples(index=False, name=None):
                    counts[int(j)] += int(n)
                b = np.cumsum(counts)
                a = b - counts
                scores, declared = _exact_scores(a, b, q * int(b[-1]), sp.bound_sensitivity)
                picks.append(int(exponential(scores, declared, sp.bound_epsilon, rng=self._rng).value))
            lo = c[picks[0]]  # lower end of [c_j, c_{j+1}) (gap 0 also holds everything below c_0)
            hi = c[picks[1]]  # upper end of (c_{j-1}, c_j] (the last gap also holds everything above)
            if not lo < hi:
                hi = c[min(c.index(lo) + 1, len(c) - 1)]
                if not lo < hi:
                    lo = c[-2]
            integer = p.query.schema[st.column] == "int"
            resolved = replace(st, bounds=(float(lo), float(hi)),
                               granularity=st.granularity or default_granularity((lo, hi), integer))
            new = self._stat_plan(resolved, sp.rest_share, p.noise, p.bounds)
            sp.stat, sp.parts, sp.found = resolved, new.parts, (float(lo), float(hi))

    def _passes(self, p: _Plan, t: Any) -> dict[str, Any]:
        q = p.query
        metrics: dict[str, Any] = {"_n": t.count()}
        need_distinct = q.keys == "private" or any(s.kind == "count_distinct" for s in q.statistics)
        if need_distinct:
            metrics["_d"] = t[self._unit.column].nunique() if self._unit is not None else t.count()
        for i, st in enumerate(sp.stat for sp in p.stats):
            if st.kind in ("sum", "mean", "variance"):
                uexpr = self._units_expr(t, st)
                metrics[f"_s{i}"] = uexpr.sum()
                if st.kind != "sum":
                    metrics[f"_c{i}"] = uexpr.count()
                if st.kind == "variance":
                    dec = uexpr.cast("decimal(38, 0)")
                    metrics[f"_q{i}"] = (dec * dec).sum()
        metrics.update(_diagnostics.metrics(p, t))  # clamped counts (opt-in), same engine pass
        by = list(q.by)
        main = self._run(t.aggregate(by=by, **metrics) if by else t.aggregate(**metrics))
        extra: dict[int, Any] = {}
        for i, st in enumerate(sp.stat for sp in p.stats):
            if st.kind == "histogram":
                col = t[st.column]
                if st.edges:
                    bexpr = _float(col).bucket(list(st.edges), closed="left", close_extreme=True)
                    tt = t.mutate(_dpk_bin=bexpr).filter(lambda x: x["_dpk_bin"].notnull())
                else:
                    tt = t.filter(col.isin(list(st.categories))).mutate(_dpk_bin=col)
                extra[i] = self._run(tt.aggregate(by=[*by, "_dpk_bin"], _n=tt.count()))
            elif st.kind == "contingency":
                tt = t
                for c, d in zip(st.columns, st.domains, strict=True):
                    tt = tt.filter(tt[c].isin(list(d)))
                extra[i] = self._run(tt.aggregate(by=[*by, *st.columns], _n=tt.count()))
            elif st.kind == "quantile":
                lo, hi = st.bounds  # type: ignore[misc]
                width = (hi - lo) / st.bins
                x = _float(t[st.column])
                bexpr = _clip(((_clip(x, lo, hi) - lo) / width).floor().cast("int64"), 0, st.bins - 1)
                tt = t.mutate(_dpk_bin=bexpr).filter(lambda x: x["_dpk_bin"].notnull())
                extra[i] = self._run(tt.aggregate(by=[*by, "_dpk_bin"], _n=tt.count()))
        return {"main": main, "extra": extra}

    # ---------------------------------------------------------------- noise and the result frame
    def _groups(self, p: _Plan, main: Any) -> tuple[list[tuple[Any, ...]], dict[tuple[Any, ...], int]]:
        q = p.query
        rows = {}
        if q.by:
            keys = [tuple(_py(v) for v in r) for r in main[list(q.by)].itertuples(index=False, name=None)]
            rows = {k: i for i, k in enumerate(keys)}
        else:
            rows = {(): 0} if len(main) else {}
        if q.keys is None:
            return [()], rows
        if q.keys != "private":
            return list(q.keys), rows
        # private keys: thresholded noisy distinct-unit counts, in a canonical key order
        cand = sorted(rows, key=_sort_key)
        d = np.array([int(main["_d"].iloc[rows[k]]) for k in cand], dtype=np.int64)
        sel = p.selection
        assert sel is not None
        noisy = d + self._noise(sel["noise"], sel["scale"], len(cand))
        return [k for k, v in zip(cand, noisy, strict=True) if v >= sel["threshold"]], rows

    def _noise(self, noise: str, scale: float, n: int) -> np.ndarray:
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if noise == "laplace":
            return sample_discrete_laplace(scale, n, rng=self._rng)
        return sample_discrete_gaussian(scale, n, rng=self._rng)

    def _noisy(self, p: _Plan, raw: dict[str, Any], post: dict[str, Any]) -> Any:
        import pandas as pd

        q = p.query
        main = raw["main"]
        groups, rows = self._groups(p, main)
        ng = len(groups)

        pos = np.array([rows.get(k, -1) for k in groups], dtype=np.int64)
        present = pos >= 0

        def metric(name: str) -> np.ndarray:
            """Exact integers per released group (0 for a public key without rows), as Python ints."""
            col = main[name].to_numpy(dtype=object)
            out = np.zeros(ng, dtype=object)
            for j in np.flatnonzero(present):
                v = col[pos[j]]
                out[j] = 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
            return out

        records: list[dict[str, Any]] = []
        prefix = {id(sp.stat): f"bounds [{sp.found[0]:g}, {sp.found[1]:g}] by exponential; "
                  for sp in p.stats if sp.found is not None}

        def emit(st: Statistic, j: int, bin_: str, value: float, lo: float, hi: float, mech: str) -> None:
            k = groups[j]
            rec = {"query": q.name, "statistic": st.kind, "column": st.column or ",".join(st.columns),
                   "group": ", ".join(f"{c}={v}" for c, v in zip(q.by, k, strict=True)), "bin": bin_,
                   "value": float(value), "lo": float(lo), "hi": float(hi), "mechanism": prefix.get(id(st), "") + mech,
                   "postprocessed": False}
            for c, v in zip(q.by, k, strict=True):
                rec[c] = v
            records.append(rec)

        for i, sp in enumerate(p.stats):
            st = sp.stat
            if st.kind in ("count", "count_distinct"):
                part = sp.parts[0]
                exact = metric("_n" if st.kind == "count" else "_d")
                noisy = exact + self._noise(p.noise, part.scale, ng)
                hw = _calib.halfwidth(p.noise, part.scale)
                for j in range(ng):
                    emit(st, j, "", noisy[j], noisy[j] - hw, noisy[j] + hw, _mech(p.noise, part.scale))
            elif st.kind == "sum":
                part = sp.parts[0]
                g = st.granularity
                noisy = metric(f"_s{i}") + self._noise(p.noise, part.scale, ng)
                hw = _calib.halfwidth(p.noise, part.scale)
                for j in range(ng):
                    v = int(noisy[j])
                    emit(st, j, "", v * g, (v - hw) * g, (v + hw) * g, _mech(p.noise, part.scale * g))
            elif st.kind in ("mean", "variance"):
                self._moments(p, sp, i, metric, ng, emit)
            elif st.kind in ("histogram", "contingency"):
                self._cells(p, sp, raw["extra"][i], groups, emit)
            elif st.kind == "quantile":
                self._quantiles(p, sp, raw["extra"][i], groups, emit)
        records.extend(_diagnostics.records(self, p, raw, metric, groups))  # opt-in; noise drawn last
        frame = pd.DataFrame.from_records(records, columns=RESULT_COLUMNS + list(q.by))
        if post:
            frame = _apply_post(frame, post, q)
        return frame

    def _moments(self, p: _Plan, sp: _StatPlan, i: int, metric: Any, ng: int, emit: Any) -> None:
        st = sp.stat
        g = st.granularity
        lo_b, hi_b = st.bounds  # type: ignore[misc]
        c_part, s_part = sp.parts[0], sp.parts[1]
        c = metric(f"_c{i}") + self._noise(p.noise, c_part.scale, ng)
        s = metric(f"_s{i}") + self._noise(p.noise, s_part.scale, ng)
        if st.kind == "mean":
            hc = _calib.halfwidth(p.noise, c_part.scale, 0.975)
            hs = _calib.halfwidth(p.noise, s_part.scale, 0.975)
            mech = f"{_mech(p.noise, s_part.scale * g)[:-1]}; count {_mech(p.noise, c_part.scale)})"
            for j in range(ng):
                cj, sj = int(c[j]), int(s[j])
                value = min(max(sj * g / cj, lo_b), hi_b) if cj > 0 else (lo_b + hi_b) / 2
                lo, hi = lo_b, hi_b
                if cj - hc >= 1:
                    cands = [(sj - hs) * g / (cj - hc), (sj - hs) * g / (cj + hc), (sj + hs) * g / (cj - hc),
                             (sj + hs) * g / (cj + hc)]
                    lo, hi = max(lo_b, min(cands)), min(hi_b, max(cands))
                emit(st, j, "", value, lo, hi, mech)
            return
        q_part = sp.parts[2]
        s2 = metric(f"_q{i}") + self._noise(p.noise, q_part.scale, ng)
        mech = f"{_mech(p.noise, s_part.scale * g)[:-1]}; count {_mech(p.noise, c_part.scale)}; squares)"
        cap = ((hi_b - lo_b) / 2) ** 2
        for j in range(ng):
            cj = int(c[j])
            if cj <= 1:
                value = 0.0
            else:
                m = int(s[j]) / cj
                value = min(max((int(s2[j]) / cj - m * m) * g * g, 0.0), cap)
            emit(st, j, "", value, float("nan"), float("nan"), mech)

    def _cells(self, p: _Plan, sp: _StatPlan, table: Any, groups: list[tuple[Any, ...]], emit: Any) -> None:
        st = sp.stat
        q = p.query
        part = sp.parts[0]
        if st.kind == "histogram":
            if st.edges:
                e = st.edges
                labels = [f"[{e[j]:g}, {e[j + 1]:g}{']' if j == len(e) - 2 else ')'}" for j in range(len(e) - 1)]
                cells: list[tuple[Any, ...]] = [(j,) for j in range(len(e) - 1)]
            else:
                labels = [str(c) for c in st.categories]
                cells = [(c,) for c in st.categories]
            bcols = ["_dpk_bin"]
        else:
            import itertools

            cells = list(itertools.product(*st.domains))
            labels = [", ".join(f"{c}={v}" for c, v in zip(st.columns, cell, strict=True)) for cell in cells]
            bcols = list(st.columns)
        lookup: dict[tuple[Any, ...], int] = {}
        for r in table[[*q.by, *bcols, "_n"]].itertuples(index=False, name=None):
            key = tuple(_py(v) for v in r[:-1])
            if st.kind == "histogram" and st.edges:
                key = (*key[:-1], int(key[-1]))
            lookup[key] = int(r[-1])
        n = len(groups) * len(cells)
        noise = self._noise(p.noise, part.scale, n)
        hw = _calib.halfwidth(p.noise, part.scale)
        mech = _mech(p.noise, part.scale)
        idx = 0
        for j, gk in enumerate(groups):
            for cell, label in zip(cells, labels, strict=True):
                v = lookup.get((*gk, *cell), 0) + int(noise[idx])
                idx += 1
                emit(st, j, label, v, v - hw, v + hw, mech)

    def _quantiles(self, p: _Plan, sp: _StatPlan, table: Any, groups: list[tuple[Any, ...]], emit: Any) -> None:
        from dpkit.mechanisms.selection import exponential

        st = sp.stat
        q = p.query
        k = st.bins
        lo_b, hi_b = st.bounds  # type: ignore[misc]
        width = (hi_b - lo_b) / k
        counts: dict[tuple[Any, ...], np.ndarray] = {}
        for r in table[[*q.by, "_dpk_bin", "_n"]].itertuples(index=False, name=None):
            gk = tuple(_py(v) for v in r[:-2])
            arr = counts.setdefault(gk, np.zeros(k, dtype=np.int64))
            arr[int(r[-2])] += int(r[-1])
        for j, gk in enumerate(groups):
            c = counts.get(gk, np.zeros(k, dtype=np.int64))
            b = np.cumsum(c)
            a = b - c
            n = int(b[-1]) if k else 0
            for lv, delta in zip(st.levels, sp.em_sensitivity, strict=True):
                scores, declared = _exact_scores(a, b, Fraction(lv) * n, delta)
                idx = int(exponential(scores, declared, sp.em_epsilon, rng=self._rng).value)
                value = lo_b + (idx + 0.5) * width
                emit(st, j, f"{lv:g}", value, float("nan"), float("nan"), f"exponential(epsilon={sp.em_epsilon:.6g})")


# -------------------------------------------------------------------------------------------------------------
# helpers
# -------------------------------------------------------------------------------------------------------------
def _eps_of_rho(rho: float) -> float:
    """An epsilon (rounded down) whose pure epsilon-DP implies rho-zCDP: ``epsilon = sqrt(2 rho)``."""
    return float_down(Fraction(math.sqrt(2 * rho)) * (1 - Fraction(1, 2**40)))


def _rho_for(epsilon: float, delta: float) -> float:
    """The largest rho (to 1e-9 relative, rounded down) with rho-zCDP => (epsilon, delta)-DP (CKS 2020)."""
    from dpkit.core.privacy import zcdp_to_approx_delta

    lo, hi = 0.0, max(epsilon, 1.0)
    while zcdp_to_approx_delta(hi, epsilon) <= delta:
        hi *= 2
    for _ in range(80):
        mid = (lo + hi) / 2
        if zcdp_to_approx_delta(mid, epsilon) <= delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-10 * hi:
            break
    if not lo > 0:
        raise InvalidParameter("budget", "too small for Gaussian noise")
    return lo


def _float(col: Any) -> Any:
    """``col`` as float64 with NaN -> NULL (SQL aggregates skip NULLs; a clamp would move NaN to a bound)."""
    ibis = ibis_module()
    x = col.cast("float64")
    if col.type().is_floating():
        x = ibis.ifelse(x.isnan(), ibis.null("float64"), x)
    return x


def _clip(x: Any, lo: Any, hi: Any) -> Any:
    """``x`` clamped to ``[lo, hi]`` as one CASE (NULL stays NULL). ibis' ``clip`` nests a NULL-guarded
    ``least``/``greatest`` per bound, which grows the SQL exponentially when clamps are composed."""
    ibis = ibis_module()
    return ibis.cases((x < lo, lo), (x > hi, hi), else_=x)


def _key_hash(t: Any, parts: dict[str, Any]) -> Any:
    """``hash(struct(parts))``, the keyed row/group hash of :meth:`Session._bounded`. PostgreSQL cannot hash
    a struct (ibis compiles only int/float/text hashes there), so on it the hash is of the parts' text
    joined by a unit separator, NULL as its own marker: still a function of the salt and the unit's own row."""
    ibis = ibis_module()
    try:
        backend = t._find_backend(use_default=False).name
    except Exception:  # pragma: no cover - an unbound expression: keep the default
        backend = ""
    if backend != "postgres":
        return ibis.struct(parts).hash()
    text = None
    for v in parts.values():
        piece = v.cast("string").fill_null("\u2400")
        text = piece if text is None else text + "\u241f" + piece
    return text.hash()


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _sort_key(k: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((type(v).__name__, v) for v in k)


def _postprocess(post: Any) -> dict[str, Any]:
    if post is None:
        return {}
    if not isinstance(post, Mapping):
        raise WrongType("postprocess", "a mapping like {'nonnegative': True, 'round': True}")
    out = {}
    for k, v in post.items():
        if k not in ("nonnegative", "round"):
            raise InvalidParameter("postprocess", f"unknown option {k!r} (nonnegative, round)")
        if k == "round" and not isinstance(v, bool):
            v = _stats_common.check.integer("postprocess", v, minimum=0)
        elif not isinstance(v, bool):
            raise WrongType("postprocess", "booleans")
        out[k] = v
    return out


def _apply_post(frame: Any, post: dict[str, Any], q: Query) -> Any:
    """Post-processing of released values (free): ``nonnegative`` clips counts, histograms and sums with
    ``lo >= 0`` at zero; ``round`` rounds every value (``True``: to an integer, ``n``: to ``n`` decimals).
    ``postprocessed`` marks the rows whose value changed."""
    vals = frame["value"].to_numpy(dtype=float).copy()
    orig = vals.copy()
    if post.get("nonnegative"):
        nonneg_stats = {"count", "count_distinct", "histogram", "contingency"}
        sums = {st.column for st in q.statistics if st.kind == "sum" and st.bounds is not None and st.bounds[0] >= 0}
        mask = frame["statistic"].isin(list(nonneg_stats)).to_numpy() | (
            (frame["statistic"] == "sum").to_numpy() & frame["column"].isin(list(sums)).to_numpy())
        vals[mask] = np.maximum(vals[mask], 0.0)
    r = post.get("round")
    if r is not None and r is not False:
        vals = np.round(vals, 0 if r is True else int(r))
    frame = frame.copy()
    frame["value"] = vals
    changed = ~((vals == orig) | (np.isnan(vals) & np.isnan(orig)))
    frame["postprocessed"] = changed
    return frame
