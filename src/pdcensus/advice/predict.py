"""The arithmetic behind each recommendation's predicted effect, from the census's own numbers.

- ``--prefill-interleave N``: a decoder beside a prefill gets N+1 tokens per chunk step +
  N decode-only steps, so its rate during prefill is ``(N+1) / (C + N*D)`` (C = mean chunk
  step, D = mean decode-only step, both from the step ledger); the prefilling prompt's
  chunked time stretches by the same ``N*D`` per chunk step, i.e. by ``(C + N*D) / C``.
- checkpoint retention: a prefix hit at depth ``d`` reuses up to the deepest retained
  linear-state checkpoint and replays the rest. ``keep-all`` retains every interval
  (replay ``d mod I``); ``geometric-backoff`` retains ``I * 2^k`` (replay
  ``d - I * 2^floor(log2(d/I))``, up to about half the prompt, and the same whatever
  ``I`` is, since halving ``I`` lands on the same powers of two); ``tip-only`` retains the
  last checkpoint written, which serves a hit that continues the conversation (replay
  ``d mod I``) and none that diverges below it (replay ``d``).
- a busy bucket (prefill above idle) mixes back-to-back chunk steps with decode-only
  stretches; the measured busy per-stream rate gives the mix, and under N the
  back-to-back stretches last ``1 + N*D/C`` times longer while the rest is unchanged
  (:func:`busy_bucket_rate`). With no decode-only stretch this is the formula above.
- queued TTFT (:func:`queued_ttft_ratio`): prefill is a single server whose utilisation is
  the share of step time chunk steps take (``rho``, from the ledger); N stretches each chunk
  step by ``s = (C + N*D)/C``, so ``rho' = rho * s``. A request's TTFT is its wait behind
  earlier prefills plus its own; in an M/M/1 queue that sojourn time is exponential with mean
  ``S / (1 - rho)``, so every quantile (p90 included) scales by ``s * (1 - rho) / (1 - rho')``,
  and without bound once ``rho' >= 1``. The model ignores batching of prefills and bursty
  arrivals; the bare stretch ``s`` stays beside it as the lower bound. The bursts are what
  :mod:`pdcensus.advice.ttft_replay` replays: the recording's own prefill work, interval by
  interval, through the same server.
- the chunk step as a line in its tokens: ``C(t) = D + (C - D) * t / t0``, so a smaller
  step budget costs ``C(t) / t`` seconds per prompt token against ``C(t0) / t0``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pdcensus.errors import UsageError

MAX_INTERLEAVE = 64
TRADEOFF_VALUES = tuple(range(0, 9))
POLICIES = ("geometric-backoff", "tip-only", "keep-all")


@dataclass(frozen=True)
class InterleavePoint:
    """The predicted effect of ``--prefill-interleave N`` for one N."""

    interleave: int
    per_stream_tokens_per_second: float
    share_of_idle: float
    ttft_stretch: float
    added_seconds_per_chunk_step: float

    def to_row(self) -> dict[str, float]:
        return {
            "interleave": float(self.interleave),
            "per_stream_tokens_per_second": self.per_stream_tokens_per_second,
            "share_of_idle": self.share_of_idle,
            "ttft_stretch": self.ttft_stretch,
            "added_seconds_per_chunk_step": self.added_seconds_per_chunk_step,
        }


def interleave_rate(interleave: int, chunk_step_seconds: float, decode_step_seconds: float) -> float:
    """Per-stream decode tokens/s beside a prefill: (N+1) / (C + N*D)."""
    return (interleave + 1) / (chunk_step_seconds + interleave * decode_step_seconds)


def interleave_point(interleave: int, chunk_step_seconds: float, decode_step_seconds: float,
                     idle_per_stream_tokens_per_second: float) -> InterleavePoint:
    rate = interleave_rate(interleave, chunk_step_seconds, decode_step_seconds)
    added = interleave * decode_step_seconds
    return InterleavePoint(interleave, rate, rate / idle_per_stream_tokens_per_second,
                           (chunk_step_seconds + added) / chunk_step_seconds, added)


def interleave_tradeoff(chunk_step_seconds: float, decode_step_seconds: float,
                        idle_per_stream_tokens_per_second: float,
                        values: Sequence[int] = TRADEOFF_VALUES) -> list[InterleavePoint]:
    """The trade-off table: decode rate kept against TTFT stretch, one row per N."""
    return [interleave_point(n, chunk_step_seconds, decode_step_seconds,
                             idle_per_stream_tokens_per_second) for n in values]


def saturated_share(measured_busy_tokens_per_second: float, current_interleave: int, chunk_step_seconds: float,
                    decode_step_seconds: float) -> float:
    """The share of busy-bucket time spent in back-to-back chunk steps (at N = 0), from the measured rate.

    A busy bucket mixes back-to-back chunk steps (a long prompt's chunks, rate
    ``(N+1)/(C+N*D)``) with decode-only stretches (rate ``1/D``); the measured per-stream rate
    fixes the mix. Measured under ``current_interleave`` > 0, the saturated time was already
    stretched by ``1 + N*D/C``; that is undone so the share is the N = 0 one.
    """
    fast, slow = 1.0 / decode_step_seconds, interleave_rate(current_interleave, chunk_step_seconds, decode_step_seconds)
    if fast <= slow:
        return math.nan
    seen = min(1.0, max(0.0, (fast - measured_busy_tokens_per_second) / (fast - slow)))
    growth = 1.0 + current_interleave * decode_step_seconds / chunk_step_seconds
    return seen / (growth - seen * (growth - 1.0))


def busy_bucket_rate(interleave: int, saturated: float, chunk_step_seconds: float, decode_step_seconds: float) -> float:
    """The busy bucket's per-stream rate under N: saturated stretches grow by ``1 + N*D/C``."""
    growth = 1.0 + interleave * decode_step_seconds / chunk_step_seconds
    share = saturated * growth / (saturated * growth + 1.0 - saturated)
    return share * interleave_rate(interleave, chunk_step_seconds, decode_step_seconds) + (1.0 - share) / decode_step_seconds


