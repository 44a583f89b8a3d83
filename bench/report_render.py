"""Report rendering cost: HTML and Markdown render time and size against window length.

Simulates the demo's scenario for each ``--hours`` value, runs the census once, then
renders the HTML page and the Markdown report (best of ``--repeat``) and prints the time,
the page size, and each inline plot's size. With ``--screenshot PATH`` it also writes a
PNG of the first window's page as headless Chromium draws it (the README's picture).
Usage::

    .venv/bin/python bench/report_render.py --hours 2 8 24
    .venv/bin/python bench/report_render.py --hours 2 --screenshot docs/report-screenshot.png
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import time
from pathlib import Path

from pdcensus.census.run import census_recording
from pdcensus.report.html import render_html
from pdcensus.report.markdown import render_markdown
from pdcensus.sim import simulate

CHROMIUM = "/usr/bin/chromium"


def best_of(repeat: int, fn: object) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def screenshot(page: str, out: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        html.write_text(page, encoding="utf-8")
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--disable-quic", f"--user-data-dir={Path(tmp) / 'profile'}",
                        f"--screenshot={out.resolve()}", f"--window-size={width},{height}", html.as_uri()],
                       check=True, capture_output=True, timeout=180)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, nargs="+", default=[2.0, 8.0, 24.0])
    ap.add_argument("--scenario", default="step-time-sharing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--screenshot", type=Path, default=None)
    ap.add_argument("--size", default="1200x2400", help="screenshot WIDTHxHEIGHT")
    args = ap.parse_args()
    print("| window | scrapes | census | HTML render | HTML size | Markdown render | largest plot |")
    print("|---|---|---|---|---|---|---|")
    shot = ""
    for i, hours in enumerate(args.hours):
        result = simulate(args.scenario, duration_seconds=hours * 3600, seed=args.seed)
        t0 = time.perf_counter()
        reports = census_recording(result.recording)
        census_s = time.perf_counter() - t0
        title = f"pdcensus demo: {args.scenario}"
        page = render_html(reports, title)
        html_s = best_of(args.repeat, lambda: render_html(reports, title))
        md_s = best_of(args.repeat, lambda: render_markdown(reports))
        plots = {m.group(1): len(m.group(0)) for m in re.finditer(r'<svg[^>]*id="([^"]+)".*?</svg>', page, re.S)}
        name, size = max(plots.items(), key=lambda kv: kv[1])
        scrapes = result.recording.endpoints[0].n_scrapes
        print(f"| {hours:g} h | {scrapes:,} | {census_s:.2f} s | {html_s * 1000:.0f} ms | "
              f"{len(page.encode()) / 1024:.0f} KiB | {md_s * 1000:.0f} ms | {name} {size / 1024:.0f} KiB |")
        if i == 0 and args.screenshot is not None:
            w, h = (int(v) for v in args.size.split("x"))
            screenshot(page, args.screenshot, w, h)
            shot = f"wrote {args.screenshot} ({args.screenshot.stat().st_size / 1024:.0f} KiB)"
    if shot:
        print("\n" + shot)


if __name__ == "__main__":
    main()
