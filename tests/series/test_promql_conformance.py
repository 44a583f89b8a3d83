"""Prometheus's own PromQL test scripts are the referee: no case may come out wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.series.promql import conformance
from pdcensus.series.promql.conformance import Verdict, run_directory, run_script, semantics_for, tally
from pdcensus.series.promql.storage import Storage
from pdcensus.series.promql.values import QueryResult, ResultSeries, ResultType
from shared_data import PROMQL_TESTS

FIXTURES = PROMQL_TESTS

# Cases we know we answer differently, by "file:line" -> reason. Kept empty on purpose:
# a case listed here is reported as failed by the runner, never counted as passed.
KNOWN_FAILURES: dict[str, str] = {}


@pytest.mark.parametrize(("version", "semantics"), [("v3.9", 3), ("v2.42", 2)])
def test_prometheus_test_scripts_have_no_failing_case(version: str, semantics: int) -> None:
    results = run_directory(FIXTURES / version, semantics)
    failures = [
        f"{Path(r.path).name}:{r.line}: {r.expr} -- {r.message}"
        for r in results
        if r.verdict is Verdict.FAILED and f"{Path(r.path).name}:{r.line}" not in KNOWN_FAILURES
    ]
    assert failures == []
    counts = tally(results)
    assert counts[Verdict.PASSED] > counts[Verdict.UNSUPPORTED]


def test_semantics_are_inferred_from_the_directory_name() -> None:
    assert semantics_for(FIXTURES / "v2.42") == 2
    assert semantics_for(FIXTURES / "v3.9") == 3


def test_a_wrong_expectation_is_reported_as_failed_not_passed() -> None:
    script = "load 1m\n  metric 1 2 3\n\neval instant at 2m metric\n  metric 4\n"
    [result] = run_script(script, "wrong.test", 3)
    assert result.verdict is Verdict.FAILED
    assert "expected 4.0, got 3.0" in result.message


def test_an_expected_failure_passes_only_when_the_query_is_refused() -> None:
    script = (
        "load 1m\n  a{x=\"1\"} 1\n  b{x=\"1\"} 2\n\n"
        "eval instant at 1m -{__name__=~\"a|b\"}\n  expect fail\n\n"
        "eval instant at 1m -a\n  expect fail\n"
    )
    refused, answered = run_script(script, "fail.test", 3)
    assert refused.verdict is Verdict.PASSED
    assert answered.verdict is Verdict.FAILED


def test_native_histogram_data_makes_a_case_unsupported() -> None:
    script = "load 1m\n  h {{schema:0 sum:1 count:1}}x3\n\neval instant at 1m h\n  h 1\n"
    [result] = run_script(script, "nh.test", 3)
    assert result.verdict is Verdict.UNSUPPORTED


def test_a_range_mode_answer_with_other_series_is_reported_with_their_labels(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Fault injection: range mode disagrees with instant mode, naming two other series.
    def other_series(storage: Storage, expr: str, start: float, end: float, step: float,
                     semantics: int) -> QueryResult:
        at_ms = int(start * 1000) + 60_000
        return QueryResult(ResultType.MATRIX, tuple(
            ResultSeries((("__name__", "metric"), ("x", x)), (at_ms,), (1.0,)) for x in ("b", "a")))

    monkeypatch.setattr(conformance, "range_query", other_series)
    script = "load 1m\n  metric 1 2 3\n\neval instant at 2m metric\n  metric 3\n"
    [result] = run_script(script, "range-mode.test", 3)
    assert result.verdict is Verdict.FAILED
    assert "range mode returned other series at 120000ms: [{'__name__': 'metric', 'x': 'a'}, " in result.message
