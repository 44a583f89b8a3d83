"""The in-memory model of a recording: one endpoint's samples aligned by scrape.

Prometheus's words are used exactly: a *family* is what a ``# TYPE`` line declares, a
*sample name* is what a line carries (a counter family ``foo`` holds ``foo_total``; a
histogram family ``foo`` holds ``foo_bucket``/``foo_count``/``foo_sum``), a *series* is a
sample name plus its label set.

An :class:`Endpoint` is one ``(job, instance)``: ``timestamps`` has one row per scrape
(seconds since the epoch, strictly increasing), ``values`` one column per series, and
``present`` says which cells hold a sample (a real NaN sample value is kept as NaN with
``present`` True; an absent sample is NaN with ``present`` False). Series keys carry
their full label set, ``job`` and ``instance`` included, so a key is what PromQL sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

Labels = tuple[tuple[str, str], ...]


class MetricType(str, Enum):
    """A family's declared type (OpenMetrics names; 0.0.4 ``untyped`` maps to UNKNOWN)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    GAUGE_HISTOGRAM = "gaugehistogram"
    SUMMARY = "summary"
    INFO = "info"
    STATESET = "stateset"
    UNKNOWN = "unknown"


# Suffixes a sample name may carry beyond its family name, per family type.
SAMPLE_SUFFIXES: dict[MetricType, tuple[str, ...]] = {
    MetricType.COUNTER: ("_total", "_created", ""),
    MetricType.HISTOGRAM: ("_bucket", "_count", "_sum", "_created"),
    MetricType.GAUGE_HISTOGRAM: ("_bucket", "_gcount", "_gsum"),
    MetricType.SUMMARY: ("_count", "_sum", "_created", ""),
    MetricType.INFO: ("_info", ""),
    MetricType.GAUGE: ("",),
    MetricType.STATESET: ("",),
    MetricType.UNKNOWN: ("",),
}


@dataclass(frozen=True)
class Family:
    """A metric family as declared by ``# TYPE`` (and ``# HELP``/``# UNIT``)."""

    name: str
    type: MetricType
    help: str = ""
    unit: str = ""


def normalize_labels(labels: Mapping[str, str] | Iterable[tuple[str, str]]) -> Labels:
    """Return labels as a sorted tuple of pairs (the hashable form every key uses)."""
    items = labels.items() if isinstance(labels, Mapping) else labels
    return tuple(sorted((str(k), str(v)) for k, v in items))


@dataclass(frozen=True, order=True)
class SeriesKey:
    """One series: a sample name and its full, sorted label set (no ``__name__``)."""

    name: str
    labels: Labels = ()

    def label(self, key: str, default: str | None = None) -> str | None:
        for k, v in self.labels:
            if k == key:
                return v
        return default

    def without(self, *keys: str) -> SeriesKey:
        return SeriesKey(self.name, tuple((k, v) for k, v in self.labels if k not in keys))

    def with_labels(self, **extra: str) -> SeriesKey:
        merged = dict(self.labels)
        merged.update(extra)
        return SeriesKey(self.name, normalize_labels(merged))

    def __str__(self) -> str:
        if not self.labels:
            return self.name
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in self.labels)
        return f"{self.name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass
