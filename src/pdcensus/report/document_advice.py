"""The advice section of a report document: each recommendation, its trade-off table and
the plan to verify the arm.

It reads the typed recommendations an :class:`~pdcensus.advice.endpoint_report.EndpointReport`
carries (:class:`~pdcensus.advice.model.Recommendation`, :class:`~pdcensus.advice.model.VerificationPlan`),
so a renamed field is a type error here, not a silently empty cell. This module lays them out and
formats their numbers by the units their keys name; it never computes one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.report.document_blocks import (
    Block, Bullets, Code, Heading, Paragraph, Table, Tone, plain_value,
)

def _label(key: str) -> str:
    return key.replace("_", " ")


def advice_blocks(advice: Sequence[Recommendation], level: int, anchor_suffix: str = "") -> list[Block]:
    """Blocks for every recommendation (or one line saying there is none)."""
    if not advice:
        return [Paragraph("No recommendation: the census found no mechanism a knob acts on.", Tone.MUTED)]
    out: list[Block] = []
    for i, rec in enumerate(advice):
        out.extend(recommendation_blocks(rec, level, i, anchor_suffix))
    return out


def recommendation_blocks(rec: Recommendation, level: int, index: int, anchor_suffix: str = "") -> list[Block]:
    knob, value, mechanism = rec.knob.strip(), rec.value.strip(), rec.mechanism.strip()
    title = " ".join(p for p in (knob, value) if p) or f"Recommendation {index + 1}"
    out: list[Block] = [Heading(level, f"{title}" + (f" (for {mechanism})" if mechanism else ""),
                                f"advice-{index}{anchor_suffix}")]
    if rec.summary:
        out.append(Paragraph(rec.summary))
    if rec.env_line:
        out += [Paragraph("Deploy:"), Code(rec.env_line)]
    if rec.deploy.get("k8s_args"):  # the same line as a Kubernetes container fragment
        out += [Paragraph("Kubernetes:"), Code(str(rec.deploy["k8s_args"]))]
    if rec.rollback_env_line:
        out += [Paragraph("Roll back:"), Code(rec.rollback_env_line)]
    if rec.predicted:
        out.append(Table(("predicted", "value"),
                         tuple((_label(k), plain_value(k, v)) for k, v in rec.predicted.items()),
                         caption="Predicted from this endpoint's own ledger and buckets.", numeric=(1,)))
    if rec.cost:
        out.append(Paragraph("Cost: " + rec.cost, Tone.WARNING))
    if rec.preconditions:
        out += [Paragraph("Preconditions:"), Bullets(rec.preconditions)]
    out.extend(tradeoff_blocks(rec.tradeoff, knob))
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
    return [Table(
        tuple(_label(c) for c in columns),
        tuple(tuple(plain_value(c, row.get(c)) for c in columns) for row in rows),
        caption=f"Trade-off{' for ' + knob if knob else ''}: what each value buys decoders and what it costs.",
        numeric=tuple(range(len(columns))),
    )]


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
