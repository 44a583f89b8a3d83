"""Turn whatever the user points at (a file or a directory) into a Recording.

``load_source`` sniffs the content, not the name: Parquet by its ``PAR1`` magic,
OpenMetrics by ``# EOF``/``# UNIT``/float-seconds timestamps, otherwise Prometheus text
0.0.4 (one scrape, taken at the file's modification time unless ``scrape_time`` says
otherwise). Gzip files (``.om.gz``, ``.prom.gz``) are read through gzip. A directory
(for example the simulator's output directory) is searched for ``metrics.parquet``,
``metrics.om``, then a single ``*.om``/``*.prom`` file. The recorder's append-only journal
(``pdcensus record``, ``*.pdrec``) is recognised by its magic line and read by its own loader.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from pdcensus.errors import DataError
from pdcensus.series.model import Recording
from pdcensus.sources.store import is_parquet, load_parquet
from pdcensus.sources.textformat import TextFormat, open_binary, read_text

SNIFF_BYTES = 64 << 10
TAIL_BYTES = 64
DIRECTORY_NAMES = ("metrics.parquet", "metrics.om", "metrics.om.gz")
DIRECTORY_PATTERNS = ("*.om", "*.prom", "*.om.gz", "*.prom.gz", "*.pdrec")
RECORD_JOURNAL_MAGIC = b"# pdcensus-record v1\n"  # pdcensus.sources.recorder_journal.MAGIC


def load_source(path: str | Path, *, scrape_time: float | None = None) -> Recording:
    """Load a recording file (OpenMetrics, Prometheus text, Parquet, gzip of a text) or a directory."""
    target = Path(path)
    if target.is_dir():
        target = find_recording(target)
    elif not target.exists():
        raise DataError(f"{target}: no such file")
    try:
        head, tail = _head_and_tail(target)
        mtime = target.stat().st_mtime
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise DataError(f"{target}: cannot read: {exc}") from exc
    if is_parquet(head):
        return load_parquet(target)
    if head.startswith(RECORD_JOURNAL_MAGIC):
        from pdcensus.sources.recorder_journal import load_record_journal

        return load_record_journal(target)
    fmt = sniff_text_format(head, tail)
    when = scrape_time if scrape_time is not None else mtime
    return read_text(target, fmt, scrape_time=when)


def find_recording(directory: Path) -> Path:
    """The recording inside ``directory``: a metrics.* file, else exactly one *.om / *.prom."""
    named = [directory / name for name in DIRECTORY_NAMES if (directory / name).is_file()]
    if named:
        # a Parquet copy older than the text it was made from is stale: take the newest
        return max(named, key=lambda p: (p.stat().st_mtime, p.name == "metrics.parquet"))
    found = sorted({p for pattern in DIRECTORY_PATTERNS for p in directory.glob(pattern) if p.is_file()})
    if len(found) == 1:
        return found[0]
    if found:
        raise DataError(
            f"several recordings in directory {directory}: {', '.join(p.name for p in found)}; name one"
        )
    raise DataError(
        f"no recording in directory {directory} (looked for {', '.join(DIRECTORY_NAMES)}, "
        f"{', '.join(DIRECTORY_PATTERNS)})"
    )


def _head_and_tail(path: Path) -> tuple[bytes, bytes]:
    with open_binary(path) as fh:
        head = fh.read(SNIFF_BYTES)
        if isinstance(fh, gzip.GzipFile):
            return head, b""  # no cheap seek to the end; the head decides
        size = path.stat().st_size
        if size <= SNIFF_BYTES:
            return head, head[-TAIL_BYTES:]
        fh.seek(size - TAIL_BYTES)
        return head, fh.read()


def sniff_text_format(head: bytes, tail: bytes = b"") -> TextFormat:
    """OpenMetrics if the text ends in (or holds) ``# EOF``, has ``# UNIT`` or a float-seconds timestamp."""
    if tail.rstrip(b"\n").endswith(b"# EOF") or b"\n# EOF" in head or head.startswith(b"# EOF"):
        return TextFormat.OPENMETRICS
    if b"\n# UNIT " in head or head.startswith(b"# UNIT "):
        return TextFormat.OPENMETRICS
    for raw in head.split(b"\n")[:-1]:
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        tokens = line.rsplit(b" ", 2)
        if len(tokens) == 3 and not tokens[1].endswith(b"}"):
            stamp = tokens[2]
            if b"." in stamp or b"e" in stamp.lower():
                return TextFormat.OPENMETRICS
            try:
                # an integer under 1e11 is seconds (before 5138 AD), above it milliseconds
                return TextFormat.OPENMETRICS if abs(int(stamp)) < 10**11 else TextFormat.PROMETHEUS
            except ValueError:
                return TextFormat.PROMETHEUS
        return TextFormat.PROMETHEUS
    return TextFormat.PROMETHEUS


__all__ = ["TextFormat", "find_recording", "load_source", "sniff_text_format"]
