"""A tail test that runs where tails exist: decode's recovery with time since the last prefill.

The runbook's lag test compares scrapes 2-14 min after a prefill with clean ones (nothing
heavy in the 14 min before). Where prefill is frequent, no scrape is clean and the test
never runs, though that is exactly where eviction costs most. So, as well: over scrapes whose
own prefill is quiet, per-stream decode is regressed on the time since the last heavy
prefill, with batch size held as a control (a long prompt's queued requests are admitted
together after it, and per-stream decode slows with the batch on every engine). Residency
that is re-promoted over minutes makes decode *recover* with time since the prefill; step-time
sharing does not (a quiet scrape holds no chunk step).

The effect is read inside the range the window shows, never extrapolated: the mean rate in
the first tenth of time-since (soon after a prefill) over the mean rate in the last tenth
(long after), decoder-time weighted, for every bootstrap replicate. The batch control is the physical one the tail test uses: per-stream decode
slows with the batch at most in proportion to it (a step has a fixed part >= 0), so the
effect is multiplied by the fitted batch's growth from late to soon, and only a slowdown
beyond it is credited to a tail. (A linear batch term would absorb the tail whenever the
eviction itself grows the batch: slower decode keeps requests running longer. On the
simulator's eviction-tail, per-stream decode goes 17 -> 95 tok/s from 0-1 to 10-15 min after
a long prompt while the batch shrinks 60 -> 13: 0.18 raw, 0.81 batch-controlled.) It cannot
see a tail when time-since spans less than ``MIN_SPAN_SECONDS``; the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.census.bootstrap import interval, weighted_ratio
from pdcensus.census.lag import TAIL_WINDOW_SECONDS, History

MIN_SCRAPES = 100  # quiet scrapes with a prefill before them in the window (>= 10 in each group)
MIN_SPAN_SECONDS = 120.0  # time-since must span at least this between its 10th and 90th percentiles
# A *long* prompt: an interval whose prefill tokens exceed this many times the median interval's (with
# prefill). Where short prompts arrive all the time, every scrape carries some prefill and "time since
# the last prefill" never grows; the arena loans that evict come from the long ones.
LONG_PROMPT_FACTOR = 4.0
GROUP_QUANTILE = 0.1  # the soon and late groups: the first and last tenth of time-since
MIN_LONG_PROMPTS = 3
QUIET_FACTOR = 2.0  # a scrape counts as quiet with up to this many times the median interval's prefill


@dataclass(frozen=True)
class Recovery:
    """Fitted per-stream decode soon after prefill / long after, per replicate (None: not measurable)."""

    effect: np.ndarray | None
    reason: str
    soon_seconds: float = float("nan")
    late_seconds: float = float("nan")
    scrapes: int = 0
    loss: np.ndarray | None = None  # decoders' time lost before recovery / all decoders' time, per replicate

    def text(self) -> str:
        if self.effect is None:
            return self.reason
        lo, hi = interval(self.effect)
        return (f"per-stream decode {self.soon_seconds / 60:.1f} min after prefill / {self.late_seconds / 60:.1f} min "
                f"after, batch held constant: {self.effect[0]:.2f} (90% interval {lo:.2f}-{hi:.2f})")


def since_long_prompt(times: np.ndarray, prefill_tokens: np.ndarray | None,
                      merged: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Seconds since the last interval with a long prompt, and which intervals hold one (None: too few).

    ``merged``: the intervals whose prompt count is a share of a longer span (a sample missing at one
    end, ``series.increases``). A run of them is judged as one interval, its tokens summed: a long
    prompt split over the run's shares is still one long prompt, marked on every interval of the
    run (it ended somewhere in it), and time since it is counted from the run's end.
    """
    if prefill_tokens is None:
        return None
    tokens = np.nan_to_num(np.asarray(prefill_tokens, dtype=np.float64))
    n = tokens.size
    run_id = np.arange(n)
    if merged is not None:
        joined = np.asarray(merged, dtype=bool)
        starts = ~joined | np.concatenate([[True], ~joined[:-1]])  # a new run begins (or a lone interval)
        run_id = np.cumsum(starts) - 1
    totals = np.bincount(run_id, weights=tokens)
    last_of_run = np.zeros(totals.size, dtype=np.int64)
    np.maximum.at(last_of_run, run_id, np.arange(n))
    some = totals[totals > 0]
    if some.size < MIN_SCRAPES:
        return None
    long_run = totals > LONG_PROMPT_FACTOR * float(np.median(some))
    if long_run.sum() < MIN_LONG_PROMPTS:
        return None
    long = long_run[run_id]
    ends = np.where(long, last_of_run[run_id], -1)
    ends = np.where(np.arange(n) >= ends, ends, -1)  # an interval inside the run is not after its end
    last = np.maximum.accumulate(ends)
    return np.where(last >= 0, times - times[np.maximum(last, 0)], np.inf), long


