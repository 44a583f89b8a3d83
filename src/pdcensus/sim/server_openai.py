"""The OpenAI-compatible protocol of the live simulator: parse requests, shape answers and errors.

Only the part of the API a load generator or the ``openai`` SDK uses is served:
``/v1/completions`` and ``/v1/chat/completions`` (streaming and not) and ``/v1/models``. A
request is parsed into a :class:`GenerationRequest` or refused with an :class:`ApiError`
that renders as OpenAI's error object
``{"error": {"message", "type": "invalid_request_error", "param", "code"}}``.

Tokens are counted, not computed: the simulator has no model, so a deterministic tokenizer
stands in, one token per started 4 characters of text (:func:`count_tokens`, the rule of
thumb OpenAI documents for English), and a chat prompt adds 4 tokens per message and 3 for
the reply's priming, the overhead of a chat template. A list of integers is taken as token ids
(its length is the count). The output is ``max_tokens`` tokens (default 16) of filler words,
so ``usage`` is exact and a client can check it. ``return_engine_time`` (a request extension,
as vLLM takes extra body fields) adds the engine's emission time of each chunk, in engine
seconds, so a test can compare the gaps it measured with the model's own.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any

CHARS_PER_TOKEN = 4
CHAT_TOKENS_PER_MESSAGE = 4
CHAT_REPLY_PRIMING_TOKENS = 3
DEFAULT_MAX_TOKENS = 16
_WORDS = ("the", "decode", "step", "waits", "for", "a", "chunk", "while", "prefill", "holds", "device", "and",
          "each", "token", "arrives", "late")


class ApiKind(str, Enum):
    """Which generation API a request came in on."""

    COMPLETIONS = "completions"
    CHAT = "chat"


class ApiError(Exception):
    """A refused request: HTTP status plus OpenAI's error object."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class GenerationRequest:
    """A parsed generation request: what the engine needs plus how to answer."""

    endpoint: ApiKind
    model: str
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool
    return_engine_time: bool


