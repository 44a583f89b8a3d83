"""The one lookup (:func:`get_knob`) for every engine's knobs, radiance's runbook table first.

Each engine's knobs live in its module of :mod:`pdcensus.engines` (radiance's runbook table in
:mod:`pdcensus.engines.radiance`; vLLM, SGLang, TGI, llama.cpp each read from its own source at a
pinned version); :func:`get_knob` with ``engine`` reads that engine's, without it radiance's
first. The types are in :mod:`pdcensus.engines.knob_types` (re-exported here for the advice).
"""

from __future__ import annotations

from pdcensus.engines import ENGINES, record
from pdcensus.engines.radiance import CATALOGUE as CATALOGUE, RADIANCE_CATALOGUE as RADIANCE_CATALOGUE
from pdcensus.errors import UsageError

from pdcensus.engines.knob_types import (  # noqa: F401 (re-exported: the catalogue's types)
    ENV_PREFIX as ENV_PREFIX, ActsOn as ActsOn,
    CounterCheck as CounterCheck, Dial as Dial, Knob as Knob, env_var_for as env_var_for,
    flag_for_env_var as flag_for_env_var,
)


def engine_knobs(engine: str | None = None) -> dict[str, Knob]:
    """Knobs of the engines other than the simulator's (each in :mod:`pdcensus.engines`), or of one engine."""
    records = [record(engine)] if engine else [r for r in ENGINES if not r.simulated]
    return {k.flag: k for r in records for k in r.catalogue.knobs}


def get_knob(flag: str, engine: str | None = None) -> Knob:
    """The entry for a flag (``--x``, ``x``, ``--x_y``, or a short alias such as ``-b``).

    With ``engine``, that engine's catalogue only; without, radiance's runbook knobs first
    (:data:`CATALOGUE`), then the other engines'. UsageError lists the choices.
    """
    name = flag if flag.startswith("-") else "--" + flag
    if name.startswith("--"):
        name = name.replace("_", "-")
    runbook = engine is None or record(engine).simulated  # radiance's runbook table, or every engine's
    if runbook and name in CATALOGUE:
        return CATALOGUE[name]
    others = engine_knobs(engine) if not runbook else ({} if engine is not None else engine_knobs())
    found = others.get(name) or next((k for k in others.values() if name in k.aliases), None)
    if found is not None:
        return found
    choices = [*others] if not runbook else [*CATALOGUE, *others]
    raise UsageError(
        f"no knob {flag!r} in the {engine or 'knob'} catalogue; choose one of: {', '.join(choices)}"
    )


def knobs_acting_on(mechanism: ActsOn) -> list[Knob]:
    return [k for k in CATALOGUE.values() if mechanism in k.acts_on]
