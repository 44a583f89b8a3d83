"""Runbook lint: each mistake found at its line, none on a correct runbook, the seed runbook clean."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from pdcensus.lint.source.flags import FlagSchema
from pdcensus.lint.source.pinned import load_schema
from pdcensus.lint.files import lint_paths
from pdcensus.lint.files import lint_text as lint_file_text
from pdcensus.lint.model import FileKind, Finding, LintReport
from pdcensus.lint.promql import duration_seconds
from pdcensus.sources.openmetrics_writer import write_openmetrics

from tests.advice.synthetic import step_time_sharing

DATA = Path(__file__).parent / "data"
SOURCES = Path(__file__).parent.parent / "fixtures" / "config_sources"
SOURCE = SOURCES / "struct_rows.cpp"
SEED = Path(__file__).parents[3] / "shared" / "seed" / "000_0a0eb1241028b5a6.txt"


def lint_file(runbook: str, source: str, metrics: str | None = None) -> LintReport:
    return lint_paths([runbook], source, metrics=metrics)


def lint_text(text: str, schema: FlagSchema) -> list[Finding]:
    return lint_file_text(text, "runbook.md", FileKind.MARKDOWN, schema)


def _by_rule(findings: list) -> dict[str, list]:  # type: ignore[type-arg]
    out: dict[str, list] = {}  # type: ignore[type-arg]
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_each_mistake_in_the_bad_runbook_is_found_at_its_line() -> None:
    report = lint_file(str(DATA / "bad_runbook.md"), str(SOURCE))
    got = {(f.rule, f.line, f.subject) for f in report.findings}
    assert ("unknown-enum-value", 8, "--checkpoint-policy keep_all") in got
    assert ("unknown-flag", 9, "--prefill-interleaving") in got
    assert ("unknown-enum-value", 12, "--checkpoint-policy tip_only") in got  # from the env line
    assert ("unknown-enum-value", 13, "--checkpoint-policy keep-everything") in got  # prose member list
    assert ("latency-under-radiance", 15, "radiance:time_to_first_token_seconds_bucket") in got
    rules = _by_rule(list(report.findings))
    assert [f.line for f in rules["rate-over-instant-depth"]] == [17]
    assert [f.line for f in rules["diluted-mean-step"]] == [19]
    assert [(f.line, f.subject) for f in rules["query-step-over-30s"]] == [(24, "&step=120s")]
    assert all(f.severity.value == "error" for f in report.findings)


def test_an_unknown_enum_value_lists_the_validators_members() -> None:
    report = lint_file(str(DATA / "bad_runbook.md"), str(SOURCE))
    finding = next(f for f in report.findings if f.subject == "--checkpoint-policy keep_all")
    assert "geometric-backoff, tip-only, keep-all" in finding.message
    assert "validator line" in finding.message and "config_parse" in finding.message


def test_an_unknown_flag_suggests_the_closest_real_one() -> None:
    report = lint_file(str(DATA / "bad_runbook.md"), str(SOURCE))
    finding = next(f for f in report.findings if f.rule == "unknown-flag")
    assert "did you mean --prefill-interleave" in finding.message


@pytest.mark.parametrize("source", sorted(p.name for p in SOURCES.iterdir()))
def test_the_correct_runbook_has_no_finding_against_any_layout_of_the_source(source: str) -> None:
    text = (DATA / "good_runbook.md").read_text()
    schema = load_schema(SOURCES / source)
    findings = [f for f in lint_text(text, schema) if f.subject != "--model"]
    assert findings == []


def test_the_census_runbook_itself_passes_lint() -> None:
    report = lint_file(str(DATA / "census_runbook.md"), str(SOURCE))
    assert list(report.findings) == []


def test_a_serve_script_is_checked_as_shell_and_other_tools_flags_are_left_alone() -> None:
    report = lint_file(str(DATA / "serve_arm.sh"), str(SOURCE))
    got = {(f.rule, f.line, f.subject) for f in report.findings}
    assert ("unknown-enum-value", 6, "--checkpoint-policy tiponly") in got
    assert ("unknown-enum-value", 7, "--busy-prefill-chunk fast") in got
    assert ("non-integer-value", 9, "--max-num-seqs auto") in got  # boot refuses it: an error
    assert not any("--silent" in f.subject or "--max-time" in f.subject for f in report.findings)
    assert len(report.findings) == 3 and all(f.severity.value == "error" for f in report.findings)


def test_metric_names_are_checked_against_the_builds_own_metric_set(tmp_path: Path) -> None:
    new = tmp_path / "new.om"
    old = tmp_path / "old.om"
    write_openmetrics(step_time_sharing(2, duration_seconds=600), new)
    write_openmetrics(step_time_sharing(2, build="1.0.13", duration_seconds=600), old)
    runbook = tmp_path / "rb.md"
    runbook.write_text("Held: `increase(radiance:engine_steps_held_total[10m])`\n"
                       "Typo: `increase(radiance:engine_steps_held_totl[10m])`\n"
                       "TTFT: `vllm:time_to_first_token_seconds_bucket`\n")
    on_new = lint_file(str(runbook), str(SOURCE), str(new))
    on_old = lint_file(str(runbook), str(SOURCE), str(old))
    assert [(f.line, f.subject) for f in on_new.findings] == [(2, "radiance:engine_steps_held_totl")]
    assert {(f.line, f.subject) for f in on_old.findings} == {
        (1, "radiance:engine_steps_held_total"), (2, "radiance:engine_steps_held_totl")}
    assert on_new.metrics_checked


@pytest.mark.parametrize(
    ("text", "seconds"),
    [pytest.param("2m", 120.0, id="minutes"), pytest.param("1m30s", 90.0, id="compound"),
     pytest.param("45", 45.0, id="plain-seconds"), pytest.param("500ms", 0.5, id="milliseconds")],
)
def test_durations_read_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize(
    ("line", "flagged"),
    [
        pytest.param("`max_over_time(x[1h:2m])`", True, id="subquery-resolution"),
        pytest.param("`promtool query range --step 60s http://p radiance:x`", True, id="cli-step"),
        pytest.param('{"step": "1m"}', True, id="json-step"),
        pytest.param("`max_over_time(x[1h:15s])`", False, id="short-subquery"),
        pytest.param("a 15 s scrape against a 120 s step samples one in eight", False, id="prose"),
    ],
)
def test_a_query_step_over_30_seconds_is_found_in_its_written_forms(line: str, flagged: bool) -> None:
    schema = load_schema(SOURCE)
    rules = [f.rule for f in lint_text(line + "\n", schema)]
    assert ("query-step-over-30s" in rules) is flagged


def test_the_phase_ratio_is_not_mistaken_for_the_diluted_mean() -> None:
    schema = load_schema(SOURCE)
    text = ("`(rate(radiance:engine_step_seconds_total[2m]) - rate(radiance:engine_step_seconds_decode_total[2m]))"
            " / (rate(radiance:engine_steps_total[2m]) - rate(radiance:engine_steps_decode_total[2m]))`\n"
            "`sum(rate(radiance:engine_step_seconds_total[2m])) / sum(rate(radiance:engine_steps_total[2m]))`\n")
    assert [(f.rule, f.line) for f in lint_text(text, schema)] == [("diluted-mean-step", 2)]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=60)


def test_cli_json_lists_findings_and_exits_one_on_errors_by_default() -> None:
    proc = _cli("lint", str(DATA / "bad_runbook.md"), "--source", str(SOURCE), "--json")
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    assert {"path", "line", "col", "rule", "severity", "subject", "message", "conditional"} == set(findings[0])
    assert len(findings) == 8  # the eight mistakes the bad runbook holds


def test_cli_warn_only_exits_zero_and_strict_is_still_accepted() -> None:
    assert _cli("lint", str(DATA / "bad_runbook.md"), "--source", str(SOURCE), "--warn-only").returncode == 0
    assert _cli("lint", str(DATA / "bad_runbook.md"), "--source", str(SOURCE), "--strict").returncode == 1
    assert _cli("lint", str(DATA / "good_runbook.md"), "--source", str(SOURCE)).returncode == 0


def test_cli_missing_source_prints_one_error_line_and_exits_two() -> None:
    proc = _cli("lint", str(DATA / "good_runbook.md"), "--source", "/nonexistent/config.cpp")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: ")


@pytest.mark.parametrize("value", ["keepall", "tip_only", "keep-all"])
def test_lint_refuses_exactly_the_policy_values_the_simulated_engine_refuses(tmp_path: Path, value: str) -> None:
    config = pytest.importorskip("pdcensus.sim.config")
    source_mod = pytest.importorskip("pdcensus.sim.config_source")
    from pdcensus.errors import UsageError

    (tmp_path / "config.cpp").write_text(source_mod.render_config_source())
    runbook = tmp_path / "arm.md"
    runbook.write_text(f"```\nradiance serve --checkpoint-policy {value}\n```\n")
    flagged = bool(lint_file(str(runbook), str(tmp_path)).errors)
    try:
        config.parse_config({"--checkpoint-policy": value})
        refused = False
    except UsageError:
        refused = True
    assert flagged is refused


_VALUES = {
    "--prefill-interleave": ["-1", "0", "2", "two", "2.5"],
    "--max-num-batched-tokens": ["10", "64", "8192", "16384"],
    "--prefill-span": ["0", "1", "2", "4"],
    "--checkpoint-interval": ["64", "2048", "4096", "200000"],
    "--max-model-len": ["256", "131072"],
    "--busy-prefill-chunk": ["auto", "0", "512", "half"],
}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.fixed_dictionaries({flag: st.sampled_from(values) for flag, values in _VALUES.items()}))
def test_lint_errors_exactly_when_the_simulated_engine_refuses_the_arm(arm: dict[str, str]) -> None:
    """Bounds, non-integers and cross-flag rules, read from the source, agree with the engine itself."""
    from pdcensus.errors import UsageError
    from pdcensus.sim.config import parse_config
    from pdcensus.sim.config_source import render_config_source

    schema = _sim_schema(render_config_source())
    line = "radiance serve " + " ".join(f"{flag} {value}" for flag, value in arm.items())
    errors = [f for f in lint_file_text(line + "\n", "arm.sh", FileKind.SHELL, schema) if f.severity.value == "error"]
    try:
        parse_config(arm)
        refused = False
    except UsageError:
        refused = True
    assert bool(errors) is refused, (arm, [f.text() for f in errors])


_SCHEMAS: dict[str, FlagSchema] = {}


def _sim_schema(text: str) -> FlagSchema:
    from pdcensus.lint.source.flags import parse_config_source

    if text not in _SCHEMAS:
        _SCHEMAS[text] = parse_config_source(text, "sim/config.cpp")
    return _SCHEMAS[text]


@pytest.mark.skipif(not SEED.is_file(), reason="the seed runbook lives in ../shared")
def test_the_seed_runbook_passes_lint_preamble_included(tmp_path: Path) -> None:
    """Its pasted commit note says `git merge --ff-only` and `--no-verify`: other programs' flags."""
    from pdcensus.sim.config_source import render_config_source

    (tmp_path / "config.cpp").write_text(render_config_source())
    for source in (str(tmp_path), str(SOURCE)):
        report = lint_paths([str(SEED)], source)
        assert report.files == ((str(SEED), FileKind.MARKDOWN),) and report.findings == ()
    preamble = SEED.read_text(encoding="utf-8").split("\n")[2]
    assert "merge --ff-only" in preamble and "--no-verify" in preamble
