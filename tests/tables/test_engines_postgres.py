"""dpkit.tables on PostgreSQL (an ibis postgres table).

Skips unless DPKIT_TEST_POSTGRES_URL names a database (fails instead under DPKIT_TEST_REQUIRE=postgres, as in CI;
`bash .ci/run` starts a throwaway server). Each test table gets a unique name and is dropped afterwards.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ibis")

from . import engine_checks as ec


@pytest.fixture
def pg(to_engine, postgres_con):
    return lambda f: to_engine(f, "postgres")


def test_same_seed_same_release_as_duckdb(pg, users, to_engine):
    ec.check_same_as_reference(pg, users, lambda f: to_engine(f, "duckdb"))


def test_bounded_release(pg, users):
    ec.check_bounded_release(pg, users)


def test_bounding_in_engine(pg, users):
    ec.check_bounding_internal(pg, users)


def test_bounding_max_groups(pg, users):
    import numpy as np

    mixed = users.copy()
    mixed["state"] = np.array(["CA", "NY", "TX", "WA"])[np.arange(len(mixed)) % 4]
    ec.check_bounding_internal(pg, mixed, max_groups=1)


def test_null_user_ids_refused(pg, users):
    ec.check_null_ids_refused(pg, users)


def test_adversarial_bound(pg, users):
    ec.check_adversarial_bound(pg, users)
