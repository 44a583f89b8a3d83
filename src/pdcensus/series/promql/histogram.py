"""``histogram_quantile`` over classic (``le``-bucketed) histograms, as Prometheus computes it.

The census reads TTFT quantiles from bucket increases, so the interpolation must be
Prometheus's own: buckets sorted by upper bound, duplicate bounds added together, counts
forced monotonic, linear interpolation inside the bucket that holds the rank, the lower
edge taken as 0 for the first bucket (unless its bound is not positive), and the highest
finite bound returned for a rank in the ``+Inf`` bucket. 3.x also snaps neighbouring
counts whose relative difference is under 1e-12 to the same value (float noise from
``rate`` over buckets); 2.x only forces monotonicity.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pdcensus.series.promql.values import METRIC_NAME, Labels, Sample

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
    return bucket_start + (bucket_end - bucket_start) * (rank / count)


def parse_upper_bound(text: str) -> float | None:
    """An ``le`` label value as Go's ParseFloat reads it; None if it is not a number."""
    if text != text.strip() or not text or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def histogram_quantile(q: float, vector: Sequence[Sample], semantics: int = 3) -> list[Sample]:
    """``histogram_quantile(q, vector)`` over the classic buckets in ``vector``.

    Buckets are grouped by their labels without ``le`` (the metric name included, so two
    names with the same other labels make two results); the result drops ``__name__``
    and ``le``. Series whose ``le`` is missing or not a number are ignored.
    """
    groups: dict[Labels, tuple[Labels, list[Bucket]]] = {}
    for sample in vector:
        le = ""
        for key, value in sample.labels:
            if key == "le":
                le = value
        bound = parse_upper_bound(le)
        if bound is None:
            continue
        signature = tuple(pair for pair in sample.labels if pair[0] != "le")
        if signature not in groups:
            out_labels = tuple(pair for pair in signature if pair[0] != METRIC_NAME)
            groups[signature] = (out_labels, [])
        groups[signature][1].append(Bucket(bound, sample.value))
    return [
        Sample(out_labels, bucket_quantile(q, buckets, semantics))
        for out_labels, buckets in groups.values()
        if buckets
    ]