def recovery(per_stream: np.ndarray, decoder_seconds: np.ndarray, running: np.ndarray | None, hist: History,
             weights: np.ndarray, times: np.ndarray | None = None,
             prefill_tokens: np.ndarray | None = None,
             decode_only: tuple[np.ndarray, np.ndarray] | None = None,
             merged: np.ndarray | None = None) -> Recovery:
    """Fit the recovery of per-stream decode with time since the last heavy prefill.

    Where long prompts stand out from the rest (:func:`since_long_prompt`), time is counted
    since the last long one over scrapes that hold none: the arena loans that evict come from
    those, while short prompts may keep every scrape busy.

    ``decode_only`` = (decode-only steps, decode-only step seconds) per interval, from a ledger: the
    speed compared is then the decode-only step's (the runbook's "decode-only steps inflated after
    prefill"), which chunk steps after a long prompt (sharing at lag 0) cannot move. ``merged``: the
    prompt count's spanned intervals (:func:`since_long_prompt`).
    """
    since, quiet = hist.since_heavy_seconds, hist.quiet
    long = since_long_prompt(times, prefill_tokens, merged) if times is not None else None
    if long is not None and prefill_tokens is not None:
        # quiet: no long prompt, and no more prefill than the ordinary interval's (a long prompt's own
        # last chunks after its biggest interval are step-time sharing at lag 0, not a tail)
        tokens = np.nan_to_num(np.asarray(prefill_tokens, dtype=np.float64))
        ordinary = float(np.median(tokens[tokens > 0]))
        since, quiet = long[0], ~long[1] & (tokens <= QUIET_FACTOR * ordinary)
    sel = (quiet & np.isfinite(per_stream) & (decoder_seconds > 0) & np.isfinite(since)
           & (since <= TAIL_WINDOW_SECONDS[1]))
    n = int(sel.sum())
    if n < MIN_SCRAPES:
        return Recovery(None, f"recovery fit needs {MIN_SCRAPES} quiet scrapes within 14 min after a prefill; "
                              f"found {n}")
    soon, late = (float(q) for q in np.quantile(since[sel], [0.1, 0.9]))
    if late - soon < MIN_SPAN_SECONDS:
        return Recovery(None, f"time since the last prefill spans only {late - soon:.0f} s here (10th-90th "
                              f"percentile): too little to see a recovery", soon, late, n)
    # soon = the first tenth of time-since, late = the last tenth (weighted means, per replicate): the
    # extremes, as the runbook's tail test compares scrapes right after prefill with clean ones
    lo_q, hi_q = (float(q) for q in np.quantile(since[sel], [GROUP_QUANTILE, 1 - GROUP_QUANTILE]))
    early, later = sel & (since <= lo_q), sel & (since >= hi_q)
    wsel = np.where(sel, decoder_seconds, 0.0)
    ps = np.nan_to_num(per_stream)
    if decode_only is not None:
        steps, seconds = (np.nan_to_num(a) for a in decode_only)
        with np.errstate(invalid="ignore", divide="ignore"):
            ps = np.where(seconds > 0, steps / np.where(seconds > 0, seconds, 1.0), 0.0)  # decode-only steps/s
        sel = sel & (seconds > 0)
        early, later = early & (seconds > 0), later & (seconds > 0)
        if not early.any() or not later.any():
            return Recovery(None, "recovery fit needs decode-only steps both soon and long after a prefill; "
                                  "one of the two groups has none", soon, late, n)
        ps_soon = weighted_ratio(weights, steps * early, seconds * early)
        ps_late = weighted_ratio(weights, steps * later, seconds * later)
    else:
        ps_soon = weighted_ratio(weights, wsel * ps * early, wsel * early)
        ps_late = weighted_ratio(weights, wsel * ps * later, wsel * later)
    growth = np.ones(weights.shape[0])
    batch = np.nan_to_num(running) if running is not None else None
    if batch is not None:
        # the batch control: per-stream decode slows with the batch on every engine, at most in
        # proportion to it, so only the part of the slowdown beyond the batch's growth is credited
        b_soon = weighted_ratio(weights, wsel * batch * early, wsel * early)
        b_late = weighted_ratio(weights, wsel * batch * later, wsel * later)
        with np.errstate(invalid="ignore", divide="ignore"):
            growth = np.where((b_late > 0) & (b_soon > b_late), b_soon / np.where(b_late > 0, b_late, 1.0), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        effect = np.where(ps_late > 0, np.minimum(ps_soon / ps_late * growth, 1.5), np.nan)
        ref_batch = (weights @ (wsel * (batch if batch is not None else 0.0) * later)) / np.maximum(weights @ (wsel * later), 1e-12)
        own = (np.maximum(batch[None, :] / np.where(ref_batch > 0, ref_batch, 1.0)[:, None], 1.0)
               if batch is not None else np.ones((weights.shape[0], since.size)))
        # the deficit counted as lost is what the batch's growth does not explain, scrape by scrape
        deficit = np.where(sel[None, :], np.clip(1.0 - ps[None, :] * own / ps_late[:, None], 0.0, 1.0), 0.0)
    soon, late = float(np.median(since[early])), float(np.median(since[later]))
    wd = np.nan_to_num(decoder_seconds)
    loss = (weights * np.nan_to_num(deficit) * wd[None, :]).sum(axis=1) / np.maximum(weights @ wd, 1e-12)
    return Recovery(effect, "ran", soon, late, n, loss)
