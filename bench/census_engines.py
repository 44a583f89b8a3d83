"""Census verdicts per engine: one simulated run exported under each engine's own names.

For each scenario and seed the simulator runs once per profile (same seed, so the same
traffic and truth); the census reads the recording under that engine's names. The table
counts, per engine, verdicts equal to the truth, ``inconclusive`` ones, and confidently wrong
ones (confidence >= 0.7). Usage::

    python bench/census_engines.py [--seeds 3] [--duration 2h]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from pdcensus.census.run import census_recording
from pdcensus.commands.base import parse_duration
from pdcensus.sim import simulate

SCENARIOS = ("step-time-sharing", "healthy", "eviction-tail", "preemption-stall")
PROFILES = ("radiance", "tgi", "sglang", "vllm")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--duration", default="2h")
    args = ap.parse_args()
    duration = parse_duration(args.duration)
    tally: dict[str, Counter[str]] = {p: Counter() for p in PROFILES}
    t0 = time.perf_counter()
    print("| scenario | seed | " + " | ".join(PROFILES) + " |\n|---|---|" + "---|" * len(PROFILES))
    for scenario in SCENARIOS:
        for seed in range(args.seeds):
            cells = []
            for profile in PROFILES:
                result = simulate(scenario, duration_seconds=duration, seed=seed, profile=profile)
                v = census_recording(result.recording)[0].verdict
                truth = result.truth["mechanism"]
                kind = ("right" if v.mechanism.value == truth else "inconclusive"
                        if v.mechanism.value == "inconclusive" else "wrong-confident"
                        if v.confidence >= 0.7 else "wrong-unsure")
                tally[profile][kind] += 1
                cells.append(f"{v.mechanism.value} {v.confidence:.2f}" + ("" if kind == "right" else " *"))
            print(f"| {scenario} | {seed} | " + " | ".join(cells) + " |", flush=True)
    print("\n| engine | right | inconclusive | wrong, conf < 0.7 | wrong, conf >= 0.7 |\n|---|---|---|---|---|")
    for p in PROFILES:
        c = tally[p]
        print(f"| {p} | {c['right']} | {c['inconclusive']} | {c['wrong-unsure']} | {c['wrong-confident']} |")
    print(f"\nwall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
