"""The gate of ``verify-arm``: every bucket's TTFT and ITL before vs after, and each prediction with a tolerance.

An arm that engaged can still fail its purpose: it can miss what the before window predicted
(the busy bucket's per-stream rate, its TTFT p90), or raise a latency nobody predicted (the
idle bucket's TTFT, when held steps leave a backlog behind a busy period). A pipeline that
gates on ``verify-arm`` needs both answered, so this compares, on the before window's bucket
edges:

- each predicted headline quantity (the busy bucket's per-stream rate and TTFT p90) against its
  prediction, on the two-sided band ``[predicted / (1 + tol), predicted x (1 + tol)]``;
- every bucket's TTFT p50/p90/p99 and ITL p50/p99, after / before, on the one-sided band
  ``<= allowed x (1 + tol)``, where ``allowed`` is the predicted ratio for that quantity, or 1.0
  where nothing predicted a change (a fall is no cost).

One rule decides every comparison (:func:`decide`), and every view prints its band
(:func:`band_text`): *within* only where the whole interval lies inside the band; *off* (a
prediction) or *cost* (nothing predicted it) where the whole interval lies outside; *cannot tell*
where it straddles an edge of the band, is wider than the band, or is missing. An arm with a
cannot-tell and no miss is inconclusive (exit 3), never passed.

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
replicates use :func:`pdcensus.series.quantile.quantile_rows`, the same rule over a matrix). A bucket with fewer than
``MIN_OBSERVATIONS`` observations in either window is *undecided*, never a pass or a failure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pdcensus.census import bootstrap
from pdcensus.census.buckets import per_stream_rate
from pdcensus.census.signals import Histogram, ShapeSignals
from pdcensus.series.profiles import Signal
from pdcensus.series.quantile import quantile_rows
from pdcensus.verify.arm_args import DEFAULT_TOLERANCE
from pdcensus.verify.batch_law import BatchAllowance
from pdcensus.verify.forecast import Forecast
from pdcensus.verify.model import LATENCIES, ArmOutcome, ArmPrediction, Comparison, CompareStatus

FAMILY_ALPHA = 0.10  # the whole gate's false-alarm share on noise, split over its comparisons
REPLICATES = 2000  # enough for a tail quantile of 0.10 / (2 x 20 comparisons) = 0.25 %
MIN_OBSERVATIONS = 20  # histogram observations (requests for TTFT, tokens for ITL) per bucket and window


@dataclass(frozen=True)
class Side:
    """One window for the gate: its signals, each scrape's bucket (before-window edges) and bootstrap weights."""

    signals: ShapeSignals
    index: np.ndarray
    weights: np.ndarray


def side(signals: ShapeSignals, index: np.ndarray, replicates: int = REPLICATES, seed: int = bootstrap.SEED) -> Side:
    busy = (index > 0).astype(float)
    return Side(signals, index, bootstrap.weights(index.size, bootstrap.block_length(busy), replicates, seed))


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


def band(allowed: float, tolerance: float, two_sided: bool, higher_is_worse: bool = True) -> tuple[float, float]:
    """The allowed band of a ratio: two-sided around a predicted headline, else one-sided against the worse side."""
    if not (math.isfinite(allowed) and allowed > 0):
        return (math.nan, math.nan)
    low, high = allowed / (1 + tolerance), allowed * (1 + tolerance)
    if two_sided:
        return (low, high)
    return (0.0, high) if higher_is_worse else (low, math.inf)


def band_text(c: Comparison) -> str:
    """The band alone, as every view prints it: ``2.08-3.25`` around a prediction, ``<= x1.25`` for a rise."""
    lo, hi = c.band_low, c.band_high
    if math.isnan(lo) or math.isnan(hi):
        return "-"
    if lo > 0 and math.isfinite(hi):
        return f"{lo:.2f}-{hi:.2f}"
    return f"<= x{hi:.2f}" if math.isfinite(hi) else f">= x{lo:.2f}"


def wanted_text(c: Comparison) -> str:
    """What was predicted and the band it allows: ``x2.60 (2.08-3.25)``, ``none (<= x1.25)``."""
    return f"{f'x{c.predicted_ratio:.2f}' if c.predicted else 'none'} ({band_text(c)})"


class Decision:
    """How an interval sits against a band (:func:`decide`)."""

    INSIDE = "inside"
    OUTSIDE = "outside"
    STRADDLES = "straddles"
    TOO_WIDE = "too wide"
    NO_INTERVAL = "no interval"


