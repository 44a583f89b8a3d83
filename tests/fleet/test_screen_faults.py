"""The screen against an in-memory API (httpx.MockTransport): refused chunks, query timeouts, partial answers.

Fault injection only; the same screen runs on real Prometheus and VictoriaMetrics in
tests/integration/test_fleet.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from pdcensus.fleet.discover import Discovered
from pdcensus.fleet.screen import ScreenOptions, ScreenStats, screen_fleet
from pdcensus.fleet.screen_model import ScreenFlag, ScreenRow
from pdcensus.sources.prometheus_http import ApiClient, RetryPolicy

START, END = 1_793_491_200.0, 1_793_494_800.0
ENDPOINTS = [Discovered("radiance", "a:1", "radiance-1.8"), Discovered("radiance", "b:1", "radiance-1.8")]


def _vector(value: float) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"job": "radiance", "instance": e.instance}, "value": [END, str(value)]} for e in ENDPOINTS]}}


def _screen(answer: Callable[[str], httpx.Response]) -> tuple[list[ScreenRow], ScreenStats, int]:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        form = dict(httpx.QueryParams(request.content.decode()))
        if request.url.path == "/api/v1/query_range":
            return httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": []}})
        return answer(form["query"])

    async def go() -> tuple[list[ScreenRow], ScreenStats]:
        stats = ScreenStats()
        async with ApiClient("http://store.test:9090", transport=httpx.MockTransport(handler),
                             retry=RetryPolicy(attempts=3, base_delay_seconds=0.0)) as client:
            rows = await screen_fleet(client, "", ENDPOINTS, START, END, ScreenOptions(), stats)
        return rows, stats

    rows, stats = asyncio.run(go())
    return rows, stats, calls


def test_a_chunk_the_store_refuses_is_summed_from_its_two_halves() -> None:
    def answer(query: str) -> httpx.Response:
        if "[59m59s999ms:15s]" in query:  # the whole hour: too many samples
            return httpx.Response(422, json={"status": "error", "errorType": "execution",
                                             "error": "query processing would load too many samples into memory"})
        return httpx.Response(200, json=_vector(1.0))

    rows, stats, _ = _screen(answer)
    assert stats.split > 0
    assert all(r.get("scrapes") == 2.0 and r.error is None for r in rows)  # one per half


def test_a_query_timeout_is_not_retried_and_is_halved_like_a_refusal() -> None:
    asked: list[str] = []

    def answer(query: str) -> httpx.Response:
        asked.append(query)
        if "[59m59s999ms:15s]" in query:
            return httpx.Response(503, json={"status": "error", "errorType": "timeout", "error": "query timed out"})
        return httpx.Response(200, json=_vector(1.0))

    rows, stats, _ = _screen(answer)
    whole = [q for q in asked if "[59m59s999ms:15s]" in q and q.startswith("count_over_time")]
    assert len(whole) == 1  # asked once, not three times
    assert all(r.get("scrapes") == 2.0 for r in rows)


def test_a_partial_answer_flags_every_endpoint_it_covers() -> None:
    def answer(query: str) -> httpx.Response:
        return httpx.Response(200, json={**_vector(1.0), "isPartial": True})

    rows, stats, _ = _screen(answer)
    assert all(ScreenFlag.PARTIAL in r.flags for r in rows)
    assert any("isPartial" in w for w in stats.warnings)


def test_a_query_the_store_always_refuses_leaves_every_endpoint_not_screened_with_the_reason() -> None:
    def answer(query: str) -> httpx.Response:
        return httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "unknown function"})

    rows, _, _ = _screen(answer)
    assert all(r.flags == (ScreenFlag.NOT_SCREENED,) and "unknown function" in (r.error or "") for r in rows)
