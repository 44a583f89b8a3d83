"""Metric profiles: the census's logical signals mapped to each engine's sample names.

A profile says, for one engine and build, which sample name carries each logical signal
(decode rate, prefill rate, running, the step-ledger counters, ...). Counter signals name
the sample (``..._total``); histogram signals name the family base (``..._bucket``,
``_count`` and ``_sum`` are derived). Names come from METRICS.md (radiance) and from the
real dumps in ``shared/realdata/metrics`` (vLLM V0/V1, SGLang).

``detect_profile`` reads the metric set of a recording or a scrape and says which profile
it is, with the names that decided it.

Engine names were checked against each engine's own source (repository + path):

- vLLM: ``vllm-project/vllm`` ``vllm/v1/metrics/loggers.py`` (V1) and
  ``vllm/engine/metrics.py`` (V0): ``vllm:iteration_tokens_total`` is a histogram of tokens
  per engine step; there is no step time on ``/metrics``. Where its ``_count`` and the
  inter-token histogram are both scraped (0.32: every step that emitted output is observed),
  ``pdcensus.series.vllm_steps`` counts steps per scrape and times them by the scrape's wall
  time: the census's counted step ledger, on the ``vllm-v1`` profile's own names.
- SGLang: ``sgl-project/sglang`` ``python/sglang/srt/metrics/collector.py``:
  ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:num_retracted_requests_total``
  (its preemption), ``sglang:realtime_tokens_total{mode=prefill_compute|prefill_cache|decode}``,
  ``sglang:gpu_execution_seconds_total{category=<forward mode>}`` (renamed
  ``sglang:forward_execution_seconds_total`` in later trees; needs
  ``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1``), ``sglang:cuda_graph_passes_total{mode}`` (one per
  decode batch), TTFT / inter-token / e2e histograms; all behind ``--enable-metrics``.
- TGI: ``huggingface/text-generation-inference`` ``backends/v3/src/backend.rs``:
  ``tgi_batch_forward_duration{method=prefill|decode}``, ``tgi_batch_decode_duration``,
  ``tgi_batch_inference_duration`` per call, ``tgi_batch_current_size``; ``tgi_queue_size`` and
  the request histograms come from the router. TGI has no TTFT histogram and no preemption.
- llama.cpp server: ``ggml-org/llama.cpp`` tag b11434, ``tools/server/server-task.cpp``
  (``server_task_result_metrics::to_metrics``, behind ``--metrics``) and
  ``tools/server/server-context.cpp`` (where each moves): ``n_decode_total`` (one per
  ``llama_decode()`` call of the server loop, as it happens), ``n_busy_slots_per_decode`` (a
  gauge: cumulative busy slots / calls), ``prompt_tokens_total`` and ``prompt_seconds_total``
  (flushed per call that has an output: per chunk call while decoders run; the seconds are the
  chunk calls' wall time, server-wide), ``tokens_predicted_total`` and
  ``tokens_predicted_seconds_total`` (added when a request *ends*: never a decode rate),
  ``requests_processing`` (non-idle slots), ``requests_deferred``. The census reads them through
  ``pdcensus.series.llamacpp`` (decode rows, spread prompt work, decoders per call, ledger).

:data:`LEDGER_SPECS` says, per engine, how the step ledger's four counters are derived from
that engine's names (``pdcensus.series.engine_ledger`` does the arithmetic). :data:`RATE_TERMS`
names, per engine, a labelled counter that carries the prefill / decode token rate more
promptly than the profile's own counter (SGLang's ``prompt_tokens_total`` and
``generation_tokens_total`` move only when a request finishes; ``realtime_tokens_total{mode}``
moves as tokens are computed): the census prefers it where the recording has it.
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
            "SGLang (sglang: prefix): decode-only step mean and chunk share of step time from "
            "gpu_execution_seconds_total; no chunk-step mean",
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
        Profile(
            "tgi",
            "tgi",
            "Text Generation Inference (tgi_ prefix): per-method step histograms give the ledger; "
            "no TTFT histogram, no preemption",
            {
                Signal.RUNNING: "tgi_batch_current_size",
                Signal.WAITING: "tgi_queue_size",
                # Histogram sums used as counters: input length is observed at validation,
                # generated tokens when a request ends (so that rate lags decoding).
                Signal.PROMPT_TOKENS: "tgi_request_input_length_sum",
                Signal.GENERATION_TOKENS: "tgi_request_generated_tokens_sum",
                # Per-request mean time per output token, the closest TGI has to inter-token.
                Signal.ITL: "tgi_request_mean_time_per_token_duration",
                Signal.E2E: "tgi_request_duration",
                Signal.PROCESS_START: "process_start_time_seconds",
            },
        ),
        Profile(
            "llamacpp",
            "llamacpp",
            "llama.cpp server (llamacpp: prefix, --metrics): decode rows and chunk time derived per "
            "interval from n_decode_total, n_busy_slots_per_decode and prompt_seconds_total",
            {
                Signal.RUNNING: "llamacpp:requests_processing",
                Signal.WAITING: "llamacpp:requests_deferred",
                Signal.PROMPT_TOKENS: "llamacpp:prompt_tokens_total",
                Signal.GENERATION_TOKENS: "llamacpp:tokens_predicted_total",
                Signal.STEPS: "llamacpp:n_decode_total",
                Signal.KV_CACHE_USAGE: "llamacpp:kv_cache_usage_ratio",
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
    if any(n.startswith("tgi_") for n in names):
        hit = sorted(n for n in names if n.startswith("tgi_batch_forward_duration"))
        why = f"{hit[0]} present" if hit else "tgi_ metrics present"
        return Detection(PROFILES["tgi"], why)
    if any(n.startswith("llamacpp:") for n in names):
        return Detection(PROFILES["llamacpp"], "llamacpp: metrics present")
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


# --- Step-ledger specs: how each engine's names give the ledger's four counters ----------


class LedgerQuantity(str, Enum):
    """The step ledger's cumulative inputs (the runbook's "Step ledger first")."""

    STEPS = "steps"
    DECODE_STEPS = "decode_steps"
    STEP_SECONDS = "step_seconds"
    DECODE_STEP_SECONDS = "decode_step_seconds"
    HELD_STEPS = "held_steps"


@dataclass(frozen=True)
class LedgerTerm:
    """One ledger quantity as a sum of series.

    ``sample_names`` are candidates across builds (the first one with a sample wins);
    ``label``/``values`` select the series whose label is one of ``values`` (after removing
    ``strip_prefix`` from the label value); ``values`` None sums every series of the name.
    """

    sample_names: tuple[str, ...]
    label: str = ""
    values: frozenset[str] | None = None
    strip_prefix: str = ""


@dataclass(frozen=True)
class LedgerSpec:
    """Per engine build: the term for each ledger quantity, or why there is none."""

    profile: str
    source: str
    terms: dict[LedgerQuantity, LedgerTerm] = field(default_factory=dict)
    missing: dict[LedgerQuantity, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """True when all four of steps, decode steps, step seconds, decode seconds exist."""
        need = (LedgerQuantity.STEPS, LedgerQuantity.DECODE_STEPS,
                LedgerQuantity.STEP_SECONDS, LedgerQuantity.DECODE_STEP_SECONDS)
        return all(q in self.terms for q in need)


# SGLang forward modes (ForwardMode.name.lower(); older trees prefix "forward_"). A decode
# step under speculative decoding runs draft, verify and draft-extend forwards, all decode.
SGLANG_DECODE_MODES = frozenset(
    {"decode", "target_verify", "draft_extend", "eagle_draft", "eagle_draft_extend",
     "frozen_kv_draft"}
)
SGLANG_CHUNK_MODES = frozenset({"extend", "mixed", "split_prefill"})
_SGLANG_SECONDS = ("sglang:forward_execution_seconds_total", "sglang:gpu_execution_seconds_total")
_NO_STEP_TIME = "no step time on /metrics"


def _one(name: str) -> LedgerTerm:
    return LedgerTerm((name,))


def _radiance_terms(profile: Profile) -> dict[LedgerQuantity, LedgerTerm]:
    pairs = {
        LedgerQuantity.STEPS: Signal.STEPS,
        LedgerQuantity.DECODE_STEPS: Signal.STEPS_DECODE,
        LedgerQuantity.STEP_SECONDS: Signal.STEP_SECONDS,
        LedgerQuantity.DECODE_STEP_SECONDS: Signal.STEP_SECONDS_DECODE,
        LedgerQuantity.HELD_STEPS: Signal.STEPS_HELD,
    }
    return {q: _one(profile.signals[s]) for q, s in pairs.items() if s in profile.signals}


_TGI_FORWARD = "tgi_batch_forward_duration"
_BOTH = frozenset({"prefill", "decode"})
_DECODE = frozenset({"decode"})
_VLLM_MISSING = {
    LedgerQuantity.DECODE_STEPS: "vLLM counts steps (iteration_tokens_total) but not decode-only "
    "steps; record Forward Pass Metrics (--forward-pass-metrics-port) for the exact ledger",
    LedgerQuantity.STEP_SECONDS: f"vLLM exports {_NO_STEP_TIME}; record Forward Pass Metrics",
    LedgerQuantity.DECODE_STEP_SECONDS: f"vLLM exports {_NO_STEP_TIME}; record Forward Pass Metrics",
}

LEDGER_SPECS: dict[str, LedgerSpec] = {
    spec.profile: spec
    for spec in (
        LedgerSpec("radiance-1.8", "the radiance 1.8.x step counters, docs/runbook.md", _radiance_terms(PROFILES["radiance-1.8"])),
        LedgerSpec(
            "radiance-1.0.13",
            "the radiance 1.0.13 step counters, docs/runbook.md",
            _radiance_terms(PROFILES["radiance-1.0.13"]),
            missing={
                q: "radiance 1.0.13 has no decode-only step counters"
                for q in (LedgerQuantity.DECODE_STEPS, LedgerQuantity.DECODE_STEP_SECONDS)
            },
        ),
        LedgerSpec(
            "sglang",
            "sgl-project/sglang python/sglang/srt/metrics/collector.py "
            "(gpu_execution_seconds_total, cuda_graph_passes_total)",
            {
                LedgerQuantity.STEP_SECONDS: LedgerTerm(
                    _SGLANG_SECONDS, "category", SGLANG_DECODE_MODES | SGLANG_CHUNK_MODES, "forward_"
                ),
                LedgerQuantity.DECODE_STEP_SECONDS: LedgerTerm(
                    _SGLANG_SECONDS, "category", SGLANG_DECODE_MODES, "forward_"
                ),
                LedgerQuantity.DECODE_STEPS: _one("sglang:cuda_graph_passes_total"),
            },
            missing={
                LedgerQuantity.STEPS: "SGLang counts decode batches (cuda_graph_passes_total) but "
                "no extend/mixed passes, so the mean chunk step is unavailable; the chunk steps' "
                "share of step time is available",
            },
            notes=(
                "gpu_execution_seconds_total needs SGLANG_ENABLE_METRICS_DEVICE_TIMER=1 and "
                "--enable-metrics",
                "by default SGLang runs extend batches without decode rows (--enable-mixed-chunk "
                "puts decode rows beside the chunk): decoders wait the whole extend batch",
            ),
        ),
        LedgerSpec(
            "tgi",
            "huggingface/text-generation-inference backends/v3/src/backend.rs (prefill/decode)",
            {
                LedgerQuantity.STEPS: LedgerTerm((_TGI_FORWARD + "_count",), "method", _BOTH),
                LedgerQuantity.DECODE_STEPS: LedgerTerm((_TGI_FORWARD + "_count",), "method", _DECODE),
                LedgerQuantity.STEP_SECONDS: LedgerTerm((_TGI_FORWARD + "_sum",), "method", _BOTH),
                LedgerQuantity.DECODE_STEP_SECONDS: LedgerTerm(
                    (_TGI_FORWARD + "_sum",), "method", _DECODE
                ),
            },
            notes=(
                "step seconds are the model forward (tgi_batch_forward_duration); the whole call "
                "with token decoding and filtering is tgi_batch_inference_duration",
                "a prefill call is a chunk step; without prefill chunking it carries no decode "
                "rows and running decoders wait for it",
            ),
        ),
        LedgerSpec(
            "llamacpp",
            "ggml-org/llama.cpp b11434 tools/server/server-context.cpp (metrics_post_decode)",
            {LedgerQuantity.STEPS: _one("llamacpp:n_decode_total")},
            missing={
                LedgerQuantity.DECODE_STEPS: "llama.cpp counts llama_decode() calls but not the "
                "calls that carried a prompt; the census derives them per interval from "
                "n_busy_slots_per_decode (pdcensus.series.llamacpp)",
                LedgerQuantity.STEP_SECONDS: "llama.cpp exports no step time; the census reads "
                "prompt_seconds_total (the chunk calls' wall time) and the interval's busy wall time "
                "(pdcensus.series.llamacpp)",
                LedgerQuantity.DECODE_STEP_SECONDS: "llama.cpp has no decode-only step time; the census "
                "takes the busy interval less the chunk calls' time (pdcensus.series.llamacpp)",
            },
            notes=(
                "tokens_predicted_total and tokens_predicted_seconds_total move only when a request "
                "ends: never a decode rate",
            ),
        ),
        *(
            LedgerSpec(
                name,
                "vllm-project/vllm vllm/v1/metrics/loggers.py, vllm/engine/metrics.py",
                {LedgerQuantity.STEPS: _one("vllm:iteration_tokens_total_count")},
                missing=dict(_VLLM_MISSING),
            )
            for name in ("vllm-v1", "vllm-v0")
        ),
    )
}


def ledger_spec(profile: Profile) -> LedgerSpec:
    """The ledger spec for a profile (a profile with no spec gets an empty one saying so)."""
    spec = LEDGER_SPECS.get(profile.name)
    if spec is not None:
        return spec
    missing = {q: f"no step-ledger spec for profile {profile.name!r}" for q in LedgerQuantity}
    return LedgerSpec(profile.name, "", missing=missing)


def census_sample_names() -> set[str]:
    """Every sample name some profile reads, plus ``up``: all a census ever pulls from a server.

    Beside the profiles' own names: the ledger terms (:data:`LEDGER_SPECS`), the rate terms
    (:data:`RATE_TERMS`) and the vLLM names the prefill reconstruction reads
    (:data:`VLLM_SIDE_NAMES`); a pull without them gives a census other than the file's.
    """
    names = {"up"} | set(EXTRA_SAMPLE_NAMES) | set(VLLM_SIDE_NAMES)
    for profile in PROFILES.values():
        names |= profile.sample_names()
    for terms in [spec.terms for spec in LEDGER_SPECS.values()] + list(RATE_TERMS.values()):
        for term in terms.values():
            names |= set(term.sample_names)
    return names


# Names a profile's derivation reads beside its signals (llama.cpp: pdcensus.series.llamacpp).
EXTRA_SAMPLE_NAMES = ("llamacpp:n_busy_slots_per_decode", "llamacpp:prompt_seconds_total")


# --- Prompter token counters: read instead of the profile's own where present -----------

# vLLM names read beside the profile (pdcensus.census.prefill_progress): the prompt counter split
# by source (>= 0.19: local_compute, local_cache_hit, external_kv_transfer) and the prefix-cache
# lookups, counted when the scheduler tries to admit a waiting request (v1/core/kv_cache_manager.py).
VLLM_COMPUTED_PROMPT = "vllm:prompt_tokens_by_source_total"
VLLM_PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"
VLLM_PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"
VLLM_FINISHED = "vllm:request_success_total"
# Every vLLM name the census reads beside the profile (pdcensus.census.signals, ``_vllm_progress``)
VLLM_SIDE_NAMES = (VLLM_COMPUTED_PROMPT, VLLM_PREFIX_CACHE_QUERIES, VLLM_PREFIX_CACHE_HITS, VLLM_FINISHED,
                   "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_hits_total",
                   "vllm:request_prefill_time_seconds_sum", "vllm:request_prefill_kv_computed_tokens_sum",
                   "vllm:cache_config_info")
# Families only vLLM's V1 engine exports (V0 had prefix-cache hit-rate gauges, no counters)
VLLM_V1_MARKERS = frozenset({VLLM_PREFIX_CACHE_QUERIES, "vllm:gpu_prefix_cache_queries_total",
                             "vllm:kv_cache_usage_perc"})

RATE_TERMS: dict[str, dict[Signal, LedgerTerm]] = {
    "sglang": {
        Signal.PROMPT_TOKENS: LedgerTerm(("sglang:realtime_tokens_total",), "mode", frozenset({"prefill_compute"})),
        Signal.GENERATION_TOKENS: LedgerTerm(("sglang:realtime_tokens_total",), "mode", frozenset({"decode"})),
    },
}
