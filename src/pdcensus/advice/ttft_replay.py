"""Trace-driven TTFT forecast for ``--prefill-interleave N``: replay the recording's own prefill.

The M/M/1 column (:func:`pdcensus.advice.predict.queued_ttft_ratio`) runs one server at the
window's MEAN prefill load. Prefill arrives in bursts, so inside a busy period the load is far
above that mean, and stretching every chunk step by ``s = (C + N*D) / C`` pushes those periods
over capacity: a backlog builds and drains only after the burst. This module replays the burst
pattern the endpoint actually saw instead of a mean.

The model (a FIFO single server fed by the counter trace):

- Work. Per scrape interval, the prompt-token counter's increase is the interval's prefill
  work (tokens); the TTFT histogram's ``_count`` increase is its requests. Each request gets
  the interval's mean prompt (``work / requests``): the counters say no more. Work counted in
  an interval with no request counted (a long prompt whose first token lands in the next
  interval) is served as unobserved work: it occupies the server but yields no TTFT.
- Arrivals. Within its interval a request arrives at a uniformly random instant, i.e. the
  requests form a Poisson process given their count (the usual queueing assumption; the
  recording cannot place them inside the interval). The draw uses a fixed seed and up to
  :data:`REPLICATES` draws (fewer when one draw already holds :data:`JOB_BUDGET` jobs) with
  common random numbers at every N, so the result is deterministic and the ratio compares
  like with like. Above :data:`MAX_JOBS_PER_INTERVAL` requests in an interval, they are
  replayed as that many equal groups (each a job of the group's work), to bound the cost.
- Service. One prefill at a time, first come first served. Capacity while a backlog exists is
  the ledger's: ``chunk_tokens / (C + n*D)`` tokens per second under ``--prefill-interleave n``
  (chunk tokens = prompt tokens per chunk step; each chunk step taken beside decoders is
  followed by ``n`` held decode-only steps, which admit nothing). So N slows service by
  ``s(N) / s(n_now)``.
- TTFT of a replayed request = its wait behind earlier work (including backlog carried over
  from earlier intervals) + its own service. The forecast is the ratio of a quantile of that
  sojourn under N to the same quantile under the flags in effect, over the requests counted in
  the selected intervals (the busy bucket's, so it is the population the measured TTFT p90
  comes from):  ``TTFT p90 under N = TTFT p90 measured now x replay_p90(N) / replay_p90(now)``.
  The ratio cancels what the replay cannot know in absolute terms (the first decode step, any
  admission wait, the histogram's bucket resolution).

What it does not see: the counters count tokens when they are prefilled, not when they
arrived, so the trace is the current flags' service trace (queueing already suffered now is
replayed as arrivals spread by it); a per-request prompt mix inside an interval (one long prompt
among short ones is replayed as equal means); an engine that resizes its chunk as the queue
grows (a smaller chunk costs more per token, so the real slowdown under N can exceed ``s``).
If the stretched capacity is below the window's mean work rate the queue never drains and the
ratio is ``inf``; where the trace cannot support a quantile the ratio is ``None`` with a reason.

The trace comes in as arrays (:class:`PrefillTrace`, built by :func:`trace_from_signals`): the
caller (:func:`pdcensus.api.prefill_trace`) re-reads the analysed shape; nothing here reads.

Hand-written because no queueing library replays a counter trace: the Lindley recursion of a
FIFO single server over given arrivals and service times is one cumulative maximum in numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdcensus.census.buckets import assign_on_edges
from pdcensus.census.model import LedgerResult
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal

REPLICATES = 8  # within-interval arrival draws, pooled
JOB_BUDGET = 400_000  # replayed jobs over all draws: fewer draws where one draw already holds many requests
SEED = 0  # fixed: the forecast is deterministic (another seed moves the sim's ratios by about 3 %)
MAX_JOBS_PER_INTERVAL = 256  # above this, an interval's requests are replayed in equal groups
MIN_SELECTED_INTERVALS = 8  # selected intervals with requests needed for a quantile
MIN_SELECTED_REQUESTS = 20  # requests needed so that a p90 is not one request
QUANTILE = 0.9


@dataclass(frozen=True)
class ReplayForecast:
    """The replay's TTFT quantile ratio for one N (``ratio`` None where the data cannot support it)."""

    interleave: int
    ratio: float | None
    reason: str
    replay_seconds_now: float = math.nan
    replay_seconds: float = math.nan
    service_tokens_per_second: float = math.nan
    load: float = math.nan  # the window's mean work rate over the stretched capacity
    selected_intervals: int = 0
    selected_requests: float = 0.0


