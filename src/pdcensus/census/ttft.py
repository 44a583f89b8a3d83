"""TTFT by prefill bucket: ``histogram_quantile`` over the bucket's summed increases.

The decode gauge only sees sequences already running; a request that arrives during a
prefill pays the same chunk steps before its first token and shows in no decode number.
So TTFT is bucketed by the same prefill series as decode (runbook, "Bucket, then
lag-test").

The quantile is :func:`pdcensus.series.quantile.quantile_of_bounds`, the rule PromQL's
``histogram_quantile`` applies (Prometheus's ``BucketQuantile``), taken over increases the
census aggregated itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pdcensus.census.model import TtftResult
from pdcensus.census.signals import Histogram
from pdcensus.series.quantile import quantile_of_bounds

if TYPE_CHECKING:
    from pdcensus.census.buckets import BucketAssignment


def summed_quantile(q: float, histogram: Histogram, rows: np.ndarray) -> float:
    """The q-quantile of the histogram's increases summed over the selected rows."""
    inc = histogram.increases[np.asarray(rows, dtype=bool)]
    agg = np.nansum(inc, axis=0) if inc.size else np.zeros(histogram.upper_bounds.size)
    return quantile_of_bounds(q, histogram.upper_bounds, agg)


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
