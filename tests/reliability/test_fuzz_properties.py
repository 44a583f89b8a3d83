"""Property-based tests: no input crashes the reader, and no odd-but-valid recording crashes the census.

* arbitrary bytes, and arbitrary lines built from the exposition's own pieces (names,
  label sets with quotes, backslashes and newlines, odd numbers, metadata, ``# EOF`` in the
  wrong place), read as OpenMetrics, as Prometheus text and through ``load_source``: the
  reader returns a Recording or raises ``DataError`` (``RecordingParseError`` is one),
  nothing else; whatever it returns, the census either reports or raises a ``CensusError``;
* odd recordings built directly (one scrape to eighty, jittered and missed scrapes, counter
  resets, gauges and some counter samples at any float: NaN, +Inf, -Inf, denormals, values at
  the float limit; no ledger, nobody running, a plain-vLLM metric set): the census returns one
  report per endpoint whose verdict is one of the six mechanisms, with no numpy warning, and
  the JSON, terminal and HTML views of it render (the JSON without NaN, as the CLI writes it).

``max_examples`` is kept modest so that the file runs in seconds; hypothesis's database
keeps any failure it finds for the next run.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from pdcensus.census.model import Mechanism, reports_to_dict
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.errors import CensusError, DataError, RecordingParseError
from pdcensus.report.html import render_html
from pdcensus.report.markdown import render_markdown
from pdcensus.report.terminal import render
from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey
from pdcensus.sources.load import load_source
from pdcensus.sources.textformat import read_openmetrics, read_prometheus_text

T0 = 1_793_491_200.0
SIX = {m.value for m in Mechanism}
FAST = CensusOptions(replicates=20)
QUICK = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAMES = ["radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second", "vllm:num_requests_running",
         "radiance:engine_steps_total", "vllm:num_preemptions_total", "up", "a", "x_bucket", "9bad", "é"]
VALUES = ["1", "0", "-0", "NaN", "nan", "+Inf", "-Inf", "Inf", "1e308", "1e309", "-1e-320", "0x1p3", "1_000",
          "", "abc", "1.5e", " 2"]
STAMPS = ["", " 1793491200", " 1793491200.5", " 1793491200000", " -1", " 1e20", " nan", " 17934912OO", " 1 2"]
META = ["# TYPE {n} counter", "# TYPE {n} gauge", "# TYPE {n} histogram", "# TYPE {n} bogus", "# HELP {n} a\\nb",
        "# UNIT {n} seconds", "# EOF", "#", "# TYPE", "# random comment"]
label_text = st.lists(st.sampled_from(list('ab"\\\n{}=, é\x00<>') + ["\\n", '\\"']), max_size=8).map("".join)


@st.composite
def exposition_line(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    if draw(st.integers(0, 4)) == 0:
        return draw(st.sampled_from(META)).format(n=name)
    labels = draw(st.lists(st.tuples(st.sampled_from(["job", "instance", "le", "model_name", "__name__", "0x"]),
                                     label_text), max_size=3))
    inner = ",".join(f'{k}="{v}"' for k, v in labels)
    series = f"{name}{{{inner}}}" if labels or draw(st.booleans()) else name
    return f"{series} {draw(st.sampled_from(VALUES))}{draw(st.sampled_from(STAMPS))}"


exposition = st.builds(lambda lines, nl: "\n".join(lines) + ("\n" if nl else ""),
                       st.lists(exposition_line(), max_size=25), st.booleans())


def _census_does_not_crash(recording: Recording) -> None:
    try:
        reports = census_recording(recording, FAST)
    except CensusError:
        return
    for report in reports:
        assert report.verdict.mechanism.value in SIX


def _read_every_way(data: bytes) -> None:
    """Read ``data`` as both formats and through the sniffer; only our data errors may escape."""
    for read in (lambda: read_openmetrics(io.BytesIO(data), name="fuzz.om"),
                 lambda: read_prometheus_text(io.BytesIO(data), scrape_time=T0, name="fuzz.prom")):
        try:
            recording = read()
        except RecordingParseError as exc:
            assert exc.line >= 1 and exc.path.startswith("fuzz"), str(exc)
            continue
        except DataError:
            continue
        _census_does_not_crash(recording)
    fd, name = tempfile.mkstemp(suffix=".om")
    try:
        os.write(fd, data)
        os.close(fd)
        try:
            load_source(Path(name))
        except DataError as exc:
            assert name in str(exc)
    finally:
        os.unlink(name)


@QUICK
@given(st.binary(max_size=3000))
def test_arbitrary_bytes_are_a_recording_or_a_data_error(data: bytes) -> None:
    _read_every_way(data)


@QUICK
@given(exposition)
def test_arbitrary_exposition_lines_are_a_recording_or_a_data_error(text: str) -> None:
    _read_every_way(text.encode("utf-8"))


# Odd but possible values, gauge or counter: any float (NaN, +Inf and -Inf an exporter dividing by zero
# writes, negatives, denormals, values at the float limit) and the corners drawn more often. The census
# leaves out what is not a usable sample and says so; it must never warn, crash or answer outside the six.
FLOAT_CORNERS = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 5e-324, 1.7e308]
odd_value = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(FLOAT_CORNERS))


@st.composite
def odd_recording(draw: st.DrawFn) -> Recording:
    n = draw(st.integers(1, 80))
    interval = draw(st.sampled_from([1.0, 5.0, 15.0, 30.0, 120.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    times = T0 + np.arange(n) * interval + rng.uniform(0, interval * draw(st.sampled_from([0.0, 0.1, 0.45])), n)
    good = rng.random(n) >= draw(st.sampled_from([0.0, 0.1, 0.5]))
    radiance = draw(st.booleans())
    builder = RecordingBuilder(source="odd")
    base = {"job": "radiance", "instance": "odd:1"}
    labelled = {**base, "model_name": "m"}

    def add(name: str, values: np.ndarray, kind: MetricType, labels: dict[str, str] = labelled) -> None:
        family = name.removesuffix("_total") if kind is MetricType.COUNTER else name
        builder.add_family(Family(family, kind))
        builder.add_many(SeriesKey(name, tuple(sorted(labels.items()))), times[good], values[good])

    good[0] = True  # at least one good scrape holds the engine's samples
    add("up", good.astype(float), MetricType.GAUGE, base)
    shape = draw(st.sampled_from(["steady", "bursty", "odd", "zero"]))
    for name in ("decode_tokens_per_second", "prefill_tokens_per_second"):
        if shape == "odd":
            values = np.array([draw(odd_value) for _ in range(n)])
        elif shape == "zero":
            values = np.zeros(n)
        else:
            values = rng.gamma(2.0, 1000.0, n) * (rng.random(n) < (0.3 if shape == "bursty" else 1.0))
        if radiance:
            add("radiance:" + name, values, MetricType.GAUGE)
    running = rng.integers(0, 3 if shape == "zero" else 40, n).astype(float)
    if shape == "odd" and draw(st.booleans()):  # a running gauge with odd samples too (a denormal count, -Inf)
        for i in draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=max(1, n // 4))):
            running[i] = draw(odd_value)
    add("vllm:num_requests_running", running, MetricType.GAUGE)
    counters = ["vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total"]
    if radiance and draw(st.booleans()):
        counters += ["radiance:engine_steps_total", "radiance:engine_steps_decode_total",
                     "radiance:engine_step_seconds_total", "radiance:engine_step_seconds_decode_total",
                     "radiance:engine_steps_held_total"]
    reset_at = rng.random(n) < draw(st.sampled_from([0.0, 0.02, 0.2]))
    for name in counters:
        steps = rng.exponential(100.0, n) * (rng.random(n) < 0.8)
        total, values = 0.0, np.empty(n)
        for i in range(n):
            total = steps[i] if reset_at[i] else total + steps[i]
            values[i] = total
        if draw(st.integers(0, 3)) == 0:  # a counter with a few odd samples (1e308, +Inf, -Inf, NaN, ...)
            for i in draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=max(1, n // 4))):
                values[i] = draw(odd_value)
        add(name, values, MetricType.COUNTER)
    return builder.build()


# PDCENSUS_FUZZ_EXAMPLES=500 runs the odd-recording property longer than the suite does.
@settings(max_examples=int(os.environ.get("PDCENSUS_FUZZ_EXAMPLES", "50")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(odd_recording())
def test_an_odd_recording_gets_one_of_the_six_verdicts_and_every_view_renders(recording: Recording) -> None:
    reports = census_recording(recording, FAST)
    assert len(reports) == 1
    assert reports[0].verdict.mechanism.value in SIX
    assert all(m.value in SIX for m in reports[0].verdict.mechanisms)
    # every series here but ``up`` is one the census reads: a sample that is no number is left out and said so
    ep = recording.endpoint()
    read = np.array([k.name != "up" for k in ep.keys])
    unusable = ep.present[:, read] & ~np.isfinite(ep.values[:, read])
    left_out = {t.name: t for t in reports[0].traps}["unusable-samples-left-out"]
    assert left_out.fired or not unusable.any()
    if left_out.fired:
        assert left_out.value is not None and left_out.value >= unusable.sum()
    json.dumps(reports_to_dict(reports), allow_nan=False)
    render(reports[0], Console(file=io.StringIO(), width=120))
    assert "odd:1" in render_html(reports)
    assert "odd:1" in render_markdown(reports).text
