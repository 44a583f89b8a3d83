"""`pdcensus serve` as a real endpoint: the official openai client streams from it at the model's cadence.

Each server is a real ``pdcensus serve`` child process on a free port of 127.0.0.1. The cadence
is checked on the server's own record, which no neighbour's load can move: the engine's
emission instant of every token (returned per chunk with the ``return_engine_time``
extension) against the cost model's decode-only step and the long prompt's chunk steps. What
the client measures on its own clock is held only to a relation that holds under any load: no
token arrives before the engine emitted it, counted from the moment the request was sent (the
client-side gap percentiles are a benchmark: bench/serve_load.py, BENCHMARKS.md).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from pdcensus.sim.cost_model import CostModel, StepShape
from pdcensus.sim.server_process import ServeProcess

MODEL = "radiance/hybrid-moe-a3b"
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[ServeProcess]:
    """Real clients only, at speed 1: every step the client sees is one of ours."""
    with ServeProcess("step-time-sharing", background=False) as server:
        yield server


@pytest.fixture(scope="module")
def client(quiet_server: ServeProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=quiet_server.url + "/v1", api_key="unused", max_retries=0, timeout=60)


def test_streamed_tokens_come_at_the_decode_only_step_and_wait_out_a_chunk_step_beside_them(
    client: openai.OpenAI,
) -> None:
    arrivals: list[float] = []
    engine_times: list[float] = []
    long_prompt_done: list[int] = []

    def long_prompt() -> None:  # 12,288 prompt tokens: three chunk steps of ~4k tokens
        answer = client.completions.create(model=MODEL, prompt="x" * 4 * 12288, max_tokens=2)
        assert answer.usage is not None
        long_prompt_done.append(answer.usage.prompt_tokens)

    other = threading.Thread(target=long_prompt)
    sent = time.monotonic()
    stream = client.completions.create(model=MODEL, prompt="hello", max_tokens=320, stream=True,
                                       extra_body={"return_engine_time": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].text:
            arrivals.append(time.monotonic())
            assert chunk.model_extra is not None
            engine_times.append(float(chunk.model_extra["engine_time_seconds"]))
        if len(arrivals) == 40 and not other.is_alive() and not long_prompt_done:
            other.start()
    other.join()
    assert long_prompt_done == [12288] and len(arrivals) == 320
    model = [b - a for a, b in zip(engine_times[1:], engine_times[2:])]
    cost = CostModel()
    decode_step = cost.decode_only_seconds(StepShape(1, 0, 10, 0, 0))
    quiet = [m for m in model if m < 2 * decode_step]
    beside_chunk = [m for m in model if m > 10 * decode_step]
    assert statistics.median(quiet) == pytest.approx(decode_step, rel=TOLERANCE)
    assert 2 <= len(beside_chunk) <= 3, f"not the long prompt's chunk steps: {sorted(model)[-5:]}"
    chunk_extra = cost.per_prefill_token_seconds * 12288 / 3  # one third of the prompt per chunk step
    assert statistics.median(beside_chunk) >= decode_step + (1 - TOLERANCE) * chunk_extra
    # the client's clock: whatever the machine's load, no token comes before the engine emits it
    early = [(k, arrivals[k] - sent, engine_times[k] - engine_times[0]) for k in range(len(arrivals))
             if arrivals[k] - sent < engine_times[k] - engine_times[0] - 1e-3]
    assert early == []
    assert arrivals[-1] - sent >= sum(beside_chunk)  # the client did wait out the chunk steps


def test_non_streaming_completion_and_chat_report_exact_usage(client: openai.OpenAI) -> None:
    done = client.completions.create(model=MODEL, prompt="y" * 37, max_tokens=9)
    chat = client.chat.completions.create(model=MODEL, max_tokens=4,
                                          messages=[{"role": "user", "content": "z" * 12}])
    assert done.usage is not None and chat.usage is not None
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (10, 9)
    assert len(done.choices[0].text.split()) == 9 and done.choices[0].finish_reason == "length"
    assert (chat.usage.prompt_tokens, chat.usage.completion_tokens) == (3 + 4 + 3, 4)
    assert chat.choices[0].message.role == "assistant" and len((chat.choices[0].message.content or "").split()) == 4


def test_a_streamed_chat_ends_with_usage_when_asked(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(model=MODEL, max_tokens=5, stream=True,
                                                 stream_options={"include_usage": True},
                                                 messages=[{"role": "user", "content": "hi"}]))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text.split()) == 5
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"


def test_a_malformed_request_gets_400_and_the_openai_error_object(quiet_server: ServeProcess,
                                                                  client: openai.OpenAI) -> None:
    raw = httpx.post(quiet_server.url + "/v1/completions", content=b'{"model": ', timeout=10)
    assert raw.status_code == 400
    assert raw.json()["error"]["type"] == "invalid_request_error" and "JSON" in raw.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=MODEL, prompt="hi", max_tokens=-3)
    assert caught.value.status_code == 400
    assert isinstance(caught.value.body, dict) and caught.value.body["param"] == "max_tokens"
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt="hi")


def test_models_lists_the_served_model(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]


def test_sigterm_lets_a_short_stream_finish_cuts_a_long_one_cleanly_and_exits_zero() -> None:
    # the short stream needs ~0.4 s of engine time after the signal, the long one ~45 s: a drain of
    # 4 s separates them with a margin no busy neighbour eats
    server = ServeProcess("step-time-sharing", background=False, extra_args=["--drain-seconds", "4"]).start()
    try:
        body = {"model": MODEL, "prompt": "hi", "stream": True}
        with httpx.Client(base_url=server.url, timeout=30) as http:
            with http.stream("POST", "/v1/completions", json={**body, "max_tokens": 5000}) as long_stream, \
                    http.stream("POST", "/v1/completions", json={**body, "max_tokens": 40}) as short_stream:
                long_lines = long_stream.iter_lines()
                next(line for line in long_lines if line.startswith("data: {"))
                server.signal()
                short_text = [line for line in short_stream.iter_lines() if line]
                long_text = [line for line in long_lines if line]
        code = server.wait(timeout_seconds=20)
    finally:
        if server.returncode is None:
            server.stop()
    assert code == 0, server.log_text()
    assert short_text[-1] == "data: [DONE]" and '"finish_reason":"length"' in short_text[-2]
    assert long_text[-1] == "data: [DONE]" and "shutting down" in long_text[-2]
    assert len(long_text) < 5000
    assert "cut at shutdown" in server.log_text() and "Traceback" not in server.log_text()
