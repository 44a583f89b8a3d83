"""The client load for vLLM: token-id prompts, decoders all the time, prompts in scheduled phases.

The server has no tokenizer (``--skip-tokenizer-init``), so every prompt is a list of token ids
and its length is exact. The records, the streaming call and the JSONL are :mod:`.streams`'s (the
llama.cpp load's), so :mod:`.truth` measures both engines the same way:

- ``decoders`` streams, each sending one request after another: its own ``decoder_prompt_tokens``
  ids (random, seeded by the stream) and ``max_tokens`` tokens with ``ignore_eos``;
- one prompt session, sending one prompt at a time while a phase is open, ``prompt_max_tokens``
  tokens each (1: its first token ends its prompt processing), pausing ``prompt_gap_seconds``
  after each answer. Prompts are distinct from their
  first id (no prefix-cache hit) unless ``shared_prefix_tokens`` is set: then prompt ``i`` is
  that shared prefix, then session ``i % sessions``'s history up to turn ``i // sessions`` (each
  turn ``turn_tokens`` more ids), a multi-turn chat re-sending everything it said before.

The phases are ``(start, end)`` offsets from the load's start; the load ends at
``duration_seconds`` (requests still streaming a second later are cut, keeping their tokens).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from pdcensus.engine.streams import END_GRACE_SECONDS, RequestRecord, stream_one
from pdcensus.engine.vllm_server import MODEL_NAME

VOCAB_LOW, VOCAB_HIGH = 3, 31999  # past bos/eos, inside the dummy model's 32,000


@dataclass(frozen=True)
class VllmPlan:
    """What the client sends to vLLM, and when."""

    scenario: str = "sharing"
    decoders: int = 3
    decoder_prompt_tokens: int = 32
    max_tokens: int = 300
    prompt_tokens: int = 3000
    prompt_max_tokens: int = 1
    phases: tuple[tuple[float, float], ...] = ((40.0, 80.0), (120.0, 160.0))
    duration_seconds: float = 200.0
    shared_prefix_tokens: int = 0
    sessions: int = 0
    turn_tokens: int = 0
    seed: int = 0
    prompt_gap_seconds: float = 0.0  # the prompt session's pause after each prompt's answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def random_ids(rng: random.Random, count: int) -> list[int]:
    return [rng.randint(VOCAB_LOW, VOCAB_HIGH) for _ in range(count)]


def prompt_stream(plan: VllmPlan) -> Iterator[list[int]]:
    """The prompt session's prompts, in the order they are sent, without end (see the module doc).

    Drawn as they are sent: a phase holds as many prompts as the engine answers in it (a fast host
    answered 1,000-token prompts in 0.11 s, and a list sized at one prompt a second ran dry 4 s
    into a 30 s phase)."""
    rng = random.Random(plan.seed)
    if plan.shared_prefix_tokens <= 0 or plan.sessions <= 0:
        while True:
            yield random_ids(rng, plan.prompt_tokens)
    prefix = random_ids(rng, plan.shared_prefix_tokens)
    histories: list[list[int]] = [[] for _ in range(plan.sessions)]
    session_rngs = [random.Random(rng.getrandbits(64)) for _ in range(plan.sessions)]
    turn = 0
    while True:
        i = turn % plan.sessions
        histories[i] += random_ids(session_rngs[i], plan.turn_tokens)
        yield prefix + histories[i]
        turn += 1


def prompt_ids(plan: VllmPlan, count: int) -> list[list[int]]:
    """The first ``count`` prompts of :func:`prompt_stream`."""
    return list(itertools.islice(prompt_stream(plan), count))


def _body(ids: list[int], max_tokens: int, *, ignore_eos: bool) -> dict[str, Any]:
    return {"model": MODEL_NAME, "prompt": ids, "max_tokens": max_tokens, "stream": True,
            "ignore_eos": ignore_eos, "temperature": 0.0, "return_token_ids": True}


async def _decoder(client: httpx.AsyncClient, url: str, stream: int, plan: VllmPlan, stop_at: float,
                   out: list[RequestRecord]) -> None:
    ids = random_ids(random.Random(1000 + stream + 7919 * plan.seed), plan.decoder_prompt_tokens)
    index = 0
    while time.time() < stop_at:
        record = RequestRecord("decode", stream, index, time.time(), prompt_tokens=len(ids))
        out.append(record)
        await stream_one(client, url, record, _body(ids, plan.max_tokens, ignore_eos=True))
        index += 1
        if record.error:
            await asyncio.sleep(0.2)


async def _prompter(client: httpx.AsyncClient, url: str, plan: VllmPlan, t0: float, out: list[RequestRecord]) -> None:
    if not plan.phases or plan.prompt_tokens <= 0 and plan.shared_prefix_tokens <= 0:
        return
    prompts = prompt_stream(plan)
    index = 0
    for begin, end in plan.phases:
        await asyncio.sleep(max(0.0, t0 + begin - time.time()))
        while time.time() < t0 + end:
            ids = next(prompts)
            record = RequestRecord("prompt", 0, index, time.time(), prompt_tokens=len(ids))
            out.append(record)
            await stream_one(client, url, record, _body(ids, plan.prompt_max_tokens, ignore_eos=True))
            index += 1
            if record.error:
                await asyncio.sleep(0.2)
            elif plan.prompt_gap_seconds > 0:
                await asyncio.sleep(min(plan.prompt_gap_seconds, max(0.0, t0 + end - time.time())))


async def run_vllm_load(url: str, plan: VllmPlan) -> tuple[float, list[RequestRecord]]:
    """Drive the server for ``plan.duration_seconds``; returns ``(t0, records)``."""
    records: list[RequestRecord] = []
    limits = httpx.Limits(max_connections=plan.decoders + 4, max_keepalive_connections=plan.decoders + 4)
    async with httpx.AsyncClient(timeout=httpx.Timeout(900.0), limits=limits) as client:
        t0 = time.time()
        stop_at = t0 + plan.duration_seconds
        tasks = [asyncio.create_task(_decoder(client, url, i, plan, stop_at, records)) for i in range(plan.decoders)]
        tasks.append(asyncio.create_task(_prompter(client, url, plan, t0, records)))
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, stop_at + END_GRACE_SECONDS - time.time()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return t0, records
