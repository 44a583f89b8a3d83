"""Census memory: peak RSS and wall time of loading and censusing a long recording (default 7 days at 15 s).

Usage:  .venv/bin/python bench/census_memory.py [--days 7] [--scenario healthy] [--dir DIR]

The recording is written by the simulator (``pdcensus sim SCENARIO --duration Nd``: the
OpenMetrics file a user would have), and kept in ``--dir`` so a second run reuses it. Each
measure runs in a fresh interpreter, so that its peak resident set (``VmHWM`` from
``/proc/self/status``, the kernel's own high-water mark) is the load and the census alone,
not the simulator's:

* library: ``load_source`` then ``census_recording``, timed apart, ``VmHWM`` after the
  imports (the floor) and after the census;
* CLI: ``pdcensus census FILE --json`` end to end (the console entry point, run in its
  own interpreter, which reports its ``VmHWM`` on exit).

The budget is a fixed allowance plus a share per recorded day (``--fixed-mib``,
``--per-day-mib``; default 400 + 90 per day, about 1 GiB for a week); it prints one table
row per measure and exits 1 if a peak is over it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HWM = r"""
import json, sys, time
from pathlib import Path

def hwm_mib():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise SystemExit("no VmHWM in /proc/self/status")
"""
MEASURE = HWM + r"""
from pdcensus.census.run import census_recording
from pdcensus.sources.load import load_source
floor = hwm_mib()
t0 = time.perf_counter()
recording = load_source(sys.argv[1])
t1 = time.perf_counter()
after_load = hwm_mib()
reports = census_recording(recording)
t2 = time.perf_counter()
ep = recording.endpoints
print(json.dumps({
    "scrapes": max(e.n_scrapes for e in ep), "series": sum(len(e.keys) for e in ep),
    "samples": int(sum(int(e.present.sum()) for e in ep)),
    "load_seconds": t1 - t0, "census_seconds": t2 - t1, "floor_mib": floor,
    "after_load_mib": after_load, "peak_mib": hwm_mib(),
    "verdicts": [r.verdict.mechanism.value for r in reports],
}))
"""


def recording_path(directory: Path, scenario: str, days: float, seed: int) -> Path:
    """The simulator's recording for these settings, written once and reused."""
    out = directory / f"{scenario}-{days:g}d-seed{seed}"
    metrics = out / "metrics.om"
    if not metrics.is_file():
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pdcensus", "sim", scenario, "--out", str(out),
                        "--duration", f"{days * 24:g}h", "--seed", str(seed)], check=True, stdout=subprocess.DEVNULL)
        print(f"simulated {scenario} for {days:g} days in {time.perf_counter() - t0:.0f} s -> {metrics}",
              file=sys.stderr)
    return metrics


def measure_library(path: Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", MEASURE, str(path)], check=True, capture_output=True, text=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


CLI = HWM + r"""
from pdcensus.cli import main
status = 0
try:
    main(["census", sys.argv[1], "--json"])
except SystemExit as exc:
    status = exc.code if isinstance(exc.code, int) else 1
print(json.dumps({"peak_mib": hwm_mib(), "status": status}), file=sys.stderr)
"""


def measure_cli(path: Path) -> tuple[float, float, int]:
    """``(wall seconds, peak MiB, exit status)`` of ``pdcensus census FILE --json`` in a fresh interpreter."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CLI, str(path)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - t0
    last = json.loads(done.stderr.strip().splitlines()[-1])
    if last["status"] != 0:
        print(done.stderr, file=sys.stderr)
    return wall, float(last["peak_mib"]), int(last["status"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--scenario", default="healthy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "pdcensus-bench")
    parser.add_argument("--fixed-mib", type=float, default=400.0)
    parser.add_argument("--per-day-mib", type=float, default=90.0)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    path = recording_path(args.dir, args.scenario, args.days, args.seed)
    size_mib = os.path.getsize(path) / 2**20
    lib = measure_library(path)
    cli_wall, cli_peak, status = measure_cli(path)
    print(f"recording: {args.scenario}, {args.days:g} days, {lib['scrapes']:,} scrapes, {lib['series']} series, "
          f"{lib['samples']:,} samples, {size_mib:,.0f} MiB OpenMetrics; verdict {', '.join(lib['verdicts'])}")
    print("| measure | wall | peak RSS |")
    print("|---|---|---|")
    print(f"| imports only (floor) | - | {lib['floor_mib']:,.0f} MiB |")
    print(f"| `load_source` | {lib['load_seconds']:.1f} s | {lib['after_load_mib']:,.0f} MiB |")
    print(f"| `census_recording` (after the load) | {lib['census_seconds']:.1f} s | {lib['peak_mib']:,.0f} MiB |")
    print(f"| `pdcensus census FILE --json` (exit {status}) | {cli_wall:.1f} s | {cli_peak:,.0f} MiB |")
    worst = max(float(lib["peak_mib"]), cli_peak)  # type: ignore[arg-type]
    budget = args.fixed_mib + args.per_day_mib * args.days
    verdict = "within" if worst <= budget else "OVER"
    print(f"budget {args.fixed_mib:g} + {args.per_day_mib:g} x {args.days:g} days = {budget:,.0f} MiB: {verdict} "
          f"(worst peak {worst:,.0f} MiB)")
    return 0 if worst <= budget and status == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
