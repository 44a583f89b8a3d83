"""The engine model's invariants: counters, the step ledger, preemption by recompute, run jumping."""

from __future__ import annotations

import math

import pytest

from pdcensus.sim.config import parse_config
from pdcensus.sim.cost_model import CostModel, StepShape
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request


def _load(engine: Engine, n: int = 40, spacing: float = 0.5, prompt: int = 300, output: int = 400) -> None:
    for i in range(n):
        engine.submit(Request(i * spacing, prompt + 37 * (i % 5), output + 53 * (i % 7)))


def test_a_lone_request_takes_exactly_the_cost_models_steps() -> None:
    cost = CostModel()
    engine = Engine(parse_config({}), cost)
    handle = engine.submit(Request(1.0, prompt_tokens=1000, output_tokens=11))
    engine.advance_until(100.0)
    chunk = cost.step_seconds(StepShape(0, 1000, 0, 0, 0))
    assert handle.first_token_seconds == pytest.approx(1.0 + chunk)
    # 10 more tokens, one decode-only step each; each step's attention sees the context at the run start
    decode = cost.step_seconds(StepShape(1, 0, 1001, 0, 0))
    assert handle.finished_seconds == pytest.approx(1.0 + chunk + 10 * decode)
    assert engine.metrics.generation_tokens == 11
    assert engine.metrics.prompt_tokens == 1000
    assert engine.metrics.steps == 11 and engine.metrics.steps_decode == 10


class FlatCost(CostModel):
    """A different price list: every decode-only part 20 ms, every chunk 100 ms on top."""

    def decode_only(self, decode_rows: int, context_tokens: int, missing_experts: int) -> float:
        return 0.020

    def chunk_extra(self, prefill_tokens: int, snapshot_writes: float, below_stager_pass: bool) -> float:
        return 0.100 if prefill_tokens > 0 else 0.0


def test_the_engine_prices_every_step_with_the_cost_model_it_is_given() -> None:
    engine = Engine(parse_config({}), FlatCost())
    _load(engine, n=20)
    engine.submit(Request(2.0, 20000, 50))
    seen: set[tuple[bool, float]] = set()
    for t in range(1, 120):
        engine.advance_until(float(t))
        seen |= {(run.prefill_tokens > 0, round(run.step_seconds, 9)) for _, _, run in engine.recent_steps}
    assert seen == {(False, 0.020), (True, 0.120)}
    assert FlatCost().step_seconds(StepShape(8, 512, 9000, 0, 1)) == pytest.approx(0.120)
    assert engine.metrics.step_seconds == pytest.approx(0.020 * engine.metrics.steps_decode
                                                        + 0.120 * (engine.metrics.steps - engine.metrics.steps_decode))


def test_counters_never_decrease_and_decode_and_held_steps_are_subsets() -> None:
    engine = Engine(parse_config({"--prefill-interleave": "2"}))
    _load(engine, n=30)
    engine.submit(Request(3.0, 20000, 50))
    previous = engine.metrics.counters()
    for k in range(1, 200):
        engine.advance_until(k * 0.25)
        now = engine.metrics.counters()
        assert all(now[name] >= previous[name] for name in now)
        assert now["steps_decode"] <= now["steps"]
        assert now["steps_held"] <= now["steps_decode"]
        assert now["step_seconds_decode"] <= now["step_seconds"] + 1e-9
        previous = now
    assert previous["steps_held"] > 0


def test_where_the_caller_stops_does_not_change_the_trajectory() -> None:
    coarse, fine = Engine(parse_config({})), Engine(parse_config({}))
    for engine in (coarse, fine):
        _load(engine, n=25)
        engine.submit(Request(2.0, 30000, 100))
    coarse.advance_until(120.0)
    for k in range(1, 1201):
        fine.advance_until(k * 0.1)
    for name, value in coarse.metrics.counters().items():
        assert fine.metrics.counters()[name] == pytest.approx(value, rel=1e-9), name


def test_the_ledger_phase_ratio_reproduces_the_models_mean_step_times() -> None:
    engine = Engine(parse_config({}))
    _load(engine, n=60, spacing=0.3)
    engine.submit(Request(5.0, 40000, 80))
    engine.advance_until(200.0)
    m, ledger = engine.metrics, engine.ledger
    decode_step = m.step_seconds_decode / m.steps_decode
    chunk_step = (m.step_seconds - m.step_seconds_decode) / (m.steps - m.steps_decode)
    assert decode_step == pytest.approx(ledger.decode_step_seconds / ledger.decode_steps)
    assert chunk_step == pytest.approx(ledger.chunk_step_seconds / ledger.chunk_steps)
    assert chunk_step > 3 * decode_step


def test_a_decode_row_in_a_chunk_step_loses_the_chunks_extra_time() -> None:
    cost = CostModel()
    engine = Engine(parse_config({}), cost)
    engine.submit(Request(0.0, 100, 2000))
    engine.submit(Request(1.0, 4096, 2))
    engine.advance_until(3.0)
    extra = cost.chunk_extra_seconds(StepShape(1, 4096, 0, 0, 1))
    assert engine.ledger.sharing_seconds == pytest.approx(extra)  # one decoder, one chunk step beside it


def test_kv_pressure_preempts_the_newest_decoder_which_re_prefills_from_token_zero() -> None:
    engine = Engine(parse_config({"--num-gpu-blocks-override": "200"}))  # 3200 tokens
    first = engine.submit(Request(0.0, 400, 1500))
    engine.submit(Request(0.01, 400, 1500))
    t = 0.0
    while engine.metrics.preemptions == 0 and t < 60.0:
        t += 0.5
        engine.advance_until(t)
    assert engine.metrics.preemptions == 1
    preempted_depth = engine.gauges(t)["preempted"]
    assert preempted_depth == 1  # the instant depth, not the counter
    victim = engine.waiting[0]
    assert victim.rid != first.rid  # the newest was preempted
    prompt_before = engine.metrics.prompt_tokens
    engine.advance_until(600.0)
    assert engine.metrics.request_success == 2
    # the resumed sequence recomputed its whole context from token 0
    assert engine.metrics.prompt_tokens - prompt_before >= 400 + victim.generated_tokens
    assert engine.ledger.preemption_seconds > 0


def test_decayed_tps_gauges_relax_toward_the_step_rate() -> None:
    engine = Engine(parse_config({}))
    engine.submit(Request(0.0, 50, 100_000))
    engine.advance_until(30.0)
    g = engine.gauges(30.0)
    run = engine.run
    assert run is not None
    assert g["decode_tokens_per_second"] == pytest.approx(1 / run.step_seconds, rel=0.01)
    assert g["prefill_tokens_per_second"] == pytest.approx(0.0, abs=1e-9)
    assert math.isclose(g["running"], 1.0)
