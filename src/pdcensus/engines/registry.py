"""The engines pdcensus knows, listed once: adding an engine is its module plus its import and entry here.

Each module of :mod:`pdcensus.engines` builds one :class:`~pdcensus.engines.record.EngineRecord`;
:data:`ENGINES` lists them in the order the catalogue, lint and ``pdcensus knobs`` show them.
Everything outside the wing asks a record (``record(profile.engine).itl_per_request_mean``)
instead of comparing an engine's name. Each module is imported by its own name, never
``from pdcensus.engines import ...``, which would read the package's ``__init__`` (it imports
this registry) and make a circle.
"""

from __future__ import annotations

from collections.abc import Sequence

import pdcensus.engines.llamacpp as llamacpp
import pdcensus.engines.radiance as radiance
import pdcensus.engines.sglang as sglang
import pdcensus.engines.tgi as tgi
import pdcensus.engines.vllm as vllm
import pdcensus.engines.vllm_0_32 as vllm_0_32
from pdcensus.engines.record import EngineRecord, EngineRelease
from pdcensus.errors import UsageError

ENGINES: tuple[EngineRecord, ...] = (
    radiance.RECORD,
    vllm.RECORD,
    sglang.RECORD,
    tgi.RECORD,
    llamacpp.RECORD,
)
# releases whose facts are cited line by line (defaults, flags file, the twin's refusals); the last per engine is
# in force
RELEASES: tuple[EngineRelease, ...] = (
    vllm_0_32.RELEASE,
)
NAMES: tuple[str, ...] = tuple(r.name for r in ENGINES)
_BY_NAME = {r.name: r for r in ENGINES}
SIMULATED: EngineRecord = next(r for r in ENGINES if r.simulated)  # the simulator's own engine


def find(name: str) -> EngineRecord | None:
    """The record of ``name`` (an engine, as profiles name it), or None."""
    return _BY_NAME.get(name)


def record(name: str) -> EngineRecord:
    """The record of ``name`` (UsageError lists the engines)."""
    found = _BY_NAME.get(name)
    if found is None:
        raise UsageError(f"unknown engine {name!r}: expected one of: {', '.join(NAMES)}")
    return found


def of_profile(profile: str) -> EngineRecord:
    """``radiance-1.8`` -> radiance, ``vllm-v1`` -> vllm, ``sglang`` -> sglang; unknown -> the simulator's engine."""
    return _BY_NAME.get(profile.split("-")[0].lower(), SIMULATED)


def of_argv(args: Sequence[str]) -> EngineRecord | None:
    """The engine a process's argv runs (``vllm serve``, ``sglang.launch_server``, ``llama-server``, ...)."""
    text = " ".join(args[:4]).lower()
    for r in sorted(ENGINES, key=lambda r: r.argv_order):
        if r.argv_needle and r.argv_needle in text:
            return r
    return None


def release(name: str) -> EngineRelease | None:
    """The release of engine ``name`` in force (the last one listed), or None where none is cited."""
    return next((r for r in reversed(RELEASES) if r.engine == name), None)


def newest_release(name: str) -> EngineRelease:
    """:func:`release`, for an engine that has one (UsageError otherwise)."""
    found = release(name)
    if found is None:
        raise UsageError(f"no cited release of {name!r}: releases are of {', '.join(sorted({r.engine for r in RELEASES}))}")
    return found
