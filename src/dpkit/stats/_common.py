"""Private helpers of :mod:`dpkit.stats`: thin re-exports of shared infrastructure.

Every statistic follows the mechanism contract (``docs/design.md``, :mod:`dpkit.mechanisms.contract`): a private
plan builder validates everything (typed errors naming the parameter, never a value) and computes the cost and
scales from public quantities; the public function is ``run(plan, accountant=, rng=, description=)``, which
charges the whole cost **once** and only then draws. Composite statistics draw their sub-plans with
:meth:`~dpkit.mechanisms.contract.Plan.sample` (already paid for).

This module only re-exports: 1-D data and bounds checks from :mod:`dpkit.core._validate`, the neighbour helpers
of :mod:`dpkit.mechanisms.contract` and the budget splitter of :mod:`dpkit.core._exact`. ``setup`` and ``pay``
remain only for the committed ``dpkit.tables`` code that still imports them from here (transitional: to be
removed once tables runs its plans through the contract); :mod:`dpkit.stats` itself no longer uses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.privacy import PrivacyLoss
from dpkit.mechanisms._release import charge, check_description, resolve_accountant
from dpkit.mechanisms.contract import is_replace, resolve_neighbours, unit_rows
from dpkit.noise import source as _source

if TYPE_CHECKING:
    from dpkit.core.accountant import Accountant
    from dpkit.noise.source import RandomSource

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


# -- transitional: for families that do not run their plans through the contract yet ----------------
def setup(accountant: Accountant | None, rng: RandomSource, description: str) -> tuple[Any, Any, str]:
    """Validate the accountant, the random source and the description (before any charge)."""
    return resolve_accountant(accountant), _source.resolve(rng), check_description(description)


def pay(accountant: Accountant | None, cost: PrivacyLoss, *, mechanism: str, rng: RandomSource,
        params: Mapping[str, Any], sensitivity: float | None = None, scale: float | None = None,
        description: str = "") -> Any:
    """The one charge of a statistic (before any randomness is used). Returns the receipt or None."""
    return charge(accountant, cost, mechanism=mechanism, sensitivity=sensitivity, scale=scale, params=params,
                  secure=rng.secure, description=description)
