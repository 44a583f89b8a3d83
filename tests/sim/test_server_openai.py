"""The live simulator's OpenAI protocol: request parsing, refusals, token counts, answer objects."""

from __future__ import annotations

from typing import Any

import pytest

from pdcensus.sim.server_openai import (
    CHAT_REPLY_PRIMING_TOKENS,
    CHAT_TOKENS_PER_MESSAGE,
    DEFAULT_MAX_TOKENS,
    Answer,
    ApiError,
    ApiKind,
    count_tokens,
    parse_request,
)

MODEL = "radiance/hybrid-moe-a3b"
MAX_LEN = 1000


def completion(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "hello there", **extra}


def test_a_token_is_four_characters_rounded_up() -> None:
    assert [count_tokens(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [0, 1, 1, 2, 100]


def test_completion_prompt_counts_text_or_token_ids_and_defaults_to_sixteen_tokens() -> None:
    text = parse_request(ApiKind.COMPLETIONS, completion(prompt="x" * 41), MODEL, MAX_LEN)
    ids = parse_request(ApiKind.COMPLETIONS, completion(prompt=[5, 6, 7]), MODEL, MAX_LEN)
    assert (text.prompt_tokens, text.max_tokens, text.stream) == (11, DEFAULT_MAX_TOKENS, False)
    assert ids.prompt_tokens == 3


def test_chat_prompt_adds_the_template_overhead_per_message() -> None:
    body = {"model": MODEL, "max_completion_tokens": 7, "stream": True,
            "messages": [{"role": "system", "content": "x" * 8},
                         {"role": "user", "content": [{"type": "text", "text": "y" * 5}]}]}
    parsed = parse_request(ApiKind.CHAT, body, MODEL, MAX_LEN)
    assert parsed.prompt_tokens == 2 + 2 + 2 * CHAT_TOKENS_PER_MESSAGE + CHAT_REPLY_PRIMING_TOKENS
    assert (parsed.max_tokens, parsed.stream) == (7, True)


@pytest.mark.parametrize(("body", "status", "param"), [
    pytest.param([1, 2], 400, None, id="body-not-an-object"),
    pytest.param({"prompt": "x"}, 400, "model", id="model-missing"),
    pytest.param(completion(model="gpt-4"), 404, "model", id="model-unknown"),
    pytest.param({"model": MODEL}, 400, "prompt", id="prompt-missing"),
    pytest.param(completion(prompt=""), 400, "prompt", id="prompt-empty"),
    pytest.param(completion(prompt={"text": "x"}), 400, "prompt", id="prompt-an-object"),
    pytest.param(completion(prompt=["a", "b"]), 400, "prompt", id="prompt-batched"),
    pytest.param(completion(max_tokens=0), 400, "max_tokens", id="max-tokens-zero"),
    pytest.param(completion(max_tokens="9"), 400, "max_tokens", id="max-tokens-a-string"),
    pytest.param(completion(max_tokens=True), 400, "max_tokens", id="max-tokens-a-bool"),
    pytest.param(completion(max_tokens=MAX_LEN), 400, "max_tokens", id="context-too-long"),
    pytest.param(completion(n=2), 400, "n", id="n-two"),
    pytest.param(completion(stream="yes"), 400, "stream", id="stream-not-bool"),
    pytest.param(completion(stream_options={"include_usage": True}), 400, "stream_options",
                 id="stream-options-without-stream"),
])
def test_a_malformed_completion_is_refused_with_an_openai_error(body: Any, status: int, param: str | None) -> None:
    with pytest.raises(ApiError) as caught:
        parse_request(ApiKind.COMPLETIONS, body, MODEL, MAX_LEN)
    err = caught.value.body()["error"]
    assert caught.value.status == status
    assert err["param"] == param and err["type"] == "invalid_request_error" and err["message"]


@pytest.mark.parametrize("messages", [
    pytest.param(None, id="missing"),
    pytest.param([], id="empty"),
    pytest.param(["hi"], id="a-string-not-an-object"),
    pytest.param([{"role": "wizard", "content": "hi"}], id="unknown-role"),
    pytest.param([{"role": "user", "content": [{"type": "image_url"}]}], id="non-text-part"),
])
def test_malformed_chat_messages_are_refused(messages: Any) -> None:
    with pytest.raises(ApiError, match="messages") as caught:
        parse_request(ApiKind.CHAT, {"model": MODEL, "messages": messages}, MODEL, MAX_LEN)
    assert caught.value.status == 400


def test_the_unknown_model_error_names_the_served_model() -> None:
    with pytest.raises(ApiError, match=MODEL) as caught:
        parse_request(ApiKind.COMPLETIONS, completion(model="other"), MODEL, MAX_LEN)
    assert caught.value.code == "model_not_found"


def test_an_answer_never_hands_out_more_tokens_than_max_tokens() -> None:
    parsed = parse_request(ApiKind.COMPLETIONS, completion(max_tokens=3), MODEL, MAX_LEN)
    answer = Answer(parsed, 7)
    texts = [answer.take(2), answer.take(2), answer.take(2)]
    assert [len(t.split()) for t in texts] == [2, 1, 0]
    assert answer.usage() == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}


def test_chat_chunks_carry_a_delta_and_the_first_one_the_role() -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "return_engine_time": True}
    answer = Answer(parse_request(ApiKind.CHAT, body, MODEL, MAX_LEN), 1)
    first = answer.chunk(answer.take(1), engine_seconds=1.25, first=True)
    later = answer.chunk(answer.take(1), engine_seconds=1.5)
    assert first["object"] == "chat.completion.chunk" and first["id"].startswith("chatcmpl-")
    assert first["choices"][0]["delta"]["role"] == "assistant"
    assert "role" not in later["choices"][0]["delta"] and later["choices"][0]["delta"]["content"]
    assert (first["engine_time_seconds"], later["engine_time_seconds"]) == (1.25, 1.5)


def test_engine_time_is_left_out_unless_asked_for() -> None:
    answer = Answer(parse_request(ApiKind.COMPLETIONS, completion(stream=True), MODEL, MAX_LEN), 1)
    assert "engine_time_seconds" not in answer.chunk(answer.take(1), engine_seconds=2.0)


@pytest.mark.parametrize("kind", [ApiKind.COMPLETIONS, ApiKind.CHAT])
def test_the_fast_token_event_is_byte_for_byte_the_chunk_object_as_json(kind: ApiKind) -> None:
    import json

    body: dict[str, Any] = {"model": MODEL, "stream": True, "return_engine_time": True,
                            "stream_options": {"include_usage": True}}
    body.update({"prompt": "p"} if kind is ApiKind.COMPLETIONS else {"messages": [{"role": "user", "content": "p"}]})
    answer = Answer(parse_request(kind, body, MODEL, MAX_LEN), 9)
    event = answer.token_event(' a "quoted" word\n', 12.5)
    assert event.startswith(b"data: ") and event.endswith(b"\n\n")
    assert json.loads(event[6:]) == answer.chunk(' a "quoted" word\n', engine_seconds=12.5)
