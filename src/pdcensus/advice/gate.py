"""The gate of ``verify-arm``: every bucket's TTFT and ITL before vs after, and each prediction with a tolerance.

An arm that engaged can still fail its purpose: it can miss what the before window predicted
(the busy bucket's per-stream rate, its TTFT p90), or raise a latency nobody predicted (the
idle bucket's TTFT, when held steps leave a backlog behind a busy period). A pipeline that
gates on ``verify-arm`` needs both answered, so this compares, on the before window's bucket
edges:

- each predicted quantity against its prediction: *off* when the whole 90 % interval of the
  observed value lies outside ``[predicted / (1 + tol), predicted x (1 + tol)]``;
- every bucket's TTFT p50/p90/p99 and ITL p50/p99, after / before: a *cost* when the whole
  interval of the ratio lies above ``allowed x (1 + tol)``, where ``allowed`` is the predicted
  ratio for that quantity, or 1.0 where nothing predicted a change.

A quantile read from a bucketed histogram is known only to its ``le`` bucket, so the interval
of a ratio also spans what the two points' buckets allow (lower bound of the after bucket over
upper bound of the before bucket, and the reverse): a change inside one bucket is never called.
Judging the interval, not the point, is what keeps noise from failing a gate: two runs of the
same flags with different seeds move the sim's idle-bucket TTFT p90 by +59 % (0.46 s to 0.73 s,
``step-time-sharing`` seeds 0 and 1), inside its interval, while the interleave arm moves it x5.
Intervals are moving-block bootstraps over scrapes (:mod:`pdcensus.census.bootstrap`), the two
windows resampled independently; a quantile is ``histogram_quantile`` of the summed bucket
increases, as in the census. A bucket with fewer than ``MIN_OBSERVATIONS`` histogram
observations in either window is *undecided*, never a pass or a failure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdcensus.advice.arm_args import DEFAULT_TOLERANCE
from pdcensus.advice.model import Comparison, CompareStatus
from pdcensus.census import bootstrap
from pdcensus.census.buckets import per_stream_rate
from pdcensus.census.signals import Histogram, ShapeSignals
from pdcensus.series.profiles import Signal
from pdcensus.series.quantile import quantile_of_bounds

INTERVAL = (0.05, 0.95)  # a 90 % interval
REPLICATES = 200
MIN_OBSERVATIONS = 20  # histogram observations (requests for TTFT, tokens for ITL) per bucket and window
LATENCIES = ((Signal.TTFT, "TTFT", (0.5, 0.9, 0.99)), (Signal.ITL, "ITL", (0.5, 0.99)))


@dataclass(frozen=True)
class Side:
    """One window for the gate: its signals, each scrape's bucket (before-window edges) and bootstrap weights."""

    signals: ShapeSignals
    index: np.ndarray
    weights: np.ndarray


def side(signals: ShapeSignals, index: np.ndarray, replicates: int = REPLICATES) -> Side:
    busy = (index > 0).astype(float)
    return Side(signals, index, bootstrap.weights(index.size, bootstrap.block_length(busy), replicates))


@dataclass(frozen=True)
class Quantile:
    """A histogram quantile per bootstrap replicate (row 0: the point), the count, and the point's ``le`` bucket."""

    values: np.ndarray
    count: float
    bucket_low: float  # the histogram cannot place the point more finely than its bucket
    bucket_high: float


def _quantiles(h: Histogram, mask: np.ndarray, w: np.ndarray, q: float) -> Quantile:
    """Per replicate, ``histogram_quantile(q)`` of the bucket increases summed over ``mask``."""
    inc = np.nan_to_num(h.increases)
    summed = (w * mask[None, :]) @ inc  # (replicates + 1, le buckets)
    count = float(summed[0, -1]) if np.isinf(h.upper_bounds[-1]) else float(summed[0].max(initial=0.0))
    out = np.array([quantile_of_bounds(q, h.upper_bounds, row) if row[-1] > 0 else math.nan for row in summed])
    point = float(out[0])
    bounds = np.asarray(h.upper_bounds, dtype=np.float64)
    k = int(np.searchsorted(bounds, point, side="left")) if math.isfinite(point) else -1
    low = float(bounds[k - 1]) if k > 0 else 0.0
    high = float(bounds[k]) if 0 <= k < bounds.size else math.inf
    return Quantile(out, count, low, high)


