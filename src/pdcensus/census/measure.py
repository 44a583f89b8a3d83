"""Measure what the verdict reads: per-replicate estimates from the passes' outputs.

Every estimate is a ratio of decoder-time weighted sums, computed for the window (row 0)
and every moving-block bootstrap replicate at once as matrix products (see
:mod:`pdcensus.census.bootstrap`). The verdict (:mod:`pdcensus.census.verdict`) holds these
against its thresholds; what is decided here is which estimate a figure is read from (the
step-span basis of the inter-token depth, the scrapes an interval's prefill is spread over),
each named in the basis the evidence prints, and a few yes/no readings the verdict takes as
given, each against a threshold of its own: whether a preemption burst lines up with a stall
(``BURST_DIP``, ``BURST_SPIKE``), whether eviction ran uncontrolled (the detector's
``INFLATION_MARGIN`` and ``TAIL_EFFECT_MARGIN``), whether decode read faster while prompts were
counted (``FASTER_WHILE_COUNTED``, the contrast note), whether the across-scrapes depth has
tokens enough (``MIN_FELT_TOKENS``), and which idle scrapes ran no prefill at all
(``IDLE_FLOOR_TOKENS_PER_SECOND``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.bootstrap import interval, weighted_ratio
from pdcensus.census.buckets import IDLE_FLOOR_TOKENS_PER_SECOND, BucketAssignment
from pdcensus.census.detect import INFLATION_MARGIN, TAIL_EFFECT_MARGIN
from pdcensus.census.dose import DoseFit
from pdcensus.census.guards import ContrastCause, GuardReason, Guards, VerdictLimits
from pdcensus.census.lag import TAIL_WINDOW_SECONDS, History
from pdcensus.census.ledger import LedgerExcess
from pdcensus.census.model import PreemptionResult
from pdcensus.census.preemption import PreemptionLoss
from pdcensus.census.recovery import recovery
from pdcensus.census.signals import Histogram, ShapeSignals
from pdcensus.census.ttft import summed_quantile
from pdcensus.census.verdict_inputs import VerdictInputs
from pdcensus.census.vllm_counted import VllmCounted
from pdcensus.series.profiles import Signal
from pdcensus.series.vllm_gaps import LONG_STEPS, GapContrast, gap_contrast, gap_dose
from pdcensus.series.vllm_steps import (
    CountedSteps,
    chunk_step_depth,
    clean_pace,
    itl_depth,
    observations_above,
    prompt_window_depth,
    span_mask,
)

# A burst lines up with a stall when decode at the burst is this far below its bucket's
# baseline, or prefill (the re-prefill from token 0) this far above its mean.
BURST_DIP = 0.95
BURST_SPIKE = 1.5
# Decode per stream this much faster while prompts are counted (interval's lower end) is no
# interference at all: the counters see the work late (see contrast_note).
FASTER_WHILE_COUNTED = 1.05
# The inter-token depth over prefill that runs across scrapes needs this many tokens in its spans (the
# census's own sample floor: a pace from fewer tokens moves by a fifth with one token more or less)
MIN_FELT_TOKENS = 30
ITL_ALL = "step spans with prefill / without"
ITL_DOSE = ("the long inter-token gaps beside prompts (no span free of prefill timed a decode-only step): the "
            "intervals' median gap over the long gaps' mean, over the prompts' waits where the TTFT histogram gives them")
ITL_ACROSS = ("step spans of prefill that ran across scrapes (several chunk steps, or one longer than a scrape) / "
              "without prefill (spans of prefills begun and ended inside one scrape left out of both sides)")


@dataclass(frozen=True)
class Measured:
    """What the passes produced for one shape, as the measuring step needs it."""

    proven: bool
    shape_reason: str
    signals: ShapeSignals
    assignment: BucketAssignment
    per_stream: np.ndarray
    decoder_seconds: np.ndarray
    history: History
    weights: np.ndarray
    excess: LedgerExcess | None
    running: np.ndarray | None
    interval_seconds: np.ndarray
    tail_effect: np.ndarray
    tail_ran: bool
    preemption_loss: PreemptionLoss
    preemption: PreemptionResult
    dose: DoseFit
    withheld: tuple[str, ...] = ()
    guards: Guards | None = None
    limits: VerdictLimits | None = None


def _itl_ratio(hist: Histogram | None, active: np.ndarray, reference: np.ndarray) -> float:
    """ITL p99 over intervals where a mechanism acts / over the reference intervals."""
    if hist is None or not active.any() or not reference.any():
        return float("nan")
    a, b = summed_quantile(0.99, hist, active), summed_quantile(0.99, hist, reference)
    return a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else float("nan")


def _share(mask: np.ndarray, wdec: np.ndarray) -> float:
    total = float(wdec.sum())
    return float(wdec[mask].sum()) / total if total > 0 else float("nan")


def single_session(limits: VerdictLimits | None) -> str:
    """Non-empty when the guards allow no contrast: no other session's prefill to bucket decode by."""
    if limits is None or limits.contrast_allowed:
        return ""
    return "; ".join(r.value for r in limits.reasons if r in (GuardReason.NO_OTHER_SESSION, GuardReason.TOO_FEW_OTHER))


