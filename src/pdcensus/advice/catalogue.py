"""The knob catalogue per engine, read through one interface by recommend, lint and verify-arm.

Each engine's knobs are data in its module of :mod:`pdcensus.engines` (read from that engine's
source at a pinned version, cited in the module's docstring; radiance's restate its runbook).
:func:`engine_catalogue` returns one through the registry; :func:`engine_of_profile` maps a census
metric profile (``vllm-v1``, ``radiance-1.8``, ...) to its engine, and :func:`engine_of_argv` reads
the engine from a process's argv. :func:`markdown_table` writes one catalogue for ``docs/engines.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdcensus.engines import NAMES, of_argv, of_profile, record
from pdcensus.engines.record import EngineCatalogue, Gap

ENGINES = NAMES
__all__ = ["ENGINES", "EngineCatalogue", "Gap", "engine_catalogue", "engine_of_argv", "engine_of_profile"]


def engine_catalogue(engine: str) -> EngineCatalogue:
    """The catalogue of one engine (UsageError lists the engines)."""
    return record(engine).catalogue


def engine_of_profile(profile: str) -> str:
    """``radiance-1.8`` -> radiance, ``vllm-v1`` -> vllm, ``sglang`` -> sglang; unknown -> radiance."""
    return of_profile(profile).name


def engine_of_argv(args: Sequence[str]) -> str | None:
    """The engine a process's argv runs (``vllm serve``, ``sglang.launch_server``, ``llama-server``, ...)."""
    found = of_argv(args)
    return found.name if found is not None else None


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
