"""The recorder's on-disk format: an append-only journal of scrapes that survives kill -9.

A plain OpenMetrics file cannot be appended to safely: a family must be contiguous and the
file must end with ``# EOF``, so every new scrape would rewrite the file. The journal
instead appends one self-checking block per scrape of one target::

    # pdcensus-record v1                      <- magic line, once
    # scrape {"time": ..., "job": ..., "instance": ..., "up": 1, "bytes": N, ...}
    <exactly N bytes: the exposition text as the endpoint served it>
    # end crc32=1a2b3c4d                      <- CRC-32 of the header line and the body

A block is written with one ``write`` and made durable with ``fsync`` before the next
scrape starts, so a crash can only leave a torn block at the very end. A reader ignores
such a tail (a recording in progress reads the same way), a resumed recorder cuts it off
before appending, and a checksum that fails anywhere but the tail is a damaged file
(RecordingParseError naming the line). A failed scrape is a block with ``up`` 0 and no
body, exactly what Prometheus stores for it.

Keeping the endpoint's own text (rather than parsed samples) means the journal holds what
was served, byte for byte. Loading stamps each 0.0.4 body's samples with its scrape time
and reads all of one target's scrapes as ONE stream through the bulk text reader
(:mod:`pdcensus.sources.textformat`), so a day of scrapes loads at the reader's speed
rather than at one reader call per scrape; OpenMetrics bodies (rare) are read one by one.
A sample's own ``job``/``instance`` labels become ``exported_job``/``exported_instance``,
as Prometheus does with ``honor_labels: false``.
"""

from __future__ import annotations

import io
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pdcensus.errors import DataError, RecordingParseError
from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.sources.exposition_lines import LineError, parse_series_text
from pdcensus.sources.openmetrics_writer import escape_label_value
from pdcensus.sources.textformat import TextFormat, parse_scrape, read_prometheus_text

MAGIC = b"# pdcensus-record v1\n"
SCRAPE_PREFIX = b"# scrape "
END_PREFIX = b"\n# end crc32="
JOURNAL_SUFFIX = ".pdrec"
_END_LEN = len(END_PREFIX) + 9  # 8 hex digits and "\n"
_MAX_HEADER_BYTES = 64 * 1024


@dataclass(frozen=True)
class ScrapeHeader:
    """What a block's header says about one scrape of one target."""

    time: float
    job: str
    instance: str
    up: int
    body_bytes: int
    content_type: str = ""
    duration_seconds: float = 0.0
    error: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "time": round(self.time, 3),
                "job": self.job,
                "instance": self.instance,
                "up": self.up,
                "bytes": self.body_bytes,
                "content_type": self.content_type,
                "duration_seconds": round(self.duration_seconds, 6),
                "error": self.error,
            },
            separators=(",", ":"),
            ensure_ascii=True,
        )


@dataclass(frozen=True)
class ScrapeBlock:
    """One committed block: its header, its body and where it starts in the file."""

    header: ScrapeHeader
    body: bytes
    offset: int
    end_offset: int
    line: int


@dataclass(frozen=True)
class JournalScan:
    """Every committed block, the offset just past the last one, and the torn tail's size."""

    blocks: tuple[ScrapeBlock, ...]
    good_bytes: int
    torn_bytes: int


def encode_block(header: ScrapeHeader, body: bytes) -> bytes:
    """The bytes of one block (header line, body, end line with the checksum)."""
    head = SCRAPE_PREFIX + header.to_json().encode("ascii") + b"\n"
    crc = zlib.crc32(body, zlib.crc32(head))
    return head + body + END_PREFIX + f"{crc:08x}\n".encode("ascii")


