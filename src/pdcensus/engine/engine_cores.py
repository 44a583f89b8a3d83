"""Which cores the live vLLM's engine runs on: all but one, so its clients can be the truth.

The live experiment's truth is what the clients received (:mod:`.truth`). On a 2-core host the
API server, the clients and Prometheus share the cores with vLLM's engine core and its worker;
where the engine takes both, they can wait seconds for a core while the engine steps on, and their
gaps are the host's, not the engine's. Measured (AMD EPYC with AVX-512, 2 cores, a Firecracker VM,
kernel 6.18; ``bench/vllm_live.py --scenario holdout-lpt --seconds 150``), with vLLM's own thread
binding and nothing pinned: a host-stall probe (:mod:`.host_probe`) was held off a core for 41 s
of the 150 (40 stalls, up to 4.0 s), 30 of the clients' 35 gaps over 1 s fell inside those stalls,
29 % of their gaps were tokens read together, and Prometheus lost one attempt's scrapes for 10 s;
vLLM's inter-token histogram held no gap over 1 s. With the engine core and its worker (every
thread) on core 0 and ``VLLM_CPU_OMP_THREADS_BIND=0``: no probe stall, no client gap over 1 s,
1.6 % read together, and the clients' depth while a prompt was pending 0.085 (the unpinned run's
read 1.10: the host's stalls outside the prompts outweighed the engine's inside them).

So :class:`~pdcensus.engine.vllm_server.VllmServer` binds vLLM's OpenMP threads to these cores and,
once the server is up, pins every thread of its ``VLLM::`` processes (the engine core, the
worker) to them; the API server keeps every core. ``PDCENSUS_VLLM_ENGINE_CORES`` overrides: a
CPU list (``0``, ``0-2``, ``0,2``) or ``all`` (nothing pinned, vLLM's own binding).
"""

from __future__ import annotations

import os
from pathlib import Path

from pdcensus.errors import UsageError

ENV = "PDCENSUS_VLLM_ENGINE_CORES"
ENGINE_PREFIX = "VLLM::"  # the engine core's and the worker's process titles (setproctitle)


def parse_cores(text: str) -> frozenset[int]:
    """``0-2,5`` -> {0, 1, 2, 5}; UsageError on anything else."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise UsageError(f"{ENV}={text!r}: expected a CPU list such as 0, 0-2 or 0,2, or all") from None
    if not out:
        raise UsageError(f"{ENV}={text!r}: no CPU in it")
    return frozenset(out)


def engine_cores(environ: dict[str, str] | None = None) -> frozenset[int] | None:
    """The engine's cores: ``$PDCENSUS_VLLM_ENGINE_CORES``, else every core this process may use but the
    last; None (pin nothing) for ``all`` or a single core."""
    env = (environ if environ is not None else os.environ).get(ENV, "").strip()
    if env == "all":
        return None
    if env:
        return parse_cores(env)
    mine = sorted(os.sched_getaffinity(0))
    return frozenset(mine[:-1]) if len(mine) >= 2 else None


def omp_bind(cores: frozenset[int]) -> str:
    """vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` spelling of ``cores`` (a comma list of ids)."""
    return ",".join(str(c) for c in sorted(cores))


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (by /proc's parent ids)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def pin_engine(server_pid: int, cores: frozenset[int]) -> int:
    """Pin every thread of the server's ``VLLM::`` descendants to ``cores``; returns the threads pinned."""
    pinned = 0
    for pid in _children(server_pid):
        try:
            if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(ENGINE_PREFIX.encode()):
                continue
            tids = [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()]
        except OSError:
            continue  # gone meanwhile
        for tid in tids:
            try:
                os.sched_setaffinity(tid, cores)
                pinned += 1
            except OSError:
                continue
    return pinned
