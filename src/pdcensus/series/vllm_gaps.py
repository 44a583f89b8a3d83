"""Decoders' long inter-token gaps per interval, and their contrast beside prefill and without.

Where a prefill is one chunk step far shorter than a scrape (a fast engine, a short prompt, a
15 s scrape on a GPU), a scrape that carried it holds that step among tens or hundreds of
decode-only ones: the counted steps' mean step (``chunk-step-collapse``) and the span's pace are
diluted towards the decode-only step, although each decoder waited the whole chunk step. That
wait is still in vLLM's inter-token histogram, undiluted: one observation per decoder, many
decode-only steps long (``vllm/v1/metrics/stats.py``: the time since that request's previous
token, at the step's engine timestamp; the clients' own read times do not enter it).

So, per interval, the decoders' *excess* in long gaps: each observation beyond ``long_steps``
decode-only gaps, read at its bucket's midpoint (its part above the line at that part's
midpoint; the +Inf bucket at its lower edge), less the decode-only gap it stands in for. Their
sum is held inside what the interval's ``_sum`` allows: at most all of it, at least all of it
less the short gaps' at the line each (a 10-20 s bucket's midpoint is 15 s, a real stall there
may be 10.6 s). The decode-only gap is the interval's own median gap (histogram_quantile's
reading), or the clean spans' mean where that is longer: a batch that grew slows every step of
its interval, and its gaps then stay under the line, where a fixed line would count them as
long. Only the long gaps enter, so the slow growth of steps with the batch or the contexts
(which the ledger's ``wall - steps x decode-only step`` charges to prefill) does not.

The contrast: the long gaps' excess as a share of the decoders' waiting in spans with prefill
against the same share in spans without (the control: a host's pauses, an eviction's slow
steps, anything not prefill). Sharing's loss is the first's excess over the second, over the
decoders' time. Each is a ratio of sums over intervals, so it is computed per moving-block
bootstrap replicate as the census's other readings are (``pdcensus.census.bootstrap``).

Where a prompt lands in nearly every scrape (a busy endpoint, a 10-15 s scrape), too few spans
are free of prefill to control against: :func:`gap_dose` fits the long gaps' share on the
interval's prompt tokens per second instead, and its intercept (the share with no prompt) is the
control. A live vLLM run of one 150-token prompt every 6 s read at 10 s scrapes: 0-492 prompt
tokens per interval, 0-7 long gaps, their excess 0-10 s, growing with the tokens.

Written here, not taken from a library: it reads Prometheus's classic-histogram buckets per
interval, for which numpy is the library; no package computes excess-over-a-line sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.series.quantile import quantile_rows

LONG_STEPS = 3.0  # a gap beyond this many decode-only gaps waited out more than a decode-only step
MIN_LONG_GAPS = 5  # long gaps in the spans with prefill: fewer, and the contrast is no reading
MIN_DOSE_INTERVALS = 20  # intervals a dose-response is fitted on (as pdcensus.census.dose.MIN_INTERVALS)
DOSE_SCALE = 1000.0  # the dose per 1,000 prompt tokens per second, so that the normal equations are well conditioned
CONTROL_SPANS = "step spans without prefill"
CONTROL_DOSE = "the dose-response's intercept (no prompt tokens)"


def median_gaps(upper_bounds: np.ndarray, increases: np.ndarray) -> np.ndarray:
    """Per interval, the median observation read as ``histogram_quantile(0.5, ...)`` reads it
    (:func:`pdcensus.series.quantile.quantile_rows`); NaN where the interval has no observation, or the median
    lies in the +Inf bucket."""
    inc = np.asarray(increases, dtype=np.float64)
    out = np.where(np.isfinite(inc).all(axis=1), quantile_rows(0.5, upper_bounds, inc), np.nan)
    in_inf = inc[:, -2] < inc[:, -1] / 2.0 if inc.shape[1] > 1 else np.ones(inc.shape[0], dtype=bool)
    return np.where(in_inf, np.nan, out)


def long_gap_excess(upper_bounds: np.ndarray, increases: np.ndarray,
                    line: np.ndarray, gap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per interval: ``(count, excess)`` of the observations above ``line`` (seconds), each read at its bucket's
    midpoint (the part of a bucket above the line, spread evenly, at that part's midpoint; the +Inf bucket at its
    lower edge) less ``gap`` (the decode-only gap it stands in for). NaN where ``line`` or ``gap`` is not finite."""
    inc = np.asarray(increases, dtype=np.float64)
    bounds = np.asarray(upper_bounds, dtype=np.float64)
    lower = np.r_[0.0, bounds[:-1]]
    per = np.diff(np.concatenate([np.zeros((inc.shape[0], 1)), inc], axis=1), axis=1)
    x = np.asarray(line, dtype=np.float64)[:, None]
    finite = np.isfinite(bounds)[None, :]
    hi = np.where(finite, bounds[None, :], lower[None, :])  # +Inf: read at its lower edge
    lo = np.maximum(lower[None, :], np.where(np.isfinite(x), x, np.inf))
    width = bounds[None, :] - lower[None, :]
    share = np.where(finite, np.clip((hi - lo) / np.where(width > 0, width, 1.0), 0.0, 1.0),
                     (lower[None, :] >= x).astype(float))
    counted = np.clip(np.nan_to_num(per), 0.0, None) * share
    mid = np.where(finite, (lo + hi) / 2.0, hi)
    count = counted.sum(axis=1)
    excess = (counted * np.clip(mid - np.asarray(gap, dtype=np.float64)[:, None], 0.0, None)).sum(axis=1)
    bad = ~(np.isfinite(x[:, 0]) & np.isfinite(gap) & np.isfinite(inc).all(axis=1))
    return np.where(bad, np.nan, count), np.where(bad, np.nan, excess)


