"""Without an optional extra, the command that needs it ends with one error line naming the extra.

Each case runs the real CLI in a child interpreter whose import system refuses the extra's
modules (as on an install of the core package alone).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BLOCKED_RUN = """
import importlib.abc, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Refuse())
import importlib.util
_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] in {blocked!r} else _find_spec(name, *a)
from pdcensus.cli import main
sys.argv = ["pdcensus"] + {args!r}
main()
"""


def run_without(blocked: set[str], *args: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKED_RUN.format(blocked=sorted(blocked), args=list(args))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(("blocked", "args", "extra", "module"), [
    pytest.param({"uvicorn"}, ["serve", "idle", "--port", "0"], "serve", "uvicorn", id="serve-without-uvicorn"),
    pytest.param({"zmq"}, ["serve", "idle", "--port", "0"], "serve", "zmq", id="serve-without-pyzmq"),
    pytest.param({"zmq"}, ["fpm", "record", "5557", "--out", "/dev/null", "--duration", "1s"], "fpm", "zmq",
                 id="fpm-record-without-pyzmq"),
])
def test_a_command_without_its_extra_says_which_extra_in_one_line(blocked: set[str], args: list[str],
                                                                  extra: str, module: str) -> None:
    done = run_without(blocked, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"pdcensus[{extra}]" in lines[0] and repr(module) in lines[0]


def test_the_simulator_and_the_census_run_without_either_extra(tmp_path: Path) -> None:
    server_stack = {"starlette", "uvicorn", "httptools", "uvloop", "zmq"}
    simulated = run_without(server_stack, "sim", "step-time-sharing", "--out", str(tmp_path), "--duration", "30m")
    assert simulated.returncode == 0, simulated.stderr
    done = run_without(server_stack, "census", str(tmp_path / "metrics.om"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"]["mechanism"] == "step-time-sharing"
