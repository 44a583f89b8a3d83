"""The report document's blocks drawn on a rich console: the terminal's renderer of :mod:`pdcensus.report.document`.

The HTML and Markdown renderers walk the blocks :func:`~pdcensus.report.document.build_document`
builds; so does the terminal's ``--full`` view, through :func:`render_blocks`, so the three show
the same sections in the same order, with the same labels and the same number formatters
(:mod:`pdcensus.report.document_blocks`). Only the drawing is the terminal's own: colours by
tone, tables fitted to the width without splitting a word (:func:`~pdcensus.report.terminal_fit.fit_table`),
a long table cut to rows spread evenly over it, and each figure named by one line (the plots are in the
HTML and Markdown reports). Block text is plain; it is printed as text, never read as markup.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

from pdcensus.report.document_blocks import (
    Block, Bullets, Callout, Code, FigureBlock, Heading, Paragraph, Table, Tone,
)
from pdcensus.report.safe_console import literal
from pdcensus.report.terminal_fit import fit_table

__all__ = ["TONE_STYLE", "block_renderables", "render_blocks"]

TONE_STYLE = {Tone.NORMAL: "", Tone.MUTED: "dim", Tone.WARNING: "yellow", Tone.GOOD: "green"}
_ROW_STYLE = {Tone.WARNING: "bold yellow"}


def _heading(block: Heading) -> RenderableType:
    # the level-2 headings are the sections (the same titles as the HTML's <h2>); deeper ones name a part
    return Text(block.text, style="bold underline" if block.level <= 2 else "bold")


def _callout(block: Callout) -> RenderableType:
    line = Text()
    line.append(f"{block.label[:1].upper()}{block.label[1:]}: ", style="bold")
    line.append(block.value, style=("bold " + TONE_STYLE[block.tone]).strip())
    if block.detail:
        line.append(f" - {block.detail}")
    return line


def _table(block: Table, console: Console) -> list[RenderableType]:
    headed = any(h.strip() for h in block.headers)
    table = RichTable(show_header=headed, header_style="bold")  # the caption goes above, at the full width
    for i, header in enumerate(block.headers):
        table.add_column(literal(header), justify="right" if i in block.numeric else "left")
    rows = _sampled(block.rows, block.fold_after) if block.folded else block.rows
    for r, row in enumerate(rows):
        tone = block.row_tones[r] if r < len(block.row_tones) else Tone.NORMAL
        table.add_row(*(literal(c) for c in row), style=_ROW_STYLE.get(tone))
    fitted = fit_table(table, console)
    out: list[RenderableType] = [literal(block.caption)] if block.caption else []
    out.append(fitted if fitted is table else _as_list(block, rows))
    if block.folded:
        out.append(Text(f"  {len(rows)} of {len(block.rows)} rows, evenly spaced, first and last kept; "
                        "the HTML and Markdown reports list all", style="dim"))
    return out


def _sampled(rows: tuple[tuple[str, ...], ...], keep: int) -> tuple[tuple[str, ...], ...]:
    """``keep`` rows spread evenly over ``rows`` (the first and the last among them): a long table's shape at a glance."""
    if keep < 2 or len(rows) <= keep:
        return rows[:max(keep, 1)]
    picks = sorted({round(i * (len(rows) - 1) / (keep - 1)) for i in range(keep)})
    return tuple(rows[i] for i in picks)


def _as_list(block: Table, rows: Sequence[tuple[str, ...]]) -> RenderableType:
    """A table too wide for the terminal: one row an item (``first cell: header value; ...``), wrapped lines indented."""
    grid = RichTable.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for r, row in enumerate(rows):
        tone = block.row_tones[r] if r < len(block.row_tones) else Tone.NORMAL
        item = Text()
        first, *rest = row or ("",)
        if block.headers and block.headers[0].strip():
            item.append_text(literal(block.headers[0] + " ", style="dim"))
        item.append_text(literal(first, style="bold"))
        pairs = [(h, c) for h, c in zip(block.headers[1:], rest) if c.strip()]
        if pairs:
            item.append(": ")
        for i, (header, cell) in enumerate(pairs):
            if i:
                item.append("; ")
            if header.strip():
                item.append_text(literal(header + " ", style="dim"))
            item.append_text(literal(cell, style=_ROW_STYLE.get(tone, "")))
        grid.add_row("  -", item)
    return grid


def _bullets(block: Bullets) -> RenderableType:
    grid = RichTable.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    style = TONE_STYLE[block.tone]
    for i, item in enumerate(block.items):
        grid.add_row(f"  {i + 1}." if block.ordered else "  -", literal(item, style=style))
    return grid


def _figure(block: FigureBlock) -> RenderableType:
    return Text(f"figure: {block.figure.chart.title} (a plot in the HTML and Markdown reports)", style="dim")


def block_renderables(block: Block, console: Console) -> list[RenderableType]:
    """What one block prints as, in order (a table may add a line saying it was cut)."""
    if isinstance(block, Heading):
        return [_heading(block)]
    if isinstance(block, Paragraph):
        return [literal(block.text, style=TONE_STYLE[block.tone])]
    if isinstance(block, Callout):
        return [_callout(block)]
    if isinstance(block, Table):
        return _table(block, console)
    if isinstance(block, Bullets):
        return [_bullets(block)]
    if isinstance(block, Code):
        return [literal("\n".join("  " + line for line in block.text.rstrip("\n").splitlines()), style="cyan")]
    return [_figure(block)]


def render_blocks(blocks: Iterable[Block], console: Console) -> None:
    """Print the blocks in order."""
    for block in blocks:
        if isinstance(block, Heading) and block.level <= 2:
            console.print()  # a blank line before each section
        for part in block_renderables(block, console):
            console.print(part)
