"""The detail sections of a report document: shape, step ledger, buckets, lag test, preemption, traps, runbook steps.

What ``--full`` adds below the short view, in the runbook's order; :mod:`pdcensus.report.document`
assembles them. Text is plain; numbers are only formatted here, never computed.
"""

from __future__ import annotations

import math

from pdcensus.census.model import CensusReport
from pdcensus.report.document_blocks import (
    Block, Bullets, Paragraph, Table, Tone, said, fmt_count, fmt_number, fmt_rate, fmt_ratio, fmt_seconds, fmt_share,
    fmt_time,
)

def shape_blocks(report: CensusReport) -> list[Block]:
    shape = report.shape
    tone = Tone.NORMAL if shape.proven else Tone.WARNING
    out: list[Block] = [Paragraph(("One shape proven. " if shape.proven else "Shape not proven. ") + shape.reason,
                                  tone)]
    if shape.segments:
        out.append(Table(
            ("shape", "from", "to", "scrapes", "profile", "starts because", "detail"),
            tuple((f"#{s.index}" + (" (analysed)" if s.index == shape.analysed else ""), fmt_time(s.start),
                   fmt_time(s.end), fmt_count(s.scrapes), s.profile, s.starts_because.value,
                   "; ".join((s.reason, *s.notes))) for s in shape.segments),
            numeric=(3,),
        ))
    return out


def bucket_blocks(report: CensusReport) -> list[Block]:
    out: list[Block] = []
    for table, what in ((report.buckets, "all prefill"), (report.client_new_buckets, "client-new prefill")):
        if table is None:
            continue
        out.append(Paragraph(
            f"Bucketed by {table.prefill} ({what}; {table.basis}); idle below "
            f"{fmt_rate(table.idle_threshold_tokens_per_second)} tokens/s ({table.idle_rule}); scrape interval "
            f"{fmt_seconds(table.scrape_interval_seconds)}."))
        out.append(Table(
            ("bucket", "prefill tokens/s", "samples", "decode tokens/s", "per-stream tokens/s", "vs idle",
             "TTFT p50", "TTFT p90", "TTFT p99", "requests", "ITL p50", "ITL p99", "preemptions"),
            tuple((r.bucket, f"{fmt_rate(r.low_tokens_per_second)} .. {fmt_rate(r.high_tokens_per_second)}",
                   fmt_count(r.samples), fmt_rate(r.decode_tokens_per_second),
                   fmt_rate(r.per_stream_tokens_per_second), fmt_share(r.per_stream_vs_idle),
                   fmt_seconds(r.ttft_p50_seconds), fmt_seconds(r.ttft_p90_seconds),
                   fmt_seconds(r.ttft_p99_seconds), fmt_count(r.ttft_requests), fmt_seconds(r.itl_p50_seconds),
                   fmt_seconds(r.itl_p99_seconds), fmt_count(r.preemptions))
                  for r in table.rows),
            numeric=tuple(range(2, 13)),
        ))
        if table.warnings:
            out.append(Bullets(table.warnings, tone=Tone.WARNING))
    if report.buckets is None:
        out.append(Paragraph("No bucket table for this shape.", Tone.MUTED))
    ttft = report.ttft
    out.append(Paragraph(
        f"TTFT ({ttft.family or 'no histogram'}): idle p90 {fmt_seconds(ttft.idle_p90_seconds)}, busiest bucket "
        f"p90 {fmt_seconds(ttft.busiest_p90_seconds)}. {ttft.reason}", Tone.NORMAL if ttft.available else Tone.MUTED))
    return out


def lag_blocks(report: CensusReport) -> list[Block]:
    lag = report.lag
    if not lag.available:
        return [Paragraph("No lag test: " + lag.reason, Tone.MUTED)]
    lo, hi = lag.tail_window_seconds
    if math.isfinite(lag.tail_effect):
        tail = (f"Tail ({lo / 60:g}-{hi / 60:g} min): effect {fmt_number(lag.tail_effect)} "
                f"[{fmt_number(lag.tail_low)}, {fmt_number(lag.tail_high)}] over {fmt_count(lag.tail_samples)} samples "
                f"({fmt_count(lag.clean_samples)} with idle prefill of their own)")
    else:
        tail = (f"Tail ({lo / 60:g}-{hi / 60:g} min): not measured ({fmt_count(lag.tail_samples)} tail and "
                f"{fmt_count(lag.clean_samples)} clean samples)")
    longest = lag.longest_lag_with_effect_seconds
    out: list[Block] = [Paragraph(
        tail + (f"; longest lag with an effect {fmt_number(longest / 60)} min" if math.isfinite(longest) else "")
        + f". {said(lag.reason)}".rstrip())]
    if lag.control:  # which scrapes each lag compares
        out.append(Paragraph(f"Control: {lag.control}", Tone.MUTED))
    if lag.points:
        out.append(Table(
            ("lag (min)", "effect", "low", "high", "busy samples", "idle samples"),
            tuple((fmt_number(p.lag_seconds / 60), fmt_number(p.effect), fmt_number(p.low), fmt_number(p.high),
                   fmt_count(p.busy_samples), fmt_count(p.idle_samples)) for p in lag.points),
            caption=f"Effect per lag ({len(lag.points)} lags).", numeric=tuple(range(6)), fold_after=24,
        ))
    return out


