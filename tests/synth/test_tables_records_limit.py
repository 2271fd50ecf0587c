"""The tables ``synthetic`` / ``marginals`` kinds take their records as weighted cells (never expanded): the
records limit is 2^40 - 1 when the attributes have at most MAX_RECORDS cells in all, MAX_RECORDS otherwise
(the group-by is read into memory). Checked with a lowered MAX_RECORDS; refusals before any charge."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

import dpkit  # noqa: E402
from dpkit.core.errors import InvalidData  # noqa: E402
from dpkit.noise import deterministic_source  # noqa: E402
from dpkit.tables import Session  # noqa: E402


def _frame(n: int = 600) -> Any:
    g = np.random.default_rng(1)  # test data only
    return pd.DataFrame({"sex": g.choice(["F", "M"], n), "edu": g.choice(["a", "b", "c"], n),
                         "age": g.integers(17, 100, n)})


@pytest.mark.parametrize("kind", ["synthetic", "marginals"])
def test_small_domains_take_more_records_than_max_records(monkeypatch: Any, kind: str) -> None:
    from dpkit.tables import _synth_kinds

    monkeypatch.setattr(_synth_kinds, "MAX_RECORDS", 100)  # 600 rows > 100, but 2 * 3 * 4 = 24 cells
    s = Session(_frame(), budget=dpkit.ZCDP(10.0), rng=deterministic_source(2))
    q = s.query("q")
    kw: dict[str, Any] = {"domains": {"sex": ["F", "M"], "edu": ["a", "b", "c"]},
                          "bins": {"age": [17, 30, 50, 70, 100]}}
    stat = (q.synthetic(["sex", "edu", "age"], iters=50, rows=50, **kw) if kind == "synthetic"
            else q.marginals(["sex", "edu", "age"], sets=[("sex", "edu"), ("edu", "age")], **kw))
    res = s.release(stat, budget=dpkit.ZCDP(1.0))
    assert len(res) > 0 and len(s.accountant.receipts) == 1
    # more cells than MAX_RECORDS: the former limit applies, before the charge
    big = {"bins": {"age": list(range(17, 101))}, "domains": kw["domains"]}  # 2 * 3 * 83 = 498 cells
    stat = (q.synthetic(["sex", "edu", "age"], iters=50, rows=50, **big) if kind == "synthetic"
            else q.marginals(["sex", "edu", "age"], sets=[("sex", "edu")], **big))
    with pytest.raises(InvalidData) as exc:
        s.release(stat, budget=dpkit.ZCDP(1.0))
    assert exc.value.param == "data" and "100 rows" in str(exc.value)
    assert len(s.accountant.receipts) == 1
