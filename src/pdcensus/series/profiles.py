"""Metric profiles: the census's logical signals mapped to each engine's sample names.

A profile says, for one engine and build, which sample name carries each logical signal
(decode rate, prefill rate, running, the step-ledger counters, ...). Counter signals name
the sample (``..._total``); histogram signals name the family base (``..._bucket``,
``_count`` and ``_sum`` are derived). Names come from METRICS.md (radiance) and from the
real dumps in ``shared/realdata/metrics`` (vLLM V0/V1, SGLang).

``detect_profile`` reads the metric set of a recording or a scrape and says which profile
it is, with the names that decided it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.errors import UsageError


class Signal(str, Enum):
    """A logical quantity the census reads, whatever an engine calls it."""

    DECODE_TPS = "decode_tokens_per_second"  # gauge
    PREFILL_TPS = "prefill_tokens_per_second"  # gauge
    GENERATION_TOKENS = "generation_tokens"  # counter: decode rate where no gauge
    PROMPT_TOKENS = "prompt_tokens"  # counter: prefill rate where no gauge
    RUNNING = "requests_running"  # gauge
    WAITING = "requests_waiting"  # gauge
    PREEMPTIONS = "preemptions"  # counter
    PREEMPTED_DEPTH = "requests_preempted_depth"  # gauge (instant depth, NOT a counter)
    STEPS = "engine_steps"  # counter
    STEPS_DECODE = "engine_steps_decode"  # counter
    STEP_SECONDS = "engine_step_seconds"  # counter
    STEP_SECONDS_DECODE = "engine_step_seconds_decode"  # counter
    STEPS_HELD = "engine_steps_held"  # counter
    PREFIX_HIT_CUT_TOKENS = "prefix_hit_cut_tokens"  # counter
    TTFT = "time_to_first_token"  # histogram
    ITL = "inter_token_latency"  # histogram
    E2E = "e2e_request_latency"  # histogram
    ITERATION_TOKENS = "iteration_tokens"  # histogram (vLLM: tokens per step)
    PREFILL_STEPS_DURATION = "prefill_steps_duration"  # histogram, often unscraped
    PREFILL_STEP_TOKENS = "prefill_step_tokens"  # histogram, often unscraped
    TOKEN_QUEUE_WAIT = "token_queue_wait"  # histogram, often unscraped
    KV_CACHE_USAGE = "kv_cache_usage"  # gauge
    PROCESS_START = "process_start_time"  # gauge


COUNTER_SIGNALS = frozenset(
    {
        Signal.GENERATION_TOKENS,
        Signal.PROMPT_TOKENS,
        Signal.PREEMPTIONS,
        Signal.STEPS,
        Signal.STEPS_DECODE,
        Signal.STEP_SECONDS,
        Signal.STEP_SECONDS_DECODE,
        Signal.STEPS_HELD,
        Signal.PREFIX_HIT_CUT_TOKENS,
    }
)
HISTOGRAM_SIGNALS = frozenset(
    {
        Signal.TTFT,
        Signal.ITL,
        Signal.E2E,
        Signal.ITERATION_TOKENS,
        Signal.PREFILL_STEPS_DURATION,
        Signal.PREFILL_STEP_TOKENS,
        Signal.TOKEN_QUEUE_WAIT,
    }
)
LEDGER_SIGNALS = (Signal.STEPS, Signal.STEPS_DECODE, Signal.STEP_SECONDS, Signal.STEP_SECONDS_DECODE)


@dataclass(frozen=True)
class Profile:
    """One engine build's metric set: logical signal -> sample name (or histogram base)."""

    name: str
    engine: str
    description: str
    signals: dict[Signal, str] = field(default_factory=dict)

    def name_of(self, signal: Signal) -> str | None:
        return self.signals.get(signal)

    def has(self, signal: Signal) -> bool:
        return signal in self.signals

    @property
    def has_ledger(self) -> bool:
        return all(s in self.signals for s in LEDGER_SIGNALS)

    def sample_names(self) -> set[str]:
        """Every sample name the profile expects (histograms expanded)."""
        out: set[str] = set()
        for sig, name in self.signals.items():
            if sig in HISTOGRAM_SIGNALS:
                out.update({name + "_bucket", name + "_count", name + "_sum"})
            else:
                out.add(name)
        return out


_VLLM_COMMON = {
    Signal.RUNNING: "vllm:num_requests_running",
    Signal.WAITING: "vllm:num_requests_waiting",
    Signal.PREEMPTIONS: "vllm:num_preemptions_total",
    Signal.PROMPT_TOKENS: "vllm:prompt_tokens_total",
    Signal.GENERATION_TOKENS: "vllm:generation_tokens_total",
    Signal.TTFT: "vllm:time_to_first_token_seconds",
    Signal.E2E: "vllm:e2e_request_latency_seconds",
    Signal.PROCESS_START: "process_start_time_seconds",
}

