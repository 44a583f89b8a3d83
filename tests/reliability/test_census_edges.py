"""Deterministic regressions for the odd recordings the property tests found, one per failure seen.

Each recording is valid (every sample a number Prometheus would store) and odd in one
way; the census must give a report whose verdict is one of the six mechanisms, and no
warning (pytest turns warnings into errors; the CLI would print them beside its report).
"""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.model import Mechanism
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.series.model import Family, MetricType, RecordingBuilder, SeriesKey

from .recordings import T0, sharing_recording

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
