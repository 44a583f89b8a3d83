"""The streaming reader behind :mod:`pdcensus.sources.textformat`: chunks of whole lines in, a Recording out.

Split from ``textformat`` (its public entry points, file opening and naming) so that each
file stays one concept. How it reads, and why by hand, is :mod:`pdcensus.sources.textformat`'s
docstring: one bulk polars pass per chunk, Python only for each distinct series text,
metadata and the lines the bulk pass could not take apart.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import BinaryIO

import numpy as np
import polars as pl

from pdcensus.errors import DataError, RecordingParseError
from pdcensus.series.model import Family, MetricType, Recording, SeriesKey
from pdcensus.sources.exposition_lines import (
    TYPE_NAMES,
    LineError,
    MetadataKind,
    parse_metadata,
    parse_sample_line,
    parse_series_text,
    quote,
)
from pdcensus.sources.limits import (
    MAX_DECOMPRESSED_ENV,
    MAX_LINE_ENV,
    human_size,
    max_decompressed_bytes,
    max_line_bytes,
    over_cap,
)
from pdcensus.sources.sample_table import SampleTable

CHUNK_BYTES = 16 << 20
MAX_TIMESTAMP_SECONDS = 1e11  # year 5138: a larger timestamp is in the wrong unit
DEFAULT_JOB = "pdcensus"


class TextFormat(str, Enum):
    """Which text exposition a file holds."""

    PROMETHEUS = "prometheus-0.0.4"
    OPENMETRICS = "openmetrics"


@dataclass(frozen=True)
class ReadOptions:
    """What the file cannot say for itself: the endpoint of unlabelled samples and the scrape time."""

    job: str = DEFAULT_JOB
    instance: str = ""
    scrape_time: float | None = None


@dataclass
class FamilyDraft:
    type: MetricType | None = None
    help: str = ""
    unit: str = ""
    type_line: int = 0


@dataclass
class TextReader:
    """One read of one file: chunks in, a Recording out."""

    source: str
    fmt: TextFormat
    options: ReadOptions
    chunk_bytes: int = CHUNK_BYTES
    max_line_bytes: int = 0  # 0: limits.max_line_bytes()
    table: SampleTable = field(init=False)
    drafts: dict[str, FamilyDraft] = field(default_factory=dict)
    text_ids: dict[str, int] = field(default_factory=dict)
    eof_line: int = 0
    n_lines: int = 0
    max_line: int = field(init=False)

    def __post_init__(self) -> None:
        self.table = SampleTable(self.source)
        self.max_line = self.max_line_bytes or max_line_bytes()

    @property
    def openmetrics(self) -> bool:
        return self.fmt is TextFormat.OPENMETRICS

    def read(self, fh: BinaryIO) -> Recording:
        for chunk, first_line, n_lines in self._chunks(fh):
            if self.eof_line:
                self._fail(self.eof_line + 1, "text after '# EOF'")
            self._read_chunk(chunk, first_line, n_lines)
        return self._finish()

    def _fail(self, line: int, what: str) -> None:
        raise RecordingParseError(self.source, line, what)

    def _chunks(self, fh: BinaryIO) -> Iterator[tuple[bytes, int, int]]:
        """``(chunk of whole lines, its first line number, its number of lines)``."""
        carry = b""
        line = 1
        first = True
        total = 0
        gzipped = isinstance(fh, gzip.GzipFile)
        max_line = self.max_line
        max_total = max_decompressed_bytes() if gzipped else 0
        while True:
            block = fh.read(min(self.chunk_bytes, max_line + 1))
            if not block:
                break
            total += len(block)
            if max_total and total > max_total:
                raise over_cap(f"{self.source}: the decompressed recording", max_total, MAX_DECOMPRESSED_ENV)
            buf = carry + block if carry else block
            if first:
                self._check_text_start(buf)
                first = False
            cut = buf.rfind(b"\n")
            if len(buf) - cut - 1 > max_line:  # the line still open after the last newline
                at = line + (buf.count(b"\n") if cut >= 0 else 0)
                self._check_binary(buf[cut + 1:cut + 1 + 4096], at)
                self._line_too_long(at, buf[cut + 1:cut + 81].decode("utf-8", "replace"))
            if cut < 0:
                carry = buf
                continue
            chunk, carry = buf[: cut + 1], buf[cut + 1 :]
            n_lines = chunk.count(b"\n")
            yield chunk, line, n_lines
            line += n_lines
        self.n_lines = line - 1
        if first:
            self._fail(1, "empty file: no sample")
        if carry:
            self._check_binary(carry, line)
            text = carry.decode("utf-8", "replace")
            if self.eof_line:
                self._fail(self.eof_line + 1, "text after '# EOF'")
            self._fail(line, f"last line has no newline (truncated mid-line?): {quote(text)}")

    def _line_too_long(self, line: int, head: str) -> None:
        self._fail(line, f"a line longer than {human_size(self.max_line)}: {quote(head[:80])}; refused before "
                         f"reading the rest (raise the limit with {MAX_LINE_ENV}=SIZE)")

    def _check_text_start(self, buf: bytes) -> None:
        stripped = buf.lstrip()
        if stripped[:1] in (b"{", b"["):
            line = buf.count(b"\n", 0, len(buf) - len(stripped)) + 1
            self._fail(line, "looks like JSON, not a metrics exposition")

    def _check_binary(self, chunk: bytes, first_line: int) -> None:
        at = chunk.find(b"\x00")
        if at >= 0:
            line = first_line + chunk.count(b"\n", 0, at)
            column = at - chunk.rfind(b"\n", 0, at)
            self._fail(line, f"not a text metrics file (NUL byte at column {column})")
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = first_line + chunk.count(b"\n", 0, exc.start)
            column = exc.start - chunk.rfind(b"\n", 0, exc.start)
            self._fail(line, f"not a text metrics file (invalid UTF-8 at column {column}: {exc.reason})")

    # -- one chunk ---------------------------------------------------------------------

    def _read_chunk(self, chunk: bytes, first_line: int, n_lines: int) -> None:
        if b"\x00" in chunk:
            self._check_binary(chunk, first_line)
        try:
            lines = pl.read_csv(
                chunk, has_header=False, separator="\x01", quote_char=None,
                schema={"l": pl.String}, raise_if_empty=False,
            )
        except (pl.exceptions.PolarsError, pl.exceptions.PanicException, ValueError):
            self._read_chunk_slowly(chunk, first_line)
            return
        if lines.height != n_lines:
            self._read_chunk_slowly(chunk, first_line)
            return
        if len(chunk) > self.max_line:  # a whole line inside the chunk may still be over the cap
            lengths = lines["l"].str.len_bytes().fill_null(0)
            longest = int(lengths.arg_max() or 0)
            if int(lengths[longest]) > self.max_line:
                self._line_too_long(first_line + longest, str(lines["l"][longest]))
        self._bulk(lines.with_row_index("row"), first_line, chunk.isascii())
        if self.eof_line and self.eof_line != first_line + n_lines - 1:
            self._fail(self.eof_line + 1, "text after '# EOF'")

    def _bulk(self, lines: pl.DataFrame, first_line: int, ascii_only: bool) -> None:
        text = pl.col("l")
        lines = lines.filter(text.is_not_null())
        is_meta = text.str.starts_with("#")
        for row, line in lines.filter(is_meta).iter_rows():
            self._metadata(line, first_line + row)
        parts = text.str.split(" ")
        t_tok, v_tok = pl.col("t_tok"), pl.col("v_tok")
        t, v, has_ts = pl.col("t"), pl.col("v"), pl.col("has_ts")

        def length(expr: pl.Expr) -> pl.Expr:  # str.head counts characters; bytes are cheaper
            return (expr.str.len_bytes() if ascii_only else expr.str.len_chars()).cast(pl.Int64)

        cut = length(text) - length(t_tok)
        samples = (
            lines.lazy()
            .filter(~is_meta)
            .with_columns(n=parts.list.len(), t_tok=parts.list.last(), v_tok=parts.list.get(-2, null_on_oob=True))
            .with_columns(t=t_tok.cast(pl.Float64, strict=False), v=v_tok.cast(pl.Float64, strict=False))
            .with_columns(has_ts=(pl.col("n") >= 3) & v.is_not_null() & t.is_not_null())
            .with_columns(
                ok=(has_ts & t.is_finite()) | (~has_ts & (pl.col("n") >= 2) & t.is_not_null()),
                series=pl.when(has_ts).then(text.str.head(cut - length(v_tok) - 2)).otherwise(text.str.head(cut - 1)),
                value=pl.when(has_ts).then(v).otherwise(t),
                ts=pl.when(has_ts).then(t).otherwise(float("nan")),
            )
            .select("row", "l", "ok", "series", "value", "ts")
            .collect()
        )
        if samples.height == 0:
            return
        ok = samples.filter(pl.col("ok"))
        texts = ok["series"].unique().to_list()
        ids = np.array([self._series_id_of_text(s) for s in texts] + [-1], dtype=np.int32)
        codes = ok["series"].cast(pl.Enum(texts)).to_physical().to_numpy() if texts else np.empty(0, np.int64)
        sid = ids[codes]
        good = sid >= 0
        values = ok["value"].to_numpy()[good]
        stamps = ok["ts"].to_numpy()[good]
        rows = ok["row"].to_numpy().astype(np.int64)
        slow_rows = np.concatenate([samples.filter(~pl.col("ok"))["row"].to_numpy().astype(np.int64), rows[~good]])
        sid, rows = sid[good], rows[good] + first_line
        if len(slow_rows):
            slow = samples.filter(pl.col("row").is_in(pl.Series(slow_rows, dtype=pl.UInt32).implode()))
            extra = [self._slow_sample(line, first_line + row) for row, line in slow.select("row", "l").iter_rows()]
            sid = np.concatenate([sid, np.array([e[0] for e in extra], dtype=np.int32)])
            values = np.concatenate([values, [e[1] for e in extra]])
            stamps = np.concatenate([stamps, [e[2] for e in extra]])
            rows = np.concatenate([rows, slow["row"].to_numpy().astype(np.int64) + first_line])
            order = np.argsort(rows, kind="stable")
            sid, values, stamps, rows = sid[order], values[order], stamps[order], rows[order]
        self.table.extend(sid, values, stamps, rows)

    def _read_chunk_slowly(self, chunk: bytes, first_line: int) -> None:
        """Line by line in Python: for chunks the bulk pass refused (it only ever refuses odd input)."""
        self._check_binary(chunk, first_line)
        text = chunk.decode("utf-8")
        sid: list[int] = []
        values: list[float] = []
        stamps: list[float] = []
        rows: list[int] = []
        for i, line in enumerate(text.split("\n")[:-1]):
            number = first_line + i
            line = line.removesuffix("\r")
            if len(line) > self.max_line:  # characters <= bytes: a cheap first test
                if len(line.encode("utf-8")) > self.max_line:
                    self._line_too_long(number, line[:80])
            if self.eof_line and number > self.eof_line:
                self._fail(self.eof_line + 1, "text after '# EOF'")
            if not line:
                continue
            if line.startswith("#"):
                self._metadata(line, number)
                continue
            s, v, t = self._slow_sample(line, number)
            sid.append(s)
            values.append(v)
            stamps.append(t)
            rows.append(number)
        self.table.extend(np.array(sid), np.array(values), np.array(stamps), np.array(rows))

    def _slow_sample(self, line: str, number: int) -> tuple[int, float, float]:
        try:
            parsed = parse_sample_line(line, self.openmetrics)
        except LineError as exc:
            raise RecordingParseError(self.source, number, exc.what) from None
        stamp = math.nan if parsed.timestamp is None else parsed.timestamp
        return self._key_id(parsed.name, parsed.labels), parsed.value, stamp

    def _series_id_of_text(self, text: str) -> int:
        found = self.text_ids.get(text)
        if found is None:
            try:
                name, labels = parse_series_text(text)
            except LineError:
                found = -1  # the careful per-line parse names the error (or finds an exemplar)
            else:
                found = self._key_id(name, labels)
            self.text_ids[text] = found
        return found

    def _key_id(self, name: str, labels: tuple[tuple[str, str], ...]) -> int:
        merged = {k: v for k, v in labels if v != ""}
        merged.setdefault("job", self.options.job)
        if self.options.instance:
            merged.setdefault("instance", self.options.instance)
        return self.table.series_id(SeriesKey(name, tuple(sorted(merged.items()))))

    def _metadata(self, line: str, number: int) -> None:
        if self.eof_line:
            self._fail(self.eof_line + 1, "text after '# EOF'")
        try:
            meta = parse_metadata(line, self.openmetrics)
        except LineError as exc:
            raise RecordingParseError(self.source, number, exc.what) from None
        if meta.kind is MetadataKind.EOF:
            self.eof_line = number
            return
        if meta.kind is MetadataKind.COMMENT:
            return
        draft = self.drafts.setdefault(meta.family, FamilyDraft())
        if meta.kind is MetadataKind.TYPE:
            kind = TYPE_NAMES[meta.text]
            if draft.type is not None and draft.type is not kind:
                self._fail(number, f"family {meta.family!r} declared {meta.text!r} here but "
                                   f"{draft.type.value!r} on line {draft.type_line}")
            draft.type, draft.type_line = kind, number
        elif meta.kind is MetadataKind.HELP:
            draft.help = meta.text
        else:
            draft.unit = meta.text

    # -- the end -----------------------------------------------------------------------

    def _finish(self) -> Recording:
        if self.openmetrics and not self.eof_line:
            self._fail(max(self.n_lines, 1), "no '# EOF': truncated?")
        if len(self.table) == 0:
            self._fail(max(self.n_lines, 1), "no sample in the file")
        series, values, raw, lines = self.table.arrays()
        missing = np.isnan(raw)
        explicit = not missing.all()
        if self.openmetrics:
            if explicit and missing.any():
                first = int(np.argmax(missing))
                key = self.table.keys[int(series[first])]
                self._fail(int(lines[first]), f"sample of {quote(str(key))} has no timestamp while others "
                                              "have one: mixing is ambiguous")
            seconds = raw
        else:
            seconds = raw / 1000.0
        if missing.any():
            if self.options.scrape_time is None:
                raise DataError(f"{self.source}: samples have no timestamp; give the scrape time")
            seconds = np.where(missing, self.options.scrape_time, seconds)
        self._check_timestamps(seconds, lines, series)
        if not explicit and not self.openmetrics:
            seconds = self._add_up(seconds)
        families = {
            name: Family(name, d.type if d.type is not None else MetricType.UNKNOWN, d.help, d.unit)
            for name, d in self.drafts.items()
        }
        return self.table.to_recording(families, timestamps_seconds=seconds, forbid_backwards=self.openmetrics)

    def _check_timestamps(self, seconds: np.ndarray, lines: np.ndarray, series: np.ndarray) -> None:
        """A timestamp no clock gives (past year 5138, or not finite) is refused with its line, not read as data.

        The refusal names the sample names that carry such timestamps, so that a family in the
        wrong unit among good ones is named, never dropped without a word.
        """
        bad = ~np.isfinite(seconds) | (np.abs(seconds) > MAX_TIMESTAMP_SECONDS)
        if not bad.any():
            return
        first = int(np.argmax(bad))
        unit, wrong, kind = (("seconds", "milliseconds", "an OpenMetrics") if self.openmetrics
                             else ("milliseconds", "microseconds", "a Prometheus 0.0.4"))
        shown = f"{seconds[first]:.6g} s" if np.isfinite(seconds[first]) else str(seconds[first])
        names = sorted({self.table.keys[int(i)].name for i in np.unique(series[bad])})
        which = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        total = len({k.name for k in self.table.keys})
        whole = "every sample" if bool(bad.all()) else f"{len(names)} of {total} sample names"
        self._fail(int(lines[first]), f"timestamp {shown} is past year 5138 ({int(bad.sum())} such sample(s), "
                                      f"{whole}: {which}): {wrong} in {kind} file, which counts {unit}? "
                                      "Refused, not converted or dropped")

    def _add_up(self, seconds: np.ndarray) -> np.ndarray:
        """Add ``up`` = 1 at the scrape time for each endpoint of a timestamp-less scrape."""
        endpoints = {(k.label("job", ""), k.label("instance", "")) for k in self.table.keys}
        have_up = {(k.label("job", ""), k.label("instance", "")) for k in self.table.keys if k.name == "up"}
        added = []
        for job, instance in sorted(endpoints - have_up):
            labels = {"job": job or "", "instance": instance or ""}
            key = SeriesKey("up", tuple(sorted((k, v) for k, v in labels.items() if v)))
            added.append(self.table.series_id(key))
        if not added:
            return seconds
        n = len(added)
        self.table.extend(np.array(added), np.ones(n), np.full(n, math.nan), np.full(n, self.n_lines + 1))
        assert self.options.scrape_time is not None
        return np.concatenate([seconds, np.full(n, self.options.scrape_time)])
