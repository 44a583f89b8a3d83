"""Checkpoint ladder arithmetic and KV accounting."""

from __future__ import annotations

import pytest

from pdcensus.sim.config import CheckpointPolicy
from pdcensus.sim.kv import (
    CheckpointStore, KVCache, auto_slots, held_per_sequence, ladder_gap, retained_positions, reuse_position,
    snapshot_writes,
)


@pytest.mark.parametrize("interval", [512, 1024, 2048, 4096])
def test_geometric_backoff_deepest_gap_stays_about_half_the_prompt_at_any_interval(interval: int) -> None:
    depth = 60_000
    gaps = [ladder_gap(CheckpointPolicy.GEOMETRIC_BACKOFF, d, interval) for d in range(interval, depth, 97)]
    deepest = max(gaps[len(gaps) // 2:])
    assert 0.35 * depth <= deepest <= 0.55 * depth


@pytest.mark.parametrize("interval", [512, 2048, 4096])
def test_keep_all_replays_less_than_one_interval(interval: int) -> None:
    gaps = [ladder_gap(CheckpointPolicy.KEEP_ALL, d, interval) for d in range(1, 40_000, 101)]
    assert max(gaps) < interval


def test_coarsest_retained_scale_is_the_largest_interval_times_power_of_two_under_the_depth() -> None:
    interval = 1000
    written = list(range(interval, 50_001, interval))
    ladder = retained_positions(CheckpointPolicy.GEOMETRIC_BACKOFF, written, interval)
    assert ladder == [1000, 2000, 4000, 8000, 16000, 32000]
    assert reuse_position(ladder, 31_999) == 16000
    assert reuse_position(ladder, 32_000) == 32000


def test_tip_only_keeps_only_the_last_checkpoint() -> None:
    assert retained_positions(CheckpointPolicy.TIP_ONLY, [4096, 8192, 12288], 4096) == [12288]
    assert reuse_position([12288], 10_000) == 0


def test_snapshots_are_written_at_every_interval_unless_a_span_skips_the_intermediate_ones() -> None:
    assert snapshot_writes(0, 16384, 4096, skip_intermediate=False) == [4096, 8192, 12288, 16384]
    assert snapshot_writes(0, 16384, 4096, skip_intermediate=True) == [16384]
    assert snapshot_writes(4000, 200, 4096, skip_intermediate=False) == [4096]
    assert snapshot_writes(0, 1000, 4096, skip_intermediate=False) == []


def test_auto_slots_is_held_plus_one_per_sequence_within_an_eighth_of_host_ram() -> None:
    held = held_per_sequence(CheckpointPolicy.GEOMETRIC_BACKOFF, 131072, 4096)
    assert held == 6  # 4096 x 2^k for k = 0..5 fits under 131072
    gib = 1 << 30
    assert auto_slots(CheckpointPolicy.GEOMETRIC_BACKOFF, 131072, 4096, 64, 1024 * gib, 96 << 20) == 7 * 64
    assert auto_slots(CheckpointPolicy.KEEP_ALL, 131072, 4096, 64, 64 * gib, 96 << 20) == 64 * gib // 8 // (96 << 20)


def test_checkpoint_slots_are_a_total_and_the_least_recently_used_session_loses_its_checkpoints() -> None:
    store = CheckpointStore(CheckpointPolicy.KEEP_ALL, 1000, slots=5)
    store.record(1, [1000, 2000, 3000])
    store.record(2, [1000, 2000])
    assert store.lookup(1, 2500) == 2000
    store.record(3, [1000])
    assert store.retained_total <= 5
    assert store.lookup(2, 2500) == 0  # session 2 was least recently used
    assert store.lookup(1, 3500) == 3000
    assert store.evicted_sessions == 1


def test_kv_steps_until_full_counts_whole_lockstep_steps() -> None:
    kv = KVCache(capacity_blocks=100, block_size=16)
    kv.static_tokens = 1000
    # 1600 tokens, 2 holders waste up to 32, 4 decoders x 2 tokens per step grow 8 per step
    assert kv.steps_until_full(decode_index=0, decoders=4, tokens_per_step=2, holders=2) == (1600 - 32 - 1000) // 8
