"""The exported PromQL, run by the real Prometheus, gives the census's own numbers.

A recording is backfilled into Debian's prometheus (``prometheus_server`` from
``conftest.py``) and censused in process; then each exported expression is evaluated by
Prometheus over the whole analysed window (an instant query at the last scrape whose range
is exactly the window, so ``increase`` has nothing to extrapolate) or per scrape (a range
query stepping on the scrape timestamps), and compared with what the census reported.

Two recordings, each served by its own Prometheus: the simulator's step-time-sharing
scenario, and a generated one with the same metric contract whose TTFT histogram only
moves while prefill is idle, so that the census's idle-bucket TTFT is the whole window's
and the exported TTFT quantiles can be compared with it (on the simulator's recording first
tokens arrive in every bucket, and that comparison is skipped).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from pdcensus.census.model import CensusReport
from pdcensus.census.run import census_recording
from pdcensus.queries.promql_export import CensusQuery, census_queries, prometheus_duration
from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.series.profiles import PROFILES
from pdcensus.sources.openmetrics_writer import write_openmetrics

pytestmark = pytest.mark.integration

INTERVAL = 15.0
N_SCRAPES = 240
TTFT_BOUNDS = ("0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "+Inf")


def generated_recording(start: float, seed: int = 3) -> Recording:
    """One radiance 1.8 endpoint, an hour at 15 s: chunk steps while prefill is busy."""
    rng = np.random.default_rng(seed)
    n = N_SCRAPES
    b = RecordingBuilder(source="generated")
    counter, gauge, histogram = MetricType.COUNTER, MetricType.GAUGE, MetricType.HISTOGRAM
    for name, kind in (("radiance:engine_steps", counter), ("radiance:engine_steps_decode", counter),
                       ("radiance:engine_step_seconds", counter), ("radiance:engine_step_seconds_decode", counter),
                       ("radiance:engine_steps_held", counter), ("radiance:decode_tokens_per_second", gauge),
                       ("radiance:prefill_tokens_per_second", gauge), ("radiance:num_requests_preempted", gauge),
                       ("vllm:num_requests_running", gauge), ("vllm:num_requests_waiting", gauge),
                       ("vllm:num_preemptions", counter), ("vllm:time_to_first_token_seconds", histogram),
                       ("up", gauge)):
        b.add_family(Family(name, kind))
    ts = start + np.arange(n) * INTERVAL
    busy = (np.arange(n) // 12) % 3 == 1
    base = {"job": "radiance", "instance": "10.0.0.7:7770"}

    def add(name: str, values: np.ndarray, **extra: str) -> None:
        b.add_many(SeriesKey(name, normalize_labels({**base, **extra})), ts, values)

    chunk_steps = np.where(busy, rng.integers(8, 12, n), 0).astype(float)
    chunk_seconds = chunk_steps * rng.uniform(0.8, 1.0, n)
    decode_steps = np.floor((INTERVAL - chunk_seconds) / (0.015 + rng.uniform(0, 0.001, n)))
    decode_seconds = decode_steps * (0.015 + rng.uniform(0, 0.001, n))
    held = np.where(busy, rng.integers(0, 4, n), 0).astype(float)
    preemptions = np.zeros(n)
    preemptions[[50, 51, 130]] = (3, 2, 4)
    running = rng.integers(28, 36, n).astype(float)
    m = {"model_name": "m"}
    add("up", np.ones(n))
    add("radiance:engine_steps_total", 1000 + np.cumsum(chunk_steps + decode_steps), **m)
    add("radiance:engine_steps_decode_total", 900 + np.cumsum(decode_steps), **m)
    add("radiance:engine_step_seconds_total", 20 + np.cumsum(chunk_seconds + decode_seconds), **m)
    add("radiance:engine_step_seconds_decode_total", 15 + np.cumsum(decode_seconds), **m)
    add("radiance:engine_steps_held_total", np.cumsum(held), **m)
    add("vllm:num_requests_running", running, **m)
    add("vllm:num_requests_waiting", rng.integers(0, 3, n).astype(float), **m)
    add("radiance:decode_tokens_per_second", running * np.where(busy, 25.0, 70.0) + rng.normal(0, 20, n), **m)
    add("radiance:prefill_tokens_per_second", np.where(busy, rng.uniform(4000, 8000, n), 0.0), **m)
    add("vllm:num_preemptions_total", np.cumsum(preemptions), **m)
    add("radiance:num_requests_preempted", np.where(preemptions > 0, 2.0, 0.0), **m)
    weights = np.array([1, 4, 6, 3, 2, 1, 0])[:, None]  # most first tokens in 0.25-1 s
    per_bucket = np.where(busy, 0, rng.poisson(weights, (len(TTFT_BOUNDS), n)))  # only while prefill is idle
    cumulative = np.cumsum(np.cumsum(per_bucket, axis=0), axis=1).astype(float)
    for le, row in zip(TTFT_BOUNDS, cumulative):
        add("vllm:time_to_first_token_seconds_bucket", row, le=le, **m)
    add("vllm:time_to_first_token_seconds_count", cumulative[-1], **m)
    add("vllm:time_to_first_token_seconds_sum", cumulative[-1] * 0.6, **m)
    return b.build()


def _recording(source: str) -> Recording:
    if source == "simulator":
        from pdcensus.sim import simulate

        return simulate("step-time-sharing", duration_seconds=3600, seed=1).recording
    return generated_recording(float(int(time.time() // INTERVAL * INTERVAL) - 4 * 3600))


class Served:
    """A census report and a client for the Prometheus serving the recording it came from."""

    def __init__(self, report: CensusReport, url: str) -> None:
        self.report = report
        self.url = url
        self.queries = {q.key: q for q in census_queries(PROFILES[report.profile])}
        seg = next(s for s in report.shape.segments if s.index == report.shape.analysed)
        self.first, self.last = float(seg.start), float(seg.end)

    def instant(self, query: CensusQuery, at: float, window: str) -> float:
        expr = query.expr.replace("$__rate_interval", window)
        resp = httpx.get(f"{self.url}/api/v1/query", params={"query": expr, "time": f"{at:.3f}"}, timeout=30)
        resp.raise_for_status()
        result = resp.json()["data"]["result"]
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])

    def whole_window(self, query: CensusQuery) -> float:
        """The query over exactly the analysed window, at its last scrape (no extrapolation)."""
        return self.instant(query, self.last, prometheus_duration(self.last - self.first))


_SERVED: dict[str, Served] = {}


def _serve(source: str, start: Callable[[Path], str], tmp_path_factory: pytest.TempPathFactory) -> Served:
    """One Prometheus per recording for the whole module."""
    if source not in _SERVED:
        recording = _recording(source)
        (report,) = census_recording(recording)
        om = tmp_path_factory.mktemp("recording") / "metrics.om"
        write_openmetrics(recording, om)
        _SERVED[source] = Served(report, start(om))
    return _SERVED[source]


@pytest.fixture(scope="module", autouse=True)
def _forget_servers() -> Iterator[None]:
    yield
    _SERVED.clear()


@pytest.fixture(scope="module", params=["simulator", "generated"])
def served(request: pytest.FixtureRequest, prometheus_server: Callable[[Path], str],
           tmp_path_factory: pytest.TempPathFactory) -> Served:
    return _serve(request.param, prometheus_server, tmp_path_factory)


@pytest.fixture(scope="module")
def served_idle_ttft(prometheus_server: Callable[[Path], str], tmp_path_factory: pytest.TempPathFactory) -> Served:
    """The generated recording: first tokens only while prefill is idle."""
    return _serve("generated", prometheus_server, tmp_path_factory)


def test_the_census_window_is_one_shape(served: Served) -> None:
    assert served.report.shape.proven
    assert served.whole_window(served.queries["counter_resets"]) == 0


@pytest.mark.parametrize(
    ("key", "census_value"),
    [
        pytest.param("decode_only_step_seconds", lambda r: r.ledger.decode_step_seconds, id="decode-only-step"),
        pytest.param("chunk_step_seconds", lambda r: r.ledger.chunk_step_seconds, id="chunk-step"),
        pytest.param("chunk_step_time_share", lambda r: r.ledger.chunk_share_of_step_time, id="chunk-time-share"),
        pytest.param("held_steps", lambda r: r.ledger.held_steps, id="held-steps"),
        pytest.param("preemptions", lambda r: r.preemption.total, id="preemptions"),
    ],
)
def test_a_whole_window_query_equals_the_census(served: Served, key: str,
                                                census_value: Callable[[CensusReport], float]) -> None:
    want = census_value(served.report)
    assert math.isfinite(want)
    assert served.whole_window(served.queries[key]) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_the_phase_ratio_is_the_census_chunk_step_over_its_decode_only_step(served: Served) -> None:
    ledger = served.report.ledger
    got = served.whole_window(served.queries["phase_ratio"])
    assert got == pytest.approx(ledger.chunk_step_seconds / ledger.decode_step_seconds, rel=1e-9)
    assert got > 1  # a chunk step is longer than a decode-only step


def test_per_stream_rate_per_scrape_equals_decode_over_running_from_the_same_scrape(served: Served) -> None:
    tl = served.report.timeline
    assert tl is not None
    query = served.queries["per_stream_decode_tokens_per_second"]
    compared = 0
    for t, decode, running in list(zip(tl.times, tl.decode_tokens_per_second, tl.running))[::8]:
        if running > 0 and math.isfinite(decode):
            assert served.instant(query, t, "1m") == pytest.approx(decode / running, rel=1e-9), t
            compared += 1
    assert compared > 10


@pytest.mark.parametrize("quantile", ["p50", "p90", "p99"])
def test_ttft_quantiles_equal_the_census_where_first_tokens_came_only_while_idle(served_idle_ttft: Served,
                                                                                 quantile: str) -> None:
    table = served_idle_ttft.report.buckets
    assert table is not None
    idle, *busy = table.rows
    assert idle.ttft_requests > 0 and not any(r.ttft_requests for r in busy)
    want = getattr(idle, f"ttft_{quantile}_seconds")
    got = served_idle_ttft.whole_window(served_idle_ttft.queries[f"ttft_seconds_{quantile}"])
    assert got == pytest.approx(want, rel=1e-9)
