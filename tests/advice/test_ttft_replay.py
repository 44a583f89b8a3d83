"""The trace-driven TTFT replay on hand-made traces whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdcensus.advice import predict, ttft_replay

DT = 15.0
C, D, TOKENS = 1.0, 0.5, 1000.0  # 1000 prompt tokens per second of chunk-step time; N = 2 doubles the cost


def _steady(intervals: int, work_per_interval: float, requests_per_interval: float) -> dict[str, np.ndarray]:
    return {"times": DT * np.arange(1, intervals + 1), "work_tokens": np.full(intervals, work_per_interval),
            "requests": np.full(intervals, requests_per_interval), "interval_seconds": np.full(intervals, DT)}


def _ratio(n: int, trace: dict[str, np.ndarray], chunk: float = C, decode: float = D, tokens: float = TOKENS,
           selected: np.ndarray | None = None) -> ttft_replay.ReplayForecast:
    return ttft_replay.replay_ttft_ratio(trace["times"], trace["work_tokens"], trace["requests"],
                                         chunk_step_seconds=chunk, decode_step_seconds=decode, chunk_tokens=tokens,
                                         interleave=n, interval_seconds=trace["interval_seconds"], selected=selected)


def test_a_fifo_server_departs_each_job_after_the_one_before_it() -> None:
    arrivals = np.array([0.0, 1.0, 1.5, 10.0])
    service = np.array([2.0, 2.0, 2.0, 1.0])
    # departures 2, 4, 6 (each waits for the previous), then 11 (the server was idle)
    assert ttft_replay.sojourn_seconds(arrivals, service) == pytest.approx([2.0, 3.0, 4.5, 1.0])


def test_the_weighted_quantile_counts_each_value_by_its_weight() -> None:
    values, weights = np.array([5.0, 1.0, 3.0]), np.array([1.0, 8.0, 1.0])
    assert ttft_replay.weighted_quantile(values, weights, 0.8) == 1.0
    assert ttft_replay.weighted_quantile(values, weights, 0.9) == 3.0
    assert math.isnan(ttft_replay.weighted_quantile(values, np.zeros(3), 0.9))  # no request, no quantile


def test_the_flags_in_effect_replay_to_a_ratio_of_exactly_one() -> None:
    forecast = _ratio(0, _steady(40, 3000.0, 10.0))
    assert forecast.ratio == 1.0
    assert forecast.replay_seconds == forecast.replay_seconds_now > 0


def test_a_light_steady_load_never_queues_so_the_ratio_is_the_bare_stretch() -> None:
    trace = _steady(200, 15.0, 1.0)  # 15 ms of work per 15 s interval: no request ever waits at p90
    for n in (1, 2, 4):
        assert _ratio(n, trace).ratio == pytest.approx((C + n * D) / C, rel=1e-9)


def test_a_steady_moderate_load_queues_a_little_more_than_the_stretch_and_less_than_m_m_1() -> None:
    chunk, decode, tokens = 0.1, 0.02, 2000.0  # 20,000 tok/s of chunk-step time; N = 4 stretches x1.8
    load = 0.4
    trace = _steady(200, load * 20_000 * DT, 40.0)
    forecast = _ratio(4, trace, chunk, decode, tokens)
    stretch = (chunk + 4 * decode) / chunk
    assert forecast.load == pytest.approx(load * stretch)
    assert forecast.ratio is not None
    # equal prompts (all a counter trace can say) queue less than exponential ones
    assert stretch < forecast.ratio < predict.queued_ttft_ratio(4, 0, load, chunk, decode)


def test_the_same_mean_work_in_bursts_costs_more_than_spread_evenly() -> None:
    steady = _steady(200, 0.16 * TOKENS * DT, 20.0)
    bursty = _steady(200, 0.0, 20.0)
    bursty["work_tokens"][::5] = 0.8 * TOKENS * DT  # the same mean load, all of it in one interval of five
    n = 1
    steady_ratio, bursty_ratio = _ratio(n, steady).ratio, _ratio(n, bursty).ratio
    assert steady_ratio is not None and bursty_ratio is not None
    assert bursty_ratio > 1.5 * steady_ratio


def test_a_burst_that_overloads_the_server_leaves_the_known_backlog() -> None:
    # interval 1 brings 45 s of chunk-step work; intervals 2..9 bring probes that need no service.
    # A probe at t in [15, 135] waits max(0, 45 - t) now and max(0, 90 - t) at N = 2 (service x2):
    # p90 of waits uniform over the probes: (30 - x)/120 = 0.1 -> 18 s; (75 - x)/120 = 0.1 -> 63 s.
    trace = _steady(9, 0.0, 200.0)
    trace["work_tokens"][0] = 45 * TOKENS
    selected = np.arange(9) > 0
    jobs = ttft_replay.build_jobs(trace["times"], trace["work_tokens"], trace["requests"], trace["interval_seconds"],
                                  selected)
    assert ttft_replay.replay_quantile(jobs, TOKENS / C) == pytest.approx(18.0, abs=0.6)
    assert ttft_replay.replay_quantile(jobs, TOKENS / (C + 2 * D)) == pytest.approx(63.0, abs=0.6)
    forecast = _ratio(2, trace, selected=selected)
    assert forecast.ratio == pytest.approx(63.0 / 18.0, rel=0.05)
    assert forecast.selected_intervals == 8 and forecast.selected_requests == 1600


def test_a_stretched_capacity_below_the_mean_work_rate_is_unbounded_with_the_reason() -> None:
    trace = _steady(40, 0.6 * TOKENS * DT, 10.0)  # load 0.6 now, 1.2 at N = 2
    forecast = _ratio(2, trace)
    assert forecast.ratio == math.inf
    assert "never drains" in forecast.reason
    assert _ratio(1, trace).ratio is not None and math.isfinite(_ratio(1, trace).ratio or math.nan)


@pytest.mark.parametrize(("change", "reason"), [
    pytest.param({"work_tokens": None}, "prompt-token counter", id="no-prompt-counter"),
    pytest.param({"requests": None}, "TTFT histogram", id="no-ttft-histogram"),
    pytest.param({"selected": np.arange(40) < 3}, "too few busy intervals", id="three-busy-intervals"),
    pytest.param({"requests": np.full(40, 0.2)}, "too few busy intervals", id="no-requests-counted"),
    pytest.param({"chunk_tokens": math.nan}, "chunk tokens", id="no-chunk-tokens"),
    pytest.param({"chunk_step_seconds": 0.0}, "mean chunk step", id="zero-chunk-step"),
])
def test_missing_inputs_give_no_ratio_and_say_why(change: dict[str, object], reason: str) -> None:
    args: dict[str, object] = {**_steady(40, 3000.0, 10.0), "chunk_step_seconds": C, "decode_step_seconds": D,
                               "chunk_tokens": TOKENS, "interleaves": (0, 2), "selected": None, **change}
    for forecast in ttft_replay.replay_ttft_ratios(**args):  # type: ignore[arg-type]
        assert forecast.ratio is None
        assert reason in forecast.reason


def test_work_counted_without_a_request_still_occupies_the_server() -> None:
    trace = _steady(20, 0.0, 50.0)
    alone = _ratio(2, trace)
    trace["work_tokens"][::2] = 12 * TOKENS  # a long prompt's chunks, its first token counted elsewhere
    trace["requests"][::2] = 0.0
    blocked = _ratio(2, trace)
    assert alone.replay_seconds_now == 0.0 and alone.ratio is None  # probes that never wait have no ratio
    assert blocked.replay_seconds_now > 0 and blocked.ratio is not None and blocked.ratio > 1.0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.0, 0.9), min_size=12, max_size=40), st.integers(1, 30), st.integers(1, 6))
def test_the_replay_never_forecasts_less_than_the_bare_stretch(loads: list[float], requests: int, n: int) -> None:
    # FIFO waits only grow when every service time is scaled by s >= 1: W_N >= s * W_0 per request
    trace = _steady(len(loads), 0.0, float(requests))
    trace["work_tokens"] = np.array(loads) * TOKENS * DT * 0.3
    forecast = _ratio(n, trace, C, 0.1)
    if forecast.ratio is not None and math.isfinite(forecast.ratio):
        assert forecast.ratio >= (C + n * 0.1) / C - 1e-9
