"""Overload: capacity before knobs. Is the endpoint taking in more work than it can serve?

No knob of the runbook's fixes an endpoint over capacity: ``--max-num-seqs`` turns
preemptions into queueing, ``--prefill-interleave`` moves the wait from decoders to TTFT.
So before any knob the census asks whether the waiting queue says the endpoint is over
capacity, with statistics that need only what every engine exports (the waiting and
running gauges; a request counter or the TTFT histogram where there is one):

- *the queue grows*: the least-squares slope of ``waiting`` over the window, with a
  moving-block bootstrap interval (scrapes are autocorrelated: a burst lasts minutes), is
  above zero over the whole interval, the queue gained at least half a batch (the mean
  running count) across the window, and it is non-empty in at least 90 % of the last
  quarter's scrapes: a trend, not one point or one burst at the end;
- *the queue never drains*: ``waiting`` > 0 in at least 95 % of the scrapes and a request
  spends at least a third of its time in the engine queued, by Little's law
  ``mean waiting / (mean waiting + mean running)`` (the arrival rate cancels: both are
  counts of the same requests). This is what a closed-loop load (N users, each waiting for
  an answer before asking again) looks like over capacity: the queue cannot grow past the
  users, it saturates;
- *TTFT dominated by queueing*, beside them where measurable: the mean queue wait, from the
  engine's queue-time histogram where it is scraped (``radiance:token_queue_wait``) or else
  Little's law ``mean waiting / admission rate`` (first tokens per second from the TTFT
  histogram's count, or finished requests), over the mean TTFT;
- *preemptions continuous, not bursty*: the share of minutes with a preemption. At least half
  the minutes, with ``MIN_PREEMPTIONS`` or more in the window, is continuous: the KV cache is
  over-committed all the time, not in a burst the knob can absorb.

The endpoint is *overloaded* when the queue grows or never drains; the other two say how it
hurts. Checked on the real vLLM runs in ``../shared/realdata/vllm-inferencex`` (tests/census/
test_overload.py): every run whose clients' TTFT p50 was over 5 s (queued behind a full batch)
is overloaded, and no run whose clients' TTFT p50 was under 1 s is.
"""

from __future__ import annotations

import math
import numpy as np

from pdcensus.census.domains import Domain, inside
from pdcensus.census import bootstrap
from pdcensus.census.overload_model import OverloadResult, OverloadSignature
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal

MIN_SCRAPES = 20
GROWTH_BATCHES = 0.5  # the queue must gain at least this many mean batches (running) across the window
END_NONEMPTY_SHARE = 0.90  # share of the last quarter's scrapes with a non-empty queue
NEVER_DRAINS_SHARE = 0.95  # share of scrapes with a non-empty queue
QUEUE_SHARE_OF_RESIDENCE = 1 / 3  # mean waiting >= half the mean running
QUEUE_SHARE_OF_TTFT = 0.5
CONTINUOUS_MINUTES_SHARE = 0.5
MIN_PREEMPTIONS = 20
INTERVAL = (0.05, 0.95)


