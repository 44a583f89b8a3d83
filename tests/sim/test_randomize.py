"""``randomize`` + ``perturbed`` give configurations the simulator accepts, for every scenario and many seeds.

A perturbation that radiance's validator refuses (``--prefill-span N`` with a step budget other
than N x ``--checkpoint-interval``) used to make the accuracy benchmark skip runs.
"""

from __future__ import annotations

import pytest

from pdcensus.sim.config import Build, EngineConfig, parse_config
from pdcensus.sim.scenarios import SCENARIOS, perturbed, randomize

SEEDS = range(400)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_perturbed_configuration_passes_the_validator(scenario: str) -> None:
    refused = []
    for seed in SEEDS:
        spec = perturbed(SCENARIOS[scenario], randomize(seed))
        for seg in spec.segments:
            try:
                parse_config(seg.flags, EngineConfig(build=seg.build))
            except Exception as exc:  # noqa: BLE001 - collect every refusal, then fail once
                refused.append(f"seed {seed}: {exc}")
    assert not refused, refused[:5]


def test_a_spanned_scenario_keeps_its_step_budget_within_one_interval() -> None:
    base = SCENARIOS["eviction-tail"].segments[0].flags
    budget = int(base["--max-num-batched-tokens"])
    for seed in SEEDS:
        p = randomize(seed)
        flags = perturbed(SCENARIOS["eviction-tail"], p).segments[0].flags
        span, interval = int(flags["--prefill-span"]), int(flags["--checkpoint-interval"])
        assert span >= 2
        assert int(flags["--max-num-batched-tokens"]) == span * interval
        assert budget - interval < span * interval <= budget
        assert abs(interval - p.checkpoint_interval) <= p.checkpoint_interval / 2


def test_the_mismatch_that_used_to_be_refused_is_now_consistent() -> None:
    # 3072-token chunks under a 16384-token span budget: 16384 // 3072 = 5 spans of 3276 tokens,
    # which needs --max-num-batched-tokens 16380, not the scenario's 16384
    seed = next(s for s in SEEDS if randomize(s).checkpoint_interval == 3072)
    flags = perturbed(SCENARIOS["eviction-tail"], randomize(seed)).segments[0].flags
    config = parse_config(flags, EngineConfig(build=Build.V1_8_3))
    assert config.max_num_batched_tokens == config.prefill_span * config.checkpoint_interval
