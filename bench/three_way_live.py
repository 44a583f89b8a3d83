"""Three predictions of one knob on real vLLM: the closed form, the twin, and vLLM run with it (issue #26 item 4).

The real-engine column of ``bench/three_way.py``. ``BEFORE`` is a ``bench/vllm_live.py`` run;
each ``AFTER`` is the same load on a server started with one flag changed. The census of BEFORE
(over its window, with its argv) gives the recommendations; for each AFTER whose flag change is a
recommendation's knob and value: the advice's closed form (``Recommendation.predicted``), the
calibrated twin (``whatif`` on BEFORE's recording, the code ``census --twin`` runs:
:func:`pdcensus.whatif.advice_check.twin_rows`), and AFTER's recording measured on the twin's
calibration bucket edges (BEFORE's own). Figures: the heaviest bucket's per-stream decode and
TTFT p90. *Error* = predicted / measured - 1. Usage::

    .venv/bin/python bench/three_way_live.py DIR/sharing-default DIR/budget-1024 [DIR/budget-512 ...] [--twin-seeds 2]

An AFTER run whose change no recommendation names is listed with the recommendations there were.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

from pdcensus import api
from pdcensus.advice.evidence import read_argv
from pdcensus.sources.load import load_source
from pdcensus.whatif.advice_check import twin_rows
from pdcensus.whatif.measure import measure, read_window
from pdcensus.whatif.run import what_if


def _sibling(stem: str) -> ModuleType:
    """Another bench script as a module (``bench/`` is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{stem}", Path(__file__).with_name(f"{stem}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KNOBS = _sibling("vllm_knob_table")  # argv_of, knob_change


def _err(a: float, b: float) -> str:
    return f"{a / b - 1:+.0%}" if math.isfinite(a) and math.isfinite(b) and b > 0 else "-"


def _num(x: float, unit: str) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.2f} tok/s" if unit == "tok/s" else f"{x:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="+")
    parser.add_argument("--twin-seeds", type=int, default=2)
    opts = parser.parse_args()
    window = json.loads((opts.before / "window.json").read_text())
    before_argv = KNOBS.argv_of(opts.before)
    report = api.census(opts.before / "metrics.om", start=window["start"], end=window["end"], evidence=None,
                        argv=read_argv(opts.before / "cmdline"))
    recs = {f"{r.knob.strip()}={r.value.strip()}": r for r in report.advice if not r.minor and r.knob.strip()}
    recording = load_source(opts.before / "metrics.om")
    print(f"before: {opts.before.name}; recommendations: {', '.join(recs) or 'none'}")
    print("| after-run | knob | figure | now | closed form | twin | vLLM with the knob | error: closed form | "
          "error: twin | error: no change |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in opts.after:
        sets = KNOBS.knob_change(before_argv, KNOBS.argv_of(run))
        named = [s for s in sets if s in recs]
        if len(sets) != 1 or not named:
            print(f"| {run.name} | {' '.join(sets) or '(none)'} | no recommendation names this change | | | | | | | |")
            continue
        rec = recs[named[0]]
        result = what_if(recording, named, argv=before_argv, seeds=opts.twin_seeds)
        if result.refused:
            print(f"| {run.name} | `{named[0]}` | twin refused: {result.refused} | | | | | | | |")
            continue
        after = measure(read_window(load_source(run / "metrics.om")), result.calibration.observed.edges_tokens_per_second)
        heavy = after.buckets[-1] if after.buckets else None
        for row in twin_rows(rec, result):
            if "idle bucket" in row.figure:
                continue
            truth = math.nan if heavy is None else (
                heavy.per_stream_tokens_per_second if row.unit == "tok/s" else heavy.ttft_p90_seconds)
            print(f"| {run.name} | `{named[0]}` | {row.figure} | {_num(row.now, row.unit)} | "
                  f"{_num(row.closed_form, row.unit)} | {_num(row.twin, row.unit)} | {_num(truth, row.unit)} | "
                  f"{_err(row.closed_form, truth)} | {_err(row.twin, truth)} | {_err(row.now, truth)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
