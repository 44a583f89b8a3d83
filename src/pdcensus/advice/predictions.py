"""What a recommendation predicts, one typed record per kind of knob.

A recommendation's predicted effect used to be a ``dict[str, float]`` that every reader
(the severity note, the twin's check, the report's table) read back by string key, so a
renamed key failed silently as NaN. Each kind of knob now has a frozen record with the
figures its arithmetic states. A reader narrows to the kind it understands
(``isinstance(rec.predicted, InterleavePrediction)``) and reads fields by name.

The field names are the JSON keys: ``to_dict()`` gives the same object the dict did, in
field order. The report's labels (:mod:`pdcensus.report.document_labels`) key off those names.
A field left ``None`` is a figure the arithmetic could not state here (no step ledger, no
budget known), and it is absent from the JSON, as the key was absent from the dict. NaN is
a figure that was computed and came out undefined; the JSON edge writes it as null.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Prediction:
    """No figure predicted: the knob is named, its effect is not counted (no deployed value, no ledger)."""

    def items(self) -> tuple[tuple[str, float], ...]:
        """(name, value) of every stated figure, in field order (the JSON's and the report table's order)."""
        return tuple((f.name, v) for f in fields(self) if (v := getattr(self, f.name)) is not None)

    def to_dict(self) -> dict[str, float]:
        return dict(self.items())

    def __bool__(self) -> bool:
        return bool(self.items())


@dataclass(frozen=True)
class InterleavePrediction(Prediction):
    """radiance's ``--prefill-interleave N`` from the ledger, the buckets and the TTFT replay."""

    interleave: float
    target_decode_share: float
    per_stream_tokens_per_second_during_prefill: float
    share_of_idle: float
    per_stream_tokens_per_second_during_prefill_now: float
    measured_busy_per_stream_tokens_per_second: float
    busy_bucket_saturated_share: float
    busy_bucket_per_stream_tokens_per_second_predicted: float
    idle_per_stream_tokens_per_second: float
    chunk_step_seconds: float
    decode_step_seconds: float
    ttft_stretch: float
    added_seconds_per_chunk_step: float
    held_steps_per_chunk_step: float
    busy_ttft_p90_seconds_now: float
    busy_ttft_p90_seconds_at_least: float
    busy_ttft_p90_seconds_queueing: float
    busy_ttft_p90_seconds_replay: float
    ttft_p90_ratio_replay: float
    replay_ttft_p90_seconds_now: float
    replay_busy_intervals: float
    prefill_load_now: float
    prefill_load_predicted: float


@dataclass(frozen=True)
class ArenaPrediction(Prediction):
    """radiance's eviction arms (a smaller step budget, or one prefill span): the arena a chunk step borrows."""

    lag_tail_effect: float
    arena_loan_fraction_of_now: float | None = None  # None: the deployed budget is not known
    prefill_seconds_per_token_ratio: float | None = None  # None: no budget or no step ledger
    stager_smallest_pass_tokens: float | None = None  # None: no boot ledger


@dataclass(frozen=True)
class CheckpointPolicyPrediction(Prediction):
    """radiance's ``--checkpoint-policy keep-all``: mean replay per prefix hit, now and under keep-all."""

    interval_tokens: float
    mean_replay_tokens_now: float
    mean_replay_tokens_keep_all: float
    mean_replay_tokens_now_half_interval: float
    replay_saved_per_hit_tokens: float


@dataclass(frozen=True)
class CheckpointIntervalPrediction(Prediction):
    """radiance's next ``--checkpoint-interval`` once keep-all is deployed: half the interval."""

    interval_tokens: float
    interval_tokens_predicted: float
    mean_replay_tokens_now: float
    mean_replay_tokens_predicted: float
    snapshot_writes_ratio: float


@dataclass(frozen=True)
class StepBudgetPrediction(Prediction):
    """An engine's step token budget halved (vLLM, SGLang, TGI): the chunk step and the stall beside it."""

    step_tokens_now: float
    step_tokens_predicted: float
    budget_fraction_of_now: float
    # with a step ledger (chunk step longer than the decode-only step)
    chunk_step_seconds_now: float | None = None
    chunk_step_seconds_predicted: float | None = None
    per_stream_tokens_per_second_beside_prefill_now: float | None = None
    per_stream_tokens_per_second_beside_prefill: float | None = None
    prompt_ttft_stretch: float | None = None
    # step-time sharing found with an ITL p99 ratio
    itl_p99_ratio_while_prefill_now: float | None = None
    itl_p99_ratio_while_prefill: float | None = None
    loss_share_now: float | None = None
    # the deployed budget is the cited release's default or its config file's (1.0 default, 0.0 config)
    step_tokens_now_is_default: float | None = None


@dataclass(frozen=True)
class KvHeadroomPrediction(Prediction):
    """Fewer running sequences for a preemption stall: KV demand at the peak batch."""

    peak_running: float
    preemptions: float
    kv_demand_fraction_of_peak: float


@dataclass(frozen=True)
class BatchSizePrediction(Prediction):
    """llama.cpp's ``-b``: the chosen trade-off row, then the inputs it was computed from."""

    batch_size: float
    chunk_call_seconds: float
    per_stream_tokens_per_second_beside_prompt: float
    share_of_idle: float
    prompt_ttft_stretch: float
    batch_size_now: float
    target_decode_share: float
    per_stream_tokens_per_second_beside_prompt_now: float
    prompt_tokens_per_second: float
    decode_step_seconds: float
    decoders: float
    idle_per_stream_tokens_per_second: float
    ubatch_effect_on_decoders: float


@dataclass(frozen=True)
class CapacityPrediction(Prediction):
    """An overloaded endpoint: how much more capacity, and the queue that shows it."""

    capacity_factor: float
    queue_wait_seconds: float
    waiting_slope_per_minute: float
    queue_share_of_residence: float
    admission_per_second: float
