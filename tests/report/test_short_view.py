"""The short view an on-call engineer reads in a minute, and what every view must keep.

Claims from the demo's own pipeline (the default scenario, 2 h, seed 0, as ``pdcensus demo``
runs it), the light-traffic ``healthy`` scenario (a certain but minor effect) and the ``idle``
one (nothing to judge): the short terminal view fits about forty lines at 80 columns; no table
splits a word at any width; confidence and severity are two labelled figures in every view;
"no advice" says why; the terminal and the HTML show the same sections in the same order; the
HTML's predictions carry labels and units, never the advice's keys; nothing cites a file the
project does not ship.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pdcensus import api
from pdcensus.census.model import CensusReport, Mechanism
from pdcensus.report.html import render_html
from pdcensus.report.markdown import render_markdown
from pdcensus.report.summary import FULL_SECTIONS, SHORT_SECTIONS, summarise
from pdcensus.report.terminal import render_text
from pdcensus.sim import simulate, write_sim_dir

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = SHORT_SECTIONS + FULL_SECTIONS
_CACHE: dict[str, CensusReport] = {}


def demo_report(scenario: str, tmp_path_factory: pytest.TempPathFactory) -> CensusReport:
    """The census as ``pdcensus demo SCENARIO`` computes it (its sim dir as the evidence)."""
    if scenario not in _CACHE:
        out = tmp_path_factory.mktemp(scenario)
        result = simulate(scenario, duration_seconds=7200.0, seed=0)
        write_sim_dir(result, out)
        result.recording.source = "out"
        _CACHE[scenario] = api.census_all(result.recording, evidence=out)[-1]
    return _CACHE[scenario]


@pytest.fixture(scope="module")
def sharing(tmp_path_factory: pytest.TempPathFactory) -> CensusReport:
    return demo_report("step-time-sharing", tmp_path_factory)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> CensusReport:
    return demo_report("healthy", tmp_path_factory)


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory) -> CensusReport:
    return demo_report("idle", tmp_path_factory)


class _Headings(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.h2: list[str] = []
        self._in = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in = tag == "h2"
        if self._in:
            self.h2.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in = self._in and tag != "h2"

    def handle_data(self, data: str) -> None:
        if self._in:
            self.h2[-1] += data


def _html_sections(report: CensusReport) -> list[str]:
    parser = _Headings()
    parser.feed(render_html(report))
    return parser.h2


def _terminal_sections(text: str) -> list[str]:
    """Section title lines (the verdict's is the panel's title: ``╭─ Verdict: ...``)."""
    lines = [line.lstrip("╭─ ") for line in text.splitlines()]
    return [max((s for s in SECTIONS if line.startswith(s)), key=len) for line in lines
            if any(line.startswith(s) for s in SECTIONS)]


def test_the_demo_short_view_fits_about_forty_lines_at_80_columns(sharing: CensusReport) -> None:
    short = render_text(sharing, width=80, full=False)
    full = render_text(sharing, width=80, full=True)
    assert len(short.splitlines()) <= 42, short
    assert len(full.splitlines()) > 3 * len(short.splitlines())
    assert max(len(line) for line in short.splitlines()) <= 80


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_no_table_splits_a_word_at_any_width(sharing: CensusReport, width: int) -> None:
    text = render_text(sharing, width=width, full=True)
    assert "mechan ism" not in text and "113. 0" not in text
    words = {t.name for t in sharing.traps} | {e.rule for e in sharing.verdict.evidence} | {
        "step-time-sharing", "preemptions", "chunk-step-collapse"}
    lines = text.splitlines()
    for word in sorted(w for w in words if len(w) < width - 8):
        assert any(word in line for line in lines), f"{word!r} is split at {width} columns"


def test_no_placeholder_stands_in_for_a_sentence(sharing: CensusReport) -> None:
    text = render_text(sharing, width=120, full=True)
    assert "- (---)" not in text and "(-)" not in text
    assert "Tail (2-14 min): not measured" in text or re.search(r"Tail \(2-14 min\): effect \d", text)


def test_confidence_and_severity_are_two_labelled_figures_in_every_view(healthy: CensusReport) -> None:
    (found,) = healthy.verdict.found
    assert found.severity.value == "minor" and healthy.verdict.confidence >= 0.7  # sure it is there, and small
    share = f"{100 * found.loss_share:.1f} %"
    views = {"short": render_text(healthy, width=80, full=False), "full": render_text(healthy, width=200),
             "html": render_html(healthy), "markdown": render_markdown(healthy).text}
    for name, text in views.items():
        flat = " ".join(html.unescape(text).split())
        assert "how sure it is there" in flat and "how much it costs" in flat, name
        assert f"confidence {healthy.verdict.confidence:.2f}" in flat, name
        assert f"minor, {share} of decoders' time" in flat, name


def test_no_advice_says_which_reason(healthy: CensusReport, idle: CensusReport) -> None:
    assert not healthy.advice and not idle.advice
    minor = " ".join(render_text(healthy, width=200, full=False).split())
    assert "none: nothing material" in minor and f"{100 * healthy.verdict.found[0].loss_share:.1f} %" in minor
    assert idle.verdict.mechanism is Mechanism.INCONCLUSIVE
    unsure = " ".join(render_text(idle, width=200, full=False).split())
    assert "not certain enough" in unsure and f"confidence {idle.verdict.confidence:.2f}" in unsure
    assert "confident from 0.7" in unsure
    assert "nothing to act on, or the verdict is not certain enough" not in minor + unsure


def test_terminal_and_html_show_the_same_sections_in_the_same_order(
        sharing: CensusReport, healthy: CensusReport, idle: CensusReport) -> None:
    for report in (sharing, healthy, idle):
        html = _html_sections(report)
        full = _terminal_sections(render_text(report, width=100, full=True))
        short = _terminal_sections(render_text(report, width=100, full=False))
        assert full == html
        assert short == list(summarise(report).sections) == html[:len(short)]
    assert "Verify the arm" in _html_sections(sharing) and "Verify the arm" not in _html_sections(healthy)


def test_the_html_puts_the_advice_near_the_top_with_labelled_predictions(sharing: CensusReport) -> None:
    page = render_html(sharing)
    main = page[page.index("<main>"):]
    (rec,) = sharing.advice
    assert main.index('id="advice"') < main.index("<svg") and main.index('id="advice"') < main.index('id="traps"')
    cells = set(re.findall(r"<td[^>]*>([^<]*)</td>", page))
    raw = [k for k, _ in rec.predicted.items() if k in cells or k.replace("_", " ") in cells]
    assert raw == [], f"raw variable names shown: {raw}"
    assert "47.2 tok/s" in page  # the predicted per-stream rate, with its unit
    assert "Which busy TTFT p90 to trust: replay" in page


def test_no_view_cites_a_file_the_project_does_not_ship(sharing: CensusReport) -> None:
    texts = [render_text(sharing, width=200), render_html(sharing), render_markdown(sharing).text]
    for text in texts:
        assert "METRICS.md" not in text
        for cited in set(re.findall(r"docs/[\w-]+\.md", text)):
            assert (ROOT / cited).is_file(), cited
    assert "docs/glossary.md" in texts[0] and "docs/runbook.md" in texts[0]
