"""Arm verification: prove a knob engaged, in the runbook's order, instead of assuming it.

1. argv: the flag (and value) reached the process's argv (``/proc/PID/cmdline``, a saved
   cmdline, or a sim output dir's ``cmdline``); serve scripts pass flags conditionally.
2. counter: the counter the knob moves moved (``--prefill-interleave``:
   ``radiance:engine_steps_held_total`` leaves zero in the after window; a build that does
   not export it holds nothing).
3. bucket pair: before and after bucketed with the SAME edges (the before window's), the
   busy buckets' per-stream decode rate and TTFT compared, beside the prediction made from
   the before window's ledger.

The first step that fails makes the arm ``not-engaged``; a step that cannot be decided
(no argv given, too few busy samples) makes it ``inconclusive``. A deploy is not evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.advice import predict, ttft_replay
from pdcensus.advice.catalogue import engine_of_argv
from pdcensus.advice.evidence import Argv
from pdcensus.advice.knobs import CounterCheck, Knob, get_knob
from pdcensus.census.buckets import assign_buckets, assign_on_edges, bucket_table
from pdcensus.census.model import BucketTable, CensusReport
from pdcensus.census.run import CensusOptions, census_recording, read_shape
from pdcensus.census.signals import ShapeSignals
from pdcensus.errors import UsageError
from pdcensus.series.model import Recording
from pdcensus.series.profiles import Signal
from pdcensus.verify import engaged, gate
from pdcensus.verify.arm_args import DEFAULT_TOLERANCE
from pdcensus.verify.batch_law import applies, batch_allowance
from pdcensus.verify.forecast import read_forecast
from pdcensus.verify.model import ArmObservation, ArmOutcome, ArmPrediction, ArmStep, ArmVerdict, StepStatus

MIN_BUSY_SAMPLES = 8  # per window, busy scrapes with a per-stream rate
MIN_CHANGE = 0.10  # a per-stream rate or TTFT must move by this share to count
VERIFY_REPLICATES = 50  # bootstrap replicates for the two censuses (only point values are used)


@dataclass(frozen=True)
class Window:
    """One window (before or after): its census report and the signals of its analysed shape."""

    report: CensusReport
    signals: ShapeSignals


def read_window(recording: Recording, instance: str | None = None) -> Window:
    """Census the latest shape of one endpoint and keep its signals for re-bucketing."""
    report = census_recording(recording, CensusOptions(instance=instance, replicates=VERIFY_REPLICATES))[0]
    endpoint = recording.endpoint(instance) if instance or len(recording.endpoints) == 1 else next(
        ep for ep in recording.endpoints if ep.instance == report.instance)
    read = read_shape(endpoint, recording.families, recording.source or "recording")  # the census's own reading
    return Window(report, read.signals)


@dataclass(frozen=True)
class BucketPair:
    """Before and after on the before window's edges: per bucket, and idle vs all busy pooled."""

    before: BucketTable
    after: BucketTable
    pooled_before: BucketTable
    pooled_after: BucketTable
    before_index: np.ndarray  # each scrape's bucket on the before window's edges (0 idle, -1 none)
    after_index: np.ndarray


def bucket_pair(before: ShapeSignals, after: ShapeSignals) -> BucketPair:
    """Both windows bucketed with the SAME edges (the before window's), by the census's one rule.

    :func:`pdcensus.census.buckets.assign_on_edges` decides which scrapes count and where the
    threshold falls, so the before window's buckets are the ones its own census made."""
    assert before.prefill_tokens_per_second is not None and after.prefill_tokens_per_second is not None
    a_before = assign_buckets(before.prefill_tokens_per_second)
    pooled_edges = (a_before.edges[0], math.inf)
    tables, indices = [], []
    for s in (before, after):
        assert s.decode_tokens_per_second is not None and s.prefill_tokens_per_second is not None
        for edges, labels in ((a_before.edges, a_before.labels), (pooled_edges, ("idle", "busy"))):
            a = assign_on_edges(s.prefill_tokens_per_second, edges, idle_at_threshold=a_before.idle_at_threshold,
                                labels=labels, idle_rule=f"edges of the before window: {edges}")
            if len(labels) == len(a_before.labels) and edges == a_before.edges:
                indices.append(a.index)
            tables.append(bucket_table(a, s.decode_tokens_per_second, s.gauge(Signal.RUNNING),
                                       prefill_name="prefill", basis="same-scrape gauges, before-window edges",
                                       scrape_interval_seconds=s.scrape_interval_seconds,
                                       ttft=s.histograms.get(Signal.TTFT), itl=s.histograms.get(Signal.ITL)))
    return BucketPair(tables[0], tables[2], tables[1], tables[3], indices[0], indices[1])


