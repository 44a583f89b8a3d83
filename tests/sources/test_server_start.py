"""A local server that dies at start is named by its cause, in one line (real child processes).

The engine extra's llama-server, built natively on a CPU that claims AMX, died with SIGILL just
after "llama threadpool init": the error must say SIGILL, not a bare negative status, and the log's
last line must come with it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.errors import SourceUnreachableError
from pdcensus.sources.prometheus_local import exit_cause, free_port, last_lines, wait_until_ready


def _start(code: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.parametrize(("code", "expected"), [
    ("import os, signal; print('llama threadpool init, n_threads = 2', flush=True); "
     "os.kill(os.getpid(), signal.SIGILL)", "llama-server died with SIGILL (an instruction this CPU"),
    ("import sys; print('error: unknown argument', flush=True); sys.exit(3)", "llama-server exited with 3 at start"),
])
def test_a_server_dying_at_start_is_named_in_one_line(tmp_path: Path, code: str, expected: str) -> None:
    log = tmp_path / "server.log"
    process = _start(code, log)
    process.wait(timeout=30)
    with pytest.raises(SourceUnreachableError) as caught:
        wait_until_ready(process, f"http://127.0.0.1:{free_port()}/health", 30, name="llama-server",
                         stop=process.kill, log_tail=lambda: log.read_text())
    message = str(caught.value)
    assert message.startswith(expected), message
    assert "\n" not in message
    assert ("threadpool init" in message) or ("unknown argument" in message)


def test_exit_cause_names_signals_and_statuses() -> None:
    assert exit_cause(-signal.SIGKILL).startswith("died with SIGKILL")
    assert exit_cause(-signal.SIGSEGV) == "died with SIGSEGV"
    assert exit_cause(1) == "exited with 1"
    assert last_lines("a\n\n  b   c \n") == "a | b c"
    assert last_lines("") == "(nothing in its log)"