def decide(low: float, high: float, band_low: float, band_high: float) -> str:
    """Inside only where the whole interval is; outside only where none of it is; else which way it cannot tell."""
    if not (math.isfinite(low) and not math.isnan(high) and low <= high) or math.isnan(band_low + band_high):
        return Decision.NO_INTERVAL
    if band_low <= low and high <= band_high:
        return Decision.INSIDE
    if high < band_low or low > band_high:
        return Decision.OUTSIDE
    band_width = math.log(band_high / band_low) if band_low > 0 else math.inf
    width = math.log(high / low) if low > 0 else math.inf
    return Decision.TOO_WIDE if not math.isfinite(width) or width > band_width else Decision.STRADDLES


_WHY = {Decision.INSIDE: "the whole interval lies inside the band",
        Decision.OUTSIDE: "the whole interval lies outside the band",
        Decision.STRADDLES: "cannot tell: the interval straddles an edge of the band",
        Decision.TOO_WIDE: "cannot tell: the interval is wider than the band (too few observations or too coarse "
                           "a histogram to decide)",
        Decision.NO_INTERVAL: "cannot tell: no interval (a ratio of zero or no replicates)"}


def _judged(p: Pending, level: float, tolerance: float) -> Comparison:
    point, reps = float(p.ratios[0]), p.ratios[1:]
    reps = reps[np.isfinite(reps)]
    low = high = math.nan
    if math.isfinite(point) and reps.size >= 10:
        lo, hi = np.quantile(reps, (level / 2, 1 - level / 2))
        low, high = min(float(lo), p.resolution[0]), max(float(hi), p.resolution[1])
    band_low, band_high = band(p.allowed, tolerance, p.two_sided, p.higher_is_worse)
    where = decide(low, high, band_low, band_high)
    if not p.enough:
        status, why = CompareStatus.UNDECIDED, "not judged: " + p.basis
    elif where == Decision.INSIDE:
        status, why = CompareStatus.WITHIN, _WHY[where]
    elif where == Decision.OUTSIDE:
        status, why = (CompareStatus.OFF if p.predicted else CompareStatus.COST), _WHY[where]
    else:
        status, why = CompareStatus.CANNOT_TELL, _WHY[where]
    return Comparison(p.quantity, p.bucket, p.before, p.after, point, low, high, p.allowed, p.predicted, status,
                      p.basis, p.higher_is_worse, band_low, band_high, why)


