"""The shape of one engine's knob catalogue: its pin, its sources, its knobs, and what it lacks.

Every engine module in this package (:mod:`.vllm`, :mod:`.sglang`, :mod:`.tgi`,
:mod:`.llamacpp`, :mod:`.radiance`) is data of this shape, so that recommend, lint and
verify-arm read one interface (:mod:`pdcensus.advice.catalogue`). A knob is a
:class:`~pdcensus.advice.knobs.Knob` (exact flag, env and aliases, default, versions, what it
acts on, cost, preconditions, rollback, and the counter that proves it engaged on that
engine); a :class:`Gap` is a mechanism the engine has no knob for, with the structural fix.

``complete`` is the one piece of code per engine: the preconditions that must travel in the
same deploy line (radiance's ``--prefill-span N`` with ``--max-num-batched-tokens`` = N
intervals, vLLM's budget no lower than ``--max-num-seqs``), given the flags already deployed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pdcensus.advice.knob_types import ActsOn, Knob

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
