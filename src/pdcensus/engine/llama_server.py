"""One ``llama-server`` process on 127.0.0.1: started without a shell, ready when ``/health`` says so.

The live experiment and its test start the server exactly as a user would (its own process,
its own argv, which ``/proc/PID/cmdline`` shows to ``pdcensus verify-arm``) and stop it by its
pid: SIGTERM, then SIGKILL after a grace period. It always listens on loopback on a free port
and always exports ``/metrics`` (``--metrics``; the endpoint is off by default)::

    with LlamaServer(engine, ["-np", "4", "-b", "2048", "-ub", "512"], log_path) as server:
        httpx.get(server.url + "/metrics")

The arguments are llama.cpp's own flags (``common/arg.cpp`` at b11434): ``-np/--parallel``
slots, ``-c/--ctx-size`` (shared by the slots), ``-b/--batch-size`` (the most tokens one
``llama_decode`` call of the server loop carries), ``-ub/--ubatch-size`` (the micro-batch
``llama_decode`` splits that call into), ``-t/--threads``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType


from pdcensus.engine.locate import Engine
from pdcensus.errors import UsageError
from pdcensus.sources.prometheus_local import free_port, wait_until_ready

START_TIMEOUT_SECONDS = 180.0
STOP_GRACE_SECONDS = 15.0
# The flags the experiment manages itself; passing them in ``args`` is refused.
_OWN_FLAGS = frozenset({"-m", "--model", "--host", "--port", "--metrics"})


class LlamaServer:
    """A ``llama-server`` child process (a context manager: started on entry, stopped on exit)."""

    def __init__(self, engine: Engine, args: Sequence[str], log_path: Path, *, alias: str = "gemma") -> None:
        clash = sorted(_OWN_FLAGS & set(args))
        if clash:
            raise UsageError(f"llama-server flags {', '.join(clash)} are set by pdcensus; leave them out")
        self.engine = engine
        self.args = list(args)
        self.alias = alias
        self.log_path = log_path
        self.port = 0
        self.url = ""
        self.argv: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise UsageError("llama-server is not started")
        return self.process.pid

    def start(self) -> LlamaServer:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [str(self.engine.server), "-m", str(self.engine.model), "--alias", self.alias,
                     "--host", "127.0.0.1", "--port", str(self.port), "--metrics", *self.args]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        try:
            wait_until_ready(self.process, f"{self.url}/health", START_TIMEOUT_SECONDS, name="llama-server",
                             stop=self.stop, log_tail=self.log_tail, poll_seconds=0.25)
        finally:
            self.returncode = self.process.poll()

    def log_tail(self, chars: int = 1500) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> int:
        """SIGTERM to this pid, SIGKILL after the grace period; the exit status."""
        process = self.process
        if process is None:
            return -1
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_GRACE_SECONDS)
        self.returncode = process.returncode
        return self.returncode

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
