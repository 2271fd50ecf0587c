"""Assembling the result of a :mod:`dpkit.tables` release: the long result frame (``docs/tables.md``) and the
free post-processing of its values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dpkit.core import _validate as check
from dpkit.core.errors import InvalidParameter, WrongType
from dpkit.tables._query import Query, Statistic

RESULT_COLUMNS = ["query", "statistic", "column", "group", "bin", "value", "lo", "hi", "mechanism", "postprocessed"]


class Rows:
    """The result rows of one query, in release order."""

    def __init__(self, q: Query, prefix: Mapping[int, str] | None = None) -> None:
        self.query = q
        self.prefix = dict(prefix or {})  # id(statistic) -> mechanism prefix (privately found bounds)
        self.records: list[dict[str, Any]] = []
        self.synthetic: dict[str, Any] = {}  # statistic label -> released table (the synthetic kind)

    def emit(self, st: Statistic, group: tuple[Any, ...], bin_: str, value: float, lo: float, hi: float,
             mech: str, column: str | None = None, *, postprocessed: bool = False) -> None:
        q = self.query
        rec = {"query": q.name, "statistic": st.kind,
               "column": st.kind_class.column_text(st) if column is None else column,
               "group": ", ".join(f"{c}={v}" for c, v in zip(q.by, group, strict=True)), "bin": bin_,
               "value": float(value), "lo": float(lo), "hi": float(hi),
               "mechanism": self.prefix.get(id(st), "") + mech, "postprocessed": bool(postprocessed)}
        for c, v in zip(q.by, group, strict=True):
            rec[c] = v
        self.records.append(rec)

    def frame(self, post: dict[str, Any]) -> Any:
        import pandas as pd

        q = self.query
        frame = pd.DataFrame.from_records(self.records, columns=RESULT_COLUMNS + list(q.by))
        if post:
            frame = apply_postprocess(frame, post, q)
        return frame


def postprocess_options(post: Any) -> dict[str, Any]:
    """Validate ``Session.release``'s ``postprocess`` (``nonnegative``, ``round``)."""
    if post is None:
        return {}
    if not isinstance(post, Mapping):
        raise WrongType("postprocess", "a mapping like {'nonnegative': True, 'round': True}")
    out = {}
    for k, v in post.items():
        if k not in ("nonnegative", "round"):
            raise InvalidParameter("postprocess", f"unknown option {k!r} (nonnegative, round)")
        if k == "round" and not isinstance(v, bool):
            v = check.integer("postprocess", v, minimum=0)
        elif not isinstance(v, bool):
            raise WrongType("postprocess", "booleans")
        out[k] = v
    return out


def apply_postprocess(frame: Any, post: dict[str, Any], q: Query) -> Any:
    """Post-processing of released values (free): ``nonnegative`` clips the rows of the statistics whose kind
    counts (counts, histograms, contingency tables) and of sums with ``lo >= 0`` at zero (a statistic's rows are
    those with its kind and column); ``round`` rounds every value (``True``: to an integer, ``n``: to ``n``
    decimals). ``postprocessed`` marks the rows whose value changed (and keeps the rows a kind already marked:
    marginals made consistent by a model fit)."""
    vals = frame["value"].to_numpy(dtype=float).copy()
    orig = vals.copy()
    if post.get("nonnegative"):
        pairs = {(st.kind, c) for st in q.statistics if st.kind_class.is_nonnegative(st)
                 for c in st.kind_class.columns_texts(st)}
        keys = zip(frame["statistic"].tolist(), frame["column"].tolist(), strict=True)
        mask = np.array([k in pairs for k in keys], dtype=bool)
        vals[mask] = np.maximum(vals[mask], 0.0)
    r = post.get("round")
    if r is not None and r is not False:
        vals = np.round(vals, 0 if r is True else int(r))
    frame = frame.copy()
    frame["value"] = vals
    changed = ~((vals == orig) | (np.isnan(vals) & np.isnan(orig)))
    frame["postprocessed"] = frame["postprocessed"].to_numpy(dtype=bool) | changed
    return frame
