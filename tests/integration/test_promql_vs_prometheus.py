"""Our PromQL answers equal a real Prometheus's, point by point, on a backfilled recording.

The Debian package is Prometheus 2.42, so we evaluate with ``semantics=2``. The recording
has counter resets, missed scrapes (different ones per series) and a classic histogram.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.series.promql import instant_query, range_query, storage_from_recording, to_api_json
from pdcensus.sources.openmetrics_writer import write_openmetrics

pytestmark = pytest.mark.integration

T0 = 1_700_000_000.0
SCRAPE_SECONDS = 15.0
N_SCRAPES = 480
QUERIES = [
    "rate(req_total[5m])",
    "increase(req_total[10m])",
    "sum by (code) (rate(req_total[5m]))",
    "histogram_quantile(0.9, sum by (le) (rate(lat_seconds_bucket[5m])))",
    "histogram_quantile(0.5, rate(lat_seconds_bucket[2m]))",
]


def make_recording() -> Recording:
    rng = np.random.default_rng(7)
    builder = RecordingBuilder("promql-integration")
    builder.add_family(Family("req", MetricType.COUNTER))
    builder.add_family(Family("lat_seconds", MetricType.HISTOGRAM))
    builder.add_family(Family("up", MetricType.GAUGE))
    for instance in ("a:1", "b:1"):
        base = {"job": "svc", "instance": instance}
        # a:1 scrapes exactly on the grid, so samples sit on window edges (where 2.x and 3.x
        # differ); b:1 has scrape jitter
        jitter = rng.integers(0, 400, N_SCRAPES) / 1000 if instance == "b:1" else np.zeros(N_SCRAPES)
        ts = T0 + np.arange(N_SCRAPES) * SCRAPE_SECONDS + jitter
        kept = rng.random(N_SCRAPES) > 0.05  # missed scrapes
        builder.add_many(SeriesKey("up", normalize_labels(base)), ts, kept.astype(float))
        for code in ("200", "500"):
            counter = np.cumsum(rng.integers(0, 50, N_SCRAPES)).astype(float)
            reset_at = int(rng.integers(100, 380))
            counter[reset_at:] -= counter[reset_at] - rng.integers(0, 5)  # a restart
            key = SeriesKey("req_total", normalize_labels({**base, "code": code}))
            builder.add_many(key, ts[kept], counter[kept])
        observations = np.cumsum(rng.integers(0, 20, N_SCRAPES)).astype(float)
        for le, share in (("0.1", 0.3), ("0.5", 0.7), ("2.5", 0.95), ("+Inf", 1.0)):
            key = SeriesKey("lat_seconds_bucket", normalize_labels({**base, "le": le}))
            builder.add_many(key, ts[kept], np.floor(observations * share)[kept])
        builder.add_many(SeriesKey("lat_seconds_count", normalize_labels(base)), ts[kept], observations[kept])
        builder.add_many(SeriesKey("lat_seconds_sum", normalize_labels(base)), ts[kept],
                         (observations * 0.4)[kept])
    return builder.build()


@pytest.fixture(scope="module")
def recording() -> Recording:
    return make_recording()


@pytest.fixture(scope="module")
def base_url(recording: Recording, prometheus_server: Callable[[Path], str],
             tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("om") / "metrics.om"
    write_openmetrics(recording, path)
    return prometheus_server(path)


def _series(payload: dict[str, Any]) -> dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]:
    data = payload["data"]
    out = {}
    for item in data["result"]:
        points = item["values"] if data["resultType"] == "matrix" else [item["value"]]
        out[tuple(sorted(item["metric"].items()))] = [(float(t), float(v)) for t, v in points]
    return out


def _assert_same(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert theirs["status"] == "success"
    assert ours["data"]["resultType"] == theirs["data"]["resultType"]
    mine, real = _series(ours), _series(theirs)
    assert mine.keys() == real.keys()
    for labels, points in real.items():
        assert [t for t, _ in mine[labels]] == [t for t, _ in points], labels
        for (_, a), (_, b) in zip(mine[labels], points):
            assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=0), (labels, a, b)


@pytest.mark.parametrize("expr", QUERIES)
def test_range_queries_match_prometheus_point_by_point(recording: Recording, base_url: str, expr: str) -> None:
    start, end, step = T0 + 600, T0 + SCRAPE_SECONDS * (N_SCRAPES - 1), 60.0
    params = {"query": expr, "start": start, "end": end, "step": step}
    theirs = httpx.get(f"{base_url}/api/v1/query_range", params=params, timeout=30).json()
    ours = to_api_json(range_query(storage_from_recording(recording), expr, start, end, step, semantics=2))
    assert _series(theirs), "Prometheus returned nothing: the backfill did not land"
    _assert_same(ours, theirs)


@pytest.mark.parametrize("expr", QUERIES)
def test_instant_queries_match_prometheus(recording: Recording, base_url: str, expr: str) -> None:
    storage = storage_from_recording(recording)
    for at in (T0 + 300.0, T0 + 3600.0 + 7.5, T0 + 5000.0):
        theirs = httpx.get(f"{base_url}/api/v1/query", params={"query": expr, "time": at}, timeout=30).json()
        _assert_same(to_api_json(instant_query(storage, expr, at, semantics=2)), theirs)
