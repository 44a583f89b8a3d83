"""The step ledger derived from each engine's own names equals the means the data was built with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdcensus.errors import UsageError
from pdcensus.series.engine_ledger import (
    counter_increase,
    derive_ledger,
    ledger_inputs,
    ledger_samples,
)
from pdcensus.series.model import Endpoint, RecordingBuilder, SeriesKey
from pdcensus.series.profiles import LedgerQuantity, get_profile

SCRAPE_SECONDS = 15.0
BASE = {"job": "llm", "instance": "10.0.0.1:8000", "model_name": "m"}


def build(series: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]]) -> Endpoint:
    """One endpoint from cumulative values per (name, extra labels), one value per scrape."""
    builder = RecordingBuilder("synthetic")
    for (name, extra), values in series.items():
        key = SeriesKey(name, tuple(sorted({**BASE, **dict(extra)}.items())))
        times = [1_700_000_000.0 + i * SCRAPE_SECONDS for i in range(len(values))]
        kept = [(t, v) for t, v in zip(times, values) if not math.isnan(v)]
        builder.add_many(key, [t for t, _ in kept], [v for _, v in kept])
    return builder.build().endpoint()


def cumulative(per_interval: float, n: int, start: float = 0.0) -> list[float]:
    return [start + per_interval * i for i in range(n)]


# A window of 20 scrapes: per 15 s interval 600 decode-only steps of 15 ms and 3 chunk
# steps of 0.8 s -> decode-only mean 15 ms, chunk mean 0.8 s, chunk share of time 2.4/11.4.
N = 20
DECODE_STEPS, DECODE_MEAN = 600, 0.015
CHUNK_STEPS, CHUNK_MEAN = 3, 0.8


@pytest.mark.parametrize(
    ("seconds_name", "prefix"),
    [
        pytest.param("sglang:gpu_execution_seconds_total", "", id="gpu_execution"),
        pytest.param("sglang:forward_execution_seconds_total", "", id="forward_execution"),
        pytest.param("sglang:gpu_execution_seconds_total", "forward_", id="forward_-prefixed"),
    ],
)
def test_sglang_decode_step_mean_and_chunk_share_come_from_forward_mode_seconds(
    seconds_name: str, prefix: str
) -> None:
    ep = build(
        {
            (seconds_name, (("category", prefix + "decode"),)): cumulative(DECODE_STEPS * DECODE_MEAN, N),
            (seconds_name, (("category", prefix + "extend"),)): cumulative(CHUNK_STEPS * CHUNK_MEAN, N),
            (seconds_name, (("category", prefix + "idle"),)): cumulative(0.5, N),
            ("sglang:cuda_graph_passes_total", (("mode", "decode_cuda_graph"),)): cumulative(DECODE_STEPS - 100, N),
            ("sglang:cuda_graph_passes_total", (("mode", "decode_none"),)): cumulative(100, N),
            ("sglang:num_running_reqs", ()): [8.0] * N,
        }
    )
    derivation = derive_ledger(ep, get_profile("sglang"))
    inputs = derivation.inputs
    assert inputs is not None and not inputs.complete
    means = inputs.means()
    assert means.decode_step_mean_seconds == pytest.approx(DECODE_MEAN)
    chunk_seconds = CHUNK_STEPS * CHUNK_MEAN
    assert means.chunk_share_of_step_seconds == pytest.approx(
        chunk_seconds / (chunk_seconds + DECODE_STEPS * DECODE_MEAN)
    )
    assert math.isnan(means.chunk_step_mean_seconds)  # SGLang counts no extend passes
    assert "steps" in inputs.unavailable and "extend" in inputs.unavailable["steps"]
    assert any("idle" in note for note in inputs.notes)  # idle time was left out, and said so
    assert "partial step ledger" in derivation.reason


def test_tgi_gives_the_full_ledger_from_per_method_forward_histograms() -> None:
    base = "tgi_batch_forward_duration"
    ep = build(
        {
            (base + "_count", (("method", "decode"),)): cumulative(DECODE_STEPS, N),
            (base + "_sum", (("method", "decode"),)): cumulative(DECODE_STEPS * DECODE_MEAN, N),
            (base + "_count", (("method", "prefill"),)): cumulative(CHUNK_STEPS, N),
            (base + "_sum", (("method", "prefill"),)): cumulative(CHUNK_STEPS * CHUNK_MEAN, N),
            (base + "_bucket", (("method", "decode"), ("le", "+Inf"))): cumulative(DECODE_STEPS, N),
            ("tgi_queue_size", ()): [2.0] * N,
        }
    )
    inputs = ledger_inputs(ep, get_profile("tgi"))
    assert inputs is not None and inputs.complete
    means = inputs.means()
    assert means.decode_step_mean_seconds == pytest.approx(DECODE_MEAN)
    assert means.chunk_step_mean_seconds == pytest.approx(CHUNK_MEAN)
    assert means.chunk_share_of_steps == pytest.approx(CHUNK_STEPS / (CHUNK_STEPS + DECODE_STEPS))
    assert means.steps == pytest.approx((CHUNK_STEPS + DECODE_STEPS) * (N - 1))


def test_a_counter_reset_inside_the_window_does_not_bend_the_means() -> None:
    base = "tgi_batch_forward_duration"
    half = N // 2

    def restarted(per_interval: float) -> list[float]:
        return cumulative(per_interval, half, start=1000.0) + cumulative(per_interval, N - half, start=per_interval)

    ep = build(
        {
            (base + "_count", (("method", "decode"),)): restarted(DECODE_STEPS),
            (base + "_sum", (("method", "decode"),)): restarted(DECODE_STEPS * DECODE_MEAN),
            (base + "_count", (("method", "prefill"),)): restarted(CHUNK_STEPS),
            (base + "_sum", (("method", "prefill"),)): restarted(CHUNK_STEPS * CHUNK_MEAN),
        }
    )
    inputs = ledger_inputs(ep, get_profile("tgi"))
    assert inputs is not None
    means = inputs.means()
    assert means.decode_step_mean_seconds == pytest.approx(DECODE_MEAN)
    assert means.chunk_step_mean_seconds == pytest.approx(CHUNK_MEAN)


def test_radiance_ledger_is_read_through_the_same_call() -> None:
    held = 40
    ep = build(
        {
            ("radiance:engine_steps_total", ()): cumulative(DECODE_STEPS + CHUNK_STEPS, N),
            ("radiance:engine_steps_decode_total", ()): cumulative(DECODE_STEPS, N),
            ("radiance:engine_step_seconds_total", ()): cumulative(DECODE_STEPS * DECODE_MEAN + CHUNK_STEPS * CHUNK_MEAN, N),
            ("radiance:engine_step_seconds_decode_total", ()): cumulative(DECODE_STEPS * DECODE_MEAN, N),
            ("radiance:engine_steps_held_total", ()): cumulative(held, N),
        }
    )
    inputs = ledger_inputs(ep, get_profile("radiance-1.8"))
    assert inputs is not None and inputs.complete
    means = inputs.means()
    assert means.chunk_step_mean_seconds == pytest.approx(CHUNK_MEAN)
    assert means.held_steps == pytest.approx(held * (N - 1))


@pytest.mark.parametrize(
    ("profile", "steps_name", "points_to"),
    [
        pytest.param("vllm-v1", "vllm:iteration_tokens_total_count", "Forward Pass Metrics", id="vllm"),
        pytest.param("llamacpp", "llamacpp:n_decode_total", "prompt_seconds_total", id="llamacpp"),
    ],
)
def test_engines_without_step_time_give_steps_and_say_why_the_rest_is_missing(
    profile: str, steps_name: str, points_to: str
) -> None:
    ep = build({(steps_name, ()): cumulative(DECODE_STEPS, N)})
    derivation = derive_ledger(ep, get_profile(profile))
    assert derivation.inputs is not None and not derivation.inputs.complete
    assert derivation.inputs.means().steps == pytest.approx(DECODE_STEPS * (N - 1))
    assert np.isnan(derivation.inputs.step_seconds).all()
    assert points_to in derivation.reason


def test_an_endpoint_without_the_engines_ledger_names_gives_no_inputs_and_names_them() -> None:
    ep = build({("sglang:num_running_reqs", ()): [3.0] * N})
    derivation = derive_ledger(ep, get_profile("sglang"))
    assert derivation.inputs is None
    assert "sglang:gpu_execution_seconds_total" in derivation.reason
    assert "no step ledger" in derivation.reason


def test_a_failed_scrape_row_is_nan_not_zero() -> None:
    values = cumulative(DECODE_STEPS, 5)
    values[2] = float("nan")  # the scrape at row 2 carried nothing
    ep = build(
        {
            ("tgi_batch_forward_duration_count", (("method", "decode"),)): values,
            ("tgi_queue_size", ()): [1.0] * 5,
        }
    )
    inputs = ledger_inputs(ep, get_profile("tgi"))
    assert inputs is not None
    assert np.isnan(inputs.decode_steps[2]) and inputs.decode_steps[3] == values[3]


@pytest.mark.parametrize("profile", ["sglang", "tgi", "radiance-1.8"])
def test_ledger_samples_round_trip_through_derivation(profile: str) -> None:
    steps, dsteps, secs, dsecs = 1203.0, 1200.0, 20.4, 18.0
    builder_series = {}
    for scale, row in ((0.0, 0), (1.0, 1)):
        for name, labels, value in ledger_samples(profile, steps * scale, dsteps * scale, secs * scale, dsecs * scale):
            builder_series.setdefault((name, tuple(sorted(labels.items()))), [0.0, 0.0])[row] = value
    inputs = ledger_inputs(build(builder_series), get_profile(profile))
    assert inputs is not None
    means = inputs.means()
    assert means.decode_step_mean_seconds == pytest.approx(dsecs / dsteps)
    assert means.chunk_share_of_step_seconds == pytest.approx((secs - dsecs) / secs)


def test_ledger_samples_refuses_an_engine_without_a_ledger_and_lists_the_choices() -> None:
    with pytest.raises(UsageError, match="sglang, tgi"):
        ledger_samples("vllm-v1", 1, 1, 1, 1)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        pytest.param([], math.nan, id="empty"),
        pytest.param([5.0], math.nan, id="one-sample"),
        pytest.param([1.0, 3.0, 6.0], 5.0, id="monotone"),
        pytest.param([10.0, 12.0, 2.0, 5.0], 7.0, id="reset"),
    ],
)
def test_counter_increase_follows_the_reset_rule(values: list[float], expected: float) -> None:
    got = counter_increase(np.array(values))
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


def test_every_ledger_quantity_is_a_column() -> None:
    ep = build({("llamacpp:n_decode_total", ()): cumulative(1, 3)})
    inputs = ledger_inputs(ep, get_profile("llamacpp"))
    assert inputs is not None
    for quantity in LedgerQuantity:
        assert inputs.column(quantity).shape == (3,)


def test_ledger_increases_feed_the_census_signals_per_interval() -> None:
    from pdcensus.series.engine_ledger import ledger_increases
    from pdcensus.series.profiles import Signal

    base = "tgi_batch_forward_duration"
    ep = build(
        {
            (base + "_count", (("method", "decode"),)): cumulative(DECODE_STEPS, N),
            (base + "_sum", (("method", "decode"),)): cumulative(DECODE_STEPS * DECODE_MEAN, N),
            (base + "_count", (("method", "prefill"),)): cumulative(CHUNK_STEPS, N),
            (base + "_sum", (("method", "prefill"),)): cumulative(CHUNK_STEPS * CHUNK_MEAN, N),
        }
    )
    rows = np.arange(3, N)
    inc = ledger_increases(ep, rows, get_profile("tgi"))
    assert set(inc) == {Signal.STEPS, Signal.STEPS_DECODE, Signal.STEP_SECONDS, Signal.STEP_SECONDS_DECODE}
    assert np.isnan(inc[Signal.STEPS][0])  # the first row of the slice has no interval
    assert inc[Signal.STEPS][1:] == pytest.approx([DECODE_STEPS + CHUNK_STEPS] * (len(rows) - 1))
    chunk = (inc[Signal.STEP_SECONDS] - inc[Signal.STEP_SECONDS_DECODE]) / (inc[Signal.STEPS] - inc[Signal.STEPS_DECODE])
    assert chunk[1:] == pytest.approx([CHUNK_MEAN] * (len(rows) - 1))


def test_ledger_increases_leave_out_what_sglang_cannot_count() -> None:
    from pdcensus.series.engine_ledger import ledger_increases
    from pdcensus.series.profiles import Signal

    seconds = "sglang:gpu_execution_seconds_total"
    ep = build(
        {
            (seconds, (("category", "decode"),)): cumulative(DECODE_STEPS * DECODE_MEAN, N),
            ("sglang:cuda_graph_passes_total", (("mode", "decode_none"),)): cumulative(DECODE_STEPS, N),
        }
    )
    inc = ledger_increases(ep, np.arange(N), get_profile("sglang"))
    assert Signal.STEPS not in inc
    assert (inc[Signal.STEP_SECONDS_DECODE] / inc[Signal.STEPS_DECODE])[1:] == pytest.approx([DECODE_MEAN] * (N - 1))
