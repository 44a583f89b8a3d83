"""The overload finding's typed shape, apart from :mod:`pdcensus.census.overload` (which computes it).

The report model imports this module; the pass itself reads the census's signals, which import
the report model, so keeping the shape here keeps the imports a tree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

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
    waiting_start: float = math.nan  # mean of the first tenth of the window's scrapes
    waiting_end: float = math.nan  # mean of the last tenth
    waiting_slope_per_minute: float = math.nan
    waiting_slope_interval: tuple[float, float] = (math.nan, math.nan)
    waiting_nonzero_share: float = math.nan
    waiting_mean: float = math.nan
    running_mean: float = math.nan
    queue_share_of_residence: float = math.nan
    queue_wait_seconds: float = math.nan
    queue_wait_basis: str = ""
    ttft_mean_seconds: float = math.nan
    queue_share_of_ttft: float = math.nan
    preemptions: float = 0.0
    preemption_minutes_share: float = math.nan
    kv_usage_mean: float = math.nan
    window_seconds: float = math.nan
    admission_per_second: float = math.nan  # first tokens (or finished requests) per second
    # how much more serving capacity the window's load needed: (admitted + queue growth) / admitted
    # for a growing queue; (waiting + running) / running for a queue that never drains
    capacity_factor: float = math.nan
