"""Write a simulation's results as a directory: the recording, the truth and the evidence files.

``DIR/metrics.om`` (OpenMetrics with timestamps and ``# EOF``, backfillable by promtool),
``DIR/truth.json``, ``DIR/stats.json`` and ``DIR/diagnostics.json`` (what ``/stats`` and
``/diagnostics`` answer at the end), ``DIR/boot.log`` (the boot ledger of every process start),
``DIR/cmdline`` (NUL-separated argv, as ``/proc/PID/cmdline``) and ``DIR/config.cpp`` (the flag
source). JSON is written with sorted keys so that the same seed gives the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pdcensus.errors import UsageError
from pdcensus.sim.run import SimResult
from pdcensus.sources.openmetrics_writer import write_openmetrics

FILES = ("metrics.om", "truth.json", "stats.json", "diagnostics.json", "boot.log", "cmdline", "config.cpp")


def _json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")


def cmdline_bytes(argv: list[str]) -> bytes:
    """argv as /proc/PID/cmdline holds it: each argument NUL-terminated."""
    return b"".join(arg.encode("utf-8") + b"\0" for arg in argv)


def write_sim_dir(result: SimResult, out_dir: str | Path) -> Path:
    """Write every file of a simulation into ``out_dir`` (created if missing); returns the directory."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    write_openmetrics(result.recording, out / "metrics.om")
    _json(out / "truth.json", result.truth)
    _json(out / "stats.json", result.stats)
    _json(out / "diagnostics.json", result.diagnostics)
    (out / "boot.log").write_text(result.boot_log, encoding="utf-8")
    (out / "cmdline").write_bytes(cmdline_bytes(result.cmdline))
    (out / "config.cpp").write_text(result.config_source, encoding="utf-8")
    return out
