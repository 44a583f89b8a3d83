"""Planning runs of identical steps: what the next steps carry and how many can be jumped at once.

A run ends before anything that would change the step: the next completion (a decoder
leaves), the next arrival that could be admitted (or that changes an ``auto`` busy chunk), the
end of a hold, KV exhaustion, the heat engine's next promotion, a change in snapshot writes
per chunk, or :data:`MAX_RUN_SECONDS` (the decoders' context, which attention pays for, is
taken at the start of the run). Decode-only runs and aligned chunk runs are both jumped.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pdcensus.sim.cost_model import StepShape
from pdcensus.sim.scheduler import plan_chunk


if TYPE_CHECKING:
    from pdcensus.sim.engine import Engine

MAX_RUN_SECONDS = 5.0
UNBOUNDED = 1 << 40


class Run:
    """``steps`` identical steps starting at ``start_seconds``, ``step_seconds`` each.

    A plain slotted class (not a dataclass): one is made per run, on the hot path.
    """

    __slots__ = ("start_seconds", "step_seconds", "steps", "decoders", "decode_rows", "prefill_tokens",
                 "context_tokens", "missing_experts", "snapshot_writes", "below_stager_pass", "held",
                 "chunk_extra_seconds", "miss_seconds", "skip_intermediate_writes")

    def __init__(self, start_seconds: float, step_seconds: float, steps: int, decoders: int, decode_rows: int,
                 prefill_tokens: int, context_tokens: int, missing_experts: int, snapshot_writes: float,
                 below_stager_pass: bool, held: bool, chunk_extra_seconds: float, miss_seconds: float,
                 skip_intermediate_writes: bool) -> None:
        self.start_seconds = start_seconds
        self.step_seconds = step_seconds
        self.steps = steps
        self.decoders = decoders
        self.decode_rows = decode_rows
        self.prefill_tokens = prefill_tokens
        self.context_tokens = context_tokens
        self.missing_experts = missing_experts
        self.snapshot_writes = snapshot_writes
        self.below_stager_pass = below_stager_pass
        self.held = held
        self.chunk_extra_seconds = chunk_extra_seconds
        self.miss_seconds = miss_seconds
        self.skip_intermediate_writes = skip_intermediate_writes

    @property
    def shape(self) -> StepShape:
        return StepShape(self.decode_rows, self.prefill_tokens, self.context_tokens, self.missing_experts,
                         self.snapshot_writes, self.below_stager_pass)


class RunPlanner:
    """Decides the next :class:`~pdcensus.sim.engine.Run` for one engine (hot path: kept flat)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        config = engine.config
        cost = engine.cost
        self.rows_per_sequence = config.rows_per_sequence
        self.interval = config.checkpoint_interval
        self.interleave = config.held_steps_per_chunk
        self.auto_busy = config.busy_prefill_chunk is None
        self.span = config.prefill_span
        self.stager_tokens = engine.hardware.stager_min_pass_tokens
        self.base = cost.base_seconds
        self.per_row = cost.per_row_seconds
        self.per_context = cost.per_context_token_seconds
        self.per_miss = cost.miss_seconds_per_expert
        self.per_token = cost.per_prefill_token_seconds
        self.per_write = cost.snapshot_write_seconds
        self.stager_sync = cost.stager_sync_seconds

    def plan(self, now: float) -> Run | None:
        e = self.engine
        if e.held_remaining > 0 and e.decoders:
            self._ensure_kv(now)
            if e.decoders:
                return self._decode_run(now, True, e.held_remaining)
        e.held_remaining = 0
        self._ensure_kv(now)
        if e.prefilling is None and e.waiting:
            e.try_admit(now)
        if e.prefilling is not None:
            return self._chunk_run(now)
        if e.decoders:
            return self._decode_run(now, False, UNBOUNDED)
        return None

    def _ensure_kv(self, now: float) -> None:
        """Preempt the newest decoders until the next decode step fits in the KV cache."""
        e = self.engine
        while e.decoders and e.free_kv_tokens() < len(e.decoders) * e.tokens_per_step:
            e.preempt_newest(now)

    def _bound(self, step_seconds: float, decoders: int) -> int:
        """Steps until the next completion, KV exhaustion, promotion, or MAX_RUN_SECONDS."""
        e = self.engine
        k = int(MAX_RUN_SECONDS / step_seconds) or 1
        if decoders:
            index = e.next_completion_index()
            if index is not None and index - e.decode_index < k:
                k = max(1, index - e.decode_index)
            kv = e.kv
            growth = decoders * e.tokens_per_step
            free = kv.capacity_tokens - e.holders() * kv.block_size - kv.static_tokens - growth * e.decode_index
            fits = free // growth
            if fits < k:
                k = max(1, fits)
            res = e.residency
            if res.missing_experts and not res.loaned:
                promote = math.ceil((res.params.promote_seconds - res.heat_seconds) / step_seconds - 1e-9)
                if promote < k:
                    k = max(1, promote)
        return k

    def _until_arrival(self, now: float, step_seconds: float, k: int) -> int:
        arrivals = self.engine._arrivals
        if arrivals:
            steps = math.ceil((arrivals[0][0] - now) / step_seconds - 1e-9)
            if steps < k:
                return max(1, steps)
        return k

    def _decode_run(self, now: float, held: bool, limit: int) -> Run:
        e = self.engine
        n = len(e.decoders)
        context = e.kv.static_tokens + n * e.tokens_per_step * e.decode_index
        if e.prefilling is not None:
            context -= e.prefilling.prefill_end_position
        missing = e.residency.missing_experts
        rows = n * self.rows_per_sequence
        miss = self.per_miss * missing
        dt = self.base + self.per_row * rows + self.per_context * context + miss
        k = min(limit, self._bound(dt, n))
        if not held and e.prefilling is None and not e.waiting:
            k = self._until_arrival(now, dt, k)
        return Run(now, dt, k, n, rows, 0, context, missing, 0, False, held, 0.0, miss, False)

    def _chunk_run(self, now: float) -> Run:
        """A run of equal chunks of the one prefill; snapshot writes are averaged over the run.

        Chunks that straddle checkpoint boundaries write 0 or 1 (or more) snapshots each, so the
        run carries the mean write count: its total time, writes and tokens are exact, each step's
        own time is the run's mean (off by at most one snapshot write).
        """
        e = self.engine
        seq = e.prefilling
        assert seq is not None
        n = len(e.decoders)
        remaining = seq.prefill_remaining_tokens
        chunk = plan_chunk(e.config, n, len(e.waiting), remaining, self.stager_tokens)
        tokens = chunk.tokens
        position = seq.prefill_start_position + seq.prefill_done_tokens
        interval = self.interval
        skip = chunk.skip_intermediate_writes
        context = e.kv.static_tokens + n * e.tokens_per_step * e.decode_index - seq.prefill_end_position
        missing = e.residency.missing_experts
        rows = n * self.rows_per_sequence
        miss = self.per_miss * missing
        fixed = self.per_token * tokens + (self.stager_sync if chunk.below_stager_pass else 0.0)
        decode_part = self.base + self.per_row * rows + self.per_context * context + miss
        k = max(1, remaining // tokens)
        if n and self.interleave:
            k = 1
        if k > 1:
            most_writes = -(-tokens // interval) if not skip else 1
            bound_dt = decode_part + fixed + self.per_write * most_writes
            k = min(k, self._bound(bound_dt, n))
            if n and self.auto_busy:
                k = self._until_arrival(now, bound_dt, k)
        if skip:
            writes_total = sum(1 for j in range(1, k + 1) if (position + j * tokens) % interval == 0)
        else:
            writes_total = (position + k * tokens) // interval - position // interval
        writes = writes_total / k
        extra = fixed + self.per_write * writes
        return Run(now, decode_part + extra, k, n, rows, tokens, context, missing, writes,
                   chunk.below_stager_pass, False, extra, miss, skip)
