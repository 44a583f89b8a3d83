"""Load: the census of a long recording stays within its memory budget (bench/census_memory.py, scaled down).

The budget is 400 MiB plus 90 MiB per recorded day of 15 s scrapes, about 1 GiB for the
week that BENCHMARKS.md measures ("Census memory (7-day recording)"). Here one simulated
day runs through the same script, so the check costs seconds rather than minutes: the
script measures peak RSS in fresh interpreters (the library path and the CLI) and exits 1
when either is over the budget for that window.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "census_memory.py"


@pytest.mark.slow
def test_a_simulated_day_is_censused_within_the_scaled_memory_budget(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--days", "1", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    budget = re.search(r"= ([\d,]+) MiB: within \(worst peak ([\d,]+) MiB\)", done.stdout)
    assert budget, done.stdout
    budget_mib, peak_mib = (float(x.replace(",", "")) for x in budget.groups())
    assert budget_mib == pytest.approx(490.0)
    assert 60.0 < peak_mib <= budget_mib
    assert re.search(r"5,76\d scrapes", done.stdout), done.stdout
