"""The census report as a document: headings, paragraphs, tables and figures.

:func:`build_document` turns typed census reports into a list of plain blocks that
the HTML renderer (:mod:`pdcensus.report.html`), the Markdown renderer
(:mod:`pdcensus.report.markdown`) and the terminal's ``--full`` view
(:mod:`pdcensus.report.terminal_blocks`, after its short view drawn from the same
:class:`~pdcensus.report.summary.Summary`) walk, so the three show the same content in the same
order: the short view first (the two-part headline, the
evidence that decided it, the advice, how to verify the arm; :mod:`pdcensus.report.summary`),
then the advice in detail, every finding and evidence row, the shape, step ledger, buckets,
lag test, preemption bursts, traps, runbook steps and the glossary of the terms used. Text in
blocks is plain (never markup); escaping belongs to each renderer. Numbers are only
formatted here, never computed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pdcensus.advice.endpoint_report import advice_of
from pdcensus.census.model import CensusReport, Mechanism
from pdcensus.report.document_advice import advice_blocks
from pdcensus.report.document_blocks import (
    Block, Bullets, Callout, Code, FigureBlock, Heading, Paragraph, Table, Tone, fmt_count, fmt_number, fmt_seconds,
    fmt_share,
)
from pdcensus.report.document_sections import (
    bucket_blocks, lag_blocks, ledger_blocks, pass_blocks, preemption_blocks, shape_blocks, trap_blocks,
)
from pdcensus.report.figures import all_figures
from pdcensus.report.glossary import terms_in
from pdcensus.report.summary import Summary, summarise, why_no_advice
from pdcensus.report.twin_view import lead_lines

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
    """Every section for one endpoint; ``key`` keeps anchors and figure ids unique.

    The short view's sections first (:data:`~pdcensus.report.summary.SHORT_SECTIONS`), then what
    ``--full`` adds (:data:`~pdcensus.report.summary.FULL_SECTIONS`), the terminal's order.
    """
    figs = all_figures(report)
    sfx = f"-{key}" if key else ""
    s = summarise(report)

    def h(text: str) -> Heading:
        return Heading(level, text, _slug(text) + sfx)

    def fig(slug: str) -> FigureBlock:
        return FigureBlock(figs[slug], "fig-" + slug + sfx)

    out: list[Block] = [h("Verdict"), *summary_verdict_blocks(s), h("Evidence that decided it"),
                        *summary_evidence_blocks(s), h("Advice"), *summary_advice_blocks(s)]
    if s.verify:
        out += [h("Verify the arm"), *summary_verify_blocks(s)]
    none = "No advice: " + why_no_advice(report).removeprefix("none: ") + "."
    out += [h("Advice in detail"), *advice_blocks(advice_of(report), level + 1, sfx, none, s.advice)]
    out += [h("All findings and evidence"), *verdict_blocks(report)]
    out += [h("Shape"), *shape_blocks(report), fig("shape-timeline")]
    out += [h("Step ledger"), *ledger_blocks(report), fig("ledger-timeline")]
    out += [h("Decode by prefill bucket"), fig("buckets"), *bucket_blocks(report)]
    out += [h("Lag test"), fig("lag-profile"), *lag_blocks(report)]
    out += [h("Preemption bursts"), fig("preemption-bursts"), *preemption_blocks(report)]
    out += [h("Traps"), *trap_blocks(report)]
    if report.passes:
        out += [h("Runbook steps on this engine's metrics"), *pass_blocks(report)]
    out += [h("Glossary"), *glossary_blocks(out)]
    return out


# the anchors reports linked before the short view came first keep their names
_ANCHORS = {"Evidence that decided it": "evidence", "Verify the arm": "verify", "Advice in detail": "advice-detail",
            "All findings and evidence": "findings", "Step ledger": "ledger", "Decode by prefill bucket": "buckets",
            "Lag test": "lag", "Preemption bursts": "preemption", "Runbook steps on this engine's metrics": "passes"}


def _slug(title: str) -> str:
    return _ANCHORS.get(title) or re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def summary_verdict_blocks(s: Summary) -> list[Block]:
    """The two-part headline: which and how sure, how much; then the census's own sentence."""
    out: list[Block] = [Callout(label="verdict", value=s.mechanism.value,
                                detail=s.which.removeprefix(s.mechanism.value + " - "),
                                tone=_VERDICT_TONE.get(s.mechanism, Tone.WARNING))]
    out.append(Table(("", ""), (("how sure it is there", s.how_sure), ("how much it costs", s.how_much)),
                     caption="Confidence and severity are two figures: a small effect can be certain."))
    if s.headline:
        out.append(Paragraph(s.headline))
    out += [Paragraph(w, Tone.WARNING) for w in s.warnings]
    return out


