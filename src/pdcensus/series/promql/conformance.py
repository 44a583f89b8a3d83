"""Run Prometheus's PromQL test scripts against our evaluator and count the verdicts.

Each ``eval`` is one case: ``passed`` when our answer equals the expected one (same
label sets, values equal within Prometheus's test tolerance, NaN equal to NaN),
``failed`` when we answered differently or raised an error the script did not expect,
``unsupported`` when the query (or the data it reads) is outside our subset. A case that
expects failure passes when we refuse the query with a non-"unsupported" error.
Annotations (``expect warn``/``info``) are not checked: we do not emit them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np

from pdcensus.errors import CensusError, UnsupportedQueryError
from pdcensus.series.promql.evaluator import instant_query, range_query
from pdcensus.series.quantile import almost_equal
from pdcensus.series.promql.storage import Storage, StoredSeries
from pdcensus.series.promql.testscript import Clear, Eval, Load, PointKind, SeriesSpec, parse_script
from pdcensus.series.promql.values import METRIC_NAME, Labels, QueryResult, ResultType, label_value

EPSILON = 1e-6  # promqltest's defaultEpsilon


class Verdict(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True)
class CaseResult:
    """One ``eval`` case's verdict, with where it is and why it failed."""

    path: str
    line: int
    expr: str
    verdict: Verdict
    message: str = ""


def semantics_for(directory: str | Path) -> int:
    """2 for a ``v2.*`` directory, 3 otherwise (the directory names the Prometheus version)."""
    return 2 if Path(directory).name.startswith("v2") else 3


def load_into(storage: Storage, load: Load) -> None:
    """Add a ``load`` command's series (``load_with_nhcb`` also adds the histogram series)."""
    for spec in load.series:
        ts, vals, stale = [], [], []
        has_histograms = False
        for i, point in enumerate(spec.points):
            if point.kind is PointKind.OMITTED:
                continue
            if point.kind is PointKind.HISTOGRAM:
                has_histograms = True
                continue
            ts.append(i * load.interval_ms)
            vals.append(point.value if point.kind is PointKind.VALUE else math.nan)
            stale.append(point.kind is PointKind.STALE)
        storage.put(StoredSeries(spec.labels, np.asarray(ts, dtype=np.int64), np.asarray(vals, dtype=float),
                                 np.asarray(stale, dtype=bool), has_histograms))
        name = label_value(spec.labels, METRIC_NAME)
        if load.with_nhcb and name.endswith("_bucket"):
            labels = tuple(sorted([(k, v) for k, v in spec.labels if k not in ("le", METRIC_NAME)]
                                  + [(METRIC_NAME, name[: -len("_bucket")])]))
            storage.put(StoredSeries(labels, np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool), True))


def run_script(text: str, path: str, semantics: int) -> list[CaseResult]:
    """Run every command of one script; one result per ``eval``."""
    storage = Storage()
    results: list[CaseResult] = []
    for command in parse_script(text, path):
        if isinstance(command, Clear):
            storage = Storage()
        elif isinstance(command, Load):
            load_into(storage, command)
        else:
            verdict, message = run_case(storage, command, semantics)
            results.append(CaseResult(path, command.line, command.expr, verdict, message))
    return results


def run_case(storage: Storage, case: Eval, semantics: int) -> tuple[Verdict, str]:
    """Evaluate one case and compare it with what the script expects."""
    if any(p.kind is PointKind.HISTOGRAM for s in case.expected for p in s.points):
        return Verdict.UNSUPPORTED, "expects native histogram values"
    try:
        if case.is_range:
            result = range_query(storage, case.expr, case.start_ms / 1000, case.end_ms / 1000,
                                 case.step_ms / 1000, semantics=semantics)
        else:
            result = instant_query(storage, case.expr, case.start_ms / 1000, semantics=semantics)
    except UnsupportedQueryError as exc:
        return Verdict.UNSUPPORTED, str(exc)
    except CensusError as exc:
        if case.expect_fail:
            return Verdict.PASSED, ""
        return Verdict.FAILED, f"unexpected error: {exc}"
    if case.expect_fail:
        return Verdict.FAILED, "expected the query to fail, it returned a result"
    problem = compare(case, result)
    if not problem and not case.is_range and not case.ordered:
        problem = _compare_in_range_mode(storage, case, result, semantics)
    return (Verdict.FAILED, problem) if problem else (Verdict.PASSED, "")


