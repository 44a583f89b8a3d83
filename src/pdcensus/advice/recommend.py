"""Recommendations: the knob that acts on the measured mechanism, with its predicted effect.

Every number comes from the census's own report (the step ledger's mean chunk step and
decode-only step, the bucket table's idle and busy per-stream rates and TTFT quantiles,
the lag test, the preemption bursts) plus the flags in effect and the boot ledger; the
arithmetic is in :mod:`pdcensus.advice.predict`, the semantics in
:mod:`pdcensus.advice.knobs`. Being wrong with confidence is the worst outcome: where
the numbers a prediction needs are missing, the recommendation says so instead of
guessing, and ``none``/``inconclusive`` verdicts get no knob at all.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pdcensus.advice import engine_advice, predict, ttft_replay
from pdcensus.advice.deploy import deployed_flags
from pdcensus.advice.evidence import BootLedger
from pdcensus.advice.knobs import ActsOn, Knob, get_knob
from pdcensus.advice.model import Recommendation, VerificationPlan
from pdcensus.advice.predictions import (
    ArenaPrediction,
    CheckpointIntervalPrediction,
    CheckpointPolicyPrediction,
    InterleavePrediction,
)
from pdcensus.advice.ttft_replay import PrefillTrace, ReplayForecast
from pdcensus.census.model import BucketTable, CensusReport, LedgerResult, Mechanism, Severity
from pdcensus.engines import Advice, of_profile
from pdcensus.engines.radiance import RECORD as RADIANCE
from pdcensus.series.profiles import PROFILES

DEFAULT_TARGET_DECODE_SHARE = 0.5


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _int_flag(flags: Mapping[str, str], flag: str, default: int | None = None) -> int | None:
    try:
        return int(flags[flag])
    except (KeyError, ValueError):
        return default


def _plan(flag: str, value: str, counter_text: str) -> VerificationPlan:
    knob = get_knob(flag)
    return VerificationPlan(
        argv=knob.argv_check(value),
        counter=counter_text,
        bucket_pair=knob.bucket_pair,
        command=(f"pdcensus verify-arm --before BEFORE --after AFTER --flag {flag}={value} "
                 "--pid $(pidof radiance)"),
    )


def replay_forecasts(ledger: LedgerResult, busy_low_tokens_per_second: float, trace: PrefillTrace | None,
                     values: Sequence[int], current: int) -> dict[int, ReplayForecast]:
    """The trace-driven TTFT forecast per N (:mod:`pdcensus.advice.ttft_replay`), over the busy bucket."""
    if trace is None:
        why = "no prefill trace was given to the advice (the recording is needed to replay it)"
        return {n: ReplayForecast(n, None, why) for n in values}
    selected = trace.busy(busy_low_tokens_per_second)
    if selected is None:
        return {n: ReplayForecast(n, None, "no busy bucket to select the replayed requests from") for n in values}
    forecasts = ttft_replay.replay_ttft_ratios(
        trace.times, trace.work_tokens, trace.requests, chunk_step_seconds=ledger.chunk_step_seconds,
        decode_step_seconds=ledger.decode_step_seconds,
        chunk_tokens=ttft_replay.chunk_tokens_per_step(ledger, trace.work_tokens), interleaves=values,
        current_interleave=current, interval_seconds=trace.interval_seconds, selected=selected)
    return {f.interleave: f for f in forecasts}


def _replayed(ttft_now: float, forecast: ReplayForecast) -> float:
    return ttft_now * forecast.ratio if forecast.ratio is not None else math.nan


def _interleave_without_ledger(ledger: LedgerResult, knob: Knob, rollback: str, profile: str) -> Recommendation:
    """The dial named with no N: the ledger that would predict its effect is withheld, or the build has none."""
    counted = profile in PROFILES and PROFILES[profile].has_ledger  # the build has the counters
    summary = (f"the step ledger is withheld on this window ({ledger.reason}), so no predicted effect: "
               "rerun the census on a window where the ledger is kept" if counted else
               "no step ledger on this build, so no predicted effect: the decode-only and held "
               "step counters exist from radiance 1.8.x on (1.0.13 accepts --prefill-interleave "
               "and holds nothing); upgrade the pin, then rerun the census")
    return Recommendation(
        "step-time-sharing", knob.flag, "N", knob.env_line("N"), rollback,
        summary=summary,
        cost=knob.cost, preconditions=knob.preconditions,
        notes=tuple(n for n in (f"ledger: {ledger.reason}", f"profile: {profile}" if profile else "") if n),
    )


def _tradeoff_rows(ledger: LedgerResult, idle: float, values: Sequence[int], saturated: float, ttft_now: float,
                   now: predict.InterleavePoint, current: int,
                   replay: Mapping[int, ReplayForecast]) -> list[dict[str, float]]:
    """The trade-off table: each N's closed form, its busy-bucket mix and its TTFT p90 three ways."""
    chunk, decode = ledger.chunk_step_seconds, ledger.decode_step_seconds
    rows = []
    for point in predict.interleave_tradeoff(chunk, decode, idle, values):
        row = point.to_row()
        row["busy_bucket_per_stream_tokens_per_second"] = (
            predict.busy_bucket_rate(point.interleave, saturated, chunk, decode) if _finite(saturated) else math.nan)
        row["prompt_ttft_p90_seconds_at_least"] = ttft_now * point.ttft_stretch / now.ttft_stretch
        row["busy_ttft_p90_seconds_queueing"] = ttft_now * predict.queued_ttft_ratio(
            point.interleave, current, ledger.chunk_share_of_step_time, chunk, decode)
        row["busy_ttft_p90_seconds_replay"] = _replayed(ttft_now, replay[point.interleave])
        rows.append(row)
    return rows


