"""The advice section of a report document: each recommendation, its trade-off table and
the plan to verify the arm.

The census report carries advice as the JSON objects advice produces
(``Recommendation.to_dict()``: ``knob``, ``value``, ``summary``, ``env_line``,
``rollback_env_line``, ``predicted``, ``cost``, ``preconditions``, ``tradeoff``,
``verification``, ``notes``). This module lays them out and formats their numbers by the
units their keys name; it never computes one. Keys it does not know are shown, not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pdcensus.report.document_blocks import (
    Block, Bullets, Code, Heading, Paragraph, Table, Tone, plain_value,
)

_KNOWN = {"mechanism", "knob", "value", "env_line", "rollback_env_line", "summary", "predicted", "cost",
          "preconditions", "verification", "tradeoff", "notes"}
_PLAN_STEPS = (("argv", "The flag reached argv"), ("counter", "The counter the knob moves"),
               ("bucket_pair", "The bucket pair, before and after"))


def _label(key: str) -> str:
    return key.replace("_", " ")


def advice_blocks(advice: Sequence[Mapping[str, Any]], level: int, anchor_suffix: str = "") -> list[Block]:
    """Blocks for every recommendation (or one line saying there is none)."""
    if not advice:
        return [Paragraph("No recommendation: the census found no mechanism a knob acts on.", Tone.MUTED)]
    out: list[Block] = []
    for i, rec in enumerate(advice):
        out.extend(recommendation_blocks(rec, level, i, anchor_suffix))
    return out


def recommendation_blocks(rec: Mapping[str, Any], level: int, index: int, anchor_suffix: str = "") -> list[Block]:
    knob = str(rec.get("knob", "")).strip()
    value = str(rec.get("value", "")).strip()
    mechanism = str(rec.get("mechanism", "")).strip()
    title = " ".join(p for p in (knob, value) if p) or f"Recommendation {index + 1}"
    out: list[Block] = [Heading(level, f"{title}" + (f" (for {mechanism})" if mechanism else ""),
                                f"advice-{index}{anchor_suffix}")]
    if rec.get("summary"):
        out.append(Paragraph(str(rec["summary"])))
    if rec.get("env_line"):
        out += [Paragraph("Deploy:"), Code(str(rec["env_line"]))]
    if rec.get("rollback_env_line"):
        out += [Paragraph("Roll back:"), Code(str(rec["rollback_env_line"]))]
    predicted = rec.get("predicted") or {}
    if isinstance(predicted, Mapping) and predicted:
        out.append(Table(("predicted", "value"),
                         tuple((_label(str(k)), plain_value(str(k), v)) for k, v in predicted.items()),
                         caption="Predicted from this endpoint's own ledger and buckets.", numeric=(1,)))
    if rec.get("cost"):
        out.append(Paragraph("Cost: " + str(rec["cost"]), Tone.WARNING))
    pre = [str(p) for p in rec.get("preconditions") or ()]
    if pre:
        out += [Paragraph("Preconditions:"), Bullets(tuple(pre))]
    out.extend(tradeoff_blocks(rec.get("tradeoff") or (), knob))
    out.extend(verification_blocks(rec.get("verification")))
    notes = [str(n) for n in rec.get("notes") or ()]
    if notes:
        out.append(Bullets(tuple(notes), tone=Tone.MUTED))
    extra = {k: v for k, v in rec.items() if k not in _KNOWN and v not in (None, "", (), [], {})}
    if extra:
        out.append(Table(("also", "value"), tuple((_label(k), plain_value(k, v)) for k, v in extra.items())))
    return out


def tradeoff_blocks(rows: Sequence[Mapping[str, Any]], knob: str) -> list[Block]:
    """The trade-off table: one row per candidate value of the dial, columns as the rows name them."""
    rows = [r for r in rows if isinstance(r, Mapping)]
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


def verification_blocks(plan: Any) -> list[Block]:
    """The plan to verify the arm, in the runbook's order: argv, counter, bucket pair."""
    if not isinstance(plan, Mapping) or not plan:
        return []
    steps = tuple(f"{label}: {plan[key]}" for key, label in _PLAN_STEPS if plan.get(key))
    out: list[Block] = [Paragraph("Verify the arm (a deploy is not evidence a knob engaged):")]
    if steps:
        out.append(Bullets(steps, ordered=True))
    if plan.get("command"):
        out.append(Code(str(plan["command"])))
    return out
