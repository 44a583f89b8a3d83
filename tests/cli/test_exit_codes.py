"""Exit codes that gate a pipeline: a record that reached nothing, a window that ends before it starts.

``record`` exits 4 when no scrape succeeded (one line says so), 2 on an argument that is not an
endpoint URL, 0 with a warning when one endpoint of several never answered. A window whose end
is not after its start is exit 2 on every command that takes one, on a file and on
``--prometheus`` alike (checked before anything is read or reached).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pdcensus.series.model import Family, MetricType, RecordingBuilder, SeriesKey, normalize_labels
from pdcensus.sources.openmetrics_writer import write_openmetrics

T0 = 1_793_491_200.0


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=120,
                          check=False, cwd=cwd, env={**os.environ, "COLUMNS": "200"})


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        body = b"# TYPE up gauge\nrequests_running 3\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def live_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def test_record_against_a_closed_port_exits_4_and_says_no_scrape_succeeded(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/metrics"
    done = run_cli("record", url, "--interval", "1s", "--duration", "2s", "--out", str(tmp_path / "r.pdrec"), "--quiet")
    assert done.returncode == 4, done.stderr
    (line,) = error_lines(done.stderr)
    assert "no scrape succeeded" in line and url in line


@pytest.mark.parametrize("url", [pytest.param("notaurl", id="bare-word"), pytest.param("ftp://box:21/m", id="scheme"),
                                 pytest.param("box:99999", id="port-out-of-range")])
def test_record_of_something_that_is_not_an_endpoint_url_is_a_usage_error_and_writes_nothing(
        tmp_path: Path, url: str) -> None:
    out = tmp_path / "r.pdrec"
    done = run_cli("record", url, "--out", str(out))
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done.stderr)
    assert "not an endpoint URL" in line and repr(url) in line
    assert not out.exists()


def test_record_exits_0_when_one_endpoint_answered_and_warns_about_the_silent_one(
        tmp_path: Path, live_endpoint: str) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/metrics"
    done = run_cli("record", live_endpoint, dead, "--interval", "1s", "--duration", "2s",
                   "--out", str(tmp_path / "r.pdrec"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert error_lines(done.stderr) == []
    assert any(line.startswith("warning:") and dead in line and "never answered" in line
               for line in done.stderr.splitlines())


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    builder = RecordingBuilder("tiny")
    builder.add_family(Family("up", MetricType.GAUGE))
    labels = normalize_labels({"job": "radiance", "instance": "a:1"})
    for i in range(40):
        builder.add(SeriesKey("up", labels), T0 + 15 * i, 1.0)
    path = tmp_path_factory.mktemp("window") / "tiny.om"
    write_openmetrics(builder.build(), path)
    return path


LATE, EARLY = str(T0 + 600), str(T0 + 60)


@pytest.mark.parametrize("args", [
    pytest.param(("census", "{file}", "--start", LATE, "--end", EARLY), id="census-file"),
    pytest.param(("census", "{file}", "--start", LATE, "--end", LATE), id="census-file-empty-window"),
    pytest.param(("census", "--prometheus", "{url}", "--start", LATE, "--end", EARLY), id="census-prometheus"),
    pytest.param(("census", "--prometheus", "{url}", "--end", EARLY, "--window", "0"), id="census-window-0"),
    pytest.param(("fleet", "--prometheus", "{url}", "--start", LATE, "--end", EARLY), id="fleet"),
    pytest.param(("query", "{file}", "up", "--start", LATE, "--end", EARLY, "--step", "15s"), id="query-file"),
    pytest.param(("query", "--prometheus", "{url}", "up", "--start", LATE, "--end", EARLY, "--step", "15s"),
                 id="query-prometheus"),
])
def test_a_window_that_ends_before_it_starts_is_exit_2_on_every_command(
        recording: Path, args: tuple[str, ...]) -> None:
    url = f"http://127.0.0.1:{closed_port()}"  # nothing listens: the window is refused before any request
    done = run_cli(*(a.format(file=recording, url=url) for a in args))
    assert done.returncode == 2, done.stderr
    (line,) = error_lines(done.stderr)
    assert "end" in line and "start" in line
