"""The host-stall probe (pdcensus.engine.host_probe): a real probe process held off its core, and the
arithmetic that sets its stalls against the clients' long gaps."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from pdcensus.engine.host_probe import TICK_SECONDS, HostProbe, host_stalls, read_stalls


def test_a_probe_held_off_the_cpu_writes_a_stall_over_the_hold_and_is_stopped_by_its_pid(tmp_path: Path) -> None:
    """SIGSTOP is what a host that gives the probe no core does. Whatever the machine's load, the probe's last
    wake-up before the stop is before it and its next after the continue, so one stall spans the hold."""
    path = tmp_path / "host_stalls.jsonl"
    with HostProbe(path) as probe:
        assert probe.process is not None
        deadline = time.monotonic() + 60
        while not path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # until its ready line: it ticks
        assert path.read_text(), "the probe never started ticking"
        stopped = time.time()
        os.kill(probe.process.pid, signal.SIGSTOP)
        time.sleep(0.8)
        resumed = time.time()
        os.kill(probe.process.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60
        while not read_stalls(path) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert probe.process.poll() is not None  # stopped when the block ended
    assert any(a <= stopped + TICK_SECONDS + 0.01 and b >= resumed for a, b in read_stalls(path)), read_stalls(path)


def test_the_ready_line_a_cut_line_and_a_missing_file_are_no_stall(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"ready": 7.5}\n{"end": 10.0, "seconds": 2.0}\n{"end": 12.')
    assert read_stalls(path) == [(8.0, 10.0)]
    assert read_stalls(tmp_path / "none.jsonl") == []


def test_a_clients_gap_is_the_hosts_where_a_stall_covers_half_of_it() -> None:
    stalls = [(10.0, 12.0), (20.0, 20.4), (50.0, 53.0)]
    gaps = [(9.9, 12.1),   # held by the first stall
            (19.8, 21.5),  # 0.4 s of 1.7 s in a stall: the engine's
            (30.0, 30.5),  # under 1 s: not counted
            (49.0, 52.0),  # 2 of its 3 s in a stall: held
            (60.0, 62.0)]  # ends after the window
    h = host_stalls(stalls, gaps, start=5.0, end=55.0)
    assert (h.stalls, h.client_gaps, h.client_gaps_in_stalls) == (3, 3, 2)
    assert h.stalled_seconds == pytest.approx(2.0 + 0.4 + 3.0)
    assert h.longest_seconds == pytest.approx(3.0)
    clipped = host_stalls(stalls, gaps, start=11.0, end=51.0)  # stalls are cut to the window
    assert clipped.stalled_seconds == pytest.approx(1.0 + 0.4 + 1.0)
