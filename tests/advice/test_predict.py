"""The arithmetic behind predicted effects: interleave rate/TTFT and checkpoint replay."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdcensus.advice import predict
from pdcensus.errors import UsageError

CHUNK, DECODE = 0.45, 0.015


def test_without_interleave_a_decoder_beside_a_prefill_gets_one_token_per_chunk_step() -> None:
    assert predict.interleave_rate(0, CHUNK, DECODE) == pytest.approx(1 / CHUNK)


def test_n_held_steps_give_n_plus_one_tokens_per_chunk_step_plus_n_decode_steps() -> None:
    assert predict.interleave_rate(3, CHUNK, DECODE) == pytest.approx(4 / (CHUNK + 3 * DECODE))


@given(st.integers(min_value=0, max_value=200))
def test_the_rate_grows_with_n_and_stays_below_the_decode_only_rate(n: int) -> None:
    now = predict.interleave_rate(n, CHUNK, DECODE)
    assert now < predict.interleave_rate(n + 1, CHUNK, DECODE) < 1 / DECODE


def test_the_prompts_ttft_stretches_by_n_decode_steps_per_chunk_step() -> None:
    point = predict.interleave_point(4, CHUNK, DECODE, 1 / DECODE)
    assert point.added_seconds_per_chunk_step == pytest.approx(4 * DECODE)
    assert point.ttft_stretch == pytest.approx((CHUNK + 4 * DECODE) / CHUNK)


@pytest.mark.parametrize("target", [0.05, 0.2, 0.5, 0.6])
def test_the_chosen_n_is_the_smallest_that_reaches_the_target(target: float) -> None:
    idle = 1 / DECODE
    n, reached = predict.choose_interleave(target, CHUNK, DECODE, idle)
    assert reached
    assert predict.interleave_point(n, CHUNK, DECODE, idle).share_of_idle >= target
    if n > 0:
        assert predict.interleave_point(n - 1, CHUNK, DECODE, idle).share_of_idle < target


def test_an_unreachable_target_says_so() -> None:
    n, reached = predict.choose_interleave(0.999, CHUNK, DECODE, 1 / DECODE)
    assert (n, reached) == (predict.MAX_INTERLEAVE, False)


def test_the_tradeoff_table_runs_from_zero_to_eight() -> None:
    rows = predict.interleave_tradeoff(CHUNK, DECODE, 1 / DECODE)
    assert [r.interleave for r in rows] == list(range(9))
    shares = [r.share_of_idle for r in rows]
    assert shares == sorted(shares)


def test_keep_all_replays_less_than_one_interval() -> None:
    assert predict.replay_tokens("keep-all", 100_000, 4096) == 100_000 % 4096 < 4096


def test_geometric_backoff_reuses_up_to_the_largest_interval_times_power_of_two() -> None:
    assert predict.replay_tokens("geometric-backoff", 100_000, 4096) == 100_000 - 65536


@given(st.integers(min_value=8192, max_value=1_000_000), st.sampled_from([1024, 2048, 4096]))
def test_halving_the_interval_does_not_shorten_the_geometric_replay(depth: int, interval: int) -> None:
    assert predict.replay_tokens("geometric-backoff", depth, interval // 2) == pytest.approx(
        predict.replay_tokens("geometric-backoff", depth, interval), abs=interval)


@given(st.integers(min_value=4096, max_value=1_000_000))
def test_the_deepest_geometric_gap_stays_below_half_the_prompt(depth: int) -> None:
    assert predict.replay_tokens("geometric-backoff", depth, 4096) < depth / 2 + 1


def test_tip_only_replays_everything_on_a_divergent_hit() -> None:
    assert predict.replay_tokens("tip-only", 50_000, 4096, diverged=True) == 50_000
    assert predict.replay_tokens("tip-only", 50_000, 4096) == 50_000 % 4096


def test_writes_are_one_per_interval_whatever_the_policy_but_retention_differs() -> None:
    assert predict.snapshot_writes(65536, 4096) == 16
    held = {p: predict.held_checkpoints(p, 65536, 4096) for p in predict.POLICIES}
    assert held == {"geometric-backoff": 5, "tip-only": 1, "keep-all": 16}


def test_an_unknown_policy_is_refused_with_the_members() -> None:
    with pytest.raises(UsageError, match="keep-all"):
        predict.replay_tokens("keep_all", 10_000, 4096)


def test_a_smaller_chunk_costs_more_seconds_per_prompt_token() -> None:
    ratio = predict.prefill_cost_ratio(2048, 4096, CHUNK, DECODE)
    expected = ((DECODE + (CHUNK - DECODE) / 2) / 2048) / (CHUNK / 4096)
    assert ratio == pytest.approx(expected) and ratio > 1
    assert math.isclose(predict.prefill_cost_ratio(4096, 4096, CHUNK, DECODE), 1.0)


def test_queued_ttft_ratio_is_the_stretch_times_the_mm1_waiting_factor() -> None:
    c, d, load = 0.6, 0.015, 0.3
    stretch = (c + 2 * d) / c
    expected = stretch * (1 - load) / (1 - load * stretch)
    assert predict.queued_ttft_ratio(2, 0, load, c, d) == pytest.approx(expected)
    assert predict.queued_ttft_ratio(2, 0, load, c, d) > stretch  # never below the bare stretch


def test_queued_ttft_ratio_is_one_at_the_current_n_and_relative_to_it() -> None:
    c, d, load = 0.6, 0.015, 0.4
    assert predict.queued_ttft_ratio(3, 3, load, c, d) == pytest.approx(1.0)
    assert predict.queued_ttft_ratio(1, 3, load, c, d) < 1.0


def test_queued_ttft_ratio_is_unbounded_once_the_stretched_load_reaches_one() -> None:
    assert math.isinf(predict.queued_ttft_ratio(4, 0, 0.9, 0.1, 0.01))


@pytest.mark.parametrize("load", [pytest.param(math.nan, id="nan"), pytest.param(-0.1, id="negative"),
                                  pytest.param(1.0, id="saturated-now")])
def test_queued_ttft_ratio_is_nan_without_a_usable_load(load: float) -> None:
    assert math.isnan(predict.queued_ttft_ratio(1, 0, load, 0.6, 0.015))
