"""Lint reads a written query step with Prometheus's own duration grammar, and says so where Prometheus refuses it.

The cases are Prometheus's: ``TestParseDuration`` and ``TestParseBadDuration`` of
prometheus/common ``model/time_test.go`` (commit 06628cd, the version ``pdcensus.series.durations``
cites), and every query of Prometheus's own PromQL test scripts (``../shared/realdata/promql-tests``),
which Prometheus parses, so lint must find no bad duration in them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.lint.source.pinned import load_schema
from pdcensus.lint.files import lint_text
from pdcensus.lint.model import FileKind
from pdcensus.lint.promql import duration_seconds, query_hits
from pdcensus.series.durations import parse_duration_ms
from pdcensus.series.promql.testscript import Eval, parse_script

from shared_data import PROMQL_TESTS

SOURCE = Path(__file__).parents[1] / "fixtures" / "config_sources" / "struct_rows.cpp"
DAY = 86_400.0

# prometheus/common model/time_test.go TestParseDuration (06628cd): text -> seconds
PROMETHEUS_GOOD = [("0", 0.0), ("0w", 0.0), ("0s", 0.0), ("324ms", 0.324), ("3s", 3.0), ("5m", 300.0),
                   ("1h", 3600.0), ("4d", 4 * DAY), ("4d1h", 4 * DAY + 3600.0), ("14d", 14 * DAY),
                   ("3w", 21 * DAY), ("3w2d1h", 23 * DAY + 3600.0), ("10y", 3650 * DAY)]
# TestParseBadDuration, less "1": a bare number is seconds where Prometheus's HTTP API reads a step
PROMETHEUS_BAD = ["1y1m1d", "-1w", "1.5d"]


@pytest.mark.parametrize(("text", "seconds"), PROMETHEUS_GOOD)
def test_prometheus_s_own_durations_read_as_prometheus_reads_them(text: str, seconds: float) -> None:
    assert duration_seconds(text) == pytest.approx(seconds)
    assert parse_duration_ms(text) == round(seconds * 1000)


@pytest.mark.parametrize("text", [*PROMETHEUS_BAD, "2x", "1h30", "1.5h", "30m1h"])
def test_a_duration_prometheus_refuses_is_an_error_not_a_number(text: str) -> None:
    with pytest.raises(ValueError):
        duration_seconds(text)


def test_a_bare_number_is_no_script_duration_but_is_a_step_in_seconds() -> None:
    with pytest.raises(ValueError):
        parse_duration_ms("1")  # TestParseBadDuration's "1"
    assert duration_seconds("1") == 1.0 and duration_seconds("90") == 90.0


@pytest.mark.parametrize(
    ("line", "subject"),
    [
        pytest.param("`curl 'http://p:9090/api/v1/query_range?query=up&step=2x'`", "&step=2x", id="api-2x"),
        pytest.param("`max_over_time(radiance:x[1h:1h30])`", "[1h:1h30]", id="subquery-1h30"),
        pytest.param("`promtool query range --step 1.5h http://p radiance:x`", "--step 1.5h", id="cli-fraction"),
        pytest.param('{"step": "1y1m1d"}', '"step": "1y1m1d', id="json-out-of-order"),
    ],
)
def test_lint_reports_a_step_prometheus_refuses_as_a_finding(line: str, subject: str) -> None:
    findings = lint_text(line + "\n", "runbook.md", FileKind.MARKDOWN, load_schema(SOURCE))
    bad = [f for f in findings if f.rule == "bad-duration"]
    assert [(f.line, f.subject, f.severity.value) for f in bad] == [(1, subject, "error")]
    assert "query-step-over-30s" not in {f.rule for f in findings}  # not read as some number of seconds


def test_no_query_in_prometheus_s_own_test_scripts_has_a_bad_duration() -> None:
    scripts = sorted(PROMQL_TESTS.glob("v*/*.test"))
    evals = [c for p in scripts for c in parse_script(p.read_text(), str(p))
             if isinstance(c, Eval) and not c.expect_fail]
    hits = [(e.line, h.rule, h.subject) for e in evals for h in query_hits(e.expr, step_forms=False)]
    assert len(scripts) >= 10 and len(evals) > 500
    assert [h for h in hits if h[1] == "bad-duration"] == []
    # the subquery steps were read, not skipped: [5m:1m] is a 60 s step
    assert any(rule == "query-step-over-30s" and subject.endswith(":1m]") for _, rule, subject in hits)
