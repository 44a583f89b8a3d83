"""Flags declared by the common C/C++ flag libraries, with the checks those libraries attach.

A pinned source need not hold a hand-written help table. The declarations read here, each a
library's documented form (gflags ``gflags/gflags.h`` 2.2; Abseil ``absl/flags/flag.h``
LTS 2024-01; CLI11 ``CLI/Validators.hpp`` 2.4; glibc ``getopt_long(3)``):

* gflags ``DEFINE_int32(name, default, "help")`` (``bool``, ``int32``, ``int64``, ``uint32``,
  ``uint64``, ``double``, ``string``) and ``DEFINE_validator(name, &Fn)``: ``Fn``'s value
  parameter stands for the flag, so its ``if (value < 0 ...) return false`` becomes a bound;
* Abseil ``ABSL_FLAG(type, name, default, "help")``; ``absl::GetFlag(FLAGS_name)`` in a
  validator reads as the flag (see :mod:`pdcensus.lint.source.cpp_rules`);
* CLI11 ``add_option("--name", var, "help")`` with its chained ``->check(CLI::Range(a, b))``,
  ``CLI::PositiveNumber``, ``CLI::NonNegativeNumber``, ``CLI::IsMember({...})`` and
  ``->default_val(v)``;
* ``struct option`` tables for ``getopt_long`` (``{"name", required_argument, 0, 'n'}``);
* help tables whose rows name flags without the dashes (``{"prefill-interleave", "N",
  "help"}``) in a source that pastes ``"--"`` on when it prints or matches them.

A flag declared by an identifier is spelled with dashes (``prefill_interleave`` is
``--prefill-interleave``), the runbooks' spelling; both spellings are accepted for these.
Nothing is compiled; every declaration keeps its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pdcensus.lint.source.cpp_rules import Expr, Refusal
from pdcensus.lint.source.cpp_text import Token, TokenKind, group_items

_GFLAGS = re.compile(r"^DEFINE_(bool|int32|int64|uint32|uint64|double|string)$")
_ABSL = {"ABSL_FLAG", "ABSL_RETIRED_FLAG"}
_INTEGER_TYPES = re.compile(r"^(?:u?int(?:8|16|32|64)?(?:_t)?|long|short|size_t|unsigned|signed)$")
_GETOPT_ARG = {"required_argument": "ARG", "optional_argument": "[ARG]", "no_argument": "",
               "1": "ARG", "2": "[ARG]", "0": ""}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*[a-z0-9]$")


@dataclass(frozen=True)
class Declared:
    """One flag as a flag library declares it."""

    name: str
    argument: str
    help: str
    line: int
    default: str | None = None
    integer: bool = False
    choices: tuple[str, ...] = ()


def _strings(item: list[Token]) -> str:
    return "".join(t.text for t in item if t.kind is TokenKind.STRING)


def _close(tokens: list[Token], open_at: int) -> int:
    depth = tokens[open_at].depth
    for j in range(open_at + 1, len(tokens)):
        if tokens[j].depth == depth and tokens[j].text == ")":
            return j
    return len(tokens) - 1


def _default(item: list[Token]) -> str | None:
    if len(item) == 1 and item[0].kind in {TokenKind.NUMBER, TokenKind.STRING}:
        return item[0].text
    if len(item) == 2 and item[0].text == "-" and item[1].kind is TokenKind.NUMBER:
        return "-" + item[1].text
    return None


def macro_declarations(tokens: list[Token]) -> tuple[list[Declared], dict[str, dict[str, str]]]:
    """gflags/Abseil/getopt declarations, and ``{validator function: {parameter: flag}}``."""
    found: list[Declared] = []
    bindings: dict[str, dict[str, str]] = {}
    for i, tok in enumerate(tokens[:-1]):
        if tok.kind is not TokenKind.IDENT or tokens[i + 1].text != "(":
            continue
        gflags = _GFLAGS.match(tok.text)
        if gflags is None and tok.text not in _ABSL and tok.text != "DEFINE_validator":
            continue
        items = group_items(tokens, i + 1, _close(tokens, i + 1))
        if tok.text == "DEFINE_validator" and len(items) == 2:
            fn = [t.text for t in items[1] if t.kind is TokenKind.IDENT]
            if fn:
                bindings[fn[-1]] = {"": "--" + items[0][0].text.replace("_", "-")}
            continue
        if gflags is not None and len(items) >= 3:
            kind, name_item, default_item, help_item = gflags.group(1), items[0], items[1], items[-1]
        elif tok.text in _ABSL and len(items) >= 4:
            idents = [t.text for t in items[0] if t.kind is TokenKind.IDENT]
            kind, name_item, default_item, help_item = (idents or [""])[-1], items[1], items[2], items[-1]
        else:
            continue
        if len(name_item) != 1 or name_item[0].kind is not TokenKind.IDENT:
            continue
        integer = bool(_INTEGER_TYPES.match(kind.replace("std :: ", "")))
        argument = "" if kind == "bool" else ("N" if integer else kind.upper())
        for name in dict.fromkeys((name_item[0].text.replace("_", "-"), name_item[0].text)):
            found.append(Declared("--" + name, argument, _strings(help_item), tok.line, _default(default_item),
                                  integer))
    for i, tok in enumerate(tokens[:-2]):  # getopt_long: {"name", required_argument, flag, val}
        if tok.text != "{" or tokens[i + 1].kind is not TokenKind.STRING or not _NAME.match(tokens[i + 1].text):
            continue
        close = i + 1
        while close < len(tokens) and not (tokens[close].text == "}" and tokens[close].depth == tok.depth):
            close += 1
        items = group_items(tokens, i, close)
        if len(items) == 4 and len(items[1]) == 1 and items[1][0].text in _GETOPT_ARG:
            found.append(Declared("--" + tokens[i + 1].text, _GETOPT_ARG[items[1][0].text], "", tok.line))
    return found, bindings


@dataclass
class Cli11:
    """What CLI11 calls add to the declared flags: refusals, members, defaults, value-taking options."""

    refusals: list[Refusal]
    members: dict[str, tuple[tuple[str, ...], int]]
    defaults: dict[str, str]
    options: set[str]


def cli11_checks(tokens: list[Token], known: set[str]) -> Cli11:
    """CLI11 ``->check(...)``/``->default_val(...)`` chains after ``add_option("--flag", ...)``."""
    refusals: list[Refusal] = []
    members: dict[str, tuple[tuple[str, ...], int]] = {}
    defaults: dict[str, str] = {}
    options: set[str] = set()
    for i, tok in enumerate(tokens[:-2]):
        if tok.kind is not TokenKind.IDENT or not tok.text.startswith("add_") or tokens[i + 1].text != "(" \
                or tokens[i + 2].kind is not TokenKind.STRING:
            continue
        flag = next((f for f in re.split(r"[ ,]+", tokens[i + 2].text) if f in known), None)
        if flag is None:
            continue
        if tok.text == "add_option":
            options.add(flag)
        at = _close(tokens, i + 1) + 1
        while at + 2 < len(tokens) and tokens[at].text == "-" and tokens[at + 1].text == ">" \
                and tokens[at + 2].kind is TokenKind.IDENT and at + 3 < len(tokens) and tokens[at + 3].text == "(":
            method, close = tokens[at + 2].text, _close(tokens, at + 3)
            inner = tokens[at + 4:close]
            words = [t.text for t in inner]
            if method in {"check", "transform"}:
                refusal = _validator(inner, flag, tokens[at + 2].line)
                if refusal is not None:
                    refusals.append(refusal)
                if "IsMember" in words:
                    values = tuple(t.text for t in inner if t.kind is TokenKind.STRING)
                    if values:
                        members[flag] = (values, tokens[at + 2].line)
            elif method == "default_val" and len(inner) >= 1:
                value = _default(inner)
                if value is not None:
                    defaults[flag] = value
            at = close + 1
    return Cli11(refusals, members, defaults, options)


def _validator(inner: list[Token], flag: str, line: int) -> Refusal | None:
    words = [t.text for t in inner]
    ref: Expr = ("flag", flag)
    if "PositiveNumber" in words:
        return Refusal(("<=", ref, ("num", 0.0)), line, "CLI::PositiveNumber", f"CLI11 check at line {line},")
    if "NonNegativeNumber" in words:
        return Refusal(("<", ref, ("num", 0.0)), line, "CLI::NonNegativeNumber", f"CLI11 check at line {line},")
    if "Range" in words and "(" in words[words.index("Range"):]:
        start = words.index("Range") + 1
        close = start
        depth = 0
        for close in range(start, len(words)):
            depth += {"(": 1, ")": -1}.get(words[close], 0)
            if depth == 0:
                break
        numbers = re.findall(r"-?\s*\d+(?:\.\d+)?", " ".join(words[start + 1:close]))
        bounds = [float(n.replace(" ", "")) for n in numbers]
        if len(bounds) == 1:
            bounds = [0.0, bounds[0]]
        if len(bounds) == 2:
            cond: Expr = ("||", ("<", ref, ("num", bounds[0])), (">", ref, ("num", bounds[1])))
            return Refusal(cond, line, f"CLI::Range({bounds[0]:g}, {bounds[1]:g})", f"CLI11 check at line {line},")
    return None


_KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+$")
_WORD = re.compile(r"^[a-z][a-z0-9]*$")
_INT_KIND = re.compile(r"(?i)(?:^|::|k)(?:int|integer|long|size|count|uint\w*|int\w*)$")


def dashless_rows(tokens: list[Token]) -> list[Declared]:
    """Help tables that list names without the dashes (``{"prefill-interleave", "N", "help"}``),
    in a source that prints or matches them with ``"--"`` pasted on (``"--" + row.name``)."""
    if not any(t.kind is TokenKind.STRING and (t.text == "--" or t.text.startswith(("--%", "--{"))) for t in tokens):
        return []
    found: list[Declared] = []
    for i, tok in enumerate(tokens):
        if tok.text != "{" or tok.kind is not TokenKind.PUNCT:
            continue
        close = i + 1
        while close < len(tokens) and not (tokens[close].text == "}" and tokens[close].depth == tok.depth):
            close += 1
        rows = [item for item in group_items(tokens, i, close) if item[0].text == "{"]
        named = [row for row in rows if len(row) > 2 and row[1].kind is TokenKind.STRING
                 and (_KEBAB.match(row[1].text) or _WORD.match(row[1].text))
                 and any(t.kind is TokenKind.STRING and " " in t.text for t in row[2:])]  # a help text
        if len(named) < 3 or len(named) < len(rows) or sum(bool(_KEBAB.match(r[1].text)) for r in named) * 2 < len(named):
            continue
        for row in named:
            strings = [t.text for t in row[2:] if t.kind is TokenKind.STRING]
            idents = [t.text for t in row[2:] if t.kind is TokenKind.IDENT]
            metavar = strings[0] if len(strings) >= 2 or (strings and re.fullmatch(r"[A-Z<][A-Z0-9_|<>.-]*", strings[0])) \
                else ""
            integer = any(_INT_KIND.search(x) for x in idents) or metavar in {"N", "INT", "<n>", "TOKENS", "COUNT"}
            found.append(Declared("--" + row[1].text, metavar or ("N" if integer else ""), strings[-1] if strings else "",
                                  row[1].line, None, integer))
    return found


_LOWER = {"min", "minimum", "lo", "low", "lower", "min_value", "minvalue", "floor"}
_UPPER = {"max", "maximum", "hi", "high", "upper", "max_value", "maxvalue", "ceiling"}


def _struct_fields(tokens: list[Token]) -> dict[str, list[str]]:
    """``struct Name { type a; type b, c; }`` -> ``{"Name": ["a", "b", "c"]}``."""
    structs: dict[str, list[str]] = {}
    for i, tok in enumerate(tokens[:-2]):
        if tok.text not in {"struct", "class"} or tokens[i + 1].kind is not TokenKind.IDENT or tokens[i + 2].text != "{":
            continue
        close = i + 3
        while close < len(tokens) and not (tokens[close].text == "}" and tokens[close].depth == tokens[i + 2].depth):
            close += 1
        fields: list[str] = []
        decl: list[Token] = []
        for t in tokens[i + 3:close]:
            if t.text in {";", ","} and t.depth == tokens[i + 2].depth + 1:
                names = [d.text for d in decl if d.kind is TokenKind.IDENT]
                if names and "(" not in [d.text for d in decl]:
                    fields.append(names[-1])
                decl = [] if t.text == ";" else decl[:1]
            else:
                decl.append(t)
        structs[tokens[i + 1].text] = fields
    return structs


def table_bounds(tokens: list[Token], known: set[str]) -> list[Refusal]:
    """Bounds kept as ``min``/``max`` fields of a help table's rows, used by the validator
    (``if (v < row.min || v > row.max)``): each row's numbers become that flag's bounds."""
    structs = _struct_fields(tokens)
    used = {tokens[k + 1].text for k in range(len(tokens) - 1)
            if tokens[k].text in {".", "->"} and tokens[k + 1].text in _LOWER | _UPPER}
    if not used or not structs:
        return []
    refusals: list[Refusal] = []
    for i, tok in enumerate(tokens[:-2]):
        fields = structs.get(tok.text)
        if not fields or tokens[i + 1].kind is not TokenKind.IDENT:
            continue
        at = i + 2
        while at < len(tokens) and tokens[at].text in {"[", "]", "="} or (at < len(tokens) and tokens[at].kind is TokenKind.NUMBER and tokens[at - 1].text == "["):
            at += 1
        if at >= len(tokens) or tokens[at].text != "{":
            continue
        close = at + 1
        while close < len(tokens) and not (tokens[close].text == "}" and tokens[close].depth == tokens[at].depth):
            close += 1
        for row in group_items(tokens, at, close):
            if row[0].text != "{":
                continue
            items = group_items(tokens, tokens.index(row[0]), tokens.index(row[-1]))
            values: dict[str, Token | None] = {}
            for k, item in enumerate(items):
                if len(item) >= 3 and item[0].text == "." and item[2].text == "=":
                    values[item[1].text] = item[3] if len(item) == 4 else None
                elif k < len(fields):
                    values[fields[k]] = item[0] if len(item) == 1 else (
                        Token(TokenKind.NUMBER, "-" + item[1].text, item[1].line, item[1].depth)
                        if len(item) == 2 and item[0].text == "-" else None)
            flag = next((v.text for v in values.values() if v is not None and v.kind is TokenKind.STRING
                         and v.text in known), None)
            if flag is None:
                continue
            ref: Expr = ("flag", flag)
            parts: list[Expr] = []
            for name, value in values.items():
                if value is None or value.kind is not TokenKind.NUMBER or name not in used:
                    continue
                number = float(value.text.rstrip("uUlL")) if re.fullmatch(r"-?\d+(?:\.\d+)?[uUlL]*", value.text) else None
                if number is not None and name in _LOWER:
                    parts.append(("<", ref, ("num", number)))
                elif number is not None and name in _UPPER:
                    parts.append((">", ref, ("num", number)))
            if parts:
                cond = parts[0] if len(parts) == 1 else ("||", parts[0], parts[1])
                refusals.append(Refusal(cond, row[0].line, "", f"help table line {row[0].line} (min/max fields),"))
    return refusals
