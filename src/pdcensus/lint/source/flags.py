"""The pinned-source flag schema: flags, arguments, help and enum members, read as text.

The runbook's rule: read ``core/config.cpp`` (help table + validator) in the PINNED image
source before writing any flag or enum member into a runbook, and enumerate members from
the validator's error string, never from memory, because ``config_parse`` refuses unknown
enum values at boot. This module reads such a source (or an engine's ``--help`` text) and
returns a :class:`FlagSchema`.

C++ sources are read with :mod:`pdcensus.lint.source.cpp_text` (literals, brackets, adjacent
literal concatenation). A *help-table row* is any bracket group (struct initialiser,
macro call, ``{ "--flag", "ARG", "help" }`` row) that has a ``"--flag"`` literal as a whole
item plus more string items; designated initialisers (``.help = "..."``) are read by field
name, other rows by position (flag, argument, help). An *enum list* is a string such as
``expected one of: a, b, c``, ``a | b | c``, ``must be one of {a,b,c}`` or
``valid values are a, b and c``; it belongs to the ``--flag`` named in the same string,
else to the nearest flag named before it (as a literal or an identifier such as
``checkpoint_policy``) in the same top-level block, else to the flag whose argument lists
the same members. Nothing is ever compiled or executed.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from pdcensus.lint.source.cpp_rules import Refusal, functions, read_refusals
from pdcensus.lint.source.cpp_tables import macro_rows, table_members
from pdcensus.lint.source.cpp_decls import cli11_checks, dashless_rows, macro_declarations, table_bounds
from pdcensus.lint.source.cpp_text import (
    FLAG_RE as FLAG_RE, WHOLE_FLAG as _WHOLE_FLAG, Token, TokenKind, enclosing_group, flag_mentions as _flag_mentions, group_items,
    ident_flag as _ident_flag, kebab as _kebab, tokenize,
)
from pdcensus.errors import DataError

_MEMBER = r"[`'\"]?([A-Za-z0-9<](?:[A-Za-z0-9_.+<>-]*[A-Za-z0-9_+>])?)[`'\"]?"
_SEP = r"(?:\s*[,|/]\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+)"
_STOP_WORDS = {"got", "but", "was", "found", "received", "saw", "not", "is", "instead"}
_INTRO = re.compile(
    r"(?i)(?:must\s+be\s+one\s+of|expected\s+one\s+of|one\s+of|valid\s+(?:values|choices|options"
    r"|names|policies)(?:\s+(?:are|is))?|(?:choices|options)(?:\s+are)?|allowed(?:\s+values)?"
    r"(?:\s+are)?|accepted(?:\s+values)?(?:\s+are)?|supported(?:\s+values)?(?:\s+are)?|possible\s+values"
    r"|expected|must\s+be)\s*[:=]?\s*[\[{(<]?\s*"
)
_LIST = re.compile(_MEMBER + r"(?:" + _SEP + _MEMBER + r")+")
_PIPE_LIST = re.compile(r"(?<![\w|-])" + _MEMBER + r"(?:\s*\|\s*" + _MEMBER + r")+")
_BRACED_LIST = re.compile(r"\{\s*" + _MEMBER + r"(?:\s*,\s*" + _MEMBER + r")+\s*\}")
_INTEGER_PHRASE = re.compile(
    r"(?i)\b(?:an?\s+)?(?:positive|non-negative|nonnegative|whole)?\s*(?:integer|int|number|count)\b")
_DEFAULT = re.compile(r"(?i)[\[(]\s*default[:=]?\s*[`'\"]?([^\])`'\"]+)[`'\"]?\s*[\])]")
_FIELD_FLAG = {"name", "flag", "long", "long_name", "option", "opt", "key"}
_FIELD_ARG = {"arg", "argument", "metavar", "value", "param", "value_name"}
_FIELD_HELP = {"help", "desc", "description", "doc", "text", "summary"}
_FIELD_DEFAULT = {"default", "def", "default_value", "fallback"}


class SchemaKind(str, Enum):
    CPP_SOURCE = "cpp-source"
    HELP_TEXT = "help-text"


_NUMERIC_PLACEHOLDERS = {"N", "M", "K", "INT", "INTEGER", "NUM", "NUMBER", "COUNT", "TOKENS",
                         "SLOTS", "BYTES", "SECONDS", "MS", "PORT", "SIZE"}


def is_placeholder(member: str) -> bool:
    """``N``, ``POLICY``, ``<n>``: an argument name, not an enum member."""
    return member.isupper() or (member.startswith("<") and member.endswith(">"))


def is_numeric_placeholder(member: str) -> bool:
    """``N``, ``TOKENS``, ``<n>``: a placeholder that stands for an integer."""
    return member.strip("<>").upper() in _NUMERIC_PLACEHOLDERS and is_placeholder(member)


def _members_and_integer(members: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """Split a list into real members and whether an integer placeholder stood among them."""
    integer = any(is_numeric_placeholder(m) for m in members)
    values = tuple(m for m in members if not is_placeholder(m))
    return (values if len(values) >= 2 or (values and integer) else ()), integer


@dataclass(frozen=True)
class FlagSpec:
    """One flag as the pinned source declares it."""

    name: str
    argument: str = ""
    help: str = ""
    line: int = 0
    choices: tuple[str, ...] = ()
    choices_origin: str = ""
    accepts_integer: bool = False
    default: str | None = None

    @property
    def takes_value(self) -> bool:
        return bool(self.argument or self.choices or self.accepts_integer)

    def refusal(self, value: str) -> str | None:
        """Why config_parse would refuse ``value`` (None when it is accepted or unknowable)."""
        if not self.choices:
            return None
        if value in self.choices:
            return None
        if self.accepts_integer and re.fullmatch(r"[+-]?\d+", value):
            return None
        allowed = ", ".join(self.choices) + (", or an integer" if self.accepts_integer else "")
        return f"{self.name} {value!r} is not a member (members: {allowed})"

    def integer_expected(self, value: str) -> bool:
        """True when the flag takes only an integer (``N``) and ``value`` is not one."""
        return (self.accepts_integer and not self.choices
                and re.fullmatch(r"[+-]?\d+", value) is None)

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "argument": self.argument, "help": self.help, "line": self.line,
                "choices": list(self.choices), "choices_origin": self.choices_origin,
                "accepts_integer": self.accepts_integer, "default": self.default}


@dataclass(frozen=True)
class FlagSchema:
    """Every flag a pinned build accepts, with members read from its validator."""

    flags: Mapping[str, FlagSpec]
    source: str
    kind: SchemaKind
    unattached_enums: tuple[tuple[int, tuple[str, ...]], ...] = field(default=())
    refusals: tuple[Refusal, ...] = field(default=())

    def __contains__(self, flag: object) -> bool:
        return flag in self.flags

    def get(self, flag: str) -> FlagSpec | None:
        return self.flags.get(flag)

    def suggest(self, flag: str) -> list[str]:
        return difflib.get_close_matches(flag, list(self.flags), n=3, cutoff=0.6)


def enum_lists(text: str) -> list[tuple[str, ...]]:
    """Every member list an error string spells out (each with two members or more)."""
    text = _INTEGER_PHRASE.sub("N", text)
    found: list[tuple[int, tuple[str, ...]]] = []
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, body: str) -> None:
        if any(a < end and start < b for a, b in taken):
            return
        members = []
        for m in re.finditer(_MEMBER, body):
            word = m.group(1)
            if word.lower() in _STOP_WORDS:
                break
            members.append(word)
        members = [w for w in members if not w.lower() in {"or", "and"}]
        if len(members) >= 2:
            taken.append((start, end))
            found.append((start, tuple(dict.fromkeys(members))))

    for intro in _INTRO.finditer(text):
        m = _LIST.match(text, intro.end())
        if m:
            add(m.start(), m.end(), m.group(0))
    for pattern in (_BRACED_LIST, _PIPE_LIST):
        for m in pattern.finditer(text):
            add(m.start(), m.end(), m.group(0))
    return [members for _, members in sorted(found)]


def _argument_members(argument: str) -> tuple[tuple[str, ...], bool]:
    """Members and integer-acceptance spelled by an argument (``auto|N``, ``{a,b}``)."""
    lists = enum_lists(argument)
    if lists:
        return _members_and_integer(lists[0])
    word = argument.strip()
    return (), bool(word) and is_numeric_placeholder(word)


def _help_rows(tokens: list[Token]) -> dict[str, FlagSpec]:
    rows: dict[str, FlagSpec] = {}
    for i, tok in enumerate(tokens):
        is_literal_flag = tok.kind is TokenKind.STRING and _WHOLE_FLAG.match(tok.text)
        is_macro_ident = (tok.kind is TokenKind.IDENT and i >= 2 and tokens[i - 1].text == "("
                          and tokens[i - 2].kind is TokenKind.IDENT
                          and re.search(r"FLAG|OPTION|OPT\b", tokens[i - 2].text) is not None
                          and tokens[i - 2].text not in {"ABSL_FLAG", "ABSL_RETIRED_FLAG"})
        if not (is_literal_flag or is_macro_ident):
            continue
        group = enclosing_group(tokens, i)
        if group is None:
            continue
        items = group_items(tokens, *group)
        named: dict[str, str] = {}
        positional: list[str] = []
        flag_name = tok.text if is_literal_flag else _kebab(tok.text)
        seen_flag = False
        for item in items:
            if len(item) >= 3 and item[0].text == "." and item[2].text == "=":
                strings = [t.text for t in item[3:] if t.kind is TokenKind.STRING]
                if len(strings) == 1 and len(item) == 4:
                    named[item[1].text.lower()] = strings[0]
                continue
            if tok in item:
                if len(item) == 1:
                    seen_flag = True
                continue
            if not seen_flag:
                continue
            if all(t.kind is TokenKind.STRING for t in item) and len(item) == 1:
                positional.append(item[0].text)
            elif item[0].text == "{" and all(t.kind is TokenKind.STRING or t.text in "{},"
                                             for t in item):
                positional.extend(t.text for t in item if t.kind is TokenKind.STRING)
        flag_field = next((k for k in named if k in _FIELD_FLAG), None)
        if named and flag_field is not None and named[flag_field] == flag_name:
            seen_flag = True
            argument = next((v for k, v in named.items() if k in _FIELD_ARG), "")
            help_text = next((v for k, v in named.items() if k in _FIELD_HELP), "")
            default = next((v for k, v in named.items() if k in _FIELD_DEFAULT), None)
        elif seen_flag and positional:
            if len(positional) == 1:
                only = positional[0]
                metavar = re.fullmatch(r"[A-Z0-9_<>\[\]{}.-]+|\S*[|,]\S*", only) is not None
                argument, help_text = (only, "") if metavar else ("", only)
            else:
                argument, help_text = positional[0], " ".join(positional[1:])
            default = None
        else:
            continue
        if default is None:
            m = _DEFAULT.search(help_text)
            default = m.group(1).strip() if m else None
        members, integer = _argument_members(argument)
        spec = FlagSpec(flag_name, argument, help_text, tok.line, choices=members,
                        choices_origin=f"help table line {tok.line}" if members else "",
                        accepts_integer=integer, default=default)
        old = rows.get(flag_name)
        if old is None or (not old.help and spec.help):
            rows[flag_name] = spec
    return rows


def _flag_in_prose(text: str, known: Mapping[str, object]) -> str | None:
    """The longest known flag spelled in words (``checkpoint policy``) inside a message."""
    for flag in sorted(known, key=len, reverse=True):
        words = flag[2:].split("-")
        if len(words) >= 2 and re.search(r"(?i)\b" + r"[ _-]".join(words) + r"\b", text):
            return flag
    return None


def _flag_of_statement(tokens: list[Token], index: int, known: set[str]) -> str | None:
    """The one flag a statement names (``if (flag == "--port") return parse_int(...)``)."""
    lo, hi = _statement(tokens, index)
    literal = {t.text for t in tokens[lo:hi] if t.kind is TokenKind.STRING and t.text in known}
    if len(literal) == 1:
        return literal.pop()
    idents = {f for t in tokens[lo:hi] if t.kind is TokenKind.IDENT for f in [_ident_flag(t.text, known)] if f}
    return idents.pop() if len(idents) == 1 and not literal else None


def parse_config_source(text: str, source: str = "<config.cpp>") -> FlagSchema:
    """The schema of a ``core/config.cpp``-shaped source: help table + validator enums."""
    tokens = tokenize(text)
    rows = _help_rows(tokens)
    for flag, (argument, help_text, line) in macro_rows(tokens).items():
        if flag not in rows:
            members, integer = _argument_members(argument)
            default_m = _DEFAULT.search(help_text)
            rows[flag] = FlagSpec(flag, argument, help_text, line, members,
                                  f"help table line {line}" if members else "", integer,
                                  default_m.group(1).strip() if default_m else None)
    declared, bindings = macro_declarations(tokens)
    for d in declared + dashless_rows(tokens):
        if d.name not in rows:
            rows[d.name] = FlagSpec(d.name, d.argument, d.help, d.line, accepts_integer=d.integer, default=d.default)
    for tok in tokens:  # a flag the parser compares against is a flag it accepts
        if tok.kind is TokenKind.STRING and _WHOLE_FLAG.match(tok.text) and tok.text not in rows:
            rows[tok.text] = FlagSpec(tok.text, line=tok.line)
    known = set(rows)
    mentions = _flag_mentions(tokens, known)
    unattached: list[tuple[int, tuple[str, ...]]] = []
    row_lines = {spec.line for spec in rows.values()}
    for i, tok in enumerate(tokens):
        if tok.kind is not TokenKind.STRING or tok.line in row_lines:
            continue
        pieces = tok.text.split("\n") if len(FLAG_RE.findall(tok.text)) > 1 else [tok.text]
        for n, members in ((n, m) for n, piece in enumerate(pieces) for m in enum_lists(piece)):
            owners = _owners(tokens, i, pieces[n], mentions, rows, members)  # a usage text: its line's flag
            if not owners:
                unattached.append((tok.line + n, members))
            values, integer = _members_and_integer(members)
            for flag in owners:
                spec = rows[flag]
                if spec.choices_origin.startswith("validator") or not values:
                    continue  # the first validator string wins; later ones repeat it
                rows[flag] = replace(spec, choices=values, choices_origin=f"validator line {tok.line + n}",
                                     accepts_integer=integer)
    cli11 = cli11_checks(tokens, known)
    bodies = {f[0]: (f[2], f[3], f[4]) for f in functions(tokens)}
    tabled = {**table_members(tokens, mentions, bodies), **{f: (*m, False) for f, m in cli11.members.items()}}
    for flag, (members, line, integers) in tabled.items():
        if not rows[flag].choices_origin.startswith("validator"):
            rows[flag] = replace(rows[flag], choices=members, choices_origin=f"validator table line {line}",
                                 accepts_integer=rows[flag].accepts_integer or integers)
    for flag, default in cli11.defaults.items():
        rows[flag] = replace(rows[flag], default=default)
    for flag in cli11.options - {f for f, spec in rows.items() if spec.argument}:
        rows[flag] = replace(rows[flag], argument="VALUE")
    if not rows:
        raise DataError(f"{source}: no flag found (expected a help table of \"--flag\" string "
                        "literals, or --help text)")
    refusals = read_refusals(tokens, lambda ident: _ident_flag(ident, known),
                             lambda index: _flag_of_statement(tokens, index, known), bindings) + cli11.refusals \
        + table_bounds(tokens, known)
    return FlagSchema(dict(sorted(rows.items())), source, SchemaKind.CPP_SOURCE, tuple(unattached),
                      tuple(refusals))


_BODY_QUALIFIERS = {"const", "noexcept", "override", "final"}


def _function_body(tokens: list[Token], index: int) -> tuple[int, int, str | None] | None:
    """``(open, close, name)`` of the outermost function body around ``tokens[index]``."""
    found = None
    at = index
    while tokens[at].depth > 0:
        group = enclosing_group(tokens, at)
        if group is None:
            break
        open_at, close_at = group
        if tokens[open_at].text == "{":
            j = open_at - 1
            while j >= 0 and tokens[j].text in _BODY_QUALIFIERS:
                j -= 1
            if j >= 0 and tokens[j].text == ")":
                k = j - 1
                while k >= 0 and not (tokens[k].text == "(" and tokens[k].depth == tokens[j].depth):
                    k -= 1
                name = tokens[k - 1].text if k > 0 and tokens[k - 1].kind is TokenKind.IDENT else None
                found = (open_at, close_at, name)
        at = open_at
    return found


def _statement(tokens: list[Token], index: int) -> tuple[int, int]:
    lo = index
    while lo > 0 and tokens[lo - 1].text not in {";", "{", "}"}:
        lo -= 1
    hi = index
    while hi < len(tokens) and tokens[hi].text != ";":
        hi += 1
    return lo, hi


def _owners(tokens: list[Token], index: int, text: str, mentions: list[tuple[int, str]],
            rows: Mapping[str, FlagSpec], members: tuple[str, ...]) -> list[str]:
    """The flags an enum list belongs to (several when a shared helper validates them)."""
    inside = [m.group(0) for m in FLAG_RE.finditer(text) if m.group(0) in rows]
    if inside:
        return inside[:1]
    spelled = _flag_in_prose(text, rows)
    if spelled is not None:
        return [spelled]
    body = _function_body(tokens, index)
    if body is not None:
        floor = body[0]
    else:
        group = enclosing_group(tokens, index)
        floor = group[0] if group else 0
    before = [flag for at, flag in mentions if floor <= at < index]
    if before:
        return before[-1:]
    if body is not None and body[2] is not None:
        callers: list[str] = []
        for i, tok in enumerate(tokens):
            if (tok.text == body[2] and tok.kind is TokenKind.IDENT and not body[0] <= i <= body[1]
                    and i + 1 < len(tokens) and tokens[i + 1].text == "("):
                lo, hi = _statement(tokens, i)
                callers.extend(flag for at, flag in mentions if lo <= at <= hi and flag not in callers)
        if callers:
            return callers
    wanted = set(members)
    return [flag for flag, spec in rows.items()
            if wanted and enum_lists(spec.argument) and wanted <= set(enum_lists(spec.argument)[0])][:1]
