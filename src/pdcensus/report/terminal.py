"""The terminal view of a census report (rich): the short view, and with ``full`` the report document after it.

Written for someone paged at 3 a.m.: the short view (:mod:`pdcensus.report.terminal_short`)
says which mechanism and how sure, how much it costs, the evidence that decided it, what to do
and how to verify it. ``full`` then prints the rest of the same document the HTML and Markdown
reports render (:func:`pdcensus.report.document.endpoint_blocks`), from "Advice in detail" on,
through :func:`pdcensus.report.terminal_blocks.render_blocks`: the same sections
(:data:`pdcensus.report.summary.FULL_SECTIONS`) in the same order, with the same labels and
number formatters, the losses table included. Nothing here restates a section; rich is only the
drawing layer. It never computes a figure the census did not.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console

from pdcensus.census.model import CensusReport
from pdcensus.report.document import endpoint_blocks
from pdcensus.report.document_blocks import Block, Heading
from pdcensus.report.safe_console import SafeConsole
from pdcensus.report.summary import FULL_SECTIONS, summarise
from pdcensus.report.terminal_blocks import render_blocks
from pdcensus.report.terminal_short import render_footer, render_summary

__all__ = ["full_blocks", "render", "render_text"]


def full_blocks(blocks: Sequence[Block]) -> list[Block]:
    """The document's blocks from its first ``--full`` section on (the short view printed the ones before)."""
    starts = [i for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level == 2 and b.text in FULL_SECTIONS]
    return list(blocks[starts[0]:]) if starts else []


def render(report: CensusReport, console: Console, full: bool = True) -> None:
    """Print the report on a rich console: the short view, then (``full``) every section of the document after it."""
    render_summary(summarise(report), console)
    if not full:
        render_footer(console, report.source, [t.name for t in report.traps if t.fired])
        return
    render_blocks(full_blocks(endpoint_blocks(report, level=2, key="")), console)


def render_text(report: CensusReport, width: int = 120, full: bool = True) -> str:
    """The terminal report as plain text (no colour codes)."""
    buf = io.StringIO()
    render(report, SafeConsole(file=buf, width=width, color_system=None, force_terminal=False), full=full)
    return buf.getvalue()
