"""The registry of statistic kinds (issue #12): a toy statistic defined and registered HERE, in a test (one
class with its renderer), reaches ``Query``/``Session`` (plan, solve, release), the CLI spec (a TOML spec using it
is planned and released by the CLI) and the HTML report, with no change anywhere else."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ibis")
pd = pytest.importorskip("pandas")

from dpkit import ZCDP, PureDP, deterministic_source  # noqa: E402
from dpkit.cli import main  # noqa: E402
from dpkit.cli.spec import STATISTICS, SpecError, parse_spec  # noqa: E402
from dpkit.core.errors import InvalidParameter, WrongType  # noqa: E402
from dpkit.report import render_report  # noqa: E402
from dpkit.tables import Kind, Session, Statistic, register_kind, unit_of  # noqa: E402
from dpkit.tables._calib import halfwidth  # noqa: E402
from dpkit.tables.kinds import find_kind, get_kind, kinds, unregister_kind  # noqa: E402


class Above(Kind):
    """``Query.above(column, threshold)``: the number of rows whose ``column`` exceeds a public threshold, per
    group. One vector of row counts: the same sensitivity as ``count`` (L1 ``L``, L2² ``L2²``)."""

    name = "above"
    spec_keys = ("column", "threshold")
    nonnegative = True
    fixed_halfwidth = True

    def build(self, q: Any, column: str, threshold: float, *, weight: float = 1.0) -> Statistic:
        from dpkit.tables.kinds import check_positive, check_real, numeric_column

        col = numeric_column(q, column)
        thr = check_real("threshold", threshold)
        return Statistic("above", col, weight=check_positive("weight", weight), options=(("threshold", thr),))

    def label(self, st: Statistic) -> str:
        return f"above({st.column}>{st.option['threshold']:g})"

    def parse_spec(self, path: str, value: Any, kw: dict[str, Any], reader: Any) -> None:
        if "threshold" not in value:
            raise reader.error(f"{path}.threshold", "missing: the public threshold")
        kw["options"] = {"threshold": reader.num(f"{path}.threshold", value["threshold"])}

    def from_spec(self, q: Any, st: Any) -> Any:
        return q.above(st.column, st.options["threshold"], weight=st.weight)

    def calibrate(self, sp: Any, cal: Any) -> None:
        sp.parts = [cal.part("count", cal.bounds.l1, cal.bounds.l2_squared, sp.share)]

    def metrics(self, i: int, st: Statistic, t: Any, ev: Any) -> dict[str, Any]:
        x = ev.float_(t[st.column])
        return {f"_a{i}": ev.ibis.ifelse(x > st.option["threshold"], 1, 0).sum()}

    def measure(self, i: int, sp: Any, m: Any) -> None:
        m.counts(sp, m.metric(f"_a{i}"))

    def render(self, title: str, rows: list[dict[str, Any]], report: Any) -> str:
        items = "".join(f"<li>{report.escape(report.text(r.get('group')) or 'all')}: {report.number(r['value'])}</li>"
                        for r in rows)
        return f'<div class="toy-above"><b>{report.escape(title)}</b><ul>{items}</ul></div>'


@pytest.fixture
def above():
    register_kind(Above)
    try:
        yield get_kind("above")
    finally:
        unregister_kind("above")


def _frame(n: int = 400, seed: int = 3) -> Any:
    g = np.random.default_rng(seed)  # test data only
    return pd.DataFrame({"uid": g.integers(0, 80, n), "k": g.choice(["a", "b"], n), "x": g.uniform(0, 100, n)})


# -------------------------------------------------------------------------------------------------------------
# Query and Session
# -------------------------------------------------------------------------------------------------------------
def test_toy_kind_reaches_query_plan_release_and_solve(above):
    df = _frame()
    s = Session(df, budget=PureDP(50.0), rng=deterministic_source(1))
    q = s.query("toy").group_by("k", keys=["a", "b"]).count().above("x", 60)
    assert q.statistics[-1].kind == "above" and q.statistics[-1].label == "above(x>60)"
    assert s.query("toy").add("above", "x", 60).statistics == s.query("toy").above("x", 60).statistics
    plan = s.plan(q, PureDP(20.0))
    row = plan[plan.statistic == "above"].iloc[0]
    assert row.mechanism.startswith("discrete_laplace") and row.epsilon == 10.0
    assert row.half_width_95 == halfwidth("laplace", row.scale)
    res = s.release(q, PureDP(20.0))
    assert len(s.accountant.receipts) == 1 and s.accountant.spent == PureDP(20.0)
    got = res[res.statistic == "above"].set_index("group")
    want = df[df.x > 60].groupby("k").size()
    for key in ("a", "b"):
        r = got.loc[f"k={key}"]
        assert r.column == "x" and r.lo <= r.value <= r.hi
        assert abs(r.value - want[key]) <= 20  # scale 0.1: far inside
    # solve targets it by label, like a built-in count
    sol = s.solve(q, {"above(x>60)": 5.0})
    assert sol.split.set_index("label").loc["above(x>60)", "epsilon"] > 0


def test_toy_kind_under_a_privacy_unit_and_zcdp_is_bounded_and_deterministic(above):
    df = _frame()
    unit = unit_of("uid", max_rows=2)
    out = []
    for _ in range(2):
        s = Session(df, budget=ZCDP(5.0), unit=unit, rng=deterministic_source(9))
        q = s.query("toy").above("x", 10.0)
        p = s._calibrate(q, ZCDP(1.0))
        assert p.stats[0].parts[0].l1 == 2 and p.stats[0].parts[0].l2_squared == 4  # L = R = 2 rows per unit
        out.append(s.release(q, ZCDP(1.0), postprocess={"nonnegative": True}))
    pd.testing.assert_frame_equal(out[0], out[1])  # same seed, same release
    r = out[0].iloc[0]
    assert r.statistic == "above" and r.value >= 0 and "discrete_gaussian" in r.mechanism
    assert r.value <= 2 * 80 + 10 * math.sqrt(4 / 2.0)  # at most R rows of each of the 80 units, plus noise


def test_toy_kind_validates_its_parameters(above):
    s = Session(_frame(), budget=PureDP(1.0))
    with pytest.raises(InvalidParameter) as e:
        s.query().above("nope", 1.0)
    assert e.value.param == "column"
    with pytest.raises(WrongType):
        s.query().above("x", "high")
    with pytest.raises(InvalidParameter) as e:
        s.query().add("no_such_kind")
    assert e.value.param == "kind"


def test_unregistered_kind_is_gone():
    assert find_kind("above") is None
    s = Session(_frame(), budget=PureDP(1.0))
    with pytest.raises(AttributeError):
        s.query().above  # noqa: B018
    assert "above" not in STATISTICS
    assert [k.name for k in kinds()][:8] == ["count", "count_distinct", "sum", "mean", "variance", "quantile",
                                             "histogram", "contingency"]


def test_register_kind_refuses_clashes_and_non_kinds(above):
    class Again(Above):
        pass

    class Shadow(Above):
        name = "shadow"
        method = "filter"  # a Query method already

    class Reserved(Above):
        name = "diagnostic"

    for cls in (Again, Shadow, Reserved):
        with pytest.raises(InvalidParameter):
            register_kind(cls)
    with pytest.raises(WrongType):
        register_kind(dict)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameter):
        unregister_kind("count")


# -------------------------------------------------------------------------------------------------------------
# the CLI spec: planned and released by the CLI
# -------------------------------------------------------------------------------------------------------------
SPEC = """name = "toy"
[data]
source = "d.csv"
[budget]
epsilon = 40.0
[domain]
k = ["a", "b"]
[[query]]
name = "above by k"
group_by = "k"
statistics = [{stat = "count"}, {stat = "above", column = "x", threshold = 60}]
[[query]]
name = "above, single"
stat = "above"
column = "x"
threshold = 25.5
"""


def test_toy_kind_in_a_cli_spec_is_planned_and_released(above, tmp_path: Path):
    df = _frame()
    df.to_csv(tmp_path / "d.csv", index=False)
    spec = tmp_path / "toy.toml"
    spec.write_text(SPEC)
    out, err = io.StringIO(), io.StringIO()
    assert main(["plan", str(spec)], stdout=out, stderr=err) == 0, err.getvalue()
    assert "above" in out.getvalue() and "discrete_laplace" in out.getvalue()
    od = tmp_path / "out"
    out, err = io.StringIO(), io.StringIO()
    rc = main(["release", str(spec), "--out", str(od), "--ledger", str(tmp_path / "l.db"), "--seed", "5", "--yes"],
              stdout=out, stderr=err)
    assert rc == 0, err.getvalue()
    res = pd.read_csv(od / "results.csv")
    toy = res[res.statistic == "above"]
    assert len(toy) == 3 and set(toy["query"]) == {"above by k", "above, single"}
    single = toy[toy["query"] == "above, single"].iloc[0]
    assert abs(single.value - int((df.x > 25.5).sum())) <= 10
    receipts = json.loads((od / "receipts.json").read_text())
    assert receipts["queries"][0]["statistics"] == ["count", "above"]
    html = (od / "report.html").read_text()
    assert html.count('<div class="toy-above">') == 2  # its renderer draws each series, even of one value
    assert "above of x" in html


def test_toy_kind_spec_keys_are_checked(above):
    head = {"budget": {"epsilon": 1.0}}
    spec = parse_spec({**head, "query": [{"name": "q", "stat": "above", "column": "x", "threshold": 3}]})
    st = spec.queries[0].statistics[0]
    assert st.stat == "above" and st.column == "x" and st.options == {"threshold": 3.0}
    assert STATISTICS["above"] == ("column", "threshold")
    for bad, path in (({"stat": "above", "column": "x"}, "query[0].threshold"),
                      ({"stat": "above", "column": "x", "threshold": "hi"}, "query[0].threshold"),
                      ({"stat": "above", "threshold": 1}, "query[0].column"),
                      ({"stat": "above", "column": "x", "threshold": 1, "bounds": [0, 1]}, "query[0].bounds")):
        with pytest.raises(SpecError) as e:
            parse_spec({**head, "query": [{"name": "q", **bad}]})
        assert e.value.path == path


def test_without_the_kind_the_spec_refuses_it():
    with pytest.raises(SpecError) as e:
        parse_spec({"budget": {"epsilon": 1.0}, "query": [{"name": "q", "statistics": [
            {"stat": "above", "column": "x", "threshold": 3}]}]})
    assert e.value.path == "query[0].statistics[0].stat"


# -------------------------------------------------------------------------------------------------------------
# the report
# -------------------------------------------------------------------------------------------------------------
def _rows() -> list[dict[str, Any]]:
    return [{"query": "q", "statistic": "above", "column": "x", "group": f"k={k}", "bin": "", "value": v,
             "lo": v - 3, "hi": v + 3, "mechanism": "discrete_laplace(scale=1)", "postprocessed": False}
            for k, v in (("a", 12.0), ("<b>", 7.0))]


def test_report_draws_a_series_with_the_kinds_renderer(above):
    html = render_report(_rows(), title="t", dataset="d")
    assert '<div class="toy-above"><b>above of x</b>' in html
    assert "k=&lt;b&gt;: 7" in html and "<b>)" not in html  # the renderer escapes
    assert "<svg" not in html  # its renderer draws no chart


def test_report_without_the_kind_draws_no_series():
    html = render_report(_rows(), title="t", dataset="d")
    assert "toy-above" not in html and "<svg" not in html
    assert "above" in html  # the rows are still listed in the table
