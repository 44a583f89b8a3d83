"""The series math under random counters: the increase is the sum of the positive steps, resets from zero.

A counter is built from random non-negative steps with random resets (after a reset it
counts again from zero, as a restarted process does). What a scraper sees is that
counter at each scrape; the increase it can know is the sum, over consecutive scrapes,
of ``v[i] - v[i-1]`` where the value went up, and of ``v[i]`` where it went down (a reset:
the counter restarted from zero, as Prometheus assumes). Both implementations must give
exactly that: the census's per-interval increases (``pdcensus.series.increases``; a missed
sample's delta shared over the intervals it spans) summed,
and PromQL's ``increase`` (``pdcensus.series.promql.counters``) over a window that
starts and ends on a sample (2.x rules: nothing to extrapolate). Under 3.x rules the
window is left-open, so it starts a millisecond before the first sample and the result
may be extrapolated by at most that millisecond's share. Prometheus's extrapolation is
checked on its own against cases computed by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdcensus.series.increases import interval_increase, summed_increase
from pdcensus.series.promql.counters import counter_increase, counter_rate

T0 = 1_793_491_200.0


@st.composite
def scraped_counter(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(scrape times, values, present)`` of one counter with random steps, resets and missed scrapes."""
    n = draw(st.integers(2, 120))
    steps = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(0, 1e6), st.integers(0, 50).map(float)),
                                   min_size=n, max_size=n)))
    resets = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))) & (
        np.array(draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))) == 0)
    values, total = np.empty(n), draw(st.floats(0, 1e9))
    for i in range(n):
        total = steps[i] if (resets[i] and i) else total + (steps[i] if i else 0.0)
        values[i] = total
    present = np.array(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))) > 0
    present[0] = present[-1] = True
    gaps = np.array(draw(st.lists(st.sampled_from([15.0, 15.0, 14.2, 16.9, 30.0, 60.0]), min_size=n, max_size=n)))
    times = T0 + np.round(np.cumsum(gaps), 3)
    return times, values, present


def positive_steps_with_resets(values: np.ndarray) -> float:
    """The increase a scraper can know: rises as they are, a fall as a restart from zero."""
    total = 0.0
    for previous, current in zip(values[:-1], values[1:]):
        total += current - previous if current >= previous else current
    return total


@settings(max_examples=60, deadline=None)
@given(scraped_counter())
def test_the_census_interval_increases_sum_to_the_positive_steps_counting_resets_from_zero(
        counter: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    times, values, present = counter
    increase, valid = interval_increase(values, present, times)
    expected = positive_steps_with_resets(values[present])
    assert int(valid.sum()) == values.size - 1  # a missed sample's intervals share its neighbours' delta
    assert math.isclose(float(np.nansum(increase[valid])), expected, rel_tol=1e-9, abs_tol=1e-6)
    assert (increase[valid] >= 0).all()
    split = np.stack([values, values], axis=1)  # one logical counter over two label sets: twice the increase
    both = summed_increase(split, np.stack([present, present], axis=1))
    assert math.isclose(float(np.nansum(both)), 2 * expected, rel_tol=1e-9, abs_tol=1e-6)


@settings(max_examples=60, deadline=None)
@given(scraped_counter())
def test_promql_increase_over_a_window_on_its_samples_is_the_positive_steps_counting_resets(
        counter: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    times, values, present = counter
    t, v = times[present], values[present]
    expected = positive_steps_with_resets(v)
    exact = counter_increase(t, v, float(t[0]), float(t[-1]), semantics=2)
    assert math.isclose(exact, expected, rel_tol=1e-9, abs_tol=1e-6)
    left_open = counter_increase(t, v, float(t[0]) - 0.001, float(t[-1]), semantics=3)
    sampled_seconds = float(t[-1] - t[0])
    assert expected - 1e-6 <= left_open + 1e-9 * abs(expected)
    assert left_open <= expected * (sampled_seconds + 0.001) / sampled_seconds + 1e-6


# Samples every 10 s at t = 10, 20, 30, 40; Prometheus's extrapolatedRate worked by hand.
HAND_TIMES = [T0 + 10, T0 + 20, T0 + 30, T0 + 40]


@pytest.mark.parametrize(("values", "start", "end", "semantics", "expected"), [
    # 3 counted over 30 s of samples; 10 s to either edge (< 1.1 intervals): extend to 50 s -> 3 * 50/30
    pytest.param([1, 2, 3, 4], T0, T0 + 50, 3, 5.0, id="both-edges-extrapolated"),
    # first value 0.5 would reach zero 5 s before the first sample: the start is clamped there -> 3 * 45/30
    pytest.param([0.5, 1.5, 2.5, 3.5], T0, T0 + 50, 3, 4.5, id="clamped-at-the-counter-zero-point"),
    # start 110 s before the first sample (>= 1.1 intervals): 3.x extends only half an interval -> 3 * 45/30
    pytest.param([1, 2, 3, 4], T0 - 100, T0 + 50, 3, 4.5, id="3x-far-start-is-half-an-interval"),
    # 2.x clamps to the zero point first (10 s), which is then under the threshold -> 3 * 50/30
    pytest.param([1, 2, 3, 4], T0 - 100, T0 + 50, 2, 5.0, id="2x-zero-point-before-threshold"),
    # 2 -> 4 -> 1 -> 2: +2, a reset (the 1 counted from zero), +1 = 4 over [10, 40] -> 4 * 50/30
    pytest.param([2, 4, 1, 2], T0, T0 + 50, 3, 20 / 3, id="reset-counts-from-zero"),
    # the window on the samples exactly (2.x, closed): no extrapolation at all
    pytest.param([1, 2, 3, 4], T0 + 10, T0 + 40, 2, 3.0, id="window-on-the-samples"),
])
def test_prometheus_extrapolation_matches_hand_computed_cases(
        values: list[float], start: float, end: float, semantics: int, expected: float) -> None:
    assert counter_increase(HAND_TIMES, values, start, end, semantics) == pytest.approx(expected, rel=1e-12)


def test_rate_is_the_extrapolated_increase_over_the_window_length() -> None:
    increase = counter_increase(HAND_TIMES, [1, 2, 3, 4], T0, T0 + 50)
    assert counter_rate(HAND_TIMES, [1, 2, 3, 4], T0, T0 + 50) == pytest.approx(increase / 50.0, rel=1e-12)


def test_fewer_than_two_samples_in_the_window_have_no_increase() -> None:
    assert math.isnan(counter_increase(HAND_TIMES, [1, 2, 3, 4], T0 + 35, T0 + 45))