def _slope(t: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted least-squares slope per bootstrap replicate (row 0: the point), by matrix products only.

    No replicate-by-scrape temporaries beside ``w`` itself: a week of 15 s scrapes is 40,000
    columns, and the census already holds one such matrix.
    """
    tc = t - t.mean()  # centred: the sums below stay well conditioned
    sw, st, sy = w.sum(axis=1), w @ tc, w @ y
    stt, sty = w @ (tc * tc), w @ (tc * y)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((sw * sty - st * sy) / (sw * stt - st * st))


def _histogram_mean(s: ShapeSignals, signal: Signal) -> tuple[float, float]:
    """(mean, count) of a histogram over the window, from its bucket increases' count and the sum where known."""
    h = s.histograms.get(signal)
    if h is None or not np.isinf(h.upper_bounds[-1]):
        return math.nan, 0.0
    counts = np.nansum(h.increases, axis=0)
    n = float(counts[-1])
    if n <= 0:
        return math.nan, 0.0
    # the mean from the buckets: each observation at its bucket's midpoint (the +Inf bucket at its lower bound)
    bounds = h.upper_bounds
    per_bucket = np.diff(np.concatenate(([0.0], counts)))
    lows = np.concatenate(([0.0], bounds[:-1]))
    mids = np.where(np.isinf(bounds), lows, (lows + bounds) / 2)
    return float((per_bucket * mids).sum() / n), n


def _admission_rate(s: ShapeSignals, seconds: float) -> tuple[float, str]:
    h = s.histograms.get(Signal.TTFT)
    if h is not None and np.isinf(h.upper_bounds[-1]):
        n = float(np.nansum(h.increases[:, -1]))
        if n > 0:
            return n / seconds, "first tokens per second (TTFT histogram count)"
    if s.finished_requests is not None and np.nansum(s.finished_requests) > 0:
        return float(np.nansum(s.finished_requests)) / seconds, "finished requests per second"
    return math.nan, ""


def _preemption_minutes(s: ShapeSignals) -> tuple[float, float]:
    inc = s.increase(Signal.PREEMPTIONS)
    if inc is None:
        return 0.0, math.nan
    total = float(np.nansum(inc))
    minutes = np.floor((s.times - s.times[0]) / 60.0).astype(np.int64)
    per_minute = np.bincount(minutes, weights=np.nan_to_num(inc), minlength=int(minutes.max()) + 1)
    observed = np.bincount(minutes, minlength=int(minutes.max()) + 1) > 0
    return total, float((per_minute[observed] > 0).mean()) if observed.any() else math.nan


def detect_overload(s: ShapeSignals, replicates: int = bootstrap.REPLICATES) -> OverloadResult:
    """Whether the analysed shape shows an endpoint over capacity (pure: no I/O)."""
    waiting, running = s.gauge(Signal.WAITING), s.gauge(Signal.RUNNING)
    if waiting is None or running is None:
        return OverloadResult(False, False, "no waiting-queue or running gauge: overload cannot be judged")
    ok = np.isfinite(waiting) & np.isfinite(running)
    if int(ok.sum()) < MIN_SCRAPES:
        return OverloadResult(False, False, f"{int(ok.sum())} scrapes with both queue gauges (need {MIN_SCRAPES})")
    t, wq, run = s.times[ok] - s.times[ok][0], waiting[ok], running[ok]
    n, window = t.size, float(t[-1] - t[0]) if t.size > 1 else 0.0
    tenth = max(1, n // 10)
    w = bootstrap.weights(n, bootstrap.block_length(wq), replicates)
    slopes = _slope(t, wq, w)
    reps = slopes[1:][np.isfinite(slopes[1:])]
    lo, hi = (float(x) for x in np.quantile(reps, INTERVAL)) if reps.size else (math.nan, math.nan)
    waiting_mean, running_mean = float(wq.mean()), float(run.mean())
    nonzero = float((wq > 0).mean())
    end_nonzero = float((wq[-max(1, n // 4):] > 0).mean())
    residence = waiting_mean / (waiting_mean + running_mean) if waiting_mean + running_mean > 0 else math.nan
    growth = float(slopes[0]) * window
    signatures: list[OverloadSignature] = []
    grows = (math.isfinite(lo) and lo > 0 and growth >= max(1.0, GROWTH_BATCHES * running_mean)
             and end_nonzero >= END_NONEMPTY_SHARE)
    if grows:
        signatures.append(OverloadSignature.QUEUE_GROWS)
    if nonzero >= NEVER_DRAINS_SHARE and math.isfinite(residence) and residence >= QUEUE_SHARE_OF_RESIDENCE:
        signatures.append(OverloadSignature.QUEUE_NEVER_DRAINS)
    ttft_mean, _ = _histogram_mean(s, Signal.TTFT)
    queue_mean, queue_n = _histogram_mean(s, Signal.TOKEN_QUEUE_WAIT)
    rate, rate_basis = _admission_rate(s, window)
    if queue_n > 0:
        wait, basis = queue_mean, "mean of the engine's queue-wait histogram"
    else:
        wait = waiting_mean / rate if rate > 0 else math.nan
        basis = f"Little's law: mean waiting / {rate_basis}" if rate > 0 else "no request counter"
    # a wait outside the window is withheld where the report is built (pdcensus.census.domains): never reasoned from
    usable = math.isfinite(wait) and inside(wait, Domain.WAIT, window)
    share_of_ttft = wait / ttft_mean if usable and ttft_mean > 0 else math.nan
    if math.isfinite(share_of_ttft) and share_of_ttft >= QUEUE_SHARE_OF_TTFT:
        signatures.append(OverloadSignature.TTFT_QUEUEING)
    preemptions, minutes_share = _preemption_minutes(s)
    if preemptions >= MIN_PREEMPTIONS and minutes_share >= CONTINUOUS_MINUTES_SHARE:
        signatures.append(OverloadSignature.PREEMPTIONS_CONTINUOUS)
    kv = s.gauge(Signal.KV_CACHE_USAGE)
    kv_mean = float(np.nanmean(kv)) if kv is not None and np.isfinite(kv).any() else math.nan
    overloaded = grows or OverloadSignature.QUEUE_NEVER_DRAINS in signatures
    factor = math.nan
    if grows and rate > 0:
        factor = (rate + float(slopes[0])) / rate
    elif overloaded and running_mean > 0:
        factor = (waiting_mean + running_mean) / running_mean
    start, end = float(wq[:tenth].mean()), float(wq[-tenth:].mean())
    if grows:
        reason = (f"the waiting queue grows {slopes[0] * 60:+.2f} requests/min (90% interval {lo * 60:+.2f} to "
                  f"{hi * 60:+.2f}): {start:.0f} -> {end:.0f} across {window / 60:.0f} min, against a batch of "
                  f"{running_mean:.0f} running")
    elif overloaded:
        reason = (f"the waiting queue never drains: non-empty in {nonzero:.0%} of scrapes, {waiting_mean:.0f} "
                  f"waiting beside {running_mean:.0f} running, so a request spends {residence:.0%} of its time in the "
                  "engine queued (Little's law)")
    else:
        reason = (f"the queue drains: non-empty in {nonzero:.0%} of scrapes, mean {waiting_mean:.1f} waiting beside "
                  f"{running_mean:.1f} running, slope {slopes[0] * 60:+.2f} requests/min (90% interval "
                  f"{lo * 60:+.2f} to {hi * 60:+.2f})")
    return OverloadResult(True, overloaded, reason, tuple(signatures), start, end, float(slopes[0]) * 60,
                          (lo * 60, hi * 60), nonzero, waiting_mean, running_mean, residence, wait, basis, ttft_mean,
                          share_of_ttft, preemptions, minutes_share, kv_mean, window, rate, factor)
