"""The types every engine's knob catalogue is made of: a knob, what it acts on, how its arm is checked.

Kept apart from the catalogues (:mod:`pdcensus.advice.knobs` for radiance,
:mod:`pdcensus.advice.catalogue` for the other engines) so that each engine's data module and the
lookup that reads them all share one definition without importing each other.
``env_var_for`` is radiance's rollback convention (``--prefill-interleave`` ->
``RADIANCE_PREFILL_INTERLEAVE``); other engines name their own env variable per knob (``""``: none).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

ENV_PREFIX = "RADIANCE_"


class ActsOn(str, Enum):
    """The mechanism a knob acts on (the census verdict's words, plus self-made prefill)."""

    STEP_TIME_SHARING = "step-time-sharing"
    EVICTION = "eviction"
    PREEMPTION_STALL = "preemption-stall"
    SELF_MADE_PREFILL = "self-made-prefill"
    PREFILL_SPEED = "prefill-speed"


class Dial(str, Enum):
    """What a knob turns, in every engine's terms (the catalogue's columns)."""

    CHUNK_BUDGET = "chunk/step budget"
    LONG_PREFILL_LIMIT = "concurrent long prefills"
    DECODE_MIXING = "decode rows beside prefill"
    DECODE_HOLD = "decode-only steps held after a chunk"
    KV_CAPACITY = "KV capacity and preemption"
    ADMISSION = "admission and queueing"
    DISAGGREGATION = "prefill/decode disaggregation"
    CHECKPOINTS = "linear-state checkpoints"
    OTHER = "other"


class CounterCheck(str, Enum):
    """How verify-arm reads the counter (or gauge) a knob moves."""

    LEAVES_ZERO = "leaves-zero"  # a counter's increase over the after window must be > 0
    GAUGE_AT_MOST = "gauge-at-most"  # a gauge must never exceed the knob's value
    RATIO_DROPS = "ratio-drops"  # a counter ratio must drop between before and after
    CHUNK_STEP_MOVES = "chunk-step-moves"  # the ledger's mean chunk step must move
    STEP_TOKENS_AT_MOST = "step-tokens-at-most"  # prefill tokens per counted step at most the knob (vLLM)
    NONE = "none"  # nothing in the metric set moves; boot ledger / argv only


@dataclass(frozen=True)
class Knob:
    """One catalogue entry: semantics, cost, preconditions, interactions, verification."""

    flag: str
    argument: str
    default: str | None
    role: str
    acts_on: tuple[ActsOn, ...]
    semantics: str
    cost: str
    preconditions: tuple[str, ...]
    interactions: tuple[str, ...]
    counter: str | None
    counter_check: CounterCheck
    bucket_pair: str
    # Another engine's knob: its engine, its own env variable ("" = the engine reads none for it),
    # its short flags; then the catalogue's facts: dial, versions, source, rollback.
    engine: str = "radiance"
    env: str | None = None
    aliases: tuple[str, ...] = ()
    dial: Dial = Dial.OTHER
    versions: str = ""
    source: str = ""
    rollback: str = ""
    # what argv[0] / pidof names ("" : the engine's name), and a shell lookup of the process that holds the
    # flags where pidof cannot find it ("" : pidof)
    process_name: str = ""
    pid_lookup: str = ""

    @property
    def env_var(self) -> str:
        """The env variable that sets the flag ("" where the engine reads none for it)."""
        return self.env if self.env is not None else env_var_for(self.flag)

    @property
    def process(self) -> str:
        return self.process_name or self.engine

    def spellings(self) -> tuple[str, ...]:
        """Every way argv may carry the flag (the long form first)."""
        return (self.flag, *self.aliases)

    def env_line(self, value: str) -> str:
        """The arm: one env line (``NAME=value``), or the argv fragment where the engine reads no env."""
        return f"{self.env_var}={value}" if self.env_var else f"{self.flag} {value}".strip()

    def rollback_env_line(self, value_before: str | None = None) -> str:
        """The rollback: the value before the arm, else the default, else empty (not passed)."""
        plain = self.default if self.default is not None and " " not in self.default else None  # not a prose default
        before = value_before if value_before is not None else plain
        if not self.env_var:
            return f"{self.flag} {before}" if before is not None else f"(drop {self.flag}: the build's default)"
        return f"{self.env_var}={before if before is not None else ''}"

    def argv_check(self, value: str | None = None) -> str:
        want = f"{self.flag} {value}" if value is not None else self.flag
        return (
            f"tr '\\0' ' ' < /proc/{self.pid_lookup or '$(pidof ' + self.process + ')'}/cmdline "
            f"| grep -o -- '{want}' "
            f"(or pdcensus verify-arm --pid PID --flag {self.flag}"
            + (f"={value}" if value is not None else "")
            + ")"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "flag": self.flag,
            "argument": self.argument,
            "default": self.default,
            "role": self.role,
            "acts_on": [a.value for a in self.acts_on],
            "semantics": self.semantics,
            "cost": self.cost,
            "preconditions": list(self.preconditions),
            "interactions": list(self.interactions),
            "env_var": self.env_var,
            "counter": self.counter,
            "counter_check": self.counter_check.value,
            "bucket_pair": self.bucket_pair,
            "engine": self.engine,
            "aliases": list(self.aliases),
            "dial": self.dial.value,
            "versions": self.versions,
            "source": self.source,
            "rollback": self.rollback,
        }


def env_var_for(flag: str) -> str:
    """``--prefill-interleave`` -> ``RADIANCE_PREFILL_INTERLEAVE``."""
    return ENV_PREFIX + flag.lstrip("-").upper().replace("-", "_")


def flag_for_env_var(name: str) -> str | None:
    """``RADIANCE_PREFILL_INTERLEAVE`` -> ``--prefill-interleave`` (None without the prefix)."""
    if not name.startswith(ENV_PREFIX) or len(name) == len(ENV_PREFIX):
        return None
    return "--" + name[len(ENV_PREFIX):].lower().replace("_", "-")
