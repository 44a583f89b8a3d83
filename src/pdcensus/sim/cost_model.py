"""The cost model: how long one engine step takes, given what its batch carries.

Kept apart from the scheduler (which decides what a step carries) so that either can change
alone: the run planner (:mod:`pdcensus.sim.steps`) asks this model for every step's time,
and nothing else in the simulator prices a step. A step's time is

    base + per_row x decode rows + per_token x prefill tokens + attention over the decoders'
    context + expert-miss penalty + snapshot writes (+ a synchronous expert read per routed
    layer when the chunk is below the prefill stager's smallest pass).

The defaults are calibrated so that a decode-only step of 32 sequences is ~15 ms and a chunk
step of one checkpoint interval (4,096 tokens) beside them is ~15x that. :func:`scaled` gives
the perturbed copies the randomized accuracy tests use.

An engine that splits a step into micro-batches (llama.cpp's ``-ub``: ``llama_decode`` runs
one pass per ``n_ubatch`` tokens, and sampling waits for all of them) pays a pass per
micro-batch: with ``ubatch_tokens`` > 0 a chunk of ``T`` tokens adds
``ubatch_seconds x (ceil(T / ubatch_tokens) - 1)`` (the first pass is the step's own). Off
(0) for radiance's scenarios; the what-if calibration (:mod:`pdcensus.whatif`) sets it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class StepShape:
    """What one step carries (the scheduler's output, the cost model's input)."""

    decode_rows: int
    prefill_tokens: int
    context_tokens: int  # sum of the decoding sequences' contexts
    missing_experts: int
    snapshot_writes: float  # a run of chunks carries its mean writes per step
    below_stager_pass: bool = False

    @property
    def is_chunk_step(self) -> bool:
        return self.prefill_tokens > 0


@dataclass(frozen=True)
class CostModel:
    """Step-time constants (seconds)."""

    base_seconds: float = 0.0085
    per_row_seconds: float = 0.00012
    per_prefill_token_seconds: float = 0.000050
    per_context_token_seconds: float = 0.000000018
    miss_seconds_per_expert: float = 0.00025
    snapshot_write_seconds: float = 0.012
    stager_sync_seconds: float = 0.150
    ubatch_tokens: int = 0  # 0 = the step is one pass
    ubatch_seconds: float = 0.0  # the cost of each further micro-batch pass

    def step_seconds(self, shape: StepShape) -> float:
        """The wall time of one step of this shape."""
        return self.decode_only_seconds(shape) + self.chunk_extra_seconds(shape)

    def decode_only_seconds(self, shape: StepShape) -> float:
        """What the same batch would take without its prefill chunk (expert misses included)."""
        return self.decode_only(shape.decode_rows, shape.context_tokens, shape.missing_experts)

    def chunk_extra_seconds(self, shape: StepShape) -> float:
        """The time a chunk adds to its step: what a decode row beside it waits beyond a decode-only step."""
        return self.chunk_extra(shape.prefill_tokens, shape.snapshot_writes, shape.below_stager_pass)

    # The two terms on plain numbers: the run planner calls these once or twice per run (millions
    # of runs a simulated day), where building a StepShape each time cost ~30 % of its CPU time.

    def decode_only(self, decode_rows: int, context_tokens: int, missing_experts: int) -> float:
        """:meth:`decode_only_seconds` of a batch given by its rows, their context and the missing experts."""
        return (self.base_seconds + self.per_row_seconds * decode_rows
                + self.per_context_token_seconds * context_tokens + self.miss_seconds_per_expert * missing_experts)

    def chunk_extra(self, prefill_tokens: int, snapshot_writes: float, below_stager_pass: bool) -> float:
        """:meth:`chunk_extra_seconds` of a chunk given by its tokens, its snapshot writes and the stager flag."""
        if prefill_tokens <= 0:
            return 0.0
        extra = self.per_prefill_token_seconds * prefill_tokens
        if self.ubatch_tokens > 0:
            extra += self.ubatch_seconds * (-(-prefill_tokens // self.ubatch_tokens) - 1)
        if below_stager_pass:
            extra += self.stager_sync_seconds
        return extra + self.snapshot_write_seconds * snapshot_writes

    def miss_seconds(self, shape: StepShape) -> float:
        """The expert-miss share of one step."""
        return self.miss_seconds_per_expert * shape.missing_experts


def scaled(model: CostModel, factors: dict[str, float]) -> CostModel:
    """A copy with named constants multiplied by ``factors`` (unknown names are ignored)."""
    names = {f.name for f in fields(model)}
    changes = {name: getattr(model, name) * factor for name, factor in factors.items() if name in names}
    return replace(model, **changes)
