"""A C/C++ condition as an expression over flags, numbers and named constants, evaluated three-valued.

The validator's ``if (c.prefill_span > 1 && c.max_num_batched_tokens != c.prefill_span *
c.checkpoint_interval)`` is parsed here (precedence climbing over the tokens of
:mod:`pdcensus.lint.source.cpp_text`) into nested tuples: ``("flag", "--prefill-span")``,
``("num", 1.0)``, ``("name", "IsPolicy")`` for anything it cannot know, and ``(op, a, b)`` for
``+ - * / % < <= > >= == != && ||`` (``!`` and unary ``-`` too). A member chain names the
flag of its last identifier (``c.prefill_span``, ``cfg->prefillSpan``); an accessor call
reading one flag (``absl::GetFlag(FLAGS_x)``, ``x.value()``) reads as the flag; any other
call is unknown. :func:`evaluate` is three-valued: an unknown part makes the result unknown
unless ``&&``/``||`` is decided without it, so an unknown never makes a refusal true by itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pdcensus.lint.source.cpp_text import Token, TokenKind

Expr = tuple[object, ...]  # ("num", v) | ("flag", f) | ("name", n) | ("not", e) | ("neg", e) | (op, a, b)

_MERGE = {"&&", "||", "==", "!=", "<=", ">=", "->", "::"}
_PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 4, "<=": 4, ">": 4, ">=": 4, "+": 5, "-": 5,
         "*": 6, "/": 6, "%": 6}
_ACCESSORS = {"GetFlag", "get", "Get", "value", "load", "getFlag", "flag_value"}  # f(FLAGS_x) reads the flag


def flags_in(expr: Expr) -> list[str]:
    if expr[0] == "flag":
        return [str(expr[1])]
    return [f for part in expr[1:] if isinstance(part, tuple) for f in flags_in(part)]


def evaluate(expr: Expr, values: Mapping[str, float]) -> float | None:
    """The expression's value (a comparison is 1.0/0.0), None when it cannot be known."""
    kind = expr[0]
    if kind == "num":
        return float(expr[1])  # type: ignore[arg-type]
    if kind == "flag":
        return values.get(str(expr[1]))
    if kind == "name":
        return None
    if kind in {"not", "neg"}:
        inner = evaluate(expr[1], values)  # type: ignore[arg-type]
        if inner is None:
            return None
        return float(inner == 0) if kind == "not" else -inner
    a = evaluate(expr[1], values)  # type: ignore[arg-type]
    if kind in {"&&", "||"}:
        if a is not None and (a == 0) == (kind == "&&"):
            return float(kind == "||")
        b = evaluate(expr[2], values)  # type: ignore[arg-type]
        if b is not None and (b == 0) == (kind == "&&"):
            return float(kind == "||")
        return None if a is None or b is None else float(kind == "&&")
    b = evaluate(expr[2], values)  # type: ignore[arg-type]
    if a is None or b is None:
        return None
    ops: dict[str, Callable[[float, float], float | None]] = {
        "<": lambda x, y: float(x < y), "<=": lambda x, y: float(x <= y),
        ">": lambda x, y: float(x > y), ">=": lambda x, y: float(x >= y),
        "==": lambda x, y: float(x == y), "!=": lambda x, y: float(x != y),
        "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
        "/": lambda x, y: None if y == 0 else x / y, "%": lambda x, y: None if y == 0 else x % y,
    }
    return ops[str(kind)](a, b)


def _merged(tokens: list[Token]) -> list[Token]:
    out: list[Token] = []
    for tok in tokens:
        if out and tok.kind is TokenKind.PUNCT and out[-1].kind is TokenKind.PUNCT \
                and out[-1].text + tok.text in _MERGE:
            prev = out.pop()
            tok = Token(TokenKind.PUNCT, prev.text + tok.text, prev.line, prev.depth)
        out.append(tok)
    return out


def number(text: str) -> float | None:
    clean = text.replace("'", "").rstrip("uUlLfF")
    try:
        return float(int(clean, 0)) if re.fullmatch(r"0[xX][0-9a-fA-F]+|\d+", clean) else float(clean)
    except ValueError:
        return None