def is_record_journal(path: str | Path) -> bool:
    """True if the file starts with the journal's magic line."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def _header_from(raw: bytes, path: str, line: int) -> ScrapeHeader:
    try:
        obj: dict[str, Any] = json.loads(raw)
        return ScrapeHeader(
            time=float(obj["time"]),
            job=str(obj["job"]),
            instance=str(obj["instance"]),
            up=int(obj["up"]),
            body_bytes=int(obj["bytes"]),
            content_type=str(obj.get("content_type", "")),
            duration_seconds=float(obj.get("duration_seconds", 0.0)),
            error=str(obj.get("error", "")),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordingParseError(path, line, f"bad scrape header {raw[:80]!r}: {exc}") from None


def scan_journal(path: str | Path) -> JournalScan:
    """Read every committed block; a torn block at the end is measured, not an error."""
    name = str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(f"no such file: {name!r}") from None
    except OSError as exc:
        raise DataError(f"cannot read {name!r}: {exc.strerror}") from None
    if not data.startswith(MAGIC):
        raise RecordingParseError(name, 1, "not a pdcensus recording journal (no '# pdcensus-record v1')")
    blocks = list(_iter_blocks(data, name))
    good = blocks[-1].end_offset if blocks else len(MAGIC)
    return JournalScan(tuple(blocks), good, len(data) - good)


def _iter_blocks(data: bytes, path: str) -> Iterator[ScrapeBlock]:
    pos, line = len(MAGIC), 2
    while pos < len(data):
        newline = data.find(b"\n", pos, pos + _MAX_HEADER_BYTES)
        if newline < 0:
            if len(data) - pos < _MAX_HEADER_BYTES:
                return  # torn header at the tail
            raise RecordingParseError(path, line, "scrape header line too long (damaged file?)")
        head = data[pos : newline + 1]
        if not head.startswith(SCRAPE_PREFIX):
            raise RecordingParseError(path, line, f"expected '# scrape {{...}}', got {head[:80]!r}")
        header = _header_from(head[len(SCRAPE_PREFIX) :], path, line)
        body_start = newline + 1
        body_end = body_start + header.body_bytes
        end = data[body_end : body_end + _END_LEN]
        if len(end) < _END_LEN:
            return  # torn body or end line at the tail
        body = data[body_start:body_end]
        crc = zlib.crc32(body, zlib.crc32(head))
        if not end.startswith(END_PREFIX) or end[len(END_PREFIX) : -1] != f"{crc:08x}".encode():
            if body_end + _END_LEN >= len(data):
                return  # the last block is torn: ignore it like a missing one
            raise RecordingParseError(path, line, "scrape block damaged (checksum mismatch)")
        yield ScrapeBlock(header, body, pos, body_end + _END_LEN, line)
        line += 3 + body.count(b"\n")  # header, body, end (+ a blank line)
        pos = body_end + _END_LEN


def is_openmetrics(content_type: str) -> bool:
    return "openmetrics" in content_type.lower()


def parse_exposition(body: bytes, content_type: str, scrape_time: float, job: str, instance: str) -> Recording:
    """One scrape's text as a Recording (the same reader that loads the journal, so a scrape
    accepted while recording is a scrape that loads). Raises RecordingParseError."""
    fmt = TextFormat.OPENMETRICS if is_openmetrics(content_type) else TextFormat.PROMETHEUS
    return parse_scrape(body, scrape_time=scrape_time, job=job, instance=instance, fmt=fmt, name=f"scrape of {instance}")


def count_samples(recording: Recording) -> int:
    """Samples in a parsed scrape, not counting the ``up`` the reader adds."""
    return sum(int(ep.present[:, i].sum()) for ep in recording.endpoints for i, k in enumerate(ep.keys) if k.name != "up")


def _exported(series: str, cache: dict[str, str]) -> str:
    """Rename a sample's own job/instance labels to exported_* (Prometheus with honor_labels off)."""
    if series in cache:
        return cache[series]
    try:
        name, labels = parse_series_text(series)
    except LineError:
        cache[series] = series  # the reader names the bad line
        return series
    renamed = [(f"exported_{k}" if k in ("job", "instance") else k, v) for k, v in labels]
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in renamed)
    cache[series] = out = f"{name}{{{inner}}}"
    return out


# A sample line with exactly one token (the value) after its series: it needs the scrape time.
# ``.*`` is greedy, so ``\}`` is the line's last brace: the end of the label set.
_NO_TIMESTAMP = r"^\s*[^\s{#]+(\{.*\})?\s+\S+\s*$"
_OWN_TARGET_LABEL = r"^\s*[^\s{#]+\{.*(job|instance)\s*="


