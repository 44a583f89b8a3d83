"""Help tables built by macros and enum members kept in tables, read from a pinned source.

Two layouts that :mod:`pdcensus.advice.flags` alone does not see, because no literal in
them is a whole ``"--flag"`` nor a spelled-out member list:

* an *X-macro* help table: one list macro names every flag once
  (``#define SERVE_ARGS(X) X(kPrefillInterleave, "prefill-interleave", "N", "...")``) and a
  row macro builds each table row by pasting the dashes on
  (``#define AS_ROW(id, name, arg, help) {"--" name, arg, help},`` then
  ``SERVE_ARGS(AS_ROW)``). A row macro is any ``#define`` whose body holds the literal
  ``"--"`` next to one of its parameters (``"--" name`` or ``"--" #name``); its other
  parameters, in the order the body uses them, are the argument and the help. It applies to
  direct calls of the row macro and to calls of ``X`` inside a list macro that is invoked
  with the row macro's name;
* members kept in a *table* the validator looks values up in, with an error string that
  joins them at run time (``"expected one of: " + JoinKeys(kPolicyByName)``): a
  ``std::map``/array whose items are ``{"member", ...}`` pairs, named in the same ``case``
  or block as the flag, or the string ``case`` labels of a ``switch`` there
  (``case Hash("fp8"):``).

Nothing is compiled or executed; every member keeps the line it was read from.
"""

from __future__ import annotations

import re

from pdcensus.advice.cpp_text import Token, TokenKind, enclosing_group, group_items

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")


def _macro_defs(tokens: list[Token]) -> list[tuple[str, list[str], int, int]]:
    """``(name, parameters, first body token, last body token)`` of each function-like #define."""
    out = []
    for i in range(len(tokens) - 3):
        if not (tokens[i].text == "#" and tokens[i + 1].text == "define"
                and tokens[i + 2].kind is TokenKind.IDENT and tokens[i + 3].text == "("):
            continue
        close = i + 4
        while close < len(tokens) and tokens[close].text != ")":
            close += 1
        params = [t.text for t in tokens[i + 4:close] if t.kind is TokenKind.IDENT]
        end = close + 1  # the body runs to the end of the line, continued by backslashes
        while end < len(tokens) and (tokens[end].line == tokens[end - 1].line or tokens[end - 1].text == "\\"):
            end += 1
        out.append((tokens[i + 2].text, params, close + 1, end))
    return out


def _row_template(tokens: list[Token], params: list[str], lo: int, hi: int) -> tuple[int, list[int]] | None:
    """``(flag parameter, [argument parameter, help parameter])`` of a row macro, if it is one."""
    flag_param = None
    order: list[int] = []
    for j in range(lo, hi):
        tok = tokens[j]
        if tok.kind is TokenKind.STRING and tok.text == "--":
            nxt = tokens[j + 1] if tokens[j + 1].text != "#" else tokens[j + 2]
            if nxt.text in params:
                flag_param = params.index(nxt.text)
        elif tok.kind is TokenKind.IDENT and tok.text in params:
            index = params.index(tok.text)
            if index not in order:
                order.append(index)
    if flag_param is None:
        return None
    return flag_param, [p for p in order if p != flag_param]


def _kebab_arg(item: list[Token]) -> str | None:
    if len(item) != 1:
        return None
    tok = item[0]
    text = tok.text if tok.kind is TokenKind.STRING else tok.text.lower().replace("_", "-")
    return "--" + text if _NAME.match(text) else None


