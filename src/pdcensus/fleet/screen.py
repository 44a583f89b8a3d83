"""Run the screen on the store: chunked instant queries, summed per endpoint, within each engine's limits.

The window is cut into chunks of at most ``max_points`` query steps, and each screen number
(:mod:`pdcensus.fleet.screen_queries`) is one instant query at each chunk's end; the answers, a
vector with one sample per endpoint, are added up per endpoint. The limits this respects, read
in each engine's source at the version Debian ships:

* Prometheus 2.42 (``cmd/prometheus/main.go``): ``--query.max-samples`` (default 50,000,000
  samples loaded by one query), ``--query.timeout`` (2m); the 11,000 points per series of
  ``web/api/v1/api.go`` binds range queries only (the timeline asks for 60 points);
* VictoriaMetrics 1.79.5: a subquery is held to ``-search.maxPointsPerTimeseries`` (default
  30,000; ``app/vmselect/promql/eval.go``, ``evalRollupFuncWithSubquery``), one query to
  ``-search.maxSamplesPerQuery`` (1e9, ``app/vmselect/netstorage/netstorage.go``) and
  ``-search.maxQueryDuration`` (30s, ``app/vmselect/searchutils/searchutils.go``); the cluster
  version answers ``"isPartial": true`` when a storage node failed (``query_response.qtpl``).

A query the store refuses (too many samples, a timeout) is asked again on the two halves of its
chunk, down to ``MIN_CHUNK_STEPS`` steps; what still fails marks every endpoint as not screened
with the store's reason. A partial answer (VictoriaMetrics' ``isPartial``, a Thanos or Prometheus
warning) flags every endpoint of that answer: the screen never ranks on a number that may miss
data without saying so.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pdcensus.errors import CensusError, SourceUnreachableError, UsageError
from pdcensus.fleet.discover import Discovered
from pdcensus.fleet.screen_model import ScreenRow
from pdcensus.fleet.screen_queries import queue_query, screen_queries, timeline_queries
from pdcensus.series.profiles import Profile, get_profile
from pdcensus.sources.prometheus_http import ApiClient

MIN_CHUNK_STEPS = 40
TIMELINE_POINTS = 60


@dataclass
class ScreenStats:
    """What the screen cost: queries answered, refused and split, and its warnings."""

    queries: int = 0
    split: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScreenOptions:
    step_seconds: float = 15.0
    max_points: int = 11000
    concurrency: int = 4
    recorded: bool = False
    stride_seconds: float | None = None  # None: every scrape (the step)
    measure_step: bool = False  # read the scrape interval from the store and use it as the step

    @property
    def stride(self) -> float:
        return self.stride_seconds or self.step_seconds


def chunks(start: float, end: float, chunk_seconds: float) -> list[tuple[float, float]]:
    """``(start, end]`` cut into consecutive chunks of at most ``chunk_seconds``."""
    out, t = [], start
    while t < end - 1e-9:
        out.append((t, min(end, t + chunk_seconds)))
        t += chunk_seconds
    return out


def _vector(data: object) -> list[tuple[tuple[str, str], float]]:
    if not isinstance(data, dict) or data.get("resultType") != "vector":
        return []
    out = []
    for item in data.get("result") or []:
        metric = item.get("metric") or {}
        value = float(item["value"][1])
        out.append(((str(metric.get("job", "")), str(metric.get("instance", ""))), value))
    return out


class _Screen:
    def __init__(self, client: ApiClient, options: ScreenOptions, stats: ScreenStats) -> None:
        self.client, self.options, self.stats = client, options, stats
        self.limit = asyncio.Semaphore(options.concurrency)

    async def instant(self, expr: str, at: float) -> tuple[list[tuple[tuple[str, str], float]], bool]:
        async with self.limit:
            data, warnings = await self.client.call("/api/v1/query", {"query": expr, "time": f"{at:.3f}"}, post=True)
        self.stats.queries += 1
        partial = bool(warnings)  # Thanos partial_response, VictoriaMetrics isPartial: may miss data
        self.stats.warnings.extend(warnings)
        return _vector(data), partial

    async def summed(self, build: Callable[[float], str], lo: float, hi: float
                     ) -> tuple[dict[tuple[str, str], float], bool]:
        """Sum of ``build(chunk)`` over ``(lo, hi]``, halving a chunk the store refuses."""
        try:
            rows, partial = await self.instant(build(hi - lo), hi)
        except (SourceUnreachableError, UsageError):
            raise  # unreachable, or a query the store cannot parse: asking less would not help
        except CensusError:
            stride = self.options.stride
            if (hi - lo) / stride < 2 * MIN_CHUNK_STEPS:
                raise
            self.stats.split += 1
            mid = lo + math.floor((hi - lo) / 2 / stride) * stride
            (a, pa), (b, pb) = await asyncio.gather(self.summed(build, lo, mid), self.summed(build, mid, hi))
            for key, value in b.items():
                a[key] = a.get(key, 0.0) + value
            return a, pa or pb
        out: dict[tuple[str, str], float] = {}
        for key, value in rows:
            out[key] = out.get(key, 0.0) + value
        return out, partial


async def screen_fleet(client: ApiClient, matchers: str, endpoints: list[Discovered], start: float, end: float,
                       options: ScreenOptions, stats: ScreenStats,
                       on_query: Callable[[int, int], None] | None = None) -> list[ScreenRow]:
    """The screen of every endpoint in ``endpoints`` (one row each, in their order)."""
    screen = _Screen(client, options, stats)
    step = options.step_seconds
    chunk_seconds = max(options.stride * MIN_CHUNK_STEPS, min(end - start, options.max_points * options.stride))
    parts = chunks(start, end, chunk_seconds)
    quarter = max(step * 4, (end - start) / 4)
    jobs: list[tuple[str, str, asyncio.Future[tuple[dict[tuple[str, str], float], bool]]]] = []
    total = 0
    done = 0

    def tick(fut: object) -> None:
        nonlocal done
        done += 1
        if on_query is not None:
            on_query(done, total)

    profiles = sorted({e.profile for e in endpoints if e.profile})
    for name in profiles:
        profile = get_profile(name)
        for q in screen_queries(profile, matchers, chunk_seconds=chunk_seconds, step_seconds=step,
                                window_seconds=end - start, window_end=end, recorded=options.recorded,
                                stride_seconds=options.stride_seconds):
            def build(length: float, q_name: str = q.name, p: Profile = profile) -> str:
                return next(x.expr for x in screen_queries(
                    p, matchers, chunk_seconds=length, step_seconds=step,
                    window_seconds=end - start, window_end=end, recorded=options.recorded,
                    stride_seconds=options.stride_seconds) if x.name == q_name)
            for lo, hi in (parts if q.additive else parts[-1:]):
                jobs.append((name, q.name, asyncio.ensure_future(screen.summed(build, lo, hi))))
        queue = queue_query(profile, matchers, span_seconds=quarter, step_seconds=step)
        if queue is not None:
            for key, at in (("queue_first", start + quarter), ("queue_last", end)):
                jobs.append((name, key, asyncio.ensure_future(_as_summed(screen.instant(queue, at)))))
    total = len(jobs)
    for _, _, fut in jobs:
        fut.add_done_callback(tick)
    sums: dict[tuple[str, str, str], dict[str, float]] = {}
    partial: set[tuple[str, str]] = set()
    errors: dict[str, str] = {}
    for profile_name, key, fut in jobs:
        try:
            values, was_partial = await fut
        except SourceUnreachableError:
            for _, _, other in jobs:
                other.cancel()
            raise
        except CensusError as exc:
            errors.setdefault(profile_name, f"the store refused the screen query {key!r}: {exc}")
            continue
        for endpoint, value in values.items():
            per = sums.setdefault((profile_name, endpoint[0], endpoint[1]), {})
            per[key] = per.get(key, 0.0) + value
            if was_partial:
                partial.add(endpoint)
    rows = []
    for e in endpoints:
        per = sums.get((e.profile, e.job, e.instance), {})
        error = errors.get(e.profile)
        if not e.profile:
            error = "no metric profile matches this endpoint's sample names"
        elif error is None and not per.get("scrapes", 0.0) > 0:
            error = (f"the store returned no screen numbers for it (decode, prefill and running under "
                     f"profile {e.profile} in the window)")
        rows.append(ScreenRow(e.job, e.instance, e.profile,
                              {k: v for k, v in per.items() if not k.startswith("queue_")},
                              per.get("queue_first", math.nan), per.get("queue_last", math.nan),
                              (e.job, e.instance) in partial, error))
    return rows


async def _as_summed(pending: Awaitable[tuple[list[tuple[tuple[str, str], float]], bool]]
                     ) -> tuple[dict[tuple[str, str], float], bool]:
    rows, partial = await pending
    return dict(rows), partial


async def fetch_timelines(client: ApiClient, matchers: str, endpoints: list[Discovered], start: float, end: float,
                          options: ScreenOptions, stats: ScreenStats
                          ) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per endpoint: per-stream decode and prefill, averaged over ``TIMELINE_POINTS`` steps of the window."""
    step = max(options.step_seconds, (end - start) / TIMELINE_POINTS)
    from pdcensus.queries.promql_export import prometheus_duration

    span = f"[{prometheus_duration(step)}:{prometheus_duration(options.step_seconds)}]"
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for name in sorted({e.profile for e in endpoints if e.profile}):
        for key, expr in timeline_queries(get_profile(name), matchers, recorded=options.recorded,
                                         step_seconds=options.step_seconds).items():
            params = {"query": f"avg_over_time(({expr}){span})", "start": f"{start + step:.3f}",
                      "end": f"{end:.3f}", "step": f"{step:.3f}"}
            try:
                data, warnings = await client.call("/api/v1/query_range", params, post=True)
            except SourceUnreachableError:
                raise
            except CensusError as exc:
                stats.warnings.append(f"timeline {key}: {exc}")
                continue
            stats.queries += 1
            stats.warnings.extend(warnings)
            for item in (data or {}).get("result") or []:
                metric = item.get("metric") or {}
                values = [math.nan] * TIMELINE_POINTS
                for t, v in item.get("values") or []:
                    i = int(round((float(t) - start) / step)) - 1
                    if 0 <= i < TIMELINE_POINTS:
                        values[i] = float(v)
                out.setdefault((str(metric.get("job", "")), str(metric.get("instance", ""))), {})[key] = values
    return out
