"""Capacity before knobs: overload found on the simulator's ground truth and on real vLLM runs, never on healthy ones.

The simulator's truth is the engine's own accounting (requests still waiting at the end against
those that arrived, pdcensus.sim.truth.CAPACITY_RULE). The real runs' truth is what their clients
felt (the InferenceX harness's per-request TTFT), derived apart from the census.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from pdcensus.census.overload import detect_overload
from pdcensus.census.overload_model import OverloadSignature
from pdcensus.census.run import CensusOptions, census_recording, read_shape
from pdcensus.sim import list_scenarios, simulate
from pdcensus.sim.run import SimResult
from pdcensus.sources.client_records import load_client_records
from pdcensus.sources.load import load_source

ROOT = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "vllm-inferencex"
DEEPSEEK, LLAMA = ROOT / "deepseek-r1-vllm0.19", ROOT / "llama70b-vllm0.15"
DURATION = 7200.0  # a bursty load's backlog needs the second hour to be plainly a backlog
CLEAR_MARGIN = 1.25  # a truth whose backlog is within this factor of the rule's line is no clear truth


@lru_cache(maxsize=None)
def _sim(name: str) -> SimResult:
    return simulate(name, duration_seconds=DURATION, seed=0)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, _ in list_scenarios()])
def test_the_census_calls_overload_exactly_where_the_engines_accounting_does(name: str) -> None:
    result = _sim(name)
    truth = result.truth["capacity"]
    line = max(int(result.truth["flags"].get("--max-num-seqs", 64)), 0.05 * truth["arrived"])
    assert truth["waiting_end"] >= CLEAR_MARGIN * line or truth["waiting_end"] <= line / CLEAR_MARGIN, truth
    report = census_recording(result.recording, CensusOptions(replicates=50))[0]
    assert report.overload is not None and report.overload.available
    assert report.overload.overloaded is truth["overloaded"], (name, truth, report.overload.reason)


@pytest.mark.slow
def test_an_overloaded_scenario_is_named_overloaded_with_no_knob_presented_as_the_fix(tmp_path: Path) -> None:
    import pdcensus.api as api
    from pdcensus.sim.output import write_sim_dir

    out = write_sim_dir(_sim("overloaded"), tmp_path / "ov")
    report = api.census(out)
    over = report.overload
    assert over is not None and over.overloaded
    assert OverloadSignature.QUEUE_GROWS in over.signatures
    assert OverloadSignature.PREEMPTIONS_CONTINUOUS in over.signatures
    assert over.waiting_end > over.waiting_start + over.running_mean  # grew by more than a batch
    (advice,) = report.advice  # one recommendation: capacity, not a knob
    assert advice.mechanism == "overload" and advice.knob == "capacity"
    assert advice.env_line == "" and "No knob fixes this" in advice.summary
    assert "KV memory" in advice.summary  # preemptions run in most minutes
    assert any(n.startswith("--max-num-seqs:") for n in advice.notes)  # named: it only moves the pain
    assert advice.predicted.capacity_factor > 1.2
    assert any(n.startswith("VRAM split (/diagnostics): ") for n in advice.notes)  # where KV memory would come from
    from pdcensus.report.terminal import render_text

    text = render_text(report, width=100)
    assert text.index("overloaded") < text.index("Advice for overload") < text.index("All findings and evidence")


@pytest.mark.slow
def test_a_healthy_scenario_keeps_its_knob_advice_and_says_the_queue_drains() -> None:
    report = census_recording(_sim("step-time-sharing").recording, CensusOptions(replicates=50))[0]
    assert report.overload is not None and not report.overload.overloaded
    assert "drains" in report.overload.reason


def _client_ttft_p50(run: str) -> float:
    reqs = load_client_records(LLAMA / f"{run}.client_requests.csv.gz")
    return float(np.median([r.first_token - r.start for r in reqs]))


def _overload(path: Path):  # type: ignore[no-untyped-def]
    rec = load_source(path)
    return detect_overload(read_shape(rec.endpoints[0], rec.families, str(path)).signals, replicates=100)


LLAMA_RUNS = sorted(p.name.removesuffix(".om.gz") for p in LLAMA.glob("*.om.gz")) if LLAMA.exists() else []


@pytest.mark.slow
@pytest.mark.skipif(not ROOT.exists(), reason="../shared/realdata/vllm-inferencex not present")
@pytest.mark.parametrize("run", LLAMA_RUNS)
def test_real_vllm_runs_are_overloaded_exactly_where_their_clients_waited(run: str) -> None:
    ttft = _client_ttft_p50(run)
    over = _overload(LLAMA / f"{run}.om.gz")
    assert ttft > 5.0 or ttft < 1.0, "a run between the two is no clear truth: keep it out of this test"
    assert over.overloaded is (ttft > 5.0), (run, ttft, over.reason)
    if over.overloaded:  # Little's law on the two gauges alone gives the queue wait the clients felt
        assert over.queue_wait_seconds == pytest.approx(ttft, rel=0.25)


@pytest.mark.slow
@pytest.mark.skipif(not ROOT.exists(), reason="../shared/realdata/vllm-inferencex not present")
def test_deepseek_runs_few_users_never_overloaded_hundreds_always() -> None:
    for path in sorted(DEEPSEEK.glob("*.om.gz")):
        users = int(path.name.split("_bs")[1].split("_")[0])
        over = _overload(path)
        if users <= 24:
            assert not over.overloaded, (path.name, over.reason)
        if users >= 256:
            assert over.overloaded and OverloadSignature.QUEUE_NEVER_DRAINS in over.signatures, path.name
            assert over.queue_share_of_residence > 0.8  # most of a request's time is spent queued


@pytest.mark.slow
def test_too_few_scrapes_or_no_queue_gauge_is_not_judged() -> None:
    rec = _sim("healthy").recording
    ep = rec.endpoints[0]
    short = read_shape(ep, rec.families, "sim", start=float(ep.timestamps[0]), end=float(ep.timestamps[10])).signals
    over = detect_overload(short)
    assert not over.available and not over.overloaded and "need" in over.reason
    assert math.isnan(over.waiting_slope_per_minute)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["radiance", "vllm", "sglang", "tgi"])
def test_overload_is_read_from_each_engines_own_queue_gauges(profile: str) -> None:
    over_run = simulate("overloaded", duration_seconds=3600, seed=1, profile=profile)
    calm_run = simulate("step-time-sharing", duration_seconds=3600, seed=1, profile=profile)
    over = census_recording(over_run.recording, CensusOptions(replicates=50))[0].overload
    calm = census_recording(calm_run.recording, CensusOptions(replicates=50))[0].overload
    assert over_run.truth["capacity"]["overloaded"] and not calm_run.truth["capacity"]["overloaded"]
    assert over is not None and over.overloaded and OverloadSignature.QUEUE_GROWS in over.signatures
    assert calm is not None and calm.available and not calm.overloaded
