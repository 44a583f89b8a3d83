"""The simulator's knobs in each engine's own spelling: ``sim --profile vllm --set --max-num-batched-tokens=2048``.

The engine model is radiance's (:mod:`pdcensus.sim.config`); a recording exported under vLLM's,
SGLang's or TGI's names (``--profile``) takes that engine's flags, so that the advice printed for
that engine can be deployed as printed. :data:`ENGINE_FLAGS` maps each engine flag (and its env
spelling where the engine has one: TGI's ``MAX_BATCH_PREFILL_TOKENS``) to the simulator setting
that does the same thing (each engine's table is its record's ``sim_flags``, :mod:`pdcensus.engines`):

- the step budget (vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TGI
  ``--max-batch-prefill-tokens``) -> ``--max-num-batched-tokens``; those engines give a lone prompt
  the whole budget in one step, so the simulator's ``--prefill-span`` follows as budget / interval
  (1 when the budget is not a whole number of intervals), which also keeps radiance's
  ``config_validate`` satisfied;
- running sequences (``--max-num-seqs``, ``--max-running-requests``, TGI ``--max-batch-size``) ->
  ``--max-num-seqs``; the KV pool in tokens (``--max-total-tokens``, ``--max-batch-total-tokens``)
  -> ``--num-gpu-blocks-override`` in blocks; vLLM's ``--num-gpu-blocks-override``, context length
  and block size map one to one;
- switches the model always has on (vLLM ``--enable-chunked-prefill``, TGI ``PREFILL_CHUNKING=1``)
  are accepted and change nothing; turning them off, and any flag with no simulated equivalent,
  is a :class:`~pdcensus.errors.UsageError` that lists what the profile accepts.

:func:`engine_argv` writes the process's argv back in the engine's spelling (``DIR/cmdline``), with
only the flags that engine has (the checkpoint interval and span are the model's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from pdcensus.engines import ENGINES, find, record
from pdcensus.engines.record import BUDGET, KV_TOKENS, NO_OP
from pdcensus.errors import UsageError
from pdcensus.sim.config import EngineConfig, normalize_flag
from pdcensus.sim.scenarios import Scenario, with_overrides

__all__ = ["BUDGET", "ENGINE_FLAGS", "KV_TOKENS", "NO_OP", "apply", "engine_argv", "translate"]
SIM_BUDGET = "--max-num-batched-tokens"
SIM_BLOCKS = "--num-gpu-blocks-override"

# engine flag -> simulator flag (or BUDGET / KV_TOKENS / NO_OP: a value the model always has), per
# engine that has a table (the simulator's own engine takes its flags as they are)
ENGINE_FLAGS: dict[str, dict[str, str]] = {r.name: dict(r.sim_flags) for r in ENGINES if r.sim_flags}
NO_OP_VALUES = frozenset({"", "1", "true", "True"})


def _engine_name(profile: str, raw: str) -> str:
    """``--x_y``/``x-y`` -> ``--x-y``; TGI's env spelling (``MAX_BATCH_PREFILL_TOKENS``) -> its flag."""
    bare = raw.strip().lstrip("-")
    if bare.isupper():
        flag = "--" + bare.lower().replace("_", "-")
        spoken = find(profile)
        return flag if spoken is not None and spoken.flags_as_env and flag in spoken.sim_flags else bare
    return normalize_flag(raw)


def translate(profile: str, sets: Mapping[str, str]) -> dict[str, str]:
    """Engine-spelled ``--set`` pairs -> the simulator's (BUDGET and KV_TOKENS kept symbolic for :func:`apply`)."""
    table = ENGINE_FLAGS.get(profile)
    if table is None:
        return dict(sets)
    out: dict[str, str] = {}
    for raw, value in sets.items():
        name = _engine_name(profile, raw)
        target = table.get(name)
        if target is None:
            raise UsageError(f"{raw!r} has no simulated equivalent under --profile {profile}: expected one of: "
                             f"{', '.join(table)}")
        if target == NO_OP:
            if value not in NO_OP_VALUES:
                raise UsageError(f"{name}={value}: the simulated engine always has it on; only on is accepted")
            continue
        out[target] = value
    return out


def apply(scenario: Scenario, profile: str, sets: Mapping[str, str]) -> Scenario:
    """The scenario with engine-spelled ``--set`` flags applied to every process of its timeline."""
    wanted = translate(profile, sets)
    if profile not in ENGINE_FLAGS or not wanted:
        return with_overrides(scenario, wanted)
    segments = []
    for seg in scenario.segments:
        flags = {normalize_flag(k): v for k, v in seg.flags.items()}
        for target, value in wanted.items():
            if not value.isdigit():
                raise UsageError(f"bad value {value!r}: expected a positive integer")
            if target == BUDGET:
                interval = int(flags.get("--checkpoint-interval", "4096"))
                budget = int(value)
                flags[SIM_BUDGET] = value
                flags["--prefill-span"] = str(budget // interval if budget % interval == 0 and budget > interval else 1)
            elif target == KV_TOKENS:
                block = int(flags.get("--block-size", "16"))
                flags[SIM_BLOCKS] = str(max(1, int(value) // block))
            else:
                flags[target] = value
        segments.append(replace(seg, flags=flags))
    return replace(scenario, segments=tuple(segments))


def engine_argv(profile: str, config: EngineConfig) -> list[str]:
    """The process argv in the engine's spelling (what ``/proc/PID/cmdline`` of that engine would hold)."""
    if profile not in ENGINE_FLAGS:
        return config.argv()
    spoken = record(profile)  # every key of ENGINE_FLAGS is an engine's
    args = list(spoken.sim_program)
    args += [spoken.sim_model_flag, config.model] if spoken.sim_model_flag else [config.model]
    given = dict(config.argv_flags)
    for name, target in ENGINE_FLAGS[profile].items():
        if not name.startswith("--") or target == NO_OP:
            continue
        if target == BUDGET and SIM_BUDGET in given:
            args += [name, given[SIM_BUDGET]]
        elif target == KV_TOKENS and SIM_BLOCKS in given:
            args += [name, str(int(given[SIM_BLOCKS]) * config.block_size)]
        elif target in given:
            args += [name, given[target]]
    return args
