"""Inline SVG bar charts with interval whiskers (pure Python string building, every text escaped)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

__all__ = ["bar_chart"]

_ROW = 20
_LABEL_W = 220
_PLOT_W = 420
_VALUE_W = 90
_PAD = 8


def _f(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def bar_chart(labels: Sequence[str], values: Sequence[float], lo: Sequence[float | None],
              hi: Sequence[float | None], *, title: str = "", value_text: Sequence[str] | None = None) -> str:
    """A horizontal bar chart: one bar per label, a whisker from ``lo`` to ``hi`` (skipped where not finite).

    The axis starts at min(0, every finite value and lower end) so negative noisy values stay visible.
    Returns an ``<svg>`` element (no scripts, no external references).
    """
    n = len(labels)
    if not (len(values) == len(lo) == len(hi) == n):
        raise ValueError("labels, values, lo and hi must have the same length")
    pts = [float(v) for v in (*values, *lo, *hi) if v is not None and _finite(v)]
    vmin = min([0.0, *pts])
    vmax = max([0.0, *pts])
    if vmax == vmin:
        vmax = vmin + 1.0
    span = vmax - vmin

    def x(v: float) -> float:
        return _LABEL_W + _PLOT_W * (v - vmin) / span

    width = _LABEL_W + _PLOT_W + _VALUE_W
    top = 24 if title else _PAD
    height = top + n * _ROW + 26
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title, quote=True)}" class="chart">']
    if title:
        out.append(f'<text x="{_PAD}" y="16" class="ct">{escape(title)}</text>')
    x0 = x(0.0)
    for i in range(n):
        y = top + i * _ROW
        v = values[i]
        label = labels[i] if len(labels[i]) <= 34 else labels[i][:33] + "…"
        out.append(f'<g><title>{escape(labels[i])}: {escape(value_text[i] if value_text else _f(v))}</title>')
        out.append(f'<text x="{_LABEL_W - 6}" y="{y + 14}" text-anchor="end" class="cl">{escape(label)}</text>')
        if _finite(v):
            xa, xb = sorted((x0, x(v)))
            out.append(f'<rect x="{_f(xa)}" y="{y + 3}" width="{_f(max(xb - xa, 0.5))}" height="{_ROW - 6}" '
                       f'class="bar"/>')
        lo_i, hi_i = lo[i], hi[i]
        if lo_i is not None and hi_i is not None and _finite(lo_i) and _finite(hi_i):
            a, b = x(float(lo_i)), x(float(hi_i))
            ym = y + _ROW / 2
            out.append(f'<path d="M{_f(a)} {_f(ym)}H{_f(b)}M{_f(a)} {_f(ym - 5)}V{_f(ym + 5)}'
                       f'M{_f(b)} {_f(ym - 5)}V{_f(ym + 5)}" class="wh"/>')
        txt = value_text[i] if value_text else (_f(v) if _finite(v) else "n/a")
        out.append(f'<text x="{_LABEL_W + _PLOT_W + 6}" y="{y + 14}" class="cv">{escape(txt)}</text></g>')
    yb = top + n * _ROW
    out.append(f'<path d="M{_f(x0)} {top}V{yb}" class="ax"/>')
    out.append(f'<path d="M{_LABEL_W} {yb}H{_LABEL_W + _PLOT_W}" class="ax"/>')
    for tv in (vmin, (vmin + vmax) / 2, vmax):
        out.append(f'<text x="{_f(x(tv))}" y="{yb + 16}" text-anchor="middle" class="tk">{escape(_tick(tv))}</text>')
    out.append("</svg>")
    return "".join(out)


def _tick(v: float) -> str:
    a = abs(v)
    if a >= 1e6:
        return f"{v:.3g}"
    if a >= 100 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.3g}"
