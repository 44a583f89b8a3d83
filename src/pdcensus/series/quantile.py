"""The classic-histogram quantile, as Prometheus computes it: the one implementation in pdcensus.

PromQL's ``histogram_quantile`` (:mod:`pdcensus.series.promql.histogram`) and the census's
TTFT by prefill bucket (which sums bucket increases itself, then takes the quantile) both
call :func:`bucket_quantile`. It follows Prometheus's ``BucketQuantile``
(``promql/quantile.go``, v3.x): buckets sorted by upper bound, duplicate bounds added
together (``coalesceBuckets``), counts forced monotonic, linear interpolation inside the
bucket that holds the rank, the lower edge taken as 0 for the first bucket (unless its bound
is not positive), and the highest finite bound returned for a rank in the ``+Inf`` bucket.
3.x also snaps neighbouring counts whose relative difference is under 1e-12 to the same
value (float noise from ``rate`` over buckets); 2.x only forces monotonicity. Division
follows Go's floats (0/0 is NaN), so ``q = 0`` over an empty first bucket is NaN, not an
exception. This module is a leaf: it loads neither the PromQL engine nor numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

SMALL_DELTA_TOLERANCE = 1e-12
_MIN_NORMAL = 2.2250738585072014e-308


@dataclass
class Bucket:
    """One classic bucket: its upper bound (``le``) and its cumulative count."""

    upper_bound: float
    count: float


def almost_equal(a: float, b: float, epsilon: float) -> bool:
    """Prometheus's relative float comparison (NaN equals NaN)."""
    if math.isnan(a) and math.isnan(b):
        return True
    if a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < epsilon * _MIN_NORMAL
    return diff / min(abs_sum, 1.7976931348623157e308) < epsilon


def _coalesce(buckets: list[Bucket]) -> list[Bucket]:
    out: list[Bucket] = []
    for bucket in buckets:
        if out and out[-1].upper_bound == bucket.upper_bound:
            out[-1].count += bucket.count
        else:
            out.append(Bucket(bucket.upper_bound, bucket.count))
    return out


def _ensure_monotonic_3x(buckets: list[Bucket]) -> None:
    prev = buckets[0].count
    for bucket in buckets[1:]:
        curr = bucket.count
        if curr == prev:
            continue
        if almost_equal(prev, curr, SMALL_DELTA_TOLERANCE):
            bucket.count = prev
            continue
        if curr < prev:
            bucket.count = prev
            continue
        prev = curr


def _ensure_monotonic_2x(buckets: list[Bucket]) -> None:
    highest = -math.inf
    for bucket in buckets:
        if bucket.count > highest:
            highest = bucket.count
        elif bucket.count < highest:
            bucket.count = highest


def _search(n: int, predicate: Callable[[int], bool]) -> int:
    """Go's sort.Search: the first index in [0, n) where predicate holds (binary search)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if not predicate(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def bucket_quantile(q: float, buckets: Sequence[Bucket], semantics: int = 3) -> float:
    """The ``q``-quantile of one classic histogram given as ``(le, cumulative count)`` buckets."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    work = sorted((Bucket(b.upper_bound, b.count) for b in buckets), key=lambda b: b.upper_bound)
    if not work or not (math.isinf(work[-1].upper_bound) and work[-1].upper_bound > 0):
        return math.nan
    work = _coalesce(work)
    if semantics >= 3:
        _ensure_monotonic_3x(work)
    else:
        _ensure_monotonic_2x(work)
    if len(work) < 2:
        return math.nan
    observations = work[-1].count
    if observations == 0:
        return math.nan
    rank = q * observations
    b = _search(len(work) - 1, lambda i: work[i].count >= rank)
    if b == len(work) - 1:
        return work[-2].upper_bound
    if b == 0 and work[0].upper_bound <= 0:
        return work[0].upper_bound
    bucket_start = 0.0
    bucket_end = work[b].upper_bound
    count = work[b].count
    if b > 0:
        bucket_start = work[b - 1].upper_bound
        count -= work[b - 1].count
        rank -= work[b - 1].count
    return bucket_start + (bucket_end - bucket_start) * _go_divide(rank, count)


def _go_divide(a: float, b: float) -> float:
    """``a / b`` with Go's float rules: x/0 is ±Inf, 0/0 is NaN (q = 0 over an empty first bucket gives NaN)."""
    if b != 0:
        return a / b
    return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)


def quantile_of_bounds(q: float, upper_bounds: Iterable[float], cumulative_counts: Iterable[float],
                       semantics: int = 3) -> float:
    """:func:`bucket_quantile` over parallel ``le`` bounds and cumulative counts (e.g. numpy arrays).

    The census sums a histogram's bucket increases over the intervals of a prefill bucket
    itself and takes the quantile of the sum with this, the rule ``histogram_quantile``
    applies in PromQL.
    """
    buckets = [Bucket(float(b), float(c)) for b, c in zip(upper_bounds, cumulative_counts, strict=True)]
    return bucket_quantile(q, buckets, semantics)


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
