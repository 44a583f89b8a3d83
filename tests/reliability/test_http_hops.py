"""The Prometheus client against a server that redirects, asks to be retried later, or sends odd warnings.

Every server here is a real ``http.server`` on 127.0.0.1 (a free port, a daemon thread), so the
client speaks real HTTP: ``Retry-After`` in seconds and as an HTTP-date is waited out when it fits
the deadline and ends the tries at once with one line when it does not; a redirect within the
same origin is followed (the credentials and the query going with it), one to another origin is
refused naming its target, and the other server never hears from us; a string ``warnings`` is one
warning, and a list holding anything but strings is exit 3 with one line.
"""

from __future__ import annotations

import asyncio
import email.utils
import http.server
import os
import subprocess
import sys
import threading
import time
from typing import Any
from urllib.parse import parse_qs

import pytest

from pdcensus.errors import SourceUnreachableError
from pdcensus.sources.http_hops import retry_after_seconds
from pdcensus.sources.prometheus_http import ApiClient, AuthConfig, RetryPolicy
from tests.sources.hostile_servers import GOOD_ANSWERS, HostileServer, answer_json

HANG_GUARD_SECONDS = 120
LABELS = ["job", "instance"]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                          timeout=HANG_GUARD_SECONDS, check=False, env={**os.environ, **(env or {})})


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return errors[0]


