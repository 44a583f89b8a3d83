"""The reader of Prometheus's test scripting language expands points as Go does."""

from __future__ import annotations

import math

import pytest

from pdcensus.errors import RecordingParseError
from pdcensus.series.durations import parse_duration_ms
from pdcensus.series.promql.testscript import (
    Clear,
    Eval,
    Load,
    PointKind,
    parse_points,
    parse_script,
    parse_series_line,
)


def _values(text: str) -> list[float | str]:
    return [p.value if p.kind is PointKind.VALUE else p.kind.value for p in parse_points(text)]


def test_expanding_syntax_yields_n_plus_one_points_with_cumulative_steps() -> None:
    assert _values("1+2x3") == [1.0, 3.0, 5.0, 7.0]
    assert _values("10-5x2") == [10.0, 5.0, 0.0]
    assert _values("0x10") == [0.0] * 11


def test_blanks_and_stale_markers_are_kept_as_their_own_kinds() -> None:
    assert _values("1 _ stale _x2 3") == [1.0, "omitted", "stale", "omitted", "omitted", 3.0]


def test_cumulative_addition_keeps_go_float_rounding() -> None:
    points = parse_points("0+0.1x3")
    assert points[3].value == 0.1 + 0.1 + 0.1
    assert points[3].value != 0.3


def test_native_histogram_points_are_recognised_with_their_repeat_count() -> None:
    points = parse_points("{{sum:2 count:2}}+{{sum:3 count:3}}x5 1")
    assert [p.kind for p in points] == [PointKind.HISTOGRAM] * 6 + [PointKind.VALUE]


def test_series_lines_carry_the_metric_name_as_a_label() -> None:
    spec = parse_series_line('http_requests{job="api", instance="0"}\t1 NaN -Inf')
    assert dict(spec.labels) == {"__name__": "http_requests", "job": "api", "instance": "0"}
    assert math.isnan(spec.points[1].value) and spec.points[2].value == -math.inf


def test_durations_combine_units() -> None:
    assert parse_duration_ms("10s53ms") == 10_053
    assert parse_duration_ms("1h30m") == 5_400_000
    assert parse_duration_ms("0") == 0


@pytest.mark.parametrize("text", ["", "1.5", "1h30", "2x", "30m1h", "1.5h", "1h1h", "5M", " 5m"])
def test_a_script_duration_follows_prometheus_grammar_strictly(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_a_bad_duration_in_a_script_names_the_line() -> None:
    with pytest.raises(RecordingParseError, match=r":1: .*not a valid duration"):
        parse_script("load 1h30\n  a 1\n", "bad.test")


def test_clear_is_one_line_and_comments_end_a_block() -> None:
    script = "load 1m\n  a 1\n\nclear\nload 1m\n  b 2\n\neval instant at 1m b\n  # no result expected\n"
    commands = parse_script(script)
    assert [type(c) for c in commands] == [Load, Clear, Load, Eval]
    last = commands[-1]
    assert isinstance(last, Eval) and last.expected == []


def test_eval_lines_read_range_queries_and_expectations() -> None:
    script = "eval range from 0 to 2m step 1m sum(a)\n  expect ordered\n  {} 1 _ 3\n"
    [cmd] = parse_script(script)
    assert isinstance(cmd, Eval)
    assert (cmd.is_range, cmd.start_ms, cmd.end_ms, cmd.step_ms, cmd.ordered) == (True, 0, 120_000, 60_000, True)
    assert [p.kind for p in cmd.expected[0].points] == [PointKind.VALUE, PointKind.OMITTED, PointKind.VALUE]


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("load 1m\n  a 1+x3\n", id="bad-point"),
        pytest.param("load soon\n  a 1\n", id="bad-interval"),
        pytest.param("evaluate instant at 1m a\n", id="unknown-command"),
        pytest.param("load 1m\n  a{b=\"1\" 1\n", id="unterminated-labels"),
    ],
)
def test_malformed_scripts_name_the_file_and_line(script: str) -> None:
    with pytest.raises(RecordingParseError, match=r"^bad\.test:1: "):
        parse_script(script, "bad.test")
