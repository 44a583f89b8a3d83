"""Recommendations carry numbers from the census's own ledger and buckets."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pdcensus.advice import predict
from pdcensus.advice.evidence import BootLedger
from pdcensus.advice.recommend import recommend, recommend_checkpoints
from pdcensus.census.model import CensusReport, Mechanism
from pdcensus.census.run import CensusOptions, census_recording

from .synthetic import step_time_sharing


@pytest.fixture(scope="module")
def sharing() -> CensusReport:
    return census_recording(step_time_sharing(0, seed=1), CensusOptions(replicates=50))[0]


def _as(report: CensusReport, *mechanisms: Mechanism) -> CensusReport:
    main = mechanisms[0] if len(mechanisms) == 1 else Mechanism.MIXED
    return dataclasses.replace(report, verdict=dataclasses.replace(report.verdict, mechanism=main,
                                                                   mechanisms=tuple(mechanisms)))


def test_step_time_sharing_gets_the_decoder_dial_with_n_for_the_target(sharing: CensusReport) -> None:
    assert sharing.verdict.mechanism is Mechanism.STEP_TIME_SHARING
    (rec,) = recommend(sharing, {"--prefill-interleave": "0"}, target_decode_share=0.3)
    c, d = sharing.ledger.chunk_step_seconds, sharing.ledger.decode_step_seconds
    n = int(rec.value)
    assert rec.knob == "--prefill-interleave" and rec.env_line == f"RADIANCE_PREFILL_INTERLEAVE={n}"
    assert rec.rollback_env_line == "RADIANCE_PREFILL_INTERLEAVE=0"
    assert rec.predicted.per_stream_tokens_per_second_during_prefill == pytest.approx((n + 1) / (c + n * d))
    assert rec.predicted.share_of_idle >= 0.3
    assert rec.predicted.ttft_stretch == pytest.approx((c + n * d) / c)
    assert rec.verification is not None and "engine_steps_held_total" in rec.verification.counter


def test_the_tradeoff_table_covers_n_0_to_8_and_the_chosen_n(sharing: CensusReport) -> None:
    (rec,) = recommend(sharing, {}, target_decode_share=0.5)
    ns = [int(row["interleave"]) for row in rec.tradeoff]
    assert ns[:9] == list(range(9)) and int(rec.value) in ns
    rates = [row["per_stream_tokens_per_second"] for row in rec.tradeoff]
    assert rates == sorted(rates)


def test_recommendations_serialise_for_the_census_advice_list(sharing: CensusReport) -> None:
    advice = [r.to_dict() for r in recommend(sharing, {})]
    text = json.dumps(advice, allow_nan=False)
    assert json.loads(text)[0]["knob"] == "--prefill-interleave"


def test_a_build_without_the_ledger_gets_no_numbers_and_says_why() -> None:
    old = census_recording(step_time_sharing(0, build="1.0.13", seed=1), CensusOptions(replicates=50))[0]
    (rec,) = recommend(_as(old, Mechanism.STEP_TIME_SHARING), {})
    assert not rec.predicted and "no step ledger" in rec.summary


def test_a_withheld_ledger_on_a_build_that_counts_steps_says_why_and_never_asks_for_an_upgrade(
        sharing: CensusReport) -> None:
    reason = "withheld: radiance:engine_step_seconds_total grew 10.00x as fast as the wall clock between scrapes"
    withheld = dataclasses.replace(sharing, ledger=dataclasses.replace(sharing.ledger, available=False, reason=reason))
    assert withheld.profile == "radiance-1.8"
    (rec,) = recommend(withheld, {})
    assert not rec.predicted and reason in rec.summary
    assert "upgrade" not in rec.summary and "no step ledger on this build" not in rec.summary


@pytest.mark.parametrize("mechanism", [Mechanism.NONE, Mechanism.INCONCLUSIVE])
def test_no_knob_when_there_is_nothing_to_act_on(sharing: CensusReport, mechanism: Mechanism) -> None:
    assert recommend(_as(sharing, mechanism), {}) == ()


def test_eviction_shrinks_the_step_budget_but_never_below_the_stagers_smallest_pass(sharing: CensusReport) -> None:
    (rec,) = recommend(_as(sharing, Mechanism.EVICTION), {"--max-num-batched-tokens": "1024"},
                       boot=BootLedger(stager_smallest_pass_tokens=768))
    assert (rec.knob, rec.value) == ("--max-num-batched-tokens", "768")
    assert rec.rollback_env_line == "RADIANCE_MAX_NUM_BATCHED_TOKENS=1024"
    assert rec.predicted.arena_loan_fraction_of_now == pytest.approx(0.75)
    assert rec.predicted.prefill_seconds_per_token_ratio > 1


def test_eviction_with_a_prefill_span_lowers_the_span_first(sharing: CensusReport) -> None:
    flags = {"--prefill-span": "4", "--checkpoint-interval": "2048", "--max-num-batched-tokens": "8192"}
    (rec,) = recommend(_as(sharing, Mechanism.EVICTION), flags)
    assert (rec.knob, rec.value) == ("--prefill-span", "1")
    assert rec.predicted.arena_loan_fraction_of_now == pytest.approx(0.25)


def test_mixed_gets_one_recommendation_per_mechanism(sharing: CensusReport) -> None:
    recs = recommend(_as(sharing, Mechanism.STEP_TIME_SHARING, Mechanism.PREEMPTION_STALL), {"--max-num-seqs": "64"})
    assert [r.knob for r in recs] == ["--prefill-interleave", "--max-num-seqs"]
    # half the peak batch (or of the deployed value if lower): the pool was full of half-finished sequences
    peak = max(sharing.timeline.running) if sharing.timeline else 64
    assert recs[1].value == str(int(min(64, peak) // 2))


def test_checkpoint_advice_shows_a_shorter_interval_does_not_help_geometric_backoff() -> None:
    depths = [30_000, 61_000, 100_000]
    rec = recommend_checkpoints(depths, {"--checkpoint-interval": "4096", "--checkpoint-policy": "geometric-backoff"})
    assert rec.value == "keep-all"
    now, half = rec.predicted.mean_replay_tokens_now, rec.predicted.mean_replay_tokens_now_half_interval
    assert abs(half - now) <= 4096
    assert rec.predicted.mean_replay_tokens_keep_all < 4096 < now
    expected = sum(predict.replay_tokens("geometric-backoff", d, 4096, diverged=True) for d in depths) / 3
    assert now == pytest.approx(expected)


def test_the_tradeoff_rows_carry_a_queueing_ttft_p90_beside_the_at_least_figure(sharing: CensusReport) -> None:
    (rec,) = recommend(sharing, {}, target_decode_share=0.5)
    c, d = sharing.ledger.chunk_step_seconds, sharing.ledger.decode_step_seconds
    load = sharing.ledger.chunk_share_of_step_time
    for row in rec.tradeoff:
        n = int(row["interleave"])
        at_least, queueing = float(row["prompt_ttft_p90_seconds_at_least"]), float(row["busy_ttft_p90_seconds_queueing"])
        assert queueing == pytest.approx(at_least * predict.queued_ttft_ratio(n, 0, load, c, d)
                                         / ((c + n * d) / c)) or queueing == float("inf")
        assert queueing >= at_least
