"""The identity of a source, recorded in a :class:`~dpkit.core.ledger.Ledger` so that the same data released
under a new dataset name is detected (a fresh budget for data the ledger has seen) — issue #11.

- a file path (CSV/Parquet): the SHA-256 of its bytes (:func:`dpkit.core.ledger.file_fingerprint`);
- ``"adult"``: the SHA-256 of the bundled data's original file (``adult.data.gz``, a constant);
- a frame (pandas/Polars/Arrow), an ibis table, a Spark DataFrame or a PostgreSQL table: a content hash computed
  in the engine in one pass — the row count and the sum (exact, ``decimal(38, 0)``) of a 64-bit hash of every
  row — together with the column names and types. It does not depend on the row order, so a reordered copy of
  the same rows is the same source; any changed cell, added or removed row gives another fingerprint.

Only byte-identical (file) or cell-identical (engine) copies are recognised: an edited copy is new data as far
as the ledger can tell. The fingerprint is the curator's bookkeeping, never released.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from dpkit.core.errors import LedgerError
from dpkit.core.ledger import file_fingerprint

__all__ = ["source_fingerprint"]


def _bundled_adult() -> str:
    # The identity of UCI's adult.data as dpkit first shipped it (gzip): fixed, so that ledgers written before the
    # data moved to a compact archive still recognise it (the archive's test checks it reproduces that file).
    from dpkit.datasets.adult import GZ_SHA256

    return "sha256:" + GZ_SHA256


def _backend(table: Any) -> str:
    try:
        return str(table._find_backend(use_default=False).name)
    except Exception:  # an unbound expression
        return "ibis"


def source_fingerprint(source: Any, table: Any = None) -> tuple[str, str]:
    """``(fingerprint, kind)`` of a source as :class:`~dpkit.tables.Session` accepts it.

    ``table`` is the ibis table the session loaded from ``source`` (needed for every source that is not a path;
    the content hash runs in its engine, through dpkit's engine boundary). ``kind`` is ``"csv"``,
    ``"parquet"``, ``"bundled:adult"``, ``"frame:<module>"``, ``"spark"`` or ``"ibis:<backend>"``.
    Raises :class:`LedgerError` (a file that cannot be read) or :class:`EngineError`; never a data value.
    """
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path == "adult":
            return _bundled_adult(), "bundled:adult"
        low = path.lower()
        kind = "parquet" if low.endswith((".parquet", ".pq")) else "csv"
        return file_fingerprint(path), kind
    if table is None:
        raise LedgerError("the source's table is needed to fingerprint a frame or database table")
    from dpkit.tables._engine import guarded
    from dpkit.tables._session import _key_hash

    mod = (type(source).__module__ or "").split(".")[0]
    if mod == "pyspark":
        kind = "spark"
    elif mod in ("pandas", "polars", "pyarrow"):
        kind = f"frame:{mod}"
    else:
        kind = f"ibis:{_backend(table)}"
    schema = guarded(lambda: table.schema(), what="reading the schema")
    cols = list(schema.names)
    row = _key_hash(table, {f"_c{i}": table[c] for i, c in enumerate(cols)})
    expr = table.aggregate(_n=table.count(), _h=row.cast("decimal(38, 0)").sum())
    res = guarded(lambda: expr.execute(), what="fingerprinting the source")
    n = int(res["_n"].iloc[0])
    h = res["_h"].iloc[0]
    total = 0 if h is None or (isinstance(h, float) and h != h) else int(h)
    digest = hashlib.sha256()
    for part in (repr([(c, str(schema[c])) for c in cols]), str(n), str(total)):  # the content, not the container
        digest.update(part.encode("utf-8"))
        digest.update(b"\x1f")
    return "sha256:" + digest.hexdigest(), kind
