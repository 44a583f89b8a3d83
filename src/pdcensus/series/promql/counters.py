"""Counter and gauge range math exactly as Prometheus computes it, for reuse outside PromQL.

``rate``/``increase``/``delta`` extrapolate the change seen inside a window towards the
window's edges; the rules differ between Prometheus 2.x and 3.x, and the census must
agree with whatever Prometheus a user compares it with, so both are written out here:

* window: 3.x selects samples with ``start < t <= end`` (left-open), 2.x ``start <= t <= end``;
* extrapolation: 3.x first caps the distance to the start at half a mean sample interval
  (when it exceeds 1.1 intervals) and only then applies the counter zero-point clamp;
  2.x applies the zero-point clamp first and the 1.1-interval threshold afterwards.

The evaluator calls the ``*_ms`` functions on samples already cut to a window; the
seconds-based wrappers (:func:`counter_increase`, :func:`counter_rate`,
:func:`gauge_delta`) cut the window themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def window_mask(timestamps_ms: np.ndarray, start_ms: int, end_ms: int, semantics: int) -> np.ndarray:
    """Which samples a range selector keeps: ``(start, end]`` for 3.x, ``[start, end]`` for 2.x."""
    if semantics >= 3:
        return (timestamps_ms > start_ms) & (timestamps_ms <= end_ms)
    return (timestamps_ms >= start_ms) & (timestamps_ms <= end_ms)


def extrapolated_change_ms(
    timestamps_ms: np.ndarray,
    values: np.ndarray,
    range_start_ms: int,
    range_end_ms: int,
    *,
    is_counter: bool,
    is_rate: bool,
    semantics: int = 3,
) -> float | None:
    """Prometheus's ``extrapolatedRate`` over the samples of one window.

    Returns None where Prometheus drops the series (fewer than two samples). For a rate
    the result is per second of the window's length ``range_end - range_start``.
    """
    n = len(values)
    if n < 2:
        return None
    first_t, last_t = int(timestamps_ms[0]), int(timestamps_ms[-1])
    first_v, last_v = float(values[0]), float(values[-1])
    result = last_v - first_v
    if is_counter:
        # add the value before each reset, in sample order as Go does (order matters to the last bit)
        for i in np.flatnonzero(values[1:] < values[:-1]):
            result += float(values[i])
    duration_to_start = (first_t - range_start_ms) / 1000.0
    duration_to_end = (range_end_ms - last_t) / 1000.0
    sampled_interval = (last_t - first_t) / 1000.0
    average_interval = sampled_interval / (n - 1)
    threshold = average_interval * 1.1
    if semantics >= 3:
        if duration_to_start >= threshold:
            duration_to_start = average_interval / 2
        if is_counter:
            duration_to_zero = duration_to_start
            if result > 0 and first_v >= 0:
                duration_to_zero = sampled_interval * (first_v / result)
            if duration_to_zero < duration_to_start:
                duration_to_start = duration_to_zero
        if duration_to_end >= threshold:
            duration_to_end = average_interval / 2
        factor = (sampled_interval + duration_to_start + duration_to_end) / sampled_interval
        if is_rate:
            factor /= (range_end_ms - range_start_ms) / 1000.0
        return result * factor
    if is_counter and result > 0 and first_v >= 0:
        duration_to_zero = sampled_interval * (first_v / result)
        if duration_to_zero < duration_to_start:
            duration_to_start = duration_to_zero
    extrapolate_to = sampled_interval
    extrapolate_to += duration_to_start if duration_to_start < threshold else average_interval / 2
    extrapolate_to += duration_to_end if duration_to_end < threshold else average_interval / 2
    result = result * (extrapolate_to / sampled_interval)
    if is_rate:
        result = result / ((range_end_ms - range_start_ms) / 1000.0)
    return result


def instant_change(timestamps_ms: np.ndarray, values: np.ndarray, *, is_rate: bool) -> float | None:
    """``irate`` (is_rate) or ``idelta`` from the last two samples; None where dropped."""
    if len(values) < 2:
        return None
    last, previous = float(values[-1]), float(values[-2])
    if is_rate and last < previous:
        change = last
    else:
        change = last - previous
    interval_ms = int(timestamps_ms[-1]) - int(timestamps_ms[-2])
    if interval_ms == 0:
        return None
    if is_rate:
        change /= interval_ms / 1000.0
    return change


def count_resets(values: np.ndarray) -> int:
    """How many times a counter decreased (``resets``)."""
    return int(np.count_nonzero(values[1:] < values[:-1])) if len(values) > 1 else 0


def count_changes(values: np.ndarray) -> int:
    """How many times a value changed (``changes``); NaN to NaN is no change."""
    if len(values) < 2:
        return 0
    prev, cur = values[:-1], values[1:]
    differ = (cur != prev) & ~(np.isnan(cur) & np.isnan(prev))
    return int(np.count_nonzero(differ))


def _cut(
    timestamps: Sequence[float], values: Sequence[float], start: float, end: float, semantics: int
) -> tuple[np.ndarray, np.ndarray, int, int]:
    ts_ms = np.round(np.asarray(timestamps, dtype=np.float64) * 1000.0).astype(np.int64)
    vals = np.asarray(values, dtype=np.float64)
    start_ms, end_ms = int(round(start * 1000.0)), int(round(end * 1000.0))
    keep = window_mask(ts_ms, start_ms, end_ms, semantics)
    return ts_ms[keep], vals[keep], start_ms, end_ms


def counter_increase(
    timestamps: Sequence[float], values: Sequence[float], start: float, end: float, semantics: int = 3
) -> float:
    """``increase(x[end-start])`` evaluated at ``end`` (seconds); NaN where Prometheus has no value."""
    ts, vals, lo, hi = _cut(timestamps, values, start, end, semantics)
    out = extrapolated_change_ms(ts, vals, lo, hi, is_counter=True, is_rate=False, semantics=semantics)
    return math.nan if out is None else out


def counter_rate(
    timestamps: Sequence[float], values: Sequence[float], start: float, end: float, semantics: int = 3
) -> float:
    """``rate(x[end-start])`` evaluated at ``end`` (seconds); NaN where Prometheus has no value."""
    ts, vals, lo, hi = _cut(timestamps, values, start, end, semantics)
    out = extrapolated_change_ms(ts, vals, lo, hi, is_counter=True, is_rate=True, semantics=semantics)
    return math.nan if out is None else out


def gauge_delta(
    timestamps: Sequence[float], values: Sequence[float], start: float, end: float, semantics: int = 3
) -> float:
    """``delta(x[end-start])`` evaluated at ``end`` (seconds); NaN where Prometheus has no value."""
    ts, vals, lo, hi = _cut(timestamps, values, start, end, semantics)
    out = extrapolated_change_ms(ts, vals, lo, hi, is_counter=False, is_rate=False, semantics=semantics)
    return math.nan if out is None else out
