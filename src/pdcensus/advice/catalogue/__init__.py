"""The knob catalogue per engine, read through one interface by recommend, lint and verify-arm.

Each engine's knobs are data, read from that engine's source at a pinned version (cited in
its module's docstring): :mod:`.vllm`, :mod:`.sglang`, :mod:`.tgi` here, radiance's beside its
runbook table (:mod:`pdcensus.advice.knobs`) and llama.cpp's beside its prediction
(:mod:`pdcensus.advice.llamacpp`). An :class:`EngineCatalogue` is one engine's pin, sources,
knobs (:class:`~pdcensus.advice.knob_types.Knob`: exact flag, env and aliases, default, versions,
what it acts on, cost, preconditions, rollback, the counter that proves it engaged) and
:class:`Gap` s (a mechanism with no knob, and the structural fix). ``complete`` is the one piece
of code per engine: the preconditions that must travel in the same deploy line, given the flags
already deployed. :func:`engine_catalogue` returns one; :func:`engine_of_profile` maps a census
metric profile (``vllm-v1``, ``radiance-1.8``, ...) to its engine, and :func:`engine_of_argv`
reads the engine from a process's argv.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module

from pdcensus.advice.knob_types import ActsOn, Knob
from pdcensus.errors import UsageError

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


ENGINES = ("radiance", "vllm", "sglang", "tgi", "llamacpp")
# where each engine's catalogue lives (module, attribute): radiance's beside its table, llama.cpp's
# beside its prediction
_HOMES = {"radiance": ("pdcensus.advice.knobs", "RADIANCE_CATALOGUE"),
          "llamacpp": ("pdcensus.advice.llamacpp", "CATALOGUE")}
__all__ = ["ENGINES", "EngineCatalogue", "Gap", "engine_catalogue", "engine_of_argv", "engine_of_profile"]


def engine_catalogue(engine: str) -> EngineCatalogue:
    """The catalogue of one engine (UsageError lists the engines)."""
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: expected one of: {', '.join(ENGINES)}")
    module, attribute = _HOMES.get(engine, (f"pdcensus.advice.catalogue.{engine}", "CATALOGUE"))
    catalogue: EngineCatalogue = getattr(import_module(module), attribute)
    return catalogue


def engine_of_profile(profile: str) -> str:
    """``radiance-1.8`` -> radiance, ``vllm-v1`` -> vllm, ``sglang`` -> sglang; unknown -> radiance."""
    head = profile.split("-")[0].lower()
    return head if head in ENGINES else "radiance"


def engine_of_argv(args: Sequence[str]) -> str | None:
    """The engine a process's argv runs (``vllm serve``, ``sglang.launch_server``, ``llama-server``, ...)."""
    text = " ".join(args[:4]).lower()
    for needle, engine in (("sglang", "sglang"), ("vllm", "vllm"), ("text-generation", "tgi"),
                           ("llama-server", "llamacpp"), ("radiance", "radiance")):
        if needle in text:
            return engine
    return None


def _cell(text: str | None) -> str:
    return (text or "-").replace("|", "\\|").replace("\n", " ")


def markdown_table(engine: str) -> str:
    """The engine's catalogue as a Markdown table (``docs/engines.md`` carries these; a test keeps them equal)."""
    catalogue = engine_catalogue(engine)
    rows = [f"**{catalogue.name}** ({catalogue.pin}). Env: {catalogue.env_rule}. Read from: "
            + "; ".join(f"`{s}`" for s in catalogue.sources) + ".", "",
            "| flag | env | default | versions | dial | acts on | proves it engaged |", "|---|---|---|---|---|---|---|"]
    for k in catalogue.knobs:
        flag = " / ".join(f"`{f}`" for f in k.spellings())
        env = f"`{k.env_var}`" if k.env_var else "none"
        acts = ", ".join(a.value for a in k.acts_on) or "(not advised)"
        rows.append(f"| {flag} | {env} | {_cell(k.default)} | {_cell(k.versions)} | {k.dial.value} | {acts} | "
                    f"{_cell(k.counter)} ({k.counter_check.value}) |")
    for gap in catalogue.gaps:
        rows.append(f"| (no knob) | | | | | {gap.acts_on.value} | {_cell(gap.why)}; structural fix: "
                    f"{_cell(gap.structural_fix)} |")
    return "\n".join(rows) + "\n"


def engines_with_flag(flag: str) -> list[str]:
    """The catalogues that hold ``flag`` (lint names them when a runbook's flag is another engine's)."""
    return [engine_catalogue(e).name for e in ENGINES if engine_catalogue(e).knob(flag) is not None]
