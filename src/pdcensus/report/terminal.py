"""The terminal view of a census report (rich): the short view, and with ``full`` every table after it.

Written for someone paged at 3 a.m.: the short view (:mod:`pdcensus.report.terminal_short`)
says which mechanism and how sure, how much it costs, the evidence that decided it, what to do
and how to verify it. ``full`` adds, in the sections every view shares
(:data:`pdcensus.report.summary.FULL_SECTIONS`), the advice's trade-off and notes, every finding
and evidence row, then the runbook's order (shape, ledger, buckets, lag, preemption, traps),
which of the runbook's steps could run on this engine's metrics, and the glossary's pointer.
Every table goes through :func:`~pdcensus.report.terminal_fit.fit_table`, so no word is split at
any width. It only reads the typed report model; it never computes a figure the census did not.
"""

from __future__ import annotations

import datetime as _dt
import io
import math

from rich.console import Console
from rich.markup import escape as _e
from rich.table import Table
from rich.text import Text

from pdcensus.advice.endpoint_report import advice_of
from pdcensus.census.model import BucketTable, CensusReport
from pdcensus.report.document_blocks import said
from pdcensus.report.safe_console import SafeConsole
from pdcensus.report.summary import summarise, why_no_advice
from pdcensus.report.terminal_fit import fit_table
from pdcensus.report.terminal_short import render_footer, render_summary, section

_LAG_MINUTES = (0, 0.5, 1, 2, 3, 5, 7, 10, 14, 20)


def _f(x: float | None, fmt: str = ".3g", unit: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:{fmt}}{unit}"


def _ms(x: float) -> str:
    return _f(x * 1000 if math.isfinite(x) else x, ".1f", " ms")


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %" if math.isfinite(x) else "-"


