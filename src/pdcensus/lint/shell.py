"""Shell words as the shell reads them, each with its offset: quotes, expansions, arrays, heredocs.

A command's word travels on as an :class:`Arg` (its text, the snippet and offset it was read at).

Serve scripts hide the flags a runbook warns about: ``ARGS="$ARGS --prefill-interleave 2"``,
``args+=(--checkpoint-policy tip-only)``, ``${DEBUG:+--prefill-span 4}``, continuation
lines. Every finding needs the word's line and column, so the tokenizer must keep offsets.

Which tokenizer, measured by ``bench/lint_shell_corpus.py`` on the lint tests' shell corpus
(16 snippets: the three serve scripts, the runbooks' shell blocks, the deployment fixtures'
``sh -c`` and shell-form lines): ``bashlex`` 0.18, the one bash parser among Python packages, raised
on 3 of 16, and those 3 are exactly the serve scripts (``args=(...)``/``args+=(...)`` arrays:
"unexpected token '('"); it is also GPL-3.0 (this project is Apache-2.0) with no release since
2023-01. ``shlex`` in POSIX mode reads quoting exactly but gives no offsets, and it cut a
``${X:+--flag v}`` or ``$(...)`` word into pieces in 2 of 16. So words are found here (quotes,
``\\`` escapes and continuations, ``$(...)``, ``$((...))``, ``${...}``, backticks,
``NAME=(...)`` arrays, comments, redirections, heredoc bodies; none of the 16 raised), and a
literal word's value is unquoted by :func:`shlex.split` in POSIX mode; a word holding an
expansion keeps it as written.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass

from pdcensus.lint.model import Snippet

RUN_VALUE_OPTIONS = {  # `podman run`/`docker run` options that take a value (the image follows them)
    "-e", "--env", "--env-file", "-v", "--volume", "-p", "--publish", "--name", "-w", "--workdir",
    "-u", "--user", "--network", "--net", "--device", "--gpus", "--mount", "--entrypoint", "--label",
    "-l", "--shm-size", "--ipc", "--pid", "--cpus", "--memory", "-m", "--restart", "--hostname", "-h",
    "--add-host", "--cap-add", "--cap-drop", "--security-opt", "--ulimit", "--tmpfs", "--platform",
    "--pull", "--log-driver", "--log-opt", "--runtime", "--userns", "--group-add", "--stop-signal",
    "--annotation", "--cgroupns", "--uts", "--dns", "--expose", "--health-cmd", "--ip", "--mac-address",
    "--cidfile", "--cpuset-cpus", "--memory-swap", "--secret", "--sysctl", "--timeout", "--pod",
}
_OPS2 = ("&&", "||", ";;", "|&", ";&")
_REDIR = re.compile(r"(?:\d*)(?:&>>|&>|<<<|<<-|<<|<>|>>|>&|<&|>\||<|>)(?:\d+-?|-)?")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")


@dataclass(frozen=True)
class Word:
    """A shell word as written (``raw``) and where it starts in the text."""

    raw: str
    start: int

    @property
    def value(self) -> str:
        return unquote(self.raw)


@dataclass(frozen=True)
class Op:
    """A control operator (``\\n ; & && || | ( ) ;;``) or ``redir`` before a redirection target."""

    text: str
    start: int


@dataclass(frozen=True)
class Heredoc:
    """The body of a heredoc (it may hold ``KEY=VALUE`` lines of an env file)."""

    text: str
    start: int


Token = Word | Op | Heredoc


@dataclass(frozen=True)
class Arg:
    """A word of a command, with the snippet and offset it was read at."""

    raw: str
    snippet: Snippet
    start: int
    conditional: bool = False
    literal: str | None = None  # an argv element as a manifest lists it: no shell quoting

    @property
    def value(self) -> str:
        return self.literal if self.literal is not None else unquote(self.raw)

    def at(self, offset: int = 0) -> tuple[int, int]:
        return self.snippet.position(self.start + offset)


@functools.lru_cache(maxsize=4096)
def unquote(raw: str) -> str:
    """The word's value after quote removal; expansions (``$X``, ``$(...)``) stay as written."""
    raw = raw.replace("\\\n", "")  # a line continuation inside a word joins its halves
    if not any(c in raw for c in "$`"):
        try:
            parts = shlex.split(raw, comments=False, posix=True)
        except ValueError:
            parts = []
        if len(parts) == 1:
            return parts[0]
        if not parts and raw in {"''", '""'}:
            return ""
    out: list[str] = []
    i, quote = 0, ""
    while i < len(raw):
        c = raw[i]
        if quote == "'":
            if c == "'":
                quote = ""
            else:
                out.append(c)
        elif c == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if nxt != "\n" and (not quote or nxt in '"\\$`'):
                out.append(nxt)
            elif nxt != "\n":
                out.append(c + nxt)
            i += 1
        elif c == '"':
            quote = "" if quote else '"'
        elif c == "'" and not quote:
            quote = "'"
        else:
            out.append(c)
        i += 1
    return "".join(out)


def is_assignment(raw: str) -> bool:
    return _ASSIGN.match(raw) is not None


