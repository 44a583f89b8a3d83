"""Lint's typed values: a finding at ``path:line:col``, the text it was read from, a run's report.

Every reader (Markdown, shell, YAML, Dockerfile, systemd, dashboards) hands the checks a
:class:`Snippet`: text cut out of a file (a fenced block without its list indentation, a
YAML scalar, a Dockerfile instruction) that still knows where each of its lines sits in the
file, so a finding points at the file's own line and column, the place an editor or a CI
annotation jumps to.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property
from enum import Enum
from typing import Any

from pdcensus.advice.model import Severity


class FileKind(str, Enum):
    """Which reader a file goes to."""

    MARKDOWN = "markdown"
    SHELL = "shell"
    YAML = "yaml"
    DOCKERFILE = "dockerfile"
    SYSTEMD = "systemd"
    JSON = "json"


@dataclass(frozen=True)
class Finding:
    """One problem: the rule, where it is, what it is about and why the build would mind."""

    path: str
    line: int
    col: int
    rule: str
    severity: Severity
    subject: str
    message: str
    conditional: bool = False

    @property
    def full_message(self) -> str:
        note = " (passed conditionally: it holds on the branch that passes it)" if self.conditional else ""
        return self.message + note

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "col": self.col, "rule": self.rule,
                "severity": self.severity.value, "subject": self.subject, "message": self.full_message,
                "conditional": self.conditional}

    def text(self) -> str:
        """``path:line:col: severity rule message``, the form editors and CI parse."""
        return f"{self.path}:{self.line}:{self.col}: {self.severity.value} {self.rule} {self.full_message}"


@dataclass(frozen=True)
class Snippet:
    """Text cut from a file; ``origins[i]`` is (file line, file column of char 0) of its line i."""

    path: str
    text: str
    origins: tuple[tuple[int, int], ...]
    places: tuple[tuple[int, int], ...] = ()  # per character, when the text was decoded (JSON escapes)

    @classmethod
    def whole(cls, path: str, text: str) -> Snippet:
        return cls(path, text, tuple((n, 1) for n in range(1, text.count("\n") + 2)))

    @classmethod
    def at(cls, path: str, text: str, line: int, col: int) -> Snippet:
        """A one-place snippet: line 0 starts at (line, col), later lines at column 1."""
        rest = tuple((line + n, 1) for n in range(1, text.count("\n") + 1))
        return cls(path, text, ((line, col),) + rest)

    @classmethod
    def found_in(cls, path: str, text: str, file_lines: list[str], first_line: int) -> Snippet:
        """Each line of ``text`` located in ``file_lines`` (1-based) at or after ``first_line``."""
        origins = []
        at = max(1, first_line)
        for piece in text.split("\n"):
            probe = piece.strip()
            line, col = at, 1
            for n in range(at, min(len(file_lines), at + 200) + 1):
                hit = file_lines[n - 1].find(probe) if probe else -1
                if hit >= 0:
                    line, col = n, hit + 1 - (len(piece) - len(piece.lstrip()))
                    break
            origins.append((line, max(1, col)))
            at = line + (1 if probe else 0)
        return cls(path, text, tuple(origins))

    @cached_property
    def _line_starts(self) -> list[int]:
        return [0] + [i + 1 for i, c in enumerate(self.text) if c == "\n"]

    def position(self, offset: int) -> tuple[int, int]:
        """(file line, file column) of the character at ``offset`` in :attr:`text`."""
        if self.places:
            return self.places[max(0, min(offset, len(self.places) - 1))]
        offset = max(0, min(offset, len(self.text)))
        index = bisect.bisect_right(self._line_starts, offset) - 1
        start = self._line_starts[index]
        line, col = self.origins[min(index, len(self.origins) - 1)]
        return line, col + (offset - start)


@dataclass(frozen=True)
class LintReport:
    """Every finding of one run, the files read (with their reader) and the source used."""

    findings: tuple[Finding, ...]
    files: tuple[tuple[str, FileKind], ...]
    source: str
    ref: str | None = None
    metrics_checked: bool = False
    skipped: tuple[str, ...] = field(default=())
    vllm: str = ""  # the vLLM flags data vLLM commands were checked against

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "ref": self.ref, "vllm": self.vllm, "metrics_checked": self.metrics_checked,
                "files": [{"path": p, "kind": k.value} for p, k in self.files],
                "skipped": list(self.skipped),
                "findings": [f.to_dict() for f in self.findings]}
