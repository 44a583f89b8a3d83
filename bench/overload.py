"""Overload on real vLLM runs and on every simulator scenario: what the census says beside the truth.

Real runs (``../shared/realdata/vllm-inferencex``): the census's overload finding and its
Little's-law queue wait, beside what the clients felt (the harness's per-request TTFT p50, where
the records exist). Simulator: the census's finding beside the engine's own accounting of
arrivals against completions (``truth.json``'s ``capacity``). Usage::

    python bench/overload.py [--duration 7200] [--seed 0]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from pdcensus.census.overload import detect_overload
from pdcensus.census.run import CensusOptions, census_recording, read_shape
from pdcensus.sim import list_scenarios, simulate
from pdcensus.sources.client_records import load_client_records
from pdcensus.sources.load import load_source

ROOT = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "vllm-inferencex"


def real_rows() -> list[str]:
    rows = ["| run | users | waiting (mean) | running (mean) | queued share of residence | queue wait, Little (s) | "
            "client TTFT p50 (s) | overloaded | signatures |", "|---|---|---|---|---|---|---|---|---|"]
    for path in sorted(ROOT.glob("*/*.om.gz")):
        rec = load_source(path)
        over = detect_overload(read_shape(rec.endpoints[0], rec.families, str(path)).signals)
        run = path.name.removesuffix(".om.gz")
        users = run.split("_bs")[1].split("_")[0]
        records = path.with_name(run + ".client_requests.csv.gz")
        ttft = "-"
        if records.exists():
            reqs = load_client_records(records)
            ttft = f"{np.median([r.first_token - r.start for r in reqs]):.2f}"
        rows.append(f"| {path.parent.name}/{run} | {users} | {over.waiting_mean:.1f} | {over.running_mean:.1f} | "
                    f"{over.queue_share_of_residence:.2f} | {over.queue_wait_seconds:.1f} | {ttft} | "
                    f"{'**yes**' if over.overloaded else 'no'} | {', '.join(s.value for s in over.signatures)} |")
    return rows


def sim_rows(duration: float, seed: int) -> list[str]:
    rows = ["| scenario | truth: arrived | truth: waiting at end | truth: overloaded | census: overloaded | "
            "queue start -> end | slope (req/min, 90 % interval) | preempted minutes | capacity factor |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, _ in list_scenarios():
        result = simulate(name, duration_seconds=duration, seed=seed)
        cap = result.truth["capacity"]
        over = census_recording(result.recording, CensusOptions())[0].overload
        assert over is not None
        lo, hi = over.waiting_slope_interval
        rows.append(f"| {name} | {cap['arrived']} | {cap['waiting_end']} | {cap['overloaded']} | {over.overloaded} | "
                    f"{over.waiting_start:.0f} -> {over.waiting_end:.0f} | {over.waiting_slope_per_minute:+.2f} "
                    f"({lo:+.2f}, {hi:+.2f}) | {over.preemption_minutes_share:.0%} | {over.capacity_factor:.2f} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=7200.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    t0 = time.perf_counter()
    print("\n".join(real_rows()))
    print()
    print("\n".join(sim_rows(args.duration, args.seed)))
    print(f"\n({time.perf_counter() - t0:.0f} s wall)")


if __name__ == "__main__":
    main()
