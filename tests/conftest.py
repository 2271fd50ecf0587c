"""Shared test settings.

Statistical tests are seeded (deterministic source) and sized so that a correct implementation fails
with probability below 1e-6. Tests marked ``slow`` run at a CI size by default; set ``DPKIT_FULL=1``
to run them at full size.
"""

from __future__ import annotations

import os

import pytest

from dpkit.noise.source import deterministic_source

FULL = os.environ.get("DPKIT_FULL", "") == "1"


def sized(ci: int, full: int) -> int:
    """The sample size for a statistical test: ``full`` under DPKIT_FULL=1, else ``ci``."""
    return full if FULL else ci


@pytest.fixture
def rng():
    """A fresh deterministic (insecure, test-only) randomness source."""
    return deterministic_source(20261121)


@pytest.fixture(scope="session", autouse=True)
def _no_real_user_ledger(tmp_path_factory: pytest.TempPathFactory):
    """No test may touch the real per-user ledger (~/.local/share/dpkit): for the whole session the default
    ledger ($DPKIT_LEDGER) and the per-user data folders point into a temporary folder (tests/cli narrows this
    to one ledger per test)."""
    base = tmp_path_factory.mktemp("dpkit-user")
    saved = {k: os.environ.get(k) for k in ("DPKIT_LEDGER", "XDG_DATA_HOME", "LOCALAPPDATA")}
    os.environ["DPKIT_LEDGER"] = str(base / "ledger.sqlite")
    os.environ["XDG_DATA_HOME"] = str(base / "xdg-data")
    os.environ["LOCALAPPDATA"] = str(base / "localappdata")
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
