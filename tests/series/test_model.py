"""The aligned model: rows per scrape, a present mask, Prometheus's family/sample rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdcensus.errors import DataError, UsageError
from pdcensus.series.model import (
    Family,
    MetricType,
    RecordingBuilder,
    SeriesKey,
    family_of,
    normalize_labels,
)

JOB_A = normalize_labels({"job": "radiance", "instance": "a:1"})


def _builder() -> RecordingBuilder:
    b = RecordingBuilder("test")
    b.add_family(Family("vllm:num_preemptions_total", MetricType.COUNTER))
    b.add_family(Family("vllm:time_to_first_token_seconds", MetricType.HISTOGRAM))
    return b


def test_builder_aligns_series_on_the_union_of_scrape_timestamps() -> None:
    b = _builder()
    gauge = SeriesKey("g", JOB_A)
    counter = SeriesKey("vllm:num_preemptions_total", JOB_A)
    b.add(gauge, 10.0, 1.0)
    b.add(gauge, 25.0, 2.0)
    b.add(counter, 25.0, 7.0)
    b.add(counter, 40.0, 8.0)
    ep = b.build().endpoint()
    assert ep.timestamps.tolist() == [10.0, 25.0, 40.0]
    vals, ok = ep.column(counter)
    assert ok.tolist() == [False, True, True]
    assert vals[1:].tolist() == [7.0, 8.0]
    ts, v = ep.samples(gauge)
    assert ts.tolist() == [10.0, 25.0] and v.tolist() == [1.0, 2.0]


def test_a_real_nan_sample_is_present_while_an_absent_one_is_not() -> None:
    b = _builder()
    key = SeriesKey("g", JOB_A)
    other = SeriesKey("h", JOB_A)
    b.add(key, 1.0, math.nan)
    b.add(other, 2.0, 0.0)
    ep = b.build().endpoint()
    vals, ok = ep.column(key)
    assert ok.tolist() == [True, False]
    assert all(np.isnan(vals))


def test_endpoints_are_split_by_job_and_instance() -> None:
    b = _builder()
    b.add(SeriesKey("up", JOB_A), 1.0, 1.0)
    b.add(SeriesKey("up", normalize_labels({"job": "radiance", "instance": "b:2"})), 1.0, 0.0)
    rec = b.build()
    assert rec.instances() == ["a:1", "b:2"]
    assert rec.endpoint("b:2").column(rec.endpoint("b:2").keys[0])[0].tolist() == [0.0]


def test_endpoint_choice_errors_list_the_instances() -> None:
    b = _builder()
    for inst in ("a:1", "b:2"):
        b.add(SeriesKey("up", normalize_labels({"job": "j", "instance": inst})), 1.0, 1.0)
    rec = b.build()
    with pytest.raises(UsageError, match="a:1, b:2"):
        rec.endpoint()
    with pytest.raises(UsageError, match="no instance 'c:3'"):
        rec.endpoint("c:3")
    with pytest.raises(DataError, match="no endpoint"):
        RecordingBuilder("empty").build().endpoint()


def test_slice_time_keeps_bounds_inclusive_and_drops_empty_series() -> None:
    b = _builder()
    early = SeriesKey("early", JOB_A)
    late = SeriesKey("late", JOB_A)
    b.add_many(early, [0.0, 15.0], [1.0, 2.0])
    b.add_many(late, [30.0, 45.0], [3.0, 4.0])
    ep = b.build().endpoint().slice_time(30.0, 45.0)
    assert ep.timestamps.tolist() == [30.0, 45.0]
    assert ep.keys == [late]
    assert ep.scrape_interval_seconds() == 15.0


@pytest.mark.parametrize(
    ("sample", "family"),
    [
        pytest.param("vllm:num_preemptions_total", "vllm:num_preemptions_total", id="0.0.4-counter-named-total"),
        pytest.param("vllm:time_to_first_token_seconds_bucket", "vllm:time_to_first_token_seconds", id="bucket"),
        pytest.param("vllm:time_to_first_token_seconds_sum", "vllm:time_to_first_token_seconds", id="sum"),
        pytest.param("vllm:time_to_first_token_seconds_total", None, id="histogram-has-no-total"),
        pytest.param("unknown_metric", None, id="undeclared"),
    ],
)
def test_family_of_follows_prometheus_suffix_rules(sample: str, family: str | None) -> None:
    fams = {
        "vllm:num_preemptions_total": Family("vllm:num_preemptions_total", MetricType.COUNTER),
        "vllm:time_to_first_token_seconds": Family("vllm:time_to_first_token_seconds", MetricType.HISTOGRAM),
    }
    found = family_of(sample, fams)
    assert (found.name if found else None) == family


def test_openmetrics_counter_family_resolves_its_total_sample() -> None:
    fams = {"foo": Family("foo", MetricType.COUNTER)}
    found = family_of("foo_total", fams)
    assert found is not None and found.name == "foo"


def test_series_key_renders_escaped_labels() -> None:
    key = SeriesKey("m", normalize_labels({"a": 'x"y\\z\n'}))
    assert str(key) == 'm{a="x\\"y\\\\z\\n"}'
