"""Preemption stalls without a preempted-depth gauge: read from the waiting queue's excess."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.buckets import assign_buckets
from pdcensus.census.preemption import preemption_bursts

N_SCRAPES = 120
SCRAPE_SECONDS = 15.0
RUNNING = 20.0
BURSTS = (20, 60, 100)  # scrapes where the preemption counter increases


def _series(parked: float, parked_scrapes: int, base_waiting: float = 2.0) -> dict[str, np.ndarray]:
    """Steady decode (the batch refills at once, so decode never dips); each burst parks
    ``parked`` sequences in the waiting queue for ``parked_scrapes`` scrapes."""
    times = np.arange(N_SCRAPES) * SCRAPE_SECONDS
    increases = np.zeros(N_SCRAPES)
    waiting = np.full(N_SCRAPES, base_waiting)
    for b in BURSTS:
        increases[b] = parked
        waiting[b:b + parked_scrapes] += parked
    return {"times": times, "increases": increases, "waiting": waiting,
            "decode": np.full(N_SCRAPES, 600.0), "prefill": np.zeros(N_SCRAPES),
            "running": np.full(N_SCRAPES, RUNNING), "dt": np.full(N_SCRAPES, SCRAPE_SECONDS)}


def _share(s: dict[str, np.ndarray], with_waiting: bool) -> tuple[float, str]:
    _, loss = preemption_bursts(s["times"], s["increases"], s["decode"], s["prefill"], assign_buckets(s["prefill"]),
                                None, s["running"], s["dt"], np.ones((1, N_SCRAPES)), "vllm:num_preemptions_total",
                                waiting=s["waiting"] if with_waiting else None)
    return float(loss.share[0]), loss.basis


def test_a_stall_longer_than_a_scrape_is_integrated_from_the_queue_excess() -> None:
    parked, scrapes = 4.0, 8
    share, basis = _share(_series(parked, scrapes), with_waiting=True)
    stalled = len(BURSTS) * scrapes * parked
    expected = stalled / (N_SCRAPES * RUNNING + stalled)
    assert share == pytest.approx(expected)
    assert "waiting queue" in basis


def test_without_a_waiting_gauge_the_stall_is_only_the_decode_deficit() -> None:
    share, basis = _share(_series(4.0, 8), with_waiting=False)
    assert share == 0.0  # decode never dipped: the deficit sees nothing
    assert basis.startswith("decode deficit")


def test_a_queue_that_does_not_rise_after_bursts_adds_no_stall() -> None:
    share, basis = _share(_series(0.0, 8), with_waiting=True)
    assert share == 0.0
    assert basis.startswith("decode deficit")


def test_arrivals_queued_all_the_time_are_not_counted_as_stalled() -> None:
    low, _ = _share(_series(4.0, 8, base_waiting=0.0), with_waiting=True)
    high, _ = _share(_series(4.0, 8, base_waiting=30.0), with_waiting=True)
    assert abs(low - high) < 1e-9
