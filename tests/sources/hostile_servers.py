"""Real local HTTP servers that misbehave on purpose: slow-loris trickles, stalls, huge bodies.

Each is a threaded ``http.server`` on 127.0.0.1, port 0, in a daemon thread, so the client
under test speaks real HTTP over a real socket (no mock transport). ``close()`` releases any
handler still trickling and stops the server.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import zlib
from collections.abc import Callable

Handler = Callable[[http.server.BaseHTTPRequestHandler, int], None]

GOOD_ANSWERS = {  # what a Prometheus with one engine answers, per API path
    "/api/v1/series": [{"__name__": name, "job": "radiance", "instance": "a:1"} for name in (
        "up", "radiance:engine_steps_total", "radiance:engine_steps_decode_total",
        "radiance:engine_step_seconds_total", "radiance:engine_step_seconds_decode_total",
        "radiance:decode_tokens_per_second", "radiance:prefill_tokens_per_second", "vllm:num_requests_running")],
    "/api/v1/query": {"resultType": "matrix", "result": []},
    "/api/v1/metadata": {},
    "/api/v1/label/job/values": ["radiance"],
}

SCRAPE_TYPE = "text/plain; version=0.0.4"  # what an engine's /metrics answers


class HostileServer:
    """Serves ``handler(request, n)`` for the n-th request (1-based) until closed."""

    def __init__(self, handler: Handler, path: str = "") -> None:
        self.requests = 0
        self.released = threading.Event()
        owner = self
        lock = threading.Lock()

        class Request(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                with lock:
                    owner.requests += 1
                    n = owner.requests
                length = int(self.headers.get("Content-Length") or 0)
                self.body = self.rfile.read(length) if length else b""  # for a handler that checks it
                try:
                    handler(self, n)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: what the test wants

            do_GET = do_POST = _any  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass

        self.httpd = Server(("127.0.0.1", 0), Request)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def trickle(server_released: threading.Event, gap_seconds: float,
            content_type: str = "application/json") -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """Headers at once, then one byte of a never-ending body every ``gap_seconds``."""
    def send(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Type", content_type)
        req.send_header("Content-Length", str(10**9))
        req.end_headers()
        req.wfile.flush()
        body = b'{"status":"success","data":[' if "json" in content_type else b"# HELP x slow\n"
        i = 0
        while not server_released.wait(gap_seconds):
            req.wfile.write(body[i % len(body):i % len(body) + 1] if i < len(body) else b" ")
            req.wfile.flush()
            i += 1
    return send


def answer_bytes(req: http.server.BaseHTTPRequestHandler, data: bytes, content_type: str = SCRAPE_TYPE,
                 status: int = 200) -> None:
    """An answer of ``data`` with its Content-Type and a Content-Length (default: a 0.0.4 scrape)."""
    req.send_response(status)
    req.send_header("Content-Type", content_type)
    req.send_header("Content-Length", str(len(data)))
    req.end_headers()
    req.wfile.write(data)


def answer_json(req: http.server.BaseHTTPRequestHandler, body: object, status: int = 200) -> None:
    """A JSON answer with a Content-Length."""
    answer_bytes(req, json.dumps(body).encode() if not isinstance(body, bytes) else body, "application/json", status)


def answer_redirect(req: http.server.BaseHTTPRequestHandler, status: int, location: str) -> None:
    """A redirect (3xx) to ``location``, with an empty body."""
    req.send_response(status)
    req.send_header("Location", location)
    req.send_header("Content-Length", "0")
    req.end_headers()


def good_answer(req: http.server.BaseHTTPRequestHandler) -> None:
    """What a Prometheus with one engine and no samples answers to the path asked."""
    path = req.path.split("?", 1)[0]
    answer_json(req, {"status": "success", "data": GOOD_ANSWERS.get(path, {"resultType": "matrix", "result": []})})


def big_body(size: int, *, gzipped: bool = False, content_type: str = "application/json"
             ) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """``size`` bytes of body (spaces after a JSON start), streamed chunked; gzip-encoded if asked."""
    def send(req: http.server.BaseHTTPRequestHandler) -> None:
        req.send_response(200)
        req.send_header("Content-Type", content_type)
        req.send_header("Transfer-Encoding", "chunked")
        if gzipped:
            req.send_header("Content-Encoding", "gzip")
        req.end_headers()
        packer = zlib.compressobj(9, zlib.DEFLATED, 31) if gzipped else None  # wbits 31: a gzip stream

        def write(data: bytes) -> None:
            data = packer.compress(data) if packer is not None else data
            if data:
                req.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

        head = b'{"status":"success","data":['
        write(head)
        left = size - len(head)
        while left > 0:
            n = min(left, 1 << 20)
            write(b" " * n)
            left -= n
        if packer is not None:
            tail = packer.flush()
            req.wfile.write(f"{len(tail):x}\r\n".encode() + tail + b"\r\n")
        req.wfile.write(b"0\r\n\r\n")
    return send


def wait_until(predicate: Callable[[], bool], seconds: float) -> bool:
    """Poll ``predicate`` for up to ``seconds`` (for a server thread to have seen a request)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()
