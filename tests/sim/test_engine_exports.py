"""A simulated run exported under SGLang's and TGI's own names carries only what that engine exports.

Names, labels and bucket bounds follow each engine's source (see ``pdcensus.sim.engine_exports``);
the ledger the engine's names imply equals the run's own accounting.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pdcensus.series.profiles import PROFILES, detect_profile
from pdcensus.sim import simulate
from pdcensus.sim.engine_exports import SGLANG_TTFT_BOUNDS, TGI_DURATION_BOUNDS
from pdcensus.sim.output import write_sim_dir
from pdcensus.sources.load import load_source

_RUNS: dict[str, object] = {}


def run(profile: str):
    if profile not in _RUNS:
        _RUNS[profile] = simulate("step-time-sharing", duration_seconds=1800.0, seed=3, profile=profile)
    return _RUNS[profile]


def last(endpoint, name: str, **labels: str) -> float:
    keys = [k for k in endpoint.select(name) if all(k.label(n) == v for n, v in labels.items())]
    assert keys, (name, labels)
    total = 0.0
    for key in keys:
        values, present = endpoint.column(key)
        total += float(values[present][-1])
    return total


@pytest.mark.parametrize(("profile", "prefix"), [pytest.param("sglang", "sglang:", id="sglang"),
                                                 pytest.param("tgi", "tgi_", id="tgi")])
def test_an_engine_export_holds_only_that_engines_names(profile: str, prefix: str) -> None:
    endpoint = run(profile).recording.endpoints[0]
    names = endpoint.names() - {"up"}
    assert names and all(n.startswith(prefix) for n in names), sorted(names)
    detected = detect_profile(endpoint.names())
    assert detected is not None and detected.profile.name == profile
    wanted = PROFILES[profile].sample_names() - {"process_start_time_seconds"}
    assert wanted <= names, sorted(wanted - names)


def test_sglang_labels_are_the_scheduler_and_tokenizer_label_sets() -> None:
    endpoint = run("sglang").recording.endpoints[0]
    (running,) = endpoint.select("sglang:num_running_reqs")
    assert {k for k, _ in running.labels} == {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank",
                                              "job", "instance"}
    (prompt,) = endpoint.select("sglang:prompt_tokens_total")
    assert {k for k, _ in prompt.labels} == {"model_name", "job", "instance"}
    modes = {k.label("category") for k in endpoint.select("sglang:gpu_execution_seconds_total")}
    assert modes == {"decode", "extend"}
    les = sorted(float(k.label("le") or "nan") for k in endpoint.select("sglang:time_to_first_token_seconds_bucket"))
    assert les == [*SGLANG_TTFT_BOUNDS, math.inf]


def test_sglang_token_counters_move_at_request_end_but_realtime_tokens_as_computed() -> None:
    result = run("sglang")
    endpoint = result.recording.endpoints[0]
    engine = result.engine
    computed = last(endpoint, "sglang:realtime_tokens_total", mode="prefill_compute")
    finished = last(endpoint, "sglang:prompt_tokens_total")
    assert computed == pytest.approx(engine.metrics.prompt_tokens)
    assert finished == pytest.approx(engine.tallies.finished_prompt_tokens)
    assert finished < computed  # requests still running at the end have computed, not finished


def test_tgi_forward_histogram_carries_the_runs_step_ledger() -> None:
    result = run("tgi")
    endpoint = result.recording.endpoints[0]
    m = result.engine.metrics
    decode_steps = last(endpoint, "tgi_batch_forward_duration_count", method="decode")
    chunk_steps = last(endpoint, "tgi_batch_forward_duration_count", method="prefill")
    assert decode_steps + chunk_steps == pytest.approx(m.steps)
    assert decode_steps == pytest.approx(m.steps_decode)
    assert last(endpoint, "tgi_batch_forward_duration_sum", method="decode") == pytest.approx(m.step_seconds_decode)
    les = sorted({float(k.label("le") or "nan") for k in endpoint.select("tgi_batch_forward_duration_bucket")})
    assert les == pytest.approx([*TGI_DURATION_BOUNDS, math.inf])
    assert not [n for n in endpoint.names() if "time_to_first_token" in n or "preempt" in n]


def test_sglang_ledger_counters_carry_the_runs_decode_only_time() -> None:
    result = run("sglang")
    endpoint = result.recording.endpoints[0]
    m = result.engine.metrics
    assert last(endpoint, "sglang:gpu_execution_seconds_total", category="decode") == pytest.approx(
        m.step_seconds_decode)
    assert last(endpoint, "sglang:gpu_execution_seconds_total", category="extend") == pytest.approx(
        m.step_seconds - m.step_seconds_decode)
    assert last(endpoint, "sglang:cuda_graph_passes_total") == pytest.approx(m.steps_decode)


@pytest.mark.parametrize("profile", ["sglang", "tgi"])
def test_an_engine_export_round_trips_through_openmetrics(tmp_path: Path, profile: str) -> None:
    result = run(profile)
    out = write_sim_dir(result, tmp_path / profile)
    back = load_source(out)
    a, b = result.recording.endpoints[0], back.endpoints[0]
    assert a.names() == b.names()
    np.testing.assert_allclose(b.timestamps, a.timestamps)
    assert last(b, "up") == 1.0


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
@pytest.mark.parametrize("profile", ["sglang", "tgi"])
def test_an_engine_export_backfills_with_promtool(tmp_path: Path, profile: str) -> None:
    out = write_sim_dir(run(profile), tmp_path / profile)
    done = subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(out / "metrics.om"), str(tmp_path / "blocks")],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
