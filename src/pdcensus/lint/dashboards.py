"""Grafana dashboards (and any JSON holding PromQL): every query checked at its own line and column.

A dashboard panel's target keeps its PromQL in ``"expr"``, a templating variable in
``"query"``, and a target may force a minimum step with ``"interval"`` (``"2m"`` means no
step under two minutes, the runbook's one-in-eight trap against a 15 s scrape). Python's
:mod:`json` keeps no positions, so the file is first validated with :mod:`json`, then each
``"expr"``/``"query"``/``"interval"`` string is found in the raw text with a JSON-string
pattern, and decoded with a map from each decoded character back to its raw offset, so a
trap after an escaped quote (``{job=\\"x\\"}``) still lands on its own column.
"""

from __future__ import annotations

import json
import re

from pdcensus.advice.model import Severity
from pdcensus.lint.checks import Checker
from pdcensus.lint.model import Snippet
from pdcensus.lint.promql import MAX_QUERY_STEP_SECONDS, duration_seconds

_KEYED_STRING = re.compile(r'"(expr|query|interval)"\s*:\s*"((?:\\.|[^"\\])*)"')
_SIMPLE_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def decode_with_offsets(body: str) -> tuple[str, list[int]]:
    """A JSON string body decoded, and the raw offset of each decoded character."""
    out: list[str] = []
    offsets: list[int] = []
    i = 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "u" and i + 6 <= len(body):
                out.append(chr(int(body[i + 2:i + 6], 16)))
                offsets.append(i)
                i += 6
                continue
            out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
            offsets.append(i)
            i += 2
            continue
        out.append(body[i])
        offsets.append(i)
        i += 1
    return "".join(out), offsets


def read_json(text: str, path: str, checker: Checker) -> None:
    """The PromQL of every ``expr``/``query`` string and each target's forced minimum step."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        checker.add("unreadable-json", Severity.WARNING, (exc.lineno, exc.colno), path,
                    f"not readable as JSON ({exc.msg}); not checked")
        return
    whole = Snippet.whole(path, text)
    for m in _KEYED_STRING.finditer(text):
        decoded, offsets = decode_with_offsets(m.group(2))
        base = m.start(2)
        if m.group(1) == "interval":
            seconds = duration_seconds(decoded) if re.fullmatch(r"[\d.]+(?:ms|[smhdwy])?(?:\d+(?:ms|[smhdwy]))*",
                                                                 decoded) else 0.0
            if seconds > MAX_QUERY_STEP_SECONDS:
                checker.add("query-step-over-30s", Severity.ERROR, whole.position(base), f"interval {decoded}",
                            f"the target's minimum step (interval) {decoded} = {seconds:g} s > "
                            f"{MAX_QUERY_STEP_SECONDS:g} s: a 15 s scrape against a 120 s step samples one "
                            "in eight; use 30 s or less (and no longer than the scrape interval)")
            continue
        places = tuple(whole.position(base + o) for o in offsets)
        checker.queries(Snippet(path, decoded, places[:1] or (whole.position(base),), places), step_forms=False)
