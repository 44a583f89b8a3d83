"""Counter checks for other engines' knobs: the series that proves an arm engaged on that engine.

verify-arm (:mod:`pdcensus.verify.arm`) reads radiance's counters itself; this module adds the
checks the catalogue names for the other engines (:class:`~pdcensus.advice.knobs.CounterCheck`):

- ``STEP_TOKENS_AT_MOST`` (vLLM ``--max-num-batched-tokens``): a decoder beside a chunk of at most
  the budget waits at most about one such chunk step, ``T = decode-only step + budget x prefill cost
  per token``, both from the after window's counted ledger (the excess of the prefill spans' wall
  time over their steps at the decode-only pace, per computed prefill token). So among the decoders'
  long gaps in prefill spans (``vllm:inter_token_latency_seconds``, beyond 3 decode-only steps), at
  most :data:`BEYOND_SHARE` may last beyond ``2 T`` (room for the later chunks' dearer attention and
  the histogram's coarse buckets; counts inside a bucket are read as spread evenly). The same share
  in the before window, against the same ``T``, must be above it, or the check cannot tell the arm
  from no arm (the old budget was as small). ``vllm:iteration_tokens_total`` cannot prove a budget:
  on V1 it observes a prompt's tokens whole, in the step its prefill ends (0.32.0
  ``vllm/v1/metrics/loggers.py`` l. 1273-1276), so a 3,000-token prompt chunked at 512 reads as
  one 3,000-token step; and the mean tokens per counted step cannot either, since decode-only steps
  between back-to-back prompts share their scrapes (measured live: 132 tokens per step at the
  2,048 default, 134 at 512).
"""

from __future__ import annotations

import math

import numpy as np

from pdcensus.advice.knobs import ActsOn, Dial, Knob
from pdcensus.census.buckets import assign_on_edges
from pdcensus.census.signals import ShapeSignals
from pdcensus.engines import record
from pdcensus.series.profiles import Signal
from pdcensus.series.quantile import quantile_of_bounds
from pdcensus.series.vllm_steps import observations_above as _above
from pdcensus.series.vllm_steps import span_mask
from pdcensus.verify.model import ArmStep, StepStatus


BEYOND_SHARE = 0.10  # of the long gaps, at most this share beyond twice one budget's chunk step
LONG_GAP_STEPS = 3.0  # a long gap: beyond this many decode-only steps
MIN_LONG_GAPS = 30  # the census's sample floor


def chunk_gap_reading(signals: ShapeSignals, budget: float, bound_seconds: float | None = None) -> dict[str, float]:
    """The window's one-chunk step ``T`` for ``budget`` and its decoders' long gaps beyond ``2 T`` (NaNs without)."""
    nan = {"chunk_step_seconds": math.nan, "long_gaps": math.nan, "beyond": math.nan, "share": math.nan,
           "sure_share": math.nan, "possible_share": math.nan}
    cs, chunk, prefill = signals.counted_steps, signals.chunk_intervals, signals.prefill_tokens_per_second
    hist = signals.histograms.get(Signal.ITL)
    if cs is None or chunk is None or prefill is None or hist is None:
        return nan
    dt = np.asarray(signals.interval_seconds, dtype=float)
    ok = cs.busy & np.isfinite(dt)
    marked = span_mask(cs, chunk) & ok
    clean = ok & ~marked
    steps = np.nan_to_num(cs.steps)
    if steps[clean].sum() <= 0 or not marked.any():
        return nan
    decode_step = float(dt[clean].sum() / steps[clean].sum())
    tokens = float(np.nansum(np.where(marked, np.nan_to_num(np.asarray(prefill, dtype=float)) * dt, 0.0)))
    excess = float(dt[marked].sum() - steps[marked].sum() * decode_step)
    if tokens <= 0:
        return nan
    chunk_step = bound_seconds if bound_seconds is not None else decode_step + budget * max(excess, 0.0) / tokens
    rows = marked & np.isfinite(hist.increases).all(axis=1)
    counts = hist.increases[rows].sum(axis=0)
    bounds = np.asarray(hist.upper_bounds, dtype=float)
    long_gaps = _above(bounds, counts, LONG_GAP_STEPS * decode_step)
    beyond = _above(bounds, counts, 2.0 * chunk_step)
    # what the buckets say for sure: gaps in buckets wholly above 2 T, and those in the bucket that straddles it
    at = int(np.searchsorted(bounds, 2.0 * chunk_step, side="left"))
    sure = float(counts[-1] - counts[at]) if at < bounds.size else 0.0
    possible = float(counts[-1] - (counts[at - 1] if at > 0 else 0.0)) if at < bounds.size else 0.0
    def share(n: float) -> float:
        return n / long_gaps if long_gaps > 0 else math.nan

    return {"chunk_step_seconds": chunk_step, "long_gaps": long_gaps, "beyond": beyond, "share": share(beyond),
            "sure_share": share(sure), "possible_share": share(possible)}


