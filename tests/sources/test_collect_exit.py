"""`pdcensus collect` exit codes, against the live simulator server (real HTTP, a real process's argv).

0 every requested channel collected; 1 one failed (the rest is in the bundle); 4 the URL answered
nothing; 2 usage; 3 the bundle cannot be written. The failures are real ones: a log command that
does not exist, a closed port, a directory that does not exist.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pdcensus.sim.server_process import ServeProcess
from pdcensus.sources.bundle import read_bundle

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[ServeProcess]:
    with ServeProcess("step-time-sharing", speed=20) as live:
        yield live


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", "collect", *args], capture_output=True, text=True,
                          timeout=120)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_exit_0_when_every_requested_channel_is_collected(server: ServeProcess, tmp_path: Path) -> None:
    out = tmp_path / "evidence.tar.gz"
    proc = _collect("--pid", str(server.pid()), "--url", server.url, "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    bundle = read_bundle(out)
    assert bundle.failures() == {} and bundle.argv is not None and "serve" in bundle.argv
    assert isinstance(bundle.diagnostics, dict) and "cards" in bundle.diagnostics


def test_exit_1_when_one_requested_channel_fails_and_the_rest_is_kept(server: ServeProcess, tmp_path: Path) -> None:
    out = tmp_path / "evidence.tar.gz"
    proc = _collect("--url", server.url, "--log-cmd", "no-such-log-command-here logs svc", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: 1 requested channel(s) failed: boot_log")
    bundle = read_bundle(out)
    assert set(bundle.failures()) == {"boot_log"} and bundle.diagnostics is not None


def test_a_skipped_item_is_not_requested_so_not_a_failure(server: ServeProcess, tmp_path: Path) -> None:
    out = tmp_path / "evidence.tar.gz"
    proc = _collect("--url", server.url, "--skip", "stats", "--skip", "diagnostics", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(read_bundle(out).manifest["items"]) == {"metrics"}


def test_exit_4_when_the_url_answers_nothing(tmp_path: Path) -> None:
    out = tmp_path / "evidence.tar.gz"
    proc = _collect("--url", f"http://127.0.0.1:{_closed_port()}", "--timeout", "2", "--out", str(out))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and "could not be reached" in proc.stderr
    assert read_bundle(out).manifest["items"]["stats"]["unreachable"] is True


@pytest.mark.parametrize("args", [
    pytest.param(["--skip", "boot_log"], id="skip-unknown-item"),
    pytest.param(["--pid", "1", "--process-name", "x"], id="pid-and-name"),
    pytest.param(["--url", "ftp://127.0.0.1:1"], id="not-http"),
])
def test_exit_2_on_a_usage_error(args: list[str], tmp_path: Path) -> None:
    proc = _collect(*args, "--out", str(tmp_path / "b.tar.gz"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


def test_exit_3_when_the_bundle_cannot_be_written(server: ServeProcess, tmp_path: Path) -> None:
    proc = _collect("--url", server.url, "--out", str(tmp_path / "no-such-dir" / "b.tar.gz"))
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: cannot write the bundle") and proc.stderr.count("\n") == 1
