"""Prediction error of ``pdcensus whatif``: against the simulator, real vLLM runs and the real llama.cpp.

Three parts, each printed as a Markdown table (BENCHMARKS.md, "What-if prediction error"):

- ``--sim``: simulator pairs. A scenario recorded with flag A (its own), ``whatif --set B`` on
  that recording, against the simulator actually run with B on the same seed (the same traffic
  draws). Per knob: the calibration error, then for each figure the prediction, the simulated
  truth, the error, whether the range over seeds covers the truth, and the "no change" error
  (the recording itself taken as the answer) as the baseline a prediction must beat.
- ``--vllm``: real vLLM runs (``../shared/realdata/vllm-inferencex``, Llama-3.3-70B on vLLM 0.15)
  where ``--max-num-seqs`` varies at the same TP and offload. The benchmark's users equal
  ``--max-num-seqs``, so the offered load changes with the knob: each pair is predicted with the
  knob alone and with the knob plus ``load`` = the target run's request rate over the source's
  (taken from the target: an operator would have to know it). Against the target's census
  figures and its clients' TTFT / TPOT p50 (``experiment_summary.csv``).
- ``--llamacpp DIR``: the real engine. ``DIR`` holds runs of ``bench/llamacpp_live.py``
  (``base`` at ``-b 2048 -ub 512``, ``ub128``, ``b64``, each with ``metrics.om``, ``cmdline``,
  ``truth.json``, ``plan.json``); the twin is calibrated on ``base`` and predicts the others'
  per-stream decode while a prompt processes and the prompt's TTFT, against each run's client
  truth.

Usage::

    .venv/bin/python bench/whatif_error.py --sim --vllm --llamacpp /tmp/llamacpp-live
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from pdcensus.sim.run import simulate, simulate_scenario
from pdcensus.sim.scenarios import get_scenario
from pdcensus.sources.load import load_source
from pdcensus.whatif.measure import measure, read_window
from pdcensus.whatif.run import calibration_errors, completed_tokens, observe, run_twin, to_change, twin_figures, what_if
from pdcensus.whatif.calibrate import calibrate
from pdcensus.whatif.knobs import parse_knobs

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / ".." / "shared" / "realdata" / "vllm-inferencex" / "llama70b-vllm0.15"
SIM_PAIRS: tuple[tuple[str, str, str], ...] = (
    ("step-time-sharing", "radiance", "--prefill-interleave=2"),
    ("step-time-sharing", "radiance", "--prefill-interleave=4"),
    ("step-time-sharing", "radiance", "--busy-prefill-chunk=1024"),
    ("step-time-sharing", "radiance", "--max-num-seqs=16"),
    ("step-time-sharing", "radiance", "load=1.5"),
    ("step-time-sharing", "vllm", "--max-num-batched-tokens=2048"),
    ("step-time-sharing", "vllm", "--max-num-seqs=16"),
    ("healthy", "radiance", "--max-num-seqs=8"),
)
SIM_FIGURES = ("per_stream_busy_tokens_per_second", "busy_vs_idle", "ttft_p90_seconds", "itl_p99_seconds")
VLLM_PAIRS = (("tp1_bs16_offloadoff", "tp1_bs128_offloadoff"), ("tp1_bs128_offloadoff", "tp1_bs16_offloadoff"),
              ("tp4_bs32_offloadoff", "tp4_bs64_offloadoff"), ("tp4_bs64_offloadoff", "tp4_bs32_offloadoff"))


def pct(x: float) -> str:
    return f"{x:+.0%}" if math.isfinite(x) else "-"


def num(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def rel(a: float, b: float) -> float:
    return a / b - 1.0 if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan


def sim_part(duration: float, record_seeds: list[int], twin_seeds: int) -> None:
    print("| scenario (profile) | knob | rec. seed | calib. error: idle / busy per-stream | figure | recorded (A) | "
          "predicted [range] | simulated with B | error | range covers | no-change error |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    summary: dict[str, list[float]] = {f: [] for f in SIM_FIGURES}
    baseline: dict[str, list[float]] = {f: [] for f in SIM_FIGURES}
    per_knob: dict[str, dict[str, list[float]]] = {}
    for scenario, profile, knob in SIM_PAIRS:
        for seed in record_seeds:
            observed_run = simulate(scenario, duration_seconds=duration, seed=seed, profile=profile)
            result = what_if(observed_run.recording, [knob], argv=observed_run.cmdline, seeds=twin_seeds)
            head = f"| {scenario} ({profile}) | `{knob}` | {seed} | " + " / ".join(
                pct(result.calibration_error.get(k, math.nan)) for k in
                ("per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second"))
            if result.refused:
                print(head + f" | refused: {result.refused} | | | | | | |")
                continue
            truth = measure(read_window(_truth_recording(scenario, profile, knob, seed, duration)),
                            result.calibration.observed.edges_tokens_per_second)
            for name in SIM_FIGURES:
                f = result.figure(name)
                assert f is not None
                t = truth.get(name)
                err, base = rel(f.predicted.median, t), rel(f.observed, t)
                covers = "yes" if f.predicted.low <= t <= f.predicted.high else "no"
                if math.isfinite(err):
                    summary[name].append(abs(err))
                    baseline[name].append(abs(base))
                    per_knob.setdefault(f"{scenario} ({profile}) `{knob}`", {}).setdefault(name, []).append(err)
                print(f"{head} | {name} | {num(f.observed)} | {num(f.predicted.median)} [{num(f.predicted.low)}, "
                      f"{num(f.predicted.high)}] | {num(t)} | {pct(err)} | {covers} | {pct(base)} |")
    print()
    print("| knob | " + " | ".join(f"{n}: error per seed" for n in SIM_FIGURES) + " |")
    print("|---|" + "---|" * len(SIM_FIGURES))
    for knob, errs in per_knob.items():
        print(f"| {knob} | " + " | ".join(", ".join(pct(e) for e in errs.get(n, [])) for n in SIM_FIGURES) + " |")
    print()
    print("| figure | median abs error, prediction | median abs error, no change | worst prediction error |")
    print("|---|---|---|---|")
    for name in SIM_FIGURES:
        e, b = summary[name], baseline[name]
        if e:
            print(f"| {name} | {statistics.median(e):.0%} | {statistics.median(b):.0%} | {max(e):.0%} |")


def _truth_recording(scenario: str, profile: str, knob: str, seed: int, duration: float):  # type: ignore[no-untyped-def]
    flag, value = knob.split("=", 1)
    if flag == "load":
        spec = get_scenario(scenario)
        spec = replace(spec, segments=tuple(replace(s, workload=s.workload.scaled(float(value)))
                                            for s in spec.segments))
        return simulate_scenario(spec, duration_seconds=duration, seed=seed, profile=profile).recording
    return simulate(scenario, duration_seconds=duration, seed=seed, profile=profile,
                    overrides={flag: value}).recording


def _summary_rows() -> dict[str, dict[str, str]]:
    with open(REAL / "experiment_summary.csv", newline="") as fh:
        return {row["exp_name"]: row for row in csv.DictReader(fh)}


def vllm_part(twin_seeds: int) -> None:
    rows = _summary_rows()
    print("| source -> target | variant | calib. error idle / busy per-stream | per-stream idle: pred / meas (err) | "
          "per-stream busy: pred / meas (err) | decode tok/s: pred / meas (err) | TTFT p50 s: twin / client (err) | "
          "ITL p50 vs client TPOT p50 ms (err) |")
    print("|---|---|---|---|---|---|---|---|")
    for src, dst in VLLM_PAIRS:
        source, target = load_source(REAL / f"{src}.om.gz"), load_source(REAL / f"{dst}.om.gz")
        argv = (REAL / f"{src}.vllm_command.txt").read_text().split()
        seqs = dst.split("_bs")[1].split("_")[0]
        rate_src = float(rows[src]["throughput_rps"])
        rate_dst = float(rows[dst]["throughput_rps"])
        for variant, sets in (("knob", [f"--max-num-seqs={seqs}"]),
                              (f"knob + load x{rate_dst / rate_src:.2f}", [f"--max-num-seqs={seqs}",
                                                                          f"load={rate_dst / rate_src:.4f}"])):
            result = what_if(source, sets, argv=argv, seeds=twin_seeds)
            cal = result.calibration_error
            marked = variant + (" (extrapolated)" if result.warnings else "")
            head = (f"| {src} -> {dst} | {marked} | {pct(cal.get('per_stream_idle_tokens_per_second', math.nan))} / "
                    f"{pct(cal.get('per_stream_busy_tokens_per_second', math.nan))}")
            if result.refused:
                print(head + f" | refused: {result.refused} | | | | |")
                continue
            measured = measure(read_window(target), result.calibration.observed.edges_tokens_per_second)
            cells = []
            for name in ("per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second",
                         "decode_tokens_per_second"):
                f = result.figure(name)
                assert f is not None
                m = measured.get(name)
                cells.append(f"{num(f.predicted.median)} / {num(m)} ({pct(rel(f.predicted.median, m))})")
            ttft, itl = result.figure("ttft_p50_seconds"), result.figure("itl_p50_seconds")
            assert ttft is not None and itl is not None
            client_ttft = float(rows[dst]["p50_ttft_ms"]) / 1000
            client_tpot = float(rows[dst]["p50_tpot_ms"])
            cells.append(f"{num(ttft.predicted.median)} / {num(client_ttft)} ({pct(rel(ttft.predicted.median, client_ttft))})")
            cells.append(f"{num(itl.predicted.median * 1000)} / {num(client_tpot)} "
                         f"({pct(rel(itl.predicted.median * 1000, client_tpot))})")
            print(head + " | " + " | ".join(cells) + " |")


def _prompt_ttft(result_seed_runs: list[float]) -> float:
    return statistics.median(result_seed_runs) if result_seed_runs else math.nan


def llamacpp_part(folder: Path, twin_seeds: int) -> None:
    base = folder / "base"
    plan = json.loads((base / "plan.json").read_text())
    truth_base = json.loads((base / "truth.json").read_text())
    recording = load_source(base / "metrics.om")
    argv = [a for a in (base / "cmdline").read_text().split("\0") if a]
    report, observed, read = observe(recording, None)
    calibration = calibrate(read, report, observed, argv, float(plan["prompt_tokens"]),
                            completed_tokens(recording, read, None))
    print(f"calibrated on {base}: decode-only {calibration.costs.decode_step_seconds:.3f} s, prefill "
          f"{calibration.costs.per_prefill_token_seconds * 1000:.2f} ms/token, micro-batch pass "
          f"{calibration.costs.ubatch_seconds:.3f} s; {calibration.traffic.standing_decoders} standing decoders")
    print()
    print("| arm | calib. error idle / busy per-stream | per-stream during prompts: twin ratio -> predicted | measured "
          "(client) | error | prompt TTFT median: twin ratio -> predicted | measured (client) | error |")
    print("|---|---|---|---|---|---|---|---|")
    before = [run_twin(calibration, s) for s in range(twin_seeds)]
    edges = calibration.observed.edges_tokens_per_second
    errors = calibration_errors(observed, [twin_figures(calibration, r) for r in before])
    cal = " / ".join(pct(errors.get(k, math.nan)) for k in ("per_stream_idle_tokens_per_second",
                                                            "per_stream_busy_tokens_per_second"))
    for arm, sets in (("ub128", ["-ub=128"]), ("b64", ["-b=64"])):
        if not (folder / arm / "truth.json").exists():
            continue
        truth = json.loads((folder / arm / "truth.json").read_text())
        change = to_change(parse_knobs(sets, calibration.engine), calibration)
        after = [run_twin(calibration, s, change) for s in range(twin_seeds)]
        busy = [twin_figures(calibration, r).get("per_stream_busy_tokens_per_second") for r in after]
        busy0 = [twin_figures(calibration, r).get("per_stream_busy_tokens_per_second") for r in before]
        ratio = statistics.median(a / b for a, b in zip(busy, busy0))
        pred_stream = truth_base["during"]["per_stream_tokens_per_second"] * ratio
        meas_stream = truth["during"]["per_stream_tokens_per_second"]
        ttft0 = [_prompt_ttft([float(q["ttft_seconds"]) for q in r.engine.recent_requests if q["kind"] != "standing"])
                 for r in before if r.engine is not None]
        ttft1 = [_prompt_ttft([float(q["ttft_seconds"]) for q in r.engine.recent_requests if q["kind"] != "standing"])
                 for r in after if r.engine is not None]
        tratio = statistics.median(a / b for a, b in zip(ttft1, ttft0))
        pred_ttft = statistics.median(truth_base["prompt_ttft_seconds"]) * tratio
        meas_ttft = statistics.median(truth["prompt_ttft_seconds"])
        print(f"| `{' '.join(sets)}` | {cal} | x{ratio:.2f} -> {pred_stream:.3f} tok/s | {meas_stream:.3f} tok/s "
              f"(x{meas_stream / truth_base['during']['per_stream_tokens_per_second']:.2f}) | "
              f"{pct(rel(pred_stream, meas_stream))} | x{tratio:.2f} -> {pred_ttft:.1f} s | {meas_ttft:.1f} s "
              f"(x{meas_ttft / statistics.median(truth_base['prompt_ttft_seconds']):.2f}) | {pct(rel(pred_ttft, meas_ttft))} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim", action="store_true")
    parser.add_argument("--vllm", action="store_true")
    parser.add_argument("--llamacpp", type=Path, default=None)
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--record-seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--seeds", type=int, default=4, help="twin runs per arm")
    args = parser.parse_args()
    t0 = time.time()
    if args.sim:
        sim_part(args.duration, args.record_seeds, args.seeds)
        print()
    if args.vllm:
        vllm_part(args.seeds)
        print()
    if args.llamacpp is not None:
        llamacpp_part(args.llamacpp, args.seeds)
    print(f"\nwall {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
