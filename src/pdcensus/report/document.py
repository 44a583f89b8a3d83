"""The census report as a document: headings, paragraphs, tables and figures.

:func:`build_document` turns typed census reports into a list of plain blocks that both
the HTML renderer (:mod:`pdcensus.report.html`) and the Markdown renderer
(:mod:`pdcensus.report.markdown`) walk, so the two show the same content in the same
order: verdict and confidence first, then the shape, buckets, lag profile, step ledger,
preemption bursts, traps and advice. Text in blocks is plain (never markup); escaping
belongs to each renderer. Numbers are only formatted here, never computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pdcensus.advice.endpoint_report import advice_of
from pdcensus.census.model import CensusReport, Mechanism
from pdcensus.report.document_advice import advice_blocks
from pdcensus.report.document_blocks import (
    Block, Bullets, Callout, FigureBlock, Heading, Paragraph, Table, Tone,
    fmt_count, fmt_number, fmt_rate, fmt_ratio, fmt_seconds, fmt_share, fmt_time,
)
from pdcensus.report.figures import all_figures

__all__ = ["Document", "build_document", "Block", "Tone"]

_VERDICT_TONE = {
    Mechanism.NONE: Tone.GOOD, Mechanism.INCONCLUSIVE: Tone.MUTED,
}


@dataclass(frozen=True)
class Document:
    """Title, subtitle and the blocks in reading order."""

    title: str
    subtitle: str
    blocks: tuple[Block, ...]


def build_document(reports: Sequence[CensusReport], *, title: str | None = None) -> Document:
    """One document for one or several endpoints' census reports."""
    many = len(reports) > 1
    blocks: list[Block] = []
    for i, report in enumerate(reports):
        if many:
            blocks.append(Heading(2, f"Endpoint {report.instance} (job {report.job})", f"endpoint-{i}"))
        blocks.extend(endpoint_blocks(report, level=3 if many else 2, key=f"e{i}" if many else ""))
    if not reports:
        blocks.append(Paragraph("No endpoint in this report.", Tone.MUTED))
        name = "no endpoint"
    else:
        name = reports[0].instance if not many else f"{len(reports)} endpoints"
    sources = sorted({r.source for r in reports if r.source})
    return Document(
        title=title or f"pdcensus census: {name}",
        subtitle=("Source: " + ", ".join(sources)) if sources else "",
        blocks=tuple(blocks),
    )


def endpoint_blocks(report: CensusReport, *, level: int, key: str) -> list[Block]:
    """Every section for one endpoint; ``key`` keeps anchors and figure ids unique."""
    figs = all_figures(report)
    sfx = f"-{key}" if key else ""

    def h(text: str, anchor: str) -> Heading:
        return Heading(level, text, anchor + sfx)

    def fig(slug: str) -> FigureBlock:
        return FigureBlock(figs[slug], "fig-" + slug + sfx)

    out: list[Block] = [h("Verdict", "verdict"), *verdict_blocks(report)]
    out += [h("Shape", "shape"), *shape_blocks(report), fig("shape-timeline")]
    out += [h("Decode by prefill bucket", "buckets"), fig("buckets"), *bucket_blocks(report)]
    out += [h("Lag profile", "lag"), fig("lag-profile"), *lag_blocks(report)]
    out += [h("Step ledger", "ledger"), *ledger_blocks(report), fig("ledger-timeline")]
    out += [h("Preemption bursts", "preemption"), fig("preemption-bursts"), *preemption_blocks(report)]
    out += [h("Traps", "traps"), *trap_blocks(report)]
    if report.passes:
        out += [h("Runbook steps on this engine's metrics", "passes"), *pass_blocks(report)]
    out += [h("Advice", "advice"), *advice_blocks(advice_of(report), level + 1, sfx)]
    return out


