"""Preemption bursts: increases of the preemption counter, clustered in time.

A preempted sequence stops and re-prefills from token 0: a stall, not sludge. The
census reads preemptions from the *counter* (never from the instant preempted depth,
which a scrape samples at one instant), clusters the intervals with increases into
bursts, and checks whether decode dips and prefill spikes (the re-prefill) line up
with them. Decode at a burst is compared with non-burst scrapes of the same prefill
bucket, so a burst that happens during a long prefill is not blamed for that
prefill's step-time sharing.

Lost decoder time: where the engine exports the preempted depth, stalled
sequence-seconds are its time integral (Little's law: an instant gauge sampled at
regular scrapes estimates the integral without bias); elsewhere, the larger of the decode
deficit at burst scrapes against the same-bucket baseline and the waiting queue's excess
after each burst (preempted sequences re-queue, usually for longer than a scrape, which the
deficit alone misses). When bursts cover most of the window, or
most of their decoder time has no same-bucket baseline outside them, that deficit cannot be
measured: the share is NaN (unmeasurable), never a silent zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from pdcensus.census.bootstrap import weighted_ratio
from pdcensus.census.buckets import BucketAssignment
from pdcensus.census.model import Burst, PreemptionResult
from pdcensus.series.vllm_steps import CountedSteps, span_mask

# Intervals with increases at most this many scrapes apart belong to one burst.
BURST_JOIN_SCRAPES = 2
# The deficit is unmeasurable when bursts cover more than this share of the scrapes (what is left
# is no baseline but a few unrepresentative spells), or when less than this share of the burst
# decoder time has a same-bucket baseline outside the bursts.
MAX_BURST_COVERAGE = 0.5
MIN_BASELINE_COVERAGE = 0.5


class StallBasis(str, Enum):
    """How the stalled time was measured (the verdict branches on this, the text is for people)."""

    NO_COUNTER = "no-counter"
    DEPTH_INTEGRAL = "depth-integral"  # time integral of the preempted depth: exact in expectation
    DECODE_DEFICIT = "decode-deficit"  # deficit at burst scrapes only: a lower bound
    WAITING_QUEUE = "waiting-queue"  # the queue's excess after bursts: may overstate
    UNMEASURABLE = "unmeasurable"
    RESUME_GAPS = "resume-gaps"  # vLLM: the inter-token gaps that end where preemptions are counted


@dataclass(frozen=True)
class PreemptionLoss:
    """Lost decoder-time share per bootstrap replicate, and how it was measured."""

    share: np.ndarray
    basis: str
    kind: StallBasis = StallBasis.NO_COUNTER
    active: np.ndarray | None = None  # per scrape: inside a burst


def _bursts(rows: np.ndarray) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for r in rows:
        if out and r - out[-1][1] <= BURST_JOIN_SCRAPES:
            out[-1] = (out[-1][0], int(r))
        else:
            out.append((int(r), int(r)))
    return out


def _expected(values: np.ndarray, assignment: BucketAssignment, exclude: np.ndarray) -> np.ndarray:
    """Per row: the mean of ``values`` over non-excluded rows of the same bucket."""
    out = np.full(values.size, np.nan)
    for b in np.unique(assignment.index):
        sel = assignment.index == b
        base = values[sel & ~exclude & np.isfinite(values)]
        if base.size:
            out[sel] = base.mean()
    return out


def _nan_mean(values: np.ndarray) -> float:
    """``np.nanmean`` without its empty-slice warning: NaN where no value is a number (or none)."""
    return float(np.nanmean(values)) if (~np.isnan(values)).any() else float("nan")


def _queued_excess(waiting: np.ndarray | None, in_burst: np.ndarray,
                   bursts_rows: list[tuple[int, int]]) -> np.ndarray | None:
    """Per row: preempted sequences still queued, read from the waiting gauge (None: no gauge).

    A preempted sequence goes back to the waiting queue (vLLM, radiance) until KV frees up,
    often for longer than a scrape, so the decode deficit at burst scrapes misses most of
    its stall. Without a preempted-depth gauge, the queue's excess over its own median
    outside bursts, from each burst's start until the queue falls back to that median,
    integrates the stall as the depth gauge would (Little's law). New arrivals queued by the
    same load are in the median; only the excess counts.
    """
    if waiting is None or not bursts_rows or not np.isfinite(waiting).any():
        return None
    q = np.nan_to_num(waiting)
    outside = np.isfinite(waiting) & ~in_burst
    base = float(np.median(q[outside])) if outside.any() else 0.0
    excess = np.zeros(q.size)
    for a, _ in bursts_rows:
        r = a
        while r < q.size and q[r] > base:
            excess[r] = q[r] - base
            r += 1
    return excess


def preemption_bursts(
    times: np.ndarray,
    increases: np.ndarray | None,
    decode: np.ndarray,
    prefill: np.ndarray,
    assignment: BucketAssignment,
    depth: np.ndarray | None,
    running: np.ndarray | None,
    interval_seconds: np.ndarray,
    w: np.ndarray,
    counter_name: str,
    waiting: np.ndarray | None = None,
) -> tuple[PreemptionResult, PreemptionLoss]:
    """Bursts, their alignment with decode dips and prefill spikes, and the lost time."""
    zero = PreemptionLoss(np.zeros(w.shape[0]), "no preemption counter", StallBasis.NO_COUNTER)
    depth_max = float(np.nanmax(depth)) if depth is not None and np.isfinite(depth).any() else float("nan")
    depth_mean = float(np.nanmean(depth)) if depth is not None and np.isfinite(depth).any() else float("nan")
    if increases is None:
        return PreemptionResult(False, f"no preemption counter ({counter_name}) in this shape: preemptions "
                                       "unknown (the instant preempted depth is not a count)",
                                depth_max=depth_max, depth_mean=depth_mean), zero
    inc = np.nan_to_num(increases)
    rows = np.flatnonzero(inc > 0)
    bursts_rows = _bursts(rows)
    in_burst = np.zeros(times.size, bool)
    for a, b in bursts_rows:
        in_burst[a:b + 1] = True
    expected = _expected(decode, assignment, in_burst)
    prefill_base = _nan_mean(prefill[~in_burst])
    bursts: list[Burst] = []
    for a, b in bursts_rows:
        sl = slice(a, b + 1)
        dec_ratio = float(np.nansum(decode[sl]) / np.nansum(expected[sl])) if np.nansum(expected[sl]) > 0 else float("nan")
        pre_ratio = _nan_mean(prefill[sl]) / prefill_base if prefill_base > 0 else float("nan")
        bursts.append(Burst(float(times[a]), float(times[b]), float(inc[sl].sum()), dec_ratio, pre_ratio))
    exp_sum = float(np.nansum(expected[in_burst]))
    dip = float(np.nansum(decode[in_burst]) / exp_sum) if exp_sum > 0 else float("nan")
    spike = _nan_mean(prefill[in_burst]) / prefill_base if prefill_base > 0 else float("nan")
    dt = np.nan_to_num(interval_seconds)
    run = np.zeros(times.size) if running is None else np.nan_to_num(running)
    if depth is not None and np.isfinite(depth).any():
        d = np.nan_to_num(depth)
        share = weighted_ratio(w, d * dt, (run + d) * dt)
        basis = "time integral of the preempted depth / (running + preempted) decoder time"
        kind = StallBasis.DEPTH_INTEGRAL
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            deficit = np.where(in_burst & (expected > 0), np.clip(1 - decode / expected, 0, 1), 0.0)
        share = weighted_ratio(w, np.nan_to_num(deficit) * run * dt, run * dt)
        basis = "decode deficit at burst scrapes vs non-burst scrapes of the same prefill bucket"
        kind = StallBasis.DECODE_DEFICIT
        queued = _queued_excess(waiting, in_burst, bursts_rows)
        if queued is not None:
            q_share = weighted_ratio(w, queued * dt, (run + queued) * dt)
            if np.isfinite(q_share[0]) and q_share[0] > share[0]:
                share = np.fmax(share, q_share)
                basis = ("time integral of the waiting queue's excess over its own non-burst median, from each "
                         "burst until the queue is back at that median (preempted sequences re-queue)")
                kind = StallBasis.WAITING_QUEUE
        burst_time = float((run * dt)[in_burst].sum())
        covered = float((run * dt)[in_burst & np.isfinite(expected) & (expected > 0)].sum())
        too_wide = in_burst.mean() > MAX_BURST_COVERAGE
        if burst_time > 0 and (too_wide or covered < MIN_BASELINE_COVERAGE * burst_time):
            share = np.full(w.shape[0], np.nan)
            basis = (f"unmeasurable: bursts cover {100 * in_burst.mean():.0f} % of the scrapes, and only "
                     f"{100 * covered / burst_time:.0f} % of their decoder time has a same-bucket baseline "
                     "outside them (no preempted-depth gauge to integrate)")
            kind = StallBasis.UNMEASURABLE
    result = PreemptionResult(True, "ran", float(inc.sum()), tuple(bursts), dip, spike, depth_max, depth_mean,
                              tuple(float(t) for t in times), tuple(float(x) for x in np.nan_to_num(increases)))
    return result, PreemptionLoss(share, basis, kind, in_burst)


def resume_gap_loss(loss: PreemptionLoss, increases: np.ndarray | None, steps: CountedSteps | None,
                    chunk: np.ndarray | None, w: np.ndarray, running: np.ndarray | None,
                    interval_seconds: np.ndarray) -> PreemptionLoss:
    """vLLM: the stalled time read from the inter-token histogram, where it exists.

    vLLM counts a preemption when the preempted request emits its next token (``num_preemptions``
    moves with that output's events), and that same output observes the request's inter-token gap
    since its last token before the preemption (``vllm/v1/metrics/stats.py`` l. 548-552): the
    histogram's ``_sum`` in the intervals where preemptions are counted holds every stall whole,
    however long it was. The stall is that sum beyond the clean pace (seconds per token in busy
    intervals with neither prefill nor preemption) times its tokens; the share is over all of
    decoders' inter-token time (stalled sequences included, which ``running`` leaves out).

    Read only where the histogram holds inter-token time beyond the running sequences' time
    (``sum > running x seconds``): a preempted sequence waits outside ``running``, so a histogram
    that carries its stalls must exceed it; one that does not (an exporter observing per step, no
    stall) leaves the loss as it was.
    """
    if increases is None or steps is None or steps.itl_seconds is None or steps.itl_tokens is None or running is None:
        return loss
    s, c = np.nan_to_num(steps.itl_seconds), np.nan_to_num(steps.itl_tokens)
    counted = np.nan_to_num(increases) > 0
    if not counted.any() or s.sum() <= float((np.nan_to_num(running) * np.nan_to_num(interval_seconds)).sum()):
        return loss
    marked = span_mask(steps, chunk) if chunk is not None else np.zeros(s.size, bool)
    clean = steps.busy & ~counted & ~marked
    if c[clean].sum() <= 0:
        return loss
    pace = float(s[clean].sum() / c[clean].sum())
    stall = np.where(counted, np.clip(s - c * pace, 0.0, None), 0.0)
    share = weighted_ratio(w, stall, s)
    basis = (f"inter-token gaps ended where preemptions were counted, beyond the clean pace ({1000 * pace:.0f} ms "
             "per token), over all inter-token time")
    return PreemptionLoss(share, basis, StallBasis.RESUME_GAPS, loss.active)
