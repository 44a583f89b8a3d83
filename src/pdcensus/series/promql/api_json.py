"""Render a :class:`QueryResult` exactly as Prometheus's HTTP API does.

Values are strings formatted like Go's ``strconv.FormatFloat(v, 'f', -1, 64)``: the
shortest decimal that reads back to the same float, never with an exponent, and
``NaN``/``+Inf``/``-Inf`` spelled Go's way; numpy's positional formatter gives the same
digits. Timestamps are seconds with at most three decimals (integers when whole).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pdcensus.series.promql.values import QueryResult, ResultType


def format_value(value: float) -> str:
    """A sample value as Prometheus writes it in JSON."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return np.format_float_positional(np.float64(value), unique=True, trim="-")


def format_timestamp(timestamp_ms: int) -> int | float:
    """Milliseconds as the seconds number the API writes (``1435781451.781``)."""
    if timestamp_ms % 1000 == 0:
        return timestamp_ms // 1000
    return timestamp_ms / 1000.0


def to_api_json(result: QueryResult) -> dict[str, Any]:
    """``{"status": "success", "data": {"resultType": ..., "result": ...}}``."""
    kind = result.result_type
    payload: Any
    if kind is ResultType.SCALAR:
        only = result.series[0]
        payload = [format_timestamp(only.timestamps_ms[0]), format_value(only.values[0])]
    elif kind is ResultType.STRING:
        payload = [0, result.string_value or ""]
    elif kind is ResultType.VECTOR:
        payload = [
            {"metric": s.metric(), "value": [format_timestamp(s.timestamps_ms[0]), format_value(s.values[0])]}
            for s in result.series
        ]
    else:
        payload = [
            {
                "metric": s.metric(),
                "values": [[format_timestamp(t), format_value(v)] for t, v in zip(s.timestamps_ms, s.values)],
            }
            for s in result.series
        ]
    return {"status": "success", "data": {"resultType": kind.value, "result": payload}}
