"""Deterministic regressions for the odd recordings the property tests found, one per failure seen.

Each recording is valid (every sample a number Prometheus would store) and odd in one
way; the census must give a report whose verdict is one of the six mechanisms, and no
warning (pytest turns warnings into errors; the CLI would print them beside its report).
Values at the float limits (1.7e308, +/-Inf, NaN, denormals) in gauges and counters are left
out at the census's entry and named in the report (``pdcensus.census.usable``); the last
test runs such a file through the real CLI (terminal, ``--json``, ``--html``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from pdcensus.census.model import CensusReport, Mechanism, SegmentStart, Trap
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey

from .recordings import T0, sharing_recording, write_recording

OPTIONS = CensusOptions(replicates=50)


def test_a_decode_seconds_counter_that_never_moves_gets_a_report_not_a_crash() -> None:
    # A build that exports engine_step_seconds_decode_total but never adds to it: every
    # decode-only step measures 0 s, so the undisturbed reference step is 0 s.
    recording = sharing_recording(240)
    ep = recording.endpoint()
    column = next(i for i, k in enumerate(ep.keys) if k.name == "radiance:engine_step_seconds_decode_total")
    ep.values[:, column] = 0.0
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in set(Mechanism)


def test_one_scrape_of_a_plain_vllm_endpoint_is_inconclusive_without_a_warning() -> None:
    builder = RecordingBuilder(source="one-scrape-vllm")
    labels = (("instance", "vllm:8000"), ("job", "vllm"), ("model_name", "m"))
    for family, kind, sample in (("vllm:prompt_tokens", MetricType.COUNTER, "vllm:prompt_tokens_total"),
                                 ("vllm:generation_tokens", MetricType.COUNTER, "vllm:generation_tokens_total"),
                                 ("vllm:num_preemptions", MetricType.COUNTER, "vllm:num_preemptions_total"),
                                 ("vllm:num_requests_running", MetricType.GAUGE, "vllm:num_requests_running")):
        builder.add_family(Family(family, kind))
        builder.add(SeriesKey(sample, labels), T0, 5.0)
    builder.add(SeriesKey("up", labels[:2]), T0, 1.0)
    report = census_recording(builder.build(), OPTIONS)[0]
    assert report.verdict.mechanism is Mechanism.INCONCLUSIVE


def test_a_preemption_burst_where_prefill_was_never_scraped_is_not_a_warning() -> None:
    # Prefill gauge NaN at every scrape (an exporter that writes NaN while idle), with a burst.
    recording = sharing_recording(120)
    ep = recording.endpoint()
    names = [k.name for k in ep.keys]
    ep.values[:, names.index("radiance:prefill_tokens_per_second")] = np.nan
    preemptions = names.index("vllm:num_preemptions_total")
    ep.values[60:, preemptions] += 12.0
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in set(Mechanism)
    assert report.preemption.available and report.preemption.total == 12.0


def test_an_emoji_code_in_a_label_value_is_printed_as_text() -> None:
    from pdcensus.report.terminal import render_text

    report = census_recording(sharing_recording(240, instance=":smile:"), OPTIONS)[0]
    text = render_text(report, width=160)
    assert ":smile:" in text
    assert "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in text


# --- Values at the float limits: left out at the census's entry and named, never a warning or a crash ---

SIX = set(Mechanism)
LEFT_OUT = "unusable-samples-left-out"


def _set(recording: Recording, name: str, rows: slice | list[int] | np.ndarray, value: float | np.ndarray) -> None:
    ep = recording.endpoint()
    column = [k.name for k in ep.keys].index(name)
    ep.values[rows, column] = value


def _add_to(recording: Recording, name: str, row: int, increase: float) -> None:
    """The counter ``name`` goes up by ``increase`` in the interval ending at ``row``."""
    ep = recording.endpoint()
    ep.values[row:, [k.name for k in ep.keys].index(name)] += increase


def _left_out(report: CensusReport) -> Trap:
    return {t.name: t for t in report.traps}[LEFT_OUT]


def _assert_left_out(report: CensusReport, name: str, samples: int) -> None:
    """The verdict is one of the six, and the trap and a bucket warning name the series and the count."""
    assert report.verdict.mechanism in SIX and set(report.verdict.mechanisms) <= SIX
    trap = _left_out(report)
    assert trap.fired and trap.value is not None and trap.value >= samples
    assert name in trap.text
    assert report.buckets is not None
    named = [w for w in report.buckets.warnings if name in w and w.startswith("left out")]
    assert named and f"left out {samples} of " in named[0], report.buckets.warnings


def test_a_prefill_gauge_stuck_at_1_7e308_is_left_out_and_named_in_the_warnings() -> None:
    # was an OverflowError in the background's idle ceiling (10 ** (log10(1.7e308) + spreads)):
    # the CLI printed "internal error" and exited 1
    recording = sharing_recording(239)  # an odd count: the median is one sample, so no sum overflows first
    _set(recording, "radiance:prefill_tokens_per_second", slice(None), 1.7e308)
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "radiance:prefill_tokens_per_second", 239)
    assert report.buckets is not None and np.isfinite(report.buckets.idle_threshold_tokens_per_second)


def test_a_decode_gauge_at_the_float_limit_is_left_out_and_the_effects_stay_finite() -> None:
    # was an overflow in the lag test's and the verdict's products of decoder-time weights
    recording = sharing_recording(240)
    _set(recording, "radiance:decode_tokens_per_second", slice(40, 46), 1.7e308)
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "radiance:decode_tokens_per_second", 6)
    assert report.verdict.mechanism is Mechanism.STEP_TIME_SHARING
    assert all(np.isfinite(p.effect) for p in report.lag.points[:1])


def test_prefill_at_the_float_limit_on_many_busy_scrapes_leaves_finite_bucket_edges() -> None:
    # was an overflow in the reduce of the busy-bucket quantiles
    recording = sharing_recording(240)
    ep = recording.endpoint()
    column = [k.name for k in ep.keys].index("radiance:prefill_tokens_per_second")
    busy = np.flatnonzero(ep.values[:, column] > 0)
    _set(recording, "radiance:prefill_tokens_per_second", busy[::2], 1.7e308)
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "radiance:prefill_tokens_per_second", int(busy[::2].size))
    assert report.buckets is not None and all(np.isfinite(e) for e in report.buckets.edges_tokens_per_second[:-1])


def test_plus_and_minus_inf_in_one_preemption_burst_are_left_out() -> None:
    # was an invalid-value warning in the burst's mean prefill (inf + -inf)
    recording = sharing_recording(240)
    _add_to(recording, "vllm:num_preemptions_total", 60, 4.0)
    _add_to(recording, "vllm:num_preemptions_total", 61, 5.0)
    _set(recording, "radiance:prefill_tokens_per_second", [60], np.inf)
    _set(recording, "radiance:prefill_tokens_per_second", [61], -np.inf)
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "radiance:prefill_tokens_per_second", 2)
    assert report.buckets is not None and any("2 not finite" in w for w in report.buckets.warnings)
    assert report.preemption.total == 9.0 and len(report.preemption.bursts) == 1


def test_a_counter_at_1_7e308_is_left_out_not_read_as_a_restart() -> None:
    # was an overflow in the counter's increases; the next sample, back at its true value, read as a reset
    recording = sharing_recording(240)
    _set(recording, "radiance:engine_steps_total", [100], 1.7e308)
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "radiance:engine_steps_total", 1)
    assert len(report.shape.segments) == 1
    assert report.ledger.available and np.isfinite(report.ledger.chunk_step_seconds)


def test_a_counter_stuck_at_plus_inf_is_left_out() -> None:
    # was an invalid-value warning in the counter's increase (inf - inf)
    recording = sharing_recording(240)
    _set(recording, "radiance:engine_step_seconds_total", [238, 239], np.inf)
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "radiance:engine_step_seconds_total", 2)
    assert report.ledger.available and np.isfinite(report.ledger.chunk_step_seconds)


def test_a_counter_at_minus_the_largest_float_is_left_out_and_a_counter_that_goes_down_is_still_a_reset() -> None:
    # was an overflow in the reset check (the previous value minus its tolerance)
    recording = sharing_recording(240)
    _set(recording, "vllm:generation_tokens_total", [50], -sys.float_info.max)
    _set(recording, "vllm:prompt_tokens_total", slice(150, None), 5.0)  # a true reset, within the bounds
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "vllm:generation_tokens_total", 1)
    assert [s.starts_because for s in report.shape.segments] == [SegmentStart.WINDOW_START, SegmentStart.COUNTER_RESET]


def test_one_counter_near_the_float_limit_in_two_label_sets_is_left_out_in_both() -> None:
    # was an overflow summing one logical counter's increases over its label sets
    recording = _two_models(sharing_recording(240))
    for model in ("m", "n"):
        ep = recording.endpoint()
        column = ep.keys.index(SeriesKey("vllm:prompt_tokens_total", (("instance", "engine:7770"), ("job", "radiance"),
                                                                      ("model_name", model))))
        ep.values[239, column] = 1e308
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, 'vllm:prompt_tokens_total{model_name="m"}', 1)
    _assert_left_out(report, 'vllm:prompt_tokens_total{model_name="n"}', 1)


def test_a_denormal_decode_baseline_beside_a_preemption_burst_is_read_as_zero() -> None:
    # was an overflow dividing the burst's decode by a denormal same-bucket baseline
    recording = sharing_recording(240)
    _set(recording, "radiance:decode_tokens_per_second", slice(None), 5e-324)
    _set(recording, "radiance:decode_tokens_per_second", [60], 900.0)
    _add_to(recording, "vllm:num_preemptions_total", 60, 4.0)
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in SIX
    assert not _left_out(report).fired  # nothing was left out: a denormal is a number, read as 0
    assert report.timeline is not None and set(report.timeline.decode_tokens_per_second) == {0.0, 900.0}


def test_a_denormal_prefill_rate_is_read_as_zero_not_as_a_burst_far_above_it() -> None:
    recording = sharing_recording(240)
    _set(recording, "radiance:prefill_tokens_per_second", slice(None), 5e-324)
    _set(recording, "radiance:prefill_tokens_per_second", [60], 8000.0)
    _add_to(recording, "vllm:num_preemptions_total", 60, 4.0)
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in SIX
    assert not _left_out(report).fired  # nothing was left out: a denormal is a number, read as 0
    assert report.timeline is not None and report.timeline.prefill_tokens_per_second[0] == 0.0
    assert not np.isfinite(report.preemption.prefill_spike)  # no baseline above 0: no spike ratio


def test_a_denormal_running_count_gives_no_per_stream_rate_and_no_warning() -> None:
    # was an overflow in decode / running
    recording = sharing_recording(240)
    _set(recording, "vllm:num_requests_running", slice(0, 240, 3), 5e-324)
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in SIX
    assert not _left_out(report).fired
    assert report.buckets is not None and report.buckets.rows[0].per_stream_samples < 240


def test_a_decode_rate_of_1e_minus_300_while_prefill_is_idle_is_read_as_zero() -> None:
    # was an overflow in the census's ratios over a tiny idle rate
    recording = sharing_recording(240)
    ep = recording.endpoint()
    idle = ep.values[:, [k.name for k in ep.keys].index("radiance:prefill_tokens_per_second")] == 0
    _set(recording, "radiance:decode_tokens_per_second", idle, 1e-300)
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in SIX
    assert not _left_out(report).fired
    assert report.timeline is not None
    assert {report.timeline.decode_tokens_per_second[i] for i in np.flatnonzero(idle)} == {0.0}


def test_a_generation_counter_jump_gives_a_rate_beyond_any_engine_and_it_is_left_out() -> None:
    # plain vLLM: decode is the counter's increase / interval; a jump to 1e15 tokens is finite but absurd
    recording = _plain_vllm(sharing_recording(240))
    ep = recording.endpoint()
    column = [k.name for k in ep.keys].index("vllm:generation_tokens_total")
    ep.values[100:, column] += 1e15
    report = census_recording(recording, OPTIONS)[0]
    _assert_left_out(report, "rate of vllm:generation_tokens_total", 1)
    assert "beyond +/-1e+09 tokens/s" in " ".join(report.buckets.warnings if report.buckets else ())


def test_a_process_start_time_at_1e300_is_left_out_not_read_as_a_new_process() -> None:
    key = SeriesKey("process_start_time_seconds", (("instance", "engine:7770"), ("job", "radiance")))
    starts = np.full(240, T0 - 3600.0)
    starts[[80, 81]] = 1e300
    recording = _copy(sharing_recording(240), lambda k: True,
                      lambda k: key if k.name == "up" else None)  # a twin of ``up``'s timestamps ...
    ep = recording.endpoint()
    ep.values[:, ep.keys.index(key)] = starts  # ... holding the start time
    report = census_recording(recording, OPTIONS)[0]
    assert len(report.shape.segments) == 1
    _assert_left_out(report, "process_start_time_seconds", 2)


def test_a_normal_recording_leaves_nothing_out() -> None:
    report = census_recording(sharing_recording(240), OPTIONS)[0]
    assert not _left_out(report).fired and _left_out(report).value == 0.0
    assert report.buckets is not None and not any(w.startswith("left out") for w in report.buckets.warnings)


def _copy(recording: Recording, keep: Callable[[SeriesKey], bool],
          extra: Callable[[SeriesKey], SeriesKey | None] = lambda key: None) -> Recording:
    builder = RecordingBuilder(source=recording.source)
    for family in recording.families.values():
        builder.add_family(family)
    for key, times, values in recording.endpoint().iter_series():
        if keep(key):
            builder.add_many(key, times, values)
        twin = extra(key)
        if twin is not None:
            builder.add_many(twin, times, values)
    return builder.build()


def _two_models(recording: Recording) -> Recording:
    """The same endpoint serving a second model ``n`` with the same prompt counter."""
    return _copy(recording, lambda key: True,
                 lambda key: key.with_labels(model_name="n") if key.name == "vllm:prompt_tokens_total" else None)


def _plain_vllm(recording: Recording) -> Recording:
    """Only the vllm: names and ``up``: decode and prefill come from the token counters."""
    return _copy(recording, lambda key: not key.name.startswith("radiance:"))


def _float_limit_recording() -> Recording:
    """Every odd value at once: gauges and counters at the float limits, both infinities, NaN, denormals."""
    recording = sharing_recording(240)
    _set(recording, "radiance:decode_tokens_per_second", [10, 11], 1e300)
    _set(recording, "radiance:prefill_tokens_per_second", [30], np.inf)
    _set(recording, "radiance:prefill_tokens_per_second", [31], -np.inf)
    _set(recording, "radiance:prefill_tokens_per_second", [32], np.nan)
    _set(recording, "radiance:prefill_tokens_per_second", [33], 5e-324)
    _set(recording, "vllm:num_requests_running", [40], 5e-324)
    _set(recording, "vllm:num_requests_running", [41], -1e300)
    _set(recording, "radiance:engine_steps_total", [100], 1.7e308)
    _set(recording, "radiance:engine_step_seconds_total", [120], np.inf)
    _set(recording, "vllm:generation_tokens_total", [130], -sys.float_info.max)
    return recording


def test_the_cli_reads_float_limit_values_from_a_file_and_reports_them_without_a_warning(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "float-limits.om", _float_limit_recording())
    assert "1.7e+308" in path.read_text() and "+Inf" in path.read_text()
    html = tmp_path / "report.html"
    runs = {
        "terminal": ["census", str(path), "--full"],
        "short": ["census", str(path)],
        "json": ["census", str(path), "--json"],
        "html": ["census", str(path), "--html", str(html)],
    }
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {kind: pool.submit(subprocess.run, [sys.executable, "-m", "pdcensus", *args], capture_output=True,
                                     text=True, timeout=120, env=env) for kind, args in runs.items()}
        done = {kind: f.result() for kind, f in futures.items()}
    for kind, result in done.items():
        assert result.returncode == 0, (kind, result.stderr)
        assert "Traceback" not in result.stderr and "Warning" not in result.stderr, (kind, result.stderr)
    assert "left out" in done["terminal"].stdout and LEFT_OUT in done["terminal"].stdout
    assert LEFT_OUT in done["short"].stdout  # the short view names the fired trap

    def no_constant(name: str) -> None:
        raise AssertionError(f"the JSON holds {name}: not strict JSON")

    answer = json.loads(done["json"].stdout, parse_constant=no_constant)
    assert answer["verdict"]["mechanism"] in {m.value for m in Mechanism}
    trap = {t["name"]: t for t in answer["traps"]}[LEFT_OUT]
    assert trap["fired"] and trap["value"] == 9.0  # 2 decode, 3 prefill, 1 running, 3 counters
    warnings = " ".join(answer["buckets"]["warnings"])
    for name in ("radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second",
                 "vllm:num_requests_running", "radiance:engine_steps_total", "radiance:engine_step_seconds_total",
                 "vllm:generation_tokens_total"):
        assert name in warnings, name
    page = html.read_text()
    assert LEFT_OUT in page and "left out 3 of 240 samples of radiance:prefill_tokens_per_second" in page


def test_an_idle_per_stream_rate_of_zero_leaves_the_lag_ratios_unjudged_never_infinite() -> None:
    # Decoders 'running' but at 0 tok/s whenever prefill is idle: busy / idle has no value.
    recording = sharing_recording(240)
    ep = recording.endpoint()
    names = [k.name for k in ep.keys]
    decode = names.index("radiance:decode_tokens_per_second")
    idle = ep.values[:, names.index("radiance:prefill_tokens_per_second")] <= 100.0
    assert idle.sum() >= 30
    ep.values[idle, decode] = 0.0
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in set(Mechanism)
    assert all(not np.isinf(p.effect) for p in report.lag.points)
    assert np.isnan(report.lag.points[0].effect)
    lag0 = [e for e in report.verdict.evidence if e.rule in ("lag0-effect", "lag0-collapse")]
    assert all(e.value is None or np.isfinite(e.value) for e in lag0)
    assert all(not e.satisfied for e in lag0)


def test_a_tgi_histogram_sum_at_infinity_is_left_out_and_named() -> None:
    # TGI's profile reads prompt tokens from tgi_request_input_length_sum: a histogram _sum read as a counter.
    from pdcensus.sim.run import simulate

    recording = simulate("step-time-sharing", duration_seconds=1800.0, seed=0, profile="tgi").recording
    ep = recording.endpoint()
    column = next(i for i, k in enumerate(ep.keys) if k.name == "tgi_request_input_length_sum")
    ep.values[40:43, column] = np.inf
    report = census_recording(recording, OPTIONS)[0]
    assert report.verdict.mechanism in set(Mechanism)
    trap = next(t for t in report.traps if t.name == "unusable-samples-left-out")
    assert trap.fired and trap.value == 3 and "tgi_request_input_length_sum" in trap.text
    assert any("tgi_request_input_length_sum" in w for w in report.buckets.warnings)
