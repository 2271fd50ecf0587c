"""Shared helpers for the histogram tests."""

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dpkit import (
    InvalidData,
    InvalidParameter,
    PrivacyUnit,
    PureDP,
    Replace,
    WrongType,
    deterministic_source,
)


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


# The contract checks (one charge before the first random byte, a refused call draws and charges nothing, typed
# errors that never echo a value) are dpkit.audit.testing's assert_charges_first / assert_refused_cleanly; these
# are the arguments the histogram tests give them.

#: A valid call that the bad-input tests modify: its counts hold a value that no error message may show.
REFUSAL_CALL = ([7, 12345, 3], 1.0)
#: Texts no error message of a refused call may contain (the data value 12345 and the bad count 2.5).
REFUSAL_SECRETS = ("12345", "2.5")
#: ``fn(counts, 0.6, ...)`` is charged ``PureDP(0.6)`` once against a ``PureDP(1.0)`` budget (a second call is
#: refused): ``assert_charges_first(fn, (counts, 0.6), kwargs, name=..., **ONE_CHARGE)``.
ONE_CHARGE = {"cost": PureDP(0.6), "budget": PureDP(1.0)}


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
