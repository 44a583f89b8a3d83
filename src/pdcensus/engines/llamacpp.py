"""llama.cpp's server: its knob catalogue (read at tag b11434) and its counting rules.

Knobs from ``common/arg.cpp`` (flag, short form, env; a flag on the command line wins) and
``tools/server/server-context.cpp`` (what they do); the prediction that uses them is
:mod:`pdcensus.advice.llamacpp`. The counting rules (:mod:`pdcensus.series.llamacpp` reads them):
``prompt_tokens_total`` is flushed per call that has an output and spread back by
``prompt_seconds_total``; argv carries short flags with a value (``-b 512``, ``-np 4``); a step is
split into micro-batches (``n_ubatch = min(-b, -ub)``), and the what-if's twin is read back in
llama.cpp's own words.
"""

from __future__ import annotations

from collections.abc import Set

from pdcensus.engines.knob_types import ActsOn, CounterCheck, Dial, Knob
from pdcensus.engines.metrics import LedgerQuantity, LedgerSpec, Profile, Signal, one_term
from pdcensus.engines.record import Advice, EngineCatalogue, EngineRecord, Gap, PromptCounting

# --- the catalogue (common/arg.cpp at b11434: flag, short form, env; a flag on the command line wins)
PIN = "llama.cpp b11434"
SRC = "ggml-org/llama.cpp b11434 common/arg.cpp"
VERSIONS = ">= b3600 (env names since the LLAMA_ARG_* scheme; read at b11434)"
_BUCKET_PAIR = ("bucket the decode rows per interval / decoders by the prompt tokens per interval (both derived from "
                "n_decode_total, n_busy_slots_per_decode and prompt_seconds_total), before and after, with the SAME "
                "edges; the busy buckets' per-stream rate must rise")
_ROLLBACK = "restart with the previous argv, or the env line where the serve script does not pass the flag"


def _knob(flag: str, alias: str, env: str, argument: str, default: str | None, role: str, dial: Dial,
          acts_on: tuple[ActsOn, ...], semantics: str, cost: str, preconditions: tuple[str, ...] = (),
          interactions: tuple[str, ...] = (), counter: str | None = None,
          check: CounterCheck = CounterCheck.NONE) -> Knob:
    return Knob(flag=flag, argument=argument, default=default, role=role, acts_on=acts_on, semantics=semantics,
                cost=cost, preconditions=preconditions, interactions=interactions, counter=counter,
                counter_check=check, bucket_pair=_BUCKET_PAIR, engine="llamacpp", env=env, aliases=(alias,),
                dial=dial, versions=VERSIONS, source=SRC, rollback=_ROLLBACK,
                process_name="llama-server")


