"""Real /metrics dumps detect to their engine's profile; TGI and llama.cpp names detect too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pdcensus.series.profiles import (
    LEDGER_SPECS,
    PROFILES,
    Signal,
    detect_profile,
    ledger_spec,
)
from shared_data import REAL_METRICS

REALDATA = REAL_METRICS
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)")


def sample_names(path: Path) -> set[str]:
    """Sample names of an exposition dump, or of a 'family type' list (histograms expanded)."""
    names: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if path.suffix == ".txt" and len(parts) == 2:
            family, kind = parts
            suffixes = ("_bucket", "_count", "_sum") if kind == "histogram" else ("",)
            names.update(family + s for s in suffixes)
            continue
        match = _SAMPLE.match(line)
        if match:
            names.add(match.group(1))
    return names


@pytest.mark.parametrize(
    ("dump", "profile"),
    [
        pytest.param("sglang-0.3.x_llama-3.1-8b_sglang-docs.prom", "sglang", id="sglang-0.3"),
        pytest.param("vllm-0.4.3_opt-125m_datadog-fixture.prom", "vllm-v0", id="vllm-0.4.3"),
        pytest.param("vllm-0.7-v0_qwen2.5-coder-1.5b_aibrix-docs_PARTIAL.prom", "vllm-v0", id="vllm-0.7"),
        pytest.param("vllm-0.26.0-cpu_metric-families_inference-perf.txt", "vllm-v1", id="vllm-0.26"),
    ],
)
def test_real_dumps_detect_to_their_engine_profile(dump: str, profile: str) -> None:
    names = sample_names(REALDATA / dump)
    assert names, f"no samples read from {dump}"
    detection = detect_profile(names)
    assert detection is not None and detection.profile.name == profile


def test_the_old_sglang_dump_reads_its_itl_from_time_per_output_token() -> None:
    names = sample_names(REALDATA / "sglang-0.3.x_llama-3.1-8b_sglang-docs.prom")
    detection = detect_profile(names)
    assert detection is not None
    assert detection.profile.name_of(Signal.ITL) == "sglang:time_per_output_token_seconds"
    # every signal the profile maps that the old build exports is really in the dump
    for signal in (Signal.RUNNING, Signal.WAITING, Signal.PROMPT_TOKENS, Signal.GENERATION_TOKENS):
        assert detection.profile.name_of(signal) in names


def test_vllm_026_exports_the_step_count_the_vllm_ledger_spec_reads() -> None:
    names = sample_names(REALDATA / "vllm-0.26.0-cpu_metric-families_inference-perf.txt")
    steps = LEDGER_SPECS["vllm-v1"].terms
    assert all(any(n in names for n in term.sample_names) for term in steps.values())


@pytest.mark.parametrize(
    ("names", "profile"),
    [
        pytest.param({"tgi_batch_forward_duration_count", "tgi_queue_size"}, "tgi", id="tgi"),
        pytest.param({"llamacpp:n_decode_total", "llamacpp:requests_processing"}, "llamacpp", id="llamacpp"),
        pytest.param({"sglang:gpu_execution_seconds_total", "sglang:num_running_reqs"}, "sglang", id="sglang-new"),
    ],
)
def test_engine_prefixes_detect_their_profile(names: set[str], profile: str) -> None:
    detection = detect_profile(names)
    assert detection is not None and detection.profile.name == profile


def test_every_profile_has_a_ledger_spec_that_names_its_source() -> None:
    for name, profile in PROFILES.items():
        spec = ledger_spec(profile)
        assert spec.profile == name
        assert spec.source, f"{name} ledger spec cites no source"
        # what the spec cannot give, it explains
        for quantity, why in spec.missing.items():
            assert quantity not in spec.terms and why


def test_only_radiance_18_and_tgi_have_a_complete_ledger() -> None:
    complete = sorted(name for name, spec in LEDGER_SPECS.items() if spec.complete)
    assert complete == ["radiance-1.8", "tgi"]
