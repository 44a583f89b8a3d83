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

Written here, not taken from a library: it reads Prometheus's classic-histogram buckets per
interval, for which numpy is the library; no package computes excess-over-a-line sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdcensus.series.quantile import quantile_rows

LONG_STEPS = 3.0  # a gap beyond this many decode-only gaps waited out more than a decode-only step
MIN_LONG_GAPS = 5  # long gaps in the spans with prefill: fewer, and the contrast is no reading


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
    without: np.ndarray  # the same in spans without (the control)
    loss: np.ndarray  # (beside - without) x waiting in spans with prefill / decoders' time, floored at 0
    long_gaps: float  # long gaps counted in the spans with prefill (the window)
    mean_long_gap_seconds: float  # their mean, read at the buckets' midpoints
    clean_gap_seconds: float  # the decode-only gap their line was drawn from (the clean spans' mean)
    long_share: float = float("nan")  # the long gaps beside prefill, as a share of decoders' time: how often it acts

    @property
    def difference(self) -> np.ndarray:
        """``beside - without`` per replicate: above 0 beyond noise, the long gaps come with the prefill."""
        out: np.ndarray = self.beside - self.without
        return out


def gap_contrast(weights: np.ndarray, itl_seconds: np.ndarray, upper_bounds: np.ndarray, increases: np.ndarray,
                 beside: np.ndarray, without: np.ndarray, decoder_seconds: np.ndarray,
                 clean_gap_seconds: float, long_steps: float = LONG_STEPS) -> GapContrast | None:
    """The contrast of the long gaps' excess in intervals ``beside`` prefill against ``without`` (boolean masks of
    the same rows), over ``decoder_seconds``; None without a clean gap or with under ``MIN_LONG_GAPS`` long gaps
    beside prefill."""
    if not (np.isfinite(clean_gap_seconds) and clean_gap_seconds > 0):
        return None
    s = np.asarray(itl_seconds, dtype=np.float64)
    own = median_gaps(upper_bounds, increases)
    gap = np.fmax(np.where(np.isfinite(own), own, clean_gap_seconds), clean_gap_seconds)
    line = long_steps * gap
    count, excess = long_gap_excess(upper_bounds, increases, line, gap)
    # the long gaps sum to the interval's inter-token sum less its short gaps', each at most the line
    fast = np.clip(np.asarray(increases, dtype=np.float64)[:, -1] - count, 0.0, None)
    summed = np.clip(excess + count * gap, np.clip(s - fast * line, 0.0, None), np.clip(s, 0.0, None))
    excess = np.clip(summed - count * gap, 0.0, None)
    ok = np.isfinite(s) & np.isfinite(excess)
    b, w = np.asarray(beside, dtype=bool) & ok, np.asarray(without, dtype=bool) & ok
    n_long = float(count[b].sum())
    if n_long < MIN_LONG_GAPS or not w.any():
        return None
    e, s0 = np.where(ok, excess, 0.0), np.where(ok, s, 0.0)
    num_b, den_b = weights @ (e * b), weights @ (s0 * b)
    num_w, den_w = weights @ (e * w), weights @ (s0 * w)
    total = weights @ np.nan_to_num(np.asarray(decoder_seconds, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        rate_b = np.where(den_b > 0, num_b / np.where(den_b > 0, den_b, 1.0), np.nan)
        rate_w = np.where(den_w > 0, num_w / np.where(den_w > 0, den_w, 1.0), np.nan)
        loss = np.where(total > 0, np.clip(num_b - rate_w * den_b, 0.0, None) / np.where(total > 0, total, 1.0),
                        np.nan)
    long_seconds = float((e[b] + count[b] * gap[b]).sum())
    share = long_seconds / float(total[0]) if total[0] > 0 else float("nan")
    return GapContrast(rate_b, rate_w, loss, n_long, long_seconds / n_long, float(clean_gap_seconds),
                       min(share, 1.0) if np.isfinite(share) else share)
