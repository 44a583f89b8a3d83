"""YAML alias bombs, self-referencing anchors and deep nesting through the real ``pdcensus lint``.

Each case writes a hostile ``compose.yaml`` (and a good serve script beside it, so lint must
go on with the other files) into a scratch directory and runs ``python -m pdcensus lint DIR``
in a subprocess, as a pre-commit hook would. What must hold: the run ends well inside a
30 s hang guard (before the limits, the 9-level bomb ran past 120 s), the exit code is a
documented one (1: an error finding), one ``yaml-limit`` line names the file and the limit,
no traceback, and the good file is still read (its own finding is printed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pdcensus.lint.files import lint_text
from pdcensus.lint.model import FileKind
from pdcensus.lint.source.pinned import load_schema
from pdcensus.lint.yaml_limits import MAX_ALIASES, MAX_EXPANDED_NODES

SRC = Path(__file__).resolve().parents[2] / "src"
SCHEMA_SOURCE = Path(__file__).parent.parent / "fixtures" / "config_sources" / "xmacro_switch.cpp"
HANG_GUARD_SECONDS = 30.0


def alias_bomb(depth: int = 9, width: int = 9) -> str:
    """The billion-laughs shape: each level a list of ``width`` aliases of the level below."""
    lines = ["x-bomb:", f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, depth):
        lines.append(f"  l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    lines += ["services:", "  engine:", "    image: radiance", f"    command: *l{depth - 1}", ""]
    return "\n".join(lines)


def many_aliases(count: int) -> str:
    """Many cheap aliases of one scalar: no expansion to speak of, but over the alias limit."""
    return "base: &b v\nitems:\n" + "".join("  - *b\n" for _ in range(count))


def _lint(tmp: Path, name: str, text: str) -> subprocess.CompletedProcess[str]:
    (tmp / name).write_text(text)
    (tmp / "serve.sh").write_text("exec vllm serve m --no-such-flag-anywhere 1\n")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    try:
        return subprocess.run([sys.executable, "-m", "pdcensus", "lint", str(tmp)], capture_output=True,
                              text=True, env=env, timeout=HANG_GUARD_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pdcensus lint ran past the {HANG_GUARD_SECONDS:g} s hang guard on {name}")


def _assert_refused(proc: subprocess.CompletedProcess[str], path: Path, limit: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    refused = [line for line in proc.stdout.splitlines() if "yaml-limit" in line]
    assert len(refused) == 1, proc.stdout
    assert refused[0].startswith(f"{path}:1:1: error yaml-limit"), refused[0]
    assert limit in refused[0], refused[0]
    assert any(line.startswith(str(path.parent / "serve.sh")) for line in proc.stdout.splitlines()), \
        "lint stopped at the bomb instead of going on with the other files:\n" + proc.stdout


def test_alias_bomb_is_one_error_naming_the_expansion_limit(tmp_path: Path) -> None:
    text = alias_bomb()
    assert len(text) < 2048  # the 1.6 KB file of the report
    proc = _lint(tmp_path, "compose.yaml", text)
    _assert_refused(proc, tmp_path / "compose.yaml", f"MAX_EXPANDED_NODES={MAX_EXPANDED_NODES}")


def test_alias_count_over_the_limit_is_refused(tmp_path: Path) -> None:
    proc = _lint(tmp_path, "values.yaml", many_aliases(MAX_ALIASES + 5))
    _assert_refused(proc, tmp_path / "values.yaml", f"MAX_ALIASES={MAX_ALIASES}")


def test_self_referencing_anchor_is_refused_not_walked_forever(tmp_path: Path) -> None:
    proc = _lint(tmp_path, "loop.yaml", "a: &a [x, *a]\nb: *a\n")
    _assert_refused(proc, tmp_path / "loop.yaml", "refers to itself")


def test_deep_nesting_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    depth = 50_000
    proc = _lint(tmp_path, "deep.yaml", "a: " + "[" * depth + "]" * depth + "\n")
    assert proc.returncode in {0, 1}, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "internal error" not in proc.stderr


@pytest.mark.parametrize("depth", [2, 3, 4])
def test_small_honest_anchors_are_still_read(depth: int) -> None:
    """Anchors under the limits are expanded and checked as before: a flag in the aliased list is found."""
    text = ("x-args: &args [serve, --checkpoint-policy, geometric]\n"
            + "".join(f"x-l{i}: &l{i} [*{'args' if i == 0 else f'l{i - 1}'}]\n" for i in range(depth))
            + "services:\n  engine:\n    image: radiance\n    command: *args\n")
    findings = lint_text(text, "compose.yaml", FileKind.YAML, load_schema(SCHEMA_SOURCE))
    assert not [f for f in findings if f.rule == "yaml-limit"]
    assert any("geometric" in f.text() for f in findings), [f.text() for f in findings]
