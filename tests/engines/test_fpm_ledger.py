"""The exact per-step ledger from FPM records reproduces the step times it was built from."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pdcensus.census.fpm_ledger import (
    StepKind,
    bucket_steps_by_prefill,
    decode_steps_by_time_since_chunk,
    fpm_ledger,
    step_kind,
)
from pdcensus.errors import NotEnoughDataError
from pdcensus.sim.cost_model import CostModel, StepShape
from pdcensus.sim.fpm_publisher import FpmPublisher, fpm_step_from_shape
from pdcensus.sources.fpm import (
    FpmDialect,
    FpmRecord,
    QueuedRequestMetrics,
    ScheduledRequestMetrics,
    load_fpm,
    record_fpm,
)


def record(seq: int, t: float, wall: float, prefill_tokens: int = 0, decode_rows: int = 0,
           worker: str = "w", dp_rank: int = 0) -> FpmRecord:
    sched = ScheduledRequestMetrics(
        num_prefill_requests=1 if prefill_tokens else 0,
        sum_prefill_tokens=prefill_tokens,
        num_decode_requests=decode_rows,
        sum_decode_kv_tokens=decode_rows * 1000,
    )
    return FpmRecord(t, seq, FpmDialect.VLLM, 1, worker, dp_rank, seq, "model_step_cuda", wall, sched,
                     QueuedRequestMetrics())


def mixed_stream(decode_wall: float = 0.015, chunk_wall: float = 0.6, n: int = 200) -> list[FpmRecord]:
    """Every 20th step a 4096-token chunk beside 32 decoders; an idle heartbeat at the end."""
    out = []
    for i in range(n):
        chunk = i % 20 == 10
        out.append(record(i, 1000.0 + i * 0.05, chunk_wall if chunk else decode_wall,
                          4096 if chunk else 0, 32))
    out.append(record(n, 2000.0, 0.0))
    return out


def test_ledger_means_equal_the_step_times_of_each_kind() -> None:
    overall, per_worker = fpm_ledger(mixed_stream())
    assert overall.decode_step_mean_seconds == pytest.approx(0.015)
    assert overall.chunk_step_mean_seconds == pytest.approx(0.6)
    assert (overall.chunk_steps, overall.decode_steps, overall.heartbeats) == (10, 190, 1)
    assert overall.chunk_share_of_steps == pytest.approx(10 / 200)
    assert overall.chunk_share_of_step_seconds == pytest.approx(6.0 / (6.0 + 190 * 0.015))
    assert [w.worker for w in per_worker] == ["w/dp0"] and overall.sequence_gaps == 0


def test_workers_keep_their_own_ledgers_and_gaps() -> None:
    a = [record(i, float(i), 0.010, 0, 8, dp_rank=0) for i in range(10)]
    b = [record(i, float(i), 0.030, 0, 8, dp_rank=1) for i in (0, 1, 5, 6)]  # 2, 3, 4 lost
    overall, per_worker = fpm_ledger(a + b)
    by_name = {w.worker: w for w in per_worker}
    assert by_name["w/dp0"].decode_step_mean_seconds == pytest.approx(0.010)
    assert by_name["w/dp1"].decode_step_mean_seconds == pytest.approx(0.030)
    assert (by_name["w/dp1"].sequence_gaps, overall.sequence_gaps) == (3, 3)


def test_buckets_by_prefill_tokens_give_the_wait_a_decode_row_pays() -> None:
    stream = [record(0, 0.0, 0.015, 0, 16), record(1, 0.1, 0.10, 300, 16), record(2, 0.2, 0.5, 4000, 16),
              record(3, 0.3, 0.7, 4000, 0), record(4, 0.4, 0.015, 0, 16)]
    buckets = bucket_steps_by_prefill(stream, edges=(0, 512, 2048))
    assert [(b.low_tokens, b.steps) for b in buckets] == [(0, 2), (0, 1), (512, 0), (2048, 2)]
    decode_only, small, _, large = buckets
    assert decode_only.mean_step_seconds == pytest.approx(0.015)
    assert decode_only.per_stream_tokens_per_second == pytest.approx(1 / 0.015)
    assert small.mean_step_seconds == pytest.approx(0.10)
    assert large.mean_step_seconds == pytest.approx(0.6)
    # the per-stream rate only counts steps that had decode rows beside the chunk
    assert large.per_stream_tokens_per_second == pytest.approx(1 / 0.5)


def test_a_lagged_tail_shows_as_slow_decode_steps_minutes_after_a_chunk() -> None:
    stream = [record(0, 0.0, 0.6, 4096, 8)]
    for i, t in enumerate(range(1, 1200, 2), start=1):  # 20 minutes of decode-only steps
        stream.append(record(i, float(t), 0.030 if 120 <= t < 840 else 0.015, 0, 8))
    buckets = decode_steps_by_time_since_chunk(stream)
    by_low = {b.low_seconds: b for b in buckets}
    assert by_low[0.0].mean_step_seconds == pytest.approx(0.015)
    assert by_low[120.0].mean_step_seconds == pytest.approx(0.030)
    assert by_low[840.0].mean_step_seconds == pytest.approx(0.015)
    assert sum(b.steps for b in buckets) == len(stream) - 1


@pytest.mark.parametrize(
    "records",
    [pytest.param([], id="empty"), pytest.param([record(0, 0.0, 0.0)], id="heartbeat-only")],
)
def test_no_forward_pass_is_not_enough_data(records: list[FpmRecord]) -> None:
    with pytest.raises(NotEnoughDataError, match="no forward pass"):
        fpm_ledger(records)


def test_step_kind_follows_what_the_step_scheduled() -> None:
    assert step_kind(record(0, 0, 0.5, 100, 0)) is StepKind.CHUNK
    assert step_kind(record(0, 0, 0.5, 100, 4)) is StepKind.CHUNK
    assert step_kind(record(0, 0, 0.01, 0, 4)) is StepKind.DECODE_ONLY
    assert step_kind(record(0, 0, 0.0, 0, 0)) is StepKind.IDLE


def test_the_simulator_published_and_recorded_reproduces_the_cost_models_means(tmp_path: Path) -> None:
    """Sim steps -> real ZMQ PUB on 127.0.0.1 -> recorder -> file -> ledger."""
    cost = CostModel()
    decode = StepShape(decode_rows=32, prefill_tokens=0, context_tokens=32 * 3000, missing_experts=0,
                       snapshot_writes=0)
    chunk = StepShape(decode_rows=32, prefill_tokens=4096, context_tokens=32 * 3000, missing_experts=0,
                      snapshot_writes=1)
    shapes = [chunk if i % 25 == 0 else decode for i in range(250)]
    out = tmp_path / "sim.jsonl"
    seen = threading.Event()
    stop = threading.Event()
    stored: list[FpmRecord] = []

    def on_record(r: FpmRecord) -> None:
        stored.append(r)
        seen.set()

    with FpmPublisher(dialect=FpmDialect.VLLM) as pub:
        thread = threading.Thread(
            target=record_fpm, args=(pub.endpoint, out, 20.0), kwargs={"on_record": on_record, "stop": stop},
            daemon=True,
        )
        thread.start()
        while not seen.wait(0.01):
            pub.heartbeat()
        for shape in shapes:
            pub.publish(fpm_step_from_shape(shape, cost.step_seconds(shape)))
        while sum(1 for r in stored if not r.is_heartbeat) < len(shapes):
            assert thread.is_alive()
            seen.wait(0.01)
        stop.set()
        thread.join(timeout=10)
    overall, _ = fpm_ledger(load_fpm(out))
    assert overall.steps == len(shapes) and overall.chunk_steps == 10
    assert overall.decode_step_mean_seconds == pytest.approx(cost.step_seconds(decode))
    assert overall.chunk_step_mean_seconds == pytest.approx(cost.step_seconds(chunk))


def test_the_simulated_engines_runs_published_as_fpm_give_the_engines_own_ledger(tmp_path: Path) -> None:
    """A real sim Engine: its runs -> FPM over ZMQ -> recorder -> ledger == the engine's counters."""
    from pdcensus.sim.config import EngineConfig
    from pdcensus.sim.engine import Engine
    from pdcensus.sim.entities import Request

    runs: list[tuple[StepShape, float, int]] = []
    engine = Engine(EngineConfig())
    engine.run_watchers.append(lambda run, n: runs.append((run.shape, run.step_seconds, n)))
    for i in range(24):
        engine.submit(Request(arrival_seconds=0.5 * i, prompt_tokens=300, output_tokens=400))
    for t in (3.0, 9.0, 15.0):
        engine.submit(Request(arrival_seconds=t, prompt_tokens=12000, output_tokens=50))
    engine.advance_until(30.0)
    m = engine.metrics
    assert m.steps > m.steps_decode > 0  # both kinds of step happened

    out = tmp_path / "engine.jsonl"
    stop, seen = threading.Event(), threading.Event()
    stored: list[FpmRecord] = []

    def on_record(r: FpmRecord) -> None:
        stored.append(r)
        seen.set()

    with FpmPublisher(send_high_water_mark=1_000_000) as pub:
        thread = threading.Thread(target=record_fpm, args=(pub.endpoint, out, 60.0),
                                  kwargs={"on_record": on_record, "stop": stop}, daemon=True)
        thread.start()
        while not seen.wait(0.01):
            pub.heartbeat()
        for shape, step_seconds, n in runs:
            pub.publish_run(shape, step_seconds, n)
        while sum(1 for r in stored if not r.is_heartbeat) < m.steps:
            assert thread.is_alive()
            seen.wait(0.01)
        stop.set()
        thread.join(timeout=10)
    overall, _ = fpm_ledger(load_fpm(out))
    assert overall.steps == m.steps and overall.decode_steps == m.steps_decode
    assert overall.decode_step_mean_seconds == pytest.approx(m.step_seconds_decode / m.steps_decode)
    assert overall.chunk_step_mean_seconds == pytest.approx(
        (m.step_seconds - m.step_seconds_decode) / (m.steps - m.steps_decode)
    )
