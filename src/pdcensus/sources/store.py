"""Save a Recording to one Parquet file and load it back, exactly and fast.

Layout (one file, one table, sorted so that each series is one contiguous run):

=============  =======  ==============================================================
column         type     meaning
=============  =======  ==============================================================
``endpoint``   UInt16   index into the endpoint list of the file's metadata
``series``     Int32    column index into that endpoint's ``keys``; -1 marks a scrape row
``timestamp``  Float64  seconds since the epoch
``value``      Float64  the sample (NaN samples are kept; absent cells are not stored)
=============  =======  ==============================================================

Why long rather than wide: endpoints have different rows and different series, a wide
table per endpoint would need one file each, and a day of a few hundred series is a few
million cells either way; sorted by series, the long table's ``timestamp`` column is a run
of near-constant steps and ``series``/``endpoint`` are runs of one value, which Parquet's
dictionary and run-length encodings shrink to almost nothing. The ``present`` mask is the
set of cells that have a record, so a NaN *sample* and a *missing* sample stay different.
Each endpoint's scrape rows are written as records with ``series`` = -1, so a row that
holds no sample at all survives the round trip too.

Families, job, instance and the ordered keys travel as JSON in the Parquet key-value
metadata under ``pdcensus.recording`` (schema ``pdcensus/recording/v1``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pdcensus.errors import DataError
from pdcensus.series.model import Endpoint, Family, MetricType, Recording, SeriesKey

SCHEMA = "pdcensus/recording/v1"
METADATA_KEY = "pdcensus.recording"
PARQUET_MAGIC = b"PAR1"
ROW_MARKER = -1


def save_parquet(recording: Recording, path: str | Path) -> None:
    """Write ``recording`` to ``path`` as one Parquet file (zstd)."""
    frames = []
    for e, ep in enumerate(recording.endpoints):
        cols, rows = np.nonzero(ep.present.T)  # column-major: each series contiguous
        n_rows = ep.n_scrapes
        frames.append(
            pl.DataFrame(
                {
                    "endpoint": np.full(n_rows + len(rows), e, dtype=np.uint16),
                    "series": np.concatenate([np.full(n_rows, ROW_MARKER), cols]).astype(np.int32),
                    "timestamp": np.concatenate([ep.timestamps, ep.timestamps[rows]]),
                    "value": np.concatenate([np.full(n_rows, np.nan), ep.values[rows, cols]]),
                }
            )
        )
    table = pl.concat(frames) if frames else pl.DataFrame(
        schema={"endpoint": pl.UInt16, "series": pl.Int32, "timestamp": pl.Float64, "value": pl.Float64}
    )
    meta = {
        "schema": SCHEMA,
        "source": recording.source,
        "families": [[f.name, f.type.value, f.help, f.unit] for f in recording.families.values()],
        "endpoints": [
            {"job": ep.job, "instance": ep.instance, "keys": [[k.name, [list(p) for p in k.labels]] for k in ep.keys]}
            for ep in recording.endpoints
        ],
    }
    try:
        table.write_parquet(path, metadata={METADATA_KEY: json.dumps(meta)})
    except OSError as exc:
        raise DataError(f"{path}: cannot write Parquet: {exc}") from exc


def load_parquet(path: str | Path) -> Recording:
    """Read a file written by :func:`save_parquet`; DataError if it is not one."""
    label = str(path)
    try:
        meta_text = pl.read_parquet_metadata(path).get(METADATA_KEY)
        if meta_text is None:
            raise DataError(f"{label}: a Parquet file without pdcensus metadata (key {METADATA_KEY!r}); "
                            "write it with save_parquet")
        table = pl.read_parquet(path, columns=["endpoint", "series", "timestamp", "value"])
    except (OSError, pl.exceptions.PolarsError, pl.exceptions.PanicException) as exc:
        raise DataError(f"{label}: not a readable Parquet file: {_first_line(exc)}") from exc
    try:
        meta = json.loads(meta_text)
        if meta.get("schema") != SCHEMA:
            raise DataError(f"{label}: unknown recording schema {meta.get('schema')!r}; expected {SCHEMA!r}")
        return _rebuild(label, meta, table)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise DataError(f"{label}: damaged pdcensus metadata: {_first_line(exc)}") from exc


def _rebuild(label: str, meta: dict[str, Any], table: pl.DataFrame) -> Recording:
    families = {
        name: Family(name, MetricType(kind), help_text, unit) for name, kind, help_text, unit in meta["families"]
    }
    endpoint_col = table["endpoint"].to_numpy()
    series_col = table["series"].to_numpy()
    ts_col = table["timestamp"].to_numpy()
    value_col = table["value"].to_numpy()
    bounds = np.searchsorted(endpoint_col, np.arange(len(meta["endpoints"]) + 1))
    if len(endpoint_col) and not (np.all(np.diff(endpoint_col.astype(np.int64)) >= 0)
                                  and endpoint_col[-1] < len(meta["endpoints"])):
        raise DataError(f"{label}: damaged recording table (endpoint column out of order)")
    endpoints = []
    for e, info in enumerate(meta["endpoints"]):
        lo, hi = int(bounds[e]), int(bounds[e + 1])
        series, ts, values = series_col[lo:hi], ts_col[lo:hi], value_col[lo:hi]
        keys = [SeriesKey(name, tuple((str(k), str(v)) for k, v in labels)) for name, labels in info["keys"]]
        marker = series == ROW_MARKER
        row_ts = ts[marker]
        cells = ~marker
        rows = np.searchsorted(row_ts, ts[cells])
        cols = series[cells]
        if len(cols) and (cols.max() >= len(keys) or cols.min() < 0 or rows.max() >= len(row_ts)
                          or not np.array_equal(row_ts[rows], ts[cells])):
            raise DataError(f"{label}: damaged recording table for endpoint {info['instance']!r}")
        matrix = np.full((len(row_ts), len(keys)), np.nan)
        present = np.zeros((len(row_ts), len(keys)), dtype=bool)
        matrix[rows, cols] = values[cells]
        present[rows, cols] = True
        endpoints.append(Endpoint(info["job"], info["instance"], row_ts, keys, matrix, present))
    return Recording(families=families, endpoints=endpoints, source=label)


def is_parquet(head: bytes) -> bool:
    """True if a file starting with ``head`` is Parquet (its magic number)."""
    return head[:4] == PARQUET_MAGIC


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
