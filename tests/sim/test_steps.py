"""The run planner keeps the scheduler's chunk per batch shape; it must plan what the scheduler says."""

from __future__ import annotations

import itertools

import pytest

from pdcensus.sim.config import parse_config
from pdcensus.sim.cost_model import CostModel
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
