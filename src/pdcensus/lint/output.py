"""Lint output: ``path:line:col: severity rule message`` lines, JSON, and SARIF 2.1.0.

The text form is the one editors and CI problem matchers parse (gcc, shellcheck ``-f gcc``,
ruff's concise output). SARIF is OASIS's Static Analysis Results Interchange Format, version
2.1.0 (the OASIS Standard, 27 March 2020); GitHub code scanning and other CI systems show its
results inline. The log written here uses: ``sarifLog`` (§3.13: ``version``, ``$schema``,
``runs``), ``run`` (§3.14: ``tool``, ``results``, ``originalUriBaseIds``, ``properties``),
``toolComponent`` (§3.19: ``name``, ``version``, ``informationUri``, ``rules``),
``reportingDescriptor`` (§3.49: ``id``, ``shortDescription``, ``defaultConfiguration``),
``result`` (§3.27: ``ruleId``, ``ruleIndex``, ``level`` in ``error``/``warning``/``note``,
``message.text``, ``locations``), ``physicalLocation`` (§3.29) with a relative
``artifactLocation.uri`` against ``%SRCROOT%`` (§3.4) and a 1-based ``region`` (§3.30).
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from pdcensus import __version__
from pdcensus.advice.model import Severity
from pdcensus.lint.model import LintReport

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
RULES: dict[str, str] = {
    "unknown-flag": "A flag the pinned build does not declare",
    "unknown-enum-value": "An enum member the pinned validator does not list (config_parse refuses it at boot)",
    "non-integer-value": "A non-integer where the pinned validator parses an integer",
    "value-out-of-bounds": "A number outside a bound the pinned validator checks",
    "cross-flag-rule": "Flags that together break a rule of the pinned validator",
    "cross-flag-unchecked": "A cross-flag rule this command cannot decide (a flag of it unset, no default)",
    "unknown-env-flag": "A RADIANCE_* variable whose flag the pinned build does not declare",
    "latency-under-radiance": "Latency, running/waiting or preemptions asked under radiance: (they are vllm:)",
    "rate-over-instant-depth": "rate() over radiance:num_requests_preempted, an instant depth",
    "diluted-mean-step": "The 2-minute mean step engine_step_seconds_total / engine_steps_total",
    "query-step-over-30s": "A query step over 30 s (one sample in eight of a 15 s scrape)",
    "bad-duration": "A query step Prometheus's duration grammar refuses (2x, 1h30, 1.5h)",
    "metric-not-exported": "A metric name the build's own metric set does not hold",
    "ambiguous-flag": "A vLLM option abbreviating several flags (argparse refuses it)",
    "abbreviated-flag": "A vLLM option accepted only as an abbreviation of a longer flag",
    "missing-value": "A vLLM flag that takes a value and has none",
    "unexpected-value": "A value vLLM's parser refuses: =value on a flag taking none, a second positional",
    "command-not-checked": "A command lint skips on purpose (an engine it has no data for, an unresolved word)",
    "unreadable-yaml": "A YAML file that could not be read (not checked)",
    "unreadable-json": "A JSON file that could not be read (not checked)",
}
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render_text(report: LintReport) -> list[str]:
    """One line per finding, in the order the files were read."""
    return [f.text() for f in report.findings]


def summary(report: LintReport) -> str:
    checked = "" if report.metrics_checked else " (metric names not checked: give --metrics)"
    against = report.source if report.ref is not None or report.source != "no pinned source" else \
        f"{report.vllm} for vLLM commands (no --source: no other engine checked)"
    return (f"{len(report.findings)} finding(s), {len(report.errors)} error(s) in {len(report.files)} "
            f"file(s) against {against}{checked}")


def _uri(path: str, root: Path) -> str:
    p = Path(path)
    try:
        rel = p.resolve().relative_to(root.resolve())
    except ValueError:
        return p.resolve().as_uri()
    return quote(PurePath(rel).as_posix())


def render_sarif(report: LintReport, root: Path | None = None) -> dict[str, Any]:
    """The report as a SARIF 2.1.0 log; paths relative to ``root`` (default: the working directory)."""
    base = root or Path.cwd()
    used = sorted({f.rule for f in report.findings} | set(RULES))
    index = {rule: i for i, rule in enumerate(used)}
    worst: dict[str, Severity] = {}
    for f in report.findings:
        worst.setdefault(f.rule, f.severity)
    rules = [{"id": rule, "name": "".join(w.capitalize() for w in rule.split("-")),
              "shortDescription": {"text": RULES.get(rule, rule)},
              "defaultConfiguration": {"level": _LEVEL[worst.get(rule, Severity.ERROR)]}}
             for rule in used]
    results = [{
        "ruleId": f.rule, "ruleIndex": index[f.rule], "level": _LEVEL[f.severity],
        "message": {"text": f.full_message},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": _uri(f.path, base), "uriBaseId": "%SRCROOT%"},
            "region": {"startLine": max(1, f.line), "startColumn": max(1, f.col)}}}],
        "properties": {"subject": f.subject, "conditional": f.conditional},
    } for f in report.findings]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "pdcensus-lint", "version": __version__,
                                "rules": rules}},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": base.resolve().as_uri() + "/"}},
            "results": results,
            "properties": {"pinnedSource": report.source, "ref": report.ref, "vllmFlags": report.vllm,
                           "metricsChecked": report.metrics_checked},
        }],
    }


def render_json(report: LintReport) -> str:
    return json.dumps(report.to_dict(), indent=2)