def ledger_blocks(report: CensusReport) -> list[Block]:
    ld = report.ledger
    if not ld.available:
        return [Paragraph("No step ledger: " + ld.reason, Tone.MUTED)]
    rows = [
        ("mean decode-only step", fmt_seconds(ld.decode_step_seconds)),
        ("mean chunk step", fmt_seconds(ld.chunk_step_seconds)),
        ("mean step (diluted, for contrast)", fmt_seconds(ld.mean_step_seconds)),
        ("steps", fmt_count(ld.steps)),
        ("held steps", fmt_count(ld.held_steps)),
        ("chunk steps' share of steps", fmt_share(ld.chunk_share_of_steps)),
        ("chunk steps' share of step time", fmt_share(ld.chunk_share_of_step_time)),
        ("reference decode-only step", fmt_seconds(ld.reference_decode_step_seconds)
         + (f" ({ld.reference})" if ld.reference else "")),
        ("decode-only step during prefill / reference", fmt_ratio(ld.decode_step_inflation_during_prefill)),
        ("decode-only step 2-14 min after prefill / reference", fmt_ratio(ld.decode_step_inflation_after_prefill)),
        ("intervals", fmt_count(ld.intervals)),
    ]
    out: list[Block] = [Paragraph(said(ld.reason))] if said(ld.reason) else []
    out.append(Table(("ledger", "value"), tuple(rows), numeric=(1,)))
    if ld.held_steps == 0:
        out.append(Paragraph("Held steps are zero: nothing is protecting decoders.", Tone.WARNING))
    if ld.by_bucket:
        out.append(Table(
            ("prefill bucket", "intervals", "decode-only step", "chunk step", "chunk steps"),
            tuple((b.bucket, fmt_count(b.intervals), fmt_seconds(b.decode_step_seconds),
                   fmt_seconds(b.chunk_step_seconds), fmt_count(b.chunk_steps)) for b in ld.by_bucket),
            caption="Decode-only and chunk step by the prefill bucket of the same interval.", numeric=(1, 2, 3, 4),
        ))
    return out


def preemption_blocks(report: CensusReport) -> list[Block]:
    pre = report.preemption
    if not pre.available:
        return [Paragraph("No preemption counter: " + pre.reason, Tone.MUTED)]
    out: list[Block] = [Paragraph(
        f"{fmt_count(pre.total)} preemptions in {len(pre.bursts)} bursts; decode dip {fmt_share(pre.decode_dip)}, "
        f"prefill spike {fmt_share(pre.prefill_spike)}; instant preempted depth max {fmt_number(pre.depth_max)}, "
        f"mean {fmt_number(pre.depth_mean)} (a depth, not a count). {said(pre.reason)}".rstrip())]
    if pre.bursts:
        out.append(Table(
            ("from", "to", "preemptions", "decode vs baseline", "prefill vs baseline"),
            tuple((fmt_time(b.start), fmt_time(b.end), fmt_count(b.preemptions), fmt_share(b.decode_vs_baseline),
                   fmt_share(b.prefill_vs_baseline)) for b in pre.bursts),
            numeric=(2, 3, 4),
        ))
    return out


def trap_blocks(report: CensusReport) -> list[Block]:
    fired = [t for t in report.traps if t.fired]
    quiet = [t for t in report.traps if not t.fired]
    if not report.traps:
        return [Paragraph("No trap checks ran.", Tone.MUTED)]
    out: list[Block] = [Paragraph(f"{len(fired)} of {len(report.traps)} traps fired on this data.",
                                  Tone.WARNING if fired else Tone.GOOD)]
    out.append(Table(
        ("trap", "fired", "value", "what it means"),
        tuple((t.name, "FIRED" if t.fired else "no", fmt_number(t.value), t.text) for t in fired + quiet),
        row_tones=tuple(Tone.WARNING if t.fired else Tone.NORMAL for t in fired + quiet),
    ))
    return out


def pass_blocks(report: CensusReport) -> list[Block]:
    """Which runbook steps ran on this engine's metrics, what a missing one cost, and why."""
    skipped = [p for p in report.passes if not p.ran]
    out: list[Block] = [Paragraph(
        f"{len(report.passes) - len(skipped)} of {len(report.passes)} steps of the census procedure "
        "(docs/runbook.md) could run on this engine's metrics.", Tone.WARNING if skipped else Tone.GOOD)]
    out.append(Table(
        ("step", "ran", "confidence factor", "why"),
        tuple((p.name, "yes" if p.ran else "NO", fmt_number(p.confidence_factor), p.reason) for p in report.passes),
        row_tones=tuple(Tone.NORMAL if p.ran else Tone.WARNING for p in report.passes),
    ))
    return out
