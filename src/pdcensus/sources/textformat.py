"""Read Prometheus text 0.0.4 scrapes and OpenMetrics recordings into the aligned model.

Both formats are read *streaming*: the file is taken in chunks of whole lines (16 MiB by
default), never as one Python string. Each chunk goes through one bulk pass in polars:
split into lines, split each line at its last spaces into *series text*, value and
timestamp, parse every number at once. Only then does Python look at text, and only at
what is rare: the labels of each distinct series text (parsed once, however many samples
it has), metadata lines (``# TYPE``/``# HELP``/``# UNIT``/``# EOF``), and any line the bulk
pass could not take apart (an exemplar, a label value holding ``" 1"``, a bad value),
which :mod:`pdcensus.sources.exposition_lines` parses carefully and, if it is wrong,
names with its line number. That is what makes a day of 15 s scrapes load in about a
second, where prometheus_client's parser (one regex-free Python loop per character) takes
a minute; see BENCHMARKS.md.

No line may be longer than :func:`pdcensus.sources.limits.max_line_bytes` (16 MiB) and a
gzip file may not decompress to more than ``max_decompressed_bytes`` (16 GiB): either is
refused as soon as it is passed, so a file with no newline, a 2 GB comment line or a gzip
bomb costs one chunk of memory, not the whole file.

Units: OpenMetrics timestamps are float seconds; 0.0.4 timestamps are integer
milliseconds. A sample without a timestamp is taken at ``scrape_time``. Samples without
``job``/``instance`` labels get the caller's (``job="pdcensus"``, ``instance`` = the file's
stem); empty label values are dropped, as Prometheus does. A 0.0.4 scrape without
timestamps also gets the ``up`` = 1 sample Prometheus would have written.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import BinaryIO

from pdcensus.errors import DataError
from pdcensus.series.model import Recording
from pdcensus.sources.text_reader import CHUNK_BYTES, DEFAULT_JOB, MAX_TIMESTAMP_SECONDS, ReadOptions, TextFormat, TextReader

__all__ = ["CHUNK_BYTES", "DEFAULT_JOB", "MAX_TIMESTAMP_SECONDS", "TextFormat", "open_binary", "parse_scrape",
           "read_openmetrics", "read_prometheus_text", "read_text", "recording_stem"]

_RECORDING_SUFFIXES = (".gz", ".om", ".prom", ".txt", ".metrics", ".openmetrics")


def read_openmetrics(
    source: str | Path | BinaryIO, *, job: str = DEFAULT_JOB, instance: str | None = None,
    scrape_time: float | None = None, name: str | None = None,
) -> Recording:
    """Read an OpenMetrics recording (timestamps in seconds, ``# EOF`` last)."""
    return read_text(source, TextFormat.OPENMETRICS, job=job, instance=instance, scrape_time=scrape_time, name=name)


def read_prometheus_text(
    source: str | Path | BinaryIO, *, scrape_time: float | None, job: str = DEFAULT_JOB,
    instance: str | None = None, name: str | None = None,
) -> Recording:
    """Read Prometheus text 0.0.4 (one scrape at ``scrape_time``, or samples with ms timestamps)."""
    return read_text(source, TextFormat.PROMETHEUS, job=job, instance=instance, scrape_time=scrape_time, name=name)


def parse_scrape(
    text: str | bytes, *, scrape_time: float, job: str = DEFAULT_JOB, instance: str = "scrape",
    fmt: TextFormat = TextFormat.PROMETHEUS, name: str = "<scrape>",
) -> Recording:
    """One ``/metrics`` response body (already in memory) as a recording of one scrape."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return read_text(io.BytesIO(data), fmt, job=job, instance=instance, scrape_time=scrape_time, name=name)


def read_text(
    source: str | Path | BinaryIO, fmt: TextFormat, *, job: str = DEFAULT_JOB, instance: str | None = None,
    scrape_time: float | None = None, name: str | None = None, chunk_bytes: int = CHUNK_BYTES,
) -> Recording:
    """Read a text exposition file (gzip is decompressed on the fly) of a known format.

    ``chunk_bytes`` is how much is read at a time (lines are never split between chunks).
    """
    if isinstance(source, (str, Path)):
        path = Path(source)
        label = name or str(path)
        options = ReadOptions(job, instance if instance is not None else recording_stem(path), scrape_time)
        try:
            with open_binary(path) as fh:
                return TextReader(label, fmt, options, chunk_bytes).read(fh)
        except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise DataError(f"{label}: cannot read: {exc}") from exc
    stream_label = str(name or getattr(source, "name", "<stream>"))
    options = ReadOptions(job, instance if instance is not None else "stream", scrape_time)
    return TextReader(stream_label, fmt, options, chunk_bytes).read(source)


GZIP_MAGIC = b"\x1f\x8b"


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, through gzip if it starts with gzip's magic number."""
    fh = open(path, "rb")
    if fh.read(2) == GZIP_MAGIC:
        fh.close()
        # GzipFile reads bytes like any BinaryIO, but typeshed does not declare it one
        return gzip.open(path, "rb")  # type: ignore[return-value]
    fh.seek(0)
    return fh


def recording_stem(path: Path) -> str:
    """The file's name without recording suffixes: ``node1.prom.gz`` -> ``node1``."""
    name = path.name
    changed = True
    while changed:
        changed = False
        for suffix in _RECORDING_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, changed = name[: -len(suffix)], True
    return name

