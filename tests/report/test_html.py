"""The self-contained HTML report: verdict first, every plot titled, nothing loaded, all escaped."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

from pdcensus.advice.endpoint_report import EndpointReport
from pdcensus.report.html import render_html, write_html

EVIL = "<script>alert(1)</script>"
FIGURE_TITLES = ("Shape timeline", "Decode and TTFT by prefill bucket", "Lag profile", "Step ledger over time",
                 "Preemption bursts over decode rate")


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._in_title = False
        self.svg_titles: list[str] = []
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "title" and "svg" in self._stack:
            self._in_title = True
        self._stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._stack:
            while self._stack and self._stack.pop() != tag:
                pass
        self._in_title = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_title:
            self.svg_titles.append(data)


def _parse(page: str) -> _Collector:
    c = _Collector()
    c.feed(page)
    return c


def test_every_figure_is_an_inline_svg_with_its_title(report_factory: Callable[..., EndpointReport]) -> None:
    page = _parse(render_html(report_factory()))
    svgs = [a for t, a in page.tags if t == "svg"]
    assert len(svgs) == len(FIGURE_TITLES)
    assert all(a.get("viewbox") for a in svgs)
    for title in FIGURE_TITLES:
        assert title in page.svg_titles


def test_the_page_loads_nothing_and_runs_nothing(report_factory: Callable[..., EndpointReport]) -> None:
    page = render_html(report_factory())
    parsed = _parse(page)
    tags = {t for t, _ in parsed.tags}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed"}
    assert not any(k.startswith("on") for _, a in parsed.tags for k in a)
    urls = set(re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", page))
    assert all(u.startswith("#") for u in urls)
    assert "@import" not in page and "url(" not in page
    csp = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in (csp[0].get("content") or "")


def test_the_verdict_confidence_and_advice_come_before_the_evidence_sections(
        report_factory: Callable[..., EndpointReport]) -> None:
    report = report_factory()
    page = render_html(report)
    main = page[page.index("<main>"):]
    verdict = main.index(report.verdict.mechanism.value)
    assert verdict < main.index("<svg")
    assert "confidence 0.86" in main[:main.index("<svg")]
    order = [main.index(f'id="{a}"') for a in ("verdict", "evidence", "advice", "verify", "advice-detail", "findings",
                                                "shape", "ledger", "buckets", "lag", "preemption", "traps")]
    assert order == sorted(order)


def test_a_hostile_label_value_never_reaches_the_page_unescaped(report_factory: Callable[..., EndpointReport]) -> None:
    page = render_html(report_factory(instance=EVIL, job=EVIL, text=EVIL))
    assert EVIL not in page
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert EVIL in "".join(_parse(page).text)  # the reader still sees the value itself


def test_the_trade_off_table_shows_every_candidate_value(report_factory: Callable[..., EndpointReport]) -> None:
    report = report_factory()
    page = render_html(report)
    advice = page[page.index('id="advice"'):]
    tradeoff = advice[advice.index("Trade-off"):]
    table = tradeoff[:tradeoff.index("</table>")]
    assert table.count("<tr") == 1 + len(report.advice[0].tradeoff)
    assert "prefill interleave" in table and "prefill_interleave" not in table  # a label, not the key
    verify = page[page.index('id="verify"'):page.index('id="advice-detail"')]
    for step in ("argv: ", "counter: ", "bucket pair: "):
        assert step in verify


def test_fired_traps_are_listed_first_and_marked(report_factory: Callable[..., EndpointReport]) -> None:
    report = report_factory()
    page = render_html(report)
    traps = page[page.index('id="traps"'):page.index('id="glossary"')]
    fired = [t.name for t in report.traps if t.fired]
    quiet = [t.name for t in report.traps if not t.fired]
    assert fired and quiet
    assert traps.index(fired[0]) < traps.index(quiet[0])
    assert '<tr class="warning"><td>' + fired[0] in traps


def test_the_page_is_readable_on_a_phone_and_on_paper(report_factory: Callable[..., EndpointReport]) -> None:
    page = render_html(report_factory())
    assert 'name="viewport"' in page
    assert "@media print" in page and "@media (max-width" in page
    assert "svg.plot { width: 100%; height: auto;" in page


def test_several_endpoints_get_one_section_each_with_unique_ids(
        report_factory: Callable[..., EndpointReport]) -> None:
    page = render_html([report_factory(instance="a:1"), report_factory(instance="b:2")])
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    assert "Endpoint a:1" in page and "Endpoint b:2" in page
    assert page.count("<svg") == 2 * len(FIGURE_TITLES)


def test_missing_numbers_read_as_missing_not_zero(report_factory: Callable[..., EndpointReport]) -> None:
    page = render_html(report_factory())
    ledger = page[page.index('id="ledger"'):page.index('id="buckets"')]
    idle_row = ledger[ledger.index("<td>idle</td>"):]
    idle_row = idle_row[:idle_row.index("</tr>")]
    assert "—" in idle_row  # the idle bucket has no chunk step: NaN shows as a dash
    assert "nan" not in page.lower().replace("nanos", "")


def test_write_html_writes_one_utf8_file(tmp_path: Path, report_factory: Callable[..., EndpointReport]) -> None:
    out = write_html(report_factory(), tmp_path / "report.html")
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
