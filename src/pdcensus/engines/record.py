"""What the project knows about one engine, as one frozen record the rest of pdcensus asks.

Every decision that used to compare an engine's name (``profile.engine == "tgi"``) reads a named
fact here instead: when its prompt counter moves, whether its inter-token histogram is a
per-request mean, whether the census counts its steps from ``vllm:iteration_tokens_total``, how
the simulator and the what-if speak its flags. Each engine's module (:mod:`pdcensus.engines.vllm`,
...) builds one :class:`EngineRecord`; :mod:`pdcensus.engines.registry` lists them.

A record holds its engine's metric profiles and step-ledger specs (written in the words of
:mod:`pdcensus.engines.metrics`); :mod:`pdcensus.series.profiles` gathers them from the registry
and detects which one a recording is.

An :class:`EngineCatalogue` is one engine's knobs at a pinned version: its pin, sources, knobs
(:class:`~pdcensus.engines.knob_types.Knob`: exact flag, env and aliases, default, versions, what it
acts on, cost, preconditions, rollback, the counter that proves it engaged) and :class:`Gap` s (a
mechanism with no knob, and the structural fix). ``complete`` is the one piece of code per engine:
the preconditions that must travel in the same deploy line, given the flags already deployed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.engines.knob_types import ActsOn, Knob
from pdcensus.engines.metrics import LedgerSpec, LedgerTerm, Profile, Signal

Completion = Callable[[str, str, Mapping[str, str]], tuple[tuple[tuple[str, str], ...], tuple[str, ...]]]
"""``complete(flag, value, deployed) -> (extra (flag, value) pairs, notes)``."""


def _nothing(flag: str, value: str, deployed: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    return (), ()


@dataclass(frozen=True)
class Gap:
    """A mechanism the engine has no knob for, and the structural fix."""

    acts_on: ActsOn
    why: str
    structural_fix: str

    def to_dict(self) -> dict[str, str]:
        return {"acts_on": self.acts_on.value, "why": self.why, "structural_fix": self.structural_fix}


@dataclass(frozen=True)
class EngineCatalogue:
    """One engine's catalogue at a pinned version."""

    engine: str
    name: str  # how people write it: "vLLM", "SGLang"
    pin: str  # the version the flags were read at
    sources: tuple[str, ...]  # repository + path + tag of every file read
    env_rule: str  # how the engine reads env for its flags
    knobs: tuple[Knob, ...]
    gaps: tuple[Gap, ...] = ()
    # the primary knob per mechanism (the one the advice prints), by long flag
    primary: Mapping[ActsOn, str] = field(default_factory=dict)
    serve: tuple[str, ...] = ()  # argv before the flags, e.g. ("vllm", "serve", "MODEL")
    measures_decode_only_steps: bool = False  # a decode-only step ledger on /metrics
    complete: Completion = _nothing

    def knob(self, flag: str) -> Knob | None:
        name = flag if not flag.startswith("--") else flag.replace("_", "-")
        return next((k for k in self.knobs if name == k.flag or name in k.aliases), None)

    def primary_knob(self, mechanism: ActsOn) -> Knob | None:
        flag = self.primary.get(mechanism)
        return self.knob(flag) if flag else None

    def gap(self, mechanism: ActsOn) -> Gap | None:
        return next((g for g in self.gaps if g.acts_on is mechanism), None)

    def to_dict(self) -> dict[str, object]:
        return {"engine": self.engine, "name": self.name, "pin": self.pin, "sources": list(self.sources),
                "env_rule": self.env_rule, "knobs": [k.to_dict() for k in self.knobs],
                "gaps": [g.to_dict() for g in self.gaps],
                "primary": {m.value: f for m, f in self.primary.items()},
                "measures_decode_only_steps": self.measures_decode_only_steps}



# The symbols a record's ``sim_flags`` maps an engine flag to where no simulator flag is one to one:
# the step budget (the simulator's budget, its prefill span following), the KV pool in tokens, and a
# switch the model always has on.
BUDGET, KV_TOKENS, NO_OP = "budget", "kv-tokens", "no-op"


class PromptCounting(str, Enum):
    """When an engine's prompt-token counter moves (the census's prefill basis follows from it)."""

    AS_COMPUTED = "as-computed"  # as the prefill is computed, or when it ends (radiance, vLLM)
    AT_ARRIVAL = "at-arrival"  # observed when the request is validated (TGI's tgi_request_input_length)
    PER_CALL_AT_END = "per-call-at-end"  # flushed at the end of each call, spread back by its seconds (llama.cpp)
    AT_REQUEST_END = "at-request-end"  # when the request finishes, unless a prompter rate term exists (SGLang)


class Advice(str, Enum):
    """Which recommenders speak for the engine's knobs."""

    RUNBOOK = "runbook"  # the runbook's own dials: interleave, arena, checkpoints (radiance)
    BATCH_SIZE = "batch-size"  # -b, with the effect predicted from the census (llama.cpp)
    STEP_BUDGET = "step-budget"  # the catalogue's step budget, halved from the deployed value


