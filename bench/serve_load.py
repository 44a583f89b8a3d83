"""`pdcensus serve` under load: N concurrent streaming clients plus a 1 s scraper, for a bounded run.

Starts ``pdcensus serve SCENARIO --port 0`` as a child process (real clients only unless
``--background``), drives it with :func:`pdcensus.sim.server_load.run_load` and prints one JSON
object with the figures, then a verdict against the targets:

* no errors (every stream ends with ``[DONE]``, every scrape answers);
* the p99 inter-token gap the clients saw is within the model's p99 step gap + 10 %;
* memory is flat: the server's mean RSS over the last fifth of the run is within 5 % of its
  mean over the first fifth after a warm-up.

``--pin`` (with two or more CPUs) puts the server on the first CPU and the load generator on
the others: on a shared core each token the server writes wakes a client that can preempt the
server in the middle of its fan-out, which the clients then measure as the server's jitter (on
a real deployment the clients are other machines). It is off by default: when other work
competes for the machine, a pinned server cannot move away from it and fares worse. The load
generator runs on uvloop.

Usage::

    .venv/bin/python bench/serve_load.py --clients 256 --duration 60
    .venv/bin/python bench/serve_load.py --clients 256 --duration 60 --pin
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

import numpy as np
import uvloop

from pdcensus.sim.server_load import LoadReport, run_load
from pdcensus.sim.server_process import ServeProcess

WARMUP_SECONDS = 5.0


def rss_growth(report: LoadReport) -> float:
    """Mean RSS over the last fifth of the run / mean over the first fifth after the warm-up."""
    samples = [(t, rss) for t, rss in report.rss_samples if t >= WARMUP_SECONDS]
    if len(samples) < 10:
        return float("nan")
    fifth = max(1, len(samples) // 5)
    first = np.mean([rss for _, rss in samples[:fifth]])
    last = np.mean([rss for _, rss in samples[-fifth:]])
    return float(last / first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--scenario", default="step-time-sharing")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--background", action="store_true", help="keep the scenario's own traffic too")
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompt-chars", type=int, default=800)
    parser.add_argument("--set", dest="sets", action="append", default=[], help="engine flag FLAG=VALUE")
    parser.add_argument("--pin", action="store_true",
                        help="server on the first CPU, load generator on the others (needs 2+ CPUs)")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    pinned = args.pin and len(cpus) >= 2
    with ServeProcess(args.scenario, speed=args.speed, background=args.background, sets=args.sets) as server:
        if pinned:
            os.sched_setaffinity(server.pid(), {cpus[0]})
            os.sched_setaffinity(0, set(cpus[1:]))
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            report = runner.run(run_load(server.url, clients=args.clients, duration_seconds=args.duration,
                                         speed=args.speed, max_tokens=args.max_tokens,
                                         prompt_chars=args.prompt_chars, pid=server.pid()))
        stat = open(f"/proc/{server.pid()}/stat").read().split()  # noqa: SIM115 - read once
        server_cpu_seconds = (int(stat[13]) + int(stat[14])) / os.sysconf("SC_CLK_TCK")
    growth = rss_growth(report)
    rss = [r for _, r in report.rss_samples]
    out = report.to_dict()
    out.pop("rss_samples")
    out.update({
        "server_cpu_seconds": round(server_cpu_seconds, 2),
        "rss_first_mib": round(rss[0] / 2**20, 1) if rss else None,
        "rss_max_mib": round(max(rss) / 2**20, 1) if rss else None,
        "rss_last_mib": round(rss[-1] / 2**20, 1) if rss else None,
        "rss_growth_last_vs_first_fifth": round(growth, 4),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "pinned": {"server_cpu": cpus[0], "load_generator_cpus": cpus[1:]} if pinned else None,
        "targets": {
            "no_errors": report.errors == 0 and report.scrape_errors == 0,
            "p99_gap_within_model_p99_plus_10_percent": report.gap_p99_seconds <= 1.10 * report.model_gap_p99_seconds,
            "memory_flat_within_5_percent": growth <= 1.05,
        },
    })
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
