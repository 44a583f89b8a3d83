"""The overload finding's typed shape, apart from :mod:`pdcensus.census.overload` (which computes it).

The report model imports this module; the pass itself reads the census's signals, which import
the report model, so keeping the shape here keeps the imports a tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum

from pdcensus.census.domains import Domain, domain

__all__ = ["OverloadSignature", "OverloadResult"]


class OverloadSignature(str, Enum):
    """What the queue and the counters say (the verdict branches on these, never on text)."""

    QUEUE_GROWS = "queue-grows"
    QUEUE_NEVER_DRAINS = "queue-never-drains"
    TTFT_QUEUEING = "ttft-dominated-by-queueing"
    PREEMPTIONS_CONTINUOUS = "preemptions-continuous"


@dataclass(frozen=True)
class OverloadResult:
    """Whether the endpoint is over capacity, with every number the decision used."""

    available: bool
    overloaded: bool
    reason: str
    signatures: tuple[OverloadSignature, ...] = ()
    # mean of the first tenth of the window's scrapes
    waiting_start: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    waiting_end: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))  # mean of the last tenth
    waiting_slope_per_minute: float = math.nan
    waiting_slope_interval: tuple[float, float] = (math.nan, math.nan)
    waiting_nonzero_share: float = field(default=math.nan, metadata=domain(Domain.SHARE))
    waiting_mean: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    running_mean: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    queue_share_of_residence: float = field(default=math.nan, metadata=domain(Domain.SHARE))
    queue_wait_seconds: float = field(default=math.nan, metadata=domain(Domain.WAIT))
    queue_wait_basis: str = ""
    ttft_mean_seconds: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    queue_share_of_ttft: float = field(default=math.nan, metadata=domain(Domain.RATIO))
    preemptions: float = field(default=0.0, metadata=domain(Domain.NONNEGATIVE))
    preemption_minutes_share: float = field(default=math.nan, metadata=domain(Domain.SHARE))
    kv_usage_mean: float = math.nan
    window_seconds: float = math.nan
    # first tokens (or finished requests) per second
    admission_per_second: float = field(default=math.nan, metadata=domain(Domain.NONNEGATIVE))
    # how much more serving capacity the window's load needed: (admitted + queue growth) / admitted
    # for a growing queue; (waiting + running) / running for a queue that never drains
    capacity_factor: float = field(default=math.nan, metadata=domain(Domain.RATIO))
