"""A large fleet made cheaply: many endpoints varied from a small pool of simulated runs, truth kept.

Simulating a thousand endpoint-days one by one costs hours; the fleet bench needs them in
minutes. :func:`simulate_pool` simulates each scenario with a few seeds for the window plus a
margin; :func:`vary_fleet` then makes each endpoint of the fleet from one pool run by

* a new ``instance`` label (``sim-<i>:7770``);
* a time shift: the window starts a whole number of scrapes into the run (0 to the margin), so two
  endpoints from one run see different traffic at the same clock time; timestamps are moved back
  so every endpoint covers the same window; counters keep counting (they do not start at 0, as on
  a process that was already up);
* multiplicative noise on the decode and prefill gauges (log-normal, ``noise`` = its sigma),
  which leaves every counter, and so the step ledger and the preemptions, as simulated.

What is kept: the run's ground truth (the mechanisms and each one's share of decoders' time
over the whole run) travels with every endpoint made from it. The shift makes the window a part
of the run, so the truth of a window is the run's, not re-measured: a recall against it is a
recall against the run-level truth. Endpoints that share a run share its truth; a ranking
measured against it must treat them as ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdcensus.errors import UsageError
from pdcensus.series.model import Endpoint, Family, Recording
from pdcensus.sim.fleet_recording import FleetMember, instance_name, member_truth, relabel
from pdcensus.sim.run import simulate

NOISY_GAUGES = ("radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second")


@dataclass(frozen=True)
class PoolRun:
    """One simulated run of the pool: its endpoint, families and truth."""

    scenario: str
    seed: int
    endpoint: Endpoint
    families: dict[str, Family]
    truth: dict[str, Any]

    @property
    def truth_loss(self) -> float:
        """Decoders' time lost to every true mechanism, as a share (the simulator's truth)."""
        return float(sum((self.truth.get("loss_share") or {}).values()))


def simulate_pool(scenarios: Sequence[str], *, seeds: int, duration_seconds: float, margin_seconds: float = 1800.0,
                  scrape_interval_seconds: float = 15.0, first_seed: int = 1) -> list[PoolRun]:
    """Each scenario simulated with ``seeds`` seeds for ``duration + margin``."""
    if seeds < 1 or not scenarios:
        raise UsageError("a pool needs at least one scenario and one seed")
    pool = []
    for scenario in scenarios:
        for k in range(seeds):
            seed = first_seed + k
            result = simulate(scenario, duration_seconds=duration_seconds + margin_seconds, seed=seed,
                              scrape_interval_seconds=scrape_interval_seconds)
            pool.append(PoolRun(scenario, seed, result.recording.endpoints[0], dict(result.recording.families),
                                result.truth))
    return pool


def _window(endpoint: Endpoint, shift_rows: int, rows: int, noise: float, rng: np.random.Generator) -> Endpoint:
    sl = slice(shift_rows, shift_rows + rows)
    timestamps = endpoint.timestamps[sl] - (endpoint.timestamps[shift_rows] - endpoint.timestamps[0])
    values = endpoint.values[sl].copy()
    if noise > 0:
        for c, key in enumerate(endpoint.keys):
            if key.name in NOISY_GAUGES:
                values[:, c] *= rng.lognormal(0.0, noise, size=values.shape[0])
    return Endpoint(endpoint.job, endpoint.instance, timestamps, list(endpoint.keys), values,
                    endpoint.present[sl].copy())


def vary_fleet(pool: Sequence[PoolRun], instances: int, *, duration_seconds: float, seed: int = 0,
               noise: float = 0.02, scrape_interval_seconds: float = 15.0) -> tuple[Recording, list[FleetMember]]:
    """``instances`` endpoints over ``[0, duration]`` of the pool's clock, run ``i % len(pool)`` each."""
    if instances < 1 or not pool:
        raise UsageError("a fleet needs at least one instance and a pool")
    rng = np.random.default_rng(seed)
    rows = int(round(duration_seconds / scrape_interval_seconds)) + 1
    endpoints, members, families = [], [], {}
    for i in range(instances):
        run = pool[i % len(pool)]
        spare = run.endpoint.n_scrapes - rows
        if spare < 0:
            raise UsageError(f"pool run {run.scenario}/{run.seed} is shorter than the window")
        shift = int(rng.integers(0, spare + 1))
        name = instance_name(i)
        endpoints.append(relabel(_window(run.endpoint, shift, rows, noise, rng), name))
        families.update(run.families)
        truth = member_truth(run.truth, name)
        truth["varied_from"] = {"scenario": run.scenario, "seed": run.seed, "shift_seconds": shift * scrape_interval_seconds,
                                "gauge_noise_sigma": noise}
        members.append(FleetMember(name, run.scenario, run.seed, truth))
    return Recording(families=families, endpoints=endpoints, source=f"varied fleet of {instances}"), members
