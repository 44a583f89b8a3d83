"""Aggregation operators (``sum``, ``avg``, ``max``, ``min``, ``count``, ``group``,
``stddev``, ``stdvar``, ``quantile``, ``topk``, ``bottomk``) with ``by``/``without``.

Sums use Kahan-Neumaier compensation and ``avg`` switches to an incremental mean when
the sum would overflow, as Prometheus 3.x does (2.x summed plainly and always averaged
incrementally); ``max``/``min`` replace a NaN by any later value. Output order is the
order in which groups first appear, as in Prometheus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pdcensus.errors import QueryEvaluationError
from pdcensus.series.promql.plan import AggregateNode
from pdcensus.series.promql.values import METRIC_NAME, Labels, Sample


def kahan_sum_inc(inc: float, total: float, compensation: float) -> tuple[float, float]:
    """One step of Neumaier's compensated sum, as Prometheus's ``kahanSumInc``."""
    t = total + inc
    if math.isinf(t):
        compensation = 0.0
    elif abs(total) >= abs(inc):
        compensation += (total - t) + inc
    else:
        compensation += (inc - t) + total
    return t, compensation


def go_less_nan_first(value: float) -> tuple[int, float]:
    """Sort key of Prometheus's value heap: NaN sorts before every number."""
    return (0, 0.0) if math.isnan(value) else (1, value)


def quantile(q: float, values: list[float]) -> float:
    """Prometheus's ``quantile`` (weighted between the two closest ranks)."""
    if not values or math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    ordered = sorted(values, key=go_less_nan_first)
    n = float(len(ordered))
    rank = q * (n - 1)
    lower = max(0.0, math.floor(rank))
    upper = min(n - 1, lower + 1)
    weight = rank - math.floor(rank)
    return ordered[int(lower)] * (1 - weight) + ordered[int(upper)] * weight


@dataclass
class _Group:
    labels: Labels
    value: float
    mean: float
    count: int = 1
    compensation: float = 0.0
    incremental_mean: bool = False
    members: list[Sample] = field(default_factory=list)


def grouping_labels(labels: Labels, node: AggregateNode) -> Labels:
    """The labels an aggregation keeps for one input series."""
    if node.without:
        return tuple(p for p in labels if p[0] not in node.grouping and p[0] != METRIC_NAME)
    return tuple(p for p in labels if p[0] in node.grouping)


def aggregate(node: AggregateNode, vector: list[Sample], param: float | None, semantics: int) -> list[Sample]:
    """Apply one aggregation to an instant vector (``param`` is k or q where needed)."""
    op = node.op
    if op in ("topk", "bottomk"):
        return _top_bottom(node, vector, param)
    groups: dict[Labels, _Group] = {}
    for sample in vector:
        key = grouping_labels(sample.labels, node)
        f = sample.value
        group = groups.get(key)
        if group is None:
            group = _Group(key, f, f)
            if op in ("stddev", "stdvar"):
                group.value = 0.0
                if semantics >= 3:  # 3.x runs the first sample through Welford too (NaN stays NaN)
                    group.count, group.mean = 0, 0.0
                    _welford(group, f)
            elif op == "group":
                group.value = 1.0
            group.members.append(sample)
            groups[key] = group
            continue
        group.members.append(sample)
        if op == "sum":
            if semantics >= 3:
                group.value, group.compensation = kahan_sum_inc(f, group.value, group.compensation)
            else:
                group.value += f
        elif op == "avg":
            group.count += 1
            _avg_step(group, f, semantics)
        elif op == "max":
            if group.value < f or math.isnan(group.value):
                group.value = f
        elif op == "min":
            if group.value > f or math.isnan(group.value):
                group.value = f
        elif op == "count":
            group.count += 1
        elif op in ("stddev", "stdvar"):
            _welford(group, f)
    out: list[Sample] = []
    for group in groups.values():
        if op == "sum":
            value = group.value + group.compensation
        elif op == "avg":
            if semantics < 3 or group.incremental_mean:
                value = group.mean + group.compensation
            else:
                value = (group.value + group.compensation) / group.count
        elif op == "count":
            value = float(group.count)
        elif op == "stdvar":
            value = group.value / group.count
        elif op == "stddev":
            value = math.sqrt(group.value / group.count)
        elif op == "quantile":
            value = quantile(math.nan if param is None else param, [m.value for m in group.members])
        else:
            value = group.value
        out.append(Sample(group.labels, value))
    return out


def _welford(group: _Group, f: float) -> None:
    group.count += 1
    delta = f - group.mean
    group.mean += delta / group.count
    group.value += delta * (f - group.mean)


def _avg_step(group: _Group, f: float, semantics: int) -> None:
    count = float(group.count)
    if semantics >= 3 and not group.incremental_mean:
        new_value, new_c = kahan_sum_inc(f, group.value, group.compensation)
        if not math.isinf(new_value):
            group.value, group.compensation = new_value, new_c
            return
        group.incremental_mean = True
        group.mean = group.value / (count - 1)
        group.compensation /= count - 1
    if math.isinf(group.mean):
        if math.isinf(f) and (group.mean > 0) == (f > 0):
            return
        if not math.isinf(f) and not math.isnan(f):
            return
    if semantics >= 3:
        current = group.mean + group.compensation
        group.mean, group.compensation = kahan_sum_inc(f / count - current / count, group.mean,
                                                       group.compensation)
    else:
        group.mean += f / count - group.mean / count


def _top_bottom(node: AggregateNode, vector: list[Sample], param: float | None) -> list[Sample]:
    k_float = math.nan if param is None else param
    if math.isnan(k_float):
        raise QueryEvaluationError(f"Parameter value is NaN for {node.op!r}")
    if k_float >= 2.0**63:
        k = len(vector)
    else:
        k = int(k_float)
    if k < 1:
        return []
    groups: dict[Labels, list[Sample]] = {}
    for sample in vector:
        groups.setdefault(grouping_labels(sample.labels, node), []).append(sample)
    out: list[Sample] = []
    for members in groups.values():
        if node.op == "topk":
            ordered = sorted(members, key=lambda s: go_less_nan_first(s.value), reverse=True)
        else:
            ordered = sorted(members, key=lambda s: (1, 0.0) if math.isnan(s.value) else (0, s.value))
        out.extend(ordered[:k])
    return out
