"""The HTML report: self-contained, every value escaped, charts with whiskers, the insecure warning."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser

import pytest

from dpkit.report import bar_chart, fmt_interval, fmt_number, render_report

EVIL = '<script>alert("x")</script>&"\'<img src=x onerror=alert(1)>'


def _row(**kw: object) -> dict:
    base = {"query": "q", "statistic": "count", "column": "", "group": "", "bin": "", "value": 10.0, "lo": 5.0,
            "hi": 15.0, "mechanism": "discrete_laplace(scale=2)", "postprocessed": False}
    base.update(kw)
    return base


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Collect:
    p = _Collect()
    p.feed(html)
    return p


def test_every_text_is_escaped() -> None:
    rows = [_row(query=EVIL, group=f"k={EVIL}", bin=EVIL, column=EVIL, mechanism=EVIL),
            _row(query=EVIL, group="other", column=EVIL, value=3.0)]
    html = render_report(rows, title=EVIL, dataset=EVIL, budget=EVIL, neighbours=EVIL, release_id=EVIL,
                         queries=[{"name": EVIL, "budget": EVIL}], ledger={"path": EVIL, "total": EVIL})
    p = _parse(html)
    assert "script" not in p.tags and "img" not in p.tags
    assert not any(name.startswith("on") for name, _ in p.attrs)
    assert "<script" not in html and "<img" not in html
    assert EVIL in "".join(p.text)  # shown as text, intact
    # also inside the SVG (labels and <title> tooltips)
    svg = re.search(r"<svg.*?</svg>", html, re.S)
    assert svg is not None and "&lt;script&gt;" in svg.group(0)


def test_self_contained_no_external_reference_no_script() -> None:
    rows = [_row(group=f"g{i}", value=float(i * 10)) for i in range(5)]
    html = render_report(rows, title="t", dataset="d")
    assert "<script" not in html.lower()
    assert not re.search(r"(src|href)\s*=", html, re.I)
    assert "url(" not in html and "@import" not in html
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", html)  # only the SVG namespace name


def test_values_intervals_mechanisms_and_budget_shown() -> None:
    rows = [_row(query="A", group="sex=F", value=1234.5, lo=1200.25, hi=1268.75),
            _row(query="A", group="sex=M", value=-3.0, lo=-20.0, hi=14.0),
            _row(query="B", statistic="quantile", column="age", bin="0.5", value=37.0, lo=math.nan, hi=math.nan,
                 mechanism="exponential")]
    html = render_report(rows, title="t", dataset="adult", budget="ε=1",
                         queries=[{"name": "A", "budget": "ε=0.5"}, {"name": "B", "budget": "ε=0.5"}])
    text = "".join(_parse(html).text)
    for s in ("1,234.5", "[1,200.2, 1,268.8]", "-3", "[-20, 14]", "37", "exponential", "discrete_laplace(scale=2)",
              "ε=1", "ε=0.5", "n/a"):
        assert s in text, s
    assert html.count("<svg") == 1  # A is a grouped count; B is a single quantile
    assert "What does this mean?" in text and "differential privacy" in text
    assert "INSECURE" not in text


def test_insecure_warning() -> None:
    html = render_report([_row()], title="t", dataset="d", secure=False, seed=42)
    text = "".join(_parse(html).text)
    assert "INSECURE" in text and "seed 42" in text and "NOT private" in text


def test_query_without_rows_still_listed_and_many_bars_not_charted() -> None:
    rows = [_row(query="big", statistic="histogram", column="x", bin=str(i)) for i in range(100)]
    html = render_report(rows, title="t", dataset="d", queries=[{"name": "empty"}, {"name": "big"}])
    assert "<h2>empty</h2>" in html and "too many for a chart" in html and "<svg" not in html


def test_fmt_number() -> None:
    assert fmt_number(32556.0) == "32,556"
    assert fmt_number(38.58123) == "38.581"
    assert fmt_number(0.241234) == "0.24123"
    assert fmt_number(-0.5) == "-0.5"
    assert fmt_number(1234.5) == "1,234.5"
    assert fmt_number(float("nan")) == "n/a" and fmt_number(None) == "n/a" and fmt_number(math.inf) == "n/a"
    assert fmt_number(1e-12) == "1e-12"
    assert fmt_interval(1.0, math.nan) == "n/a"
    assert fmt_interval(1.0, 2.5) == "[1, 2.5]"


def test_bar_chart_whiskers_and_negative_values() -> None:
    svg = bar_chart(["a", "b", "c"], [10.0, -5.0, math.nan], [8.0, -9.0, 1.0], [12.0, -1.0, math.nan], title="x")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('class="bar"') == 2  # NaN value: no bar
    assert svg.count('class="wh"') == 2  # NaN end: no whisker
    with pytest.raises(ValueError):
        bar_chart(["a"], [1.0, 2.0], [0.0], [1.0])


# ---------------------------------------------------------------- issue #11: honest interval wording, diagnostics
COVERAGE = {"interval": "noise only",
            "clamped": [{"statistic": "mean", "column": "income", "bounds": [0.0, 99.0], "private_bounds": False}],
            "bounding": {"column": "user_id", "max_rows": 3, "max_groups": 2, "max_rows_per_group": None},
            "notes": ["mean(income): values are clamped to [0, 99]; the value estimates the clamped statistic.",
                      "contribution bounding per user_id (max_rows=3, max_groups=2): rows above these limits were "
                      "dropped before counting, so counts and sums can be lower than in the raw data."]}


def _diag(bin_: str, value: float, hw: float = 5.0, **kw: object) -> dict:
    return _row(statistic="diagnostic", bin=bin_, value=value, lo=value - hw, hi=value + hw,
                mechanism="values outside [0, 99]; discrete_laplace(scale=2)", **kw)


def test_interval_wording_says_noise_only_and_names_what_it_does_not_cover() -> None:
    html = render_report([_row()], title="t", dataset="d")
    text = " ".join("".join(_parse(html).text).split())
    assert "accounts for the noise only" in text
    for effect in ("clamping values to the bounds", "contribution bounding", "filters", "missing values dropped",
                   "outside the public keys or bins"):
        assert effect in text, effect
    # the old over-claim is gone: the interval is not said to hold the true value
    assert "true value lies in it" not in text
    assert "for the noise added by the mechanism only" in text


def test_coverage_notes_and_diagnostics_block_per_query() -> None:
    rows = [_row(query="A", statistic="mean", column="income", group="s=F", value=50.0, lo=40.0, hi=60.0),
            _row(query="A", statistic="mean", column="income", group="s=M", value=55.0, lo=45.0, hi=65.0),
            _diag("clamped_high", 412.0, query="A", column="income", group="s=F"),
            _diag("clamped_low", 2.0, query="A", column="income", group="s=F"),
            _diag("dropped_rows", 1234.0, hw=30.0, query="A", column=""),
            _diag("dropped_groups", 3.0, hw=10.0, query="A", column="")]
    html = render_report(rows, title="t", dataset="d", queries=[{"name": "A", "budget": "ε=1", "coverage": COVERAGE}])
    text = " ".join("".join(_parse(html).text).split())
    assert "What the intervals do not cover here." in text and "values are clamped to [0, 99]" in text
    assert "max_rows=3, max_groups=2" in text
    block = html[html.index('<div class="diag">'):]
    btext = " ".join("".join(_parse(block).text).split())
    assert btext.startswith("Diagnostics")
    assert ("about 412 values of income in s=F were clamped at the upper bound 99: widen the bounds if that "
            "matters") in btext
    assert "no clear sign of values of income in s=F below the lower bound 0" in btext  # [-3, 7] reaches 0
    assert ("about 1,234 rows were dropped by contribution bounding (at most 3 counted per user_id, so possibly "
            "more): raise max_rows if that matters") in btext
    assert "no clear sign of groups dropped by max_groups = 2" in btext
    # diagnostics stay out of the statistics' table and charts: one chart (the grouped mean), and the main
    # table holds the two means only
    assert html.count("<svg") == 1
    main = html[html.index("<section>"):html.index('<div class="cover">')]
    assert main.count("<tr><td>mean</td>") == 2 and "clamped_high" not in main


def test_diagnostic_hints_without_coverage_and_escaped() -> None:
    rows = [_diag("clamped_high", 40.0, query=EVIL, column=EVIL, group=f"k={EVIL}")]
    html = render_report(rows, title="t", dataset="d",
                         queries=[{"name": EVIL, "coverage": {"notes": [EVIL], "clamped": [{"column": EVIL}]}}])
    p = _parse(html)
    assert "script" not in p.tags and "img" not in p.tags and "<script" not in html
    text = "".join(p.text)
    assert f"about 40 values of {EVIL} in k={EVIL} were clamped at the upper bound: widen" in text
    assert text.count(EVIL) >= 4  # note, column cell, group cell, hint: all shown as text


def test_diagnostic_hint_reads_the_interval_not_the_value() -> None:
    from dpkit.report import diagnostic_hint

    assert diagnostic_hint(_diag("clamped_low", 6.0, hw=5.0), COVERAGE).startswith("about 6 values")
    assert diagnostic_hint(_diag("clamped_low", 5.0, hw=5.0), COVERAGE).startswith("no clear sign")
    assert diagnostic_hint(_diag("clamped_low", -8.0, hw=5.0), COVERAGE).startswith("no clear sign")
    assert diagnostic_hint(_row(), COVERAGE) == ""
