"""Time is checked: scrape intervals that are not data.

A recording's timestamps are trusted only as far as their intervals agree with each other.
Two failures were weighed as data before this module existed (issue #25, item 4):

- **a break**: one interval far beyond the median scrape interval (a clock jump, a store
  outage, a paused scraper). Counters continuous across it prove the process lived, not
  that the interval is a scrape: a 10 h jump weighed as one interval outweighs the rest
  of the window. :func:`breaks` marks such intervals; the shape split starts a new
  shape at each, so the census weighs only intervals inside one shape.
- **a scrape interval no census can read**: a median interval of many minutes (timestamps
  in the wrong unit scaled every interval by 1e3 or 1e6, a 173-day "scrape"). Steps are
  milliseconds; nothing about them survives such a sampling. :func:`check_interval`
  refuses it with a named reason (exit 3), rather than a confident ``none``.
"""

from __future__ import annotations

import numpy as np

from pdcensus.errors import DataError

# An interval longer than this many median scrape intervals is a break, not a scrape ...
BREAK_FACTOR = 10.0
# ... when it is also longer than this: Prometheus's own lookback delta (5 min, the staleness a
# series reaches when no sample comes), beyond which PromQL bridges no interval either. A 1 s scraper
# that paused 35 s with its counters running on (an InferenceX run, tp8_bs512_offloadoff_s_8) is a
# missed stretch of scrapes, not a break: splitting there left its latest shape 6 scrapes long.
BREAK_MIN_SECONDS = 300.0
# A median scrape interval above this is refused: the step-level signals do not survive it.
MAX_SCRAPE_INTERVAL_SECONDS = 600.0
# The reason's name, as it appears in the refusal (tests and users grep for it).
SLOW_SCRAPE_REASON = "scrape-interval-unreadable"
BREAK_REASON = "clock-break"


def break_threshold(interval: float) -> float:
    """Seconds above which one interval is a break, given the median scrape ``interval``."""
    if not np.isfinite(interval) or interval <= 0:
        return float("inf")
    return max(BREAK_FACTOR * interval, BREAK_MIN_SECONDS)


def breaks(times: np.ndarray, interval: float) -> np.ndarray:
    """Per row, whether the interval ending at it is a break (row 0: never)."""
    out = np.zeros(len(times), dtype=bool)
    if len(times) > 1:
        out[1:] = np.diff(np.asarray(times, dtype=np.float64)) > break_threshold(interval)
    return out


def break_reason(gap_seconds: float, interval: float) -> str:
    """The shape's reason for a break: what was seen, and what the census does with it."""
    return (f"{BREAK_REASON}: a {_duration(gap_seconds)} interval, {gap_seconds / interval:.0f}x the median "
            f"{interval:g} s scrape (a clock jump or an outage); no interval across it is weighed")


def check_interval(source: str, interval: float) -> None:
    """Refuse a window whose median scrape interval no census can read (named reason, exit 3)."""
    if np.isfinite(interval) and interval > MAX_SCRAPE_INTERVAL_SECONDS:
        raise DataError(
            f"{source}: {SLOW_SCRAPE_REASON}: the median scrape interval is {_duration(interval)} "
            f"(over {MAX_SCRAPE_INTERVAL_SECONDS:.0f} s); engine steps last milliseconds and no census "
            "survives such a sampling: timestamps in the wrong unit (ms or us read as s), or a "
            "downsampled store; record at 30 s or faster")


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


__all__ = ["BREAK_FACTOR", "BREAK_MIN_SECONDS", "BREAK_REASON", "MAX_SCRAPE_INTERVAL_SECONDS",
           "SLOW_SCRAPE_REASON", "break_reason", "break_threshold", "breaks", "check_interval"]
