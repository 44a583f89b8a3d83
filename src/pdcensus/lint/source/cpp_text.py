"""A C++ token stream good enough to read string literals and their brackets, never to compile.

The pinned-source schema (:mod:`pdcensus.lint.source.flags`) needs the string literals of a
``core/config.cpp``-shaped file with their 1-based lines, adjacent literals concatenated as
the compiler would (``"a" "b"`` is ``"ab"``, across lines and comments), and the bracket
structure around them (which ``{...}`` or ``(...)`` group a literal is an item of). No
library parses C++ as plain text without a compiler toolchain, and the file is only ever
read, never executed or built, so this is a small hand-written lexer: comments, ordinary
and raw string literals with encoding prefixes, character literals, identifiers, numbers
and punctuation. Preprocessor ``#include``/``#pragma`` lines are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


FLAG_RE = re.compile(r"--[a-z0-9][a-z0-9-]*[a-z0-9]")
WHOLE_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*[a-z0-9]$")


class TokenKind(str, Enum):
    STRING = "string"
    IDENT = "ident"
    NUMBER = "number"
    PUNCT = "punct"


@dataclass(frozen=True)
class Token:
    """One token; ``depth`` is the bracket depth (``{[(``) the token sits at."""

    kind: TokenKind
    text: str
    line: int
    depth: int


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "?": "?",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"\.?[0-9](?:[0-9A-Za-z_.']|[eEpP][+-])*")
_STRING_PREFIX = re.compile(r'(?:u8|u|U|L)?R?"')
_OPENERS = "{[("
_CLOSERS = "}])"


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                m = re.match(r"[0-9A-Fa-f]+", body[i + 2:])
                if m:
                    out.append(chr(int(m.group(0), 16) % 0x110000))
                    i += 2 + len(m.group(0))
                    continue
            if nxt in "01234567":
                m = re.match(r"[0-7]{1,3}", body[i + 1:])
                assert m is not None
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def tokenize(text: str) -> list[Token]:
    """Tokens of a C++ source, adjacent string literals already concatenated."""
    tokens: list[Token] = []
    i, line, depth, n = 0, 1, 0, len(text)
    at_line_start = True
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if ch in " \t\r\f\v":
            i += 1
            continue
        if at_line_start and ch == "#":
            directive = re.match(r"#\s*(include|pragma|line|error|warning)\b", text[i:])
            if directive:
                while i < n and text[i] != "\n":  # skip to end of line (continuations rare here)
                    i += 1
                continue
        at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
            continue
        m = _STRING_PREFIX.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            start_line = line
            if m.group(0).endswith('R"'):
                open_paren = text.find("(", m.end())
                delim = text[m.end():open_paren] if open_paren >= 0 else ""
                close = text.find(")" + delim + '"', open_paren + 1) if open_paren >= 0 else -1
                if open_paren < 0 or close < 0:
                    value, end = text[m.end():], n
                else:
                    value, end = text[open_paren + 1:close], close + len(delim) + 2
            else:
                j = m.end()
                while j < n and text[j] != '"' and text[j] != "\n":
                    j += 2 if text[j] == "\\" else 1
                value, end = _unescape(text[m.end():min(j, n)]), min(j + 1, n)
            line += text.count("\n", i, end)
            i = end
            prev = tokens[-1] if tokens else None
            if prev is not None and prev.kind is TokenKind.STRING:
                tokens[-1] = Token(TokenKind.STRING, prev.text + value, prev.line, prev.depth)
            else:
                tokens.append(Token(TokenKind.STRING, value, start_line, depth))
            continue
        if ch == "'":
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            tokens.append(Token(TokenKind.NUMBER, text[i:j + 1], line, depth))
            i = j + 1
            continue
        m = _IDENT.match(text, i)
        if m:
            tokens.append(Token(TokenKind.IDENT, m.group(0), line, depth))
            i = m.end()
            continue
        m = _NUMBER.match(text, i)
        if m:
            tokens.append(Token(TokenKind.NUMBER, m.group(0), line, depth))
            i = m.end()
            continue
        if ch in _OPENERS:
            tokens.append(Token(TokenKind.PUNCT, ch, line, depth))
            depth += 1
        elif ch in _CLOSERS:
            depth = max(0, depth - 1)
            tokens.append(Token(TokenKind.PUNCT, ch, line, depth))
        else:
            tokens.append(Token(TokenKind.PUNCT, ch, line, depth))
        i += 1
    return tokens


def enclosing_group(tokens: list[Token], index: int) -> tuple[int, int] | None:
    """``(open, close)`` indices of the innermost bracket pair around ``tokens[index]``."""
    depth = tokens[index].depth
    if depth == 0:
        return None
    open_at = index - 1
    while open_at >= 0 and not (tokens[open_at].depth == depth - 1
                                and tokens[open_at].text in _OPENERS
                                and tokens[open_at].kind is TokenKind.PUNCT):
        open_at -= 1
    close_at = index + 1
    while close_at < len(tokens) and not (tokens[close_at].depth == depth - 1
                                          and tokens[close_at].text in _CLOSERS
                                          and tokens[close_at].kind is TokenKind.PUNCT):
        close_at += 1
    if open_at < 0 or close_at >= len(tokens):
        return None
    return open_at, close_at


def group_items(tokens: list[Token], open_at: int, close_at: int) -> list[list[Token]]:
    """The comma-separated items directly inside a bracket pair (nested groups kept whole)."""
    inner_depth = tokens[open_at].depth + 1
    items: list[list[Token]] = [[]]
    for tok in tokens[open_at + 1:close_at]:
        if tok.kind is TokenKind.PUNCT and tok.text == "," and tok.depth == inner_depth:
            items.append([])
        else:
            items[-1].append(tok)
    return [item for item in items if item]


def kebab(identifier: str) -> str:
    """``checkpointPolicy``, ``kCheckpointPolicy``, ``FLAGS_checkpoint_policy`` -> ``--checkpoint-policy``."""
    ident = re.sub(r"^(?:k(?=[A-Z])|FLAGS_|flag_|opt_|kFlag)", "", identifier)
    ident = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", ident)
    return "--" + ident.lower().replace("_", "-")


def ident_flag(identifier: str, known: set[str]) -> str | None:
    """The known flag an identifier names (``checkpoint_policy``, ``checkpointPolicyKind``)."""
    spelled = kebab(identifier)
    if spelled in known:
        return spelled
    prefixes = [f for f in known if spelled.startswith(f + "-")]
    return max(prefixes, key=len) if prefixes else None


def flag_mentions(tokens: list[Token], known: set[str]) -> list[tuple[int, str]]:
    """``(token index, flag)`` of every known flag a literal or an identifier names."""
    mentions: list[tuple[int, str]] = []
    for i, tok in enumerate(tokens):
        if tok.kind is TokenKind.STRING:
            for m in FLAG_RE.finditer(tok.text):
                if m.group(0) in known:
                    mentions.append((i, m.group(0)))
        elif tok.kind is TokenKind.IDENT:
            flag = ident_flag(tok.text, known)
            if flag is not None:
                mentions.append((i, flag))
    return mentions
