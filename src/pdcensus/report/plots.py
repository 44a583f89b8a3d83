"""SVG plots for the reports: a small chart spec (axes + layers) and its renderer.

Every figure in the HTML and Markdown reports is a :class:`Chart` rendered by
:func:`render_svg` into one standalone ``<svg>`` element (``xmlns``, ``viewBox``, a
``<title>`` naming the plot and a ``<desc>``), which is inlined in the HTML and written as a
file beside the Markdown.

Hand-written rather than matplotlib, on purpose:

- the output must open offline with no font, script or image: text stays SVG ``<text>``
  in the reader's own sans-serif, where matplotlib would need ``svg.fonttype='path'`` and
  turn every label into kilobytes of glyph outlines (unsearchable, unselectable);
- every string from the data goes through one escaping function here, so an endpoint
  label like ``<script>`` cannot reach the page unescaped;
- the figures are five simple kinds (lines, bars, error bars, shaded bands, event
  markers) and a dependency of tens of megabytes for them is not worth it;
- the output is deterministic text, so tests can read it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape

from pdcensus.report.chart import (
    PALETTE, Axis, Band, Bars, Chart, ErrorBars, Events, Layer, Line, ScaleKind, Side, TickFormat,
)

__all__ = [
    "PALETTE", "Axis", "Band", "Bars", "Chart", "ErrorBars", "Events", "Layer", "Line", "ScaleKind", "Side",
    "TickFormat", "format_number", "nice_ticks", "render_svg",
]

_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 64, 64, 34, 58
_HALO = ' stroke="#ffffff" stroke-width="3" paint-order="stroke"'  # text stays legible over lines
_FONT = "system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k steps) covering ``lo`` .. ``hi``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def _log_ticks(lo: float, hi: float) -> list[float]:
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    mults = (1, 2, 5) if len(decades) <= 3 else (1,)
    return [m * 10.0**d for d in decades for m in mults if lo <= m * 10.0**d <= hi]


def format_number(value: float) -> str:
    """A short human label: 0.015 -> '0.015', 12000 -> '12k', 2.5e6 -> '2.5M'."""
    if value == 0:
        return "0"
    a = abs(value)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{value / div:.3g}{suffix}"
    return f"{value:.3g}"


def _format_tick(value: float, fmt: TickFormat) -> str:
    if fmt is TickFormat.CLOCK:
        return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%H:%M")
    if fmt is TickFormat.MINUTES:
        return format_number(value / 60.0)
    return format_number(value)


@dataclass(frozen=True)
class _Scale:
    axis: Axis
    lo: float
    hi: float
    px_lo: float
    px_hi: float

    def __call__(self, value: float) -> float:
        if self.axis.scale is ScaleKind.LOG:
            v, lo, hi = math.log10(max(value, self.lo)), math.log10(self.lo), math.log10(self.hi)
        else:
            v, lo, hi = value, self.lo, self.hi
        return self.px_lo + (v - lo) / (hi - lo) * (self.px_hi - self.px_lo)

    def ticks(self) -> list[float]:
        if self.axis.scale is ScaleKind.LOG:
            return _log_ticks(self.lo, self.hi)
        if self.axis.tick_format is TickFormat.MINUTES:
            return [t * 60.0 for t in nice_ticks(self.lo / 60.0, self.hi / 60.0)]
        return nice_ticks(self.lo, self.hi)


def _extent(axis: Axis, values: list[float], pad_zero: bool) -> tuple[float, float]:
    """The axis range: from the data (or the axis's fixed bounds); a value axis from zero."""
    if axis.scale is ScaleKind.LOG:
        values = [v for v in values if v > 0]
    lo = axis.lo if axis.lo is not None else (min(values) if values else 0.0)
    hi = axis.hi if axis.hi is not None else (max(values) if values else 1.0)
    if axis.scale is ScaleKind.LOG:
        lo = 10 ** math.floor(math.log10(lo)) if lo > 0 else 1e-3
        hi = 10 ** math.ceil(math.log10(hi)) if hi > 0 else lo * 10
        return lo, max(hi, lo * 10)
    if pad_zero and axis.lo is None:
        lo = min(lo, 0.0)
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    if axis.hi is None and pad_zero:  # a value axis ends on a round tick; a time axis ends with the data
        ticks = nice_ticks(lo, hi)
        if len(ticks) > 1:  # end the axis on the first round tick at or above the data
            step = ticks[1] - ticks[0]
            hi = math.ceil(hi / step - 1e-9) * step
    return lo, hi


def _layer_ys(layer: Layer) -> list[float]:
    if isinstance(layer, ErrorBars):
        return _finite(layer.ys) + _finite(layer.lo) + _finite(layer.hi)
    if isinstance(layer, (Line, Bars)):
        return _finite(layer.ys)
    return []


def _layer_xs(layer: Layer) -> list[float]:
    if isinstance(layer, Band):
        return [layer.x_lo, layer.x_hi]
    return _finite(layer.xs)


def _side(layer: Layer) -> Side:
    return layer.side if isinstance(layer, (Line, Bars, ErrorBars)) else Side.LEFT


def render_svg(chart: Chart, svg_id: str = "plot") -> str:
    """The chart as one standalone ``<svg>`` element (escaped, with ``<title>``/``<desc>``)."""
    w, h = chart.width_px, chart.height_px
    left, right = _MARGIN_LEFT, w - (_MARGIN_RIGHT if chart.y2 else 20)
    top, bottom = _MARGIN_TOP, h - _MARGIN_BOTTOM
    sid = escape(svg_id, quote=True)
    drawable = [ly for ly in chart.layers if _layer_xs(ly)]
    legend = _legend_layout(drawable, left, w - 20)
    total_h = h + 16 * max((row for _x, row, _n, _c in legend), default=0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="{sid}" class="plot" viewBox="0 0 {w} {total_h}" '
        f'width="{w}" height="{total_h}" role="img" aria-labelledby="{sid}-title {sid}-desc" '
        f'font-family="{_FONT}" font-size="12">',
        f'<title id="{sid}-title">{escape(chart.title)}</title>',
        f'<desc id="{sid}-desc">{escape(chart.description)}</desc>',
        f'<rect x="0" y="0" width="{w}" height="{total_h}" fill="#ffffff"/>',
        f'<text x="{left}" y="20" font-size="14" font-weight="600" fill="#222">{escape(chart.title)}</text>',
    ]
    if not drawable or chart.note:
        msg = chart.note or "no data to plot"
        out.append(f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
                   f'fill="#f6f6f6" stroke="#ccc"/>')
        out.append(f'<text x="{(left + right) / 2:.1f}" y="{(top + bottom) / 2:.1f}" '
                   f'text-anchor="middle" fill="#555">{escape(msg)}</text>')
        out.append("</svg>")
        return "\n".join(out)

    if chart.categories:
        xlo, xhi = -0.5, len(chart.categories) - 0.5
    else:
        xlo, xhi = _extent(chart.x, [v for ly in drawable for v in _layer_xs(ly)], pad_zero=False)
        if any(isinstance(ly, ErrorBars) or (isinstance(ly, Line) and ly.markers) for ly in drawable):
            pad = 0.03 * (xhi - xlo)  # keep edge points and their intervals off the axes
            xlo, xhi = xlo - (pad if chart.x.lo is None else 0.0), xhi + (pad if chart.x.hi is None else 0.0)
    xs = _Scale(chart.x, xlo, xhi, left, right)
    ys = _Scale(chart.y, *_extent(chart.y, [v for ly in drawable if _side(ly) is Side.LEFT
                                            for v in _layer_ys(ly)], True), bottom, top)
    y2s = None
    if chart.y2 is not None:
        y2s = _Scale(chart.y2, *_extent(chart.y2, [v for ly in drawable if _side(ly) is Side.RIGHT
                                                   for v in _layer_ys(ly)], True), bottom, top)

    out.extend(_axes(chart, xs, ys, y2s, left, right, top, bottom))
    for layer in drawable:
        scale = y2s if (_side(layer) is Side.RIGHT and y2s is not None) else ys
        out.extend(_draw(layer, xs, scale, top, bottom))
    out.extend(_legend(legend, h))
    out.append("</svg>")
    return "\n".join(out)


def _axes(chart: Chart, xs: _Scale, ys: _Scale, y2s: _Scale | None,
          left: float, right: float, top: float, bottom: float) -> list[str]:
    out = [f'<g class="axes" stroke="#ccc" stroke-width="1">']
    for t in ys.ticks():
        y = ys(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eee"/>')
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#888"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#888"/>')
    out.append("</g>")
    out.append('<g class="ticks" fill="#444" font-size="11">')
    for t in ys.ticks():
        out.append(f'<text x="{left - 6}" y="{ys(t) + 4:.1f}" text-anchor="end">'
                   f'{escape(_format_tick(t, ys.axis.tick_format))}</text>')
    if y2s is not None:
        for t in y2s.ticks():
            out.append(f'<text x="{right + 6}" y="{y2s(t) + 4:.1f}" text-anchor="start">'
                       f'{escape(_format_tick(t, y2s.axis.tick_format))}</text>')
    if chart.categories:
        xticks: list[tuple[float, str]] = [(float(i), c) for i, c in enumerate(chart.categories)]
    else:
        xticks = [(t, _format_tick(t, chart.x.tick_format)) for t in xs.ticks()]
        if chart.x.tick_format is TickFormat.CLOCK:
            xticks = _clock_ticks(xs.lo, xs.hi)
    for t, label in xticks:
        out.append(f'<text x="{xs(t):.1f}" y="{bottom + 16}" text-anchor="middle">{escape(label)}</text>')
    out.append("</g>")
    out.append(f'<text x="{(left + right) / 2:.1f}" y="{bottom + 34}" text-anchor="middle" '
               f'fill="#333">{escape(chart.x.label)}</text>')
    out.append(f'<text transform="translate(14 {(top + bottom) / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle" fill="#333">{escape(ys.axis.label)}</text>')
    if y2s is not None:
        out.append(f'<text transform="translate({chart.width_px - 12} {(top + bottom) / 2:.1f}) '
                   f'rotate(90)" text-anchor="middle" fill="#333">{escape(y2s.axis.label)}</text>')
    return out


def _clock_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """Ticks on round minutes/hours of the clock, labelled HH:MM (UTC)."""
    span = hi - lo
    step = next((s for s in (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
                 if span / s <= 7), 86400 * math.ceil(span / 86400 / 7))
    first = math.ceil(lo / step) * step
    return [(float(t), _format_tick(t, TickFormat.CLOCK)) for t in range(int(first), int(hi) + 1, step)]


def _draw(layer: Layer, xs: _Scale, ys: _Scale, top: float, bottom: float) -> list[str]:
    name = escape(layer.name if not isinstance(layer, Band) else layer.label, quote=True)
    if isinstance(layer, Band):
        x0, x1 = xs(max(layer.x_lo, xs.lo)), xs(min(layer.x_hi, xs.hi))
        return [f'<g class="band"><rect x="{x0:.1f}" y="{top}" width="{max(x1 - x0, 0):.1f}" '
                f'height="{bottom - top}" fill="{layer.color}" fill-opacity="0.15"><title>{name}</title></rect>',
                f'<text x="{(x0 + x1) / 2:.1f}" y="{top + 12}" text-anchor="middle" font-size="11" '
                f'fill="#555"{_HALO}>{escape(layer.label)}</text></g>']
    if isinstance(layer, Events):
        out = [f'<g class="events" stroke="{layer.color}" stroke-width="1.5">']
        for x, label in zip(layer.xs, layer.labels):
            px = xs(x)
            out.append(f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{bottom}" stroke-dasharray="3 3">'
                       f'<title>{escape(label)}</title></line>')
            if len(layer.xs) <= 12:  # a label per marker only while they cannot pile up
                out.append(f'<text x="{px + 3:.1f}" y="{top + 26}" font-size="10" '
                           f'fill="{layer.color}"{_HALO}>{escape(_short(label))}</text>')
        out.append("</g>")
        return out
    if isinstance(layer, Bars):
        floor = ys(ys.lo) if ys.axis.scale is ScaleKind.LOG else ys(max(ys.lo, 0.0))
        half = abs(xs(layer.width / 2) - xs(0))
        out = [f'<g class="bars" fill="{layer.color}" fill-opacity="0.8"><title>{name}</title>']
        for x, y in zip(layer.xs, layer.ys):
            if math.isfinite(x) and math.isfinite(y) and y != 0:  # a zero bar draws nothing
                py = ys(y)
                out.append(f'<rect x="{xs(x) - half:.1f}" y="{min(py, floor):.1f}" width="{2 * half:.1f}" '
                           f'height="{abs(floor - py):.1f}"><title>{escape(format_number(y))}</title></rect>')
        out.append("</g>")
        return out
    if isinstance(layer, ErrorBars):
        out = [f'<g class="errorbars" stroke="{layer.color}" fill="{layer.color}"><title>{name}</title>']
        for x, y, lo, hi in zip(layer.xs, layer.ys, layer.lo, layer.hi):
            if not (math.isfinite(x) and math.isfinite(y)):
                continue
            px = xs(x)
            if math.isfinite(lo) and math.isfinite(hi):
                out.append(f'<line x1="{px:.1f}" y1="{ys(lo):.1f}" x2="{px:.1f}" y2="{ys(hi):.1f}" stroke-width="1.5"/>')
            out.append(f'<circle cx="{px:.1f}" cy="{ys(y):.1f}" r="3.5"><title>'
                       f'{escape(format_number(y))} [{escape(format_number(lo))}, {escape(format_number(hi))}]'
                       f'</title></circle>')
        out.append("</g>")
        return out
    dash = ' stroke-dasharray="6 4"' if layer.dashed else ""
    out = [f'<g class="line" fill="none" stroke="{layer.color}" stroke-width="2"{dash}><title>{name}</title>']
    for run in _runs(layer.xs, layer.ys):
        pts = " ".join(f"{px:.1f},{py:.1f}" for px, py in _thin([(xs(x), ys(y)) for x, y in run]))
        out.append(f'<polyline points="{pts}"/>' if len(run) > 1 else
                   f'<circle cx="{xs(run[0][0]):.1f}" cy="{ys(run[0][1]):.1f}" r="2" fill="{layer.color}"/>')
    if layer.markers:
        out.extend(f'<circle cx="{xs(x):.1f}" cy="{ys(y):.1f}" r="3.5" fill="{layer.color}"/>'
                   for x, y in zip(layer.xs, layer.ys) if math.isfinite(x) and math.isfinite(y))
    out.append("</g>")
    return out


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Keep the first, lowest, highest and last point of each pixel column.

    A day at 15 s is 5,760 points for ~650 pixel columns; what a column shows is its
    vertical extent, so these four points draw the same picture with a tenth of the bytes.
    """
    if len(points) <= 4 * 700:
        return points
    out: list[tuple[float, float]] = []
    column: list[tuple[float, float]] = []
    for p in points:
        if column and int(p[0]) != int(column[0][0]):
            out.extend(_column_extremes(column))
            column = []
        column.append(p)
    out.extend(_column_extremes(column))
    return out


def _column_extremes(column: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(column) <= 4:
        return column
    keep = {0, len(column) - 1,
            min(range(len(column)), key=lambda i: column[i][1]),
            max(range(len(column)), key=lambda i: column[i][1])}
    return [column[i] for i in sorted(keep)]


def _short(text: str, limit: int = 40) -> str:
    """A label short enough to sit inside the plot; the full text stays in its tooltip."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _runs(xs: Sequence[float], ys: Sequence[float]) -> list[list[tuple[float, float]]]:
    """Split a series at NaNs: a gap in the data is a gap in the line."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in zip(xs, ys):
        if math.isfinite(x) and math.isfinite(y):
            runs[-1].append((x, y))
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _legend_layout(layers: Sequence[Layer], left: float, right: float) -> list[tuple[float, int, str, str]]:
    """Legend entries as ``(x, row, name, colour)``, wrapped onto new rows at ``right``."""
    out: list[tuple[float, int, str, str]] = []
    x, row = float(left), 0
    for layer in layers:
        if isinstance(layer, Band) or not layer.name:
            continue
        width = 24 + 6.5 * len(layer.name)
        if x + width > right and x > left:
            x, row = float(left), row + 1
        out.append((x, row, layer.name, layer.color))
        x += width
    return out


def _legend(entries: Sequence[tuple[float, int, str, str]], height: float) -> list[str]:
    out = ['<g class="legend" font-size="11" fill="#333">']
    for x, row, name, color in entries:
        y = height + 16 * row
        out.append(f'<rect x="{x:.1f}" y="{y - 13}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{y - 4}">{escape(name)}</text>')
    out.append("</g>")
    return out
