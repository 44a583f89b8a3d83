"""The terminal's own advice pieces: where the short view's predicted figures come from (with
the twin's beside them unless ``census --no-twin``), and ``verify-arm``'s
answer, predicted beside observed with the tolerance (:func:`render_arm`).

The advice in detail (each recommendation, its predicted figures, trade-off table and plan to
verify the arm) is the report document's (:mod:`pdcensus.report.document_advice`), which the
terminal draws like every other section (:mod:`pdcensus.report.terminal_blocks`).
It reads only the typed recommendations the advice pass attached to the report
(:class:`~pdcensus.advice.model.Recommendation`) and verify-arm's typed answer.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from pdcensus.advice.model import Recommendation
from pdcensus.report.safe_console import literal
from pdcensus.report.terminal_fit import fit_table
from pdcensus.report.twin_view import HEADER as TWIN_HEADER
from pdcensus.report.twin_view import row_cells, source_line, trust_line
from pdcensus.verify import gate
from pdcensus.verify.model import ArmVerdict

def _num(value: float | str | None, fmt: str) -> str:
    if isinstance(value, float) and math.isinf(value):
        return "unbounded"
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return fmt.format(float(value))
    return "-"


def prediction_parts(rec: Recommendation, console: Console, width: int) -> list[RenderableType]:
    """Where the predicted figures come from; where the twin ran, its figures beside them and which to trust."""
    parts: list[RenderableType] = [literal(source_line(rec), style="dim")]
    if rec.twin is None:
        return parts
    if rec.twin.rows:
        twin = Table(title="the same change predicted two ways", title_justify="left", box=box.SIMPLE)
        for i, name in enumerate(TWIN_HEADER):
            twin.add_column(name, justify="left" if i == 0 else "right")
        for r in rec.twin.rows:
            twin.add_row(*(literal(c) for c in row_cells(r)))
        parts.append(fit_table(twin, console, width))
    parts.append(literal(trust_line(rec.twin), style="bold" if rec.twin.trust == "twin" else "yellow"))
    return parts


_STATUS_STYLE = {"within": "green", "off-prediction": "bold red", "unpredicted-cost": "bold red",
                 "cannot-tell": "bold cyan", "undecided": "yellow"}
_VERDICT_WORD = {"off-prediction": "OFF", "unpredicted-cost": "COST", "cannot-tell": "cannot tell"}
_OUTCOME_STYLE = {"engaged": "bold green", "not-engaged": "bold red", "engaged-off-prediction": "bold yellow",
                  "inconclusive": "bold cyan"}


def _value(x: float, quantity: str) -> str:
    if not math.isfinite(x):
        return "-"
    if quantity.startswith(("TTFT", "ITL")):
        return f"{x * 1000:.1f} ms" if x < 1 else f"{x:.2f} s"
    return f"{x:.1f}"


def render_arm(verdict: ArmVerdict, console: Console) -> None:
    """verify-arm's answer: the outcome, the three steps, then predicted vs observed side by side with the tolerance."""
    want = f"{verdict.flag} {verdict.value}" if verdict.value is not None else verdict.flag
    head = Text(f"arm {want}: ")
    head.append(verdict.outcome.value.upper(), style=_OUTCOME_STYLE.get(verdict.outcome.value, "bold"))
    head.append(f" — {verdict.reason}")
    console.print(head)
    steps = Table(show_header=False, show_edge=False, box=None, padding=(0, 1))
    steps.add_column("step", style="bold", no_wrap=True)
    steps.add_column("status", no_wrap=True)
    steps.add_column("detail", overflow="fold")
    for step in verdict.steps:
        steps.add_row(step.name, step.status.value, literal(step.detail))
    console.print(steps)
    p = verdict.predicted
    if p is not None:
        console.print(Text(f"prediction from the before window's ledger: chunk step {p.chunk_step_seconds:.3f} s, "
                           f"decode-only step {p.decode_step_seconds:.4f} s, held steps per chunk step "
                           f"{p.interleave:.0f}"))
    if not verdict.comparisons:
        return
    tol = verdict.tolerance
    table = Table(title=Text(f"predicted vs observed, after / before (tolerance {tol:.0%}: within only where the "
                             "whole family-wise interval lies inside the band)"),
                  title_justify="left", box=box.SIMPLE_HEAD)
    for col, justify in (("bucket", "left"), ("quantity", "left"), ("before -> after", "right"),
                         ("observed (interval)", "right"), ("predicted (band)", "right"), ("verdict", "left")):
        table.add_column(col, justify=justify, overflow="fold")  # type: ignore[arg-type]
    # the busy bucket's predicted figures and every miss; the rest (within, cannot tell) are counted below
    shown = [c for c in verdict.comparisons
             if (c.predicted and c.bucket == "busy") or c.status.value in ("off-prediction", "unpredicted-cost")]
    unsure_rows = [c for c in verdict.comparisons if c.status.value == "cannot-tell" and c not in shown]
    if unsure_rows and not any(c.status.value in ("off-prediction", "unpredicted-cost") for c in shown):
        shown.append(unsure_rows[0])  # the one the first line names
    for c in shown:
        interval = f" ({c.low:.2f}-{c.high:.2f})" if math.isfinite(c.low) and math.isfinite(c.high) else ""
        table.add_row(literal(c.bucket), c.quantity, f"{_value(c.before, c.quantity)} -> {_value(c.after, c.quantity)}",
                      _num(c.ratio, "x{:.2f}") + interval, gate.wanted_text(c),
                      Text(_VERDICT_WORD.get(c.status.value, c.status.value),
                           style=_STATUS_STYLE.get(c.status.value, "")))
    console.print(table)
    rest = [c for c in verdict.comparisons if c not in shown]
    undecided = sum(c.status.value == "undecided" for c in rest)
    unsure = sum(c.status.value == "cannot-tell" for c in rest)
    console.print(Text(f"{len(rest) - undecided - unsure} other bucket latencies (TTFT p50/p90/p99, ITL p50/p99 of "
                       "every bucket) within their band" + (f"; {unsure} cannot tell (the interval is wider than the "
                                                            "band or straddles it)"
                                                            if unsure else "")
                       + (f"; {undecided} not judged (too few observations)"
                          if undecided else "") + "; OFF = a prediction missed, COST = a "
                       "rise nothing predicted, cannot tell = the interval straddles the band or is wider than it; "
                       "--json lists every comparison"))
