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
- Each statistic is a registered kind (:mod:`dpkit.tables.kinds`) that declares its noisy vectors and runs its DP step
  through :mod:`dpkit.stats.aggregates`. Means: a private centre per group, then the sum centred there over a noisy
  count (default, :class:`dpkit.tables.kinds.Mean`), or noisy clamped sum / noisy count (``method="noisy_ratio"``, half
  the statistic's share each); variance: noisy count, sum and sum of squares (a third each). Quantiles: the exponential
  mechanism per group over ``bins`` equal-width buckets of the public bounds with the rank quality of
  :mod:`dpkit.stats.order_statistics`; a unit touching ``c_g`` rows of ``r`` groups moves group ``g``'s quality by at
  most ``c_g max(q, 1-q)``, and the exponential mechanism's loss is at most ``ε d / Δ`` for a change ``d <= Δ``, so
  declaring ``Δ = L max(q, 1-q)`` (``L`` the count L1) makes the ``r`` per-group selections ε-DP together; each level
  gets ``ε / #levels`` and the per-group lattice rounding is absorbed by a factor ``1 / (1 + 2r / 2^20)``.
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

The session is a facade over one module per job: :mod:`dpkit.tables._planning` (budget split, calibration,
``plan`` and ``solve``), :mod:`dpkit.tables._bounding` (the engine: checks, contribution bounding, exact
aggregates), :mod:`dpkit.tables._measuring` (the DP steps, after the charge) and :mod:`dpkit.tables._results`
(the result frame and post-processing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.accountant import Accountant
from dpkit.core.errors import BudgetExceeded, InvalidParameter, WrongType
from dpkit.core.ledger import Ledger
from dpkit.core.neighbours import AddRemove, PrivacyUnit
from dpkit.mechanisms.contract import Plan, run
from dpkit.noise import source as rng_source
from dpkit.tables import _bounding, _diagnostics, _measuring, _planning
from dpkit.tables._engine import exact_strings, guarded, kind_of, load_source, no_columns, source_checker
from dpkit.tables._identity import source_fingerprint
from dpkit.tables._planning import QueryPlan, Solution, check_budget
from dpkit.tables._query import Query
from dpkit.tables._results import RESULT_COLUMNS, postprocess_options

__all__ = ["RESULT_COLUMNS", "Session", "Solution", "unit_of"]

#: The keyed row hash of contribution bounding (also the content hash of ``dpkit.tables._identity``).
_key_hash = _bounding.key_hash

NAN_POLICIES = check.NAN_POLICIES  # ("raise", "omit"); "drop" is accepted as an alias of "omit"


def unit_of(column: str, *, max_rows: int, max_groups: int | None = None,
            max_rows_per_group: int | None = None) -> PrivacyUnit:
    """The user-level privacy unit: all rows with the same ``column`` value; each unit is bounded in the
    engine to ``max_rows`` rows, ``max_groups`` groups and ``max_rows_per_group`` rows per group."""
    return PrivacyUnit(column, max_rows, max_groups, max_rows_per_group)


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
            if budget is not None and check_budget(budget) != ledger.budget:
                raise InvalidParameter("budget", "differs from the ledger's budget")
            if ledger.neighbours != neighbours:
                raise InvalidParameter("ledger", "its neighbour relation differs from the session's unit")
            self._acc = ledger
        else:
            self._acc = Accountant(check_budget(budget), neighbours=neighbours, name="dpkit.tables")
        self._rng = rng_source.resolve(rng)
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
        # byte-for-byte string equality on a caller's DuckDB table, which may declare a collation (after the
        # fingerprint, which reads the source as given); dpkit's own connections (files, frames) never do
        if not self._owned:
            self._table = exact_strings(self._table, keep=unit.column if unit is not None else None)
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

    # ---------------------------------------------------------------- planning
    def _check_query(self, q: Any) -> Query:
        if not isinstance(q, Query):
            raise WrongType("query", "a dpkit.tables Query")
        if q.session is not self:
            raise InvalidParameter("query", "was built by another session")
        if not q.statistics:
            raise InvalidParameter("query", "has no statistics")
        return q

    def _bounds(self, q: Query) -> Any:
        return _planning.contribution_bounds(self._unit, q)

    def _calibrate(self, q: Query, budget: Any, noise: str | None = None) -> QueryPlan:
        return _planning.calibrate(self._check_query(q), budget, noise, self._unit)

    def plan(self, query: Query, budget: Any, confidence: float = 0.95, *, noise: str | None = None,
             as_frame: bool = True) -> Any:
        """One row per statistic: mechanism, budget share, noise scale (value units) and the 95% half-width
        of one cell (NaN where it depends on private sizes: means, variances, quantiles). Reads nothing and
        charges nothing. A pandas DataFrame, or with ``as_frame=False`` a list of dicts (one per row; no
        pandas import, which is what ``dpkit plan`` uses)."""
        conf = check.probability("confidence", confidence)
        as_frame = check.flag("as_frame", as_frame)
        p = self._calibrate(query, budget, noise)
        return _planning.plan_frame(p, conf) if as_frame else _planning.plan_rows(p, conf)

    def solve(self, queries: Any, targets: Mapping[str, float], confidence: float = 0.95) -> Solution:
        """The smallest total budget with which every targeted statistic's 95% half-width (one cell, value
        units) is at most its target, and the split achieving it.

        ``targets`` maps a statistic label (``"count"``, ``"sum(income)"``, ``"histogram(age)"``; see
        ``Statistic.label``) or ``"<query name>:<label>"`` to a half-width. Under basic (or zCDP) composition
        the cheapest split gives each targeted statistic exactly its smallest sufficient share (found by
        bisection on the release's own scale and half-width functions), so the total is their sum.
        Statistics without a target (and partition selection) get ``weight ×`` the smallest per-weight share
        among the targeted ones. The noise family is the session budget's (Laplace for PureDP/ApproxDP,
        Gaussian for zCDP). Only kinds with a data-independent half-width (``Kind.fixed_halfwidth``) can be
        targeted."""
        return _planning.solve(self, queries, targets, confidence)

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
        Returns the long result frame of ``docs/tables.md``; ``res.attrs["receipt"]`` lists the receipt ids.

        The query is run as one plan of the mechanism contract (:func:`dpkit.mechanisms.contract.run`): the
        charge of ``tables.query``, then its draw: the bounding salt, the exact aggregates and every statistic's
        DP step (:mod:`dpkit.tables._measuring`)."""
        post = postprocess_options(postprocess)
        p = self._calibrate(query, budget, noise)
        q = p.query
        if not self._acc.can_afford(p.cost):  # refused before anything is read (raises IncompatibleLoss too)
            raise BudgetExceeded("the charge would exceed the privacy budget; nothing was read, charged or released")
        self._validate_data(q)
        params = {"query": q.name, "statistics": [s.label for s in q.statistics], "noise": p.noise,
                  "unit": self._unit.to_dict() if self._unit is not None else {"type": "AddRemove"},
                  "bounds": {"rows": p.bounds.rows, "groups": p.bounds.groups, "per_group": p.bounds.per_group}}

        def draw(rng: Any) -> Any:
            salt = int(rng.uint64(1)[0] & np.uint64(2**62 - 1))
            raw = self._aggregate(p, salt)
            rows = _measuring.measure(self, p, raw)
            out = rows.frame(post)
            if rows.synthetic:
                out.attrs["synthetic"] = dict(rows.synthetic)
            return out

        rel = run(Plan(mechanism="tables.query", cost=p.cost, draw=draw, params=params,
                       neighbours=self._acc.neighbours), accountant=self._acc, rng=self._rng, description=q.name)
        frame = rel.value
        receipt = rel.receipt
        frame.attrs["receipt"] = [receipt.id] if receipt is not None else []
        frame.attrs["cost"] = str(p.cost)
        found = {sp.stat.label: sp.found for sp in p.stats if sp.found is not None}
        if found:
            frame.attrs["bounds"] = found
        frame.attrs["coverage"] = _diagnostics.coverage(q, self._unit, self._nan, found)
        if p.selection is not None:
            frame.attrs["selection"] = dict(p.selection)
        return frame

    # ---------------------------------------------------------------- engine (dpkit.tables._bounding)
    def _run(self, expr: Any, what: str = "computing the aggregates") -> Any:
        self.reads += 1
        return guarded(lambda: expr.execute(), what=what, refine=self._refine)

    def _refine(self, kind: str) -> tuple[str, str | None]:
        """After an engine failure: dpkit's own checks name the kind (UTF-8) and the column (one at a time)."""
        return source_checker(self._source, self._table, self._raw_used)(kind)

    def _derived(self, q: Query, upto_filters: bool = True) -> Any:
        return _bounding.derived(self, q, upto_filters)

    def _expression_type(self, q: Query, e: Any, param: str) -> str:
        return _bounding.expression_type(self, q, e, param)

    def _validate_data(self, q: Query) -> None:
        _bounding.validate_data(self, q)

    def _keyed(self, q: Query) -> Any:
        return _bounding.keyed(self, q)

    def _bounded(self, q: Query, salt: int) -> Any:
        return _bounding.bounded(self, q, salt)

    def _aggregate(self, p: QueryPlan, salt: int) -> dict[str, Any]:
        return _bounding.aggregate(self, p, salt)

    def _noise(self, noise: str, scale: float, n: int) -> np.ndarray:
        """``n`` discrete Laplace / Gaussian noise draws from the session's source (partition selection and the
        diagnostics)."""
        from dpkit.stats.aggregates import IntegerNoise

        return IntegerNoise(noise, 0.0, 0, 0, scale).sample(n, self._rng)
