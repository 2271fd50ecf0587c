"""Property-based fuzz of dpkit.tables' public surface (issue #11): for ANY input -- wrong types, None, NaN,
inf, huge ints, empty and odd frames, unknown columns, deep expressions -- only a dpkit error escapes, and a
refused call leaves ``session.accountant.spent`` (and the receipts) unchanged.

About 20 s in CI; ``DPKIT_FULL=1`` runs more examples. Seeded (hypothesis' derandomize): never flaky.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tests.conftest import sized  # noqa: E402

from dpkit.core.errors import DPKitError  # noqa: E402
from dpkit.core.privacy import ZCDP, ApproxDP, PureDP  # noqa: E402
from dpkit.noise.source import deterministic_source  # noqa: E402
from dpkit.tables import Query, Session, unit_of  # noqa: E402

COLUMNS = ["user_id", "age", "income", "state", "flag"]
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), database=None)


def _frame() -> Any:
    return pd.DataFrame({"user_id": [1, 1, 2, 3, 4, 5], "age": [20, 30, 40, 50, 60, 70],
                         "income": [1.0, float("nan"), 3.5, 1e300, -2.0, 0.0],
                         "state": ["CA", "NY", None, "CA", "TX", "NY"],
                         "flag": [True, False, True, True, False, False]})


# anything a caller might pass by mistake
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**400), max_value=10**400),
    st.integers(min_value=-5, max_value=100), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([*COLUMNS, "nope", "", "__class__", "age; drop table x"]), st.text(max_size=12),
    st.binary(max_size=4), st.sampled_from([float("nan"), float("inf"), -0.0, 1e308, 5e-324, 2**63, -(2**63) - 1]),
)
anything = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=6), inner, max_size=3),
    st.frozensets(st.integers(-3, 3), max_size=3)), max_leaves=6)
budgets = st.one_of(
    st.builds(PureDP, st.floats(0.01, 5.0)), st.builds(ZCDP, st.floats(0.01, 2.0)),
    st.builds(ApproxDP, st.floats(0.01, 5.0), st.floats(1e-9, 1e-3)), anything)
expressions = st.one_of(
    st.sampled_from(["age > 30", "income >= 0 and age < 60", "state in ['CA', 'NY']", "age // 10", "age + income",
                     "flag", "not flag", "age if flag else 0", "state == 1", "age.real", "__import__('os')",
                     "(" * 60 + "age" + ")" * 60, "not " * 600 + "flag", "+".join(["age"] * 150), "age ** 400",
                     "age * 10**30", "1e400 > age", "income / 0", "'\x00'", "age >", "lambda: 1"]),
    st.text(alphabet="age+-*/%()<>=! andornotif01.'", max_size=40), anything)

OPS = ["filter", "derive", "group_by", "count", "count_distinct", "sum", "mean", "variance", "quantiles",
       "histogram", "contingency"]


@st.composite
def op_calls(draw: Any) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    op = draw(st.sampled_from(OPS))
    col = draw(st.one_of(st.sampled_from(COLUMNS), anything))
    bounds = draw(st.one_of(st.sampled_from([(0, 100), (0.0, 1e6), (-1.0, 1.0), (5, 5), (10, 0)]), anything))
    if op == "filter":
        return op, (draw(expressions),), {}
    if op == "derive":
        name = draw(st.one_of(st.sampled_from(["d", "age", "x1", "class", "1x", "a" * 300]), st.text(max_size=5)))
        return op, (), {name: draw(expressions)}
    if op == "group_by":
        keys = draw(st.one_of(st.just("private"), st.just(["CA", "NY"]), st.just({"state": ["CA"]}), anything))
        return op, tuple(draw(st.lists(st.one_of(st.sampled_from(COLUMNS), anything), max_size=2))), {"keys": keys}
    if op in ("count", "count_distinct"):
        return op, (), draw(st.one_of(st.just({}), st.fixed_dictionaries({"weight": anything})))
    if op in ("sum", "mean", "variance"):
        return op, (col, bounds), draw(st.one_of(st.just({}), st.fixed_dictionaries({"granularity": anything}),
                                                 st.fixed_dictionaries({"weight": anything})))
    if op == "quantiles":
        levels = draw(st.one_of(st.just([0.5]), anything))
        return op, (col, levels, bounds), draw(st.one_of(st.just({}), st.fixed_dictionaries({"bins": anything})))
    if op == "histogram":
        return op, (col,), draw(st.one_of(st.fixed_dictionaries({"edges": anything}),
                                          st.fixed_dictionaries({"categories": anything}),
                                          st.just({"edges": [0, 50, 100]}), st.just({"categories": ["CA"]}),
                                          st.just({})))
    return op, (draw(st.one_of(st.just(["state", "flag"]), anything)),), {"domains": draw(anything)}


@pytest.fixture(scope="module")
def sessions() -> dict[str, Session]:
    return {"row": Session(_frame(), budget=ApproxDP(1e6, 1e-3), rng=deterministic_source(1)),
            "user": Session(_frame(), budget=ApproxDP(1e6, 1e-3), unit=unit_of("user_id", max_rows=2),
                            rng=deterministic_source(2), nan_policy="drop")}


def _call(fn: Any) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except DPKitError as exc:
        return None, exc


def _spent(s: Session) -> tuple[Any, int]:
    return s.accountant.spent, len(s.accountant.receipts)


@settings(max_examples=sized(500, 5000), **SETTINGS)
@given(which=st.sampled_from(["row", "user"]), calls=st.lists(op_calls(), min_size=1, max_size=6),
       budget=budgets, action=st.sampled_from(["plan", "check", "release", "solve"]), post=anything,
       noise=st.one_of(st.none(), st.sampled_from(["laplace", "gaussian"]), anything), targets=anything)
def test_query_builder_and_release_raise_only_dpkit_errors(sessions, which, calls, budget, action, post, noise,
                                                           targets):
    s = sessions[which]
    q: Any = s.query("fuzz")
    for op, args, kwargs in calls:
        before = _spent(s)
        nq, err = _call(lambda q=q, op=op, args=args, kwargs=kwargs: getattr(q, op)(*args, **kwargs))
        assert _spent(s) == before  # building reads nothing, charges nothing
        if err is None:
            assert isinstance(nq, Query)
            q = nq
    before = _spent(s)
    if action == "plan":
        _call(lambda: s.plan(q, budget, noise=noise))
    elif action == "check":
        _call(lambda: s.check(q))
    elif action == "solve":
        _call(lambda: s.solve(q, targets))
    else:
        res, err = _call(lambda: s.release(q, budget, postprocess=post, noise=noise))
        if err is None:
            assert len(s.accountant.receipts) == before[1] + 1
            assert all(isinstance(v, float) for v in res["value"])
            return
    assert _spent(s) == before


@settings(max_examples=sized(150, 1500), **SETTINGS)
@given(source=st.one_of(anything, st.sampled_from(["missing.csv", "x.parquet", "x.txt", "/", "a\x00b.csv"])),
       budget=budgets, unit=anything, nan_policy=anything, ledger=anything, rng=anything)
def test_session_constructor_raises_only_dpkit_errors(source, budget, unit, nan_policy, ledger, rng):
    if source == "adult":
        source = "not-adult"
    _call(lambda: Session(source, budget=budget, unit=unit, ledger=ledger, rng=rng, nan_policy=nan_policy))


@settings(max_examples=sized(150, 1500), **SETTINGS)
@given(column=anything, max_rows=anything, max_groups=anything, per_group=anything)
def test_unit_of_raises_only_dpkit_errors(column, max_rows, max_groups, per_group):
    _call(lambda: unit_of(column, max_rows=max_rows, max_groups=max_groups, max_rows_per_group=per_group))


@pytest.mark.parametrize("frame", [
    pd.DataFrame(), pd.DataFrame({"a": []}), pd.DataFrame({"a": [float("nan")] * 3}),
    pd.DataFrame({"a": [math.inf, -math.inf, 1.0]}), pd.DataFrame({"a": [2**63 - 1, -(2**63)]}),
    pd.DataFrame({"a": [10**30, 1]}, dtype=object), pd.DataFrame({"a": [None, None]}),
    pd.DataFrame({"a b": [1], "": [2]}), pd.DataFrame({("t", "u"): [1]}),
])
def test_odd_frames_raise_only_dpkit_errors(frame):
    s, err = _call(lambda: Session(frame, budget=PureDP(1.0), rng=deterministic_source(3), nan_policy="drop"))
    if err is not None:
        return
    for col in s.columns:
        for build in (lambda c=col: s.query().count(), lambda c=col: s.query().sum(c, (0, 10)),
                      lambda c=col: s.query().mean(c, (-1, 1)), lambda c=col: s.query().group_by(c, keys="private")
                      .count()):
            q, err = _call(build)
            if err is None:
                before = _spent(s)
                _, err = _call(lambda q=q: s.release(q, PureDP(0.1)))
                if err is not None:
                    assert _spent(s) == before


# near-valid inputs: right types, extreme values (so that releases do run, and extreme public parameters meet
# the engine and the calibration)
reals = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**30), 10**30),
                  st.sampled_from([0, 1, 100, 1e-300, 1e300, 2**53 + 1]))
pairs = st.tuples(reals, reals)


@st.composite
def near_valid(draw: Any) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    if draw(st.booleans()):
        calls.append(("filter", (draw(st.sampled_from(["age > 30", "income >= 0", "flag", "age < 1e308"])),), {}))
    if draw(st.booleans()):
        calls.append(("group_by", ("state",), {"keys": draw(st.sampled_from([["CA", "NY"], "private"]))}))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["count", "sum", "mean", "variance", "quantiles", "histogram"]))
        w = {"weight": draw(st.one_of(st.just(1.0), reals))}
        col = draw(st.sampled_from(["age", "income"]))
        if op == "count":
            calls.append((op, (), w))
        elif op == "quantiles":
            calls.append((op, (col, draw(st.lists(reals, min_size=1, max_size=3)), draw(pairs)),
                          {"bins": draw(st.one_of(st.just(16), st.integers(-3, 2**17)))}))
        elif op == "histogram":
            calls.append((op, (col,), {"edges": draw(st.lists(reals, min_size=0, max_size=5))}))
        else:
            g = draw(st.one_of(st.none(), reals))
            calls.append((op, (col, draw(st.one_of(st.just((0, 100)), pairs))), {"granularity": g, **w}))
    return calls


@settings(max_examples=sized(400, 4000), **SETTINGS)
@given(which=st.sampled_from(["row", "user"]), calls=near_valid(),
       budget=st.one_of(st.tuples(st.sampled_from([PureDP, ZCDP, ApproxDP]), reals, reals),
                        st.tuples(st.just(PureDP), st.floats(0.1, 10.0), st.just(0))),
       post=st.one_of(st.none(), st.just({"nonnegative": True, "round": 2})))
def test_near_valid_releases_raise_only_dpkit_errors(sessions, which, calls, budget, post):
    s = sessions[which]
    cls, a, b = budget
    budget, err = _call(lambda: cls(a, b) if cls is ApproxDP else cls(a))  # the budget types validate too
    if err is not None:
        return
    q: Any = s.query("fuzz")
    for op, args, kwargs in calls:
        nq, err = _call(lambda q=q, op=op, args=args, kwargs=kwargs: getattr(q, op)(*args, **kwargs))
        if err is not None:
            return
        q = nq
    before = _spent(s)
    _, err = _call(lambda: s.check(q))
    assert _spent(s) == before
    res, err = _call(lambda: s.release(q, budget, postprocess=post))
    if err is not None:
        assert _spent(s) == before
    else:
        assert len(s.accountant.receipts) == before[1] + 1 and len(res) >= 1
