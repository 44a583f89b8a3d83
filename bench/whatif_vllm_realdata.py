"""`pdcensus whatif` on every shared real vLLM recording: accepted or refused, and its calibration errors.

For each ``*.om.gz`` under ``../shared/realdata/vllm-inferencex`` (vLLM 0.15 / 0.19, 1 s polls) the
twin is calibrated with the run's own argv (the ``*.vllm_command.txt`` beside it) and asked for
one knob (default ``max-num-batched-tokens=4096``). It prints one Markdown row per recording: whether
the 25 % calibration gate let a prediction through, the calibration errors of the gating figures
(per-stream idle and busy decode, decode throughput) and of prefill throughput, and the predicted
change of per-stream decode while prefill runs. Usage::

    python bench/whatif_vllm_realdata.py [--root ../shared/realdata/vllm-inferencex] [--set KNOB=VALUE] [--seeds 4]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pdcensus.errors import CensusError
from pdcensus.sources.load import load_source
from pdcensus.whatif import what_if

ROOT = Path(__file__).resolve().parents[1].parent / "shared" / "realdata" / "vllm-inferencex"
SHOWN = {"per_stream_idle_tokens_per_second": "idle", "per_stream_busy_tokens_per_second": "busy",
         "decode_tokens_per_second": "decode", "prefill_tokens_per_second": "prefill"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--set", dest="knob", default="max-num-batched-tokens=4096")
    parser.add_argument("--seeds", type=int, default=4)
    opts = parser.parse_args()
    print(f"| recording | whatif --set {opts.knob} | calibration error ({', '.join(SHOWN.values())}) | "
          "per-stream decode beside prefill, predicted |")
    print("|---|---|---|---|")
    accepted = total = 0
    for rec in sorted(opts.root.glob("*/*.om.gz")):
        name = f"{rec.parent.name}/{rec.name[:-6]}"
        argv = rec.with_name(rec.name[:-6] + ".vllm_command.txt").read_text().split()
        total += 1
        try:
            result = what_if(load_source(rec), [opts.knob], argv=argv, seeds=opts.seeds)
        except CensusError as exc:
            print(f"| {name} | error | {exc} | |")
            continue
        errors = " / ".join(f"{result.calibration_error[k]:+.0%}" for k in SHOWN if k in result.calibration_error)
        change = next((f"x{f.change:.2f}" for f in result.figures
                       if f.name == "per_stream_busy_tokens_per_second" and f.change == f.change), "-")
        verdict = ("refused (calibration beyond 25 %)" if result.refused and "calibration error" in result.refused
                   else f"refused: {result.refused}" if result.refused else "accepted")
        accepted += not result.refused
        print(f"| {name} | {verdict} | {errors} | {change if not result.refused else '-'} |", flush=True)
    print(f"\n{accepted} of {total} accepted")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
