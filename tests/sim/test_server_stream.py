"""The generation routes at the ASGI level, and the driver's hand-over of tokens (never before their time).

These run the live engine in-process on an asyncio loop and call the ASGI app directly, as
uvicorn would; the same routes over real HTTP are in test_server_live.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from starlette.types import Message

from pdcensus.sim import server_clock, server_stream
from pdcensus.sim.server import build_app
from pdcensus.sim.server_clock import EventKind, LiveEngine, Outbox, TokenEvent

MODEL = "radiance/hybrid-moe-a3b"


def _scope(method: str = "POST", path: str = "/v1/completions") -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "path": path,
            "raw_path": path.encode(), "query_string": b"", "headers": [], "scheme": "http",
            "server": ("127.0.0.1", 7770), "client": ("127.0.0.1", 5000), "root_path": ""}


async def _call(live: LiveEngine, body: bytes, *, method: str = "POST", path: str = "/v1/completions",
                disconnect_after_chunks: int | None = None) -> list[Message]:
    """Run one request through the app with the driver going; returns what the app sent."""
    app = build_app(live)
    sent: list[Message] = []
    chunks = asyncio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        if disconnect_after_chunks is None:
            await asyncio.Event().wait()  # the client stays until the response ends
        await chunks.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        bodies = [m for m in sent if m["type"] == "http.response.body"]
        if disconnect_after_chunks is not None and len(bodies) >= disconnect_after_chunks:
            chunks.set()

    live.start_clock()
    driver = asyncio.create_task(live.drive())
    try:
        await asyncio.wait_for(app(_scope(method, path), receive, send), 30)
    finally:
        live.stop()
        await driver
    return sent


def _live() -> LiveEngine:
    return LiveEngine("step-time-sharing", background=False)


def _request(**extra: Any) -> bytes:
    return json.dumps({"model": MODEL, "prompt": "hello there", **extra}).encode()


def _events(sent: list[Message]) -> list[bytes]:
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return [e for e in data.split(b"\n\n") if e]


def test_a_stream_sends_one_body_message_per_token_then_the_finish_and_done() -> None:
    live = _live()
    sent = asyncio.run(_call(live, _request(stream=True, max_tokens=5)))
    start = sent[0]
    assert start["status"] == 200 and (b"content-type", b"text/event-stream; charset=utf-8") in start["headers"]
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert [m["more_body"] for m in bodies] == [True] * 5 + [False]
    events = _events(sent)
    assert events[-1] == b"data: [DONE]"
    texts = [json.loads(e[6:])["choices"][0]["text"] for e in events[:-1]]
    assert len("".join(texts).split()) == 5 and texts[-1] == ""


def test_a_client_that_disconnects_mid_stream_gets_no_more_writes_and_is_detached() -> None:
    live = _live()
    sent = asyncio.run(_call(live, _request(stream=True, max_tokens=200), disconnect_after_chunks=3))
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert 3 <= len(bodies) < 10 and all(m["more_body"] for m in bodies)
    assert b"[DONE]" not in b"".join(m["body"] for m in bodies)
    assert live.live and all(request.detached for request in live.live.values())  # the engine still runs it


def test_a_whole_completion_answers_json_with_exact_usage() -> None:
    sent = asyncio.run(_call(_live(), _request(max_tokens=7)))
    assert sent[0]["status"] == 200
    answer = json.loads(sent[1]["body"])
    assert answer["usage"]["completion_tokens"] == 7 and len(answer["choices"][0]["text"].split()) == 7


@pytest.mark.parametrize(("method", "body", "status", "needle"), [
    ("POST", b'{"model": ', 400, "not valid JSON"),
    ("POST", json.dumps({"model": "other", "prompt": "x"}).encode(), 404, "does not exist"),
    ("GET", b"", 405, "Method Not Allowed"),
])
def test_refused_requests_get_the_openai_error_object(method: str, body: bytes, status: int, needle: str) -> None:
    sent = asyncio.run(_call(_live(), body, method=method))
    assert sent[0]["status"] == status
    assert ((b"allow", b"POST") in sent[0]["headers"]) == (status == 405)
    error = json.loads(sent[1]["body"])["error"]
    assert needle in error["message"] and error["type"] == "invalid_request_error"


def test_an_oversized_body_is_refused_with_413(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_stream, "MAX_BODY_BYTES", 1024)
    sent = asyncio.run(_call(_live(), _request(stream=True, pad="x" * 4096)))
    assert sent[0]["status"] == 413


def test_a_draining_server_refuses_new_generations_with_503() -> None:
    live = _live()
    live.draining = True
    sent = asyncio.run(_call(live, _request()))
    assert sent[0]["status"] == 503 and "shutting down" in json.loads(sent[1]["body"])["error"]["message"]


def test_the_outbox_holds_events_and_releases_them_in_order() -> None:
    async def scenario() -> list[TokenEvent]:
        outbox, queue = Outbox(), asyncio.Queue[TokenEvent]()
        outbox.post(queue, TokenEvent(EventKind.TOKENS, 1.0, 1))
        outbox.hold()
        outbox.post(queue, TokenEvent(EventKind.TOKENS, 2.0, 1))
        outbox.post(queue, TokenEvent(EventKind.FINISHED, 2.0))
        assert queue.qsize() == 1 and len(outbox) == 2
        assert outbox.release() == 2 and len(outbox) == 0
        return [queue.get_nowait() for _ in range(3)]

    assert [e.engine_seconds for e in asyncio.run(scenario())] == [1.0, 2.0, 2.0]


def test_the_driver_never_hands_a_token_over_before_the_model_emits_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps are computed ahead of their end, but their tokens are released only once the wall clock gets there."""
    monkeypatch.setattr(server_clock, "PRECISE_MIN_SECONDS", 0.004)  # one client's steps (~9 ms) count as precise
    live = _live()

    async def scenario() -> list[tuple[float, TokenEvent]]:
        live.start_clock()
        driver = asyncio.create_task(live.drive())
        seen: list[tuple[float, TokenEvent]] = []
        try:
            request = live.submit(prompt_tokens=200, output_tokens=40)
            while True:
                event = await asyncio.wait_for(request.events.get(), 30)
                seen.append((time.monotonic(), event))
                if event.kind is not EventKind.TOKENS:
                    return seen
        finally:
            live.stop()
            await driver

    seen = asyncio.run(scenario())
    tokens = [(t, e) for t, e in seen if e.kind is EventKind.TOKENS]
    assert sum(e.tokens for _, e in tokens) == 40 and seen[-1][1].kind is EventKind.FINISHED
    early = [live.wall_of(e.engine_seconds) - t for t, e in tokens if t < live.wall_of(e.engine_seconds) - 1e-6]
    assert early == []
