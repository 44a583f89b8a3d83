"""The generation routes of ``pdcensus serve`` as a lean ASGI app: one ``send`` per token event.

``POST /v1/completions`` and ``POST /v1/chat/completions`` carry nearly all of a loaded
server's work: every token of every stream is one chunked write. Through starlette's
``StreamingResponse`` each of those writes passed four wrappers (the two error middlewares'
``send`` wrappers, the exception handler's, the response's task group) and each stream held
about 170 live objects (coroutines, cells, cancel scopes); under 256 streaming clients that was
a fifth of the server's CPU, and the bulk of what the garbage collector had to walk. Here the
two routes speak ASGI to uvicorn directly: the body is read, an error is answered with OpenAI's
error object, and each token event goes out as one ``http.response.body`` message. Every other
route, and the lifespan, stay with the starlette app (:class:`GenerationApp` passes them on).

uvicorn drops writes to a closed connection silently, so a disconnect is watched by one small
task per stream (it waits on ``receive`` for ``http.disconnect``, as starlette's response
does), and the stream then stops formatting tokens nobody reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from pdcensus.sim.server_clock import EventKind, LiveEngine, LiveRequest
from pdcensus.sim.server_openai import Answer, ApiError, ApiKind, parse_request

GENERATION_PATHS = {"/v1/completions": ApiKind.COMPLETIONS, "/v1/chat/completions": ApiKind.CHAT}
MAX_BODY_BYTES = 32 * 2**20
_SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no")]
_DONE = b"data: [DONE]\n\n"


class _Disconnected(Exception):
    """The client went away before its request body was read."""


def sse(obj: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``obj`` as compact JSON."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def json_body(obj: Any) -> bytes:
    """A JSON response body, as starlette's ``JSONResponse`` renders it."""
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


async def _send_json(send: Send, status: int, obj: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json_body(obj)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, f"the request body is over {MAX_BODY_BYTES // 2**20} MiB")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _parse_json(raw: bytes) -> Any:
    """The request body as JSON, or a 400 :class:`ApiError`, whatever the body holds.

    Besides malformed JSON, Python's parser raises a plain ``ValueError`` for an integer of
    more than 4,300 digits (the int-string conversion limit) and ``RecursionError`` for arrays
    or objects nested about a thousand deep: both are the client's fault, so both are a 400
    with the usual error object, never a 500 and a traceback in the log.
    """
    try:
        return json.loads(raw)
    except RecursionError:
        raise ApiError(400, "the request body is not valid JSON: arrays or objects nested too deep") from None
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"the request body is not valid JSON: {exc}") from None
    except ValueError as exc:  # UnicodeDecodeError, or an integer past the digits limit
        what = (f"an integer has more than {sys.get_int_max_str_digits()} digits"
                if "integer string conversion" in str(exc) else str(exc)[:200])
        raise ApiError(400, f"the request body is not valid JSON: {what}") from None


async def _watch_disconnect(receive: Receive, request: LiveRequest) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    request.gone()


def _closing(answer: Answer, kind: EventKind, engine_seconds: float, reason: str, first: bool) -> bytes:
    """The last events of a stream: the finish chunk (and usage) or the shutdown error, then ``[DONE]``."""
    if kind is EventKind.FINISHED:
        end = sse(answer.chunk(None if answer.request.endpoint is ApiKind.CHAT else "", "length",
                               engine_seconds=engine_seconds, first=first))
        if answer.request.include_usage:
            end += sse(answer.usage_chunk())
        return end + _DONE
    err = ApiError(503, f"{reason}; the stream was cut after {answer.tokens} tokens", None,
                   "server_shutting_down", "server_error")
    return sse(err.body()) + _DONE


async def _stream(answer: Answer, request: LiveRequest, receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
    watcher = asyncio.create_task(_watch_disconnect(receive, request))
    try:
        first = True
        while True:
            event = await request.events.get()
            if event.kind is EventKind.TOKENS:
                text = answer.take(event.tokens)
                if not text:
                    continue
                if first:
                    data = sse(answer.chunk(text, engine_seconds=event.engine_seconds, first=True))
                    first = False
                else:
                    data = answer.token_event(text, event.engine_seconds)
                await send({"type": "http.response.body", "body": data, "more_body": True})
            elif event.kind is EventKind.GONE:
                return
            else:
                data = _closing(answer, event.kind, event.engine_seconds, event.reason, first)
                await send({"type": "http.response.body", "body": data, "more_body": False})
                return
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher


async def _whole(answer: Answer, request: LiveRequest) -> tuple[int, dict[str, Any]]:
    parts: list[str] = []
    while True:
        event = await request.events.get()
        if event.kind is EventKind.TOKENS:
            parts.append(answer.take(event.tokens))
        elif event.kind is EventKind.FINISHED:
            return 200, answer.whole("".join(parts))
        else:
            err = ApiError(503, event.reason or "the client went away", None, "server_shutting_down",
                           "server_error")
            return err.status, err.body()


class GenerationApp:
    """The generation routes over ``live``; every other request (and the lifespan) goes to ``other``."""

    def __init__(self, live: LiveEngine, other: ASGIApp) -> None:
        self.live = live
        self.other = other

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.live.draining:
            # every request that arrives after SIGTERM, on any route, gets this (responses in
            # flight finish): `Connection: close` so a keep-alive client does not send its next
            # request into a server about to close the socket
            err = ApiError(503, "the server is shutting down", None, "server_shutting_down", "server_error")
            await _send_json(send, 503, err.body(), [(b"connection", b"close")])
            return
        kind = GENERATION_PATHS.get(scope.get("path", "")) if scope["type"] == "http" else None
        if kind is None:
            await self.other(scope, receive, send)
        elif scope["method"] != "POST":
            await _send_json(send, 405, ApiError(405, "Method Not Allowed").body(), [(b"allow", b"POST")])
        else:
            await self._generate(kind, receive, send)

    async def _generate(self, kind: ApiKind, receive: Receive, send: Send) -> None:
        live = self.live
        try:
            raw = await _read_body(receive)
            body = _parse_json(raw)
            parsed = parse_request(kind, body, live.config.model, live.config.max_model_len)
        except ApiError as exc:
            await _send_json(send, exc.status, exc.body())
            return
        except _Disconnected:
            return
        request = live.submit(parsed.prompt_tokens, parsed.max_tokens)
        answer = Answer(parsed, request.rid)
        try:
            if parsed.stream:
                await _stream(answer, request, receive, send)
            else:
                status, payload = await _whole(answer, request)
                await _send_json(send, status, payload)
        finally:
            live.detach(request)
