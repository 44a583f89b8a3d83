"""Queries over raw samples answer what Prometheus's HTTP API answers."""

from __future__ import annotations

import math

import pytest

from pdcensus.errors import UnsupportedQueryError, UsageError
from pdcensus.series.model import RecordingBuilder, SeriesKey
from pdcensus.series.promql import (
    PromQLParseError,
    QueryEvaluationError,
    ResultType,
    Storage,
    format_value,
    instant_query,
    range_query,
    storage_from_recording,
    to_api_json,
)

T0 = 1_700_000_000.0


def _storage() -> Storage:
    ts = [T0 + 15 * i for i in range(9)]
    return Storage.from_series([
        ({"__name__": "req_total", "job": "a", "code": "200"}, ts, [0, 10, 20, 30, 40, 50, 60, 70, 80]),
        ({"__name__": "req_total", "job": "a", "code": "500"}, ts, [0, 1, 2, 3, 4, 5, 6, 7, 8]),
        ({"__name__": "req_total", "job": "b", "code": "200"}, ts, [5, 6, 7, 8, 9, 10, 11, 12, 13]),
    ])


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(1.0, "1", id="integral"),
        pytest.param(0.1, "0.1", id="shortest"),
        pytest.param(1e21, "1000000000000000000000", id="no-exponent-large"),
        pytest.param(1.5e-7, "0.00000015", id="no-exponent-small"),
        pytest.param(math.nan, "NaN", id="nan"),
        pytest.param(math.inf, "+Inf", id="plus-inf"),
        pytest.param(-math.inf, "-Inf", id="minus-inf"),
    ],
)
def test_values_are_formatted_like_go_formatfloat(value: float, text: str) -> None:
    assert format_value(value) == text


def test_selector_keeps_the_metric_name_and_functions_drop_it() -> None:
    storage = _storage()
    at = T0 + 120
    selected = to_api_json(instant_query(storage, 'req_total{code="500"}', at))
    assert selected["data"]["result"] == [
        {"metric": {"__name__": "req_total", "job": "a", "code": "500"}, "value": [int(at), "8"]}
    ]
    rated = instant_query(storage, 'rate(req_total{code="500"}[1m])', at)
    assert rated.series[0].metric() == {"job": "a", "code": "500"}


def test_sum_by_groups_and_divides_per_group() -> None:
    result = instant_query(_storage(), "sum by (job) (req_total) / 2", T0 + 120)
    assert {s.metric()["job"]: s.values[0] for s in result.series} == {"a": 44.0, "b": 6.5}


def test_group_left_copies_labels_from_the_one_side() -> None:
    storage = Storage.from_series([
        ({"__name__": "errors", "job": "a", "code": "500"}, [T0], [4]),
        ({"__name__": "info", "job": "a", "team": "x"}, [T0], [1]),
    ])
    result = instant_query(storage, "errors * on(job) group_left(team) info", T0)
    assert result.series[0].metric() == {"job": "a", "code": "500", "team": "x"}


def test_range_query_has_one_point_per_step_and_series_sorted_by_labels() -> None:
    result = range_query(_storage(), "req_total", T0, T0 + 120, 30)
    assert result.result_type is ResultType.MATRIX
    # labels sort by name (code before job), then by value
    assert [s.metric()["code"] + s.metric()["job"] for s in result.series] == ["200a", "200b", "500a"]
    assert len(result.series[0].timestamps_ms) == 5


def test_lookback_is_left_open_in_3x_and_closed_in_2x_and_configurable() -> None:
    storage = Storage.from_series([({"__name__": "g"}, [T0], [1.0])])
    assert len(instant_query(storage, "g", T0 + 300).series) == 0
    assert len(instant_query(storage, "g", T0 + 300, semantics=2).series) == 1
    assert len(instant_query(storage, "g", T0 + 300, lookback_seconds=301).series) == 1


def test_offset_and_at_move_the_evaluation_time() -> None:
    storage = _storage()
    shifted = instant_query(storage, 'req_total{code="500"} offset 60s', T0 + 120)
    pinned = instant_query(storage, f'req_total{{code="500"}} @ {T0 + 60}', T0 + 120)
    assert shifted.series[0].values == pinned.series[0].values == (4.0,)


def test_missed_scrapes_in_a_recording_are_gaps_not_nans() -> None:
    builder = RecordingBuilder()
    key = SeriesKey("c_total", (("instance", "i"), ("job", "j")))
    other = SeriesKey("up", (("instance", "i"), ("job", "j")))
    for i in range(6):
        builder.add(other, T0 + 15 * i, 1.0)
        if i != 3:
            builder.add(key, T0 + 15 * i, 10.0 * i)
    storage = storage_from_recording(builder.build())
    result = instant_query(storage, "increase(c_total[90s])", T0 + 75)
    # five samples (0..75 s, the one at 45 s missing): 0 -> 50; the first sample is 0, so
    # the zero-point clamp stops extrapolation towards the window's start
    assert result.series[0].values[0] == pytest.approx(50.0)
    assert instant_query(storage, "count_over_time(c_total[90s])", T0 + 75).series[0].values == (5.0,)


def test_histogram_quantile_interpolates_inside_the_bucket_of_the_rank() -> None:
    buckets = {"0.1": 10, "0.5": 30, "+Inf": 40}
    storage = Storage.from_series(
        [({"__name__": "lat_bucket", "le": le}, [T0], [n]) for le, n in buckets.items()]
    )
    result = instant_query(storage, "histogram_quantile(0.5, lat_bucket)", T0)
    assert result.series[0].labels == ()
    assert result.series[0].values[0] == pytest.approx(0.1 + 0.4 * (20 - 10) / 20)


@pytest.mark.parametrize(
    ("expr", "named"),
    [
        pytest.param("predict_linear(x[5m], 60)", "predict_linear", id="function"),
        pytest.param("rate(x[5m:1m])", "subquery", id="subquery"),
        pytest.param("count_values(\"v\", x)", "count_values", id="aggregation"),
        pytest.param("holt_winters(x[5m], 0.1, 0.1)", "holt_winters", id="removed-function"),
    ],
)
def test_unsupported_constructs_are_refused_by_name(expr: str, named: str) -> None:
    with pytest.raises(UnsupportedQueryError, match=named) as caught:
        instant_query(_storage(), expr, T0)
    assert "supported:" in str(caught.value)


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        pytest.param("sum(", PromQLParseError, id="syntax"),
        pytest.param("-{__name__=~\"req_total|twin_total\"}", QueryEvaluationError, id="duplicate-series"),
        pytest.param("req_total + on(job) req_total", QueryEvaluationError, id="many-to-many"),
    ],
)
def test_invalid_queries_raise_census_errors(expr: str, error: type[Exception]) -> None:
    storage = _storage()
    storage.put(Storage.from_series([({"__name__": "twin_total", "job": "a", "code": "200"}, [T0], [1])])
                .all_series()[0])
    with pytest.raises(error):
        instant_query(storage, expr, T0 + 60)


def test_range_queries_refuse_range_vector_expressions() -> None:
    with pytest.raises(UsageError, match="range vector"):
        range_query(_storage(), "req_total[1m]", T0, T0 + 60, 15)


def test_scalar_and_string_results_have_their_api_shapes() -> None:
    assert to_api_json(instant_query(_storage(), "1 / 0", T0))["data"] == {
        "resultType": "scalar", "result": [int(T0), "+Inf"]}
    assert to_api_json(instant_query(_storage(), '"hi"', T0))["data"]["resultType"] == "string"
