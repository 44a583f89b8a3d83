"""The step ledger: three counters, read as per-interval increases, never as a rate.

- mean decode-only step = d(step_seconds_decode) / d(steps_decode)
- mean chunk step = d(step_seconds - step_seconds_decode) / d(steps - steps_decode)
- held steps = d(steps_held): zero means nothing protects decoders.

A plain mean step (``step_seconds / steps``) is reported only to show how little it
moves: when ~5 % of steps carry a third of the step time it is diluted.

The ledger also splits decoders' lost time by cause, per interval, against a
reference decode-only step ``d0``: the most common decode-only step of the shape
(its half-sample mode). The mean decode-only step of quiet intervals (no heavy prefill
at the scrape or in the interval) against ``d0`` is the "inflated after prefill" test:
a residency tail spreads minutes of slow steps above the mode, flat sharing does not.
There is no adjustment of d0 for batch size: an eviction slows decoders, requests pile up
and ``running`` rises, so a per-row fit would explain the eviction away. Instead
:func:`batch_step_bound` says how long a step batch growth alone could explain (the fastest
steps seen at that batch or larger), and the verdict names eviction only if the inflation
outgrows that bound too.

- step-time sharing: chunk time beyond what the same steps would take decode-only,
  ``chunk_seconds - chunk_steps x decode_step``;
- residency (eviction): decode-only steps slower than the reference,
  ``(decode_step - d0) x steps``.

A partial ledger (SGLang: decode-only steps, step seconds and decode-only seconds, but no
count of chunk steps) still gives the decode-only step, the inflation tests and the chunk
steps' share of step time; the mean chunk step is unavailable, and sharing counts the whole
chunk time (an upper bound, by the decode-only time those chunk steps would have taken; exact
when chunk steps carry no decode rows, SGLang's default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.census.buckets import BucketAssignment
from pdcensus.census.lag import History
from pdcensus.census.model import LedgerBucket, LedgerResult, LedgerTimeline
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import LedgerQuantity, Signal, ledger_spec

# Fewer reference intervals than this: d0 comes from a weaker reference (said in the report).
MIN_REFERENCE_INTERVALS = 10
# A cluster of decode-only steps this many times faster than the common level (a factor a
# batch-size change alone rarely reaches; an expert-miss penalty does), holding at
# least this share of intervals, is the undisturbed step (see _reference).
FAST_CLUSTER_FACTOR = 2.0
FAST_CLUSTER_SHARE = 0.10
# An interval with no decode-only step of its own (vLLM's counted ledger: every step in a span with prefill)
# is charged at the pooled decode-only step of this many nearest intervals that timed one (local_decode_step).
LOCAL_STEP_INTERVALS = 5


@dataclass(frozen=True)
class LedgerExcess:
    """Per-row lost seconds by cause (NaN where the interval has no ledger)."""

    sharing_seconds: np.ndarray
    residency_seconds: np.ndarray
    valid: np.ndarray
    decode_seconds: np.ndarray  # d(step_seconds_decode), 0 where invalid
    decode_steps: np.ndarray  # d(steps_decode), 0 where invalid
    reference_step_seconds: np.ndarray  # d0 per row (NaN without a reference)
    chunk_steps: np.ndarray  # d(steps - steps_decode), 0 where invalid
    chunk_seconds: np.ndarray | None = None  # d(step_seconds - step_seconds_decode), 0 where invalid
    chunk_steps_counted: bool = True  # False: a partial ledger (chunk_steps marks intervals, not counts)
    # per row, the longest decode-only step batch growth alone could explain (batch_step_bound)
    batch_step_bound: np.ndarray | None = None
    # per row, the decode-only step its steps are charged at (its own, or its neighbours': local_decode_step)
    charged_step_seconds: np.ndarray | None = None


def _ratio(num: np.ndarray, den: np.ndarray, sel: np.ndarray) -> float:
    d = float(np.nansum(den[sel]))
    return float(np.nansum(num[sel]) / d) if d > 0 else float("nan")


def _div(a: float, b: float) -> float:
    """a / b, NaN where b is 0 or not finite (a counter that never moved has no ratio)."""
    return a / b if math.isfinite(b) and b > 0 else float("nan")


def half_sample_mode(values: np.ndarray) -> float:
    """The half-sample mode (Bickel): repeatedly keep the densest half of the sorted data.

    The undisturbed decode-only step is the most common one; a residency tail spreads
    slow steps over a range as it decays, so the mode ignores it where a mean or even a
    median would not (a tail can cover most of the quiet time).
    """
    x = np.sort(np.asarray(values, dtype=np.float64)[np.isfinite(values)])
    while x.size > 3:
        h = (x.size + 1) // 2
        widths = x[h - 1:] - x[: x.size - h + 1]
        i = int(np.argmin(widths))
        x = x[i:i + h]
    if x.size == 3:
        x = x[:2] if x[1] - x[0] <= x[2] - x[1] else x[1:]
    return float(x.mean()) if x.size else float("nan")


def _reference(dstep: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, str] | None:
    ok = sel & np.isfinite(dstep)
    if ok.sum() < MIN_REFERENCE_INTERVALS:
        return None
    values = dstep[ok]
    mode = half_sample_mode(values)
    fast = values[values < mode / FAST_CLUSTER_FACTOR]
    if fast.size >= max(MIN_REFERENCE_INTERVALS, FAST_CLUSTER_SHARE * values.size):
        # an eviction that covers most of the window makes the slow level the common one;
        # a cluster of clearly faster intervals is then the undisturbed step
        return np.full(dstep.shape, half_sample_mode(fast)), (
            f"half-sample mode of the {fast.size} intervals at least {FAST_CLUSTER_FACTOR:g}x faster than the "
            f"common level ({1000 * mode:.1f} ms)")
    return np.full(dstep.shape, mode), f"half-sample mode of {int(ok.sum())}"


def interval_batch(running: np.ndarray) -> np.ndarray:
    """Per interval, the running gauge's mean over its two ends (the first row: its own value)."""
    r = np.asarray(running, dtype=np.float64)
    out: np.ndarray = 0.5 * (r + np.concatenate([r[:1], r[:-1]]))
    return out


