"""The blocks a report document is made of, and how numbers are written in them.

Blocks are frozen values holding plain text; the HTML and Markdown renderers escape it.
The formatters write a census number in the unit its name carries (``*_seconds`` as ms or
s, ``*_tokens_per_second`` as a rate, shares as percentages) and a missing or non-finite
number as an em dash, so that "no data" never reads as zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from pdcensus.report.figures import Figure, said

__all__ = ["said"]  # re-exported: the renderers import it from here

MISSING = "—"


class Tone(str, Enum):
    """How a block should stand out (a CSS class in HTML, a marker in Markdown)."""

    NORMAL = "normal"
    MUTED = "muted"
    WARNING = "warning"
    GOOD = "good"


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str


@dataclass(frozen=True)
class Paragraph:
    text: str
    tone: Tone = Tone.NORMAL


@dataclass(frozen=True)
class Callout:
    """The one line to read first (the verdict): a label, a big value and a detail."""

    label: str
    value: str
    detail: str
    tone: Tone = Tone.NORMAL


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    caption: str = ""
    numeric: tuple[int, ...] = ()  # right-aligned columns
    row_tones: tuple[Tone, ...] = ()
    fold_after: int = 0  # more rows than this: folded behind a summary line (0 = never)

    @property
    def folded(self) -> bool:
        return 0 < self.fold_after < len(self.rows)


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]
    ordered: bool = False
    tone: Tone = Tone.NORMAL


@dataclass(frozen=True)
class Code:
    """Text to copy as is: an env line, a command."""

    text: str


@dataclass(frozen=True)
class FigureBlock:
    """A figure and its id in this document (unique across endpoints)."""

    figure: Figure
    ident: str


Block = Heading | Paragraph | Callout | Table | Bullets | Code | FigureBlock


def _missing(value: float | int | None) -> bool:
    return value is None or not math.isfinite(float(value))


def fmt_number(value: float | int | None) -> str:
    """A plain number to three significant figures (thousands grouped)."""
    if value is None or _missing(value):
        return MISSING
    v = float(value)
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def fmt_seconds(value: float | None) -> str:
    """Seconds as ``15.2 ms`` below one second, ``1.23 s`` above."""
    if value is None or _missing(value):
        return MISSING
    if abs(value) < 1.0 and value != 0:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s"


def fmt_rate(value: float | None) -> str:
    """Tokens per second: grouped integers from 100 up, three figures below."""
    if value is None or _missing(value):
        return MISSING
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def fmt_share(value: float | None) -> str:
    """A fraction as a percentage."""
    if value is None or _missing(value):
        return MISSING
    return f"{value * 100:.1f} %"


def fmt_ratio(value: float | None) -> str:
    """A ratio to a reference (1 = unchanged) as ``0.973×``."""
    if value is None or _missing(value):
        return MISSING
    return f"{value:.3g}×"


def fmt_count(value: float | int | None) -> str:
    return fmt_number(value)


def fmt_time(value: float | None) -> str:
    """Unix seconds as UTC ``YYYY-MM-DD HH:MM:SSZ``."""
    if value is None or _missing(value):
        return MISSING
    return datetime.fromtimestamp(value, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