@dataclass(frozen=True)
class ReplayJobs:
    """The replayed requests, one array set per arrival draw (arrival-ordered)."""

    arrival_seconds: tuple[np.ndarray, ...]
    size_tokens: tuple[np.ndarray, ...]
    weight: tuple[np.ndarray, ...]  # requests each job stands for; 0 for unobserved work
    work_tokens_per_second: float  # the window's mean work rate
    selected_intervals: int
    selected_requests: float


def build_jobs(times: np.ndarray, work_tokens: np.ndarray, requests: np.ndarray,
               interval_seconds: np.ndarray | None = None, selected: np.ndarray | None = None,
               replicates: int = REPLICATES, seed: int = SEED) -> ReplayJobs:
    """Requests from a counter trace: per interval ``round(requests)`` jobs of the mean prompt.

    ``times`` are the scrape times ending each interval; ``interval_seconds`` their lengths
    (default: the difference of ``times``, NaN for the first row). Intervals with a missing
    increase contribute nothing. ``selected`` marks the intervals whose requests the quantile
    reads (default: all).
    """
    t = np.asarray(times, dtype=np.float64)
    w = np.asarray(work_tokens, dtype=np.float64)
    r = np.asarray(requests, dtype=np.float64)
    if interval_seconds is None:
        dt = np.full(t.size, np.nan)
        dt[1:] = np.diff(t)
    else:
        dt = np.asarray(interval_seconds, dtype=np.float64)
    sel = np.ones(t.size, bool) if selected is None else np.asarray(selected, dtype=bool)
    ok = np.isfinite(t) & np.isfinite(dt) & (dt > 0) & np.isfinite(w) & (w >= 0)
    r = np.where(ok & np.isfinite(r) & (r > 0), np.round(r), 0.0)
    jobs = np.where(r > MAX_JOBS_PER_INTERVAL, MAX_JOBS_PER_INTERVAL, r).astype(np.int64)
    unobserved = ok & (jobs == 0) & (w > 0)
    jobs = np.where(unobserved, 1, jobs)
    idx = np.repeat(np.arange(t.size), jobs)
    start = (t - np.nan_to_num(dt))[idx]
    size = w[idx] / jobs[idx]
    weight = np.where(r[idx] > 0, r[idx] / jobs[idx], 0.0) * sel[idx]
    rng = np.random.default_rng(seed)
    arrivals, sizes, weights = [], [], []
    for _ in range(max(1, min(replicates, JOB_BUDGET // max(1, idx.size)))):
        a = start + rng.random(idx.size) * dt[idx]
        order = np.argsort(a, kind="stable")
        arrivals.append(a[order])
        sizes.append(size[order])
        weights.append(weight[order])
    span = float(np.nansum(np.where(ok, dt, 0.0)))
    rate = float(np.nansum(w[ok])) / span if span > 0 else math.nan
    counted = ok & sel & (r > 0)
    return ReplayJobs(tuple(arrivals), tuple(sizes), tuple(weights), rate, int(counted.sum()),
                      float(r[counted].sum()))


def sojourn_seconds(arrival_seconds: np.ndarray, service_seconds: np.ndarray) -> np.ndarray:
    """Per job, departure minus arrival in a FIFO single server (Lindley, vectorised).

    ``depart_k = max(arrive_k, depart_{k-1}) + S_k`` unrolls to
    ``depart_k = sum(S_1..S_k) + max_{j<=k}(arrive_j - sum(S_1..S_{j-1}))``.
    """
    total = np.cumsum(service_seconds)
    depart: np.ndarray = total + np.maximum.accumulate(arrival_seconds - (total - service_seconds))
    return np.asarray(depart - arrival_seconds, dtype=np.float64)


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-quantile of values with weights (the smallest value whose cumulative weight reaches q)."""
    keep = weights > 0
    v, w = values[keep], weights[keep]
    if v.size == 0:
        return math.nan
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    return float(v[order][min(int(np.searchsorted(cum, q * cum[-1], side="left")), v.size - 1)])


def replay_quantile(jobs: ReplayJobs, service_tokens_per_second: float, quantile: float = QUANTILE) -> float:
    """The quantile of replayed TTFT (wait + own service), pooled over the arrival draws."""
    t = [sojourn_seconds(a, s / service_tokens_per_second) for a, s in zip(jobs.arrival_seconds, jobs.size_tokens)]
    return weighted_quantile(np.concatenate(t), np.concatenate(jobs.weight), quantile)


def service_rate(interleave: int, chunk_tokens: float, chunk_step_seconds: float,
                 decode_step_seconds: float) -> float:
    """Prefill tokens per second while a backlog exists: a chunk per (C + N*D)."""
    return chunk_tokens / (chunk_step_seconds + interleave * decode_step_seconds)


def _missing(work_tokens: np.ndarray | None, requests: np.ndarray | None, chunk_tokens: float,
             chunk_step_seconds: float, decode_step_seconds: float) -> str | None:
    if work_tokens is None:
        return "no prompt-token counter in this shape: no prefill work to replay"
    if requests is None:
        return "no TTFT histogram in this shape: no request count to replay"
    for name, value in (("chunk tokens", chunk_tokens), ("mean chunk step", chunk_step_seconds),
                        ("mean decode-only step", decode_step_seconds)):
        if not (math.isfinite(value) and value > 0):
            return f"no {name} in the step ledger ({value!r}): no service capacity to replay against"
    return None


def replay_ttft_ratios(times: np.ndarray, work_tokens: np.ndarray | None, requests: np.ndarray | None, *,
                       chunk_step_seconds: float, decode_step_seconds: float, chunk_tokens: float,
                       interleaves: Sequence[int], current_interleave: int = 0,
                       interval_seconds: np.ndarray | None = None, selected: np.ndarray | None = None,
                       quantile: float = QUANTILE) -> tuple[ReplayForecast, ...]:
    """For each N, replay_quantile(N) / replay_quantile(current): the TTFT quantile's growth factor.

    ``work_tokens`` (prompt-token increase per interval) and ``requests`` (TTFT histogram count
    increase per interval) may be None when the engine does not export them: every forecast is
    then None with the reason. ``chunk_tokens`` is prompt tokens per chunk step (ledger).
    """
    why = _missing(work_tokens, requests, chunk_tokens, chunk_step_seconds, decode_step_seconds)
    if why is not None:
        return tuple(ReplayForecast(int(n), None, why) for n in interleaves)
    assert work_tokens is not None and requests is not None
    jobs = build_jobs(times, work_tokens, requests, interval_seconds, selected)

    def forecast(n: int, ratio: float | None, reason: str, now: float = math.nan, value: float = math.nan,
                 mu: float = math.nan, load: float = math.nan) -> ReplayForecast:
        return ReplayForecast(n, ratio, reason, now, value, mu, load, jobs.selected_intervals, jobs.selected_requests)

    if jobs.selected_intervals < MIN_SELECTED_INTERVALS or jobs.selected_requests < MIN_SELECTED_REQUESTS:
        why = (f"too few busy intervals with requests to replay ({jobs.selected_intervals} intervals, "
               f"{jobs.selected_requests:.0f} requests; need {MIN_SELECTED_INTERVALS} and {MIN_SELECTED_REQUESTS})")
        return tuple(forecast(int(n), None, why) for n in interleaves)
    mu_now = service_rate(current_interleave, chunk_tokens, chunk_step_seconds, decode_step_seconds)
    now = replay_quantile(jobs, mu_now, quantile)
    out = []
    for n in (int(x) for x in interleaves):
        mu = service_rate(n, chunk_tokens, chunk_step_seconds, decode_step_seconds)
        load = jobs.work_tokens_per_second / mu
        if load >= 1.0:
            out.append(forecast(n, math.inf, f"the stretched prefill capacity ({mu:.0f} tok/s) is below the "
                                f"window's mean prefill work ({jobs.work_tokens_per_second:.0f} tok/s): the queue "
                                "never drains", now, math.inf, mu, load))
        elif not (math.isfinite(now) and now > 0):
            out.append(forecast(n, None, f"the replay's TTFT quantile now is {now!r}: no ratio", now, math.nan,
                                mu, load))
        else:
            value = now if n == current_interleave else replay_quantile(jobs, mu, quantile)
            out.append(forecast(n, value / now, "replayed", now, value, mu, load))
    return tuple(out)


def replay_ttft_ratio(times: np.ndarray, work_tokens: np.ndarray | None, requests: np.ndarray | None, *,
                      chunk_step_seconds: float, decode_step_seconds: float, chunk_tokens: float,
                      interleave: int, current_interleave: int = 0, interval_seconds: np.ndarray | None = None,
                      selected: np.ndarray | None = None, quantile: float = QUANTILE) -> ReplayForecast:
    """:func:`replay_ttft_ratios` for one N."""
    return replay_ttft_ratios(times, work_tokens, requests, chunk_step_seconds=chunk_step_seconds,
                              decode_step_seconds=decode_step_seconds, chunk_tokens=chunk_tokens,
                              interleaves=(interleave,), current_interleave=current_interleave,
                              interval_seconds=interval_seconds, selected=selected, quantile=quantile)[0]


@dataclass(frozen=True)
class PrefillTrace:
    """What the replay reads from one shape: per interval, prompt tokens and requests.

    ``work_tokens`` is None without a prompt-token counter, ``requests`` None without a TTFT
    histogram (its ``+Inf`` bucket's increase is the count); ``prefill_tokens_per_second`` is
    the same-scrape prefill series the buckets are cut from, to select the busy bucket.
    """

    times: np.ndarray
    interval_seconds: np.ndarray
    work_tokens: np.ndarray | None
    requests: np.ndarray | None
    prefill_tokens_per_second: np.ndarray | None

    def busy(self, low_tokens_per_second: float) -> np.ndarray | None:
        """Intervals whose scrape's prefill is at or above a bucket's low edge (None without prefill)."""
        if self.prefill_tokens_per_second is None or not math.isfinite(low_tokens_per_second):
            return None
        return assign_on_edges(self.prefill_tokens_per_second, (low_tokens_per_second,)).busy  # the census's rule


def trace_from_signals(signals: ShapeSignals) -> PrefillTrace:
    """The replay's inputs from the census's own signals (no sample name is read here)."""
    hist = signals.histograms.get(Signal.TTFT)
    requests = None
    if hist is not None and hist.upper_bounds.size and np.isinf(hist.upper_bounds[-1]):
        requests = hist.increases[:, -1]
    return PrefillTrace(signals.times, signals.interval_seconds, signals.increase(Signal.PROMPT_TOKENS), requests,
                        signals.prefill_tokens_per_second)


def chunk_tokens_per_step(ledger: LedgerResult, work_tokens: np.ndarray | None) -> float:
    """Prompt tokens per chunk step: the trace's prompt tokens over the ledger's chunk steps."""
    if work_tokens is None or not ledger.available:
        return math.nan
    chunk_steps = ledger.steps * ledger.chunk_share_of_steps
    total = float(np.nansum(work_tokens))
    return total / chunk_steps if math.isfinite(chunk_steps) and chunk_steps > 0 and total > 0 else math.nan
