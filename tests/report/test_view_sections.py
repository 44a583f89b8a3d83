"""The terminal and the HTML render one report document: the same sections, parts and tables, in the same order.

Before the terminal walked :func:`pdcensus.report.document.endpoint_blocks`, it restated the
report with its own order, labels and formatters, and only the document had the losses table.
Read here from what each view prints (the HTML's ``<h2>``/``<h3>``/``<caption>``, the terminal's
lines), on the demo's report (the step-time-sharing scenario, 2 h, seed 0, as ``pdcensus demo``
runs it) and on a real vLLM 0.15 recording (../shared/realdata/vllm-inferencex), whose report
has no step ledger and no advice, so the two cover different sections' contents.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pdcensus import api
from pdcensus.advice.endpoint_report import advice_of
from pdcensus.census.model import CensusReport
from pdcensus.report.html import render_html
from pdcensus.report.summary import FULL_SECTIONS, SHORT_SECTIONS
from pdcensus.report.terminal import render_text
from pdcensus.sim import simulate, write_sim_dir
from pdcensus.sources.load import load_source
from shared_data import SHARED_REALDATA

REAL_VLLM = SHARED_REALDATA / "vllm-inferencex" / "llama70b-vllm0.15" / "tp1_bs16_offloadoff.om.gz"
_CACHE: dict[str, CensusReport] = {}


def _report(which: str, tmp: Path) -> CensusReport:
    if which not in _CACHE:
        if which == "demo":
            result = simulate("step-time-sharing", duration_seconds=7200.0, seed=0)
            write_sim_dir(result, tmp)
            result.recording.source = "out"
            _CACHE[which] = api.census_all(result.recording, evidence=tmp)[-1]
        else:
            _CACHE[which] = api.census_all(load_source(REAL_VLLM))[-1]
    return _CACHE[which]


class _Parts(HTMLParser):
    """The page's headings (level, text) and table captions, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[tuple[str, str]] = []
        self._open = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h2", "h3", "caption"):
            self._open = tag
            self.parts.append((tag, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == self._open:
            self._open = ""

    def handle_data(self, data: str) -> None:
        if self._open:
            self.parts[-1] = (self._open, self.parts[-1][1] + data)


def _html_parts(report: CensusReport) -> list[tuple[str, str]]:
    parser = _Parts()
    parser.feed(render_html(report))
    return [(tag, " ".join(html.unescape(text).split())) for tag, text in parser.parts]


def _terminal_sections(text: str) -> list[str]:
    """The section title lines: the short view's start with their title (``Advice for ...``), the rest are it."""
    out = []
    for line in text.splitlines():
        line = line.rstrip().removeprefix("╭─ ")
        if line in FULL_SECTIONS:
            out.append(line)
        elif any(line.startswith(s) for s in SHORT_SECTIONS):
            out.append(max((s for s in SHORT_SECTIONS if line.startswith(s)), key=len))
    return out


@pytest.mark.parametrize("which", ["demo", "real-vllm"])
def test_terminal_and_html_render_the_same_document_sections_in_the_same_order(
        which: str, tmp_path: Path) -> None:
    if which == "real-vllm" and not REAL_VLLM.exists():
        pytest.skip(f"{REAL_VLLM} not present")
    report = _report(which, tmp_path)
    text = render_text(report, width=80, full=True)
    parts = _html_parts(report)
    sections = [t for tag, t in parts if tag == "h2"]
    assert _terminal_sections(text) == sections
    assert sections[-len(FULL_SECTIONS):][:2] == ["Advice in detail", "All findings and evidence"]
    # the full view's parts (a recommendation's heading, every table's caption) in the HTML's order
    lines = [line.rstrip() for line in text.splitlines()]
    flat = " ".join(text.split())
    where = 0
    for tag, title in parts[[t for _tag, t in parts].index("Advice in detail"):]:
        if tag == "h3":
            assert title in lines, f"{title!r} is not a heading line of its own"
        at = flat.find(title, where)
        assert at >= 0, f"{tag} {title!r} is not in the terminal after the previous part"
        where = at + len(title)
    if report.losses is not None:  # the table only the document had
        assert "Lost decode time by mechanism." in flat


def test_the_demo_and_the_real_recording_cover_different_sections(tmp_path: Path) -> None:
    if not REAL_VLLM.exists():
        pytest.skip(f"{REAL_VLLM} not present")
    demo, real = _report("demo", tmp_path), _report("real-vllm", tmp_path)
    assert advice_of(demo) and demo.ledger.available  # advice in detail and a step ledger table
    assert not real.ledger.available and real.profile.startswith("vllm")
    assert "Verify the arm" in _terminal_sections(render_text(demo, width=80, full=True))
    assert "Verify the arm" not in _terminal_sections(render_text(real, width=80, full=True))
