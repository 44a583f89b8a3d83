"""llama.cpp's counters, counted the way its server counts them, read back right by the census.

``server_trace`` replays the server loop of llama.cpp b11434 call by call (one ``llama_decode``
per loop: one token per generating slot, up to ``n_batch`` prompt tokens) and writes each
``llamacpp:`` family when the source says it moves: ``n_decode_total`` and the busy slots after
every call, ``prompt_tokens_total`` / ``prompt_seconds_total`` after every call that carried
prompt tokens (decoders run, so every call has an output), ``tokens_predicted_total`` only when
a request ends. The scrapes sample those cumulative values once a second. The truth (tokens per
decoding stream while the long prompt runs, and outside) comes from the same replay.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pdcensus.census.run import census_recording
from pdcensus.series.llamacpp import (
    chunk_calls,
    derive_intervals,
    increases,
    print_resolution,
    spread_back,
)
from pdcensus.series.model import Recording, RecordingBuilder, SeriesKey

T0 = 1_700_000_000.0
BASE = (("instance", "127.0.0.1:8080"), ("job", "llamacpp"))
DECODE_CALL = 0.05  # seconds, 3 decode rows
PROMPT_RATE = 400.0  # prompt tokens per second inside a call


def server_trace(seconds: float = 120.0, decoders: int = 3, request_tokens: int = 200, n_batch: int = 2048,
                 prompt_tokens: int = 2800, prompt_starts: tuple[float, ...] = (30.0, 75.0),
                 scrape: float = 1.0) -> tuple[Recording, dict[str, float]]:
    """A recording of llama.cpp's metrics under the load, and its truth."""
    t = 0.0
    n_decode = busy = prompt_total = prompt_secs = predicted = 0.0
    gen_left = [request_tokens - 60 * i for i in range(decoders)]  # staggered request ends
    restart = [False] * decoders  # the slot processes its next request's short prompt in this call
    pending = list(prompt_starts)
    long_left = 0
    window: list[tuple[float, float]] = []
    samples: list[tuple[float, dict[str, float]]] = []
    next_scrape = scrape
    tokens_in = tokens_out = 0
    while t < seconds:
        if pending and t >= pending[0] and long_left == 0:
            pending.pop(0)
            long_left = prompt_tokens
            window.append((t, math.nan))
        gen = sum(1 for r in restart if not r)
        short = sum(1 for r in restart if r) * 10
        room = n_batch - gen - short
        chunk = min(long_left, room)
        carried = chunk + short
        duration = DECODE_CALL + carried / PROMPT_RATE
        while next_scrape <= t + duration:  # the scrape is answered while the call runs
            samples.append((next_scrape, {"n_decode_total": n_decode, "busy": busy, "prompt_tokens_total": prompt_total,
                                          "prompt_seconds_total": prompt_secs, "tokens_predicted_total": predicted,
                                          "requests_processing": decoders + (1 if long_left else 0)}))
            next_scrape += scrape
        t += duration
        n_decode += 1
        busy += decoders + (1 if long_left else 0)
        if carried:
            prompt_total += carried
            prompt_secs += duration
        inside = long_left > 0
        for i in range(decoders):
            if restart[i]:
                restart[i] = False
                gen_left[i] = request_tokens
                continue
            gen_left[i] -= 1
            if inside:
                tokens_in += 1
            else:
                tokens_out += 1
            if gen_left[i] == 0:
                predicted += request_tokens
                restart[i] = True
        if chunk:
            long_left -= chunk
            if long_left == 0:
                window[-1] = (window[-1][0], t)
    in_seconds = sum(b - a for a, b in window)
    during, outside = tokens_in / (decoders * in_seconds), tokens_out / (decoders * (t - in_seconds))
    truth = {"during": during, "outside": outside, "window_seconds": in_seconds,
             "lost_share": in_seconds / t * (1 - during / outside)}
    return _recording(samples), truth


def _recording(samples: list[tuple[float, dict[str, float]]]) -> Recording:
    builder = RecordingBuilder("llama.cpp replay")
    times = [T0 + s for s, _ in samples]
    for name in ("n_decode_total", "prompt_tokens_total", "prompt_seconds_total", "tokens_predicted_total",
                 "requests_processing"):
        builder.add_many(SeriesKey("llamacpp:" + name, BASE), times, [v[name] for _, v in samples])
    per_decode = [float(f"{v['busy'] / max(v['n_decode_total'], 1.0):.6g}") for _, v in samples]
    builder.add_many(SeriesKey("llamacpp:n_busy_slots_per_decode", BASE), times, per_decode)
    builder.add_many(SeriesKey("up", BASE), times, [1.0] * len(times))
    return builder.build()


def test_a_counter_that_drops_restarts_from_zero() -> None:
    assert np.allclose(increases(np.array([np.nan, 5.0, 9.0, 2.0, 4.0]))[2:], [4.0, 2.0, 2.0], equal_nan=True)


def test_print_resolution_is_six_significant_digits() -> None:
    assert print_resolution(1234567.0) == 10.0
    assert print_resolution(3.14159) == pytest.approx(1e-5)


