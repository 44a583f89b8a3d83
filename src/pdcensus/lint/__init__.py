"""Lint what an arm deploys against the pinned source (``pdcensus lint``).

Modules, one concept each: ``model`` (a finding at path:line:col, the report), ``checks`` (the
rules against the pinned schema), ``promql`` (the runbook's query traps), ``shell`` and
``shell_read`` (words with offsets, then engine invocations), ``markdown`` (CommonMark
runbooks), ``deploy`` (Kubernetes, Helm, compose, rules files, dashboards), ``unit_files``
(Dockerfiles, systemd), ``files`` (walking paths, picking readers) and ``output`` (text, JSON,
SARIF). The pinned schema itself is read by :mod:`pdcensus.lint.source.pinned`.
"""

from pdcensus.lint.files import lint_paths, lint_text
from pdcensus.lint.model import FileKind, Finding, LintReport

__all__ = ["FileKind", "Finding", "LintReport", "lint_paths", "lint_text"]
