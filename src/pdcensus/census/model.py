"""The typed census report: frozen dataclasses that every renderer reads, and their JSON.

One :class:`CensusReport` per endpoint. ``to_dict()`` gives the versioned JSON object
(schema ``pdcensus/census/v2``, documented in ``docs/census-schema.md``); several
endpoints serialise as ``{"schema": ..., "endpoints": [...]}`` via
:func:`reports_to_dict`. Floats that are not finite become ``null`` in JSON (JSON has
no NaN); tuples become lists; enums become their value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from pdcensus.census.client_felt import ClientFelt
from pdcensus.census.domains import Domain, domain
from pdcensus.census.overload_model import OverloadResult
from pdcensus.census.verdict_model import (
    DoseResponse,
    Evidence,
    Found,
    Severity,
    Signature,
    Verdict,
)
from pdcensus.mechanism import Mechanism

SCHEMA = "pdcensus/census/v2"

__all__ = ["SCHEMA", "Mechanism", "Evidence", "Severity", "Signature", "Found", "DoseResponse", "Verdict",
           "SegmentStart", "Segment", "ShapeResult", "LedgerBucket", "LedgerTimeline", "LedgerResult", "BucketRow",
           "BucketTable", "LagPoint", "LagResult", "TtftResult", "Burst", "PreemptionResult", "Trap", "LossShares",
           "PassRecord", "Timeline", "CensusReport", "reports_to_dict", "plain"]


class SegmentStart(str, Enum):
    """Why a shape starts where it starts (``Segment``, the JSON's ``segments`` and ``--segment`` name a shape)."""

    WINDOW_START = "window-start"
    UP_ZERO = "up-zero"
    GAP = "gap"
    COUNTER_RESET = "counter-reset"
    PROCESS_START = "process-start-changed"
    NEW_FAMILY = "new-family"
    CLOCK_BREAK = "clock-break"


@dataclass(frozen=True)
class Segment:
    """One shape: a run of scrapes from one process of one build."""

    index: int
    start: float
    end: float
    scrapes: int
    profile: str
    starts_because: SegmentStart
    reason: str
    proven: bool = True
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ShapeResult:
    segments: tuple[Segment, ...]
    analysed: int | None
    proven: bool
    reason: str


@dataclass(frozen=True)
class LedgerBucket:
    """Decode-only and chunk step by the prefill bucket of the scrape ending the interval."""

    bucket: str
    intervals: int
    decode_step_seconds: float = field(metadata=domain(Domain.NONNEGATIVE))
    chunk_step_seconds: float = field(metadata=domain(Domain.NONNEGATIVE))
    chunk_steps: float = field(metadata=domain(Domain.NONNEGATIVE))


@dataclass(frozen=True)
class LedgerTimeline:
    """Per interval between scrapes (aligned with the interval's ending scrape time)."""

    times: tuple[float, ...]
    decode_step_seconds: tuple[float, ...]
    chunk_step_seconds: tuple[float, ...]
    held_steps: tuple[float, ...]
    chunk_time_share: tuple[float, ...]


@dataclass(frozen=True)
class LedgerResult:
    available: bool
    reason: str
    intervals: int = 0
    decode_step_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    chunk_step_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    mean_step_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    steps: float = field(default=0.0, metadata=domain(Domain.NONNEGATIVE))
    held_steps: float = field(default=0.0, metadata=domain(Domain.NONNEGATIVE))
    chunk_share_of_steps: float = field(default=math.nan, metadata=domain(Domain.SHARE))
    chunk_share_of_step_time: float = field(default=math.nan, metadata=domain(Domain.SHARE))
    reference_decode_step_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    reference: str = ""
    decode_step_inflation_during_prefill: float = field(default=math.nan, metadata=domain(Domain.RATIO))
    decode_step_inflation_after_prefill: float = field(default=math.nan, metadata=domain(Domain.RATIO))
    by_bucket: tuple[LedgerBucket, ...] = ()
    timeline: LedgerTimeline | None = None
    partial: bool = False  # no count of chunk steps: sharing is an upper bound (``reason`` says why)


@dataclass(frozen=True)
class BucketRow:
    bucket: str
    low_tokens_per_second: float = field(metadata=domain(Domain.NONNEGATIVE))
    high_tokens_per_second: float
    samples: int
    decode_tokens_per_second: float = field(metadata=domain(Domain.NONNEGATIVE))
    per_stream_tokens_per_second: float = field(metadata=domain(Domain.NONNEGATIVE))
    per_stream_samples: int
    per_stream_vs_idle: float = field(metadata=domain(Domain.RATIO))
    ttft_p50_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    ttft_p90_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    ttft_p99_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    ttft_requests: float = field(default=0.0, metadata=domain(Domain.NONNEGATIVE))
    preemptions: float = field(default=0.0, metadata=domain(Domain.NONNEGATIVE))
    # inter-token latency in this bucket's intervals (what streaming users feel)
    itl_p50_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    itl_p99_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))

    def domain_violation(self) -> str | None:
        """A bucket of prefill rates has a width (its edges in order, apart); else why not."""
        if self.bucket == "idle" or self.high_tokens_per_second > self.low_tokens_per_second:
            return None
        return (f"a bucket has a width > 0; both its edges lie at {self.low_tokens_per_second:.0f} tok/s "
                f"({self.samples} samples)")