def check_argv(argv: Argv | None, flag: str, value: str | None, aliases: tuple[str, ...] = ()) -> ArmStep:
    if argv is None:
        return ArmStep("argv", StepStatus.UNKNOWN,
                       "no argv given (--cmdline PATH or --pid PID): a deploy is not evidence the flag reached "
                       "the process")
    flags = argv.flags(short=bool(aliases))
    flag = next((f for f in (flag, *aliases) if f in flags), flag)  # e.g. llama.cpp's -b for --batch-size
    if flag not in flags:
        return ArmStep("argv", StepStatus.FAILED,
                       f"{flag} is not in argv ({argv.origin}): the serve script did not pass it; argv: {argv.text()}")
    if value is not None and flags[flag] != value:
        return ArmStep("argv", StepStatus.FAILED,
                       f"argv has {flag} {flags[flag]!r}, the arm wants {value!r} ({argv.origin})")
    return ArmStep("argv", StepStatus.PASSED, f"argv has {flag} {flags[flag]} ({argv.origin})")


def _sum(x: np.ndarray | None) -> float:
    return float(np.nansum(x)) if x is not None else math.nan


def check_counter(knob: Knob, value: str | None, before: Window, after: Window) -> ArmStep:
    s = after.signals
    if knob.counter_check is CounterCheck.LEAVES_ZERO:
        held = s.increase(Signal.STEPS_HELD)
        steps, decode_steps = _sum(s.increase(Signal.STEPS)), _sum(s.increase(Signal.STEPS_DECODE))
        chunk_steps = steps - decode_steps
        if held is None:
            return ArmStep("counter", StepStatus.FAILED,
                           f"the after window's build ({s.profile.name}) exports no {knob.counter}: it holds "
                           f"nothing (radiance 1.0.13 accepts {knob.flag} and ignores it)")
        total = _sum(held)
        numbers = {"held_steps": total, "chunk_steps": chunk_steps,
                   "held_per_chunk_step": total / chunk_steps if chunk_steps > 0 else math.nan}
        wants_zero = value is not None and value.strip() == "0"
        if wants_zero:
            ok = total == 0
            text = f"{knob.counter} increased by {total:.0f} (the arm sets 0: it must stay zero)"
        else:
            ok = total > 0
            text = (f"{knob.counter} increased by {total:.0f} over {chunk_steps:.0f} chunk steps "
                    f"({numbers['held_per_chunk_step']:.2f} held per chunk step)" if ok else
                    f"{knob.counter} stayed zero over {chunk_steps:.0f} chunk steps: nothing is protecting decoders")
        return ArmStep("counter", StepStatus.PASSED if ok else StepStatus.FAILED, text, numbers)
    if knob.counter_check is CounterCheck.GAUGE_AT_MOST and value is not None and value.isdigit():
        running = s.gauge(Signal.RUNNING)
        peak = float(np.nanmax(running)) if running is not None and np.isfinite(running).any() else math.nan
        ok = math.isfinite(peak) and peak <= int(value)
        status = StepStatus.PASSED if ok else (StepStatus.FAILED if math.isfinite(peak) else StepStatus.UNKNOWN)
        return ArmStep("counter", status, f"peak running {peak:g} against {knob.flag} {value}", {"peak_running": peak})
    if knob.counter_check is CounterCheck.RATIO_DROPS:
        ratios = []
        for w in (before, after):
            cut, prompt = w.signals.increase(Signal.PREFIX_HIT_CUT_TOKENS), w.signals.increase(Signal.PROMPT_TOKENS)
            ratios.append(_sum(cut) / _sum(prompt) if cut is not None and prompt is not None and _sum(prompt) > 0
                          else math.nan)
        if not all(math.isfinite(r) for r in ratios):
            return ArmStep("counter", StepStatus.UNKNOWN, f"{knob.counter} or the prompt counter is missing")
        ok = ratios[1] < ratios[0] * (1 - MIN_CHANGE)
        return ArmStep("counter", StepStatus.PASSED if ok else StepStatus.FAILED,
                       f"replayed share of prompt tokens {ratios[0]:.1%} -> {ratios[1]:.1%}",
                       {"replay_share_before": ratios[0], "replay_share_after": ratios[1]})
    if knob.counter_check is CounterCheck.STEP_TOKENS_AT_MOST:  # vLLM's budget (pdcensus.verify.engaged)
        return engaged.check_step_tokens(knob.flag, value, before.signals, s)
    if knob.counter_check is CounterCheck.CHUNK_STEP_MOVES:
        c0, c1 = before.report.ledger.chunk_step_seconds, after.report.ledger.chunk_step_seconds
        if not (math.isfinite(c0) and math.isfinite(c1)):
            return ArmStep("counter", StepStatus.UNKNOWN, "no step ledger in one of the windows")
        ok = abs(c1 / c0 - 1) >= MIN_CHANGE
        return ArmStep("counter", StepStatus.PASSED if ok else StepStatus.FAILED,
                       f"mean chunk step {c0:.3f} s -> {c1:.3f} s",
                       {"chunk_step_seconds_before": c0, "chunk_step_seconds_after": c1})
    return ArmStep("counter", StepStatus.SKIPPED, f"no metric moves with {knob.flag}: argv and the bucket pair decide")