def check_step_tokens(flag: str, value: str | None, before: ShapeSignals, after: ShapeSignals) -> ArmStep:
    """Decoders' gaps beside prefill: few beyond twice one budget's chunk step after, many before (or cannot tell)."""
    if value is None or not value.isdigit():
        return ArmStep("counter", StepStatus.UNKNOWN, f"{flag} needs a value to compare the step sizes with")
    a = chunk_gap_reading(after, float(value))
    b = chunk_gap_reading(before, float(value), a["chunk_step_seconds"] if math.isfinite(a["chunk_step_seconds"])
                          else None)
    numbers = {"chunk_step_seconds": a["chunk_step_seconds"], "long_gaps_after": a["long_gaps"],
               "beyond_share_after": a["share"], "long_gaps_before": b["long_gaps"], "beyond_share_before": b["share"],
               "budget_tokens": float(value)}
    if not math.isfinite(a["share"]) or a["long_gaps"] < MIN_LONG_GAPS:
        few = ("too few decoder gaps beside prefill in the after window to time a chunk "
               f"(vllm:inter_token_latency_seconds with the counted steps; need {MIN_LONG_GAPS})")
        return _observed_at_most(flag, value, after, numbers, few)
    t = a["chunk_step_seconds"]
    text = (f"one {value}-token chunk step is {t * 1000:.0f} ms here (counted ledger); decoders' long gaps beside "
            f"prefill beyond {2 * t * 1000:.0f} ms: {a['share']:.0%} of {a['long_gaps']:.0f} after")
    before_text = (f", {b['share']:.0%} of {b['long_gaps']:.0f} before" if math.isfinite(b["share"])
                   else ", none measurable before")
    if a["sure_share"] > BEYOND_SHARE:
        return ArmStep("counter", StepStatus.FAILED, text + before_text + f" (allowed {BEYOND_SHARE:.0%}; "
                       f"{a['sure_share']:.0%} in buckets wholly beyond): chunks larger than the budget still run",
                       numbers)
    if a["possible_share"] > BEYOND_SHARE:
        return ArmStep("counter", StepStatus.UNKNOWN, text + before_text + f": {a['possible_share']:.0%} lie in the "
                       f"histogram bucket that holds {2 * t * 1000:.0f} ms, which cannot tell a gap of one chunk "
                       "step from one of two: cannot tell", numbers)
    if not math.isfinite(b["share"]) or b["share"] <= BEYOND_SHARE:
        above_before, above_after = _steps_above(before, value), _steps_above(after, value)
        if above_before > 0 and above_after == 0:  # the step sizes tell it where the gaps cannot
            return ArmStep("counter", StepStatus.PASSED, text + before_text + f"; vllm:iteration_tokens_total: "
                           f"{above_before:.0f} observations above {value} before, none after", {
                               **numbers, "observations_above_budget_before": above_before,
                               "observations_above_budget_after": above_after})
        return ArmStep("counter", StepStatus.UNKNOWN, text + before_text + ": the before window's chunks were as "
                       "short already, so this count cannot tell the arm from no arm", numbers)
    return ArmStep("counter", StepStatus.PASSED, text + before_text, numbers)


