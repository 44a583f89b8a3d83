"""Binary operators: arithmetic, comparisons (with ``bool``) and set operators, with
Prometheus's vector matching (``on``/``ignoring``, ``group_left``/``group_right``).

Arithmetic follows Go's float rules, not Python's: ``1/0`` is ``+Inf``, ``0/0`` and
``x % 0`` are NaN, ``0 ^ -1`` is ``+Inf``; numpy's IEEE operations give exactly that,
where Python's operators would raise. Result labels follow Prometheus: arithmetic and
``bool`` comparisons drop ``__name__``; a filtering comparison keeps the left side's
labels (reduced to the ``on`` labels, or without the ``ignoring`` labels, for
one-to-one matching); ``group_x`` copies the listed labels from the "one" side.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from pdcensus.errors import QueryEvaluationError
from pdcensus.series.promql.plan import ARITHMETIC_OPERATORS, BinaryNode, Cardinality
from pdcensus.series.promql.values import METRIC_NAME, Labels, Sample, drop_metric_name, label_value


def _np(fn: Callable[[np.float64, np.float64], np.float64]) -> Callable[[float, float], float]:
    def apply(a: float, b: float) -> float:
        with np.errstate(all="ignore"):
            return float(fn(np.float64(a), np.float64(b)))

    return apply


ARITHMETIC: dict[str, Callable[[float, float], float]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": _np(np.multiply),
    "/": _np(np.divide),
    "%": _np(np.fmod),
    "^": _np(np.power),
    "atan2": lambda a, b: math.atan2(a, b) if not (math.isnan(a) or math.isnan(b)) else math.nan,
}

COMPARISON: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
}


def element_op(op: str, lhs: float, rhs: float) -> tuple[float, bool]:
    """Go's ``vectorElemBinop``: the value and whether a comparison keeps the element."""
    if op in ARITHMETIC:
        return ARITHMETIC[op](lhs, rhs), True
    return lhs, COMPARISON[op](lhs, rhs)


def scalar_scalar(node: BinaryNode, lhs: float, rhs: float) -> float:
    """Two scalars (comparisons between scalars need ``bool``; the parser enforces it)."""
    value, keep = element_op(node.op, lhs, rhs)
    if node.op in COMPARISON:
        return 1.0 if keep else 0.0
    return value


def drops_metric_name(op: str, semantics: int) -> bool:
    """Whether an operator removes ``__name__`` (2.x forgot ``atan2``)."""
    if op == "atan2":
        return semantics >= 3
    return op in ARITHMETIC_OPERATORS


def vector_scalar(node: BinaryNode, vector: list[Sample], scalar: float, swap: bool,
                  semantics: int = 3) -> list[Sample]:
    """A vector against a scalar; ``swap`` when the scalar was on the left."""
    out: list[Sample] = []
    drop = drops_metric_name(node.op, semantics) or node.return_bool
    for sample in vector:
        lhs, rhs = (scalar, sample.value) if swap else (sample.value, scalar)
        value, keep = element_op(node.op, lhs, rhs)
        if node.op in COMPARISON and swap:
            value = rhs
        if node.return_bool:
            value, keep = (1.0 if keep else 0.0), True
        if keep:
            labels = drop_metric_name(sample.labels) if drop else sample.labels
            out.append(Sample(labels, value))
    return out


def _signature(labels: Labels, on: bool, names: tuple[str, ...]) -> Labels:
    if on:
        return tuple(pair for pair in labels if pair[0] in names)
    return tuple(pair for pair in labels if pair[0] not in names and pair[0] != METRIC_NAME)


def _result_labels(many: Labels, one: Labels, node: BinaryNode, semantics: int) -> Labels:
    labels = dict(many)
    if drops_metric_name(node.op, semantics):
        labels.pop(METRIC_NAME, None)
    if node.card is Cardinality.ONE_TO_ONE:
        if node.on:
            labels = {k: v for k, v in labels.items() if k in node.matching_labels}
        else:
            for name in node.matching_labels:
                labels.pop(name, None)
    for name in node.include_labels:
        value = label_value(one, name)
        if value:
            labels[name] = value
        else:
            labels.pop(name, None)
    out = tuple(sorted(labels.items()))
    return drop_metric_name(out) if node.return_bool else out


def vector_vector(node: BinaryNode, lhs: list[Sample], rhs: list[Sample], semantics: int = 3) -> list[Sample]:
    """Arithmetic or comparison between two vectors, with one-to-one or many-to-one matching."""
    if node.op in ("and", "or", "unless"):
        return _set_operation(node, lhs, rhs)
    if not lhs or not rhs:
        return []
    if node.card is Cardinality.ONE_TO_MANY:
        lhs, rhs = rhs, lhs
    right: dict[Labels, Sample] = {}
    for sample in rhs:
        sig = _signature(sample.labels, node.on, node.matching_labels)
        if sig in right:
            side = "left-hand side" if node.card is Cardinality.ONE_TO_MANY else "right-hand side"
            raise QueryEvaluationError(
                f"found duplicate series for the match group {dict(sig)} on the {side} of the operation; "
                "many-to-many matching not allowed: matching labels must be unique on one side"
            )
        right[sig] = sample
    matched: dict[Labels, set[Labels]] = {}
    out: list[Sample] = []
    for sample in lhs:
        sig = _signature(sample.labels, node.on, node.matching_labels)
        other = right.get(sig)
        if other is None:
            continue
        fl, fr = sample.value, other.value
        if node.card is Cardinality.ONE_TO_MANY:
            fl, fr = fr, fl
        value, keep = element_op(node.op, fl, fr)
        labels = _result_labels(sample.labels, other.labels, node, semantics)
        if semantics >= 3:  # 3.x checks matching before a comparison filters the element
            _check_match(node, matched, sig, labels)
        if node.return_bool:
            value = 1.0 if keep else 0.0
        elif not keep:
            continue
        if semantics < 3:
            _check_match(node, matched, sig, labels)
        out.append(Sample(labels, value))
    return out


def _check_match(node: BinaryNode, matched: dict[Labels, set[Labels]], sig: Labels, labels: Labels) -> None:
    if node.card is Cardinality.ONE_TO_ONE:
        if sig in matched:
            raise QueryEvaluationError(
                "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"
            )
        matched[sig] = set()
        return
    seen = matched.setdefault(sig, set())
    if labels in seen:
        raise QueryEvaluationError("multiple matches for labels: grouping labels must ensure unique results")
    seen.add(labels)


def _set_operation(node: BinaryNode, lhs: list[Sample], rhs: list[Sample]) -> list[Sample]:
    def sig(sample: Sample) -> Labels:
        return _signature(sample.labels, node.on, node.matching_labels)

    if node.op == "and":
        if not lhs or not rhs:
            return []
        right = {sig(s) for s in rhs}
        return [s for s in lhs if sig(s) in right]
    if node.op == "or":
        if not lhs:
            return list(rhs)
        if not rhs:
            return list(lhs)
        left = {sig(s) for s in lhs}
        return list(lhs) + [s for s in rhs if sig(s) not in left]
    if not lhs or not rhs:
        return list(lhs)
    right = {sig(s) for s in rhs}
    return [s for s in lhs if sig(s) not in right]
