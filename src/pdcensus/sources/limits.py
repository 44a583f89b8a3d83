"""The limits every read of someone else's server or file keeps, stated once.

pdcensus reads servers and files it does not control, often in a CI job or a pre-commit hook:
a server that trickles one byte every two seconds, a 300 MB ``/metrics``, a file with no
newline or a gzip bomb must end in one clear line in bounded time and memory, never a hang or
a ``MemoryError``. So:

::

    a whole HTTP request (connect, headers, body, and its retries)   --timeout (30s)
    all the requests of one command, where it has --deadline         --deadline (off)
    one HTTP body, decoded (a Prometheus API answer)                 256 MiB   PDCENSUS_MAX_BODY
    one HTTP body, decoded (a /metrics scrape, a collect item)        64 MiB   PDCENSUS_MAX_SCRAPE
    one line of a text recording                                      16 MiB   PDCENSUS_MAX_LINE
    a gzip recording, decompressed                                    16 GiB   PDCENSUS_MAX_DECOMPRESSED
    distinct series in one recording                               1,000,000   PDCENSUS_MAX_SERIES
    one endpoint's timestamps x series (17 bytes each)           100,000,000   PDCENSUS_MAX_CELLS

A body or a line over its cap is refused as it streams in (exit 3), with the cap and the
variable that raises it; nothing past the cap is read. Sizes take ``B``, ``KiB``, ``MiB``,
``GiB`` (or ``k``/``M``/``G``, binary), or a plain number of bytes.

The overall deadline is a context variable: the command sets it around its work
(:func:`overall_deadline`) and every :class:`~pdcensus.sources.prometheus_http.ApiClient`
made inside, however deep, stops when it has passed.
"""

from __future__ import annotations

import contextvars
import json
import os
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

from pdcensus.errors import DataError, UsageError

MAX_BODY_ENV = "PDCENSUS_MAX_BODY"
MAX_SCRAPE_ENV = "PDCENSUS_MAX_SCRAPE"
MAX_LINE_ENV = "PDCENSUS_MAX_LINE"
MAX_DECOMPRESSED_ENV = "PDCENSUS_MAX_DECOMPRESSED"
MAX_SERIES_ENV = "PDCENSUS_MAX_SERIES"
MAX_CELLS_ENV = "PDCENSUS_MAX_CELLS"

DEFAULT_MAX_BODY = 256 << 20
DEFAULT_MAX_SCRAPE = 64 << 20
DEFAULT_MAX_LINE = 16 << 20
DEFAULT_MAX_DECOMPRESSED = 16 << 30
DEFAULT_MAX_SERIES = 1_000_000
DEFAULT_MAX_CELLS = 100_000_000

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "mb": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "gb": 1 << 30}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")

# (monotonic time it passes, its length in seconds)
_deadline: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("pdcensus_deadline", default=None)


def parse_size(text: str) -> int:
    """``'64KiB'`` -> 65536; a plain number is bytes. UsageError on anything else."""
    m = _SIZE.fullmatch(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise UsageError(f"not a size: {text!r}; use e.g. 512MiB, 64KiB or a number of bytes")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise UsageError(f"a size must be at least 1 byte, got {text!r}")
    return value


def human_size(n: int) -> str:
    """65536 -> '64 KiB' (exact binary units where they fit, else bytes)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def _cap(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    try:
        return parse_size(text)
    except UsageError as exc:
        raise UsageError(f"${env}: {exc}") from None


def max_body_bytes() -> int:
    """The cap on one decoded Prometheus API answer."""
    return _cap(MAX_BODY_ENV, DEFAULT_MAX_BODY)


def max_scrape_bytes() -> int:
    """The cap on one decoded ``/metrics`` scrape or ``collect`` item."""
    return _cap(MAX_SCRAPE_ENV, DEFAULT_MAX_SCRAPE)


def max_line_bytes() -> int:
    """The cap on one line of a text recording."""
    return _cap(MAX_LINE_ENV, DEFAULT_MAX_LINE)


def max_decompressed_bytes() -> int:
    """The cap on a gzip recording's decompressed size."""
    return _cap(MAX_DECOMPRESSED_ENV, DEFAULT_MAX_DECOMPRESSED)


def _count(env: str, default: int) -> int:
    text = os.environ.get(env, "").strip().replace("_", "")
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"${env}: want a whole number, got {text!r}")
    return int(text)


def max_series() -> int:
    """The cap on distinct series in one recording."""
    return _count(MAX_SERIES_ENV, DEFAULT_MAX_SERIES)


def max_cells() -> int:
    """The cap on one endpoint's dense grid: distinct timestamps x series."""
    return _count(MAX_CELLS_ENV, DEFAULT_MAX_CELLS)


def over_cap(what: str, cap: int, env: str) -> DataError:
    """The one-line refusal of a body, line or file over its cap."""
    return DataError(f"{what} is over the limit of {human_size(cap)}; nothing past it was read "
                     f"(raise the limit with {env}=SIZE, e.g. {env}={human_size(cap * 4).replace(' ', '')})")


def capped_chunks(chunks: Iterator[bytes], cap: int, what: str, env: str) -> Iterator[bytes]:
    """Pass ``chunks`` through until their total passes ``cap``, then raise :func:`over_cap`."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > cap:
            raise over_cap(what, cap, env)
        yield chunk


async def read_capped(chunks: AsyncIterator[bytes], cap: int, what: str, env: str) -> bytes:
    """Join an async stream of body chunks, refusing it as soon as it passes ``cap``."""
    parts: list[bytes] = []
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > cap:
            raise over_cap(what, cap, env)
        parts.append(chunk)
    return b"".join(parts)


@contextmanager
def overall_deadline(seconds: float | None) -> Iterator[None]:
    """Every request made inside stops once ``seconds`` have passed (None or 0: no overall deadline)."""
    if not seconds:
        yield
        return
    if seconds < 0:
        raise UsageError(f"--deadline must be positive, got {seconds:g}s")
    token = _deadline.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _deadline.reset(token)


def deadline_left() -> tuple[float, float] | None:
    """``(seconds left, the deadline's length)`` (left is negative once passed), or None without one."""
    got = _deadline.get()
    return None if got is None else (got[0] - time.monotonic(), got[1])


MAX_JSON_DEPTH = 64  # no side-channel document pdcensus reads nests deeper than a handful


def load_json(data: bytes | str, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` that refuses nesting past ``max_depth`` with one line (DataError), never a RecursionError.

    The parser's own recursion limit stops a document nested 100,000 deep; what it parses is
    then measured without recursion, so no reader further on meets a deeper one.
    """
    try:
        doc = json.loads(data)
    except RecursionError:
        raise DataError(f"{what}: JSON nested deeper than {max_depth} levels; refused") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{what} is not valid JSON: {exc}") from None
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > max_depth:
                raise DataError(f"{what}: JSON nested deeper than {max_depth} levels; refused")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return doc
