"""The counted step ledger's arithmetic (pdcensus.series.vllm_steps) on small hand-made rows."""

from __future__ import annotations

import numpy as np

from pdcensus.series.vllm_steps import (
    MIN_FIT_SPANS,
    CountedSteps,
    counted_ledger,
    in_flight_before,
    itl_depth,
    prefill_cost,
    prompt_window_depth,
    step_spans,
    summed_below,
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


def test_the_pace_over_the_prompts_waits_is_the_tokens_a_decoder_got_in_them() -> None:
    # three decoders at 20 ms a step; intervals 3 and 5 each hold one prompt: it arrives at 0.31 s, the step in
    # flight ends at 0.32 s, its one 0.5 s chunk step ends at 0.82 s with its first token (a 0.51 s wait), then
    # nine fast steps; a decoder's own 32-token re-prompt waited 25 ms beside it. Inside each wait a decoder got
    # 2 tokens in 0.51 s: 0.0784 of the clean pace, where the span reads 0.52 and one chunk step 0.04 (k = 1:
    # (k + 1) / k times it)
    n = 7
    clean_row, chunk_row = (50.0, 3.0, 150.0, 0.0), (26.0, 3.0, 78.0, 0.51 + 0.025)
    rows = [chunk_row if i in (3, 5) else clean_row for i in range(n)]
    steps, itl_s, itl_c, ttft = (np.array([NAN] + [r[k] for r in rows[1:]]) for k in range(4))
    busy = np.r_[False, np.ones(n - 1, bool)]
    cs = CountedSteps(steps, busy, step_spans(steps, busy), itl_s, itl_c, ttft)
    bounds = np.array([0.05, 0.25, 0.5, 1.0, np.inf])
    inc = np.zeros((n, 5))
    inc[[3, 5]] = [1, 1, 1, 2, 2]  # cumulative: the re-prompt under 50 ms, the prompt in (0.5, 1]
    chunk, clean, dt = np.isin(np.arange(n), [3, 5]), np.isin(np.arange(n), [1, 2, 4, 6]), np.r_[NAN, np.ones(n - 1)]
    w = prompt_window_depth(cs, chunk, np.zeros(n, bool), clean, dt, bounds, inc, chunk_depth=0.02 / 0.5)
    assert w is not None and w.prompts == 2 and np.isclose(w.mean_wait_seconds, 0.51)
    assert np.isclose(w.chunk_steps, 0.51 / 0.5) and np.isclose(w.depth, 0.04 + 0.02 / 0.51)
    clients = (2 / 0.51) / 50
    assert abs(w.depth / clients - 1) < 0.02  # the arrival's half step in flight is the 1 % left
    span, _, _, _ = itl_depth(cs, chunk)
    assert np.isclose(span, 0.52) and w.depth < span
    # one wait is no mean; no TTFT sum or no chunk step's depth, nothing to read
    inc1 = inc.copy()
    inc1[5] = 0
    assert prompt_window_depth(cs, chunk, np.zeros(n, bool), clean, dt, bounds, inc1, 0.04) is None
    bare = CountedSteps(steps, busy, cs.span, itl_s, itl_c)
    assert prompt_window_depth(bare, chunk, np.zeros(n, bool), clean, dt, bounds, inc, 0.04) is None
    assert prompt_window_depth(cs, chunk, np.zeros(n, bool), clean, dt, bounds, inc, NAN) is None
    # waits far shorter than the mean long gap held no chunk step of that length: those gaps are something else
    assert prompt_window_depth(cs, chunk, np.zeros(n, bool), clean, dt, bounds, inc, 0.02 / 0.6) is not None
    assert prompt_window_depth(cs, chunk, np.zeros(n, bool), clean, dt, bounds, inc, 0.02 / 1.1) is None


def test_the_sum_below_a_point_reads_each_bucket_spread_evenly() -> None:
    bounds, counts = np.array([1.0, 2.0, np.inf]), np.array([2.0, 6.0, 7.0])
    assert np.isclose(summed_below(bounds, counts, 1.0), 2 * 0.5)
    assert np.isclose(summed_below(bounds, counts, 1.5), 2 * 0.5 + 4 * 0.5 * 1.25)
    assert np.isclose(summed_below(bounds, counts, 9.0), 2 * 0.5 + 4 * 1.5)  # the +Inf bucket has no midpoint


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


def test_with_a_prompt_in_nearly_every_scrape_each_interval_is_paced_by_its_own_inter_token_gaps() -> None:
    # 1.3 s chunk steps back to back beside 3 decoders at 48 ms: every other interval ends 2 decode-only steps (6
    # gaps, 0.29 s) and waits the rest of its second on a chunk step the next interval ends with its prompt counted.
    # No interval is clean, so no pace from them; each cut interval's own gaps are its pace
    n = 20
    steps = np.where(np.arange(n) % 2 == 1, 2.0, 7.0)
    steps[0] = NAN
    busy = np.r_[False, np.ones(n - 1, bool)]
    itl_s = np.where(steps == 2.0, 0.29, 5.0)
    itl_c = 3.0 * np.nan_to_num(steps)
    cs = CountedSteps(steps, busy, step_spans(steps, busy), itl_s, itl_c)
    chunk = (np.arange(n) % 2 == 0) & busy
    cut = in_flight_before(cs, np.r_[NAN, np.ones(n - 1)], chunk)
    assert list(np.flatnonzero(cut)) == list(range(1, n - 1, 2))
    # without the histogram there is no pace: nothing is marked
    bare = CountedSteps(steps, busy, step_spans(steps, busy), None, None)
    assert not in_flight_before(bare, np.r_[NAN, np.ones(n - 1)], chunk).any()
    # an interval whose own gaps fill its wall is no chunk in flight
    full = CountedSteps(steps, busy, step_spans(steps, busy), np.where(steps == 2.0, 2.7, 5.0), itl_c)
    assert not in_flight_before(full, np.r_[NAN, np.ones(n - 1)], chunk).any()


def _busy_rows(n: int, rng: np.random.Generator, d: float, c: float, prompts: np.ndarray,
               jitter: float = 0.0) -> tuple[CountedSteps, np.ndarray]:
    """``n`` one-second scrapes of an endpoint always busy: each scrape's steps at ``d`` plus its prompts at ``c``."""
    busy = np.r_[False, np.ones(n - 1, dtype=bool)]
    steps = np.floor((1.0 - c * prompts) / d)
    wall = steps * d + c * prompts + jitter * rng.standard_normal(n)
    steps[0] = NAN
    return CountedSteps(steps, busy, step_spans(steps, busy), None, None), wall


def test_the_fitted_prompt_cost_tells_a_re_prompt_from_a_long_prompt_where_every_scrape_holds_one() -> None:
    rng = np.random.default_rng(7)
    n = 120
    prompts = rng.choice([16.0, 32.0, 48.0], size=n)  # decoders' own re-prompts in every scrape
    prompts[10::6] += 3000.0  # and a long prompt every 6 s
    cs, wall = _busy_rows(n, rng, d=0.008, c=1.2e-4, prompts=prompts, jitter=0.002)
    cost = prefill_cost(cs, wall, prompts, np.zeros(n, dtype=bool))
    assert cost is not None and cost.spans == n - 1
    assert abs(cost.decode_step_seconds / 0.008 - 1) < 0.05 and abs(cost.seconds_per_prompt_token / 1.2e-4 - 1) < 0.1
    assert abs(cost.tokens_per_decode_step / (0.008 / 1.2e-4) - 1) < 0.15
    # 3,000 tokens cost 45 decode-only steps; 48 tokens 5.8 ms, under one
    assert set(np.flatnonzero(cost.material(prompts))) == set(range(10, n, 6))
    # three 32-token re-prompts in one scrape are 96 tokens (11.5 ms, over one step) but three prompts under it
    three = np.array([96.0, 96.0, 3096.0])
    assert list(cost.material(three, np.array([3.0, 1.0, 4.0]))) == [False, True, True]


def test_no_prompt_cost_is_fitted_without_spread_in_the_prompts_or_with_a_rate_that_is_not_positive() -> None:
    rng = np.random.default_rng(8)
    n = 60
    flat = np.full(n, 64.0)
    cs, wall = _busy_rows(n, rng, d=0.008, c=1.2e-4, prompts=flat)
    assert prefill_cost(cs, wall, flat, np.zeros(n, dtype=bool)) is None  # steps and tokens: one direction
    prompts = rng.choice([0.0, 500.0], size=n)
    cs, wall = _busy_rows(n, rng, d=0.008, c=0.0, prompts=prompts, jitter=0.003)
    wall = wall - 2e-5 * prompts  # prompts "save" time: no positive cost
    assert prefill_cost(cs, wall, prompts, np.zeros(n, dtype=bool)) is None
    few = np.zeros(n, dtype=bool)
    few[: n - MIN_FIT_SPANS + 2] = True  # preempted spans are not fitted: too few left
    cs, wall = _busy_rows(n, rng, d=0.008, c=1.2e-4, prompts=prompts)
    assert prefill_cost(cs, wall, prompts, few) is None
