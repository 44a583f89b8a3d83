"""Collect parsed samples as flat arrays, then align them into endpoints in a few numpy passes.

The text reader hands over, chunk by chunk, four parallel arrays (series id, value,
timestamp, line number) and a table of distinct series. :func:`SampleTable.to_recording`
checks them (a series with two samples at one timestamp; in OpenMetrics, a series whose
timestamps go backwards) and places every sample in its endpoint's scrape-by-series
matrix with one ``searchsorted`` and one scatter per endpoint, instead of a Python loop
per sample (``RecordingBuilder`` does the same job one sample at a time).

The matrix is dense, so a recording whose series churn (a new label set every scrape) costs
timestamps x series cells: more than :func:`pdcensus.sources.limits.max_cells` (17 bytes a
cell) or more than ``max_series`` distinct series is refused with one line, not a
``MemoryError``.

Timestamps are rounded to the millisecond first, as Prometheus stores them, so two samples
less than half a millisecond apart are the same sample.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pdcensus.errors import DataError, RecordingParseError
from pdcensus.series.model import Endpoint, Family, Recording, SeriesKey
from pdcensus.sources.limits import MAX_CELLS_ENV, MAX_SERIES_ENV, max_cells, max_series


@dataclass
class SampleTable:
    """Every sample read so far: series ids index ``keys``; NaN timestamp = none written."""

    source: str
    keys: list[SeriesKey] = field(default_factory=list)
    key_ids: dict[SeriesKey, int] = field(default_factory=dict)
    _series: list[np.ndarray] = field(default_factory=list)
    _values: list[np.ndarray] = field(default_factory=list)
    _timestamps: list[np.ndarray] = field(default_factory=list)
    _lines: list[np.ndarray] = field(default_factory=list)
    max_series: int = field(default_factory=max_series)
    max_cells: int = field(default_factory=max_cells)

    def series_id(self, key: SeriesKey) -> int:
        """The id of ``key``, assigning the next one on first sight (refused past ``max_series``)."""
        found = self.key_ids.get(key)
        if found is None:
            if len(self.keys) >= self.max_series:
                raise DataError(f"{self.source}: more than {self.max_series:,} distinct series (label churn?); "
                                f"refused before reading on (raise the limit with {MAX_SERIES_ENV}=N)")
            found = self.key_ids[key] = len(self.keys)
            self.keys.append(key)
        return found

    def extend(self, series: np.ndarray, values: np.ndarray, timestamps: np.ndarray, lines: np.ndarray) -> None:
        """Append a chunk's samples, in file order."""
        if len(series):
            self._series.append(np.asarray(series, dtype=np.int32))
            self._values.append(np.asarray(values, dtype=np.float64))
            self._timestamps.append(np.asarray(timestamps, dtype=np.float64))
            self._lines.append(np.asarray(lines, dtype=np.int64))

    def __len__(self) -> int:
        return sum(len(s) for s in self._series)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(series, values, timestamps, lines)`` concatenated, in file order."""
        if not self._series:
            empty = np.empty(0)
            return np.empty(0, np.int32), empty, empty.copy(), np.empty(0, np.int64)
        series, values, timestamps, lines = (
            np.concatenate(parts) for parts in (self._series, self._values, self._timestamps, self._lines))
        self._series, self._values, self._timestamps, self._lines = [series], [values], [timestamps], [lines]
        return series, values, timestamps, lines

    def to_recording(
        self, families: dict[str, Family], *, timestamps_seconds: np.ndarray, forbid_backwards: bool
    ) -> Recording:
        """Align into endpoints; ``timestamps_seconds`` replaces the raw timestamp column."""
        series, values, _raw, lines = self.arrays()
        ts = np.round(timestamps_seconds, 3)
        endpoint_of_key: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(self.keys):
            ident = (key.label("job", "") or "", key.label("instance", "") or "")
            endpoint_of_key.setdefault(ident, []).append(i)
        endpoints = []
        n_endpoints = len(endpoint_of_key)
        endpoint_index = np.zeros(len(self.keys), dtype=np.int32)
        for e, ident in enumerate(sorted(endpoint_of_key)):
            endpoint_index[endpoint_of_key[ident]] = e
        sample_endpoint = endpoint_index[series] if n_endpoints > 1 else None
        for e, (job, instance) in enumerate(sorted(endpoint_of_key)):
            ids = endpoint_of_key[(job, instance)]
            if sample_endpoint is None:
                s_series, s_values, s_ts, s_lines = series, values, ts, lines
            else:
                sel_mask = sample_endpoint == e
                s_series, s_values, s_ts, s_lines = (a[sel_mask] for a in (series, values, ts, lines))
            endpoints.append(
                self._align(job, instance, ids, s_series, s_values, s_ts, s_lines, forbid_backwards)
            )
        return Recording(families=families, endpoints=endpoints, source=self.source)

    def _align(
        self,
        job: str,
        instance: str,
        ids: list[int],
        series: np.ndarray,
        values: np.ndarray,
        ts: np.ndarray,
        lines: np.ndarray,
        forbid_backwards: bool,
    ) -> Endpoint:
        order_keys = sorted(ids, key=lambda i: self.keys[i])
        column_of = np.full(len(self.keys), -1, dtype=np.int64)
        column_of[order_keys] = np.arange(len(order_keys))
        cols = column_of[series]
        row_ts = np.unique(ts)
        rows = np.searchsorted(row_ts, ts)
        n_cols = len(order_keys)
        if len(row_ts) * n_cols > self.max_cells:  # the grid is dense: timestamps x series, 17 bytes a cell
            raise DataError(
                f"{self.source}: endpoint {instance or job!r} has {n_cols:,} series x {len(row_ts):,} distinct "
                f"timestamps, a grid of {len(row_ts) * n_cols:,} cells (~{len(row_ts) * n_cols * 17 / 2**30:.1f} GiB); "
                f"refused over the limit of {self.max_cells:,} cells (label churn or unaligned timestamps?; "
                f"raise it with {MAX_CELLS_ENV}=N)")
        self._check_order(cols, rows, lines, forbid_backwards, order_keys)
        cells = rows * n_cols + cols
        matrix = np.full(len(row_ts) * n_cols, np.nan)
        present = np.zeros(len(row_ts) * n_cols, dtype=bool)
        matrix[cells] = values
        present[cells] = True
        return Endpoint(
            job=job,
            instance=instance,
            timestamps=row_ts,
            keys=[self.keys[i] for i in order_keys],
            values=matrix.reshape(len(row_ts), n_cols),
            present=present.reshape(len(row_ts), n_cols),
        )

    def _check_order(
        self, cols: np.ndarray, rows: np.ndarray, lines: np.ndarray, forbid_backwards: bool, order_keys: list[int]
    ) -> None:
        """Raise on a repeated (series, timestamp) and, if asked, on a series going backwards."""
        if len(cols) < 2:
            return
        n_cols = len(order_keys)
        cells = rows * n_cols + cols
        repeated = np.bincount(cells, minlength=(int(rows.max()) + 1) * n_cols).max() > 1
        if not repeated and not forbid_backwards:
            return
        if forbid_backwards:
            # file order within each series: a stable sort by column keeps it
            order = np.argsort(cols, kind="stable")
        else:
            order = np.lexsort((lines, rows, cols))
        c, r = cols[order], rows[order]
        same_series = c[1:] == c[:-1]
        step = r[1:] - r[:-1]
        bad = same_series & ((step <= 0) if forbid_backwards else (step == 0))
        if not bad.any():
            return
        # report the earliest offending line in the file
        offenders = order[1:][bad]
        first = offenders[np.argmin(lines[offenders])]
        at = int(np.flatnonzero(order == first)[0])
        previous = order[at - 1]
        key = self.keys[order_keys[int(cols[first])]]
        if rows[first] == rows[previous]:
            what = (
                f"duplicate sample: series {_quote_key(key)} already has a sample at this timestamp "
                f"(line {int(lines[previous])})"
            )
        else:
            what = (
                f"timestamp goes backwards in series {_quote_key(key)} "
                f"(line {int(lines[previous])} has a later one)"
            )
        raise RecordingParseError(self.source, int(lines[first]), what)


def _quote_key(key: SeriesKey, limit: int = 80) -> str:
    text = str(key)
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."
