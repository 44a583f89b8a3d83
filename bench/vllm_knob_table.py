"""Live vLLM knob runs: the clients' measured change beside ``pdcensus whatif``'s predicted one.

The first folder is the before-run; each further folder is an after-run of the same load with one
knob changed (its ``cmdline`` is compared with the before-run's to find which, and to what). Each
folder is one ``bench/vllm_live.py`` run: ``metrics.om`` (Prometheus, 1 s scrapes), ``cmdline``
(NUL-separated argv) and ``truth.json`` (per-token client times). For each knob the before-run's
recording is handed to ``what_if`` with ``--set KNOB=VALUE``; the table shows, per figure, the
clients' value before and after, their ratio, the ratio of whatif's own figure read from the two
recordings (the same statistic the twin predicts), and whatif's predicted ratio (predicted median
over the recording's own value), or why whatif refused. Usage::

    python bench/vllm_knob_table.py BEFORE AFTER [AFTER ...] [--seeds 4]

Figures (clients' truth, ``truth.json``; whatif's figure beside it): per-stream decode while a long
prompt waits for its first token (``during``; whatif: the decoders' pace from the inter-token
histogram in step spans with prefill), the same from when its prefill began as the decoders felt it
(``acting``: a prompt that waits for admission is pending while the decoders run at full pace) and
outside (``outside``; the same without prefill), the
inter-token gap p50 / p99 during (ITL p50 / p99 while prefill runs) and outside (ITL p50 / p99 of
the window), the share of decoding time in gaps over 2 s (whatif: of the waiting in gaps of 2.5 s or more) and the long
prompts' TTFT median (TTFT p50 while prefill runs). A figure neither run has (no long prompts beside
a preemption load) is left out.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdcensus.engine.streams import RequestRecord
from pdcensus.engine.truth import acting_truth
from pdcensus.errors import CensusError
from pdcensus.sources.load import load_source
from pdcensus.whatif import what_if
from pdcensus.whatif.run import observe

IGNORED = frozenset({"--port", "--host"})
# (label, truth reader, whatif figure)
FIGURES: tuple[tuple[str, Callable[[dict[str, Any]], float], str], ...] = (
    ("per-stream decode during prefill (tok/s)", lambda t: t["during"]["per_stream_tokens_per_second"],
     "felt_busy_tokens_per_second"),
    ("per-stream decode while a prompt acts (tok/s)", lambda t: t["acting"]["during"]["per_stream_tokens_per_second"],
     "felt_busy_tokens_per_second"),
    ("per-stream decode outside prefill (tok/s)", lambda t: t["outside"]["per_stream_tokens_per_second"],
     "felt_idle_tokens_per_second"),
    ("ITL p50 during (s)", lambda t: t["during"]["gap_p50_seconds"], "busy_itl_p50_seconds"),
    ("ITL p99 during (s)", lambda t: t["during"]["gap_p99_seconds"], "busy_itl_p99_seconds"),
    ("ITL p50 outside prefill (s)", lambda t: t["outside"]["gap_p50_seconds"], "itl_p50_seconds"),
    ("ITL p99 outside prefill (s)", lambda t: t["outside"]["gap_p99_seconds"], "itl_p99_seconds"),
    ("stalled share (clients: gaps over 2 s; whatif: waiting in gaps >= 2.5 s)",
     lambda t: t["stalls"]["stalled_share"], "stalled_share"),
    ("prompt TTFT median (s)", lambda t: statistics.median(t["prompt_ttft_seconds"]) if t.get("prompt_ttft_seconds")
     else math.nan, "busy_ttft_p50_seconds"),
)


def truth_of(run: Path) -> dict[str, Any]:
    """The run's ``truth.json``, with its ``acting`` truth computed from ``requests.jsonl`` where an older run
    did not write one (:func:`pdcensus.engine.truth.acting_truth`)."""
    truth: dict[str, Any] = json.loads((run / "truth.json").read_text())
    if "acting" not in truth:
        records = [RequestRecord(**json.loads(line)) for line in (run / "requests.jsonl").read_text().splitlines()]
        truth["acting"] = acting_truth(records, truth["start"], truth["end"]).to_dict()
    return truth


def argv_of(run: Path) -> list[str]:
    return [a for a in (run / "cmdline").read_bytes().decode().split("\0") if a]


def flags_of(argv: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, arg in enumerate(argv):
        if arg.startswith("--"):
            name, eq, inline = arg.partition("=")
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            out[name.replace("_", "-")] = inline if eq else ("" if nxt.startswith("--") else nxt)
    return out


def knob_change(before: list[str], after: list[str]) -> list[str]:
    """``FLAG=VALUE`` for each flag the after-run's argv sets differently from the before-run's."""
    b, a = flags_of(before), flags_of(after)
    return [f"{k}={v}" for k, v in a.items() if k not in IGNORED and b.get(k) != v]


def _num(x: float, ratio: bool = False) -> str:
    if not math.isfinite(x):
        return "-"
    return f"x{x:.2f}" if ratio else (f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="+")
    parser.add_argument("--seeds", type=int, default=4)
    opts = parser.parse_args()
    before_argv, before_truth = argv_of(opts.before), truth_of(opts.before)
    recording = load_source(opts.before / "metrics.om")
    print(f"before: {opts.before.name}")
    observed_before = observe(recording, None)[1]
    print("| after-run | knob | figure | clients before | clients after | clients | recordings (whatif's figure) "
          "| whatif predicted |")
    print("|---|---|---|---|---|---|---|---|")
    for run in opts.after:
        if not (run / "truth.json").exists():
            print(f"| {run.name} | - | not finished (no truth.json) | | | | |")
            continue
        sets = knob_change(before_argv, argv_of(run))
        truth = truth_of(run)
        observed_after = observe(load_source(run / "metrics.om"), None)[1]
        try:
            result = what_if(recording, sets, argv=before_argv, seeds=opts.seeds)
            refused = result.refused
            predicted = {f.name: f.predicted.median / f.observed if f.observed > 0 else math.nan
                         for f in result.figures}
        except CensusError as err:
            refused, predicted = str(err), {}
        knob = " ".join(sets) or "(none)"
        for label, read, figure in FIGURES:
            b, a = read(before_truth), read(truth)
            if not (math.isfinite(b) or math.isfinite(a)):
                continue  # no such window in either run (no long prompts beside a preemption load)
            measured = a / b if b > 0 else math.nan
            guess = ("refused " + refused if refused == "(above)" else "refused: " + refused) if refused else \
                _num(predicted.get(figure, math.nan), ratio=True)
            if not figure and not refused:
                guess = "- (no such figure)"
            rb, ra = (observed_before.get(figure), observed_after.get(figure)) if figure else (math.nan, math.nan)
            from_recordings = _num(ra / rb if rb > 0 else math.nan, ratio=True)
            print(f"| {run.name} | {knob} | {label} | {_num(b)} | {_num(a)} | {_num(measured, ratio=True)} | {from_recordings} "
                  f"| {guess} |")
            if refused:
                refused = "(above)"  # the reason once, the clients' figures still shown
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
