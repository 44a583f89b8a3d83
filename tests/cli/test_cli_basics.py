"""The CLI shell: durations, times, --set parsing, and exit codes for usage errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pdcensus.commands.base import parse_duration, parse_sets, parse_time
from pdcensus.errors import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("2h", 7200.0), ("1h30m", 5400.0), ("90", 90.0), ("1d", 86400.0), ("500ms", 0.5),
     ("1.5", 1.5), ("0", 0.0), ("1w", 604800.0), ("1y", 365 * 86400.0), ("10s53ms", 10.053)],
)
def test_parse_duration_reads_prometheus_style_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "h", "15x", "2h3", "-", "1h30", "2x", "30m1h", "1.5h", "1h1h", "inf", "nan"])
def test_parse_duration_rejects_garbage_with_an_example(text: str) -> None:
    with pytest.raises(UsageError, match="use e.g."):
        parse_duration(text)


def test_parse_time_accepts_unix_and_rfc3339() -> None:
    assert parse_time("1700000000") == 1700000000.0
    assert parse_time("2023-11-14T22:13:20Z") == 1700000000.0
    with pytest.raises(UsageError, match="RFC 3339"):
        parse_time("yesterday")


def test_parse_sets_normalises_flags() -> None:
    assert parse_sets(["prefill-interleave=2", "--max-num-seqs=64"]) == {
        "--prefill-interleave": "2",
        "--max-num-seqs": "64",
    }
    with pytest.raises(UsageError, match="FLAG=VALUE"):
        parse_sets(["prefill-interleave"])


def test_unknown_command_exits_2_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pdcensus", "no-such-command"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
