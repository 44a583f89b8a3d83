"""Simulator speed: simulated seconds per wall second, and peak memory, over a day of virtual time.

Usage:  .venv/bin/python bench/sim_speed.py [--hours 24] [--scenario NAME ...]
        .venv/bin/python bench/sim_speed.py --baseline DIR [--repeat 3] [--hours 24] [--scenario NAME ...]

The headline load is a busy endpoint: 64 sequences in the batch, long-prompt sessions
(32k-token documents, multi-turn, long reasoning outputs), on a KV cache of 3.2M tokens
(a box with several cards' worth of KV). Named scenarios can be timed too.
Prints one line per run: load, virtual hours, wall and CPU seconds, speed-up, peak RSS
(on a shared machine the CPU-time figure is the one that does not depend on the neighbours).

With ``--baseline DIR`` (a source tree holding another version's ``pdcensus`` package, e.g.
``git archive REV src | tar -x -C DIR``), each load is timed ``--repeat`` times, the baseline
and this tree alternately, each in a fresh process; the ratio is taken within each pair and the
median of the pairs is printed, so the neighbours' load cancels as far as it can.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

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


def _time_one(name: str, hours: float) -> dict[str, float]:
    spec = BUSY if name == BUSY.name else get_scenario(name)
    started, cpu_started = time.perf_counter(), time.process_time()
    simulate_scenario(spec, duration_seconds=hours * 3600.0, seed=0)
    return {"wall": time.perf_counter() - started, "cpu": time.process_time() - cpu_started}


def _timed_in(source: Path | None, name: str, hours: float) -> dict[str, float]:
    """One run in a fresh process, on ``source``'s package (None: this tree's)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    done = subprocess.run([sys.executable, __file__, "--one", name, "--hours", str(hours)],
                          env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def compare(baseline: Path, names: list[str], hours: float, repeat: int) -> None:
    duration = hours * 3600.0
    print(f"{'load':22} {'baseline CPU s':>15} {'this CPU s':>11} {'this x real time (CPU)':>23} "
          f"{'CPU ratio':>10} {'wall ratio':>11}  (medians of {repeat} alternating pairs)")
    for name in names:
        pairs = [(_timed_in(baseline, name, hours), _timed_in(None, name, hours)) for _ in range(repeat)]
        base_cpu = statistics.median(b["cpu"] for b, _ in pairs)
        this_cpu = statistics.median(t["cpu"] for _, t in pairs)
        cpu_ratio = statistics.median(b["cpu"] / t["cpu"] for b, t in pairs)
        wall_ratio = statistics.median(b["wall"] / t["wall"] for b, t in pairs)
        print(f"{name:22} {base_cpu:15.2f} {this_cpu:11.2f} {duration / this_cpu:23,.0f} "
              f"{cpu_ratio:9.2f}x {wall_ratio:10.2f}x", flush=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--baseline", type=Path, help="another version's source tree to compare with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_time_one(args.one, args.hours)))
        return 0
    if args.baseline is not None:
        compare(args.baseline, [BUSY.name, *args.scenario], args.hours, args.repeat)
        return 0
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
