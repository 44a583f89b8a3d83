"""Raw samples for the PromQL evaluator: series with millisecond timestamps and stale markers.

The evaluator reads raw samples, never the aligned grid of a recording, because PromQL's
windows are defined over the samples each series really has (a missed scrape is a gap,
not a NaN). A series is kept as sorted millisecond timestamps, float values and a
``stale`` mask: a stale marker ends a series for the lookback of an instant selector and
is skipped by range selectors, as in Prometheus. A series that also holds native
histogram samples is kept with ``has_histograms`` set, so that a query touching it is
refused by name instead of answered wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from pdcensus.series.model import Recording
from pdcensus.series.promql.values import METRIC_NAME, Labels, label_value, labels_from_mapping


@dataclass(frozen=True)
class StoredSeries:
    """One series' raw samples, sorted by time (milliseconds)."""

    labels: Labels
    timestamps_ms: np.ndarray
    values: np.ndarray
    stale: np.ndarray
    has_histograms: bool = False

    @property
    def name(self) -> str:
        return label_value(self.labels, METRIC_NAME)


class MatchKind(str, Enum):
    """A label matcher's operator."""

    EQUAL = "="
    NOT_EQUAL = "!="
    REGEX = "=~"
    NOT_REGEX = "!~"


@dataclass(frozen=True)
class LabelMatcher:
    """``name op "value"``; regexes are anchored at both ends, as in Prometheus."""

    name: str
    kind: MatchKind
    value: str

    def compiled(self) -> re.Pattern[str] | None:
        if self.kind in (MatchKind.REGEX, MatchKind.NOT_REGEX):
            return compile_go_regex(self.value)
        return None

    def matches(self, labels: Labels, pattern: re.Pattern[str] | None = None) -> bool:
        actual = label_value(labels, self.name)
        if self.kind is MatchKind.EQUAL:
            return actual == self.value
        if self.kind is MatchKind.NOT_EQUAL:
            return actual != self.value
        pat = pattern if pattern is not None else self.compiled()
        assert pat is not None
        hit = pat.fullmatch(actual) is not None
        return hit if self.kind is MatchKind.REGEX else not hit


def compile_go_regex(pattern: str, dotall: bool = True) -> re.Pattern[str]:
    """Compile a Go (RE2) regex with Python's ``re``.

    RE2 allows a flag group ``(?i)`` anywhere, scoped to the end of the enclosing group;
    Python allows it only at the very start, so such groups are rewritten to the scoped
    form ``(?i:...)``. Patterns Python cannot read are refused as unsupported.
    """
    out: list[str] = []
    closers: list[int] = []  # per open group: how many extra ")" to emit when it closes
    extra_at_end = 0
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                skip = 2 if pattern[i + 1] == "]" else 3
                out.append(pattern[i + 1:i + skip])
                i += skip
                continue
            i += 1
            continue
        flags = re.match(r"\(\?([a-zA-Z]+)\)", pattern[i:])
        if flags and i > 0:
            out.append(f"(?{flags.group(1)}:")
            if closers:
                closers[-1] += 1
            else:
                extra_at_end += 1
            i += flags.end()
            continue
        if ch == "(":
            closers.append(0)
        elif ch == ")" and closers:
            out.append(")" * closers.pop())
        out.append(ch)
        i += 1
    translated = "".join(out) + ")" * extra_at_end
    try:
        return re.compile(translated, re.DOTALL if dotall else 0)
    except re.error as exc:
        from pdcensus.errors import UnsupportedQueryError

        raise UnsupportedQueryError(
            f"unsupported regular expression {pattern!r} ({exc}); supported: RE2 syntax that Python's re shares"
        ) from None


class Storage:
    """A set of series to query; build it with :meth:`from_series` or
    :func:`storage_from_recording`."""

    def __init__(self, series: Iterable[StoredSeries] = ()) -> None:
        self._series: dict[Labels, StoredSeries] = {}
        for item in series:
            self.put(item)

    def put(self, series: StoredSeries) -> None:
        """Add a series, merging its samples with any already stored under the same labels."""
        old = self._series.get(series.labels)
        if old is not None:
            ts = np.concatenate([old.timestamps_ms, series.timestamps_ms])
            order = np.argsort(ts, kind="stable")
            series = StoredSeries(
                labels=series.labels,
                timestamps_ms=ts[order],
                values=np.concatenate([old.values, series.values])[order],
                stale=np.concatenate([old.stale, series.stale])[order],
                has_histograms=old.has_histograms or series.has_histograms,
            )
        self._series[series.labels] = series

    @classmethod
    def from_series(
        cls,
        items: Iterable[tuple[Mapping[str, str], Sequence[float], Sequence[float]]],
    ) -> Storage:
        """Build from ``(labels, timestamps_seconds, values)`` triples.

        ``labels`` includes ``__name__``. Timestamps are Unix seconds (rounded to the
        millisecond, as Prometheus stores them) and must not repeat within a series.
        """
        storage = cls()
        for labels, timestamps, values in items:
            ts = np.round(np.asarray(timestamps, dtype=np.float64) * 1000.0).astype(np.int64)
            vals = np.asarray(values, dtype=np.float64)
            order = np.argsort(ts, kind="stable")
            storage.put(
                StoredSeries(
                    labels=labels_from_mapping(dict(labels)),
                    timestamps_ms=ts[order],
                    values=vals[order],
                    stale=np.zeros(len(ts), dtype=bool),
                )
            )
        return storage

    def __len__(self) -> int:
        return len(self._series)

    def all_series(self) -> list[StoredSeries]:
        return list(self._series.values())

    def select(self, matchers: Sequence[LabelMatcher]) -> list[StoredSeries]:
        """Every series whose labels satisfy all matchers, sorted by labels."""
        compiled = [(m, m.compiled()) for m in matchers]
        names = [m.value for m in matchers if m.name == METRIC_NAME and m.kind is MatchKind.EQUAL]
        candidates: Iterable[StoredSeries] = self._series.values()
        if names:
            candidates = [s for s in candidates if s.name == names[0]]
        out = [s for s in candidates if all(m.matches(s.labels, pat) for m, pat in compiled)]
        out.sort(key=lambda s: s.labels)
        return out


def storage_from_recording(recording: Recording) -> Storage:
    """Every present sample of every endpoint of a recording, as raw series."""
    storage = Storage()
    for endpoint in recording.endpoints:
        ts_ms = np.round(endpoint.timestamps * 1000.0).astype(np.int64)
        for key in endpoint.keys:
            vals, ok = endpoint.column(key)
            labels = labels_from_mapping({**dict(key.labels), METRIC_NAME: key.name})
            storage.put(
                StoredSeries(
                    labels=labels,
                    timestamps_ms=ts_ms[ok],
                    values=np.asarray(vals[ok], dtype=np.float64),
                    stale=np.zeros(int(ok.sum()), dtype=bool),
                )
            )
    return storage
