"""Each knob changes what the runbook says it changes, and nothing it should not."""

from __future__ import annotations

import pytest

from pdcensus.sim.config import parse_config
from pdcensus.sim.engine import Engine
from pdcensus.sim.entities import Request, RequestHandle
from pdcensus.sim.scheduler import auto_busy_chunk_tokens

LONG_PROMPT = 40_000


def _prefill_beside_decoders(flags: dict[str, str], decoders: int = 16) -> tuple[Engine, RequestHandle, float]:
    """Decoders that never finish, then one long prompt; returns the engine, its handle, decode tokens/s/stream."""
    engine = Engine(parse_config(flags))
    for i in range(decoders):
        engine.submit(Request(0.01 * i, 200, 100_000))
    engine.advance_until(5.0)
    long = engine.submit(Request(5.0, LONG_PROMPT, 10))
    before = engine.metrics.generation_tokens
    while long.first_token_seconds != long.first_token_seconds:
        engine.advance_until(engine.now + 1.0)
    during = (engine.metrics.generation_tokens - before) / (engine.now - 5.0) / decoders
    return engine, long, during


def test_prefill_interleave_holds_steps_raises_decoder_rate_and_stretches_the_prompts_ttft() -> None:
    plain, plain_long, plain_rate = _prefill_beside_decoders({})
    held, held_long, held_rate = _prefill_beside_decoders({"--prefill-interleave": "2"})
    assert plain.metrics.steps_held == 0
    assert held.metrics.steps_held > 0
    assert held_rate > 1.5 * plain_rate
    plain_ttft = plain_long.first_token_seconds - 5.0
    held_ttft = held_long.first_token_seconds - 5.0
    assert held_ttft > 1.1 * plain_ttft
    # the chunk steps themselves are the same: the knob does not make a chunk cheaper
    chunks = [(r.prefill_tokens, round(r.step_seconds, 4)) for _s, _n, r in held.recent_steps if r.prefill_tokens]
    assert all(tokens <= 4096 for tokens, _ in chunks)


def test_held_steps_carry_no_chunk_and_admit_nothing() -> None:
    engine, _long, _rate = _prefill_beside_decoders({"--prefill-interleave": "3"})
    runs = [r for _s, _n, r in engine.recent_steps]
    assert any(r.held for r in runs)
    assert all(r.prefill_tokens == 0 for r in runs if r.held)
    late = engine.submit(Request(engine.now, 100, 5))
    engine.advance_until(engine.now + 30.0)
    assert late.first_token_seconds > 0


def test_a_1_0_13_build_ignores_prefill_interleave_silently() -> None:
    old, old_long, _ = _prefill_beside_decoders({"--build": "1.0.13", "--prefill-interleave": "2"})
    plain, plain_long, _ = _prefill_beside_decoders({})
    assert "--prefill-interleave" in old.config.argv()
    assert old.metrics.steps_held == 0
    assert old_long.first_token_seconds == pytest.approx(plain_long.first_token_seconds)


def test_auto_busy_chunk_reserves_rows_refuses_to_halve_for_them_and_reserves_for_waiting() -> None:
    config = parse_config({"--speculative-tokens": "1"})
    assert auto_busy_chunk_tokens(config, decoders=32, waiting=0, stager_min_pass_tokens=256) == 4096 - 64
    assert auto_busy_chunk_tokens(config, decoders=5000, waiting=0, stager_min_pass_tokens=256) == 2048
    assert auto_busy_chunk_tokens(config, decoders=32, waiting=2, stager_min_pass_tokens=256) == 4096 - 64 - 1024
    assert auto_busy_chunk_tokens(config, decoders=32, waiting=40, stager_min_pass_tokens=256) == 256


def test_a_busy_chunk_below_the_stager_pass_pays_synchronous_expert_reads() -> None:
    auto, auto_long, _ = _prefill_beside_decoders({})
    small, small_long, _ = _prefill_beside_decoders({"--busy-prefill-chunk": "128"})
    assert any(r.below_stager_pass for _s, _n, r in small.recent_steps)
    assert small.ledger.sharing_seconds > 5 * auto.ledger.sharing_seconds
    assert small_long.first_token_seconds > auto_long.first_token_seconds


