"""A load generator for a live endpoint: N streaming clients, a 1 s scraper, gaps and memory over time.

Used by ``bench/serve_load.py`` (256 clients for a minute) and by the slow load test (64
clients for ten seconds). Each client streams completions back to back until the run's end;
every token's arrival is timed on the client's clock, and the engine's own emission instant
comes with it (the ``return_engine_time`` extension), so each inter-token gap the client saw
can be set beside the model's gap for the same two tokens. A scraper reads ``/metrics`` every
``scrape_interval_seconds`` like Prometheus would, and the server's resident memory is sampled
from ``/proc/PID/status`` (Linux) when its pid is known.

The streaming clients speak HTTP/1.1 over plain asyncio streams (chunked transfer encoding,
SSE events split by hand) rather than through the ``openai`` SDK or httpx: at thousands of
tokens per second those clients cost more CPU per chunk than the server spends producing it,
and on a small machine the load generator would then measure its own queueing instead of the
server's cadence. The scraper, which runs once a second, uses httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

FINISH_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class LoadReport:
    """What a load run measured (gaps in wall seconds; RSS samples as (seconds since start, bytes))."""

    clients: int
    duration_seconds: float
    speed: float
    requests_done: int
    requests_cut: int
    errors: int
    error_samples: tuple[str, ...]
    tokens: int
    gaps: int
    gap_p50_seconds: float
    gap_p99_seconds: float
    model_gap_p50_seconds: float
    model_gap_p99_seconds: float
    late_p99_seconds: float
    late_share_over_10_percent: float
    scrapes: int
    scrape_errors: int
    scrape_p99_seconds: float
    rss_samples: tuple[tuple[float, int], ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Tally:
    gaps: list[float] = field(default_factory=list)
    model_gaps: list[float] = field(default_factory=list)
    done: int = 0
    cut: int = 0
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    tokens: int = 0
    scrape_seconds: list[float] = field(default_factory=list)
    scrape_errors: int = 0
    rss: list[tuple[float, int]] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(what)


class _Connection:
    """One keep-alive HTTP/1.1 connection that posts a JSON body and yields the SSE data lines."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def post_events(self, path: str, body: bytes) -> AsyncIterator[bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                          b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                          % (path.encode(), self.host.encode(), self.port, len(body), body))
        status = await self.reader.readline()
        headers: dict[bytes, bytes] = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if not status.startswith(b"HTTP/1.1 200"):
            length = int(headers.get(b"content-length", b"0"))
            payload = await self.reader.readexactly(length) if length else b""
            raise _HttpStatus(f"{status.decode().strip()}: {payload[:200]!r}")
        if headers.get(b"transfer-encoding") != b"chunked":
            raise _HttpStatus(f"a stream without chunked encoding: {headers!r}")
        pending = b""
        while True:
            size = int((await self.reader.readline()).split(b";")[0], 16)
            if size == 0:
                await self.reader.readline()
                break
            pending += (await self.reader.readexactly(size + 2))[:-2]
            while b"\n\n" in pending:
                event, pending = pending.split(b"\n\n", 1)
                if event.startswith(b"data: "):
                    yield event[6:]
        if headers.get(b"connection") == b"close":
            await self.close()


class _HttpStatus(Exception):
    """A refused request (not 200)."""


async def _one_request(conn: _Connection, body: bytes, speed: float, tally: _Tally) -> None:
    arrivals: list[float] = []
    engine_times: list[float] = []
    finished = False
    async for data in conn.post_events("/v1/completions", body):
        if data == b"[DONE]":
            finished = True
        elif data.startswith(b'{"error"'):
            tally.error(json.loads(data)["error"].get("message", ""))
        elif _TEXT_EMPTY not in data and _DELTA_EMPTY not in data:
            arrivals.append(time.monotonic())
            at = data.index(_ENGINE_TIME) + len(_ENGINE_TIME)
            engine_times.append(float(data[at:data.index(b"}", at)]))
    if not finished:
        tally.error("the stream ended without [DONE]")
        return
    tally.done += 1
    tally.tokens += len(arrivals)
    tally.gaps.extend(np.diff(arrivals).tolist())
    tally.model_gaps.extend((np.diff(engine_times) / speed).tolist())


