"""The fleet page: one self-contained HTML file, one row per endpoint in ranking order.

Each row shows the rank, the endpoint, what the census found (headline, principal mechanism and
severity, total lost decode share with its interval, a tie mark where the interval overlaps the
row above), the screen's estimate and flags, a small timeline of per-stream decode (blue) and
prefill (orange, on its own scale) over the window, and a link to the endpoint's full census
report where it was examined. It shares the census report's stylesheet and Content-Security-
Policy (:mod:`pdcensus.report.html`): no script, nothing loaded from anywhere. Every string from
the data (job and instance labels, mechanisms, flags, errors, link targets) goes through
:func:`html.escape`; link targets are file names made of ``[A-Za-z0-9._-]`` only.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from pdcensus.fleet.examine import report_file_name
from pdcensus.fleet.rank import EXAMINED, INCONCLUSIVE, RankRow
from pdcensus.fleet.run import FleetResult
from pdcensus.report.html import CSP, CSS

WIDTH, HEIGHT = 180, 36
DECODE_COLOUR, PREFILL_COLOUR = "#0072B2", "#D55E00"  # Okabe-Ito, as the census report's plots


def _polyline(values: list[float], colour: str) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if not finite or max(finite) <= 0:
        return ""
    top, n = max(finite), max(len(values) - 1, 1)
    runs: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if not math.isfinite(v):
            runs.append([])
            continue
        runs[-1].append(f"{i * WIDTH / n:.1f},{HEIGHT - 2 - v / top * (HEIGHT - 4):.1f}")
    return "".join(f'<polyline fill="none" stroke="{colour}" stroke-width="1.2" points="{" ".join(r)}"/>'
                   for r in runs if len(r) > 1)


def timeline_svg(series: dict[str, list[float]] | None) -> str:
    """A small inline SVG: per-stream decode and prefill, each scaled to its own maximum."""
    if not series:
        return '<span class="muted">no timeline</span>'
    body = _polyline(series.get("prefill", []), PREFILL_COLOUR) + _polyline(series.get("per_stream", []),
                                                                           DECODE_COLOUR)
    return (f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
            f'aria-label="per-stream decode and prefill over the window">{body}</svg>')


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %" if math.isfinite(x) else "-"


def _row(row: RankRow, result: FleetResult, reports_href: str | None) -> str:
    examined = row.group in (EXAMINED, INCONCLUSIVE)
    if row.group == EXAMINED:
        loss = f"{_pct(row.loss_share)} <span class=\"muted\">[{_pct(row.loss_interval[0])}, " \
               f"{_pct(row.loss_interval[1])}]</span>"
    else:
        loss = "-" if examined else '<span class="muted">not examined</span>'
    tie = "≈" if row.tied_with_previous else ""
    principal = escape(f"{row.principal} ({row.severity})") if row.principal else ""
    if examined and reports_href is not None:
        href = escape(f"{reports_href}/{report_file_name(row.job, row.instance)}", quote=True)
        link = f'<a href="{href}">full report</a>'
    else:
        link = ""
    note = escape(row.error) if row.error else escape(", ".join(row.flags))
    cells = [f'<td class="num">{row.rank}{tie}</td>', f"<td>{escape(row.job)}</td>", f"<td>{escape(row.instance)}</td>",
             f"<td>{escape(row.mechanism)}</td>", f"<td>{principal}</td>", f'<td class="num">{loss}</td>',
             f'<td class="num">{_pct(row.screen_score)}</td>',
             f"<td>{timeline_svg(result.timelines.get((row.job, row.instance)))}</td>", f"<td>{link}</td>",
             f'<td class="{"warning" if row.error else "muted"}">{note}</td>']
    return "<tr>" + "".join(cells) + "</tr>"


def render_fleet_page(result: FleetResult, reports_href: str | None = None) -> str:
    """The fleet page; ``reports_href`` is where the examined endpoints' reports are, relative to it."""
    head = ("<th>rank</th><th>job</th><th>instance</th><th>census</th><th>principal (severity)</th>"
            "<th>lost decode share [interval]</th><th>screen estimate</th><th>timeline</th><th>report</th>"
            "<th>flags / error</th>")
    rows = "\n".join(_row(r, result, reports_href) for r in result.ranking)
    examined = sum(r.group in (EXAMINED, INCONCLUSIVE) for r in result.ranking)
    stages = ", ".join(f"{name} {cost.seconds:.1f} s ({cost.wire.requests} requests)"
                       for name, cost in result.costs.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>pdcensus fleet: {escape(result.selector or "every engine endpoint")}</title>
<style>{CSS}</style></head>
<body>
<h1>Fleet: {len(result.ranking)} endpoint(s) under {escape(result.selector or "no selector (every engine endpoint)")}</h1>
<p class="subtitle">{escape(result.prometheus)}; ranked by the census's total lost decode share;
{examined} examined from raw samples (every flagged endpoint and the top {result.examine} of the others);
the rest are ordered by the screen's estimate, which flags and ranks but names no mechanism.
≈ marks a row whose interval overlaps the row above (a tie). Stages: {escape(stages)}.</p>
<p class="muted">Timeline: <span style="color:{DECODE_COLOUR}">per-stream decode</span> and
<span style="color:{PREFILL_COLOUR}">prefill</span>, each on its own scale.</p>
<div class="table-wrap"><table>
<thead><tr>{head}</tr></thead>
<tbody>
{rows}
</tbody></table></div>
</body></html>
"""


def write_fleet_page(result: FleetResult, path: Path, reports_href: str | None = None) -> Path:
    path.write_text(render_fleet_page(result, reports_href), encoding="utf-8")
    return path