def _ratio(after: Quantile, before: Quantile) -> tuple[float, float, float]:
    """after / before with an interval holding both the bootstrap's and the buckets' uncertainty."""
    with np.errstate(invalid="ignore", divide="ignore"):
        point, low, high = _interval(after.values / before.values)
    if not (math.isfinite(low) and math.isfinite(high)):
        return point, low, high
    res_low = after.bucket_low / before.bucket_high if before.bucket_high > 0 else 0.0
    res_high = after.bucket_high / before.bucket_low if before.bucket_low > 0 else math.inf
    return point, min(low, res_low), max(high, res_high)


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    point, reps = float(values[0]), values[1:]
    reps = reps[np.isfinite(reps)]
    if not math.isfinite(point) or reps.size < 10:
        return point, math.nan, math.nan
    lo, hi = np.quantile(reps, INTERVAL)
    return point, float(lo), float(hi)


def judge(ratio: float, low: float, high: float, predicted_ratio: float, predicted: bool, tolerance: float,
          higher_is_worse: bool = True) -> CompareStatus:
    """Off / cost only when the whole interval is beyond the tolerance; undecided without an interval."""
    if not (math.isfinite(low) and math.isfinite(high) and math.isfinite(predicted_ratio) and predicted_ratio > 0):
        return CompareStatus.UNDECIDED
    upper, lower = predicted_ratio * (1 + tolerance), predicted_ratio / (1 + tolerance)
    if predicted:
        return CompareStatus.OFF if low > upper or high < lower else CompareStatus.WITHIN
    worse = low > upper if higher_is_worse else high < lower
    return CompareStatus.COST if worse else CompareStatus.WITHIN


def latency_comparisons(before: Side, after: Side, labels: Sequence[str], tolerance: float,
                        predicted_ttft_ratio: float | None = None, ttft_basis: str = "") -> list[Comparison]:
    """Every bucket's TTFT and ITL quantiles, after / before, against what was predicted for them.

    ``predicted_ttft_ratio`` applies to the busy buckets' TTFT (the prediction is made for the
    pooled busy bucket); every other quantity is allowed 1.0: nothing predicted it would rise.
    """
    out: list[Comparison] = []
    for signal, name, qs in LATENCIES:
        hb, ha = before.signals.histograms.get(signal), after.signals.histograms.get(signal)
        if hb is None or ha is None or hb.upper_bounds.shape != ha.upper_bounds.shape:
            continue
        for b, label in enumerate(labels):
            mb, ma = (before.index == b).astype(float), (after.index == b).astype(float)
            for q in qs:
                qb, qa = _quantiles(hb, mb, before.weights, q), _quantiles(ha, ma, after.weights, q)
                nb, na = qb.count, qa.count
                point, low, high = _ratio(qa, qb)
                predicted = signal is Signal.TTFT and b > 0 and predicted_ttft_ratio is not None \
                    and math.isfinite(predicted_ttft_ratio)
                allowed = float(predicted_ttft_ratio) if predicted and predicted_ttft_ratio is not None else 1.0
                enough = min(nb, na) >= MIN_OBSERVATIONS
                status = (judge(point, low, high, allowed, False, tolerance) if enough
                          else CompareStatus.UNDECIDED)
                if predicted and status is CompareStatus.COST:
                    status = CompareStatus.OFF  # worse than a number someone did predict
                basis = (ttft_basis if predicted else "no prediction: allowed no rise") if enough else (
                    f"too few observations ({nb:.0f} before, {na:.0f} after; need {MIN_OBSERVATIONS})")
                out.append(Comparison(f"{name} p{round(q * 100)}", label, float(qb.values[0]),
                                      float(qa.values[0]), point, low, high, allowed, predicted, status, basis))
    return out


