"""A reader for Prometheus's PromQL test scripting language (``promqltest`` ``.test`` files).

Prometheus's engine is tested with scripts of ``load``/``clear``/``eval`` commands; the
same scripts are our referee. This module turns a script into typed commands; running
them is :mod:`pdcensus.series.promql.conformance`. As in Prometheus's reader, every line
is trimmed, comment lines count as blank, and a blank line ends a command's block.
Point lists use the expanding syntax ``1+2x3`` (the step is added cumulatively, as Go
does), ``_`` (no sample), ``_x3``, ``stale``; ``{{...}}`` native histogram points are
recognised only to mark what uses them as unsupported.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.errors import RecordingParseError
from pdcensus.series.durations import parse_duration_ms
from pdcensus.series.promql.values import Labels

_NUMBER = r"(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|inf|nan)"
_POINT = re.compile(rf"^(?P<a>[+-]?{_NUMBER}|stale)(?:(?P<b>[+-]{_NUMBER})?x(?P<n>[0-9]+))?$", re.IGNORECASE)
_BLANKS = re.compile(r"^_(?:x(?P<n>[0-9]+))?$")
_EVAL_INSTANT = re.compile(r"^eval(?:_(fail|warn|ordered|info))?\s+instant\s+(?:at\s+(\S+))?\s+(.+)$")
_EVAL_RANGE = re.compile(r"^eval(?:_(fail|warn|info))?\s+range\s+from\s+(\S+)\s+to\s+(\S+)\s+step\s+(\S+)\s+(.+)$")
_RANGE_VECTOR = re.compile(r"^expect\s+range\s+vector\s+from\s+(\S+)\s+to\s+(\S+)\s+step\s+(\S+)$")
_LABEL_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class PointKind(str, Enum):
    VALUE = "value"
    OMITTED = "omitted"
    STALE = "stale"
    HISTOGRAM = "histogram"


@dataclass(frozen=True)
class Point:
    kind: PointKind
    value: float = math.nan


@dataclass(frozen=True)
class SeriesSpec:
    """A series line: labels (``__name__`` included when named) and its points."""

    labels: Labels
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Load:
    line: int
    interval_ms: int
    series: tuple[SeriesSpec, ...]
    with_nhcb: bool = False


@dataclass(frozen=True)
class Clear:
    line: int


@dataclass
class Eval:
    """One ``eval`` command with what it expects."""

    line: int
    expr: str
    start_ms: int
    end_ms: int = 0
    step_ms: int = 0
    is_range: bool = False
    expect_fail: bool = False
    ordered: bool = False
    expected: list[SeriesSpec] = field(default_factory=list)
    expected_scalar: float | None = None
    expected_string: str | None = None
    range_vector: tuple[int, int, int] | None = None


Command = Load | Clear | Eval


def parse_number(text: str) -> float:
    """A number as Go's ParseFloat reads test values (``Inf``, ``-Inf``, ``NaN`` included)."""
    if not re.fullmatch(rf"[+-]?{_NUMBER}", text, re.IGNORECASE):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def parse_points(text: str) -> tuple[Point, ...]:
    """Expand a points list (``0+10x3 _ stale {{...}}``)."""
    points: list[Point] = []
    for token in _tokens(text):
        if token.startswith("{{"):
            count = 1
            tail = re.search(r"x([0-9]+)$", token)
            if tail and not token.endswith("}}"):
                count = int(tail.group(1)) + 1
            points.extend([Point(PointKind.HISTOGRAM)] * count)
            continue
        blank = _BLANKS.match(token)
        if blank:
            points.extend([Point(PointKind.OMITTED)] * int(blank.group("n") or 1))
            continue
        found = _POINT.match(token)
        if not found:
            raise ValueError(f"bad point {token!r}")
        first, step, times = found.group("a"), found.group("b"), found.group("n")
        if first.lower() == "stale":
            points.extend([Point(PointKind.STALE)] * (int(times) + 1 if times else 1))
            continue
        value = float(first)
        if times is None:
            points.append(Point(PointKind.VALUE, value))
            continue
        increment = float(step) if step else 0.0
        for _ in range(int(times) + 1):
            points.append(Point(PointKind.VALUE, value))
            value += increment
    return tuple(points)


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        if text.startswith("{{", i):
            close = text.find("}}", i)
            while close >= 0 and text.startswith(("+{{", "-{{"), close + 2):
                close = text.find("}}", close + 3)
            end = len(text) if close < 0 else close + 2
            while end < len(text) and not text[end].isspace():
                end += 1
            tokens.append(text[i:end])
            i = end
            continue
        end = i
        while end < len(text) and not text[end].isspace():
            end += 1
        tokens.append(text[i:end])
        i = end
    return tokens


