"""Real local servers the fault tests break on purpose: an engine's /metrics and a Prometheus process.

``EngineServer`` is a threaded HTTP server on 127.0.0.1, port 0, serving Prometheus text
0.0.4 with the signals the census reads (gauges from the same scrape, the step-ledger
counters, ``up`` is the recorder's to write). It can be told to stop answering (each
request then hangs past the scraper's timeout) and be closed (connections refused), as an
engine does when it wedges and then dies.

``start_prometheus`` backfills an OpenMetrics file into a fresh TSDB with the installed
``promtool`` and starts the installed ``prometheus`` on 127.0.0.1, on a free port; the
caller holds the process, so a test can kill it between two requests.
"""

from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx

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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prometheus_binaries() -> tuple[str, str] | None:
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    return (promtool, prometheus) if promtool and prometheus else None


def start_prometheus(om_path: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``(process, base URL)`` of a real Prometheus serving the backfilled ``om_path``."""
    binaries = prometheus_binaries()
    assert binaries is not None, "promtool and prometheus must be installed"
    promtool, prometheus = binaries
    data = work / "data"
    data.mkdir(parents=True)
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om_path), str(data)],
                   capture_output=True, check=True, timeout=120)
    config = work / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (work / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=100y",
         f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {(work / 'prometheus.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=2.0).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"prometheus at {url} not ready after 60 s")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a process this test started (by its handle), waiting for it."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=15)
