"""Regenerate the examples of README.md and docs/commands.md by running them, or check that they are current.

Every example sits between ``<!-- example: NAME -->`` and ``<!-- /example -->`` and is a
fenced block of ``$ command`` lines, each followed by what it printed. This script runs the
commands of every example of a file in order, in one scratch directory per file (so an
example can use what an earlier one made: ``out/sts`` from ``pdcensus sim``), with
``pdcensus`` from the repository's virtual environment, 100 columns and no colour, and puts
the outputs back (trailing blanks cut). ``head=N`` in the opening marker keeps the first N
lines of each command's output and marks the cut with ``...``. The commands are the files'
own text, run with bash; nothing else runs. A reader runs the same commands in the checkout, so
every file they write must be one the checkout ignores (under ``out/``): a top-level path the
repository's ``.gitignore`` does not ignore, left in the scratch directory, fails the run.

    .venv/bin/python docs/examples.py            # rewrite both files with fresh outputs
    .venv/bin/python docs/examples.py --check    # exit 1 with a diff when an example is stale

``tests/test_readme_examples.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = (ROOT / "README.md", ROOT / "docs" / "commands.md")
BLOCK = re.compile(r"(<!-- example: (?P<name>[\w-]+)(?: head=(?P<head>\d+))? -->\n```(?P<lang>\w*)\n)"
                   r"(?P<body>.*?)(?P<close>```\n<!-- /example -->)", re.S)
COLUMNS = "100"
TIMEOUT_SECONDS = 600


def commands_of(body: str) -> list[str]:
    """The ``$ `` commands of an example body (a trailing backslash continues a command)."""
    out: list[str] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ "):
            command = lines[i][2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            out.append(command)
        i += 1
    return out


def run(command: str, cwd: Path) -> str:
    """What the command prints (stdout and stderr in the order written), as in a 100-column terminal."""
    env = {**os.environ, "COLUMNS": COLUMNS, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1", "TERM": "dumb",
           "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT_SECONDS, check=False)
    return done.stdout


def render(command: str, output: str, head: int | None) -> str:
    lines = [line.rstrip() for line in output.rstrip("\n").splitlines()] if output.strip() else []
    if head is not None and len(lines) > head:
        lines = lines[:head] + ["..."]
    shown = "\n".join(f"$ {command}".splitlines())
    return "\n".join([shown, *lines]) + "\n"


def leftovers(workdir: Path) -> list[str]:
    """Top-level paths the examples left in ``workdir`` that a checkout would show as untracked."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in workdir.iterdir())
    if not names:
        return []
    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", "--stdin"], input="\n".join(names),
                          stdout=subprocess.PIPE, text=True, check=False)
    ignored = set(done.stdout.splitlines())
    return [n for n in names if n not in ignored]


def regenerate(text: str, workdir: Path) -> str:
    def one(found: re.Match[str]) -> str:
        head = int(found["head"]) if found["head"] else None
        body = "".join(render(c, run(c, workdir), head) for c in commands_of(found["body"]))
        return found.group(1) + body + found["close"]

    return BLOCK.sub(one, text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 with a diff when an example is stale")
    args = parser.parse_args(argv)
    stale = []
    untidy: list[str] = []
    for path in FILES:
        text = path.read_text()
        if not BLOCK.search(text):
            print(f"no examples found in {path}", file=sys.stderr)
            return 1
        name = str(path.relative_to(ROOT))
        with tempfile.TemporaryDirectory(prefix="pdcensus-examples-") as scratch:
            fresh = regenerate(text, Path(scratch))
            untidy += [f"{name}: {left}" for left in leftovers(Path(scratch))]
        if not args.check:
            path.write_text(fresh)
        elif fresh != text:
            stale.append(name)
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), fresh.splitlines(True),
                                                       name, f"{name} (regenerated)"))
    if untidy:
        print(f"examples leave files a checkout would not ignore (write them under out/): {', '.join(untidy)}",
              file=sys.stderr)
    if stale:
        print(f"stale examples in {', '.join(stale)}: run .venv/bin/python docs/examples.py", file=sys.stderr)
    return 1 if stale or untidy else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
