"""The gate of ``verify-arm``: every bucket's TTFT and ITL before vs after, and each prediction with a tolerance.

An arm that engaged can still fail its purpose: it can miss what the before window predicted
(the busy bucket's per-stream rate, its TTFT p90), or raise a latency nobody predicted (the
idle bucket's TTFT, when held steps leave a backlog behind a busy period). A pipeline that
gates on ``verify-arm`` needs both answered, so this compares, on the before window's bucket
edges:

- each predicted quantity against its prediction: *off* when the whole interval of the
  observed value lies outside ``[predicted / (1 + tol), predicted x (1 + tol)]``;
- every bucket's TTFT p50/p90/p99 and ITL p50/p99, after / before: a *cost* when the whole
  interval of the ratio lies above ``allowed x (1 + tol)``, where ``allowed`` is the predicted
  ratio for that quantity, or 1.0 where nothing predicted a change.

The intervals are moving-block bootstraps over scrapes (:mod:`pdcensus.census.bootstrap`), the
two windows resampled independently, at a *family-wise* level: with ``k`` comparisons decided,
each is judged on its ``1 - FAMILY_ALPHA / k`` interval (Bonferroni), so the gate as a whole
calls noise a miss in at most about ``FAMILY_ALPHA`` of runs, however many buckets there are.
Judged on plain 90 % intervals, two days of the same flags (another seed) failed 4 of 12
simulator pairs (bench/verify_gate.py); at the family level, see BENCHMARKS.md "verify-arm gate".
A quantile read from a bucketed histogram is known only to its ``le`` bucket, so the interval of
a ratio also spans what the two points' buckets allow (the after bucket's lower bound over the
before bucket's upper bound, and the reverse): a change inside one bucket is never called. A
quantile is ``histogram_quantile`` of the summed bucket increases, as in the census (the
replicates use :func:`quantile_rows`, the same rule over a matrix). A bucket with fewer than
``MIN_OBSERVATIONS`` observations in either window is *undecided*, never a pass or a failure.
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

FAMILY_ALPHA = 0.10  # the whole gate's false-alarm share on noise, split over its comparisons
REPLICATES = 2000  # enough for a tail quantile of 0.10 / (2 x 20 comparisons) = 0.25 %
MIN_OBSERVATIONS = 20  # histogram observations (requests for TTFT, tokens for ITL) per bucket and window
LATENCIES = ((Signal.TTFT, "TTFT", (0.5, 0.9, 0.99)), (Signal.ITL, "ITL", (0.5, 0.99)))


@dataclass(frozen=True)
class Side:
    """One window for the gate: its signals, each scrape's bucket (before-window edges) and bootstrap weights."""

    signals: ShapeSignals
    index: np.ndarray
    weights: np.ndarray


def side(signals: ShapeSignals, index: np.ndarray, replicates: int = REPLICATES, seed: int = bootstrap.SEED) -> Side:
    busy = (index > 0).astype(float)
    return Side(signals, index, bootstrap.weights(index.size, bootstrap.block_length(busy), replicates, seed))


def quantile_rows(q: float, upper_bounds: np.ndarray, cumulative: np.ndarray) -> np.ndarray:
    """``histogram_quantile(q)`` of each row of cumulative ``le`` counts (bounds sorted, +Inf last).

    Prometheus's rule (:func:`pdcensus.series.quantile.bucket_quantile`) for monotonic rows: the
    first bucket whose count reaches ``q x total``, linear inside it, the lower bound of +Inf as
    the answer in the +Inf bucket; NaN for an empty row.
    """
    bounds = np.asarray(upper_bounds, dtype=np.float64)
    cum = np.asarray(cumulative, dtype=np.float64)
    total = cum[:, -1]
    rank = q * total
    b = np.minimum((cum < rank[:, None]).sum(axis=1), bounds.size - 1)
    rows = np.arange(cum.shape[0])
    prev = np.where(b > 0, cum[rows, np.maximum(b - 1, 0)], 0.0)
    start = np.where(b > 0, bounds[np.maximum(b - 1, 0)], 0.0)
    end = bounds[b]
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = start + (end - start) * (rank - prev) / (cum[rows, b] - prev)
    out = np.where(b == bounds.size - 1, bounds[-2] if bounds.size > 1 else math.nan, inside)
    return np.where(total > 0, out, math.nan)


