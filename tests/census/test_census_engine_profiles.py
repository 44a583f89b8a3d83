"""The census on simulator runs exported under vLLM's, SGLang's and TGI's own names.

One run per scenario, exported under each engine's names, so the truth is the same and only
the metric set differs. Each engine gets the truth verdict where its metrics can carry it, and
``inconclusive`` exactly where they cannot, with the reason in the report's ``passes``:

- preemption-stall on TGI: TGI exports no preemption counter and the queue never drains;
- healthy and chunking-overhead on vLLM: no step ledger, and short prompts never fill a
  busy-prefill bucket from counter rates, so "no collapse while prefill runs" cannot be shown.

Where the metrics can only lean, the census says so below the confident 0.7 (``LEANING``):
- preemption-stall on SGLang and vLLM: preemptions are counted (found), but they run through the
  whole window and neither engine exports a preempted-depth gauge, so their cost is unmeasurable;
- healthy on SGLang: the sharing is minor and near the measurable line.
"""

from __future__ import annotations

import math

import pytest

from pdcensus.census.model import CensusReport
from pdcensus.census.run import census_recording
from pdcensus.sim import simulate

SCENARIOS = ("step-time-sharing", "healthy", "chunking-overhead", "eviction-tail", "preemption-stall")
INCONCLUSIVE = {("tgi", "preemption-stall"), ("vllm", "healthy"), ("vllm", "chunking-overhead")}
LEANING = {("sglang", "preemption-stall"), ("vllm", "preemption-stall"), ("sglang", "healthy")}
_CACHE: dict[tuple[str, str], tuple[dict, CensusReport]] = {}


def census_of(scenario: str, profile: str) -> tuple[dict, CensusReport]:
    key = (scenario, profile)
    if key not in _CACHE:
        result = simulate(scenario, duration_seconds=7200.0, seed=0, profile=profile)
        _CACHE[key] = (result.truth, census_recording(result.recording)[0])
    return _CACHE[key]


def passes(report: CensusReport) -> dict[str, object]:
    return {p.name: p for p in report.passes}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("profile", ["sglang", "tgi", "vllm"])
def test_each_engine_gives_the_truth_or_exactly_inconclusive(profile: str, scenario: str) -> None:
    truth, report = census_of(scenario, profile)
    assert report.profile.startswith(profile)
    if (profile, scenario) in LEANING:
        assert report.verdict.confidence <= 0.6 and report.verdict.settle, report.verdict
        return
    want = "inconclusive" if (profile, scenario) in INCONCLUSIVE else truth["mechanism"]
    assert report.verdict.mechanism.value == want, report.verdict.evidence


def test_tgi_has_the_full_ledger_and_it_equals_radiances_on_the_same_run() -> None:
    _, tgi = census_of("step-time-sharing", "tgi")
    _, radiance = census_of("step-time-sharing", "radiance")
    assert tgi.ledger.available and tgi.ledger.reason == "ran"
    for field in ("decode_step_seconds", "chunk_step_seconds", "chunk_share_of_steps", "chunk_share_of_step_time"):
        assert getattr(tgi.ledger, field) == pytest.approx(getattr(radiance.ledger, field), rel=1e-6), field


def test_sglang_has_the_decode_only_mean_and_chunk_time_share_but_no_chunk_step_mean() -> None:
    _, sglang = census_of("step-time-sharing", "sglang")
    _, radiance = census_of("step-time-sharing", "radiance")
    ledger = sglang.ledger
    assert ledger.available and ledger.reason.startswith("partial")
    assert ledger.decode_step_seconds == pytest.approx(radiance.ledger.decode_step_seconds, rel=1e-6)
    assert ledger.chunk_share_of_step_time == pytest.approx(radiance.ledger.chunk_share_of_step_time, rel=1e-6)
    assert math.isnan(ledger.chunk_step_seconds) and math.isnan(ledger.chunk_share_of_steps)


def test_sglangs_sharing_estimate_is_an_upper_bound_of_the_full_ledgers() -> None:
    _, sglang = census_of("step-time-sharing", "sglang")
    _, radiance = census_of("step-time-sharing", "radiance")
    full = radiance.losses.step_time_sharing
    # without a chunk-step count the decode-only time of the chunk steps is not subtracted:
    # the bound exceeds the full ledger's estimate by at most chunk / (chunk - decode-only)
    chunk, decode = radiance.ledger.chunk_step_seconds, radiance.ledger.decode_step_seconds
    assert full <= sglang.losses.step_time_sharing <= 1.05 * full * chunk / (chunk - decode)


def test_vllm_has_no_ledger_and_the_ledger_pass_says_where_to_get_one() -> None:
    # an eviction tail at 15 s scrapes: a long prompt in nearly every scrape, too few without one to time a
    # decode-only step, even by the fitted prompt cost (a step-time-sharing hour has enough: test_sim_scenarios)
    _, report = census_of("eviction-tail", "vllm")
    ledger = passes(report)["ledger"]
    assert not report.ledger.available and not ledger.ran
    assert ledger.confidence_factor < 1.0 and "Forward Pass Metrics" in ledger.reason
    assert report.verdict.confidence < census_of("eviction-tail", "radiance")[1].verdict.confidence


@pytest.mark.parametrize(("profile", "step", "says"), [
    pytest.param("tgi", "ttft", "no TTFT histogram", id="tgi-ttft"),
    pytest.param("tgi", "preemption", "no preemption counter", id="tgi-preemption"),
    pytest.param("vllm", "ledger", "no step time", id="vllm-ledger"),
])
def test_a_step_the_engine_cannot_run_is_listed_as_not_run_with_its_reason(profile: str, step: str, says: str) -> None:
    _, report = census_of("eviction-tail" if profile == "vllm" else "step-time-sharing", profile)
    record = passes(report)[step]
    assert not record.ran and says in record.reason


def test_every_report_lists_the_runbook_steps_in_order_and_in_json() -> None:
    _, report = census_of("healthy", "sglang")
    doc = report.to_dict()
    assert [p["name"] for p in doc["passes"]] == ["shape", "ledger", "buckets", "lag", "ttft", "preemption", "traps"]
    assert {"name", "ran", "confidence_factor", "reason"} == set(doc["passes"][0])


def test_without_a_preemption_counter_a_saturated_endpoint_is_inconclusive_and_says_why() -> None:
    _, report = census_of("preemption-stall", "tgi")
    assert report.verdict.mechanism.value == "inconclusive"
    assert "saturated-without-preemption-counter" in {e.rule for e in report.verdict.evidence}
    assert report.verdict.settle


@pytest.mark.parametrize("profile", ["sglang", "vllm"])
def test_counted_preemptions_are_found_even_when_their_cost_cannot_be_measured(profile: str) -> None:
    _, report = census_of("preemption-stall", profile)
    v = report.verdict
    assert v.mechanism.value == "preemption-stall" and v.confidence <= 0.6
    (stall,) = [f for f in v.found if f.mechanism.value == "preemption-stall"]
    assert math.isnan(stall.loss_share) and "cannot be measured" in v.headline
