"""Planning runs of identical steps: what the next steps carry, what they cost, how many are jumped at once.

:class:`RunPlanner` reads the engine's state (through :class:`EngineState`, so this module
never imports the engine) and returns a :class:`Run`; it changes nothing. The engine makes
the scheduler's changes first (preemptions to fit the KV cache, an admission, the end of a
hold), then asks for the plan. Each step's time is the cost model's
(:meth:`~pdcensus.sim.cost_model.CostModel.decode_only` plus
:meth:`~pdcensus.sim.cost_model.CostModel.chunk_extra`, the terms of its ``step_seconds``): the model the tests check is
the model the engine runs.

A run ends before anything that would change the step: the next completion (a decoder
leaves), the next arrival that could be admitted (or that changes an ``auto`` busy chunk), the
end of a hold, KV exhaustion, the heat engine's next promotion, a change in snapshot writes
per chunk, or :data:`MAX_RUN_SECONDS` (the decoders' context, which attention pays for, is
taken at the start of the run). Decode-only runs and aligned chunk runs are both jumped.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Protocol

from pdcensus.sim.config import EngineConfig
from pdcensus.sim.cost_model import CostModel, StepShape
from pdcensus.sim.entities import Sequence
from pdcensus.sim.hardware import Hardware
from pdcensus.sim.kv import KVCache
from pdcensus.sim.residency import Residency
from pdcensus.sim.scheduler import ChunkPlan, plan_chunk

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


class EngineState(Protocol):
    """What the planner reads from an engine (:class:`~pdcensus.sim.engine.Engine` has all of it)."""

    config: EngineConfig
    cost: CostModel
    hardware: Hardware
    kv: KVCache
    residency: Residency
    tokens_per_step: int
    decode_index: int
    decoders: list[Sequence]
    waiting: deque[Sequence]
    prefilling: Sequence | None
    held_remaining: int

    def next_completion_index(self) -> int | None: ...

    def next_arrival_seconds(self) -> float | None: ...

    def holders(self) -> int: ...


class RunPlanner:
    """Decides the next :class:`Run` from an engine's state, without changing it (hot path: kept flat).

    The bounds (:meth:`_bound`, the next arrival) are written out in the two run kinds: the
    planner is asked once per run, a few hundred thousand times a simulated day.
    """

    def __init__(self, config: EngineConfig, cost: CostModel, hardware: Hardware) -> None:
        self.cost = cost
        self.config = config
        self.rows_per_sequence = config.rows_per_sequence
        self.interval = config.checkpoint_interval
        self.interleave = config.held_steps_per_chunk
        self.auto_busy = config.busy_prefill_chunk is None
        self.stager_tokens = hardware.stager_min_pass_tokens
        self._chunks: dict[tuple[int, int], ChunkPlan] = {}

    def chunk_plan(self, decoders: int, waiting: int, remaining_tokens: int) -> tuple[int, bool, bool]:
        """:func:`~pdcensus.sim.scheduler.plan_chunk` for this engine, its size kept per batch shape.

        The scheduler's chunk is a size set by the decoders and the queue, capped by what the
        prefill has left, and below the stager's pass only while more than a chunk is left; so
        the plan of an unbounded prefill is kept per ``(decoders, waiting)`` and capped here.
        """
        key = (decoders, waiting)
        plan = self._chunks.get(key)
        if plan is None:
            plan = self._chunks[key] = plan_chunk(self.config, decoders, waiting, UNBOUNDED, self.stager_tokens)
        size = plan.tokens
        if remaining_tokens > size:
            return plan
        return remaining_tokens, False, plan.skip_intermediate_writes

    def plan(self, e: EngineState, now: float) -> Run | None:
        """The next run, once the engine has preempted, admitted and ended a hold as the scheduler says."""
        if e.decoders:
            if e.held_remaining > 0:
                return self._decode_run(e, now, True, e.held_remaining)
            if e.prefilling is not None:
                return self._chunk_run(e, now)
            return self._decode_run(e, now, False, UNBOUNDED)
        if e.prefilling is not None:
            return self._chunk_run(e, now)
        return None

    def _bound(self, e: EngineState, step_seconds: float, decoders: int) -> int:
        """Steps until the next completion, KV exhaustion, promotion, or MAX_RUN_SECONDS."""
        k = int(MAX_RUN_SECONDS / step_seconds) or 1
        if decoders:
            index = e.next_completion_index()
            if index is not None and index - e.decode_index < k:
                k = max(1, index - e.decode_index)
            kv = e.kv
            growth = decoders * e.tokens_per_step
            free = kv.capacity_tokens - e.holders() * kv.holder_waste - kv.static_tokens - growth * e.decode_index
            fits = free // growth
            if fits < k:
                k = max(1, fits)
            res = e.residency
            if res.missing_experts and not res.loaned:
                promote = math.ceil((res.params.promote_seconds - res.heat_seconds) / step_seconds - 1e-9)
                if promote < k:
                    k = max(1, promote)
        return k

    @staticmethod
    def _until_arrival(e: EngineState, now: float, step_seconds: float, k: int) -> int:
        arrival = e.next_arrival_seconds()
        if arrival is not None:
            steps = math.ceil((arrival - now) / step_seconds - 1e-9)
            if steps < k:
                return max(1, steps)
        return k

    def _decode_run(self, e: EngineState, now: float, held: bool, limit: int) -> Run:
        """A run of decode-only steps (``n`` > 0 decoders), bounded as :meth:`_bound` says."""
        n = len(e.decoders)
        kv = e.kv
        index0 = e.decode_index
        growth = n * e.tokens_per_step
        used = kv.static_tokens + growth * index0
        prefilling = e.prefilling
        context = used if prefilling is None else used - prefilling.prefill_end_position
        missing = e.residency.missing_experts
        rows = n * self.rows_per_sequence
        cost = self.cost
        dt = cost.decode_only(rows, context, missing)
        # _bound, written out
        k = int(MAX_RUN_SECONDS / dt) or 1
        index = e.next_completion_index()
        if index is not None and index - index0 < k:
            k = max(1, index - index0)
        holders = n + (1 if prefilling is not None else 0)
        fits = (kv.capacity_tokens - holders * kv.holder_waste - used) // growth
        if fits < k:
            k = max(1, fits)
        if missing:
            res = e.residency
            if not res.loaned:
                promote = math.ceil((res.params.promote_seconds - res.heat_seconds) / dt - 1e-9)
                if promote < k:
                    k = max(1, promote)
        if limit < k:
            k = limit
        if not held and prefilling is None and not e.waiting:
            arrival = e.next_arrival_seconds()
            if arrival is not None:
                steps = math.ceil((arrival - now) / dt - 1e-9)
                if steps < k:
                    k = max(1, steps)
        return Run(now, dt, k, n, rows, 0, context, missing, 0, False, held, 0.0,
                   cost.miss_seconds_per_expert * missing, False)

    def _chunk_run(self, e: EngineState, now: float) -> Run:
        """A run of equal chunks of the one prefill; snapshot writes are averaged over the run.

        Chunks that straddle checkpoint boundaries write 0 or 1 (or more) snapshots each, so the
        run carries the mean write count: its total time, writes and tokens are exact, each step's
        own time is the run's mean (off by at most one snapshot write).
        """
        seq = e.prefilling
        assert seq is not None
        n = len(e.decoders)
        done = seq.prefill_start_position + seq.prefill_done_tokens
        remaining = seq.prefill_end_position - done
        tokens, below, skip = self.chunk_plan(n, len(e.waiting), remaining)
        interval = self.interval
        context = e.kv.static_tokens + n * e.tokens_per_step * e.decode_index - seq.prefill_end_position
        missing = e.residency.missing_experts
        rows = n * self.rows_per_sequence
        cost = self.cost
        decode_part = cost.decode_only(rows, context, missing)
        k = remaining // tokens
        if k > 1 and not (n and self.interleave):
            most_writes = -(-tokens // interval) if not skip else 1
            bound_dt = decode_part + cost.chunk_extra(tokens, most_writes, below)
            k = min(k, self._bound(e, bound_dt, n))
            if n and self.auto_busy:
                k = self._until_arrival(e, now, bound_dt, k)
        elif k < 1 or n and self.interleave:
            k = 1
        if skip:
            writes_total = sum(1 for j in range(1, k + 1) if (done + j * tokens) % interval == 0)
        else:
            writes_total = (done + k * tokens) // interval - done // interval
        writes = writes_total / k
        extra = cost.chunk_extra(tokens, writes, below)
        return Run(now, decode_part + extra, k, n, rows, tokens, context, missing, writes, below, False, extra,
                   cost.miss_seconds_per_expert * missing, skip)
