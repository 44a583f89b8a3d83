"""fit_table: a table at any width splits no word; where the longest words cannot sit side by side, a list."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from pdcensus.report.terminal_fit import fit_table

WORDS = ("loss-share:step-time-sharing", "step-detail-histograms-unscraped", "113.0 ms", "preemption-stall",
         "radiance:engine_steps_held_total")


def _table() -> Table:
    t = Table(title="evidence")
    for head in ("mechanism", "severity", "share of decoders' time", "what it means"):
        t.add_column(head)
    t.add_row(WORDS[0], "material", WORDS[2], "a decode row in a chunk step waits for the whole chunk " + WORDS[4])
    t.add_row(WORDS[3], "minor", "0.0 %", WORDS[1] + " fired on this data")
    return t


def _render(width: int) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    console.print(fit_table(_table(), console))
    return buf.getvalue()


@pytest.mark.parametrize("width", [36, 50, 64, 80, 100, 140])
def test_no_word_is_split_at_any_width(width: int) -> None:
    text = _render(width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    for word in WORDS + ("mechanism", "severity", "decoders'"):
        assert any(word in line for line in lines), (width, word, text)


def test_a_table_too_narrow_for_its_words_becomes_a_list() -> None:
    text = _render(50)
    assert "┃" not in text and "│" not in text  # no table drawn
    assert "mechanism loss-share:step-time-sharing: severity material" in " ".join(text.split())


def test_a_table_that_fits_is_left_as_rich_draws_it() -> None:
    wide = _table()
    buf = io.StringIO()
    console = Console(file=buf, width=300, color_system=None, force_terminal=False)
    assert fit_table(wide, console) is wide
    assert all(c.width is None for c in wide.columns)
