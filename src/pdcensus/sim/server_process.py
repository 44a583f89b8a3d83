"""Run ``pdcensus serve`` as a child process: start it on a free port, learn its URL, stop it.

Tests, benchmarks and notebooks that want a live endpoint use :class:`ServeProcess` rather than
an in-process server, so that the endpoint is exactly what a user starts (its own process,
event loop and signal handling) and SIGTERM can be sent to it::

    with ServeProcess("step-time-sharing", speed=15) as server:
        httpx.get(server.url + "/metrics")
    server.returncode   # 0 after a clean SIGTERM shutdown

The child is started without a shell (argv list) and always on ``--port 0``; its URL comes
from the ``serving on http://...`` line it prints once it listens.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from pdcensus.errors import SourceUnreachableError

_READY = re.compile(r"serving on (http://\S+)")


class ServeProcess:
    """A ``pdcensus serve`` child process (a context manager; SIGTERM on exit)."""

    def __init__(self, scenario: str, *, speed: float = 1.0, background: bool = True, seed: int = 0,
                 sets: Sequence[str] = (), extra_args: Sequence[str] = (), start_timeout_seconds: float = 60.0,
                 python: str = sys.executable) -> None:
        self.argv = [python, "-m", "pdcensus", "serve", scenario, "--port", "0", "--speed", repr(float(speed)),
                     "--seed", str(seed), *[a for s in sets for a in ("--set", s)], *extra_args]
        if not background:
            self.argv.append("--no-background")
        self.start_timeout_seconds = start_timeout_seconds
        self.url = ""
        self.returncode: int | None = None
        self.process: subprocess.Popen[str] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="pdcensus-serve-", suffix=".log", delete=False)
        self.log_path = Path(self._log.name)
        self._stdout_lines: list[str] = []

    def start(self) -> ServeProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)
        assert self.process.stdout is not None
        deadline = time.monotonic() + self.start_timeout_seconds
        with selectors.DefaultSelector() as sel:
            sel.register(self.process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not sel.select(timeout=0.2):
                    if self.process.poll() is not None:
                        break
                    continue
                line = self.process.stdout.readline()
                if not line:
                    break
                self._stdout_lines.append(line)
                found = _READY.search(line)
                if found:
                    self.url = found.group(1)
                    return self
        self.stop()
        raise SourceUnreachableError(f"`{' '.join(self.argv[2:])}` did not start (exit {self.returncode}): "
                                     f"{self.log_text()[-1500:]}")

    def log_text(self) -> str:
        """What the child wrote on stderr so far (boot ledger, errors)."""
        if not self._log.closed:  # a failed start has already stopped (and closed the log) when it reads it
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self, timeout_seconds: float = 30.0) -> int:
        """Wait for the child to exit; kill it if it outlives ``timeout_seconds``. Returns the exit status."""
        assert self.process is not None
        try:
            self.returncode = self.process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.returncode = self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self._stdout_lines.extend(self.process.stdout.readlines())
            self.process.stdout.close()
        return self.returncode

    def stdout_text(self) -> str:
        return "".join(self._stdout_lines)

    def stop(self, timeout_seconds: float = 30.0) -> int:
        """SIGTERM, then wait (kill after ``timeout_seconds``)."""
        if self.process is None:
            return -1
        self.signal(signal.SIGTERM)
        code = self.wait(timeout_seconds)
        self._log.close()
        return code

    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.returncode is None:
            self.stop()
        self.log_path.unlink(missing_ok=True)
