"""Evaluate a PromQL plan over raw samples: instant and range queries.

A range query is evaluated as Prometheus defines it: the expression at every step
``start, start+step, ... <= end``, each step an instant evaluation, the per-step vectors
joined into series (sorted by labels). Selectors follow the chosen semantics: 3.x uses a
left-open lookback ``(t-5m, t]`` and left-open range windows ``(t-range, t]``; 2.x closes
both on the left. A stale marker as the newest sample in the lookback hides the series.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from pdcensus.errors import QueryEvaluationError, UnsupportedQueryError, UsageError
import pdcensus.series.promql.aggregation as aggregation
import pdcensus.series.promql.binary as binary
import pdcensus.series.promql.functions as functions
import pdcensus.series.promql.histogram as histogram
import pdcensus.series.promql.label_functions as label_functions
from pdcensus.series.promql.plan import (
    AggregateNode,
    AtKind,
    BinaryNode,
    CallNode,
    NegNode,
    Node,
    NumberNode,
    RangeNode,
    SelectorNode,
    StringNode,
    parse_plan,
)
from pdcensus.series.promql.storage import Storage, StoredSeries
from pdcensus.series.promql.values import (
    Matrix,
    QueryResult,
    RangeSeries,
    ResultSeries,
    ResultType,
    Sample,
    Scalar,
    String,
    Value,
    drop_metric_name,
)

DEFAULT_LOOKBACK_SECONDS = 300.0


class Evaluator:
    """Evaluates plan nodes at one timestamp at a time over one storage."""

    def __init__(self, storage: Storage, *, semantics: int, lookback_ms: int, start_ms: int,
                 end_ms: int) -> None:
        if semantics not in (2, 3):
            raise UsageError(f"semantics must be 2 or 3, got {semantics!r}")
        self.storage = storage
        self.semantics = semantics
        self.lookback_ms = lookback_ms
        self.start_ms = start_ms
        self.end_ms = end_ms
        self._selected: dict[SelectorNode, list[StoredSeries]] = {}

    # -- selectors ---------------------------------------------------------------------
    def _series(self, node: SelectorNode) -> list[StoredSeries]:
        found = self._selected.get(node)
        if found is None:
            found = self.storage.select(node.matchers)
            for series in found:
                if series.has_histograms:
                    raise UnsupportedQueryError(
                        f"unsupported PromQL data: native histogram samples in {dict(series.labels)}; "
                        "supported: float samples (classic histograms with le buckets)"
                    )
            self._selected[node] = found
        return found

    def _reference_ms(self, node: SelectorNode, ts: int) -> int:
        if node.at is None:
            base = ts
        elif node.at.kind is AtKind.START:
            base = self.start_ms
        elif node.at.kind is AtKind.END:
            base = self.end_ms
        else:
            base = node.at.timestamp_ms
        return base - node.offset_ms

    def instant_selector(self, node: SelectorNode, ts: int) -> list[Sample]:
        ref = self._reference_ms(node, ts)
        out: list[Sample] = []
        for series in self._series(node):
            idx = int(np.searchsorted(series.timestamps_ms, ref, side="right")) - 1
            if idx < 0:
                continue
            t = int(series.timestamps_ms[idx])
            too_old = t <= ref - self.lookback_ms if self.semantics >= 3 else t < ref - self.lookback_ms
            if too_old or series.stale[idx]:
                continue
            out.append(Sample(series.labels, float(series.values[idx]), t))
        return out

    def range_selector(self, node: RangeNode, ts: int) -> tuple[Matrix, int, int]:
        end = self._reference_ms(node.selector, ts)
        start = end - node.range_ms
        out: list[RangeSeries] = []
        # (start, end] in 3.x, [start, end] in 2.x
        left_side: Literal["left", "right"] = "right" if self.semantics >= 3 else "left"
        for series in self._series(node.selector):
            lo = int(np.searchsorted(series.timestamps_ms, start, side=left_side))
            hi = int(np.searchsorted(series.timestamps_ms, end, side="right"))
            if hi <= lo:
                continue
            kept_ms, values, stale = series.timestamps_ms[lo:hi], series.values[lo:hi], series.stale[lo:hi]
            if stale.any():
                kept_ms, values = kept_ms[~stale], values[~stale]
                if len(kept_ms) == 0:
                    continue
            out.append(RangeSeries(series.labels, kept_ms, values))
        return Matrix(tuple(out)), start, end

    # -- expressions -------------------------------------------------------------------
    def eval(self, node: Node, ts: int) -> Value:
        if isinstance(node, NumberNode):
            return Scalar(node.value)
        if isinstance(node, StringNode):
            return String(node.value)
        if isinstance(node, SelectorNode):
            return self.instant_selector(node, ts)
        if isinstance(node, RangeNode):
            return self.range_selector(node, ts)[0]
        if isinstance(node, NegNode):
            inner = self.eval(node.expr, ts)
            if isinstance(inner, Scalar):
                return Scalar(-inner.value)
            return _unique([Sample(drop_metric_name(s.labels), -s.value) for s in self._vector(inner)])
        if isinstance(node, BinaryNode):
            return self._binary(node, ts)
        if isinstance(node, AggregateNode):
            param = None
            if node.param is not None:
                param = self._scalar(self.eval(node.param, ts))
            vector = self._vector(self.eval(node.expr, ts))
            return aggregation.aggregate(node, vector, param, self.semantics)
        if isinstance(node, CallNode):
            return self._call(node, ts)
        raise UnsupportedQueryError(f"unsupported PromQL node {type(node).__name__!r}")

    def _vector(self, value: Value) -> list[Sample]:
        if isinstance(value, list):
            return value
        raise QueryEvaluationError(f"expected an instant vector, got {type(value).__name__.lower()}")

    def _scalar(self, value: Value) -> float:
        if isinstance(value, Scalar):
            return value.value
        raise QueryEvaluationError(f"expected a scalar, got {type(value).__name__.lower()}")

    def _binary(self, node: BinaryNode, ts: int) -> Value:
        lhs, rhs = self.eval(node.lhs, ts), self.eval(node.rhs, ts)
        if isinstance(lhs, Scalar) and isinstance(rhs, Scalar):
            return Scalar(binary.scalar_scalar(node, lhs.value, rhs.value))
        if isinstance(lhs, Scalar):
            return _unique(binary.vector_scalar(node, self._vector(rhs), lhs.value, True, self.semantics))
        if isinstance(rhs, Scalar):
            return _unique(binary.vector_scalar(node, self._vector(lhs), rhs.value, False, self.semantics))
        return _unique(binary.vector_vector(node, self._vector(lhs), self._vector(rhs), self.semantics))

    def _call(self, node: CallNode, ts: int) -> Value:
        name = node.name
        if name in functions.RANGE_FUNCTIONS:
            return self._range_function(node, ts)
        if name == "time":
            return Scalar(ts / 1000.0)
        if name == "vector":
            return [Sample((), self._scalar(self.eval(node.args[0], ts)))]
        if name == "scalar":
            vector = self._vector(self.eval(node.args[0], ts))
            return Scalar(vector[0].value if len(vector) == 1 else math.nan)
        if name == "timestamp":
            arg = node.args[0]
            vector = self._vector(self.eval(arg, ts))
            if isinstance(arg, SelectorNode):
                return _unique([Sample(drop_metric_name(s.labels), s.timestamp_ms / 1000.0) for s in vector])
            return _unique([Sample(drop_metric_name(s.labels), ts / 1000.0) for s in vector])
        if name == "histogram_quantile":
            q = self._scalar(self.eval(node.args[0], ts))
            vector = self._vector(self.eval(node.args[1], ts))
            return _unique(histogram.histogram_quantile(q, vector, self.semantics))
        args: list[Value] = [self.eval(arg, ts) for arg in node.args]
        if name in functions.DATE_FUNCTIONS and not args:
            args = [[Sample((), ts / 1000.0)]]
        vector = self._vector(args[0])
        if name in ("sort", "sort_desc"):
            numbers = [s for s in vector if not math.isnan(s.value)]
            numbers.sort(key=lambda s: s.value, reverse=name == "sort_desc")
            return numbers + [s for s in vector if math.isnan(s.value)]
        if name == "label_replace":
            dst, replacement, src, regex = (_string(a) for a in args[1:])  # the plan checked: exactly 5 args
            return _unique(label_functions.label_replace(vector, dst, replacement, src, regex,
                                                         semantics=self.semantics))
        if name == "label_join":
            texts = [_string(a) for a in args[1:]]
            return _unique(label_functions.label_join(vector, texts[0], texts[1], texts[2:]))
        element = functions.ELEMENT_FUNCTIONS.get(name) or functions.DATE_FUNCTIONS.get(name)
        if element is None:
            element = self._clamp_or_round(name, args[1:])
            if element is None:
                return []
        return _unique([Sample(drop_metric_name(s.labels), element(s.value)) for s in vector])

    def _clamp_or_round(self, name: str, args: Sequence[Value]) -> Callable[[float], float] | None:
        params = [self._scalar(a) for a in args]
        if name == "clamp":
            low, high = params
            if high < low:
                return None
            return lambda v: functions.go_max(low, functions.go_min(high, v))
        if name == "clamp_min":
            return lambda v: functions.go_max(params[0], v)
        if name == "clamp_max":
            return lambda v: functions.go_min(params[0], v)
        if name == "round":
            nearest = params[0] if params else 1.0
            return lambda v: functions.round_to_nearest(v, nearest)
        raise UnsupportedQueryError(f"unsupported PromQL function {name!r}")

    def _range_function(self, node: CallNode, ts: int) -> list[Sample]:
        parameter = math.nan
        args = node.args
        if node.name in functions.RANGE_FUNCTIONS_WITH_PARAMETER:
            parameter = self._scalar(self.eval(args[0], ts))
            args = args[1:]
        arg = args[0]
        if not isinstance(arg, RangeNode):
            raise UnsupportedQueryError(
                f"unsupported PromQL argument to {node.name!r}: only a range selector like x[5m]"
            )
        matrix, start, end = self.range_selector(arg, ts)
        fn = functions.RANGE_FUNCTIONS[node.name]
        keep_name = node.name in functions.KEEPS_METRIC_NAME
        out: list[Sample] = []
        for series in matrix.series:
            value = fn(functions.Window(series.timestamps_ms, series.values, start, end, self.semantics),
                       parameter)
            if value is None:
                continue
            labels = series.labels if keep_name else drop_metric_name(series.labels)
            out.append(Sample(labels, value))
        return _unique(out)


def _string(value: Value) -> str:
    if isinstance(value, String):
        return value.value
    raise QueryEvaluationError(f"expected a string argument, got {type(value).__name__.lower()}")


def _unique(vector: list[Sample]) -> list[Sample]:
    seen: set[tuple[tuple[str, str], ...]] = set()
    for sample in vector:
        if sample.labels in seen:
            raise QueryEvaluationError(
                f"vector cannot contain metrics with the same labelset {dict(sample.labels)}"
            )
        seen.add(sample.labels)
    return vector


def _to_ms(seconds: float) -> int:
    return int(round(seconds * 1000.0))


def instant_query(storage: Storage, expr: str, time: float, *, semantics: int = 3,
                  lookback_seconds: float = DEFAULT_LOOKBACK_SECONDS) -> QueryResult:
    """Evaluate ``expr`` at ``time`` (Unix seconds), as ``/api/v1/query`` does."""
    plan = parse_plan(expr, functions.SUPPORTED_FUNCTIONS)
    ts = _to_ms(time)
    evaluator = Evaluator(storage, semantics=semantics, lookback_ms=_to_ms(lookback_seconds),
                          start_ms=ts, end_ms=ts)
    value = evaluator.eval(plan, ts)
    if isinstance(value, Scalar):
        return QueryResult(ResultType.SCALAR, (ResultSeries((), (ts,), (value.value,)),))
    if isinstance(value, String):
        return QueryResult(ResultType.STRING, (), string_value=value.value)
    if isinstance(value, Matrix):
        series = tuple(
            ResultSeries(s.labels, tuple(int(t) for t in s.timestamps_ms), tuple(float(v) for v in s.values))
            for s in value.series
        )
        return QueryResult(ResultType.MATRIX, series)
    return QueryResult(ResultType.VECTOR, tuple(ResultSeries(s.labels, (ts,), (s.value,)) for s in value))


def range_query(storage: Storage, expr: str, start: float, end: float, step: float, *,
                semantics: int = 3, lookback_seconds: float = DEFAULT_LOOKBACK_SECONDS) -> QueryResult:
    """Evaluate ``expr`` at every step from ``start`` to ``end``, as ``/api/v1/query_range`` does."""
    plan = parse_plan(expr, functions.SUPPORTED_FUNCTIONS)
    start_ms, end_ms, step_ms = _to_ms(start), _to_ms(end), _to_ms(step)
    if step_ms <= 0:
        raise UsageError(f"range query step must be positive, got {step!r}")
    if end_ms < start_ms:
        raise UsageError(f"range query end {end!r} is before start {start!r}")
    evaluator = Evaluator(storage, semantics=semantics, lookback_ms=_to_ms(lookback_seconds),
                          start_ms=start_ms, end_ms=end_ms)
    points: dict[tuple[tuple[str, str], ...], tuple[list[int], list[float]]] = {}
    for ts in range(start_ms, end_ms + 1, step_ms):
        value = evaluator.eval(plan, ts)
        if isinstance(value, Scalar):
            samples = [Sample((), value.value)]
        elif isinstance(value, list):
            samples = value
        else:
            kind = "range vector" if isinstance(value, Matrix) else "string"
            raise UsageError(
                f"invalid expression type {kind!r} for range query {expr!r}, must be scalar or instant vector"
            )
        for sample in samples:
            ts_list, values = points.setdefault(sample.labels, ([], []))
            ts_list.append(ts)
            values.append(sample.value)
    series = tuple(
        ResultSeries(labels, tuple(ts_list), tuple(values))
        for labels, (ts_list, values) in sorted(points.items())
    )
    return QueryResult(ResultType.MATRIX, series)
