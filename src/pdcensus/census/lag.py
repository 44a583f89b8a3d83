"""Lag test: shift prefill by lags 0 .. ~20 min and re-bucket decoders' per-stream rate.

- Lag 0 compares busy with idle scrapes (the bucket table's contrast, same scrape).
- For a lag L > 0 only scrapes whose OWN prefill is quiet (not heavy, see
  :class:`History`) are compared: those with heavy prefill L ago against those with
  quiet prefill L ago. Without this control, prefill's own autocorrelation (a long
  prompt prefills for minutes) would carry the lag-0 effect into every small lag and
  fake a tail.
- The tail test pools the runbook's window (2-14 min): quiet scrapes with heavy
  prefill 2-14 min earlier against quiet scrapes with nothing heavy in the 14 min
  before ("clean").

Effects are ratios of decoder-time-weighted mean per-stream rates (busy / idle), with
moving-block bootstrap intervals. Everything is one matrix product per quantity over
all lags and replicates: cost is linear in window x lags.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdcensus.census.bootstrap import interval, weighted_ratio
from pdcensus.census.model import LagPoint, LagResult

MAX_LAG_SECONDS = 1200.0
TAIL_WINDOW_SECONDS = (120.0, 840.0)
# Fewer samples than this on either side of a comparison: no effect is reported.
MIN_GROUP_SAMPLES = 10
# (a bootstrap replicate with fewer than half as many is dropped, not extrapolated)
# A lag "shows an effect" when its interval lies wholly below this ratio.
EFFECT_MARGIN = 0.95


@dataclass(frozen=True)
class History:
    """Per-scrape flags about heavy prefill at and before each scrape.

    *Heavy* is prefill above the idle rule either at the scrape (the gauge) or over the
    interval before it (the prompt-token counter's increase / interval, which sees a big
    prompt that prefilled between two scrapes and never showed in a 1 s gauge).
    """

    heavy: np.ndarray
    quiet: np.ndarray
    tail: np.ndarray  # quiet, heavy 2-14 min ago
    clean: np.ndarray  # quiet, nothing heavy in the 14 min before
    since_heavy_seconds: np.ndarray  # since the last heavy scrape (inf if none yet)


def busy_within(times: np.ndarray, busy: np.ndarray, start_seconds: float, end_seconds: float) -> np.ndarray:
    """True where some busy scrape lies in ``[t - end_seconds, t - start_seconds]``."""
    t = np.asarray(times, dtype=np.float64)
    cum: npt.NDArray[np.int64] = np.concatenate([[0], np.cumsum(np.asarray(busy, dtype=np.int64))])
    hi = np.searchsorted(t, t - start_seconds, side="right")
    lo = np.searchsorted(t, t - end_seconds, side="left")
    return (cum[hi] - cum[lo]) > 0


def history(times: np.ndarray, heavy: np.ndarray, scrape_interval_seconds: float) -> History:
    start, end = TAIL_WINDOW_SECONDS
    heavy = np.asarray(heavy, dtype=bool)
    quiet = ~heavy
    tail = quiet & busy_within(times, heavy, start, end)
    recent = busy_within(times, heavy, 0.5 * scrape_interval_seconds, end)
    # a scrape is clean only when its whole 14-min lookback lies inside the window: at the start
    # of a recording nothing is known of the prefill before it, so it cannot be called clean
    seen = (np.asarray(times) - (times[0] if len(times) else 0.0)) >= end
    last = np.maximum.accumulate(np.where(heavy, np.arange(heavy.size), -1)) if heavy.size else np.zeros(0, int)
    since = np.where(last >= 0, times - times[np.maximum(last, 0)], np.inf)
    return History(heavy, quiet, tail, quiet & ~recent & seen, since)


def lag_seconds(scrape_interval_seconds: float) -> np.ndarray:
    """Lags at scrape resolution from 0 to about 20 minutes."""
    if not np.isfinite(scrape_interval_seconds) or scrape_interval_seconds <= 0:
        return np.zeros(1)
    k = int(np.ceil(MAX_LAG_SECONDS / scrape_interval_seconds))
    return np.arange(k + 1) * scrape_interval_seconds


def _matched(times: np.ndarray, lags: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Row index of the scrape ``lag`` seconds earlier (n x lags) and whether one exists."""
    target = times[:, None] - lags[None, :]
    j = np.clip(np.searchsorted(times, target, side="left"), 0, times.size - 1)
    j_prev = np.clip(j - 1, 0, times.size - 1)
    use_prev = np.abs(times[j_prev] - target) < np.abs(times[j] - target)
    j = np.where(use_prev, j_prev, j)
    ok = np.abs(times[j] - target) <= tolerance
    return j, ok