def _interleave_summary(n: int, chunk: float, decode: float, chosen: predict.InterleavePoint,
                        now: predict.InterleavePoint, idle: float, idle_basis: str, scale: float) -> str:
    """The arithmetic of N in one sentence: tokens per chunk step and held steps, against idle and now."""
    return (
        f"--prefill-interleave {n}: a decoder beside a prefill gets {n + 1} tokens per chunk step + {n} "
        f"decode-only steps = ({n}+1) / ({chunk:.3f} s + {n} x {decode:.4f} s) = "
        f"{chosen.per_stream_tokens_per_second:.1f} tok/s per stream, {chosen.share_of_idle:.0%} of "
        f"{idle_basis} {idle:.1f} tok/s (now {now.per_stream_tokens_per_second:.1f} tok/s); the "
        f"prefilling prompt's TTFT stretches x{scale:.2f} (+{chosen.added_seconds_per_chunk_step * 1000:.0f} ms "
        "per chunk step)"
    )


def _interleave_notes(target_decode_share: float, replay: ReplayForecast, reached: bool, decode: float, idle: float,
                      current: int, n: int, dial_state: str) -> list[str]:
    """What the interleave's figures assume (target, TTFT queueing, the replay), and what the dial already holds."""
    notes = [f"target: keep {target_decode_share:.0%} of the idle per-stream rate during prefill",
             "TTFT: the stretch is the prompt's own; queued requests wait behind the stretched prefill "
             "too, so where busy periods run back to back TTFT p90 grows faster than the stretch; the "
             "queueing column scales it by (1 - load) / (1 - load x stretch), load = chunk steps' share "
             "of step time (M/M/1), unbounded once load x stretch reaches 1",
             "TTFT replay: the recording's own prefill work and requests, interval by interval, through a FIFO "
             "prefill server at the ledger's capacity slowed by the stretch (arrivals at random instants inside "
             "each interval); TTFT p90 now x replay p90 under N / replay p90 now"
             + ("" if replay.ratio is not None else f" - not available: {replay.reason}")]
    if not reached:
        notes.append(f"no N up to {predict.MAX_INTERLEAVE} reaches the target: the share tends to "
                     f"(1/D)/idle = {(1 / decode) / idle:.0%}")
    if dial_state:
        notes.append(f"the flags in effect already hold {current} steps per chunk step and the census still finds "
                     f"sharing: the next step on this dial is {n}")
    return notes


