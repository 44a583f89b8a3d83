"""write_openmetrics -> read_openmetrics gives back the same recording; promtool accepts the file."""

from __future__ import annotations

import io
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.textformat import TextFormat, read_openmetrics, read_text

T0 = 1_700_000_000.0
AWKWARD_VALUES = ['back\\slash', 'quote"d', "new\nline", "brace}", "com,ma", "hash # tag", "sp ace 1.0", "ünï"]


def key(name: str, instance: str, **labels: str) -> SeriesKey:
    return SeriesKey(name, normalize_labels({"job": "radiance", "instance": instance, **labels}))


def sample_recording() -> Recording:
    builder = RecordingBuilder("mem")
    builder.add_family(Family("radiance:engine_steps", MetricType.COUNTER, 'every "engine" step\\n'))
    builder.add_family(Family("radiance:decode_tokens_per_second", MetricType.GAUGE, "decode rate"))
    builder.add_family(Family("vllm:time_to_first_token_seconds", MetricType.HISTOGRAM, "TTFT", "seconds"))
    builder.add_family(Family("up", MetricType.GAUGE))
    for instance, scale in (("a:8000", 1.0), ("b:8000", 2.0)):
        for i in range(6):
            t = T0 + 15 * i
            builder.add(key("up", instance), t, 1.0)
            builder.add(key("radiance:engine_steps_total", instance, model_name="m"), t, scale * 100 * i)
            gauge = [0.5, math.nan, math.inf, -math.inf, -0.0, 1e-300][i]
            builder.add(key("radiance:decode_tokens_per_second", instance, model_name="m"), t, gauge)
            for le, frac in (("0.1", 0.25), ("1.0", 0.5), ("+Inf", 1.0)):
                builder.add(key("vllm:time_to_first_token_seconds_bucket", instance, le=le), t, frac * i)
            builder.add(key("vllm:time_to_first_token_seconds_count", instance), t, float(i))
            builder.add(key("vllm:time_to_first_token_seconds_sum", instance), t, 0.3 * i)
            if i % 2 == 0:  # a series absent from some scrapes
                for j, text in enumerate(AWKWARD_VALUES):
                    builder.add(key("radiance:num_requests_preempted", instance, odd=text), t, float(j))
    return builder.build()


def assert_same(a: Recording, b: Recording) -> None:
    assert [(e.job, e.instance) for e in a.endpoints] == [(e.job, e.instance) for e in b.endpoints]
    for ea, eb in zip(a.endpoints, b.endpoints):
        assert ea.keys == eb.keys
        np.testing.assert_array_equal(ea.timestamps, eb.timestamps)
        np.testing.assert_array_equal(ea.present, eb.present)
        np.testing.assert_array_equal(ea.values, eb.values)  # NaN == NaN here
        numbers = ~np.isnan(ea.values)  # -0.0 stays negative; a NaN's sign means nothing
        assert np.array_equal(np.signbit(ea.values[numbers]), np.signbit(eb.values[numbers]))
        for k in ea.keys:
            assert a.type_of(k.name) == b.type_of(k.name), k


def test_openmetrics_round_trip_keeps_keys_values_present_and_families() -> None:
    original = sample_recording()
    buffer = io.StringIO()
    write_openmetrics(original, buffer)
    back = read_openmetrics(io.BytesIO(buffer.getvalue().encode()))
    assert_same(original, back)
    ttft = back.families["vllm:time_to_first_token_seconds"]
    assert (ttft.type, ttft.help, ttft.unit) == (MetricType.HISTOGRAM, "TTFT", "seconds")
    assert back.families["radiance:engine_steps"].help == 'every "engine" step\\n'


def test_round_trip_through_a_file_reads_with_small_chunks_identically(tmp_path: Path) -> None:
    path = tmp_path / "rec.om"
    write_openmetrics(sample_recording(), path)
    whole = read_openmetrics(path)
    chunked = read_text(path, TextFormat.OPENMETRICS, chunk_bytes=97)
    assert_same(whole, chunked)
    assert_same(sample_recording(), chunked)


# NUL is refused on purpose: it marks a binary file, not a label value
label_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=12)
finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.tuples(label_text, finite_or_not, finite_or_not), min_size=1, max_size=6),
    steps=st.lists(st.integers(1, 10**6), min_size=1, max_size=5),
)
def test_any_label_value_and_float_survive_the_round_trip(
    values: list[tuple[str, float, float]], steps: list[int]
) -> None:
    builder = RecordingBuilder()
    builder.add_family(Family("g", MetricType.GAUGE))
    stamps = T0 + np.cumsum(steps) / 1000.0
    seen = set()
    for text, v1, v2 in values:
        if text in seen:
            continue
        seen.add(text)
        for t, v in zip(stamps.tolist(), [v1, v2] * len(steps)):
            builder.add(key("g", "x", odd=text), t, v)
    original = builder.build()
    buffer = io.StringIO()
    write_openmetrics(original, buffer)
    assert_same(original, read_openmetrics(io.BytesIO(buffer.getvalue().encode())))


@pytest.mark.integration
def test_promtool_backfills_the_file_the_writer_makes(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed")
    path = tmp_path / "rec.om"
    write_openmetrics(sample_recording(), path)
    read_openmetrics(path)  # and our reader accepts what promtool is about to read
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(tmp_path / "data")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert any((tmp_path / "data").iterdir())
