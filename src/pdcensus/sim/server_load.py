"""A load generator for a live endpoint: N streaming clients, a 1 s scraper, gaps and memory over time.

Used by ``bench/serve_load.py`` (256 clients for a minute) and by the slow load test (64
clients for ten seconds). Each client streams completions back to back until the run's end;
every token's arrival is timed on the client's clock, and the engine's own emission instant
comes with it (the ``return_engine_time`` extension), so each inter-token gap the client saw
can be set beside the model's gap for the same two tokens. A scraper reads ``/metrics`` every
``scrape_interval_seconds`` like Prometheus would, and the server's resident memory is sampled
from ``/proc/PID/status`` (Linux) when its pid is known.

The streaming clients speak HTTP/1.1 from an asyncio protocol, the response parsed by
httptools (chunked transfer encoding decoded in C, SSE events split by hand), rather than
through the ``openai`` SDK or httpx: at thousands of tokens per second those clients cost more
CPU per chunk than the server spends producing it, and on a small machine the load generator
would then measure its own queueing instead of the server's cadence. Each event is stamped
when its bytes are read off the socket, and parsed only after its response has ended. The scraper, which runs once a second, uses httpx.

The load generator's own garbage collector is held off while the clients run (everything alive
at the start is frozen and automatic collection is off until the end): a collection pausing
the generator's loop would delay the timestamps of every token then in its buffers, and that
delay would be counted as the server's.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import httptools
import httpx
import numpy as np

from pdcensus.sim.server_gc import CollectorPacer

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
    model_gap_min_seconds: float
    early_tokens: int  # tokens that reached their client before the engine emitted them (see _one_request)
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
    early: int = 0
    scrape_seconds: list[float] = field(default_factory=list)
    scrape_errors: int = 0
    rss: list[tuple[float, int]] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(what)


class _Response:
    """One streamed response as it arrives: the status, and each SSE event with its arrival time."""

    def __init__(self) -> None:
        self.status = 0
        self.keep_alive = True
        self.events: list[tuple[float, bytes]] = []
        self.body = b""
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def fail(self, exc: Exception) -> None:
        if not self.done.done():
            self.done.set_exception(exc)


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that posts a JSON body and times the SSE events of the answer.

    The response is parsed by httptools (the C parser uvicorn serves with) inside
    ``data_received``, and every event is stamped with the time its bytes came off the socket,
    before any other work: a token's timestamp does not wait for the generator's own queueing.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: _Response | None = None
        self.arrived = 0.0
        self.pending = b""

    @classmethod
    async def open(cls, host: str, port: int) -> _Connection:
        _, protocol = await asyncio.get_running_loop().create_connection(cls, host, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.response is not None:
            self.response.fail(ConnectionResetError("the server closed the connection mid-response"))

    def data_received(self, data: bytes) -> None:
        self.arrived = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.response is not None:
                self.response.fail(ValueError(f"a malformed response: {exc}"))
            self.close()

    def on_headers_complete(self) -> None:
        """httptools: the status line and headers are in."""
        if self.response is not None:
            self.response.status = self.parser.get_status_code()
            self.response.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        """httptools: a piece of the (de-chunked) body."""
        response = self.response
        if response is None:
            return
        if response.status != 200:
            response.body += body
            return
        self.pending += body
        while b"\n\n" in self.pending:
            event, self.pending = self.pending.split(b"\n\n", 1)
            response.events.append((self.arrived, event))

    def on_message_complete(self) -> None:
        """httptools: the response has ended."""
        if self.response is not None and not self.response.done.done():
            self.response.done.set_result(None)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            self.transport = None

    async def post(self, path: str, body: bytes, host: str, port: int) -> _Response:
        if self.transport is None:
            raise ConnectionResetError("the connection is closed")
        response = self.response = _Response()
        self.pending = b""
        self.transport.write(b"POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                             b"Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                             % (path.encode(), host.encode(), port, len(body), body))
        try:
            await response.done
        finally:
            self.response = None
        if response.status != 200:
            raise _HttpStatus(f"HTTP {response.status}: {response.body[:200]!r}")
        if not response.keep_alive:
            self.close()
        return response


class _HttpStatus(Exception):
    """A refused request (not 200)."""


async def _one_request(conn: _Connection, body: bytes, host: str, port: int, speed: float, tally: _Tally) -> None:
    sent = time.monotonic()
    response = await conn.post("/v1/completions", body, host, port)
    arrivals: list[float] = []
    engine_times: list[float] = []
    finished = False
    for arrived, event in response.events:
        if not event.startswith(b"data: "):
            continue
        data = event[6:]
        if data == b"[DONE]":
            finished = True
        elif data.startswith(b'{"error"'):
            tally.error(json.loads(data)["error"].get("message", ""))
        elif _TEXT_EMPTY not in data and _DELTA_EMPTY not in data:
            arrivals.append(arrived)
            at = data.index(_ENGINE_TIME) + len(_ENGINE_TIME)
            engine_times.append(float(data[at:data.index(b"}", at)]))
    if not finished:
        tally.error("the stream ended without [DONE]")
        return
    tally.done += 1
    tally.tokens += len(arrivals)
    tally.gaps.extend(np.diff(arrivals).tolist())
    tally.model_gaps.extend((np.diff(engine_times) / speed).tolist())
    # The request reached the engine after ``sent`` and was admitted no later than its first
    # token's emission, and the server releases a token only once the wall clock reaches its
    # emission instant: so token k cannot arrive sooner after ``sent`` than the engine time from
    # the first token to token k (1 ms for the JSON's rounding), whatever the load.
    if arrivals:
        waited = np.array(arrivals) - sent
        emitted = (np.array(engine_times) - engine_times[0]) / speed
        tally.early += int(np.sum(waited < emitted - 1e-3))


_TEXT_EMPTY = b'"text":""'
_DELTA_EMPTY = b'"delta":{}'
_ENGINE_TIME = b'"engine_time_seconds":'


async def _client(host: str, port: int, model: str, deadline: float, speed: float, max_tokens: int,
                  prompt_chars: int, rng: random.Random, tally: _Tally) -> None:
    conn: _Connection | None = None
    try:
        while time.monotonic() < deadline:
            body = {"model": model, "prompt": "x" * rng.randint(prompt_chars // 2, prompt_chars), "stream": True,
                    "max_tokens": rng.randint(max_tokens // 2, max_tokens), "return_engine_time": True}
            try:
                if conn is None or conn.transport is None:
                    conn = await _Connection.open(host, port)
                await _one_request(conn, json.dumps(body).encode(), host, port, speed, tally)
            except (OSError, ValueError, _HttpStatus) as exc:
                tally.error(f"{type(exc).__name__}: {exc}")
                if conn is not None:
                    conn.close()
                conn = None
    except asyncio.CancelledError:
        tally.cut += 1
        raise
    finally:
        if conn is not None:
            conn.close()


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
    tally = _Tally()
    with CollectorPacer():  # used only for its hold: nothing is collected until the end
        return await _drive(url, clients, duration_seconds, speed, max_tokens, prompt_chars,
                            scrape_interval_seconds, pid, seed, tally)


async def _drive(url: str, clients: int, duration_seconds: float, speed: float, max_tokens: int,
                 prompt_chars: int, scrape_interval_seconds: float, pid: int | None, seed: int,
                 tally: _Tally) -> LoadReport:
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    timeout = httpx.Timeout(FINISH_GRACE_SECONDS + duration_seconds)
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
        model_gap_min_seconds=float(model.min()) if model.size else float("nan"), early_tokens=tally.early,
        scrapes=len(tally.scrape_seconds), scrape_errors=tally.scrape_errors,
        scrape_p99_seconds=_pct(tally.scrape_seconds, 99), rss_samples=tuple(tally.rss),
    )
