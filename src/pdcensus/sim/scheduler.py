"""The scheduler's decisions: what the next step carries (kept apart from what it costs).

- Chunk sizing. A LONE prefill (no decoders running) gets ``--prefill-span`` x interval tokens
  per step when a span is set (skipping the intermediate snapshot writes), else one interval
  (capped by ``--max-num-batched-tokens``). A BUSY prefill (decoders running) gets
  ``--busy-prefill-chunk``: a number, or ``auto``, which reserves ``1 + spec`` rows per
  decoding sequence out of the budget but refuses to halve the chunk for decode rows alone,
  then reserves 1/8 of the budget per waiting request, and never goes below the prefill
  stager's smallest pass. An explicit chunk below that pass is honoured and pays the stager's
  synchronous expert reads.
- Admission. First come, first served; a preempted sequence resumes first. A sequence is
  admitted only if the batch has room (``--max-num-seqs``) and its whole prefill fits in the
  KV cache above a watermark (:func:`admission_fits`). Held steps admit nothing.
- Preemption by recompute. When the decoders' next step would not fit in the KV cache, the
  most recently admitted decoder is preempted: it frees its KV and later re-prefills from
  token 0, or, under :data:`VLLM_ADMISSION`, from the last of its full blocks that the prefix
  cache still holds (:func:`resume_start`).

The watermark and the resume are :class:`KvAdmission`: radiance's by default, vLLM 0.32's for
a twin of a vLLM recording. vLLM 0.32 admits a waiting or preempted request when its whole
sequence fits in the free blocks (``scheduler_reserve_full_isl = True``, ``watermark = 0.0``:
``vllm/config/scheduler.py`` l. 190-201, ``v1/core/kv_cache_manager.py`` l. 509-537), and a
preempted request restarts at ``num_computed_tokens = 0`` (``v1/core/sched/scheduler.py``
``_preempt_request``), so its cached full blocks are found again by the prefix-cache lookup
(prefix caching is on by default). Its blocks go back to the free queue tail-first, so the blocks
that others allocate meanwhile evict its last blocks first (``v1/core/kv_cache_manager.py``
l. 620-629, ``free``: "we free the blocks in reverse order so that the tail blocks are evicted
first").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from pdcensus.sim.config import EngineConfig

KV_WATERMARK_SHARE = 0.01
GROWTH_HEADROOM_STEPS = 128


@dataclass(frozen=True)
class KvAdmission:
    """The admission watermark and how a preempted sequence resumes."""

    watermark_share: float = KV_WATERMARK_SHARE  # of the cache's capacity
    headroom_steps: int = GROWTH_HEADROOM_STEPS  # the decoders' growth over this many steps
    resume_from_prefix_cache: bool = False  # False: recompute from token 0
    partial_block_share: float = 1.0  # of a block each holder's last block is taken to waste (1: the worst case)
    # the scheduler's stats are published when a step ends (the admission's prefix-cache lookup, the running /
    # waiting / KV-usage gauges), not as the scheduler changes them
    stats_at_step_end: bool = False


# vLLM allocates ceil(context / block_size) blocks a request: its last block is on average half empty; its
# stats are published when a step ends (pdcensus.engines.vllm_0_32.KV_RULES cites the lines)
VLLM_ADMISSION = KvAdmission(watermark_share=0.0, headroom_steps=0, resume_from_prefix_cache=True,
                             partial_block_share=0.5, stats_at_step_end=True)


class ChunkPlan(NamedTuple):
    """The prefill chunk of the next step and whether it is below the stager's smallest pass.

    A named tuple: one is made per chunk run, and a frozen dataclass cost several times as much.
    """

    tokens: int
    below_stager_pass: bool
    skip_intermediate_writes: bool


def busy_budget_tokens(config: EngineConfig) -> int:
    """The budget a busy chunk is cut from: one interval, capped by the step budget."""
    return min(config.max_num_batched_tokens, config.checkpoint_interval)


def auto_busy_chunk_tokens(config: EngineConfig, decoders: int, waiting: int, stager_min_pass_tokens: int) -> int:
    """``--busy-prefill-chunk auto``: the runbook's rule, in tokens."""
    budget = busy_budget_tokens(config)
    after_rows = max(budget - config.rows_per_sequence * decoders, budget // 2)
    after_waiting = after_rows - waiting * (budget // 8)
    return max(after_waiting, stager_min_pass_tokens)


def plan_chunk(
    config: EngineConfig, decoders: int, waiting: int, remaining_tokens: int, stager_min_pass_tokens: int
) -> ChunkPlan:
    """The next chunk for a prefill with ``remaining_tokens`` left."""
    if decoders == 0:
        if config.prefill_span > 1:
            size = config.prefill_span * config.checkpoint_interval
            return ChunkPlan(size if size < remaining_tokens else remaining_tokens, False, True)
        size = min(config.max_num_batched_tokens, config.checkpoint_interval)
        return ChunkPlan(size if size < remaining_tokens else remaining_tokens, False, False)
    if config.busy_prefill_chunk is None:
        size = auto_busy_chunk_tokens(config, decoders, waiting, stager_min_pass_tokens)
        return ChunkPlan(size if size < remaining_tokens else remaining_tokens, False, False)
    size = min(config.busy_prefill_chunk, config.max_num_batched_tokens)
    below = size < stager_min_pass_tokens and remaining_tokens > size
    return ChunkPlan(min(size, remaining_tokens), below, False)


def admission_fits(
    free_tokens: int, prefill_context_tokens: int, capacity_tokens: int, running: int, growth_per_step: int,
    config: EngineConfig, admission: KvAdmission = KvAdmission(),
) -> bool:
    """Whether a sequence whose prefill ends at ``prefill_context_tokens`` may be admitted now.

    Above the prompt, the cache must keep a watermark: by default 1 % of capacity or the decoders'
    growth over :data:`GROWTH_HEADROOM_STEPS` steps, whichever is larger (so a resumed sequence is
    not preempted again a few steps later); none under :data:`VLLM_ADMISSION`.
    """
    if running >= config.max_num_seqs:
        return False
    watermark = max(int(admission.watermark_share * capacity_tokens), admission.headroom_steps * growth_per_step)
    return free_tokens - prefill_context_tokens >= watermark


def resume_start(context_tokens: int, block_size: int, free_before_tokens: int, allocated_since_tokens: int) -> int:
    """Where a preempted sequence's recompute starts when the prefix cache still holds its full blocks.

    ``free_before_tokens``: the cache's free tokens other than the sequence's own when it was preempted
    (the free queue's head, evicted first); ``allocated_since_tokens``: what the others allocated since.
    What they took beyond the free head evicted the sequence's blocks from its last one back. At least
    the last token is computed again (a step must emit the next token)."""
    full_blocks = context_tokens // block_size
    evicted = max(0, allocated_since_tokens - max(0, free_before_tokens))
    kept = max(0, full_blocks - -(-evicted // block_size))
    return max(0, min(kept * block_size, context_tokens - 1))
