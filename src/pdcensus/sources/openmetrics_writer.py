"""Write a recording as OpenMetrics text with a timestamp on every sample and ``# EOF``.

The output is what ``promtool tsdb create-blocks-from openmetrics`` backfills: families are
contiguous, a counter family is declared without ``_total`` (its samples carry it), and a
histogram's buckets, ``_count`` and ``_sum`` are grouped per timestamp (strict OpenMetrics:
one MetricPoint at a time, timestamps increasing within each Metric).

Written by hand because prometheus_client's exposition writes one scrape of a live registry
and cannot emit several timestamped points of one histogram.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import IO

import numpy as np

from pdcensus.series.model import Family, MetricType, Recording, SeriesKey, family_of


def format_value(value: float) -> str:
    """A float as OpenMetrics writes it (``NaN``, ``+Inf``, ``-Inf``, shortest repr)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return f"{int(value)}.0" if value != 0 or math.copysign(1, value) > 0 else "-0.0"
    return repr(float(value))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _series_text(name: str, labels: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
    return f"{name}{{{inner}}}" if inner else name


def _om_family(sample_name: str, families: dict[str, Family]) -> Family:
    """The OpenMetrics family for a sample (a 0.0.4 counter ``foo_total`` becomes ``foo``)."""
    fam = family_of(sample_name, families)
    if fam is None:
        if sample_name == "up":
            return Family("up", MetricType.GAUGE, "1 if the scrape succeeded, 0 if it failed")
        return Family(sample_name, MetricType.UNKNOWN)
    if fam.type is MetricType.COUNTER and fam.name.endswith("_total"):
        return Family(fam.name[: -len("_total")], fam.type, fam.help, fam.unit)
    return fam


def _le_order(key: SeriesKey) -> float:
    le = key.label("le")
    if le is None:
        return math.inf
    try:
        return float(le)
    except ValueError:
        return math.inf


_HIST_ORDER = {"_bucket": 0, "_count": 1, "_sum": 2, "_created": 3}


def write_openmetrics(recording: Recording, out: str | Path | IO[str]) -> None:
    """Write every endpoint of ``recording`` as one OpenMetrics document."""
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="\n") as fh:
            _write(recording, fh)
    else:
        _write(recording, out)


def _write(recording: Recording, fh: IO[str]) -> None:
    # family name -> list of (endpoint index, column index, key)
    groups: dict[str, list[tuple[int, int, SeriesKey]]] = defaultdict(list)
    fams: dict[str, Family] = {}
    for e, ep in enumerate(recording.endpoints):
        for c, key in enumerate(ep.keys):
            fam = _om_family(key.name, recording.families)
            fams.setdefault(fam.name, fam)
            groups[fam.name].append((e, c, key))
    for fam_name in sorted(groups):
        fam = fams[fam_name]
        if fam.help:
            fh.write(f"# HELP {fam_name} {_escape_help(fam.help)}\n")
        fh.write(f"# TYPE {fam_name} {fam.type.value}\n")
        if fam.unit:
            fh.write(f"# UNIT {fam_name} {fam.unit}\n")
        if fam.type in (MetricType.HISTOGRAM, MetricType.GAUGE_HISTOGRAM, MetricType.SUMMARY):
            _write_grouped(recording, fam_name, groups[fam_name], fh)
        else:
            for e, c, key in sorted(groups[fam_name], key=lambda t: (t[2], t[0])):
                _write_column(recording, e, c, key, fh)
    fh.write("# EOF\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _write_column(recording: Recording, e: int, c: int, key: SeriesKey, fh: IO[str]) -> None:
    ep = recording.endpoints[e]
    prefix = _series_text(key.name, key.labels) + " "
    ok = ep.present[:, c]
    ts = ep.timestamps[ok]
    vals = ep.values[ok, c]
    fh.writelines(f"{prefix}{format_value(v)} {t:.3f}\n" for t, v in zip(ts.tolist(), vals.tolist()))


def _write_grouped(
    recording: Recording, fam_name: str, members: list[tuple[int, int, SeriesKey]], fh: IO[str]
) -> None:
    """Histogram/summary: per Metric (labels minus le/quantile), one point per timestamp."""
    metrics: dict[tuple[int, tuple[tuple[str, str], ...]], list[tuple[int, SeriesKey]]] = defaultdict(list)
    for e, c, key in members:
        ident = tuple((k, v) for k, v in key.labels if k not in ("le", "quantile"))
        metrics[(e, ident)].append((c, key))
    for (e, _ident), cols in sorted(metrics.items(), key=lambda t: (t[0][1], t[0][0])):
        ep = recording.endpoints[e]

        def order(item: tuple[int, SeriesKey]) -> tuple[int, float, str]:
            key = item[1]
            suffix = key.name[len(fam_name):]
            q = key.label("quantile")
            return (_HIST_ORDER.get(suffix, -1), float(q) if q else _le_order(key), key.name)

        cols.sort(key=order)
        prefixes = [_series_text(key.name, key.labels) + " " for _c, key in cols]
        idx = np.array([c for c, _key in cols], dtype=int)
        rows = np.flatnonzero(ep.present[:, idx].any(axis=1))
        present = ep.present[:, idx]
        values = ep.values[:, idx]
        for r in rows.tolist():
            t = f" {ep.timestamps[r]:.3f}\n"
            row_ok = present[r]
            row_vals = values[r].tolist()
            fh.writelines(
                prefixes[j] + format_value(row_vals[j]) + t for j in range(len(prefixes)) if row_ok[j]
            )