def _steps_above(signals: ShapeSignals, value: str) -> float:
    """``vllm:iteration_tokens_total`` observations above ``value`` tokens (NaN without the histogram)."""
    hist = signals.histograms.get(Signal.ITERATION_TOKENS)
    if hist is None or hist.increases.size == 0:
        return math.nan
    bounds = np.asarray(hist.upper_bounds, dtype=float)
    at = int(np.searchsorted(bounds, float(value), side="left"))
    rows = hist.increases[np.isfinite(hist.increases).all(axis=1)]
    return 0.0 if at >= bounds.size else float(rows[:, -1].sum() - rows[:, at].sum())


def _observed_at_most(flag: str, value: str, after: ShapeSignals, numbers: dict[str, float], few: str) -> ArmStep:
    """Where the gaps cannot time a chunk: ``vllm:iteration_tokens_total`` with no observation above the budget
    proves no step (and no whole prompt) carried more; observations above it cannot tell (prompts are observed
    whole where their prefill ends), never a failure."""
    above = _steps_above(after, value)
    if not math.isfinite(above):
        return ArmStep("counter", StepStatus.UNKNOWN, few + "; no vllm:iteration_tokens_total either", numbers)
    numbers = {**numbers, "observations_above_budget_after": above}
    if above == 0:
        return ArmStep("counter", StepStatus.PASSED, f"vllm:iteration_tokens_total: no observation above {flag} "
                       f"{value} in the after window ({few.split(' (')[0]}, so the step sizes decide)", numbers)
    return ArmStep("counter", StepStatus.UNKNOWN, few + f"; vllm:iteration_tokens_total has {above:.0f} observations "
                   f"above {value}, which can be prompts chunked within it (vLLM observes a prompt whole where its "
                   "prefill ends): cannot tell", numbers)


MIN_STALL_CHANGE = 0.10  # the busy ITL p99 must fall by this share (verify-arm's MIN_CHANGE)


def busy_itl_p99(signals: ShapeSignals, idle_threshold_tokens_per_second: float) -> float:
    """ITL p99 over the scrapes whose prefill rate is at or above the idle threshold (histogram increases summed)."""
    hist = signals.histograms.get(Signal.ITL)
    prefill = signals.prefill_tokens_per_second
    if hist is None or prefill is None or not math.isfinite(idle_threshold_tokens_per_second):
        return math.nan
    busy = assign_on_edges(prefill, (idle_threshold_tokens_per_second,)).busy & np.isfinite(hist.increases).all(axis=1)
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
    # an ITL histogram of per-request means (TGI's) cannot show a stall: the ledger's chunk step can
    if record(before.profile.engine).itl_per_request_mean:
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
    hist = before.histograms.get(Signal.ITL)
    if not ok and hist is not None and what.startswith("busy ITL"):
        bounds = np.asarray(hist.upper_bounds, dtype=float)
        at = np.searchsorted(bounds, [p_before, p_after], side="left")
        if at[0] == at[1]:  # both quantiles interpolated inside one le bucket: it cannot show the change
            lo = bounds[at[0] - 1] if at[0] > 0 else 0.0
            return ArmStep(pair.name, StepStatus.UNKNOWN, text + f": both lie in the histogram's ({lo:g}, "
                           f"{bounds[min(at[0], bounds.size - 1)]:g}] s bucket, which cannot show a shorter stall "
                           "inside it", numbers)
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
    # a per-prompt chunk cap (vLLM --long-prefill-token-threshold) moves the stall as a budget does
    if knob.dial in (Dial.CHUNK_BUDGET, Dial.LONG_PREFILL_LIMIT) and pair.status is StepStatus.FAILED:
        return check_stall(pair, before, after, chunk_step_seconds)
    if knob.dial is Dial.KV_CAPACITY and ActsOn.PREEMPTION_STALL in knob.acts_on:
        return check_preemptions(pair, before, after)
    return pair
