"""Runbooks read as CommonMark: code blocks, inline code and prose, each at its file line and column.

markdown-it-py (CommonMark, already installed with rich) finds what a hand-written scanner
misses: 4-space indented code blocks, fenced blocks nested in list items and block quotes
(their content comes back without the indentation or ``>``; :meth:`Snippet.found_in` puts
each line back at its file column), inline code in multi-line paragraphs (the line is the
paragraph's first line plus the soft/hard breaks before the span). HTML blocks and comments
are not read: a command commented out is not deployed.

What each part is checked for:

* a code block goes to the reader its info string names (``yaml``/``yml``: manifests and
  compose; ``dockerfile``; ``ini``/``systemd``; ``json``: dashboards; ``promql``: queries
  only); anything else is shell. ``console`` blocks, and plain blocks with ``$ `` prompts,
  are transcripts: only the prompt lines are read, the output between them is not;
* inline code that starts with a flag is a bare mention (``--checkpoint-policy keep_all`` is
  checked, an unknown flag only when it is a near-miss of a real one); other inline code is
  a one-line shell command;
* prose: near-miss flags and member lists (``a | b | c`` beside ``--checkpoint-policy``);
* everything but HTML: the PromQL traps and metric names.

All shell snippets of one runbook share one :class:`ShellReader`, so ``ARGS=...`` in one
block and ``exec radiance serve $ARGS`` in the next are read together.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from markdown_it import MarkdownIt
from markdown_it.token import Token

from pdcensus.lint.checks import Checker
from pdcensus.lint.model import Snippet
from pdcensus.lint.shell import Word, tokenize
from pdcensus.lint.shell import Arg
from pdcensus.lint.shell_read import ShellReader

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SHELL_INFOS = {"", "sh", "bash", "shell", "zsh", "ksh", "text", "txt", "console", "shell-session",
                "shellsession", "sh-session", "plain", "none", "env", "dotenv", "docker", "podman"}
_PROMPT = re.compile(r"^(\s*)(?:\$|#|>|%)\s")

BlockReader = Callable[[Snippet], None]


def _console(snippet: Snippet) -> Snippet:
    """Only the prompt lines of a console transcript, the prompt blanked (columns kept)."""
    lines = []
    for line in snippet.text.split("\n"):
        m = _PROMPT.match(line)
        lines.append(" " * m.end() + line[m.end():] if m else "")
    return Snippet(snippet.path, "\n".join(lines), snippet.origins)


def read_markdown(text: str, path: str, checker: Checker, shell: ShellReader,
                  readers: dict[str, BlockReader]) -> None:
    """Check one runbook; ``readers`` maps an info string's language to a block reader."""
    file_lines = text.split("\n")
    tokens = MarkdownIt("commonmark").parse(text)
    code_lines: set[int] = set()
    for tok in tokens:
        if tok.map is None:
            continue
        first, end = tok.map[0] + 1, tok.map[1]
        if tok.type in {"fence", "code_block", "html_block"}:
            code_lines.update(range(first, end + 1))
        if tok.type in {"fence", "code_block"}:
            start = first + 1 if tok.type == "fence" else first
            content = tok.content[:-1] if tok.content.endswith("\n") else tok.content
            snippet = Snippet.found_in(path, content, file_lines, start)
            lang = tok.info.strip().split()[0].lower().strip("{}.") if tok.info.strip() else ""
            _block(lang, snippet, checker, shell, readers)
        elif tok.type == "inline":
            _inline(tok.children or [], tok.content, first, path, file_lines, checker, shell)
    for number, line in enumerate(file_lines, start=1):
        if number not in code_lines and "--" in line:
            checker.member_lists(Snippet.at(path, line, number, 1))


def _block(lang: str, snippet: Snippet, checker: Checker, shell: ShellReader,
           readers: dict[str, BlockReader]) -> None:
    if lang in readers:
        readers[lang](snippet)
        return
    if lang == "promql":
        checker.queries(snippet)
        return
    if lang in {"console", "shell-session", "shellsession", "sh-session"} or (
            lang in {"", "text", "txt"} and re.search(r"(?m)^\s*\$ ", snippet.text)):
        snippet = _console(snippet)  # a transcript: prompt lines are commands, the rest is output
    if lang in _SHELL_INFOS or lang not in readers:
        shell.read(snippet)
        checker.queries(snippet)


def _inline(children: list[Token], content: str, first: int, path: str,
            file_lines: list[str], checker: Checker, shell: ShellReader) -> None:
    line, cursor = first, 0
    for child in children:
        if child.type in {"softbreak", "hardbreak"}:
            line, cursor = line + 1, 0
            continue
        if child.type != "code_inline":
            continue
        source = file_lines[line - 1] if line - 1 < len(file_lines) else ""
        col = source.find(child.content, cursor)  # after the spans already placed on this line
        cursor = col + len(child.content) if col >= 0 else cursor
        snippet = Snippet.at(path, child.content, line, col + 1 if col >= 0 else 1)
        checker.queries(snippet)
        if child.content.lstrip().startswith("--"):
            words = [w for w in tokenize(snippet.text) if isinstance(w, Word)]
            for use in shell.uses([Arg(w.raw, snippet, w.start) for w in words]):
                checker.use(use, bare=True)
        else:
            shell.read(snippet)
    prose = Snippet.found_in(path, _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), content), file_lines, first)
    checker.prose(prose)
    checker.queries(prose)

