"""vLLM 0.32's counting rules in the what-if's reads: a long step's silent seconds, prompts counted whole when
their prefill ends, the length histograms observed when a request finishes, arrivals from the first-token
counters, the decoders' felt pace, and a closed population of clients (hand-made inputs)."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.run import ShapeRead
from pdcensus.census.signals import Histogram
from pdcensus.series.model import RecordingBuilder, SeriesKey
from pdcensus.series.vllm_steps import step_spans
from pdcensus.whatif.arrivals import split_wait
from pdcensus.whatif.lengths import Finished, claimed_outputs, expected_length, finished_requests, pair_counts
from pdcensus.whatif.knobs import parse_knobs
from pdcensus.whatif.measure import _median_pace, measure, read_window, span_rates, stalled_share
from pdcensus.whatif.population import clients_for, clients_note, closed_loop_warning, closed_population
from pdcensus.whatif.run import CalibratedTwin, preemption_gap_warning
from pdcensus.whatif.traffic import Traffic


def test_a_second_inside_a_long_step_is_bucketed_with_the_interval_that_ends_the_step() -> None:
    # 1 s scrapes, 3 decoders: a 2 s chunk step starts after row 2 and ends in row 4; row 3 saw no step end,
    # no prompt counted and no token: on its own counters it reads idle at zero decode
    steps = np.array([np.nan, 55.0, 56.0, 0.0, 1.0, 55.0])
    busy = np.array([False, True, True, True, True, True])
    dt = np.array([np.nan, 1.0, 1.0, 1.0, 1.0, 1.0])
    decode = np.array([np.nan, 165.0, 168.0, 0.0, 3.0, 165.0])
    prefill = np.array([np.nan, 0.0, 0.0, 0.0, 1500.0, 0.0])
    span = step_spans(steps, busy)
    assert span[3] == 4
    d, p = span_rates(span, busy, dt, decode, prefill)
    assert p[3] == p[4] == 750.0 and d[3] == d[4] == 1.5
    # intervals that end their own step keep their own rates
    assert d[1] == 165.0 and p[5] == 0.0 and np.isnan(d[0])


def test_length_histograms_are_paired_where_one_scrape_forces_the_pairing() -> None:
    # buckets: prompts (<=50, <=5000), outputs (<=1, <=500); per interval, counts per bucket (not cumulative)
    prompts = np.array([[1, 0], [0, 1], [2, 0], [1, 1], [0, 0]], dtype=float)
    outputs = np.array([[0, 1], [1, 0], [0, 2], [1, 1], [0, 0]], dtype=float)
    joint = pair_counts(prompts, outputs)
    # the forced intervals say decoders (short prompt) write 500 and long prompts 1; the mixed interval (one of
    # each) is paired the same way, not the other way round
    assert joint.tolist() == [[0.0, 4.0], [2.0, 0.0]]


def test_a_blocks_lengths_are_the_draw_closest_to_its_work_and_outputs_go_with_their_prompt() -> None:
    # vLLM's own bucket edges (1-2-5 steps): 32-token decoders writing 300 tokens, 3,000-token prompts writing 1
    prompts = ((20.0, 0.0), (50.0, 27.0), (100.0, 0.0), (2000.0, 0.0), (5000.0, 34.0))
    outputs = ((1.0, 34.0), (200.0, 0.0), (500.0, 27.0))
    pairs = ((50.0, 500.0, 27.0), (5000.0, 1.0, 34.0))
    # the prompt counter's mean over the draws' mean, as fit_traffic sets it (draws in (2000, 5000] average 3,500)
    scale = (27 * 32 + 34 * 3000) / (27 * 35 + 34 * 3500)
    assert expected_length(tuple((o, p, c) for p, o, c in pairs), prompts) == pytest.approx((27 * 35 + 34 * 3500) / 61)
    traffic = Traffic(30.0, (0.0, 15.0), (15.0, 30.0), (5.0, 6.0), (15_000.0, 192.0), 32.0, 2968.0, 131.0,
                      "TTFT histogram count", prompt_lengths=prompts, output_lengths=outputs, length_pairs=pairs,
                      prompt_scale=scale)
    for seed in range(5):
        trace = traffic.trace(seed)
        long_block = [r for r in trace if r.arrival_seconds < 15.0]
        # the work is long prompts (a short one scaled up to thousands was what independent draws made)
        assert len(long_block) == 5 and sum(r.prompt_tokens for r in long_block) == pytest.approx(15_000, abs=5)
        assert sum(r.prompt_tokens for r in long_block if r.prompt_tokens > 1000) >= 0.95 * 15_000
        # a long prompt never becomes a decoder, and a decoder's prompt is never a long one
        assert all(r.output_tokens == 1 for r in trace if r.prompt_tokens > 1000)
        assert all(r.prompt_tokens < 100 and r.output_tokens > 1 for r in trace if r.arrival_seconds >= 15.0)


def test_histogram_outputs_are_scaled_to_the_generated_work() -> None:
    outputs = ((1.0, 34.0), (200.0, 0.0), (500.0, 27.0))
    pairs = ((50.0, 500.0, 27.0), (5000.0, 1.0, 34.0))
    # a (200, 500] bucket draws 350 on average: 27 x 350 + 34 x 1 over 61 requests
    assert expected_length(pairs, outputs) == pytest.approx((27 * 350 + 34 * 0.5) / 61)


def test_the_first_token_wait_splits_by_the_ttft_buckets_and_sums_to_the_ttft_sum() -> None:
    bounds = np.array([0.05, 2.5, 5.0, np.inf])
    cumulative = np.array([1.0, 1.0, 2.0, 2.0])  # one request under 50 ms, one in (2.5, 5]
    waits = split_wait(bounds, cumulative, 2, 3.02)
    assert sum(waits) == pytest.approx(3.02) and waits[0] < 0.05 < 2.5 < waits[1]
    assert split_wait(bounds, cumulative, 3, 3.0) == (1.0, 1.0, 1.0)  # buckets do not add up: equal shares


def test_requests_arrive_their_wait_before_their_first_token_interval_longest_prompt_waiting_longest() -> None:
    prompts = ((50.0, 1.0), (5000.0, 1.0))
    outputs = ((1.0, 1.0), (500.0, 1.0))
    pairs = ((50.0, 500.0, 1.0), (5000.0, 1.0, 1.0))
    first = ((20.0, 21.0, 2, 3032.0, (0.02, 3.0)),)
    traffic = Traffic(30.0, (0.0,), (30.0,), (2.0,), (3032.0,), 32.0, 3000.0, 150.0, "TTFT histogram count",
                      prompt_lengths=prompts, output_lengths=outputs, length_pairs=pairs, first_tokens=first)
    trace = sorted(traffic.trace(0), key=lambda r: r.prompt_tokens)
    short, long = trace
    assert sum(r.prompt_tokens for r in trace) == pytest.approx(3032, abs=2)
    assert 17.0 <= long.arrival_seconds <= 18.0 and 19.98 <= short.arrival_seconds <= 20.98


def test_the_felt_pace_is_the_waiting_weighted_median_of_the_intervals_pace() -> None:
    # seven 1 s intervals at 1 token a second of waiting, one edge interval with 90 tokens in 1.5 s of waiting
    tokens = np.array([1.0] * 7 + [90.0])
    seconds = np.array([1.0] * 7 + [1.5])
    assert _median_pace(tokens, seconds) == 1.0
    assert np.isnan(_median_pace(np.zeros(3), np.ones(3)))


def _gauges(running: list[float], waiting: list[float], preemptions: list[float] | None = None) -> ShapeRead:
    builder = RecordingBuilder("loop")
    labels = (("instance", "a:1"), ("job", "vllm"))
    t = [float(i) for i in range(len(running))]
    builder.add_many(SeriesKey("vllm:num_requests_running", labels), t, running)
    builder.add_many(SeriesKey("vllm:num_requests_waiting", labels), t, waiting)
    builder.add_many(SeriesKey("vllm:generation_tokens_total", labels), t, [150.0 * (i + 1) for i in range(len(t))])
    builder.add_many(SeriesKey("vllm:prompt_tokens_total", labels), t, [100.0 * (i + 1) for i in range(len(t))])
    if preemptions is not None:
        builder.add_many(SeriesKey("vllm:num_preemptions_total", labels), t, preemptions)
    return read_window(builder.build())


def test_a_closed_population_of_clients_is_said_and_open_arrivals_are_not() -> None:
    # ten clients back to back: running + waiting stays at 10 whatever the split
    closed = _gauges([3.0 + (i % 2) for i in range(60)], [7.0 - (i % 2) for i in range(60)])
    (line,) = closed_loop_warning(closed_population(closed), None)
    assert "held at 10" in line and "lower bounds" in line
    assert closed_loop_warning(closed_population(closed), "refused") == ()
    # open arrivals around the same mean: the count wanders (Poisson, sd ~3)
    rng = np.random.default_rng(0)
    inside = rng.poisson(10.0, 60).astype(float)
    running = np.minimum(inside, 4.0)
    assert closed_loop_warning(closed_population(_gauges(list(running), list(inside - running))), None) == ()


def test_counted_preemptions_say_the_twins_inter_token_figures_leave_the_resumed_wait_out() -> None:
    flat = [4.0] * 40
    assert preemption_gap_warning(_gauges(flat, flat, [0.0] * 40), None) == ()
    (line,) = preemption_gap_warning(_gauges(flat, flat, [float(i // 10) for i in range(40)]), None)
    assert line.startswith("3 preemptions") and "not evidence" in line


def test_the_stalled_share_is_the_waiting_in_gaps_from_the_stall_edge_up() -> None:
    bounds = np.array([0.025, 1.0, 2.5, 5.0, np.inf])
    # cumulative per interval: 100 gaps under 25 ms, then one gap in (2.5, 5] and one above 5 s
    inc = np.array([[60.0, 60.0, 60.0, 61.0, 61.0], [40.0, 40.0, 40.0, 40.0, 41.0]])
    share = stalled_share(Histogram("vllm:inter_token_latency_seconds", bounds, inc))
    stalls = 3.75 + 7.5
    assert share == pytest.approx(stalls / (100 * 0.0125 + stalls))
    assert np.isnan(stalled_share(None))


def test_a_change_of_admission_room_on_a_closed_population_with_a_queue_runs_the_twin_as_its_clients() -> None:
    closed = _gauges([3.0 + (i % 2) for i in range(60)], [7.0 - (i % 2) for i in range(60)])
    observed = measure(closed)
    for knob in ("--num-gpu-blocks-override=48", "--max-num-seqs=4"):
        assert clients_for(closed_population(closed), observed, parse_knobs([knob], "vllm")) == 10
    assert "twin as 10 closed-loop clients" in clients_note(closed_population(closed), 10)
    # the twin that runs as clients says so, and not that it replays the recorded arrivals
    assert closed_loop_warning(closed_population(closed), None, 10) == ()
    # a chunk knob is not admission room; without a queue there is nobody to let in
    chunk_knob = parse_knobs(["--max-num-batched-tokens=512"], "vllm")
    assert clients_for(closed_population(closed), observed, chunk_knob) is None
    no_queue = _gauges([10.0] * 60, [0.0] * 60)
    seqs_knob = parse_knobs(["--max-num-seqs=4"], "vllm")
    assert clients_for(closed_population(no_queue), measure(no_queue), seqs_knob) is None


def unfinished_slots(first: tuple[tuple[float, int], ...], finished: Finished,
                     outputs: tuple[tuple[float, float], ...], output_scale: float, seconds_per_token: float,
                     unfinished: int) -> tuple[int, ...]:
    """Per first-token interval, the requests no finished one claimed (:func:`claimed_outputs`)."""
    claims = claimed_outputs(first, finished, outputs, output_scale, seconds_per_token, unfinished)
    return tuple(k - len(c) for (_, k), c in zip(first, claims))


def test_requests_that_outlive_the_window_are_the_first_tokens_no_finished_request_claims() -> None:
    # the live holdout-wide shape: 8 decoders start at 2 s and never finish (600 tokens at ~5 tok/s in 150 s);
    # 2,500-token prompts writing 24 tokens get their first token at 36, 56 and 76 s and finish ~5 s later
    outputs = ((20.0, 0.0), (50.0, 3.0))
    finished = Finished(3.0, 24.0, 7500.0, ((41.0, 50.0, 1.0), (61.0, 50.0, 1.0), (81.0, 50.0, 1.0)))
    first = ((2.0, 8), (36.0, 1), (56.0, 1), (76.0, 1))
    # a finished request's first token: its output (35 drawn x 24 / 35) x 0.2 s before it finished
    assert unfinished_slots(first, finished, outputs, 24.0 / 35.0, 0.2, 8) == (8, 0, 0, 0)
    # a request that finished at 41 s after 400 tokens (500 drawn x 0.8) at 0.5 s a token began 159 s before the
    # window: it claims nothing, unless more would be left open than started less finished
    before = Finished(1.0, 400.0, 32.0, ((41.0, 1000.0, 1.0),))
    assert unfinished_slots(((2.0, 2),), before, ((1000.0, 1.0),), 0.8, 0.5, 2) == (2,)
    assert unfinished_slots(((2.0, 2),), before, ((1000.0, 1.0),), 0.8, 0.5, 1) == (1,)
    # the requests claim in the order they finished: a 55-token decode that began at 5 s (done at 60 s) taken
    # first, by its start, would take the 2 s slot that the 5-token one begun at 6 s (done at 11 s) needs, and leave
    # the 50 s slot open although both finished
    short_long = Finished(2.0, 30.0, 64.0, ((11.0, 10.0, 1.0), (60.0, 100.0, 1.0)))
    assert unfinished_slots(((2.0, 1), (50.0, 1)), short_long, ((10.0, 1.0), (100.0, 1.0)), 1.0, 1.0, 0) == (0, 0)
    # the trace gives each such slot a prompt of the tokens the finished ones leave over and an output that
    # outlives the window; the finished ones keep their finished outputs
    traffic = Traffic(150.0, (0.0,), (150.0,), (11.0,), (7756.0,), 32.0, 2500.0, 24.0, "TTFT histogram count",
                      prompt_lengths=((50.0, 0.0), (5000.0, 3.0)), output_lengths=outputs,
                      length_pairs=((5000.0, 50.0, 3.0),), output_scale=24.0 / 35.0,
                      first_tokens=((1.0, 2.0, 8, 256.0, (0.01,) * 8), (35.0, 36.0, 1, 2500.0, (17.0,)),
                                    (55.0, 56.0, 1, 2500.0, (17.0,)), (75.0, 76.0, 1, 2500.0, (17.0,))),
                      open_requests=8.0, open_prompt_tokens=32.0, open_output_tokens=7000,
                      open_by_interval=(8, 0, 0, 0))
    trace = traffic.trace(0)
    decoders = [r for r in trace if r.arrival_seconds < 5.0]
    assert len(decoders) == 8 and all(r.output_tokens == 7000 for r in decoders)
    assert sum(r.prompt_tokens for r in decoders) == pytest.approx(256, abs=8)
    assert all(14 <= r.output_tokens <= 35 for r in trace if r.arrival_seconds >= 5.0)


def test_each_first_token_keeps_the_output_of_the_finished_request_that_began_there() -> None:
    # one scrape a second: a 300-token decoder finishes alone at 40 s (its interval's _sum / _count: 300 exactly),
    # then two 1-token requests finish together at 50 s; ITL _sum / _count: 0.1 s a token over the window
    builder = RecordingBuilder("lengths")
    labels = (("instance", "a:1"), ("job", "vllm"))
    t = [float(i) for i in range(61)]
    finished = [0.0 if i < 40 else 1.0 if i < 50 else 3.0 for i in range(61)]
    outputs = [0.0 if i < 40 else 300.0 if i < 50 else 302.0 for i in range(61)]
    long = [0.0 if i < 40 else 1.0 for i in range(61)]
    for le, counts in (("1.0", [f - g for f, g in zip(finished, long)]), ("500.0", finished), ("+Inf", finished)):
        builder.add_many(SeriesKey("vllm:request_generation_tokens_bucket", labels + (("le", le),)), t, counts)
    builder.add_many(SeriesKey("vllm:request_generation_tokens_count", labels), t, finished)
    builder.add_many(SeriesKey("vllm:request_generation_tokens_sum", labels), t, outputs)
    builder.add_many(SeriesKey("vllm:inter_token_latency_seconds_count", labels), t, [5.0 * i for i in t])
    builder.add_many(SeriesKey("vllm:inter_token_latency_seconds_sum", labels), t, [0.5 * i for i in t])
    endpoint = builder.build().endpoints[0]
    got = finished_requests(endpoint, np.arange(61))
    assert got is not None and got.requests == 3 and got.output_mean == pytest.approx(302 / 3)
    assert got.seconds_per_token == pytest.approx(0.1)
    by_finish = dict(zip(((d, u) for d, u, _ in got.finishes), got.finish_means))
    assert by_finish[(40.0, 500.0)] == pytest.approx(300.0) and by_finish[(50.0, 1.0)] == pytest.approx(1.0)
    # first tokens at 10 s (the decoder: 300 tokens x 0.1 s before 40 s) and at 50 s (both short ones); the
    # decoder's 300 tokens go to the 10 s slot, whatever the pairs' frequencies (two short to one long)
    outs = ((1.0, 2.0), (500.0, 1.0))
    claims = claimed_outputs(((10.0, 1), (50.0, 2)), got, outs, 1.0, got.seconds_per_token, 0)
    assert [u for u, _ in claims[0]] == [500.0] and claims[0][0][1] == pytest.approx(300.0)
    assert sorted(u for u, _ in claims[1]) == [1.0, 1.0]
    traffic = Traffic(60.0, (0.0,), (60.0,), (3.0,), (96.0,), 32.0, 0.0, 100.0, "TTFT histogram count",
                      prompt_lengths=((50.0, 3.0),), output_lengths=outs, length_pairs=((50.0, 1.0, 2.0),
                                                                                         (50.0, 500.0, 1.0)),
                      first_tokens=((9.0, 10.0, 1, 32.0, (0.1,)), (49.0, 50.0, 2, 64.0, (0.1, 0.1))),
                      claimed=claims)
    for seed in range(20):
        trace = sorted(traffic.trace(seed), key=lambda r: r.arrival_seconds)
        assert [r.output_tokens for r in trace] == [300, 1, 1]


def _prompt_in_most_scrapes(rows: int = 55, d: float = 0.05, c: float = 0.005, prompt: int = 100):
    """3 decoders at a ``d`` s decode-only step; a ``prompt``-token prompt (``c`` s a token) in 5 of every 6 scrapes,
    whose step begins 0.3 s before the scrape after a prompt-free one (so that one counts fewer steps)."""
    builder = RecordingBuilder("prompts")
    labels = (("instance", "a:1"), ("job", "vllm"), ("model_name", "m"), ("engine", "0"))
    totals = np.zeros(7)  # steps, generated, ITL seconds, ITL tokens, prompt tokens, first tokens, TTFT seconds
    rows_of: list[np.ndarray] = []
    for i in range(rows):
        if i and i % 6 == 0:
            n = round(0.7 / d)
            totals += [n, 3 * n, 3 * n * d, 3 * n, 0, 0, 0]
        elif i:
            head = 0.3 if i % 6 == 1 else 0.0
            n = round((1.0 - (prompt * c + d - head)) / d) + 1
            totals += [n, 3 * n + 1, 3 * ((n - 1) * d + d + prompt * c), 3 * n, prompt, 1, d + prompt * c]
        rows_of.append(totals.copy())
    cols = np.array(rows_of).T
    t = [float(i) for i in range(rows)]
    for name, col in (("vllm:iteration_tokens_total_count", 0), ("vllm:iteration_tokens_total_sum", 1),
                      ("vllm:generation_tokens_total", 1), ("vllm:inter_token_latency_seconds_sum", 2),
                      ("vllm:inter_token_latency_seconds_count", 3), ("vllm:prompt_tokens_total", 4),
                      ("vllm:prefix_cache_queries_total", 4), ("vllm:time_to_first_token_seconds_count", 5),
                      ("vllm:time_to_first_token_seconds_sum", 6)):
        builder.add_many(SeriesKey(name, labels), t, list(cols[col]))
    for name, col, le in (("vllm:inter_token_latency_seconds_bucket", 3, "0.1"),
                          ("vllm:time_to_first_token_seconds_bucket", 5, "1.0")):
        for bound in (le, "+Inf"):
            builder.add_many(SeriesKey(name, labels + (("le", bound),)), t, list(cols[col]))
    for name, value in (("vllm:num_requests_running", 3.0), ("vllm:num_requests_waiting", 0.0),
                        ("vllm:prefix_cache_hits_total", 0.0)):
        builder.add_many(SeriesKey(name, labels), t, [value] * rows)
    return builder.build()


def test_with_a_prompt_in_nearly_every_scrape_the_twin_prices_steps_from_the_step_spans() -> None:
    # too few prompt-free scrapes to time a decode-only step (no ledger); those there are held part of the next
    # prompt's step, so their per-stream rate read a 0.071 s step, and the dose-response priced a prompt token at
    # 1.8 ms: the decoders' inter-token pace where no prompt was counted is the step, and the busy spans' wall
    # beyond their steps at it, per prompt token, the price
    recording = _prompt_in_most_scrapes()
    assert read_window(recording).signals.untimed_steps is not None
    costs = CalibratedTwin(recording, argv=["vllm", "serve", "m"], seeds=1).calibration.costs
    assert costs.decode_step_seconds == pytest.approx(0.05, rel=0.01)
    assert costs.per_prefill_token_seconds == pytest.approx(0.005, rel=0.01)
    assert "step spans" in costs.basis
