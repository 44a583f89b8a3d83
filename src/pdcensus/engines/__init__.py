"""The engines wing: everything pdcensus knows about each serving engine, one module per engine.

:mod:`.radiance` (the simulator's engine), :mod:`.vllm`, :mod:`.sglang`, :mod:`.tgi` and
:mod:`.llamacpp` each build one :class:`~pdcensus.engines.record.EngineRecord`: the metric
profiles it exports, when its counters move, its knob catalogue (flags, env, versions, what each
acts on, cost, rollback, the counter that proves it engaged), and how the simulator and the
what-if speak its flags. :mod:`.registry` lists them; the rest of pdcensus asks a record and
never compares an engine's name (a test holds it to that).

The wing sits at the bottom of the layers (it imports only :mod:`pdcensus.errors`), so the
series, the census, the advice, lint, the simulator and the what-if can all read it.
"""

from __future__ import annotations

from pdcensus.engines.record import Advice, DeployedValue, EngineCatalogue, EngineRecord, EngineRelease, Gap, PromptCounting
from pdcensus.engines.registry import (
    ENGINES, NAMES, RELEASES, SIMULATED, find, newest_release, of_argv, of_profile, record, release,
)

__all__ = ["ENGINES", "NAMES", "RELEASES", "SIMULATED", "Advice", "DeployedValue", "EngineCatalogue", "EngineRecord",
           "EngineRelease", "Gap", "PromptCounting", "find", "newest_release", "of_argv", "of_profile", "record", "release"]