def local_decode_step(times: np.ndarray, decode_seconds: np.ndarray, decode_steps: np.ndarray,
                      timed: np.ndarray, untimed: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Per interval, the decode-only step its steps would have taken: its own where it timed one (``timed``),
    else the pooled step (seconds over steps) of the ``LOCAL_STEP_INTERVALS`` nearest timed intervals.

    Why not the window's reference ``d0``: that is the most common decode-only step, and both the count of steps
    per interval (a 1 s scrape of 48 ms steps holds 20 or 21 of them) and a context or batch that grows through
    the window put it under the step the chunk spans' own decode-only steps took. On live vLLM (0.32, CPU, 1 s
    scrapes) d0 was 43.5 ms against a 48 ms mean decode-only step at every distance from a prompt, and the counted
    steps' sharing loss ran 20-35 % over the clients'; charged at the nearest five intervals it runs 2-20 % over
    (BENCHMARKS.md). An interval just before one with no decode-only step is not pooled: a chunk step's beginning
    may be in flight there (``pdcensus.series.vllm_steps.in_flight_before``). ``untimed``: the intervals charged
    so (the ledger's valid ones with no decode-only step); ``fallback`` (d0) where fewer than
    ``LOCAL_STEP_INTERVALS`` intervals are timed.
    """
    t = np.asarray(times, dtype=np.float64)
    timed = np.asarray(timed, dtype=bool) & (decode_steps > 0)
    untimed = np.asarray(untimed, dtype=bool) & ~timed
    own = np.where(timed, decode_seconds / np.where(timed, decode_steps, 1.0), np.nan)
    out = np.where(timed, own, fallback)
    pool = np.flatnonzero(timed & ~np.r_[untimed[1:], False])
    k = LOCAL_STEP_INTERVALS
    rows = np.flatnonzero(untimed)
    if pool.size < k or not rows.size:
        return out
    # the k nearest of a time-sorted pool lie among the k on either side of each row's place in it
    at = np.searchsorted(t[pool], t[rows])[:, None] + np.arange(-k, k)[None, :]
    inside = (at >= 0) & (at < pool.size)
    candidates = pool[np.clip(at, 0, pool.size - 1)]
    distance = np.where(inside, np.abs(t[candidates] - t[rows][:, None]), np.inf)
    near = np.take_along_axis(candidates, np.argsort(distance, axis=1, kind="stable")[:, :k], axis=1)
    out[rows] = decode_seconds[near].sum(axis=1) / decode_steps[near].sum(axis=1)
    return out


def batch_step_bound(dstep: np.ndarray, batch: np.ndarray, d0: np.ndarray, valid: np.ndarray) -> np.ndarray | None:
    """Per row, the longest decode-only step that batch growth alone could explain.

    Every engine's decode-only step grows with the rows in it, and after a long prompt the
    requests queued behind it are admitted at once: a longer step after prefill may be nothing
    but a bigger batch. But the undisturbed step is a non-decreasing function of the batch, and
    residency only ever adds to it, so a step at batch B can be explained by the batch only up
    to the fastest steps the endpoint ran at batches >= B: the bound is the 10th percentile of
    the decode-only step over intervals whose batch (mean running over the interval) is at
    least 0.95 B, never below d0. Time beyond it is residency whatever the engine's per-row
    cost. (No per-row line is fitted: an eviction piles requests up too, and a fit through its
    slow, crowded intervals would explain the eviction away.) None with fewer than
    ``MIN_REFERENCE_INTERVALS`` intervals to read.
    """
    ok = valid & np.isfinite(dstep) & np.isfinite(batch) & np.isfinite(d0)
    if ok.sum() < MIN_REFERENCE_INTERVALS:
        return None
    b, d = batch[ok], dstep[ok]
    order = np.argsort(b)
    b, d = b[order], d[order]
    bound = np.full(batch.shape, np.nan)
    for i in np.flatnonzero(np.isfinite(batch)):
        above = d[np.searchsorted(b, 0.95 * batch[i], side="left"):]
        if above.size:
            bound[i] = np.quantile(above, 0.1)
    return np.where(np.isfinite(bound), np.fmax(bound, d0), d0)


def step_ledger(
    signals: ShapeSignals,
    assignment: BucketAssignment,
    hist: History,
) -> tuple[LedgerResult, LedgerExcess | None]:
    """The ledger for one shape, or why there is none."""
    prof = signals.profile
    inc = signals.increases
    need = (Signal.STEPS_DECODE, Signal.STEP_SECONDS, Signal.STEP_SECONDS_DECODE)
    if not prof.has_ledger and not all(s in inc for s in need):
        return LedgerResult(False, f"build/profile {prof.name} exports no decode-only step counters "
                                   "(engine_steps_decode_total, engine_step_seconds_decode_total): no ledger"), None
    missing = [prof.name_of(s) or s.value for s in need if s not in inc]
    if missing:
        return LedgerResult(False, "ledger counters not scraped: " + ", ".join(missing)), None
    steps_d = inc[Signal.STEPS_DECODE]
    secs, secs_d = inc[Signal.STEP_SECONDS], inc[Signal.STEP_SECONDS_DECODE]
    counted = Signal.STEPS in inc  # False: a partial ledger (no count of chunk steps)
    steps = inc[Signal.STEPS] if counted else np.full(signals.n, np.nan)
    held = inc.get(Signal.STEPS_HELD, np.zeros(signals.n))
    valid = np.isfinite(steps_d) & np.isfinite(secs) & np.isfinite(secs_d)
    if counted:
        valid &= np.isfinite(steps)
    for sig in (*need, Signal.STEPS):  # an interval beside a missing sample is out for all four (a ratio)
        if sig in signals.spanned and sig in inc:
            valid &= ~signals.spanned[sig]
    if valid.sum() < 1:
        return LedgerResult(False, "fewer than two scrapes with the ledger counters: no interval"), None
    cs = np.clip(secs - secs_d, 0, None)
    cn = np.clip(steps - steps_d, 0, None) if counted else np.full(signals.n, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        dstep = np.where(valid & (steps_d > 0), secs_d / np.where(steps_d > 0, steps_d, 1), np.nan)
        cstep = np.where(valid & (cn > 0), cs / np.where(cn > 0, cn, 1), np.nan)
        chunk_share = np.where(valid & (secs > 0), cs / np.where(secs > 0, secs, 1), np.nan)
    running = signals.gauge(Signal.RUNNING)
    running = np.zeros(signals.n) if running is None else np.nan_to_num(running)
    ref = _reference(dstep, valid)
    reference = "undisturbed decode-only step"
    if ref is None:
        d0 = np.full(signals.n, float("nan"))
        reference = "none: too few idle intervals to measure an undisturbed decode-only step"
    else:
        d0, how = ref
        reference = f"{reference}; {how}"
    batch = interval_batch(running)
    bound = batch_step_bound(dstep, batch, d0, valid) if ref is not None else None
    busy_v, tail_v = hist.heavy & valid, hist.tail & valid
    base = _ratio(d0 * steps_d, steps_d, valid & np.isfinite(d0))
    during = _div(_ratio(secs_d, steps_d, busy_v), _ratio(d0 * steps_d, steps_d, busy_v)) if ref else float("nan")
    quiet_v = hist.quiet & valid
    after = _div(_ratio(secs_d, steps_d, quiet_v), _ratio(d0 * steps_d, steps_d, quiet_v)) if ref else float("nan")
    by_bucket = tuple(
        LedgerBucket(label, int((valid & (assignment.index == b)).sum()),
                     _ratio(secs_d, steps_d, valid & (assignment.index == b)),
                     _ratio(cs, cn, valid & (assignment.index == b)),
                     float(np.nansum(cn[valid & (assignment.index == b)])) if counted else float("nan"))
        for b, label in enumerate(assignment.labels)
    )

    def fill(column: np.ndarray) -> tuple[float, ...]:
        return tuple(float(x) for x in np.where(valid, column, np.nan))

    timeline = LedgerTimeline(tuple(float(t) for t in signals.times), fill(dstep), fill(cstep), fill(held),
                              fill(chunk_share))
    total_steps = float(np.nansum(steps[valid])) if counted else float("nan")
    status = "ran"
    if not counted:
        why = ledger_spec(prof).missing.get(LedgerQuantity.STEPS, f"{prof.name} counts no chunk steps")
        status = (f"partial: {why}; sharing counts the whole chunk time (an upper bound by the decode-only "
                  "time of those chunk steps)")
    result = LedgerResult(
        True, status, int(valid.sum()), _ratio(secs_d, steps_d, valid), _ratio(cs, cn, valid),
        _ratio(secs, steps, valid), total_steps, float(np.nansum(held[valid])),
        _ratio(cn, steps, valid), _ratio(cs, secs, valid), base, reference, float(during), float(after),
        by_bucket, timeline, partial=not counted,
    )
    # an interval with no decode-only step of its own (every step carried prefill) at its neighbours' step
    timed = valid & np.isfinite(dstep)
    dref = local_decode_step(signals.times, np.nan_to_num(secs_d), np.nan_to_num(steps_d), timed, valid & ~timed, d0)
    dt = np.nan_to_num(signals.interval_seconds)
    sharing = np.clip(cs - np.nan_to_num(cn) * np.nan_to_num(dref), 0, dt)
    all_steps = steps_d + np.nan_to_num(cn)
    residency = np.where(np.isfinite(dstep) & np.isfinite(d0), (dstep - d0) * all_steps, 0.0)
    if not counted:  # at least one chunk step ran in an interval whose chunk time grew
        cn = np.where(cs > 0, 1.0, 0.0)
    residency = np.clip(residency, -dt, dt)
    return result, LedgerExcess(np.where(valid, sharing, np.nan), np.where(valid, residency, np.nan), valid,
                                np.where(valid, np.nan_to_num(secs_d), 0.0), np.where(valid, np.nan_to_num(steps_d), 0.0),
                                d0, np.where(valid, np.nan_to_num(cn), 0.0),
                                chunk_seconds=np.where(valid, np.nan_to_num(cs), 0.0), chunk_steps_counted=counted,
                                batch_step_bound=bound, charged_step_seconds=dref)