def rate_comparison(before_value: float, after: Side, busy: np.ndarray, predicted_value: float, tolerance: float,
                    basis: str) -> Comparison:
    """The busy bucket's per-stream rate after the arm against its prediction (two-sided)."""
    s = after.signals
    assert s.decode_tokens_per_second is not None
    p = per_stream_rate(s.decode_tokens_per_second, s.gauge(Signal.RUNNING))
    ok = busy & np.isfinite(p)
    w = after.weights * ok[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (w @ np.nan_to_num(p)) / w.sum(axis=1)
    point, low, high = _interval(means)
    scale = predicted_value if predicted_value > 0 else math.nan
    status = (judge(point / scale, low / scale, high / scale, 1.0, True, tolerance)
              if math.isfinite(scale) else CompareStatus.UNDECIDED)
    ratio = point / before_value if before_value > 0 else math.nan
    return Comparison("per-stream tok/s", "busy", before_value, point, ratio,
                      low / before_value if before_value > 0 else math.nan,
                      high / before_value if before_value > 0 else math.nan,
                      predicted_value / before_value if before_value > 0 else math.nan, True, status, basis,
                      higher_is_worse=False)


def pooled_ttft_comparison(before: Side, after: Side, predicted_ratio: float, tolerance: float,
                           basis: str) -> Comparison | None:
    """The pooled busy bucket's TTFT p90 ratio against its prediction (two-sided)."""
    hb, ha = before.signals.histograms.get(Signal.TTFT), after.signals.histograms.get(Signal.TTFT)
    if hb is None or ha is None or not math.isfinite(predicted_ratio):
        return None
    qb = _quantiles(hb, (before.index > 0).astype(float), before.weights, 0.9)
    qa = _quantiles(ha, (after.index > 0).astype(float), after.weights, 0.9)
    point, low, high = _ratio(qa, qb)
    enough = min(qb.count, qa.count) >= MIN_OBSERVATIONS
    status = judge(point, low, high, predicted_ratio, True, tolerance) if enough else CompareStatus.UNDECIDED
    return Comparison("TTFT p90", "busy", float(qb.values[0]), float(qa.values[0]), point, low, high,
                      predicted_ratio, True, status, basis)


def gate_outcome(comparisons: Sequence[Comparison]) -> tuple[list[Comparison], list[Comparison]]:
    """The comparisons that put an engaged arm off prediction: (missed predictions, unpredicted costs)."""
    return ([c for c in comparisons if c.status is CompareStatus.OFF],
            [c for c in comparisons if c.status is CompareStatus.COST])


def describe(c: Comparison) -> str:
    """One line: the quantity, before -> after, the ratio and its interval against the allowed band."""
    interval = f"{c.low:.2f}-{c.high:.2f}" if math.isfinite(c.low) else "-"
    what = "predicted" if c.predicted else "allowed"
    return (f"{c.bucket} {c.quantity} {c.before:.3g} -> {c.after:.3g} (x{c.ratio:.2f}, 90% interval {interval}; "
            f"{what} x{c.predicted_ratio:.2f})")


def compare_arm(before: ShapeSignals, after: ShapeSignals, before_index: np.ndarray, after_index: np.ndarray,
                labels: Sequence[str], predicted: dict[str, float], busy_rate_before: float,
                tolerance: float = DEFAULT_TOLERANCE) -> tuple[Comparison, ...]:
    """Every comparison of the gate: the predictions first (rate, pooled TTFT p90), then each bucket's latencies.

    ``predicted`` is the before window's prediction for the arm (``verify.interleave_prediction``;
    empty for a knob with no numeric prediction: then every latency is allowed no rise).
    """
    b, a = side(before, before_index), side(after, after_index)
    out: list[Comparison] = []
    rate = predicted.get("busy_per_stream_tokens_per_second", math.nan)
    if math.isfinite(rate) and math.isfinite(busy_rate_before):
        out.append(rate_comparison(busy_rate_before, a, after_index > 0, rate, tolerance,
                                   "busy bucket mix under N, from the before ledger (advice.predict.busy_bucket_rate)"))
    ttft, basis = predicted.get("ttft_p90_ratio_replay", math.nan), "replay of the before window's prefill trace"
    if not math.isfinite(ttft):
        ttft, basis = predicted.get("ttft_p90_ratio_queueing", math.nan), "M/M/1 on the before window's prefill load"
    pooled = pooled_ttft_comparison(b, a, ttft, tolerance, basis) if math.isfinite(ttft) else None
    if pooled is not None:
        out.append(pooled)
    out.extend(latency_comparisons(b, a, labels, tolerance, ttft if math.isfinite(ttft) else None, basis))
    return tuple(out)
