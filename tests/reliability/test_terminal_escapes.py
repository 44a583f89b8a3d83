"""Label values that try to write into the terminal, through the real ``census`` and ``fleet`` CLIs.

A hostile value carries a clear-screen (``ESC [2J``), an OSC 8 hyperlink ended by BEL, a
U+202E right-to-left override, and rich markup (``[red]``, ``[link=...]``). It goes into the
``instance``, ``job`` and ``model_name`` labels of a recording (``census FILE``, the terminal
report, short and ``--full``) and into the ``instance`` label of one endpoint of a fleet served
by a real Prometheus backfilled with promtool (``fleet --prometheus URL``, the fleet table).
What must hold: no ESC, BEL or U+202E byte reaches stdout or stderr, the escaped forms
(``\\x1b``, ``\\x07``, ``\\u202e``) are visible, and the markup prints literally. Also with
``FORCE_COLOR`` set, where rich writes its own colour codes: none of the value's sequences
are among them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.report.safe_console import escape_controls

from .recordings import sharing_recording, write_recording

SRC = Path(__file__).resolve().parents[2] / "src"
EVIL = "\x1b[2J\x1b]8;;http://evil\x07x\u202e[red]R[/red][link=http://evil]L[/link]"
RAW = ("\x1b[2J", "\x1b]8;;", "\x07", "\u202e", "\u2066", "\x9b")
TIMEOUT_SECONDS = 120


def _run(*args: str, color: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"NO_COLOR", "FORCE_COLOR"}}
    env.update({"PYTHONPATH": str(SRC), "COLUMNS": "200"})
    if color:
        env["FORCE_COLOR"] = "1"
    return subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                          encoding="utf-8", env=env, timeout=TIMEOUT_SECONDS, check=False)


def _assert_clean(said: str, *, color: bool = False) -> None:
    for raw in RAW if not color else RAW[:2] + RAW[2:]:
        assert raw not in said, (raw, said[:2000])
    if not color:
        assert "\x1b" not in said, said[:2000]


def test_escape_controls_shows_every_control_and_bidi_character_and_keeps_layout() -> None:
    text = "a\tb\nc\x00\x1b\x7f\x85\x9b\u200e\u200f\u202a\u202e\u2066\u2069\u061c\rz é 漢"
    out = escape_controls(text)
    assert out == ("a\tb\nc\\x00\\x1b\\x7f\\x85\\x9b\\u200e\\u200f\\u202a\\u202e\\u2066\\u2069\\u061c\\x0dz é 漢")
    assert escape_controls(out) == out  # idempotent: nested rendering escapes nothing twice


@pytest.mark.parametrize("full", [False, True], ids=["short", "full"])
@pytest.mark.parametrize("color", [False, True], ids=["plain", "force-color"])
def test_census_terminal_report_escapes_label_values(tmp_path: Path, full: bool, color: bool) -> None:
    recording = write_recording(tmp_path / "evil.om", sharing_recording(
        instance="i" + EVIL, model_name="m" + EVIL, job="j" + EVIL))
    done = _run("census", str(recording), *(["--full"] if full else []), color=color)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    _assert_clean(said, color=color)
    if color:
        assert "\x1b[" in done.stdout  # rich's own styling is still there
    assert "\\x1b[2J\\x1b]8;;http://evil\\x07x\\u202e" in done.stdout
    assert "[red]R[/red]" in done.stdout  # markup printed, not applied


def test_census_error_message_escapes_the_file_name(tmp_path: Path) -> None:
    done = _run("census", str(tmp_path / "no\x1b[2Jsuch\u202e.om"))
    assert done.returncode in {2, 3}, done.stderr
    _assert_clean(done.stdout + done.stderr)
    assert "\\x1b[2J" in done.stderr and "\\u202e" in done.stderr


@pytest.fixture(scope="module")
def evil_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, float, float]:
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        pytest.skip("promtool and prometheus are not installed")
    from pdcensus.sim.fleet_recording import simulate_fleet
    from pdcensus.sim.run import EPOCH_SECONDS
    from pdcensus.sources.openmetrics_writer import write_openmetrics
    from pdcensus.sources.prometheus_local import LocalPrometheus

    duration = 1800.0
    recording, _ = simulate_fleet(["step-time-sharing", "healthy"], duration_seconds=duration, seed=3,
                                  name=lambda i: f"engine-{i}" + (EVIL if i == 0 else ""))
    path = tmp_path_factory.mktemp("fleet") / "fleet.om"
    write_openmetrics(recording, path)
    server = LocalPrometheus.backfilled(path, tmp_path_factory.mktemp("prometheus"))
    url = server.start().url
    yield url, EPOCH_SECONDS, EPOCH_SECONDS + duration  # type: ignore[misc]
    server.stop()


@pytest.mark.integration
@pytest.mark.parametrize("color", [False, True], ids=["plain", "force-color"])
def test_fleet_table_escapes_label_values_from_the_store(evil_fleet: tuple[str, float, float], color: bool) -> None:
    url, start, end = evil_fleet
    done = _run("fleet", "--prometheus", url, "--start", f"{start:.0f}", "--end", f"{end:.0f}", color=color)
    assert done.returncode in {0, 3}, done.stderr
    said = done.stdout + done.stderr
    _assert_clean(said, color=color)
    flat = "".join(done.stdout.split())  # the table may wrap the long value across lines and cells
    assert "\\x1b[2J" in flat or "\\x1b" in flat, done.stdout
    assert "\\u202e" in flat, done.stdout
    assert "[red]R" in flat, done.stdout
