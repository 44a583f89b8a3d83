"""The Prometheus source against the real Debian prometheus, fed a backfilled recording.

The helper here backfills an OpenMetrics file with ``promtool tsdb create-blocks-from
openmetrics`` and starts ``prometheus`` on 127.0.0.1 on a free port (module scope: one
server for every test in the file).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.prometheus import FetchMode, fetch_recording, instant_query_api, range_query_api

pytestmark = pytest.mark.integration

N_SCRAPES = 480  # two hours at 15 s
START = float(int(time.time()) - 4 * 3600)


def make_recording() -> Recording:
    rng = np.random.default_rng(11)
    b = RecordingBuilder(source="synthetic")
    for fam in (
        Family("radiance:engine_steps_total", MetricType.COUNTER, "every engine step"),
        Family("radiance:decode_tokens_per_second", MetricType.GAUGE, "decode tokens/s"),
        Family("vllm:time_to_first_token_seconds", MetricType.HISTOGRAM, "TTFT"),
        Family("up", MetricType.GAUGE),
    ):
        b.add_family(fam)
    for inst in ("10.0.0.1:7770", "10.0.0.2:7770"):
        ts = START + np.arange(N_SCRAPES) * 15.0 + rng.integers(0, 900, N_SCRAPES) / 1000
        base = {"job": "radiance", "instance": inst}

        def key(name: str, **extra: str) -> SeriesKey:
            return SeriesKey(name, normalize_labels({**base, **extra}))

        b.add_many(key("up"), ts, np.ones(N_SCRAPES))
        b.add_many(key("radiance:engine_steps_total", model_name="m"), ts,
                   np.cumsum(rng.integers(0, 900, N_SCRAPES)).astype(float))
        gauge = rng.random(N_SCRAPES) * 200
        gauge[7] = math.nan  # a real NaN sample survives the trip
        b.add_many(key("radiance:decode_tokens_per_second", model_name="m"), ts, gauge)
        counts = np.cumsum(rng.integers(0, 5, N_SCRAPES)).astype(float)
        for le, share in (("0.5", 0.5), ("2.0", 0.8), ("+Inf", 1.0)):
            b.add_many(key("vllm:time_to_first_token_seconds_bucket", le=le), ts, np.floor(counts * share))
        b.add_many(key("vllm:time_to_first_token_seconds_count"), ts, counts)
        b.add_many(key("vllm:time_to_first_token_seconds_sum"), ts, counts * 0.7)
    return b.build()


@pytest.fixture(scope="module")
def recording() -> Recording:
    return make_recording()


@pytest.fixture(scope="module")
def prometheus_url(recording: Recording, prometheus_server: Callable[[Path], str],
                   tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("prom") / "rec.om"
    write_openmetrics(recording, path)
    return prometheus_server(path)


def samples_of(rec: Recording) -> dict[SeriesKey, tuple[list[float], list[float]]]:
    out = {}
    for ep in rec.endpoints:
        for key, ts, vals in ep.iter_series():
            out[key] = (np.round(ts, 3).tolist(), vals.tolist())
    return out


def assert_same_samples(got: Recording, want: Recording) -> None:
    a, b = samples_of(got), samples_of(want)
    assert sorted(a) == sorted(b)
    for key in b:
        assert a[key][0] == b[key][0], key
        np.testing.assert_array_equal(np.array(a[key][1]), np.array(b[key][1]), err_msg=str(key))


class CountingTransport(httpx.AsyncHTTPTransport):
    """The real transport, counting the requests per API path and query kind."""

    def __init__(self) -> None:
        super().__init__()
        self.raw_queries = 0
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        body = request.content.decode() if request.content else ""
        if request.url.path == "/api/v1/query" and "ms%5D" in body and "count_over_time" not in body:
            self.raw_queries += 1
        return await super().handle_async_request(request)


WINDOW = {"start": START - 30, "end": START + N_SCRAPES * 15 + 30}


def test_fetched_raw_samples_equal_the_recording_exactly(prometheus_url: str, recording: Recording) -> None:
    got, warnings = fetch_recording(prometheus_url, selector='{job="radiance"}', **WINDOW)
    assert warnings == []
    assert_same_samples(got, recording)
    assert got.type_of("radiance:engine_steps_total") is MetricType.COUNTER
    assert got.type_of("vllm:time_to_first_token_seconds_bucket") is MetricType.HISTOGRAM


def test_a_window_over_the_point_limit_is_split_into_several_requests_and_complete(
    prometheus_url: str, recording: Recording
) -> None:
    transport = CountingTransport()
    names = {"radiance:engine_steps_total", "radiance:decode_tokens_per_second"}
    got, _ = fetch_recording(prometheus_url, names=names, max_points_per_series=100, transport=transport, **WINDOW)
    assert transport.raw_queries >= 3 * (N_SCRAPES // 100)  # three names (with up), >= 4 windows each
    want = {k: v for k, v in samples_of(recording).items() if k.name in names | {"up"}}
    assert samples_of(got).keys() == want.keys()
    for key, (ts, vals) in want.items():
        assert samples_of(got)[key][0] == ts
        np.testing.assert_array_equal(samples_of(got)[key][1], vals)


def test_a_sub_window_of_the_recording_comes_back_exactly(prometheus_url: str, recording: Recording) -> None:
    start, end = START + 3600, START + 5400
    got, _ = fetch_recording(prometheus_url, names={"radiance:engine_steps_total"}, start=start, end=end)
    want = Recording(recording.families, [ep.slice_time(start, end) for ep in recording.endpoints])
    want_steps = {k: v for k, v in samples_of(want).items() if k.name in ("up", "radiance:engine_steps_total")}
    assert samples_of(got) == want_steps


def test_query_range_mode_sees_every_scrape_with_a_step_under_the_interval(prometheus_url: str,
                                                                          recording: Recording) -> None:
    got, warnings = fetch_recording(prometheus_url, names={"radiance:engine_steps_total"},
                                    mode=FetchMode.RANGE, **WINDOW)
    assert any("resampled by query_range" in w for w in warnings)
    for ep in got.endpoints:
        assert ep.scrape_interval_seconds() <= 15.0
        key = ep.select("radiance:engine_steps_total")[0]
        served = set(samples_of(recording)[key][1])
        assert set(ep.samples(key)[1].tolist()) == served


def test_the_thin_api_wrappers_return_prometheus_json(prometheus_url: str) -> None:
    t = START + 1800
    inst = instant_query_api(prometheus_url, 'count(up{job="radiance"})', t)
    assert inst["status"] == "success" and inst["data"]["result"][0]["value"][1] == "2"
    rng = range_query_api(prometheus_url, 'sum(up{job="radiance"})', t, t + 600, 60)
    assert [v[1] for v in rng["data"]["result"][0]["values"]] == ["2"] * 11
