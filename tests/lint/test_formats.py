"""Every deployment format: each mistake found on its own line and column, none on a valid arm."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdcensus.lint.source.pinned import load_schema
from pdcensus.lint.files import lint_paths
from pdcensus.lint.model import Finding

DATA = Path(__file__).parent / "data"
SOURCES = Path(__file__).parent.parent / "fixtures" / "config_sources"
SOURCE = SOURCES / "xmacro_switch.cpp"

EXPECTED: dict[str, set[tuple[str, int]]] = {
    "indented_runbook.md": {("unknown-enum-value", 6), ("non-integer-value", 15), ("unknown-enum-value", 20),
                            ("unknown-enum-value", 23), ("value-out-of-bounds", 30)},
    "serve_conditional.sh": {("unknown-enum-value", 5), ("cross-flag-rule", 11), ("value-out-of-bounds", 13),
                             ("unknown-enum-value", 16), ("unknown-enum-value", 22), ("value-out-of-bounds", 23),
                             ("non-integer-value", 24), ("unknown-enum-value", 26), ("unknown-enum-value", 27),
                             ("unknown-flag", 28)},
    "deployment.yaml": {("unknown-enum-value", 21), ("unknown-flag", 21), ("non-integer-value", 24)},
    "helm_rendered.yaml": {("unknown-enum-value", 8), ("cross-flag-rule", 38), ("unknown-enum-value", 40),
                           ("latency-under-radiance", 55)},
    "compose_string.yaml": {("unknown-enum-value", 4), ("non-integer-value", 4), ("unknown-enum-value", 7)},
    "compose_list.yaml": {("value-out-of-bounds", 9), ("unknown-enum-value", 11), ("unknown-enum-value", 13)},
    "Dockerfile.exec": {("unknown-enum-value", 6), ("value-out-of-bounds", 9)},
    "Dockerfile.shell": {("unknown-enum-value", 3), ("unknown-enum-value", 6)},
    "radiance.service": {("unknown-enum-value", 6), ("cross-flag-rule", 10)},
    "radiance.container": {("unknown-enum-value", 7)},
    "rules.yaml": {("diluted-mean-step", 6), ("rate-over-instant-depth", 10)},
    "ansible.yml": {("unknown-enum-value", 6)},
    "workflow.yml": {("value-out-of-bounds", 7)},
    "values.yaml": {("unknown-enum-value", 4), ("value-out-of-bounds", 7)},
    "kustomize-patch.yaml": {("value-out-of-bounds", 3)},
    "compose_folded.yaml": {("unknown-enum-value", 6)},
    "Dockerfile.sh-c": {("unknown-enum-value", 2)},
    "kserve.json": {("value-out-of-bounds", 4), ("unknown-enum-value", 5)},
    "prompts.md": {("unknown-enum-value", 2), ("unknown-enum-value", 3)},
    "heredocs.md": {("unknown-enum-value", 7), ("value-out-of-bounds", 11), ("unknown-enum-value", 17),
                    ("unknown-enum-value", 20)},
    "serve_functions.sh": {("unknown-enum-value", 19), ("non-integer-value", 23)},
    "args_variable.service": {("unknown-enum-value", 2)},
    "blocks.md": {("unknown-enum-value", 7), ("unknown-enum-value", 12), ("value-out-of-bounds", 17),
                  ("rate-over-instant-depth", 21), ("latency-under-radiance", 25)},
    "compose_defaults.yaml": {("non-integer-value", 5), ("unknown-enum-value", 7)},
    "dashboard.json": {("latency-under-radiance", 11), ("query-step-over-30s", 17), ("query-step-over-30s", 19),
                       ("query-step-over-30s", 20)},
}


def _anchor(finding: Finding) -> str:
    """The text a finding's column must point at: the value, the flag, or the expression."""
    subject = finding.subject
    if subject.startswith("--"):
        words = subject.split(",")[0].split()
        return words[-1].lstrip("\\\"")
    if subject.startswith("interval "):
        return subject.split()[1]
    return subject.removesuffix("...")


def _at(path: Path, finding: Finding) -> str:
    line = path.read_text(encoding="utf-8").split("\n")[finding.line - 1]
    return line[finding.col - 1:].lstrip("\\\"")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_format_finds_its_mistakes_on_their_lines(name: str) -> None:
    report = lint_paths([str(DATA / name)], str(SOURCE))
    assert {(f.rule, f.line) for f in report.findings} == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_finding_points_at_its_value_flag_or_expression(name: str) -> None:
    report = lint_paths([str(DATA / name)], str(SOURCE))
    for finding in report.findings:
        anchor = _anchor(finding)
        assert _at(DATA / name, finding).startswith(anchor[:20]), (finding.text(), anchor)