@dataclass(frozen=True)
class DeployedValue:
    """A flag's value in effect, where it came from (``argv``, ``config``, ``labels`` or ``default``) and why."""

    flag: str
    value: str
    source: str
    why: str

    @property
    def is_default(self) -> bool:
        return self.source == "default"

    def text(self) -> str:
        if self.source == "argv":
            return f"{self.flag} {self.value} (argv)"
        if self.source == "config":
            return f"{self.flag} {self.value} ({self.why})"
        if self.source == "labels":
            return f"{self.flag} {self.value} (vllm:cache_config_info)"
        return f"{self.flag} {self.value}: not in argv, {self.why}"


@dataclass(frozen=True)
class KvRules:
    """How a release admits into its KV cache and resumes a preempted request (the what-if's twin follows it)."""

    watermark_share: float  # of the cache kept free when a waiting or preempted request is admitted
    resume_from_prefix_cache: bool  # a preempted request's full blocks are found again by the prefix cache
    partial_block_share: float  # of a block a request's partial last block wastes, on average
    # the scheduler's stats (the admission's prefix-cache lookup, the running / waiting / KV-usage gauges) are
    # published when a step ends, as of that moment
    stats_at_step_end: bool = False


@dataclass(frozen=True)
class EngineRelease:
    """One release of an engine whose facts are cited line by line; the registry's last per engine is in force."""

    engine: str
    version: str
    flags_file: str  # pdcensus/data/<file>: every flag the release's parser takes (lint reads argv against it)
    # a flag's value in effect where argv does not set it: argv, the config file, the labels, or the cited default
    deployed_value: Callable[[str, Mapping[str, str], "Mapping[str, str] | None"], DeployedValue | None]
    config_file_note: Callable[[Mapping[str, str]], str]  # said where argv reads a config file pdcensus cannot
    twin_refused: Mapping[str, str]  # catalogue flag -> why the what-if's twin cannot model it
    assumed_budget: int  # the step budget assumed where neither argv nor the build says
    kv_rules: KvRules | None = None  # None: the twin keeps radiance's watermark and recompute from token 0


Detect = Callable[[Set[str]], "tuple[Profile, str] | None"]
"""``detect(sample names) -> (profile, the names that decided it)``, or None: not this engine."""


@dataclass(frozen=True)
class EngineRecord:
    """One engine: its name, profiles, counting rules, knob catalogue and flag spellings."""

    name: str  # the engine as profiles and catalogues name it: "vllm", "llamacpp"
    profiles: tuple[Profile, ...]  # its builds' metric sets (sample name per logical signal)
    catalogue: EngineCatalogue
    ledger_specs: tuple[LedgerSpec, ...] = ()  # per profile: how its names give the step ledger
    # per profile: a labelled counter that carries a token rate more promptly than the profile's own
    rate_terms: Mapping[str, Mapping[Signal, LedgerTerm]] = field(default_factory=dict)
    extra_sample_names: tuple[str, ...] = ()  # names its derivation reads beside the profile's signals
    detect: Detect | None = None  # which of its profiles a metric set is, and the names that decided it
    detect_order: int = 0  # which engine is tried first (lower first: vLLM's names last, others export them too)
    # --- counting rules (when each family moves)
    prompt_counting: PromptCounting = PromptCounting.AS_COMPUTED
    itl_per_request_mean: bool = False  # its inter-token histogram holds one mean per request: no stall shows
    counted_step_ledger: bool = False  # steps counted from iteration_tokens _count and timed by the scrape
    prefill_progress: bool = False  # prefill in progress reconstructed from its counters (vLLM V1)
    latency_under_other_prefix: bool = False  # latency and preemptions exported under vllm: names (radiance)
    # --- knobs and deploys
    advice: Advice = Advice.STEP_BUDGET
    env_from_flag_name: bool = False  # the serve script reads <PREFIX>_<FLAG> for every flag (radiance)
    short_flags: bool = False  # argv carries single-dash flags with a value (-b 512, -np 4)
    flags_as_env: bool = False  # each flag is also read as its upper-case env name (TGI: MAX_BATCH_SIZE)
    argv_needle: str = ""  # the word in a process's argv that names it ("" : none)
    argv_order: int = 0  # which needle is tried first (lower first: "sglang" before "vllm")
    # --- the simulator and the what-if
    simulated: bool = False  # the simulator's own engine: its flags are the simulator's flags
    sim_flags: Mapping[str, str] = field(default_factory=dict)  # engine flag -> simulator flag (or a symbol)
    sim_program: tuple[str, ...] = ()  # argv before the model in the engine's spelling
    sim_model_flag: str = ""  # how argv passes the model ("" : positional)
    sim_profile: str = "radiance"  # the metric set the what-if's twin is exported as
    twin_spellings: Mapping[str, str] = field(default_factory=dict)  # what-if spelling -> twin knob (by value)
    twin_maps_every_flag: bool = False  # the what-if maps or refuses each catalogue flag (pdcensus.whatif.vllm_knobs)
    micro_batches: bool = False  # a step is split into micro-batches (llama.cpp's n_ubatch = min(-b, -ub))
    twin_read_as_own: bool = False  # the twin's recording is rewritten in the engine's own words before measuring

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.profiles)

    def knob_spellings(self) -> frozenset[str]:
        """Every flag spelling the engine's catalogue holds (long forms and aliases)."""
        return frozenset(s for k in self.catalogue.knobs for s in k.spellings())
