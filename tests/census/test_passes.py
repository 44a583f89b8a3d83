"""Buckets, TTFT, ledger, lag, preemption and traps, each on data made for it."""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.buckets import assign_buckets, per_stream_rate
from pdcensus.census.run import census_recording
from pdcensus.series.quantile import quantile_of_bounds as histogram_quantile

from .synth import Synth, synth_recording


def _report(**kw):
    return census_recording(synth_recording(Synth(**kw)))[0]


def test_idle_threshold_is_a_fraction_of_the_busy_median_and_edges_come_from_the_data():
    prefill = np.concatenate([np.zeros(100), np.full(30, 1000.0), np.full(30, 2000.0), np.full(30, 4000.0)])
    a = assign_buckets(prefill)
    assert a.idle_threshold == pytest.approx(0.05 * 2000.0)
    assert (a.index[:100] == 0).all() and a.index[100:].min() == 1 and a.index.max() == 3
    assert a.edges[0] == a.idle_threshold and np.isinf(a.edges[-1])
    assert len(a.labels) == 4


def test_no_prefill_at_all_gives_only_an_idle_bucket():
    a = assign_buckets(np.zeros(50))
    assert a.labels == ("idle",) and a.busy.sum() == 0


def test_per_stream_rate_only_where_running_is_positive():
    out = per_stream_rate(np.array([100.0, 100.0]), np.array([4.0, 0.0]))
    assert out[0] == 25.0 and np.isnan(out[1])


@pytest.mark.parametrize("q,expected", [
    pytest.param(0.5, 1.5, id="interpolates-inside-a-bucket"),
    pytest.param(0.1, 0.4, id="first-bucket-starts-at-zero"),
    pytest.param(0.99, 2.0, id="rank-in-inf-bucket-gives-highest-finite-bound"),
])
def test_histogram_quantile_interpolates_as_prometheus(q, expected):
    bounds = np.array([1.0, 2.0, np.inf])
    assert histogram_quantile(q, bounds, np.array([1.0, 3.0, 4.0])) == pytest.approx(expected)


def test_histogram_quantile_of_an_empty_histogram_is_nan():
    assert np.isnan(histogram_quantile(0.9, np.array([1.0, np.inf]), np.array([0.0, 0.0])))


def test_ttft_of_a_busy_bucket_exceeds_the_idle_bucket():
    r = _report(mechanism="sharing", seed=3)
    idle, busiest = r.buckets.rows[0], r.buckets.rows[-1]
    assert busiest.ttft_p50_seconds > 3 * idle.ttft_p50_seconds
    assert idle.ttft_requests > 0


def test_ledger_phase_ratio_recovers_decode_and_chunk_steps():
    r = _report(mechanism="sharing", seed=4, chunk_step_seconds=0.25)
    assert r.ledger.decode_step_seconds == pytest.approx(0.015, rel=0.03)
    assert r.ledger.chunk_step_seconds == pytest.approx(0.25, rel=0.01)
    assert r.ledger.held_steps == 0
    assert r.ledger.mean_step_seconds < r.ledger.chunk_step_seconds / 3


def test_ledger_is_unavailable_on_1_0_13_and_says_why():
    r = census_recording(synth_recording(Synth(upgrade_at=400)), )[0]
    from pdcensus.census.run import CensusOptions
    old = census_recording(synth_recording(Synth(upgrade_at=400)), CensusOptions(segment=1))[0]
    assert r.ledger.available and not old.ledger.available
    assert "no decode-only step counters" in old.ledger.reason


def test_lag_test_finds_a_tail_after_eviction_and_none_after_sharing():
    ev = _report(mechanism="eviction", seed=5, session_every_seconds=900)
    sh = _report(mechanism="sharing", seed=5, session_every_seconds=900)
    assert ev.lag.tail_high < 0.9
    assert sh.lag.tail_low <= 1.0 <= sh.lag.tail_high or abs(sh.lag.tail_effect - 1) < 0.05


def test_lags_above_zero_compare_only_own_idle_scrapes_so_sharing_shows_no_tail():
    r = _report(mechanism="sharing", seed=6, session_seconds=300)
    later = [p for p in r.lag.points if p.lag_seconds > 0 and np.isfinite(p.effect)]
    assert later and all(p.effect > 0.9 for p in later)
    assert r.lag.points[0].effect < 0.5


def test_preemption_bursts_align_with_a_re_prefill_spike():
    r = _report(mechanism="preemption", seed=7)
    assert r.preemption.available and len(r.preemption.bursts) >= 5
    assert r.preemption.prefill_spike > 1.5
    assert r.preemption.total == pytest.approx(12 * sum(1 for _ in r.preemption.bursts), rel=0.5)


def test_preemption_without_the_counter_says_so():
    rec = synth_recording(Synth(mechanism="preemption", seed=7))
    ep = rec.endpoints[0]
    for i, k in enumerate(ep.keys):
        if k.name == "vllm:num_preemptions_total":
            ep.present[:, i] = False
    r = census_recording(rec)[0]
    assert not r.preemption.available and "instant preempted depth is not a count" in r.preemption.reason
    trap = {t.name: t for t in r.traps}["preemption-from-instant-depth"]
    assert trap.fired


def _traps(**kw):
    return {t.name: t for t in _report(**kw).traps}


def test_replay_trap_fires_and_client_new_buckets_appear():
    r = _report(mechanism="sharing", replay_share=0.5)
    assert {t.name: t for t in r.traps}["prefill-from-prefix-hit-cuts"].fired
    assert r.client_new_buckets is not None
    assert not _traps(mechanism="sharing")["prefill-from-prefix-hit-cuts"].fired


def test_step_over_30s_and_shapes_traps_fire_on_the_data():
    t = _traps(mechanism="sharing", interval_seconds=60.0, duration_seconds=14400)
    assert t["step-over-30s"].fired
    assert _traps(restart_at=200)["window-spans-shapes"].fired
    assert not _traps()["window-spans-shapes"].fired


def test_latency_trap_fires_when_vllm_latency_is_unscraped():
    rec = synth_recording(Synth())
    ep = rec.endpoints[0]
    for i, k in enumerate(ep.keys):
        if k.name.startswith("vllm:time_to_first_token"):
            ep.present[:, i] = False
    r = census_recording(rec)[0]
    assert {t.name: t for t in r.traps}["latency-under-radiance-prefix"].fired
    assert not r.ttft.available


def test_diluted_mean_step_fires_when_few_steps_carry_much_time():
    t = _traps(mechanism="sharing", chunk_step_seconds=0.6, session_every_seconds=1500, session_seconds=60)
    assert t["diluted-mean-step"].fired