def test_prefill_span_refunds_a_lone_prefill_only_and_its_arena_evicts_experts() -> None:
    flags = {"--prefill-span": "4", "--max-num-batched-tokens": "16384"}
    lone = Engine(parse_config(flags))
    lone.submit(Request(0.0, 32768, 2))
    lone.advance_until(60.0)
    chunks = [(r.prefill_tokens, r.snapshot_writes) for _s, n, r in lone.recent_steps for _ in range(n)
              if r.prefill_tokens]
    assert chunks == [(16384, 1), (16384, 1)]
    busy, _long, _rate = _prefill_beside_decoders(flags)
    assert max(r.prefill_tokens for _s, _n, r in busy.recent_steps) <= 4096
    assert busy.residency.evictions > 0
    assert lone.residency.evictions > 0


def test_after_an_arena_loan_decode_only_steps_stay_slow_then_recover_as_experts_are_re_promoted() -> None:
    engine, _long, _rate = _prefill_beside_decoders({"--prefill-span": "4", "--max-num-batched-tokens": "16384"})
    t_end = engine.now

    def decode_step(at: float) -> float:
        engine.advance_until(at)
        run = engine.run
        assert run is not None and run.prefill_tokens == 0
        return run.step_seconds

    right_after = decode_step(t_end + 5.0)
    two_minutes = decode_step(t_end + 120.0)
    much_later = decode_step(t_end + 900.0)
    assert right_after > 1.5 * much_later
    assert much_later < two_minutes < right_after
    assert engine.residency.missing_experts == 0


def test_without_a_large_budget_no_expert_is_evicted() -> None:
    engine, _long, _rate = _prefill_beside_decoders({})
    assert engine.residency.evictions == 0
    assert engine.ledger.eviction_seconds == 0


def _session(flags: dict[str, str]) -> Engine:
    """A multi-turn session: a 30k document, then turns that extend it."""
    engine = Engine(parse_config(flags))
    context, t = 30_000, 0.0
    engine.submit(Request(t, context, 200, session_id=7))
    for turn in range(6):
        t += 60.0
        engine.advance_until(t)
        context += 200 + 300
        engine.submit(Request(t, context, 200, session_id=7, cached_depth=context - 300))
    engine.advance_until(t + 120.0)
    return engine


def test_checkpoint_policy_changes_retention_and_replay_but_not_the_writes() -> None:
    geometric = _session({})
    keep_all = _session({"--checkpoint-policy": "keep-all"})
    tip_only = _session({"--checkpoint-policy": "tip-only"})
    assert keep_all.metrics.prefix_hit_cut_tokens < geometric.metrics.prefix_hit_cut_tokens
    assert keep_all.metrics.prefix_hit_cut_tokens <= 6 * 4096
    assert geometric.metrics.prefix_hit_cut_tokens > 6 * 10_000  # deep gaps: ~half the context each turn
    assert tip_only.metrics.prefix_hit_cut_tokens < geometric.metrics.prefix_hit_cut_tokens


@pytest.mark.parametrize(("policy", "retained"), [("keep-all", 7), ("geometric-backoff", 3), ("tip-only", 1)])
def test_checkpoint_policy_is_retention_only_every_interval_is_still_written(policy: str, retained: int) -> None:
    engine = Engine(parse_config({"--checkpoint-policy": policy}))
    engine.submit(Request(0.0, 30_000, 2, session_id=1))
    engine.advance_until(60.0)
    assert engine.metrics.snapshot_writes == 30_000 // 4096
    assert engine.checkpoints.retained_total == retained


def test_a_shorter_checkpoint_interval_multiplies_writes_but_does_not_fix_deep_replay() -> None:
    coarse = _session({})
    fine = _session({"--checkpoint-interval": "1024", "--max-num-batched-tokens": "1024"})
    assert fine.metrics.snapshot_writes >= 3.5 * coarse.metrics.snapshot_writes
    assert fine.metrics.prefix_hit_cut_tokens > 0.6 * coarse.metrics.prefix_hit_cut_tokens


def test_max_num_seqs_caps_the_running_batch() -> None:
    engine = Engine(parse_config({"--max-num-seqs": "4"}))
    for i in range(20):
        engine.submit(Request(0.0, 100, 5000))
    for k in range(1, 60):
        engine.advance_until(k * 0.5)
        assert engine.gauges(k * 0.5)["running"] <= 4
    assert engine.gauges(engine.now)["waiting"] > 0


def test_speculative_tokens_add_rows_and_tokens_per_step() -> None:
    plain = Engine(parse_config({}))
    spec = Engine(parse_config({"--speculative-tokens": "3"}))
    for engine in (plain, spec):
        engine.submit(Request(0.0, 100, 4001))
        engine.advance_until(5.0)
    assert spec.metrics.generation_tokens > 3 * plain.metrics.generation_tokens
    assert spec.recent_steps[-1][2].decode_rows == 4
