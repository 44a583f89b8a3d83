"""A real VictoriaMetrics on this machine: import a recording, then query it through the Prometheus API.

The fleet screen is tested and benchmarked on two real engines side by side; this is the second
(Debian's package ``victoria-metrics``, 1.79.5 here). The single-node binary is started without a
shell on 127.0.0.1 on a free port with a temporary ``-storageDataPath``, waited for until
``/health`` answers, and stopped with SIGTERM (SIGKILL after 15 s)::

    with LocalVictoriaMetrics(workdir) as vm:
        vm.import_recording(recording)
        census_fleet(vm.url, ...)

Samples go in through ``/api/v1/import/prometheus`` (Prometheus text exposition, one line per
sample with its timestamp in milliseconds; ``app/vminsert/main.go`` at v1.79.5), streamed in
chunks. After an import, ``/internal/force_flush`` (``app/vmstorage/main.go``) makes the samples
searchable at once and ``/internal/resetRollupResultCache`` (``app/vmselect/main.go``) drops
results cached before the import. ``-search.disableCache`` is set as VictoriaMetrics advises
while backfilling (its help text, ``app/vmselect/promql/eval.go``), and ``-retentionPeriod=100y``
keeps old timestamps.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx
import numpy as np

from pdcensus.errors import DataError, SourceUnreachableError
from pdcensus.series.model import Endpoint, Recording
from pdcensus.sources.openmetrics_writer import escape_label_value
from pdcensus.sources.prometheus_local import READY_TIMEOUT_SECONDS, free_port, wait_until_ready

IMPORT_CHUNK_LINES = 200_000


def vm_binary() -> str:
    found = shutil.which("victoria-metrics")
    if found is None:
        raise SourceUnreachableError("victoria-metrics is not installed (Debian package 'victoria-metrics')")
    return found


def _series(name: str, labels: Sequence[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
    return f"{name}{{{inner}}}" if inner else name


def exposition_lines(endpoint: Endpoint) -> Iterator[str]:
    """Every present sample of ``endpoint`` as ``name{labels} value timestamp_ms``."""
    ts_ms = np.round(np.asarray(endpoint.timestamps, dtype=np.float64) * 1000).astype(np.int64)
    for c, key in enumerate(endpoint.keys):
        present = np.asarray(endpoint.present[:, c], dtype=bool)
        if not present.any():
            continue
        head = _series(key.name, key.labels)
        values = endpoint.values[present, c]
        for v, t in zip(values.tolist(), ts_ms[present].tolist()):
            yield f"{head} {v!r} {t}\n" if v == v else f"{head} NaN {t}\n"


class LocalVictoriaMetrics:
    """One single-node VictoriaMetrics process on 127.0.0.1 with its data under ``workdir``."""

    def __init__(self, workdir: Path, *, extra_flags: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.extra_flags = tuple(extra_flags)
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.import_seconds = 0.0
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LocalVictoriaMetrics:
        binary = vm_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self._log = log = (self.workdir / "victoria-metrics.log").open("wb")
        argv = [binary, f"-storageDataPath={self.workdir / 'data'}", f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y", "-search.disableCache", *self.extra_flags]
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_until_ready(self.process, f"{self.url}/health", READY_TIMEOUT_SECONDS, name="victoria-metrics",
                         stop=self.stop, log_tail=self._log_tail)
        return self

    def _log_tail(self) -> str:
        path = self.workdir / "victoria-metrics.log"
        return path.read_text(errors="replace")[-800:] if path.exists() else ""

    def import_lines(self, lines: Iterator[str]) -> int:
        """POST exposition lines to ``/api/v1/import/prometheus`` in chunks; returns how many were sent."""
        sent = 0
        with httpx.Client(base_url=self.url, timeout=600.0) as client:
            while True:
                chunk = [line for _, line in zip(range(IMPORT_CHUNK_LINES), lines)]
                if not chunk:
                    break
                resp = client.post("/api/v1/import/prometheus", content="".join(chunk).encode())
                if resp.status_code >= 300:
                    raise DataError(f"victoria-metrics refused the import: HTTP {resp.status_code} {resp.text[:300]}")
                sent += len(chunk)
            client.get("/internal/force_flush")
            client.get("/internal/resetRollupResultCache")
        return sent

    def import_recording(self, recording: Recording) -> int:
        """Import every endpoint of ``recording``; returns the number of samples."""
        t0 = time.monotonic()
        sent = self.import_lines(itertools.chain.from_iterable(exposition_lines(e) for e in recording.endpoints))
        self.import_seconds += time.monotonic() - t0
        return sent

    def stop(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> LocalVictoriaMetrics:
        return self.start() if self.process is None else self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
