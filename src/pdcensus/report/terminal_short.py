"""The short terminal view: the headline, the evidence that decided it, the advice, how to verify the arm.

About forty lines at 80 columns for the demo, so an on-call engineer reads it in a minute;
``--full`` prints these sections first and every table of the census after them
(:mod:`pdcensus.report.terminal`). The content comes from :func:`pdcensus.report.summary.summarise`,
which the HTML and Markdown views render in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pdcensus.report.safe_console import literal
from pdcensus.census.model import Mechanism
from pdcensus.report.summary import Summary
from pdcensus.report.terminal_advice import prediction_parts
from pdcensus.report.twin_view import lead_lines
from pdcensus.report.terminal_fit import fit_table

__all__ = ["COLOR", "section", "render_summary", "render_footer"]

COLOR = {
    Mechanism.STEP_TIME_SHARING: "bold yellow",
    Mechanism.EVICTION: "bold magenta",
    Mechanism.PREEMPTION_STALL: "bold red",
    Mechanism.MIXED: "bold red",
    Mechanism.NONE: "bold green",
    Mechanism.INCONCLUSIVE: "bold cyan",
}


def section(console: Console, title: str, detail: str = "") -> None:
    """A section's title line (the same titles as the HTML's headings), with an optional detail after it."""
    line = Text(title, style="bold underline")
    if detail:
        line.append(f" {detail}", style="bold")
    console.print(line)


def _labelled(label: str, value: str, style: str = "") -> Text:
    out = Text()
    out.append(f"{label}: ", style="bold")
    out.append(value, style=style)
    return out


def render_headline(s: Summary, console: Console) -> None:
    """The verdict panel: which (and how sure), how much (and the census's own sentence)."""
    lines: list[RenderableType] = [
        _labelled("which", s.which, COLOR[s.mechanism]),
        _labelled("how sure it is there", s.how_sure),
        _labelled("how much it costs", s.how_much),
    ]
    if s.headline:
        lines.append(literal(s.headline))
    for w in s.warnings:
        lines.append(literal(w, style="bold red"))
    console.print(Panel(Group(*lines), title=literal(f"Verdict: {s.title}"), title_align="left"))


def render_evidence(s: Summary, console: Console) -> None:
    section(console, "Evidence that decided it")
    table = Table(show_edge=False, box=None, padding=(0, 1), header_style="dim")
    table.add_column("holds")
    table.add_column("evidence = value (the line it is held against): what it means")
    for r in s.evidence:
        line = f" ({r.line})" if r.line else ""
        text = Text.assemble((r.label, "bold"), f" = {r.value}{line}: {r.meaning}")
        table.add_row("yes" if r.holds else "no", text)
    console.print(fit_table(table, console))
    for item in s.settle[:3]:
        console.print(literal(f"  to settle it: {item}"))


def render_advice_short(s: Summary, console: Console) -> None:
    rec = s.advice
    if rec is None:
        section(console, "Advice")
        console.print(literal(s.no_advice))
        return
    section(console, "Advice", f"for {rec.mechanism}: {rec.knob} {rec.value}".rstrip())
    *lead, summary = lead_lines(rec)
    for line in lead:
        console.print(literal(line, style="bold"))
    console.print(literal(summary))
    for part in prediction_parts(rec, console, console.width):
        console.print(part)
    if rec.env_line:
        tail = ("(an env line, not a rebuild)" if rec.deploy.get("env") or not rec.deploy
                else f"({rec.engine} reads no env for it: restart with this argv)")
        console.print(Text.assemble(("deploy: ", "bold"), (rec.env_line, "cyan")))
        console.print(Text.assemble(("rollback: ", "bold"), (rec.rollback_env_line or "-", "cyan"), " " + tail))
    if rec.cost:
        console.print(_labelled("cost", rec.cost))
    if s.more_advice:
        console.print(Text(f"{s.more_advice} more recommendation(s): --full", style="dim"))


def render_verify(s: Summary, console: Console) -> None:
    if not s.verify:
        return
    section(console, "Verify the arm", s.verify_title.removeprefix("Verify the arm").lstrip(", "))
    steps = Table(show_header=False, show_edge=False, box=None, padding=(0, 1))
    steps.add_column("step", style="bold")
    steps.add_column("how")
    for key, how in s.verify:
        steps.add_row(key, literal(how))
    console.print(fit_table(steps, console))


def render_summary(s: Summary, console: Console) -> None:
    """The four short sections, in order."""
    render_headline(s, console)
    render_evidence(s, console)
    render_advice_short(s, console)
    render_verify(s, console)


def render_footer(console: Console, source: str, fired_traps: Sequence[str]) -> None:
    """The traps that fired (by name), where the rest is, and where the words are explained."""
    again = f"pdcensus census {source} --full" if source else "--full"
    if fired_traps:
        console.print(Text(f"traps fired: {', '.join(fired_traps)}", style="yellow"))
    console.print(Text(f"more: {again} (every table, what each trap means); "
                       "terms: pdcensus explain TERM, docs/glossary.md", style="dim"))
