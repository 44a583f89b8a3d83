"""Calibration of the census's confidence on every labelled set the project has, in one table.

For each set: among verdicts at 0.7 or more, the share whose headline is right; the same for
0.5-0.7 and under 0.5; the spread of the confidences (min / p10 / median / p90 / max); and every
settle note (a cap's reason) that fired on *all* of the set's verdicts, since a cap that fires on
every recording of a kind is a rule to revisit with a measurement, not a constant.

The sets: randomized simulator runs (``pdcensus.sim.randomize``, truth from the simulator), the
alien engine model (``tests/census/alien``, its own truth), the real InferenceX vLLM recordings
(``../shared/realdata/vllm-inferencex``: no per-run label, so only the spread and the caps), and,
where their folders are given, the live vLLM runs of ``bench/vllm_live.py`` (truth from the
clients and the schedule, ``bench/vllm_live_table.py``). Usage::

    python bench/calibration.py [--sim-runs 60] [--alien-seeds 20] [--live DIR ...]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from census.alien.engine import Cause  # noqa: E402
from census.alien.export import METRIC_SETS  # noqa: E402
from census.alien.generator import make_recording, random_config  # noqa: E402

from pdcensus.census.run import census_recording  # noqa: E402
from pdcensus.errors import UsageError  # noqa: E402
from pdcensus.sim import list_scenarios, randomize, simulate  # noqa: E402
from pdcensus.sources.load import load_source  # noqa: E402

REALDATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "realdata" / "vllm-inferencex"
SURE, LEAN = 0.7, 0.5


@dataclass(frozen=True)
class Judged:
    """One verdict: its confidence, whether its headline is right (None: the set has no label), its notes."""

    confidence: float
    right: bool | None
    settle: tuple[str, ...]


def _share(sel: Sequence[Judged]) -> str:
    labelled = [j for j in sel if j.right is not None]
    if not labelled:
        return f"- ({len(sel)} verdicts, no label)" if sel else "- (0)"
    right = sum(bool(j.right) for j in labelled)
    return f"{right / len(labelled):.0%} ({right}/{len(labelled)})"


def row(name: str, judged: Sequence[Judged]) -> str:
    """One markdown line of the calibration table."""
    c = np.array([j.confidence for j in judged])
    spread = " / ".join(f"{x:.2f}" for x in (c.min(), *np.percentile(c, [10, 50, 90]), c.max()))
    every = Counter(note for j in judged for note in set(j.settle))
    always = [note for note, n in every.items() if n == len(judged)]
    caps = "; ".join(f"\"{note[:90]}{'...' if len(note) > 90 else ''}\"" for note in always) or "none"
    return (f"| {name} | {len(judged)} | {_share([j for j in judged if j.confidence >= SURE])} | "
            f"{_share([j for j in judged if LEAN <= j.confidence < SURE])} | "
            f"{_share([j for j in judged if j.confidence < LEAN])} | {spread} | {caps} |")


def simulator(runs: int, first_seed: int, duration_seconds: float) -> list[Judged]:
    scenarios = [name for name, _ in list_scenarios()]
    rng = random.Random(first_seed)
    out = []
    for k in range(runs):
        seed, scenario = first_seed + k, rng.choice(scenarios)
        try:
            result = simulate(scenario, duration_seconds=duration_seconds, seed=seed, perturbation=randomize(seed))
        except UsageError:  # the simulator refused this perturbation of the scenario's flags
            continue
        v = census_recording(result.recording)[0].verdict
        out.append(Judged(v.confidence, v.mechanism.value == result.truth["mechanism"], v.settle))
    return out


def alien(seeds: int, duration_seconds: float) -> list[Judged]:
    out = []
    for seed in range(seeds):
        for c, cause in enumerate(Cause):
            cfg = random_config(seed, cause=cause, metric_set=METRIC_SETS[(seed + c) % len(METRIC_SETS)],
                                duration_seconds=duration_seconds)
            recording, truth = make_recording(cfg)
            v = census_recording(recording)[0].verdict
            out.append(Judged(v.confidence, v.mechanism.value == truth.mechanism, v.settle))
    return out


def inferencex(root: Path) -> list[Judged]:
    out = []
    for path in sorted(root.glob("*/*.om.gz")):
        v = census_recording(load_source(path))[0].verdict
        out.append(Judged(v.confidence, None, v.settle))
    return out


def live(folders: Sequence[Path]) -> list[Judged]:
    from vllm_live_table import cause_of, recensus  # the live table's own truth rule

    out = []
    for folder in folders:
        if not (folder / "truth.json").exists():
            continue
        c = recensus(folder)
        v = c["verdict"]
        out.append(Judged(float(v["confidence"]), v["mechanism"] == cause_of(folder.name, c["preemption"]["total"]),
                          tuple(v.get("settle", ()))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sim-runs", type=int, default=60)
    ap.add_argument("--sim-first-seed", type=int, default=1000)
    ap.add_argument("--alien-seeds", type=int, default=20)
    ap.add_argument("--duration", type=float, default=7200.0, help="simulated window, seconds")
    ap.add_argument("--realdata", type=Path, default=REALDATA)
    ap.add_argument("--live", type=Path, nargs="*", default=[], help="bench/vllm_live.py output folders")
    args = ap.parse_args()
    sets: list[tuple[str, list[Judged], float]] = []
    for name, make in (
        (f"simulator, {args.sim_runs} randomized runs", lambda: simulator(args.sim_runs, args.sim_first_seed,
                                                                           args.duration)),
        (f"alien engine model, {args.alien_seeds} seeds x {len(Cause)} causes",
         lambda: alien(args.alien_seeds, args.duration)),
        ("real vLLM, InferenceX (1 s polls, 10 families)", lambda: inferencex(args.realdata)),
        ("real vLLM 0.32 on this CPU, live runs", lambda: live(args.live)),
    ):
        t0 = time.perf_counter()
        judged = make()
        if judged:
            sets.append((name, judged, time.perf_counter() - t0))
        print(f"{name}: {len(judged)} verdicts in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(f"| set | verdicts | right at >= {SURE} | right at {LEAN}-{SURE} | right under {LEAN} | "
          "confidence min / p10 / median / p90 / max | caps on every verdict |")
    print("|---|---|---|---|---|---|---|")
    for name, judged, _ in sets:
        print(row(name, judged))
    print(json.dumps({name: round(secs) for name, _, secs in sets}), file=sys.stderr)


if __name__ == "__main__":
    main()
