"""Self-contained HTML reports of DP releases (:func:`render_report`) with inline SVG charts (:func:`bar_chart`)."""

from dpkit.report.html import fmt_interval, fmt_number, render_report
from dpkit.report.svg import bar_chart

__all__ = ["bar_chart", "fmt_interval", "fmt_number", "render_report"]
