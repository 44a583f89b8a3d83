"""Simulator speed: simulated seconds per wall second, and peak memory, over a day of virtual time.

Usage:  .venv/bin/python bench/sim_speed.py [--hours 24] [--scenario NAME ...]

The headline load is a busy endpoint: 64 sequences in the batch, long-prompt sessions
(32k-token documents, multi-turn, long reasoning outputs), on a KV cache of 3.2M tokens
(a box with several cards' worth of KV). Named scenarios can be timed too.
Prints one line per run: load, virtual hours, wall and CPU seconds, speed-up, peak RSS
(on a shared machine the CPU-time figure is the one that does not depend on the neighbours).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

from pdcensus.sim.config import Build
from pdcensus.sim.run import simulate_scenario
from pdcensus.sim.scenarios import SERVE_FLAGS, Scenario, Segment, get_scenario
from pdcensus.sim.workload import ArrivalKind, Arrivals, Lengths, Sessions, Workload

BUSY = Scenario(
    "busy-long-sessions",
    "64 sequences of long-prompt, multi-turn sessions with long outputs",
    (Segment(1.0, Build.V1_8_3, {**SERVE_FLAGS, "--num-gpu-blocks-override": "200000"}, Workload(sessions=(
        Sessions(Arrivals(ArrivalKind.DIURNAL, 1 / 6, amplitude=0.3),
                 first_prompt=Lengths(32000, 0.3, 8000, 60000), turn_tokens=Lengths(600, 0.5, 16, 4000),
                 output=Lengths(6000, 0.4, 500, 16000), turns=Lengths(4, 0.4, 1, 12), think_seconds=30.0),
    ))),),
)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--scenario", action="append", default=[])
    args = parser.parse_args(argv)
    specs = [BUSY] + [get_scenario(name) for name in args.scenario]
    duration = args.hours * 3600.0
    for spec in specs:
        started, cpu_started = time.perf_counter(), time.process_time()
        result = simulate_scenario(spec, duration_seconds=duration, seed=0)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        engine = result.engine
        steps = int(engine.metrics.steps) if engine is not None else 0
        print(f"{spec.name}: {args.hours:g} h virtual in {wall:.2f} s wall ({cpu:.2f} s CPU) = "
              f"{duration / wall:,.0f}x real time ({duration / cpu:,.0f}x per CPU second); "
              f"{steps:,} steps, {result.recording.endpoint().n_scrapes} scrapes, "
              f"mean decoders {result.truth['mean_decoders']}, peak RSS {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
