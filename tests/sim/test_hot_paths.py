"""The simulator's hot paths plan and account what the slower, plainer forms did.

- The run planner keeps the scheduler's chunk per batch shape: it must be the scheduler's
  chunk for every shape and every remainder.
- The feeder merges several open-loop streams a feed at a time: the engine must get the same
  requests in the same (time, stream) order however the feeds are cut.
- An engine that leaves SGLang's and TGI's tallies unfed (a radiance or vLLM recording) must
  run the same trajectory and keep the same radiance counters and truth ledger.

(The bulk-binned histograms are checked against one-at-a-time binning in test_metrics_state.py.)
"""

from __future__ import annotations

import itertools
import random

import pytest

from pdcensus.sim.config import parse_config
from pdcensus.sim.cost_model import CostModel
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request
from pdcensus.sim.scenarios import SHARING
from pdcensus.sim.workload import WorkloadFeeder
from pdcensus.sim.hardware import Hardware
from pdcensus.sim.scheduler import plan_chunk
from pdcensus.sim.steps import RunPlanner


@pytest.mark.parametrize("flags", [
    {},
    {"--busy-prefill-chunk": "256"},
    {"--busy-prefill-chunk": "3000", "--max-num-batched-tokens": "2048"},
    {"--prefill-span": "4", "--max-num-batched-tokens": "16384"},
    {"--speculative-tokens": "3", "--checkpoint-interval": "2048", "--max-num-batched-tokens": "2048"},
], ids=["auto", "small-explicit", "explicit-over-budget", "span", "spec-decode"])
def test_the_kept_chunk_plan_is_the_schedulers_for_every_shape_and_remainder(flags: dict[str, str]) -> None:
    config, hardware = parse_config(flags), Hardware()
    planner = RunPlanner(config, CostModel(), hardware)
    remainders = (1, 2, 37, 255, 256, 257, 1000, 2047, 2048, 2049, 4096, 16384, 50000)
    for decoders, waiting, remaining in itertools.product((0, 1, 5, 40, 64), (0, 1, 3, 9), remainders):
        for _ in range(2):  # the first call fills the kept plan, the second reads it
            got = planner.chunk_plan(decoders, waiting, remaining)
            want = plan_chunk(config, decoders, waiting, remaining, hardware.stager_min_pass_tokens)
            assert tuple(got) == tuple(want), (decoders, waiting, remaining)


def _load(engine: Engine) -> None:
    for i in range(40):
        engine.submit(Request(0.3 * i, 200 + 31 * (i % 7), 150 + 47 * (i % 5)))
    engine.submit(Request(4.0, 30000, 60))


def test_unfed_tallies_change_nothing_else_and_stay_empty() -> None:
    fed, unfed = Engine(parse_config({})), Engine(parse_config({}), engine_tallies=False)
    for engine in (fed, unfed):
        _load(engine)
        for k in range(1, 121):
            engine.advance_until(k * 0.5)
    assert fed.metrics.counters() == unfed.metrics.counters()
    assert fed.metrics.e2e.cumulative() == unfed.metrics.e2e.cumulative()
    assert fed.metrics.inter_token.total == unfed.metrics.inter_token.total
    assert fed.ledger == unfed.ledger
    assert fed.tallies.finished_requests == fed.metrics.request_success > 0
    assert fed.tallies.sglang_inter_token.count == fed.metrics.inter_token.count > 0
    assert unfed.tallies.finished_requests == 0 and unfed.tallies.sglang_inter_token.count == 0
    assert unfed.tallies.tgi_forward_decode.count == 0 and unfed.tallies.tgi_input_length.count == 0
    # what the truth's capacity block reads: the engine's own counts, equal to the fed tallies'
    assert fed.arrived == unfed.arrived == fed.tallies.tgi_input_length.count == 41
    assert unfed.metrics.request_success == fed.tallies.finished_requests


class _Collector:
    """Stands in for the engine: keeps what it is given, in order."""

    def __init__(self) -> None:
        self.finish_hooks: list[object] = []
        self.requests: list[Request] = []

    def submit(self, request: Request) -> None:
        self.requests.append(request)


@pytest.mark.parametrize("step", [0.5, 15.0, 75.0])
def test_streams_merged_a_feed_at_a_time_arrive_in_order_however_the_feeds_are_cut(step: float) -> None:
    def fed(step_seconds: float) -> list[Request]:
        sink = _Collector()
        feeder = WorkloadFeeder(SHARING, sink, random.Random(11), 0.0, 1800.0)  # type: ignore[arg-type]
        t = 0.0
        while t < 1800.0:
            t += step_seconds
            feeder.feed(t)
        return sink.requests

    whole = fed(1800.0)
    assert {r.kind for r in whole} == {"chat", "long-context"}
    assert all(a.arrival_seconds <= b.arrival_seconds for a, b in zip(whole, whole[1:]))
    assert fed(step) == whole


def test_run_watchers_are_told_of_every_step_the_engine_completes() -> None:
    engine = Engine(parse_config({"--prefill-interleave": "2"}))
    pieces: list[tuple[int, int, bool]] = []
    engine.run_watchers.append(lambda run, n: pieces.append((n, run.prefill_tokens, run.held)))
    _load(engine)
    for k in range(1, 61):
        engine.advance_until(k * 0.5)  # scrapes cut runs: a run is told of in pieces
    m = engine.metrics
    assert sum(n for n, _, _ in pieces) == m.steps > 0
    assert sum(n for n, chunk, _ in pieces if not chunk) == m.steps_decode
    assert sum(n for n, _, held in pieces if held) == m.steps_held > 0
