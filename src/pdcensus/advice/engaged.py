"""Counter checks for other engines' knobs: the series that proves an arm engaged on that engine.

verify-arm (:mod:`pdcensus.advice.verify`) reads radiance's counters itself; this module adds the
checks the catalogue names for the other engines (:class:`~pdcensus.advice.knobs.CounterCheck`):

- ``STEP_TOKENS_AT_MOST`` (vLLM ``--max-num-batched-tokens``): the prefill tokens computed per
  engine step while prefill ran may not exceed the budget. ``vllm:iteration_tokens_total`` cannot
  say it: on V1 it observes a prompt's tokens whole, in the step its prefill ends
  (``vllm/v1/metrics/loggers.py`` l. 1273-1276 at 0.32.0; l. 1129-1131 at 0.19.1), so a 3,000-token
  prompt chunked at 512 reads as one 3,000-token step. What does hold: the step count
  (``_count``: every step beside a decoder, :mod:`pdcensus.series.vllm_steps`) over the intervals
  that carried prefill, against the computed prompt tokens of the window. That mean is at most the
  chunk a step carried, so it bounds the budget from below: an after-window mean above the budget
  is a budget that did not engage. It is a fair test only where it can fail: where the before
  window's mean was already at or under the new budget (prefill bursts much shorter than a
  scrape dilute it with decode-only steps), the check says it cannot tell.
"""

from __future__ import annotations

import math

import numpy as np

from pdcensus.advice.knobs import ActsOn, Dial, Knob
from pdcensus.advice.model import ArmStep, StepStatus
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal
from pdcensus.series.quantile import quantile_of_bounds
from pdcensus.series.vllm_steps import span_mask


def prefill_tokens_per_step(signals: ShapeSignals) -> tuple[float, float, float]:
    """(computed prefill tokens, steps in the intervals that carried prefill, their ratio); NaNs without the count."""
    cs, chunk, prefill = signals.counted_steps, signals.chunk_intervals, signals.prefill_tokens_per_second
    if cs is None or chunk is None or prefill is None:
        return math.nan, math.nan, math.nan
    dt = np.asarray(signals.interval_seconds, dtype=float)
    ok = cs.busy & np.isfinite(dt)
    tokens = float(np.nansum(np.where(ok, np.nan_to_num(np.asarray(prefill, dtype=float)) * dt, 0.0)))
    steps = float(np.nansum(np.where(span_mask(cs, chunk) & ok, np.nan_to_num(cs.steps), 0.0)))
    return tokens, steps, (tokens / steps if steps > 0 else math.nan)


def check_step_tokens(flag: str, value: str | None, before: ShapeSignals, after: ShapeSignals) -> ArmStep:
    """Prefill tokens per step while prefill ran: at most the budget after, and above it before (or cannot tell)."""
    if value is None or not value.isdigit():
        return ArmStep("counter", StepStatus.UNKNOWN, f"{flag} needs a value to compare the step sizes with")
    budget = float(value)
    t0, n0, m0 = prefill_tokens_per_step(before)
    t1, n1, m1 = prefill_tokens_per_step(after)
    numbers = {"prefill_tokens_per_step_before": m0, "prefill_tokens_per_step_after": m1, "budget_tokens": budget,
               "prefill_steps_before": n0, "prefill_steps_after": n1}
    if not math.isfinite(m1):
        return ArmStep("counter", StepStatus.UNKNOWN, "no counted steps beside prefill in the after window "
                       "(vllm:iteration_tokens_total_count, a running gauge and prefill in the window are needed)",
                       numbers)
    text = (f"prefill tokens per step while prefill ran (vllm:iteration_tokens_total_count over the prefill "
            f"intervals): {m1:.0f} after against {flag} {value} ({t1:.0f} tokens in {n1:.0f} steps)")
    before_text = f"; {m0:.0f} before" if math.isfinite(m0) else "; the before window has no counted steps"
    if m1 > budget:
        return ArmStep("counter", StepStatus.FAILED, text + before_text + ": steps carry more than the budget", numbers)
    if not math.isfinite(m0) or m0 <= budget:
        return ArmStep("counter", StepStatus.UNKNOWN, text + before_text + ": the before window was already at or "
                       "under the budget, so this count cannot tell the arm from no arm", numbers)
    return ArmStep("counter", StepStatus.PASSED, text + before_text, numbers)


MIN_STALL_CHANGE = 0.10  # the busy ITL p99 must fall by this share (verify-arm's MIN_CHANGE)
# engines whose ITL histogram is a per-request mean (TGI's tgi_request_mean_time_per_token_duration)
PER_REQUEST_ITL = frozenset({"tgi"})


