"""Counter math helpers agree with hand-worked Prometheus extrapolation and window rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdcensus.series.promql import counter_increase, counter_rate, gauge_delta
from pdcensus.series.promql.counters import count_changes, count_resets, instant_change

TS = [0.0, 15.0, 30.0, 45.0, 60.0]


def test_increase_over_a_full_window_adds_the_value_before_each_reset() -> None:
    values = [0.0, 10.0, 20.0, 5.0, 15.0]  # reset after 20: increase 20 + 15
    # samples at 15..60 in (0, 60]: first 10, increase 10 + 5 + 10 = 25 over 45 s, extrapolated to 60 s
    # start gap 15 s <= 1.1 * 15 s, but the zero point (10 / 25 * 45 s = 18 s) is further: keep 15 s.
    assert counter_increase(TS, values, 0.0, 60.0) == pytest.approx(25 * 60 / 45)


def test_semantics_2_closes_the_window_on_the_left() -> None:
    values = [100.0, 110.0, 120.0, 130.0, 140.0]
    left_open = counter_increase(TS, values, 0.0, 60.0, semantics=3)   # 4 samples (15..60)
    closed = counter_increase(TS, values, 0.0, 60.0, semantics=2)      # 5 samples (0..60)
    assert closed == pytest.approx(40.0)                               # no extrapolation needed
    assert left_open == pytest.approx(30.0 * 60 / 45)


def test_zero_point_clamp_limits_extrapolation_of_a_young_counter() -> None:
    # counter starts at 1 and rises 10 per 5 m: zero is 30 s before the first sample
    ts = [300.0 * i for i in range(11)]
    values = [1.0 + 10.0 * i for i in range(11)]
    assert counter_increase(ts, values, -3000.0, 3000.0) == pytest.approx(101.0)


def test_rate_divides_by_the_window_length_not_the_sampled_span() -> None:
    values = [0.0, 15.0, 30.0, 45.0, 60.0]
    assert counter_rate(TS, values, 0.0, 60.0) == pytest.approx(counter_increase(TS, values, 0.0, 60.0) / 60)


def test_fewer_than_two_samples_give_nan() -> None:
    assert math.isnan(counter_increase([10.0], [1.0], 0.0, 60.0))
    assert math.isnan(gauge_delta([], [], 0.0, 60.0))


def test_delta_does_not_treat_a_drop_as_a_reset() -> None:
    assert gauge_delta([0.0, 30.0, 60.0], [10.0, 4.0, 1.0], -1.0, 60.0, semantics=2) < 0


def test_irate_uses_the_last_two_samples_and_the_value_after_a_reset() -> None:
    ts = np.array([0, 15_000, 30_000], dtype=np.int64)
    assert instant_change(ts, np.array([0.0, 30.0, 60.0]), is_rate=True) == pytest.approx(2.0)
    assert instant_change(ts, np.array([0.0, 30.0, 6.0]), is_rate=True) == pytest.approx(0.4)
    assert instant_change(ts, np.array([0.0, 30.0, 6.0]), is_rate=False) == pytest.approx(-24.0)


def test_resets_and_changes_count_what_they_name() -> None:
    values = np.array([1.0, 2.0, 0.0, 0.0, 3.0, 1.0, math.nan, math.nan])
    assert count_resets(values) == 2
    assert count_changes(values) == 5