def verdict_blocks(report: CensusReport) -> list[Block]:
    v = report.verdict
    out: list[Block] = [Callout(
        label="verdict",
        value=v.mechanism.value,
        detail=f"confidence {fmt_share(v.confidence)}; {v.headline}",
        tone=_VERDICT_TONE.get(v.mechanism, Tone.WARNING),
    )]
    if v.found:
        out.append(Table(
            ("found", "severity", "share of decoders' time", "interval", "depth while acting", "acts",
             "ITL p99 while acting", "confidence", "signature"),
            tuple((f.mechanism.value, f.severity.value, fmt_share(f.loss_share),
                   f"{fmt_share(f.interval[0])} .. {fmt_share(f.interval[1])}", fmt_number(f.depth),
                   fmt_share(f.active_share), fmt_number(f.itl_p99_ratio), fmt_share(f.confidence),
                   f.signature_text) for f in v.found),
            caption="Each mechanism whose signature is in the data, and what it costs.", numeric=(2, 4, 6),
        ))
    dr = v.dose_response
    if dr is not None and dr.available:
        out.append(Paragraph(
            f"Dose-response: decoders lose {fmt_number(dr.stall_ms_per_1k_tokens)} ms per 1,000 prefill tokens "
            f"(90% interval {fmt_number(dr.stall_interval[0])} .. {fmt_number(dr.stall_interval[1])})"
            + (f"; the step ledger gives {fmt_number(dr.ledger_ms_per_1k_tokens)} ms"
               if dr.ledger_ms_per_1k_tokens == dr.ledger_ms_per_1k_tokens else "")
            + f". {dr.reason}."))
    for w in v.withheld:
        out.append(Paragraph(f"Withheld: {w}", Tone.WARNING))
    over = report.overload
    if over is not None and over.available:  # capacity before knobs (pdcensus.census.overload)
        out.append(Callout(label="capacity", value="overloaded" if over.overloaded else "within capacity",
                           detail=over.reason + ("; no knob is the fix, see the advice" if over.overloaded else ""),
                           tone=Tone.WARNING if over.overloaded else Tone.GOOD))
    felt = report.client_felt
    if felt is not None:
        out.append(Table(
            ("what users felt (client records)", "requests", "TTFT p50", "TTFT p90", "TPOT p50", "TPOT p90"),
            tuple((label, fmt_count(side.requests), fmt_seconds(side.ttft_p50), fmt_seconds(side.ttft_p90),
                   fmt_seconds(side.tpot_p50), fmt_seconds(side.tpot_p90))
                  for label, side in (("arrived while prefill busy", felt.arrived_busy),
                                      ("arrived while idle", felt.arrived_idle),
                                      ("decoded mostly beside prefill", felt.decoded_busy),
                                      ("decoded mostly without", felt.decoded_idle))),
            caption=f"Client clock aligned to the recording by {fmt_number(felt.alignment.offset_seconds)} s; "
                    f"per-stream decode busy / idle as users felt it (median TPOT idle / busy): "
                    f"{fmt_number(felt.tpot_ratio)}.", numeric=(1, 2, 3, 4, 5),
        ))
    out.append(Paragraph(
        f"Endpoint {report.instance} (job {report.job}), profile {report.profile}: {report.profile_reason}.",
        Tone.MUTED))
    if v.evidence:
        out.append(Table(
            ("evidence", "value", "threshold", "holds", "what it says"),
            tuple((e.rule, fmt_number(e.value), fmt_number(e.threshold), "yes" if e.satisfied else "no",
                   e.text) for e in v.evidence),
            caption="Every number the verdict rests on.", numeric=(1, 2),
        ))
    if v.settle:
        out.append(Paragraph("What would settle it:"))
        out.append(Bullets(v.settle))
    if report.losses is not None:
        ls = report.losses

        def ci(pair: tuple[float, float]) -> str:
            return f"{fmt_share(pair[0])} .. {fmt_share(pair[1])}"

        out.append(Table(
            ("mechanism", "share of decoders' time lost", "interval", "basis"),
            (("step-time sharing", fmt_share(ls.step_time_sharing), ci(ls.step_time_sharing_interval),
              ls.step_time_sharing_basis),
             ("eviction", fmt_share(ls.eviction), ci(ls.eviction_interval), ls.eviction_basis),
             ("preemption stall", fmt_share(ls.preemption_stall), ci(ls.preemption_stall_interval),
              ls.preemption_stall_basis),
             ("collapse at lag 0", fmt_share(ls.collapse_at_lag0), ci(ls.collapse_at_lag0_interval), "")),
            caption="Lost decode time by mechanism.", numeric=(1,),
        ))
    return out


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
    out: list[Block] = [Paragraph(
        f"Tail ({lo / 60:g}-{hi / 60:g} min): effect {fmt_number(lag.tail_effect)} "
        f"[{fmt_number(lag.tail_low)}, {fmt_number(lag.tail_high)}] over {fmt_count(lag.tail_samples)} samples "
        f"({fmt_count(lag.clean_samples)} with idle prefill of their own); longest lag with an effect "
        f"{fmt_number(lag.longest_lag_with_effect_seconds / 60)} min. {lag.reason}")]
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
    out: list[Block] = [Paragraph(ld.reason), Table(("ledger", "value"), tuple(rows), numeric=(1,))]
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
        f"mean {fmt_number(pre.depth_mean)} (a depth, not a count). {pre.reason}")]
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
        f"{len(report.passes) - len(skipped)} of {len(report.passes)} runbook steps ran on this engine's metrics.",
        Tone.WARNING if skipped else Tone.GOOD)]
    out.append(Table(
        ("step", "ran", "confidence factor", "why"),
        tuple((p.name, "yes" if p.ran else "NO", fmt_number(p.confidence_factor), p.reason) for p in report.passes),
        row_tones=tuple(Tone.NORMAL if p.ran else Tone.WARNING for p in report.passes),
    ))
    return out