def parse_series_line(line: str) -> SeriesSpec:
    """``metric{label="v", ...} points`` -> labels and points."""
    labels: dict[str, str] = {}
    i = 0
    found = _LABEL_NAME.match(line)
    if found:
        labels["__name__"] = found.group(0)
        i = found.end()
    if i < len(line) and line[i] == "{":
        i = _parse_label_block(line, i + 1, labels)
    return SeriesSpec(tuple(sorted(labels.items())), parse_points(line[i:]))


def _parse_label_block(line: str, i: int, labels: dict[str, str]) -> int:
    while True:
        while i < len(line) and (line[i].isspace() or line[i] == ","):
            i += 1
        if i >= len(line):
            raise ValueError("unterminated label set")
        if line[i] == "}":
            return i + 1
        if line[i] in "\"'`":
            name, i = _quoted(line, i)
        else:
            found = _LABEL_NAME.match(line, i)
            if not found:
                raise ValueError(f"bad label name at {line[i:]!r}")
            name, i = found.group(0), found.end()
        while i < len(line) and line[i].isspace():
            i += 1
        if i < len(line) and line[i] == "=":
            i += 1
            while i < len(line) and line[i].isspace():
                i += 1
            value, i = _quoted(line, i)
            labels[name] = value
        else:
            labels["__name__"] = name


def _quoted(line: str, i: int) -> tuple[str, int]:
    quote = line[i]
    out: list[str] = []
    i += 1
    escapes = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'"}
    while i < len(line) and line[i] != quote:
        if line[i] == "\\" and quote != "`" and i + 1 < len(line):
            out.append(escapes.get(line[i + 1], "\\" + line[i + 1]))
            i += 2
            continue
        out.append(line[i])
        i += 1
    if i >= len(line):
        raise ValueError("unterminated string")
    return "".join(out), i + 1


def parse_script(text: str, path: str = "<script>") -> list[Command]:
    """Every command of a test script, in order."""
    lines = [ln.strip() for ln in text.split("\n")]
    lines = ["" if ln.startswith("#") else ln for ln in lines]
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
            continue
        word = line.split(None, 1)[0].lower()
        j = i + 1
        while word != "clear" and j < len(lines) and lines[j]:
            j += 1
        block = lines[i + 1:j]
        try:
            if word == "clear":
                commands.append(Clear(i + 1))
            elif word in ("load", "load_with_nhcb"):
                interval = parse_duration_ms(line.split(None, 1)[1].strip())
                series = tuple(parse_series_line(b) for b in block)
                commands.append(Load(i + 1, interval, series, word == "load_with_nhcb"))
            elif word.startswith("eval"):
                commands.append(_parse_eval(line, block, i + 1))
            else:
                raise ValueError(f"unknown command {word!r}; valid: load, load_with_nhcb, clear, eval")
        except ValueError as exc:
            raise RecordingParseError(path, i + 1, str(exc)) from None
        i = j
    return commands


def _parse_eval(line: str, block: list[str], line_no: int) -> Eval:
    instant = _EVAL_INSTANT.match(line)
    if instant:
        variant, at, expr = instant.groups()
        cmd = Eval(line_no, expr.strip(), parse_duration_ms(at or "0"))
    else:
        ranged = _EVAL_RANGE.match(line)
        if not ranged:
            raise ValueError(f"bad eval line {line!r}")
        variant, start, end, step, expr = ranged.groups()
        cmd = Eval(line_no, expr.strip(), parse_duration_ms(start), parse_duration_ms(end),
                   parse_duration_ms(step), is_range=True)
    cmd.expect_fail = variant == "fail"
    cmd.ordered = variant == "ordered"
    for entry in block:
        words = entry.split()
        if words[0] == "expect":
            kind = words[1] if len(words) > 1 else ""
            if kind == "fail":
                cmd.expect_fail = True
            elif kind == "ordered":
                cmd.ordered = True
            elif kind == "string":
                cmd.expected_string = _quoted(entry.split(None, 2)[2].strip(), 0)[0]
            elif kind == "range":
                found = _RANGE_VECTOR.match(entry)
                if not found:
                    raise ValueError(f"bad expect line {entry!r}")
                start_ms, end_ms, step_ms = (parse_duration_ms(x) for x in found.groups())
                cmd.range_vector = (start_ms, end_ms, step_ms)
            continue
        if words[0].startswith("expected_fail_"):
            cmd.expect_fail = True
            continue
        try:
            cmd.expected_scalar = parse_number(entry)
            continue
        except ValueError:
            pass
        cmd.expected.append(parse_series_line(entry))
    return cmd
