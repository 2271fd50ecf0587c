"""dpkit.tables on the embedded engines: DuckDB (an ibis table), a Parquet path, pandas and Polars frames.

They all run on DuckDB, so with the same seed the releases are identical even where bounding bites (the
kept rows are a keyed hash of the salt and the row, see ``dpkit.tables._engine``). Spark and PostgreSQL are
in ``test_engines_spark.py`` / ``test_engines_postgres.py``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ibis")
pytest.importorskip("duckdb")

from . import engine_checks as ec

LOCAL = ["pandas", "polars", "parquet"]


@pytest.mark.parametrize("engine", LOCAL)
def test_same_seed_same_release_as_duckdb(engine, users, to_engine):
    ec.check_same_as_reference(lambda f: to_engine(f, engine), users, lambda f: to_engine(f, "duckdb"))
    # same engine family: identical even with bounding active
    got = ec.values(ec.release(to_engine(users, engine)))
    ref = ec.values(ec.release(to_engine(users, "duckdb")))
    assert got == ref


@pytest.mark.parametrize("engine", ["duckdb", *LOCAL])
def test_bounded_release(engine, users, to_engine):
    ec.check_bounded_release(lambda f: to_engine(f, engine), users)


@pytest.mark.parametrize("engine", ["duckdb", "pandas"])
def test_bounding_in_engine(engine, users, to_engine):
    ec.check_bounding_internal(lambda f: to_engine(f, engine), users)


def test_bounding_max_groups(users, to_engine):
    import numpy as np

    mixed = users.copy()
    mixed["state"] = np.array(["CA", "NY", "TX", "WA"])[np.arange(len(mixed)) % 4]  # users span states
    ec.check_bounding_internal(lambda f: to_engine(f, "duckdb"), mixed, max_groups=1)


@pytest.mark.parametrize("engine", ["duckdb", "pandas", "polars", "parquet"])
def test_null_user_ids_refused(engine, users, to_engine):
    ec.check_null_ids_refused(lambda f: to_engine(f, engine), users)


@pytest.mark.parametrize("engine", ["duckdb", "parquet"])
def test_adversarial_bound(engine, users, to_engine):
    ec.check_adversarial_bound(lambda f: to_engine(f, engine), users)
