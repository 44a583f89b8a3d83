"""The replayed TTFT column where the other TTFT columns show: advice, verify-arm, JSON, reports, and the sim."""

from __future__ import annotations

import json
import math

import pytest

import pdcensus.api as pdc
from pdcensus.advice import predict
from pdcensus.advice.recommend import recommend
from pdcensus.census.model import CensusReport
from pdcensus.census.run import CensusOptions, census_recording
from pdcensus.report.html import render_html
from pdcensus.report.markdown import render_markdown
from pdcensus.report.terminal import render_text
from pdcensus.series.model import Recording
from pdcensus.verify.arm import bucket_pair, interleave_prediction, read_window, verify_arm

from .synthetic import step_time_sharing


@pytest.fixture(scope="module")
def recording() -> Recording:
    return step_time_sharing(0, seed=1)


@pytest.fixture(scope="module")
def sharing(recording: Recording) -> CensusReport:
    return census_recording(recording, CensusOptions(replicates=50))[0]


def test_the_tradeoff_rows_carry_a_replayed_ttft_p90_never_below_the_at_least_figure(
        recording: Recording, sharing: CensusReport) -> None:
    trace = pdc.prefill_trace(recording, sharing)
    assert trace is not None and trace.work_tokens is not None and trace.requests is not None
    (rec,) = recommend(sharing, {}, trace=trace)
    for row in rec.tradeoff:
        replayed, at_least = float(row["busy_ttft_p90_seconds_replay"]), float(row["prompt_ttft_p90_seconds_at_least"])
        assert replayed >= at_least * (1 - 1e-9)
    zero = next(r for r in rec.tradeoff if r["interleave"] == 0)
    assert zero["busy_ttft_p90_seconds_replay"] == pytest.approx(rec.predicted.busy_ttft_p90_seconds_now)
    assert rec.predicted.busy_ttft_p90_seconds_replay == pytest.approx(
        rec.predicted.busy_ttft_p90_seconds_now * rec.predicted.ttft_p90_ratio_replay)
    assert rec.predicted.replay_busy_intervals >= 8


def test_without_a_trace_the_replay_column_is_empty_and_a_note_says_why(sharing: CensusReport) -> None:
    (rec,) = recommend(sharing, {})
    assert all(math.isnan(float(r["busy_ttft_p90_seconds_replay"])) for r in rec.tradeoff)
    assert any("not available" in n and "trace" in n for n in rec.notes)
    assert rec.to_dict()["predicted"]["ttft_p90_ratio_replay"] is None


def test_the_census_json_carries_the_replay_keys(recording: Recording) -> None:
    report = pdc.census(recording, evidence=None)
    (advice,) = json.loads(json.dumps(report.to_dict()))["advice"]
    assert advice["predicted"]["ttft_p90_ratio_replay"] >= advice["predicted"]["ttft_stretch"]
    assert all(isinstance(r["busy_ttft_p90_seconds_replay"], float) for r in advice["tradeoff"])


def test_every_report_format_shows_the_replay_column(recording: Recording) -> None:
    report = pdc.census(recording, evidence=None)
    assert "busy TTFT p90, replay" in render_text(report, width=200)
    assert "busy TTFT p90, replay" in render_markdown(report).text
    assert "busy TTFT p90, replay" in render_html(report)


def test_verify_arm_predicts_the_replayed_ratio_from_the_before_window(recording: Recording) -> None:
    verdict = verify_arm(recording, step_time_sharing(2, seed=2), "--prefill-interleave", "2")
    assert verdict.predicted is not None
    ratio = verdict.predicted.ttft_p90_ratio_replay
    assert ratio >= verdict.predicted.ttft_stretch * (1 - 1e-9)
    assert verdict.to_dict()["predicted"]["replay_busy_intervals"] >= 8


def test_on_the_simulator_the_replay_is_closer_than_m_m_1_to_the_observed_ttft_p90_at_n_2() -> None:
    from pdcensus.sim.run import simulate

    runs = {n: simulate("step-time-sharing", duration_seconds=7200, seed=1,
                        overrides={"--prefill-interleave": str(n)}).recording for n in (0, 2)}
    before, after = read_window(runs[0]), read_window(runs[2])
    pair = bucket_pair(before.signals, after.signals)
    busy_b, busy_a = pair.pooled_before.rows[-1], pair.pooled_after.rows[-1]
    numbers = {"idle_threshold_tokens_per_second": pair.pooled_before.idle_threshold_tokens_per_second,
               "busy_per_stream_before": busy_b.per_stream_tokens_per_second,
               "busy_per_stream_after": busy_a.per_stream_tokens_per_second,
               "ttft_p90_ratio": busy_a.ttft_p90_seconds / busy_b.ttft_p90_seconds}
    predicted, observed = interleave_prediction("2", before, numbers)
    assert predicted is not None and observed is not None
    seen = observed.ttft_p90_ratio
    replay, queueing = predicted.ttft_p90_ratio_replay, predicted.ttft_p90_ratio_queueing
    assert queueing == pytest.approx(predict.queued_ttft_ratio(2, 0, predicted.prefill_load,
                                                                predicted.chunk_step_seconds,
                                                                predicted.decode_step_seconds))
    assert abs(math.log(replay / seen)) < abs(math.log(queueing / seen))
