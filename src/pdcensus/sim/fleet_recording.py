"""A simulated fleet: several scenario recordings in one Recording, one ``instance`` label each.

The fleet census (:mod:`pdcensus.fleet`) is tested and benchmarked on a Prometheus that holds
many endpoints. :func:`simulate_fleet` simulates each member with its own scenario and seed,
relabels its series with a distinct ``instance`` (``sim-<i>:7770`` by default) and joins them,
so that ``write_openmetrics`` writes one file that ``promtool tsdb create-blocks-from
openmetrics`` backfills as a fleet. The ground truth of each member comes back beside it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pdcensus.errors import UsageError
from pdcensus.series.model import Endpoint, Family, Recording, SeriesKey, normalize_labels
from pdcensus.sim.run import simulate


@dataclass(frozen=True)
class FleetMember:
    """One simulated endpoint of the fleet: where it is, what it ran, what really happened."""

    instance: str
    scenario: str
    seed: int
    truth: dict[str, Any]


def relabel(endpoint: Endpoint, instance: str, job: str | None = None) -> Endpoint:
    """The same samples under another ``instance`` (and optionally ``job``) label."""
    new_job = endpoint.job if job is None else job
    keys = [SeriesKey(k.name, normalize_labels({**dict(k.labels), "instance": instance, "job": new_job}))
            for k in endpoint.keys]
    return Endpoint(new_job, instance, endpoint.timestamps, keys, endpoint.values, endpoint.present)


def member_truth(truth: dict[str, Any], instance: str) -> dict[str, Any]:
    """A copy of a simulation's ``truth`` that names ``instance`` (the simulator always says ``sim-0:7770``).

    The ``instance`` field is replaced; where ``instance`` ends in ``:PORT``, ``--port`` in the
    flags of the truth and of every segment (and in a segment's ``argv`` if it was given there)
    becomes that port, so the truth describes the process that member stands for.
    """
    out = copy.deepcopy(truth)
    out["instance"] = instance
    host, sep, port = instance.rpartition(":")
    if not (sep and host and port.isdigit()):
        return out
    for flags in [out.get("flags")] + [seg.get("flags") for seg in out.get("segments", [])]:
        if isinstance(flags, dict) and "--port" in flags:
            flags["--port"] = port
    for seg in out.get("segments", []):
        argv = seg.get("argv")
        if isinstance(argv, list):
            seg["argv"] = [port if i > 0 and argv[i - 1] == "--port" else a for i, a in enumerate(argv)]
    return out


def instance_name(index: int) -> str:
    return f"sim-{index}:7770"


def simulate_fleet(
    scenarios: Sequence[str],
    *,
    duration_seconds: float = 3600.0,
    scrape_interval_seconds: float = 15.0,
    seed: int = 0,
    name: Callable[[int], str] = instance_name,
) -> tuple[Recording, list[FleetMember]]:
    """Simulate one endpoint per entry of ``scenarios`` (member ``i`` uses seed ``seed + i``)."""
    if not scenarios:
        raise UsageError("a fleet needs at least one scenario")
    endpoints: list[Endpoint] = []
    families: dict[str, Family] = {}
    members: list[FleetMember] = []
    for i, scenario in enumerate(scenarios):
        result = simulate(scenario, duration_seconds=duration_seconds, seed=seed + i,
                          scrape_interval_seconds=scrape_interval_seconds)
        instance = name(i)
        for endpoint in result.recording.endpoints:
            endpoints.append(relabel(endpoint, instance))
        families.update(result.recording.families)
        members.append(FleetMember(instance, scenario, seed + i, member_truth(result.truth, instance)))
    return Recording(families=families, endpoints=endpoints, source=f"sim fleet of {len(scenarios)}"), members
