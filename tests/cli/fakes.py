"""A stand-in for the dpkit.tables engine: hand-made result frames, one charge per query (tests only)."""

from __future__ import annotations

import itertools
from typing import Any

import pandas as pd

from dpkit.cli.spec import QuerySpec, Spec
from dpkit.core.accountant import Accountant
from dpkit.core.privacy import PrivacyLoss

ADULT_SPEC = """
name = "test release"
[data]
source = "adult"
[budget]
epsilon = 1.0
[[query]]
name = "by sex"
group_by = "sex"
statistics = [{ stat = "count" }, { stat = "mean", column = "age", bounds = [0, 100] }]
[[query]]
name = "age histogram"
stat = "histogram"
column = "age"
edges = [0, 30, 60, 100]
"""


class FakeSession:
    def __init__(self, spec: Spec, budget: PrivacyLoss, rng: Any) -> None:
        self.accountant = Accountant(budget, neighbours=spec.neighbours)
        self.rng = rng
        self.draws = 0


class FakeEngine:
    """``fail_on``: a query name whose release raises (after its charge); ``labels``: group labels to use."""

    def __init__(self, *, fail_on: str | None = None, labels: list[str] | None = None) -> None:
        self.fail_on = fail_on
        self.labels = labels
        self.opened = 0
        self.released: list[str] = []

    def open(self, spec: Spec, budget: PrivacyLoss, rng: Any) -> FakeSession:
        self.opened += 1
        return FakeSession(spec, budget, rng)

    def plan(self, session: FakeSession, query: QuerySpec, budget: PrivacyLoss) -> pd.DataFrame:
        total = sum(s.weight for s in query.statistics)
        rows = []
        for s in query.statistics:
            eps = budget.epsilon * s.weight / total
            rows.append({"query": query.name, "statistic": s.stat, "column": s.column or "",
                         "mechanism": "discrete_laplace", "epsilon": eps, "scale": 1 / eps,
                         "half_width_95": 3.0 / eps})
        return pd.DataFrame(rows)

    def _groups(self, query: QuerySpec) -> list[str]:
        if self.labels is not None:
            return self.labels
        if not query.group_by:
            return [""]
        assert isinstance(query.keys, dict)
        combos = itertools.product(*(query.keys[c] for c in query.group_by))
        return [", ".join(f"{c}={v}" for c, v in zip(query.group_by, k, strict=True)) for k in combos]

    def release(self, session: FakeSession, query: QuerySpec, budget: PrivacyLoss) -> pd.DataFrame:
        secure = session.rng.secure if session.rng is not None else True
        session.accountant.charge(budget, mechanism="fake-query", description=query.name, secure=secure)
        if query.name == self.fail_on:
            raise RuntimeError("injected failure")
        self.released.append(query.name)
        rows = []
        for s in query.statistics:
            bins = [""]
            if s.stat == "histogram" and s.edges is not None:
                bins = [f"[{a:g}, {b:g})" for a, b in itertools.pairwise(s.edges)]
            for g in self._groups(query):
                for b in bins:
                    v = 1000.0 + 37.25 * len(rows)
                    rows.append({"query": query.name, "statistic": s.stat, "column": s.column or "", "group": g,
                                 "bin": b, "value": v, "lo": v - 12.5, "hi": v + 12.5,
                                 "mechanism": "discrete_laplace(scale=5)", "postprocessed": False})
        return pd.DataFrame(rows)

    def charges(self, session: FakeSession) -> tuple:
        return session.accountant.receipts