class Parser:
    """A precedence-climbing parser over a condition's tokens; ``None`` for what it cannot read."""

    def __init__(self, tokens: list[Token], to_flag: Callable[[str], str | None],
                 constants: Mapping[str, float]) -> None:
        self.toks = _merged(tokens)
        self.at = 0
        self.to_flag = to_flag
        self.constants = constants

    def peek(self) -> str | None:
        return self.toks[self.at].text if self.at < len(self.toks) else None

    def parse(self) -> Expr | None:
        expr = self.binary(1)
        return expr if self.at == len(self.toks) else None

    def binary(self, floor: int) -> Expr | None:
        left = self.unary()
        while left is not None and self.peek() in _PREC and _PREC[str(self.peek())] >= floor:
            op = str(self.peek())
            self.at += 1
            right = self.binary(_PREC[op] + 1)
            if right is None:
                return None
            left = (op, left, right)
        return left

    def unary(self) -> Expr | None:
        text = self.peek()
        if text in {"!", "-"}:
            self.at += 1
            inner = self.unary()
            return None if inner is None else ("not" if text == "!" else "neg", inner)
        return self.primary()

    def primary(self) -> Expr | None:
        if self.at >= len(self.toks):
            return None
        tok = self.toks[self.at]
        if tok.text == "(":
            self.at += 1
            inner = self.binary(1)
            if self.peek() != ")":
                return None
            self.at += 1
            return inner
        if tok.kind is TokenKind.NUMBER:
            self.at += 1
            value = number(tok.text)
            return None if value is None else ("num", value)
        if tok.kind is not TokenKind.IDENT:
            return None
        chain = [tok.text]
        self.at += 1
        while self.peek() in {".", "->", "::"} and self.at + 1 < len(self.toks) \
                and self.toks[self.at + 1].kind is TokenKind.IDENT:
            chain.append(self.toks[self.at + 1].text)
            self.at += 2
        if self.peek() == "(":  # a call: unknown, except an accessor such as .value() or GetFlag(FLAGS_x)
            start, depth = self.at, 0
            while self.at < len(self.toks):
                depth += {"(": 1, ")": -1}.get(self.toks[self.at].text, 0)
                self.at += 1
                if depth == 0:
                    break
            args = [t.text for t in self.toks[start + 1:self.at - 1]]
            simple = chain[-1] in _ACCESSORS and bool(args) and len(args) % 2 == 1 and all(
                re.fullmatch(r"\w+|\.|->|::", a) for a in args)
            flag_arg = self.to_flag(args[-1]) if simple else None
            if flag_arg is not None:
                return ("flag", flag_arg)
            if chain[-1] in {"value", "get", "count"} and len(chain) > 1:
                chain.pop()
            else:
                return ("name", ".".join(chain))
        if chain[-1] in {"true", "false"}:
            return ("num", float(chain[-1] == "true"))
        if chain[-1] in self.constants:
            return ("num", self.constants[chain[-1]])
        flag = self.to_flag(chain[-1])
        return ("flag", flag) if flag is not None else ("name", chain[-1])


def with_bindings(local: Mapping[str, str], to_flag: Callable[[str], str | None]) -> Callable[[str], str | None]:
    def resolve(ident: str) -> str | None:
        return local.get(ident) or to_flag(ident)
    return resolve


def describe(expr: Expr) -> str:
    """The condition written back as C-like text, for a finding's message."""
    kind = expr[0]
    if kind == "num":
        value = float(expr[1])  # type: ignore[arg-type]
        return str(int(value)) if value.is_integer() else str(value)
    if kind in {"flag", "name"}:
        return str(expr[1])
    if kind == "not":
        return "!(" + describe(expr[1]) + ")"  # type: ignore[arg-type]
    if kind == "neg":
        return "-" + describe(expr[1])  # type: ignore[arg-type]
    return f"{describe(expr[1])} {kind} {describe(expr[2])}"  # type: ignore[arg-type]
