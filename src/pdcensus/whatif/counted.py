"""What a recording counts per scrape interval, read for the twin's traffic (:mod:`pdcensus.whatif.traffic`).

Requests (the TTFT or e2e histogram's count, else the finished-requests counter), prompt and generated
work per interval (the counter where rates are same-scrape gauges, else the census's spread rate), the
prompt counter where vLLM V1 counts each prompt whole with its first token, the blocks of intervals the
traffic is fitted over, and a stream's mean time per generated token.
"""

from __future__ import annotations

import math

import numpy as np

from pdcensus.census.run import ShapeRead
from pdcensus.series.profiles import Signal


def seconds_per_token(read: ShapeRead, generated: float) -> float:
    """The window's running-request seconds per generated token (a stream's mean time per token)."""
    s = read.signals
    running = s.gauge(Signal.RUNNING)
    if running is None or generated <= 0:
        return math.nan
    return float(np.nansum(np.nan_to_num(running) * np.nan_to_num(s.interval_seconds))) / generated


def request_counts(read: ShapeRead) -> tuple[np.ndarray | None, str]:
    s = read.signals
    for signal, what in ((Signal.TTFT, "TTFT histogram count"), (Signal.E2E, "e2e histogram count")):
        hist = s.histograms.get(signal)
        if hist is not None and hist.upper_bounds.size and np.isinf(hist.upper_bounds[-1]):
            counts = hist.increases[:, -1]
            if np.nansum(counts) > 0:
                return np.nan_to_num(counts), what
    if s.finished_requests is not None and np.nansum(s.finished_requests) > 0:
        return np.nan_to_num(s.finished_requests), "finished-requests counter"
    return None, ""


def whole_at_first_token(read: ShapeRead, basis: str) -> np.ndarray | None:
    """The prompt counter per interval where it counts each prompt whole when the request's first token comes, the
    moment the TTFT histogram counts the request (vLLM V1); else None."""
    if basis != "TTFT histogram count" or read.detection.profile.name != "vllm-v1":
        return None
    return read.signals.increase(Signal.PROMPT_TOKENS)


def work(read: ShapeRead, signal: Signal, rate: np.ndarray | None) -> np.ndarray:
    """Tokens per interval: the counter where rates are same-scrape gauges, else the census's rate x interval."""
    s = read.signals
    dt = np.nan_to_num(s.interval_seconds, nan=0.0)
    counter = s.increase(signal)
    if not s.rates_from_counters and counter is not None:
        return np.asarray(np.nan_to_num(counter), dtype=np.float64)
    if rate is None:
        return np.zeros_like(dt)
    return np.asarray(np.nan_to_num(np.asarray(rate, dtype=np.float64) * dt), dtype=np.float64)


def blocks(times: np.ndarray, block_seconds: float) -> list[tuple[int, int]]:
    """Row ranges ``[i, j)`` of consecutive intervals (interval k ends at row k) spanning >= block_seconds."""
    out, i = [], 1
    while i < times.size:
        j = i
        while j < times.size and times[j] - times[i - 1] < block_seconds:
            j += 1
        j = min(j + 1, times.size)
        out.append((i, j))
        i = j
    return out
