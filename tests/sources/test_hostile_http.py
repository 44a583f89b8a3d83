"""Servers that trickle, stall or flood: every request ends at its deadline, every body at its cap.

Real HTTP over 127.0.0.1 (``hostile_servers``): a trickle sends one byte per gap shorter
than ``--timeout``, so a per-read timeout would never fire and only a whole-request deadline
ends it. The subprocess ``timeout=`` of each CLI run is the upper deadline the tool must beat
(a hang fails the test); no test measures a latency.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pdcensus.errors import DataError, SourceUnreachableError
from pdcensus.sources.prometheus import fetch_recording, instant_query_api
from pdcensus.sources.prometheus_http import RetryPolicy
from pdcensus.sources.recorder import load_record_journal
from pdcensus.sources.recorder_journal import scan_journal
from tests.reliability.live_servers import scrape_body
from tests.sources.hostile_servers import SCRAPE_TYPE, HostileServer, answer_bytes, big_body, good_answer, trickle

T0 = 1_700_000_000.0
FAST = RetryPolicy(attempts=3, base_delay_seconds=0.01, max_delay_seconds=0.02)


def _cli(*args: str, env: dict[str, str] | None = None, limit: float = 60) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=limit,
                          check=False, env={**os.environ, **(env or {})})


@pytest.fixture
def trickling() -> Iterator[HostileServer]:
    holder: list[HostileServer] = []
    server = HostileServer(lambda req, n: trickle(holder[0].released, 0.5)(req))
    holder.append(server)
    yield server
    server.close()


@pytest.fixture
def five_then_stall() -> Iterator[HostileServer]:
    holder: list[HostileServer] = []

    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        if n <= 5:
            good_answer(req)
        else:
            trickle(holder[0].released, 0.5)(req)

    server = HostileServer(answer)
    holder.append(server)
    yield server
    server.close()


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    return errors[0]


def test_census_against_a_trickling_prometheus_stops_at_its_timeout_with_exit_4(trickling: HostileServer) -> None:
    done = _cli("census", "--prometheus", trickling.url, "--window", "1h", "--timeout", "2s", limit=30)
    assert done.returncode == 4, done.stderr
    line = _one_error_line(done)
    assert trickling.url in line and "no answer within 2s" in line and "whole request" in line
    assert trickling.requests == 1  # the deadline covers the retries too: no second try of a 2 s budget


def test_fleet_against_a_trickling_prometheus_stops_at_its_timeout_with_exit_4(trickling: HostileServer) -> None:
    done = _cli("fleet", "--prometheus", trickling.url, "--window", "1h", "--timeout", "2s", limit=30)
    assert done.returncode == 4, done.stderr
    assert "no answer within 2s" in _one_error_line(done)


def test_census_against_a_prometheus_that_answers_five_requests_then_stalls_is_exit_4(
        five_then_stall: HostileServer) -> None:
    done = _cli("census", "--prometheus", five_then_stall.url, "--selector", '{job="radiance"}', "--window", "1h",
                "--timeout", "2s", limit=30)
    assert done.returncode == 4, done.stderr
    assert "no answer within 2s" in _one_error_line(done)
    assert five_then_stall.requests > 5  # it got past the good answers before it stalled


def test_the_overall_deadline_stops_a_census_whose_every_answer_is_slow_but_in_time() -> None:
    def slow(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        time.sleep(0.4)
        good_answer(req)

    with HostileServer(slow) as server:
        done = _cli("census", "--prometheus", server.url, "--selector", '{job="radiance"}', "--window", "1h",
                    "--timeout", "5s", "--deadline", "1s", limit=30)
    assert done.returncode == 4, done.stderr
    assert "the --deadline of 1s for all requests ran out" in _one_error_line(done)


def test_census_help_documents_both_deadlines() -> None:
    text = " ".join(_cli("census", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "--deadline" in text and "whole body" in text


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip-encoded"])
def test_a_prometheus_answer_over_the_body_cap_is_refused_while_it_streams(
        gzipped: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDCENSUS_MAX_BODY", "64KiB")
    with HostileServer(lambda req, n: big_body(1 << 20, gzipped=gzipped)(req)) as server:
        with pytest.raises(DataError, match=r"the answer is over the limit of 64 KiB.*PDCENSUS_MAX_BODY=") as caught:
            instant_query_api(server.url, "up", T0, retry=FAST)
    assert caught.value.exit_code == 3


def test_a_bad_body_cap_in_the_environment_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PDCENSUS_MAX_BODY", "lots")
    with HostileServer(lambda req, n: good_answer(req)) as server:
        done = _cli("query", "--prometheus", server.url, "up", "--time", str(T0), env={"PDCENSUS_MAX_BODY": "lots"})
    assert done.returncode == 2 and "$PDCENSUS_MAX_BODY: not a size: 'lots'" in _one_error_line(done)


def test_fetch_against_a_trickle_raises_unreachable_naming_the_url(trickling: HostileServer) -> None:
    with pytest.raises(SourceUnreachableError, match="no answer within 1s") as caught:
        fetch_recording(trickling.url, start=T0, end=T0 + 60, timeout=1.0, retry=FAST)
    assert trickling.url in str(caught.value)


def _metrics(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
    answer_bytes(req, scrape_body(n), SCRAPE_TYPE + "; charset=utf-8")


def test_record_keeps_the_healthy_target_on_schedule_beside_a_trickling_one(tmp_path: Path) -> None:
    holder: list[HostileServer] = []
    with HostileServer(_metrics, "/metrics") as healthy, \
            HostileServer(lambda req, n: trickle(holder[0].released, 0.3, "text/plain")(req), "/metrics") as slow:
        holder.append(slow)
        out = tmp_path / "run.pdrec"
        done = _cli("record", healthy.url, slow.url, "--interval", "1s", "--duration", "4s", "--out", str(out),
                    limit=40)
    assert done.returncode == 0, done.stderr
    blocks = scan_journal(out).blocks
    mine = [b.header for b in blocks if b.header.instance == healthy.url.split("/")[2]]
    theirs = [b.header for b in blocks if b.header.instance == slow.url.split("/")[2]]
    assert len(mine) >= 3 and all(h.up == 1 for h in mine), [h.error for h in mine]  # 4 slots of 1 s
    assert theirs and all(h.up == 0 and "no answer within 1s" in h.error for h in theirs)
    assert "DOWN: no answer within 1s" in done.stderr and f"warning: {slow.url} never answered" in done.stderr
    assert load_record_journal(out).endpoint(instance=healthy.url.split("/")[2]).n_scrapes == len(mine)


def test_a_scrape_over_the_scrape_cap_is_down_with_the_cap_named(tmp_path: Path) -> None:
    with HostileServer(lambda req, n: big_body(1 << 20, content_type="text/plain")(req), "/metrics") as server:
        out = tmp_path / "run.pdrec"
        done = _cli("record", server.url, "--interval", "1s", "--duration", "1s", "--out", str(out),
                    env={"PDCENSUS_MAX_SCRAPE": "64KiB"})
    assert done.returncode == 4, done.stderr
    headers = [b.header for b in scan_journal(out).blocks]
    assert headers and all(h.up == 0 and h.body_bytes == 0 for h in headers)
    assert "over the limit of 64 KiB" in headers[0].error and "PDCENSUS_MAX_SCRAPE=" in headers[0].error


def test_collect_against_a_trickling_endpoint_is_exit_4_within_its_timeout(
        trickling: HostileServer, tmp_path: Path) -> None:
    done = _cli("collect", "--url", trickling.url, "--timeout", "1", "--out", str(tmp_path / "e.tar.gz"), limit=30)
    assert done.returncode == 4, done.stderr
    assert done.stdout.count("no complete answer within 1s") == 3, done.stdout


def test_collect_refuses_an_item_over_the_scrape_cap_while_it_streams(tmp_path: Path) -> None:
    with HostileServer(lambda req, n: big_body(1 << 20)(req)) as server:
        done = _cli("collect", "--url", server.url, "--skip", "stats", "--skip", "diagnostics",
                    "--out", str(tmp_path / "e.tar.gz"), env={"PDCENSUS_MAX_SCRAPE": "64KiB"})
    assert done.returncode == 1, done.stderr
    assert "FAILED  metrics" in done.stdout and "over the limit of 64 KiB" in done.stdout
