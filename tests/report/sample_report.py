"""A census report built by hand (every section filled), for the renderer tests.

The values are shaped like a step-time-sharing census of a 2-hour window: two shapes (a
restart), an idle bucket and three busy ones, a lag-0-only effect, a few preemptions, one
trap fired and one recommendation with a trade-off table. ``make_report(instance=...)``
lets a test put a hostile string where a label value goes.
"""

from __future__ import annotations

import math

from pdcensus.advice.endpoint_report import EndpointReport, SideEvidence
from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.advice.predictions import InterleavePrediction
from pdcensus.census.model import (
    BucketRow, BucketTable, Burst, CensusReport, Evidence, LagPoint, LagResult, LedgerBucket, LedgerResult,
    LedgerTimeline, LossShares, Mechanism, PreemptionResult, Segment, SegmentStart, ShapeResult, Timeline,
    Trap, TtftResult, Verdict,
)

T0 = 1_700_000_000.0
SCRAPE = 15.0


def make_report(instance: str = "10.0.0.7:7770", job: str = "radiance", text: str = "") -> EndpointReport:
    n = 480
    times = tuple(T0 + 3600 + SCRAPE * i for i in range(n))
    busy = tuple((i // 20) % 3 == 0 for i in range(n))
    prefill = tuple(6000.0 if b else 0.0 for b in busy)
    decode = tuple(900.0 if b else 2400.0 for b in busy)
    running = tuple(32.0 for _ in range(n))
    decode_step = tuple(0.015 + 0.0005 * (i % 3) for i in range(n))
    chunk_step = tuple(0.9 if b else math.nan for b in busy)
    held = tuple(0.0 for _ in range(n))
    pre_inc = tuple(3.0 if i in (100, 101, 300) else 0.0 for i in range(n))
    extra = f" {text}" if text else ""
    census = CensusReport(
        source=f"recording.om{extra}", job=job, instance=instance, profile="radiance-1.8",
        profile_reason="radiance:engine_steps_decode_total present",
        verdict=Verdict(
            mechanism=Mechanism.STEP_TIME_SHARING, mechanisms=(Mechanism.STEP_TIME_SHARING,), confidence=0.86,
            evidence=(
                Evidence("lag0_effect", 0.62, 0.2, True, f"per-stream rate falls 62 % at lag 0{extra}"),
                Evidence("tail_effect", 0.01, 0.1, False, "no lagged tail (2-14 min)"),
                Evidence("decode_step_flat", 0.03, 0.1, True, "decode-only steps stay ~15 ms"),
            ),
            settle=("a longer window with more idle prefill",),
        ),
        shape=ShapeResult(
            segments=(
                Segment(0, T0, T0 + 3585, 240, "radiance-1.0.13", SegmentStart.WINDOW_START, "window start"),
                Segment(1, T0 + 3600, times[-1], n, "radiance-1.8", SegmentStart.NEW_FAMILY,
                        f"first sample of radiance:engine_steps_decode_total{extra}", ("counter reset",)),
            ),
            analysed=1, proven=True, reason="analysing the latest shape (#1)",
        ),
        ledger=LedgerResult(
            available=True, reason="step ledger from the four step counters", intervals=n - 1,
            decode_step_seconds=0.0152, chunk_step_seconds=0.91, mean_step_seconds=0.043, steps=420_000.0,
            held_steps=0.0, chunk_share_of_steps=0.031, chunk_share_of_step_time=0.34,
            reference_decode_step_seconds=0.0149, reference="idle intervals",
            decode_step_inflation_during_prefill=0.02, decode_step_inflation_after_prefill=0.01,
            by_bucket=(LedgerBucket("idle", 320, 0.0150, math.nan, 0.0),
                       LedgerBucket("4k-8k", 159, 0.0154, 0.91, 13000.0)),
            timeline=LedgerTimeline(times, decode_step, chunk_step, held,
                                    tuple(0.4 if b else 0.0 for b in busy)),
        ),
        buckets=BucketTable(
            prefill="radiance:prefill_tokens_per_second", basis="same scrape", idle_threshold_tokens_per_second=50.0,
            idle_rule="below 50 tokens/s", edges_tokens_per_second=(50.0, 2000.0, 4000.0, 8000.0),
            rows=(
                BucketRow("idle", 0.0, 50.0, 320, 2400.0, 75.0, 320, 1.0, 0.21, 0.35, 0.6, 900.0, 0.0),
                BucketRow("50-2k", 50.0, 2000.0, 12, 1900.0, 59.0, 12, 0.79, 0.4, 0.9, 1.4, 40.0, 0.0),
                BucketRow("2k-4k", 2000.0, 4000.0, 20, 1300.0, 41.0, 20, 0.55, 0.8, 2.1, 3.5, 60.0, 3.0),
                BucketRow("4k-8k", 4000.0, 8000.0, 128, 900.0, 28.0, 128, 0.37, 1.3, 4.2, 7.9, 300.0, 6.0),
            ),
            scrape_interval_seconds=SCRAPE, warnings=(f"only 12 samples in bucket 50-2k{extra}",),
        ),
        client_new_buckets=None,
        lag=LagResult(
            available=True, reason="effect at lag 0 only",
            points=tuple(LagPoint(lag, 0.38 if lag == 0 else 0.99 + 0.01 * (lag % 3), 0.3 if lag == 0 else 0.95,
                                  0.45 if lag == 0 else 1.04, 150, 300) for lag in range(0, 1260, 15)),
            tail_effect=0.99, tail_low=0.96, tail_high=1.02, tail_samples=800, clean_samples=300,
            longest_lag_with_effect_seconds=0.0, control="lags above zero compare idle-prefill samples only",
        ),
        ttft=TtftResult(True, "TTFT from vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds",
                        0.35, 4.2),
        preemption=PreemptionResult(
            available=True, reason="3 bursts, none aligned with a decode dip", total=9.0,
            bursts=(Burst(times[99], times[101], 6.0, 0.97, 1.1), Burst(times[299], times[300], 3.0, 0.99, 1.0)),
            decode_dip=0.02, prefill_spike=0.05, depth_max=2.0, depth_mean=0.1, times=times, increases=pre_inc,
        ),
        traps=(
            Trap("diluted-mean-step", True, f"step_seconds/steps = 43 ms hides a 910 ms chunk step{extra}", 0.043),
            Trap("latency-under-radiance-prefix", False, "latency read under vllm:"),
        ),
        losses=LossShares(0.21, (0.17, 0.25), "chunk steps beside decoders", 0.0, (0.0, 0.02), "no tail",
                          0.003, (0.0, 0.01), "bursts", 0.62, (0.5, 0.7)),
        timeline=Timeline(times, decode, prefill, running),
    )
    return EndpointReport.of(census, (Recommendation(
        mechanism="step-time-sharing", knob="--prefill-interleave", value="2",
        env_line="RADIANCE_PREFILL_INTERLEAVE=2", rollback_env_line="RADIANCE_PREFILL_INTERLEAVE=0",
        summary=f"Give decoders two held decode-only steps after each chunk step{extra}",
        predicted=InterleavePrediction(
            interleave=2.0, target_decode_share=0.5, per_stream_tokens_per_second_during_prefill=3.2,
            share_of_idle=0.12, per_stream_tokens_per_second_during_prefill_now=1.1,
            measured_busy_per_stream_tokens_per_second=9.0, busy_bucket_saturated_share=0.4,
            busy_bucket_per_stream_tokens_per_second_predicted=14.0, idle_per_stream_tokens_per_second=27.0,
            chunk_step_seconds=0.91, decode_step_seconds=0.015, ttft_stretch=1.03,
            added_seconds_per_chunk_step=0.03, held_steps_per_chunk_step=2.0, busy_ttft_p90_seconds_now=2.0,
            busy_ttft_p90_seconds_at_least=2.06, busy_ttft_p90_seconds_queueing=2.2,
            busy_ttft_p90_seconds_replay=math.nan, ttft_p90_ratio_replay=math.nan,
            replay_ttft_p90_seconds_now=math.nan, replay_busy_intervals=0.0, prefill_load_now=0.3,
            prefill_load_predicted=0.31),
        cost="the prefilling prompt's TTFT stretches by two decode-only steps per chunk",
        preconditions=("radiance 1.8.x",),
        verification=VerificationPlan(
            argv="tr '\\0' ' ' < /proc/$(pidof radiance)/cmdline shows --prefill-interleave 2",
            counter="radiance:engine_steps_held_total leaves zero",
            bucket_pair="per-stream rate in the 4k-8k bucket rises toward idle",
            command="pdcensus verify-arm --flag --prefill-interleave=2"),
        tradeoff=tuple({"prefill_interleave": float(n_), "decoder_tokens_per_chunk_step": n_ + 1.0,
                        "prefill_ttft_stretch_seconds": 0.015 * n_} for n_ in range(0, 9)),
        notes=("held steps admit nothing",),
    ),), SideEvidence())