def busy_itl_p99(signals: ShapeSignals, idle_threshold_tokens_per_second: float) -> float:
    """ITL p99 over the scrapes whose prefill rate is at or above the idle threshold (histogram increases summed)."""
    hist = signals.histograms.get(Signal.ITL)
    prefill = signals.prefill_tokens_per_second
    if hist is None or prefill is None or not math.isfinite(idle_threshold_tokens_per_second):
        return math.nan
    p = np.asarray(prefill, dtype=float)
    busy = np.isfinite(p) & (p >= idle_threshold_tokens_per_second) & np.isfinite(hist.increases).all(axis=1)
    if not busy.any():
        return math.nan
    counts = hist.increases[busy].sum(axis=0)
    return quantile_of_bounds(0.99, hist.upper_bounds, counts) if counts[-1] > 0 else math.nan


def check_stall(pair: ArmStep, before: ShapeSignals, after: ShapeSignals,
                chunk_step_seconds: tuple[float, float] = (math.nan, math.nan)) -> ArmStep:
    """A step-budget arm's bucket pair: the busy scrapes' ITL p99 (the longest stall beside a chunk) must fall.

    A smaller chunk leaves the prompt's compute, and so the decoders' mean rate while it runs, about
    where it was; what it moves is how long each chunk step holds a decoder. The per-stream rate and
    TTFT comparison stays in the detail.
    """
    threshold = pair.numbers.get("idle_threshold_tokens_per_second", math.nan)
    what = "busy ITL p99 (the longest stall beside a chunk)"
    if before.profile.engine in PER_REQUEST_ITL:  # a per-request mean cannot show a stall: the ledger's chunk step can
        p_before, p_after = chunk_step_seconds
        what = "the mean chunk step (what a decoder beside it waits)"
    else:
        p_before, p_after = busy_itl_p99(before, threshold), busy_itl_p99(after, threshold)
    numbers = {**pair.numbers, "stall_seconds_before": p_before, "stall_seconds_after": p_after}
    if not (math.isfinite(p_before) and math.isfinite(p_after) and p_before > 0):
        return ArmStep(pair.name, pair.status, pair.detail + "; no stall to compare (ITL histogram or ledger)", numbers)
    ok = p_after <= p_before * (1 - MIN_STALL_CHANGE)
    text = (f"{what} {p_before * 1000:.0f} -> {p_after * 1000:.0f} ms "
            f"(x{p_after / p_before:.2f}); " + pair.detail.replace(": the arm did not move the busy bucket", ""))
    return ArmStep(pair.name, StepStatus.PASSED if ok else StepStatus.FAILED,
                   text if ok else text + ": the arm did not shorten the stall", numbers)


def preemptions_per_hour(signals: ShapeSignals) -> float:
    inc = signals.increase(Signal.PREEMPTIONS)
    dt = np.asarray(signals.interval_seconds, dtype=float)
    if inc is None:
        return math.nan
    ok = np.isfinite(inc) & np.isfinite(dt)
    seconds = float(dt[ok].sum())
    return float(np.asarray(inc)[ok].sum()) * 3600.0 / seconds if seconds > 0 else math.nan


def check_preemptions(pair: ArmStep, before: ShapeSignals, after: ShapeSignals) -> ArmStep:
    """A KV-headroom arm's pair: preemptions per hour must fall (the busy bucket is not where it acts)."""
    p_before, p_after = preemptions_per_hour(before), preemptions_per_hour(after)
    numbers = {**pair.numbers, "preemptions_per_hour_before": p_before, "preemptions_per_hour_after": p_after}
    if not (math.isfinite(p_before) and math.isfinite(p_after)) or p_before <= 0:
        return ArmStep(pair.name, StepStatus.UNKNOWN, "no preemptions to compare (the engine exports no preemption "
                       "counter, or the before window had none)", numbers)
    ok = p_after <= p_before * (1 - MIN_STALL_CHANGE)
    text = f"preemptions {p_before:.0f} -> {p_after:.0f} per hour (x{p_after / p_before:.2f})"
    return ArmStep(pair.name, StepStatus.PASSED if ok else StepStatus.FAILED,
                   text if ok else text + ": the arm did not stop the preemptions", numbers)


def judge_pair(knob: Knob, pair: ArmStep, before: ShapeSignals, after: ShapeSignals,
               chunk_step_seconds: tuple[float, float] = (math.nan, math.nan)) -> ArmStep:
    """Where a dial acts decides what its pair is judged by: a step budget the stall, KV headroom preemptions.

    ``chunk_step_seconds`` are the two windows' ledger means (the stall where ITL cannot show it).
    """
    if knob.dial is Dial.CHUNK_BUDGET and pair.status is StepStatus.FAILED:
        return check_stall(pair, before, after, chunk_step_seconds)
    if knob.dial is Dial.KV_CAPACITY and ActsOn.PREEMPTION_STALL in knob.acts_on:
        return check_preemptions(pair, before, after)
    return pair
