"""A real Prometheus for integration tests: backfill an OpenMetrics file, serve it, stop it.

``prometheus_server(om_path) -> base_url`` backfills the file with
``promtool tsdb create-blocks-from openmetrics`` into a fresh TSDB directory, starts the
installed ``prometheus`` on 127.0.0.1 on a free port with a 100-year retention (so old
timestamps are kept), waits for ``/-/ready`` and returns ``http://127.0.0.1:PORT``. Every
server is stopped when the test module that started it ends (module scope, so a module
can start one server and share it between its tests). Tests using the fixture are
skipped only when ``promtool`` or ``prometheus`` is not installed.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

READY_TIMEOUT_SECONDS = 60.0
MINIMAL_CONFIG = "global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _backfill(promtool: str, om_path: Path, tsdb_dir: Path) -> None:
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(om_path), str(tsdb_dir)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool could not backfill {om_path}: {done.stderr.strip() or done.stdout.strip()}")


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {process.returncode}: {log_path.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/-/ready", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"prometheus at {base_url} not ready after {READY_TIMEOUT_SECONDS:.0f}s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture(scope="module")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Path], str]]:
    """A function ``start(om_path) -> base_url`` serving that file from a real Prometheus."""
    promtool, prometheus = shutil.which("promtool"), shutil.which("prometheus")
    if promtool is None or prometheus is None:
        pytest.skip("promtool and prometheus are not installed")
    started: list[subprocess.Popen[bytes]] = []

    def start(om_path: Path) -> str:
        work = tmp_path_factory.mktemp("prometheus")
        tsdb_dir = work / "data"
        tsdb_dir.mkdir()
        _backfill(promtool, Path(om_path), tsdb_dir)
        config = work / "prometheus.yml"
        config.write_text(MINIMAL_CONFIG)
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_path = work / "prometheus.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [prometheus, f"--config.file={config}", f"--storage.tsdb.path={tsdb_dir}",
                 "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        started.append(process)
        _wait_ready(base_url, process, log_path)
        return base_url

    yield start
    for process in started:
        _stop(process)


def scrape_config(targets: list[str], job: str, scrape_interval: str) -> str:
    """A prometheus.yml that scrapes ``targets`` (host:port) every ``scrape_interval`` under ``job``."""
    listed = ", ".join(f'"{t}"' for t in targets)
    return (
        "global:\n"
        f"  scrape_interval: {scrape_interval}\n"
        f"  scrape_timeout: {scrape_interval}\n"
        f"  evaluation_interval: {scrape_interval}\n"
        "scrape_configs:\n"
        f"  - job_name: {job}\n"
        "    static_configs:\n"
        f"      - targets: [{listed}]\n"
    )


@pytest.fixture(scope="module")
def prometheus_scraper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., str]]:
    """A function ``start(targets, job="radiance", scrape_interval="1s") -> base_url``.

    Starts the installed ``prometheus`` on 127.0.0.1 on a free port with an empty TSDB,
    scraping the given ``host:port`` targets (their ``/metrics``) from the moment it is ready.
    """
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        pytest.skip("prometheus is not installed")
    started: list[subprocess.Popen[bytes]] = []

    def start(targets: list[str], job: str = "radiance", scrape_interval: str = "1s") -> str:
        work = tmp_path_factory.mktemp("prometheus-scraper")
        config = work / "prometheus.yml"
        config.write_text(scrape_config(targets, job, scrape_interval))
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        log_path = work / "prometheus.log"
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [prometheus, f"--config.file={config}", f"--storage.tsdb.path={work / 'data'}",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        started.append(process)
        _wait_ready(base_url, process, log_path)
        return base_url

    yield start
    for process in started:
        _stop(process)
