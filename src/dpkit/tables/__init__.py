"""dpkit.tables: differentially private queries over real tables (issue #5; contract in ``docs/tables.md``).

One code path built on ibis: DuckDB is the embedded default engine (CSV/Parquet paths, pandas/Polars/Arrow
frames, the bundled Adult data as ``"adult"``); any ibis table (DuckDB, PySpark, Postgres) or a
``pyspark.sql.DataFrame`` works the same way. Contribution bounding, clamping and the exact aggregates run in
the engine; noise is added by dpkit's exact samplers after one up-front charge of the session's accountant.

::

    from dpkit.tables import Session, unit_of
    s = Session("adult", budget=dpkit.PureDP(1.0))
    q = s.query("by sex").group_by("sex", keys=["Female", "Male"]).count().mean("age", bounds=(0, 100))
    s.plan(q, budget=dpkit.PureDP(0.5)); res = s.release(q, budget=dpkit.PureDP(0.5))

Statistic kinds (count, sum, mean, variance, quantile, histogram, contingency) are classes registered in
:mod:`dpkit.tables.kinds`; :func:`register_kind` adds a new one to the query builder, the CLI spec and the
report (``docs/extending.md``).

ibis is imported lazily: ``import dpkit`` works without it, and using this module without it raises
:class:`~dpkit.core.errors.MissingDependency` with the pip command.
"""

from dpkit.core.neighbours import PrivacyUnit
from dpkit.tables._engine import schema_table
from dpkit.tables._expr import parse as parse_expression
from dpkit.tables._identity import source_fingerprint
from dpkit.tables._query import Query, Statistic
from dpkit.tables._session import RESULT_COLUMNS, Session, Solution, unit_of
from dpkit.tables.kinds import Kind, register_kind

__all__ = ["RESULT_COLUMNS", "Kind", "PrivacyUnit", "Query", "Session", "Solution", "Statistic", "parse_expression",
           "register_kind", "schema_table", "source_fingerprint", "unit_of"]
