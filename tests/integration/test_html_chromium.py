"""The HTML report in a real headless Chromium: it renders, draws every plot, logs no error, overflows nowhere.

The report comes from the demo's pipeline (simulate the default scenario, run the census).
Chromium runs offline-style (no network services, fresh profile), so a page that tried to
fetch anything would show a refused load in the console log.

Overflow is measured by the browser's own layout: a copy of the page (its CSP dropped, one
probe script added) lists every table box, code block, paragraph or figure whose content is
wider than its box, or that reaches past the viewport, at 1,400 and at 800 px; ``--dump-dom``
returns the list. With ``PDCENSUS_SCREENSHOTS=DIR`` the 1,400 and 800 px screenshots are kept
in DIR (``docs/report-screenshot.png``, ``docs/report-screenshot-800.png``).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from pdcensus.api import census_all
from pdcensus.census.model import CensusReport
from pdcensus.report.html import write_html
from pdcensus.sim import simulate, write_sim_dir

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1200, 3000
FIGURE_TITLES = ("Shape timeline", "Step ledger over time", "Decode and TTFT by prefill bucket", "Lag profile",
                 "Preemption bursts over decode rate")
PROBE = """<script>
const bad = []; const W = document.documentElement.clientWidth;
if (document.documentElement.scrollWidth > W + 1) bad.push('page ' + document.documentElement.scrollWidth + '>' + W);
for (const el of document.querySelectorAll('.table-wrap, pre, figure, p, ul, ol, .callout, nav')) {
  if (el.scrollWidth > el.clientWidth + 1)
    bad.push(el.tagName + ' ' + el.scrollWidth + '>' + el.clientWidth + ': ' + el.textContent.slice(0, 70));
  const r = el.getBoundingClientRect();
  if (r.right > W + 1) bad.push(el.tagName + ' reaches ' + Math.round(r.right) + ' of ' + W);
}
const out = document.createElement('pre'); out.id = 'overflow-probe'; out.textContent = JSON.stringify(bad);
document.body.appendChild(out);
</script>"""
CONSOLE_ERROR = re.compile(r"CONSOLE|Uncaught|Refused to|Content Security Policy|ERR_", re.IGNORECASE)


def _report(out: Path) -> CensusReport:
    """The demo's pipeline: simulate the default scenario (2 h), write its dir, census it with the advice."""
    result = simulate("step-time-sharing", duration_seconds=7200, seed=0)
    write_sim_dir(result, out)
    result.recording.source = "out"
    (report,) = census_all(result.recording, evidence=out)
    return report


def _chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
            f"--user-data-dir={profile}", *extra, page.as_uri()]
    return subprocess.run(args, capture_output=True, text=True, timeout=180)


