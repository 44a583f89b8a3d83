"""The words every engine's metric profile is written in: logical signals, profiles, ledger specs.

A :class:`Profile` says, for one engine and build, which sample name carries each logical
:class:`Signal` (decode rate, prefill rate, running, the step-ledger counters, ...). Counter
signals name the sample (``..._total``); histogram signals name the family base (``..._bucket``,
``_count`` and ``_sum`` are derived). A :class:`LedgerSpec` says how one build's names give the
step ledger's four counters (:mod:`pdcensus.series.engine_ledger` does the arithmetic). Each
engine's module of the wing writes its own profiles and specs in these words;
:mod:`pdcensus.series.profiles` gathers them and detects which one a recording is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


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


def one_term(name: str) -> LedgerTerm:
    return LedgerTerm((name,))