def _timestamped_stream(name: str, instance: str, blocks: list[ScrapeBlock]) -> tuple[bytes, int, list[int]]:
    """One target's 0.0.4 bodies as ONE text with the scrape time (ms) on every untimed sample.

    Done in bulk with polars (a day of scrapes is half a million lines). One output line per
    input line, so that a reader's line numbers map back to the journal; a ``# HELP`` /
    ``# TYPE`` line already seen in an earlier scrape becomes blank (every scrape repeats
    them). Returns the text, its sample-line count and each block's first line in it.
    """
    texts: list[str] = []
    counts: list[int] = []
    for block in blocks:
        try:
            text = block.body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordingParseError(name, block.line + 1, f"scrape of {instance} is not UTF-8: {exc}") from None
        if text and not text.endswith("\n"):
            text += "\n"
        texts.append(text)
        counts.append(text.count("\n"))
    starts = (np.cumsum([0, *counts[:-1]]) + 1).tolist()
    ms = np.repeat(np.array([int(round(b.header.time * 1000)) for b in blocks], dtype=np.int64), counts)
    lines = pl.Series("line", "".join(texts).split("\n")[:-1], dtype=pl.String)
    stripped = pl.col("line").str.strip_chars()
    sample = (stripped != "") & ~stripped.str.starts_with("#")
    frame = pl.DataFrame({"line": lines, "ms": ms}).with_columns(
        sample.alias("sample"),
        (stripped.str.starts_with("#") & ~pl.col("line").is_first_distinct()).alias("repeat"),
        (sample & pl.col("line").str.contains(_OWN_TARGET_LABEL)).alias("own"),
    )
    out = frame.select(
        pl.when(pl.col("repeat"))
        .then(pl.lit(""))
        .when(pl.col("sample") & pl.col("line").str.contains(_NO_TIMESTAMP))
        .then(pl.col("line") + " " + pl.col("ms").cast(pl.String))
        .otherwise(pl.col("line"))
        .alias("line")
    )["line"]
    own = frame["own"].arg_true()
    if len(own):  # rare: samples carrying their own job/instance labels
        cache: dict[str, str] = {}
        fixed = []
        for line in out.gather(own).to_list():
            close = line.rfind("}")
            fixed.append(_exported(line[: close + 1], cache) + line[close + 1 :])
        out = out.scatter(own, fixed)
    n_samples = int(frame["sample"].sum())
    return (out.str.join("\n").item() + "\n").encode("utf-8"), n_samples, starts


def _read_text_blocks(name: str, job: str, instance: str, blocks: list[ScrapeBlock]) -> Recording | None:
    """One target's 0.0.4 scrapes through the bulk reader as a single timestamped stream."""
    text, n_samples, starts = _timestamped_stream(name, instance, blocks)
    if not n_samples:
        return None
    try:
        return read_prometheus_text(io.BytesIO(text), scrape_time=None, job=job, instance=instance, name=name)
    except RecordingParseError as exc:
        i = max(int(np.searchsorted(starts, exc.line, side="right")) - 1, 0)
        line = blocks[i].line + 1 + (exc.line - starts[i])
        raise RecordingParseError(name, line, f"scrape of {instance}: {exc.what}") from None


def load_record_journal(path: str | Path) -> Recording:
    """A journal as a Recording: every committed scrape, ``up`` for each, the torn tail ignored."""
    name = str(path)
    scan = scan_journal(path)
    if not scan.blocks:
        raise DataError(f"{name}: the recording holds no complete scrape yet")
    builder = RecordingBuilder(source=name)
    builder.add_family(Family("up", MetricType.GAUGE, "1 if the scrape succeeded, 0 if it failed"))
    text_blocks: dict[tuple[str, str], list[ScrapeBlock]] = {}
    parts: list[Recording] = []
    for block in scan.blocks:
        h = block.header
        up_key = SeriesKey("up", normalize_labels({"job": h.job, "instance": h.instance}))
        builder.add(up_key, round(h.time, 3), float(h.up))
        if h.up != 1:
            continue
        if is_openmetrics(h.content_type):
            try:
                parts.append(parse_exposition(block.body, h.content_type, h.time, h.job, h.instance))
            except RecordingParseError as exc:
                raise RecordingParseError(name, block.line + exc.line, f"scrape of {h.instance}: {exc.what}") from None
        else:
            text_blocks.setdefault((h.job, h.instance), []).append(block)
    for (job, instance), blocks in text_blocks.items():
        part = _read_text_blocks(name, job, instance, blocks)
        if part is not None:
            parts.append(part)
    for part in parts:
        for fam in part.families.values():
            builder.add_family(fam)
        for ep in part.endpoints:
            for key, ts, vals in ep.iter_series():
                if key.name != "up":  # ours, from the headers, is the one Prometheus would write
                    builder.add_many(key, ts, vals)
    return builder.build()
