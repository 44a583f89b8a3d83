"""``pdcensus lint PATH...``: walk files and directories, pick each file's reader, check them all.

A file's reader is picked by name first (``*.md``, ``*.sh``, ``Dockerfile``/``Containerfile``,
``*.service``/``*.container``, ``*.yaml``, ``*.json``, ``.env``), then by content for names
that say nothing (a ``#!`` shell line, ``FROM``, a ``[Service]`` section, a YAML document
start). In a directory only files with a recognised kind are read; ``.git``, virtual
environments, ``node_modules`` and caches are not entered, and a file holding a NUL byte in
its first 8 KiB is binary and skipped. A file named on the command line is always read
(unrecognised text as a Markdown runbook, the old behaviour).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

from pdcensus.lint.source.flags import FlagSchema
from pdcensus.lint.source.pinned import PinnedSource, load_pinned
from pdcensus.errors import UsageError
from pdcensus.lint.checks import UNPINNED, Checker
from pdcensus.lint.deploy import DeployReader, read_json
from pdcensus.lint.markdown import read_markdown
from pdcensus.lint.model import FileKind, Finding, LintReport, Snippet
from pdcensus.lint.shell_read import ShellReader
from pdcensus.lint.unit_files import read_dockerfile, read_systemd
from pdcensus.lint.vllm import load_vllm_flags

_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
              ".pytest_cache", ".tox", ".ruff_cache", "dist", "build", ".eggs"}
_BY_SUFFIX = {
    ".md": FileKind.MARKDOWN, ".markdown": FileKind.MARKDOWN, ".mdx": FileKind.MARKDOWN,
    ".sh": FileKind.SHELL, ".bash": FileKind.SHELL, ".zsh": FileKind.SHELL, ".ksh": FileKind.SHELL,
    ".env": FileKind.SHELL, ".yaml": FileKind.YAML, ".yml": FileKind.YAML, ".json": FileKind.JSON,
    ".service": FileKind.SYSTEMD, ".container": FileKind.SYSTEMD, ".dockerfile": FileKind.DOCKERFILE,
    ".containerfile": FileKind.DOCKERFILE,
}
_MAX_BYTES = 8 * 1024 * 1024
_RECORD = re.compile(r"^\s*-?\s*record:\s*[\"']?([A-Za-z_:][A-Za-z0-9_:]*)", re.M)


def kind_of(path: Path, head: str, named: bool) -> FileKind | None:
    """The reader for a file (None: not one lint reads, when found by walking a directory)."""
    name = path.name.lower()
    if name in {"dockerfile", "containerfile"} or name.startswith(("dockerfile.", "containerfile.")):
        return FileKind.DOCKERFILE
    if name == ".env" or name.endswith(".env"):
        return FileKind.SHELL
    if path.parent.name.endswith(".service.d") and name.endswith(".conf"):
        return FileKind.SYSTEMD
    by_suffix = _BY_SUFFIX.get(path.suffix.lower())
    if by_suffix is not None:
        return by_suffix
    if head.startswith("#!") and re.match(r"#!\s*\S*(?:sh|bash|zsh|ksh|dash)\b|#!\s*/usr/bin/env\s+(?:ba|z|k|da)?sh\b",
                                          head):
        return FileKind.SHELL
    if re.match(r"(?:\s*#.*\n)*\s*FROM\s+\S", head):
        return FileKind.DOCKERFILE
    if re.search(r"^\[(?:Unit|Service|Container|Install)\]\s*$", head, re.M):
        return FileKind.SYSTEMD
    if path.suffix.lower() == ".txt" or named:
        return FileKind.MARKDOWN
    return None


def _walk(paths: list[str]) -> Iterator[tuple[Path, bool]]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
                for name in sorted(files):
                    yield Path(root) / name, False
        elif path.exists():
            yield path, True
        else:
            raise UsageError(f"cannot read {raw!r}: No such file or directory")


NestedReader = Callable[[str, Checker, ShellReader], None]


def _nested(snippet: Snippet, checker: Checker, read: NestedReader) -> None:
    """Run a whole-file reader on a runbook's code block, its findings moved to the block's lines."""
    inner = Checker(checker.schema, checker.path, checker.metric_names)
    shell = ShellReader(inner)
    read(snippet.text, inner, shell)
    shell.finish()
    for f in inner.findings:
        line, col = snippet.origins[min(f.line - 1, len(snippet.origins) - 1)]
        checker.add(f.rule, f.severity, (line, col + f.col - 1), f.subject, f.message, f.conditional)


def _heredoc(snippet: Snippet, checker: Checker, reader: ShellReader) -> bool:
    """A heredoc body that is a file lint reads (told by its content), read as that file."""
    head = snippet.text[:4096]
    kind = kind_of(Path("heredoc"), head, named=False)
    if kind is None and re.search(r"(?m)^(?:apiVersion|services|groups):", head):
        kind = FileKind.YAML
    if kind is FileKind.SHELL:
        reader.read(snippet)
        return True
    readers: dict[FileKind, NestedReader] = {
        FileKind.YAML: lambda t, c, s: DeployReader(c, s, checker.path, t).read(t),
        FileKind.DOCKERFILE: lambda t, c, s: read_dockerfile(t, checker.path, c, s),
        FileKind.SYSTEMD: lambda t, c, s: read_systemd(t, checker.path, c, s),
    }
    if kind in readers:
        _nested(snippet, checker, readers[kind])
        return True
    return False


def lint_text(text: str, path: str, kind: FileKind, schema: FlagSchema,
              metric_names: Collection[str] | None = None) -> list[Finding]:
    """Findings for one file's text read as ``kind``, ordered by line and column."""
    checker = Checker(schema, path, metric_names)
    shell = ShellReader(checker)
    shell.heredoc = functools.partial(_heredoc, checker=checker, reader=shell)
    if kind is FileKind.MARKDOWN:
        nested: dict[str, NestedReader] = {
            "yaml": lambda t, c, s: DeployReader(c, s, path, t).read(t),
            "dockerfile": lambda t, c, s: read_dockerfile(t, path, c, s),
            "systemd": lambda t, c, s: read_systemd(t, path, c, s),
            "json": lambda t, c, s: read_json(t, path, c),
        }
        for alias, name in (("yml", "yaml"), ("containerfile", "dockerfile"), ("ini", "systemd")):
            nested[alias] = nested[name]
        readers: dict[str, Callable[[Snippet], None]] = {
            lang: functools.partial(_nested, checker=checker, read=read) for lang, read in nested.items()}
        read_markdown(text, path, checker, shell, readers)
    elif kind is FileKind.SHELL:
        whole = Snippet.whole(path, text)
        shell.read(whole)
        checker.queries(whole)
    elif kind is FileKind.YAML:
        DeployReader(checker, shell, path, text).read(text)
    elif kind is FileKind.DOCKERFILE:
        read_dockerfile(text, path, checker, shell)
    elif kind is FileKind.SYSTEMD:
        read_systemd(text, path, checker, shell)
    elif kind is FileKind.JSON:
        read_json(text, path, checker)
        if re.search(r'"apiVersion"\s*:', text) and re.search(r'"kind"\s*:', text):  # kubectl -o json
            DeployReader(checker, shell, path, text).read(text)
    shell.finish()
    return checker.sorted()


