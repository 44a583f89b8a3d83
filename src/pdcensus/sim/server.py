"""``pdcensus serve``: the engine model as a real endpoint, behind starlette on uvicorn.

Routes: ``GET /metrics`` (text format 0.0.4 through a prometheus_client registry),
``GET /stats`` and ``GET /diagnostics`` (JSON, as the sim's stats.json and diagnostics.json),
``GET /health``, and the OpenAI-compatible ``GET /v1/models``, ``POST /v1/completions`` and
``POST /v1/chat/completions``, streaming (server-sent events: ``data: {...}`` chunks, then
``data: [DONE]``) or not.

The generation routes are a lean ASGI app of their own (:mod:`pdcensus.sim.server_stream`);
uvicorn runs on uvloop with the httptools parser, as ``uvicorn[standard]`` does under vLLM.

Why starlette + uvicorn: they are the stack vLLM's own OpenAI server runs on (through
FastAPI), so clients meet the same HTTP/1.1 framing, chunked SSE and keep-alive behaviour;
uvicorn brings a tested graceful shutdown (stop accepting, let responses finish, then cancel)
that we only extend: on SIGTERM or SIGINT the socket stays open while the drain lasts, new
requests on any route get 503 with OpenAI's error object and ``Connection: close``, streams in
flight have ``drain_seconds`` to finish and are then ended cleanly (an error event and
``[DONE]``), and the process exits 0. uvicorn re-raises a captured signal after shutdown (so the process would die
of it); :class:`_Server` keeps the clean exit instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pdcensus.errors import UsageError
from pdcensus.sim.server_clock import LiveEngine
from pdcensus.sim.server_metrics import CONTENT_TYPE, engine_registry, exposition
from pdcensus.sim.server_openai import ApiError, models_list
from pdcensus.sim.server_stream import GenerationApp

DEFAULT_DRAIN_SECONDS = 5.0
# After a signal the socket stays open at least this long (never past --drain-seconds), even
# with nothing in flight: a request already on its way (a load balancer that has not yet seen
# the endpoint go) gets a 503 it can retry elsewhere, not a reset from a closed socket.
DRAIN_LINGER_SECONDS = 1.0
_DRAIN_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ServeOptions:
    """What ``pdcensus serve`` was asked for."""

    scenario: str
    host: str = "127.0.0.1"
    port: int = 7770
    speed: float = 1.0
    background: bool = True
    seed: int = 0
    overrides: dict[str, str] = field(default_factory=dict)
    profile: str = "radiance"
    drain_seconds: float = DEFAULT_DRAIN_SECONDS


def _error(exc: ApiError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def build_app(live: LiveEngine) -> GenerationApp:
    """The ASGI app over one live engine (its driver runs for the app's lifespan).

    The generation routes are :class:`~pdcensus.sim.server_stream.GenerationApp`'s own; the
    rest (metrics, stats, models, health, errors, lifespan) are a starlette app behind it.
    """
    registry = engine_registry(live)
    model, max_len = live.config.model, live.config.max_model_len

    async def models(_: Request) -> Response:
        return JSONResponse(models_list(model, int(live.epoch_start), max_len))

    async def metrics(_: Request) -> Response:
        return Response(exposition(registry), media_type=CONTENT_TYPE)

    async def stats(_: Request) -> Response:
        return JSONResponse(live.stats())

    async def diagnostics(_: Request) -> Response:
        return JSONResponse(live.diagnostics())

    async def health(_: Request) -> Response:
        return Response(status_code=503 if live.draining else 200)

    async def http_error(_: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        kind = "invalid_request_error" if exc.status_code < 500 else "server_error"
        return _error(ApiError(exc.status_code, str(exc.detail), None, None, kind))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        live.start_clock()
        driver = asyncio.create_task(live.drive())
        try:
            yield
        finally:
            live.cancel_all("the server stopped")
            live.stop()
            await driver

    routes = [
        Route("/metrics", metrics, methods=["GET"]),
        Route("/stats", stats, methods=["GET"]),
        Route("/diagnostics", diagnostics, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
    ]
    other = Starlette(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: http_error})
    return GenerationApp(live, other)


class _Server(uvicorn.Server):
    """uvicorn's server, draining the live engine on a signal and exiting cleanly afterwards."""

    def __init__(self, config: uvicorn.Config, live: LiveEngine, drain_seconds: float,
                 on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.live = live
        self.drain_seconds = drain_seconds
        self.on_started = on_started
        self.loop: asyncio.AbstractEventLoop | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.loop is not None and not self.should_exit:
            self.loop.call_soon_threadsafe(self.live.begin_drain, self.drain_seconds)
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self.drain()
        await super().shutdown(sockets)

    async def drain(self) -> None:
        """Keep accepting while what is in flight finishes; the app answers new requests 503.

        uvicorn's own shutdown closes the listening socket at once, so a request sent just
        after SIGTERM met a reset. Here the socket stays open until no request is in flight
        (and at least ``DRAIN_LINGER_SECONDS`` have passed) or ``drain_seconds`` are up, when
        the live engine cuts the streams left; then uvicorn's shutdown runs as before.
        """
        loop = asyncio.get_running_loop()
        began = loop.time()
        linger = min(self.drain_seconds, DRAIN_LINGER_SECONDS)
        while not self.force_exit:
            spent = loop.time() - began
            if spent >= self.drain_seconds or (spent >= linger and not self.server_state.tasks):
                return
            await asyncio.sleep(_DRAIN_POLL_SECONDS)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            self.on_started()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free one); UsageError if it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}; choose another --port "
                         "(0 picks a free one)") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(options: ServeOptions, on_ready: Callable[[LiveEngine, str], None] | None = None) -> LiveEngine:
    """Run the server until SIGTERM/SIGINT; ``on_ready(live, url)`` is called once it listens."""
    if options.drain_seconds < 0:
        raise UsageError(f"--drain-seconds must be >= 0, got {options.drain_seconds!r}")
    sock = bind(options.host, options.port)
    port = int(sock.getsockname()[1])
    live = LiveEngine(options.scenario, speed=options.speed, background=options.background, seed=options.seed,
                      overrides=options.overrides, profile=options.profile, port=port)
    host = f"[{options.host}]" if ":" in options.host else options.host
    url = f"http://{host}:{port}"
    app = build_app(live)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", http="auto", loop="auto",
                            timeout_graceful_shutdown=int(options.drain_seconds) + 3, timeout_keep_alive=30)
    server = _Server(config, live, options.drain_seconds,
                     (lambda: on_ready(live, url)) if on_ready is not None else None)
    try:
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            runner.run(server.serve([sock]))
    finally:
        sock.close()
    return live
