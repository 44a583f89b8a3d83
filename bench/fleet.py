"""The fleet census at scale: N simulated endpoints backfilled into a real Prometheus, censused concurrently.

Simulates ``--instances`` endpoints (scenarios in turn, one seed each, ``--hours`` of traffic
scraped every 15 s) with distinct ``instance`` labels, writes them to one OpenMetrics file,
backfills it with ``promtool tsdb create-blocks-from openmetrics``, starts Debian's
``prometheus`` on a free port of 127.0.0.1, then runs :func:`pdcensus.fleet.census_fleet`
three ways: one endpoint at a time (batch 1, concurrency 1), one endpoint per batch with
``--concurrency`` batches in flight, and ``--batch-size`` endpoints per batch with
``--concurrency`` batches in flight; it prints the wall times, the speed-ups over one at a
time, and how many verdicts match each endpoint's ground truth.

Usage::

    .venv/bin/python bench/fleet.py --instances 100 --concurrency 4 --batch-size 25
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


from pdcensus.fleet import FleetResult, census_fleet
from pdcensus.sim.fleet_recording import FleetMember, simulate_fleet
from pdcensus.sim.run import EPOCH_SECONDS
from pdcensus.sources.openmetrics_writer import write_openmetrics
from pdcensus.sources.prometheus_local import LocalPrometheus

SCENARIOS = ("step-time-sharing", "eviction-tail", "preemption-stall", "healthy", "idle", "protected", "mixed")


def accuracy(result: FleetResult, members: list[FleetMember]) -> dict[str, Any]:
    truth = {m.instance: m.truth["mechanism"] for m in members}
    found = {e.instance: e.report.verdict.mechanism.value for e in result.endpoints if e.report is not None}
    return {"censused": len(found), "match_truth": sum(found[i] == truth[i] for i in found),
            "errors": len(result.endpoints) - len(found)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=25)
    args = parser.parse_args()
    duration = args.hours * 3600
    scenarios = [SCENARIOS[i % len(SCENARIOS)] for i in range(args.instances)]
    with tempfile.TemporaryDirectory(prefix="pdcensus-fleet-") as tmp:
        work = Path(tmp)
        t0 = time.monotonic()
        recording, members = simulate_fleet(scenarios, duration_seconds=duration, seed=1)
        t_sim = time.monotonic() - t0
        om_path = work / "fleet.om"
        t0 = time.monotonic()
        write_openmetrics(recording, om_path)
        t_write = time.monotonic() - t0
        om_mib = round(om_path.stat().st_size / 2**20, 1)
        prometheus = LocalPrometheus.backfilled(om_path, work / "prometheus")
        t_backfill = prometheus.backfill_seconds
        with prometheus:
            url = prometheus.url
            window = {"selector": '{job="radiance"}', "start": EPOCH_SECONDS, "end": EPOCH_SECONDS + duration}
            serial = census_fleet(url, concurrency=1, batch_size=1, **window)
            unbatched = census_fleet(url, concurrency=args.concurrency, batch_size=1, **window)
            parallel = census_fleet(url, concurrency=args.concurrency, batch_size=args.batch_size, **window)
    out = {
        "instances": args.instances,
        "hours_per_instance": args.hours,
        "samples_in_file": int(sum(int(e.present.sum()) for e in recording.endpoints)),
        "om_file_mib": om_mib,
        "simulate_seconds": round(t_sim, 1),
        "write_openmetrics_seconds": round(t_write, 1),
        "promtool_backfill_seconds": round(t_backfill, 1),
        "one_at_a_time_seconds": round(serial.wall_seconds, 2),
        f"batch_1_concurrency_{args.concurrency}_seconds": round(unbatched.wall_seconds, 2),
        f"batch_{args.batch_size}_concurrency_{args.concurrency}_seconds": round(parallel.wall_seconds, 2),
        "speed_up_unbatched": round(serial.wall_seconds / unbatched.wall_seconds, 2),
        "speed_up_batched": round(serial.wall_seconds / parallel.wall_seconds, 2),
        "per_endpoint_seconds_one_at_a_time": round(serial.wall_seconds / args.instances, 3),
        "verdicts": accuracy(parallel, members),
        "same_ranking_every_way": ([r.instance for r in serial.ranking] == [r.instance for r in parallel.ranking]
                                   == [r.instance for r in unbatched.ranking]),
        "worst_three": [(r.instance, r.mechanism, r.per_stream_vs_idle) for r in parallel.ranking[:3]],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
