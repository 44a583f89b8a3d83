"""The screen's PromQL and the numbers read from its sums, without a server."""

from __future__ import annotations

import math

import promql_parser
import pytest

from pdcensus.fleet.screen import chunks
from pdcensus.fleet.screen_model import ScreenFlag, ScreenRow
from pdcensus.fleet.screen_queries import queue_query, screen_queries, timeline_queries
from pdcensus.series.profiles import PROFILES

WINDOW = dict(chunk_seconds=3600.0, step_seconds=15.0, window_seconds=7200.0, window_end=1_793_498_400.0)


@pytest.mark.parametrize("profile", ["radiance-1.8", "radiance-1.0.13", "vllm-v1", "sglang"])
def test_every_screen_query_is_valid_promql_that_keeps_one_series_per_endpoint(profile: str) -> None:
    queries = screen_queries(PROFILES[profile], 'job="radiance"', **WINDOW)
    assert queries, profile
    for q in queries:
        promql_parser.parse(q.expr)
        assert "by (job, instance)" in q.expr, q.name
        assert 'job="radiance"' in q.expr
    names = {q.name for q in queries}
    assert {"scrapes", "running_all", "decode_busy", "decode_idle", "decode_tail", "running_clean"} <= names
    assert ("steps_decode" in names) == PROFILES[profile].has_ledger
    for expr in [queue_query(PROFILES[profile], "", span_seconds=1800, step_seconds=15),
                 *timeline_queries(PROFILES[profile], "").values()]:
        if expr is not None:
            promql_parser.parse(expr)


def test_the_idle_threshold_is_computed_once_for_the_whole_window_at_its_end() -> None:
    busy = next(q for q in screen_queries(PROFILES["radiance-1.8"], "", **WINDOW) if q.name == "decode_busy")
    assert "[2h:15s] @ 1793498400.000" in busy.expr  # the whole window, pinned to its end
    assert "[59m59s999ms:15s]" in busy.expr  # the chunk, its left end excluded so chunks do not overlap


def test_recorded_mode_reads_the_series_that_promql_rules_record() -> None:
    queries = screen_queries(PROFILES["radiance-1.8"], "", recorded=True, **WINDOW)
    busy = next(q for q in queries if q.name == "decode_busy")
    assert "job_instance:pdcensus_decode_tokens_per_second:sum" in busy.expr
    assert "job_instance:pdcensus_prefill_tokens_per_second:sum" in busy.expr


def test_chunks_cover_the_window_once_without_overlap() -> None:
    parts = chunks(0.0, 10_000.0, 3600.0)
    assert parts == [(0.0, 3600.0), (3600.0, 7200.0), (7200.0, 10_000.0)]
    assert chunks(0.0, 100.0, 3600.0) == [(0.0, 100.0)]


def _row(**sums: float) -> ScreenRow:
    base = {"scrapes": 240.0, "running_all": 1000.0}
    return ScreenRow("radiance", "a:1", "radiance-1.8", {**base, **sums}, 1.0, 1.0)


def test_the_lag0_loss_is_the_busy_sequence_time_idle_speed_would_have_saved() -> None:
    # baseline 10 tok/s per stream (clean); busy: 200 sequence-scrapes decoding 1000 tokens/s-scrapes = 5/stream
    row = _row(running_clean=500.0, decode_clean=5000.0, running_idle=800.0, decode_idle=8000.0,
               running_busy=200.0, decode_busy=1000.0, running_tail=0.0, decode_tail=0.0)
    assert row.baseline_kind == "clean" and row.baseline_per_stream == 10.0
    assert row.lag0_loss == pytest.approx((200 - 1000 / 10) / 1000)  # 0.1 of all decoders' time
    assert row.tail_loss == 0.0 and row.score == pytest.approx(0.1)
    assert row.flags == ()


def test_the_residency_and_the_tail_are_one_eviction_the_larger_counts() -> None:
    row = _row(running_clean=500.0, decode_clean=5000.0, running_idle=800.0, decode_idle=7000.0,
               running_busy=0.0, decode_busy=0.0, running_tail=300.0, decode_tail=2400.0,
               decode_step_q10=0.015, decode_step_q50=0.016, residency_step_seconds=1000.0 * 0.020 * 60,
               residency_steps=1000.0 * 60)
    assert row.tail_loss == pytest.approx((300 - 240) / 1000)
    assert row.residency_loss == pytest.approx((0.020 - 0.016) * 60)  # 24 % of the running sequences' time
    assert row.score == pytest.approx(max(row.tail_loss, row.residency_loss))


def test_an_endpoint_with_no_idle_baseline_is_flagged_not_scored() -> None:
    row = _row(running_clean=0.0, running_idle=10.0, decode_idle=100.0, running_busy=990.0, decode_busy=5000.0)
    assert math.isnan(row.score) and ScreenFlag.NO_BASELINE in row.flags


def test_an_endpoint_where_nothing_decoded_has_nothing_to_lose() -> None:
    row = _row(running_all=0.0)
    assert row.score == 0.0 and row.flags == ()


@pytest.mark.parametrize(("sums", "queue", "flag"), [
    pytest.param({"resets": 1.0}, (1.0, 1.0), ScreenFlag.SHAPE_CHANGE, id="restart"),
    pytest.param({"preemptions": 5.0}, (1.0, 1.0), ScreenFlag.PREEMPTION_UNWEIGHED, id="no-depth-gauge"),
    pytest.param({}, (2.0, 8.0), ScreenFlag.QUEUE_GROWTH, id="queue-grew-past-a-batch"),
])
def test_what_the_screen_cannot_vouch_for_is_flagged(sums: dict[str, float], queue: tuple[float, float],
                                                    flag: ScreenFlag) -> None:
    row = ScreenRow("j", "i", "vllm-v1", {"scrapes": 100.0, "running_all": 400.0, "running_idle": 400.0,
                                          "decode_idle": 4000.0, "running_clean": 0.0, "running_busy": 0.0,
                                          "running_tail": 0.0, **sums}, *queue)
    assert flag in row.flags
    assert ScreenFlag.QUEUE_GROWTH not in ScreenRow("j", "i", "vllm-v1", row.sums, 2.0, 5.0).flags  # < 4 running


def test_an_unanswered_endpoint_is_flagged_not_screened_and_its_row_survives_the_state_file() -> None:
    row = ScreenRow("j", 'i"<x>', "radiance-1.8", {}, error="the store returned no screen numbers")
    assert row.flags == (ScreenFlag.NOT_SCREENED,)
    again = ScreenRow.from_dict(row.to_dict())
    assert again.error == row.error and again.flags == row.flags
    full = _row(running_clean=500.0, decode_clean=5000.0, running_idle=600.0, decode_idle=5900.0, running_busy=200.0,
                decode_busy=1000.0 / 3)
    assert ScreenRow.from_dict(full.to_dict()).score == full.score


def test_a_stride_spaces_the_summed_points_but_keeps_the_inner_windows_at_the_scrape_interval() -> None:
    queries = {q.name: q.expr for q in screen_queries(PROFILES["radiance-1.8"], "", stride_seconds=60.0, **WINDOW)}
    assert "[59m59s999ms:1m])" in queries["running_all"]
    assert "[12m:15s] offset 2m" in queries["decode_tail"] and "[2h:15s] @" in queries["decode_busy"]