def compare_buckets(knob: Knob, pair: BucketPair) -> ArmStep:
    """Idle vs busy (every sample above the before window's idle threshold), before vs after.

    The arm itself moves prefill (held steps slow it), so samples shift between busy
    buckets; the pooled busy bucket keeps the SAME edges and is what is judged. The
    per-bucket rates are reported beside it.
    """
    idle_b, busy_b = pair.pooled_before.rows[0], pair.pooled_before.rows[-1]
    idle_a, busy_a = pair.pooled_after.rows[0], pair.pooled_after.rows[-1]
    numbers: dict[str, float] = {
        "idle_threshold_tokens_per_second": pair.pooled_before.idle_threshold_tokens_per_second,
        "idle_per_stream_before": idle_b.per_stream_tokens_per_second,
        "idle_per_stream_after": idle_a.per_stream_tokens_per_second,
        "busy_samples_before": float(busy_b.per_stream_samples),
        "busy_samples_after": float(busy_a.per_stream_samples),
    }
    for label, table in (("before", pair.before), ("after", pair.after)):
        for i, row in enumerate(table.rows[1:], start=1):
            numbers[f"bucket{i}_per_stream_{label}"] = row.per_stream_tokens_per_second
            numbers[f"bucket{i}_samples_{label}"] = float(row.per_stream_samples)
    if len(pair.pooled_before.rows) < 2 or min(busy_b.per_stream_samples, busy_a.per_stream_samples) < MIN_BUSY_SAMPLES:
        return ArmStep("bucket-pair", StepStatus.UNKNOWN,
                       f"too few busy samples with per-stream rates (before {busy_b.per_stream_samples}, after "
                       f"{busy_a.per_stream_samples}; need {MIN_BUSY_SAMPLES} each)", numbers)
    rate_ratio = busy_a.per_stream_tokens_per_second / busy_b.per_stream_tokens_per_second
    ttft_ratio = busy_a.ttft_p90_seconds / busy_b.ttft_p90_seconds if busy_b.ttft_p90_seconds > 0 else math.nan
    numbers |= {"busy_per_stream_before": busy_b.per_stream_tokens_per_second,
                "busy_per_stream_after": busy_a.per_stream_tokens_per_second, "per_stream_ratio": rate_ratio,
                "busy_ttft_p90_before": float(busy_b.ttft_p90_seconds),
                "busy_ttft_p90_after": float(busy_a.ttft_p90_seconds), "ttft_p90_ratio": float(ttft_ratio)}
    rate_up = rate_ratio >= 1 + MIN_CHANGE
    ttft_down = math.isfinite(ttft_ratio) and ttft_ratio <= 1 - MIN_CHANGE
    ok = rate_up if knob.flag == "--prefill-interleave" else (rate_up or ttft_down)
    text = (f"busy (prefill >= {numbers['idle_threshold_tokens_per_second']:.0f} tok/s): per-stream "
            f"{busy_b.per_stream_tokens_per_second:.1f} -> {busy_a.per_stream_tokens_per_second:.1f} tok/s "
            f"(x{rate_ratio:.2f}), TTFT p90 {busy_b.ttft_p90_seconds:.2f} -> {busy_a.ttft_p90_seconds:.2f} s")
    if idle_b.per_stream_tokens_per_second > 0 and abs(
            idle_a.per_stream_tokens_per_second / idle_b.per_stream_tokens_per_second - 1) > 0.25:
        text += "; the idle per-stream rate moved too: the windows' loads differ"
    return ArmStep("bucket-pair", StepStatus.PASSED if ok else StepStatus.FAILED,
                   text if ok else text + ": the arm did not move the busy bucket", numbers)


