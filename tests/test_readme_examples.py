"""The README's examples are what their commands print today (docs/examples.py --check runs them all)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_readme_example_is_what_its_commands_print_today() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "examples.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr


def test_every_command_in_the_readme_table_has_an_example_the_readme_runs_or_shows() -> None:
    text = (ROOT / "README.md").read_text()
    table = [line for line in text.splitlines() if line.startswith("| `pdcensus ")]
    named = {re.match(r"\| `pdcensus ([\w-]+)", line).group(1) for line in table}  # type: ignore[union-attr]
    assert len(named) >= 10
    shown = set(re.findall(r"^\$ pdcensus ([\w-]+)", text, re.M))
    assert named - shown == set()
