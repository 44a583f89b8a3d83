"""The verdict's typed model: the mechanisms, the evidence, what was found and what it costs.

Kept apart from :mod:`pdcensus.census.model` (which re-exports every name here) so that each
stays a module one can read in a sitting; every renderer reads these through the report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.census.domains import Domain, domain
from pdcensus.mechanism import Mechanism


@dataclass(frozen=True)
class Evidence:
    """One number the verdict rests on, the rule it was held against, and the outcome."""

    rule: str
    value: float | None
    threshold: float | None
    satisfied: bool
    text: str


class Severity(str, Enum):
    """How much a found mechanism costs: ``material`` at >= 5 % of decoders' time, else ``minor``."""

    MATERIAL = "material"
    MINOR = "minor"


class Signature(str, Enum):
    """Which signature in the data found a mechanism (the runbook's, one per rule)."""

    LAG0_COLLAPSE = "lag0-collapse"  # per-stream decode well below idle while prefill runs
    CHUNK_STEP_COLLAPSE = "chunk-step-collapse"  # ledger: a decode row in a chunk step waits the chunk
    LONG_GAPS = "long-gaps"  # inter-token gaps many decode-only steps long come with prefill (vLLM's histogram)
    DOSE_RESPONSE = "dose-response"  # per-stream decode falls with prefill tokens in the interval
    LAGGED_TAIL = "lagged-tail"  # decode slow 2-14 min after prefill, beyond batch growth
    INFLATED_DECODE_STEPS = "inflated-decode-steps"  # decode-only steps slow after prefill, beyond batch growth
    RECOVERY_SLOPE = "recovery-slope"  # decode recovers with time since the last prefill (batch controlled)
    PREEMPTION_BURSTS = "preemption-bursts"  # increases of the preemption counter


@dataclass(frozen=True)
class Found:
    """A mechanism whose signature is in the data beyond noise, and what it costs.

    ``depth`` is per-stream decode while the mechanism acts, as a ratio of idle (1 = no loss,
    0 = decoders stopped); ``active_share`` the share of decoders' time in which it acts;
    ``confidence`` the share of bootstrap replicates in which the signature is found
    (kept apart from ``severity``, which is about cost).
    """

    mechanism: Mechanism
    severity: Severity
    loss_share: float = field(metadata=domain(Domain.SHARE))
    interval: tuple[float, float] = field(metadata=domain(Domain.SHARE))
    depth: float = field(metadata=domain(Domain.RATIO))
    depth_interval: tuple[float, float] = field(metadata=domain(Domain.RATIO))
    active_share: float = field(metadata=domain(Domain.SHARE))
    confidence: float = field(metadata=domain(Domain.SHARE))
    signature: Signature
    signature_text: str
    # ITL p99 while it acts / ITL p99 otherwise (NaN: no ITL histogram)
    itl_p99_ratio: float = field(default=math.nan, metadata=domain(Domain.RATIO))
    near_material_line: bool = False  # the loss share's interval straddles the 5 % line


@dataclass(frozen=True)
class DoseResponse:
    """Per-interval decode per stream regressed on prefill tokens computed in the same interval.

    ``stall_ms_per_1k_tokens`` is decoders' time lost per 1,000 prefill tokens (slope over
    intercept, batch size held as a control), which does not depend on the scrape interval;
    ``ledger_ms_per_1k_tokens`` the same read from the step ledger ((chunk step - decode-only
    step) per chunk token) where one exists. ``depth_at_top`` is the fitted per-stream ratio at
    ``top_prefill_tokens_per_second`` (the 95th percentile of busy intervals): a lower bound on
    how deep decode falls while prefill runs, since a chunk diluted in a long interval runs faster.
    """

    available: bool
    reason: str
    intervals: int = 0
    stall_ms_per_1k_tokens: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    stall_interval: tuple[float, float] = field(default=(math.nan, math.nan), metadata=domain(Domain.NONNEGATIVE))
    idle_per_stream_tokens_per_second: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    top_prefill_tokens_per_second: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    depth_at_top: float = field(default=math.nan, metadata=domain(Domain.RATIO))
    depth_at_top_interval: tuple[float, float] = field(default=(math.nan, math.nan), metadata=domain(Domain.RATIO))
    batch_controlled: bool = False
    ledger_ms_per_1k_tokens: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    basis: str = ""
    stable: bool = True  # False: the bootstrap does not support the fit; reported, never evidence


@dataclass(frozen=True)
class Verdict:
    """Two answers: *which* mechanisms are found (``found``), and *how much* each costs.

    ``mechanism`` is the headline: the found mechanism that costs most (``mixed`` when two or
    more are material and none dominates), ``none`` only when nothing is found, ``inconclusive``
    only when the data cannot tell. ``mechanisms`` lists the found names. ``headline`` says
    both answers in one line. ``confidence`` is the headline mechanism's.
    """

    mechanism: Mechanism
    mechanisms: tuple[Mechanism, ...]
    confidence: float
    evidence: tuple[Evidence, ...]
    settle: tuple[str, ...] = ()
    found: tuple[Found, ...] = ()
    headline: str = ""
    dose_response: DoseResponse | None = None
    withheld: tuple[str, ...] = ()  # signals the sanity checks found broken, and what was withheld