def contrast_note(guards: Guards | None, lag0: np.ndarray) -> str:
    """Why decode per stream reads faster while prompts are counted, when it does beyond noise."""
    lo, _ = interval(lag0)
    explained = guards.contrast if guards is not None else None
    if explained is not None and explained.cause is not ContrastCause.NOT_ABOVE_ONE:
        return (f"decode per stream is {explained.contrast:.2f}x faster in the polls where prompts were counted: "
                f"{explained.cause.value}")
    if not (np.isfinite(lo) and lo > FASTER_WHILE_COUNTED):
        return ""
    return (f"decode per stream is {lag0[0]:.2f}x faster while prefill runs: the prefill and decode signals do not "
            "see the same work (prefill counted late, or decode counted at request end)")


def verdict_inputs(m: Measured) -> VerdictInputs:
    """The verdict's inputs: contrasts, loss shares, signatures' readings and the data's limits."""
    s, assignment, weights, wdec, hist, excess = m.signals, m.assignment, m.weights, m.decoder_seconds, m.history, m.excess
    valid = np.isfinite(m.per_stream) & (wdec > 0)
    rate = np.where(valid, m.per_stream, 0.0)
    idle, busy = assignment.idle & valid, assignment.busy & valid
    idle_rate = weighted_ratio(weights, wdec * rate * idle, wdec * idle)
    total = weights @ wdec
    busy_seconds, busy_rate_seconds = weights @ (wdec * busy), weights @ (wdec * rate * busy)
    with np.errstate(invalid="ignore", divide="ignore"):
        collapse = (busy_seconds - busy_rate_seconds / idle_rate) / total
        lag0 = (busy_rate_seconds / busy_seconds) / idle_rate
    clean, tail = hist.clean & valid, hist.tail & valid
    clean_rate = weighted_ratio(weights, wdec * rate * clean, wdec * clean)
    with np.errstate(invalid="ignore", divide="ignore"):
        tail_loss = ((weights @ (wdec * tail)) - (weights @ (wdec * rate * tail)) / clean_rate) / total
    if not np.isfinite(m.tail_effect[0]):
        tail_loss = np.full(weights.shape[0], np.nan)
    running, dt = m.running, m.interval_seconds
    sharing = residency = during = after = after_bounded = ledger_depth = ledger_depth_local = None
    chunk_steps_beside = 0.0
    if excess is not None:
        r = np.nan_to_num(running) if running is not None else np.zeros(s.n)
        with_decoders = excess.valid & (r > 0)
        den = np.where(with_decoders, r * dt, 0.0)
        sharing = weighted_ratio(weights, np.where(with_decoders, r * np.nan_to_num(excess.sharing_seconds), 0.0), den)
        residency = weighted_ratio(weights, np.where(with_decoders, r * np.nan_to_num(excess.residency_seconds), 0.0), den)
        chunk_steps_beside = float(np.nansum(np.where(with_decoders, excess.chunk_steps, 0.0))) if running is not None else 0.0
        undisturbed_step = np.nan_to_num(excess.reference_step_seconds)

        def step_over_chunk(step: np.ndarray, chunk_seconds: np.ndarray) -> np.ndarray:
            """The chunk spans' steps at ``step`` over their seconds: decode-only step / chunk step, per replicate."""
            return weighted_ratio(weights, np.where(with_decoders, step * excess.chunk_steps, 0.0),
                                  np.where(with_decoders & (step > 0), chunk_seconds, 0.0))
        if excess.chunk_seconds is not None and excess.chunk_steps_counted and np.isfinite(excess.reference_step_seconds).any():
            ledger_depth = step_over_chunk(undisturbed_step, excess.chunk_seconds)
            if excess.charged_step_seconds is not None:
                ledger_depth_local = step_over_chunk(np.nan_to_num(excess.charged_step_seconds), excess.chunk_seconds)
        if np.isfinite(excess.reference_step_seconds).any():
            undisturbed_seconds = undisturbed_step * excess.decode_steps
            during = weighted_ratio(weights, excess.decode_seconds * hist.heavy, undisturbed_seconds * hist.heavy)
            after = weighted_ratio(weights, excess.decode_seconds * hist.quiet, undisturbed_seconds * hist.quiet)
            quiet_steps = (excess.decode_steps * hist.quiet).sum()
            if quiet_steps <= 0:
                after = None
            if excess.batch_step_bound is not None and quiet_steps > 0:
                # decode-only time beyond the longest step a bigger batch alone could explain
                allowed = np.nan_to_num(excess.batch_step_bound) * excess.decode_steps
                beyond = np.clip(excess.decode_seconds - allowed, 0.0, None)
                after_bounded = weighted_ratio(weights, (undisturbed_seconds + beyond) * hist.quiet, undisturbed_seconds * hist.quiet)
    pre, ploss = m.preemption, m.preemption_loss
    aligned = bool((np.isfinite(pre.decode_dip) and pre.decode_dip <= BURST_DIP)
                   or (np.isfinite(pre.prefill_spike) and pre.prefill_spike >= BURST_SPIKE))
    burst = ploss.active if ploss.active is not None else np.zeros(s.n, bool)
    itl = s.histograms.get(Signal.ITL)
    rates = s.rates_from_counters
    window = float(s.times[-1] - s.times[0]) if s.n > 1 else 0.0
    tail_note = "" if m.tail_ran else (
        f"the window is {window / 60:.0f} min: a 2-14 min tail needs {TAIL_WINDOW_SECONDS[1] / 60:.0f} min of history "
        "before a clean scrape and tail scrapes after prefill; record a longer window with idle spells"
        if window < 2 * TAIL_WINDOW_SECONDS[1] else "")
    prompt = s.increase(Signal.PROMPT_TOKENS)
    tokens = prompt if prompt is not None else (np.nan_to_num(np.asarray(s.prefill_tokens_per_second)) * dt)
    counted_ledger = excess is not None and excess.chunk_steps_counted
    rec = recovery(m.per_stream, wdec, running, hist, weights, s.times, tokens,
                   (excess.decode_steps, excess.decode_seconds) if counted_ledger and excess is not None else None,
                   s.spanned.get(Signal.PROMPT_TOKENS) if prompt is not None else None)
    uncontrolled = bool(
        (after is not None and _lower(after) > INFLATION_MARGIN)
        or (m.tail_ran and np.isfinite(m.tail_effect[0]) and interval(m.tail_effect)[1] < TAIL_EFFECT_MARGIN))
    steps_spans, gaps, over_waits = None, None, False
    felt, felt_tokens, felt_basis, felt_chunk = float("nan"), (0, 0), ITL_ALL, float("nan")
    preempted = s.increase(Signal.PREEMPTIONS)
    stalled = np.zeros(s.n, dtype=bool) if preempted is None else np.nan_to_num(preempted) > 0
    if s.counted_steps is not None and s.chunk_intervals is not None and excess is not None:
        steps_spans = span_mask(s.counted_steps, s.chunk_intervals)
        felt, _, c_in, c_out = itl_depth(s.counted_steps, s.chunk_intervals, stalled)
        felt_tokens = (c_in, c_out)
        across = _across_scrapes(s.counted_steps, s.chunk_intervals, s.prefill_across)
        marked, left_out = s.chunk_intervals, stalled
        if across.any():
            # prefill that runs across scrapes, beside decoders: its spans alone, with the spans of prefills
            # that began and ended inside one scrape left out of both sides (a decoder's own short re-prompt
            # marks a scrape that decoded at full pace: in the chunk side it dilutes the depth)
            within = steps_spans & ~span_mask(s.counted_steps, across)
            f2, _, a_in, a_out = itl_depth(s.counted_steps, across, stalled | within)
            if np.isfinite(f2) and a_in >= MIN_FELT_TOKENS and _holds_most_long_gaps(
                    s.counted_steps, span_mask(s.counted_steps, across) & ~stalled, steps_spans & ~stalled,
                    ~steps_spans & ~stalled, s.histograms.get(Signal.ITL)):
                felt, felt_tokens, felt_basis = f2, (a_in, a_out), ITL_ACROSS
                marked, left_out = across, stalled | within
        itl = s.histograms.get(Signal.ITL)
        if itl is not None and np.isfinite(felt):
            felt, felt_chunk, more, over_waits = _felt_in_waits(
                s.counted_steps, marked, left_out, ~steps_spans & ~stalled, dt, itl, s.histograms.get(Signal.TTFT),
                felt, felt_basis == ITL_ALL)
            felt_basis += more
        if itl is not None and s.counted_steps.itl_seconds is not None and not stalled.any():
            # (not where preemptions are counted: a resumed stream's gap holds its whole wait since it was preempted,
            # vllm/v1/metrics/stats.py, and ends in its re-prefill's span, so the long gaps there are not sharing's)
            busy_steps = s.counted_steps.busy
            clean = ~steps_spans & busy_steps
            gaps = gap_contrast(weights, s.counted_steps.itl_seconds, itl.upper_bounds, itl.increases,
                                steps_spans & busy_steps, clean, wdec, clean_pace(s.counted_steps, clean, busy_steps))
    elif s.untimed_steps is not None and itl is not None and not stalled.any():  # (as above: not beside preemptions)
        gaps, felt, felt_chunk, over_waits = _gaps_by_dose(s, s.untimed_steps, itl, weights, wdec, tokens, dt)
        if gaps is not None:
            felt_basis = ITL_DOSE
    return VerdictInputs(
        shape_proven=m.proven, shape_reason=m.shape_reason, samples=int(valid.sum()), idle_samples=int(idle.sum()),
        busy_samples=int(busy.sum()), has_ledger=excess is not None, ledger_chunk_steps=chunk_steps_beside,
        scrape_interval_seconds=s.scrape_interval_seconds, rates_from_counters=rates,
        collapse=collapse, lag0_effect=lag0, sharing=sharing, residency=residency, inflation_during=during,
        inflation_after=after, tail_effect=m.tail_effect, tail_loss=tail_loss, preemption=ploss.share,
        preemption_basis=ploss.basis, bursts=len(pre.bursts), burst_aligned=aligned,
        preemption_counted=s.increase(Signal.PREEMPTIONS) is not None, preemption_kind=ploss.kind,
        saturated_share=_saturated_share(s, running), tail_batch_ratio=_batch_ratio(running, tail, clean),
        inflation_after_batch_bounded=after_bounded,
        baseline_prefill_free_share=float((s.prefill_tokens_per_second[idle] <= IDLE_FLOOR_TOKENS_PER_SECOND).mean())
        if idle.any() and s.prefill_tokens_per_second is not None else 1.0,
        ledger_depth=ledger_depth, ledger_depth_local=ledger_depth_local, dose_stall=m.dose.stall_seconds_per_token,
        dose_depth=m.dose.depth_at_top,
        depth_from_steps=steps_spans is not None and ledger_depth is not None, itl_depth=felt, itl_tokens=felt_tokens,
        itl_basis=felt_basis, itl_chunk_depth=felt_chunk, itl_depth_over_waits=over_waits, gaps=gaps,
        reprefill_share=s.prefill_progress.reprefill_share if s.prefill_progress is not None else 0.0,
        busy_share=_share(busy if steps_spans is None else steps_spans & valid, wdec), tail_share=_share(tail, wdec), burst_share=_share(burst & valid, wdec),
        preemption_depth=pre.decode_dip if pre.decode_dip < 1.0 else float("nan"),
        itl_busy_ratio=_itl_ratio(itl, assignment.busy, assignment.idle), itl_tail_ratio=_itl_ratio(itl, hist.tail, hist.clean),
        itl_burst_ratio=_itl_ratio(itl, burst, ~burst),
        tail_test_ran=m.tail_ran, tail_window_note=tail_note,
        recovery_effect=rec.effect, recovery_loss=rec.loss, recovery_note=rec.text(), uncontrolled_eviction=uncontrolled,
        single_session=single_session(m.limits),
        contrast_note=contrast_note(m.guards if rates else None, lag0),
        withheld=m.withheld, limits=m.limits,
    )


