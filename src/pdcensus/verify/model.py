"""Typed values verify-arm produces: each step's result, the gate's comparisons and the verdict.

Every value is a frozen dataclass (or an enum) whose ``to_dict()`` gives the JSON that
``pdcensus verify-arm --json`` prints (schema ``pdcensus/verify-arm/v1``), serialised by the
advice's one JSON rule (:func:`pdcensus.advice.model.json_safe`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.advice.model import json_safe
from pdcensus.advice.predictions import Prediction
from pdcensus.series.profiles import Signal


# the latencies the gate compares in every bucket, and their quantiles (pdcensus.verify.gate; a whatif file
# predicts each by name, pdcensus.verify.forecast)
LATENCIES = ((Signal.TTFT, "TTFT", (0.5, 0.9, 0.99)), (Signal.ITL, "ITL", (0.5, 0.99)))


class ArmOutcome(str, Enum):
    """What ``verify-arm`` concluded about one knob."""

    ENGAGED = "engaged"
    NOT_ENGAGED = "not-engaged"
    INCONCLUSIVE = "inconclusive"
    # engaged, but a predicted quantity missed beyond the tolerance, or a bucket's TTFT/ITL rose
    # where nothing predicted it (pdcensus.verify.gate)
    OFF_PREDICTION = "engaged-off-prediction"


class StepStatus(str, Enum):
    """The result of one step of arm verification (argv, counter, bucket pair)."""

    PASSED = "passed"
    FAILED = "failed"
    UNKNOWN = "unknown"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class ArmStep:
    """One verification step with its evidence as numbers."""

    name: str
    status: StepStatus
    detail: str
    numbers: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "numbers": json_safe(self.numbers),
        }


class CompareStatus(str, Enum):
    """One before/after comparison of ``verify-arm``'s gate (:mod:`pdcensus.verify.gate`)."""

    WITHIN = "within"  # the whole interval lies inside the allowed band
    OFF = "off-prediction"  # a predicted quantity: its whole interval lies outside the band
    COST = "unpredicted-cost"  # nothing predicted a change: its whole interval lies beyond the band
    CANNOT_TELL = "cannot-tell"  # the interval straddles an edge of the band, is wider than it, or is missing
    UNDECIDED = "undecided"  # too few requests or samples in one window to compare


@dataclass(frozen=True)
class Comparison:
    """One quantity before vs after the arm, the prediction for it and the verdict with the tolerance.

    ``ratio`` = after / before with its bootstrap interval (``low``, ``high``); ``predicted_ratio``
    is what the before window predicted (1.0 where no one predicted a change); ``predicted`` says
    whether a number was predicted or 1.0 is only the "no worse" default. ``band_low`` and
    ``band_high`` are the allowed band the interval is held to (:func:`pdcensus.verify.gate.band`),
    the one rule every view prints; ``why`` says how the interval sits against it.
    """

    quantity: str
    bucket: str
    before: float
    after: float
    ratio: float
    low: float
    high: float
    predicted_ratio: float
    predicted: bool
    status: CompareStatus
    basis: str = ""
    higher_is_worse: bool = True
    band_low: float = 0.0
    band_high: float = math.inf
    why: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "quantity": self.quantity, "bucket": self.bucket, "before": json_safe(self.before),
            "after": json_safe(self.after), "ratio": json_safe(self.ratio), "interval": json_safe([self.low, self.high]),
            "predicted_ratio": json_safe(self.predicted_ratio), "predicted": self.predicted,
            "band": [self.band_low, None if math.isinf(self.band_high) else self.band_high],
            "status": self.status.value, "why": self.why, "basis": self.basis,
            "higher_is_worse": self.higher_is_worse,
        }


@dataclass(frozen=True)
class ArmPrediction(Prediction):
    """The before window's prediction for ``--prefill-interleave N`` (:func:`pdcensus.verify.arm.interleave_prediction`).

    From the before window's step ledger (chunk and decode-only step), its busy bucket and the
    replay of its prefill trace. The gate holds the busy bucket's per-stream rate to
    ``busy_per_stream_tokens_per_second`` and the busy TTFT p90 to ``ttft_p90_ratio_replay``
    (``ttft_p90_ratio_queueing`` where the replay had no busy interval to select: NaN then).
    Field order is the JSON's key order.
    """

    interleave: float
    beside_prefill_per_stream_tokens_per_second: float
    busy_bucket_saturated_share: float
    busy_per_stream_tokens_per_second: float
    ttft_stretch: float
    chunk_step_seconds: float
    decode_step_seconds: float
    ttft_p90_ratio_queueing: float
    prefill_load: float
    ttft_p90_ratio_replay: float
    replay_busy_intervals: float

    def gate_ttft_ratio(self) -> tuple[float, str]:
        """The busy TTFT p90 ratio the gate holds the after window to, and what it came from."""
        if math.isfinite(self.ttft_p90_ratio_replay):
            return self.ttft_p90_ratio_replay, "replay of the before window's prefill trace"
        return self.ttft_p90_ratio_queueing, "M/M/1 on the before window's prefill load"


@dataclass(frozen=True)
class ArmObservation(Prediction):
    """What the after window measured against :class:`ArmPrediction` (same order as the JSON's keys)."""

    busy_per_stream_tokens_per_second: float
    ttft_p90_ratio: float
    prediction_error: float  # observed / predicted busy per-stream rate - 1


@dataclass(frozen=True)
class ArmVerdict:
    """``verify-arm``'s answer: the outcome, the step that failed and every step's evidence."""

    flag: str
    value: str | None
    outcome: ArmOutcome
    failed_step: str | None
    reason: str
    steps: tuple[ArmStep, ...]
    predicted: ArmPrediction | None = None  # None: the knob has no numeric prediction (every latency: no rise)
    observed: ArmObservation | None = None
    tolerance: float = math.nan  # the gate's relative tolerance around each prediction
    comparisons: tuple[Comparison, ...] = ()
    whatif: str | None = None  # what a --whatif file gave the gate (pdcensus.verify.forecast), or None

    def step(self, name: str) -> ArmStep | None:
        return next((s for s in self.steps if s.name == name), None)

    def to_dict(self) -> dict[str, object]:
        return {
            "schema": "pdcensus/verify-arm/v1",
            "flag": self.flag,
            "value": self.value,
            "verdict": self.outcome.value,
            "failed_step": self.failed_step,
            "reason": self.reason,
            "steps": [s.to_dict() for s in self.steps],
            "predicted": json_safe(self.predicted.to_dict() if self.predicted else {}),
            "observed": json_safe(self.observed.to_dict() if self.observed else {}),
            "tolerance": json_safe(self.tolerance),
            "comparisons": [c.to_dict() for c in self.comparisons],
            "whatif": self.whatif,
        }