def _call(url: str, path: str = "/api/v1/labels", *, post: bool = False, timeout: float = 30.0,
          auth: AuthConfig | None = None, params: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    async def go() -> tuple[Any, list[str]]:
        async with ApiClient(url, timeout_seconds=timeout, auth=auth, retry=RetryPolicy(attempts=4)) as client:
            return await client.call(path, params, post=post)
    return asyncio.run(go())


class _Stamps:
    """When each request came in (monotonic), and what it carried."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def note(self, req: http.server.BaseHTTPRequestHandler, body: bytes = b"") -> None:
        with self.lock:
            self.at.append(time.monotonic())
            self.seen.append({"method": req.command, "path": req.path, "auth": req.headers.get("Authorization"),
                              "form": parse_qs(body.decode()) if body else {}})


def test_retry_after_reads_seconds_and_http_dates_and_ignores_garbage() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds("2", now) == 2.0
    assert retry_after_seconds(" 30 ", now) == 30.0
    assert retry_after_seconds(email.utils.formatdate(now + 90, usegmt=True), now) == pytest.approx(90.0)
    assert retry_after_seconds(email.utils.formatdate(now - 90, usegmt=True), now) == 0.0
    huge = retry_after_seconds("9" * 40, now)  # capped, not an overflow: past any deadline all the same
    assert huge is not None and huge > 1e8
    for junk in (None, "", "soon", "-5", "1.5e3", "Mon, 99 Foo 2020"):
        assert retry_after_seconds(junk, now) is None


@pytest.mark.parametrize("form", ["seconds", "http-date"])
def test_a_retry_after_within_the_deadline_is_waited_out_then_the_answer_is_read(form: str) -> None:
    stamps = _Stamps()

    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        stamps.note(req)
        if n == 1:
            # a date has whole seconds: 3 s ahead is a wait of more than 2 s
            after = "2" if form == "seconds" else email.utils.formatdate(time.time() + 3, usegmt=True)
            req.send_response(503)
            req.send_header("Retry-After", after)
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        answer_json(req, {"status": "success", "data": LABELS})

    with HostileServer(answer) as server:
        data, warnings = _call(server.url, timeout=30)
    assert data == LABELS and warnings == []
    assert len(stamps.at) == 2  # one refusal, one answer: no back-off tries squeezed in before the wait
    assert stamps.at[1] - stamps.at[0] >= 1.9  # the client waited what it was asked (the old back-off: 0.5 s)


def test_a_retry_after_past_the_timeout_ends_the_tries_at_once_with_one_line_naming_it() -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        req.send_response(429)
        req.send_header("Retry-After", "30")
        req.send_header("Content-Length", "0")
        req.end_headers()

    with HostileServer(answer) as server:
        done = _cli("census", "--prometheus", server.url, "--window", "1h", "--timeout", "5s")
        requests = server.requests
    assert done.returncode == 4, done.stderr
    line = _one_error(done)
    assert "HTTP 429" in line and "Retry-After '30' (30s)" in line and "--timeout of 5s" in line, line
    assert "not retried (after 1 attempt)" in line, line
    assert requests == 1  # not four tries a second apart


def test_a_retry_after_past_the_deadline_is_one_error_from_the_library_too() -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        req.send_response(503)
        req.send_header("Retry-After", email.utils.formatdate(time.time() + 3600, usegmt=True))
        req.send_header("Content-Length", "0")
        req.end_headers()

    with HostileServer(answer) as server:
        with pytest.raises(SourceUnreachableError, match=r"Retry-After .*past the .* --timeout of 10s") as caught:
            _call(server.url, timeout=10)
        assert server.requests == 1
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_same_origin_redirect_is_followed_with_the_query_and_the_credentials(status: int) -> None:
    stamps = _Stamps()

    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        stamps.note(req, getattr(req, "body", b""))
        if not req.path.startswith("/prom/"):  # a proxy that moved the API under a prefix
            req.send_response(status)
            req.send_header("Location", "/prom" + req.path)
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        answer_json(req, {"status": "success", "data": {"resultType": "vector", "result": []}})

    with HostileServer(answer) as server:
        data, _ = _call(server.url, "/api/v1/query", post=True, params={"query": "up", "time": "1700000000.000"},
                        auth=AuthConfig(bearer_token_env="S9_TOKEN"))
    assert data == {"resultType": "vector", "result": []}
    first, second = stamps.seen
    assert second["path"].startswith("/prom/api/v1/query")
    assert second["method"] == "POST" and second["form"].get("query") == ["up"]  # the question went along
    assert first["auth"] == second["auth"] == "Bearer s3cret-token"


def test_a_redirect_to_another_origin_is_refused_naming_it_and_the_other_server_hears_nothing() -> None:
    elsewhere = _Stamps()

    def other(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        elsewhere.note(req)
        answer_json(req, {"status": "success", "data": LABELS})

    with HostileServer(other) as target:
        def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
            req.send_response(302)
            req.send_header("Location", target.url + req.path)
            req.send_header("Content-Length", "0")
            req.end_headers()

        with HostileServer(answer) as server:
            done = _cli("census", "--prometheus", server.url, "--window", "1h", "--bearer-token-env", "S9_TOKEN",
                        env={"S9_TOKEN": "s3cret-token"})
    assert done.returncode == 4, done.stderr
    line = _one_error(done)
    assert "HTTP 302" in line and f"a redirect to {target.url}/api/v1/series" in line, line
    assert "another origin" in line and "--prometheus" in line and "not valid JSON" not in line, line
    assert "s3cret-token" not in done.stderr + done.stdout
    assert elsewhere.seen == []


def test_a_redirect_loop_within_the_origin_ends_in_one_line() -> None:
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        req.send_response(307)
        req.send_header("Location", f"/hop{n}{req.path}")
        req.send_header("Content-Length", "0")
        req.end_headers()

    with HostileServer(answer) as server:
        with pytest.raises(SourceUnreachableError, match="more than 5 redirects"):
            _call(server.url)
        assert server.requests == 6


def _query_with_warnings(notes: object) -> subprocess.CompletedProcess[str]:
    """``pdcensus query`` against a store whose every good answer carries ``warnings: notes``."""
    def answer(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        path = req.path.split("?", 1)[0]
        answer_json(req, {"status": "success", "warnings": notes,
                          "data": GOOD_ANSWERS.get(path, {"resultType": "matrix", "result": []})})

    with HostileServer(answer) as server:
        return _cli("query", "--prometheus", server.url, "up", "--time", "1700000000")


def test_a_string_warnings_field_is_one_warning_line() -> None:
    said = "query hit the sample limit, results may be partial"
    done = _query_with_warnings(said)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings and all(line.endswith(f": {said}") for line in warnings), done.stderr
    assert len(warnings) <= 4  # one per call (series, query, metadata), never one per character


@pytest.mark.parametrize(("notes", "said"), [
    ([1, 2], "'warnings' holds int '1', not a string"),
    (["fine", {"text": "odd"}], "'warnings' holds dict"),
    (["fine", None], "'warnings' holds null"),
    ({"a": "b"}, "'warnings' is dict, not a list of strings"),
])
def test_warnings_that_are_not_strings_are_exit_3_with_one_line(notes: object, said: str) -> None:
    done = _query_with_warnings(notes)
    assert done.returncode == 3, done.stderr
    line = _one_error(done)
    assert "not a Prometheus API answer" in line and said in line, line


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("S9_TOKEN", "s3cret-token")
