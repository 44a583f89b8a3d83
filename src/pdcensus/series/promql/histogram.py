"""PromQL's ``histogram_quantile`` over classic (``le``-bucketed) histograms: grouping and ``le`` parsing.

The quantile of one histogram is :func:`pdcensus.series.quantile.bucket_quantile`, the rule
the census's TTFT quantiles use too; this module groups a vector's bucket series into
histograms the way Prometheus does and reads their ``le`` labels.
"""

from __future__ import annotations

from collections.abc import Sequence

from pdcensus.series.promql.values import METRIC_NAME, Labels, Sample
from pdcensus.series.quantile import Bucket, bucket_quantile


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
