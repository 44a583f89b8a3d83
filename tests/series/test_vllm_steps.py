"""The counted step ledger's arithmetic (pdcensus.series.vllm_steps) on small hand-made rows."""

from __future__ import annotations

import numpy as np

from pdcensus.series.vllm_steps import (
    CountedSteps,
    counted_ledger,
    in_flight_before,
    itl_depth,
    prompt_window_depth,
    step_spans,
)

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


def test_the_pace_over_the_prompts_waits_puts_the_spans_excess_inside_them() -> None:
    # three decoders; two 1 s intervals carry a short prefill each, two are clean at 20 ms a token. In the
    # marked ones decoders waited 3 s for 100 tokens (2 s at the clean pace, 1 s beyond it), while the
    # prompts' own waits were 0.25 s each: the excess falls inside those, so decoders' pace there is
    # 1 - (1 - span) x wall / waits, far deeper than the span's
    cs = CountedSteps(np.array([NAN, 50, 40, 50, 40.0]), np.array([False, True, True, True, True]),
                      np.arange(5), np.array([NAN, 3, 1.5, 3, 1.5]), np.array([NAN, 150, 50, 150, 50.0]),
                      np.array([NAN, 0, 0.25, 0, 0.25]))
    chunk = np.array([False, False, True, False, True])
    span, _, _, _ = itl_depth(cs, chunk)
    assert abs(span - (50 / 1.5) / (150 / 3)) < 1e-12
    depth, waits, wall = prompt_window_depth(cs, chunk, np.array([NAN, 1, 1, 1, 1.0]), np.zeros(5, bool), span)
    assert (waits, wall) == (0.5, 2.0)
    assert abs(depth - (1 - (1 - span) * 2.0 / 0.5)) < 1e-12 and depth < span
    # waits that fill the spans (prefill across them): the span's own pace
    full = CountedSteps(cs.steps, cs.busy, cs.span, cs.itl_seconds, cs.itl_tokens, np.array([NAN, 0, 1.2, 0, 1.0]))
    assert prompt_window_depth(full, chunk, np.array([NAN, 1, 1, 1, 1.0]), np.zeros(5, bool), span)[0] == span
    # no TTFT sum: nothing to read
    assert np.isnan(prompt_window_depth(_steps([NAN, 1], [False, True]), chunk[:2], np.ones(2), np.zeros(2, bool),
                                        span)[0])


def test_a_scrape_that_cuts_a_chunk_step_holds_its_beginning() -> None:
    # 20 ms decode-only steps; interval 12 ends 18 steps (0.36 s) and then waits 0.64 s on a step that
    # interval 13 ends with the prompt counted: interval 12 holds the chunk step's first part
    n = 16
    steps = np.full(n, 50.0)
    steps[0], steps[12], steps[13] = NAN, 18, 23
    cs = CountedSteps(steps, np.r_[False, np.ones(n - 1, bool)], step_spans(steps, np.r_[False, np.ones(n - 1, bool)]),
                      None, None)
    chunk = np.zeros(n, bool)
    chunk[13] = True
    cut = in_flight_before(cs, np.r_[NAN, np.ones(n - 1)], chunk)
    assert list(np.flatnonzero(cut)) == [12]
    # a few steps of jitter before a prompt's interval is no chunk in flight
    steps[12] = 46
    assert not in_flight_before(cs, np.r_[NAN, np.ones(n - 1)], chunk).any()