def lag_test(
    times: np.ndarray,
    per_stream: np.ndarray,
    decoder_seconds: np.ndarray,
    busy: np.ndarray,
    idle: np.ndarray,
    hist: History,
    scrape_interval_seconds: float,
    w: np.ndarray,
) -> tuple[LagResult, np.ndarray]:
    """The lag profile and the pooled tail test; also the tail effect per replicate."""
    valid = np.isfinite(per_stream) & (decoder_seconds > 0)
    if valid.sum() < 2 * MIN_GROUP_SAMPLES or not busy.any() or not idle.any():
        reason = "too few scrapes with decoders running, or no busy or no idle prefill"
        return LagResult(False, reason), np.full(w.shape[0], np.nan)
    p = np.where(valid, per_stream, 0.0)
    wt = np.where(valid, decoder_seconds, 0.0)
    lags = lag_seconds(scrape_interval_seconds)
    j, ok = _matched(times, lags, 0.5 * scrape_interval_seconds)
    busy_l = np.where(lags[None, :] == 0, busy[j], hist.heavy[j]) & ok
    idle_l = np.where(lags[None, :] == 0, idle[j], hist.quiet[j]) & ok
    own = np.ones_like(busy_l)
    own[:, 1:] = hist.quiet[:, None]
    a_mask = busy_l & own & valid[:, None]
    b_mask = idle_l & own & valid[:, None]
    a = weighted_ratio(w, (wt * p)[:, None] * a_mask, wt[:, None] * a_mask)
    b = weighted_ratio(w, (wt * p)[:, None] * b_mask, wt[:, None] * b_mask)
    thin = ((w @ a_mask) < MIN_GROUP_SAMPLES / 2) | ((w @ b_mask) < MIN_GROUP_SAMPLES / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        # an idle reference of 0 tok/s per stream gives no ratio (not +inf): the lag is left unjudged
        effect = np.where(thin | ~(b > 0), np.nan, a / b)
    na, nb = a_mask.sum(axis=0), b_mask.sum(axis=0)
    points: list[LagPoint] = []
    longest = 0.0
    for k, lag in enumerate(lags):
        if na[k] < MIN_GROUP_SAMPLES or nb[k] < MIN_GROUP_SAMPLES:
            points.append(LagPoint(float(lag), float("nan"), float("nan"), float("nan"), int(na[k]), int(nb[k])))
            continue
        lo, hi = interval(effect[:, k])
        points.append(LagPoint(float(lag), float(effect[0, k]), lo, hi, int(na[k]), int(nb[k])))
        if k > 0 and np.isfinite(hi) and hi < EFFECT_MARGIN:
            longest = float(lag)
    tail_m, clean_m = hist.tail & valid, hist.clean & valid
    ta = weighted_ratio(w, wt * p * tail_m, wt * tail_m)
    tb = weighted_ratio(w, wt * p * clean_m, wt * clean_m)
    thin_t = ((w @ tail_m) < MIN_GROUP_SAMPLES / 2) | ((w @ clean_m) < MIN_GROUP_SAMPLES / 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        tail_effect = np.where(thin_t | ~(tb > 0), np.nan, ta / tb)
    n_tail, n_clean = int(tail_m.sum()), int(clean_m.sum())
    enough = n_tail >= MIN_GROUP_SAMPLES and n_clean >= MIN_GROUP_SAMPLES
    if not enough:
        tail_effect = np.full(w.shape[0], np.nan)
    lo, hi = interval(tail_effect) if enough else (float("nan"), float("nan"))
    control = ("lags > 0 compare only scrapes whose own prefill is idle; tail = own-idle scrapes with busy "
               "prefill 2-14 min earlier vs own-idle scrapes with none in the 14 min before")
    reason = "ran" if enough else (f"tail test needs {MIN_GROUP_SAMPLES} tail and {MIN_GROUP_SAMPLES} clean "
                                   f"scrapes, found {n_tail} and {n_clean}")
    return LagResult(True, reason, tuple(points), TAIL_WINDOW_SECONDS, float(tail_effect[0]), lo, hi,
                     n_tail, n_clean, longest, control, enough), tail_effect
