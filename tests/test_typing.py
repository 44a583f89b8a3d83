"""The source type-checks under ``mypy --strict`` (the ``[tool.mypy]`` block of pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_strict_finds_no_error_in_the_source() -> None:
    # the configuration (strict, files = src/pdcensus) is read from pyproject.toml in ROOT
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty"],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )
    assert done.returncode == 0, f"mypy --strict found errors:\n{done.stdout}{done.stderr}"
    assert done.stdout == ""