_TEXT_EMPTY = b'"text":""'
_DELTA_EMPTY = b'"delta":{}'
_ENGINE_TIME = b'"engine_time_seconds":'


async def _client(host: str, port: int, model: str, deadline: float, speed: float, max_tokens: int,
                  prompt_chars: int, rng: random.Random, tally: _Tally) -> None:
    conn = _Connection(host, port)
    try:
        while time.monotonic() < deadline:
            body = {"model": model, "prompt": "x" * rng.randint(prompt_chars // 2, prompt_chars), "stream": True,
                    "max_tokens": rng.randint(max_tokens // 2, max_tokens), "return_engine_time": True}
            try:
                await _one_request(conn, json.dumps(body).encode(), speed, tally)
            except (OSError, asyncio.IncompleteReadError, ValueError, _HttpStatus) as exc:
                tally.error(f"{type(exc).__name__}: {exc}")
                await conn.close()
    except asyncio.CancelledError:
        tally.cut += 1
        raise
    finally:
        await conn.close()


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def _scraper(http: httpx.AsyncClient, interval: float, pid: int | None, t0: float, tally: _Tally) -> None:
    while True:
        began = time.monotonic()
        try:
            response = await http.get("/metrics")
            response.raise_for_status()
            tally.scrape_seconds.append(time.monotonic() - began)
        except httpx.HTTPError:
            tally.scrape_errors += 1
        if pid is not None:
            try:
                tally.rss.append((round(began - t0, 3), _rss_bytes(pid)))
            except OSError:
                pass
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def run_load(url: str, *, clients: int, duration_seconds: float, speed: float = 1.0, max_tokens: int = 128,
                   prompt_chars: int = 800, scrape_interval_seconds: float = 1.0, pid: int | None = None,
                   seed: int = 0) -> LoadReport:
    """Drive ``url`` with ``clients`` streaming clients for ``duration_seconds``; in-flight streams then finish."""
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    timeout = httpx.Timeout(FINISH_GRACE_SECONDS + duration_seconds)
    tally = _Tally()
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=timeout) as http:
        model = (await http.get("/v1/models")).json()["data"][0]["id"]
        t0 = time.monotonic()
        deadline = t0 + duration_seconds
        rng = random.Random(seed)
        scraper = asyncio.create_task(_scraper(http, scrape_interval_seconds, pid, t0, tally))
        where = urlsplit(url)
        host, port = where.hostname or "127.0.0.1", where.port or 80
        workers = [asyncio.create_task(_client(host, port, model, deadline, speed, max_tokens, prompt_chars,
                                               random.Random(rng.getrandbits(64)), tally)) for _ in range(clients)]
        _, pending = await asyncio.wait(workers, timeout=duration_seconds + FINISH_GRACE_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        scraper.cancel()
        await asyncio.gather(scraper, return_exceptions=True)
        elapsed = time.monotonic() - t0
    late = np.array(tally.gaps) - np.array(tally.model_gaps) if tally.gaps else np.array([])
    model = np.array(tally.model_gaps)
    over = float(np.mean(late > 0.1 * model)) if late.size else float("nan")
    return LoadReport(
        clients=clients, duration_seconds=round(elapsed, 3), speed=speed, requests_done=tally.done,
        requests_cut=tally.cut, errors=tally.errors, error_samples=tuple(tally.error_samples), tokens=tally.tokens,
        gaps=len(tally.gaps), gap_p50_seconds=_pct(tally.gaps, 50), gap_p99_seconds=_pct(tally.gaps, 99),
        model_gap_p50_seconds=_pct(tally.model_gaps, 50), model_gap_p99_seconds=_pct(tally.model_gaps, 99),
        late_p99_seconds=_pct(late.tolist(), 99), late_share_over_10_percent=over,
        scrapes=len(tally.scrape_seconds), scrape_errors=tally.scrape_errors,
        scrape_p99_seconds=_pct(tally.scrape_seconds, 99), rss_samples=tuple(tally.rss),
    )