def macro_rows(tokens: list[Token]) -> dict[str, tuple[str, str, int]]:
    """``flag -> (argument, help, line)`` of every row a row macro builds."""
    defs = _macro_defs(tokens)
    templates = {}
    for name, params, lo, hi in defs:
        template = _row_template(tokens, params, lo, hi)
        if template is not None:
            templates[name] = template
    callee: dict[str, tuple[int, list[int]]] = dict(templates)
    for name, params, lo, hi in defs:  # a list macro invoked with a row macro: its X(...) calls
        if len(params) != 1:
            continue
        for j in range(len(tokens) - 3):
            if tokens[j].text == name and tokens[j + 1].text == "(" and tokens[j + 2].text in templates \
                    and not (j >= 2 and tokens[j - 1].text == "define"):
                callee[params[0]] = templates[tokens[j + 2].text]
    rows: dict[str, tuple[str, str, int]] = {}
    for j in range(len(tokens) - 1):
        template = callee.get(tokens[j].text)
        if template is None or tokens[j + 1].text != "(" or (j >= 1 and tokens[j - 1].text == "define"):
            continue
        close = j + 2
        while close < len(tokens) and not (tokens[close].text == ")" and tokens[close].depth == tokens[j + 1].depth):
            close += 1
        items = [[t for t in item if t.text != "\\"] for item in group_items(tokens, j + 1, close)]
        flag_param, others = template
        if flag_param >= len(items):
            continue
        flag = _kebab_arg(items[flag_param])
        if flag is None:
            continue
        texts = [" ".join(t.text for t in items[p] if t.kind is TokenKind.STRING) if p < len(items) else ""
                 for p in others]
        strings = [t for t in texts if t]
        argument, help_text = (strings + ["", ""])[:2] if len(strings) >= 2 else (
            ("", strings[0]) if strings and " " in strings[0] else ((strings[0], "") if strings else ("", "")))
        rows.setdefault(flag, (argument, help_text, tokens[j].line))
    return rows


def _string_keyed_tables(tokens: list[Token]) -> dict[str, tuple[tuple[str, ...], int]]:
    """``name -> (keys, line)`` of every braced table whose items are ``{"key", ...}`` rows."""
    tables: dict[str, tuple[tuple[str, ...], int]] = {}
    for i, tok in enumerate(tokens):
        if tok.kind is not TokenKind.IDENT or i + 1 >= len(tokens):
            continue
        at = i + 1
        if tokens[at].text == "[":
            while at < len(tokens) and tokens[at].text != "]":
                at += 1
            at += 1
        if at < len(tokens) and tokens[at].text == "=":
            at += 1
        if at >= len(tokens) or tokens[at].text != "{":
            continue
        group = enclosing_group(tokens, at + 1) if at + 1 < len(tokens) else None
        if group is None or group[0] != at:
            continue
        keys = []
        for item in group_items(tokens, *group):
            if item[0].text == "{" and len(item) > 2 and item[1].kind is TokenKind.STRING:
                keys.append(item[1].text)
        if len(keys) >= 2:
            tables[tok.text] = (tuple(keys), tok.line)
    return tables


def table_members(tokens: list[Token], mentions: list[tuple[int, str]]) -> dict[str, tuple[tuple[str, ...], int]]:
    """``flag -> (members, line)`` for flags whose validator looks the value up in a table."""
    tables = _string_keyed_tables(tokens)
    found: dict[str, tuple[tuple[str, ...], int]] = {}
    for n, (at, flag) in enumerate(mentions):
        depth = tokens[at].depth
        end = len(tokens)
        for later, other in mentions[n + 1:]:
            if other != flag and tokens[later].depth <= depth + 1:
                end = later
                break
        group = enclosing_group(tokens, at)
        if group is not None:
            end = min(end, group[1])
        region = tokens[at + 1:end]
        labels = [(region[k + 1:k + 6], region[k].line) for k in range(len(region)) if region[k].text == "case"]
        cases = [(t.text, line) for window, line in labels for t in window[:4]
                 if t.kind is TokenKind.STRING and ":" not in t.text][:64]
        refs = [(tables[t.text], t.line) for t in region if t.kind is TokenKind.IDENT and t.text in tables]
        if refs and flag not in found:
            found[flag] = refs[0][0]
        elif len(cases) >= 2 and flag not in found:
            found[flag] = (tuple(dict.fromkeys(c for c, _ in cases)), cases[0][1])
    return found
