"""``record`` and ``collect`` against servers that redirect or ask to be retried later.

The same rule as the Prometheus client's (``tests/reliability/test_http_hops.py``), decided in
:mod:`pdcensus.sources.http_hops`: a redirect within the origin is followed (5 hops at most), one
to another origin is refused with one line naming it and that server hears nothing; a
``Retry-After`` on a 429/503 holds a recorder's target back (the others keep their schedule) and
is waited out by ``collect`` when it fits its ``--timeout``. Every server is a real
``http.server`` on 127.0.0.1 (a free port, a daemon thread); counts are asserted with margins,
and a wait only from below.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.server
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pdcensus.sources import recorder
from pdcensus.sources.bundle import collect_bundle, read_bundle
from pdcensus.sources.recorder import parse_target, record
from pdcensus.sources.recorder_journal import ScrapeHeader, load_record_journal, scan_journal
from tests.reliability.live_servers import scrape_body
from tests.sources.hostile_servers import HostileServer, answer_bytes, answer_json, answer_redirect

HANG_GUARD_SECONDS = 120


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                          timeout=HANG_GUARD_SECONDS, check=False, env=dict(os.environ))


def _metrics(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
    answer_bytes(req, scrape_body(n))


def _busy(req: http.server.BaseHTTPRequestHandler, status: int, after: str | None) -> None:
    req.send_response(status)
    if after is not None:
        req.send_header("Retry-After", after)
    req.send_header("Content-Length", "0")
    req.end_headers()


def _item(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
    """What an engine serves at /stats, /diagnostics (JSON) and /metrics, under any prefix."""
    if req.path.endswith("/metrics"):
        _metrics(req, n)
    else:
        answer_json(req, {"item": req.path.rsplit("/", 1)[-1]})


def _record(urls: list[str], out: Path, interval: float, duration: float) -> list[ScrapeHeader]:
    asyncio.run(record([parse_target(u) for u in urls], out, interval_seconds=interval, duration_seconds=duration))
    return [b.header for b in scan_journal(out).blocks]


def _instance(url: str) -> str:
    return url.split("/")[2]


def test_the_recorder_follows_a_same_origin_redirect_and_records_the_answer(tmp_path: Path) -> None:
    paths: list[str] = []

    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        paths.append(req.path)
        if req.path.startswith("/real/"):
            _metrics(req, n)
        else:
            answer_redirect(req, 308, "/real" + req.path)

    with HostileServer(answer, "/metrics") as server:
        headers = _record([server.url], tmp_path / "run.pdrec", interval=0.1, duration=0.5)
    assert headers and all(h.up == 1 and h.error == "" for h in headers), [h.error for h in headers]
    assert paths.count("/real/metrics") == len(headers) == paths.count("/metrics")  # one hop a scrape
    loaded = load_record_journal(tmp_path / "run.pdrec")
    assert loaded.endpoint(instance=_instance(server.url)).n_scrapes == len(headers)


def test_a_redirect_loop_is_a_failed_scrape_after_five_hops(tmp_path: Path) -> None:
    with HostileServer(lambda req, n: answer_redirect(req, 307, f"/hop{n}/metrics"), "/metrics") as server:
        headers = _record([server.url], tmp_path / "run.pdrec", interval=1.0, duration=0.5)
        requests = server.requests
    assert len(headers) == 1 and headers[0].up == 0 and "more than 5 redirects in a row" in headers[0].error
    assert requests == 6


def test_the_recorder_refuses_a_redirect_to_another_origin_with_one_line_and_that_server_hears_nothing(
        tmp_path: Path) -> None:
    with HostileServer(_metrics) as other:
        with HostileServer(lambda req, n: answer_redirect(req, 302, other.url + req.path), "/metrics") as server:
            out = tmp_path / "run.pdrec"
            done = _cli("record", server.url, "--interval", "200ms", "--duration", "1s", "--out", str(out))
        heard = other.requests
    assert done.returncode == 4, done.stderr  # no scrape succeeded
    assert "Traceback" not in done.stderr
    line = f"HTTP 302 Found: a redirect to {other.url}/metrics, not followed (it points to another origin"
    assert f"DOWN: {line}" in done.stderr, done.stderr
    headers = [b.header for b in scan_journal(out).blocks]
    assert headers and all(h.up == 0 and h.body_bytes == 0 and h.error.startswith(line) for h in headers)
    assert "\n" not in headers[0].error
    assert heard == 0  # its data never lands under this target's instance


def test_a_retry_after_holds_that_target_back_and_the_others_keep_their_schedule(tmp_path: Path) -> None:
    with HostileServer(lambda req, n: _busy(req, 429, "1"), "/metrics") as asked, \
            HostileServer(lambda req, n: _busy(req, 503, None), "/metrics") as plain:
        headers = _record([asked.url, plain.url], tmp_path / "run.pdrec", interval=0.2, duration=2.0)
        seen_asked, seen_plain = asked.requests, plain.requests
    # 10 slots of 0.2 s: told to wait 1 s, the first target is scraped at 0 s and about 1 s, and no more
    assert 1 <= seen_asked <= 4, seen_asked
    assert seen_plain >= 6, seen_plain  # a 503 without Retry-After keeps the interval
    mine = [h for h in headers if h.instance == _instance(asked.url)]
    assert len(mine) == seen_asked
    assert mine[0].error == ("HTTP 429 Too Many Requests, with Retry-After '1' (1s): the next scrape of this "
                             "target waits 1s"), mine[0].error


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_a_retry_after_past_the_recordings_end_is_the_last_scrape_of_that_target_and_says_so(
        form: str, tmp_path: Path) -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        _busy(req, 503, "3600" if form == "seconds" else email.utils.formatdate(time.time() + 3600, usegmt=True))

    with HostileServer(answer, "/metrics") as server:
        headers = _record([server.url], tmp_path / "run.pdrec", interval=0.2, duration=2.0)
        requests = server.requests
    assert requests == 1 and len(headers) == 1
    assert headers[0].error.startswith("HTTP 503 Service Unavailable, with Retry-After ")
    assert headers[0].error.endswith(": no further scrape of this target, as that wait runs past the recording's end")


def test_a_long_retry_after_is_capped_and_the_cap_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "MAX_SCRAPE_PAUSE_SECONDS", 0.5)  # the real cap is 600 s
    with HostileServer(lambda req, n: _busy(req, 429, "3600"), "/metrics") as server:
        headers = _record([server.url], tmp_path / "run.pdrec", interval=0.1, duration=2.0)
        requests = server.requests
    assert 2 <= requests <= 5, requests  # about every 0.6 s, not every 0.1 s, nor never again
    assert headers[0].error == ("HTTP 429 Too Many Requests, with Retry-After '3600' (3600s): the next scrape of "
                                "this target waits 0.5s (the most a Retry-After holds a target back; it asked 3600s)")


def test_collect_follows_a_same_origin_redirect_for_every_item_and_notes_where(tmp_path: Path) -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        if req.path.startswith("/v1/"):
            _item(req, n)
        else:
            answer_redirect(req, 301, "/v1" + req.path)

    with HostileServer(answer) as server:
        manifest = collect_bundle(tmp_path / "e.tar.gz", url=server.url, timeout_seconds=10)
    items = manifest["items"]
    assert all(items[name]["status"] == "ok" for name in ("stats", "diagnostics", "metrics")), items
    assert items["stats"]["note"] == f"redirected to {server.url}/v1/stats"
    bundle = read_bundle(tmp_path / "e.tar.gz")
    assert bundle.stats == {"item": "stats"} and bundle.metrics_text and "radiance:" in bundle.metrics_text


def test_collect_refuses_a_redirect_to_another_origin_with_one_line_and_that_server_hears_nothing(
        tmp_path: Path) -> None:
    with HostileServer(_item) as other:
        with HostileServer(lambda req, n: answer_redirect(req, 302, other.url + req.path)) as server:
            done = _cli("collect", "--url", server.url, "--out", str(tmp_path / "e.tar.gz"))
        heard = other.requests
    assert done.returncode == 1, done.stdout + done.stderr  # the server answered: failed channels, not exit 4
    assert "Traceback" not in done.stderr and done.stderr.startswith("error: 3 requested channel(s) failed")
    for name in ("stats", "diagnostics", "metrics"):
        assert (f"FAILED  {name:<12} HTTP 302 Found: a redirect to {other.url}/{name}, not followed (it points to "
                "another origin") in done.stdout, done.stdout
    assert "as --url" in done.stdout
    assert heard == 0
    assert "another origin" in read_bundle(tmp_path / "e.tar.gz").failures()["stats"]


def test_collect_waits_out_a_retry_after_that_fits_its_timeout(tmp_path: Path) -> None:
    stamps: list[float] = []
    lock = threading.Lock()

    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        with lock:
            stamps.append(time.monotonic())
        if n == 1:
            _busy(req, 503, "1")
        else:
            _item(req, n)

    with HostileServer(answer) as server:
        manifest = collect_bundle(tmp_path / "e.tar.gz", url=server.url, timeout_seconds=10)
    stats = manifest["items"]["stats"]
    assert stats["status"] == "ok", stats
    assert stats["note"] == "waited: HTTP 503 Service Unavailable, with Retry-After '1' (1s)"
    assert len(stamps) == 4  # stats twice, then diagnostics and metrics once each
    assert stamps[1] - stamps[0] >= 0.9  # waited what it was asked


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_collect_fails_an_item_at_once_naming_a_retry_after_past_its_timeout(form: str, tmp_path: Path) -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        _busy(req, 429, "30" if form == "seconds" else email.utils.formatdate(time.time() + 30, usegmt=True))

    with HostileServer(answer) as server:
        done = _cli("collect", "--url", server.url, "--timeout", "2", "--out", str(tmp_path / "e.tar.gz"))
        requests = server.requests
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    failed = [line for line in done.stdout.splitlines() if line.startswith("  FAILED")]
    assert len(failed) == 3, done.stdout
    for line in failed:
        assert "HTTP 429 Too Many Requests, with Retry-After " in line and "past the " in line, line
        assert "left of the --timeout of 2s; not retried (after 1 attempt)" in line, line
    assert requests == 3  # one request an item, no back-off tries


def test_collect_asks_at_most_four_times_when_every_answer_says_retry_now(tmp_path: Path) -> None:
    with HostileServer(lambda req, n: _busy(req, 503, "0")) as server:
        manifest = collect_bundle(tmp_path / "e.tar.gz", url=server.url, timeout_seconds=10,
                                  skip=("stats", "diagnostics"))
        requests = server.requests
    metrics = manifest["items"]["metrics"]
    assert metrics["status"] == "failed" and not metrics.get("unreachable")
    assert metrics["error"] == "HTTP 503 Service Unavailable, with Retry-After '0' (0s), still after 4 attempts"
    assert requests == 4
