"""Neighbour relations: which pairs of datasets differential privacy protects against.

A DP guarantee is a statement about every pair of *neighbouring* datasets, so the
relation is part of the guarantee and every :class:`~dpkit.core.accountant.Accountant`
carries one explicitly. Three relations are provided:

- :class:`AddRemove` (the default; "unbounded DP"): D' is D with one record added or
  removed. This is the relation used throughout Li et al., *Differential Privacy: From
  Theory to Practice*, and the only record-level relation under which parallel
  composition holds (their Prop 2.5 / 2.7).
- :class:`Replace` ("bounded DP"): D' is D with one record replaced by another; |D| is
  public. A replacement is a removal plus an addition, so the L1 sensitivity of a
  histogram doubles (a record leaves one bin and enters another) and ε-add/remove DP
  implies 2ε-replace DP. **Parallel composition is not valid** under this relation
  (Li et al. Prop 2.7: the partition sizes would reveal which part changed), so
  :meth:`Accountant.parallel <dpkit.core.accountant.Accountant.parallel>` refuses it.
- :class:`PrivacyUnit` (user-level DP): D' is D with *all* the records of one privacy
  unit (e.g. a user id in ``column``) added or removed. The caller declares, and must
  enforce by contribution bounding before any mechanism runs, that a unit contributes
  at most ``max_rows`` rows in total, to at most ``max_groups`` partitions, and at most
  ``max_rows_per_group`` rows to any one partition. The histogram L1 sensitivity is
  ``max_rows``; parallel composition over disjoint partitions costs ``k`` times the
  per-part budget where ``k = min(max_groups, max_rows)`` (a unit can change at most
  ``k`` parts), and is refused when ``max_groups`` is None (unbounded).

All relations are immutable, comparable by value and JSON-serialisable
(:meth:`to_dict` / :func:`neighbours_from_dict`) so that the persistent ledger can
check that a dataset is always accounted under the same relation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, LedgerError, WrongType

__all__ = ["AddRemove", "Neighbours", "PrivacyUnit", "Replace", "neighbours_from_dict", "validate_neighbours"]


@dataclass(frozen=True)
class AddRemove:
    """Add/remove one record (unbounded DP). Histogram L1 sensitivity 1; parallel composition allowed."""

    @property
    def allows_parallel(self) -> bool:
        return True

    @property
    def histogram_sensitivity(self) -> float:
        """L1 sensitivity of a histogram (count vector) with data-independent bins: 1."""
        return 1.0

    @property
    def parallel_multiplier(self) -> int:
        """How many disjoint parts one neighbour change can touch: 1."""
        return 1

    def describe(self) -> str:
        return "add/remove one record (unbounded DP)"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "AddRemove"}


@dataclass(frozen=True)
class Replace:
    """Replace one record (bounded DP). Histogram L1 sensitivity 2; parallel composition forbidden
    (Li et al. Prop 2.7)."""

    @property
    def allows_parallel(self) -> bool:
        return False

    @property
    def histogram_sensitivity(self) -> float:
        """L1 sensitivity of a histogram: 2 (one bin loses a record, another gains it)."""
        return 2.0

    @property
    def parallel_multiplier(self) -> int | None:
        """None: parallel composition does not hold under replace-one."""
        return None

    def describe(self) -> str:
        return "replace one record (bounded DP; |D| public; parallel composition not valid)"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "Replace"}


@dataclass(frozen=True)
class PrivacyUnit:
    """Add/remove all the records of one privacy unit (e.g. one user id in ``column``).

    The bounds are *declarations*: the caller must enforce them (drop or sample a unit's
    excess rows with a data-independent rule) before any mechanism sees the data.

    Parameters
    ----------
    column:
        Name of the column holding the unit identifier (documentation; never read here).
    max_rows:
        Maximum number of rows one unit contributes in total (>= 1). A histogram's L1
        sensitivity is ``max_rows``.
    max_groups:
        Maximum number of partitions one unit contributes to (>= 1), or None when
        unbounded. Parallel composition costs ``min(max_groups, max_rows)`` times the
        per-part budget and is refused when this is None.
    max_rows_per_group:
        Maximum rows of one unit in any one partition (>= 1, <= ``max_rows``), or None
        (then ``max_rows``). Mechanisms run inside a partition use it as their
        per-partition contribution bound.
    """

    column: str
    max_rows: int
    max_groups: int | None = None
    max_rows_per_group: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.column, str):
            raise WrongType("column", "a string")
        if not self.column:
            raise InvalidParameter("column", "must not be empty")
        object.__setattr__(self, "max_rows", check.integer("max_rows", self.max_rows, minimum=1))
        if self.max_groups is not None:
            object.__setattr__(self, "max_groups", check.integer("max_groups", self.max_groups, minimum=1))
        if self.max_rows_per_group is not None:
            m = check.integer("max_rows_per_group", self.max_rows_per_group, minimum=1)
            if m > self.max_rows:
                raise InvalidParameter("max_rows_per_group", "must be <= max_rows")
            object.__setattr__(self, "max_rows_per_group", m)

    @property
    def allows_parallel(self) -> bool:
        return self.max_groups is not None

    @property
    def histogram_sensitivity(self) -> float:
        """L1 sensitivity of a histogram: ``max_rows`` (all of a unit's rows may move)."""
        return float(self.max_rows)

    @property
    def rows_per_group(self) -> int:
        """The per-partition contribution bound (``max_rows_per_group`` or ``max_rows``)."""
        return self.max_rows_per_group if self.max_rows_per_group is not None else self.max_rows

    @property
    def parallel_multiplier(self) -> int | None:
        """``min(max_groups, max_rows)``: the number of disjoint parts one unit can change; None if unbounded."""
        if self.max_groups is None:
            return None
        return min(self.max_groups, self.max_rows)

    def describe(self) -> str:
        groups = "unbounded" if self.max_groups is None else f"<= {self.max_groups}"
        return (f"add/remove one privacy unit (column {self.column!r}): <= {self.max_rows} rows, "
                f"{groups} partitions, <= {self.rows_per_group} rows per partition")

    def to_dict(self) -> dict[str, Any]:
        return {"type": "PrivacyUnit", "column": self.column, "max_rows": self.max_rows,
                "max_groups": self.max_groups, "max_rows_per_group": self.max_rows_per_group}


Neighbours = AddRemove | Replace | PrivacyUnit
_NEIGHBOUR_TYPES = (AddRemove, Replace, PrivacyUnit)


def validate_neighbours(value: Any, name: str = "neighbours") -> Neighbours:
    """``value`` if it is a neighbour relation, else :class:`WrongType` naming ``name``."""
    if not isinstance(value, _NEIGHBOUR_TYPES):
        raise WrongType(name, "AddRemove(), Replace() or PrivacyUnit(...)")
    return value


def neighbours_from_dict(d: Any) -> Neighbours:
    """Inverse of ``to_dict`` (used by the ledger); :class:`LedgerError` on a malformed record."""
    try:
        kind = d["type"]
        if kind == "AddRemove":
            return AddRemove()
        if kind == "Replace":
            return Replace()
        if kind == "PrivacyUnit":
            return PrivacyUnit(d["column"], d["max_rows"], d.get("max_groups"), d.get("max_rows_per_group"))
    except (KeyError, TypeError, ValueError) as exc:
        raise LedgerError("malformed neighbour relation in the ledger") from exc
    raise LedgerError("unknown neighbour relation in the ledger")
