"""Knobs in each engine's own spelling, mapped onto the simulator's flags (and back from argv).

The simulator models one engine (radiance): a step carries decode rows and at most one prefill
chunk. What another engine's knob does to that model:

- vLLM (``vllm/engine/arg_utils.py``, 0.15-0.32): ``--max-num-seqs`` bounds the running batch
  (the simulator's ``--max-num-seqs``); ``--max-num-batched-tokens`` is the token budget of one
  step, which with chunked prefill is the largest chunk a decoder waits out beside a long prompt
  (``--max-num-batched-tokens``, and the same value as the busy and lone chunk). Every other flag
  of the vLLM catalogue (``pdcensus knobs --engine vllm``: the long-prefill threshold, the KV pool)
  is mapped or refused in one line by :mod:`pdcensus.whatif.vllm_knobs`.
- llama.cpp (``common/arg.cpp`` at b11434, as ``llama-server --help`` prints it): ``-np/--parallel`` is the slot count (the batch
  bound); ``-b/--batch-size`` is n_batch, the tokens of one ``llama_decode`` call, so the chunk
  a decoding slot waits for; ``-ub/--ubatch-size`` is n_ubatch, the micro-batch that call is
  split into (``n_ubatch = min(-b, -ub)``), priced by the cost model's micro-batch pass
  (:class:`pdcensus.sim.cost_model.CostModel`), not by a flag.
- radiance: the simulator's own flags (``pdcensus sim --set``), spelled as radiance spells them.

``load`` is the what-if's own knob for every engine: the arrival rate multiplied (the traffic
grows or shrinks; each request is unchanged).

vLLM's, SGLang's and TGI's spellings of the same two knobs come from each engine's simulator-flag
table (its record's ``sim_flags``, which :mod:`pdcensus.sim.engine_flags` applies); llama.cpp's from
its record's ``twin_spellings`` (:mod:`pdcensus.engines`). The full per-engine knob catalogue
(costs, preconditions, rollback) is the advice's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from pdcensus.engines import ENGINES, EngineRecord, find
from pdcensus.engines.record import BUDGET
from pdcensus.errors import UsageError


class Knob(str, Enum):
    """What a knob sets in the calibrated twin."""

    MAX_NUM_SEQS = "max-num-seqs"
    BATCH_TOKENS = "max-num-batched-tokens"
    UBATCH_TOKENS = "ubatch-tokens"
    LOAD = "load"
    SIM_FLAG = "sim-flag"  # radiance: a simulator flag, passed through
    VLLM_FLAG = "vllm-flag"  # vLLM: a flag mapped by :mod:`pdcensus.whatif.vllm_knobs`


def _spellings(rules: EngineRecord) -> dict[str, Knob]:
    """The step-budget and batch-bound spellings of an engine's simulator-flag table, then its own.

    A record's ``sim_flags`` is the project's one mapping of vLLM's, SGLang's and TGI's flags onto
    the simulator (``sim --profile P --set``); the what-if takes its spellings of the two knobs it
    models (the step budget and the running-batch bound) from there. The simulator's own engine has
    none: any simulator flag, checked by the simulator's own parser.
    """
    out: dict[str, Knob] = {}
    for flag, target in rules.sim_flags.items():
        if target == BUDGET:
            out[flag] = Knob.BATCH_TOKENS
        elif target == "--max-num-seqs":
            out[flag] = Knob.MAX_NUM_SEQS
    out.update({spelling: Knob(knob) for spelling, knob in rules.twin_spellings.items()})
    return out


# engine -> spelling -> knob; every spelling an operator would type
SPELLINGS: dict[str, dict[str, Knob]] = {r.name: _spellings(r) for r in ENGINES}
COMMON: dict[str, Knob] = {"load": Knob.LOAD}


@dataclass(frozen=True)
class KnobSetting:
    """One ``--set`` as the operator wrote it and what it sets in the twin."""

    spelling: str
    value: str
    knob: Knob

    def number(self) -> float:
        try:
            return float(self.value)
        except ValueError:
            raise UsageError(f"bad value {self.value!r} for {self.spelling}: expected a number") from None


def engine_family(profile_engine: str) -> str:
    """The knob table an engine profile uses (``vllm-...`` -> vllm; an engine the wing does not know, itself)."""
    return next((r.name for r in ENGINES if profile_engine.startswith(r.name)), profile_engine)


def _spell(raw: str) -> str:
    name = raw.strip()
    if name in COMMON:
        return name
    if name.startswith("--"):
        return name.replace("_", "-")
    if name.startswith("-"):
        return name
    return ("-" if name in ("np", "b", "ub") else "--") + name.replace("_", "-")


def parse_knobs(items: Sequence[str], engine: str) -> list[KnobSetting]:
    """``KNOB=VALUE`` items in ``engine``'s spelling -> settings; an unknown knob is a usage error."""
    from pdcensus.sim.config import FLAG_SPECS
    from pdcensus.whatif.vllm_knobs import ACCEPTED as VLLM_ACCEPTED
    from pdcensus.whatif.vllm_knobs import REFUSED as VLLM_REFUSED
    from pdcensus.whatif.vllm_knobs import refuse

    table = SPELLINGS.get(engine)
    rules = find(engine)
    simulated = rules is not None and rules.simulated  # any simulator flag, as the simulator spells it
    every_flag = rules is not None and rules.twin_maps_every_flag  # vLLM: each catalogue flag mapped or refused
    out: list[KnobSetting] = []
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set wants KNOB=VALUE, got {item!r}")
        raw, value = item.split("=", 1)
        spelling = _spell(raw)
        if spelling in COMMON:
            out.append(KnobSetting(spelling, value.strip(), COMMON[spelling]))
        elif simulated and spelling in FLAG_SPECS and spelling not in ("--model", "--port"):
            out.append(KnobSetting(spelling, value.strip(), Knob.SIM_FLAG))
        elif table and spelling in table:
            out.append(KnobSetting(spelling, value.strip(), table[spelling]))
        elif every_flag and spelling in VLLM_ACCEPTED:
            out.append(KnobSetting(spelling, value.strip(), Knob.VLLM_FLAG))
        elif every_flag and spelling in VLLM_REFUSED:
            refuse(spelling)
        else:
            flags = [f for f in sorted(FLAG_SPECS) if f not in ("--model", "--port")]
            known = sorted(COMMON) + (flags if simulated else sorted(
                set(table or {}) | (set(VLLM_ACCEPTED) if every_flag else set())))
            raise UsageError(f"unknown knob {raw.strip()!r} for {engine}: expected one of: {', '.join(known)}")
    return out


def knobs_from_argv(argv: Sequence[str], engine: str) -> dict[Knob, str]:
    """The batch limits an engine's argv sets (``--x N``, ``--x=N``; llama.cpp's short forms)."""
    table = SPELLINGS.get(engine, {})
    out: dict[Knob, str] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        name, _, inline = arg.partition("=")
        knob = table.get(name.replace("_", "-") if name.startswith("--") else name)
        if knob is None:
            continue
        value = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
        if value:
            out[knob] = value
    return out


def radiance_flags_from_argv(argv: Sequence[str]) -> dict[str, str]:
    """Every simulator flag found in a radiance argv (``--flag value`` or ``--flag=value``)."""
    from pdcensus.sim.config import FLAG_SPECS

    out: dict[str, str] = {}
    args = list(argv)
    for i, arg in enumerate(args):
        name, _, inline = arg.partition("=")
        if name in FLAG_SPECS and name not in ("--model", "--port"):
            value = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
            if value:
                out[name] = value
    return out


def settings_as_dict(settings: Sequence[KnobSetting]) -> Mapping[str, str]:
    return {s.spelling: s.value for s in settings}
