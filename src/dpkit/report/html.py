"""A self-contained HTML report of a release (no external URL, no script; every value escaped).

:func:`render_report` takes the long result frame of ``dpkit.tables`` (columns ``query``, ``statistic``,
``column``, ``group``, ``bin``, ``value``, ``lo``, ``hi``, ``mechanism``, ``postprocessed``) and the
release's facts, and returns one HTML document: per query a table of values with their 95% intervals and
mechanisms, and each series of rows drawn by its statistic kind's renderer (:meth:`dpkit.tables.kinds.Kind.render`:
inline SVG bar charts with interval whiskers for histograms, contingency tables and grouped counts, sums and
means); per query the coverage notes (what the interval does NOT cover: clamping, contribution bounding,
filters, rows outside the public keys or bins, dropped missing values; from public parameters only) and, when
the release asked for them, a "Diagnostics" block (rows with ``statistic == "diagnostic"``: noisy counts of
clamped values and of rows/groups dropped by contribution bounding, each with a plain-language hint); the
budget spent; a warning when the randomness was seeded (insecure); a note for the reader on what
differential privacy means and what the intervals cover. Marginals (issue #13) are drawn per released set with its
expected error (from the noise standard deviation per cell, or "model estimate"); a synthetic table with its row
count, method and the total variation between its marginals and the released noisy marginals — comparisons
computed from released values only, never from the private data, so themselves DP (the kinds' renderers in
:mod:`dpkit.tables._synth_kinds`). Group keys may have been selected from private data
and may contain anything, so every text goes through :func:`html.escape`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from dpkit.report.svg import bar_chart

__all__ = ["INTERVAL_TEXT", "MAX_BARS", "Render", "diagnostic_hint", "fmt_interval", "fmt_number", "render_report"]

#: A series with more bars than this gets no chart (the table still lists every value).
MAX_BARS = 60

_DIAGNOSTIC = "diagnostic"

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1000px;
color:#1b1f24;line-height:1.45;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #d0d7de}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f5f7}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.facts td:first-child{font-weight:600;background:#f8f9fa}
.warn{background:#fff3cd;border:2px solid #b58900;padding:.8em 1em;margin:1em 0;font-weight:600}
.note{background:#eef6ff;border-left:4px solid #0969da;padding:.6em 1em;margin:1em 0}
.small{color:#57606a;font-size:.85em}
.cover{background:#f6f8fa;border-left:4px solid #8c959f;padding:.4em 1em;margin:.8em 0;font-size:.92em}
.cover ul{margin:.3em 0;padding-left:1.3em}
.diag{border:1px solid #d0d7de;border-radius:6px;padding:.2em 1em .6em;margin:1em 0}
.diag h3{font-size:1.05em;margin:.5em 0 .2em}
.marg,.synth{border-top:1px dashed #d0d7de;margin:.8em 0;padding-top:.2em}
svg.chart{display:block;margin:.6em 0;max-width:100%;height:auto}
svg .bar{fill:#4c8bd6}svg .wh{stroke:#1b1f24;stroke-width:1.4;fill:none}svg .ax{stroke:#8c959f;fill:none}
svg text{font-size:12px;fill:#1b1f24;font-family:system-ui,sans-serif}svg .ct{font-weight:600;font-size:13px}
svg .tk{fill:#57606a;font-size:11px}
"""

_DP_NOTE = (
    "These numbers were released with <b>differential privacy</b> (DP). Random noise of a known size was added, "
    "so that the published figures are almost equally likely whether or not any one person's records are in "
    "the data: nobody can learn much about an individual from them, whatever else they know. The privacy "
    "budget (ε, and δ or ρ where shown) bounds that risk; smaller is more private and noisier. "
    + "<b>The 95% interval next to each value accounts for the noise only</b>: the statistic dpkit computed lies "
    "in it in about 95 of 100 releases. It does <b>not</b> cover the effect of clamping values to the bounds, "
    "of contribution bounding (rows or groups dropped per privacy unit), of filters, of rows outside the public "
    "keys or bins, or of missing values dropped, nor sampling or measurement error in the data itself: where "
    "those apply, the value estimates the clamped, bounded statistic, which can be far from the plain "
    "statistic of the raw data, and the interval says nothing about that gap. The notes under each query say "
    "which of these apply; a Diagnostics block, where one was asked for, estimates how many values were "
    "clamped and rows dropped. Values are not exact counts; small groups may look different from the truth, "
    "and a value outside its possible range (e.g. a negative count) is a sign of noise, not of an error."
)

