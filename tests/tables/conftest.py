"""Engine fixtures for the dpkit.tables tests: Spark local and PostgreSQL, plus one shared generated table.

Spark and PostgreSQL tests skip (with how to enable them) unless the engine is available. CI (``.ci/run``)
installs a JDK and PostgreSQL, starts a throwaway PostgreSQL cluster and sets
``DPKIT_TEST_REQUIRE=spark,postgres,chromium``: an engine named there that is unavailable makes its tests
FAIL instead of skipping, so a broken CI setup cannot pass silently.

    DPKIT_TEST_POSTGRES_URL=postgres://user@127.0.0.1:5432/db   # an empty database the tests may write to
    DPKIT_TEST_REQUIRE=spark,postgres                         # optional: fail instead of skipping
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

REQUIRE = {s.strip().lower() for s in os.environ.get("DPKIT_TEST_REQUIRE", "").split(",") if s.strip()}
POSTGRES_URL = os.environ.get("DPKIT_TEST_POSTGRES_URL", "")

SPARK_HOWTO = "install a JDK and `pip install pyspark` to run Spark tests"
POSTGRES_HOWTO = (
    "set DPKIT_TEST_POSTGRES_URL=postgres://user@host:port/db (an empty database) and "
    "`pip install 'ibis-framework[postgres]'` to run PostgreSQL tests; `bash .ci/run` starts a throwaway server"
)

STATES = ("CA", "NY", "TX", "WA", "ZZ")  # ZZ: a public key with no rows at all


def unavailable(engine: str, why: str) -> None:
    """Skip, or fail when ``engine`` is listed in DPKIT_TEST_REQUIRE."""
    if engine in REQUIRE:
        pytest.fail(f"{engine} is required here (DPKIT_TEST_REQUIRE={','.join(sorted(REQUIRE))}) but {why}",
                    pytrace=False)
    pytest.skip(why)


def unit_table(seed: int, keys: list[str], n_users: int = 40) -> Any:
    """A small table of users (``uid``) with 1..7 rows each, a group key ``k`` from ``keys``, a float ``x`` in
    [-30, 130] and an int ``n`` in [-5, 120) (both partly outside the test bounds): for brute-force checks."""
    import pandas as pd

    g = np.random.default_rng(seed)  # test data only
    per = g.integers(1, 8, size=n_users)
    uid = np.repeat(np.arange(n_users), per)
    return pd.DataFrame({"uid": uid, "k": g.choice(keys, size=uid.size), "x": g.uniform(-30, 130, size=uid.size),
                         "n": g.integers(-5, 120, size=uid.size)})


def cells_frame(seed: int, n: int, a: int, b: int) -> Any:
    """``n`` rows on an ``a`` x ``b`` grid of cells (columns ``a``, ``b``) with a value ``x`` in [-2, 12] (rounded
    to 3 decimals, so partly outside the test bounds [0, 10]): for the noise-law tests."""
    import pandas as pd

    g = np.random.default_rng(seed)  # test data only
    return pd.DataFrame({"a": g.integers(0, a, size=n), "b": g.integers(0, b, size=n),
                         "x": g.uniform(-2, 12, size=n).round(3)})


def users_frame(seed: int = 5, n_users: int = 240) -> Any:
    """The shared test table (pandas): ``user_id``, ``state`` (one per user), ``age``, ``income``.

    Rows per user are 1..9 (so bounding to 3 rows matters for about two thirds of the users); ``income`` is
    an integer-valued float in [0, 150] with some values above the test bound 100; there is a user with
    ``user_id`` 0 (a falsy id is still an id).
    """
    import pandas as pd

    g = np.random.default_rng(seed)  # test data only
    per_user = g.integers(1, 10, size=n_users)
    uid = np.repeat(np.arange(n_users, dtype=np.int64), per_user)
    state = np.repeat(g.choice(np.array(STATES[:4]), size=n_users), per_user)
    age = np.repeat(g.integers(18, 90, size=n_users), per_user).astype(np.int64)
    income = g.integers(0, 151, size=uid.size).astype(np.float64)
    perm = g.permutation(uid.size)
    return pd.DataFrame({"user_id": uid[perm], "state": state[perm], "age": age[perm], "income": income[perm]})


@pytest.fixture(scope="session")
def users() -> Any:
    pytest.importorskip("pandas")
    return users_frame()


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One local Spark session (local[1], small memory, no UI) shared by the whole test session."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        unavailable("spark", SPARK_HOWTO + " (pyspark is not installed)")
    try:
        import ibis

        ibis.pyspark  # noqa: B018 - the ibis backend dpkit uses for Spark
    except Exception as exc:  # ImportError or ibis' own error when the backend's extras are missing
        unavailable("spark", f"{SPARK_HOWTO} (ibis' pyspark backend is unavailable: {type(exc).__name__})")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        unavailable("spark", SPARK_HOWTO + " (no java on PATH and no JAVA_HOME)")
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        spark = (
            SparkSession.builder.master("local[1]")
            .appName("dpkit-tests")
            .config("spark.driver.memory", "512m")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .getOrCreate()
        )
    except Exception as exc:  # no usable JVM, wrong Java version, ...
        unavailable("spark", f"{SPARK_HOWTO} (Spark did not start: {type(exc).__name__}: {str(exc)[:200]})")
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def postgres_con() -> Iterator[Any]:
    """An ibis PostgreSQL connection to DPKIT_TEST_POSTGRES_URL (tables made by the tests are dropped)."""
    if not POSTGRES_URL:
        unavailable("postgres", POSTGRES_HOWTO + " (DPKIT_TEST_POSTGRES_URL is not set)")
    try:
        import ibis

        ibis.postgres  # noqa: B018
    except Exception as exc:
        unavailable("postgres", f"{POSTGRES_HOWTO} (ibis' postgres backend is unavailable: {type(exc).__name__})")
    try:
        con = ibis.connect(POSTGRES_URL)
    except Exception as exc:
        unavailable("postgres", f"{POSTGRES_HOWTO} (cannot connect: {type(exc).__name__})")
    yield con
    con.disconnect()


@pytest.fixture
def to_engine(request: pytest.FixtureRequest) -> Iterator[Callable[[Any, str], Any]]:
    """``to_engine(frame, engine)``: the pandas ``frame`` as a dpkit.tables source on ``engine``.

    duckdb -> an ibis DuckDB table; pandas -> the frame itself; polars -> a Polars frame; parquet -> a path;
    spark -> a pyspark DataFrame; postgres -> an ibis table in DPKIT_TEST_POSTGRES_URL's database (dropped
    after the test).
    """
    dropped: list[tuple[Any, str]] = []

    def convert(frame: Any, engine: str) -> Any:
        if engine == "pandas":
            return frame
        if engine == "polars":
            pl = pytest.importorskip("polars")
            return pl.from_pandas(frame)
        if engine == "parquet":
            tmp = request.getfixturevalue("tmp_path")
            path = tmp / "users.parquet"
            frame.to_parquet(path, index=False)
            return str(path)
        if engine == "duckdb":
            ibis = pytest.importorskip("ibis")
            return ibis.duckdb.connect().create_table("users", frame)
        if engine == "spark":
            spark = request.getfixturevalue("spark_session")
            from pyspark.sql import types as T

            kinds = {"i": T.LongType(), "u": T.LongType(), "f": T.DoubleType(), "b": T.BooleanType()}
            schema = T.StructType([T.StructField(str(c), kinds.get(dt.kind, T.StringType()), True)
                                   for c, dt in frame.dtypes.items()])
            rows = frame.astype(object).where(frame.notna(), None).itertuples(index=False, name=None)
            return spark.createDataFrame(list(rows), schema=schema)
        if engine == "postgres":
            con = request.getfixturevalue("postgres_con")
            name = f"dpkit_test_{uuid.uuid4().hex[:12]}"
            t = con.create_table(name, frame)
            dropped.append((con, name))
            return t
        raise ValueError(engine)

    yield convert
    for con, name in dropped:
        con.drop_table(name, force=True)