def lint_paths(paths: list[str], source: str | None, ref: str | None = None,
               metrics: str | None = None) -> LintReport:
    """Lint every file under ``paths`` against the pinned source (and the build's metric set).

    Without a ``source`` only vLLM commands are checked (their flags data ships with pdcensus);
    an engine command of a pinned build is then an info finding saying it was not checked."""
    if not paths:
        raise UsageError("give at least one file or directory to lint")
    if source is None and ref is not None:
        raise UsageError("--ref needs --source (the git repository to read it from)")
    vllm = load_vllm_flags()
    pinned = load_pinned(source, ref) if source is not None else PinnedSource(UNPINNED, "no pinned source")
    names = metric_names_of(metrics) if metrics else None
    read: list[tuple[str, str, FileKind]] = []
    skipped: list[str] = []
    for path, named in _walk(paths):
        try:
            with path.open("rb") as handle:
                data = handle.read(_MAX_BYTES)
        except OSError as exc:
            if named:
                raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
            skipped.append(str(path))
            continue
        if b"\0" in data[:8192]:
            skipped.append(str(path))
            continue
        text = data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n")  # BOM, CRLF: same places
        kind = kind_of(path, text[:4096], named)
        if kind is not None:
            read.append((str(path), text, kind))
    if names is not None:  # series a rules file records are names its queries (and others) may use
        names = names | {m.group(1) for _, text, kind in read if kind is FileKind.YAML
                         for m in _RECORD.finditer(text)}
    findings = [f for path, text, kind in read for f in lint_text(text, path, kind, pinned.schema, names)]
    return LintReport(tuple(findings), tuple((p, k) for p, _, k in read), pinned.description, pinned.ref,
                      names is not None, tuple(skipped), f"{vllm.label} ({vllm.distribution} parser, pinned data)")


def metric_names_of(path: str) -> set[str]:
    """Every sample name (and declared family) in a scrape or recording."""
    from pdcensus.sources.load import load_source

    recording = load_source(path)
    names: set[str] = set(recording.families)
    for endpoint in recording.endpoints:
        names |= endpoint.names()
    return names