def _t(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%m-%d %H:%M:%S")


def _bucket_table(title: str, b: BucketTable) -> Table:
    t = Table(title=title, title_justify="left")
    for col in ("bucket", "samples", "decode tok/s", "per-stream tok/s", "vs idle", "TTFT p50", "p90", "p99",
                "ITL p99", "preemptions"):
        t.add_column(col, justify="left" if col == "bucket" else "right")
    for r in b.rows:
        t.add_row(_e(r.bucket), str(r.samples), _f(r.decode_tokens_per_second, ".0f"),
                  _f(r.per_stream_tokens_per_second, ".1f"), _f(r.per_stream_vs_idle, ".2f"),
                  _f(r.ttft_p50_seconds, ".2f", " s"), _f(r.ttft_p90_seconds, ".2f", " s"),
                  _f(r.ttft_p99_seconds, ".2f", " s"), _ms(r.itl_p99_seconds), _f(r.preemptions, ".0f"))
    return t


def render(report: CensusReport, console: Console, full: bool = True) -> None:
    """Print the report on a rich console: the short view, then (``full``) every section after it."""
    render_summary(summarise(report), console)
    if not full:
        render_footer(console, report.source, [t.name for t in report.traps if t.fired])
        return
    from pdcensus.report.terminal_advice import render_advice

    section(console, "Advice in detail")
    render_advice(advice_of(report), console, none_text="no advice: " + why_no_advice(report).removeprefix("none: "))
    _findings(report, console)
    _shape(report, console)
    _ledger(report, console)
    _buckets(report, console)
    _lag(report, console)
    _preemption(report, console)
    section(console, "Traps")
    tr = Table()
    for col in ("trap", "fired", "what"):
        tr.add_column(col)
    for t in report.traps:
        tr.add_row(_e(t.name), "[bold red]FIRED[/bold red]" if t.fired else "no", _e(t.text))
    console.print(fit_table(tr, console))
    over = report.overload
    if over is not None and over.available and not over.overloaded:
        console.print(f"[bold]Capacity:[/bold] {_e(over.reason)}")
    if report.passes:
        section(console, "Runbook steps on this engine's metrics")
        console.print("the census procedure, step by step: docs/runbook.md")
        ps = Table()
        for col in ("step", "ran", "confidence x", "why"):
            ps.add_column(col)
        for rp in report.passes:
            ps.add_row(_e(rp.name), "yes" if rp.ran else "[bold yellow]NO[/bold yellow]",
                       _f(rp.confidence_factor, ".2f"), _e(rp.reason))
        console.print(fit_table(ps, console))
    section(console, "Glossary")
    console.print("pdcensus explain TERM prints what a term means (pdcensus explain lists them); all of them: "
                  "docs/glossary.md")


def _findings(report: CensusReport, console: Console) -> None:
    v = report.verdict
    section(console, "All findings and evidence")
    if v.found:
        ft = Table(title="each mechanism whose signature is in the data, and what it costs", title_justify="left")
        for col in ("mechanism", "severity (how much)", "share of decoders' time", "90% interval", "depth",
                    "acts", "ITL p99", "confidence (how sure)", "signature"):
            ft.add_column(col)
        for f in v.found:
            ft.add_row(f.mechanism.value, f.severity.value, _pct(f.loss_share),
                       f"{_pct(f.interval[0])}-{_pct(f.interval[1])}", _f(f.depth, ".2f"), _pct(f.active_share),
                       _f(f.itl_p99_ratio, ".1f", "x"), f"{f.confidence:.2f}", _e(f.signature.value))
        console.print(fit_table(ft, console))
    dr = v.dose_response
    if dr is not None and dr.available:
        ledger = (f"; ledger: {dr.ledger_ms_per_1k_tokens:.0f} ms" if math.isfinite(dr.ledger_ms_per_1k_tokens) else "")
        console.print(f"dose-response: decoders lose {dr.stall_ms_per_1k_tokens:.1f} ms per 1k prefill tokens "
                      f"(90% interval {dr.stall_interval[0]:.1f}-{dr.stall_interval[1]:.1f}){ledger}"
                      + ("" if dr.stable else "; unstable, not used as evidence"))
    felt = report.client_felt
    if felt is not None:
        ct = Table(title=f"What users felt (client records, clock offset {felt.alignment.offset_seconds:+.1f} s; "
                         f"decode busy/idle as felt: {_f(felt.tpot_ratio, '.2f')})", title_justify="left")
        for col in ("requests", "n", "TTFT p50", "TTFT p90", "TPOT p50", "TPOT p90"):
            ct.add_column(col, justify="left" if col == "requests" else "right")
        for label, side in (("arrived while prefill busy", felt.arrived_busy), ("arrived while idle", felt.arrived_idle),
                            ("decoded mostly beside prefill", felt.decoded_busy),
                            ("decoded mostly without", felt.decoded_idle)):
            ct.add_row(label, str(side.requests), _f(side.ttft_p50, ".2f", " s"), _f(side.ttft_p90, ".2f", " s"),
                       _ms(side.tpot_p50), _ms(side.tpot_p90))
        console.print(fit_table(ct, console))
    if v.settle:
        console.print("[bold]What would settle it:[/bold]")
        for s in v.settle:
            console.print(f"  - {_e(s)}")
    ev = Table(title="Evidence: every number the verdict rests on", title_justify="left")
    for col in ("rule", "value", "threshold", "holds", "what"):
        ev.add_column(col)
    for e in v.evidence:
        ev.add_row(_e(e.rule), _f(e.value), _f(e.threshold), "yes" if e.satisfied else "no", _e(e.text))
    console.print(fit_table(ev, console))


def _shape(report: CensusReport, console: Console) -> None:
    section(console, "Shape")
    console.print(_e(f"{report.shape.reason} (analysed: {report.shape.analysed})"))
    sh = Table()
    for col in ("#", "start (UTC)", "end", "scrapes", "profile", "starts because", "notes"):
        sh.add_column(col)
    for seg in report.shape.segments:
        mark = "*" if seg.index == report.shape.analysed else ""
        sh.add_row(f"{seg.index}{mark}", _t(seg.start), _t(seg.end), str(seg.scrapes), _e(seg.profile),
                   _e(seg.reason), _e("; ".join(seg.notes)))
    console.print(fit_table(sh, console))


def _ledger(report: CensusReport, console: Console) -> None:
    section(console, "Step ledger")
    lg = report.ledger
    if not lg.available:
        console.print(f"unavailable - {_e(lg.reason)}")
        return
    console.print(f"{lg.intervals} intervals: decode-only step {_ms(lg.decode_step_seconds)}, "
                  f"chunk step {_ms(lg.chunk_step_seconds)}, mean step {_ms(lg.mean_step_seconds)} (diluted), "
                  f"held steps {lg.held_steps:.0f}, chunk steps {100 * lg.chunk_share_of_steps:.1f} % of steps / "
                  f"{100 * lg.chunk_share_of_step_time:.0f} % of step time; reference decode-only step "
                  f"{_ms(lg.reference_decode_step_seconds)} ({_e(lg.reference)}); inflation during prefill "
                  f"{_f(lg.decode_step_inflation_during_prefill, '.2f')}, after prefill "
                  f"{_f(lg.decode_step_inflation_after_prefill, '.2f')}")
    lt = Table(title="by prefill bucket", title_justify="left")
    for col in ("bucket", "intervals", "decode-only step", "chunk step", "chunk steps"):
        lt.add_column(col, justify="right")
    for b in lg.by_bucket:
        lt.add_row(_e(b.bucket), str(b.intervals), _ms(b.decode_step_seconds), _ms(b.chunk_step_seconds),
                   _f(b.chunk_steps, ".0f"))
    console.print(fit_table(lt, console))


def _buckets(report: CensusReport, console: Console) -> None:
    section(console, "Decode by prefill bucket")
    for title, table in (("buckets", report.buckets), ("buckets on client-new prefill", report.client_new_buckets)):
        if table is None:
            continue
        console.print(fit_table(_bucket_table(_e(f"{title}: decode by {table.prefill} ({table.basis})"), table),
                                console))
        console.print(f"  {_e(table.idle_rule)}; busy edges "
                      + ", ".join(_f(e, ".0f") for e in table.edges_tokens_per_second if math.isfinite(e)))
        for w in table.warnings:
            console.print(f"  [yellow]warning:[/yellow] {_e(w)}")
    if report.buckets is None:
        console.print("no bucket table for this shape")
    console.print(f"TTFT: {_e(report.ttft.reason)}" + (
        f"; p90 idle {_f(report.ttft.idle_p90_seconds, '.2f', ' s')}, busiest bucket "
        f"{_f(report.ttft.busiest_p90_seconds, '.2f', ' s')}" if report.ttft.available else ""))


def _lag(report: CensusReport, console: Console) -> None:
    section(console, "Lag test")
    lag = report.lag
    if not lag.available:
        console.print(f"unavailable - {_e(lag.reason)}")
        return
    lt = Table(title="per-stream rate, busy-at-lag / idle-at-lag", title_justify="left")
    for col in ("lag", "effect", "90% interval", "busy n", "idle n"):
        lt.add_column(col, justify="right")
    wanted = {m * 60 for m in _LAG_MINUTES}
    step = lag.points[1].lag_seconds if len(lag.points) > 1 else 60.0
    for p in lag.points:
        if any(abs(p.lag_seconds - w) < step / 2 for w in wanted):
            lt.add_row(f"{p.lag_seconds / 60:.1f} min", _f(p.effect, ".2f"), f"{_f(p.low, '.2f')}-{_f(p.high, '.2f')}",
                       str(p.busy_samples), str(p.idle_samples))
    console.print(fit_table(lt, console))
    if math.isfinite(lag.tail_effect):
        console.print(f"  tail test (2-14 min): {_f(lag.tail_effect, '.2f')} (90% interval {_f(lag.tail_low, '.2f')}-"
                      f"{_f(lag.tail_high, '.2f')}), {lag.tail_samples} tail vs {lag.clean_samples} clean scrapes; "
                      f"{_e(said(lag.reason))}")
    else:
        console.print(f"  tail test (2-14 min): not measured ({lag.tail_samples} tail vs {lag.clean_samples} clean "
                      f"scrapes): {_e(said(lag.reason))}")
    console.print(f"  control: {_e(lag.control)}")


def _preemption(report: CensusReport, console: Console) -> None:
    section(console, "Preemption bursts")
    pr = report.preemption
    if not pr.available:
        console.print(_e(pr.reason))
        return
    if not pr.bursts:
        console.print(f"{pr.total:.0f} preemptions, no burst; instant depth max {_f(pr.depth_max, '.0f')} (context only)")
        return
    console.print(f"{pr.total:.0f} preemptions in {len(pr.bursts)} bursts; decode at bursts "
                  f"{_f(pr.decode_dip, '.2f')} x same-bucket baseline, prefill {_f(pr.prefill_spike, '.2f')} x mean; "
                  f"instant depth max {_f(pr.depth_max, '.0f')} (context only)")


def render_text(report: CensusReport, width: int = 120, full: bool = True) -> str:
    """The terminal report as plain text (no colour codes)."""
    buf = io.StringIO()
    render(report, SafeConsole(file=buf, width=width, color_system=None, force_terminal=False), full=full)
    return buf.getvalue()
