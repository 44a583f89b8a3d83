"""A real Prometheus on this machine: serve a recording from a backfilled TSDB, or scrape live targets.

Tests, benchmarks and notebooks that want to check a census against the real thing use this
rather than a fake: the installed ``prometheus`` (Debian's package, 2.42 here) is started
without a shell on 127.0.0.1 on a free port, waited for until ``/-/ready`` answers, and stopped
with SIGTERM (SIGKILL after 15 s) when the context ends::

    with LocalPrometheus.backfilled(Path("metrics.om"), workdir) as prom:
        census_prometheus(prom.url, ...)

    with LocalPrometheus.scraping(["127.0.0.1:7770"], workdir, job="radiance") as prom:
        ...

:meth:`LocalPrometheus.backfilled` first writes the OpenMetrics file into the TSDB with
``promtool tsdb create-blocks-from openmetrics`` and keeps the data for 100 years, so old
timestamps stay queryable. A missing binary is a :class:`SourceUnreachableError` naming the
Debian package; a failed backfill or a server that exits or is not ready in time is a
:class:`DataError` / :class:`SourceUnreachableError` carrying the tail of its log.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

import httpx

from pdcensus.errors import DataError, SourceUnreachableError

READY_TIMEOUT_SECONDS = 120.0
BACKFILL_TIMEOUT_SECONDS = 1800.0
MINIMAL_CONFIG = "global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n"


def wait_until_ready(process: subprocess.Popen[bytes], ready_url: str, timeout_seconds: float, *, name: str,
                     stop: Callable[[], object], log_tail: Callable[[], str], poll_seconds: float = 0.2) -> None:
    """Poll ``ready_url`` until it answers 200; raise SourceUnreachableError if it never does.

    When the process exits first, the error carries its exit status (``process.returncode``); when
    neither happens within ``timeout_seconds``, ``stop`` is called first. Either error ends with
    ``log_tail()``, what the server said. Shared by every local server the project starts and waits
    for (Prometheus here, VictoriaMetrics, llama-server in ``pdcensus.engine``).
    """
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SourceUnreachableError(f"{name} {exit_cause(process.returncode)} at start: "
                                         f"{last_lines(log_tail())}")
        try:
            if httpx.get(ready_url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(poll_seconds)
    stop()
    raise SourceUnreachableError(f"{name} at {ready_url} not ready after {timeout_seconds:.0f} s: {log_tail()}")


def exit_cause(returncode: int) -> str:
    """``died with SIGILL`` for a signal (Popen's negative status), ``exited with 3`` otherwise.

    A signal at start is named because its cause differs: SIGILL is a binary built for
    instructions this CPU does not run (a native build moved to another host, or AMX/AVX-512 that a
    VM does not enable), SIGKILL usually the kernel's OOM killer.
    """
    if returncode < 0:
        try:
            signame = signal.Signals(-returncode).name
        except ValueError:
            signame = f"signal {-returncode}"
        hint = {"SIGILL": " (an instruction this CPU does not run: rebuild portably, scripts/build-engine)",
                "SIGKILL": " (killed: out of memory?)"}.get(signame, "")
        return f"died with {signame}{hint}"
    return f"exited with {returncode}"


def last_lines(text: str, count: int = 2) -> str:
    """The last ``count`` non-empty lines of a log, on one line (`` | `` between them)."""
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(nothing in its log)"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def binary(name: str) -> str:
    """The path of an installed Prometheus binary (``prometheus``, ``promtool``)."""
    found = shutil.which(name)
    if found is None:
        raise SourceUnreachableError(f"{name} is not installed (Debian package 'prometheus')")
    return found


def scrape_config(targets: Sequence[str], job: str, scrape_interval: str) -> str:
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


def backfill(om_path: Path, tsdb_dir: Path) -> float:
    """Write an OpenMetrics file into a TSDB directory with promtool; returns the seconds it took."""
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    done = subprocess.run(
        [binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", str(om_path), str(tsdb_dir)],
        capture_output=True, text=True, timeout=BACKFILL_TIMEOUT_SECONDS, check=False,
    )
    if done.returncode != 0:
        raise DataError(f"promtool could not backfill {om_path}: {(done.stderr or done.stdout).strip()[-2000:]}")
    return time.monotonic() - began


class LocalPrometheus:
    """One ``prometheus`` process on 127.0.0.1 (a context manager: started on entry, stopped on exit)."""

    def __init__(self, workdir: Path, config_text: str, *, retention: str | None = None) -> None:
        self.workdir = workdir
        self.config_text = config_text
        self.retention = retention
        self.port = 0
        self.url = ""
        self.backfill_seconds = 0.0
        self.log_path = workdir / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    @classmethod
    def backfilled(cls, om_path: Path, workdir: Path) -> LocalPrometheus:
        """A server over a TSDB backfilled from ``om_path`` (100-year retention); start it with ``with``."""
        server = cls(workdir, MINIMAL_CONFIG, retention="100y")
        server.backfill_seconds = backfill(Path(om_path), workdir / "data")
        return server

    @classmethod
    def scraping(cls, targets: Sequence[str], workdir: Path, *, job: str = "radiance",
                 scrape_interval: str = "1s") -> LocalPrometheus:
        """A server with an empty TSDB scraping ``targets`` from the moment it is ready."""
        return cls(workdir, scrape_config(targets, job, scrape_interval))

    def start(self) -> LocalPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(self.config_text)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}"]
        if self.retention is not None:
            argv.append(f"--storage.tsdb.retention.time={self.retention}")
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        wait_until_ready(self.process, f"{self.url}/-/ready", READY_TIMEOUT_SECONDS, name="prometheus", stop=self.stop,
                         log_tail=lambda: self.log_path.read_text(errors="replace")[-2000:])

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)

    def longest_scrape_gap(self, job: str, start: float, end: float) -> float:
        """The longest stretch of ``[start, end]`` (seconds) with no stored ``up`` sample of ``job``.

        ``up`` is written on every scrape, failed or not, so a gap here is time the scrape loop
        itself stored nothing (the live experiments saw one of 63 s on a loaded CI machine)."""
        span = max(1, int(end - start + 0.999))
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": f'up{{job="{job}"}}[{span}s]',
                                                              "time": repr(end)}, timeout=30).json()
        stamps = sorted(float(t) for series in answer.get("data", {}).get("result", [])
                        for t, _ in series.get("values", []))
        edges = [start, *[t for t in stamps if start <= t <= end], end]
        return max(b - a for a, b in zip(edges, edges[1:]))

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
