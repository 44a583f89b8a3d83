"""Bad recordings through the real CLI: exit 3 with one ``error:`` line naming the file, or an honest census.

Each case damages a good recording in one way and runs ``python -m pdcensus census FILE
--json`` (and, for the reader's failures, ``... query FILE up --time T``) as a user would,
in a subprocess with a one-minute timeout. What must hold, whatever the damage: no
traceback, never longer than a minute, and either exit 3 with exactly one line
``error: ...`` on stderr that names the file (and ``FILE:LINE:`` where a line is to blame)
and nothing on stdout, or exit 0 with a census whose verdict is one of the six
mechanisms (``inconclusive`` where the data cannot support a verdict).

The subprocesses of the whole table start together in a small pool (each one spends
about a second importing), so the table costs seconds, not half a minute. Label values
carrying HTML are tried through ``census --html`` in test_security.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from .recordings import T0, replace_values, sample_lines, sharing_recording, write_recording

MECHANISMS = {"step-time-sharing", "eviction", "preemption-stall", "none", "mixed", "inconclusive"}
# a hang guard, not a speed claim: a run still going after this long is stopped and fails as hung
HANG_SECONDS = 240.0
HUNG = -1  # the return code an Outcome of a stopped run carries
MEGABYTE_LABEL = "x" * (2 << 20)


@dataclass(frozen=True)
class Case:
    """One damaged input: how to make it, which command reads it, and what must come back."""

    id: str
    make: Callable[[Path, str], Path]  # (scratch dir, good recording text) -> path to give the CLI
    command: str = "census"  # census | query
    fails: bool = True  # True: exit 3 with one line; False: exit 0 with a census
    match: str = ""  # regex the error line must match (after the file name)
    names_line: bool = False  # the error names FILE:LINE:
    verdicts: frozenset[str] = frozenset(MECHANISMS)
    terminal: bool = False  # census: render the terminal report instead of --json
    shape_starts: str = ""  # census: some shape segment must start for this reason


def _write(tmp: Path, name: str, data: str | bytes) -> Path:
    path = tmp / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def _truncated(tmp: Path, good: str) -> Path:
    cut = len(good) // 2
    while good[cut - 1] == "\n" or good[cut] == "\n":
        cut += 1
    return _write(tmp, "truncated.om", good[:cut])


def _swapped(tmp: Path, good: str) -> Path:
    lines = good.splitlines()
    i = next(i for i in range(len(lines) - 1) if not lines[i].startswith("#")
             and lines[i].rsplit(" ", 2)[0] == lines[i + 1].rsplit(" ", 2)[0])
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    return _write(tmp, "out-of-order.om", "\n".join(lines) + "\n")


def _duplicated(tmp: Path, good: str) -> Path:
    lines = good.splitlines()
    i = next(i for i, line in enumerate(lines) if not line.startswith("#")) + 3
    return _write(tmp, "duplicate.om", "\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]) + "\n")


def _odd_counters(tmp: Path, good: str) -> Path:
    text = replace_values(good, "radiance:engine_steps_total", 17, "NaN")
    text = replace_values(text, "radiance:engine_steps_decode_total", 29, "+Inf")
    text = replace_values(text, "vllm:num_preemptions_total", 31, "-5")
    return _write(tmp, "odd-counters.om", text)


def _megabyte_label(tmp: Path, good: str) -> Path:
    extra = (f'# TYPE build_note gauge\nbuild_note{{instance="engine:7770",job="radiance",note="{MEGABYTE_LABEL}"}}'
             f" 1 {T0:.3f}\n# EOF\n")
    return _write(tmp, "megabyte-label.om", good.removesuffix("# EOF\n") + extra)


def _megabyte_label_bad_value(tmp: Path, good: str) -> Path:
    line = f'radiance:decode_tokens_per_second{{instance="engine:7770",note="{MEGABYTE_LABEL}"}} fast {T0:.3f}\n'
    return _write(tmp, "megabyte-bad-line.om", line + "# EOF\n")


def _one_scrape(tmp: Path, good: str) -> Path:
    return write_recording(tmp / "one-scrape.om", sharing_recording(1))


def _without_timestamps(tmp: Path, good: str) -> Path:
    first = [line for line in sample_lines(good) if line.endswith(f" {T0:.3f}")]
    return _write(tmp, "scrape.prom", "".join(line.rsplit(" ", 1)[0] + "\n" for line in first))


def _markup_labels(tmp: Path, good: str) -> Path:
    return write_recording(tmp / "markup-labels.om", sharing_recording(
        instance="[/bold] [link=file:///etc/passwd]x[/link]", model_name="[red]m[/red] :warning:"))


def _missing_dir(tmp: Path, good: str) -> Path:
    directory = tmp / "no-recording-here"
    directory.mkdir(exist_ok=True)
    (directory / "README.txt").write_text("notes, not metrics\n")
    return directory


CASES = [
    Case("empty-file", lambda t, g: _write(t, "empty.om", b""), match="empty", names_line=True),
    Case("truncated-mid-line", _truncated, match="truncated", names_line=True),
    Case("no-eof", lambda t, g: _write(t, "no-eof.om", g.removesuffix("# EOF\n")), match="EOF", names_line=True),
    Case("binary-garbage", lambda t, g: _write(t, "garbage.om", np.random.default_rng(5).bytes(4096)),
         match="not a text metrics file"),
    Case("lines-out-of-order", _swapped, match="backwards", names_line=True),
    Case("duplicate-timestamp", _duplicated, match="duplicate", names_line=True),
    Case("nan-inf-negative-counters", _odd_counters, fails=False, shape_starts="counter-reset"),
    Case("megabyte-label-value", _megabyte_label, fails=False),
    Case("megabyte-label-on-a-bad-line", _megabyte_label_bad_value, names_line=True),
    Case("one-scrape-only", _one_scrape, fails=False, verdicts=frozenset({"inconclusive"})),
    Case("gauges-without-timestamps", _without_timestamps, fails=False, verdicts=frozenset({"inconclusive"})),
    Case("json-given-as-metrics", lambda t, g: _write(t, "answer.json", '{"status": "success", "data": {}}\n'),
         match="JSON", names_line=True),
    Case("directory-without-recording", _missing_dir, match="no recording"),
    Case("missing-file", lambda t, g: t / "nowhere.om", match="no such file"),
    Case("rich-markup-label-values", _markup_labels, fails=False, terminal=True),
    Case("query-empty-file", lambda t, g: _write(t, "q-empty.om", b""), "query", match="empty", names_line=True),
    Case("query-binary-garbage", lambda t, g: _write(t, "q-garbage.om", np.random.default_rng(6).bytes(4096)),
         "query", match="not a text metrics file"),
    Case("query-good-recording", lambda t, g: _write(t, "q-good.om", g), "query", fails=False),
]


@dataclass(frozen=True)
class Outcome:
    path: Path
    returncode: int
    stdout: str
    stderr: str


def _run(case: Case, path: Path) -> Outcome:
    if case.command == "census":
        args = ["census", str(path)] + ([] if case.terminal else ["--json"])
    else:
        args = ["query", str(path), "up", "--time", f"{T0 + 600:.0f}"]
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    try:
        done = subprocess.run([sys.executable, "-m", "pdcensus", *args], capture_output=True, text=True,
                              timeout=HANG_SECONDS, env=env)
    except subprocess.TimeoutExpired:
        return Outcome(path, HUNG, "", f"still running after {HANG_SECONDS:g}s: hung")
    return Outcome(path, done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    tmp = tmp_path_factory.mktemp("bad-recordings")
    good = write_recording(tmp / "good.om").read_text()
    paths = {case.id: case.make(tmp, good) for case in CASES}
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {case.id: pool.submit(_run, case, paths[case.id]) for case in CASES}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_a_bad_recording_is_one_error_line_or_an_honest_census(case: Case, outcomes: dict[str, Outcome]) -> None:
    out = outcomes[case.id]
    assert out.returncode != HUNG, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    if case.fails:
        assert out.returncode == 3, (out.returncode, out.stderr[:500])
        assert out.stdout == ""
        lines = out.stderr.splitlines()
        assert len(lines) == 1, out.stderr[:2000]
        line = lines[0]
        assert line.startswith("error: ")
        assert str(out.path) in line
        assert len(line) < 1000, f"the error line quotes {len(line)} characters"
        if case.names_line:
            assert re.search(re.escape(str(out.path)) + r":\d+: ", line), line
        assert re.search(case.match, line), line
        return
    assert out.returncode == 0, out.stderr[:2000]
    if case.terminal:  # label values are shown as written, never read as console markup
        assert "[/bold] [link=file:///etc/passwd]x[/link]" in out.stdout, out.stdout[:2000]
        return
    answer = json.loads(out.stdout)
    if case.command == "query":
        assert answer["status"] == "success" and answer["data"]["result"], answer
        return
    reports = answer.get("endpoints", [answer])
    assert reports
    for report in reports:
        assert report["verdict"]["mechanism"] in case.verdicts, report["verdict"]
        if case.shape_starts:  # a counter that went down is a restart: the window is split there
            assert case.shape_starts in {s["starts_because"] for s in report["shape"]["segments"]}, report["shape"]
