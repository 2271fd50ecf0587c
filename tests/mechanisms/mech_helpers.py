"""Shared helpers for the mechanism tests (statistical thresholds: p-value 1e-7)."""

from __future__ import annotations

from dpkit.audit.testing import CountingSource, chi2_pvalue

__all__ = ["P_MIN", "CountingSource", "chi2_pvalue"]

P_MIN = 1e-7  # a correct implementation fails a statistical test with probability < 1e-7

