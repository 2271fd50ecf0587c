"""The CLI's only contact with :mod:`dpkit.tables` (the engine layer).

An :class:`Engine` turns a validated :class:`~dpkit.cli.spec.QuerySpec` into a plan or a release. The
release command talks to it through four methods, so tests can substitute an engine that returns
hand-made result frames (and so that a change in the tables API touches this file only).
"""

from __future__ import annotations

from typing import Any, Protocol

from dpkit.cli.spec import QuerySpec, Spec, StatSpec
from dpkit.core.accountant import Receipt
from dpkit.core.errors import MissingDependency
from dpkit.core.privacy import PrivacyLoss
from dpkit.noise.source import RandomSource

__all__ = ["RESULT_COLUMNS", "Engine", "TablesEngine"]

#: The columns of the long result frame (docs/tables.md), in output order.
RESULT_COLUMNS = ("query", "statistic", "column", "group", "bin", "value", "lo", "hi", "mechanism", "postprocessed")


class Engine(Protocol):
    def open(self, spec: Spec, budget: PrivacyLoss, rng: RandomSource | None) -> Any:
        """A session over the spec's data with an in-memory accountant of ``budget`` (nothing charged)."""

    def plan(self, session: Any, query: QuerySpec, budget: PrivacyLoss) -> Any:
        """The accuracy plan of one query (a list of row dicts, or a pandas DataFrame; no data touched, nothing
        charged)."""

    def check(self, session: Any, query: QuerySpec) -> None:
        """The engine's pre-charge data validation (missing values, NULL unit ids), so that a data problem
        is found before the ledger is charged. Raises InvalidData; releases nothing."""

    def release(self, session: Any, query: QuerySpec, budget: PrivacyLoss) -> Any:
        """Release one query (charges the session's accountant once; pandas DataFrame in the result format)."""

    def charges(self, session: Any) -> tuple[Receipt, ...]:
        """The receipts the session's accountant accepted."""


class TablesEngine:
    """:class:`Engine` over :mod:`dpkit.tables` (needs ``pip install 'dpkit[tables]'``)."""

    @staticmethod
    def _tables() -> Any:
        try:
            import dpkit.tables as tables
        except ImportError as exc:
            raise MissingDependency("dpkit release needs the tables extra: pip install 'dpkit[tables]'") from exc
        return tables

    def open(self, spec: Spec, budget: PrivacyLoss, rng: RandomSource | None) -> Any:
        return self._session(spec, spec.source, budget, rng)

    def open_plan(self, spec: Spec, budget: PrivacyLoss) -> Any:
        """A session for planning only (``dpkit plan``; optional in an :class:`Engine`, ``plan`` falls back to
        :meth:`open`). A plan reads no data, so the bundled Adult data is not loaded into an engine: the session
        is over an unbound ibis table with Adult's schema (int64 and string columns, the types of the loaded
        table), and the same column and expression checks run. Any other source is opened as for a release."""
        if spec.source != "adult":
            return self.open(spec, budget, None)
        self._tables()
        from dpkit.datasets import adult_domain
        from dpkit.tables import schema_table

        schema = {c: "int64" if d["kind"] == "numeric" else "string" for c, d in adult_domain().items()}
        return self._session(spec, schema_table(schema, name="adult"), budget, None)

    def _session(self, spec: Spec, source: Any, budget: PrivacyLoss, rng: RandomSource | None) -> Any:
        t = self._tables()
        unit = None
        if spec.unit is not None:
            u = spec.unit
            unit = t.unit_of(u.column, max_rows=u.max_rows, max_groups=u.max_groups,
                             max_rows_per_group=u.max_rows_per_group)
        return t.Session(source, budget=budget, unit=unit, rng=rng, nan_policy=spec.nan_policy)

    def build(self, session: Any, query: QuerySpec) -> Any:
        q = session.query(query.name)
        if query.filter is not None:
            q = q.filter(query.filter)
        if query.derive:
            q = q.derive(**query.derive)
        if query.group_by:
            keys: Any
            if query.keys == "private":
                keys = "private"
            else:
                assert isinstance(query.keys, dict)
                keys = list(query.keys[query.group_by[0]]) if len(query.group_by) == 1 else \
                    {c: list(v) for c, v in query.keys.items()}
            q = q.group_by(*query.group_by, keys=keys)
        for st in query.statistics:
            q = _add_stat(q, st)
        diag = getattr(query, "diagnostics", None)
        return q.diagnostics(weight=diag) if diag is not None else q

    def plan(self, session: Any, query: QuerySpec, budget: PrivacyLoss) -> Any:
        return session.plan(self.build(session, query), budget=budget, as_frame=False)

    def check(self, session: Any, query: QuerySpec) -> None:
        # The CLI charges the ledger for the whole release first, so it runs release's pre-charge data checks
        # for every query beforehand (a data problem then costs nothing).
        session.check(self.build(session, query))

    def release(self, session: Any, query: QuerySpec, budget: PrivacyLoss) -> Any:
        return session.release(self.build(session, query), budget=budget, postprocess=dict(query.postprocess))

    def charges(self, session: Any) -> tuple[Receipt, ...]:
        return tuple(session.accountant.receipts)


def _add_stat(q: Any, st: StatSpec) -> Any:
    """Add the spec statistic to the query: its kind (:mod:`dpkit.tables.kinds`) knows how."""
    from dpkit.tables.kinds import by_spec

    kind = by_spec(st.stat)
    if kind is None:  # pragma: no cover - the spec validator admits only registered kinds
        raise AssertionError(st.stat)
    return kind.from_spec(q, st)
