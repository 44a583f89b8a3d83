"""Census accuracy on randomized simulator runs: accuracy, confident-wrong count, calibration.

Each run draws a scenario, a seed and a perturbation of the simulator's calibration
(cost constants +-30 %, scrape interval 10-30 s, chunk size, load) with
``pdcensus.sim.randomize``, simulates it, runs the census and compares the verdict with
the simulator's ground truth. Usage::

    python bench/census_accuracy.py [--runs 60] [--duration 2h] [--first-seed 1000]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from found_scores import Scored, found_table  # noqa: E402

from pdcensus.census.run import census_recording  # noqa: E402
from pdcensus.commands.base import parse_duration  # noqa: E402
from pdcensus.errors import UsageError  # noqa: E402
from pdcensus.sim import list_scenarios, randomize, simulate  # noqa: E402

BINS = ((0.0, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--duration", default="2h")
    ap.add_argument("--first-seed", type=int, default=1000)
    args = ap.parse_args()
    scenarios = [name for name, _ in list_scenarios()]
    rng = random.Random(args.first_seed)
    rows = []
    scored: list[Scored] = []
    skipped: list[str] = []
    t0 = time.perf_counter()
    for k in range(args.runs):
        seed = args.first_seed + k
        scenario = rng.choice(scenarios)
        pert = randomize(seed)
        try:
            result = simulate(scenario, duration_seconds=parse_duration(args.duration), seed=seed, perturbation=pert)
        except UsageError as exc:  # the simulator refused this perturbation of the scenario's flags
            skipped.append(f"{scenario} seed={seed}: {exc}")
            continue
        v = census_recording(result.recording)[0].verdict
        truth = result.truth["mechanism"]
        scored.append(Scored({f["mechanism"]: f["severity"] for f in result.truth["found"]},
                             {f.mechanism.value: f.severity.value for f in v.found}, truth, v.mechanism.value,
                             v.confidence))
        ok = v.mechanism.value == truth
        rows.append((scenario, seed, pert.scrape_interval_seconds, truth, v.mechanism.value, v.confidence, ok))
        print(f"{scenario:18s} seed={seed} scrape={pert.scrape_interval_seconds:.0f}s truth={truth:18s} "
              f"census={v.mechanism.value:18s} conf={v.confidence:.2f} {'ok' if ok else 'WRONG'}", flush=True)
    n = len(rows)
    correct = sum(r[6] for r in rows)
    confident_wrong = sum(1 for r in rows if not r[6] and r[5] >= 0.7)
    inconclusive_wrong = sum(1 for r in rows if not r[6] and r[4] == "inconclusive")
    print(f"\nruns {n}, accuracy {correct}/{n} = {correct / n:.1%}, confident-wrong (conf >= 0.7) "
          f"{confident_wrong}, wrong-but-inconclusive {inconclusive_wrong}, wall {time.perf_counter() - t0:.0f} s")
    print("\n" + found_table(scored) + "\n")
    print("| confidence | runs | accuracy |\n|---|---|---|")
    for lo, hi in BINS:
        sel = [r for r in rows if lo <= r[5] < hi]
        acc = f"{sum(r[6] for r in sel) / len(sel):.0%}" if sel else "-"
        print(f"| [{lo:.1f}, {min(hi, 1.0):.1f}{')' if hi < 1 else ']'} | {len(sel)} | {acc} |")
    if skipped:
        print(f"\nskipped {len(skipped)} runs the simulator refused:")
        for line in skipped:
            print(f"  {line}")
    wrong = [r for r in rows if not r[6]]
    if wrong:
        print("\nwrong verdicts:")
        for r in wrong:
            print(f"  {r[0]} seed={r[1]} scrape={r[2]:.0f}s truth={r[3]} census={r[4]} conf={r[5]:.2f}")


if __name__ == "__main__":
    main()