def _gaps_by_dose(s: ShapeSignals, untimed: VllmCounted, itl: Histogram, weights: np.ndarray, wdec: np.ndarray,
                  tokens: np.ndarray, dt: np.ndarray) -> tuple[GapContrast | None, float, float, bool]:
    """Where too few intervals are free of prefill to time a decode-only step: the long gaps fitted on the prompt
    tokens per second (:func:`pdcensus.series.vllm_gaps.gap_dose`), with ``(gaps, depth, one chunk step's depth,
    read over the prompts' waits)``; the depth over the waits where the TTFT histogram gives them, else one chunk
    step's own (the interval's median gap over the long gaps' mean)."""
    nan = (None, float("nan"), float("nan"), False)
    cs = untimed.steps
    if cs.itl_seconds is None:
        return nan
    with np.errstate(invalid="ignore", divide="ignore"):
        dose = np.where(dt > 0, np.nan_to_num(tokens) / np.where(dt > 0, dt, 1.0), np.nan)
    marked = span_mask(cs, untimed.chunk)
    gaps = gap_dose(weights, cs.itl_seconds, itl.upper_bounds, itl.increases, dose, marked, cs.busy, wdec)
    if gaps is None:
        return nan
    chunk = gaps.clean_gap_seconds / gaps.mean_long_gap_seconds
    ttft = s.histograms.get(Signal.TTFT)
    none = np.zeros(s.n, dtype=bool)
    waits = None if ttft is None else prompt_window_depth(cs, untimed.chunk, none, none, dt, ttft.upper_bounds,
                                                            ttft.increases, chunk, clean_gap=gaps.clean_gap_seconds)
    return (gaps, chunk, chunk, False) if waits is None else (gaps, waits.depth, chunk, True)


