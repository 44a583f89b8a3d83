"""Every scenario's truth is the intended one, with margin, from the engine's own accounting."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest

from pdcensus.sim import list_scenarios, randomize, simulate
from pdcensus.sim.run import SimResult
from pdcensus.mechanism import DOMINANT_SHARE, MATERIAL_SHARE
from pdcensus.sim.truth import ALLOWED_SHARE_OF_DECODE

DURATION = 2400.0
# scenario -> (headline, the material mechanisms); minor ones may be found beside them
INTENDED = {
    "step-time-sharing": ("step-time-sharing", ["step-time-sharing"]),
    "protected": ("step-time-sharing", ["step-time-sharing"]),
    "noisy-scrapes": ("step-time-sharing", ["step-time-sharing"]),
    "self-made-prefill": ("step-time-sharing", ["step-time-sharing"]),
    "eviction-tail": ("eviction", ["eviction"]),
    "preemption-stall": ("preemption-stall", ["preemption-stall"]),
    "mixed": ("mixed", ["eviction", "preemption-stall"]),
    "overloaded": ("preemption-stall", ["preemption-stall"]),  # and over capacity: see the capacity truth
    "healthy": ("step-time-sharing", []),
    "chunking-overhead": ("none", []),
    "idle": ("inconclusive", []),
    "upgrade": ("step-time-sharing", ["step-time-sharing"]),
}


@lru_cache(maxsize=None)
def run(name: str, seed: int = 0, profile: str = "radiance") -> SimResult:
    return simulate(name, duration_seconds=DURATION, seed=seed, profile=profile)


def test_every_listed_scenario_has_an_intended_truth() -> None:
    assert {name for name, _ in list_scenarios()} == set(INTENDED)


@pytest.mark.parametrize("name", sorted(INTENDED))
def test_each_scenarios_truth_is_the_intended_one_with_margin(name: str) -> None:
    truth = run(name).truth
    mechanism, dominant = INTENDED[name]
    assert truth["mechanism"] == mechanism
    assert truth["dominant"] == dominant
    assert set(dominant) <= set(truth["mechanisms"]) == {f["mechanism"] for f in truth["found"]}
    assert all(f["severity"] == ("material" if f["mechanism"] in dominant else "minor") for f in truth["found"])
    share, of_lost = truth["loss_share"], truth["loss_share_of_lost"]
    for cause in dominant:  # far above both thresholds
        assert share[cause] >= 2 * MATERIAL_SHARE
        assert of_lost[cause] >= 1.5 * DOMINANT_SHARE
    for cause, value in share.items():  # the others clearly fail one threshold
        if cause not in dominant and mechanism != "inconclusive":
            assert value <= 0.8 * MATERIAL_SHARE or of_lost[cause] <= 0.9 * DOMINANT_SHARE


def test_healthy_sharing_is_found_minor_far_below_the_material_line() -> None:
    truth = run("healthy").truth
    assert truth["loss_share"]["step-time-sharing"] <= MATERIAL_SHARE / 2.5
    assert truth["loss_share"]["step-time-sharing"] >= ALLOWED_SHARE_OF_DECODE
    (found,) = truth["found"]
    assert found["mechanism"] == "step-time-sharing" and found["severity"] == "minor" and found["depth"] < 0.85


def test_chunking_overhead_alone_is_no_collapse() -> None:
    truth = run("chunking-overhead").truth
    assert truth["found"] == [] and truth["mechanism"] == "none"
    assert 1.05 <= truth["chunk_step_seconds"] / truth["decode_step_seconds"] <= 1.2


def test_self_made_prefill_is_dominated_by_prefix_hit_replay() -> None:
    truth = run("self-made-prefill").truth
    assert truth["prefix_hit_cut_share"] >= 0.5


def test_protected_holds_steps_and_the_mechanism_stays_step_time_sharing() -> None:
    assert run("protected").truth["held_steps"] > 0
    assert run("step-time-sharing").truth["held_steps"] == 0


def test_upgrade_truth_is_the_last_segments_and_each_segment_has_its_own() -> None:
    truth = run("upgrade").truth
    assert [(s["build"], s["mechanism"]) for s in truth["segments"]] == [
        ("1.0.13", "eviction"), ("1.8.3", "step-time-sharing")]
    assert truth["build"] == "1.8.3"
    assert len(truth["restarts"]) == 1


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_randomized_calibrations_keep_clear_cut_truths(seed: int) -> None:
    perturbation = randomize(seed)
    assert randomize(seed) == perturbation
    for name in ("step-time-sharing", "eviction-tail", "chunking-overhead"):
        truth = simulate(name, duration_seconds=1800.0, seed=seed, perturbation=perturbation).truth
        assert truth["mechanism"] == INTENDED[name][0], (name, perturbation)
        assert truth["scrape_interval_seconds"] == perturbation.scrape_interval_seconds


def test_randomize_stays_within_the_documented_ranges() -> None:
    for seed in range(20):
        p = randomize(seed)
        assert all(0.7 <= f <= 1.3 for _, f in p.cost_factors)
        assert 10 <= p.scrape_interval_seconds <= 30
        assert p.checkpoint_interval in (2048, 3072, 4096)
        assert 0.8 <= p.load_factor <= 1.2


def test_the_exported_phase_ratio_reproduces_the_models_mean_step_times() -> None:
    result = run("step-time-sharing")
    ep = result.recording.endpoint()

    def last(name: str) -> float:
        values, ok = ep.column(ep.select(name)[0])
        return float(values[ok][-1])

    steps, decode = last("radiance:engine_steps_total"), last("radiance:engine_steps_decode_total")
    seconds, decode_seconds = last("radiance:engine_step_seconds_total"), last("radiance:engine_step_seconds_decode_total")
    assert decode_seconds / decode == pytest.approx(result.truth["decode_step_seconds"], rel=1e-6)
    assert (seconds - decode_seconds) / (steps - decode) == pytest.approx(result.truth["chunk_step_seconds"], rel=1e-6)


def test_counters_never_decrease_within_a_process_and_reset_at_a_restart() -> None:
    result = run("upgrade")
    ep = result.recording.endpoint()
    restart = result.truth["restarts"][0]
    for key in ep.select("radiance:engine_steps_total"):
        ts, values = ep.samples(key)
        before, after = values[ts < restart], values[ts >= restart]
        assert np.all(np.diff(before) >= 0) and np.all(np.diff(after) >= 0)
        assert after[0] < before[-1]
    up_ts, up = ep.samples(ep.select("up")[0])
    assert np.any((up == 0) & (up_ts < restart))  # down while restarting


def test_failed_scrapes_carry_up_zero_and_no_other_sample() -> None:
    ep = run("noisy-scrapes").recording.endpoint()
    up_values, _ = ep.column(ep.select("up")[0])
    failed = np.flatnonzero(up_values == 0)
    assert len(failed) >= 3
    others = [i for i, key in enumerate(ep.keys) if key.name != "up"]
    assert not ep.present[np.ix_(failed, others)].any()
    gaps = np.diff(ep.timestamps)
    assert gaps.std() > 0.5  # jittered


def test_every_engine_sample_carries_model_name_job_and_instance() -> None:
    ep = run("healthy").recording.endpoint()
    for key in ep.keys:
        assert key.label("job") == "radiance" and key.label("instance") == "sim-0:7770"
        if key.name.startswith(("radiance:", "vllm:")):
            assert key.label("model_name") == "radiance/hybrid-moe-a3b"


def test_build_1_0_13_lacks_the_1_8_counters_and_exports_time_per_output_token() -> None:
    result = simulate("healthy", duration_seconds=600.0, overrides={"--build": "1.0.13"})
    names = result.recording.endpoint().names()
    for missing in ("radiance:engine_steps_decode_total", "radiance:engine_step_seconds_decode_total",
                    "radiance:engine_steps_held_total", "radiance:prefix_hit_cut_tokens_total",
                    "vllm:inter_token_latency_seconds_bucket"):
        assert missing not in names
    assert "vllm:time_per_output_token_seconds_bucket" in names
    assert "radiance:engine_steps_total" in names


def test_the_vllm_profile_exports_plain_vllm_names_only() -> None:
    names = run("step-time-sharing", profile="vllm").recording.endpoint().names()
    assert not any(n.startswith("radiance:") for n in names)
    for wanted in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:kv_cache_usage_perc",
                   "vllm:iteration_tokens_total_bucket", "vllm:inter_token_latency_seconds_bucket"):
        assert wanted in names
    assert run("step-time-sharing", profile="vllm").truth == {
        **run("step-time-sharing").truth, "profile": "vllm"}


def test_vllm_histograms_use_vllms_own_bucket_bounds() -> None:
    ep = run("healthy").recording.endpoint()
    les = [k.label("le") for k in ep.select("vllm:time_to_first_token_seconds_bucket")]
    assert set(les) == {"0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75",
                        "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "160.0", "640.0", "2560.0",
                        "+Inf"}


def test_overrides_reach_every_process_and_argv() -> None:
    result = simulate("healthy", duration_seconds=300.0, overrides={"--prefill-interleave": "2"})
    assert result.truth["flags"]["--prefill-interleave"] == "2"
    assert "--prefill-interleave" in result.cmdline
