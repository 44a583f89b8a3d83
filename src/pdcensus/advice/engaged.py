"""Counter checks for other engines' knobs: the series that proves an arm engaged on that engine.

verify-arm (:mod:`pdcensus.advice.verify`) reads radiance's counters itself; this module adds the
checks the catalogue names for the other engines (:class:`~pdcensus.advice.knobs.CounterCheck`):

- ``STEP_TOKENS_AT_MOST`` (vLLM ``--max-num-batched-tokens``): ``vllm:iteration_tokens_total`` is a
  histogram of tokens per engine step (``vllm/v1/metrics/loggers.py``); in the after window no step
  may fall above the first bucket bound at or above the budget (``+Inf`` minus that bucket's
  cumulative increase is zero). The before window's count above it is reported beside, so a
  budget that was never reached reads as such.
"""

from __future__ import annotations

import math

import numpy as np

from pdcensus.advice.knobs import ActsOn, Dial, Knob
from pdcensus.advice.model import ArmStep, StepStatus
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal
from pdcensus.series.quantile import quantile_of_bounds


def steps_above(signals: ShapeSignals, tokens: int) -> tuple[float, float] | None:
    """(steps above the first bound >= ``tokens``, that bound) over the window; None without the histogram."""
    hist = signals.histograms.get(Signal.ITERATION_TOKENS)
    if hist is None or hist.increases.size == 0:
        return None
    bounds = np.asarray(hist.upper_bounds, dtype=float)
    at = int(np.searchsorted(bounds, float(tokens), side="left"))
    if at >= bounds.size:
        return 0.0, math.inf
    rows = hist.increases[np.isfinite(hist.increases).all(axis=1)]
    total, below = float(rows[:, -1].sum()), float(rows[:, at].sum())
    return total - below, float(bounds[at])


def check_step_tokens(flag: str, value: str | None, before: ShapeSignals, after: ShapeSignals) -> ArmStep:
    """No step of the after window carries more tokens than the budget."""
    if value is None or not value.isdigit():
        return ArmStep("counter", StepStatus.UNKNOWN, f"{flag} needs a value to compare the step sizes with")
    found = steps_above(after, int(value)), steps_above(before, int(value))
    after_found, before_found = found
    if after_found is None:
        return ArmStep("counter", StepStatus.UNKNOWN, "no vllm:iteration_tokens_total histogram in the after window")
    above, bound = after_found
    numbers = {"steps_above_after": above, "bound_tokens": bound,
               "steps_above_before": before_found[0] if before_found else math.nan}
    text = (f"vllm:iteration_tokens_total: {above:.0f} steps above {bound:g} tokens in the after window "
            f"({numbers['steps_above_before']:.0f} before)")
    return ArmStep("counter", StepStatus.PASSED if above == 0 else StepStatus.FAILED, text, numbers)


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
