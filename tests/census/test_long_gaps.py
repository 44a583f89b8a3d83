"""The long-gaps signature end to end: the simulator's plain-vLLM export through the census.

Where a scrape holds a chunk step among many decode-only ones the counted steps' ratio dilutes; the
decoders' long inter-token gaps still find the sharing (pdcensus.series.vllm_gaps). Before the
signature, both runs below read ``none`` (0.32 and 0.11).
"""

from __future__ import annotations

from pdcensus.census.model import Mechanism, Signature
from pdcensus.census.run import census_recording
from pdcensus.census.verdict_caps import UNCONFIRMED_CAP
from pdcensus.mechanism import MATERIAL_SHARE
from pdcensus.sim import simulate


def _verdict(scenario: str, scrape: float):
    r = simulate(scenario, duration_seconds=1800, seed=0, profile="vllm", scrape_interval_seconds=scrape)
    return r.truth, census_recording(r.recording)[0].verdict


def test_chunk_steps_diluted_in_15s_scrapes_are_found_by_their_long_gaps():
    truth, v = _verdict("protected", 15.0)
    assert truth["mechanism"] == "step-time-sharing"
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence >= 0.7
    (f,) = [f for f in v.found if f.mechanism is Mechanism.STEP_TIME_SHARING]
    assert f.signature is Signature.LONG_GAPS
    assert f.loss_share >= MATERIAL_SHARE  # the truth: 11 % of decoders' time
    assert 0.0 < f.depth < 0.85 and 0.0 < f.active_share < 1.0


def test_a_loss_the_two_readings_put_on_either_side_of_5_percent_is_named_but_not_sure():
    # chunk steps 3.3 decode-only steps long: most of their cost is under the long gaps' line
    truth, v = _verdict("step-time-sharing", 1.0)
    assert truth["mechanism"] == "step-time-sharing"
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    assert v.confidence <= UNCONFIRMED_CAP
    assert any("on either side of the 5 % line" in s for s in v.settle)


def test_a_prompt_in_nearly_every_30s_scrape_is_found_by_the_long_gaps_dose_response():
    # at 30 s scrapes fewer than 10 spans are free of prefill: no decode-only step is timed, no ledger (read as
    # `none` 0.05 before); the long gaps' excess grows with the prompt tokens per second beyond noise
    truth, v = _verdict("step-time-sharing", 30.0)
    assert truth["mechanism"] == "step-time-sharing"
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    (f,) = [f for f in v.found if f.mechanism is Mechanism.STEP_TIME_SHARING]
    assert f.signature is Signature.LONG_GAPS
    assert "by dose-response" in f.signature_text
    assert f.loss_share >= MATERIAL_SHARE  # the truth: 11 % of decoders' time
    assert 0.0 < f.depth < 0.85  # one chunk step's own, not the diluted per-scrape rate
    assert not any("bucket contrast could not run" in s for s in v.settle)
