"""The careful, one-line-at-a-time grammar of Prometheus text 0.0.4 and OpenMetrics lines.

The bulk reader (:mod:`pdcensus.sources.textformat`) splits lines and parses numbers in
vectorised passes; it calls this module for what it cannot do in bulk: the labels of each
*distinct* series text (once per series, not once per sample), the few lines the bulk pass
could not take apart (exemplars, odd spacing, bad values), metadata lines, and the exact
message of every error. Everything here is linear in the length of the line: label values
are scanned with a character class that cannot backtrack, so a label value of megabytes
costs a single pass.

Written by hand because prometheus_client's parsers are laxer than Prometheus's own (they
accept what Prometheus refuses) and give no line numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from pdcensus.series.model import Labels, MetricType

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_PLAIN_VALUE_RUN = re.compile(r'[^"\\\n]*')
_BLANKS = re.compile(r"[ \t]*")
_TOKEN = re.compile(r"[^ \t]*")
_FLOAT_TEXT = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI]nf(?:inity)?|NaN|nan)")

QUOTE_CHARS = 80

TYPE_NAMES: dict[str, MetricType] = {
    "counter": MetricType.COUNTER,
    "gauge": MetricType.GAUGE,
    "histogram": MetricType.HISTOGRAM,
    "gaugehistogram": MetricType.GAUGE_HISTOGRAM,
    "summary": MetricType.SUMMARY,
    "info": MetricType.INFO,
    "stateset": MetricType.STATESET,
    "unknown": MetricType.UNKNOWN,
    "untyped": MetricType.UNKNOWN,
}


class LineError(Exception):
    """What is wrong with one line; the reader adds the file and the line number."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` as a repr, cut to about ``limit`` characters (an ellipsis says it was cut)."""
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + "..."


class MetadataKind(str, Enum):
    """What a ``#`` line declares."""

    HELP = "HELP"
    TYPE = "TYPE"
    UNIT = "UNIT"
    EOF = "EOF"
    COMMENT = "comment"


@dataclass(frozen=True)
class Metadata:
    """One parsed ``#`` line: its kind, the family it is about, and its text."""

    kind: MetadataKind
    family: str = ""
    text: str = ""


@dataclass(frozen=True)
class SampleLine:
    """One parsed sample line (labels unsorted, as written; timestamp as written, or None)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    timestamp: float | None


def parse_metadata(line: str, openmetrics: bool) -> Metadata:
    """Parse a line starting with ``#``: ``# HELP``, ``# TYPE``, ``# UNIT``, ``# EOF`` or a comment."""
    if line == "# EOF":
        return Metadata(MetadataKind.EOF)
    parts = line.split(" ", 3)
    if len(parts) < 3 or parts[0] != "#" or parts[1] not in ("HELP", "TYPE", "UNIT"):
        if openmetrics and line.startswith("# EOF"):
            raise LineError(f"text after '# EOF' on its line: {quote(line)}")
        return Metadata(MetadataKind.COMMENT)
    kind = MetadataKind(parts[1])
    family = parts[2]
    if not _METRIC_NAME.fullmatch(family):
        raise LineError(f"bad metric name {quote(family)} in {quote(line)}")
    text = parts[3] if len(parts) > 3 else ""
    if kind is MetadataKind.TYPE:
        if text not in TYPE_NAMES:
            raise LineError(
                f"unknown metric type {quote(text)} in {quote(line)}; valid: {', '.join(TYPE_NAMES)}"
            )
    elif kind is MetadataKind.HELP:
        text = unescape_help(text)
    return Metadata(kind, family, text)


def unescape_help(text: str) -> str:
    r"""Undo ``\\``, ``\n`` (and OpenMetrics' ``\"``) in HELP text."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append({"\\": "\\", "n": "\n", '"': '"'}.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_series_text(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Parse a complete series text ``name`` or ``name{a="b",...}`` (nothing may follow)."""
    name, labels, end = _parse_series(text, 0)
    if end != len(text):
        raise LineError(f"unexpected text after the series: {quote(text[end:])} in {quote(text)}")
    return name, labels


def _skip_blanks(text: str, pos: int) -> int:
    """The position after the spaces and tabs that start at ``pos``."""
    gap = _BLANKS.match(text, pos)
    assert gap is not None  # ``[ \t]*`` matches the empty string anywhere
    return gap.end()