KNOBS = (
    _knob("--batch-size", "-b", "LLAMA_ARG_BATCH", "N", "2048", "the decoder dial (llama.cpp)", Dial.CHUNK_BUDGET,
          (ActsOn.STEP_TIME_SHARING,),
          "the most tokens one llama_decode call of the server loop carries: one per generating slot, then prompt "
          "tokens up to N; a generating slot waits for the whole call",
          "a prompt needs more calls, each also carrying the decode rows: its TTFT grows by about one decode-only "
          "step per extra call",
          ("continuous batching on (-cb, the default), so prompts share calls with decoders",
           "n_ubatch is min(-b, -ub): a -b below -ub lowers the micro-batch too"),
          ("-ub/--ubatch-size splits the call but does not shorten the decoder's wait",),
          "llamacpp:prompt_seconds_total / chunk calls (the mean chunk step)", CounterCheck.CHUNK_STEP_MOVES),
    _knob("--ubatch-size", "-ub", "LLAMA_ARG_UBATCH", "N", "512", "prompt speed (llama.cpp), not decoder protection",
          Dial.CHUNK_BUDGET, (ActsOn.PREFILL_SPEED,),
          "the micro-batch llama_decode splits a call into; sampling waits for the whole call",
          "on a CPU a smaller micro-batch processes prompts more slowly, so each call, and the decoders' wait "
          "beside it, gets longer", ("at most -b",), ("-b/--batch-size is what a decoder waits for",),
          None, CounterCheck.CHUNK_STEP_MOVES),
    _knob("--parallel", "-np", "LLAMA_ARG_N_PARALLEL", "N", "-1", "slots (llama.cpp): admission, not sharing",
          Dial.ADMISSION, (ActsOn.PREEMPTION_STALL,),
          "the server's slots; a request without a free slot is deferred (requests_deferred)",
          "fewer concurrent streams; prompts queue instead of running beside decoders",
          ("-c/--ctx-size is shared by the slots",), (), "llamacpp:requests_processing", CounterCheck.GAUGE_AT_MOST),
    _knob("--ctx-size", "-c", "LLAMA_ARG_CTX_SIZE", "N", "0 (from the model)", "the KV cache (all slots)",
          Dial.KV_CAPACITY, (), "the context, shared by the slots: each slot gets -c / -np tokens",
          "memory; a slot that fills its share shifts or truncates its context"),
    _knob("--cont-batching", "-cb", "LLAMA_ARG_CONT_BATCHING", "", "on", "decode rows beside a prompt",
          Dial.DECODE_MIXING, (), "prompts and generating slots share llama_decode calls; -nocb runs them apart",
          "off: a prompt holds every generating slot for its whole prefill"),
)

CATALOGUE = EngineCatalogue(
    engine="llamacpp", name="llama.cpp", pin=PIN,
    sources=(SRC, "ggml-org/llama.cpp b11434 tools/server/server-context.cpp"),
    env_rule="each flag has a LLAMA_ARG_* env variable (common/arg.cpp set_env); the command line wins over it",
    knobs=KNOBS,
    gaps=(Gap(ActsOn.EVICTION, "llama.cpp has no expert arena or slab to evict from",
              "a lagged tail here is the host (page cache, thermal): read the box, not a knob"),
          Gap(ActsOn.PREEMPTION_STALL, "llama.cpp does not preempt: a slot keeps its context share",
              "fewer slots (-np) or a larger -c; more replicas when requests are deferred")),
    primary={ActsOn.STEP_TIME_SHARING: "--batch-size"},
    serve=("llama-server",),
)


# --- metrics: tools/server/server-task.cpp (to_metrics, behind --metrics), read by pdcensus.series.llamacpp
PROFILE = Profile(
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
)

LEDGER_SPEC = LedgerSpec(
    "llamacpp",
    "ggml-org/llama.cpp b11434 tools/server/server-context.cpp (metrics_post_decode)",
    {LedgerQuantity.STEPS: one_term("llamacpp:n_decode_total")},
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
)

# names the derivation reads beside the profile's signals (pdcensus.series.llamacpp)
EXTRA_SAMPLE_NAMES = ("llamacpp:n_busy_slots_per_decode", "llamacpp:prompt_seconds_total")


def detect(names: Set[str]) -> tuple[Profile, str] | None:
    return (PROFILE, "llamacpp: metrics present") if any(n.startswith("llamacpp:") for n in names) else None


RECORD = EngineRecord(
    name="llamacpp", profiles=(PROFILE,), ledger_specs=(LEDGER_SPEC,), extra_sample_names=EXTRA_SAMPLE_NAMES,
    detect=detect, detect_order=3,
    catalogue=CATALOGUE, prompt_counting=PromptCounting.PER_CALL_AT_END,
    advice=Advice.BATCH_SIZE, short_flags=True, argv_needle="llama-server", argv_order=3,
    twin_spellings={"-np": "max-num-seqs", "--parallel": "max-num-seqs", "-b": "max-num-batched-tokens",
                    "--batch-size": "max-num-batched-tokens", "-ub": "ubatch-tokens", "--ubatch-size": "ubatch-tokens"},
    micro_batches=True, twin_read_as_own=True,
)