def _felt_in_waits(cs: CountedSteps, chunk: np.ndarray, left_out: np.ndarray, clean: np.ndarray, dt: np.ndarray,
                   itl: Histogram, ttft: Histogram | None, span_felt: float,
                   inside: bool) -> tuple[float, float, str, bool]:
    """The depth over the prompts' own waits, bracketed by one chunk step's: ``(depth, chunk_depth, basis note,
    read over the waits)``.

    A span also holds the decode-only steps before and after its prefill (all of them where the prefill ends
    inside a scrape; the edges where it runs across): those dilute the span's pace. The spans' excess wait
    falls inside the prompts' waits for a first token (vLLM's TTFT histogram), so the pace over those waits
    is the depth while it acts (:func:`pdcensus.series.vllm_steps.prompt_window_depth`), between one chunk
    step's own (:func:`pdcensus.series.vllm_steps.chunk_step_depth`) and the span's. Unchanged where neither
    is readable.
    """
    marked = span_mask(cs, chunk) & ~left_out
    bound = chunk_step_depth(cs, marked, clean, itl.upper_bounds, itl.increases)
    if not np.isfinite(bound) or bound >= span_felt:
        return span_felt, float("nan"), "", False
    note = (f"; prefill ends inside a scrape here, so a span mixes its chunk step with decode-only steps: one chunk "
            f"step itself holds decoders to {bound:.3f} of the clean pace (the mean gap beyond 3 clean gaps), and the "
            "depth while it acts lies between the two") if inside else ""
    waits = None if ttft is None else prompt_window_depth(cs, chunk, left_out, clean, dt, ttft.upper_bounds,
                                                            ttft.increases, bound)
    if waits is None:
        return span_felt, bound if inside else float("nan"), note, False
    felt = min(waits.depth, span_felt)
    note += (f"; over the prompts' waits for a first token ({waits.prompts:.0f} waits beyond 3 clean gaps, "
             f"{waits.mean_wait_seconds:.2f} s on average: {waits.chunk_steps:.1f} chunk steps, each giving a decoder "
             f"one token, and the token of the step in flight at the arrival) it is {felt:.3f}"
             + (f" (the waits' reading, {waits.depth:.3f}, is above the spans' pace)" if felt != waits.depth else ""))
    return felt, bound, note, felt == waits.depth