def recommend_interleave(ledger: LedgerResult, buckets: BucketTable | None, flags: Mapping[str, str],
                         target_decode_share: float = DEFAULT_TARGET_DECODE_SHARE,
                         profile: str = "", trace: PrefillTrace | None = None) -> Recommendation | None:
    """``--prefill-interleave N`` for step-time sharing, N picked for the target share (None: no hold needed).

    ``trace`` (read by :func:`pdcensus.api.prefill_trace`) feeds the replayed TTFT
    column; without it that column is empty and a note says why.
    """
    knob = get_knob("--prefill-interleave")
    current = _int_flag(flags, knob.flag, 0) or 0
    rollback = knob.rollback_env_line(str(current))
    if not (ledger.available and _finite(ledger.chunk_step_seconds) and _finite(ledger.decode_step_seconds)
            and ledger.chunk_step_seconds > 0 and ledger.decode_step_seconds > 0):
        return _interleave_without_ledger(ledger, knob, rollback, profile)
    chunk, decode = ledger.chunk_step_seconds, ledger.decode_step_seconds
    idle_row = buckets.rows[0] if buckets and buckets.rows else None
    busy_row = buckets.rows[-1] if buckets and len(buckets.rows) > 1 else None
    idle = idle_row.per_stream_tokens_per_second if idle_row else math.nan
    idle_basis = "the idle bucket's per-stream rate"
    if not _finite(idle) or idle <= 0:
        idle, idle_basis = 1.0 / decode, "1 / decode-only step (no idle bucket rate)"
    n, reached = predict.choose_interleave(target_decode_share, chunk, decode, idle)
    dial_state = ""
    if current and n <= current:  # already deployed (or more): the next step on the same dial, or spent
        if current + 1 > predict.MAX_INTERLEAVE:
            return engine_advice.spent(ActsOn.STEP_TIME_SHARING, RADIANCE.name, knob, str(current),
                                       f"{predict.MAX_INTERLEAVE} held steps per chunk step is the most the advice tries")
        n, dial_state = current + 1, "next-step"
    if n == 0 and current == 0:  # the target is met without a hold: no arm (the severity note says why)
        return None
    chosen = predict.interleave_point(n, chunk, decode, idle)
    now = predict.interleave_point(current, chunk, decode, idle)
    ttft_now = float(busy_row.ttft_p90_seconds) if busy_row else math.nan
    scale = chosen.ttft_stretch / now.ttft_stretch
    values = sorted(set(predict.TRADEOFF_VALUES) | {n})
    measured_busy = busy_row.per_stream_tokens_per_second if busy_row else math.nan
    saturated = (predict.saturated_share(measured_busy, current, chunk, decode) if _finite(measured_busy)
                 else math.nan)
    replay = replay_forecasts(ledger, busy_row.low_tokens_per_second if busy_row else math.nan, trace,
                              values, current)
    rows = _tradeoff_rows(ledger, idle, values, saturated, ttft_now, now, current, replay)
    predicted = InterleavePrediction(
        interleave=float(n),
        target_decode_share=target_decode_share,
        per_stream_tokens_per_second_during_prefill=chosen.per_stream_tokens_per_second,
        share_of_idle=chosen.share_of_idle,
        per_stream_tokens_per_second_during_prefill_now=now.per_stream_tokens_per_second,
        measured_busy_per_stream_tokens_per_second=measured_busy,
        busy_bucket_saturated_share=saturated,
        busy_bucket_per_stream_tokens_per_second_predicted=(
            predict.busy_bucket_rate(n, saturated, chunk, decode) if _finite(saturated) else math.nan),
        idle_per_stream_tokens_per_second=idle,
        chunk_step_seconds=chunk,
        decode_step_seconds=decode,
        ttft_stretch=scale,
        added_seconds_per_chunk_step=chosen.added_seconds_per_chunk_step,
        held_steps_per_chunk_step=float(n),
        busy_ttft_p90_seconds_now=ttft_now,
        busy_ttft_p90_seconds_at_least=ttft_now * scale,
        busy_ttft_p90_seconds_queueing=ttft_now * predict.queued_ttft_ratio(
            n, current, ledger.chunk_share_of_step_time, chunk, decode),
        busy_ttft_p90_seconds_replay=_replayed(ttft_now, replay[n]),
        ttft_p90_ratio_replay=_replayed(1.0, replay[n]),
        replay_ttft_p90_seconds_now=replay[n].replay_seconds_now,
        replay_busy_intervals=float(replay[n].selected_intervals),
        prefill_load_now=ledger.chunk_share_of_step_time,
        prefill_load_predicted=ledger.chunk_share_of_step_time * (1 + n * decode / chunk),
    )
    summary = _interleave_summary(n, chunk, decode, chosen, now, idle, idle_basis, scale)
    notes = _interleave_notes(target_decode_share, replay[n], reached, decode, idle, current, n, dial_state)
    counter = (f"{knob.counter} must leave zero in the after window; about {n} held steps per chunk "
               "step taken beside decoders")
    return Recommendation(
        "step-time-sharing", knob.flag, str(n), knob.env_line(str(n)), rollback, summary, predicted,
        cost=knob.cost, preconditions=knob.preconditions, verification=_plan(knob.flag, str(n), counter),
        tradeoff=tuple(rows), notes=tuple(notes), dial_state=dial_state,
    )


