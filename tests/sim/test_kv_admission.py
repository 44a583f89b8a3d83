"""vLLM 0.32's KV admission in the twin: no watermark, half a block wasted a holder, resumes from cached blocks;
and a closed population of clients."""

from __future__ import annotations

import random

from pdcensus.sim.config import parse_config
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request
from pdcensus.sim.fitted import TraceRequest, clients_workload
from pdcensus.sim.scheduler import VLLM_ADMISSION, KvAdmission, admission_fits, resume_start
from pdcensus.sim.workload import Clients, Workload, WorkloadFeeder


def test_a_resume_keeps_the_full_blocks_that_the_others_have_not_taken_since() -> None:
    # 1,000 tokens in blocks of 128: 7 full blocks; the last token is always computed again
    assert resume_start(1000, 128, free_before_tokens=0, allocated_since_tokens=0) == 7 * 128
    assert resume_start(1024, 128, free_before_tokens=0, allocated_since_tokens=0) == 1023
    # the others took the free head first (300 tokens), then 200 of its blocks' tokens: its last 2 blocks went
    assert resume_start(1000, 128, free_before_tokens=300, allocated_since_tokens=500) == 5 * 128
    assert resume_start(1000, 128, free_before_tokens=300, allocated_since_tokens=300) == 7 * 128
    assert resume_start(1000, 128, free_before_tokens=0, allocated_since_tokens=10_000) == 0


def test_vllm_admission_keeps_no_watermark_where_radiance_keeps_its_growth_headroom() -> None:
    config = parse_config({})
    # 2,000 tokens free, a 1,900-token prompt, 4 decoders growing 1 token a step
    assert not admission_fits(2000, 1900, 100_000, 4, 4, config)  # 128 steps x 4 tokens of headroom
    assert admission_fits(2000, 1900, 100_000, 4, 4, config, VLLM_ADMISSION)
    assert not admission_fits(2000, 2001, 100_000, 4, 4, config, VLLM_ADMISSION)
    assert Engine(config, admission=VLLM_ADMISSION).kv.holder_waste == config.block_size // 2
    assert Engine(config).kv.holder_waste == config.block_size


def _preempt_and_resume(admission: KvAdmission) -> tuple[int, int]:
    """(tokens the resumed prefill computed, the context it resumed with)."""
    engine = Engine(parse_config({"--num-gpu-blocks-override": "200"}), admission=admission)  # 3,200 tokens
    engine.submit(Request(0.0, 400, 1500))
    engine.submit(Request(0.01, 400, 1500))
    t = 0.0
    while engine.metrics.preemptions == 0 and t < 60.0:
        t += 0.005
        engine.advance_until(t)
    victim = engine.waiting[0] if engine.waiting else engine.prefilling
    assert victim is not None and victim.preemptions == 1
    context = victim.request.prompt_tokens + victim.generated_tokens
    while engine.prefilling is not victim and t < 600.0:
        t += 0.005
        engine.advance_until(t)
    assert engine.prefilling is victim
    computed = victim.prefill_end_position - victim.prefill_start_position
    engine.advance_until(600.0)
    assert engine.metrics.request_success == 2
    return computed, context


def test_a_vllm_twin_resumes_from_the_blocks_its_prefix_cache_still_holds() -> None:
    computed, context = _preempt_and_resume(KvAdmission())
    assert computed == context  # radiance recomputes from token 0
    computed, context = _preempt_and_resume(VLLM_ADMISSION)
    # the other decoder grew into the cache's free head while the victim waited, not into the victim's freed
    # blocks: only the victim's partial last block (16-token blocks) is computed again
    assert computed == context % 16 and 0 < computed < context


def test_closed_loop_clients_hold_their_number_in_the_engine_and_send_the_trace_in_order() -> None:
    engine = Engine(parse_config({}))
    pairs = tuple((100 + 10 * i, 20 + i) for i in range(8))
    feeder = WorkloadFeeder(Workload(clients=Clients(3, pairs)), engine, random.Random(0), 0.0, 120.0)
    held = []
    for k in range(1, 120):
        feeder.feed(float(k))
        engine.advance_until(float(k))
        g = engine.gauges(float(k))
        held.append(g["running"] + g["waiting"])
    assert set(held) == {3.0}  # no think time: a finished request's client sends the next at once
    finished = engine.metrics.request_success
    assert finished > len(pairs)  # the trace is handed out again once spent
    assert engine.arrived == finished + 3


def test_a_trace_becomes_clients_that_drop_its_arrival_instants_and_its_standing_requests() -> None:
    trace = [TraceRequest(5.0, 300, 40), TraceRequest(0.0, 200, 30), TraceRequest(0.0, 1, 900, "standing")]
    workload = clients_workload(trace, 4)
    assert workload.clients == Clients(4, ((200, 30), (300, 40)))
    assert workload.streams == () and workload.scaled(2.0).clients == Clients(8, ((200, 30), (300, 40)))
    scaled = workload.scaled(0.5).clients
    assert scaled is not None and scaled.count == 2


def _stats_at_admission_and_step_end(admission: KvAdmission) -> tuple[tuple[float, float, float], ...]:
    """(prefix-cache queries, running, waiting) while a 4,000-token prompt's first chunk step runs beside a decoder,
    and once that step ended."""
    engine = Engine(parse_config({"--max-num-batched-tokens": "1024"}), admission=admission)
    engine.submit(Request(0.0, 16, 400))  # a decoder runs alone, its steps published, until the prompt arrives
    engine.submit(Request(0.5, 4000, 4))
    t = 0.0
    while (engine.prefilling is None or engine.prefilling.request.prompt_tokens < 4000) and t < 2.0:
        t += 1e-4
        engine.advance_until(t)
    run = engine.run
    assert engine.prefilling is not None and run is not None  # admitted, its first chunk step in flight
    gauges = engine.gauges(t)
    during = (engine.metrics.prefix_cache_queries, gauges["running"], gauges["waiting"])
    end = run.start_seconds + run.step_seconds * 1.001
    engine.advance_until(end)
    gauges = engine.gauges(end)
    return during, (engine.metrics.prefix_cache_queries, gauges["running"], gauges["waiting"])


def test_a_vllm_twin_publishes_the_scheduler_stats_when_the_step_ends() -> None:
    # vLLM records the lookup in schedule() and publishes it, with the running and waiting counts, in the step's
    # stats after the model ran: while the admitting step runs, the gauges show the step before's batch
    during, after = _stats_at_admission_and_step_end(VLLM_ADMISSION)
    assert during == (16, 1.0, 0.0) and after == (4016, 2.0, 0.0)
    # radiance counts the lookup at admission and its gauges are the instant's
    during, after = _stats_at_admission_and_step_end(KvAdmission())
    assert during == (4016, 2.0, 0.0) and after == (4016, 2.0, 0.0)
