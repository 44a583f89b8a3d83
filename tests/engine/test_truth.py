"""The client truth: per-stream rates in and out of the prompt windows, from request timestamps alone."""

from __future__ import annotations

import pytest

from pdcensus.engine.streams import RequestRecord
from pdcensus.engine.truth import acting_truth, measure_truth, merge


def decoder(stream: int, times: list[float]) -> RequestRecord:
    return RequestRecord("decode", stream, 0, times[0] - 0.1, token_times=times)


def test_spans_merge_when_they_touch() -> None:
    assert merge([(5.0, 6.0), (0.0, 2.0), (2.0, 3.0)]) == [(0.0, 3.0), (5.0, 6.0)]


def test_decoders_stalled_by_a_prompt_show_as_a_collapse_in_its_window() -> None:
    # one token a second, except a stall while the prompt (10.5 s to 20 s) processes
    times = [float(t) for t in range(0, 11)] + [20.0] + [float(t) for t in range(21, 31)]
    prompt = RequestRecord("prompt", 0, 0, 10.5, token_times=[20.0], prompt_tokens=1900)
    truth = measure_truth([decoder(0, times), prompt], 0.0, 30.0)
    assert truth.windows == ((10.5, 20.0),)
    outside, during = 20 / 20.5, 1 / 9.5  # tokens 1-10 and 21-30 outside; the one at 20 s inside
    assert truth.outside.per_stream_tokens_per_second == pytest.approx(outside)
    assert truth.during.per_stream_tokens_per_second == pytest.approx(during)
    assert truth.ratio == pytest.approx(during / outside)
    assert truth.decode_time_lost_share == pytest.approx(9.5 / 30 * (1 - during / outside))
    assert truth.prompt_ttft_seconds == (9.5,) and truth.prompt_tokens_per_second == pytest.approx(200.0)
    assert truth.during.gap_p50_seconds == pytest.approx(10.0)


def test_a_prompt_cut_before_its_first_token_processed_until_the_end() -> None:
    times = [float(t) for t in range(0, 21)]
    cut = RequestRecord("prompt", 0, 0, 15.0)
    truth = measure_truth([decoder(0, times), cut], 0.0, 20.0)
    assert truth.windows == ((15.0, 20.0),)
    assert truth.prompts == 0


def test_a_prompt_acts_from_when_the_decoders_stalled_not_from_when_it_was_sent() -> None:
    # three decoders at 10 tokens a second; a prompt sent at 5 s waits for admission until 10 s (the decoders run
    # at full pace), then its one chunk step stalls all three until its first token at 14 s
    def stream(k: int) -> RequestRecord:
        times = [round(0.1 * i + 0.01 * k, 3) for i in range(101)] + [14.0 + 0.01 * k] + \
                [round(14.0 + 0.01 * k + 0.1 * i, 3) for i in range(1, 60)]
        return decoder(k, times)

    prompt = RequestRecord("prompt", 0, 0, 5.0, token_times=[14.05], prompt_tokens=2000)
    records = [stream(0), stream(1), stream(2), prompt]
    pending, acting = measure_truth(records, 0.0, 19.0), acting_truth(records, 0.0, 19.0)
    assert pending.windows == ((5.0, 14.05),)
    (window,) = acting.windows
    assert window[0] == pytest.approx(10.0, abs=0.03) and window[1] == 14.05
    # pending: 50 tokens a stream at full pace dilute the one the stall gave; acting: the stall alone
    assert pending.ratio > 0.5
    assert acting.ratio < 0.1


def test_one_stalled_decoder_does_not_start_a_prompts_window() -> None:
    # the same, but only one of three decoders stalls from 7 s (a preempted stream) while the prompt waits; the
    # chunk step stalls all three from 10 s
    def stream(k: int, stall_from: float) -> RequestRecord:
        before = [round(0.1 * i + 0.01 * k, 3) for i in range(int(stall_from * 10) + 1)]
        after = [round(14.0 + 0.01 * k + 0.1 * i, 3) for i in range(60)]
        return decoder(k, before + after)

    prompt = RequestRecord("prompt", 0, 0, 5.0, token_times=[14.05], prompt_tokens=2000)
    acting = acting_truth([stream(0, 7.0), stream(1, 10.0), stream(2, 10.0), prompt], 0.0, 19.0)
    (window,) = acting.windows
    assert window[0] == pytest.approx(10.0, abs=0.03)


def test_a_prompt_still_waiting_for_admission_at_the_end_never_acted() -> None:
    times = [round(0.1 * i, 3) for i in range(201)]
    waiting = RequestRecord("prompt", 0, 0, 15.0)
    assert measure_truth([decoder(0, times), waiting], 0.0, 20.0).windows == ((15.0, 20.0),)
    assert acting_truth([decoder(0, times), waiting], 0.0, 20.0).windows == ()
