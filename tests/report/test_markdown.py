"""The Markdown report: same content as the HTML, plots as SVG files beside it, all escaped."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from pdcensus.census.model import CensusReport
from pdcensus.report.markdown import escape_markdown, plots_dir_for, render_markdown, write_markdown

EVIL = "<script>alert(1)</script>"


def test_write_markdown_writes_the_file_and_every_linked_plot(
        tmp_path: Path, report_factory: Callable[..., CensusReport]) -> None:
    md_path = tmp_path / "incident.md"
    written = write_markdown(report_factory(), md_path)
    assert written[0] == md_path
    text = md_path.read_text(encoding="utf-8")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) == 5
    for link in links:
        target = tmp_path / link
        assert target.parent == tmp_path / "incident_plots"
        root = ET.parse(target).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert (root.findtext("{http://www.w3.org/2000/svg}title") or "").strip()
    assert sorted(written[1:]) == sorted(tmp_path / link for link in links)


def test_markdown_keeps_the_html_order_verdict_first(report_factory: Callable[..., CensusReport]) -> None:
    text = render_markdown(report_factory()).text
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads == ["## Verdict", "## Evidence that decided it", "## Advice", "## Verify the arm",
                     "## Advice in detail", "## All findings and evidence", "## Shape", "## Step ledger",
                     "## Decode by prefill bucket", "## Lag test", "## Preemption bursts", "## Traps", "## Glossary"]
    verdict = text.index("## Verdict")
    assert "step-time-sharing" in text[verdict:text.index("## Evidence that decided it")]


def test_tables_have_as_many_cells_as_headers(report_factory: Callable[..., CensusReport]) -> None:
    text = render_markdown(report_factory(text="a | pipe")).text
    tables: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith("|"):
            tables[-1].append(line)
        elif tables[-1]:
            tables.append([])
    tables = [t for t in tables if t]
    assert len(tables) >= 8
    for table in tables:
        widths = {len(re.split(r"(?<!\\)\|", row.strip())) for row in table}
        assert len(widths) == 1, table


def test_a_hostile_label_value_is_inert_in_markdown(report_factory: Callable[..., CensusReport]) -> None:
    md = render_markdown(report_factory(instance=EVIL, text=EVIL))
    assert "<script" not in md.text
    assert "&lt;script&gt;" in md.text
    assert all("<script" not in svg for svg in md.plots.values())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a|b", r"a\|b", id="pipe-in-table"),
        pytest.param("*bold*", r"\*bold\*", id="emphasis"),
        pytest.param("[x](http://e)", r"\[x\](http://e)", id="link"),
        pytest.param("# not a heading", r"\# not a heading", id="heading"),
        pytest.param("1. not a list", r"1\. not a list", id="ordered-list"),
        pytest.param("engine_steps_total", "engine_steps_total", id="intraword-underscore-kept"),
        pytest.param("_lead", r"\_lead", id="edge-underscore"),
        pytest.param("a\nb", "a b", id="newline"),
        pytest.param("x & <y>", "x &amp; &lt;y&gt;", id="html"),
    ],
)
def test_escape_markdown_neutralises_syntax(text: str, expected: str) -> None:
    assert escape_markdown(text) == expected


def test_env_lines_are_fenced_code_so_they_copy_as_is(report_factory: Callable[..., CensusReport]) -> None:
    text = render_markdown(report_factory()).text
    assert "```\nRADIANCE_PREFILL_INTERLEAVE=2\n```" in text


def test_plots_dir_sits_beside_the_markdown_file() -> None:
    assert plots_dir_for("/x/incident.md") == Path("/x/incident_plots")