def summary_evidence_blocks(s: Summary) -> list[Block]:
    out: list[Block] = []
    if s.evidence:
        out.append(Table(("evidence", "value", "the line it is held against", "holds", "what it means"),
                         tuple((r.label, r.value, r.line, "yes" if r.holds else "no", r.meaning) for r in s.evidence),
                         numeric=(1,)))
    if s.settle:
        out += [Paragraph("What would settle it:"), Bullets(s.settle[:3])]
    return out


def summary_advice_blocks(s: Summary) -> list[Block]:
    rec = s.advice
    if rec is None:
        return [Paragraph(s.no_advice[0].upper() + s.no_advice[1:] + ".", Tone.MUTED)]
    out: list[Block] = [Paragraph(f"For {rec.mechanism}: {rec.knob} {rec.value}".rstrip()),
                        *(Paragraph(line) for line in lead_lines(rec))]
    if rec.env_line:
        out += [Paragraph("Deploy:"), Code(rec.env_line)]
    if rec.rollback_env_line:
        out += [Paragraph("Roll back:"), Code(rec.rollback_env_line)]
    if rec.cost:
        out.append(Paragraph("Cost: " + rec.cost, Tone.WARNING))
    if s.more_advice:
        out.append(Paragraph(f"{s.more_advice} more recommendation(s) under Advice in detail.", Tone.MUTED))
    return out


def summary_verify_blocks(s: Summary) -> list[Block]:
    steps = tuple(f"{k}: {t}" for k, t in s.verify if k != "command")
    command = next((t for k, t in s.verify if k == "command"), "")
    lead = s.verify_title.removeprefix("Verify the arm").lstrip(", :")
    out: list[Block] = [Paragraph(lead[:1].upper() + lead[1:] + ":")]
    if steps:
        out.append(Bullets(steps, ordered=True))
    if command:
        out.append(Code(command))
    return out


def glossary_blocks(blocks: Sequence[Block]) -> list[Block]:
    """The glossary entries of the terms this section's text uses (the whole list: docs/glossary.md)."""
    used = terms_in(" ".join(_texts(blocks)))
    return [Paragraph("The terms this report uses; every term: docs/glossary.md, or pdcensus explain TERM. "
                      "The census procedure: docs/runbook.md."),
            Table(("term", "what it means"), tuple((e.term, e.text) for e in used))]


def _texts(blocks: Sequence[Block]) -> list[str]:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, (Heading, Paragraph)):
            out.append(b.text)
        elif isinstance(b, Callout):
            out += [b.value, b.detail]
        elif isinstance(b, Table):
            out += [*b.headers, b.caption, *(c for row in b.rows for c in row)]
        elif isinstance(b, Bullets):
            out += list(b.items)
    return out


def verdict_blocks(report: CensusReport) -> list[Block]:
    v = report.verdict
    out: list[Block] = []
    if v.found:
        out.append(Table(
            ("found", "severity (how much)", "share of decoders' time", "interval", "depth while acting", "acts",
             "ITL p99 while acting", "confidence (how sure)", "signature"),
            tuple((f.mechanism.value, f.severity.value, fmt_share(f.loss_share),
                   f"{fmt_share(f.interval[0])} .. {fmt_share(f.interval[1])}", fmt_number(f.depth),
                   fmt_share(f.active_share), fmt_number(f.itl_p99_ratio), f"{f.confidence:.2f}",
                   f.signature_text) for f in v.found),
            caption="Each mechanism whose signature is in the data, and what it costs.", numeric=(2, 3, 4, 5, 6),
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


