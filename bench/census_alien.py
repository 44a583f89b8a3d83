"""Census on recordings from another engine model: accuracy, confident-wrong, calibration.

The recordings come from ``tests/census/alien`` (an engine model written apart from
``pdcensus.sim``: its own step-time law, chunk sizes, scrape intervals 10-30 s with jitter,
missed scrapes, restarts, radiance 1.8 / 1.0.13 / plain-vLLM metric sets). Each seed runs
every injected cause once; the metric set cycles with the seed so that every set meets every
cause. Usage::

    python bench/census_alien.py [--seeds 20] [--first-seed 0] [--duration 7200] [--quiet]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from census.alien.engine import Cause  # noqa: E402
from census.alien.export import METRIC_SETS  # noqa: E402
from census.alien.generator import make_recording, random_config  # noqa: E402

from found_scores import Scored, found_table  # noqa: E402

from pdcensus.census.run import census_recording  # noqa: E402

BINS = ((0.0, 0.01), (0.01, 0.5), (0.5, 0.7), (0.7, 0.9), (0.9, 1.01))
CONFIDENT = 0.7


@dataclass(frozen=True)
class Row:
    seed: int
    cause: str
    metric_set: str
    interval_seconds: float
    restart: bool
    truth: str
    borderline: bool
    verdict: str
    confidence: float
    shares: str
    scored: Scored | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == self.truth

    @property
    def confident_wrong(self) -> bool:
        return not self.ok and self.confidence >= CONFIDENT

    @property
    def inconclusive(self) -> bool:
        return self.verdict == "inconclusive"


def run(seed: int, cause: Cause, metric_set: str, duration_seconds: float) -> Row:
    cfg = random_config(seed, cause=cause, metric_set=metric_set, duration_seconds=duration_seconds)
    recording, truth = make_recording(cfg)
    v = census_recording(recording)[0].verdict
    shares = " ".join(f"{k[:4]}={100 * x:.1f}%/{100 * truth.share_of_loss[k]:.0f}%"
                      for k, x in truth.share_of_decode.items())
    scored = Scored(dict(truth.found), {f.mechanism.value: f.severity.value for f in v.found}, truth.mechanism,
                    v.mechanism.value, v.confidence)
    return Row(seed, cause.value, metric_set, cfg.plan.interval_seconds, cfg.restart is not None, truth.mechanism,
               truth.borderline, v.mechanism.value, v.confidence, shares, scored)


def table(rows: Sequence[Row], key: Callable[[Row], str], title: str) -> str:
    lines = [f"| {title} | runs | accuracy | inconclusive | confident-wrong | wrong (conf < {CONFIDENT}) | "
             f"conf >= {CONFIDENT}: right / runs | 0 < conf < {CONFIDENT}: right / runs |",
             "|---|---|---|---|---|---|---|---|"]
    for k in sorted({key(r) for r in rows}):
        sel = [r for r in rows if key(r) == k]
        n = len(sel)
        sure = [r for r in sel if r.confidence >= CONFIDENT]
        lean = [r for r in sel if 0 < r.confidence < CONFIDENT]
        lines.append(f"| {k} | {n} | {sum(r.ok for r in sel) / n:.0%} | {sum(r.inconclusive for r in sel) / n:.0%} | "
                     f"{sum(r.confident_wrong for r in sel)} | "
                     f"{sum((not r.ok) and not r.confident_wrong and not r.inconclusive for r in sel)} | "
                     f"{sum(r.ok for r in sure)} / {len(sure)} | {sum(r.ok for r in lean)} / {len(lean)} |")
    return "\n".join(lines)


def calibration(rows: Sequence[Row]) -> str:
    lines = ["| confidence | runs | accuracy |", "|---|---|---|"]
    for lo, hi in BINS:
        sel = [r for r in rows if lo <= r.confidence < hi]
        acc = f"{sum(r.ok for r in sel) / len(sel):.0%}" if sel else "-"
        label = "0 (inconclusive)" if hi <= 0.01 else f"[{lo:.2f}, {min(hi, 1.0):.2f}{')' if hi < 1 else ']'}"
        lines.append(f"| {label} | {len(sel)} | {acc} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--duration", type=float, default=7200.0, help="window length in seconds")
    ap.add_argument("--quiet", action="store_true", help="no per-run lines")
    args = ap.parse_args()
    rows: list[Row] = []
    t0 = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for c, cause in enumerate(Cause):
            row = run(seed, cause, METRIC_SETS[(seed + c) % len(METRIC_SETS)], args.duration)
            rows.append(row)
            if not args.quiet:
                mark = "ok" if row.ok else ("CONFIDENT-WRONG" if row.confident_wrong else "wrong")
                print(f"seed={row.seed:<4d} {row.cause:10s} {row.metric_set:15s} {row.interval_seconds:3.0f}s "
                      f"truth={row.truth:17s}{'~' if row.borderline else ' '} census={row.verdict:17s} "
                      f"conf={row.confidence:.2f} {mark:15s} {row.shares}", flush=True)
    n = len(rows)
    ok = sum(r.ok for r in rows)
    cw = [r for r in rows if r.confident_wrong]
    decided = [r for r in rows if r.truth != "inconclusive"]
    print(f"\nruns {n}, accuracy {ok}/{n} = {ok / n:.1%}, confident-wrong (conf >= {CONFIDENT}) {len(cw)}, "
          f"inconclusive {sum(r.inconclusive for r in rows) / n:.0%} (of runs whose truth is decidable: "
          f"{sum(r.inconclusive for r in decided) / max(len(decided), 1):.0%}), wall {time.perf_counter() - t0:.0f} s\n")
    print(found_table([r.scored for r in rows if r.scored is not None]) + "\n")
    print(table(rows, lambda r: r.cause, "injected cause") + "\n")
    print(table(rows, lambda r: r.truth, "truth") + "\n")
    print(table(rows, lambda r: r.metric_set, "metric set") + "\n")
    print(table(rows, lambda r: f"{r.interval_seconds:.0f} s", "scrape interval") + "\n")
    print(table(rows, lambda r: "borderline truth" if r.borderline else "clear truth", "truth margin") + "\n")
    print(calibration(rows))
    if cw:
        print("\nconfident-wrong verdicts:")
        for r in cw:
            print(f"  seed={r.seed} {r.cause} {r.metric_set} {r.interval_seconds:.0f}s truth={r.truth} "
                  f"census={r.verdict} conf={r.confidence:.2f} {r.shares}")


if __name__ == "__main__":
    main()