def test_a_flag_passed_only_on_some_branch_is_checked_and_said_to_be_conditional() -> None:
    report = lint_paths([str(DATA / "serve_conditional.sh")], str(SOURCE))
    conditional = {f.line: f.conditional for f in report.findings}
    assert conditional[11] and conditional[13] and conditional[16] and conditional[24]
    assert not conditional[5] and not conditional[28]
    assert "conditionally" in next(f for f in report.findings if f.line == 16).text()


def test_the_cross_flag_rule_names_the_validator_line_and_the_values_it_saw() -> None:
    report = lint_paths([str(DATA / "helm_rendered.yaml")], str(SOURCE))
    finding = next(f for f in report.findings if f.rule == "cross-flag-rule")
    assert "--prefill-span 4" in finding.message and "--max-num-batched-tokens 16384" in finding.message
    assert "--checkpoint-interval 2048" in finding.message and "validator line 82" in finding.message


def test_env_values_are_checked_as_the_flag_they_map_to() -> None:
    report = lint_paths([str(DATA / "deployment.yaml")], str(SOURCE))
    finding = next(f for f in report.findings if f.line == 24)
    assert finding.subject == "--prefill-interleave two" and "RADIANCE_PREFILL_INTERLEAVE" in finding.message


def test_a_directory_is_walked_and_each_file_gets_its_reader() -> None:
    report = lint_paths([str(DATA)], str(SOURCE))
    kinds = {Path(p).name: k.value for p, k in report.files}
    assert kinds["Dockerfile.exec"] == "dockerfile" and kinds["radiance.service"] == "systemd"
    assert kinds["radiance.container"] == "systemd" and kinds["dashboard.json"] == "json"
    assert kinds["serve_conditional.sh"] == "shell" and kinds["indented_runbook.md"] == "markdown"
    named = {Path(f.path).name for f in report.findings}
    assert named >= set(EXPECTED)


def test_binaries_and_git_directories_are_skipped(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "serve.sh").write_text("radiance serve --checkpoint-policy nope\n")
    (tmp_path / "blob.sh").write_bytes(b"radiance serve --checkpoint-policy nope\0\x01")
    (tmp_path / "notes.bin").write_text("radiance serve --checkpoint-policy nope\n")
    (tmp_path / "run.sh").write_text("radiance serve --checkpoint-policy nope\n")
    report = lint_paths([str(tmp_path)], str(SOURCE))
    assert [Path(f.path).name for f in report.findings] == ["run.sh"]
    assert [Path(p).name for p in report.skipped] == ["blob.sh"]


@pytest.mark.parametrize("source", sorted(p.name for p in SOURCES.iterdir()))
def test_no_finding_on_a_valid_arm_in_any_format_against_any_layout_of_the_source(source: str) -> None:
    report = lint_paths([str(DATA / "good")], str(SOURCES / source))
    assert len(report.files) == 9
    schema = load_schema(SOURCES / source)
    left = [f.text() for f in report.findings if not (f.subject == "--model" and "--model" not in schema)]
    assert left == []


def test_a_rules_file_checks_names_against_the_build_and_knows_the_series_it_records(tmp_path: Path) -> None:
    scrape = tmp_path / "metrics.om"
    scrape.write_text("# TYPE radiance:decode_tokens_per_second gauge\n"
                      "radiance:decode_tokens_per_second{instance=\"a\"} 12.5 1700000000\n# EOF\n")
    report = lint_paths([str(DATA / "recorded_rules.yaml")], str(SOURCE), metrics=str(scrape))
    assert [(f.rule, f.line, f.subject) for f in report.findings] == [
        ("metric-not-exported", 7, "radiance:decode_tokens_per_secnd")]
    assert report.metrics_checked


def test_files_saved_with_crlf_line_ends_give_the_same_findings_at_the_same_places(tmp_path: Path) -> None:
    for name in ("serve_conditional.sh", "Dockerfile.exec", "helm_rendered.yaml", "indented_runbook.md"):
        (tmp_path / name).write_bytes((DATA / name).read_bytes().replace(b"\n", b"\r\n"))
        lf = lint_paths([str(DATA / name)], str(SOURCE)).findings
        crlf = lint_paths([str(tmp_path / name)], str(SOURCE)).findings
        assert [(f.rule, f.line, f.col) for f in crlf] == [(f.rule, f.line, f.col) for f in lf], name


def test_kubernetes_expands_env_references_in_args_before_the_engine_sees_them() -> None:
    """``$(POLICY)`` is the container env's value; ``$$(KEEP)`` stays literal, as the kubelet does."""
    report = lint_paths([str(DATA / "k8s_env_refs.yaml")], str(SOURCE))
    assert [(f.rule, f.line, f.subject) for f in report.findings] == [
        ("unknown-enum-value", 11, "--checkpoint-policy geometric")]
