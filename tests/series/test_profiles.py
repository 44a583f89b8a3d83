"""Profile detection from a metric set."""

from __future__ import annotations

import pytest

from pdcensus.errors import UsageError
from pdcensus.series.profiles import PROFILES, Signal, detect_profile, get_profile


def test_radiance_18_is_told_apart_from_1013_by_the_decode_step_counter() -> None:
    new = detect_profile({"radiance:engine_steps_total", "radiance:engine_steps_decode_total"})
    old = detect_profile({"radiance:engine_steps_total", "vllm:num_requests_running"})
    assert new is not None and new.profile.name == "radiance-1.8" and new.profile.has_ledger
    assert old is not None and old.profile.name == "radiance-1.0.13" and not old.profile.has_ledger


def test_vllm_v0_and_v1_are_told_apart_by_renamed_metrics() -> None:
    v0 = detect_profile({"vllm:gpu_cache_usage_perc", "vllm:num_requests_running"})
    v1 = detect_profile({"vllm:kv_cache_usage_perc", "vllm:num_requests_running"})
    assert v0 is not None and v0.profile.name == "vllm-v0"
    assert v1 is not None and v1.profile.name == "vllm-v1"
    assert v0.profile.name_of(Signal.ITL) == "vllm:time_per_output_token_seconds"
    assert v1.profile.name_of(Signal.ITL) == "vllm:inter_token_latency_seconds"


def test_no_engine_metric_detects_nothing() -> None:
    assert detect_profile({"up", "process_start_time_seconds"}) is None


def test_latency_lives_under_vllm_even_on_radiance() -> None:
    prof = PROFILES["radiance-1.8"]
    assert prof.name_of(Signal.TTFT) == "vllm:time_to_first_token_seconds"
    assert prof.name_of(Signal.PREEMPTIONS) == "vllm:num_preemptions_total"
    assert prof.name_of(Signal.PREEMPTED_DEPTH) == "radiance:num_requests_preempted"
    assert "vllm:time_to_first_token_seconds_bucket" in prof.sample_names()


def test_unknown_profile_error_lists_the_choices() -> None:
    with pytest.raises(UsageError, match="radiance-1.8"):
        get_profile("radiance-2")
