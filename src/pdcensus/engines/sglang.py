"""SGLang's knobs, read at release 0.5.4 (sgl-project/sglang ``python/sglang/srt/server_args.py``,
``ServerArgs`` fields and ``add_cli_args``; ``python/sglang/srt/environ.py`` for its env).

SGLang runs an extend (prefill) batch WITHOUT decode rows unless ``--enable-mixed-chunk``:
decoders then wait the whole extend batch and get no token from it. The chunk size is the dial
for what they wait (``--chunked-prefill-size``; its default is set from the GPU's memory in
``ServerArgs``: 2048 under 35 GiB, 4096 under 60 GiB, larger above; ``-1`` disables chunking).
``server_args.py`` also says the activation memory is proportional to the chunk size, which is
what the chunk borrows from the rest of the device.

Env: these are command-line flags only (argparse in ``ServerArgs.add_cli_args``); SGLang reads
``SGLANG_*`` variables for internal tuning (``SGLANG_INIT_NEW_TOKEN_RATIO``,
``SGLANG_RETRACT_DECODE_STEPS``, ...) and ``SGLANG_ENABLE_METRICS_DEVICE_TIMER=1`` for the step
time the census's ledger reads, never for these knobs. SGLang's preemption is *retraction*
(``sglang:num_retracted_requests_total``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from pdcensus.engines.knob_types import ActsOn, CounterCheck, Dial, Knob
from pdcensus.engines.metrics import LedgerQuantity, LedgerSpec, LedgerTerm, Profile, Signal, one_term
from pdcensus.engines.record import BUDGET, KV_TOKENS, NO_OP, EngineCatalogue, EngineRecord, Gap, PromptCounting

PIN = "SGLang 0.5.4"
SRC = "sgl-project/sglang v0.5.4 python/sglang/srt/server_args.py"
VERSIONS = ">= 0.4 (same spelling at 0.5.4)"
_BUCKET_PAIR = ("bucket the decode rate (sglang:realtime_tokens_total{mode=\"decode\"}) / sglang:num_running_reqs by "
                "the prefill rate from the same scrape, before and after, with the SAME edges")
_RESTART = "restart with the previous argv (SGLang reads no env for it; drop the flag for the default)"


def _knob(flag: str, argument: str, default: str | None, role: str, dial: Dial, acts_on: tuple[ActsOn, ...],
          semantics: str, cost: str, preconditions: tuple[str, ...] = (), counter: str | None = None,
          check: CounterCheck = CounterCheck.NONE) -> Knob:
    return Knob(flag=flag, argument=argument, default=default, role=role, acts_on=acts_on, semantics=semantics,
                cost=cost, preconditions=preconditions, interactions=(), counter=counter, counter_check=check,
                bucket_pair=_BUCKET_PAIR, engine="sglang", env="", dial=dial, versions=VERSIONS, source=SRC,
                rollback=_RESTART, pid_lookup="$(pgrep -f 'sglang.launch_server' | head -1)")


KNOBS = (
    _knob("--chunked-prefill-size", "TOKENS", "by GPU memory: 2048 (< 35 GiB), 4096 (< 60 GiB), larger above",
          "the chunk decoders wait for (the decoder dial on SGLang)", Dial.CHUNK_BUDGET,
          (ActsOn.STEP_TIME_SHARING, ActsOn.EVICTION, ActsOn.PREFILL_SPEED),
          "the most tokens of one prompt in one extend batch; a long prompt is cut into chunks of this size",
          "a prompt needs more extend batches: its TTFT grows, prefill throughput falls",
          ("-1 disables chunking (a long prompt runs as one extend batch)",
           "bounded above by --max-prefill-tokens (the prefill batch's size)"),
          "no per-pass chunk size on /metrics: argv and the bucket pair decide"),
    _knob("--max-prefill-tokens", "TOKENS", "16384", "the prefill batch's size", Dial.CHUNK_BUDGET,
          (ActsOn.PREFILL_SPEED,), "the most tokens in one prefill batch (the real bound is the larger of this "
          "and the model's context length)", "fewer prompts prefilled together"),
    _knob("--enable-mixed-chunk", "", "off", "decode rows beside a chunk", Dial.DECODE_MIXING,
          (ActsOn.STEP_TIME_SHARING,), "decode rows ride in the chunk's batch, so a decoder gets one token per "
          "chunk instead of waiting the whole extend batch for none", "the chunk's batch is a little longer",
          ("chunked prefill on (--chunked-prefill-size not -1)",),
          "sglang:gpu_execution_seconds_total{category=\"mixed\"} leaves zero"),
    _knob("--schedule-policy", "lpm|random|fcfs|dfs-weight|lof|priority", "fcfs", "admission order",
          Dial.ADMISSION, (), "which waiting request is admitted next (lpm: longest prefix match first)",
          "lpm and dfs-weight favour cache hits over arrival order"),
    _knob("--max-running-requests", "N", "from the memory pool", "KV headroom (fewer requests)",
          Dial.KV_CAPACITY, (ActsOn.PREEMPTION_STALL,), "the most requests in the running batch",
          "fewer concurrent streams: arrivals queue (TTFT) while the batch is full",
          ("requests x mean context must fit --max-total-tokens (the pool)",),
          "sglang:num_running_reqs", CounterCheck.GAUGE_AT_MOST),
    _knob("--schedule-conservativeness", "FLOAT", "1.0", "retraction headroom", Dial.KV_CAPACITY,
          (ActsOn.PREEMPTION_STALL,), "a larger value reserves more of the pool for running requests' growth "
          "before admitting (the help text: use a larger value if requests are retracted frequently)",
          "fewer admissions while the pool is busy: TTFT", (),
          "sglang:num_retracted_requests_total must fall"),
    _knob("--mem-fraction-static", "FRACTION", "from GPU memory and the chunk size", "KV capacity",
          Dial.KV_CAPACITY, (ActsOn.PREEMPTION_STALL,), "the share of memory for weights and the KV pool",
          "less memory for activations: too high and a chunk runs out of memory", ()),
    _knob("--max-total-tokens", "TOKENS", "from --mem-fraction-static", "KV pool size (debugging)",
          Dial.KV_CAPACITY, (), "the token pool's size, overriding the fraction", "as --mem-fraction-static"),
    _knob("--max-queued-requests", "N", "unbounded", "admission limit", Dial.ADMISSION, (),
          "requests beyond it are refused (ignored with --disaggregation-mode)", "refused requests"),
    _knob("--disaggregation-mode", "null|prefill|decode", "null", "prefill/decode disaggregation",
          Dial.DISAGGREGATION, (ActsOn.STEP_TIME_SHARING,),
          "prefill-only and decode-only servers with KV transfer between them: decoders never share a batch "
          "with a prompt", "a second pool of servers, a transfer backend and a router"),
)


def complete(flag: str, value: str, deployed: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Mixed chunks need chunked prefill on."""
    if flag == "--enable-mixed-chunk" and deployed.get("--chunked-prefill-size") == "-1":
        return (("--chunked-prefill-size", "4096"),), ("--enable-mixed-chunk needs chunked prefill on",)
    return (), ()


