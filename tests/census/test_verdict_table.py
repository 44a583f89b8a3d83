"""The decision as a table: hand-built inputs, one case per rule, cap and settle branch.

Each input is a window of per-replicate estimates (row 0 = the window, the rest bootstrap
replicates) built around a point value with a chosen spread, so each case states exactly
which signature is inside or outside its threshold and which cost is material or minor.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pdcensus.census.headline import headline_mechanism
from pdcensus.census.model import Mechanism, Severity, Signature
from pdcensus.census.preemption import StallBasis
from pdcensus.census.verdict import decide
from pdcensus.census.verdict_caps import UNCONFIRMED_CAP
from pdcensus.census.verdict_inputs import VerdictInputs

R = 201  # the window + 200 replicates


def reps(point: float, spread: float = 0.01) -> np.ndarray:
    """Replicates around ``point``: row 0 is the point, the rest a symmetric spread."""
    rng = np.random.default_rng(7)
    out = point + spread * rng.standard_normal(R)
    out[0] = point
    return out


NAN = np.full(R, np.nan)


def base(**kw: object) -> VerdictInputs:
    """A healthy, well-sampled radiance window with a ledger: nothing is found."""
    x = VerdictInputs(
        shape_proven=True, shape_reason="first scrape", samples=480, idle_samples=380, busy_samples=100,
        has_ledger=True, ledger_chunk_steps=500.0, scrape_interval_seconds=15.0, rates_from_counters=False,
        collapse=reps(0.004, 0.001), lag0_effect=reps(0.95), sharing=reps(0.005, 0.001), residency=reps(0.0, 0.001),
        inflation_during=reps(1.0), inflation_after=reps(1.0), tail_effect=reps(1.0), tail_loss=reps(0.0, 0.001),
        preemption=reps(0.0, 0.0), preemption_basis="time integral of the preempted depth", bursts=0,
        burst_aligned=False, preemption_kind=StallBasis.DEPTH_INTEGRAL, inflation_after_batch_bounded=reps(1.0),
        ledger_depth=reps(0.93), busy_share=0.2, tail_share=0.3, burst_share=0.0,
    )
    return replace(x, **kw)  # type: ignore[arg-type]


def names(v) -> set[Mechanism]:
    return {f.mechanism for f in v.found}


def test_nothing_beyond_noise_is_none_with_confidence():
    v = decide(base())
    assert v.mechanism is Mechanism.NONE and not v.found and v.confidence >= 0.7
    assert v.headline.startswith("none:")


def test_chunking_overhead_alone_is_none():
    # chunk steps 10 % longer than decode-only steps, decode at 0.91 of idle while prefill runs
    v = decide(base(ledger_depth=reps(0.91), lag0_effect=reps(0.91), sharing=reps(0.01, 0.002)))
    assert v.mechanism is Mechanism.NONE


def test_rare_deep_sharing_is_found_and_minor():
    v = decide(base(ledger_depth=reps(0.3), lag0_effect=reps(0.49, 0.03), sharing=reps(0.016, 0.003),
                    busy_share=0.04))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    (f,) = v.found
    assert f.severity is Severity.MINOR and f.signature is Signature.CHUNK_STEP_COLLAPSE
    assert "minor" in v.headline and "0.49 of idle" in v.headline and "1.6 %" in v.headline
    assert v.confidence >= 0.7


def test_sharing_near_the_material_line_is_named_not_inconclusive():
    v = decide(base(ledger_depth=reps(0.3), lag0_effect=reps(0.5), sharing=reps(0.05, 0.004)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence >= 0.7
    assert v.found[0].near_material_line and "near the 5 % line" in v.headline


def test_a_signature_whose_interval_crosses_the_threshold_is_not_found():
    v = decide(base(has_ledger=False, sharing=None, residency=None, inflation_after=None,
                    inflation_after_batch_bounded=None, ledger_depth=None, lag0_effect=reps(0.8, 0.06)))
    assert Mechanism.STEP_TIME_SHARING not in names(v)


def test_counter_only_dilution_is_found_by_dose_response():
    v = decide(base(has_ledger=False, sharing=None, residency=None, inflation_after=None, ledger_depth=None,
                    inflation_after_batch_bounded=None, rates_from_counters=True, lag0_effect=reps(0.93, 0.02),
                    collapse=reps(0.01, 0.002), dose_stall=reps(2e-4, 2e-5), dose_depth=reps(0.7, 0.03)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    assert v.found[0].signature is Signature.DOSE_RESPONSE


def test_a_lagged_tail_is_eviction():
    v = decide(base(tail_effect=reps(0.6, 0.03), tail_loss=reps(0.12, 0.01)))
    assert v.mechanism is Mechanism.EVICTION and v.found[0].signature is Signature.LAGGED_TAIL
    assert v.found[0].severity is Severity.MATERIAL


def test_a_tail_that_batch_growth_explains_is_not_found_and_caps_the_headline():
    v = decide(base(tail_effect=reps(0.6, 0.03), tail_batch_ratio=1.8, tail_loss=reps(0.12, 0.01),
                    uncontrolled_eviction=True))
    assert Mechanism.EVICTION not in names(v)
    assert v.confidence <= UNCONFIRMED_CAP and any("batch" in s for s in v.settle)


def test_a_recovery_with_time_since_prefill_is_eviction_where_no_scrape_is_clean():
    v = decide(base(tail_effect=NAN, tail_loss=NAN, recovery_effect=reps(0.7, 0.03), recovery_loss=reps(0.09, 0.01)))
    assert v.mechanism is Mechanism.EVICTION and v.found[0].signature is Signature.RECOVERY_SLOPE


def test_eviction_from_inflated_steps_alone_is_capped():
    v = decide(base(tail_effect=NAN, tail_loss=NAN, inflation_after_batch_bounded=reps(1.5, 0.05),
                    residency=reps(0.15, 0.01)))
    assert v.mechanism is Mechanism.EVICTION and v.confidence <= UNCONFIRMED_CAP


def test_preemption_bursts_are_found_even_when_short():
    v = decide(base(bursts=14, burst_aligned=True, preemption=reps(0.011, 0.002)))
    assert v.mechanism is Mechanism.PREEMPTION_STALL
    assert v.found[0].severity is Severity.MINOR and v.confidence >= 0.7


def test_bursts_that_line_up_with_nothing_are_less_sure():
    aligned = decide(base(bursts=3, burst_aligned=True, preemption=reps(0.02, 0.002)))
    unaligned = decide(base(bursts=3, burst_aligned=False, preemption=reps(0.02, 0.002)))
    assert unaligned.confidence < aligned.confidence


def test_a_stall_read_from_the_queue_is_capped():
    v = decide(base(bursts=5, burst_aligned=True, preemption=reps(0.1, 0.01), preemption_kind=StallBasis.WAITING_QUEUE))
    assert v.mechanism is Mechanism.PREEMPTION_STALL and v.confidence <= UNCONFIRMED_CAP


def test_two_material_mechanisms_of_similar_cost_are_mixed():
    v = decide(base(tail_effect=reps(0.6, 0.03), tail_loss=reps(0.12, 0.01), bursts=10, burst_aligned=True,
                    preemption=reps(0.10, 0.005)))
    assert v.mechanism is Mechanism.MIXED
    assert names(v) == {Mechanism.EVICTION, Mechanism.PREEMPTION_STALL}


def test_a_material_stall_caps_the_other_mechanisms():
    v = decide(base(ledger_depth=reps(0.3), lag0_effect=reps(0.5), sharing=reps(0.2, 0.01), bursts=10,
                    burst_aligned=True, preemption=reps(0.06, 0.005)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence < 0.7


def test_a_material_stall_masks_a_share_its_interval_overlaps_and_not_one_wholly_above_it():
    def sharing_beside_stalls(share: float) -> tuple[float, tuple[str, ...]]:
        v = decide(base(ledger_depth=reps(0.3), lag0_effect=reps(0.5), sharing=reps(share, 0.01), bursts=10,
                        burst_aligned=True, preemption=reps(0.06, 0.005)))
        (f,) = [f for f in v.found if f.mechanism is Mechanism.STEP_TIME_SHARING]
        return f.confidence, v.settle
    # sharing 6-10 % beside 5-7 % of stalls: the rows the stalls shed could make it
    confidence, settle = sharing_beside_stalls(0.08)
    assert confidence <= 0.65 and any("masks or mimics the other mechanisms' shares" in s for s in settle)
    # sharing 18-21 %: more than the stalled time could move
    confidence, settle = sharing_beside_stalls(0.2)
    assert confidence >= 0.9 and any("lies wholly above the stalls'" in s for s in settle)


def test_an_unfound_material_loss_estimate_caps_the_headline():
    v = decide(base(ledger_depth=reps(0.3), lag0_effect=reps(0.5), sharing=reps(0.07, 0.004),
                    residency=reps(0.2, 0.01)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence <= UNCONFIRMED_CAP
    assert any("eviction's estimated loss" in s and "is material" in s for s in v.settle)


def test_a_stalls_own_re_prefill_does_not_cap_it_as_unfound_sharing():
    # the live vLLM preemption run's shape: chunk steps no longer than decode-only ones, 12.6 % of decoders'
    # time in chunk steps, 89 % of the prefill re-prefill after preemptions
    stall = dict(ledger_depth=reps(0.97), lag0_effect=reps(0.91), sharing=reps(0.126, 0.01), bursts=27,
                 burst_aligned=True, preemption=reps(0.42, 0.03))
    alone = decide(base(**stall))
    assert alone.mechanism is Mechanism.PREEMPTION_STALL and alone.confidence <= UNCONFIRMED_CAP
    assert any("step-time-sharing's estimated loss" in s for s in alone.settle)
    netted = decide(base(**stall, reprefill_share=0.885))
    assert netted.mechanism is Mechanism.PREEMPTION_STALL and netted.confidence >= 0.7
    row = next(e for e in netted.evidence if e.rule == "reprefill-share")
    assert row.value == 0.885 and "1.4 % is not the stall's own re-prefill" in row.text
    # new prompts' prefill beside the stall is still a second mechanism the headline may miss
    mostly_new = decide(base(**stall, reprefill_share=0.3))
    assert mostly_new.confidence <= UNCONFIRMED_CAP


def test_found_sharing_that_is_mostly_the_stalls_re_prefill_does_not_make_it_mixed():
    # the live seqs-4 run's shape: re-prefill chunk steps 0.78 of a decode-only step, 12.4 % of decoders'
    # time in them beside an 11 % stall, 76 % of the prefill re-prefill
    shape = dict(ledger_depth=reps(0.78, 0.03), lag0_effect=reps(1.01), sharing=reps(0.124, 0.01), bursts=14,
                 burst_aligned=True, preemption=reps(0.111, 0.01))
    assert decide(base(**shape)).mechanism is Mechanism.MIXED
    v = decide(base(**shape, reprefill_share=0.76))
    assert v.mechanism is Mechanism.PREEMPTION_STALL
    sharing = next(f for f in v.found if f.mechanism is Mechanism.STEP_TIME_SHARING)
    assert sharing.severity is Severity.MINOR and abs(sharing.loss_share - 0.124 * 0.24) < 1e-9


def test_an_unfound_mechanism_costlier_than_a_minor_headline_caps_it():
    v = decide(base(ledger_depth=reps(0.3), lag0_effect=reps(0.5), sharing=reps(0.012, 0.001),
                    residency=reps(0.03, 0.01)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence <= UNCONFIRMED_CAP
    assert any("above the headline's" in s for s in v.settle)


@pytest.mark.parametrize("change,why", [
    pytest.param({"shape_proven": False}, "prove the window", id="unproven-shape"),
    pytest.param({"samples": 12}, "at least 30", id="too-few-scrapes"),
    pytest.param({"single_session": "at most 1 request ran in any scrape"}, "two or more concurrent", id="one-session"),
    pytest.param({"preemption_counted": False, "saturated_share": 0.9}, "queue never drains", id="saturated"),
    pytest.param({"has_ledger": False, "busy_samples": 3, "sharing": None, "residency": None, "ledger_depth": None,
                  "inflation_after": None, "inflation_after_batch_bounded": None}, "another session prefills",
                 id="no-busy-prefill"),
])
def test_data_that_cannot_tell_is_inconclusive_with_what_would_settle_it(change, why):
    v = decide(base(**change))
    assert v.mechanism is Mechanism.INCONCLUSIVE and v.confidence == 0.0
    assert any(why in s for s in v.settle)


def test_counted_preemptions_are_found_where_the_contrast_cannot_run():
    v = decide(base(samples=12, bursts=4, burst_aligned=True, preemption=reps(0.03, 0.003)))
    assert v.mechanism is Mechanism.PREEMPTION_STALL and v.confidence <= UNCONFIRMED_CAP


def test_decode_faster_while_prompts_are_counted_is_explained_and_not_a_collapse():
    note = "decode per stream is 1.60x faster while prompt tokens are counted"
    v = decide(base(has_ledger=False, sharing=None, residency=None, inflation_after=None, ledger_depth=None,
                    inflation_after_batch_bounded=None, lag0_effect=reps(1.6, 0.05), contrast_note=note))
    assert v.mechanism is Mechanism.NONE and note in v.headline


@pytest.mark.parametrize("losses,expected", [
    pytest.param({}, Mechanism.NONE, id="nothing-found"),
    pytest.param({Mechanism.STEP_TIME_SHARING: 0.016}, Mechanism.STEP_TIME_SHARING, id="one-minor"),
    pytest.param({Mechanism.STEP_TIME_SHARING: 0.02, Mechanism.PREEMPTION_STALL: 0.01}, Mechanism.STEP_TIME_SHARING,
                 id="costliest-minor"),
    pytest.param({Mechanism.EVICTION: 0.25, Mechanism.PREEMPTION_STALL: 0.19}, Mechanism.MIXED, id="two-material"),
    pytest.param({Mechanism.EVICTION: 0.30, Mechanism.PREEMPTION_STALL: 0.06}, Mechanism.EVICTION,
                 id="one-dominates"),
    pytest.param({Mechanism.PREEMPTION_STALL: float("nan")}, Mechanism.PREEMPTION_STALL, id="unmeasured-stall"),
])
def test_the_headline_rule(losses, expected):
    assert headline_mechanism(losses) is expected


def _gaps(beside: float, without: float, loss: float, spread: float = 0.005):
    from pdcensus.series.vllm_gaps import GapContrast

    return GapContrast(reps(beside, spread), reps(without, spread / 5), reps(loss, spread / 2), long_gaps=400.0,
                       mean_long_gap_seconds=0.17, clean_gap_seconds=0.005)


def test_chunk_steps_shorter_than_a_scrape_are_sharing_by_their_long_gaps():
    # the counted steps' ratio is diluted (0.93: a 0.17 s chunk step among 200 decode-only steps per scrape); the
    # long gaps come with prefill (9 % of decoders' waiting vs 0.3 % without) and are at least 6 % of their time
    x = base(ledger_depth=reps(0.93), sharing=reps(0.12, 0.005), depth_from_steps=True,
             gaps=_gaps(0.09, 0.003, 0.06))
    v = decide(x)
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence >= 0.7
    (f,) = v.found
    assert f.signature is Signature.LONG_GAPS
    assert f.loss_share == pytest.approx(0.12)  # the ledger's; the long gaps' (a lower bound) is in the evidence
    assert any(e.rule == "long-gaps" and "6.0 % of decoders' time, a lower bound" in e.text for e in v.evidence)
    assert f.depth == pytest.approx(0.005 / 0.17)  # the long gaps' own depth: no reading over the waits
    assert any(e.rule == "long-gaps" and e.satisfied for e in v.evidence)


def test_long_gaps_as_common_without_prefill_find_no_sharing():
    x = base(ledger_depth=reps(0.93), sharing=reps(0.12, 0.005), depth_from_steps=True,
             gaps=_gaps(0.01, 0.01, 0.0, spread=0.004))
    v = decide(x)
    assert Mechanism.STEP_TIME_SHARING not in names(v)
    assert any(e.rule == "long-gaps" and not e.satisfied for e in v.evidence)


def test_where_the_counted_steps_find_a_collapse_their_loss_stays():
    x = base(ledger_depth=reps(0.3), sharing=reps(0.2, 0.005), depth_from_steps=True, gaps=_gaps(0.5, 0.0, 0.15))
    v = decide(x)
    (f,) = v.found
    assert f.signature is Signature.CHUNK_STEP_COLLAPSE and f.loss_share == pytest.approx(0.2)


def test_a_sharing_loss_whose_two_readings_straddle_the_material_line_is_not_confident():
    # the ledger's 11.7 % holds the batch's growth; the long gaps' 0.3 % is what the chunk steps beyond the line cost
    x = base(ledger_depth=reps(0.93), sharing=reps(0.117, 0.005), depth_from_steps=True,
             gaps=_gaps(0.02, 0.003, 0.003, spread=0.002))
    v = decide(x)
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    assert v.confidence <= UNCONFIRMED_CAP
    assert any("on either side of the 5 % line" in n for n in v.settle)


def _dosed(beside: float, loss: float, spread: float = 0.005, without: float = 0.01):
    from pdcensus.series.vllm_gaps import CONTROL_DOSE

    return replace(_gaps(beside, without, loss, spread), control=CONTROL_DOSE)


def _no_ledger(**kw: object) -> VerdictInputs:
    """A vLLM window where a prompt lands in nearly every scrape: no ledger, 7 idle scrapes, the rate contrast
    diluted (0.78 of idle) and its loss 16.6 %."""
    fields: dict[str, object] = dict(
        has_ledger=False, ledger_chunk_steps=0.0, sharing=None, residency=None, ledger_depth=None, inflation_after=None,
        inflation_after_batch_bounded=None, idle_samples=7, busy_samples=23, samples=30, lag0_effect=reps(0.78, 0.02),
        collapse=reps(0.166, 0.01))
    return base(**{**fields, **kw})


def test_long_gaps_that_grow_with_the_prompt_tokens_stand_in_for_the_missing_idle_bucket():
    v = decide(_no_ledger(gaps=_dosed(0.166, 0.109)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    (f,) = v.found
    assert f.signature is Signature.LONG_GAPS  # before the diluted lag-0 collapse
    assert f.loss_share == pytest.approx(0.109)  # the long gaps' excess beyond the intercept, not the contrast's
    assert f.depth == pytest.approx(0.005 / 0.17)  # one chunk step's own, not the rate contrast's 0.78
    assert not any("bucket contrast could not run" in s for s in v.settle)
    assert not any("decode-only step counters" in s for s in v.settle)  # no ledger penalty: the gaps separate
    assert any(e.rule == "long-gaps" and "by dose-response" in e.text for e in v.evidence)


def test_without_the_contrast_a_dosed_signature_under_the_measurable_line_is_inconclusive_not_none():
    # an alien-engine run with no busy scrape: the long gaps grow with the prompts beyond noise, but cost 0.03 %
    v = decide(_no_ledger(idle_samples=239, busy_samples=0, samples=239, lag0_effect=reps(0.99, 0.01),
                          collapse=reps(0.0, 0.0005), gaps=_dosed(0.0003, 0.0003, 0.00005, without=0.0)))
    assert v.mechanism is Mechanism.INCONCLUSIVE
    assert any("another session prefills" in s for s in v.settle)


def test_dosed_long_gaps_and_a_rate_contrast_either_side_of_5_percent_are_capped():
    v = decide(_no_ledger(idle_samples=12, collapse=reps(0.04, 0.002), gaps=_dosed(0.1, 0.07)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence <= UNCONFIRMED_CAP
    assert any("the rate contrast's" in s and "on either side of the 5 % line" in s for s in v.settle)
    # with under 10 idle scrapes the contrast is no reading (a live run with no busy bucket read it as 0.0 %)
    v = decide(_no_ledger(idle_samples=7, collapse=reps(0.04, 0.002), gaps=_dosed(0.1, 0.07)))
    assert not any("on either side of the 5 % line" in s for s in v.settle)


def test_a_none_from_the_counted_steps_that_the_rate_contrast_contradicts_is_not_confident():
    # decode rows that sit out chunk steps are no counted step: the steps' ratio reads 0.97 while per-stream
    # decode falls to 0.72 of idle in the busy bucket (an alien-engine run read 'none' at 0.9)
    v = decide(base(ledger_depth=reps(0.97), lag0_effect=reps(0.72, 0.02), sharing=reps(0.03, 0.005)))
    assert v.mechanism is Mechanism.NONE and v.confidence <= UNCONFIRMED_CAP
    assert any("a collapse the counted steps do not show" in n for n in v.settle)
    # the same steps beside a contrast that does not collapse: the 'none' stands
    assert decide(base(ledger_depth=reps(0.97), sharing=reps(0.03, 0.005))).confidence >= 0.7


def test_a_none_from_the_counted_steps_alone_is_not_confident():
    # 3 busy scrapes, so no rate contrast, and no inter-token histogram: only the steps' ratio rules sharing out
    alone = base(ledger_depth=reps(0.95), busy_samples=3, lag0_effect=reps(0.73, 0.08), sharing=reps(0.026, 0.005))
    v = decide(alone)
    assert v.mechanism is Mechanism.NONE and v.confidence <= UNCONFIRMED_CAP
    assert any("rests on the counted steps alone" in n for n in v.settle)
    # with the histogram's long gaps tested (and not found) the steps are not alone
    clear = decide(replace(alone, gaps=_gaps(0.01, 0.01, 0.0, spread=0.004)))
    assert clear.mechanism is Mechanism.NONE
    assert not any("rests on the counted steps alone" in n for n in clear.settle)


def _ramping():
    from pdcensus.census.guards import LIMITED_CONFIDENCE, GuardReason, VerdictLimits

    return VerdictLimits(True, True, LIMITED_CONFIDENCE, (GuardReason.STILL_RAMPING,)), LIMITED_CONFIDENCE


def test_a_ramp_does_not_limit_a_collapse_each_chunk_span_shows_against_its_neighbours():
    limits, limited = _ramping()
    collapse = dict(ledger_depth=reps(0.35), sharing=reps(0.5, 0.01), lag0_effect=reps(0.3), limits=limits)
    v = decide(base(**collapse, ledger_depth_local=reps(0.4)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.confidence >= 0.7
    assert not any("still growing" in n for n in v.settle)
    # where the chunk spans are no collapse against their neighbours, the ramp may be the cause: limited
    v = decide(base(**collapse, ledger_depth_local=reps(0.9)))
    assert v.confidence <= limited and any("still growing" in n for n in v.settle)
    # and a ramp still limits what the counted steps' local reading does not speak to (a 'none')
    assert decide(base(limits=limits, ledger_depth_local=reps(0.95))).confidence <= limited


def test_a_rate_contrast_outside_its_domain_brackets_nothing_and_is_not_printed():
    # decode faster in the busy bucket: the contrast's "loss" is -117 %, no share at all
    v = decide(_no_ledger(idle_samples=12, collapse=reps(-1.17, 0.02), gaps=_dosed(0.9, 0.8)))
    assert v.mechanism is Mechanism.STEP_TIME_SHARING
    assert not any("-117" in s or "the rate contrast's" in s for s in v.settle)


def test_long_gaps_are_limited_neither_by_a_ramp_nor_by_the_prompt_counters_lumps():
    from pdcensus.census.guards import LIMITED_CONFIDENCE, GuardReason, VerdictLimits

    both = VerdictLimits(True, True, LIMITED_CONFIDENCE, (GuardReason.STILL_RAMPING, GuardReason.CONTRAST_ABOVE_ONE))
    x = _no_ledger(gaps=_dosed(0.9, 0.8), limits=both, kv_second_tier=False)
    v = decide(x)
    assert v.mechanism is Mechanism.STEP_TIME_SHARING and v.found[0].signature is Signature.LONG_GAPS
    assert v.confidence >= 0.7 and not any("no claim here reaches 0.7" in s for s in v.settle)
    # another guard still limits it
    other = replace(both, reasons=both.reasons + (GuardReason.TOO_FEW_OTHER,))
    assert decide(replace(x, limits=other)).confidence <= LIMITED_CONFIDENCE


def test_no_tail_test_costs_nothing_where_the_cache_config_rules_eviction_out():
    x = _no_ledger(gaps=_dosed(0.9, 0.8), tail_effect=NAN)  # no tail test and no decode-only steps to inflate
    unknown, ruled_out = decide(x), decide(replace(x, kv_second_tier=False))
    assert ruled_out.confidence > unknown.confidence
    assert ruled_out.confidence == pytest.approx(unknown.confidence / 0.85, abs=0.002)
