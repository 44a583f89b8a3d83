"""Measure what ``record`` and ``collect`` do with redirects and ``Retry-After`` (RELIABILITY.md, "Hostile inputs").

Run from the repository root: ``PYTHONPATH=src:. .venv/bin/python bench/http_hops_readers.py``.
Each case starts real local servers from :mod:`tests.sources.hostile_servers` and runs the CLI
as a child process, printing its exit code, wall time, the requests each server saw and the
lines that say what happened. Not a test: RELIABILITY.md quotes one run.
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.reliability.live_servers import scrape_body
from tests.sources.hostile_servers import HostileServer, answer_bytes, answer_json, answer_redirect


def run(label: str, *args: str) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=dict(os.environ))
    print(f"{label}: exit {done.returncode}, {time.monotonic() - t0:.1f} s")
    lines = (done.stdout + done.stderr).splitlines()
    down = [line for line in lines if " DOWN: " in line]
    said = [line for line in lines if line.startswith(("error:", "warning:", "  FAILED", "  ok", "recorded"))]
    for line in down[:2] + said[:4]:
        print(f"    {line[:260]}")
    return done


def metrics(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
    answer_bytes(req, scrape_body(n))


def busy(req: http.server.BaseHTTPRequestHandler, status: int, after: str) -> None:
    req.send_response(status)
    req.send_header("Retry-After", after)
    req.send_header("Content-Length", "0")
    req.end_headers()


def item(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
    if req.path.endswith("/metrics"):
        metrics(req, n)
    else:
        answer_json(req, {"ok": True})


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        with HostileServer(lambda req, n: metrics(req, n) if req.path.startswith("/real/")
                           else answer_redirect(req, 302, "/real" + req.path), "/metrics") as here:
            run("record, /metrics 302 to /real/metrics (same origin), --interval 200ms --duration 2s",
                "record", here.url, "--interval", "200ms", "--duration", "2s", "--out", str(out / "a.pdrec"))
            print(f"    requests seen: {here.requests}")
        with HostileServer(metrics) as other:
            with HostileServer(lambda req, n: answer_redirect(req, 302, other.url + req.path), "/metrics") as here:
                run("record, /metrics 302 to another port", "record", here.url, "--interval", "200ms",
                    "--duration", "2s", "--out", str(out / "b.pdrec"))
                print(f"    requests seen: {here.requests}, by the other origin: {other.requests}")
        with HostileServer(lambda req, n: busy(req, 429, "1"), "/metrics") as here:
            run("record, 429 Retry-After: 1, --interval 200ms --duration 2s", "record", here.url, "--interval",
                "200ms", "--duration", "2s", "--out", str(out / "c.pdrec"))
            print(f"    requests seen: {here.requests} (10 slots)")

        with HostileServer(lambda req, n: item(req, n) if req.path.startswith("/v1/")
                           else answer_redirect(req, 301, "/v1" + req.path)) as here:
            run("collect, every item 301 to /v1/... (same origin)", "collect", "--url", here.url, "--out",
                str(out / "a.tar.gz"))
        with HostileServer(item) as other:
            with HostileServer(lambda req, n: answer_redirect(req, 302, other.url + req.path)) as here:
                run("collect, every item 302 to another port", "collect", "--url", here.url, "--out",
                    str(out / "b.tar.gz"))
                print(f"    requests by the other origin: {other.requests}")
        with HostileServer(lambda req, n: busy(req, 503, "1") if n <= 1 else item(req, n)) as here:
            run("collect, first answer 503 Retry-After: 1", "collect", "--url", here.url, "--out",
                str(out / "c.tar.gz"))
            print(f"    requests seen: {here.requests}")
        with HostileServer(lambda req, n: busy(req, 429, "30")) as here:
            run("collect --timeout 2, 429 Retry-After: 30", "collect", "--url", here.url, "--timeout", "2",
                "--out", str(out / "d.tar.gz"))
            print(f"    requests seen: {here.requests}")


if __name__ == "__main__":
    main()
