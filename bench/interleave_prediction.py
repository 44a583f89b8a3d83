"""Predicted vs simulated effect of --prefill-interleave N (the figure for BENCHMARKS.md).

For each seed, the simulator's ``step-time-sharing`` scenario runs once with N = 0 (the
before window) and once per N (the after window). The prediction is made from the before
window alone (its step ledger and its busy bucket), exactly as ``pdcensus verify-arm``
makes it; the observation is the after window's busy per-stream decode rate on the before
window's bucket edges. Two predictions are reported:

- *formula*: ``(N+1) / (C + N*D)``, the rate of a decoder beside back-to-back chunk steps;
- *bucket*: the busy bucket's mix of back-to-back chunk steps and decode-only stretches,
  calibrated on the measured N = 0 rate (:func:`pdcensus.advice.predict.busy_bucket_rate`).

TTFT: the bare stretch ``(C+N*D)/C`` (a lower bound), the queueing prediction
(:func:`pdcensus.advice.predict.queued_ttft_ratio`, M/M/1 on the ledger's prefill load) and
the trace-driven replay (:mod:`pdcensus.advice.ttft_replay`: the before window's own prompt
tokens and requests per interval through a FIFO prefill server at the ledger's capacity,
quantile over the busy intervals' requests) against the observed busy-bucket TTFT p90 ratio.

A second table diagnoses the replay with what only the after window knows: the prefill cost
per prompt token it actually paid (chunk-step seconds + held steps x its decode-only step, over
its prompt tokens) against the before window's, i.e. the stretch that really happened, and
the replay run at that measured cost instead of the ledger's ``(C+N*D)/C``.

Usage: ``.venv/bin/python bench/interleave_prediction.py [--duration 7200] [--seeds 1 2] [--max-n 4]``
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from pdcensus.advice import predict, ttft_replay
from pdcensus.series.profiles import Signal
from pdcensus.sim.run import simulate
from pdcensus.verify.arm import Window, bucket_pair, interleave_prediction, read_window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=7200.0, help="simulated seconds per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--max-n", type=int, default=4)
    parser.add_argument("--scenario", default="step-time-sharing")
    args = parser.parse_args()
    started = time.perf_counter()
    load_seen: dict[int, list[float]] = {}
    rows: dict[int, list[tuple[float, float, float, float, float, float, float]]] = {}
    diagnosis: dict[int, list[tuple[float, float, float]]] = {}
    for seed in args.seeds:
        runs = {n: simulate(args.scenario, duration_seconds=args.duration, seed=seed,
                            overrides={"--prefill-interleave": str(n)}).recording
                for n in range(args.max_n + 1)}
        before = read_window(runs[0])
        for n, recording in runs.items():
            after = read_window(recording)
            pair = bucket_pair(before.signals, after.signals)
            numbers = {**_pooled(pair)}
            predicted, observed = interleave_prediction(str(n), before, numbers)
            if predicted is None or observed is None:
                raise SystemExit(f"{args.scenario} seed {seed}: the before window has no step ledger to predict from")
            load_seen.setdefault(n, []).append(predicted.prefill_load)
            formula = predict.interleave_rate(n, predicted.chunk_step_seconds, predicted.decode_step_seconds)
            rows.setdefault(n, []).append((
                formula, predicted.busy_per_stream_tokens_per_second,
                observed.busy_per_stream_tokens_per_second, predicted.ttft_stretch, observed.ttft_p90_ratio,
                predicted.ttft_p90_ratio_queueing, predicted.ttft_p90_ratio_replay))
            measured = _cost_per_token(after) / _cost_per_token(before)
            diagnosis.setdefault(n, []).append((
                measured, _replay_at(before, numbers["idle_threshold_tokens_per_second"], measured),
                observed.ttft_p90_ratio))
    print(f"scenario {args.scenario}, {args.duration:.0f} s per run, seeds {args.seeds}, "
          f"{time.perf_counter() - started:.0f} s wall")
    print("| N | formula tok/s | bucket prediction tok/s | observed busy tok/s | formula error | bucket error "
          "| predicted TTFT stretch | queueing TTFT p90 ratio | observed TTFT p90 ratio | stretch error "
          "| queueing error | replay TTFT p90 ratio | replay error (worst seed) | prefill load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    loads = {n: statistics.fmean(v) for n, v in load_seen.items()}
    for n, values in sorted(rows.items()):
        f, b, o, s, t, q, r = (statistics.fmean(v[i] for v in values) for i in range(7))
        r_err = statistics.fmean(v[6] / v[4] - 1 for v in values)
        r_worst = max((v[6] / v[4] - 1 for v in values), key=abs)
        s_err = statistics.fmean(v[3] / v[4] - 1 for v in values)
        q_err = statistics.fmean(v[5] / v[4] - 1 for v in values)
        f_err = statistics.fmean(v[0] / v[2] - 1 for v in values)
        b_err = statistics.fmean(v[1] / v[2] - 1 for v in values)
        worst = max(abs(v[1] / v[2] - 1) for v in values)
        print(f"| {n} | {f:.1f} | {b:.1f} | {o:.1f} | {f_err:+.0%} | {b_err:+.1%} (worst seed {worst:.1%}) "
              f"| x{s:.2f} | x{q:.2f} | x{t:.2f} | {s_err:+.0%} | {q_err:+.0%} "
              f"| x{r:.2f} | {r_err:+.0%} ({r_worst:+.0%}) | {loads[n]:.2f} |")

    print()
    print("| N | ledger stretch (C+N*D)/C | measured cost per prompt token vs N = 0 | replay at the measured cost "
          "| observed TTFT p90 ratio |")
    print("|---|---|---|---|---|")
    for n, values in sorted(diagnosis.items()):
        m, r, o = (statistics.fmean(v[i] for v in values) for i in range(3))
        print(f"| {n} | x{statistics.fmean(v[3] for v in rows[n]):.2f} | x{m:.2f} | x{r:.2f} | x{o:.2f} |")


def _cost_per_token(window: Window) -> float:
    """Seconds of chunk steps and held steps per prompt token in a window."""
    s, d = window.signals, window.report.ledger.decode_step_seconds
    chunk = s.increase(Signal.STEP_SECONDS) - s.increase(Signal.STEP_SECONDS_DECODE)  # type: ignore[operator]
    held = s.increase(Signal.STEPS_HELD)
    tokens = float(np.nansum(s.increase(Signal.PROMPT_TOKENS)))  # type: ignore[arg-type]
    return (float(np.nansum(chunk)) + float(np.nansum(held)) * d) / tokens if tokens > 0 else math.nan


def _replay_at(before: Window, busy_low: float, stretch: float) -> float:
    """The before window's replayed busy TTFT p90 ratio with service slowed by ``stretch``."""
    trace = ttft_replay.trace_from_signals(before.signals)
    assert trace.work_tokens is not None and trace.requests is not None
    jobs = ttft_replay.build_jobs(trace.times, trace.work_tokens, trace.requests, trace.interval_seconds,
                                  trace.busy(busy_low))
    now = 1.0 / _cost_per_token(before)
    return ttft_replay.replay_quantile(jobs, now / stretch) / ttft_replay.replay_quantile(jobs, now)


def _pooled(pair) -> dict[str, float]:  # type: ignore[no-untyped-def]
    busy_b, busy_a = pair.pooled_before.rows[-1], pair.pooled_after.rows[-1]
    ratio = busy_a.ttft_p90_seconds / busy_b.ttft_p90_seconds if busy_b.ttft_p90_seconds > 0 else float("nan")
    return {"idle_threshold_tokens_per_second": pair.pooled_before.idle_threshold_tokens_per_second,
            "busy_per_stream_before": busy_b.per_stream_tokens_per_second,
            "busy_per_stream_after": busy_a.per_stream_tokens_per_second, "ttft_p90_ratio": ratio}


if __name__ == "__main__":
    main()
