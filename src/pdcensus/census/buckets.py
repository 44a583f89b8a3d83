"""Buckets: decode by prefill from the same scrape (an idle bucket and a few busy ones).

Each scrape is one sample: its decode rate and its prefill rate are read from the same
scrape, never interpolated across scrapes. Per-stream rate = decode / running, only
where running > 0 (a decode rate with nobody decoding says nothing about decoders).

*Idle* is defined from the data, robustly: prefill below ``IDLE_FRACTION`` of the median
of the non-zero prefill samples (and below an absolute floor of one token per second).
The busy buckets' edges are quantiles of the busy prefill samples, so they adapt to the
engine's chunk size and load; the edges are reported with the table.

Which bucket a scrape falls in, given the edges, is one rule (:func:`assign_on_edges`): the
census buckets its own window by it, verify-arm buckets the after window on the before
window's edges by it, and ``whatif`` buckets the twin on the recording's edges by it, so "the
busy bucket" holds the same scrapes whoever asks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pdcensus.census.model import BucketRow, BucketTable
from pdcensus.census.signals import Histogram
from pdcensus.series.quantile import quantile_of_bounds

# Idle = below this fraction of the median non-zero prefill (a decayed gauge after a
# chunk ends falls by orders of magnitude within a scrape, so 5 % separates cleanly).
IDLE_FRACTION = 0.05
# Prefill below this many tokens/s is idle whatever the median (float noise, decay tails).
IDLE_FLOOR_TOKENS_PER_SECOND = 1.0
# With fewer idle scrapes than this share, prefill is never ~0 (background prompts) and
# idle becomes the background's own level (see _background_ceiling).
MIN_IDLE_SHARE = 0.10
# Background = within this many robust spreads (MAD, log10) of its centre ...
BACKGROUND_SPREADS = 3.0
# ... with a spread of at least this (a factor 10^0.1 = 1.26) so a flat background is not razor-thin.
MIN_LOG_SPREAD = 0.1
# Busy samples are split into up to this many quantile buckets ...
MAX_BUSY_BUCKETS = 3
# ... with at least this many samples each (fewer busy samples -> fewer buckets).
MIN_BUCKET_SAMPLES = 20
# A query step longer than this samples too few of the engine's steps (runbook: step <= 30 s).
MAX_STEP_SECONDS = 30.0


@dataclass(frozen=True)
class BucketAssignment:
    """Which bucket each scrape falls in (-1: no prefill sample), with the rule used."""

    index: np.ndarray
    idle_threshold: float
    edges: tuple[float, ...]
    labels: tuple[str, ...]
    idle_rule: str
    idle_at_threshold: bool = False  # idle is prefill <= the threshold (the background's ceiling), else <

    @property
    def idle(self) -> np.ndarray:
        return np.asarray(self.index == 0)  # asarray: numpy's stubs type ndarray ``==`` as Any

    @property
    def busy(self) -> np.ndarray:
        return self.index > 0


def _fmt_rate(x: float) -> str:
    if not np.isfinite(x):
        return "inf"
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def _background_ceiling(p: np.ndarray) -> tuple[float, str]:
    """Idle threshold when prefill is never ~0: the top of the background's own spread.

    Background prefill (short chat prompts) keeps the gauge at some level all the time;
    heavy prefill sits far above it. In log space the background is the lower part of
    the distribution: its centre is the 25th percentile and its spread the MAD of the
    lower half; idle is anything within ``BACKGROUND_SPREADS`` spreads of that centre.
    """
    logs = np.log10(p + 1.0)
    centre = float(np.quantile(logs, 0.25))
    lower = logs[logs <= np.median(logs)]
    spread = max(1.4826 * float(np.median(np.abs(lower - centre))), MIN_LOG_SPREAD)
    ceiling = 10 ** (centre + BACKGROUND_SPREADS * spread) - 1.0
    rule = (f"idle = prefill <= {ceiling:.0f} tok/s: prefill is never ~0 here (background prompts), so idle is "
            f"the background's level, 10^(q25 + {BACKGROUND_SPREADS:g} x MAD) of log10 prefill "
            f"(q25 {10 ** centre - 1:.0f} tok/s)")
    return ceiling, rule


def assign_on_edges(
    prefill_tokens_per_second: np.ndarray,
    edges: tuple[float, ...],
    *,
    idle_at_threshold: bool = False,
    labels: tuple[str, ...] | None = None,
    idle_rule: str | None = None,
) -> BucketAssignment:
    """Each scrape's bucket on given edges: the one rule the census, verify-arm and ``whatif`` bucket by.

    ``edges[0]`` is the idle threshold; ``edges[1:]`` are the busy buckets' edges (the census's
    end in +inf).

    - **Which scrapes count**: those whose prefill rate is finite and >= 0. NaN is a scrape the
      engine said nothing about, and a negative rate is no rate at all (a counter reset, a broken
      gauge). Neither is idle: both get index -1.
    - **Idle** (0): a counted scrape below the threshold; at or below it where
      ``idle_at_threshold`` (the census's background ceiling, where prefill is never ~0).
    - **Busy**: every other counted scrape, in bucket ``i`` (1-based) holding
      ``[edges[i], edges[i + 1])``. The top bucket is open above. With no busy edge (the window
      the edges came from had no busy scrape), every busy scrape falls in one bucket
      ``[edges[0], inf)``: a scrape above the idle threshold is always busy.
    - **Decoders**: a bucket's per-stream figures count only its scrapes with decoders running
      (running > 0) and a finite decode rate (:func:`per_stream_rate`, :func:`bucket_table`). The
      assignment itself reads prefill only, so a scrape is in the same bucket for decode
      throughput, TTFT, ITL and preemptions.

    This is the census's own rule. Verify-arm used to count a negative prefill rate as idle.
    Verify-arm and ``whatif`` both used ``<`` where the census's threshold was the background's
    ceiling (``<=``). So a before window was not bucketed the way its own census bucketed it.
    ``labels`` default to ``idle`` and one ``low-high tok/s`` per busy bucket.
    """
    p = np.asarray(prefill_tokens_per_second, dtype=np.float64)
    threshold = edges[0]
    ok = np.isfinite(p) & (p >= 0)
    idle_mask = ok & ((p <= threshold) if idle_at_threshold else (p < threshold))
    busy_mask = ok & ~idle_mask
    k = max(1, len(edges) - 1)
    index = np.full(p.size, -1, dtype=np.int64)
    index[idle_mask] = 0
    index[busy_mask] = 1 + np.clip(np.searchsorted(np.array(edges[1:-1], dtype=np.float64), p[busy_mask],
                                                   side="right"), 0, k - 1)
    if labels is None:
        uppers = [*edges[1:], math.inf][:k]
        labels = ("idle", *(f"{_fmt_rate(lo)}-{_fmt_rate(hi)} tok/s" for lo, hi in zip(edges[:k], uppers)))
    if idle_rule is None:
        idle_rule = f"idle = prefill {'<=' if idle_at_threshold else '<'} {threshold:.1f} tok/s"
    return BucketAssignment(index, threshold, tuple(edges), labels, idle_rule, idle_at_threshold)


def assign_buckets(prefill_tokens_per_second: np.ndarray) -> BucketAssignment:
    """Idle threshold and busy edges from the data, and each scrape's bucket (:func:`assign_on_edges`)."""
    p = np.asarray(prefill_tokens_per_second, dtype=np.float64)
    ok = np.isfinite(p) & (p >= 0)
    vals = p[ok]
    nonzero = vals[vals > IDLE_FLOOR_TOKENS_PER_SECOND]
    median = float(np.median(nonzero)) if nonzero.size else float("nan")
    threshold = max(IDLE_FLOOR_TOKENS_PER_SECOND, IDLE_FRACTION * median) if nonzero.size else IDLE_FLOOR_TOKENS_PER_SECOND
    rule = (f"idle = prefill < {threshold:.1f} tok/s = max({IDLE_FLOOR_TOKENS_PER_SECOND:g}, "
            f"{IDLE_FRACTION:g} x median non-zero prefill {median:.1f} tok/s)" if nonzero.size else
            f"idle = prefill < {threshold:.1f} tok/s (the floor: no non-zero prefill in the window)")
    at_threshold = bool(vals.size and (vals < threshold).mean() < MIN_IDLE_SHARE)
    if at_threshold:
        threshold, rule = _background_ceiling(vals)
        threshold = max(threshold, IDLE_FLOOR_TOKENS_PER_SECOND)
    busy_vals = vals[vals > threshold] if at_threshold else vals[vals >= threshold]
    k = int(min(MAX_BUSY_BUCKETS, max(1, busy_vals.size // MIN_BUCKET_SAMPLES))) if busy_vals.size else 0
    inner = [float(q) for q in np.quantile(busy_vals, np.arange(1, k) / k)] if k > 1 else []
    edges = tuple([threshold, *inner, float("inf")]) if k else (threshold,)
    # no busy scrape: the table lists the idle bucket alone (assign_on_edges would name an empty open one)
    return assign_on_edges(p, edges, idle_at_threshold=at_threshold, labels=None if k else ("idle",), idle_rule=rule)


def per_stream_rate(decode: np.ndarray, running: np.ndarray | None) -> np.ndarray:
    """decode / running where running > 0, NaN elsewhere (or everywhere without running)."""
    if running is None:
        return np.full(np.shape(decode), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(running > 0, decode / np.where(running > 0, running, 1.0), np.nan)


def bucket_table(
    assignment: BucketAssignment,
    decode: np.ndarray,
    running: np.ndarray | None,
    *,
    prefill_name: str,
    basis: str,
    scrape_interval_seconds: float,
    ttft: Histogram | None = None,
    preemptions: np.ndarray | None = None,
    warnings: tuple[str, ...] = (),
    itl: Histogram | None = None,
) -> BucketTable:
    """Per bucket: samples, decode tokens/s, per-stream rate, TTFT and ITL quantiles, preemptions.

    TTFT quantiles aggregate the histogram's bucket increases over the bucket's
    intervals first and take ``histogram_quantile`` of the sum (never an average of
    per-interval quantiles).
    """
    stream = per_stream_rate(decode, running)
    rows: list[BucketRow] = []
    idle_stream = float("nan")
    for b, label in enumerate(assignment.labels):
        sel = assignment.index == b
        dec = decode[sel & np.isfinite(decode)]
        ps = stream[sel & np.isfinite(stream)]
        mean_ps = float(ps.mean()) if ps.size else float("nan")
        if b == 0:
            idle_stream = mean_ps
        lo = 0.0 if b == 0 else assignment.edges[b - 1]
        # no busy edge (the edges' window had no busy scrape): the one busy bucket is open above
        hi = assignment.edges[0] if b == 0 else assignment.edges[b] if b < len(assignment.edges) else math.inf
        p50 = p90 = p99 = float("nan")
        requests = 0.0
        if ttft is not None:
            inc = ttft.increases[sel]
            agg = np.nansum(inc, axis=0) if inc.size else np.zeros(ttft.upper_bounds.size)
            requests = float(agg[-1]) if agg.size and np.isinf(ttft.upper_bounds[-1]) else 0.0
            p50, p90, p99 = (quantile_of_bounds(q, ttft.upper_bounds, agg) for q in (0.5, 0.9, 0.99))
        itl50 = itl99 = float("nan")
        if itl is not None:
            inc = itl.increases[sel]
            agg = np.nansum(inc, axis=0) if inc.size else np.zeros(itl.upper_bounds.size)
            itl50, itl99 = (quantile_of_bounds(q, itl.upper_bounds, agg) for q in (0.5, 0.99))
        pre = float(np.nansum(preemptions[sel])) if preemptions is not None else 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            vs_idle = mean_ps / idle_stream if idle_stream > 0 else float("nan")
        rows.append(BucketRow(label, float(lo), float(hi), int(sel.sum()),
                              float(dec.mean()) if dec.size else float("nan"), mean_ps, int(ps.size),
                              float(vs_idle), p50, p90, p99, requests, pre, itl50, itl99))
    warn = list(warnings)
    if np.isfinite(scrape_interval_seconds) and scrape_interval_seconds > MAX_STEP_SECONDS:
        warn.append(f"scrape interval {scrape_interval_seconds:.0f} s exceeds {MAX_STEP_SECONDS:.0f} s: "
                    "each sample sees a small fraction of the engine's steps")
    if running is None:
        warn.append("no running-requests gauge: per-stream rate unavailable")
    return BucketTable(prefill_name, basis, assignment.idle_threshold, assignment.idle_rule,
                       assignment.edges, tuple(rows), scrape_interval_seconds, tuple(warn))
