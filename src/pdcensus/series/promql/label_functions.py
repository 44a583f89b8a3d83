"""``label_replace`` and ``label_join``, with Go's regexp template expansion.

Prometheus expands the replacement with Go's ``Regexp.ExpandString``: ``$1``, ``${1}``,
``$name`` and ``${name}``, where an unbraced name takes the longest run of letters,
digits and underscores (so ``$1x`` is the group named ``1x``, which is empty), and
``$$`` is a literal ``$``. Python's ``re`` expansion differs, hence this module.
"""

from __future__ import annotations

import re

from pdcensus.errors import UnsupportedQueryError
from pdcensus.errors import QueryEvaluationError
from pdcensus.series.promql.storage import compile_go_regex
from pdcensus.series.promql.values import Labels, Sample, label_value

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_NAME_CHARS = re.compile(r"[a-zA-Z0-9_]+")


def go_expand(template: str, match: re.Match[str]) -> str:
    """Go's ``Regexp.ExpandString`` for one match."""
    out: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch != "$":
            out.append(ch)
            i += 1
            continue
        if template.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        name, end = _group_name(template, i + 1)
        if name is None:
            out.append("$")
            i += 1
            continue
        out.append(_group_value(match, name))
        i = end
    return "".join(out)


def _group_name(template: str, pos: int) -> tuple[str | None, int]:
    if template.startswith("{", pos):
        close = template.find("}", pos)
        if close < 0:
            return None, pos
        name = template[pos + 1:close]
        if not name or not _NAME_CHARS.fullmatch(name):
            return None, pos
        return name, close + 1
    found = _NAME_CHARS.match(template, pos)
    if found is None:
        return None, pos
    return found.group(0), found.end()


def _group_value(match: re.Match[str], name: str) -> str:
    try:
        if name.isdigit():
            value = match.group(int(name))
        else:
            value = match.group(name)
    except IndexError:  # no such group: Go expands it to nothing
        return ""
    return value or ""


def _set_label(labels: Labels, name: str, value: str) -> Labels:
    kept = [pair for pair in labels if pair[0] != name]
    if value:
        kept.append((name, value))
    return tuple(sorted(kept))


def label_replace(vector: list[Sample], dst: str, replacement: str, src: str, regex: str,
                  semantics: int) -> list[Sample]:
    """``label_replace(v, dst, replacement, src, regex)``; the regex is anchored."""
    try:
        pattern = compile_go_regex(regex, dotall=semantics >= 3)
    except UnsupportedQueryError:
        raise QueryEvaluationError(f"invalid regular expression in label_replace(): {regex!r}") from None
    if not _LABEL_NAME.match(dst):
        raise QueryEvaluationError(f"invalid destination label name in label_replace(): {dst!r}")
    out = []
    for sample in vector:
        found = pattern.fullmatch(label_value(sample.labels, src))
        if found is None:
            out.append(sample)
            continue
        out.append(Sample(_set_label(sample.labels, dst, go_expand(replacement, found)), sample.value))
    return out


def label_join(vector: list[Sample], dst: str, separator: str, sources: list[str]) -> list[Sample]:
    """``label_join(v, dst, separator, src_1, src_2, ...)``."""
    if not _LABEL_NAME.match(dst):
        raise QueryEvaluationError(f"invalid destination label name in label_join(): {dst!r}")
    for src in sources:
        if not _LABEL_NAME.match(src):
            raise QueryEvaluationError(f"invalid source label name in label_join(): {src!r}")
    out = []
    for sample in vector:
        joined = separator.join(label_value(sample.labels, src) for src in sources)
        out.append(Sample(_set_label(sample.labels, dst, joined), sample.value))
    return out