class Endpoint:
    """One ``(job, instance)``'s samples, one row per scrape, one column per series."""

    job: str
    instance: str
    timestamps: np.ndarray
    keys: list[SeriesKey]
    values: np.ndarray
    present: np.ndarray
    _index: dict[SeriesKey, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.timestamps = np.asarray(self.timestamps, dtype=np.float64)
        n_rows, n_cols = len(self.timestamps), len(self.keys)
        self.values = np.asarray(self.values, dtype=np.float64).reshape(n_rows, n_cols)
        self.present = np.asarray(self.present, dtype=bool).reshape(n_rows, n_cols)
        self._index = {key: i for i, key in enumerate(self.keys)}

    @property
    def n_scrapes(self) -> int:
        return len(self.timestamps)

    def names(self) -> set[str]:
        """Every sample name this endpoint carries (at least one sample present)."""
        # asarray: numpy's stubs type ``any(axis=0)`` as "array or scalar"; with a 2-D mask it is an array
        seen = np.asarray(self.present.any(axis=0), dtype=bool) if self.n_scrapes else np.zeros(len(self.keys), bool)
        return {key.name for key, ok in zip(self.keys, seen) if ok}

    def has(self, key: SeriesKey) -> bool:
        return key in self._index

    def select(self, name: str, **labels: str) -> list[SeriesKey]:
        """Keys with this sample name whose labels include every ``labels`` pair."""
        want = labels.items()
        return [k for k in self.keys if k.name == name and all(k.label(a) == b for a, b in want)]

    def column(self, key: SeriesKey) -> tuple[np.ndarray, np.ndarray]:
        """``(values, present)`` for one series, aligned with ``timestamps``."""
        i = self._index[key]
        return self.values[:, i], self.present[:, i]

    def samples(self, key: SeriesKey) -> tuple[np.ndarray, np.ndarray]:
        """``(timestamps, values)`` of the samples present for one series."""
        vals, ok = self.column(key)
        return self.timestamps[ok], vals[ok]

    def iter_series(self) -> Iterator[tuple[SeriesKey, np.ndarray, np.ndarray]]:
        for key in self.keys:
            ts, vals = self.samples(key)
            yield key, ts, vals

    def scrape_interval_seconds(self) -> float:
        """The median gap between scrapes (NaN with fewer than two scrapes)."""
        if self.n_scrapes < 2:
            return float("nan")
        return float(np.median(np.diff(self.timestamps)))

    def slice_time(self, start: float | None = None, end: float | None = None) -> Endpoint:
        """The rows with ``start <= t <= end`` (either bound may be None)."""
        lo = 0 if start is None else int(np.searchsorted(self.timestamps, start, "left"))
        hi = self.n_scrapes if end is None else int(np.searchsorted(self.timestamps, end, "right"))
        return self.slice_rows(lo, hi)

    def slice_rows(self, lo: int, hi: int) -> Endpoint:
        """Rows ``lo:hi``; series with no sample left are dropped."""
        return self.take_rows(slice(lo, hi))

    def take_rows(self, rows: slice) -> Endpoint:
        """The rows a slice selects (a stride keeps every K-th scrape); series with no sample left are dropped."""
        keep = self.present[rows].any(axis=0)
        cols = np.flatnonzero(keep)
        return Endpoint(
            job=self.job,
            instance=self.instance,
            timestamps=self.timestamps[rows].copy(),
            keys=[self.keys[i] for i in cols],
            values=self.values[rows][:, cols].copy(),
            present=self.present[rows][:, cols].copy(),
        )


@dataclass
class Recording:
    """Every endpoint found in one source, with the families they declared."""

    families: dict[str, Family]
    endpoints: list[Endpoint]
    source: str = ""

    def instances(self) -> list[str]:
        return [ep.instance for ep in self.endpoints]

    def endpoint(self, instance: str | None = None) -> Endpoint:
        """The endpoint with this instance label (the only one when ``instance`` is None)."""
        from pdcensus.errors import DataError, UsageError

        if not self.endpoints:
            raise DataError(f"{self.source or 'recording'}: no endpoint in the recording")
        if instance is None:
            if len(self.endpoints) == 1:
                return self.endpoints[0]
            raise UsageError(
                f"{self.source}: {len(self.endpoints)} instances; pick one with --instance: "
                + ", ".join(self.instances())
            )
        for ep in self.endpoints:
            if ep.instance == instance:
                return ep
        raise UsageError(f"no instance {instance!r}; choose one of: " + ", ".join(self.instances()))

    def type_of(self, sample_name: str) -> MetricType:
        """The declared type of the family a sample name belongs to (UNKNOWN if none)."""
        family = family_of(sample_name, self.families)
        return family.type if family else MetricType.UNKNOWN


def family_of(sample_name: str, families: Mapping[str, Family]) -> Family | None:
    """The family that a sample name belongs to, by Prometheus's suffix rules."""
    if sample_name in families:
        fam = families[sample_name]
        if "" in SAMPLE_SUFFIXES[fam.type]:
            return fam
    for suffix in ("_total", "_bucket", "_count", "_sum", "_created", "_gcount", "_gsum", "_info"):
        if sample_name.endswith(suffix):
            owner = families.get(sample_name[: -len(suffix)])
            if owner is not None and suffix in SAMPLE_SUFFIXES[owner.type]:
                return owner
    return None


class RecordingBuilder:
    """Accumulates samples, then aligns them into endpoints (one row per scrape).

    Rows are the union of the timestamps seen for an endpoint. Timestamps are rounded to
    the millisecond, as Prometheus stores them. A later sample for the same series and
    timestamp replaces the earlier one (the reader rejects duplicates before that).
    """

    def __init__(self, source: str = "") -> None:
        self.source = source
        self.families: dict[str, Family] = {}
        self._data: dict[tuple[str, str], dict[SeriesKey, tuple[list[float], list[float]]]] = {}

    def add_family(self, family: Family) -> None:
        self.families.setdefault(family.name, family)

    def add(self, key: SeriesKey, timestamp: float, value: float) -> None:
        """Add one sample; ``key.labels`` must include ``job`` and ``instance`` if known."""
        ep = (key.label("job", "") or "", key.label("instance", "") or "")
        per = self._data.setdefault(ep, {})
        ts, vals = per.setdefault(key, ([], []))
        ts.append(timestamp)
        vals.append(value)

    def add_many(self, key: SeriesKey, timestamps: Iterable[float], values: Iterable[float]) -> None:
        ep = (key.label("job", "") or "", key.label("instance", "") or "")
        per = self._data.setdefault(ep, {})
        ts, vals = per.setdefault(key, ([], []))
        ts.extend(timestamps)
        vals.extend(values)

    def build(self) -> Recording:
        endpoints = [
            align_endpoint(job, instance, series)
            for (job, instance), series in sorted(self._data.items())
        ]
        return Recording(families=dict(self.families), endpoints=endpoints, source=self.source)


def align_endpoint(
    job: str,
    instance: str,
    series: Mapping[SeriesKey, tuple[Iterable[float], Iterable[float]]],
) -> Endpoint:
    """Align per-series ``(timestamps, values)`` onto the union of their timestamps."""
    keys = sorted(series)
    arrays = []
    for key in keys:
        ts, vals = series[key]
        t = np.round(np.asarray(list(ts) if not isinstance(ts, np.ndarray) else ts, float), 3)
        v = np.asarray(list(vals) if not isinstance(vals, np.ndarray) else vals, float)
        arrays.append((t, v))
    all_ts = np.unique(np.concatenate([t for t, _ in arrays])) if arrays else np.empty(0)
    values = np.full((len(all_ts), len(keys)), np.nan)
    present = np.zeros((len(all_ts), len(keys)), dtype=bool)
    for j, (t, v) in enumerate(arrays):
        rows = np.searchsorted(all_ts, t)
        values[rows, j] = v
        present[rows, j] = True
    return Endpoint(job, instance, all_ts, keys, values, present)