#: The one-line statement of what every interval covers (the report's footer; docs/cli.md quotes it).
INTERVAL_TEXT = (
    "Intervals are 95% intervals for the noise added by the mechanism only, computed from released values and "
    "public parameters. They do not cover clamping to the bounds, contribution bounding, filters, rows outside "
    "the public keys or bins, or dropped missing values (see each query's notes)."
)


def fmt_number(x: Any) -> str:
    """The report's display of one number: integers in full with thousands separators, others to five
    significant digits (trailing zeros dropped); ``n/a`` for missing / non-finite values."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x).lower()
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if not math.isfinite(v):
        return "n/a"
    if v.is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    a = abs(v)
    if a >= 1e15 or a < 1e-9:
        return f"{v:.4g}"
    decimals = max(0, min(12, 4 - math.floor(math.log10(a))))
    text = f"{v:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_interval(lo: Any, hi: Any) -> str:
    """``[lo, hi]`` with :func:`fmt_number`, or ``n/a`` when either end is missing."""
    if fmt_number(lo) == "n/a" or fmt_number(hi) == "n/a":
        return "n/a"
    return f"[{fmt_number(lo)}, {fmt_number(hi)}]"


def _e(x: Any) -> str:
    return escape("" if x is None else str(x), quote=True)


def _text(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ""
    return str(x)


def _facts(rows: Sequence[tuple[str, str]]) -> str:
    return '<table class="facts">' + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows) + \
        "</table>"


def _label(r: Mapping[str, Any]) -> str:
    parts = [p for p in (_text(r.get("group")), _text(r.get("bin"))) if p]
    return " · ".join(parts) if parts else (_text(r.get("column")) or _text(r.get("statistic")))


def _n(x: Any) -> str:
    """A noisy count for a sentence: rounded to an integer, thousands separators."""
    v = _float(x)
    return fmt_number(round(v)) if math.isfinite(v) else "n/a"


def _bound_of(coverage: Mapping[str, Any] | None, column: str, side: int) -> str:
    """The clamping bound ``side`` (0 lower, 1 upper) of ``column`` when the coverage lists exactly one."""
    found = set()
    for c in (coverage or {}).get("clamped") or ():
        if isinstance(c, Mapping) and c.get("column") == column and c.get("bounds"):
            found.add(fmt_number(c["bounds"][side]))
    return f" {found.pop()}" if len(found) == 1 else ""


def diagnostic_hint(row: Mapping[str, Any], coverage: Mapping[str, Any] | None = None) -> str:
    """A plain-language reading of one diagnostic row (plain text; the caller escapes it). A count whose 95%
    interval reaches zero is reported as "no clear sign" rather than as a number."""
    kind = _text(row.get("bin"))
    col = _text(row.get("column"))
    grp = _text(row.get("group"))
    where = f" in {grp}" if grp else ""
    lo = _float(row.get("lo"))
    clear = math.isfinite(lo) and lo > 0
    about = _n(row.get("value"))
    bounding = (coverage or {}).get("bounding") or {}
    if kind in ("clamped_low", "clamped_high"):
        side, word, rel = (0, "lower", "below") if kind == "clamped_low" else (1, "upper", "above")
        b = _bound_of(coverage, col, side)
        if clear:
            return (f"about {about} values of {col}{where} were clamped at the {word} bound{b}: "
                    "widen the bounds if that matters")
        return f"no clear sign of values of {col}{where} {rel} the {word} bound{b} (the count is within the noise)"
    if kind == "dropped_rows":
        cap = bounding.get("max_rows")
        per = f" (at most {cap} counted per {bounding.get('column', 'unit')}, so possibly more)" if cap else ""
        if clear:
            return f"about {about} rows were dropped by contribution bounding{per}: raise max_rows if that matters"
        return "no clear sign of rows dropped by contribution bounding (the count is within the noise)"
    if kind == "dropped_groups":
        g = bounding.get("max_groups")
        lim = f"max_groups = {g}" if g else "max_groups"
        if clear:
            return (f"about {about} groups were dropped by {lim} (at most that many counted per unit, so possibly "
                    "more): raise max_groups if that matters")
        return f"no clear sign of groups dropped by {lim} (the count is within the noise)"
    return ""


def _coverage_block(coverage: Mapping[str, Any] | None) -> str:
    notes = [n for n in ((coverage or {}).get("notes") or ()) if _text(n)]
    if not notes:
        return ""
    items = "".join(f"<li>{_e(n)}</li>" for n in notes)
    return ('<div class="cover"><b>What the intervals do not cover here.</b> They account for the noise only; '
            f"these steps also shape the values:<ul>{items}</ul></div>")


def _diagnostics_block(rows: list[dict[str, Any]], coverage: Mapping[str, Any] | None) -> str:
    out = ['<div class="diag"><h3>Diagnostics</h3><p class="small">Noisy counts released with differential '
           "privacy from this query's budget, to show whether the bounds or contribution limits cut the data. "
           "Their intervals, too, cover the noise only.</p>"
           "<table><thead><tr><th>diagnostic</th><th>column</th><th>group</th><th>value</th><th>95% interval</th>"
           "<th>what it suggests</th></tr></thead><tbody>"]
    for r in rows:
        out.append(f"<tr><td>{_e(_text(r.get('bin')))}</td><td>{_e(_text(r.get('column')))}</td>"
                   f"<td>{_e(_text(r.get('group')))}</td>"
                   f'<td class="n">{_e(fmt_number(r.get("value")))}</td>'
                   f'<td class="n">{_e(fmt_interval(r.get("lo"), r.get("hi")))}</td>'
                   f"<td>{_e(diagnostic_hint(r, coverage))}</td></tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _query_section(name: str, all_rows: list[dict[str, Any]], info: Mapping[str, Any]) -> str:
    out = [f"<section><h2>{_e(name)}</h2>"]
    if info.get("budget"):
        out.append(f'<p class="small">budget of this query: {_e(info["budget"])}</p>')
    coverage = info.get("coverage") if isinstance(info.get("coverage"), Mapping) else None
    rows = [r for r in all_rows if _text(r.get("statistic")) != _DIAGNOSTIC]
    diag = [r for r in all_rows if _text(r.get("statistic")) == _DIAGNOSTIC]
    # charts: one per (statistic, column) series, drawn by the statistic's kind (dpkit.tables.kinds)
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        series.setdefault((_text(r.get("statistic")), _text(r.get("column"))), []).append(r)
    for (stat, col), rs in series.items():
        kind = _kind(stat)
        if kind is not None:
            out.append(kind.render(f"{stat} of {col}" if col else stat, rs, RENDER))
    out.append("<table><thead><tr><th>statistic</th><th>column</th><th>group</th><th>bin / level</th>"
               "<th>value</th><th>95% interval</th><th>mechanism</th></tr></thead><tbody>")
    for r in rows:
        pp = " *" if r.get("postprocessed") in (True,) else ""
        out.append(f"<tr><td>{_e(_text(r.get('statistic')))}</td><td>{_e(_text(r.get('column')))}</td>"
                   f"<td>{_e(_text(r.get('group')))}</td><td>{_e(_text(r.get('bin')))}</td>"
                   f'<td class="n">{_e(fmt_number(r.get("value")))}{pp}</td>'
                   f'<td class="n">{_e(fmt_interval(r.get("lo"), r.get("hi")))}</td>'
                   f"<td>{_e(_text(r.get('mechanism')))}</td></tr>")
    out.append("</tbody></table>")
    if any(r.get("postprocessed") in (True,) for r in rows):
        out.append('<p class="small">* post-processed (made consistent, clipped at zero and/or rounded) after the '
                   "noisy release; post-processing costs no privacy.</p>")
    out.append(_coverage_block(coverage))
    if diag:
        out.append(_diagnostics_block(diag, coverage))
    out.append("</section>")
    return "".join(out)


def _kind(stat: str) -> Any:
    """The registered statistic kind named ``stat`` (its ``render`` draws the series), or None."""
    try:
        from dpkit.tables.kinds import find_kind
    except ImportError:  # pragma: no cover - the report renders rows without dpkit.tables
        return None
    return find_kind(stat)


class Render:
    """What a statistic kind's :meth:`~dpkit.tables.kinds.Kind.render` may use to draw a series of its rows
    (dicts with the result columns): :meth:`chart` (the report's bar chart with interval whiskers), the escaping
    and number formats of the report. Whatever it returns is inserted as HTML: escape every text."""

    escape = staticmethod(_e)
    text = staticmethod(_text)
    number = staticmethod(fmt_number)
    interval = staticmethod(fmt_interval)

    @staticmethod
    def chart(title: str, rows: Sequence[Mapping[str, Any]]) -> str:
        """A bar chart of the rows' values with their 95% intervals (nothing for fewer than two rows; a note
        instead of a chart for more than :data:`MAX_BARS`)."""
        if len(rows) < 2:
            return ""
        if len(rows) > MAX_BARS:
            return f'<p class="small">{_e(title)}: {len(rows)} values, too many for a chart (see the table)</p>'
        return bar_chart([_label(r) for r in rows], [_float(r.get("value")) for r in rows],
                         [_float(r.get("lo")) for r in rows], [_float(r.get("hi")) for r in rows],
                         title=title + " (bars: value; whiskers: 95% interval)",
                         value_text=[fmt_number(r.get("value")) for r in rows])


#: The renderer tools handed to every kind's ``render``.
RENDER = Render()


def _float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def render_report(rows: Sequence[Mapping[str, Any]], *, title: str, dataset: str, release_id: str = "",
                  time: str = "", budget: str = "", neighbours: str = "", secure: bool = True,
                  seed: int | None = None, spec_sha256: str = "", ledger: Mapping[str, str] | None = None,
                  queries: Sequence[Mapping[str, Any]] = (), version: str = "") -> str:
    """The HTML report.

    ``rows``: the result frame's records (dicts with the result columns; NaN / None for missing).
    ``queries``: ``{"name": ..., "budget": "ε=0.2", "coverage": {...}}`` in release order (queries with no row
    still appear); ``coverage`` is optional: ``res.attrs["coverage"]`` of ``dpkit.tables`` (public notes on
    what the intervals do not cover, and the bounds and limits the diagnostics' hints quote).
    ``ledger``: ``{"path", "total", "spent", "remaining"}`` of the ledger after the release.
    """
    records = [dict(r) for r in rows]
    by_query: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_query.setdefault(_text(r.get("query")), []).append(r)
    info = {str(q["name"]): q for q in queries}
    order = [str(q["name"]) for q in queries] + [n for n in by_query if n not in info]

    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)} — DP release</title><style>{_CSS}</style></head><body>",
           f"<h1>{_e(title)}</h1>",
           '<p class="small">differentially private release made with dpkit'
           + (f" {_e(version)}" if version else "") + "</p>"]
    if not secure:
        out.append('<div class="warn" id="insecure">WARNING: this release used INSECURE, seeded randomness'
                   + (f" (seed {_e(seed)})" if seed is not None else "")
                   + ". Anyone who knows the seed can remove the noise: these numbers are NOT private. "
                     "Use seeded releases only for tests and research; never publish them.</div>")
    facts = [("dataset", dataset), ("budget spent by this release", budget)]
    if neighbours:
        facts.append(("privacy unit (neighbours)", neighbours))
    if ledger:
        facts += [("ledger", ledger.get("path", "")), ("dataset budget (ledger)", ledger.get("total", "")),
                  ("spent on the dataset so far", ledger.get("spent", "")),
                  ("remaining", ledger.get("remaining", ""))]
    facts += [("randomness", "CSPRNG keyed by the OS (secure)" if secure else "seeded PRNG (INSECURE)")]
    if release_id:
        facts.append(("release id", release_id))
    if time:
        facts.append(("time (UTC)", time))
    if spec_sha256:
        facts.append(("spec SHA-256", spec_sha256))
    out.append(_facts(facts))
    out.append(f'<div class="note" id="dp-note"><b>What does this mean?</b> {_DP_NOTE}</div>')

    # mechanisms per statistic, in one table
    mech: dict[tuple[str, str, str], str] = {}
    for r in records:
        mech.setdefault((_text(r.get("query")), _text(r.get("statistic")), _text(r.get("column"))),
                        _text(r.get("mechanism")))
    if mech:
        out.append("<h2>Mechanisms</h2><table><thead><tr><th>query</th><th>statistic</th><th>column</th>"
                   "<th>mechanism</th></tr></thead><tbody>")
        for (q, s, c), m in mech.items():
            out.append(f"<tr><td>{_e(q)}</td><td>{_e(s)}</td><td>{_e(c)}</td><td>{_e(m)}</td></tr>")
        out.append("</tbody></table>")
    for name in order:
        out.append(_query_section(name, by_query.get(name, []), info.get(name, {})))
    out.append(f'<p class="small" id="interval-note">{_e(INTERVAL_TEXT)}</p></body></html>\n')
    return "".join(out)
