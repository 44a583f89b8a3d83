"""Prefill in progress from vLLM's completion-time prompt counter (pdcensus.census.prefill_progress).

Unit checks of the spread and of the admission-to-completion matching on counts whose truth is
known by construction, then the simulator's own truth: the same run exported with radiance's
names counts prefill as it is computed, under vLLM's names when it ends; the reconstruction
from the vLLM export must follow the computed prefill far better than the raw counter does.
"""

from __future__ import annotations

import numpy as np
import pytest

from pdcensus.census.prefill_progress import (
    ComputedSource,
    PrefillBasis,
    admission_to_completion,
    computed_prefill,
    measured_speed,
    reconstruct,
    spread_back,
)
from pdcensus.census.run import read_shape
from pdcensus.series.profiles import Signal
from pdcensus.sim import simulate


def test_spread_back_moves_a_jump_into_the_polls_before_it_at_the_given_speed() -> None:
    tokens = np.zeros(10)
    tokens[8] = 3500.0  # one prompt counted in poll 8
    out = spread_back(tokens, np.ones(10), speed=1000.0)
    assert np.isnan(out[0])
    np.testing.assert_allclose(out[1:], [0, 0, 0, 0, 500, 1000, 1000, 1000, 0])
    assert np.nansum(out) == pytest.approx(3500.0)


def test_spread_back_shares_one_budget_between_overlapping_prefills() -> None:
    tokens = np.zeros(8)
    tokens[6], tokens[7] = 2000.0, 2000.0
    out = spread_back(tokens, np.ones(8), speed=1000.0)
    assert np.nanmax(out) <= 1000.0 + 1e-9  # never faster than the engine
    np.testing.assert_allclose(out[4:], [1000, 1000, 1000, 1000])


def test_measured_speed_is_the_best_window_mean_not_a_single_jump() -> None:
    t = np.arange(400.0)
    tokens = np.zeros(400)
    tokens[10:400:20] = 20000.0  # 20k every 20 s: 1000 tok/s sustained, 20k in one poll
    speed = measured_speed(t, tokens, 60.0)
    assert 900.0 < speed < 1400.0


def test_admission_to_completion_spreads_each_prompt_between_its_two_counts() -> None:
    t = np.arange(12.0)
    admitted, completed = np.zeros(12), np.zeros(12)
    admitted[2], completed[6] = 4000.0, 4000.0  # admitted in (1, 2], counted in (5, 6]
    out = admission_to_completion(t, admitted, completed, np.ones(12))
    assert np.nansum(out) == pytest.approx(4000.0)
    assert np.nansum(out[3:6]) > 0.6 * 4000.0  # mostly in the polls where the counter was flat
    assert np.nansum(out[7:]) == pytest.approx(0.0) and np.nansum(out[:2]) == pytest.approx(0.0)


def test_computed_prefill_prefers_local_compute_then_a_once_counted_miss_share() -> None:
    prompt = np.array([np.nan, 1000.0, 0.0, 3000.0])
    local = np.array([np.nan, 100.0, 0.0, 300.0])
    c, src, share, _ = computed_prefill(prompt, local, None, None)
    assert src is ComputedSource.LOCAL_COMPUTE and share == pytest.approx(0.1)
    q, h = np.array([np.nan, 4000.0, 0.0, 0.0]), np.array([np.nan, 3000.0, 0.0, 0.0])
    c, src, share, qpp = computed_prefill(prompt, None, h, q)
    assert src is ComputedSource.MISS_SHARE and share == pytest.approx(0.25) and qpp == pytest.approx(1.0)
    q_retried = q * 50  # a waiting request looked up on every admission attempt
    c, src, share, qpp = computed_prefill(prompt, None, h * 50, q_retried)
    assert src is ComputedSource.ALL_PROMPT and np.isnan(share) and qpp == pytest.approx(50.0)


def test_reconstruct_names_its_basis_and_what_it_cannot_see() -> None:
    t = np.arange(200.0)
    dt = np.r_[np.nan, np.diff(t)]
    prompt = np.zeros(200)
    prompt[50:200:30] = 30000.0
    p = reconstruct(t, dt, prompt, completion_time=True, waiting=np.zeros(200))
    assert p.basis is PrefillBasis.SPREAD_BACK and p.speed_is_lower_bound
    assert p.hidden_share > 0.5
    assert any("lower bound" in c for c in p.cannot_see) and p.hint is not None
    assert reconstruct(t, dt, prompt, completion_time=False).basis is PrefillBasis.COUNTER_AS_COMPUTED


@pytest.mark.parametrize("scenario", ["step-time-sharing", "eviction-tail"])
def test_reconstruction_follows_the_simulators_computed_prefill(scenario: str) -> None:
    truth_rec = simulate(scenario, duration_seconds=900, seed=1, profile="radiance", scrape_interval_seconds=1.0)
    vllm_rec = simulate(scenario, duration_seconds=900, seed=1, profile="vllm", scrape_interval_seconds=1.0)
    a, b = truth_rec.recording, vllm_rec.recording
    sa = read_shape(a.endpoints[0], a.families, "radiance").signals
    sb = read_shape(b.endpoints[0], b.families, "vllm").signals
    inc = sa.increase(Signal.PROMPT_TOKENS)
    assert inc is not None and sb.prefill_progress is not None
    truth = inc / sa.interval_seconds  # radiance's counter moves as chunks are computed
    p = sb.prefill_progress
    assert p.basis is PrefillBasis.ADMISSION_TO_COMPLETION
    n = min(truth.size, p.tokens_per_second.size)
    ok = np.isfinite(truth[:n]) & np.isfinite(p.tokens_per_second[:n]) & np.isfinite(p.raw_tokens_per_second[:n])
    rec = np.corrcoef(truth[:n][ok], p.tokens_per_second[:n][ok])[0, 1]
    raw = np.corrcoef(truth[:n][ok], p.raw_tokens_per_second[:n][ok])[0, 1]
    assert rec > 0.8 and rec > raw + 0.3


