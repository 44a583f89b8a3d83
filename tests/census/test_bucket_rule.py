"""One "bucket on fixed edges" rule: the census, verify-arm and whatif put each scrape in the same bucket.

The input is crafted so that each old rule differed somewhere: a NaN and a negative prefill rate (verify-arm
counted a negative rate as idle), scrapes with no decoder running (no per-stream rate), and a background
window whose idle threshold is itself idle (verify-arm and whatif used ``<`` where the census used ``<=``).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from pdcensus.census.buckets import assign_buckets, assign_on_edges, bucket_table
from pdcensus.census.run import ShapeRead
from pdcensus.census.signals import ShapeSignals
from pdcensus.series.profiles import Signal, get_profile
from pdcensus.verify.arm import bucket_pair
from pdcensus.whatif.measure import measure

N = 120


def _signals(prefill: np.ndarray, running: np.ndarray, decode: np.ndarray) -> ShapeSignals:
    return ShapeSignals(times=np.arange(prefill.size) * 15.0, interval_seconds=np.full(prefill.size, 15.0),
                        scrape_interval_seconds=15.0, profile=get_profile("radiance-1.8"), names=frozenset(),
                        gauges={Signal.RUNNING: running}, decode_tokens_per_second=decode,
                        prefill_tokens_per_second=prefill)


def _read(s: ShapeSignals) -> ShapeRead:
    # whatif's measure reads only the signals and the scrape interval of the census's read
    return cast(ShapeRead, type("Read", (), {"signals": s, "scrape_interval_seconds": s.scrape_interval_seconds})())


def _window(background: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    prefill = (rng.lognormal(1.5, 0.2, N) if background else np.zeros(N))
    busy = rng.random(N) < 0.5
    prefill[busy] = rng.uniform(2_000, 9_000, busy.sum())
    prefill[[3, 40]] = np.nan, -3.0  # no rate, and a counter reset: neither is idle
    running = rng.integers(1, 9, N).astype(float)
    running[[5, 6, 60, 61]] = 0.0  # nobody decoding: bucketed by prefill, no per-stream rate
    decode = running * rng.uniform(20, 40, N)
    decode[7] = np.nan
    return prefill, running, decode


def _three_indices(before: tuple[np.ndarray, np.ndarray, np.ndarray],
                   after: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The after window's buckets on the before window's edges: the rule itself, verify-arm's, whatif's."""
    a = assign_buckets(before[0])
    rule = assign_on_edges(after, a.edges, idle_at_threshold=a.idle_at_threshold).index
    verify = bucket_pair(_signals(*before), _signals(after, *before[1:])).after_index
    figures = measure(_read(_signals(after, *before[1:])), a.edges, idle_at_threshold=a.idle_at_threshold)
    table = bucket_table(assign_on_edges(after, a.edges, idle_at_threshold=a.idle_at_threshold), after,
                         before[1], prefill_name="prefill", basis="", scrape_interval_seconds=15.0)
    assert [r.samples for r in figures.buckets] == [r.samples for r in table.rows]
    return rule, verify, figures.idle_samples


@pytest.mark.parametrize("background", [False, True], ids=["idle-at-zero", "background-prefill"])
def test_the_census_verify_arm_and_whatif_bucket_a_window_alike(background: bool) -> None:
    w = _window(background)
    a = assign_buckets(w[0])
    assert a.idle_at_threshold is background
    assert (a.index[[3, 40]] == -1).all()  # NaN and negative prefill count nowhere
    assert a.index[[5, 6, 60, 61]].min() >= 0  # no decoder running: still bucketed by its prefill
    pair = bucket_pair(_signals(*w), _signals(*w))
    np.testing.assert_array_equal(pair.before_index, a.index)
    np.testing.assert_array_equal(pair.after_index, a.index)
    mine = bucket_table(a, w[2], w[1], prefill_name="prefill", basis="", scrape_interval_seconds=15.0)
    assert [(r.samples, r.per_stream_samples) for r in pair.before.rows] == \
        [(r.samples, r.per_stream_samples) for r in mine.rows]
    for own in (measure(_read(_signals(*w))), measure(_read(_signals(*w)), a.edges,
                                                      idle_at_threshold=a.idle_at_threshold)):
        assert own.edges_tokens_per_second == a.edges
        assert [(r.samples, r.per_stream_samples) for r in own.buckets] == \
            [(r.samples, r.per_stream_samples) for r in mine.rows]
        assert own.idle_samples == int((a.index == 0).sum())


def test_a_scrape_at_the_background_ceiling_is_idle_for_every_caller() -> None:
    w = _window(background=True)
    a = assign_buckets(w[0])
    after = w[0].copy()
    after[10] = a.idle_threshold  # exactly on the census's background ceiling
    rule, verify, whatif_idle = _three_indices(w, after)
    assert rule[10] == 0
    np.testing.assert_array_equal(verify, rule)
    assert whatif_idle == int((rule == 0).sum())


def test_edges_without_a_busy_bucket_put_every_busy_scrape_in_one_open_bucket() -> None:
    a = assign_on_edges(np.array([0.0, 0.5, 3.0, 9_000.0, np.nan, -1.0]), (2.0,))
    assert a.index.tolist() == [0, 0, 1, 1, -1, -1]
    assert a.labels == ("idle", "2-inf tok/s")
    assert a.busy.tolist() == [False, False, True, True, False, False]


def test_edges_from_a_window_with_no_busy_scrape_put_another_windows_busy_scrapes_in_one_open_bucket() -> None:
    # the before window never prefilled: its edges are the idle threshold alone; the after window prefills
    (threshold,) = assign_buckets(np.zeros(N)).edges
    after = np.where(np.arange(N) % 3 == 0, 500.0, 0.0)
    a = assign_on_edges(after, (threshold,))
    table = bucket_table(a, np.full(N, 40.0), np.full(N, 2.0), prefill_name="prefill", basis="",
                         scrape_interval_seconds=1.0)
    idle, busy = table.rows
    assert (idle.samples, busy.samples) == (80, 40)
    assert busy.low_tokens_per_second == threshold and busy.high_tokens_per_second == np.inf
