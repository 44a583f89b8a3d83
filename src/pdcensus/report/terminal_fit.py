"""Tables that fit the terminal without breaking a word: columns narrowed to their longest word, or a list.

rich narrows a table that is too wide by shrinking its widest columns first, below the longest
word of a column when it must, so at 80 columns a census table printed ``mechan ism`` and
``113. 0 ms``. :func:`fit_table` shares the width out itself: every column keeps at least its
longest word (its header's too), the room left goes to the columns that wrap most, and where
even the longest words do not fit side by side the table is printed as a list instead, one
row a paragraph (``first cell: header value; header value``), which wraps between words.

It reads rich's own measurements (``Table._measure_column``, ``Table._extra_width``, private
but stable across rich 13-15, the range ``pyproject.toml`` allows) so the widths it sets are
the ones rich then draws.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

__all__ = ["fit_table", "table_as_list"]


def _cell_text(cell: RenderableType) -> Text:
    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):
        return Text.from_markup(cell)  # cells added as strings are rich markup (escaped by the callers)
    return Text(str(cell))


def table_as_list(table: Table) -> RenderableType:
    """The table as paragraphs: each row's first cell, then ``header value`` for the others."""
    columns = table.columns
    headers = [_cell_text(c.header).plain.strip() for c in columns]
    cells = [list(c.cells) for c in columns]
    rows = min((len(c) for c in cells), default=0)
    parts: list[RenderableType] = []
    if table.title:
        parts.append(_cell_text(table.title))
    for r in range(rows):
        line = Text()
        first = _cell_text(cells[0][r]) if cells else Text()
        if headers and headers[0] and table.show_header:
            line.append(f"{headers[0]} ", style="dim")
        line.append_text(first)
        rest = []
        for i in range(1, len(columns)):
            value = _cell_text(cells[i][r])
            if not value.plain.strip():
                continue
            piece = Text()
            if headers[i] and table.show_header:
                piece.append(f"{headers[i]} ", style="dim")
            piece.append_text(value)
            rest.append(piece)
        if rest:
            line.append(": ")
            line.append_text(Text("; ").join(rest))
        parts.append(Text("  ").append_text(line))
    return Group(*parts)


def fit_table(table: Table, console: Console, width: int | None = None) -> RenderableType:
    """``table`` with column widths that never split a word within ``width`` (default: the console's), or a list."""
    avail_total = console.width if width is None else width
    options: ConsoleOptions = console.options.update_width(avail_total)
    ranges: list[Measurement] = [table._measure_column(console, options, c) for c in table.columns]
    extra = table._extra_width
    avail = avail_total - extra
    mins = [m.minimum for m in ranges]
    maxs = [max(m.maximum, m.minimum) for m in ranges]
    if sum(maxs) <= avail:
        return table
    if sum(mins) > avail:
        return table_as_list(table)
    spare = avail - sum(mins)
    slack = [hi - lo for lo, hi in zip(mins, maxs)]
    total_slack = sum(slack) or 1
    widths = [lo + (spare * s) // total_slack for lo, s in zip(mins, slack)]
    left = avail - sum(widths)
    for i in sorted(range(len(widths)), key=lambda k: -slack[k]):  # the rounding's remainder
        if left <= 0:
            break
        if widths[i] < maxs[i]:
            widths[i] += 1
            left -= 1
    for column, w in zip(table.columns, widths):
        column.width = max(1, w - table._get_padding_width(column._index))
    return table
