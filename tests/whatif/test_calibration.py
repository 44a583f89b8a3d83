"""Calibration on a simulated recording whose truth is known: the fitted costs and traffic recover the scenario's.

The recording is the simulator's ``step-time-sharing`` scenario (cost constants in
:class:`pdcensus.sim.cost_model.CostModel`, traffic in :mod:`pdcensus.sim.scenarios`), so each
fitted number has a true value to meet. Tolerances, stated once: the decode-only step within
5 % of the engine's own mean (truth.json), the prefill cost per token within 15 % of the model's
(per-token cost plus one snapshot write per checkpoint interval), the request rate within 10 %
of the scenario's, and the prompt work of a drawn trace within 1 % of the recording's.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest

from pdcensus.errors import UsageError
from pdcensus.series.model import RecordingBuilder, SeriesKey
from pdcensus.sim.config import EngineConfig
from pdcensus.sim.cost_model import CostModel
from pdcensus.sim.engine import Engine
from pdcensus.sim.fitted import TraceRequest, trace_workload
from pdcensus.sim.run import SimResult, simulate
from pdcensus.sim.workload import WorkloadFeeder
from pdcensus.whatif.calibrate import Calibration, calibrate
from pdcensus.whatif.knobs import Knob, knobs_from_argv, parse_knobs
from pdcensus.whatif.run import calibration_errors, length_histograms, observe, simulate_twin
from pdcensus.whatif.lengths import draw_length
from pdcensus.whatif.traffic import Traffic

_CACHE: dict[str, tuple[SimResult, Calibration]] = {}


def _calibrated() -> tuple[SimResult, Calibration]:
    if "sts" not in _CACHE:
        sim = simulate("step-time-sharing", duration_seconds=3600, seed=3)
        report, observed, read = observe(sim.recording, None)
        _CACHE["sts"] = (sim, calibrate(read, report, observed, sim.cmdline))
    return _CACHE["sts"]


@pytest.mark.slow
def test_the_fitted_step_costs_recover_the_simulators_own() -> None:
    sim, cal = _calibrated()
    truth = CostModel()
    assert cal.costs.decode_step_seconds == pytest.approx(sim.truth["decode_step_seconds"], rel=0.05)
    per_token = truth.per_prefill_token_seconds + truth.snapshot_write_seconds / 4096
    assert cal.costs.per_prefill_token_seconds == pytest.approx(per_token, rel=0.15)
    assert cal.costs.per_row_seconds > 0  # the batch grows the step, as the model's per-row term says
    assert "ledger" in cal.costs.basis


@pytest.mark.slow
def test_the_fitted_traffic_recovers_the_scenarios_arrival_rate_and_conserves_prompt_work() -> None:
    sim, cal = _calibrated()
    true_rate = 2.5 + 1 / 20  # chat + long-context streams of step-time-sharing
    assert cal.traffic.request_rate_per_second == pytest.approx(true_rate, rel=0.10)
    trace = cal.traffic.trace(seed=0)
    assert sum(r.prompt_tokens for r in trace) == pytest.approx(cal.traffic.prompt_tokens_total, rel=0.01)
    longs = [r for r in trace if r.kind == "long"]
    assert longs and min(r.prompt_tokens for r in longs) > 12000  # the scenario's long prompts are >= 12k


@pytest.mark.slow
def test_the_twin_without_a_change_reproduces_the_recording_within_the_bound() -> None:
    _, cal = _calibrated()
    errors = calibration_errors(cal.observed, [simulate_twin(cal, seed) for seed in range(2)])
    for name in ("per_stream_idle_tokens_per_second", "per_stream_busy_tokens_per_second",
                 "decode_tokens_per_second"):
        assert abs(errors[name]) < 0.25, (name, errors[name])


def test_a_micro_batch_pass_is_priced_per_further_pass_and_off_by_default() -> None:
    plain = CostModel(per_prefill_token_seconds=0.001, snapshot_write_seconds=0.0)
    split = CostModel(per_prefill_token_seconds=0.001, snapshot_write_seconds=0.0, ubatch_tokens=128,
                      ubatch_seconds=0.5)
    assert plain.chunk_extra(512, 0.0, False) == pytest.approx(0.512)
    assert split.chunk_extra(512, 0.0, False) == pytest.approx(0.512 + 3 * 0.5)  # 4 passes, 3 beyond the step's
    assert split.chunk_extra(100, 0.0, False) == pytest.approx(0.1)
    assert split.chunk_extra(0, 0.0, False) == 0.0


def test_a_trace_workload_replays_each_request_as_given() -> None:
    trace = [TraceRequest(5.0, 300, 20, "a"), TraceRequest(1.0, 100, 10, "a"), TraceRequest(2.0, 5000, 3, "b")]
    engine = Engine(EngineConfig())
    feeder = WorkloadFeeder(trace_workload(trace), engine, random.Random(0), 0.0, 60.0)
    feeder.feed(60.0)
    engine.advance_until(60.0)
    done = sorted((r["arrival_seconds"], r["prompt_tokens"], r["output_tokens"], r["kind"])
                  for r in engine.recent_requests)
    assert done == [(1.0, 100, 10, "a"), (2.0, 5000, 3, "b"), (5.0, 300, 20, "a")]


@pytest.mark.parametrize(("engine", "item", "knob"), [
    ("vllm", "--max-num-seqs=32", Knob.MAX_NUM_SEQS),
    ("vllm", "max-num-batched-tokens=2048", Knob.BATCH_TOKENS),
    ("llamacpp", "-ub=128", Knob.UBATCH_TOKENS),
    ("llamacpp", "--batch-size=64", Knob.BATCH_TOKENS),
    ("llamacpp", "np=2", Knob.MAX_NUM_SEQS),
    ("radiance", "prefill-interleave=2", Knob.SIM_FLAG),
    ("vllm", "load=1.5", Knob.LOAD),
    ("sglang", "--chunked-prefill-size=4096", Knob.BATCH_TOKENS),
    ("tgi", "--max-batch-size=32", Knob.MAX_NUM_SEQS),
])
def test_knobs_are_read_in_each_engines_own_spelling(engine: str, item: str, knob: Knob) -> None:
    (setting,) = parse_knobs([item], engine)
    assert setting.knob is knob


@pytest.mark.parametrize(("engine", "item"), [
    pytest.param("vllm", "-ub=128", id="llama.cpp knob on vLLM"),
    pytest.param("llamacpp", "--prefill-interleave=2", id="radiance flag on llama.cpp"),
    pytest.param("radiance", "--port=9", id="not a knob"),
    pytest.param("vllm", "max-num-seqs", id="no value"),
])
def test_a_knob_the_engine_does_not_have_is_a_usage_error(engine: str, item: str) -> None:
    with pytest.raises(UsageError, match="unknown knob|KNOB=VALUE"):
        parse_knobs([item], engine)


def test_batch_limits_are_read_from_argv_in_both_forms() -> None:
    argv = ["llama-server", "-m", "x.gguf", "-np", "4", "-b", "2048", "--ubatch-size=128"]
    assert knobs_from_argv(argv, "llamacpp") == {Knob.MAX_NUM_SEQS: "4", Knob.BATCH_TOKENS: "2048",
                                                 Knob.UBATCH_TOKENS: "128"}
    vllm = "vllm serve m --max-num-seqs 32 --max-num-batched-tokens=4096".split()
    assert knobs_from_argv(vllm, "vllm") == {Knob.MAX_NUM_SEQS: "32", Knob.BATCH_TOKENS: "4096"}


def test_lengths_are_drawn_from_the_engines_histograms_and_scaled_to_each_blocks_work() -> None:
    prompts = ((100.0, 30.0), (1000.0, 60.0), (float("inf"), 10.0))  # per bucket: upper bound, window count
    outputs = ((50.0, 10.0), (500.0, 90.0), (float("inf"), 0.0))
    traffic = Traffic(120.0, (0.0, 60.0), (60.0, 120.0), (20.0, 30.0), (12_000.0, 30_000.0), 100.0, 0.0, 300.0,
                      "TTFT histogram count", prompt_lengths=prompts, output_lengths=outputs)
    trace = traffic.trace(seed=1)
    first = [r for r in trace if r.arrival_seconds < 60.0]
    second = [r for r in trace if r.arrival_seconds >= 60.0]
    assert (len(first), len(second)) == (20, 30)
    assert sum(r.prompt_tokens for r in first) == pytest.approx(12_000, rel=0.01)
    assert sum(r.prompt_tokens for r in second) == pytest.approx(30_000, rel=0.01)
    assert all(1 <= r.output_tokens <= 500 for r in trace)
    rng = random.Random(0)
    draws = [draw_length(rng, prompts) for _ in range(4000)]
    assert sum(d <= 100 for d in draws) / len(draws) == pytest.approx(0.30, abs=0.03)
    assert max(draws) <= 1500.0  # the +Inf bucket reaches 1.5 x its lower edge


def test_the_length_histograms_are_the_windows_increase_per_bucket() -> None:
    builder = RecordingBuilder("lengths")
    labels = (("instance", "a:1"), ("job", "vllm"))
    times = [0.0, 15.0, 30.0]
    for le, counts in (("100.0", [5, 8, 15]), ("1000.0", [9, 20, 40]), ("+Inf", [10, 22, 45])):
        builder.add_many(SeriesKey("vllm:request_prompt_tokens_bucket", labels + (("le", le),)), times, counts)
    builder.add_many(SeriesKey("vllm:num_requests_running", labels), times, [1.0, 1.0, 1.0])
    recording = builder.build()
    prompts, outputs = length_histograms(recording, SimpleNamespace(rows=np.arange(3)), "a:1")  # type: ignore[arg-type]
    assert prompts == ((100.0, 10.0), (1000.0, 21.0), (float("inf"), 4.0))
    assert outputs == ()
