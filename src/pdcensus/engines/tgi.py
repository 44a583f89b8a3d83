"""TGI's knobs (Text Generation Inference), read at tag v3.3.7 of huggingface/text-generation-inference.

Files read: ``launcher/src/main.rs`` (the ``Args`` struct: every flag is ``#[clap(long, env)]``,
so each has an env variable of its field name upper-cased, e.g. ``MAX_BATCH_PREFILL_TOKENS``; the
``max_batch_prefill_tokens`` default is computed from the model and VRAM, 4096 when nothing else
decides); ``backends/v3/src/main.rs`` (``max_batch_prefill_tokens`` must be <=
``max_batch_total_tokens``, and >= ``max_input_tokens`` unless prefill chunking is on);
``backends/v3/src/queue.rs`` (a prompt over the prefill budget is cut to the budget when chunking
is supported); ``server/text_generation_server/models/globals.py`` (``PREFILL_CHUNKING``, on by
default).

The launcher passes the router its flags as argv, so the process to read is
``text-generation-router``. TGI exports no TTFT histogram and no preemption counter, so the
census cannot see a preemption stall on TGI; its step ledger comes from
``tgi_batch_forward_duration{method}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from pdcensus.engines.knob_types import ActsOn, CounterCheck, Dial, Knob
from pdcensus.engines.metrics import LedgerQuantity, LedgerSpec, LedgerTerm, Profile, Signal
from pdcensus.engines.record import BUDGET, KV_TOKENS, NO_OP, EngineCatalogue, EngineRecord, Gap, PromptCounting

PIN = "TGI 3.3.7"
SRC = "huggingface/text-generation-inference v3.3.7"
VERSIONS = ">= 2.0 (same spelling at 3.3.7)"
_BUCKET_PAIR = ("bucket the decode rows per interval (tgi_batch_forward_duration_count{method=\"decode\"} x "
                "tgi_batch_current_size) by the prompt rate, before and after, with the SAME edges")
_ROLLBACK = "the env line with the previous value (or empty: the launcher's default); the flag wins over the env"


def _knob(flag: str, argument: str, default: str | None, role: str, dial: Dial, acts_on: tuple[ActsOn, ...],
          semantics: str, cost: str, preconditions: tuple[str, ...] = (), counter: str | None = None,
          check: CounterCheck = CounterCheck.NONE, source: str = "launcher/src/main.rs") -> Knob:
    env = flag.lstrip("-").upper().replace("-", "_")
    return Knob(flag=flag, argument=argument, default=default, role=role, acts_on=acts_on, semantics=semantics,
                cost=cost, preconditions=preconditions, interactions=(), counter=counter, counter_check=check,
                bucket_pair=_BUCKET_PAIR, engine="tgi", env=env, dial=dial, versions=VERSIONS,
                source=f"{SRC} {source}", rollback=_ROLLBACK, process_name="text-generation-router")


KNOBS = (
    _knob("--max-batch-prefill-tokens", "TOKENS", "computed from the model and VRAM (4096 when nothing decides)",
          "the prefill budget: the decoder dial on TGI", Dial.CHUNK_BUDGET,
          (ActsOn.STEP_TIME_SHARING, ActsOn.EVICTION, ActsOn.PREFILL_SPEED),
          "the most tokens in one prefill call; with prefill chunking a longer prompt is cut to it, and the running "
          "batch waits each prefill call", "a long prompt needs more prefill calls: its TTFT grows",
          ("<= --max-batch-total-tokens (the router refuses more)",
           ">= --max-input-tokens unless prefill chunking is on (PREFILL_CHUNKING=1, the default)"),
          "tgi_batch_forward_duration{method=\"prefill\"}: the mean prefill call must shorten",
          CounterCheck.CHUNK_STEP_MOVES, "backends/v3/src/main.rs"),
    _knob("--max-waiting-tokens", "N", "20", "decode steps before waiting requests are forced in",
          Dial.ADMISSION, (ActsOn.STEP_TIME_SHARING,),
          "how many tokens the running batch generates before waiting requests are prefilled into it; a prefill "
          "pauses the running batch", "a larger value makes waiting requests wait longer (TTFT)"),
    _knob("--waiting-served-ratio", "RATIO", "0.3", "when waiting requests interrupt the batch", Dial.ADMISSION,
          (), "waiting / running ratio at which the running batch is paused for a prefill",
          "a larger value makes arrivals wait; a smaller one interrupts decoders more often"),
    _knob("--max-batch-total-tokens", "TOKENS", "inferred from free memory", "KV capacity", Dial.KV_CAPACITY,
          (ActsOn.PREEMPTION_STALL,), "the tokens of all requests in a batch (the KV pool)",
          "set too high and a batch runs out of memory", ("fits the memory left after the weights",)),
    _knob("--max-concurrent-requests", "N", "128", "admission limit", Dial.ADMISSION, (),
          "requests beyond it are refused rather than queued (backpressure)", "refused requests (HTTP 429)"),
    _knob("--max-batch-size", "N", None, "requests per batch", Dial.KV_CAPACITY, (),
          "a hard cap on requests per batch, for hardware without unpadded inference", "fewer concurrent streams"),
    _knob("--cuda-memory-fraction", "FRACTION", "1.0", "device memory TGI may use", Dial.KV_CAPACITY, (),
          "limits the memory TGI sees", "a smaller KV pool"),
)


def complete(flag: str, value: str, deployed: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """A prefill budget below the longest input needs prefill chunking; it never exceeds the batch total."""
    if flag != "--max-batch-prefill-tokens" or not value.isdigit():
        return (), ()
    extra: list[tuple[str, str]] = []
    notes: list[str] = []
    total = deployed.get("--max-batch-total-tokens")
    if total and total.isdigit() and int(value) > int(total):
        extra.append(("--max-batch-total-tokens", value))
        notes.append("the router refuses a prefill budget above --max-batch-total-tokens")
    longest = deployed.get("--max-input-tokens") or deployed.get("--max-input-length")
    if not longest or not longest.isdigit() or int(value) < int(longest):
        extra.append(("PREFILL_CHUNKING", "1"))
        notes.append("PREFILL_CHUNKING=1 (server env): a budget below --max-input-tokens is refused without it")
    return tuple(extra), tuple(notes)


CATALOGUE = EngineCatalogue(
    engine="tgi", name="TGI", pin=PIN,
    sources=tuple(f"{SRC} {p}" for p in ("launcher/src/main.rs", "backends/v3/src/main.rs", "backends/v3/src/queue.rs",
                                         "server/text_generation_server/models/globals.py")),
    env_rule="every launcher flag has an env variable: the field name upper-cased (MAX_BATCH_PREFILL_TOKENS); "
             "a flag on the command line wins over it",
    knobs=KNOBS,
    gaps=(Gap(ActsOn.PREEMPTION_STALL, "TGI exports no preemption counter, so no arm can be verified here",
              "size --max-batch-total-tokens to the memory; add replicas when the queue grows"),
          Gap(ActsOn.SELF_MADE_PREFILL, "TGI has no linear-state checkpoint knob",
              "prefix caching (PREFIX_CACHING) is per block; keep sessions on one replica")),
    primary={ActsOn.STEP_TIME_SHARING: "--max-batch-prefill-tokens", ActsOn.EVICTION: "--max-batch-prefill-tokens"},
    serve=("text-generation-router",), complete=complete,
)



def detect(names: Set[str]) -> tuple[Profile, str] | None:
    if not any(n.startswith("tgi_") for n in names):
        return None
    hit = sorted(n for n in names if n.startswith("tgi_batch_forward_duration"))
    return PROFILE, f"{hit[0]} present" if hit else "tgi_ metrics present"


# The simulator's settings in TGI's spelling; PREFILL_CHUNKING is its env switch, on in the model.
SIM_FLAGS = {"--max-batch-prefill-tokens": BUDGET, "--max-batch-size": "--max-num-seqs",
             "--max-batch-total-tokens": KV_TOKENS, "--max-total-tokens": "--max-model-len",
             "PREFILL_CHUNKING": NO_OP}


# --- metrics: huggingface/text-generation-inference backends/v3/src/backend.rs and the router
PROFILE = Profile(
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
)

_TGI_FORWARD = "tgi_batch_forward_duration"
_BOTH = frozenset({"prefill", "decode"})
_DECODE = frozenset({"decode"})

LEDGER_SPEC = LedgerSpec(
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
)

# tgi_request_input_length is observed at validation (before any prefill), and
# tgi_request_mean_time_per_token_duration holds one mean per request: a stall cannot show in it.
RECORD = EngineRecord(
    name="tgi", profiles=(PROFILE,), ledger_specs=(LEDGER_SPEC,), detect=detect, detect_order=2, catalogue=CATALOGUE, prompt_counting=PromptCounting.AT_ARRIVAL,
    itl_per_request_mean=True, flags_as_env=True, argv_needle="text-generation", argv_order=2, sim_flags=SIM_FLAGS,
    sim_program=("text-generation-router",), sim_model_flag="--tokenizer-name", sim_profile="tgi",
)
