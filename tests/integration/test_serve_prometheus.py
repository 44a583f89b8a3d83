"""A real Prometheus scrapes `pdcensus serve`, and the census through the Prometheus source finds the mechanism.

``pdcensus serve step-time-sharing --speed 15`` runs a quarter of an hour of engine time in a
minute of wall time; Debian's Prometheus scrapes it every second (a 15 s scrape in engine
time, the runbook's usual interval). The census then reads the window back through the
Prometheus HTTP source and must name step-time sharing, the scenario's ground truth.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from pdcensus.census.model import Mechanism
from pdcensus.census.run import census_recording
from pdcensus.sim.server_process import ServeProcess
from pdcensus.sources.prometheus import fetch_recording

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEED = 15.0
WINDOW_SECONDS = 75.0


def wait_for_first_scrape(base_url: str, timeout_seconds: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        answer = httpx.get(f"{base_url}/api/v1/query", params={"query": 'up{job="radiance"}'}, timeout=5).json()
        if answer["data"]["result"] and answer["data"]["result"][0]["value"][1] == "1":
            return
        time.sleep(0.5)
    raise AssertionError(f"prometheus at {base_url} never scraped the server")


def test_census_through_prometheus_names_step_time_sharing_on_a_live_scraped_server(
    prometheus_scraper: Callable[..., str],
) -> None:
    with ServeProcess("step-time-sharing", speed=SPEED, seed=3) as server:
        target = server.url.removeprefix("http://")
        prometheus = prometheus_scraper([target], job="radiance", scrape_interval="1s")
        wait_for_first_scrape(prometheus)
        start = time.time()
        time.sleep(WINDOW_SECONDS)
        end = time.time()
    # how many scrapes Prometheus itself recorded as good in the window: under a busy machine
    # some may time out (up = 0), so the census is held to Prometheus's count, not to a rate
    answer = httpx.get(f"{prometheus}/api/v1/query", timeout=30, params={
        "query": f'sum_over_time(up{{job="radiance"}}[{int((end - start) * 1000)}ms])', "time": f"{end:.3f}"}).json()
    good_scrapes = float(answer["data"]["result"][0]["value"][1])
    recording, warnings = fetch_recording(prometheus, selector='{job="radiance"}', start=start, end=end)
    assert recording.instances() == [target]
    report = census_recording(recording)[0]
    assert report.verdict.mechanism is Mechanism.STEP_TIME_SHARING, (
        report.verdict.mechanism, [e.text for e in report.verdict.evidence], warnings)
    assert good_scrapes >= 10
    assert abs(sum(segment.scrapes for segment in report.shape.segments) - good_scrapes) <= 1