def _compare_in_range_mode(storage: Storage, case: Eval, instant: QueryResult, semantics: int) -> str:
    """As promqltest does: the instant answer must also be the middle step of a range query
    from one minute before to one minute after."""
    if instant.result_type not in (ResultType.VECTOR, ResultType.SCALAR):
        return ""
    at = case.start_ms
    try:
        ranged = range_query(storage, case.expr, (at - 60_000) / 1000, (at + 60_000) / 1000, 60.0,
                             semantics=semantics)
    except CensusError as exc:
        return f"range mode failed: {exc}"
    middle = {
        s.labels: s.values[s.timestamps_ms.index(at)] for s in ranged.series if at in s.timestamps_ms
    }
    mine = {s.labels: s.values[0] for s in instant.series}
    if mine.keys() != middle.keys():
        return f"range mode returned other series at {at}ms: {[dict(labels) for labels in sorted(middle)]}"
    for labels, value in mine.items():
        if not almost_equal(middle[labels], value, EPSILON):
            return f"range mode gives {middle[labels]} for {dict(labels)}, instant mode {value}"
    return ""


def compare(case: Eval, result: QueryResult) -> str:
    """Empty when ``result`` is what the case expects, else what differs."""
    kind = result.result_type
    if case.expected_string is not None:
        ok = kind is ResultType.STRING and result.string_value == case.expected_string
        return "" if ok else f"expected string {case.expected_string!r}, got {kind.value}"
    if kind is ResultType.SCALAR:
        if case.expected_scalar is None:
            return "got a scalar, expected a vector"
        scalar = result.series[0].values[0]
        return "" if almost_equal(scalar, case.expected_scalar, EPSILON) else f"scalar {scalar} != {case.expected_scalar}"
    if case.expected_scalar is not None:
        return f"expected scalar {case.expected_scalar}, got {kind.value}"
    expected = {spec.labels: spec for spec in case.expected}
    got = result.by_labels()
    for labels in got:
        if labels not in expected:
            return f"unexpected series {dict(labels)}"
    if kind is ResultType.VECTOR:
        return _compare_vector(case, result, expected)
    if case.is_range:
        start, step = case.start_ms, case.step_ms
    elif case.range_vector is not None:
        start, step = case.range_vector[0], case.range_vector[2]
    else:
        return "got a range vector, expected an instant vector"
    for labels, spec in expected.items():
        want = [(start + i * step, p.value) for i, p in enumerate(spec.points) if p.kind is not PointKind.OMITTED]
        series = got.get(labels)
        have = list(zip(series.timestamps_ms, series.values)) if series else []
        if len(want) != len(have):
            return f"{dict(labels)}: expected {len(want)} points, got {len(have)}"
        for (t_want, v_want), (t_have, v_have) in zip(want, have):
            if t_want != t_have or not almost_equal(v_have, v_want, EPSILON):
                return f"{dict(labels)}: expected {v_want} at {t_want}ms, got {v_have} at {t_have}ms"
    return ""


def _compare_vector(case: Eval, result: QueryResult, expected: dict[Labels, SeriesSpec]) -> str:
    got = result.by_labels()
    for labels in expected:
        if labels not in got:
            return f"missing series {dict(labels)}"
    for position, series in enumerate(result.series):
        spec = expected[series.labels]
        want = spec.points[0].value if spec.points else math.nan
        if not almost_equal(series.values[0], want, EPSILON):
            return f"{dict(series.labels)}: expected {want}, got {series.values[0]}"
        if case.ordered and case.expected[position].labels != series.labels:
            return f"order differs at position {position}: got {dict(series.labels)}"
    return ""


def run_directory(directory: str | Path, semantics: int | None = None) -> list[CaseResult]:
    """Run every ``*.test`` file in ``directory`` (semantics from its name unless given)."""
    chosen = semantics_for(directory) if semantics is None else semantics
    results: list[CaseResult] = []
    for path in sorted(Path(directory).glob("*.test")):
        results.extend(run_script(path.read_text(), str(path), chosen))
    return results


def tally(results: Iterable[CaseResult]) -> dict[Verdict, int]:
    """How many cases got each verdict."""
    counts = {verdict: 0 for verdict in Verdict}
    for result in results:
        counts[result.verdict] += 1
    return counts