def parse_sample_line(line: str, openmetrics: bool) -> SampleLine:
    """Parse a whole sample line: series, value, optional timestamp, optional exemplar (OpenMetrics)."""
    name, labels, pos = _parse_series(line, 0)
    gap = _BLANKS.match(line, pos)
    assert gap is not None
    if gap.end() == pos:
        if pos == len(line):
            raise LineError(f"no value after the series: {quote(line)}")
        raise LineError(f"expected a space after the series, got {quote(line[pos:])}")
    pos = gap.end()
    token = _TOKEN.match(line, pos)
    assert token is not None
    value = parse_float(token.group(), "value")
    pos = token.end()
    timestamp: float | None = None
    gap = _BLANKS.match(line, pos)
    assert gap is not None
    pos = gap.end()
    if pos < len(line) and line[pos] != "#":
        token = _TOKEN.match(line, pos)
        assert token is not None
        timestamp = parse_float(token.group(), "timestamp")
        if timestamp != timestamp or timestamp in (float("inf"), float("-inf")):
            raise LineError(f"bad timestamp {quote(token.group())} in {quote(line)}")
        pos = _skip_blanks(line, token.end())
    if pos < len(line):
        if openmetrics and line.startswith("# ", pos):
            _check_exemplar(line, pos + 2)
        else:
            raise LineError(f"unexpected text after the value: {quote(line[pos:])} in {quote(line)}")
    return SampleLine(name, labels, value, timestamp)


def parse_float(token: str, what: str) -> float:
    """A value or timestamp token as Prometheus reads it (Go's ParseFloat forms, no ``_``)."""
    if not _FLOAT_TEXT.fullmatch(token):
        raise LineError(f"bad {what} {quote(token)}" if token else f"missing {what}")
    return float(token)


def _check_exemplar(line: str, pos: int) -> None:
    """An OpenMetrics exemplar ``{labels} value [timestamp]``: checked, then ignored."""
    if not line.startswith("{", pos):
        raise LineError(f"bad exemplar {quote(line[pos:])}: expected '{{'")
    _name, _labels, end = _parse_labels(line, pos, "")
    rest = line[end:].split()
    if not 1 <= len(rest) <= 2 or not line.startswith(" ", end):
        raise LineError(f"bad exemplar {quote(line[pos:])}")
    for token in rest:
        parse_float(token, "exemplar value")


def _parse_series(text: str, pos: int) -> tuple[str, tuple[tuple[str, str], ...], int]:
    match = _METRIC_NAME.match(text, pos)
    if match is None:
        raise LineError(f"expected a metric name at {quote(text[pos:])}")
    name = match.group()
    pos = match.end()
    if pos < len(text) and text[pos] == "{":
        _n, labels, pos = _parse_labels(text, pos, name)
        return name, labels, pos
    return name, (), pos


def _parse_labels(text: str, pos: int, name: str) -> tuple[str, tuple[tuple[str, str], ...], int]:
    """Labels from the ``{`` at ``pos`` to the matching ``}``; returns the end position."""
    pos += 1
    labels: list[tuple[str, str]] = []
    seen: set[str] = set()
    n = len(text)
    while True:
        pos = _skip_blanks(text, pos)
        if pos < n and text[pos] == "}":
            return name, tuple(labels), pos + 1
        match = _LABEL_NAME.match(text, pos)
        if match is None:
            raise LineError(f"expected a label name or '}}' at {quote(text[pos:])} in {quote(text)}")
        label = match.group()
        pos = _skip_blanks(text, match.end())
        if not text.startswith("=", pos):
            raise LineError(f"expected '=' after label {label!r} in {quote(text)}")
        pos = _skip_blanks(text, pos + 1)
        if not text.startswith('"', pos):
            raise LineError(f"expected '\"' to open the value of label {label!r} in {quote(text)}")
        value, pos = _scan_label_value(text, pos + 1, label)
        if label in seen:
            raise LineError(f"duplicate label {label!r} in {quote(text)}")
        seen.add(label)
        labels.append((label, value))
        pos = _skip_blanks(text, pos)
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "}":
            return name, tuple(labels), pos + 1
        raise LineError(f"expected ',' or '}}' after label {label!r} in {quote(text)}")


def _scan_label_value(text: str, pos: int, label: str) -> tuple[str, int]:
    """The escaped value from after its opening quote; returns (value, position after the quote)."""
    parts: list[str] = []
    n = len(text)
    while True:
        run = _PLAIN_VALUE_RUN.match(text, pos)
        assert run is not None
        parts.append(run.group())
        pos = run.end()
        if pos >= n or text[pos] == "\n":
            raise LineError(f"unterminated value of label {label!r} in {quote(text)}")
        if text[pos] == '"':
            return "".join(parts), pos + 1
        # a backslash escape
        if pos + 1 >= n:
            raise LineError(f"unterminated value of label {label!r} in {quote(text)}")
        nxt = text[pos + 1]
        parts.append({"\\": "\\", '"': '"', "n": "\n"}.get(nxt, "\\" + nxt))
        pos += 2


def sorted_labels(labels: tuple[tuple[str, str], ...]) -> Labels:
    """Labels sorted by name (the form every SeriesKey uses)."""
    return tuple(sorted(labels))
