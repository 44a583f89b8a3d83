"""The fleet in three stages: discover every endpoint, screen them all in the store, examine the worst.

``census_fleet(url, selector=..., start=..., end=...)``:

1. *discover*: one ``/api/v1/series`` call lists the endpoints and their metric profiles;
2. *screen*: the store evaluates the census's contrasts for every endpoint at once
   (:mod:`pdcensus.fleet.screen`): a few numbers each, a score (estimated lost share) and flags;
3. *examine*: every flagged endpoint, and the ``examine`` endpoints with the highest scores among
   the others, get the full census from raw samples (:mod:`pdcensus.fleet.examine`).

The ranking (:mod:`pdcensus.fleet.rank`) orders by the census's total lost decode share. With
``state_path`` each finished stage, and each examined batch, is written to a JSON state file;
``resume=True`` reads it back (for the same store, selector, window and K) and starts where the
last run stopped. An endpoint that failed is kept with its reason, never dropped. What each stage
costs on the wire is counted by a transport that wraps the ordinary one (each client gets its own,
since a client closes its transport; TLS settings go to the wrapped transport, since a client given
a transport does not apply its own ``verify``).
"""

from __future__ import annotations

import asyncio
import math
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from pdcensus.census.model import SCHEMA
from pdcensus.errors import DataError, UsageError
from pdcensus.fleet.discover import Discovered, batches, discover_endpoints, scrape_interval
from pdcensus.fleet.examine import ExamineOutcome, examine_batch
from pdcensus.fleet.rank import RankRow, Standing, rank
from pdcensus.fleet.screen import ScreenOptions, ScreenStats, fetch_timelines, screen_fleet
from pdcensus.fleet.screen_model import ScreenRow
from pdcensus.fleet.state import FleetState
from pdcensus.sources.prometheus import selector_matchers
from pdcensus.sources.http_hops import display_url
from pdcensus.sources.prometheus_http import ApiClient, AuthConfig, ssl_verify

FLEET_SCHEMA = "pdcensus/fleet/v2"
STAGES = ("discover", "screen", "examine")
Progress = Callable[[str, int, int, str], None]
DEFAULT_STEP_SECONDS = 15.0  # the screen's step where the store shows no scrape interval
MAX_STEP_SECONDS = 30.0  # the runbook's longest bucket step
"""``progress(stage, done, total, note)``: called as each stage advances."""


@dataclass
class WireCount:
    """What a stage cost on the wire: requests, and response bytes as received (before decompression)."""

    requests: int = 0
    bytes_received: int = 0


class CountingTransport(httpx.AsyncBaseTransport):
    """The default async transport, counting each response's bytes into ``count``."""

    def __init__(self, count: WireCount, verify: ssl.SSLContext | bool = True) -> None:
        self.count = count
        self._inner = httpx.AsyncHTTPTransport(verify=verify)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        raw = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
        await response.aclose()
        self.count.requests += 1
        self.count.bytes_received += len(raw)
        return httpx.Response(response.status_code, headers=response.headers, content=raw,
                              request=request, extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class StageCost:
    """One stage's wall time and what it cost on the wire."""

    seconds: float = 0.0
    wire: WireCount = field(default_factory=WireCount)

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), "requests": self.wire.requests,
                "bytes_received": self.wire.bytes_received}


@dataclass(frozen=True)
class FleetResult:
    """Everything the fleet run found; JSON, terminal and HTML are views of it."""

    prometheus: str
    selector: str
    start: float
    end: float
    examine: int
    discovered: tuple[Discovered, ...]
    screen: tuple[ScreenRow, ...]
    examined: tuple[ExamineOutcome, ...]
    ranking: tuple[RankRow, ...]
    timelines: dict[tuple[str, str], dict[str, list[float]]]
    costs: dict[str, StageCost]
    warnings: tuple[str, ...]
    wall_seconds: float
    resumed: bool = False
    step_seconds: float = 15.0  # the screen's query step

    @property
    def screened_all(self) -> bool:
        """Every discovered endpoint was screened: the store answered for it (the exit status says so)."""
        return all(r.error is None for r in self.screen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": FLEET_SCHEMA, "census_schema": SCHEMA, "prometheus": self.prometheus,
            "selector": self.selector, "start": self.start, "end": self.end, "examine": self.examine,
            "wall_seconds": round(self.wall_seconds, 3), "resumed": self.resumed, "step_seconds": self.step_seconds,
            "stages": {k: v.to_dict() for k, v in self.costs.items()},
            "ranking": [r.to_dict() for r in self.ranking],
            "screen": [r.to_dict() for r in self.screen],
            "endpoints": [o.report_json for o in self.examined if o.report_json is not None],
            "errors": [{"job": r.job, "instance": r.instance, "error": r.error} for r in self.ranking if r.error],
            "warnings": list(self.warnings),
        }