def _group_end(text: str, i: int, opener: str, closer: str) -> int:
    """Index after the ``closer`` that balances ``text[i] == opener``, skipping quotes."""
    depth, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "'" and opener != "{":
            end = text.find("'", i + 1)
            i = n if end < 0 else end + 1
            continue
        if c == '"':
            i = _quoted_end(text, i)
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _quoted_end(text: str, i: int) -> int:
    """Index after the double quote closing the one at ``i``."""
    i += 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        if text.startswith("$(", i):
            i = _group_end(text, i + 1, "(", ")")
            continue
        if c == "`":
            end = text.find("`", i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        i += 1
    return len(text)


def _word_end(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n;&|()<>":
            return i
        if c == "\\":
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            i = n if end < 0 else end + 1
        elif c == '"':
            i = _quoted_end(text, i)
        elif text.startswith("$((", i) or text.startswith("$(", i):
            i = _group_end(text, i + 1, "(", ")")
        elif text.startswith("${", i):
            i = _group_end(text, i + 1, "{", "}")
        elif c == "`":
            end = text.find("`", i + 1)
            i = n if end < 0 else end + 1
        else:
            i += 1
    return n


def tokenize(text: str) -> list[Token]:
    """Words, operators and heredoc bodies of a script, in order, with offsets."""
    out: list[Token] = []
    heredocs: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("\\\n", i):
            i += 2
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "\n":
            out.append(Op("\n", i))
            i += 1
            for delim, strip_tabs in heredocs:
                start = i
                while i < n:
                    end = text.find("\n", i)
                    end = n if end < 0 else end
                    line = text[i:end]
                    i = min(n, end + 1)
                    if (line.lstrip("\t") if strip_tabs else line) == delim:
                        break
                out.append(Heredoc(text[start:i], start))
            heredocs = []
            continue
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        redir = _REDIR.match(text, i)
        if redir and (c in "<>&" or text[redir.end() - 1] in "<>-" or redir.group(0)[0].isdigit()):
            op = redir.group(0)
            if c.isdigit() and not re.match(r"\d+[<>]", op):
                redir = None
            else:
                i = redir.end()
                if op.lstrip("0123456789").startswith("<<") and not op.lstrip("0123456789").startswith("<<<"):
                    while i < n and text[i] in " \t":
                        i += 1
                    end = _word_end(text, i)
                    heredocs.append((unquote(text[i:end]), op.endswith("-")))
                    i = end
                elif not op.endswith(("-",)) and not re.search(r"&\d+$", op):
                    out.append(Op("redir", redir.start()))
                continue
        two = text[i:i + 2]
        if two in _OPS2:
            out.append(Op(two, i))
            i += 2
            continue
        if c in ";&|()":
            out.append(Op(c, i))
            i += 1
            continue
        end = _word_end(text, i)
        raw = text[i:end]
        if _ASSIGN.fullmatch(raw) and text[end:end + 1] == "(":
            end = _group_end(text, end, "(", ")")
            raw = text[i:end]
        out.append(Word(raw, i))
        i = max(end, i + 1)
    return out


_KEYWORDS_PUSH = {"if", "case", "while", "until", "for", "select", "{"}
_KEYWORDS_POP = {"fi", "esac", "done", "}"}
_KEYWORDS_SKIP = {"then", "do", "else", "elif", "!", "time"}


def commands(tokens: list[Token]) -> list[tuple[list[Word], bool]]:
    """Simple commands with whether they run only on some branch (``if``/``case``/``&&``/``||``)."""
    out: list[tuple[list[Word], bool]] = []
    words: list[Word] = []
    stack: list[str] = []
    after_logic = skip_target = False
    header = pattern = False

    def conditional() -> bool:
        return after_logic or any(k in {"if", "case"} for k in stack)

    for tok in tokens:
        if isinstance(tok, Heredoc):
            continue
        if isinstance(tok, Op):
            if tok.text == "redir":
                skip_target = True
                continue
            if pattern and tok.text in {"(", ")", "|"}:
                pattern = tok.text != ")"
                words = []
                continue
            if words:
                out.append((words, conditional()))
            words = []
            header = False
            if tok.text in {"&&", "||"}:
                after_logic = True
            elif tok.text in {"\n", ";", "&"}:
                after_logic = False
            if tok.text in {";;", ";&"}:
                pattern = True
            continue
        if skip_target:
            skip_target = False
            continue
        if header:
            if tok.raw == "in" and stack and stack[-1] == "case":
                header, pattern = False, True
            continue
        if not words:
            if tok.raw in _KEYWORDS_POP and (tok.raw != "esac" or stack):
                if stack:
                    stack.pop()
                pattern = False
                continue
            if pattern:
                continue
            if tok.raw in _KEYWORDS_PUSH:
                stack.append(tok.raw)
                header = tok.raw in {"case", "for", "select"}
                continue
            if tok.raw in _KEYWORDS_SKIP:
                continue
        words.append(tok)
    if words:
        out.append((words, conditional()))
    return out


def function_spans(tokens: list[Token]) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` offsets of each ``name() { ... }`` / ``function name { ... }``."""
    spans: list[tuple[str, int, int]] = []
    words = [t for t in tokens if isinstance(t, (Word, Op)) and not (isinstance(t, Op) and t.text == "\n")]
    for k, tok in enumerate(words):
        if not isinstance(tok, Word):
            continue
        name, at = None, k + 1
        if tok.raw == "function" and k + 1 < len(words) and isinstance(words[k + 1], Word):
            name, at = getattr(words[k + 1], "raw", ""), k + 2
            if at + 1 < len(words) and getattr(words[at], "text", "") == "(" \
                    and getattr(words[at + 1], "text", "") == ")":
                at += 2
        elif k + 2 < len(words) and getattr(words[k + 1], "text", "") == "(" and getattr(words[k + 2], "text", "") == ")":
            name, at = tok.raw, k + 3
        if name is None or at >= len(words) or getattr(words[at], "raw", "") != "{":
            continue
        depth = 0
        for end in range(at, len(words)):
            raw = getattr(words[end], "raw", None)
            depth += 1 if raw == "{" else -1 if raw == "}" else 0
            if depth == 0:
                spans.append((name, tok.start, words[end].start))
                break
    return spans
