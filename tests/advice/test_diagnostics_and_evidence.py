"""/diagnostics read for a box that is itself the limit, and an --evidence that cannot be read is an error.

The diagnostics are the simulator's own answer (pdcensus.sim.evidence.diagnostics) for a box with a
degraded link or a held-down clock, written where ``collect`` and ``sim`` put them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import pdcensus.api as api
from pdcensus.advice.capacity import read_diagnostics
from pdcensus.errors import DataError
from pdcensus.sim.config import Build
from pdcensus.sim.hardware import Card
from pdcensus.sim.output import write_sim_dir
from pdcensus.sim.run import SimResult, simulate


@pytest.fixture(scope="module")
def result() -> SimResult:
    return simulate("step-time-sharing", duration_seconds=1800, seed=3)


def _with_card(result: SimResult, card: Card, out: Path) -> Path:
    from pdcensus.sim.evidence import diagnostics

    write_sim_dir(result, out)
    engine = result.engine
    engine.hardware = replace(engine.hardware, cards=(card,))
    (out / "diagnostics.json").write_text(json.dumps(diagnostics(engine, Build.V1_8_3, 1.8e9)))
    return out


def test_a_degraded_link_makes_the_box_the_limit_and_its_fix_comes_first(result: SimResult, tmp_path: Path) -> None:
    out = _with_card(result, Card(0, link_width=4), tmp_path / "x4")
    raw = json.loads((out / "diagnostics.json").read_text())
    box = read_diagnostics(raw)
    assert box is not None and box.box_is_the_limit is raw["box_is_the_limit"] is True
    report = api.census(out)
    first = report.advice[0]
    assert first.mechanism == "box" and "x4, expected x16" in first.summary
    assert any("reseat the card" in n for n in first.notes)  # the finding's own fix
    assert report.side_evidence.diagnostics is not None
    assert report.side_evidence.diagnostics["box_is_the_limit"] is True
    assert report.to_dict()["side_evidence"]["diagnostics"]["box_is_the_limit"] is True  # type: ignore[index]
    assert len(report.advice) > 1  # the knob advice stays, after the box


def test_a_held_down_clock_is_a_limit_the_findings_did_not_name(result: SimResult, tmp_path: Path) -> None:
    out = _with_card(result, Card(0, sm_clock_mhz=1200), tmp_path / "slow")
    box = read_diagnostics(json.loads((out / "diagnostics.json").read_text()))
    assert box is not None and box.box_is_the_limit
    assert "SM clock 1200 MHz of 1980 MHz (61%)" in box.limits[0]


def test_a_healthy_box_adds_nothing_but_is_cited(result: SimResult, tmp_path: Path) -> None:
    out = write_sim_dir(result, tmp_path / "ok")
    report = api.census(out)
    assert all(a.mechanism != "box" for a in report.advice)
    assert report.side_evidence.diagnostics is not None
    assert report.side_evidence.diagnostics["box_is_the_limit"] is False


def test_diagnostics_that_are_no_object_are_not_read() -> None:
    assert read_diagnostics(["not", "an", "object"]) is None


def test_an_evidence_path_that_cannot_be_read_is_an_error_in_the_library(result: SimResult, tmp_path: Path) -> None:
    out = write_sim_dir(result, tmp_path / "run")
    with pytest.raises(DataError, match="--evidence: no such bundle"):
        api.census(out, evidence=tmp_path / "evidnece.tar.gz")


@pytest.mark.parametrize("content", [None, b"not a tar file"], ids=["missing", "not-a-bundle"])
def test_an_evidence_path_that_cannot_be_read_exits_3_with_one_line(result: SimResult, tmp_path: Path,
                                                                    content: bytes | None) -> None:
    out = write_sim_dir(result, tmp_path / "run")
    bundle = tmp_path / "evidence.tar.gz"
    if content is not None:
        bundle.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(out), "--evidence", str(bundle)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: --evidence: ") and proc.stderr.count("\n") == 1
    assert proc.stdout == ""
