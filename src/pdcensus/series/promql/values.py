"""The values a PromQL expression evaluates to, and the result of a query.

Prometheus has four value types: an instant vector (one sample per series), a range
vector (a run of samples per series, only what a range selector returns), a scalar and a
string. Inside the evaluator they are the small classes below; a finished query is a
:class:`QueryResult`, which :func:`pdcensus.series.promql.api_json.to_api_json` renders
exactly as Prometheus's HTTP API does.

Timestamps are integer milliseconds, as Prometheus stores them; label sets are sorted
tuples of ``(name, value)`` pairs that carry ``__name__`` like any other label.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

Labels = tuple[tuple[str, str], ...]
METRIC_NAME = "__name__"


def drop_metric_name(labels: Labels) -> Labels:
    """The label set without ``__name__`` (what functions and arithmetic return)."""
    return tuple(pair for pair in labels if pair[0] != METRIC_NAME)


def labels_from_mapping(mapping: dict[str, str]) -> Labels:
    """Sorted label pairs, leaving out empty values (Prometheus never stores those)."""
    return tuple(sorted((k, v) for k, v in mapping.items() if v != ""))


def label_value(labels: Labels, name: str) -> str:
    """The value of one label, ``""`` when absent (Prometheus's own convention)."""
    for key, value in labels:
        if key == name:
            return value
    return ""


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector: a series' labels, value and sample timestamp."""

    labels: Labels
    value: float
    timestamp_ms: int = 0


Vector = list[Sample]


@dataclass(frozen=True)
class RangeSeries:
    """One series of a range vector: the samples a range selector kept (no stale markers)."""

    labels: Labels
    timestamps_ms: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class Matrix:
    """A range vector, as a range selector returns it."""

    series: tuple[RangeSeries, ...]


@dataclass(frozen=True)
class Scalar:
    """A scalar value (number literals, ``time()``, ``scalar(...)``)."""

    value: float


@dataclass(frozen=True)
class String:
    """A string literal (only ever a query's whole result)."""

    value: str


Value = list[Sample] | Matrix | Scalar | String


class ResultType(str, Enum):
    """The ``resultType`` field of Prometheus's HTTP API."""

    VECTOR = "vector"
    MATRIX = "matrix"
    SCALAR = "scalar"
    STRING = "string"


@dataclass(frozen=True)
class ResultSeries:
    """One series of a query result with its points (one point for a vector)."""

    labels: Labels
    timestamps_ms: tuple[int, ...]
    values: tuple[float, ...]

    def metric(self) -> dict[str, str]:
        """The labels as a dict, as the HTTP API's ``metric`` object shows them."""
        return dict(self.labels)


@dataclass(frozen=True)
class QueryResult:
    """What an instant or range query returned.

    ``series`` holds the vector's samples (one point each), the matrix's series (sorted by
    labels for a range query, as Prometheus sorts them), or for a scalar one series with
    no labels. ``string_value`` is set only for a string result.
    """

    result_type: ResultType
    series: tuple[ResultSeries, ...]
    string_value: str | None = None

    def by_labels(self) -> dict[Labels, ResultSeries]:
        """The series keyed by their label set."""
        return {s.labels: s for s in self.series}
