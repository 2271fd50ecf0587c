"""Private helpers of :mod:`dpkit.stats`: thin re-exports of shared infrastructure.

Every statistic follows the mechanism contract (``docs/design.md``, :mod:`dpkit.mechanisms.contract`): a private
plan builder validates everything (typed errors naming the parameter, never a value) and computes the cost and
scales from public quantities; the public function is ``run(plan, accountant=, rng=, description=)``, which
charges the whole cost **once** and only then draws. Composite statistics draw their sub-plans with
:meth:`~dpkit.mechanisms.contract.Plan.sample` (already paid for).

This module only re-exports: 1-D data and bounds checks from :mod:`dpkit.core._validate`, the neighbour helpers
of :mod:`dpkit.mechanisms.contract` and the budget splitter of :mod:`dpkit.core._exact`.
"""

from __future__ import annotations

from typing import Any

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.mechanisms.contract import is_replace, resolve_neighbours, unit_rows

__all__ = ["NAN_POLICIES", "bounds", "clamp", "data", "is_replace", "neighbours_of", "split", "unit_rows"]

NAN_POLICIES = check.NAN_POLICIES

data = check.real_data
bounds = check.bounds
clamp = check.clamp
neighbours_of = resolve_neighbours


def split(epsilon: float, shares: Any, name: str = "split") -> list[float]:
    """Split ``epsilon`` into positive parts proportional to ``shares`` (public): each part is rounded down
    and their exact (rational) sum is at most ``epsilon`` (:func:`dpkit.core._exact.split_budget`)."""
    return _exact.split_budget(epsilon, shares, name=name, total_name="epsilon")