BATCH_REFERENCE_SECONDS = 7200.0


def examine_batch_size(batch_size: int, window_seconds: float) -> int:
    """Endpoints per raw pull: ``batch_size`` for a window up to 2 h, fewer for longer ones.

    A pull holds every endpoint of its batch over the whole window at once, so its memory grows
    with endpoints x hours (25 endpoints x 24 h reached 8 GB, BENCHMARKS.md); the batch shrinks so
    that a pull holds no more than ``batch_size`` endpoints x 2 h.
    """
    scaled = int(batch_size * BATCH_REFERENCE_SECONDS // max(window_seconds, BATCH_REFERENCE_SECONDS))
    return max(1, min(batch_size, scaled))


def pick(rows: list[ScreenRow], k: int) -> list[ScreenRow]:
    """Every flagged endpoint, and ``k`` others: the worst of each of the screen's terms, then by its total.

    The flagged ones are examined whatever their score, so the K places go to endpoints that would
    not be examined otherwise: the local work is K plus the flagged. The first places go to the
    worst endpoint of each ranking in turn: the total score, then each term alone (eviction: the
    tail after prefill or the ledger's residency; step-time sharing; the preempted share), so
    that a term the total underweighs on some engine still has its worst examined. The rest of K
    follows the total, which estimates the census's own sum term by term
    (:attr:`ScreenRow.score`): dealing every place round-robin from the terms would give a
    quarter of K to each term's runners-up however little they lose.
    """
    def key(r: ScreenRow) -> tuple[float, str, str]:
        return (-r.score if math.isfinite(r.score) else math.inf, r.job, r.instance)

    def by(term: Callable[[ScreenRow], float]) -> list[ScreenRow]:
        def term_key(r: ScreenRow) -> tuple[float, str, str]:
            x = term(r)
            return (-x if math.isfinite(x) else math.inf, r.job, r.instance)
        # only endpoints where the term shows a loss: a ranking of zeros would deal places by name
        return sorted((r for r in ordered if not r.flags and term(r) > 0), key=term_key)

    ordered = sorted(rows, key=key)
    rankings = [by(lambda r: r.score), by(lambda r: r.eviction_term), by(lambda r: r.sharing_term),
                by(lambda r: r.preemption_share)]
    everyone = [r for r in ordered if not r.flags]
    top: set[tuple[str, str]] = set()
    for ranking in rankings:
        if ranking and len(top) < k:
            top.add((ranking[0].job, ranking[0].instance))
    for r in everyone:  # the rest of K by the total (endpoints with no finite score last)
        if len(top) >= k:
            break
        top.add((r.job, r.instance))
    return [r for r in ordered if (r.job, r.instance) in top or r.flags]


async def census_fleet_async(
    base_url: str, *, selector: str = "", start: float, end: float, examine: int = 20,
    concurrency: int = 4, batch_size: int = 25, auth: AuthConfig | None = None, timeout: float = 30.0,
    screen_options: ScreenOptions | None = None, state_path: Path | None = None, resume: bool = False,
    html_dir: Path | None = None, progress: Progress | None = None, screen_only: bool = False,
) -> FleetResult:
    """Discover, screen and examine the fleet under ``selector`` in ``[start, end]`` (see the module).

    ``screen_only`` stops after the screen: nothing is examined, the ranking is the screen's.
    """
    if concurrency < 1 or batch_size < 1 or examine < 0:
        raise UsageError(f"--concurrency and --batch-size must be at least 1 and --examine at least 0 "
                         f"(got {concurrency}, {batch_size}, {examine})")
    if not end > start:
        raise UsageError(f"the window must end after it starts (start={start}, end={end})")
    began = time.monotonic()
    options = screen_options or ScreenOptions(concurrency=concurrency)
    matchers = selector_matchers(selector)
    key = {"prometheus": display_url(base_url), "selector": matchers, "start": start, "end": end, "examine": examine}
    state = FleetState.open(state_path, key, resume=resume)
    tell = progress or (lambda *_: None)
    costs = {s: StageCost() for s in STAGES}
    verify = ssl_verify(auth) if base_url.startswith("https") and auth is not None else True
    stats = ScreenStats()

    async with ApiClient(base_url, auth=auth, timeout_seconds=timeout, concurrency=options.concurrency,
                         transport=CountingTransport(costs["discover"].wire, verify)) as client:
        url = display_url(client.base_url)
        if state.discovered is None:
            t0 = time.monotonic()
            tell("discover", 0, 1, "")
            state.discovered = await discover_endpoints(client, matchers, start, end)
            costs["discover"].seconds = time.monotonic() - t0
            state.save()
        discovered = state.discovered
        if not discovered:
            raise DataError(f"{url}: no endpoint with engine metrics (radiance:, vllm:, sglang:) matches "
                            f"{{{matchers}}} between {start:.3f} and {end:.3f}")
        tell("discover", 1, 1, f"{len(discovered)} endpoint(s)")
        if options.measure_step:
            options = await _measured_step(client, matchers, discovered, start, end, options, tell)
    async with ApiClient(base_url, auth=auth, timeout_seconds=timeout, concurrency=options.concurrency,
                         transport=CountingTransport(costs["screen"].wire, verify)) as client:
        if state.screen is None:
            t0 = time.monotonic()
            state.screen = await screen_fleet(client, matchers, discovered, start, end, options, stats,
                                              on_query=lambda d, t: tell("screen", d, t, "queries"))
            state.timelines = await fetch_timelines(client, matchers, discovered, start, end, options, stats)
            costs["screen"].seconds = time.monotonic() - t0
            state.warnings += stats.warnings
            state.save()
    screen = state.screen
    picked = [] if screen_only else pick(screen, examine)
    todo = [(r.job, r.instance) for r in picked if (r.job, r.instance) not in state.examined]
    tell("examine", len(picked) - len(todo), len(picked), "")
    t0 = time.monotonic()
    limit = asyncio.Semaphore(concurrency)

    def finished(outcome: ExamineOutcome) -> None:
        state.examined[(outcome.job, outcome.instance)] = outcome
        state.save()
        done = sum((r.job, r.instance) in state.examined for r in picked)
        what = outcome.examined.mechanism if outcome.examined else f"error: {outcome.error}"
        tell("examine", done, len(picked), f"{outcome.instance} {what} ({outcome.seconds:.1f} s)")

    tasks = [asyncio.create_task(examine_batch(
        base_url, matchers, job, group, start, end, auth=auth, limit=limit, timeout=timeout, html_dir=html_dir,
        transport=CountingTransport(costs["examine"].wire, verify), on_endpoint=finished))
        for job, group in batches(todo, examine_batch_size(batch_size, end - start))]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    costs["examine"].seconds = time.monotonic() - t0
    outcomes = [state.examined[(r.job, r.instance)] for r in picked if (r.job, r.instance) in state.examined]
    by_key = {(o.job, o.instance): o for o in outcomes}
    standings = []
    for r in screen:
        o = by_key.get((r.job, r.instance))
        error = o.error if o is not None else r.error
        standings.append(Standing(r.job, r.instance, o.examined if o is not None else None, r.score,
                                  tuple(f.value for f in r.flags), error))
    return FleetResult(url, selector, start, end, examine, tuple(discovered), tuple(screen), tuple(outcomes),
                       rank(standings), state.timelines or {}, costs, tuple(state.warnings),
                       time.monotonic() - began, state.resumed, options.step_seconds)


async def _measured_step(client: ApiClient, matchers: str, discovered: list[Discovered], start: float, end: float,
                         options: ScreenOptions, tell: Progress) -> ScreenOptions:
    """``options`` with the step set to the scrape interval the store shows (15 s when it shows none)."""
    seconds, line = await scrape_interval(client, matchers, discovered, start, end)
    step = min(MAX_STEP_SECONDS, seconds) if seconds is not None else DEFAULT_STEP_SECONDS
    if seconds is None:
        line += f"; the screen steps {DEFAULT_STEP_SECONDS:g} s"
    elif seconds > MAX_STEP_SECONDS:
        line += f"; the screen steps {MAX_STEP_SECONDS:g} s, the runbook's longest bucket step"
    stride = options.stride_seconds
    if stride is not None and (stride < step or stride % step):
        raise UsageError(f"--stride {stride:g}s must be a whole multiple of the step ({line}); pass --step")
    tell("discover", 1, 1, line)
    return replace(options, step_seconds=step, measure_step=False)


def census_fleet(base_url: str, **kwargs: Any) -> FleetResult:
    """Blocking form of :func:`census_fleet_async` (same keywords); not for use inside an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(census_fleet_async(base_url, **kwargs))
    raise UsageError("census_fleet called inside a running event loop; await census_fleet_async instead")