@dataclass(frozen=True)
class Quantile:
    """A histogram quantile per bootstrap replicate (row 0: the point), the count, and the point's ``le`` bucket."""

    values: np.ndarray
    count: float
    bucket_low: float  # the histogram cannot place the point more finely than its bucket
    bucket_high: float


def _quantiles(h: Histogram, mask: np.ndarray, w: np.ndarray, q: float) -> Quantile:
    """Per replicate, ``histogram_quantile(q)`` of the bucket increases summed over ``mask``."""
    summed = (w * mask[None, :]) @ np.nan_to_num(h.increases)  # (replicates + 1, le buckets)
    count = float(summed[0, -1])
    out = quantile_rows(q, h.upper_bounds, summed)
    point = float(out[0])
    bounds = np.asarray(h.upper_bounds, dtype=np.float64)
    k = int(np.searchsorted(bounds, point, side="left")) if math.isfinite(point) else -1
    low = float(bounds[k - 1]) if k > 0 else 0.0
    high = float(bounds[k]) if 0 <= k < bounds.size else math.inf
    return Quantile(out, count, low, high)


@dataclass(frozen=True)
class Pending:
    """A comparison before judgement: its replicates, the resolution limits, and what it is held to."""

    quantity: str
    bucket: str
    before: float
    after: float
    ratios: np.ndarray  # row 0: the point
    resolution: tuple[float, float]  # what the histogram buckets allow the ratio to be
    allowed: float
    predicted: bool
    enough: bool
    basis: str
    higher_is_worse: bool = True
    two_sided: bool = False  # a predicted headline quantity: a miss either way is off


def _ratio_pending(name: str, bucket: str, qa: Quantile, qb: Quantile, allowed: float, predicted: bool,
                   basis: str, two_sided: bool = False) -> Pending:
    with np.errstate(invalid="ignore", divide="ignore"):
        ratios = qa.values / qb.values
    res = (qa.bucket_low / qb.bucket_high if qb.bucket_high > 0 else 0.0,
           qa.bucket_high / qb.bucket_low if qb.bucket_low > 0 else math.inf)
    enough = min(qa.count, qb.count) >= MIN_OBSERVATIONS
    why = basis if enough else (f"too few observations ({qb.count:.0f} before, {qa.count:.0f} after; need "
                                f"{MIN_OBSERVATIONS})")
    return Pending(name, bucket, float(qb.values[0]), float(qa.values[0]), ratios, res, allowed, predicted, enough,
                   why, True, two_sided)


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


def _judged(p: Pending, level: float, tolerance: float) -> Comparison:
    point, reps = float(p.ratios[0]), p.ratios[1:]
    reps = reps[np.isfinite(reps)]
    low = high = math.nan
    if math.isfinite(point) and reps.size >= 10:
        lo, hi = np.quantile(reps, (level / 2, 1 - level / 2))
        low, high = min(float(lo), p.resolution[0]), max(float(hi), p.resolution[1])
    if not p.enough:
        status = CompareStatus.UNDECIDED
    elif p.two_sided:
        status = judge(point, low, high, p.allowed, True, tolerance)
    else:
        status = judge(point, low, high, p.allowed, False, tolerance, p.higher_is_worse)
        if p.predicted and status is CompareStatus.COST:
            status = CompareStatus.OFF  # worse than a number someone did predict
    return Comparison(p.quantity, p.bucket, p.before, p.after, point, low, high, p.allowed, p.predicted, status,
                      p.basis, p.higher_is_worse)


def latency_pending(before: Side, after: Side, labels: Sequence[str], predicted_ttft_ratio: float | None = None,
                    ttft_basis: str = "") -> list[Pending]:
    """Every bucket's TTFT and ITL quantiles, after / before, and what was predicted for them.

    ``predicted_ttft_ratio`` applies to the busy buckets' TTFT (the prediction is made for the
    pooled busy bucket); every other quantity is allowed 1.0: nothing predicted it would rise.
    """
    out: list[Pending] = []
    for signal, name, qs in LATENCIES:
        hb, ha = before.signals.histograms.get(signal), after.signals.histograms.get(signal)
        if hb is None or ha is None or hb.upper_bounds.shape != ha.upper_bounds.shape:
            continue
        for b, label in enumerate(labels):
            mb, ma = (before.index == b).astype(float), (after.index == b).astype(float)
            predicted = signal is Signal.TTFT and b > 0 and predicted_ttft_ratio is not None \
                and math.isfinite(predicted_ttft_ratio)
            allowed = float(predicted_ttft_ratio) if predicted and predicted_ttft_ratio is not None else 1.0
            for q in qs:
                out.append(_ratio_pending(f"{name} p{round(q * 100)}", label, _quantiles(ha, ma, after.weights, q),
                                          _quantiles(hb, mb, before.weights, q), allowed, predicted,
                                          ttft_basis if predicted else "no prediction: allowed no rise"))
    return out


