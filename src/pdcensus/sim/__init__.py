"""The engine simulator: an engine model in virtual time, named scenarios, and their ground truth.

Entry points::

    from pdcensus.sim import simulate, write_sim_dir, list_scenarios
    result = simulate("step-time-sharing", duration_seconds=3600, seed=1)
    write_sim_dir(result, "out/")

Modules, one concept each: ``config`` (flags), ``config_source`` (core/config.cpp),
``entities``, ``workload``, ``cost_model``, ``scheduler``, ``steps`` (run planning), ``kv``
(KV + prefix cache + checkpoints), ``residency`` (arena / expert slab / heat engine),
``hardware``, ``metrics_state``, ``exporter``, ``truth``, ``scenarios``, ``engine`` (the run loop),
``lifecycle`` (a request's admission, preemption, end of prefill and finish), ``run``,
``evidence`` (boot ledger, /stats, /diagnostics), ``output``, ``fitted`` (a trace workload, for
the twin :mod:`pdcensus.whatif` calibrates to a recording).
"""

from pdcensus.sim.config import Build, CheckpointPolicy, EngineConfig, parse_config
from pdcensus.sim.config_source import render_config_source
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request, RequestHandle
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import EPOCH_SECONDS, INSTANCE, JOB, SimResult, simulate
from pdcensus.sim.scenarios import Perturbation, list_scenarios, randomize

__all__ = [
    "Build", "CheckpointPolicy", "EPOCH_SECONDS", "Engine", "EngineConfig", "INSTANCE", "JOB", "Perturbation",
    "Request", "RequestHandle", "SimResult", "list_scenarios", "parse_config", "randomize",
    "render_config_source", "simulate", "write_sim_dir",
]
