"""`pdcensus serve` as a real child process: hostile JSON bodies and requests that arrive during shutdown.

A body holding a 5,000-digit integer, or arrays or objects nested 100,000 deep, is the client's
fault: it gets a 400 with OpenAI's error object, nothing is logged as a traceback, and the server
answers the next request. After SIGTERM the socket stays open while the drain lasts: a new
request on any route gets a 503 with the error object and ``Connection: close``, never a reset,
and a stream in flight still ends cleanly.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from pdcensus.sim.server_process import ServeProcess

MODEL = "radiance/hybrid-moe-a3b"
DEEP = 100_000


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    with ServeProcess("step-time-sharing", background=False) as running:
        yield running


def _bodies() -> dict[str, bytes]:
    head = b'{"model": "' + MODEL.encode() + b'", '
    return {
        "5000-digit max_tokens": head + b'"prompt": "hi", "max_tokens": ' + b"7" * 5000 + b"}",
        "5000-digit token id": head + b'"prompt": [' + b"1" * 5000 + b"]}",
        "arrays 100k deep": head + b'"prompt": ' + b"[" * DEEP + b"]" * DEEP + b"}",
        "objects 100k deep": b'{"a": ' * DEEP + b"1" + b"}" * DEEP,
    }


@pytest.mark.parametrize("route", ["/v1/completions", "/v1/chat/completions"])
@pytest.mark.parametrize("kind", list(_bodies()))
def test_a_body_python_cannot_parse_is_a_400_error_object_and_no_traceback(server: ServeProcess, route: str,
                                                                           kind: str) -> None:
    answer = httpx.post(server.url + route, content=_bodies()[kind], timeout=30,
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text[:300]
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error" and "not valid JSON" in error["message"]
    assert ("digits" in error["message"]) if "digit" in kind else ("nested too deep" in error["message"])
    assert "set_int_max_str_digits" not in error["message"]  # the client is told what, not Python's knob
    ok = httpx.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": "hi", "max_tokens": 2},
                    timeout=30)
    assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 2  # still up, still serving
    log = server.log_text()
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-2000:]


def _first_refusal(url: str, seconds: float = 20.0) -> httpx.Response:
    """Poll GET /v1/models on fresh connections until it is not a 200; a reset fails the test."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        answer = httpx.get(url + "/v1/models", timeout=10)  # a ConnectError or a reset raises here
        if answer.status_code != 200:
            return answer
        time.sleep(0.01)
    raise AssertionError(f"the server kept answering 200 for {seconds:g}s after SIGTERM")


def _is_shutdown_503(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text[:300]
    assert answer.headers.get("connection") == "close"
    error = answer.json()["error"]
    assert error["code"] == "server_shutting_down" and "shutting down" in error["message"]


def test_a_request_just_after_sigterm_on_an_idle_server_gets_a_503_not_a_reset() -> None:
    running = ServeProcess("step-time-sharing", background=False, extra_args=["--drain-seconds", "5"]).start()
    try:
        assert httpx.get(running.url + "/v1/models", timeout=10).status_code == 200
        running.signal()
        _is_shutdown_503(_first_refusal(running.url))
        code = running.wait(timeout_seconds=30)
    finally:
        if running.returncode is None:
            running.stop()
    assert code == 0, running.log_text()[-2000:]
    assert "Traceback" not in running.log_text()


def test_during_the_drain_new_requests_on_every_route_get_503_while_a_stream_in_flight_ends_cleanly() -> None:
    running = ServeProcess("step-time-sharing", background=False, extra_args=["--drain-seconds", "4"]).start()
    try:
        body = {"model": MODEL, "prompt": "hi", "stream": True, "max_tokens": 5000}  # ~45 s: cut by the drain
        with httpx.Client(base_url=running.url, timeout=30) as http, \
                http.stream("POST", "/v1/completions", json=body) as stream:
            lines = stream.iter_lines()
            next(line for line in lines if line.startswith("data: {"))
            running.signal()
            _is_shutdown_503(_first_refusal(running.url))
            time.sleep(1.5)  # past the idle linger: the stream in flight keeps the socket open
            for method, path in [("GET", "/metrics"), ("GET", "/health"), ("POST", "/v1/chat/completions")]:
                late = httpx.request(method, running.url + path, timeout=10,
                                     json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
                                     if method == "POST" else None)
                _is_shutdown_503(late)
            rest = [line for line in lines if line]
        code = running.wait(timeout_seconds=30)
    finally:
        if running.returncode is None:
            running.stop()
    assert rest[-1] == "data: [DONE]" and "shutting down" in rest[-2]
    assert code == 0, running.log_text()[-2000:]
    assert "Traceback" not in running.log_text()
