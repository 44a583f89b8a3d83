"""The report's figures: one :class:`~pdcensus.report.plots.Chart` per census view.

Each function reads only the typed census report (:mod:`pdcensus.census.model`) and draws
what the census measured; nothing here computes a figure the census did not. The HTML and
Markdown reports render the same charts, so the two can never disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pdcensus.census.model import CensusReport, SegmentStart
from pdcensus.report.chart import (
    PALETTE, Axis, Band, Bars, Chart, ErrorBars, Events, Line, ScaleKind, Side, TickFormat,
)

_SEGMENT_COLORS = ("#56B4E9", "#E69F00")
TIME_AXIS = Axis("time (UTC)", tick_format=TickFormat.CLOCK)


def said(reason: str) -> str:
    """A pass's reason as a reader should see it: the census writes ``ran`` where there is nothing to say."""
    return "" if reason.strip() in ("", "ran") else reason


@dataclass(frozen=True)
class Figure:
    """A chart with its file-safe slug (the SVG id in HTML, the file name beside Markdown)."""

    slug: str
    chart: Chart
    caption: str


def _log_if_wide(values: tuple[float, ...] | list[float], label: str) -> Axis:
    """A log axis when the positive values span more than 30x (a chunk step beside 15 ms)."""
    pos = [v for v in values if math.isfinite(v) and v > 0]
    wide = bool(pos) and max(pos) / min(pos) > 30
    return Axis(label, scale=ScaleKind.LOG if wide else ScaleKind.LINEAR)


def shape_figure(report: CensusReport) -> Figure:
    """Segments over time, each labelled with why it starts; the analysed one stands out."""
    shape = report.shape
    layers: list[Band | Line | Events] = []
    for seg in shape.segments:
        mark = " (analysed)" if seg.index == shape.analysed else ""
        color = PALETTE[2] if mark else _SEGMENT_COLORS[seg.index % 2]
        layers.append(Band(f"#{seg.index} {seg.starts_because.value}{mark}", seg.start, seg.end, color))
    if report.timeline is not None and report.timeline.times:
        layers.append(Line("decode tokens/s (analysed shape)", report.timeline.times,
                           report.timeline.decode_tokens_per_second))
    starts = [seg for seg in shape.segments if seg.starts_because is not SegmentStart.WINDOW_START]
    if starts:
        layers.append(Events("shape starts", tuple(s.start for s in starts),
                             tuple(f"#{s.index}: {s.reason}" for s in starts), color=PALETTE[6]))
    chart = Chart(
        title="Shape timeline",
        description="Each shaded band is one shape (one process of one build), labelled with why it starts; "
                    "buckets are ranked inside the analysed shape only.",
        x=TIME_AXIS, y=Axis("decode tokens/s"), layers=tuple(layers),
        note="" if shape.segments else "no shape: " + shape.reason,
    )
    return Figure("shape-timeline", chart, said(shape.reason))


def bucket_figure(report: CensusReport) -> Figure:
    """Per-stream decode rate (bars) and TTFT p90 (line) per prefill bucket."""
    table = report.buckets
    if table is None or not table.rows:
        chart = Chart("Decode and TTFT by prefill bucket", "No bucket table.", Axis("prefill bucket"),
                      Axis("per-stream decode tokens/s"), (), note="no bucket table for this shape")
        return Figure("buckets", chart, "")
    rows = table.rows
    idx = tuple(float(i) for i in range(len(rows)))
    ttft = tuple(r.ttft_p90_seconds for r in rows)
    layers: list[Bars | Line] = [Bars("per-stream decode tokens/s", idx,
                                      tuple(r.per_stream_tokens_per_second for r in rows))]
    has_ttft = any(math.isfinite(v) for v in ttft)
    if has_ttft:
        layers.append(Line("TTFT p90 (s)", idx, ttft, color=PALETTE[1], side=Side.RIGHT, markers=True))
    chart = Chart(
        title="Decode and TTFT by prefill bucket",
        description=f"Decode bucketed by {table.prefill} from the same scrape ({table.basis}): per-stream "
                    "decode rate per bucket as bars, TTFT p90 of the same intervals as a line.",
        x=Axis(f"prefill bucket ({table.prefill})"), y=Axis("per-stream decode tokens/s"),
        y2=_log_if_wide(ttft, "TTFT p90 (s)") if has_ttft else None,
        layers=tuple(layers), categories=tuple(r.bucket for r in rows),
    )
    return Figure("buckets", chart, "; ".join(table.warnings))


