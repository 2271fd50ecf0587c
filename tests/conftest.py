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
