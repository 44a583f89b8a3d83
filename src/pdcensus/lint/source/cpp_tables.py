"""Help tables built by macros and enum members kept in tables, read from a pinned source.

Two layouts that :mod:`pdcensus.lint.source.flags` alone does not see, because no literal in
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
  ``std::map``/array whose items are ``{"member", ...}`` pairs or a flat set of names, named
  in the same ``case`` or block as the flag (or in the function that block calls), else the
  string ``case`` labels of a ``switch`` there (``case Hash("fp8"):``), else the names one
  variable is compared with (``v == "a" || v == "b"``, ``strcmp(v, "c")``). When that code
  also parses an integer (``stoi``, ``from_chars``, ``parse_int``...), integers are accepted
  too, so a number is never called a non-member.

Nothing is compiled or executed; every member keeps the line it was read from.
"""

from __future__ import annotations

import re

from pdcensus.lint.source.cpp_text import Token, TokenKind, enclosing_group, group_items

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")
_MEMBER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_PARSES_INTEGER = re.compile(r"^(?:parse_int\w*|Parse(?:Int|Number)\w*|sto[iul]l?|ato[il]l?|strto[ul]l?|from_chars"
                             r"|SimpleAtoi|safe_strto\w+|lexical_cast)$")


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
        items = group_items(tokens, *group)
        for item in items:
            if item[0].text == "{" and len(item) > 2 and item[1].kind is TokenKind.STRING:
                keys.append(item[1].text)
        if not keys and len(items) >= 2 and all(len(it) == 1 and it[0].kind is TokenKind.STRING
                                               and _MEMBER.match(it[0].text) for it in items):
            keys = [it[0].text for it in items]  # a flat set or array of names
        if len(keys) >= 2:
            tables[tok.text] = (tuple(keys), tok.line)
    return tables


def _compared(region: list[Token]) -> tuple[tuple[str, ...], int] | None:
    """Names one variable is compared with (``v == "a"``, ``strcmp(v, "b")``), two or more."""
    by_var: dict[str, list[tuple[str, int]]] = {}
    for k, tok in enumerate(region):
        if tok.kind is not TokenKind.STRING or not _MEMBER.match(tok.text) or tok.text.startswith("-"):
            continue
        before = [t.text for t in region[max(0, k - 3):k]]
        after = [t.text for t in region[k + 1:k + 4]]
        var = None
        if before[-2:] in (["=", "="], ["!", "="]) and len(before) == 3:
            var = before[0]
        elif after[:2] in (["=", "="], ["!", "="]) and len(after) == 3:
            var = after[2]
        elif k >= 3 and region[k - 1].text == "," and region[k - 3].text == "(" \
                and region[k - 4 if k >= 4 else 0].text in {"strcmp", "strcasecmp", "compare", "equals"}:
            var = region[k - 2].text
        if var is not None:
            by_var.setdefault(var, []).append((tok.text, tok.line))
    best = max(by_var.values(), key=len, default=[])
    names = tuple(dict.fromkeys(n for n, _ in best))
    return (names, best[0][1]) if len(names) >= 2 else None


def table_members(tokens: list[Token], mentions: list[tuple[int, str]],
                  functions: dict[str, tuple[int, int, int]] | None = None,
                  ) -> dict[str, tuple[tuple[str, ...], int, bool]]:
    """``flag -> (members, line, integers too)`` for flags whose validator looks the value up in a
    table, a ``switch``, or a chain of comparisons (in the flag's block or a function it calls)."""
    tables = _string_keyed_tables(tokens)
    found: dict[str, tuple[tuple[str, ...], int, bool]] = {}
    for n, (at, flag) in enumerate(mentions):
        if flag in found:
            continue
        depth = tokens[at].depth
        end = len(tokens)
        for later, other in mentions[n + 1:]:
            if other != flag and tokens[later].depth <= depth + 1:
                end = later
                break
        for k in range(at + 1, end):  # a switch arm ends at the next label of its switch
            if tokens[k].depth <= depth and tokens[k].kind is TokenKind.IDENT and (
                    tokens[k].text == "case" or (tokens[k].text == "default" and tokens[k + 1:k + 2]
                                                 and tokens[k + 1].text == ":")):
                end = k
                break
        group = enclosing_group(tokens, at)
        while group is not None and tokens[group[0]].text != "{":
            group = enclosing_group(tokens, group[0])
        if group is not None:
            end = min(end, group[1])
        if not any(lo < at < hi for lo, hi, _ in (functions or {}).values()):
            k = at  # at namespace or file scope: the declaration statement only
            while k < end and not (tokens[k].text == ";" and tokens[k].depth <= depth):
                k += 1
            end = min(end, k)
        region = tokens[at + 1:end]
        for index in range(at + 1, end):  # one call deep: the parser the block hands the value to
            body = (functions or {}).get(tokens[index].text)
            if body is not None and tokens[index].kind is TokenKind.IDENT and index != body[2] - 1 \
                    and index + 1 < len(tokens) and tokens[index + 1].text == "(" and not body[0] <= at <= body[1]:
                region = region + tokens[body[0]:body[1]]
        integers = any(t.kind is TokenKind.IDENT and _PARSES_INTEGER.match(t.text) for t in region)
        labels = [(region[k + 1:k + 6], region[k].line) for k in range(len(region)) if region[k].text == "case"]
        cases = [(t.text, line) for window, line in labels for t in window[:4]
                 if t.kind is TokenKind.STRING and ":" not in t.text][:64]
        refs = [tables[t.text] for t in region if t.kind is TokenKind.IDENT and t.text in tables]
        compared = _compared(region)
        if refs:
            found[flag] = (*refs[0], integers)
        elif len(cases) >= 2:
            found[flag] = (tuple(dict.fromkeys(c for c, _ in cases)), cases[0][1], integers)
        elif compared is not None:
            found[flag] = (*compared, integers)
    return found
