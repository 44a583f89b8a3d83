"""radiance: the simulator's engine, its runbook knob table and what the census knows of its metrics.

The knob entries restate the runbook's "Knob semantics" (radiance 1.8.x, GUIDE section 4.5) as
data, so that recommendations, lint and arm verification read one table. The pinned source is
the referee for names and enum members (see :mod:`pdcensus.lint.source.flags`); this table holds the
*semantics* that no source file states.

Rollback convention (one for every radiance knob): the serve script reads ``RADIANCE_<FLAG>``
(the flag without its dashes, upper-cased, ``-`` -> ``_``) and passes
``--<flag> "$RADIANCE_<FLAG>"`` only when the variable is non-empty. An arm is therefore
one env line (``RADIANCE_PREFILL_INTERLEAVE=2``) and its rollback is the env line that
restores the value before the arm (``RADIANCE_PREFILL_INTERLEAVE=0``), or the empty
line (``RADIANCE_MAX_NUM_SEQS=``: flag not passed, the build's default) when the value
before is unknown. Never a rebuild. Because the flag is passed conditionally, a deploy
proves nothing: verify argv first.

The record: radiance exports its latency and preemptions under ``vllm:`` names beside its own
``radiance:`` ledger, counts prompt tokens as they are computed, and is the engine the simulator
models, so its flags are the simulator's flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from pdcensus.engines.knob_types import ActsOn, CounterCheck, Dial, Knob
from pdcensus.engines.metrics import LedgerQuantity, LedgerSpec, LedgerTerm, Profile, Signal, one_term
from pdcensus.engines.vllm import VLLM_COMMON
from pdcensus.engines.record import Advice, EngineCatalogue, EngineRecord, Gap

CLI = "radiance"  # the program (and image name) that serves it: ``radiance serve``
RADIANCE_VERSIONS = "1.8.x (1.0.13 parses --prefill-interleave and holds nothing)"
RADIANCE_SOURCE = "runbook, Knob semantics (GUIDE section 4.5); names and members: the pinned core/config.cpp"


_BUCKET_PAIR = (
    "bucket radiance:decode_tokens_per_second / vllm:num_requests_running by "
    "radiance:prefill_tokens_per_second from the same scrape, before and after, with the SAME "
    "bucket edges; compare the busy buckets' per-stream decode rate and TTFT quantiles"
)

CATALOGUE: dict[str, Knob] = {
    k.flag: k
    for k in (
        Knob(
            flag="--prefill-interleave",
            argument="N",
            default="0",
            role="the decoder dial",
            acts_on=(ActsOn.STEP_TIME_SHARING,),
            semantics=(
                "N decode-only steps follow any chunk step taken beside decoders; held steps "
                "admit nothing. A decoder beside a prefill gets N+1 tokens per chunk step + N "
                "decode-only steps."
            ),
            cost=(
                "the prefilling prompt's TTFT stretches by N decode-only steps per chunk step; "
                "a queued request waits up to N held steps for its first step"
            ),
            preconditions=(
                "the build counts held steps (radiance 1.8.x); 1.0.13 accepts the flag and ignores it",
                "decoders run beside the prefill (it holds nothing for a lone prefill)",
            ),
            interactions=(
                "--prefill-span re-funds only a lone prefill, so it cannot buy back held steps "
                "while decoders run",
            ),
            counter="radiance:engine_steps_held_total",
            counter_check=CounterCheck.LEAVES_ZERO,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.DECODE_HOLD,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--busy-prefill-chunk",
            argument="auto|N",
            default="auto",
            role="a prefill-speed dial, not decoder protection",
            acts_on=(ActsOn.PREFILL_SPEED, ActsOn.EVICTION),
            semantics=(
                "the chunk size while decoders run; auto reserves 1+spec rows per decoding "
                "sequence and 1/8 of the budget per waiting request; the source refuses to halve "
                "for decode rows alone"
            ),
            cost=(
                "a smaller chunk means more chunk steps per prompt (longer TTFT); it does not "
                "protect decoders, each chunk step still holds them"
            ),
            preconditions=(
                "never below the prefill stager's smallest pass (named on the boot line): below it "
                "every routed layer reads its pooled experts synchronously",
            ),
            interactions=("bounded above by --max-num-batched-tokens",),
            counter=None,
            counter_check=CounterCheck.CHUNK_STEP_MOVES,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.CHUNK_BUDGET,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--prefill-span",
            argument="N",
            default="1",
            role="re-funds a lone prefill",
            acts_on=(ActsOn.PREFILL_SPEED,),
            semantics=(
                "a lone prefill takes N checkpoint intervals per step and skips the intermediate "
                "snapshot writes"
            ),
            cost=(
                "its extra intervals land on the arena that the expert slab loses (evictions, a "
                "lagged decode tail)"
            ),
            preconditions=("--max-num-batched-tokens = N checkpoint intervals",),
            interactions=(
                "re-funds a lone prefill only: it cannot buy back held steps while decoders run",
            ),
            counter=None,
            counter_check=CounterCheck.NONE,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.CHUNK_BUDGET,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--checkpoint-policy",
            argument="geometric-backoff|tip-only|keep-all",
            default="geometric-backoff",
            role="linear-state checkpoint retention",
            acts_on=(ActsOn.SELF_MADE_PREFILL,),
            semantics=(
                "retention only: snapshot writes happen at every interval whatever the policy "
                "says; a prefix hit reuses up to the last retained checkpoint and replays the rest"
            ),
            cost="keep-all buys a bounded replay (< one interval) for pinned host RAM; no extra PCIe",
            preconditions=(
                "enum members from the pinned source's validator, never from memory",
                "--checkpoint-slots auto = policy held() + 1 per --max-num-seqs, within an eighth "
                "of host RAM",
            ),
            interactions=(
                "shortening --checkpoint-interval does NOT fix deep divergence under "
                "geometric-backoff",
            ),
            counter="radiance:prefix_hit_cut_tokens_total",
            counter_check=CounterCheck.RATIO_DROPS,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.CHECKPOINTS,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--checkpoint-interval",
            argument="TOKENS",
            default=None,
            role="snapshot spacing",
            acts_on=(ActsOn.SELF_MADE_PREFILL,),
            semantics="a linear-state snapshot is written every interval of prompt tokens",
            cost="every cut multiplies the snapshot writes (PCIe, chunk step time)",
            preconditions=(),
            interactions=(
                "under geometric-backoff the coarsest retained scale is the largest interval x 2^k "
                "under the depth, so the deepest gap stays about half the prompt whatever the "
                "interval",
                "--prefill-span N needs --max-num-batched-tokens = N intervals",
            ),
            counter="radiance:prefix_hit_cut_tokens_total",
            counter_check=CounterCheck.RATIO_DROPS,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.CHECKPOINTS,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--checkpoint-slots",
            argument="auto|N",
            default="auto",
            role="pinned host RAM for retained snapshots",
            acts_on=(ActsOn.SELF_MADE_PREFILL,),
            semantics="a total over all sequences; auto = policy held() + 1, per --max-num-seqs",
            cost="pinned host RAM, within an eighth of host RAM",
            preconditions=("within an eighth of host RAM",),
            interactions=("too few slots drop retained checkpoints whatever the policy",),
            counter=None,
            counter_check=CounterCheck.NONE,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.CHECKPOINTS,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--max-num-batched-tokens",
            argument="TOKENS",
            default=None,
            role="the blunt rung",
            acts_on=(ActsOn.EVICTION, ActsOn.PREFILL_SPEED),
            semantics="the token budget of one step, and so the arena a chunk step borrows",
            cost=(
                "raising it raises the arena the expert slab loses, and its resonance on an "
                "expert-tiered payload can be violent; lowering it slows every prefill"
            ),
            preconditions=("--prefill-span N needs it equal to N checkpoint intervals",),
            interactions=("bounds --busy-prefill-chunk",),
            counter=None,
            counter_check=CounterCheck.CHUNK_STEP_MOVES,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.CHUNK_BUDGET,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
        Knob(
            flag="--max-num-seqs",
            argument="N",
            default=None,
            role="KV headroom",
            acts_on=(ActsOn.PREEMPTION_STALL,),
            semantics="the most sequences in the running batch; KV demand grows with it x context",
            cost="fewer concurrent streams: arrivals queue (TTFT) when the batch is full",
            preconditions=("sequences x mean context must fit the KV pool with headroom",),
            interactions=("--checkpoint-slots auto scales with it",),
            counter="vllm:num_requests_running",
            counter_check=CounterCheck.GAUGE_AT_MOST,
            bucket_pair=_BUCKET_PAIR,
            dial=Dial.KV_CAPACITY,
            versions=RADIANCE_VERSIONS,
            source=RADIANCE_SOURCE,
        ),
    )
}


# --- radiance as an engine catalogue (pdcensus.advice.catalogue): pin, env rule, primary knobs, and the one
# precondition that must travel in the same line: --prefill-span N needs --max-num-batched-tokens = N
# checkpoint intervals, or config_validate refuses to start.
DEFAULT_CHECKPOINT_INTERVAL = 4096


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def complete(flag: str, value: str, deployed: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Span and step budget travel together: budget = span x checkpoint interval."""
    interval = _int(deployed.get("--checkpoint-interval")) or DEFAULT_CHECKPOINT_INTERVAL
    if flag == "--prefill-span" and value.isdigit():
        budget = int(value) * interval
        return ((("--max-num-batched-tokens", str(budget)),),
                (f"--max-num-batched-tokens {budget}: --prefill-span {value} needs {value} x --checkpoint-interval "
                 f"{interval} (config_validate refuses anything else)",))
    span = _int(deployed.get("--prefill-span")) or 1
    if flag == "--max-num-batched-tokens" and value.isdigit() and span > 1:
        new_span = max(1, int(value) // interval) if int(value) % interval == 0 else 1
        return ((("--prefill-span", str(new_span)),),
                (f"--prefill-span {new_span}: the deployed --prefill-span {span} needs the budget at {span} intervals",))
    return (), ()


RADIANCE_CATALOGUE = EngineCatalogue(
    engine="radiance", name="radiance", pin="radiance 1.8.x",
    sources=("runbook: Knob semantics (GUIDE section 4.5)", "the pinned image's core/config.cpp (help table + validator)"),
    env_rule="the serve script reads RADIANCE_<FLAG> and passes --<flag> only when it is non-empty",
    knobs=tuple(CATALOGUE.values()),
    gaps=(Gap(ActsOn.PREEMPTION_STALL, "no knob reserves KV for resumed sequences beyond --max-num-seqs",
              "more KV memory per replica, or more replicas"),),
    primary={ActsOn.STEP_TIME_SHARING: "--prefill-interleave", ActsOn.EVICTION: "--max-num-batched-tokens",
             ActsOn.PREEMPTION_STALL: "--max-num-seqs", ActsOn.SELF_MADE_PREFILL: "--checkpoint-policy"},
    serve=(CLI, "serve"), measures_decode_only_steps=True, complete=complete,
)


# --- metrics: radiance:* for its rates and step ledger (METRICS.md), vLLM's names for latency and queues
RADIANCE_1_0 = {
    **VLLM_COMMON,
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

PROFILES = (
    Profile(
        "radiance-1.8",
        "radiance",
        "radiance 1.8.x: step ledger (decode/held counters), prefix-hit cuts",
        {
            **RADIANCE_1_0,
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
        dict(RADIANCE_1_0),
    ),
)


def _radiance_terms(profile: Profile) -> dict[LedgerQuantity, LedgerTerm]:
    pairs = {
        LedgerQuantity.STEPS: Signal.STEPS,
        LedgerQuantity.DECODE_STEPS: Signal.STEPS_DECODE,
        LedgerQuantity.STEP_SECONDS: Signal.STEP_SECONDS,
        LedgerQuantity.DECODE_STEP_SECONDS: Signal.STEP_SECONDS_DECODE,
        LedgerQuantity.HELD_STEPS: Signal.STEPS_HELD,
    }
    return {q: one_term(profile.signals[s]) for q, s in pairs.items() if s in profile.signals}


LEDGER_SPECS = (
    LedgerSpec("radiance-1.8", "the radiance 1.8.x step counters, docs/runbook.md", _radiance_terms(PROFILES[0])),
    LedgerSpec(
        "radiance-1.0.13",
        "the radiance 1.0.13 step counters, docs/runbook.md",
        _radiance_terms(PROFILES[1]),
        missing={
            q: "radiance 1.0.13 has no decode-only step counters"
            for q in (LedgerQuantity.DECODE_STEPS, LedgerQuantity.DECODE_STEP_SECONDS)
        },
    ),
)


def detect(names: Set[str]) -> tuple[Profile, str] | None:
    if "radiance:engine_steps_decode_total" in names or "radiance:engine_steps_held_total" in names:
        return PROFILES[0], "radiance:engine_steps_decode_total present"
    if any(n.startswith("radiance:") for n in names):
        return PROFILES[1], "radiance: metrics without radiance:engine_steps_decode_total"
    return None


RECORD = EngineRecord(
    name="radiance", profiles=PROFILES, ledger_specs=LEDGER_SPECS, detect=detect, catalogue=RADIANCE_CATALOGUE,
    latency_under_other_prefix=True, advice=Advice.RUNBOOK, env_from_flag_name=True,
    argv_needle=CLI, argv_order=4, simulated=True, sim_program=(CLI, "serve"),
)
