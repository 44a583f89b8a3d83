"""A real local engine endpoint the fault tests break on purpose (Prometheus: ``pdcensus.sources.prometheus_local``).

``EngineServer`` is a threaded HTTP server on 127.0.0.1, port 0, serving Prometheus text
0.0.4 with the signals the census reads (gauges from the same scrape, the step-ledger
counters, ``up`` is the recorder's to write). It can be told to stop answering (each
request then hangs past the scraper's timeout) and be closed (connections refused), as an
engine does when it wedges and then dies.
"""

from __future__ import annotations

import http.server
import threading
import time


HANG_SECONDS = 2.0


def scrape_body(n: int) -> bytes:
    """Scrape number ``n`` of an engine in step-time sharing every fourth scrape."""
    busy = n % 4 == 0
    steps_decode = sum(1000 if i % 4 else 50 for i in range(1, n + 1))
    steps = steps_decode + sum(40 for i in range(1, n + 1) if i % 4 == 0)
    seconds_decode = steps_decode * 0.015
    seconds = seconds_decode + 12.0 * (n // 4)
    lines = [
        "# TYPE radiance:decode_tokens_per_second gauge",
        f'radiance:decode_tokens_per_second{{model_name="m"}} {32 * (3.3 if busy else 66.0)}',
        "# TYPE radiance:prefill_tokens_per_second gauge",
        f'radiance:prefill_tokens_per_second{{model_name="m"}} {8000.0 if busy else 0.0}',
        "# TYPE vllm:num_requests_running gauge",
        'vllm:num_requests_running{model_name="m"} 32',
        "# TYPE radiance:engine_steps_total counter",
        f'radiance:engine_steps_total{{model_name="m"}} {steps}',
        "# TYPE radiance:engine_steps_decode_total counter",
        f'radiance:engine_steps_decode_total{{model_name="m"}} {steps_decode}',
        "# TYPE radiance:engine_step_seconds_total counter",
        f'radiance:engine_step_seconds_total{{model_name="m"}} {seconds}',
        "# TYPE radiance:engine_step_seconds_decode_total counter",
        f'radiance:engine_step_seconds_decode_total{{model_name="m"}} {seconds_decode}',
        "# TYPE vllm:num_preemptions_total counter",
        'vllm:num_preemptions_total{model_name="m"} 0',
    ]
    return ("\n".join(lines) + "\n").encode()


class EngineServer:
    """An engine's /metrics on 127.0.0.1:0 that can wedge (``stop_answering``) and die (``close``)."""

    def __init__(self) -> None:
        self.served = 0
        self.answering = threading.Event()
        self.answering.set()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if not owner.answering.is_set():
                    time.sleep(HANG_SECONDS)  # wedged: the scraper's timeout fires first
                    return
                owner.served += 1
                body = scrape_body(owner.served)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that gave up on a wedged request is expected here

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/metrics"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.closed = False

    def stop_answering(self) -> None:
        self.answering.clear()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.httpd.shutdown()
            self.httpd.server_close()
