"""The client side of the live experiment: decoding streams all the time, long prompts in phases.

Every request is a streaming OpenAI-compatible ``/v1/completions`` call (httpx, HTTP/1.1 on
loopback). The client keeps the wall-clock time (``time.time()``, the clock Prometheus stamps
its scrapes with) of the request's start and of every streamed chunk, so the truth is measured
where a user feels it:

- ``decoders`` streams each send one request after another, ``max_tokens`` tokens each with
  ``ignore_eos`` (llama.cpp's server option: the length is fixed, so every stream keeps
  decoding), each stream with its own short prompt (a cache hit after its first request);
- a prompt session sends one long prompt at a time while its phase lasts, each prompt distinct
  from its first token (random words from a seeded generator), so no slot's cache can reuse it;
  ``max_tokens=1``: its first token marks the end of its prompt processing (its TTFT).

A phase is ``(start_offset_seconds, end_offset_seconds)`` from the load's start; a prompt is
only sent while its phase is open, and the load ends at ``duration_seconds``: requests still
streaming a second later are cut (their records keep the tokens they got).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import httpx

END_GRACE_SECONDS = 1.0  # past the load's end, requests still streaming are cut
# A vocabulary of short English words: about 1.2 Gemma tokens each.
_WORDS = ("river stone cloud garden window silver morning paper engine little orange winter "
          "harbor candle forest yellow pocket bridge summer letter market quiet gentle copper "
          "meadow signal travel thunder violet marble lantern feather island mirror canyon "
          "orchard velvet cotton pillow ladder basket hollow saddle ripple timber").split()


@dataclass
class RequestRecord:
    """One request as the client saw it (seconds since the epoch)."""

    kind: str  # "decode" or "prompt"
    stream: int
    index: int
    started: float
    token_times: list[float] = field(default_factory=list)
    ended: float = float("nan")
    prompt_tokens: int = 0
    error: str = ""

    @property
    def first_token(self) -> float:
        return self.token_times[0] if self.token_times else float("nan")


def distinct_prompt(rng: random.Random, words: int) -> str:
    """Random words; two prompts share no prefix beyond chance."""
    return " ".join(rng.choice(_WORDS) for _ in range(words))


async def count_tokens(client: httpx.AsyncClient, url: str, text: str) -> int:
    """Tokens in ``text`` by the server's own tokenizer (llama.cpp's ``POST /tokenize``)."""
    answer = await client.post(f"{url}/tokenize", json={"content": text})
    answer.raise_for_status()
    return len(answer.json()["tokens"])


async def sized_prompts(url: str, count: int, tokens: int, seed: int) -> list[tuple[str, int]]:
    """``count`` distinct prompts of about ``tokens`` tokens each, with their token counts."""
    rng = random.Random(seed)
    async with httpx.AsyncClient(timeout=60.0) as client:
        probe = distinct_prompt(rng, 1000)
        per_word = await count_tokens(client, url, probe) / 1000.0
        words = max(1, int(tokens / per_word))
        texts = [distinct_prompt(rng, words) for _ in range(count)]
        return [(text, await count_tokens(client, url, text)) for text in texts]


async def stream_one(client: httpx.AsyncClient, url: str, record: RequestRecord, body: dict[str, Any]) -> None:
    try:
        async with client.stream("POST", f"{url}/v1/completions", json=body) as answer:
            answer.raise_for_status()
            async for line in answer.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data.strip() == "[DONE]":
                    break
                chunk = json.loads(data)
                choices = chunk.get("choices") or []
                if choices:
                    # llama.cpp says text; vLLM without a tokenizer says token ids (one chunk may carry more)
                    now = time.time()
                    ids = choices[0].get("token_ids") or ()
                    record.token_times.extend([now] * len(ids) if ids else
                                              [now] if choices[0].get("text", "") != "" else [])
    except (httpx.HTTPError, ValueError) as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    record.ended = time.time()


@dataclass(frozen=True)
class LoadPlan:
    """What the client sends, and when."""

    decoders: int = 3
    max_tokens: int = 200
    prompt_tokens: int = 2800
    phases: tuple[tuple[float, float], ...] = ((60.0, 240.0),)
    duration_seconds: float = 300.0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def _decoder(client: httpx.AsyncClient, url: str, stream: int, plan: LoadPlan, stop_at: float,
                   out: list[RequestRecord]) -> None:
    prompt = f"Stream {stream}. " + distinct_prompt(random.Random(1000 + stream), 24)
    index = 0
    while time.time() < stop_at:
        record = RequestRecord("decode", stream, index, time.time())
        out.append(record)
        await stream_one(client, url, record, {"model": "gemma", "prompt": prompt, "max_tokens": plan.max_tokens,
                                                "stream": True, "ignore_eos": True, "temperature": 0.0})
        index += 1
        if record.error:
            await asyncio.sleep(0.2)


async def _prompter(client: httpx.AsyncClient, url: str, prompts: Sequence[tuple[str, int]], plan: LoadPlan, t0: float,
                    out: list[RequestRecord]) -> None:
    queue = list(prompts)
    index = 0
    for begin, end in plan.phases:
        await asyncio.sleep(max(0.0, t0 + begin - time.time()))
        while time.time() < t0 + end and queue:
            text, tokens = queue.pop(0)
            record = RequestRecord("prompt", 0, index, time.time(), prompt_tokens=tokens)
            out.append(record)
            await stream_one(client, url, record, {"model": "gemma", "prompt": text, "max_tokens": 1,
                                                    "stream": True, "temperature": 0.0})
            index += 1


async def run_load(url: str, plan: LoadPlan,
                   prompts: Sequence[tuple[str, int]]) -> tuple[float, list[RequestRecord]]:
    """Drive the server for ``plan.duration_seconds``; returns ``(t0, records)``."""
    records: list[RequestRecord] = []
    limits = httpx.Limits(max_connections=plan.decoders + 4, max_keepalive_connections=plan.decoders + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        t0 = time.time()
        stop_at = t0 + plan.duration_seconds
        tasks = [asyncio.create_task(_decoder(client, url, i, plan, stop_at, records)) for i in range(plan.decoders)]
        tasks.append(asyncio.create_task(_prompter(client, url, prompts, plan, t0, records)))
        # at the end, requests still streaming are cut (the server stops them when the client leaves)
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, stop_at + END_GRACE_SECONDS - time.time()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return t0, records


def records_to_jsonl(records: Sequence[RequestRecord]) -> str:
    """One JSON object per request, in start order."""
    return "".join(json.dumps(asdict(r)) + "\n" for r in sorted(records, key=lambda r: r.started))