@dataclass(frozen=True)
class GapContrast:
    """The long gaps' excess beside prefill and without, per replicate (row 0 = the window)."""

    beside: np.ndarray  # long gaps' excess / decoders' waiting, in spans with prefill
    without: np.ndarray  # the same in spans without (the control), or at no prompt tokens (the dose's intercept)
    loss: np.ndarray  # (beside - without) x waiting in spans with prefill / decoders' time, floored at 0
    long_gaps: float  # long gaps counted in the spans with prefill (the window)
    mean_long_gap_seconds: float  # their mean, read at the buckets' midpoints
    clean_gap_seconds: float  # the decode-only gap their line was drawn from (the clean spans' mean)
    long_share: float = float("nan")  # the long gaps beside prefill, as a share of decoders' time: how often it acts
    control: str = CONTROL_SPANS  # what ``without`` is: spans without prefill, or the dose-response's intercept

    @property
    def difference(self) -> np.ndarray:
        """``beside - without`` per replicate: above 0 beyond noise, the long gaps come with the prefill."""
        out: np.ndarray = self.beside - self.without
        return out

    @property
    def by_dose(self) -> bool:
        """The control is the dose-response's intercept: no span without prefill was timed."""
        return self.control == CONTROL_DOSE


def interval_excess(itl_seconds: np.ndarray, upper_bounds: np.ndarray, increases: np.ndarray, floor_gap: float,
                    long_steps: float = LONG_STEPS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per interval: ``(long gaps, their excess, the decode-only gap)``; the gap is the interval's own median, at
    least ``floor_gap`` (NaN: the median alone); the excess is held inside what the interval's ``_sum`` allows."""
    s = np.asarray(itl_seconds, dtype=np.float64)
    own = median_gaps(upper_bounds, increases)
    gap = np.fmax(np.where(np.isfinite(own), own, floor_gap), floor_gap) if np.isfinite(floor_gap) else own
    line = long_steps * gap
    with np.errstate(invalid="ignore"):
        count, excess = long_gap_excess(upper_bounds, increases, line, gap)
    # the long gaps sum to the interval's inter-token sum less its short gaps', each at most the line
    fast = np.clip(np.asarray(increases, dtype=np.float64)[:, -1] - count, 0.0, None)
    summed = np.clip(excess + count * gap, np.clip(s - fast * line, 0.0, None), np.clip(s, 0.0, None))
    return count, np.clip(summed - count * gap, 0.0, None), gap


def _rates(weights: np.ndarray, e: np.ndarray, s0: np.ndarray,
           mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per replicate: the excess share of waiting in ``mask``, the excess and the waiting summed."""
    num, den = weights @ (e * mask), weights @ (s0 * mask)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan), num, den


def _result(weights: np.ndarray, e: np.ndarray, count: np.ndarray, gap: np.ndarray, b: np.ndarray,
            rate_b: np.ndarray, num_b: np.ndarray, den_b: np.ndarray, rate_w: np.ndarray, decoder_seconds: np.ndarray,
            clean_gap_seconds: float, control: str) -> GapContrast:
    total = weights @ np.nan_to_num(np.asarray(decoder_seconds, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.where(total > 0, np.clip(num_b - np.clip(rate_w, 0.0, None) * den_b, 0.0, None)
                        / np.where(total > 0, total, 1.0), np.nan)
    n_long = float(count[b].sum())
    long_seconds = float((e[b] + count[b] * gap[b]).sum())
    share = long_seconds / float(total[0]) if total[0] > 0 else float("nan")
    return GapContrast(rate_b, rate_w, loss, n_long, long_seconds / n_long, float(clean_gap_seconds),
                       min(share, 1.0) if np.isfinite(share) else share, control)


def gap_contrast(weights: np.ndarray, itl_seconds: np.ndarray, upper_bounds: np.ndarray, increases: np.ndarray,
                 beside: np.ndarray, without: np.ndarray, decoder_seconds: np.ndarray,
                 clean_gap_seconds: float, long_steps: float = LONG_STEPS) -> GapContrast | None:
    """The contrast of the long gaps' excess in intervals ``beside`` prefill against ``without`` (boolean masks of
    the same rows), over ``decoder_seconds``; None without a clean gap or with under ``MIN_LONG_GAPS`` long gaps
    beside prefill."""
    if not (np.isfinite(clean_gap_seconds) and clean_gap_seconds > 0):
        return None
    s = np.asarray(itl_seconds, dtype=np.float64)
    count, excess, gap = interval_excess(s, upper_bounds, increases, clean_gap_seconds, long_steps)
    ok = np.isfinite(s) & np.isfinite(excess)
    b, w = np.asarray(beside, dtype=bool) & ok, np.asarray(without, dtype=bool) & ok
    if float(count[b].sum()) < MIN_LONG_GAPS or not w.any():
        return None
    e, s0 = np.where(ok, excess, 0.0), np.where(ok, s, 0.0)
    rate_b, num_b, den_b = _rates(weights, e, s0, b)
    rate_w = _rates(weights, e, s0, w)[0]
    return _result(weights, e, count, gap, b, rate_b, num_b, den_b, rate_w, decoder_seconds, clean_gap_seconds,
                   CONTROL_SPANS)


def gap_dose(weights: np.ndarray, itl_seconds: np.ndarray, upper_bounds: np.ndarray, increases: np.ndarray,
             dose: np.ndarray, beside: np.ndarray, ok: np.ndarray, decoder_seconds: np.ndarray,
             long_steps: float = LONG_STEPS) -> GapContrast | None:
    """The long gaps' excess share of decoders' waiting fitted on ``dose`` (prompt tokens per second of the
    interval), where too few spans without prefill time a decode-only step to control against (a prompt in
    nearly every scrape: a busy endpoint, a long scrape interval).

    Each of ``n`` decoders waits out every chunk step beside it, so an interval's excess is about
    ``n dt (a + c P / dt)``: a background ``a`` per decoder-second (the host's pauses, anything not prefill) and
    ``c`` per prompt token per decoder. So per replicate, decoder-time weighted least squares of
    ``excess / decoder seconds`` on the dose over the ``ok`` intervals (not over the waiting, which the long gaps
    themselves lengthen: that bends the line and lifts its intercept): the intercept ``a`` is the control,
    ``without``; ``beside`` is the share in the ``beside`` intervals, so the difference is above 0 beyond noise
    where the long gaps grow with the prompts (a flat fit puts the intercept at the mean). The shares here are of
    decoders' time, not of their waiting as in :func:`gap_contrast`. Each interval's
    decode-only gap is its own median (most of its steps are decode-only where a chunk step is far shorter than
    the scrape). None with under ``MIN_DOSE_INTERVALS`` intervals, no spread in the dose, or under
    ``MIN_LONG_GAPS`` long gaps beside prefill.
    """
    s = np.asarray(itl_seconds, dtype=np.float64)
    x, d = np.asarray(dose, dtype=np.float64), np.asarray(decoder_seconds, dtype=np.float64)
    count, excess, gap = interval_excess(s, upper_bounds, increases, float("nan"), long_steps)
    use = np.asarray(ok, dtype=bool) & np.isfinite(s) & np.isfinite(d) & (d > 0) & np.isfinite(excess) & np.isfinite(x)
    b = np.asarray(beside, dtype=bool) & use
    if int(use.sum()) < MIN_DOSE_INTERVALS or np.ptp(x[use]) <= 0 or float(count[b].sum()) < MIN_LONG_GAPS:
        return None
    e, s0, xs = np.where(use, excess, 0.0), np.where(use, d, 0.0), np.where(use, x, 0.0) / DOSE_SCALE
    s_0, s_1, s_2 = weights @ s0, weights @ (s0 * xs), weights @ (s0 * xs * xs)
    t_0, t_1 = weights @ e, weights @ (e * xs)
    with np.errstate(invalid="ignore", divide="ignore"):
        det = s_0 * s_2 - s_1 * s_1
        slope = np.where(det > 0, (s_0 * t_1 - s_1 * t_0) / np.where(det > 0, det, 1.0), np.nan)
        # a share is never below 0: an intercept under it is the line's extrapolation, not a control
        intercept = np.clip((t_0 - slope * s_1) / np.where(s_0 > 0, s_0, np.nan), 0.0, None)
    rate_b, num_b, den_b = _rates(weights, e, s0, b)
    clean = float(np.average(gap[use], weights=np.nan_to_num(np.asarray(increases)[use, -1]) + 1e-12))
    return _result(weights, e, count, gap, b, rate_b, num_b, den_b, intercept, decoder_seconds, clean, CONTROL_DOSE)
