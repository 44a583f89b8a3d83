"""PromQL functions in our exact subset: range-vector functions and per-element functions.

Range-vector functions (``rate``, ``increase``, ``*_over_time``, ...) receive one
series' window (samples already cut and stale markers dropped) and return a value or
None (the series is dropped, e.g. ``rate`` over one sample). Element-wise functions map
a vector's values; they use numpy so that Go's IEEE behaviour holds (``ln(0)`` is
``-Inf``, ``sqrt(-1)`` is NaN) where Python's ``math`` would raise. Every function here
drops ``__name__`` except those in :data:`KEEPS_METRIC_NAME`, as Prometheus does.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

import pdcensus.series.promql.counters as counters
from pdcensus.series.promql.aggregation import kahan_sum_inc, quantile


@dataclass(frozen=True)
class Window:
    """One series' samples inside a range selector's window, and the window itself."""

    timestamps_ms: np.ndarray
    values: np.ndarray
    start_ms: int
    end_ms: int
    semantics: int


RangeFunction = Callable[[Window, float], "float | None"]


def _rate(w: Window, _: float) -> float | None:
    return counters.extrapolated_change_ms(w.timestamps_ms, w.values, w.start_ms, w.end_ms,
                                           is_counter=True, is_rate=True, semantics=w.semantics)


def _increase(w: Window, _: float) -> float | None:
    return counters.extrapolated_change_ms(w.timestamps_ms, w.values, w.start_ms, w.end_ms,
                                           is_counter=True, is_rate=False, semantics=w.semantics)


def _delta(w: Window, _: float) -> float | None:
    return counters.extrapolated_change_ms(w.timestamps_ms, w.values, w.start_ms, w.end_ms,
                                           is_counter=False, is_rate=False, semantics=w.semantics)


def _sum_over_time(w: Window, _: float) -> float | None:
    total, compensation = 0.0, 0.0
    for value in w.values:
        total, compensation = kahan_sum_inc(float(value), total, compensation)
    if math.isinf(total):
        return total
    return total + compensation


def _avg_over_time(w: Window, _: float) -> float | None:
    if w.semantics < 3:
        return _incremental_mean(w.values)
    total, compensation, count = 0.0, 0.0, 0
    for value in w.values:
        count += 1
        new_total, new_c = kahan_sum_inc(float(value), total, compensation)
        if count == 1 or not math.isinf(new_total):
            total, compensation = new_total, new_c
            continue
        return _incremental_mean(w.values)
    return (total + compensation) / count


def _incremental_mean(values: np.ndarray) -> float:
    mean, compensation, count = 0.0, 0.0, 0.0
    for raw in values:
        value = float(raw)
        count += 1
        if math.isinf(mean):
            if math.isinf(value) and (mean > 0) == (value > 0):
                continue
            if not math.isinf(value) and not math.isnan(value):
                continue
        mean, compensation = kahan_sum_inc(value / count - mean / count, mean, compensation)
    if math.isinf(mean):
        return mean
    return mean + compensation


def _min_over_time(w: Window, _: float) -> float | None:
    low = float(w.values[0])
    for value in w.values:
        if value < low or math.isnan(low):
            low = float(value)
    return low


def _max_over_time(w: Window, _: float) -> float | None:
    high = float(w.values[0])
    for value in w.values:
        if value > high or math.isnan(high):
            high = float(value)
    return high


def _stdvar_over_time(w: Window, _: float) -> float | None:
    count, mean, acc = 0.0, 0.0, 0.0
    for raw in w.values:
        value = float(raw)
        count += 1
        delta = value - mean
        mean += delta / count
        acc += delta * (value - mean)
    return acc / count


def _stddev_over_time(w: Window, arg: float) -> float | None:
    var = _stdvar_over_time(w, arg)
    return None if var is None else math.sqrt(var)


RANGE_FUNCTIONS: dict[str, RangeFunction] = {
    "rate": _rate,
    "increase": _increase,
    "delta": _delta,
    "irate": lambda w, _: counters.instant_change(w.timestamps_ms, w.values, is_rate=True),
    "idelta": lambda w, _: counters.instant_change(w.timestamps_ms, w.values, is_rate=False),
    "resets": lambda w, _: float(counters.count_resets(w.values)),
    "changes": lambda w, _: float(counters.count_changes(w.values)),
    "sum_over_time": _sum_over_time,
    "avg_over_time": _avg_over_time,
    "min_over_time": _min_over_time,
    "max_over_time": _max_over_time,
    "count_over_time": lambda w, _: float(len(w.values)),
    "last_over_time": lambda w, _: float(w.values[-1]),
    "first_over_time": lambda w, _: float(w.values[0]),
    "present_over_time": lambda w, _: 1.0,
    "ts_of_last_over_time": lambda w, _: int(w.timestamps_ms[-1]) / 1000.0,
    "ts_of_first_over_time": lambda w, _: int(w.timestamps_ms[0]) / 1000.0,
    "stddev_over_time": _stddev_over_time,
    "stdvar_over_time": _stdvar_over_time,
    "quantile_over_time": lambda w, q: quantile(q, [float(v) for v in w.values]),
}

# Range functions whose first argument is a scalar parameter, not the range vector.
RANGE_FUNCTIONS_WITH_PARAMETER = frozenset({"quantile_over_time"})

KEEPS_METRIC_NAME = frozenset({"last_over_time", "first_over_time", "sort", "sort_desc",
                               "label_replace", "label_join"})


def _ufunc(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[float], float]:
    def apply(value: float) -> float:
        with np.errstate(all="ignore"):
            return float(fn(np.asarray(value, dtype=np.float64)))

    return apply


def _sgn(value: float) -> float:
    if math.isnan(value):
        return value
    return 1.0 if value > 0 else (-1.0 if value < 0 else 0.0)


ELEMENT_FUNCTIONS: dict[str, Callable[[float], float]] = {
    "abs": _ufunc(np.abs),
    "ceil": _ufunc(np.ceil),
    "floor": _ufunc(np.floor),
    "exp": _ufunc(np.exp),
    "sqrt": _ufunc(np.sqrt),
    "ln": _ufunc(np.log),
    "log2": _ufunc(np.log2),
    "log10": _ufunc(np.log10),
    "sgn": _sgn,
    "sin": _ufunc(np.sin),
    "cos": _ufunc(np.cos),
    "tan": _ufunc(np.tan),
    "asin": _ufunc(np.arcsin),
    "acos": _ufunc(np.arccos),
    "atan": _ufunc(np.arctan),
    "sinh": _ufunc(np.sinh),
    "cosh": _ufunc(np.cosh),
    "tanh": _ufunc(np.tanh),
    "asinh": _ufunc(np.arcsinh),
    "acosh": _ufunc(np.arccosh),
    "atanh": _ufunc(np.arctanh),
    "deg": lambda v: v * 180 / math.pi,
    "rad": lambda v: v * math.pi / 180,
}


def _date_part(part: str) -> Callable[[float], float]:
    def apply(value: float) -> float:
        if math.isnan(value) or math.isinf(value):
            return math.nan
        when = datetime.fromtimestamp(int(value), tz=timezone.utc)
        if part == "minute":
            return float(when.minute)
        if part == "hour":
            return float(when.hour)
        if part == "day_of_month":
            return float(when.day)
        if part == "day_of_week":
            return float((when.weekday() + 1) % 7)
        if part == "day_of_year":
            return float(when.timetuple().tm_yday)
        if part == "month":
            return float(when.month)
        if part == "year":
            return float(when.year)
        return float(calendar.monthrange(when.year, when.month)[1])

    return apply


DATE_FUNCTIONS: dict[str, Callable[[float], float]] = {
    name: _date_part(name)
    for name in ("minute", "hour", "day_of_month", "day_of_week", "day_of_year", "days_in_month",
                 "month", "year")
}


def go_min(a: float, b: float) -> float:
    """Go's math.Min: NaN wins."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a < b else b


def go_max(a: float, b: float) -> float:
    """Go's math.Max: NaN wins."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return a if a > b else b


def round_to_nearest(value: float, to_nearest: float) -> float:
    """``round(v, to_nearest)``: half rounds up, as Prometheus's floor(v/n + 0.5) * n."""
    with np.errstate(all="ignore"):
        inverse = np.float64(1.0) / np.float64(to_nearest)
        return float(np.floor(np.float64(value) * inverse + 0.5) / inverse)


OTHER_FUNCTIONS = frozenset({
    "histogram_quantile", "clamp", "clamp_min", "clamp_max", "round", "scalar", "vector", "time",
    "timestamp", "sort", "sort_desc", "label_replace", "label_join",
})

SUPPORTED_FUNCTIONS = frozenset(RANGE_FUNCTIONS) | frozenset(ELEMENT_FUNCTIONS) | frozenset(
    DATE_FUNCTIONS) | OTHER_FUNCTIONS
