"""The engine's histograms bin pending observations in bulk; the numbers must be those of binning one by one.

A reference histogram here bins each observation as it comes (``bisect`` plus a left-to-right
sum), and is read at the same instants as the simulator's :class:`Histogram`, which defers the
work to ``settle`` or to the rows of its marks. Sums are compared bit for bit: a recording
written before and after must be the same bytes.
"""

from __future__ import annotations

import bisect
import math
import random

import pytest

from pdcensus.sim.metrics_state import (
    BULK_OBSERVATIONS,
    INTER_TOKEN_BOUNDS,
    PENDING_LIMIT,
    DecayedRate,
    Histogram,
)


class Reference:
    """Binning one observation at a time, as the histogram once did."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0.0] * (len(bounds) + 1)
        self.total = 0.0
        self.count = 0.0

    def observe(self, value: float, times: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += times
        self.total += value * times
        self.count += times

    def row(self) -> list[float]:
        out, running = [], 0.0
        for c in self.counts:
            running += c
            out.append(running)
        return [*out, self.count, self.total]


def _stream(rng: random.Random, n: int, whole: bool) -> list[tuple[float, float]]:
    out = []
    for _ in range(n):
        value = rng.choice((rng.uniform(0.001, 0.2), rng.uniform(0.2, 100.0), 0.05, 0.025))
        times = float(rng.randint(1, 4000)) if whole else rng.uniform(0.1, 3.0)
        out.append((value, times))
    return out


@pytest.mark.parametrize("whole", [True, False], ids=["whole-weights", "fractional-weights"])
@pytest.mark.parametrize("gap", [1, 7, BULK_OBSERVATIONS + 5, 400])
def test_rows_at_marks_equal_reading_at_those_instants_bit_for_bit(whole: bool, gap: int) -> None:
    rng = random.Random(gap * 2 + whole)
    hist, ref = Histogram(INTER_TOKEN_BOUNDS), Reference(INTER_TOKEN_BOUNDS)
    expected, marks = [], []
    for i, (value, times) in enumerate(_stream(rng, 3 * PENDING_LIMIT // 2, whole)):
        hist.observe(value, times)
        ref.observe(value, times)
        if i % gap == 0:
            marks.append(hist.mark())
            expected.append(ref.row())
    marks.append(hist.mark())  # a mark with nothing pending since the last one
    expected.append(ref.row())
    rows = hist.snapshot_rows()
    assert marks == list(range(len(expected)))
    assert rows.shape == (len(expected), len(INTER_TOKEN_BOUNDS) + 3)
    assert [list(map(float, r)) for r in rows] == expected  # exact, not approximate
    assert hist.cumulative() == expected[-1][:-2]
    assert (hist.count, hist.total) == (ref.count, ref.total)


def test_reading_between_observations_settles_what_is_pending_exactly() -> None:
    rng = random.Random(5)
    hist, ref = Histogram(INTER_TOKEN_BOUNDS), Reference(INTER_TOKEN_BOUNDS)
    for block in (3, BULK_OBSERVATIONS, 1, 2 * BULK_OBSERVATIONS + 1, PENDING_LIMIT + 9):
        for value, times in _stream(rng, block, whole=True):
            hist.observe(value, times)
            ref.observe(value, times)
        assert hist.counts == ref.counts
        assert hist.total == ref.total and hist.count == ref.count


def test_a_nan_value_is_binned_as_one_at_a_time_binning_does() -> None:
    hist, ref = Histogram(INTER_TOKEN_BOUNDS), Reference(INTER_TOKEN_BOUNDS)
    for i in range(2 * BULK_OBSERVATIONS):
        value = math.nan if i == 17 else 0.01 * (i + 1)
        hist.observe(value, 2.0)
        ref.observe(value, 2.0)
    assert hist.counts == ref.counts and hist.count == ref.count
    assert math.isnan(hist.total) and math.isnan(ref.total)


def test_observations_of_no_weight_are_ignored() -> None:
    hist = Histogram(INTER_TOKEN_BOUNDS)
    hist.observe(0.3, 0)
    hist.observe(0.3, -2)
    assert hist.count == 0.0 and hist.total == 0.0 and sum(hist.counts) == 0.0


def test_setting_a_rate_on_a_settled_gauge_keeps_the_closed_form() -> None:
    gauge = DecayedRate(tau_seconds=1.0)
    gauge.set_rate(0.0, 100.0)
    gauge.set_rate(2.0, 40.0)
    expected = 100.0 + (0.0 - 100.0) * math.exp(-2.0)
    assert gauge.value_at(2.0) == expected
    assert gauge.value_at(3.0) == 40.0 + (expected - 40.0) * math.exp(-1.0)
    settled = DecayedRate(ref_value=40.0, rate=40.0)
    settled.set_rate(5.0, 10.0)
    assert settled.value_at(5.0) == 40.0 and settled.value_at(6.0) == 10.0 + 30.0 * math.exp(-1.0)


def test_marks_with_no_observation_pending_keep_the_counts_so_far() -> None:
    hist = Histogram((0.1, 1.0))
    hist.observe(0.5, 3)
    hist.settle()
    rows = [hist.mark(), hist.mark()]  # two scrapes of a quiet histogram: nothing observed since
    table = hist.snapshot_rows()
    assert [list(table[r]) for r in rows] == [[0.0, 3.0, 3.0, 3.0, 1.5]] * 2
