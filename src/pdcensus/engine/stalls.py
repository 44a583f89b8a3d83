"""Stalls the clients felt: gaps between two tokens of one request longer than a threshold.

:mod:`.truth` measures what decoders got while prompts processed (the step-time sharing a user
sees); a preempted request instead stops dead, its tokens gone until it is recomputed. Those
stops are gaps of seconds between consecutive tokens of one request. Here, over ``[start, end]``
(a gap counts where it ends):

- ``count``: gaps longer than ``threshold_seconds`` (2 s: no decode step is that long here),
  counting a request still open at the window's end from its last token to the end;
- ``stalled_share``: their summed length over the decoders' stream-seconds in the window (a
  stream decodes from its request's first token to its last), the share of decoding time lost;
- ``longest_seconds`` and ``streams_stalled`` (requests with at least one such gap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pdcensus.engine.streams import RequestRecord

STALL_SECONDS = 2.0


@dataclass(frozen=True)
class Stalls:
    threshold_seconds: float
    count: int
    stalled_seconds: float
    stream_seconds: float
    stalled_share: float
    longest_seconds: float
    requests_stalled: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure_stalls(records: Sequence[RequestRecord], start: float, end: float,
                   threshold_seconds: float = STALL_SECONDS) -> Stalls:
    count = stalled_requests = 0
    stalled = stream_seconds = longest = 0.0
    for r in records:
        if r.kind != "decode" or len(r.token_times) < 2:
            continue
        t = np.asarray(r.token_times)
        a, b = max(float(t[0]), start), min(float(t[-1]), end)
        stream_seconds += max(0.0, b - a)
        keep = (t[1:] > start) & (t[1:] <= end)
        # a gap that began before the window counts only its part inside it
        gap = (t[1:] - np.maximum(t[:-1], start))[keep]
        # a request that stopped dead and was still open at the window's end (a preempted one
        # waiting to be recomputed when the load was cut) stalls from its last token to the end
        tail = min(r.ended if r.ended == r.ended else end, end) - max(float(t[-1]), start)
        if float(t[-1]) < end and tail > 0:
            gap = np.append(gap, tail)
        long = gap[gap > threshold_seconds]
        count += int(long.size)
        stalled += float(long.sum())
        longest = max(longest, float(long.max()) if long.size else 0.0)
        stalled_requests += int(long.size > 0)
    share = stalled / stream_seconds if stream_seconds > 0 else float("nan")
    return Stalls(threshold_seconds, count, stalled, stream_seconds, share, longest, stalled_requests)