def queued_ttft_ratio(interleave: int, current_interleave: int, prefill_load: float,
                      chunk_step_seconds: float, decode_step_seconds: float) -> float:
    """TTFT p90 under N over TTFT p90 now, with queueing behind the stretched prefill (M/M/1).

    ``prefill_load`` is the share of step time chunk steps take under ``current_interleave``.
    Returns ``inf`` when the stretched load reaches 1 (the prefill queue no longer drains), and
    NaN when the load is not a share in [0, 1).
    """
    if not (0.0 <= prefill_load < 1.0):
        return math.nan

    def stretch(n: int) -> float:
        return (chunk_step_seconds + n * decode_step_seconds) / chunk_step_seconds

    ratio = stretch(interleave) / stretch(current_interleave)
    load = prefill_load * ratio
    if load >= 1.0:
        return math.inf
    return ratio * (1.0 - prefill_load) / (1.0 - load)


def choose_interleave(target_share: float, chunk_step_seconds: float, decode_step_seconds: float,
                      idle_per_stream_tokens_per_second: float) -> tuple[int, bool]:
    """The smallest N whose predicted share of the idle rate reaches the target.

    Returns ``(N, reached)``; when no N up to :data:`MAX_INTERLEAVE` reaches it (the
    share tends to ``(1/D) / idle`` as N grows), the largest useful N and False.
    """
    for n in range(0, MAX_INTERLEAVE + 1):
        point = interleave_point(n, chunk_step_seconds, decode_step_seconds,
                                 idle_per_stream_tokens_per_second)
        if point.share_of_idle >= target_share:
            return n, True
    return MAX_INTERLEAVE, False


def replay_tokens(policy: str, depth_tokens: int, interval_tokens: int, diverged: bool = False) -> int:
    """Tokens replayed as prefill after a prefix hit at ``depth_tokens`` under a policy."""
    d, i = int(depth_tokens), int(interval_tokens)
    if d < i or i <= 0:
        return d
    if policy == "keep-all":
        return d % i
    if policy == "tip-only":
        return d if diverged else d % i
    if policy == "geometric-backoff":
        return d - i * (1 << int(math.floor(math.log2(d / i))))
    raise UsageError(f"unknown checkpoint policy {policy!r}; choose one of: {', '.join(POLICIES)}")


def snapshot_writes(depth_tokens: int, interval_tokens: int) -> int:
    """Snapshot writes while prefilling a prompt of this depth: one per interval, any policy."""
    return int(depth_tokens) // int(interval_tokens) if interval_tokens > 0 else 0


def held_checkpoints(policy: str, depth_tokens: int, interval_tokens: int) -> int:
    """Checkpoints one sequence of this depth keeps (pinned host RAM, in snapshots)."""
    written = snapshot_writes(depth_tokens, interval_tokens)
    if written == 0:
        return 0
    if policy == "keep-all":
        return written
    if policy == "tip-only":
        return 1
    return int(math.floor(math.log2(written))) + 1


def mean_replay(policy: str, depths_tokens: Sequence[int], interval_tokens: int,
                diverged: bool = False) -> float:
    if not depths_tokens:
        return math.nan
    return sum(replay_tokens(policy, d, interval_tokens, diverged) for d in depths_tokens) / len(depths_tokens)


def chunk_step_seconds_at(tokens: float, chunk_tokens: float, chunk_step_seconds: float,
                          decode_step_seconds: float) -> float:
    """A chunk step of ``tokens`` prompt tokens, on the line through (0, D) and (t0, C)."""
    return decode_step_seconds + (chunk_step_seconds - decode_step_seconds) * tokens / chunk_tokens


def prefill_cost_ratio(new_tokens: float, chunk_tokens: float, chunk_step_seconds: float,
                       decode_step_seconds: float) -> float:
    """Seconds per prompt token with a ``new_tokens`` chunk, against the current chunk."""
    new = chunk_step_seconds_at(new_tokens, chunk_tokens, chunk_step_seconds, decode_step_seconds)
    return (new / new_tokens) / (chunk_step_seconds / chunk_tokens)
