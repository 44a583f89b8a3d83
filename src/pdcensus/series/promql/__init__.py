"""PromQL-exact series math over raw samples (a subset of PromQL, evaluated as Prometheus does).

Public API::

    storage = storage_from_recording(recording)          # or Storage.from_series([...])
    result = instant_query(storage, 'rate(x_total[5m])', time=t, semantics=3)
    result = range_query(storage, expr, start, end, step, semantics=2)
    to_api_json(result)                                  # what /api/v1/query(_range) returns

Expressions outside the subset raise :class:`pdcensus.errors.UnsupportedQueryError`
naming the construct; invalid PromQL raises :class:`PromQLParseError` (a usage error);
queries Prometheus itself would refuse raise :class:`QueryEvaluationError`.
Counter helpers for the census live in :mod:`pdcensus.series.promql.counters` and
``histogram_quantile`` in :mod:`pdcensus.series.promql.histogram` (the quantile rule itself,
shared with the census, in :mod:`pdcensus.series.quantile`).
"""

from pdcensus.series.promql.api_json import format_value, to_api_json
from pdcensus.series.promql.counters import counter_increase, counter_rate, gauge_delta
from pdcensus.series.promql.evaluator import instant_query, range_query
from pdcensus.series.promql.functions import SUPPORTED_FUNCTIONS
from pdcensus.errors import PromQLParseError, QueryEvaluationError
from pdcensus.series.promql.storage import Storage, StoredSeries, storage_from_recording
from pdcensus.series.promql.values import QueryResult, ResultSeries, ResultType
from pdcensus.series.quantile import Bucket, bucket_quantile

__all__ = [
    "Bucket",
    "PromQLParseError",
    "QueryEvaluationError",
    "QueryResult",
    "ResultSeries",
    "ResultType",
    "SUPPORTED_FUNCTIONS",
    "Storage",
    "StoredSeries",
    "bucket_quantile",
    "counter_increase",
    "counter_rate",
    "format_value",
    "gauge_delta",
    "instant_query",
    "range_query",
    "storage_from_recording",
    "to_api_json",
]
