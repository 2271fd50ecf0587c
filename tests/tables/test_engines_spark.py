"""dpkit.tables on Spark local (a pyspark DataFrame through ibis' pyspark backend).

Skips unless pyspark and a JDK are installed (fails instead under DPKIT_TEST_REQUIRE=spark, as in CI).
One Spark session (local[1]) is shared by all tests; each check runs a handful of small Spark jobs.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ibis")

from . import engine_checks as ec


@pytest.fixture
def spark(to_engine, spark_session):
    return lambda f: to_engine(f, "spark")


def test_same_seed_same_release_as_duckdb(spark, users, to_engine):
    ec.check_same_as_reference(spark, users, lambda f: to_engine(f, "duckdb"))


def test_bounded_release(spark, users):
    ec.check_bounded_release(spark, users)


def test_bounding_in_engine(spark, users):
    ec.check_bounding_internal(spark, users)


def test_bounding_max_groups(spark, users):
    import numpy as np

    mixed = users.copy()
    mixed["state"] = np.array(["CA", "NY", "TX", "WA"])[np.arange(len(mixed)) % 4]
    ec.check_bounding_internal(spark, mixed, max_groups=1)


def test_null_user_ids_refused(spark, users):
    ec.check_null_ids_refused(spark, users)


def test_adversarial_bound(spark, users):
    ec.check_adversarial_bound(spark, users)
