"""The fleet census: every engine endpoint behind a Prometheus selector, censused concurrently, ranked.

``census_fleet(url, selector)`` discovers the ``(job, instance)`` pairs that carry engine
metrics (``radiance:``, ``vllm:`` or ``sglang:``) in the window with one ``/api/v1/series``
call, then pulls the endpoints' raw samples through the Prometheus source
(:func:`pdcensus.sources.prometheus.fetch_recording_async`) in batches of ``batch_size``
instances (one selector ``instance=~"a|b|..."`` per batch, so the number of queries grows with
the number of sample names, not with the fleet), ``concurrency`` batches at a time, and runs
the census on each endpoint of a batch. Only the sample names some metric profile reads are
pulled. The census is CPU work and runs in a worker thread so that the event loop keeps the
other batches' queries moving.

The ranking puts the worst collapse first: the lowest per-stream decode rate of any busy
bucket relative to the idle bucket (the runbook's busy/idle per-stream effect); endpoints
whose verdict is ``inconclusive`` come after every conclusive one, and endpoints that could
not be censused (unusable data) come last with their one-line reason. An endpoint's failure
never stops the others; a Prometheus that cannot be reached at all stops the fleet (exit 4).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pdcensus.census.model import SCHEMA, CensusReport, Mechanism
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.errors import CensusError, DataError, SourceUnreachableError, UsageError
from pdcensus.series.model import Recording
from pdcensus.sources.prometheus import fetch_recording_async, selector_matchers
from pdcensus.sources.prometheus_http import ApiClient, AuthConfig, display_url

FLEET_SCHEMA = "pdcensus/fleet/v1"
ENGINE_NAMES = '__name__=~"(radiance|vllm|sglang):.+",__name__!~".+_bucket"'
"""Engine families, histogram buckets left out: discovery needs one series per endpoint, not hundreds."""

ProgressHook = Callable[["FleetEndpoint"], None]


def census_names() -> set[str]:
    """Every sample name some metric profile reads, plus ``up`` and the process start: all a census pulls."""
    from pdcensus.series.profiles import PROFILES

    names = {"up", "process_start_time_seconds"}
    for profile in PROFILES.values():
        names |= profile.sample_names()
    return names


@dataclass(frozen=True)
class FleetEndpoint:
    """One endpoint's outcome: its report, or why it has none."""

    job: str
    instance: str
    report: CensusReport | None
    error: str | None
    warnings: tuple[str, ...]
    seconds: float

    @property
    def per_stream_vs_idle(self) -> float:
        """The worst busy bucket's per-stream decode rate / the idle bucket's (NaN when unknown)."""
        table = self.report.buckets if self.report is not None else None
        if table is None:
            return math.nan
        effects = [r.per_stream_vs_idle for r in table.rows[1:]
                    if r.per_stream_samples > 0 and math.isfinite(r.per_stream_vs_idle)]
        return min(effects) if effects else math.nan


@dataclass(frozen=True)
class RankRow:
    rank: int
    job: str
    instance: str
    mechanism: str
    confidence: float | None
    per_stream_vs_idle: float | None
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "job": self.job, "instance": self.instance, "mechanism": self.mechanism,
                "confidence": self.confidence, "per_stream_vs_idle": self.per_stream_vs_idle, "error": self.error}


@dataclass(frozen=True)
class FleetResult:
    prometheus: str
    selector: str
    start: float
    end: float
    concurrency: int
    batch_size: int
    endpoints: tuple[FleetEndpoint, ...]
    ranking: tuple[RankRow, ...]
    wall_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """``{"schema", ..., "endpoints": [census objects], "ranking": [...], "errors": [...]}``."""
        return {
            "schema": FLEET_SCHEMA,
            "census_schema": SCHEMA,
            "prometheus": self.prometheus,
            "selector": self.selector,
            "start": self.start,
            "end": self.end,
            "concurrency": self.concurrency,
            "batch_size": self.batch_size,
            "wall_seconds": round(self.wall_seconds, 3),
            "endpoints": [e.report.to_dict() for e in self.endpoints if e.report is not None],
            "ranking": [r.to_dict() for r in self.ranking],
            "errors": [{"job": e.job, "instance": e.instance, "error": e.error}
                       for e in self.endpoints if e.report is None],
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def rank(endpoints: list[FleetEndpoint]) -> tuple[RankRow, ...]:
    """Worst collapse first; inconclusive after every conclusive verdict; failures last."""
    def key(e: FleetEndpoint) -> tuple[int, float, str, str]:
        if e.report is None:
            group = 3
        elif e.report.verdict.mechanism is Mechanism.INCONCLUSIVE:
            group = 2
        else:
            group = 0 if math.isfinite(e.per_stream_vs_idle) else 1
        effect = e.per_stream_vs_idle
        return group, effect if math.isfinite(effect) else math.inf, e.job, e.instance

    rows = []
    for i, e in enumerate(sorted(endpoints, key=key), start=1):
        verdict = e.report.verdict if e.report is not None else None
        rows.append(RankRow(i, e.job, e.instance, verdict.mechanism.value if verdict else "error",
                            _finite(verdict.confidence) if verdict else None, _finite(e.per_stream_vs_idle),
                            e.error))
    return tuple(rows)


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$-")


def _re2_literal(value: str) -> str:
    """``value`` as an RE2 pattern matching only itself (only punctuation is escaped: RE2 refuses ``\\ ``)."""
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in value)


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


