"""The terminal's drawing of document blocks: text stays text, wide tables become lists, long ones are sampled evenly."""

from __future__ import annotations

import io

from pdcensus.report.document_blocks import Block, Bullets, Code, Heading, Paragraph, Table
from pdcensus.report.safe_console import SafeConsole
from pdcensus.report.terminal_blocks import render_blocks


def _draw(*blocks: Block, width: int = 80) -> str:
    buf = io.StringIO()
    render_blocks(blocks, SafeConsole(file=buf, width=width, color_system=None, force_terminal=False))
    return buf.getvalue()


def test_block_text_is_printed_as_text_never_read_as_markup() -> None:
    text = _draw(Paragraph("[bold]x[/bold] :smile:"), Table(("a", "b"), (("[red]y", "z"),), caption="[link=http://e]c"))
    assert "[bold]x[/bold] :smile:" in text and "[red]y" in text and "[link=http://e]c" in text


def test_a_section_heading_stands_on_its_own_line_after_a_blank_one() -> None:
    lines = _draw(Paragraph("before"), Heading(2, "Traps", "traps"), Paragraph("after")).splitlines()
    assert lines == ["before", "", "Traps", "after"]


def test_a_table_too_wide_for_the_terminal_is_a_list_with_every_header_beside_its_value() -> None:
    headers = tuple(f"long header number {i}" for i in range(8))
    row = tuple(f"value-{i}-with-words" for i in range(8))
    text = _draw(Table(headers, (row,), caption="The caption."), width=60)
    lines = text.splitlines()
    assert lines[0] == "The caption."
    flat = " ".join(text.split())
    assert "- long header number 0 value-0-with-words: long header number 1 value-1-with-words;" in flat
    assert all(len(line) <= 60 for line in lines)
    assert all(line.startswith("    ") for line in lines[2:] if line.strip())  # wrapped lines hang under the item


def test_a_folded_table_keeps_rows_spread_evenly_with_the_first_and_the_last() -> None:
    rows = tuple((str(i), f"{i * 10}") for i in range(100))
    text = _draw(Table(("lag", "effect"), rows, numeric=(0, 1), fold_after=5))
    shown = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert shown == ["0", "25", "50", "74", "99"]
    assert "5 of 100 rows, evenly spaced" in text


def test_lists_and_code_keep_their_marks_and_indent() -> None:
    text = _draw(Bullets(("one", "two"), ordered=True), Code("args:\n  - x\n"))
    assert text.splitlines() == ["  1. one", "  2. two", "  args:", "    - x"]