def recommend_arena(ledger: LedgerResult, report: CensusReport, flags: Mapping[str, str],
                    boot: BootLedger) -> Recommendation:
    """Eviction: shrink the arena loan (the step budget; first a prefill span above 1).

    ``--prefill-span 1`` travels with ``--max-num-batched-tokens`` = 1 interval (the deploy line
    carries both: :mod:`pdcensus.advice.catalogue.radiance`); with no span, the budget is halved,
    never below the prefill stager's smallest pass, and the dial is spent once it sits there.
    """
    span = _int_flag(flags, "--prefill-span", 1) or 1
    interval = _int_flag(flags, "--checkpoint-interval") or 4096
    budget = _int_flag(flags, "--max-num-batched-tokens")
    floor = boot.stager_smallest_pass_tokens
    notes: list[str] = []
    if span > 1:
        knob, value, new_budget = get_knob("--prefill-span"), "1", interval
    else:
        knob = get_knob("--max-num-batched-tokens")
        new_budget = max(budget // 2, floor or 0) if budget else 0
        if budget and new_budget >= budget:
            return engine_advice.spent(ActsOn.EVICTION, RADIANCE.name, knob, str(budget),
                                       f"the budget sits at the prefill stager's smallest pass ({floor} tokens)")
        value = str(new_budget) if new_budget else "N"
    loan = cost = None
    if budget and new_budget:
        loan = new_budget / budget
        if ledger.available and _finite(ledger.chunk_step_seconds) and _finite(ledger.decode_step_seconds):
            cost = predict.prefill_cost_ratio(new_budget, budget, ledger.chunk_step_seconds, ledger.decode_step_seconds)
    predicted = ArenaPrediction(report.lag.tail_effect, loan, cost, float(floor) if floor is not None else None)
    summary = (f"{knob.flag} {value}: the arena a chunk step borrows shrinks"
               + (f" to {loan:.0%} of now" if loan is not None and _finite(loan) else "") + ", so the expert slab "
               "loses less and the lagged decode tail should shrink; prefill costs "
               + (f"x{cost:.2f} seconds per prompt token" if cost is not None and _finite(cost) else
                  "more seconds per prompt token "
                                                                                  "(no budget known: no number)"))
    if not budget:
        notes.append("--max-num-batched-tokens not known (give the argv or boot ledger): no numbers")
    counter = ("no counter moves with the arena (it has no metric): verify argv, then the lag test in the "
               "after window must show the 2-14 min tail shrink")
    return Recommendation(
        "eviction", knob.flag, value, knob.env_line(value), knob.rollback_env_line(None), summary,
        predicted, cost=knob.cost, preconditions=knob.preconditions + tuple(
            [f"never below the prefill stager's smallest pass ({floor} tokens, boot ledger)"] if floor else []),
        verification=_plan(knob.flag, value, counter), notes=tuple(notes),
    )


def recommend_checkpoints(depths_tokens: Sequence[int], flags: Mapping[str, str],
                          depths_basis: str = "measured hit depths") -> Recommendation:
    """Self-made prefill (prefix-hit cuts): retention arithmetic per policy at the depths."""
    knob = get_knob("--checkpoint-policy")
    interval = _int_flag(flags, "--checkpoint-interval") or 4096
    current = flags.get(knob.flag, knob.default or "geometric-backoff")
    if current == "keep-all":
        return _next_interval(depths_tokens, interval, depths_basis)
    rows: list[dict[str, float | str]] = []
    for policy in predict.POLICIES:
        for i in (interval, interval // 2, interval // 4):
            rows.append({
                "policy": policy, "interval_tokens": float(i),
                "mean_replay_tokens_continuing": predict.mean_replay(policy, depths_tokens, i),
                "mean_replay_tokens_diverging": predict.mean_replay(policy, depths_tokens, i, diverged=True),
                "snapshot_writes_per_prompt": sum(predict.snapshot_writes(d, i) for d in depths_tokens)
                / max(1, len(depths_tokens)),
                "held_checkpoints_per_sequence": sum(predict.held_checkpoints(policy, d, i)
                                                     for d in depths_tokens) / max(1, len(depths_tokens)),
            })
    now = predict.mean_replay(current, depths_tokens, interval, diverged=True)
    keep = predict.mean_replay("keep-all", depths_tokens, interval, diverged=True)
    half = predict.mean_replay(current, depths_tokens, max(1, interval // 2), diverged=True)
    predicted = CheckpointPolicyPrediction(float(interval), now, keep, half, now - keep)
    summary = (f"--checkpoint-policy keep-all: a prefix hit replays {keep:.0f} tokens on average instead of "
               f"{now:.0f} under {current} at the {depths_basis}; halving --checkpoint-interval under "
               f"{current} replays {half:.0f} (the ladder's coarsest scale is the largest interval x 2^k "
               "under the depth) and doubles the snapshot writes")
    counter = (f"{knob.counter} per prompt token must drop between the before and after windows")
    return Recommendation(
        "self-made-prefill", knob.flag, "keep-all", knob.env_line("keep-all"),
        knob.rollback_env_line(current), summary, predicted, cost=knob.cost,
        preconditions=knob.preconditions, verification=_plan(knob.flag, "keep-all", counter),
        tradeoff=tuple(rows), notes=(f"depths: {depths_basis}",),
    )


def _next_interval(depths_tokens: Sequence[int], interval: int, depths_basis: str) -> Recommendation:
    """keep-all is deployed: replay is bounded by one interval, so the next step is a shorter interval."""
    knob = get_knob("--checkpoint-interval")
    new = interval // 2
    if new < 64:
        return engine_advice.spent(ActsOn.SELF_MADE_PREFILL, RADIANCE.name, knob, str(interval),
                                   "64 tokens is the shortest interval the build accepts")
    now = predict.mean_replay("keep-all", depths_tokens, interval, diverged=True)
    then = predict.mean_replay("keep-all", depths_tokens, new, diverged=True)
    writes = (sum(predict.snapshot_writes(d, new) for d in depths_tokens)
              / max(1, sum(predict.snapshot_writes(d, interval) for d in depths_tokens)))
    summary = (f"--checkpoint-interval {new}: keep-all is deployed, so a prefix hit replays less than one interval; "
               f"halving it replays {then:.0f} tokens on average instead of {now:.0f} at the {depths_basis}, for "
               f"x{writes:.1f} snapshot writes")
    return Recommendation(
        "self-made-prefill", knob.flag, str(new), knob.env_line(str(new)), knob.rollback_env_line(str(interval)),
        summary, CheckpointIntervalPrediction(float(interval), float(new), now, then, writes),
        cost=knob.cost, preconditions=knob.preconditions, dial_state="next-step",
        verification=_plan(knob.flag, str(new), f"{knob.counter} per prompt token must drop"))


def recommend(report: CensusReport, flags: Mapping[str, str] | None = None, boot: BootLedger | None = None,
              target_decode_share: float = DEFAULT_TARGET_DECODE_SHARE,
              prefix_hit_depths_tokens: Sequence[int] = (),
              trace: PrefillTrace | None = None) -> tuple[Recommendation, ...]:
    """One recommendation per mechanism the verdict found (none for none/inconclusive).

    ``trace`` is the analysed shape's prefill trace, for the replayed TTFT column.
    """
    rules = of_profile(report.profile)
    engine = rules.name
    flags = deployed_flags(dict(flags or {}), engine)
    boot = boot or BootLedger()
    found = set(report.verdict.mechanisms) | {report.verdict.mechanism}
    out: list[Recommendation | None] = []
    if rules.advice is Advice.BATCH_SIZE:  # llama.cpp's own knobs (pdcensus.advice.llamacpp)
        from pdcensus.advice.llamacpp import recommend_batch

        if Mechanism.STEP_TIME_SHARING in found:
            out.append(recommend_batch(report, flags, target_decode_share))
        found -= {Mechanism.STEP_TIME_SHARING}
    elif Mechanism.STEP_TIME_SHARING in found:
        out.append(recommend_interleave(report.ledger, report.buckets, flags, target_decode_share, report.profile,
                                        trace) if rules.advice is Advice.RUNBOOK else
                   engine_advice.recommend_budget(report, ActsOn.STEP_TIME_SHARING, engine, flags))
    if Mechanism.EVICTION in found:
        out.append(recommend_arena(report.ledger, report, flags, boot) if rules.advice is Advice.RUNBOOK else
                   engine_advice.recommend_budget(report, ActsOn.EVICTION, engine, flags))
    if Mechanism.PREEMPTION_STALL in found:
        out.append(engine_advice.recommend_kv_headroom(report, engine, flags))
    self_made = any(t.fired and "prefix" in t.name for t in report.traps)
    if self_made and prefix_hit_depths_tokens and rules.advice is Advice.RUNBOOK:
        out.append(recommend_checkpoints(prefix_hit_depths_tokens, flags))
    recs = by_loss(engine_advice.merge_same_knob(
        [_weigh_severity(engine_advice.with_deploy(r, engine, flags), report) for r in out if r is not None],
        report.verdict.mechanism.value), report)
    if report.overload is not None and report.overload.overloaded:  # capacity before knobs: no knob is the fix
        from pdcensus.advice.capacity import capacity_first

        return engine_advice.in_engine_spelling(capacity_first(report, recs), engine)
    return recs


def by_loss(recs: Sequence[Recommendation], report: CensusReport) -> tuple[Recommendation, ...]:
    """The advice follows the losses: the headline mechanism's first, then each found one by its loss share."""
    losses = {f.mechanism.value: f.loss_share for f in report.verdict.found if _finite(f.loss_share)}
    headline = report.verdict.mechanism.value

    def key(rec: Recommendation) -> tuple[int, float]:
        return (0 if rec.mechanism == headline else 1, -losses.get(rec.mechanism, -1.0))

    return tuple(sorted(recs, key=key))


def _weigh_severity(rec: Recommendation, report: CensusReport) -> Recommendation:
    """For a minor mechanism, say plainly what the knob wins back against what it costs, and when to skip it."""
    found = {f.mechanism.value: f for f in report.verdict.found}
    f = found.get(rec.mechanism)
    if f is None or f.severity is not Severity.MINOR or not rec.value:
        return rec
    stretch = rec.predicted.ttft_p90_ratio_replay if isinstance(rec.predicted, InterleavePrediction) else math.nan
    ttft = (f"stretches a prefilling prompt's TTFT about {stretch:.1f}x" if _finite(stretch) and stretch > 1
            else f"costs this: {rec.cost.rstrip('.')}" if rec.cost else "has the cost shown below")
    feel = (f"; ITL p99 is {f.itl_p99_ratio:.1f}x while it acts" if _finite(f.itl_p99_ratio) else "")
    depth = f", decode at {f.depth:.2f} of idle while it acts" if _finite(f.depth) else ""
    note = (f"{rec.mechanism} is minor here: {100 * f.loss_share:.1f} % of decoders' time overall{depth}{feel}. "
            f"{rec.knob} {rec.value} wins back at most that "
            f"{100 * f.loss_share:.1f} % and {ttft}. It is worth it only if the stall while prefill runs is what users "
            "feel (streaming ITL), not for throughput; otherwise leave it")
    return replace(rec, notes=(note, *rec.notes), minor=True)