def count_tokens(text: str) -> int:
    """Tokens of ``text``: one per started ``CHARS_PER_TOKEN`` characters (0 for empty text)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def token_text(index: int) -> str:
    """The text of output token ``index`` (0-based): a word with its leading space."""
    return " " + _WORDS[index % len(_WORDS)]


def _bool(body: dict[str, Any], key: str, default: bool) -> bool:
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"{key!r} must be a boolean, got {value!r}", key)
    return value


def _int(body: dict[str, Any], key: str, default: int, minimum: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"{key!r} must be an integer, got {value!r}", key)
    if value < minimum:
        raise ApiError(400, f"{key!r} must be at least {minimum}, got {value}", key)
    return value


def _prompt_tokens(prompt: Any) -> int:
    if isinstance(prompt, str):
        return count_tokens(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1:
        return _prompt_tokens(prompt[0])
    if isinstance(prompt, list) and len(prompt) > 1:
        raise ApiError(400, "batched prompts are not served: send one prompt (a string or a list of token ids) "
                            "per request", "prompt")
    raise ApiError(400, f"'prompt' must be a string or a list of token ids, got {type(prompt).__name__}", "prompt")


def _message_text(index: int, message: Any) -> str:
    if not isinstance(message, dict) or "role" not in message:
        raise ApiError(400, f"messages[{index}] must be an object with 'role' and 'content'", f"messages[{index}]")
    role = message["role"]
    if role not in ("system", "developer", "user", "assistant", "tool"):
        raise ApiError(400, f"messages[{index}].role {role!r} is not one of: system, developer, user, "
                            "assistant, tool", f"messages[{index}].role")
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise ApiError(400, f"messages[{index}].content parts must be {{'type': 'text', 'text': ...}}",
                               f"messages[{index}].content")
            parts.append(part["text"])
        return "".join(parts)
    raise ApiError(400, f"messages[{index}].content must be a string or a list of text parts",
                   f"messages[{index}].content")


def parse_request(endpoint: ApiKind, body: Any, served_model: str, max_model_len: int) -> GenerationRequest:
    """Validate a request body (already JSON-decoded) against the served model; raise ApiError."""
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' is required: the served model is " + repr(served_model), "model")
    if model != served_model:
        raise ApiError(404, f"the model {model!r} does not exist; this server serves: {served_model}", "model",
                       "model_not_found")
    if _int(body, "n", 1, 1) != 1:
        raise ApiError(400, "only n=1 is served", "n")
    if endpoint is ApiKind.COMPLETIONS:
        if "prompt" not in body:
            raise ApiError(400, "'prompt' is required", "prompt")
        prompt = _prompt_tokens(body["prompt"])
        max_tokens = _int(body, "max_tokens", DEFAULT_MAX_TOKENS, 1)
    else:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "'messages' must be a non-empty list", "messages")
        texts = [_message_text(i, m) for i, m in enumerate(messages)]
        prompt = sum(count_tokens(t) + CHAT_TOKENS_PER_MESSAGE for t in texts) + CHAT_REPLY_PRIMING_TOKENS
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        max_tokens = _int(body, key, DEFAULT_MAX_TOKENS, 1)
    if prompt < 1:
        raise ApiError(400, "the prompt is empty", "prompt" if endpoint is ApiKind.COMPLETIONS else "messages")
    if prompt + max_tokens > max_model_len:
        raise ApiError(400, f"this model's maximum context length is {max_model_len} tokens; the request asks "
                            f"for {prompt + max_tokens} ({prompt} in the prompt, {max_tokens} to generate)",
                       "max_tokens", "context_length_exceeded")
    stream = _bool(body, "stream", False)
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise ApiError(400, "'stream_options' must be an object", "stream_options")
    include_usage = _bool(options or {}, "include_usage", False)
    if include_usage and not stream:
        raise ApiError(400, "'stream_options' is only allowed when 'stream' is true", "stream_options")
    return GenerationRequest(endpoint, model, prompt, max_tokens, stream, include_usage,
                             _bool(body, "return_engine_time", False))


class Answer:
    """Builds the response objects of one request (ids, timestamps, chunks, usage)."""

    def __init__(self, request: GenerationRequest, rid: int) -> None:
        self.request = request
        chat = request.endpoint is ApiKind.CHAT
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-sim{rid:08d}"
        self.object = "chat.completion" if chat else "text_completion"
        self.chunk_object = "chat.completion.chunk" if chat else "text_completion"
        self.created = int(time.time())
        self.tokens = 0
        self._token_frame: tuple[bytes, bytes] | None = None

    def usage(self) -> dict[str, int]:
        p = self.request.prompt_tokens
        return {"prompt_tokens": p, "completion_tokens": self.tokens, "total_tokens": p + self.tokens}

    def take(self, n_tokens: int) -> str:
        """The text of the next ``n_tokens`` tokens (never past ``max_tokens``)."""
        n = min(n_tokens, self.request.max_tokens - self.tokens)
        text = "".join(token_text(self.tokens + i) for i in range(n))
        self.tokens += n
        return text

    def _choice(self, text: str | None, finish_reason: str | None, first: bool = False) -> dict[str, Any]:
        if self.request.endpoint is ApiKind.CHAT:
            delta: dict[str, Any] = {}
            if first:
                delta["role"] = "assistant"
            if text is not None:
                delta["content"] = text
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}

    def chunk(self, text: str | None, finish_reason: str | None = None, engine_seconds: float | None = None,
              first: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "object": self.chunk_object, "created": self.created,
                               "model": self.request.model, "choices": [self._choice(text, finish_reason, first)]}
        if self.request.include_usage:
            out["usage"] = None
        if engine_seconds is not None and self.request.return_engine_time:
            out["engine_time_seconds"] = round(engine_seconds, 6)
        return out

    def token_event(self, text: str, engine_seconds: float) -> bytes:
        """``chunk(text)`` after the first, as a ready SSE event (the hot path: no dict, one small dumps)."""
        if self._token_frame is None:
            frame = self.chunk("\x00", engine_seconds=0.0)
            frame.pop("engine_time_seconds", None)
            head_text, tail_text = json.dumps(frame, separators=(",", ":")).split('"\\u0000"')
            self._token_frame = (b"data: " + head_text.encode(), tail_text[:-1].encode())
        head, tail = self._token_frame
        when = b',"engine_time_seconds":%.6f' % engine_seconds if self.request.return_engine_time else b""
        return head + json.dumps(text).encode() + tail + when + b"}\n\n"

    def usage_chunk(self) -> dict[str, Any]:
        return {"id": self.id, "object": self.chunk_object, "created": self.created, "model": self.request.model,
                "choices": [], "usage": self.usage()}

    def whole(self, text: str) -> dict[str, Any]:
        """The non-streaming answer."""
        if self.request.endpoint is ApiKind.CHAT:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": None, "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
        return {"id": self.id, "object": self.object, "created": self.created, "model": self.request.model,
                "choices": [choice], "usage": self.usage()}


def models_list(model: str, created: int, max_model_len: int) -> dict[str, Any]:
    """The ``/v1/models`` answer."""
    return {"object": "list", "data": [{"id": model, "object": "model", "created": created,
                                        "owned_by": "pdcensus-sim", "max_model_len": max_model_len}]}
