"""Self-contained HTML reports of DP releases (:func:`render_report`) with inline SVG charts (:func:`bar_chart`)."""

from dpkit.report.html import INTERVAL_TEXT, diagnostic_hint, fmt_interval, fmt_number, render_report
from dpkit.report.svg import bar_chart

__all__ = ["INTERVAL_TEXT", "bar_chart", "diagnostic_hint", "fmt_interval", "fmt_number", "render_report"]
