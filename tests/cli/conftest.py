"""Every CLI test runs with its own default ledger: the real per-user ledger (~/.local/share/dpkit) is never
touched. ``DPKIT_LEDGER`` points into the test's tmp_path and ``XDG_DATA_HOME`` / ``HOME`` too (for the tests
that unset ``DPKIT_LEDGER`` to exercise the per-user default)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_default_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "xdg-data"))
    path = tmp_path / "user-ledger" / "ledger.sqlite"
    monkeypatch.setenv("DPKIT_LEDGER", str(path))
    return path
