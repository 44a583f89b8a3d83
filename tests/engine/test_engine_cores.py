"""The live vLLM's engine cores (pdcensus.engine.engine_cores): the default, the override, and a real
pin of a ``VLLM::`` child's threads (the API server's own threads are left alone)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from pdcensus.engine.engine_cores import ENV, engine_cores, omp_bind, parse_cores, pin_engine
from pdcensus.errors import UsageError


def test_cpu_lists_as_vllm_and_taskset_write_them() -> None:
    assert parse_cores("0") == {0} and parse_cores("0-2,5") == {0, 1, 2, 5} and parse_cores(" 1 , 3") == {1, 3}
    for bad in ("", "a", "0-x", "1,,2"):
        with pytest.raises(UsageError, match=ENV):
            parse_cores(bad)
    assert omp_bind(frozenset({2, 0})) == "0,2"


def test_all_but_the_last_core_unless_told() -> None:
    mine = sorted(os.sched_getaffinity(0))
    want = frozenset(mine[:-1]) if len(mine) >= 2 else None
    assert engine_cores({}) == want
    assert engine_cores({ENV: "all"}) is None
    assert engine_cores({ENV: "0"}) == {0}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no sched_setaffinity here")
def test_every_thread_of_an_engine_child_is_pinned_and_other_children_are_not() -> None:
    core = min(os.sched_getaffinity(0))
    code = "import threading, time; threading.Thread(target=time.sleep, args=(30,)).start(); time.sleep(30)"
    engine = subprocess.Popen(["VLLM::EngineCore", "-c", code], executable=sys.executable)
    other = subprocess.Popen(["python", "-c", code], executable=sys.executable)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(os.listdir(f"/proc/{engine.pid}/task")) < 2:
            time.sleep(0.05)  # both threads up
        assert pin_engine(os.getpid(), frozenset({core})) >= 2
        for tid in os.listdir(f"/proc/{engine.pid}/task"):
            assert os.sched_getaffinity(int(tid)) == {core}
        assert os.sched_getaffinity(other.pid) == os.sched_getaffinity(0)
    finally:
        for p in (engine, other):
            p.kill()
            p.wait()
