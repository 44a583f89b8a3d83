"""Arrival processes and length distributions produce what their parameters say."""

from __future__ import annotations

import random

import pytest

from pdcensus.sim.workload import ArrivalKind, Arrivals, Lengths


@pytest.mark.parametrize("kind", [ArrivalKind.POISSON, ArrivalKind.DIURNAL, ArrivalKind.PERIODIC])
def test_mean_arrival_rate_matches_the_rate(kind: ArrivalKind) -> None:
    times = list(Arrivals(kind, 2.0, amplitude=0.3).times(random.Random(1), 0.0, 86400.0))
    assert len(times) / 86400.0 == pytest.approx(2.0, rel=0.03)
    assert times == sorted(times)


def test_bursty_arrivals_come_in_bursts_above_the_calm_rate() -> None:
    spec = Arrivals(ArrivalKind.BURSTY, 0.5, burst_factor=4.0, burst_seconds=60.0, calm_seconds=240.0)
    times = list(spec.times(random.Random(2), 0.0, 20000.0))
    per_minute = [0] * 334
    for t in times:
        per_minute[int(t // 60)] += 1
    assert max(per_minute) >= 3 * 0.5 * 60
    calm_and_burst = (240 * 0.5 + 60 * 2.0) / 300
    assert len(times) / 20000.0 == pytest.approx(calm_and_burst, rel=0.25)


def test_lengths_are_clipped_and_centred_on_the_median() -> None:
    rng = random.Random(3)
    draws = sorted(Lengths(1000, 0.5, 100, 5000).sample(rng) for _ in range(4001))
    assert draws[0] >= 100 and draws[-1] <= 5000
    assert draws[2000] == pytest.approx(1000, rel=0.08)