async def discover_endpoints(client: ApiClient, matchers: str, start: float, end: float) -> list[tuple[str, str]]:
    """``(job, instance)`` of every series with an engine metric under ``matchers`` in the window."""
    match = "{" + ",".join(m for m in (matchers, ENGINE_NAMES) if m) + "}"
    data, _ = await client.call("/api/v1/series", {"match[]": [match], "start": f"{start:.3f}", "end": f"{end:.3f}"},
                                post=True)
    found = {(str(s.get("job", "")), str(s.get("instance", ""))) for s in data or []}
    return sorted(found)


def batches(pairs: list[tuple[str, str]], batch_size: int) -> list[tuple[str, list[str]]]:
    """``(job, instances)`` groups of at most ``batch_size`` instances of one job, in order."""
    by_job: dict[str, list[str]] = {}
    for job, instance in pairs:
        by_job.setdefault(job, []).append(instance)
    return [(job, instances[i:i + batch_size]) for job, instances in by_job.items()
            for i in range(0, len(instances), batch_size)]


def batch_selector(matchers: str, job: str, instances: list[str]) -> str:
    """The selector of one batch: the user's matchers, the job, and the instances (one regex)."""
    if len(instances) == 1:
        instance = f"instance={_quote(instances[0])}"
    else:
        instance = f"instance=~{_quote('|'.join(_re2_literal(i) for i in instances))}"
    job_matcher = f"job={_quote(job)}"
    if job_matcher in matchers.split(","):
        job_matcher = ""
    return "{" + ",".join(m for m in (matchers, job_matcher, instance) if m) + "}"


def _census_one(recording: Recording, instance: str) -> CensusReport:
    return census_recording(recording, CensusOptions(instance=instance))[0]


async def _batch(base_url: str, matchers: str, job: str, instances: list[str], start: float, end: float,
                 auth: AuthConfig | None, limit: asyncio.Semaphore, timeout: float) -> list[FleetEndpoint]:
    """Fetch one batch of endpoints in one pull, then census each of them."""
    async with limit:
        began = time.monotonic()
        try:
            recording, warnings = await fetch_recording_async(
                base_url, selector=batch_selector(matchers, job, instances), start=start, end=end,
                names=census_names(), auth=auth, timeout=timeout, concurrency=4)
        except SourceUnreachableError:
            raise
        except CensusError as exc:
            return [FleetEndpoint(job, i, None, str(exc), (), time.monotonic() - began) for i in instances]
        fetched = (time.monotonic() - began) / len(instances)
        out = []
        for instance in instances:
            t0 = time.monotonic()
            try:
                report = await asyncio.to_thread(_census_one, recording, instance)
            except CensusError as exc:
                out.append(FleetEndpoint(job, instance, None, str(exc), (), fetched + time.monotonic() - t0))
                continue
            out.append(FleetEndpoint(job, instance, report, None, tuple(warnings), fetched + time.monotonic() - t0))
    return out


async def census_fleet_async(
    base_url: str,
    *,
    selector: str = '{job="radiance"}',
    start: float,
    end: float,
    concurrency: int = 4,
    batch_size: int = 25,
    auth: AuthConfig | None = None,
    timeout: float = 30.0,
    on_discovered: Callable[[int], None] | None = None,
    on_endpoint: ProgressHook | None = None,
) -> FleetResult:
    """Census every engine endpoint under ``selector`` in ``[start, end]``.

    Endpoints are pulled ``batch_size`` at a time (one query per sample name for the whole
    batch) and ``concurrency`` batches are in flight at once; ``batch_size=1, concurrency=1``
    censuses one endpoint at a time.
    """
    if concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {concurrency}")
    if batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {batch_size}")
    if not end > start:
        raise UsageError(f"the window must end after it starts (start={start}, end={end})")
    began = time.monotonic()
    matchers = selector_matchers(selector)
    async with ApiClient(base_url, auth=auth, timeout_seconds=timeout) as client:
        pairs = await discover_endpoints(client, matchers, start, end)
        url = display_url(client.base_url)
    if not pairs:
        raise DataError(f"{url}: no endpoint with engine metrics (radiance:, vllm:, sglang:) matches "
                        f"{{{matchers}}} between {start:.3f} and {end:.3f}")
    if on_discovered is not None:
        on_discovered(len(pairs))
    limit = asyncio.Semaphore(concurrency)
    tasks = [asyncio.create_task(_batch(base_url, matchers, job, group, start, end, auth, limit, timeout))
             for job, group in batches(pairs, batch_size)]
    done: list[FleetEndpoint] = []
    try:
        for next_done in asyncio.as_completed(tasks):
            for outcome in await next_done:
                done.append(outcome)
                if on_endpoint is not None:
                    on_endpoint(outcome)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    done.sort(key=lambda e: (e.job, e.instance))
    return FleetResult(url, selector, start, end, concurrency, batch_size, tuple(done), rank(done),
                       time.monotonic() - began)


def census_fleet(base_url: str, **kwargs: Any) -> FleetResult:
    """Blocking form of :func:`census_fleet_async` (same keywords); not for use inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(census_fleet_async(base_url, **kwargs))
    raise UsageError("census_fleet called inside a running event loop; await census_fleet_async instead")
