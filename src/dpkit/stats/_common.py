"""Shared private helpers of :mod:`dpkit.stats` and :mod:`dpkit.stability`.

Every statistic follows the mechanism contract of ``docs/design.md``: validate everything (typed errors
naming the parameter, never a value), compute the cost and scales from public quantities, charge the
accountant **once** for the whole statistic, and only then touch the randomness. Sub-steps then call the
primitive mechanisms with ``accountant=None`` (already paid for).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpkit.core import _exact
from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter
from dpkit.core.neighbours import AddRemove, PrivacyUnit, Replace, validate_neighbours
from dpkit.core.privacy import PrivacyLoss
from dpkit.mechanisms._release import charge, check_description, resolve_accountant
from dpkit.noise import source as _source

NAN_POLICIES = check.NAN_POLICIES


data = check.real_data
bounds = check.bounds
clamp = check.clamp


def neighbours_of(neighbours: Any, accountant: Any) -> Any:
    """The neighbour relation: the explicit one, else the accountant's, else add/remove one record.
    An explicit relation that differs from the accountant's is refused."""
    accountant = resolve_accountant(accountant)  # a wrong type is a WrongType, before its attributes are read
    if neighbours is None:
        return accountant.neighbours if accountant is not None else AddRemove()
    nb = validate_neighbours(neighbours)
    if accountant is not None and nb != accountant.neighbours:
        raise InvalidParameter("neighbours", "differs from the accountant's neighbour relation")
    return nb


def unit_rows(nb: Any) -> int:
    """How many records one neighbour step may add or remove (``max_rows`` of a privacy unit, else 1).

    Under a :class:`PrivacyUnit` the caller must already have bounded each unit's contribution to
    ``max_rows`` records (``dpkit.tables`` does this); statistics then scale their sensitivities by it.
    """
    if isinstance(nb, PrivacyUnit):
        return int(nb.max_rows)
    return 1


def is_replace(nb: Any) -> bool:
    return isinstance(nb, Replace)


def setup(accountant: Any, rng: Any, description: Any) -> tuple[Any, Any, str]:
    """Validate the accountant, the random source and the description (before any charge)."""
    return resolve_accountant(accountant), _source.resolve(rng), check_description(description)


def pay(accountant: Any, cost: PrivacyLoss, *, mechanism: str, rng: Any, params: Mapping[str, Any],
        sensitivity: float | None = None, scale: float | None = None, description: str = "") -> Any:
    """The one charge of a statistic (before any randomness is used). Returns the receipt or None."""
    return charge(accountant, cost, mechanism=mechanism, sensitivity=sensitivity, scale=scale, params=params,
                  secure=rng.secure, description=description)


def split(epsilon: float, shares: Any, name: str = "split") -> list[float]:
    """Split ``epsilon`` into positive parts proportional to ``shares`` (public): each part is rounded down
    and their exact (rational) sum is at most ``epsilon`` (:func:`dpkit.core._exact.split_budget`)."""
    return _exact.split_budget(epsilon, shares, name=name, total_name="epsilon")
