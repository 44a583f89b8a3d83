"""The counted step ledger's arithmetic (pdcensus.series.vllm_steps) on small hand-made rows."""

from __future__ import annotations

import numpy as np

from pdcensus.series.vllm_steps import CountedSteps, counted_ledger, itl_depth, step_spans

NAN = float("nan")


def _steps(steps: list[float], busy: list[bool], itl_s: list[float] | None = None,
           itl_c: list[float] | None = None) -> CountedSteps:
    s, b = np.array(steps), np.array(busy)
    return CountedSteps(s, b, step_spans(s, b), None if itl_s is None else np.array(itl_s),
                        None if itl_c is None else np.array(itl_c))


def test_a_long_step_joins_the_interval_that_ends_it() -> None:
    span = step_spans(np.array([NAN, 20, 0, 0, 1, 18, 0]), np.array([False, True, True, True, True, True, False]))
    assert list(span) == [0, 1, 4, 4, 4, 5, 6]


def test_an_idle_interval_cuts_a_run_of_stepless_intervals() -> None:
    span = step_spans(np.array([0.0, 0, 3]), np.array([True, False, True]))
    assert list(span) == [0, 1, 2]


def test_the_chunk_mark_covers_its_span_and_the_lost_time_is_wall_less_steps_at_the_decode_pace() -> None:
    cs = _steps([NAN, 20, 0, 0, 1, 20], [False, True, True, True, True, True])
    chunk = np.array([False, False, False, False, True, False])  # the prompt counted where the long step ended
    led = counted_ledger(cs, np.array([NAN, 1, 1, 1, 1, 1.0]), chunk)
    assert np.isnan(led["steps"][0])
    assert list(led["decode_steps"][1:]) == [20, 0, 0, 0, 20]
    decode_step = np.nansum(led["decode_step_seconds"]) / np.nansum(led["decode_steps"])
    chunk_secs = np.nansum(led["step_seconds"]) - np.nansum(led["decode_step_seconds"])
    chunk_steps = np.nansum(led["steps"]) - np.nansum(led["decode_steps"])
    assert decode_step == 0.05 and chunk_steps == 1 and chunk_secs == 3.0


def test_itl_depth_is_pace_in_chunk_spans_over_pace_without() -> None:
    cs = _steps([NAN, 20, 0, 1, 20], [False, True, True, True, True],
                [0.0, 3.0, 0.0, 6.0, 3.0], [0.0, 60, 0, 3, 60])  # 3 decoders: 20 steps of 50 ms, one 2 s step
    ratio, lost, c_in, c_out = itl_depth(cs, np.array([False, False, True, False, False]))
    assert (c_in, c_out) == (3, 120)
    assert np.isclose(ratio, (3 / 6.0) / (120 / 6.0))
    assert np.isclose(lost, (6.0 - 3 * 0.05) / 12.0)