def _png_pixels(png: bytes) -> tuple[int, int, bytes]:
    """Width, height and the inflated scanlines of a PNG (enough to see it is not blank)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, body = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str, str]:
    if not Path(CHROMIUM).exists() or shutil.which(CHROMIUM) is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    d = tmp_path_factory.mktemp("chromium")
    page = write_html(_report(d / "out"), d / "report.html", "pdcensus demo: step-time-sharing")
    shot = d / "report.png"
    proc = _chromium(page, d / "profile-shot", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                     "--enable-logging=stderr", "--v=0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = _chromium(page, d / "profile-dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    return page, shot, proc.stderr, dom.stdout


def _overflowing(page: Path, width: int, profile: Path) -> list[str]:
    """What overflows when Chromium lays ``page`` out ``width`` px wide (the probe's list)."""
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text(encoding="utf-8"))
    probed = page.with_name(f"{page.stem}-probe-{width}.html")
    probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium(probed, profile, f"--window-size={width},1200", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="overflow-probe">(.*?)</pre>', dom.stdout, flags=re.DOTALL)
    assert found is not None, "the probe did not run"
    return list(json.loads(html.unescape(found.group(1))))


@pytest.mark.parametrize("width", [1400, 800])
def test_nothing_overflows_its_box_at_1400_or_800_px(rendered: tuple[Path, Path, str, str], width: int,
                                                      tmp_path: Path) -> None:
    page, _shot, _log, _dom = rendered
    assert _overflowing(page, width, tmp_path / "profile") == []
    keep = os.environ.get("PDCENSUS_SCREENSHOTS")
    shot = (Path(keep) if keep else tmp_path) / ("report-screenshot.png" if width == 1400 else
                                                f"report-screenshot-{width}.png")
    proc = _chromium(page, tmp_path / "profile-shot", f"--screenshot={shot}", f"--window-size={width},2400",
                     "--hide-scrollbars")
    assert proc.returncode == 0, proc.stderr[-2000:]
    w, h, pixels = _png_pixels(shot.read_bytes())
    assert (w, h) == (width, 2400) and len(set(pixels)) > 64


def test_the_overflow_probe_catches_a_page_that_overflows(tmp_path: Path) -> None:
    """Fault injection: a code line too long to wrap and a table wider than the page must be reported."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    page = tmp_path / "wide.html"
    page.write_text("<!DOCTYPE html><html><body><pre style='white-space:pre;overflow-x:auto'>" + "x" * 400
                    + "</pre><div class='table-wrap' style='overflow-x:auto'><table><tr>"
                    + "<td style='white-space:nowrap'>wide cell</td>" * 80 + "</tr></table></div></body></html>")
    found = _overflowing(page, 800, tmp_path / "profile")
    assert any(f.startswith("PRE ") for f in found) and any(f.startswith("DIV ") for f in found)


def test_the_short_view_comes_first_with_the_advice_above_the_traps(rendered: tuple[Path, Path, str, str]) -> None:
    _page, _shot, _log, dom = rendered
    main = dom[dom.index("<main>"):]
    heads = re.findall(r"<h2[^>]*>([^<]*)</h2>", main)
    assert heads[:4] == ["Verdict", "Evidence that decided it", "Advice", "Verify the arm"]
    assert heads.index("Advice") < heads.index("Traps")
    assert main.index('id="advice"') < main.index("<svg")


def test_the_screenshot_is_a_full_size_picture_not_a_blank_page(rendered: tuple[Path, Path, str, str]) -> None:
    _page, shot, _log, _dom = rendered
    width, height, pixels = _png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(set(pixels)) > 64  # text, axes, bars and lines: many distinct colour values
    row = len(pixels) // height
    distinct_rows = {pixels[r * row:(r + 1) * row] for r in range(0, height, 10)}
    assert len(distinct_rows) > 100  # content all the way down, not one band at the top


def test_the_console_log_holds_no_error_and_no_refused_load(rendered: tuple[Path, Path, str, str]) -> None:
    _page, _shot, log, _dom = rendered
    page_lines = [line for line in log.splitlines() if CONSOLE_ERROR.search(line)]
    assert page_lines == []


def test_the_dom_holds_every_plot_as_a_non_empty_svg_with_its_title(rendered: tuple[Path, Path, str, str]) -> None:
    _page, _shot, _log, dom = rendered
    svgs = re.findall(r"<svg\b[^>]*>(.*?)</svg>", dom, flags=re.DOTALL)
    assert len(svgs) == len(FIGURE_TITLES)
    titles = [re.search(r"<title[^>]*>([^<]*)</title>", body).group(1) for body in svgs]  # type: ignore[union-attr]
    assert titles == list(FIGURE_TITLES)
    for body in svgs:
        assert len(re.findall(r"<(?:rect|line|polyline|circle|text)\b", body)) > 10


def test_the_browser_sees_no_script_and_the_verdict_first(rendered: tuple[Path, Path, str, str]) -> None:
    _page, _shot, _log, dom = rendered
    assert "<script" not in dom
    main = dom[dom.index("<main>"):]
    assert main.index('class="callout') < main.index("<svg")


def test_the_console_check_catches_a_page_that_fails(tmp_path: Path) -> None:
    """Fault injection: a page with a failing script and a blocked load must trip the check."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
                    "content=\"default-src 'none'\"></head><body><img src=\"http://127.0.0.1:9/x.png\">"
                    "</body></html>")
    proc = _chromium(page, tmp_path / "profile", f"--screenshot={tmp_path / 'broken.png'}",
                     "--window-size=400,300", "--enable-logging=stderr", "--v=0")
    assert [line for line in proc.stderr.splitlines() if CONSOLE_ERROR.search(line)]