@dataclass(frozen=True)
class BucketTable:
    """Decode by prefill from the same scrape: an idle bucket and a few busy ones."""

    prefill: str
    basis: str
    idle_threshold_tokens_per_second: float = field(metadata=domain(Domain.NONNEGATIVE))
    idle_rule: str
    edges_tokens_per_second: tuple[float, ...]
    rows: tuple[BucketRow, ...]
    scrape_interval_seconds: float
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class LagPoint:
    lag_seconds: float
    effect: float
    low: float
    high: float
    busy_samples: int
    idle_samples: int


@dataclass(frozen=True)
class LagResult:
    available: bool
    reason: str
    points: tuple[LagPoint, ...] = ()
    tail_window_seconds: tuple[float, float] = (120.0, 840.0)
    tail_effect: float = math.nan
    tail_low: float = math.nan
    tail_high: float = math.nan
    tail_samples: int = 0
    clean_samples: int = 0
    longest_lag_with_effect_seconds: float = 0.0
    control: str = ""
    tail_test_ran: bool = False  # enough tail and clean scrapes for the pooled 2-14 min test


@dataclass(frozen=True)
class TtftResult:
    available: bool
    reason: str
    family: str = ""
    idle_p90_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    busiest_p90_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))


@dataclass(frozen=True)
class Burst:
    start: float
    end: float
    preemptions: float = field(metadata=domain(Domain.NONNEGATIVE))
    decode_vs_baseline: float = field(metadata=domain(Domain.RATIO))
    prefill_vs_baseline: float = field(metadata=domain(Domain.RATIO))


@dataclass(frozen=True)
class PreemptionResult:
    available: bool
    reason: str
    total: float = field(default=0.0, metadata=domain(Domain.NONNEGATIVE))
    bursts: tuple[Burst, ...] = ()
    decode_dip: float = field(default=math.nan, metadata=domain(Domain.RATIO))
    prefill_spike: float = math.nan
    depth_max: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    depth_mean: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    times: tuple[float, ...] = ()
    increases: tuple[float, ...] = ()


@dataclass(frozen=True)
class Trap:
    name: str
    fired: bool
    text: str
    value: float | None = None


@dataclass(frozen=True)
class LossShares:
    """Each mechanism's lost decode time as a share of decoders' time, with intervals."""

    step_time_sharing: float = field(metadata=domain(Domain.SHARE))
    step_time_sharing_interval: tuple[float, float] = field(metadata=domain(Domain.SHARE))
    step_time_sharing_basis: str
    eviction: float = field(metadata=domain(Domain.SHARE))
    eviction_interval: tuple[float, float] = field(metadata=domain(Domain.SHARE))
    eviction_basis: str
    preemption_stall: float = field(metadata=domain(Domain.SHARE))
    preemption_stall_interval: tuple[float, float] = field(metadata=domain(Domain.SHARE))
    preemption_stall_basis: str
    collapse_at_lag0: float
    collapse_at_lag0_interval: tuple[float, float]


