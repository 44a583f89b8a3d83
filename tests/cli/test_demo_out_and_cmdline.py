"""`demo` writes only into a directory it wrote itself, and `census --cmdline/--pid` hand the deployed argv to the advice.

The demo leaves a marker in its output directory; a directory holding anything else is refused
(exit 2, one line, nothing touched) unless ``--force``. ``census --cmdline FILE`` reads the argv
the advice asks for ("the deployed value is not known (give the argv ...)") from a saved
command line, so a recording without a sim dir beside it gets advice from the deployed flags.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pdcensus.commands.demo import DEMO_MARKER, check_demo_out
from pdcensus.errors import UsageError


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "COLUMNS": "200"})


def test_demo_refuses_a_directory_it_did_not_write_and_leaves_it_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "metrics.om").write_text("mine\n")
    done = run_cli("demo", "--out", str(out), "--duration", "15m")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "--force" in lines[0]
    assert (out / "metrics.om").read_text() == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == ["metrics.om"]


def test_demo_marks_its_directory_and_may_write_it_again_or_a_foreign_one_with_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run_cli("demo", "--out", str(out), "--duration", "15m")
    assert first.returncode == 0, first.stderr
    assert (out / DEMO_MARKER).is_file() and (out / "metrics.om").is_file()
    again = run_cli("demo", "--out", str(out), "--duration", "15m", "--seed", "1")
    assert again.returncode == 0, again.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("kept\n")
    forced = run_cli("demo", "--out", str(foreign), "--duration", "15m", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (foreign / "notes.txt").read_text() == "kept\n" and (foreign / "report.html").is_file()


@pytest.mark.parametrize("content", [pytest.param(None, id="missing"), pytest.param("", id="empty"),
                                     pytest.param(DEMO_MARKER, id="marked")])
def test_a_missing_empty_or_marked_directory_may_be_written(tmp_path: Path, content: str | None) -> None:
    out = tmp_path / "out"
    if content is not None:
        out.mkdir()
        if content:
            (out / content).write_text("written by pdcensus demo\n")
            (out / "metrics.om").write_text("the demo's own\n")
    check_demo_out(out, force=False)


def test_a_file_where_the_directory_should_be_is_refused_even_with_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("a file\n")
    with pytest.raises(UsageError, match="not a directory"):
        check_demo_out(out, force=True)


@pytest.fixture(scope="module")
def bare_recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording file alone (no cmdline, boot.log or stats.json beside it), as a user's own would be."""
    sim = tmp_path_factory.mktemp("sim") / "sts"
    done = run_cli("sim", "step-time-sharing", "--out", str(sim), "--duration", "40m", "--seed", "2")
    assert done.returncode == 0, done.stderr
    alone = tmp_path_factory.mktemp("alone") / "metrics.om"
    shutil.copy(sim / "metrics.om", alone)
    return alone


def _census(*args: str) -> dict[str, Any]:
    done = run_cli("census", *args, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_census_cmdline_feeds_the_deployed_argv_to_the_advice(bare_recording: Path, tmp_path: Path) -> None:
    without = _census(str(bare_recording))
    assert "argv" not in without["side_evidence"]
    cmdline = tmp_path / "cmdline"
    cmdline.write_bytes(b"radiance\0serve\0--prefill-interleave\0" + b"1\0--max-num-seqs\0" + b"64\0")
    given = _census(str(bare_recording), "--cmdline", str(cmdline))
    assert given["side_evidence"]["argv"] == "radiance serve --prefill-interleave 1 --max-num-seqs 64"
    assert str(cmdline) in given["side_evidence"]["origin"]
    (arm,) = [a for a in given["advice"] if a["knob"] == "--prefill-interleave"]
    assert arm["rollback_env_line"] == "RADIANCE_PREFILL_INTERLEAVE=1"  # the rollback is the deployed value


def test_census_pid_reads_that_process_argv(bare_recording: Path) -> None:
    report = _census(str(bare_recording), "--pid", str(os.getpid()))
    mine = [a.decode() for a in Path(f"/proc/{os.getpid()}/cmdline").read_bytes().split(b"\0") if a]
    assert report["side_evidence"]["argv"] == " ".join(mine)
    assert report["side_evidence"]["origin"] == f"/proc/{os.getpid()}/cmdline"


def test_census_refuses_both_cmdline_and_pid(bare_recording: Path) -> None:
    done = run_cli("census", str(bare_recording), "--cmdline", str(bare_recording), "--pid", "1")
    assert done.returncode == 2 and "not both" in done.stderr
