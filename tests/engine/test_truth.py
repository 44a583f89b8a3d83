"""The client truth: per-stream rates in and out of the prompt windows, from request timestamps alone."""

from __future__ import annotations

import pytest

from pdcensus.engine.streams import RequestRecord
from pdcensus.engine.truth import measure_truth, merge


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