CATALOGUE = EngineCatalogue(
    engine="sglang", name="SGLang", pin=PIN,
    sources=(SRC, "sgl-project/sglang v0.5.4 python/sglang/srt/environ.py",
             "sgl-project/sglang v0.5.4 python/sglang/srt/metrics/collector.py"),
    env_rule="no env for these flags (argparse only); SGLANG_* variables are internal tuning",
    knobs=KNOBS,
    gaps=(Gap(ActsOn.SELF_MADE_PREFILL, "SGLang has no linear-state checkpoint retention knob",
              "the radix cache reuses per token; keep multi-turn sessions on one server"),),
    primary={ActsOn.STEP_TIME_SHARING: "--chunked-prefill-size", ActsOn.EVICTION: "--chunked-prefill-size",
             ActsOn.PREEMPTION_STALL: "--max-running-requests"},
    serve=("python", "-m", "sglang.launch_server"), complete=complete,
)



def detect(names: Set[str]) -> tuple[Profile, str] | None:
    if not any(n.startswith("sglang:") for n in names):
        return None
    if "sglang:inter_token_latency_seconds_bucket" not in names:  # older trees: time_per_output_token
        itl = "sglang:time_per_output_token_seconds"
        return Profile(PROFILE.name, PROFILE.engine, PROFILE.description,
                       {**PROFILE.signals, Signal.ITL: itl}), "sglang: metrics present"
    return PROFILE, "sglang: metrics present"


# The simulator's settings in SGLang's spelling (pdcensus.sim.engine_flags applies them).
SIM_FLAGS = {"--chunked-prefill-size": BUDGET, "--max-running-requests": "--max-num-seqs",
             "--max-total-tokens": KV_TOKENS, "--context-length": "--max-model-len", "--page-size": "--block-size",
             "--enable-mixed-chunk": NO_OP}


# --- metrics: sgl-project/sglang python/sglang/srt/metrics/collector.py, behind --enable-metrics
PROFILE = Profile(
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
)

# SGLang forward modes (ForwardMode.name.lower(); older trees prefix "forward_"). A decode
# step under speculative decoding runs draft, verify and draft-extend forwards, all decode.
SGLANG_DECODE_MODES = frozenset(
    {"decode", "target_verify", "draft_extend", "eagle_draft", "eagle_draft_extend",
     "frozen_kv_draft"}
)
SGLANG_CHUNK_MODES = frozenset({"extend", "mixed", "split_prefill"})
_SGLANG_SECONDS = ("sglang:forward_execution_seconds_total", "sglang:gpu_execution_seconds_total")
_NO_STEP_TIME = "no step time on /metrics"

LEDGER_SPEC = LedgerSpec(
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
        LedgerQuantity.DECODE_STEPS: one_term("sglang:cuda_graph_passes_total"),
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
)

# realtime_tokens_total{mode} moves as tokens are computed; prompt_tokens_total only when a request finishes
RATE_TERMS = {
    Signal.PROMPT_TOKENS: LedgerTerm(("sglang:realtime_tokens_total",), "mode", frozenset({"prefill_compute"})),
    Signal.GENERATION_TOKENS: LedgerTerm(("sglang:realtime_tokens_total",), "mode", frozenset({"decode"})),
}

# sglang:prompt_tokens_total moves when a request finishes; realtime_tokens_total{mode} (a rate term
# of pdcensus.series.profiles) moves as tokens are computed, and wins where it is scraped.
RECORD = EngineRecord(
    name="sglang", profiles=(PROFILE,), ledger_specs=(LEDGER_SPEC,), rate_terms={PROFILE.name: RATE_TERMS},
    detect=detect, detect_order=1,
    catalogue=CATALOGUE, prompt_counting=PromptCounting.AT_REQUEST_END,
    argv_needle="sglang", argv_order=0, sim_flags=SIM_FLAGS, sim_program=("python", "-m", "sglang.launch_server"),
    sim_model_flag="--model-path", sim_profile="sglang",
)