@pytest.mark.parametrize(
    ("calls", "slot_calls", "prompt", "expected"),
    [
        pytest.param(20.0, 60.0, 0.0, 0.0, id="no-prompt-no-chunk-call"),
        pytest.param(20.0, 61.0, 2045.0, 1.0, id="one-chunk-call-among-decode-calls"),
        pytest.param(1.0, 4.0, 2045.0, 1.0, id="every-call-carried-the-prompt"),
        pytest.param(20.0, 60.0, 20.0, 3.0, id="a-stream-restarting-takes-its-slots-turn"),
        pytest.param(0.0, 0.0, 0.0, 0.0, id="no-call"),
    ],
)
def test_chunk_calls_are_the_busy_slot_calls_beyond_the_generating_slots(
    calls: float, slot_calls: float, prompt: float, expected: float
) -> None:
    seconds = 5.0 if prompt > 1000 else 0.15  # a long chunk call, or three short-prompt calls of 50 ms
    got = chunk_calls(np.array([calls]), np.array([slot_calls]), np.array([prompt]), np.array([0.01]),
                      np.array([seconds]), 0.05)
    assert got[0] == expected


def test_a_chunk_longer_than_its_interval_is_spread_back_over_the_intervals_it_ran_in() -> None:
    seconds, tokens = spread_back(np.array([0.0, 0.0, 0.0, 5.0]), np.array([0.0, 0.0, 0.0, 2000.0]),
                                  np.array([1.0, 2.0, 2.0, 1.5]))
    assert seconds.tolist() == pytest.approx([0.0, 1.5, 2.0, 1.5])
    assert tokens.sum() == pytest.approx(2000.0)
    assert tokens[1:].tolist() == pytest.approx([600.0, 800.0, 600.0])


def test_per_stream_rate_is_calls_per_second_and_prompt_work_lands_where_it_ran() -> None:
    recording, truth = server_trace()
    ep = recording.endpoint()
    rows = np.arange(ep.n_scrapes)
    dt = np.concatenate([[np.nan], np.diff(ep.timestamps)])
    iv = derive_intervals(ep, rows, dt)
    assert iv is not None
    # every prompt token the scrapes saw is counted once, spread or not
    values, _ = ep.column(ep.select("llamacpp:prompt_tokens_total")[0])
    assert np.nansum(iv.prompt_tokens) == pytest.approx(values[-1] - values[0])
    long_rows = iv.prompt_tokens > 300
    # the long prompt's 7 s ran over about 7 one-second scrapes per prompt, not the 2-3 calls' ends
    assert 10 <= long_rows.sum() <= 18
    # decoders got no token in the intervals the chunk call covered
    assert (iv.decode_rows[long_rows] == 0).sum() >= 6


def test_census_on_the_replayed_counters_finds_sharing_and_the_truths_collapse() -> None:
    recording, truth = server_trace()
    report = census_recording(recording)[0]
    assert report.profile == "llamacpp"
    assert report.verdict.mechanism.value == "step-time-sharing", [e.text for e in report.verdict.evidence]
    idle = report.buckets.rows[0].per_stream_tokens_per_second
    assert idle == pytest.approx(truth["outside"], rel=0.1)
    # decoders' time lost while the long prompts ran: the census's sharing share against the replay's
    assert truth["lost_share"] > 0.08
    assert report.losses.step_time_sharing == pytest.approx(truth["lost_share"], abs=0.04)
    # the ledger: decode-only step near the replayed call, chunk steps of seconds
    assert report.ledger.available
    assert report.ledger.decode_step_seconds == pytest.approx(DECODE_CALL, rel=0.3)
    # (the mean chunk step also counts each stream's next request, a one-call prompt)
    assert report.ledger.chunk_step_seconds > 5 * report.ledger.decode_step_seconds


def test_reading_tokens_predicted_as_the_decode_rate_would_invert_the_collapse() -> None:
    """The trap the census steps around: generated tokens are counted when a request ends."""
    recording, truth = server_trace()
    ep = recording.endpoint()
    values, _ = ep.column(ep.select("llamacpp:tokens_predicted_total")[0])
    moved = np.diff(values) > 0
    # it moves in a minority of scrapes, by whole requests, while decoders decode in nearly all
    assert moved.mean() < 0.5
    assert set(np.diff(values)[moved].tolist()) <= {200.0, 400.0, 600.0}


def test_a_chunk_call_still_running_at_the_windows_end_reads_as_prompt_work_not_idle() -> None:
    # the second prompt starts at 100 s; its first call (about 5 s) has not returned at 103 s
    recording, _ = server_trace(seconds=103.0, prompt_starts=(30.0, 100.0))
    ep = recording.endpoint()
    rows = np.arange(ep.n_scrapes)
    dt = np.concatenate([[np.nan], np.diff(ep.timestamps)])
    iv = derive_intervals(ep, rows, dt)
    assert iv is not None
    tail = ep.timestamps - T0 > 101.0
    assert tail.sum() >= 1
    assert (iv.decode_rows[tail] == 0).all()
    assert (iv.prompt_tokens[tail] > 100).all()  # at the window's own chunk rate, about 400 tok/s
    assert (iv.decoders[tail] == 3).all()
