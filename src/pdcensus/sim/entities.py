"""Entities of the engine model: requests (what a client sends), sequences (the engine's state
for one request) and handles (what a caller holds to watch its tokens).

A :class:`Request` is a frozen value. A :class:`Sequence` is the engine's mutable record of it:
where its prefill is, when it started decoding, whether it was preempted. Decoding sequences
advance in lockstep (every step gives each decoder ``1 + spec`` tokens), so a sequence stores
the engine's decode-step index at which it joined instead of a token count; its tokens at any
later index follow in closed form. That is what lets the engine jump runs of identical steps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

TokenListener = Callable[[float, int], None]
"""Called with ``(emission_time_seconds, n_tokens)`` each time a sequence emits tokens."""


class Request(NamedTuple):
    """One client request (an immutable value).

    ``prompt_tokens`` is the whole prompt. ``session_id``/``cached_depth`` describe a multi-turn
    hit: the first ``cached_depth`` tokens equal a context the session already ran, so the
    prefix cache may reuse them (only up to the last retained linear-state checkpoint).
    A named tuple rather than a frozen dataclass: a simulated day makes a few hundred thousand,
    and a frozen dataclass's constructor cost five times as much.
    """

    arrival_seconds: float
    prompt_tokens: int
    output_tokens: int
    session_id: int = -1
    cached_depth: int = 0
    kind: str = "chat"


class Phase(str, Enum):
    """Where a sequence is in the engine."""

    WAITING = "waiting"
    PREFILLING = "prefilling"
    DECODING = "decoding"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class Sequence:
    """The engine's state for one request."""

    rid: int
    request: Request
    decode_tokens_needed: int  # tokens after the first one, rounded to whole decode steps
    phase: Phase = Phase.WAITING
    prefill_start_position: int = 0  # first token this prefill computes
    prefill_end_position: int = 0  # context length when the prefill ends
    prefill_done_tokens: int = 0
    replay_end_position: int = 0  # [prefill_start, replay_end) are prefix-hit tokens replayed
    generated_tokens: int = 0  # tokens emitted before the current decode stint
    decode_start_index: int = 0  # engine decode-step index when this stint began
    admitted_seconds: float = float("nan")
    first_token_seconds: float = float("nan")
    preempted_seconds: float = float("nan")
    finished_seconds: float = float("nan")
    preemptions: int = 0
    version: int = 0
    kv_base: int = 0  # KV tokens held = kv_base + tokens_per_step x decode index (while decoding)
    preempt_free_tokens: int = 0  # the cache's other free tokens when last preempted
    preempt_used_tokens: int = 0  # the others' KV tokens when last preempted
    written_positions: list[int] = field(default_factory=list)
    listener: TokenListener | None = None

    @property
    def prefill_remaining_tokens(self) -> int:
        return self.prefill_end_position - self.prefill_start_position - self.prefill_done_tokens

    @property
    def resuming(self) -> bool:
        """True while re-prefilling after a preemption (a recompute from token 0)."""
        return self.preemptions > 0 and self.generated_tokens > 0


@dataclass(slots=True)
class RequestHandle:
    """What :meth:`Engine.submit` returns: the request's id and, as they happen, its timings.

    ``emissions`` holds ``(time, n_tokens)`` pairs when ``record_emissions`` is on (live mode
    streams them); otherwise only the summary times are kept.
    """

    rid: int
    request: Request
    record_emissions: bool = False
    emissions: list[tuple[float, int]] = field(default_factory=list)
    first_token_seconds: float = float("nan")
    finished_seconds: float = float("nan")
    tokens_emitted: int = 0

    @property
    def finished(self) -> bool:
        return self.finished_seconds == self.finished_seconds  # not NaN

    def on_tokens(self, t: float, n_tokens: int) -> None:
        self.tokens_emitted += n_tokens
        if self.first_token_seconds != self.first_token_seconds:
            self.first_token_seconds = t
        if self.record_emissions:
            self.emissions.append((t, n_tokens))