@dataclass(frozen=True)
class PassRecord:
    """One runbook step: whether it ran on this engine's metrics, what that did to confidence, why.

    ``confidence_factor`` is the factor the step's absence or limit applied to the verdict's
    confidence (1.0 = none); a step whose absence makes the verdict ``inconclusive`` says so
    in ``reason``.
    """

    name: str
    ran: bool
    confidence_factor: float
    reason: str


@dataclass(frozen=True)
class Timeline:
    """Per-scrape series for plots (the analysed shape only)."""

    times: tuple[float, ...]
    decode_tokens_per_second: tuple[float, ...]
    prefill_tokens_per_second: tuple[float, ...]
    running: tuple[float, ...]


@dataclass(frozen=True)
class EndpointFailure:
    """An endpoint of a several-endpoint source whose census could not run, and the one-line reason why."""

    instance: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """Its entry among ``endpoints`` in the JSON: the instance and the reason, no verdict."""
        return {"schema": SCHEMA, "endpoint": {"instance": self.instance}, "verdict": None, "error": self.reason}


@dataclass(frozen=True)
class CensusReport:
    """One endpoint's census (the advice pass returns it as an ``advice.endpoint_report.EndpointReport``)."""

    source: str
    job: str
    instance: str
    profile: str
    profile_reason: str
    verdict: Verdict
    shape: ShapeResult
    ledger: LedgerResult
    buckets: BucketTable | None
    client_new_buckets: BucketTable | None
    lag: LagResult
    ttft: TtftResult
    preemption: PreemptionResult
    traps: tuple[Trap, ...]
    losses: LossShares | None
    timeline: Timeline | None
    # what the source warned about (Thanos partial responses, resampled data): never silent
    source_warnings: tuple[str, ...] = field(default=())
    # the runbook's steps in order: which ran on this engine's metrics, and why not the rest
    passes: tuple[PassRecord, ...] = field(default=())
    # what users felt, from per-request client records when given (--client-records)
    client_felt: ClientFelt | None = None
    # capacity before knobs: is the endpoint over capacity (pdcensus.census.overload)
    overload: OverloadResult | None = None
    # the source's other endpoints whose census failed (carried by every report of the source)
    failed_endpoints: tuple[EndpointFailure, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of schema ``pdcensus/census/v2``."""
        return {
            "schema": SCHEMA,
            "source": self.source,
            "endpoint": {"job": self.job, "instance": self.instance},
            "profile": {"name": self.profile, "reason": self.profile_reason},
            "verdict": plain(self.verdict),
            "shape": plain(self.shape),
            "ledger": plain(self.ledger),
            "buckets": plain(self.buckets),
            "client_new_buckets": plain(self.client_new_buckets),
            "lag": plain(self.lag),
            "ttft": plain(self.ttft),
            "preemption": plain(self.preemption),
            "traps": plain(self.traps),
            "losses": plain(self.losses),
            "timeline": plain(self.timeline),
            # the census alone advises nothing: the advice pass's EndpointReport fills these two keys
            "advice": [],
            "side_evidence": {},
            "source_warnings": list(self.source_warnings),
            "passes": plain(self.passes),
            "client_felt": plain(self.client_felt),
            "overload": plain(self.overload),
        }


def reports_to_dict(reports: Sequence[CensusReport]) -> dict[str, Any]:
    """One object for one endpoint; ``{"schema", "endpoints": [...]}`` for several.

    An endpoint whose census failed is an entry of ``endpoints`` with ``"verdict": null`` and its
    ``"error"``, after the good ones; ``"failed"`` lists those instances (empty when none failed).
    """
    failed = reports[0].failed_endpoints if reports else ()
    if len(reports) == 1 and not failed:
        return reports[0].to_dict()
    entries: list[dict[str, Any]] = [r.to_dict() for r in reports]
    entries += [f.to_dict() for f in failed]
    return {"schema": SCHEMA, "endpoints": entries, "failed": [f.instance for f in failed]}


def plain(value: Any) -> Any:
    """Dataclasses, enums, tuples and floats -> JSON-ready Python (NaN/inf -> None)."""
    if value is None or isinstance(value, (bool, str, int)) and not isinstance(value, Enum):
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    try:  # numpy scalars
        return plain(value.item())
    except AttributeError:
        return str(value)