def lag_figure(report: CensusReport) -> Figure:
    """Effect per lag with its interval; the eviction tail band (2-14 min) shaded."""
    lag = report.lag
    lo, hi = lag.tail_window_seconds
    pts = lag.points
    layers: list[Band | ErrorBars | Line] = [Band(f"lagged tail {lo / 60:g}-{hi / 60:g} min", lo, hi)]
    if pts:
        layers.append(ErrorBars("effect (interval)", tuple(p.lag_seconds for p in pts),
                                tuple(p.effect for p in pts), tuple(p.low for p in pts),
                                tuple(p.high for p in pts)))
        layers.append(Line("no effect (ratio 1)", (0.0, max(max(p.lag_seconds for p in pts), hi)), (1.0, 1.0),
                           color="#888888", dashed=True))
    chart = Chart(
        title="Lag profile",
        description="Per-stream decode rate after busy prefill at each lag, as a ratio to idle (1 = no effect), "
                    "with its interval. A dip at lag 0 only means step-time sharing; a dip inside the shaded "
                    "2-14 minute band means a lagged tail (eviction).",
        x=Axis("lag (minutes)", tick_format=TickFormat.MINUTES),
        y=Axis("per-stream rate, busy / idle"), layers=tuple(layers),
        note="" if (lag.available and pts) else "no lag test: " + lag.reason,
    )
    return Figure("lag-profile", chart, lag.control)


def ledger_figure(report: CensusReport) -> Figure:
    """Mean decode-only step and mean chunk step per interval, held steps as bars."""
    ledger = report.ledger
    tl = ledger.timeline
    if not ledger.available or tl is None or not tl.times:
        chart = Chart("Step ledger over time", "No step ledger.", TIME_AXIS, Axis("step (s)"), (),
                      note="no step ledger: " + ledger.reason)
        return Figure("ledger-timeline", chart, said(ledger.reason))
    layers: list[Line | Bars] = [
        Line("mean decode-only step (s)", tl.times, tl.decode_step_seconds),
        Line("mean chunk step (s)", tl.times, tl.chunk_step_seconds, color=PALETTE[1]),
    ]
    held = any(math.isfinite(v) and v > 0 for v in tl.held_steps)
    if held:
        gaps = [b - a for a, b in zip(tl.times, tl.times[1:]) if b > a]
        width = 0.8 * (sorted(gaps)[len(gaps) // 2] if gaps else 1.0)
        layers.insert(0, Bars("held steps", tl.times, tl.held_steps, color=PALETTE[2], side=Side.RIGHT,
                              width=width))
    chart = Chart(
        title="Step ledger over time",
        description="Per interval between scrapes: the mean decode-only step and the mean chunk step (the "
                    "phase ratio, never step_seconds/steps), and the held steps --prefill-interleave forced.",
        x=TIME_AXIS, y=_log_if_wide(tl.decode_step_seconds + tl.chunk_step_seconds, "step (s)"),
        y2=Axis("held steps") if held else None, layers=tuple(layers),
    )
    return Figure("ledger-timeline", chart, ledger.reference)


def preemption_figure(report: CensusReport) -> Figure:
    """Decode rate over time with the preemption counter's increases and the bursts marked."""
    pre, tl = report.preemption, report.timeline
    layers: list[Band | Line | Bars] = [
        Band(f"burst: {b.preemptions:g}", b.start, b.end, PALETTE[1]) for b in pre.bursts
    ]
    if tl is not None and tl.times:
        layers.append(Line("decode tokens/s", tl.times, tl.decode_tokens_per_second))
    if pre.times:
        gaps = [b - a for a, b in zip(pre.times, pre.times[1:]) if b > a]
        width = 0.8 * (sorted(gaps)[len(gaps) // 2] if gaps else 1.0)
        layers.append(Bars("preemptions per interval", pre.times, pre.increases, color=PALETTE[1],
                           side=Side.RIGHT, width=width))
    chart = Chart(
        title="Preemption bursts over decode rate",
        description="Decode tokens/s per scrape, the increase of the preemption counter per interval (never "
                    "the instant preempted depth), and the bursts the census found, shaded.",
        x=TIME_AXIS, y=Axis("decode tokens/s"), y2=Axis("preemptions") if pre.times else None,
        layers=tuple(layers),
        note="" if (pre.available and (pre.times or (tl is not None and tl.times))) else
        "no preemption series: " + pre.reason,
    )
    return Figure("preemption-bursts", chart, said(pre.reason))


def all_figures(report: CensusReport) -> dict[str, Figure]:
    """Every figure of one report, by slug, in the order the report shows them."""
    figs = (shape_figure(report), bucket_figure(report), lag_figure(report), ledger_figure(report),
            preemption_figure(report))
    return {f.slug: f for f in figs}