def _holds_most_long_gaps(cs: CountedSteps, part: np.ndarray, whole: np.ndarray, clean: np.ndarray,
                          itl: Histogram | None) -> bool:
    """Whether the ``part`` spans hold at least half the inter-token gaps beyond 3 clean gaps that the ``whole``
    spans hold: the chunk steps' own gaps. The spans of prefill that ran across scrapes stand for the chunk steps
    only where most of those are theirs (a live run of 120-token prompts, 0.7 s chunk steps in 1 s scrapes: 3
    prompts' waits ran across a scrape, against 41 decoder tokens, while the rest ended inside one). True where
    it cannot be told (no histogram, no clean pace, no long gap)."""
    pace = clean_pace(cs, clean, cs.busy) if itl is not None else float("nan")
    if itl is None or not np.isfinite(pace):
        return True
    rows = np.isfinite(itl.increases).all(axis=1)
    bounds = np.asarray(itl.upper_bounds, dtype=np.float64)

    def long_gaps(mask: np.ndarray) -> float:
        return observations_above(bounds, itl.increases[mask & rows].sum(axis=0), LONG_STEPS * pace)

    in_whole = long_gaps(whole)
    return in_whole <= 0 or long_gaps(part) >= 0.5 * in_whole


def _across_scrapes(cs: CountedSteps, chunk: np.ndarray, admitted: np.ndarray | None) -> np.ndarray:
    """Intervals of a prefill that ran across scrapes: a prompt admitted and not done at either end (several
    chunk steps), or a marked span of several intervals (one chunk step longer than a scrape)."""
    sizes = np.bincount(cs.span, minlength=cs.span.size)
    long_step = (sizes[cs.span] > 1) & cs.busy & span_mask(cs, chunk)
    out: np.ndarray = long_step if admitted is None else long_step | np.asarray(admitted, dtype=bool)
    return out


def _lower(reps: np.ndarray) -> float:
    lo, _ = interval(reps)
    return lo


def _batch_ratio(running: np.ndarray | None, tail: np.ndarray, clean: np.ndarray) -> float:
    """max(1, median batch of the lagged-tail scrapes / of the clean ones).

    Per-stream rate falls with the batch on every engine, at most in proportion to it (a step
    has a fixed part >= 0), and the requests queued behind a long prompt are admitted together
    after it: a tail is residency only if it is deeper than this ratio explains.
    """
    if running is None or not tail.any() or not clean.any():
        return 1.0
    r = np.nan_to_num(running)
    ref = float(np.median(r[clean]))
    return max(1.0, float(np.median(r[tail])) / ref) if ref > 0 else 1.0


def _saturated_share(s: ShapeSignals, running: np.ndarray | None) -> float:
    """Share of scrapes with requests running in which some also wait (NaN without both gauges)."""
    waiting = s.gauge(Signal.WAITING)
    if waiting is None or running is None:
        return float("nan")
    busy = np.isfinite(running) & (running > 0) & np.isfinite(waiting)
    return float((waiting[busy] > 0).mean()) if busy.any() else float("nan")
