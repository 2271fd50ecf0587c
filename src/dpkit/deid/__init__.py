"""De-identification analysis: why removing names, k-anonymity and aggregation give no guarantee, measured.

Not differential privacy: these tools *describe* one table (who is unique on which columns, whether it is
k-anonymous, what a linkage or differencing attack recovers) so that a data holder can see the risk that DP
removes. Everything is computed from group-by sizes (never the O(n²) row comparisons of the textbook checker);
NULL is a value of its own. ``dpkit deid FILE --quasi-identifiers ...`` writes the "why DP" HTML report
(``docs/cli.md``); the guide is ``docs/guides/deid.md``.

- :func:`uniqueness`, :func:`group_sizes`: unique rows, class sizes, prosecutor risk, per subset of columns.
- :func:`k_anonymity`, :func:`is_k_anonymous`, :func:`l_diversity`: the checks; :func:`row_classes`: each
  row's equivalence class; :func:`read_table`, :func:`table_columns`: reading a CSV/Parquet file.
- :func:`k_anonymize`, :func:`generalize`, :func:`truncate_digits` and the hierarchies :class:`Bins`,
  :class:`Digits`, :class:`Prefix`, :class:`Dates`, :class:`Suppress`: generalization and suppression.
- :func:`linkage_attack`, :func:`differencing_attack`: the attacks of Near & Abuah ch. 2, the latter with its
  DP counterpart.
"""

from dpkit.deid.attacks import Differencing, Linkage, differencing_attack, linkage_attack
from dpkit.deid.generalize import (
    Anonymization,
    Bins,
    Dates,
    Digits,
    Hierarchy,
    Prefix,
    Suppress,
    default_hierarchy,
    generalize,
    k_anonymize,
    truncate_digits,
)
from dpkit.deid.risk import (
    MAX_COLUMNS,
    KAnonymity,
    LDiversity,
    SubsetRisk,
    Uniqueness,
    group_sizes,
    is_k_anonymous,
    k_anonymity,
    l_diversity,
    read_table,
    row_classes,
    table_columns,
    uniqueness,
)

__all__ = [
    "MAX_COLUMNS",
    "Anonymization",
    "Bins",
    "Dates",
    "Differencing",
    "Digits",
    "Hierarchy",
    "KAnonymity",
    "LDiversity",
    "Linkage",
    "Prefix",
    "SubsetRisk",
    "Suppress",
    "Uniqueness",
    "default_hierarchy",
    "differencing_attack",
    "generalize",
    "group_sizes",
    "is_k_anonymous",
    "k_anonymity",
    "k_anonymize",
    "l_diversity",
    "linkage_attack",
    "read_table",
    "row_classes",
    "table_columns",
    "truncate_digits",
    "uniqueness",
]