def replay_prediction(interleave: int, current: int, before: Window,
                      busy_low_tokens_per_second: float) -> ttft_replay.ReplayForecast:
    """The before window's replayed TTFT p90 ratio for N, over its busy intervals (pooled busy bucket)."""
    ledger = before.report.ledger
    trace = ttft_replay.trace_from_signals(before.signals)
    selected = trace.busy(busy_low_tokens_per_second)
    if selected is None:
        return ttft_replay.ReplayForecast(interleave, None, "no idle threshold or prefill series to select busy "
                                                            "intervals from")
    return ttft_replay.replay_ttft_ratio(
        trace.times, trace.work_tokens, trace.requests, chunk_step_seconds=ledger.chunk_step_seconds,
        decode_step_seconds=ledger.decode_step_seconds,
        chunk_tokens=ttft_replay.chunk_tokens_per_step(ledger, trace.work_tokens), interleave=interleave,
        current_interleave=current, interval_seconds=trace.interval_seconds, selected=selected)


def interleave_prediction(value: str | None, before: Window, numbers: dict[str, float],
                          current: int = 0) -> tuple[ArmPrediction | None, ArmObservation | None]:
    """The before window's prediction for N beside what the after window measured (None: no N or no ledger)."""
    ledger = before.report.ledger
    if value is None or not value.isdigit() or not ledger.available:
        return None, None
    n = int(value)
    c, d = ledger.chunk_step_seconds, ledger.decode_step_seconds
    saturated = predict.saturated_share(numbers["busy_per_stream_before"], current, c, d)
    replay = replay_prediction(n, current, before, numbers.get("idle_threshold_tokens_per_second", math.nan))
    predicted = ArmPrediction(
        interleave=float(n), beside_prefill_per_stream_tokens_per_second=predict.interleave_rate(n, c, d),
        busy_bucket_saturated_share=saturated,
        busy_per_stream_tokens_per_second=predict.busy_bucket_rate(n, saturated, c, d),
        ttft_stretch=(c + n * d) / c, chunk_step_seconds=c, decode_step_seconds=d,
        ttft_p90_ratio_queueing=predict.queued_ttft_ratio(n, current, ledger.chunk_share_of_step_time, c, d),
        prefill_load=ledger.chunk_share_of_step_time,
        ttft_p90_ratio_replay=replay.ratio if replay.ratio is not None else math.nan,
        replay_busy_intervals=float(replay.selected_intervals))
    after_busy = numbers["busy_per_stream_after"]
    observed = ArmObservation(busy_per_stream_tokens_per_second=after_busy, ttft_p90_ratio=numbers["ttft_p90_ratio"],
                              prediction_error=after_busy / predicted.busy_per_stream_tokens_per_second - 1)
    return predicted, observed


