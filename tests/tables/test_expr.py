"""The safe expression parser of Query.filter / Query.derive: what it accepts, what it refuses, what it means."""

from __future__ import annotations

import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit import InvalidParameter, PureDP, WrongType  # noqa: E402
from dpkit.tables import Session, parse_expression  # noqa: E402

COLS = {"age": "int", "income": "float", "state": "string"}


@pytest.fixture(scope="module")
def frame():
    return pd.DataFrame({"age": [10, 25, 37, 52, 64, 80], "income": [0.0, 10.5, 20.0, -3.0, 7.25, 100.0],
                         "state": ["CA", "NY", "CA", "TX", "NY", "WA"]})


@pytest.mark.parametrize("text", [
    "age >= 18", "age >= 18 and state == 'CA'", "not (age < 18) or income > 3", "18 <= age < 65",
    "state in ['CA', 'NY']", "state not in ('TX',)", "age // 10 == 2", "age % 2 == 0", "-income < 0",
    "(age + 1) * 2 - income / 4 > 0", "age ** 2 > 100", "(age if income > 0 else 0) > 20", "age in [10, -3]",
])
def test_accepted(text):
    e = parse_expression(text, COLS)
    assert e.names <= set(COLS)


@pytest.mark.parametrize("text, why", [
    ("age.__class__", "attribute"), ("state.upper() == 'CA'", "call"), ("__import__('os')", "call"),
    ("open('x')", "call"), ("len(state) > 2", "call"), ("age[0] > 1", "Subscript"),
    ("(lambda: 1)() == 1", "call"), ("[a for a in age]", "ListComp"), ("__builtins__", "unknown column"),
    ("secret > 1", "unknown column"), ("age is None", "is"), ("state in [x]", "literals"),
    ("f'{age}' == 'a'", "JoinedStr"), ("age @ age", "operator"), ("~age", "operator"), ("age in []", "non-empty"),
    ("None == age", "literals"), ("age >", "valid"), ("", "empty"), ("age = 1", "valid"),
])
def test_refused(text, why):
    with pytest.raises(InvalidParameter) as exc:
        parse_expression(text, COLS, "expression")
    assert exc.value.param == "expression"
    assert why.lower() in str(exc.value).lower()


def test_unknown_column_is_named():
    with pytest.raises(InvalidParameter, match="'salary'"):
        parse_expression("salary > 3", COLS)


def test_not_a_string():
    with pytest.raises(WrongType):
        parse_expression(3, COLS)


@pytest.fixture(scope="module")
def session(frame):
    return Session(frame, budget=PureDP(1.0))


@pytest.mark.parametrize("text, fn", [
    ("age >= 18 and state == 'CA'", lambda d: (d.age >= 18) & (d.state == "CA")),
    ("18 <= age < 65", lambda d: (d.age >= 18) & (d.age < 65)),
    ("state in ['CA', 'NY']", lambda d: d.state.isin(["CA", "NY"])),
    ("not state in ['CA']", lambda d: ~d.state.isin(["CA"])),
    ("age // 10 == 2 or age % 7 == 3", lambda d: (d.age // 10 == 2) | (d.age % 7 == 3)),
    ("-income < -5", lambda d: -d.income < -5),
])
def test_filter_semantics(session, frame, text, fn):
    s = session
    e = parse_expression(text, s.columns)
    got = s.table.filter(e.compile(s.table)).execute()
    assert len(got) == int(fn(frame).sum())


def test_derive_types_and_values(session):
    s = session
    q = s.query("d").derive(decade="age // 10", half="income / 2", adult="age >= 18")
    assert q.schema["decade"] == "int" and q.schema["half"] == "float" and q.schema["adult"] == "bool"
    t = s._derived(q).execute()
    assert list(t["decade"]) == [1, 2, 3, 5, 6, 8]


def test_type_errors_surface_at_build(session):
    s = session
    with pytest.raises(WrongType) as exc:
        s.query().filter("age + 1")  # not boolean
    assert exc.value.param == "expression"
    with pytest.raises(WrongType) as exc:
        s.query().derive(x="state * 'a'")
    assert exc.value.param == "x"
    with pytest.raises(InvalidParameter):
        s.query().derive(**{"not an id": "age"})
