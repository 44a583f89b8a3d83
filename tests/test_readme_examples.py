"""The README's examples are what their commands print today (docs/examples.py --check runs them all).

They also leave a checkout clean (everything they write is under the ignored ``out/``), and the
library example runs as printed on the base dependencies alone.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _examples_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "docs" / "examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def test_a_file_an_example_leaves_outside_out_is_named_as_one_a_checkout_would_show(tmp_path: Path) -> None:
    examples = _examples_module()
    for name in ("out/sts", "deploy", "report.html", "dashboard.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if name in ("out/sts", "deploy"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text("x")
    assert examples.leftovers(tmp_path) == ["dashboard.json", "deploy/"]


def test_no_readme_example_writes_outside_out() -> None:
    """What the examples write (``> FILE``, ``mkdir``, ``--out``) is under out/, so a reader's checkout stays clean."""
    examples = _examples_module()
    text = (ROOT / "README.md").read_text() + (ROOT / "docs" / "commands.md").read_text()
    written = []
    for block in examples.BLOCK.finditer(text):
        for command in examples.commands_of(block["body"]):
            written += re.findall(r"(?:>|mkdir -p|--out)\s+(\S+)", command)
    assert written and [w for w in written if not w.startswith("out/")] == []


def test_the_readmes_library_example_runs_on_the_base_dependencies(tmp_path: Path) -> None:
    from pdcensus.sim import simulate, write_sim_dir

    text = (ROOT / "README.md").read_text()
    (code,) = re.findall(r"As a library.*?```python\n(.*?)```", text, re.S)
    write_sim_dir(simulate("step-time-sharing", duration_seconds=3600, seed=0), tmp_path / "out" / "sts")
    # pandas and pyarrow are not pdcensus dependencies: the example must not need them
    blocked = "import sys; sys.modules.update({'pandas': None, 'pyarrow': None})\n"
    done = subprocess.run([sys.executable, "-c", blocked + code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "COLUMNS": "120"})
    assert done.returncode == 0, done.stderr
    first, *table = done.stdout.splitlines()
    mechanism, confidence = first.split()
    assert mechanism == "step-time-sharing" and 0 < float(confidence) <= 1
    assert any("per_stream_tokens_per_second" in line for line in table)
