"""Lint's contract with editors and CI: the line format, exit codes, JSON, SARIF 2.1.0, pre-commit."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parent.parent.parent
SOURCE = Path(__file__).parent.parent / "fixtures" / "config_sources" / "xmacro_switch.cpp"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info) (?P<rule>[a-z0-9-]+) (?P<msg>.+)$")

# SARIF 2.1.0 (OASIS Standard, 27 March 2020), the parts this log uses, written by hand from the
# specification's sections (no package ships the schema file). Objects list only properties the
# specification defines for them, so a misspelt or invented property fails validation.
_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
            "properties": {"text": {"type": "string"}, "markdown": {"type": "string"}, "id": {"type": "string"},
                           "arguments": {"type": "array"}, "properties": {"type": "object"}},
            "additionalProperties": False}
_REGION = {"type": "object", "properties": {
    "startLine": {"type": "integer", "minimum": 1}, "startColumn": {"type": "integer", "minimum": 1},
    "endLine": {"type": "integer", "minimum": 1}, "endColumn": {"type": "integer", "minimum": 1},
    "charOffset": {"type": "integer", "minimum": -1}, "charLength": {"type": "integer", "minimum": 0},
    "snippet": {"type": "object"}, "message": _MESSAGE, "properties": {"type": "object"}},
    "additionalProperties": False}
_ARTIFACT_LOCATION = {"type": "object", "properties": {
    "uri": {"type": "string", "format": "uri-reference"}, "uriBaseId": {"type": "string"},
    "index": {"type": "integer", "minimum": -1}, "description": _MESSAGE, "properties": {"type": "object"}},
    "additionalProperties": False}
_RESULT = {"type": "object", "required": ["message"], "properties": {
    "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": -1},
    "kind": {"enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]},
    "level": {"enum": ["none", "note", "warning", "error"]}, "message": _MESSAGE,
    "locations": {"type": "array", "items": {"type": "object", "properties": {
        "physicalLocation": {"type": "object", "properties": {
            "artifactLocation": _ARTIFACT_LOCATION, "region": _REGION, "contextRegion": _REGION,
            "address": {"type": "object"}, "properties": {"type": "object"}},
            "anyOf": [{"required": ["address"]}, {"required": ["artifactLocation"]}],
            "additionalProperties": False},
        "id": {"type": "integer"}, "message": _MESSAGE, "logicalLocations": {"type": "array"},
        "annotations": {"type": "array"}, "relationships": {"type": "array"}, "properties": {"type": "object"}},
        "additionalProperties": False}},
    "fingerprints": {"type": "object"}, "partialFingerprints": {"type": "object"},
    "properties": {"type": "object"}}, "additionalProperties": True}
_DESCRIPTOR = {"type": "object", "required": ["id"], "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "shortDescription": _MESSAGE,
    "fullDescription": _MESSAGE, "helpUri": {"type": "string"}, "help": _MESSAGE,
    "defaultConfiguration": {"type": "object", "properties": {
        "enabled": {"type": "boolean"}, "level": {"enum": ["none", "note", "warning", "error"]},
        "rank": {"type": "number"}, "parameters": {"type": "object"}, "properties": {"type": "object"}},
        "additionalProperties": False},
    "properties": {"type": "object"}}, "additionalProperties": True}
SARIF_2_1_0 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "required": ["version", "runs"],
    "properties": {
        "$schema": {"type": "string", "format": "uri"}, "version": {"const": "2.1.0"},
        "runs": {"type": "array", "items": {"type": "object", "required": ["tool"], "properties": {
            "tool": {"type": "object", "required": ["driver"], "properties": {
                "driver": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"}, "version": {"type": "string"},
                    "informationUri": {"type": "string", "format": "uri"},
                    "rules": {"type": "array", "items": _DESCRIPTOR}}, "additionalProperties": True},
                "extensions": {"type": "array"}, "properties": {"type": "object"}}, "additionalProperties": False},
            "results": {"type": "array", "items": _RESULT},
            "originalUriBaseIds": {"type": "object", "additionalProperties": {
                "type": "object", "properties": {"uri": {"type": "string"}}}},
            "properties": {"type": "object"}}, "additionalProperties": True}},
        "inlineExternalProperties": {"type": "array"}, "properties": {"type": "object"}},
    "additionalProperties": False,
}


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_text_findings_are_path_line_col_severity_rule_message_and_exit_one() -> None:
    proc = _cli("lint", str(DATA / "deployment.yaml"), str(DATA / "rules.yaml"), "--source", str(SOURCE))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.strip().split("\n")
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    got = {(Path(m["path"]).name, int(m["line"]), int(m["col"]), m["rule"]) for m in parsed if m}
    assert ("deployment.yaml", 21, 51, "unknown-enum-value") in got and ("rules.yaml", 6, 20, "diluted-mean-step") in got
    assert "5 finding(s), 5 error(s) in 2 file(s)" in proc.stderr


def test_a_valid_arm_exits_zero_and_warn_only_keeps_the_old_exit_code() -> None:
    assert _cli("lint", str(DATA / "good"), "--source", str(SOURCE)).returncode == 0
    warn = _cli("lint", str(DATA / "Dockerfile.exec"), "--source", str(SOURCE), "--warn-only")
    assert warn.returncode == 0 and warn.stdout.count(": error ") == 2


@pytest.mark.parametrize(
    "args",
    [pytest.param(["lint", "good.md", "--source", "/nonexistent/config.cpp"], id="missing-source"),
     pytest.param(["lint", "--source", "SRC"], id="no-path"),
     pytest.param(["lint", "good.md", "--source", "SRC", "--json", "--sarif"], id="json-and-sarif"),
     pytest.param(["lint", "nonexistent.md", "--source", "SRC"], id="missing-path")],
)
def test_usage_errors_exit_two_with_one_line(args: list[str], tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("nothing to see\n")
    proc = _cli(*[str(SOURCE) if a == "SRC" else a for a in args], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_json_names_the_source_the_files_and_each_finding_with_its_column() -> None:
    proc = _cli("lint", str(DATA / "compose_list.yaml"), "--source", str(SOURCE), "--json")
    report = json.loads(proc.stdout)
    assert report["source"] == str(SOURCE) and report["files"] == [{"path": str(DATA / "compose_list.yaml"),
                                                                   "kind": "yaml"}]
    assert [(f["line"], f["col"], f["rule"]) for f in report["findings"]] == [
        (9, 30, "value-out-of-bounds"), (11, 9, "unknown-enum-value"), (13, 35, "unknown-enum-value")]


def _sarif(*paths: Path) -> dict[str, Any]:
    proc = _cli("lint", *map(str, paths), "--source", str(SOURCE), "--sarif")
    assert proc.returncode == 1, proc.stderr
    log: dict[str, Any] = json.loads(proc.stdout)
    return log


def test_sarif_validates_against_the_2_1_0_schema_and_places_each_result() -> None:
    log = _sarif(DATA / "helm_rendered.yaml", DATA / "serve_conditional.sh")
    jsonschema.validate(log, SARIF_2_1_0, format_checker=jsonschema.FormatChecker())
    run = log["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    places = {(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
               r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in run["results"]}
    assert ("tests/lint/data/helm_rendered.yaml", 38) in places
    assert ("tests/lint/data/serve_conditional.sh", 5) in places
    assert run["properties"]["pinnedSource"] == str(SOURCE)


@pytest.mark.parametrize(
    ("path", "value"),
    [pytest.param(("version",), "2.0.0", id="wrong-version"),
     pytest.param(("runs", 0, "results", 0, "level"), "fatal", id="unknown-level"),
     pytest.param(("runs", 0, "results", 0, "locations", 0, "physicalLocation", "region", "startLine"), 0,
                  id="line-zero")],
)
def test_the_hand_written_schema_refuses_a_broken_log(path: tuple[Any, ...], value: object) -> None:
    log = _sarif(DATA / "radiance.container")
    node: Any = log
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(log, SARIF_2_1_0)


def test_the_pre_commit_hook_runs_pdcensus_lint_on_the_files_lint_reads() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "pdcensus-lint")
    assert hook["entry"] == "pdcensus lint" and hook["language"] == "python"
    files = re.compile(hook["files"])
    for path in sorted(p for p in DATA.rglob("*") if p.is_file()):
        assert files.search(str(path.relative_to(ROOT))), path
    assert not files.search("docs/figure.png") and not files.search("src/pdcensus/cli.py")


def test_the_source_and_ref_can_come_from_the_environment(tmp_path: Path) -> None:
    """A CI job or a pre-commit hook sets PDCENSUS_SOURCE once instead of passing --source."""
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "PDCENSUS_SOURCE": str(SOURCE)}
    proc = subprocess.run([sys.executable, "-m", "pdcensus", "lint", str(DATA / "Dockerfile.exec")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert proc.returncode == 1 and "Dockerfile.exec:9:35: error value-out-of-bounds" in proc.stdout


@pytest.mark.slow
def test_the_hook_runs_under_pre_commit_try_repo(tmp_path: Path) -> None:
    """``pre-commit try-repo`` installs this repository's hook (uncommitted changes included)."""
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(pre_commit).exists():
        pytest.skip("pre-commit is not installed")
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-dir"], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("not a git checkout")
    work = tmp_path / "deploy"
    work.mkdir()
    shutil.copy(SOURCE, work / "config.cpp")
    shutil.copy(DATA / "Dockerfile.exec", work / "Dockerfile")
    shutil.copy(DATA / "good" / "serve.sh", work / "serve.sh")
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", "-C", str(work), *args], check=True, capture_output=True)
    env = {"PRE_COMMIT_HOME": str(tmp_path / "cache"), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
           "HOME": str(tmp_path), "PDCENSUS_SOURCE": "config.cpp"}
    proc = subprocess.run([pre_commit, "try-repo", str(ROOT), "pdcensus-lint", "--files", "Dockerfile", "serve.sh",
                           "--verbose"], cwd=work, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Dockerfile:9:35: error value-out-of-bounds" in proc.stdout
    assert "serve.sh:" not in proc.stdout  # the valid serve script has no finding
