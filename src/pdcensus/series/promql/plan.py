"""Turn promql-parser's AST into our own plan of frozen nodes, refusing what we do not evaluate.

The parser (``promql_parser.parse``) does the grammar; this module walks its tree once,
converts durations to integer milliseconds, and raises
:class:`~pdcensus.errors.UnsupportedQueryError` for every function or construct outside
the exact subset, before a single sample is read: a refused query never yields a
partial answer. The evaluator then works only on these nodes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any

import promql_parser

from pdcensus.errors import PromQLParseError, UnsupportedQueryError
from pdcensus.series.promql.storage import LabelMatcher, MatchKind


class AtKind(str, Enum):
    """What an ``@`` modifier pins a selector to."""

    TIMESTAMP = "timestamp"
    START = "start"
    END = "end"


@dataclass(frozen=True)
class At:
    kind: AtKind
    timestamp_ms: int = 0


@dataclass(frozen=True)
class NumberNode:
    value: float


@dataclass(frozen=True)
class StringNode:
    value: str


@dataclass(frozen=True)
class SelectorNode:
    """An instant vector selector."""

    matchers: tuple[LabelMatcher, ...]
    offset_ms: int = 0
    at: At | None = None


@dataclass(frozen=True)
class RangeNode:
    """A range vector selector: ``selector[range]``."""

    selector: SelectorNode
    range_ms: int


@dataclass(frozen=True)
class NegNode:
    expr: Node


@dataclass(frozen=True)
class CallNode:
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True)
class AggregateNode:
    op: str
    expr: Node
    grouping: tuple[str, ...] = ()
    without: bool = False
    param: Node | None = None


class Cardinality(str, Enum):
    ONE_TO_ONE = "one-to-one"
    MANY_TO_ONE = "many-to-one"
    ONE_TO_MANY = "one-to-many"
    MANY_TO_MANY = "many-to-many"


@dataclass(frozen=True)
class BinaryNode:
    op: str
    lhs: Node
    rhs: Node
    card: Cardinality = Cardinality.ONE_TO_ONE
    on: bool = False
    matching_labels: tuple[str, ...] = ()
    include_labels: tuple[str, ...] = ()
    return_bool: bool = False


Node = NumberNode | StringNode | SelectorNode | RangeNode | NegNode | CallNode | AggregateNode | BinaryNode

SET_OPERATORS = ("and", "or", "unless")
ARITHMETIC_OPERATORS = ("+", "-", "*", "/", "%", "^", "atan2")
COMPARISON_OPERATORS = ("==", "!=", ">", "<", ">=", "<=")
AGGREGATIONS = ("sum", "avg", "max", "min", "count", "group", "stddev", "stdvar", "quantile", "topk", "bottomk")

_MATCH_KINDS = {"Equal": MatchKind.EQUAL, "NotEqual": MatchKind.NOT_EQUAL, "Re": MatchKind.REGEX,
                "NotRe": MatchKind.NOT_REGEX}
_CARDS = {"OneToOne": Cardinality.ONE_TO_ONE, "ManyToOne": Cardinality.MANY_TO_ONE,
          "OneToMany": Cardinality.ONE_TO_MANY, "ManyToMany": Cardinality.MANY_TO_MANY}


def duration_ms(delta: timedelta | None) -> int:
    """A parser duration as integer milliseconds (0 for None)."""
    if delta is None:
        return 0
    return (delta.days * 86_400_000) + delta.seconds * 1000 + delta.microseconds // 1000


def parse_plan(expr: str, supported_functions: frozenset[str]) -> Node:
    """Parse ``expr`` and convert it to a plan; raise on syntax errors and unsupported parts."""
    try:
        tree = promql_parser.parse(expr)
    except ValueError as exc:
        unknown = re.search(r"unknown function with name '([^']*)'", str(exc))
        if unknown:  # valid in some Prometheus version maybe, but not in ours
            raise _unsupported(f"function {unknown.group(1)!r}", supported_functions) from None
        reason = " ".join(str(exc).split())
        raise PromQLParseError(f"cannot parse PromQL {expr!r}: {reason}") from None
    return _convert(tree, supported_functions)


def _unsupported(what: str, supported: tuple[str, ...] | frozenset[str]) -> UnsupportedQueryError:
    return UnsupportedQueryError(f"unsupported PromQL {what}; supported: {', '.join(sorted(supported))}")


def _convert(node: Any, functions: frozenset[str]) -> Node:
    p = promql_parser
    if isinstance(node, p.ParenExpr):
        return _convert(node.expr, functions)
    if isinstance(node, p.NumberLiteral):
        return NumberNode(float(node.val))
    if isinstance(node, p.StringLiteral):
        return StringNode(str(node.val))
    if isinstance(node, p.VectorSelector):
        return _selector(node)
    if isinstance(node, p.MatrixSelector):
        return RangeNode(_selector(node.vector_selector), duration_ms(node.range))
    if isinstance(node, p.SubqueryExpr):
        raise UnsupportedQueryError(
            "unsupported PromQL construct 'subquery' (expr[range:step]); supported: range selectors "
            "on a vector selector, e.g. rate(x[5m])"
        )
    if isinstance(node, p.UnaryExpr):
        return NegNode(_convert(node.expr, functions))
    if isinstance(node, p.Call):
        name = str(node.func.name)
        if name not in functions:
            raise _unsupported(f"function {name!r}", functions)
        return CallNode(name, tuple(_convert(arg, functions) for arg in node.args))
    if isinstance(node, p.AggregateExpr):
        op = str(node.op)
        if op not in AGGREGATIONS:
            raise _unsupported(f"aggregation {op!r}", AGGREGATIONS)
        mod = node.modifier
        grouping: tuple[str, ...] = ()
        without = False
        if mod is not None:
            grouping = tuple(str(x) for x in mod.labels)
            without = "Without" in str(mod.type)
        param = None if node.param is None else _convert(node.param, functions)
        return AggregateNode(op, _convert(node.expr, functions), grouping, without, param)
    if isinstance(node, p.BinaryExpr):
        return _binary(node, functions)
    raise UnsupportedQueryError(f"unsupported PromQL construct {type(node).__name__!r}")


def _selector(node: Any) -> SelectorNode:
    matchers_obj = node.matchers
    if list(matchers_obj.or_matchers):
        raise UnsupportedQueryError("unsupported PromQL construct 'or' inside a label matcher set")
    matchers: list[LabelMatcher] = []
    if node.name is not None:
        matchers.append(LabelMatcher("__name__", MatchKind.EQUAL, str(node.name)))
    for m in matchers_obj.matchers:
        kind = _MATCH_KINDS.get(str(m.op).split(".")[-1])
        if kind is None:
            raise UnsupportedQueryError(f"unsupported label matcher operator {str(m.op)!r}")
        matchers.append(LabelMatcher(str(m.name), kind, str(m.value)))
    return SelectorNode(tuple(matchers), duration_ms(node.offset), _at(node))


def _at(node: Any) -> At | None:
    at = node.at
    if at is None:
        return None
    kind = str(at.type).split(".")[-1]
    if kind == "Start":
        return At(AtKind.START)
    if kind == "End":
        return At(AtKind.END)
    try:
        when = at.at
    except BaseException as exc:  # the parser panics on timestamps before 1970
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise UnsupportedQueryError("unsupported PromQL construct '@' with a timestamp before 1970") from None
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    return At(AtKind.TIMESTAMP, duration_ms(when - epoch))


def _binary(node: Any, functions: frozenset[str]) -> BinaryNode:
    op = str(node.op)
    if op not in SET_OPERATORS + ARITHMETIC_OPERATORS + COMPARISON_OPERATORS:
        raise _unsupported(f"operator {op!r}", SET_OPERATORS + ARITHMETIC_OPERATORS + COMPARISON_OPERATORS)
    lhs, rhs = _convert(node.lhs, functions), _convert(node.rhs, functions)
    mod = node.modifier
    if mod is None:
        card = Cardinality.MANY_TO_MANY if op in SET_OPERATORS else Cardinality.ONE_TO_ONE
        return BinaryNode(op, lhs, rhs, card)
    fill = getattr(mod, "fill_values", None)
    if fill is not None and (fill.lhs is not None or fill.rhs is not None):
        raise UnsupportedQueryError("unsupported PromQL construct 'fill' in vector matching")
    card = _CARDS[str(mod.card).split(".")[-1]]
    on = False
    labels: tuple[str, ...] = ()
    if mod.matching is not None:
        on = "Include" in str(mod.matching.type)
        labels = tuple(str(x) for x in mod.matching.labels)
    include = tuple(str(x) for x in (mod.group_labels or []))
    return BinaryNode(op, lhs, rhs, card, on, labels, include, bool(mod.return_bool))


@dataclass(frozen=True)
class Footprint:
    """What an expression reads: metric names (None if a selector has no fixed name) and
    how far back from the evaluation time it looks (ranges + offsets, in milliseconds)."""

    names: frozenset[str] | None
    lookback_ms: int


def footprint(expr: str, supported_functions: frozenset[str]) -> Footprint:
    """The names and the look-back an expression needs, so a source pulls only those."""
    names: set[str] = set()
    fixed = True
    longest = 0

    def visit(node: Node, extra_ms: int) -> None:
        nonlocal fixed, longest
        if isinstance(node, RangeNode):
            visit(node.selector, extra_ms + node.range_ms)
        elif isinstance(node, SelectorNode):
            name = [m.value for m in node.matchers if m.name == "__name__" and m.kind is MatchKind.EQUAL]
            if name:
                names.add(name[0])
            else:
                fixed = False
            longest = max(longest, extra_ms + max(node.offset_ms, 0))
        elif isinstance(node, NegNode):
            visit(node.expr, extra_ms)
        elif isinstance(node, CallNode):
            for arg in node.args:
                visit(arg, extra_ms)
        elif isinstance(node, AggregateNode):
            visit(node.expr, extra_ms)
            if node.param is not None:
                visit(node.param, extra_ms)
        elif isinstance(node, BinaryNode):
            visit(node.lhs, extra_ms)
            visit(node.rhs, extra_ms)

    visit(parse_plan(expr, supported_functions), 0)
    return Footprint(frozenset(names) if fixed else None, longest)
