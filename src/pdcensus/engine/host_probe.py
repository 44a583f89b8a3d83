"""A host-stall probe beside a live load: did the host, not the engine, hold the clients up?

The clients' truth (:mod:`.truth`) is what their streams received, so a gap there may be the
engine's (a chunk step, a preemption) or the host's: the API server, the clients and Prometheus
share the machine with the engine, and where they get no core for a while, every stream waits
at once while the engine steps on. The probe is a process of its own that only sleeps
``TICK_SECONDS`` at a time; each wake-up later than ``STALL_SECONDS`` is a host stall, written
as one JSON line ``{"end": unix seconds, "seconds": length}`` (its first line, ``{"ready": unix
seconds}``, says it ticks).

Measured (AMD EPYC with AVX-512, 2 cores, a Firecracker VM, kernel 6.18; vLLM 0.32 CPU,
``bench/vllm_live.py --scenario holdout-lpt --seconds 90``): the probe waited 0.38-2.64 s for a core
18 times, the five decoders' clients stalled together at the same moments, Prometheus missed its
scrapes there, and vLLM's own inter-token histogram (stamped by the engine core) held no gap over
1 s. ``ps`` showed the engine core at 70 % of one core beside its worker at 93 % of the other;
vLLM's shared-memory queue between them waits by spinning on ``sched_yield``
(``vllm/distributed/device_communicators/shm_broadcast.py``, ``MessageQueue.wait`` and
``acquire_write``); whether that spinning is what starves the rest is not established here.
Both live experiments (vLLM's, llama.cpp's) run it beside the load and write its stalls into
``truth.json`` as ``host``. The probe is stopped by its process id, like every process the
experiments start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from pdcensus.engine.streams import RequestRecord

HOST_STALLS = "host_stalls.jsonl"  # the probe's lines, in a run's folder
TICK_SECONDS = 0.02
STALL_SECONDS = 0.2  # ten ticks late: no scheduler's ordinary latency on an idle-enough core
# the probe itself, run as `python -c`: no shell, its path and the tick as arguments
_PROBE = """
import json, sys, time
out, tick, stall = open(sys.argv[1], "a", buffering=1), float(sys.argv[2]), float(sys.argv[3])
out.write(json.dumps({"ready": time.time()}) + "\\n")
prev = time.monotonic()
while True:
    time.sleep(tick)
    now = time.monotonic()
    if now - prev - tick > stall:
        out.write(json.dumps({"end": time.time(), "seconds": now - prev - tick}) + "\\n")
    prev = now
"""


class HostProbe:
    """The probe process, writing its stalls to ``path`` while the with-block runs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HostProbe:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("")
        self.process = subprocess.Popen([sys.executable, "-c", _PROBE, str(self.path), str(TICK_SECONDS),
                                         str(STALL_SECONDS)], stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()


def decode_gaps(records: Sequence[RequestRecord]) -> list[tuple[float, float]]:
    """Every decoding stream's inter-token gaps as ``(begin, end)`` (the prompt session's left out)."""
    return [(a, b) for r in records if r.kind == "decode" for a, b in zip(r.token_times, r.token_times[1:])]


def read_stalls(path: Path) -> list[tuple[float, float]]:
    """The probe's stalls as ``(start, end)`` in unix seconds (none where the file is missing)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            out.append((float(row["end"]) - float(row["seconds"]), float(row["end"])))
        except (ValueError, KeyError, TypeError):
            continue  # the ready line, or a line cut where the probe was stopped
    return out


@dataclass(frozen=True)
class HostStalls:
    """The probe's stalls inside a window, and how many of the clients' long gaps they hold."""

    stalls: int
    stalled_seconds: float
    longest_seconds: float
    client_gaps: int  # the clients' gaps over ``over`` seconds ending in the window
    client_gaps_in_stalls: int  # of them, those a host stall covers for at least half their length
    over: float

    def to_dict(self) -> dict[str, float | int]:
        return {"stalls": self.stalls, "stalled_seconds": self.stalled_seconds,
                "longest_seconds": self.longest_seconds, "client_gaps_over_seconds": self.over,
                "client_gaps": self.client_gaps, "client_gaps_in_host_stalls": self.client_gaps_in_stalls}


def host_stalls(stalls: Sequence[tuple[float, float]], gaps: Sequence[tuple[float, float]], start: float,
                end: float, over: float = 1.0) -> HostStalls:
    """The probe's stalls that overlap ``[start, end]``, and the clients' gaps (``(begin, end)`` each) over
    ``over`` seconds ending there that host stalls cover for at least half their length."""
    inside = [(max(a, start), min(b, end)) for a, b in stalls if b > start and a < end]
    long_gaps = [(a, b) for a, b in gaps if b - a > over and start < b <= end]
    held = sum(1 for a, b in long_gaps
               if sum(max(0.0, min(b, y) - max(a, x)) for x, y in inside) >= (b - a) / 2)
    lengths = [b - a for a, b in inside]
    return HostStalls(len(inside), sum(lengths), max(lengths, default=0.0), len(long_gaps), held, over)