def _rate_pending(before_value: float, after: Side, busy: np.ndarray, predicted_value: float, basis: str) -> Pending:
    """The busy bucket's per-stream rate after the arm against its prediction (two-sided)."""
    s = after.signals
    assert s.decode_tokens_per_second is not None
    p = per_stream_rate(s.decode_tokens_per_second, s.gauge(Signal.RUNNING))
    ok = busy & np.isfinite(p)
    w = after.weights * ok[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (w @ np.nan_to_num(p)) / w.sum(axis=1)
    return Pending("per-stream tok/s", "busy", before_value, float(means[0]), means / before_value, (math.inf, 0.0),
                   predicted_value / before_value, True, int(ok.sum()) >= MIN_OBSERVATIONS, basis,
                   higher_is_worse=False, two_sided=True)


def compare_arm(before: ShapeSignals, after: ShapeSignals, before_index: np.ndarray, after_index: np.ndarray,
                labels: Sequence[str], predicted: dict[str, float], busy_rate_before: float,
                tolerance: float = DEFAULT_TOLERANCE) -> tuple[Comparison, ...]:
    """Every comparison of the gate: the predictions first (rate, pooled TTFT p90), then each bucket's latencies.

    ``predicted`` is the before window's prediction for the arm (``verify.interleave_prediction``;
    empty for a knob with no numeric prediction: then every latency is allowed no rise).
    """
    b, a = side(before, before_index), side(after, after_index, seed=bootstrap.SEED + 1)
    pending: list[Pending] = []
    rate = predicted.get("busy_per_stream_tokens_per_second", math.nan)
    if math.isfinite(rate) and math.isfinite(busy_rate_before) and busy_rate_before > 0:
        why = "busy bucket mix under N, from the before ledger (advice.predict.busy_bucket_rate)"
        pending.append(_rate_pending(busy_rate_before, a, after_index > 0, rate, why))
    ttft, basis = predicted.get("ttft_p90_ratio_replay", math.nan), "replay of the before window's prefill trace"
    if not math.isfinite(ttft):
        ttft, basis = predicted.get("ttft_p90_ratio_queueing", math.nan), "M/M/1 on the before window's prefill load"
    hb, ha = before.histograms.get(Signal.TTFT), after.histograms.get(Signal.TTFT)
    if math.isfinite(ttft) and hb is not None and ha is not None:
        qa = _quantiles(ha, (after_index > 0).astype(float), a.weights, 0.9)
        qb = _quantiles(hb, (before_index > 0).astype(float), b.weights, 0.9)
        pending.append(_ratio_pending("TTFT p90", "busy", qa, qb, ttft, True, basis, two_sided=True))
    pending.extend(latency_pending(b, a, labels, ttft if math.isfinite(ttft) else None, basis))
    level = FAMILY_ALPHA / max(1, sum(p.enough for p in pending))
    return tuple(_judged(p, level, tolerance) for p in pending)


def gate_outcome(comparisons: Sequence[Comparison]) -> tuple[list[Comparison], list[Comparison]]:
    """The comparisons that put an engaged arm off prediction: (missed predictions, unpredicted costs)."""
    return ([c for c in comparisons if c.status is CompareStatus.OFF],
            [c for c in comparisons if c.status is CompareStatus.COST])


def describe(c: Comparison) -> str:
    """One line: the quantity, before -> after, the ratio and its interval against the allowed band."""
    interval = f"{c.low:.2f}-{c.high:.2f}" if math.isfinite(c.low) else "-"
    what = "predicted" if c.predicted else "allowed"
    return (f"{c.bucket} {c.quantity} {c.before:.3g} -> {c.after:.3g} (x{c.ratio:.2f}, family-wise interval "
            f"{interval}; {what} x{c.predicted_ratio:.2f})")
