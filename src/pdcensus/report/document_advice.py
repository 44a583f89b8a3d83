"""The advice section of a report document: each recommendation, its trade-off table and
the plan to verify the arm.

It reads the typed recommendations an :class:`~pdcensus.advice.endpoint_report.EndpointReport`
carries (:class:`~pdcensus.advice.model.Recommendation`, :class:`~pdcensus.advice.model.VerificationPlan`),
so a renamed field is a type error here, not a silently empty cell. This module lays them out and
formats their numbers by the units their keys name; it never computes one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.report.document_blocks import (
    Block, Bullets, Code, Heading, Paragraph, Table, Tone,
)
from pdcensus.report.document_labels import (
    TTFT_TRUST, TTFT_TRUST_NO_REPLAY, column_label, predicted_row, predicted_value,
)
from pdcensus.report.twin_view import HEADER as TWIN_HEADER
from pdcensus.report.twin_view import lead_lines, row_cells, source_line, trust_line


def advice_blocks(advice: Sequence[Recommendation], level: int, anchor_suffix: str = "",
                  none_text: str = "No advice.", shown: Recommendation | None = None) -> list[Block]:
    """Blocks for every recommendation (or ``none_text``, which says why there is none).

    ``shown`` is the recommendation the short view already gave (its summary, env lines and
    cost are not repeated).
    """
    if not advice:
        return [Paragraph(none_text, Tone.MUTED)]
    out: list[Block] = []
    for i, rec in enumerate(advice):
        out.extend(recommendation_blocks(rec, level, i, anchor_suffix, brief=rec is shown))
    return out


def recommendation_blocks(rec: Recommendation, level: int, index: int, anchor_suffix: str = "",
                          brief: bool = False) -> list[Block]:
    knob, value, mechanism = rec.knob.strip(), rec.value.strip(), rec.mechanism.strip()
    title = " ".join(p for p in (knob, value) if p) or f"Recommendation {index + 1}"
    out: list[Block] = [Heading(level, f"{title}" + (f" (for {mechanism})" if mechanism else ""),
                                f"advice-{index}{anchor_suffix}")]
    if rec.minor and not brief:  # a minor mechanism's advice is one line in every view; --json has the whole of it
        why = (rec.notes[0] if rec.notes else rec.summary).split(". ")[0].split(", ")[0].replace(" overall", "")
        return [*out, Paragraph(f"{why}; {title} only for streaming ITL (--json has it).", Tone.MUTED)]
    if brief:
        out.append(Paragraph("Its effect, deploy and rollback lines and cost are under Advice above.", Tone.MUTED))
    if not brief:
        out += [Paragraph(line) for line in lead_lines(rec) if line]
    if rec.env_line and not brief:
        out += [Paragraph("Deploy:"), Code(rec.env_line)]
    if rec.deploy.get("k8s_args"):  # the same line as a Kubernetes container fragment
        out += [Paragraph("Kubernetes:"), Code(str(rec.deploy["k8s_args"]))]
    if rec.rollback_env_line and not brief:
        out += [Paragraph("Roll back:"), Code(rec.rollback_env_line)]
    if rec.predicted:
        source = source_line(rec)
        out.append(Table(("predicted", "value"),
                         tuple(predicted_row(k, v) for k, v in rec.predicted.items()),
                         caption=source[:1].upper() + source[1:] + ".", numeric=(1,)))
    if rec.twin is not None:
        if rec.twin.rows:
            out.append(Table(TWIN_HEADER, tuple(row_cells(r) for r in rec.twin.rows),
                             caption="The same change predicted two ways.", numeric=(1, 2, 3)))
        out.append(Paragraph(trust_line(rec.twin), Tone.WARNING if rec.twin.trust != "twin" else Tone.MUTED))
    if rec.cost and not brief:
        out.append(Paragraph("Cost: " + rec.cost, Tone.WARNING))
    if rec.preconditions:
        out += [Paragraph("Preconditions:"), Bullets(rec.preconditions)]
    out.extend(tradeoff_blocks(rec.tradeoff, knob))
    if not brief:  # the short view's "Verify the arm" has the headline recommendation's plan
        out.extend(verification_blocks(rec.verification))
    if rec.notes:
        out.append(Bullets(rec.notes, tone=Tone.MUTED))
    return out


def tradeoff_blocks(rows: Sequence[Mapping[str, float | str]], knob: str) -> list[Block]:
    """The trade-off table: one row per candidate value of the dial, columns as the rows name them."""
    if not rows:
        return []
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    out: list[Block] = [Table(
        tuple(column_label(c) for c in columns),
        tuple(tuple(predicted_value(c, row.get(c)) for c in columns) for row in rows),
        caption=f"Trade-off{' for ' + knob if knob else ''}: what each value buys decoders and what it costs.",
        numeric=tuple(range(len(columns))),
    )]
    if "busy_ttft_p90_seconds_queueing" in columns:
        replay = any(isinstance(r.get("busy_ttft_p90_seconds_replay"), float)
                     and math.isfinite(float(r["busy_ttft_p90_seconds_replay"])) for r in rows)
        hint = TTFT_TRUST if replay else TTFT_TRUST_NO_REPLAY
        out.append(Paragraph(hint[0].upper() + hint[1:] + ".", Tone.MUTED))
    return out


def verification_blocks(plan: VerificationPlan | None) -> list[Block]:
    """The plan to verify the arm, in the runbook's order: argv, counter, bucket pair."""
    if plan is None:
        return []
    steps = tuple(f"{label}: {text}" for label, text in (
        ("The flag reached argv", plan.argv), ("The counter the knob moves", plan.counter),
        ("The bucket pair, before and after", plan.bucket_pair)) if text)
    out: list[Block] = [Paragraph("Verify the arm (a deploy is not evidence a knob engaged):")]
    if steps:
        out.append(Bullets(steps, ordered=True))
    if plan.command:
        out.append(Code(plan.command))
    return out
