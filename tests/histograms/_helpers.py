"""Shared helpers for the histogram tests."""

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from dpkit import (
    Accountant,
    BudgetExceeded,
    InvalidData,
    InvalidParameter,
    PrivacyUnit,
    PureDP,
    Replace,
    WrongType,
    deterministic_source,
)
from dpkit.audit.testing import CountingSource, watch_charges


def neighbours(x: Sequence[int], replace: bool) -> Iterator[list[int]]:
    """Histograms adjacent to x: add one record (add/remove), or move one record between bins (replace-one)."""
    for j in range(len(x)):
        y = list(x)
        y[j] += 1
        if not replace:
            yield y
        else:
            for i in range(len(x)):
                if i != j and x[i] > 0:
                    z = list(y)
                    z[i] -= 1
                    yield z


def assert_refused_cleanly(fn: Callable[..., Any], kwargs: dict[str, Any], err: type[Exception], param: str,
                           **defaults: Any) -> None:
    """``fn(counts, epsilon, **rest)`` with bad ``kwargs`` (merged over ``counts=[7, 12345, 3]``, ``epsilon=1``
    and ``defaults``) raises ``err`` naming ``param``; the message echoes no data value; nothing is charged
    and no random byte is drawn."""
    acct = Accountant(PureDP(10.0))
    src = CountingSource(1)
    args = {"counts": [7, 12345, 3], "epsilon": 1.0, **defaults, **kwargs}
    counts, eps = args.pop("counts"), args.pop("epsilon")
    with pytest.raises(err) as info:
        fn(counts, eps, accountant=acct, rng=src, **args)
    assert info.value.param == param
    assert "12345" not in str(info.value) and "2.5" not in str(info.value)
    assert len(acct.receipts) == 0 and src.consumed == 0


def assert_one_charge(fn: Callable[..., Any], counts: Any, mechanism: str, **kwargs: Any) -> Any:
    """``fn(counts, 0.6, **kwargs)`` charges ``PureDP(0.6)`` exactly once, before its first random byte, with a
    receipt naming ``mechanism``, and returns a float64 estimate of every bin; a second call that the budget
    refuses draws nothing and charges nothing. Returns the first release."""
    acct = Accountant(PureDP(1.0))
    src = CountingSource(7)
    seen = watch_charges(acct, src)
    rel = fn(counts, 0.6, accountant=acct, rng=src, **kwargs)
    assert seen == [0] and src.consumed > 0
    assert len(acct.receipts) == 1 and rel.cost == PureDP(0.6) and rel.receipt.cost == PureDP(0.6)
    assert rel.receipt.mechanism == mechanism and rel.secure is False
    assert rel.value.dtype == np.float64 and rel.value.shape == np.shape(counts)
    before = src.consumed
    with pytest.raises(BudgetExceeded):
        fn(counts, 0.6, accountant=acct, rng=src, **kwargs)
    assert src.consumed == before and len(acct.receipts) == 1
    return rel


# Bad 2-D counts and budgets that every 2-D histogram algorithm must refuse (typed error naming the parameter).
BAD_2D = [
    ({"counts": [1, 2, 3]}, InvalidData, "counts"),
    ({"counts": [[1, -2], [3, 4]]}, InvalidData, "counts"),
    ({"counts": [[1, 2.5], [3, 4]]}, InvalidData, "counts"),
    ({"counts": [[1, float("nan")], [3, 4]]}, InvalidData, "counts"),
    ({"counts": [[1, float("inf")], [3, 4]]}, InvalidData, "counts"),
    ({"counts": np.zeros((0, 3))}, InvalidData, "counts"),
    ({"counts": np.zeros((2, 2, 2))}, InvalidData, "counts"),
    ({"counts": None}, WrongType, "counts"),
    ({"counts": "abc"}, WrongType, "counts"),
    ({"counts": [["a", "b"]]}, WrongType, "counts"),
    ({"epsilon": 0.0}, InvalidParameter, "epsilon"),
    ({"epsilon": -1.0}, InvalidParameter, "epsilon"),
    ({"epsilon": float("nan")}, InvalidParameter, "epsilon"),
    ({"epsilon": float("inf")}, InvalidParameter, "epsilon"),
    ({"epsilon": "1"}, WrongType, "epsilon"),
]


def assert_relation_sensitivities(fn: Callable[..., Any], counts: Any) -> None:
    """``params["sensitivity"]`` is 1 under add/remove (the default), 2 under replace-one and ``max_rows`` under
    a privacy unit."""
    assert fn(counts, 1.0, rng=deterministic_source(1)).params["sensitivity"] == 1
    assert fn(counts, 1.0, neighbours=Replace(), rng=deterministic_source(1)).params["sensitivity"] == 2
    rel = fn(counts, 1.0, neighbours=PrivacyUnit("user", max_rows=3), rng=deterministic_source(1))
    assert rel.params["sensitivity"] == 3
