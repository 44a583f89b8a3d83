"""Measure the hostile cases of RELIABILITY.md ("Hostile inputs"): wall time, exit code and peak memory.

Run from the repository root: ``PYTHONPATH=src:. .venv/bin/python tests/sources/measure_hostile.py``.
Each case starts a real local server from :mod:`tests.sources.hostile_servers` (or writes a
file under /tmp, deleted after) and runs the CLI under ``/usr/bin/time -v``. Not a test:
timings depend on the machine; RELIABILITY.md quotes one run.
"""

from __future__ import annotations

import gzip
import http.server
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.reliability.live_servers import scrape_body
from tests.sources.hostile_servers import HostileServer, answer_bytes, big_body, good_answer, trickle


def run(label: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    t0 = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "pdcensus", *args], capture_output=True,
                          text=True, timeout=900, check=False, env={**os.environ, **(env or {})})
    wall = time.monotonic() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith(("error:", "warning:"))]
    print(f"{label}: exit {done.returncode}, {wall:.1f} s, max RSS {int(rss.group(1)) // 1024 if rss else '?'} MiB")
    for line in errors[:2]:
        print(f"    {line[:220]}")
    return done


def server(handler: Callable[[http.server.BaseHTTPRequestHandler, int], None], path: str = "") -> HostileServer:
    return HostileServer(handler, path)


def main() -> None:
    holder: list[HostileServer] = []
    slow = server(lambda req, n: trickle(holder[0].released, 2.0)(req))
    holder.append(slow)
    run("census --timeout 5s, 1 byte / 2 s", "census", "--prometheus", slow.url, "--window", "1h", "--timeout", "5s")
    run("fleet --timeout 5s, 1 byte / 2 s", "fleet", "--prometheus", slow.url, "--window", "1h", "--timeout", "5s")
    slow.close()

    stall: list[HostileServer] = []
    five = server(lambda req, n: good_answer(req) if n <= 5 else trickle(stall[0].released, 2.0)(req))
    stall.append(five)
    run("census --timeout 5s, 5 answers then a trickle", "census", "--prometheus", five.url, "--selector",
        '{job="radiance"}', "--window", "1h", "--timeout", "5s")
    five.close()

    def metrics(req: http.server.BaseHTTPRequestHandler, n: int) -> None:
        answer_bytes(req, scrape_body(n))

    with tempfile.TemporaryDirectory() as tmp:
        healthy = server(metrics, "/metrics")
        tr: list[HostileServer] = []
        trickling = server(lambda req, n: trickle(tr[0].released, 0.5, "text/plain")(req), "/metrics")
        tr.append(trickling)
        out = Path(tmp) / "run.pdrec"
        done = run("record healthy + trickle, --interval 1s --duration 20s", "record", healthy.url, trickling.url,
                   "--interval", "1s", "--duration", "20s", "--out", str(out))
        print(f"    healthy scrapes up: {done.stderr.count(healthy.url.split('/')[2] + ' up')}, trickle DOWN: "
              f"{done.stderr.count('DOWN: no answer within')}")
        healthy.close()
        trickling.close()

        huge = server(lambda req, n: big_body(300 << 20, content_type="text/plain")(req), "/metrics")
        run("record a 300 MB /metrics (cap 64 MiB)", "record", huge.url, "--interval", "2s", "--duration", "2s",
            "--out", str(Path(tmp) / "big.pdrec"))
        huge.close()
        answer = server(lambda req, n: big_body(300 << 20)(req))
        run("census a 300 MB Prometheus answer (cap 256 MiB)", "census", "--prometheus", answer.url, "--selector",
            '{job="radiance"}', "--window", "1h")
        answer.close()
        bomb = server(lambda req, n: big_body(2 << 30, gzipped=True)(req))
        run("census a gzip-encoded 2 GiB answer (cap 256 MiB)", "census", "--prometheus", bomb.url, "--selector",
            '{job="radiance"}', "--window", "1h")
        bomb.close()

        zeros = Path(tmp) / "z.om"
        with open(zeros, "wb") as fh:
            fh.truncate(2 << 30)
        run("census a 2 GiB file of NUL, no newline (truncate -s 2G)", "census", str(zeros))
        zeros.unlink()
        nonl = Path(tmp) / "c.om"
        with open(nonl, "wb") as fh:
            fh.write(b"# TYPE x gauge\n# ")
            block = b"c" * (64 << 20)
            for _ in range(32):
                fh.write(block)
            fh.write(b"\n# EOF\n")
        run("census a 2 GiB comment line", "census", str(nonl))
        nonl.unlink()
        gz = Path(tmp) / "b.om.gz"
        with gzip.open(gz, "wb", compresslevel=9) as fh:
            zero = b"\0" * (64 << 20)
            for _ in range(32):
                fh.write(zero)
        run(f"census a {gz.stat().st_size >> 20} MiB gzip of 2 GiB of zeros", "census", str(gz))
        gz.unlink()
        churn = Path(tmp) / "churn.om"
        rows = [f'radiance:decode_tokens_per_second{{job="radiance",instance="e:1",request_id="req-{i:08d}"}} 1 '
                f"{1.7e9 + i * 15:.0f}" for i in range(30000)]
        churn.write_text("# TYPE radiance:decode_tokens_per_second gauge\n" + "\n".join(rows) + "\n# EOF\n")
        run(f"census {churn.stat().st_size / 1e6:.1f} MB, 30k changing label sets", "census", str(churn))


if __name__ == "__main__":
    main()