def latency_pending(before: Side, after: Side, labels: Sequence[str], predicted_ttft_ratio: float | None = None,
                    ttft_basis: str = "", itl_allowance: BatchAllowance | None = None,
                    forecast: Forecast | None = None) -> list[Pending]:
    """Every bucket's TTFT and ITL quantiles, after / before, and what was predicted for them.

    ``predicted_ttft_ratio`` applies to the busy buckets' TTFT (the prediction is made for the
    pooled busy bucket); ``itl_allowance`` to every bucket's ITL (the batch a KV-capacity arm
    admitted, :mod:`pdcensus.verify.batch_law`); a ``forecast`` (``--whatif``,
    :mod:`pdcensus.verify.forecast`) to each quantity it predicted, after the advice's TTFT
    prediction and before the batch law; every other quantity is allowed 1.0: nothing predicted
    it would rise.
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
            basis = ttft_basis if predicted else "no prediction: allowed no rise"
            if signal is Signal.ITL and itl_allowance is not None:
                predicted, allowed, basis = True, itl_allowance.ratio, itl_allowance.basis
            for q in qs:
                quantity = f"{name} p{round(q * 100)}"
                told = forecast.latency_ratio(quantity, b > 0) if forecast is not None and not (
                    predicted and signal is Signal.TTFT) else None  # the advice's own TTFT prediction first
                out.append(_ratio_pending(quantity, label, _quantiles(ha, ma, after.weights, q),
                                          _quantiles(hb, mb, before.weights, q), *(
                                              (told[0], True, told[1]) if told else (allowed, predicted, basis))))
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
                labels: Sequence[str], predicted: ArmPrediction | None, busy_rate_before: float,
                tolerance: float = DEFAULT_TOLERANCE,
                itl_allowance: BatchAllowance | None = None,
                forecast: Forecast | None = None) -> tuple[Comparison, ...]:
    """Every comparison of the gate: the predictions first (rate, pooled TTFT p90), then each bucket's latencies.

    ``predicted`` is the before window's prediction for the arm (``arm.interleave_prediction``;
    None for a knob with no numeric prediction: then every latency is allowed no rise, unless a
    ``forecast`` from ``whatif`` predicted it; the advice's own prediction comes first where both say).
    """
    b, a = side(before, before_index), side(after, after_index, seed=bootstrap.SEED + 1)
    pending: list[Pending] = []
    rate = predicted.busy_per_stream_tokens_per_second if predicted is not None else math.nan
    why = "busy bucket mix under N, from the before ledger (advice.predict.busy_bucket_rate)"
    if not math.isfinite(rate) and forecast is not None and forecast.busy_rate is not None:
        rate, why = busy_rate_before * forecast.busy_rate[0], forecast.busy_rate[1]
    if math.isfinite(rate) and math.isfinite(busy_rate_before) and busy_rate_before > 0:
        pending.append(_rate_pending(busy_rate_before, a, after_index > 0, rate, why))
    ttft, basis = predicted.gate_ttft_ratio() if predicted is not None else (math.nan, "")
    hb, ha = before.histograms.get(Signal.TTFT), after.histograms.get(Signal.TTFT)
    if math.isfinite(ttft) and hb is not None and ha is not None:
        qa = _quantiles(ha, (after_index > 0).astype(float), a.weights, 0.9)
        qb = _quantiles(hb, (before_index > 0).astype(float), b.weights, 0.9)
        pending.append(_ratio_pending("TTFT p90", "busy", qa, qb, ttft, True, basis, two_sided=True))
    pending.extend(latency_pending(b, a, labels, ttft if math.isfinite(ttft) else None, basis, itl_allowance,
                                   forecast))
    level = FAMILY_ALPHA / max(1, sum(p.enough for p in pending))
    return tuple(_judged(p, level, tolerance) for p in pending)


def gate_outcome(comparisons: Sequence[Comparison]) -> tuple[list[Comparison], list[Comparison]]:
    """The comparisons that put an engaged arm off prediction: (missed predictions, unpredicted costs)."""
    return ([c for c in comparisons if c.status is CompareStatus.OFF],
            [c for c in comparisons if c.status is CompareStatus.COST])


def undecidable(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """The comparisons whose interval cannot be placed against the band: the gate cannot pass them."""
    return [c for c in comparisons if c.status is CompareStatus.CANNOT_TELL]


def engaged_outcome(comparisons: Sequence[Comparison], tolerance: float, flag: str) -> tuple[ArmOutcome, str]:
    """An engaged arm's verdict from its comparisons: a miss is off (5), a cannot-tell inconclusive (3), else 0."""
    missed, costs = gate_outcome(comparisons)
    untold = undecidable(comparisons)
    unjudged = sum(c.status is CompareStatus.UNDECIDED for c in comparisons)
    rule = f"(tolerance {tolerance:.0%}: within only where the whole family-wise interval lies inside the band)"
    if missed or costs:
        what = " and ".join(x for x in (f"{len(missed)} prediction(s) missed beyond {tolerance:.0%}" if missed else "",
                                         f"{len(costs)} cost(s) nobody predicted" if costs else "") if x)
        outcome, reason = ArmOutcome.OFF_PREDICTION, f"engaged, but {what}; first: {describe((missed + costs)[0])}"
        if untold:
            reason += f"; {len(untold)} more cannot tell"
    elif untold:
        outcome, reason = ArmOutcome.INCONCLUSIVE, (
            f"engaged, but {len(untold)} comparison(s) cannot tell {rule}: the interval straddles the band or is "
            f"wider than it; first: {describe(untold[0])}")
    else:
        outcome, reason = ArmOutcome.ENGAGED, ("argv, counter and bucket pair agree, and every prediction and "
                                               f"bucket latency judged lies within its band {rule}")
        if not any(c.predicted for c in comparisons):
            reason += (f" (no numeric prediction for {flag}: the gate checked only that no bucket's TTFT or "
                       "ITL rose)")
    if unjudged:
        reason += f"; {unjudged} not judged (too few observations)"
    return outcome, reason


def describe(c: Comparison) -> str:
    """One line: the quantity, before -> after, the ratio and its interval against the allowed band."""
    interval = f"{c.low:.2f}-{c.high:.2f}" if math.isfinite(c.low) else "-"
    return (f"{c.bucket} {c.quantity} {c.before:.3g} -> {c.after:.3g} (x{c.ratio:.2f}, family-wise interval "
            f"{interval}; predicted {wanted_text(c)}: {c.status.value})")