@pytest.mark.parametrize(("profile", "basis"), [
    ("radiance", PrefillBasis.GAUGE),
    ("vllm", PrefillBasis.ADMISSION_TO_COMPLETION),
    ("sglang", PrefillBasis.COUNTER_AS_COMPUTED),  # realtime_tokens_total{mode="prefill_compute"}
    ("tgi", PrefillBasis.ARRIVAL_COUNTER),  # input length observed at validation
])
def test_each_engine_says_what_its_prefill_signal_is(profile: str, basis: PrefillBasis) -> None:
    rec = simulate("healthy", duration_seconds=1800, seed=0, profile=profile).recording
    s = read_shape(rec.endpoints[0], rec.families, profile).signals
    assert s.prefill_basis is basis
    assert (s.prefill_progress is not None) == (profile == "vllm")


def test_a_v1_engine_under_the_old_names_is_still_read_as_counting_at_completion() -> None:
    from pdcensus.series.model import Endpoint, Family, SeriesKey

    rec = simulate("step-time-sharing", duration_seconds=900, seed=1, profile="vllm",
                   scrape_interval_seconds=1.0).recording
    old = {"vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
           "vllm:prefix_cache_queries_total": "vllm:gpu_prefix_cache_queries_total",
           "vllm:prefix_cache_hits_total": "vllm:gpu_prefix_cache_hits_total",
           "vllm:inter_token_latency_seconds_bucket": "vllm:time_per_output_token_seconds_bucket"}
    ep = rec.endpoints[0]
    keys = [SeriesKey(old.get(k.name, k.name), k.labels) for k in ep.keys]
    renamed = Endpoint(ep.job, ep.instance, ep.timestamps, keys, ep.values, ep.present)
    fams = {n: f for n, f in rec.families.items()}
    fams["vllm:gpu_cache_usage_perc"] = Family("vllm:gpu_cache_usage_perc", fams["vllm:kv_cache_usage_perc"].type, "")
    read = read_shape(renamed, fams, "vllm 0.9")
    assert read.detection.profile.name == "vllm-v0"
    assert read.signals.prefill_basis is PrefillBasis.ADMISSION_TO_COMPLETION
    assert read.signals.prefill_progress is not None


def test_the_requests_own_prefill_rate_raises_a_speed_the_window_underestimates() -> None:
    t = np.arange(300.0)
    dt = np.r_[np.nan, np.diff(t)]
    prompt = np.zeros(300)
    prompt[100], prompt[250] = 40000.0, 40000.0  # two long prompts, the engine idle otherwise
    slow = reconstruct(t, dt, prompt, completion_time=True, waiting=np.zeros(300))
    seconds, tokens = np.zeros(300), np.zeros(300)
    seconds[150], tokens[150] = 4.0, 40000.0  # the first request's histograms: 40k tokens in 4 s
    fast = reconstruct(t, dt, prompt, completion_time=True, waiting=np.zeros(300),
                       request_prefill_seconds=seconds, request_prefill_tokens=tokens)
    assert fast.speed_tokens_per_second == pytest.approx(10000.0)
    assert slow.speed_tokens_per_second < 2000.0
    busy = np.nan_to_num(fast.tokens_per_second) > 0
    assert busy.sum() == 8  # 4 s before each count, not spread over a minute


def test_re_prefill_after_preemptions_fills_polls_no_token_counter_carries() -> None:
    t = np.arange(120.0)
    dt = np.r_[np.nan, np.diff(t)]
    prompt = np.zeros(120)
    prompt[20:120:20] = 5000.0
    gen, fin = np.full(120, 100.0), np.zeros(120)
    fin[20:120:20] = 1.0
    pre = np.zeros(120)
    pre[70] = 2.0  # two requests resumed and emitted a token in poll 70
    base = reconstruct(t, dt, prompt, completion_time=True, waiting=np.ones(120))
    with_re = reconstruct(t, dt, prompt, completion_time=True, waiting=np.ones(120), preemptions=pre,
                          generation=gen, finished=fin)
    context = (5 * 5000.0 + 0.5 * 100.0 * 120) / 5
    added = np.nansum(with_re.tokens_per_second) - np.nansum(base.tokens_per_second)
    assert added == pytest.approx(2 * context)
    assert 0 < with_re.reprefill_share < 1 and any("re-prefill" in c for c in with_re.cannot_see)
    moved = np.nan_to_num(with_re.tokens_per_second) - np.nan_to_num(base.tokens_per_second)
    assert moved[71:].sum() == pytest.approx(0.0) and moved[:71].sum() > 0  # placed before the count, never after
