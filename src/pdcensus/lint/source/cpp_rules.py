"""What the validator refuses besides enum members: numeric bounds and cross-flag rules.

``config_parse`` refuses ``--prefill-interleave -1`` and ``--max-num-batched-tokens 10`` as
surely as an unknown enum member, and ``--prefill-span N`` unless ``--max-num-batched-tokens``
is N checkpoint intervals. These rules are read from the pinned source, never remembered:

* a *refusal* is an ``if (CONDITION)`` whose body returns or throws an error (a string
  literal, or a name such as ``InvalidArgument``/``Error``); its condition is parsed into a
  small expression over flags (``c.prefill_span`` is ``--prefill-span``), numbers, named
  constants (``constexpr long kMinBatch = 64;``) and ``+ - * / % < <= > >= == != && || !``.
  Anything else (a call, a string compare) is *unknown*, and logic is three-valued, so an
  unknown part never makes a refusal true by itself;
* a *helper bound* is a refusal inside a helper such as ``parse_int(flag, value, minimum,
  out)`` comparing against one of its parameters; each call that passes a number for that
  parameter in a statement naming one flag (``if (flag == "--port") return parse_int(flag,
  value, 1, &out->port);``) becomes the refusal ``--port < 1``, citing the call's line.

Each refusal keeps its line and the error string of its body, so a finding can cite both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pdcensus.lint.source.cpp_expr import Expr, Parser, describe, evaluate, flags_in, number, with_bindings
from pdcensus.lint.source.cpp_text import Token, TokenKind, group_items

__all__ = ["Expr", "Refusal", "describe", "evaluate", "functions", "message_bound", "read_refusals"]

_CMP = {"<", "<=", ">", ">=", "==", "!="}
_SWAP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_ERRORISH = re.compile(r"(?i)invalid|error|fail|bad|refuse|reject|abort|^err$|^err_")
_REFUSING_WORDS = re.compile(r"(?i)invalid|error|must|refus|unknown|bad|expected|not allowed|out of range|"
                             r"exceed|needs?|requires?|cannot|can't|too (?:small|large|big|low|high)")
_QUALIFIERS = {"const", "noexcept", "override", "final"}


@dataclass(frozen=True)
class Refusal:
    """A condition under which the validator returns an error, with its line and message."""

    condition: Expr
    line: int
    message: str
    origin: str = ""

    def flags(self) -> list[str]:
        return list(dict.fromkeys(flags_in(self.condition)))


def _matching(tokens: list[Token], open_at: int) -> int:
    depth = tokens[open_at].depth
    close = {"(": ")", "{": "}", "[": "]"}[tokens[open_at].text]
    for j in range(open_at + 1, len(tokens)):
        if tokens[j].depth == depth and tokens[j].text == close and tokens[j].kind is TokenKind.PUNCT:
            return j
    return len(tokens) - 1


def _body(tokens: list[Token], after: int) -> tuple[int, int]:
    if after < len(tokens) and tokens[after].text == "{":
        return after, _matching(tokens, after)
    end = after
    while end < len(tokens) and not (tokens[end].text == ";" and tokens[end].depth == tokens[after].depth):
        end += 1
    return after, end


def _is_refusal(body: list[Token]) -> bool:
    """The body of an ``if`` that refuses: it throws, returns an error (``InvalidArgument(...)``,
    ``false``, a non-zero code), or sets an error, with wording of a refusal if it says anything."""
    texts = [t.text for t in body]
    if "throw" in texts or any(t.kind is TokenKind.IDENT and _ERRORISH.search(t.text) for t in body):
        return True
    if any(t.kind is TokenKind.STRING and _REFUSING_WORDS.search(t.text) for t in body) and (
            "return" in texts or "=" in texts or "exit" in texts):
        return True
    for k, text in enumerate(texts[:-1]):
        if text == "return" and (texts[k + 1] == "false" or re.fullmatch(r"-?[1-9]\d*", texts[k + 1])):
            return True
    return False


def _constants(tokens: list[Token]) -> dict[str, float]:
    out: dict[str, float] = {}
    for i in range(1, len(tokens) - 2):
        if (tokens[i].kind is TokenKind.IDENT and tokens[i + 1].text == "="
                and tokens[i + 2].kind is TokenKind.NUMBER and tokens[i + 3:i + 4]
                and tokens[i + 3].text == ";"
                and any(t.text in {"const", "constexpr"} for t in tokens[max(0, i - 4):i])):
            value = number(tokens[i + 2].text)
            if value is not None:
                out[tokens[i].text] = value
    return out


def functions(tokens: list[Token]) -> list[tuple[str, list[str], int, int, int]]:
    """``(name, parameter names, body open, body close, parameter-list open)`` of each definition."""
    found = []
    for i, tok in enumerate(tokens):
        if tok.text != "{" or tok.kind is not TokenKind.PUNCT:
            continue
        j = i - 1
        while j >= 0 and tokens[j].text in _QUALIFIERS:
            j -= 1
        if j < 1 or tokens[j].text != ")":
            continue
        k = j - 1
        while k >= 0 and not (tokens[k].text == "(" and tokens[k].depth == tokens[j].depth):
            k -= 1
        if k < 1 or tokens[k - 1].kind is not TokenKind.IDENT or tokens[k - 1].text in {"if", "while", "for", "switch"}:
            continue
        params = []
        for item in group_items(tokens, k, j):
            cut = [t.text for t in item].index("=") if any(t.text == "=" for t in item) else len(item)
            names = [t.text for t in item[:cut] if t.kind is TokenKind.IDENT]
            params.append(names[-1] if names else "")
        found.append((tokens[k - 1].text, params, i, _matching(tokens, i), k))
    return found


def _message(body: list[Token]) -> str:
    return " … ".join(t.text.strip() for t in body if t.kind is TokenKind.STRING and t.text.strip())


def read_refusals(tokens: list[Token], to_flag: Callable[[str], str | None],
                  flag_of_statement: Callable[[int], str | None],
                  bindings: Mapping[str, Mapping[str, str]] | None = None) -> list[Refusal]:
    """Every refusal of the source: direct conditions over flags, then helper bounds at calls.

    ``bindings`` names validator functions whose value parameter stands for a flag
    (gflags' ``DEFINE_validator``): ``{function: {"": flag}}`` binds the last parameter.
    """
    constants = _constants(tokens)
    defs = functions(tokens)
    bound_params: dict[int, dict[str, str]] = {}
    for name, params, lo, _hi, _open in defs:
        if bindings and name in bindings and params:
            bound_params[lo] = {params[-1]: bindings[name][""]} if "" in bindings[name] else dict(bindings[name])
    refusals: list[Refusal] = []
    helper_bounds: dict[str, list[tuple[int, str, int, str]]] = {}  # func -> (param, op, line, message)
    for i, tok in enumerate(tokens):
        if tok.text != "if" or tok.kind is not TokenKind.IDENT or i + 1 >= len(tokens) \
                or tokens[i + 1].text != "(":
            continue
        close = _matching(tokens, i + 1)
        lo, hi = _body(tokens, close + 1)
        body = tokens[lo:hi + 1]
        if not _is_refusal(body):
            continue
        owner = next((f for f in defs if f[2] < i < f[3]), None)
        local = bound_params.get(owner[2], {}) if owner is not None else {}
        cond = Parser(tokens[i + 2:close], with_bindings(local, to_flag), constants).parse()
        stated = message_bound(_message(body), cond)
        if stated is not None and (cond is None or not flags_in(cond) or _has_unknown(cond)):
            refusals.append(Refusal(stated, tok.line, _message(body), f"error string at line {tok.line}"))
            continue
        if cond is None:
            continue
        if flags_in(cond):
            refusals.append(Refusal(cond, tok.line, _message(body), f"validator line {tok.line}"))
            continue
        if owner is None or cond[0] not in _CMP:
            continue
        a, b = cond[1], cond[2]
        for op, mine, other in ((str(cond[0]), a, b), (_SWAP[str(cond[0])], b, a)):
            if (isinstance(other, tuple) and other[0] == "name" and other[1] in owner[1]
                    and isinstance(mine, tuple) and mine[0] == "name" and mine[1] not in owner[1]):
                helper_bounds.setdefault(owner[0], []).append(
                    (owner[1].index(str(other[1])), op, tok.line, _message(body)))
    for _ in range(2):  # a helper passing its own parameter on to a bounded helper is bounded too
        for name, params, lo, hi, _ in defs:
            for j in range(lo, hi):
                bounds = helper_bounds.get(tokens[j].text)
                if not bounds or tokens[j + 1].text != "(" or tokens[j].text == name:
                    continue
                args = group_items(tokens, j + 1, _matching(tokens, j + 1))
                for param, op, line, msg in list(bounds):
                    if param < len(args) and len(args[param]) == 1 and args[param][0].text in params:
                        derived = (params.index(args[param][0].text), op, line, msg)
                        if derived not in helper_bounds.setdefault(name, []):
                            helper_bounds[name].append(derived)
    definitions = {f[4] - 1 for f in defs}
    for j, tok in enumerate(tokens[:-1]):
        bounds = helper_bounds.get(tok.text)
        if not bounds or tokens[j + 1].text != "(" or j in definitions:
            continue
        flag = flag_of_statement(j)
        if flag is None:
            continue
        args = group_items(tokens, j + 1, _matching(tokens, j + 1))
        for param, op, line, msg in bounds:
            if param >= len(args) or len(args[param]) != 1:
                continue
            arg = args[param][0]
            value = number(arg.text) if arg.kind is TokenKind.NUMBER else constants.get(arg.text)
            if value is None:
                continue
            bound: Expr = (op, ("flag", flag), ("num", value))
            refusals.append(Refusal(bound, tok.line, msg,
                                    f"{tok.text} call at line {tok.line}, bound at line {line},"))
    unique: dict[tuple[Expr, int], Refusal] = {}
    for refusal in refusals:  # a helper defined twice (two namespaces) bounds each call once
        unique.setdefault((refusal.condition, refusal.line), refusal)
    return list(unique.values())


_NUM = r"(-?\d+(?:\.\d+)?)"
_STATED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:>=|at least|no less than|not less than|minimum(?: is)?|min(?:imum)?\s*[:=])\s*" + _NUM), "<"),
    (re.compile(r"(?:(?<![<>=])>(?!=)|greater than|more than|above)\s*" + _NUM), "<="),
    (re.compile(r"(?:<=|at most|no more than|not (?:be )?(?:more|greater) than|maximum(?: is)?|max(?:imum)?\s*[:=]|"
                r"must not exceed|cannot exceed)\s*" + _NUM), ">"),
    (re.compile(r"(?:(?<![<>=])<(?!=)|less than|below)\s*" + _NUM), ">="),
)
_RANGE = re.compile(r"(?:in\s*\[|range\s*\[?|between\s+|from\s+)" + _NUM + r"\s*(?:,|\.\.|-|and|to)\s*" + _NUM)


def _has_unknown(expr: Expr) -> bool:
    if expr[0] == "name":
        return True
    return any(_has_unknown(part) for part in expr[1:] if isinstance(part, tuple))


def message_bound(message: str, cond: Expr | None) -> Expr | None:
    """A bound an error string states for the one flag it (or its condition) names.

    ``"--max-num-batched-tokens must be at least 64"``, ``"--prefill-interleave must be in
    [0, 16]"``, ``"... must be positive"``: what the validator says it refuses, read when its
    condition calls a function (``if (!ValidBatch(x))``) and so cannot be evaluated."""
    named = set(re.findall(r"--[a-z0-9][a-z0-9-]*[a-z0-9]", message)) | set(flags_in(cond) if cond else [])
    if len(named) != 1:
        return None
    ref: Expr = ("flag", named.pop())
    text = message.lower()
    found = _RANGE.search(text)
    if found:
        return ("||", ("<", ref, ("num", float(found.group(1)))), (">", ref, ("num", float(found.group(2)))))
    parts: list[Expr] = [(op, ref, ("num", float(m.group(1)))) for pattern, op in _STATED for m in pattern.finditer(text)]
    if re.search(r"\bnon-?negative\b", text):
        parts.append(("<", ref, ("num", 0.0)))
    elif re.search(r"\bpositive\b", text):
        parts.append(("<=", ref, ("num", 0.0)))
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = ("||", out, part)
    return out


