"""Three predictions of one knob, against the simulator actually run with it (issue #26 item 4).

For every simulator scenario whose census gives a recommendation that is not minor: the advice's
closed form (``Recommendation.predicted``), ``whatif``'s calibrated twin (``census --twin``, the
same code: :mod:`pdcensus.whatif.advice_check`), and the simulator run with the knob on the same
seed (the same traffic draws), all on the recording's own prefill-rate bucket edges. Figures: the
heaviest bucket's per-stream decode and TTFT p90. *Error* = predicted / simulated - 1.

Usage::

    .venv/bin/python bench/three_way.py [--seeds 1 2] [--duration 3600] [--twin-seeds 2]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pdcensus import api
from pdcensus.sim import list_scenarios
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import simulate
from pdcensus.whatif.advice_check import twin_rows
from pdcensus.whatif.measure import measure, read_window
from pdcensus.whatif.run import what_if

SKIP = ("idle", "overloaded")  # nothing to judge / no knob fixes it


def pct(x: float) -> str:
    return f"{x:+.0%}" if math.isfinite(x) else "-"


def num(x: float, unit: str) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.2f} s" if unit == "s" else f"{x:.1f}"


def rel(a: float, b: float) -> float:
    return a / b - 1.0 if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--duration", type=float, default=3600.0)
    ap.add_argument("--twin-seeds", type=int, default=2)
    args = ap.parse_args()
    t0 = time.time()
    print("| scenario | seed | knob | figure | now | closed form | twin | simulated with the knob | "
          "error: closed form | error: twin | trusted |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors: dict[tuple[str, str], list[float]] = {}
    skipped: list[str] = []
    for scenario, _ in list_scenarios():
        if scenario in SKIP:
            continue
        for seed in args.seeds:
            run = simulate(scenario, duration_seconds=args.duration, seed=seed)
            with tempfile.TemporaryDirectory() as tmp:
                write_sim_dir(run, Path(tmp) / "rec")
                report = api.census_all(Path(tmp) / "rec")[0]
            recs = [r for r in report.advice if not r.minor and r.knob.strip()]
            if not recs:
                skipped.append(f"{scenario} seed {seed}: no recommendation that is not minor "
                               f"({report.verdict.mechanism.value})")
                continue
            for rec in recs:
                setting = f"{rec.knob.strip()}={rec.value.strip()}"
                try:
                    result = what_if(run.recording, [setting], argv=run.cmdline, seeds=args.twin_seeds)
                except Exception as exc:  # a knob the twin cannot set: the closed form stands alone
                    skipped.append(f"{scenario} seed {seed} `{setting}`: twin cannot run it ({exc})")
                    continue
                if result.refused:
                    skipped.append(f"{scenario} seed {seed} `{setting}`: twin refused ({result.refused})")
                    continue
                try:
                    truth_run = simulate(scenario, duration_seconds=args.duration, seed=seed,
                                         overrides={rec.knob.strip(): rec.value.strip()})
                except Exception as exc:
                    skipped.append(f"{scenario} seed {seed} `{setting}`: the simulator cannot run it ({exc})")
                    continue
                truth = measure(read_window(truth_run.recording), result.calibration.observed.edges_tokens_per_second)
                heavy_truth = truth.buckets[-1] if truth.buckets else None
                for row in twin_rows(rec, result):
                    if "idle bucket" in row.figure:
                        continue
                    if heavy_truth is None:
                        t = math.nan
                    else:
                        t = heavy_truth.per_stream_tokens_per_second if row.unit == "tok/s" else heavy_truth.ttft_p90_seconds
                    ec, et = rel(row.closed_form, t), rel(row.twin, t)
                    kind = "per-stream decode, heaviest bucket" if row.unit == "tok/s" else "TTFT p90, heaviest bucket"
                    for who, e in (("closed form", ec), ("twin", et), ("no change", rel(row.now, t))):
                        if math.isfinite(e):
                            errors.setdefault((kind, who), []).append(abs(e))
                    print(f"| {scenario} | {seed} | `{setting}` | {row.figure} | {num(row.now, row.unit)} | "
                          f"{num(row.closed_form, row.unit)} | {num(row.twin, row.unit)} | {num(t, row.unit)} | "
                          f"{pct(ec)} | {pct(et)} | twin |")
    print()
    print("| figure | median abs error: closed form | twin | no change | pairs |")
    print("|---|---|---|---|---|")
    for kind in ("per-stream decode, heaviest bucket", "TTFT p90, heaviest bucket"):
        cells = []
        for who in ("closed form", "twin", "no change"):
            e = errors.get((kind, who), [])
            cells.append(f"{statistics.median(e):.0%}" if e else "-")
        n = len(errors.get((kind, "twin"), []))
        print(f"| {kind} | {' | '.join(cells)} | {n} |")
    print()
    for line in skipped:
        print(f"- {line}")
    print(f"\n({time.time() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