_RADIANCE_1_0 = {
    **_VLLM_COMMON,
    Signal.DECODE_TPS: "radiance:decode_tokens_per_second",
    Signal.PREFILL_TPS: "radiance:prefill_tokens_per_second",
    Signal.PREEMPTED_DEPTH: "radiance:num_requests_preempted",
    Signal.STEPS: "radiance:engine_steps_total",
    Signal.STEP_SECONDS: "radiance:engine_step_seconds_total",
    Signal.PREFILL_STEPS_DURATION: "radiance:prefill_steps_duration",
    Signal.PREFILL_STEP_TOKENS: "radiance:prefill_step_tokens",
    Signal.TOKEN_QUEUE_WAIT: "radiance:token_queue_wait",
    Signal.ITL: "vllm:time_per_output_token_seconds",
}

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "radiance-1.8",
            "radiance",
            "radiance 1.8.x: step ledger (decode/held counters), prefix-hit cuts",
            {
                **_RADIANCE_1_0,
                Signal.STEPS_DECODE: "radiance:engine_steps_decode_total",
                Signal.STEP_SECONDS_DECODE: "radiance:engine_step_seconds_decode_total",
                Signal.STEPS_HELD: "radiance:engine_steps_held_total",
                Signal.PREFIX_HIT_CUT_TOKENS: "radiance:prefix_hit_cut_tokens_total",
                Signal.ITL: "vllm:inter_token_latency_seconds",
            },
        ),
        Profile(
            "radiance-1.0.13",
            "radiance",
            "radiance 1.0.13: no decode/held step counters, so no step ledger",
            dict(_RADIANCE_1_0),
        ),
        Profile(
            "vllm-v1",
            "vllm",
            "vLLM V1 engine (kv_cache_usage_perc, inter_token_latency_seconds)",
            {
                **_VLLM_COMMON,
                Signal.ITL: "vllm:inter_token_latency_seconds",
                Signal.ITERATION_TOKENS: "vllm:iteration_tokens_total",
                Signal.KV_CACHE_USAGE: "vllm:kv_cache_usage_perc",
            },
        ),
        Profile(
            "vllm-v0",
            "vllm",
            "vLLM V0 engine (gpu_cache_usage_perc, time_per_output_token_seconds)",
            {
                **_VLLM_COMMON,
                Signal.ITL: "vllm:time_per_output_token_seconds",
                Signal.ITERATION_TOKENS: "vllm:iteration_tokens_total",
                Signal.KV_CACHE_USAGE: "vllm:gpu_cache_usage_perc",
            },
        ),
        Profile(
            "sglang",
            "sglang",
            "SGLang (sglang: prefix); no per-scrape step ledger in the classic metric set",
            {
                Signal.RUNNING: "sglang:num_running_reqs",
                Signal.WAITING: "sglang:num_queue_reqs",
                Signal.PROMPT_TOKENS: "sglang:prompt_tokens_total",
                Signal.GENERATION_TOKENS: "sglang:generation_tokens_total",
                Signal.PREEMPTIONS: "sglang:num_retracted_requests_total",
                Signal.TTFT: "sglang:time_to_first_token_seconds",
                Signal.ITL: "sglang:inter_token_latency_seconds",
                Signal.E2E: "sglang:e2e_request_latency_seconds",
                Signal.KV_CACHE_USAGE: "sglang:token_usage",
                Signal.PROCESS_START: "process_start_time_seconds",
            },
        ),
    )
}


@dataclass(frozen=True)
class Detection:
    """Which profile a metric set is, and the names that decided it."""

    profile: Profile
    reason: str


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}") from None


def detect_profile(sample_names: Iterable[str]) -> Detection | None:
    """The profile a set of sample names belongs to, or None if no engine metric is there."""
    names = set(sample_names)
    if "radiance:engine_steps_decode_total" in names or "radiance:engine_steps_held_total" in names:
        return Detection(PROFILES["radiance-1.8"], "radiance:engine_steps_decode_total present")
    if any(n.startswith("radiance:") for n in names):
        return Detection(
            PROFILES["radiance-1.0.13"],
            "radiance: metrics without radiance:engine_steps_decode_total",
        )
    if any(n.startswith("sglang:") for n in names):
        sglang = PROFILES["sglang"]
        if "sglang:inter_token_latency_seconds_bucket" not in names:
            itl = "sglang:time_per_output_token_seconds"
            sglang = Profile(sglang.name, sglang.engine, sglang.description,
                             {**sglang.signals, Signal.ITL: itl})
        return Detection(sglang, "sglang: metrics present")
    if any(n.startswith("vllm:") for n in names):
        v0_markers = {
            "vllm:gpu_cache_usage_perc",
            "vllm:num_requests_swapped",
            "vllm:time_per_output_token_seconds_bucket",
            "vllm:cpu_cache_usage_perc",
        }
        hit = sorted(v0_markers & names)
        if hit:
            return Detection(PROFILES["vllm-v0"], f"vLLM V0 names present: {', '.join(hit)}")
        return Detection(PROFILES["vllm-v1"], "vllm: metrics without V0-only names")
    return None
