"""Lint reads any text without failing: every reader, on arbitrary and on broken input."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdcensus.lint.source.pinned import load_schema
from pdcensus.lint.files import lint_text
from pdcensus.lint.model import FileKind

SOURCE = Path(__file__).parent.parent / "fixtures" / "config_sources" / "xmacro_switch.cpp"
_PIECES = st.sampled_from([
    "radiance serve ", "--prefill-interleave ", "--checkpoint-policy ", "geometric ", "-1 ", "$ARGS ",
    '"${A:+--kv-dtype fp4}" ', "'", '"', "\\\n", "\n", "(", ")", "{", "}", "[", "]", "<<EOF\n", "EOF\n",
    "args+=(", "if [ x ]; then ", "fi\n", "case $x in a) ", ";;", "esac\n", "`", "$(", "#", ": ", "- ",
    "```\n", "    ", "> ", "apiVersion: v1\n", "containers:\n", "  - args: [", "env:\n", "RADIANCE_KV_DTYPE=",
    "[Service]\n", "ExecStart=", "Environment=", "FROM x\n", "CMD [", "ENV ", '"expr": "', "rate(",
    "radiance:num_requests_preempted[5m])", "\t", "\u00e9", "\x00",
])


@pytest.mark.parametrize("kind", list(FileKind))
@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_any_text_is_read_without_failing_and_findings_stay_inside_it(kind: FileKind, text: str) -> None:
    schema = load_schema(SOURCE)
    findings = lint_text(text, "f", kind, schema)
    lines = text.count("\n") + 1
    for f in findings:
        assert 1 <= f.line <= lines and f.col >= 1, f.text()


@pytest.mark.parametrize(
    ("kind", "text"),
    [pytest.param(FileKind.YAML, "a: [1, 2\nb: {", id="broken-yaml"),
     pytest.param(FileKind.YAML, "x: {{ .Values.args }}\n", id="helm-template"),
     pytest.param(FileKind.JSON, '{"expr": "rate(x[5m])",', id="broken-json"),
     pytest.param(FileKind.DOCKERFILE, 'CMD ["radiance", "serve",\n', id="broken-exec-form"),
     pytest.param(FileKind.SHELL, 'radiance serve "--kv-dtype fp4\n', id="unclosed-quote")],
)
def test_broken_files_are_reported_or_read_never_raised(kind: FileKind, text: str) -> None:
    findings = lint_text(text, "f", kind, load_schema(SOURCE))
    assert all(f.rule in {"unreadable-yaml", "unreadable-json", "unknown-enum-value"} for f in findings)
    if kind is FileKind.YAML:
        assert [f.severity.value for f in findings] == (["info"] if "{{" in text else ["warning"])
