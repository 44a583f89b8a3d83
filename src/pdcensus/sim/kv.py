"""KV capacity, the prefix cache and its linear-state checkpoints.

KV is counted in tokens: every holder (a decoding sequence, or the one prefilling) holds its
context, and each holder may waste up to one partial block, so the usable capacity is
``blocks x block_size - holders x block_size`` (half a block a holder, its mean, for a vLLM twin). Decoders grow in lockstep, so the number of
steps until the cache is full is closed-form (:meth:`KVCache.steps_until_full`).

The model is hybrid (linear state + paged KV): a prefix-cache hit can resume only from a
linear-state checkpoint. Snapshots are written during prefill at every ``checkpoint_interval``
tokens whatever the policy (``--prefill-span`` skips the intermediate ones of a span chunk);
the policy only decides which are RETAINED:

- ``keep-all``: every written checkpoint (replay after a hit is under one interval);
- ``tip-only``: the last written one;
- ``geometric-backoff``: a ladder of positions ``interval x 2^k``, so under a hit at depth d
  the coarsest retained scale is the largest ``interval x 2^k <= d`` and the deepest gap stays
  about half the prompt whatever the interval.

``--checkpoint-slots`` is a TOTAL over all sessions; when retention would exceed it the
least recently used session loses its checkpoints (a prefix-cache eviction).
"""

from __future__ import annotations

import math
from collections import OrderedDict

from pdcensus.sim.config import CheckpointPolicy


class KVCache:
    """Token accounting of the paged KV cache, closed-form over lockstep decode steps."""

    def __init__(self, capacity_blocks: int, block_size: int, holder_waste: int | None = None) -> None:
        """``holder_waste``: the tokens each holder's partial last block is taken to waste (a whole
        block unless given: :attr:`pdcensus.sim.scheduler.KvAdmission.partial_block_share`)."""
        self.capacity_blocks = capacity_blocks
        self.block_size = block_size
        self.holder_waste = block_size if holder_waste is None else holder_waste
        self.capacity_tokens = capacity_blocks * block_size
        self.static_tokens = 0  # used tokens = static_tokens + growth_per_index x decode index

    def used_tokens(self, decode_index: int, decoders: int, tokens_per_step: int) -> int:
        return self.static_tokens + decoders * tokens_per_step * decode_index

    def free_tokens(self, decode_index: int, decoders: int, tokens_per_step: int, holders: int) -> int:
        usable = self.capacity_tokens - holders * self.holder_waste
        return usable - self.used_tokens(decode_index, decoders, tokens_per_step)

    def steps_until_full(
        self, decode_index: int, decoders: int, tokens_per_step: int, holders: int, extra_per_step: int = 0
    ) -> int:
        """Whole steps that still fit (each adds ``decoders x tokens_per_step + extra_per_step``)."""
        free = self.free_tokens(decode_index, decoders, tokens_per_step, holders)
        growth = decoders * tokens_per_step + extra_per_step
        if growth <= 0:
            return 1 << 40 if free >= 0 else 0
        return max(0, free // growth)


def snapshot_writes(start: int, tokens: int, interval: int, skip_intermediate: bool) -> list[int]:
    """Positions written by a chunk covering ``(start, start + tokens]``."""
    end = start + tokens
    first = (start // interval + 1) * interval
    positions = list(range(first, end + 1, interval))
    if skip_intermediate and positions:
        return [positions[-1]] if positions[-1] == end else []
    return positions


def retained_positions(policy: CheckpointPolicy, written: list[int], interval: int) -> list[int]:
    """Which of the sorted ``written`` positions the policy retains."""
    if not written:
        return []
    if policy is CheckpointPolicy.KEEP_ALL:
        return list(written)
    if policy is CheckpointPolicy.TIP_ONLY:
        return [written[-1]]
    return [p for p in written if p % interval == 0 and _is_power_of_two(p // interval)]


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def reuse_position(retained: list[int], depth: int) -> int:
    """The deepest retained checkpoint at or below ``depth`` (0 if none)."""
    best = 0
    for p in retained:
        if p <= depth and p > best:
            best = p
    return best


def ladder_gap(policy: CheckpointPolicy, depth: int, interval: int) -> int:
    """Tokens replayed after a hit at ``depth`` on a prompt whose checkpoints were all written."""
    written = list(range(interval, depth + 1, interval))
    return depth - reuse_position(retained_positions(policy, written, interval), depth)


def held_per_sequence(policy: CheckpointPolicy, max_model_len: int, interval: int) -> int:
    """``held()``: how many checkpoints one sequence at the longest context keeps under a policy."""
    steps = max(1, max_model_len // interval)
    if policy is CheckpointPolicy.KEEP_ALL:
        return steps
    if policy is CheckpointPolicy.TIP_ONLY:
        return 1
    return int(math.floor(math.log2(steps))) + 1


def auto_slots(
    policy: CheckpointPolicy,
    max_model_len: int,
    interval: int,
    max_num_seqs: int,
    host_ram_bytes: int,
    checkpoint_bytes: int,
) -> int:
    """``--checkpoint-slots auto``: (held() + 1) per --max-num-seqs, within an eighth of host RAM."""
    wanted = (held_per_sequence(policy, max_model_len, interval) + 1) * max_num_seqs
    return max(1, min(wanted, host_ram_bytes // 8 // checkpoint_bytes))


class CheckpointStore:
    """Retained checkpoints per session, a total of at most ``slots``, evicted least recently used."""

    def __init__(self, policy: CheckpointPolicy, interval: int, slots: int) -> None:
        self.policy = policy
        self.interval = interval
        self.slots = slots
        self._written: OrderedDict[int, list[int]] = OrderedDict()
        self._retained: dict[int, list[int]] = {}
        self.retained_total = 0
        self.evicted_sessions = 0

    def lookup(self, session_id: int, depth: int) -> int:
        """Where a hit at ``depth`` can resume for this session (0 if nothing is retained)."""
        if session_id not in self._retained:
            return 0
        self._written.move_to_end(session_id)
        return reuse_position(self._retained[session_id], depth)

    def record(self, session_id: int, positions: list[int]) -> None:
        """Add the positions a prefill wrote for this session, then apply the policy and the slots."""
        if session_id < 0 or not positions:
            return
        written = self._written.pop(session_id, [])
        written = sorted(set(written).union(positions))
        self._written[session_id] = written
        self.retained_total -= len(self._retained.get(session_id, []))
        kept = retained_positions(self.policy, written, self.interval)
        self._retained[session_id] = kept
        self.retained_total += len(kept)
        while self.retained_total > self.slots and len(self._written) > 1:
            oldest, _ = self._written.popitem(last=False)
            self.retained_total -= len(self._retained.pop(oldest, []))
            self.evicted_sessions += 1

    def forget(self, session_id: int) -> None:
        """A session ended: drop its checkpoints."""
        self._written.pop(session_id, None)
        self.retained_total -= len(self._retained.pop(session_id, []))

    def state(self) -> dict[str, int]:
        return {
            "slots": self.slots,
            "retained": self.retained_total,
            "sessions": len(self._retained),
            "evicted_sessions": self.evicted_sessions,
        }
