"""Prometheus's HTTP API as a source: a window of raw samples turned into a Recording.

``fetch_recording`` discovers the series with ``/api/v1/series``, then pulls RAW samples by
evaluating a range selector ``name{selector}[RANGE]`` at the end of each sub-window through
``/api/v1/query``, so that our own PromQL-exact functions see exactly what Prometheus
stored (a ``query_range`` answer is resampled to its step grid: a scrape can repeat or
vanish). The window is split so that no answer holds more than ``max_points_per_series``
points per series (11,000 for Prometheus; VictoriaMetrics allows 30,000): a
``count_over_time`` per name says how dense the window is, and a sub-window whose answer
still comes back over the limit is halved and asked again. Where a server refuses range
selectors in instant queries, ``query_range`` is the fallback, with a step no larger than
the scrape interval, and the caller is warned.

Sub-windows are queried with one extra millisecond of range and the samples are de-duplicated
by timestamp, so the boundaries are right under both Prometheus 2.x (left-closed ranges)
and 3.x (left-open) rules. Families come from ``/api/v1/metadata`` where the server has it
(a backfilled TSDB does not), else from suffixes: ``_total`` counter, ``_bucket`` /
``_count`` / ``_sum`` histogram.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Coroutine
from enum import Enum
from typing import Any, TypeVar

import httpx
import promql_parser

from pdcensus.errors import CensusError, DataError, UsageError
from pdcensus.series.model import Family, MetricType, Recording, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.sources.http_hops import display_url
from pdcensus.sources.prometheus_http import ApiClient, AuthConfig, RetryPolicy

__all__ = [
    "AuthConfig",
    "FetchMode",
    "RetryPolicy",
    "fetch_recording",
    "fetch_recording_async",
    "instant_query_api",
    "range_query_api",
    "selector_matchers",
]

_OPS = (  # MatchOp is not hashable: a list of pairs, not a dict
    (promql_parser.MatchOp.Equal, "="),
    (promql_parser.MatchOp.NotEqual, "!="),
    (promql_parser.MatchOp.Re, "=~"),
    (promql_parser.MatchOp.NotRe, "!~"),
)
_MAX_SPLIT_DEPTH = 12

ResultT = TypeVar("ResultT")


class FetchMode(str, Enum):
    """How samples are pulled: raw where possible (AUTO), raw only, or resampled only."""

    AUTO = "auto"
    RAW = "raw"
    RANGE = "range"


def selector_matchers(selector: str) -> str:
    """``'{job="radiance"}'`` -> the canonical matcher list, re-escaped; '' for no matcher.

    The selector must be a plain vector selector without a metric name, offset or ``@``.
    """
    text = selector.strip()
    if text in ("", "{}"):
        return ""
    try:
        expr = promql_parser.parse(text)
    except ValueError as exc:
        raise UsageError(f"bad selector {selector!r}: {exc}; use e.g. '{{job=\"radiance\"}}'") from None
    if not isinstance(expr, promql_parser.VectorSelector) or expr.name or expr.offset or expr.at:
        raise UsageError(
            f"bad selector {selector!r}: want label matchers only, e.g. '{{job=\"radiance\"}}'"
        )
    parts = []
    for m in expr.matchers.matchers:
        if m.name == "__name__":
            raise UsageError(f"bad selector {selector!r}: choose metric names with --names, not __name__")
        value = m.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        op = next(text for kind, text in _OPS if kind == m.op)
        parts.append(f'{m.name}{op}"{value}"')
    return ",".join(parts)


def _fmt_time(t: float) -> str:
    return f"{t:.3f}"


def _infer_family(name: str, names: set[str]) -> Family:
    if name.endswith("_total"):
        return Family(name, MetricType.COUNTER)
    for suffix in ("_bucket", "_count", "_sum"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and f"{base}_bucket" in names:
            return Family(base, MetricType.HISTOGRAM)
    return Family(name, MetricType.GAUGE if name == "up" else MetricType.UNKNOWN)


class _Fetcher:
    """One fetch: the client, the window, the samples gathered so far, the warnings."""

    def __init__(self, client: ApiClient, matchers: str, start: float, end: float, limit: int) -> None:
        self.client = client
        self.matchers = matchers
        self.start_ms = int(round(start * 1000))
        self.end_ms = int(round(end * 1000))
        self.limit = limit
        self.warnings: list[str] = []
        self.samples: dict[SeriesKey, dict[int, float]] = {}

    def selector(self, name: str) -> str:
        return f"{name}{{{self.matchers}}}"

    async def call(self, path: str, params: dict[str, Any], *, post: bool = True) -> Any:
        data, warnings = await self.client.call(path, params, post=post)
        for w in warnings:
            if w not in self.warnings:
                self.warnings.append(w)
        return data

    async def discover(self, names: set[str] | None) -> set[str]:
        if names is None:
            if not self.matchers:
                raise UsageError(
                    "give a selector (e.g. '{job=\"radiance\"}') or metric names; refusing to pull everything"
                )
            match = [f"{{{self.matchers}}}"]
        else:
            match = [self.selector(n) for n in sorted(names | {"up"})]
        params = {"match[]": match, "start": _fmt_time(self.start_ms / 1000), "end": _fmt_time(self.end_ms / 1000)}
        data = await self.call("/api/v1/series", params)
        return {str(s["__name__"]) for s in data or [] if "__name__" in s}

    async def count(self, name: str) -> int:
        window = self.end_ms - self.start_ms + 1
        expr = f"max(count_over_time({self.selector(name)}[{window}ms]))"
        data = await self.call("/api/v1/query", {"query": expr, "time": _fmt_time(self.end_ms / 1000)})
        result = self.result("/api/v1/query", data)
        count = float(result[0].get("value", [0, "0"])[1]) if result else 0.0
        return int(count) if math.isfinite(count) and count >= 0 else 0

    def result(self, path: str, data: Any) -> list[dict[str, Any]]:
        """``data.result`` (its shape was checked by :mod:`pdcensus.sources.prometheus_shapes`)."""
        return list(data.get("result") or []) if isinstance(data, dict) else []

    def keep(self, series: dict[str, Any]) -> None:
        metric = series["metric"]
        labels = normalize_labels((k, v) for k, v in metric.items() if k != "__name__")
        per = self.samples.setdefault(SeriesKey(metric.get("__name__", ""), labels), {})
        for ts, value in series.get("values") or []:
            t_ms = int(round(float(ts) * 1000))
            if self.start_ms <= t_ms <= self.end_ms:
                per[t_ms] = float(value)

    async def raw_window(self, name: str, lo_ms: int, hi_ms: int, depth: int = 0) -> None:
        expr = f"{self.selector(name)}[{hi_ms - lo_ms + 1}ms]"
        data = await self.call("/api/v1/query", {"query": expr, "time": _fmt_time(hi_ms / 1000)})
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise DataError(f"{display_url(self.client.base_url)}: a range selector gave {kind!r}, not a matrix")
        result = self.result("/api/v1/query", data)
        if any(len(s.get("values") or []) > self.limit for s in result) and hi_ms - lo_ms > 1:
            if depth >= _MAX_SPLIT_DEPTH:
                raise DataError(f"{expr}: still over {self.limit} points per series after {depth} splits")
            mid = (lo_ms + hi_ms) // 2
            await asyncio.gather(
                self.raw_window(name, lo_ms, mid, depth + 1), self.raw_window(name, mid + 1, hi_ms, depth + 1)
            )
            return
        for s in result:
            self.keep(s)

    async def raw(self, name: str, count: int) -> None:
        pieces = max(1, math.ceil((count + 1) / self.limit))
        span = self.end_ms - self.start_ms
        edges = [self.start_ms + (span * i) // pieces for i in range(pieces + 1)]
        lows = [edges[0]] + [e + 1 for e in edges[1:-1]]
        await asyncio.gather(*(self.raw_window(name, lo, hi) for lo, hi in zip(lows, edges[1:])))

    async def resampled(self, name: str, step_ms: int) -> None:
        per_request = max(1, self.limit - 1) * step_ms
        tasks = []
        lo = self.start_ms
        while lo <= self.end_ms:
            hi = min(self.end_ms, lo + per_request)
            params = {
                "query": self.selector(name),
                "start": _fmt_time(lo / 1000),
                "end": _fmt_time(hi / 1000),
                "step": f"{step_ms / 1000:.3f}",
            }
            tasks.append(self.call("/api/v1/query_range", params))
            lo = hi + step_ms
        for data in await asyncio.gather(*tasks):
            for s in self.result("/api/v1/query_range", data):
                self.keep(s)

    async def families(self, names: set[str]) -> dict[str, Family]:
        try:
            meta = await self.call("/api/v1/metadata", {}, post=False)
        except CensusError as exc:
            self.warnings.append(f"no metadata ({exc}); family types inferred from name suffixes")
            meta = {}
        out: dict[str, Family] = {}
        for name in sorted(names):
            fam = _infer_family(name, names)
            for candidate in (name, fam.name, name.removesuffix("_total")):
                entries = meta.get(candidate) if isinstance(meta, dict) else None
                if isinstance(entries, list) and entries and isinstance(entries[0], dict):
                    kind = str(entries[0].get("type", "unknown"))
                    mtype = MetricType(kind) if kind in MetricType._value2member_map_ else MetricType.UNKNOWN
                    fam = Family(candidate, mtype, str(entries[0].get("help", "")), str(entries[0].get("unit", "")))
                    break
            out.setdefault(fam.name, fam)
        return out


async def fetch_recording_async(
    base_url: str,
    *,
    selector: str = '{job="radiance"}',
    start: float,
    end: float,
    names: set[str] | None = None,
    auth: AuthConfig | None = None,
    timeout: float = 30.0,
    max_points_per_series: int = 11000,
    concurrency: int = 8,
    mode: FetchMode = FetchMode.AUTO,
    retry: RetryPolicy | None = None,
    step_seconds: float | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> tuple[Recording, list[str]]:
    """The samples of ``[start, end]`` matching ``selector`` as a Recording, plus warnings.

    ``names`` limits the pull to those sample names (``up`` is always added); None
    discovers every name under the selector. ``step_seconds`` is the query_range step when
    raw samples are refused (default: half the scrape interval estimated from the sample
    count, so no scrape falls between two steps). Warnings (server warnings, Thanos partial
    responses, a fallback to resampled data) must be shown to the user.
    """
    if not end > start:
        raise UsageError(f"the window must end after it starts (start={start}, end={end})")
    if max_points_per_series < 2:
        raise UsageError(f"max_points_per_series must be at least 2, got {max_points_per_series}")
    matchers = selector_matchers(selector)
    async with ApiClient(
        base_url, auth=auth, timeout_seconds=timeout, retry=retry, concurrency=concurrency, transport=transport
    ) as client:
        f = _Fetcher(client, matchers, start, end, max_points_per_series)
        found = await f.discover(names)
        if not found:
            raise DataError(
                f"{display_url(client.base_url)}: no series match {{{matchers}}} between "
                f"{_fmt_time(start)} and {_fmt_time(end)}{await _job_hint(f)}"
            )
        wanted = sorted(found)
        counts = dict(zip(wanted, await asyncio.gather(*(f.count(n) for n in wanted))))
        use_raw = mode is not FetchMode.RANGE
        if use_raw:
            try:
                await asyncio.gather(*(f.raw(n, counts[n]) for n in wanted))
            except (UsageError, DataError) as exc:
                if mode is FetchMode.RAW:
                    raise
                f.samples.clear()
                f.warnings.append(f"raw samples refused ({exc}); fell back to query_range")
                use_raw = False
        if not use_raw:
            step_ms = _fallback_step_ms(f.end_ms - f.start_ms, max(counts.values(), default=0), step_seconds)
            f.warnings.append(
                f"values are resampled by query_range at a {step_ms / 1000:g}s step (not raw scrapes); "
                "the step is half the estimated scrape interval so no scrape is skipped, and a scrape "
                "can appear twice"
            )
            await asyncio.gather(*(f.resampled(n, step_ms) for n in wanted))
        builder = RecordingBuilder(source=f"{display_url(client.base_url)} {{{matchers}}}")
        for fam in (await f.families(set(wanted))).values():
            builder.add_family(fam)
        for key in sorted(f.samples):
            points = f.samples[key]
            ts = sorted(points)
            builder.add_many(key, [t / 1000 for t in ts], [points[t] for t in ts])
        return builder.build(), f.warnings


def _fallback_step_ms(span_ms: int, densest: int, step_seconds: float | None) -> int:
    if step_seconds is not None:
        if step_seconds <= 0:
            raise UsageError(f"the step must be positive, got {step_seconds:g}s")
        return max(1, int(step_seconds * 1000))
    if densest < 2:
        return 15000
    return max(1, span_ms // (densest - 1) // 2)


async def _job_hint(f: _Fetcher) -> str:
    try:
        jobs = await f.call("/api/v1/label/job/values", {}, post=False)
    except CensusError:
        return ""
    if not isinstance(jobs, list):
        return ""
    return f"; jobs on this server: {', '.join(sorted(map(str, jobs)))}" if jobs else "; the server has no job label"


def fetch_recording(base_url: str, **kwargs: Any) -> tuple[Recording, list[str]]:
    """Blocking form of :func:`fetch_recording_async` (same keywords)."""
    return _run(fetch_recording_async(base_url, **kwargs))


def _run(coro: Coroutine[Any, Any, ResultT]) -> ResultT:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise UsageError("called inside a running event loop; await the *_async form instead")


async def _query_api(base_url: str, path: str, params: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    async with ApiClient(base_url, **kwargs) as client:
        data, warnings = await client.call(path, params, post=True)
    out: dict[str, Any] = {"status": "success", "data": data}
    if warnings:
        out["warnings"] = [w.split(": ", 1)[-1] for w in warnings]
    return out


def instant_query_api(
    base_url: str, expr: str, time: float, *, auth: AuthConfig | None = None, timeout: float = 30.0,
    retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """``/api/v1/query`` at ``time``: the API's JSON (``{"status", "data", ["warnings"]}``)."""
    params = {"query": expr, "time": _fmt_time(time)}
    return dict(_run(_query_api(base_url, "/api/v1/query", params, auth=auth, timeout_seconds=timeout,
                                retry=retry, transport=transport)))


def range_query_api(
    base_url: str, expr: str, start: float, end: float, step: float, *, auth: AuthConfig | None = None,
    timeout: float = 30.0, retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None,
) -> dict[str, Any]:
    """``/api/v1/query_range``: the API's JSON, unsplit (the caller keeps under the point limit)."""
    params = {"query": expr, "start": _fmt_time(start), "end": _fmt_time(end), "step": f"{step:.3f}"}
    return dict(_run(_query_api(base_url, "/api/v1/query_range", params, auth=auth, timeout_seconds=timeout,
                                retry=retry, transport=transport)))
