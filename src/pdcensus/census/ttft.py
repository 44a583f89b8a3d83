"""TTFT by prefill bucket: ``histogram_quantile`` over the bucket's summed increases.

The decode gauge only sees sequences already running; a request that arrives during a
prefill pays the same chunk steps before its first token and shows in no decode number.
So TTFT is bucketed by the same prefill series as decode (runbook, "Bucket, then
lag-test").

:func:`histogram_quantile` is Prometheus's classic-bucket interpolation, hand-written
here (a dozen lines) so that the census, which never does I/O and never evaluates
PromQL, can apply it to increases it aggregated itself: cumulative counts made
monotone, the rank located, linear interpolation inside the bucket, the lower bound 0
for the first bucket, and the second-highest bound when the rank falls in ``+Inf``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pdcensus.census.model import TtftResult
from pdcensus.census.signals import Histogram

if TYPE_CHECKING:  # buckets.py imports histogram_quantile from here
    from pdcensus.census.buckets import BucketAssignment


def histogram_quantile(q: float, upper_bounds: np.ndarray, cumulative_counts: np.ndarray) -> float:
    """The q-quantile of a classic histogram, exactly as Prometheus interpolates it."""
    if np.isnan(q):
        return float("nan")
    if q < 0:
        return float("-inf")
    if q > 1:
        return float("inf")
    bounds = np.asarray(upper_bounds, dtype=np.float64)
    counts = np.nan_to_num(np.asarray(cumulative_counts, dtype=np.float64))
    if bounds.size < 2 or not np.isinf(bounds[-1]) or bounds[-1] < 0:
        return float("nan")
    order = np.argsort(bounds, kind="stable")
    bounds, counts = bounds[order], np.maximum.accumulate(counts[order])
    total = float(counts[-1])
    if total <= 0:
        return float("nan")
    rank = q * total
    b = int(np.searchsorted(counts, rank, side="left"))
    if b >= bounds.size - 1:
        return float(bounds[-2])
    if b == 0 and bounds[0] <= 0:
        return float(bounds[0])
    start, end, count = 0.0, float(bounds[b]), float(counts[b])
    if b > 0:
        start = float(bounds[b - 1])
        count -= float(counts[b - 1])
        rank -= float(counts[b - 1])
    if count <= 0:
        return end
    return start + (end - start) * (rank / count)


def summed_quantile(q: float, histogram: Histogram, rows: np.ndarray) -> float:
    """The q-quantile of the histogram's increases summed over the selected rows."""
    inc = histogram.increases[np.asarray(rows, dtype=bool)]
    agg = np.nansum(inc, axis=0) if inc.size else np.zeros(histogram.upper_bounds.size)
    return histogram_quantile(q, histogram.upper_bounds, agg)


def ttft_summary(histogram: Histogram | None, assignment: BucketAssignment, profile_name: str) -> TtftResult:
    """TTFT p90 in the idle bucket and in the busiest bucket (detail lives in the bucket rows)."""
    if histogram is None:
        return TtftResult(False, f"no TTFT histogram in this shape (profile {profile_name}); "
                                 "TTFT exists only under the vllm: prefix")
    idle = summed_quantile(0.9, histogram, assignment.index == 0)
    top = int(assignment.index.max()) if assignment.index.size else 0
    busiest = summed_quantile(0.9, histogram, assignment.index == top) if top > 0 else float("nan")
    return TtftResult(True, "histogram increases summed per bucket, then histogram_quantile",
                      histogram.family, idle, busiest)
