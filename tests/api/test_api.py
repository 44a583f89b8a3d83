"""The library entry point: census -> advice, side channels cited, tables as DataFrames."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pdcensus import api
from pdcensus.census.model import Mechanism
from pdcensus.sim import simulate, write_sim_dir


@pytest.fixture(scope="module")
def sim_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = simulate("step-time-sharing", duration_seconds=2 * 3600, seed=1)
    return write_sim_dir(result, tmp_path_factory.mktemp("sim"))


def test_census_of_a_sim_dir_attaches_advice_from_its_side_channels(sim_dir: Path) -> None:
    report = api.census(sim_dir)
    assert report.verdict.mechanism is Mechanism.STEP_TIME_SHARING
    argv, boot = report.side_evidence.argv, report.side_evidence.boot_ledger
    assert argv is not None and argv.startswith("radiance")
    assert boot is not None and boot["stager_smallest_pass_tokens"] > 0
    knobs = [a.knob for a in report.advice]
    assert "--prefill-interleave" in knobs


def test_without_evidence_the_advice_says_nothing_was_cited(sim_dir: Path) -> None:
    report = api.census(sim_dir / "metrics.om", evidence=None)
    assert report.side_evidence.to_dict() == {}
    assert report.advice  # the ledger alone still predicts the interleave effect


def test_target_decode_share_moves_the_chosen_interleave(sim_dir: Path) -> None:
    low = api.census(sim_dir, target_decode_share=0.3).advice[0].value
    high = api.census(sim_dir, target_decode_share=0.8).advice[0].value
    assert int(high) > int(low)


def test_tables_are_dataframes_with_the_reports_numbers(sim_dir: Path) -> None:
    report = api.census(sim_dir)
    frames = api.tables(report)
    assert isinstance(frames["buckets"], pl.DataFrame)
    assert frames["buckets"].height == len(report.buckets.rows) if report.buckets else 0
    assert frames["lag"]["effect"].to_list()[0] == pytest.approx(report.lag.points[0].effect)
    assert frames["segments"].height == len(report.shape.segments)


def test_cli_writes_markdown_with_plots_beside_it(sim_dir: Path, tmp_path: Path) -> None:
    md = tmp_path / "incident.md"
    proc = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(sim_dir), "--markdown", str(md),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"]["mechanism"] == "step-time-sharing"
    text = md.read_text()
    assert "step-time-sharing" in text
    svgs = list((tmp_path / "incident_plots").glob("*.svg"))
    assert svgs and all(p.stat().st_size > 500 for p in svgs)
    for p in svgs:
        assert p.name in text


def test_bad_target_share_is_a_usage_error(sim_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "pdcensus", "census", str(sim_dir), "--target-decode-share", "1.5"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --target-decode-share")


def test_terminal_report_shows_the_knob_rollback_tradeoff_and_verification(sim_dir: Path) -> None:
    from pdcensus.report.terminal import render_text

    report = api.census(sim_dir)
    text = render_text(report, width=160)
    rec = report.advice[0]
    assert rec.env_line in text and rec.rollback_env_line in text
    assert "Trade-off for " in text and "Verify the arm" in text
    assert "engine_steps_held_total must leave zero" in text


def test_html_and_markdown_say_which_runbook_steps_a_plain_vllm_endpoint_could_not_run(tmp_path: Path) -> None:
    from pdcensus.report.html import render_html
    from pdcensus.report.markdown import render_markdown

    # an eviction tail at 15 s scrapes: a long prompt in nearly every scrape, so no counted ledger either
    result = simulate("eviction-tail", duration_seconds=3600, seed=2, profile="vllm")
    report = api.census(result.recording, evidence=None)
    skipped = [p for p in report.passes if not p.ran]
    assert skipped, "plain vLLM with prefill in every scrape has no step ledger: at least that step cannot run"
    html = render_html([report])
    md = render_markdown([report]).text
    for p in skipped:
        assert p.name in html and p.name in md
    assert "Runbook steps on this engine" in html and "Runbook steps on this engine" in md
