"""Deploy lines that are complete, in the engine's own spelling, and the deployed argv read back.

A recommendation is deployable only if every precondition travels in the same line: radiance's
``--prefill-span 1`` with its ``--max-num-batched-tokens``, vLLM's budget with a
``--max-num-seqs`` no larger, TGI's prefill budget with ``PREFILL_CHUNKING=1``. Each engine's
catalogue says which (``EngineCatalogue.complete``); :func:`deploy_line` assembles the line in
three forms: the flags (argv), the env lines (for engines that read env for the flag:
radiance's serve script, TGI's launcher, llama.cpp's ``LLAMA_ARG_*``), and a Kubernetes
container ``args`` fragment (a YAML list, each item quoted). vLLM and SGLang read no env for
these flags: their line is the argv.

:func:`deployed_from_labels` reads what an engine exports of its own configuration (vLLM's
``vllm:cache_config_info`` labels), and :func:`deployed_flags` what is already deployed (argv from
``--cmdline``/``--evidence``, which wins over the labels,
a ``--x_y`` spelled ``--x-y``, a short alias as its long flag) so that advice never recommends
a value already set: :func:`same_value` compares numbers as numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pdcensus.advice.catalogue import engine_catalogue
from pdcensus.advice.evidence import flags_from_argv
from pdcensus.advice.knobs import env_var_for
from pdcensus.engines import record
from pdcensus.series.model import Endpoint


@dataclass(frozen=True)
class DeployLine:
    """The arm as argv, env and Kubernetes args, with the rollback beside it.

    ``pairs`` are ``(name, value)``: a name with dashes is a flag (value ``""`` for a bare
    switch), a name without is an env variable only (TGI's ``PREFILL_CHUNKING``).
    """

    engine: str
    pairs: tuple[tuple[str, str], ...]
    env: tuple[str, ...]
    rollback_pairs: tuple[tuple[str, str | None], ...]
    rollback_env: tuple[str, ...]
    notes: tuple[str, ...] = ()

    def flags(self) -> tuple[tuple[str, str], ...]:
        return tuple(p for p in self.pairs if p[0].startswith("-"))

    def argv(self) -> list[str]:
        out: list[str] = []
        for flag, value in self.flags():
            out += [flag, value] if value != "" else [flag]
        return out

    def argv_fragment(self) -> str:
        return " ".join(self.argv())

    def k8s_args(self) -> str:
        """A container ``args:`` fragment (YAML list; json-quoted items are valid YAML), plus ``env:`` for
        the settings the engine reads only from its environment."""
        text = "args:\n" + "".join(f"  - {json.dumps(a)}\n" for a in self.argv())
        env = [(n, v) for n, v in self.pairs if not n.startswith("-")]
        if env:
            text += "env:\n" + "".join(f"  - name: {n}\n    value: {json.dumps(v)}\n" for n, v in env)
        return text

    def env_only(self) -> tuple[str, ...]:
        return tuple(f"{n}={v}" for n, v in self.pairs if not n.startswith("-"))

    def primary(self) -> str:
        """The line an operator deploys: the env lines where the engine reads env for every flag, else argv."""
        if self.env and len(self.env) == len(self.pairs):
            return " ".join(self.env)
        return " ".join(p for p in (" ".join(self.env_only()), self.argv_fragment()) if p)

    def rollback_primary(self) -> str:
        if self.rollback_env and len(self.rollback_env) == len(self.rollback_pairs):
            return " ".join(self.rollback_env)
        parts = [f"{f} {v}" if v else f"(drop {f})" for f, v in self.rollback_pairs if f.startswith("-")]
        return " ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {"engine": self.engine, "flags": [list(p) for p in self.flags()], "argv": self.argv_fragment(),
                "env": list(self.env), "env_only": list(self.env_only()), "k8s_args": self.k8s_args(),
                "rollback": self.rollback_primary(), "rollback_env": list(self.rollback_env),
                "notes": list(self.notes)}


def _env_name(engine: str, name: str) -> str:
    if not name.startswith("-"):
        return name
    knob = engine_catalogue(engine).knob(name)
    if knob is not None:
        return knob.env_var
    return env_var_for(name) if record(engine).env_from_flag_name else ""


def deploy_line(engine: str, flag: str, value: str, deployed: Mapping[str, str]) -> DeployLine:
    """The complete line for ``flag value`` on ``engine``, given the flags already deployed."""
    catalogue = engine_catalogue(engine)
    extra, notes = catalogue.complete(flag, value, deployed)
    pairs = ((flag, value), *extra)
    env: list[str] = []
    rollback_env: list[str] = []
    rollback: list[tuple[str, str | None]] = []
    for name, v in pairs:
        before = deployed.get(name)
        knob = catalogue.knob(name) if name.startswith("-") else None
        if before is None and knob is not None and knob.default and " " not in knob.default:
            before = knob.default  # the build's default, where the catalogue states it as a value
        rollback.append((name, before))
        var = _env_name(engine, name)
        if var:
            env.append(f"{var}={v}")
            rollback_env.append(f"{var}={before if before is not None else ''}")
    return DeployLine(engine, tuple(pairs), tuple(env), tuple(rollback), tuple(rollback_env), tuple(notes))


def deployed_flags(flags_or_args: Mapping[str, str] | Sequence[str], engine: str) -> dict[str, str]:
    """The deployed flags under each knob's long spelling (``--x_y`` -> ``--x-y``, ``-b`` -> ``--batch-size``)."""
    if isinstance(flags_or_args, Mapping):
        raw = dict(flags_or_args)
    else:
        raw = flags_from_argv(list(flags_or_args), short=record(engine).short_flags)
    catalogue = engine_catalogue(engine)
    out: dict[str, str] = {}
    for name, value in raw.items():
        long = name.replace("_", "-") if name.startswith("--") else name
        knob = catalogue.knob(long)
        out[knob.flag if knob is not None else long] = value
    return out


# Engines that export their configuration as an info gauge's labels: label -> the flag it reports.
# vLLM: vllm:cache_config_info carries every CacheConfig field (vllm/config/cache.py metrics_info, v0.19.1).
CONFIG_LABELS: dict[str, dict[str, str]] = {
    "vllm:cache_config_info": {"gpu_memory_utilization": "--gpu-memory-utilization", "block_size": "--block-size",
                               "num_gpu_blocks_override": "--num-gpu-blocks-override",
                               "kv_cache_memory_bytes": "--kv-cache-memory-bytes",
                               "kv_offloading_size": "--kv-offloading-size"},
}


def deployed_from_labels(endpoint: Endpoint) -> dict[str, str]:
    """The flags an engine's own config labels say are in effect (``None`` values are not set)."""
    out: dict[str, str] = {}
    for name, fields in CONFIG_LABELS.items():
        for key in endpoint.select(name):
            for label, flag in fields.items():
                value = key.label(label)
                if value not in (None, "", "None"):
                    out[flag] = str(value)
    return out


def same_value(a: str | None, b: str | None) -> bool:
    """Two argv values name the same setting (``0.90`` = ``0.9``, ``4096`` = ``4096``)."""
    if a is None or b is None:
        return False
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()