def verify_arm(before: Recording, after: Recording, flag: str, value: str | None = None,
               argv: Argv | None = None, instance: str | None = None,
               before_flags: dict[str, str] | None = None, tolerance: float = DEFAULT_TOLERANCE,
               whatif: str | None = None) -> ArmVerdict:
    """Argv, then the counter, then the bucket pair; the first failure names the verdict.

    An arm that engaged then passes the gate (:mod:`pdcensus.verify.gate`) only where every
    comparison's interval lies inside its band; one wholly outside makes it
    ``engaged-off-prediction``, one the data cannot place (straddling, too wide) ``inconclusive``.
    ``before_flags`` are the flags in effect in the before window (for the prediction's baseline
    N; default: the knob at 0). ``whatif``: a ``pdcensus whatif --json`` file for this arm, whose
    predicted ratios the gate allows (:mod:`pdcensus.verify.forecast`).
    """
    if not 0 < tolerance < 10:
        raise UsageError(f"tolerance must be a share above 0 (0.25 = 25 %), got {tolerance!r}")
    knob = get_knob(flag, engine_of_argv(argv.args) if argv is not None else None)  # the engine argv runs
    before_flags = before_flags or {}
    forecast = read_forecast(whatif, knob, value) if whatif is not None else None
    w_before, w_after = read_window(before, instance), read_window(after, instance)
    steps = [check_argv(argv, knob.flag, value, knob.aliases), check_counter(knob, value, w_before, w_after)]
    pair_values = bucket_pair(w_before.signals, w_after.signals)
    pair = compare_buckets(knob, pair_values)
    pair = engaged.judge_pair(knob, pair, w_before.signals, w_after.signals,  # per dial (pdcensus.verify.engaged)
                              (w_before.report.ledger.chunk_step_seconds, w_after.report.ledger.chunk_step_seconds))
    steps.append(pair)
    predicted: ArmPrediction | None = None
    observed: ArmObservation | None = None
    if knob.flag == "--prefill-interleave" and "busy_per_stream_after" in pair.numbers:
        current = int(before_flags.get(knob.flag, "0")) if before_flags.get(knob.flag, "0").isdigit() else 0
        predicted, observed = interleave_prediction(value, w_before, dict(pair.numbers), current)
    # a KV-capacity arm admits a bigger batch: its ITL may rise as the before window's step law says (batch_law)
    allowance = batch_allowance((w_before.report, w_before.signals), w_after.signals) if applies(knob) else None
    comparisons = gate.compare_arm(w_before.signals, w_after.signals, pair_values.before_index,
                                   pair_values.after_index, tuple(r.bucket for r in pair_values.before.rows), predicted,
                                   pair.numbers.get("busy_per_stream_before", math.nan), tolerance, allowance,
                                   forecast if forecast is not None and forecast.refused is None else None)
    failed = next((s for s in steps if s.status is StepStatus.FAILED), None)
    unknown = next((s for s in steps if s.status is StepStatus.UNKNOWN), None)
    if failed is not None:
        outcome, reason = ArmOutcome.NOT_ENGAGED, f"{failed.name}: {failed.detail}"
    elif unknown is not None:
        outcome, reason = ArmOutcome.INCONCLUSIVE, f"{unknown.name}: {unknown.detail}"
    else:
        outcome, reason = gate.engaged_outcome(comparisons, tolerance, knob.flag)
    over = [name for name, w in (("before", w_before), ("after", w_after))
            if w.report.overload is not None and w.report.overload.overloaded]
    if over and outcome is not ArmOutcome.NOT_ENGAGED:  # capacity before knobs (pdcensus.census.overload)
        reason += (f"; note: the endpoint is over capacity in the {' and '.join(over)} window (census): a knob "
                   "moves the wait, it cannot fix it")
    if forecast is not None and outcome is not ArmOutcome.NOT_ENGAGED:
        reason += f"; {forecast.note()}"
    return ArmVerdict(knob.flag, value, outcome, failed.name if failed else None, reason, tuple(steps),
                      predicted, observed, tolerance, comparisons, forecast.note() if forecast else None)
