"""The engine's metric state, readable at any instant: counters, decayed rate gauges, histograms.

The recording exporter samples this at each scrape instant; a live server reads the same
object from a prometheus_client collector. Nothing here formats text.

The tps gauges are ~1 s exponentially decayed, batch-pooled windows: during a step that emits
``n`` tokens in ``dt`` seconds the instantaneous rate is ``n/dt`` and the gauge relaxes toward it
with time constant ``tau``. A run of identical steps has one rate, so the gauge at any instant is
closed-form (``r + (g0 - r) * exp(-(t - t0) / tau)``), even inside a jumped run.

Histogram bounds under ``vllm:`` are vLLM's own (TTFT, inter-token/per-output-token, e2e
latency; iteration tokens per the eager-mode list).

The classes are slotted and their update methods kept to a few operations: the engine calls
them several times per run of steps, a few million times a simulated day.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

TTFT_BOUNDS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
INTER_TOKEN_BOUNDS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
)
E2E_BOUNDS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)
ITERATION_TOKEN_BOUNDS: tuple[float, ...] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)
PREFILL_STEP_SECONDS_BOUNDS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
PREFILL_STEP_TOKEN_BOUNDS: tuple[float, ...] = (
    64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768,
)
QUEUE_WAIT_BOUNDS: tuple[float, ...] = (
    0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)
_bisect_left = bisect.bisect_left
_exp = math.exp


BULK_OBSERVATIONS = 64
"""Pending observations from which a histogram bins with numpy rather than one by one."""
PENDING_LIMIT = 4096
"""Pending observations (or marks) a histogram holds before it bins them: its memory stays bounded."""


class Histogram:
    """Cumulative-at-read histogram: per-bucket counts, sum, count.

    :meth:`observe` only notes the observation; reading ``counts``, ``total`` or ``count``
    bins what is pending first (in bulk with numpy once there are enough), so a histogram
    nobody reads during a run (another engine's families) costs two appends per observation.
    A recorder that samples the histogram at many instants calls :meth:`mark` at each and
    reads the rows later from :meth:`snapshot_rows`, all binned in one pass.

    Binning in bulk gives the same numbers, bit for bit, as binning one at a time: the sum is
    accumulated left to right (``numpy.add.accumulate`` is sequential) and bucket counts and
    the count are sums of whole numbers (a NaN value or a fractional weight is binned one
    observation at a time).
    """

    __slots__ = ("bounds", "_edges", "_counts", "_total", "_count", "_values", "_times", "_marks", "_marked",
                 "_blocks")

    def __init__(self, bounds: tuple[float, ...], counts: list[float] | None = None,
                 total: float = 0.0, count: float = 0.0) -> None:
        self.bounds = bounds
        self._edges: np.ndarray | None = None
        self._counts = list(counts) if counts else [0.0] * (len(bounds) + 1)
        self._total = total
        self._count = count
        self._values: list[float] = []
        self._times: list[float] = []
        self._marks: list[int] = []  # pending marks: how many pending observations each one covers
        self._marked = 0
        self._blocks: list[np.ndarray] = []  # snapshot rows of settled marks, in mark order

    def observe(self, value: float, times: float = 1.0) -> None:
        """Record ``value`` ``times`` times (a jumped run observes many equal values at once)."""
        if times <= 0:
            return
        values = self._values
        values.append(value)
        self._times.append(times)
        if len(values) >= PENDING_LIMIT:
            self.settle()

    @property
    def counts(self) -> list[float]:
        """Per-bucket counts (not cumulative), +Inf last."""
        if self._values or self._marks:
            self.settle()
        return self._counts

    @property
    def total(self) -> float:
        if self._values or self._marks:
            self.settle()
        return self._total

    @property
    def count(self) -> float:
        if self._values or self._marks:
            self.settle()
        return self._count

    def cumulative(self) -> list[float]:
        """Bucket counts as Prometheus exposes them (``le`` upper bounds, +Inf last)."""
        out, running = [], 0.0
        for c in self.counts:
            running += c
            out.append(running)
        return out

    def mark(self) -> int:
        """Note the histogram as it is now; returns the row of :meth:`snapshot_rows` that will hold it."""
        marks = self._marks
        marks.append(len(self._values))
        self._marked += 1
        if len(marks) >= PENDING_LIMIT:
            self.settle()
        return self._marked - 1

    def snapshot_rows(self) -> np.ndarray:
        """One row per :meth:`mark`: the cumulative bucket counts, then the count, then the sum."""
        self.settle()
        if len(self._blocks) != 1:
            self._blocks = [np.vstack(self._blocks) if self._blocks else np.empty((0, len(self._counts) + 2))]
        return self._blocks[0]

    def settle(self) -> None:
        """Bin the pending observations (and fill in the rows of the pending marks)."""
        values, times, marks = self._values, self._times, self._marks
        if not values and not marks:
            return
        if len(values) >= BULK_OBSERVATIONS or marks:
            v = np.array(values, dtype=float)
            w = np.array(times, dtype=float)
            if not np.isnan(v).any() and bool((w == np.floor(w)).all()):
                self._settle_bulk(v, w, marks)
                values.clear()
                times.clear()
                marks.clear()
                return
        self._settle_each()

    def _settle_each(self) -> None:
        """Bin one observation at a time (exact for any weight), filling in mark rows on the way."""
        values, times, marks = self._values, self._times, self._marks
        counts, bounds = self._counts, self.bounds
        total, count = self._total, self._count
        rows: list[list[float]] = []
        at = 0
        for i, (value, n) in enumerate(zip(values, times)):
            while at < len(marks) and marks[at] == i:
                rows.append(self._row(counts, count, total))
                at += 1
            counts[_bisect_left(bounds, value)] += n
            total += value * n
            count += n
        while at < len(marks):
            rows.append(self._row(counts, count, total))
            at += 1
        if rows:
            self._blocks.append(np.array(rows, dtype=float))
        self._total, self._count = total, count
        values.clear()
        times.clear()
        marks.clear()

    @staticmethod
    def _row(counts: list[float], count: float, total: float) -> list[float]:
        out, running = [], 0.0
        for c in counts:
            running += c
            out.append(running)
        return [*out, count, total]

    def _settle_bulk(self, v: np.ndarray, w: np.ndarray, marks: list[int]) -> None:
        if self._edges is None:
            self._edges = np.asarray(self.bounds, dtype=float)
        width = len(self._counts)
        index = np.searchsorted(self._edges, v, side="left")
        running = np.empty(len(v) + 1)
        running[0] = self._total
        np.multiply(v, w, out=running[1:])
        sums = np.add.accumulate(running)
        if marks:
            at = np.asarray(marks)
            # observation i belongs to every mark that covers more than i observations
            first_mark = np.searchsorted(at, np.arange(len(v)), side="right")
            # with no pending observation numpy returns integer zeros even for float weights
            flat = np.bincount(first_mark * width + index, weights=w, minlength=(len(at) + 1) * width)
            grid = flat.astype(np.float64, copy=False).reshape(len(at) + 1, width)
            grid[0] += self._counts
            per_mark = np.cumsum(grid, axis=0)
            tallies = np.empty(len(w) + 1)
            tallies[0] = self._count
            tallies[1:] = w
            counted = np.cumsum(tallies)
            self._blocks.append(np.column_stack((np.cumsum(per_mark[:-1], axis=1), counted[at], sums[at])))
            self._counts = per_mark[-1].tolist()
            self._count = float(counted[-1])
        else:
            binned = np.bincount(index, weights=w, minlength=width).tolist()
            self._counts = [c + b if b else c for c, b in zip(self._counts, binned)]
            self._count = self._count + float(w.sum())
        self._total = float(sums[-1])


@dataclass(slots=True)
class DecayedRate:
    """An exponentially decayed rate gauge, closed-form between rate changes."""

    tau_seconds: float = 1.0
    ref_seconds: float = 0.0
    ref_value: float = 0.0
    rate: float = 0.0

    def value_at(self, t: float) -> float:
        dt = t - self.ref_seconds
        return self.rate + (self.ref_value - self.rate) * _exp(-(dt if dt > 0.0 else 0.0) / self.tau_seconds)

    def set_rate(self, t: float, rate: float) -> None:
        """From ``t`` on, relax toward ``rate`` (``value_at(t)`` inlined; a settled gauge skips the exp)."""
        old, ref = self.rate, self.ref_value
        if ref != old:
            dt = t - self.ref_seconds
            ref = old + (ref - old) * _exp(-(dt if dt > 0.0 else 0.0) / self.tau_seconds)
        self.ref_value = ref
        self.ref_seconds = t
        self.rate = rate


@dataclass(slots=True)
class MetricsState:
    """Everything the engine exports, as numbers (one process's lifetime; a restart makes a new one)."""

    start_seconds: float
    steps: float = 0.0
    steps_decode: float = 0.0
    steps_held: float = 0.0
    step_seconds: float = 0.0
    step_seconds_decode: float = 0.0
    prefix_hit_cut_tokens: float = 0.0
    preemptions: float = 0.0
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    request_success: float = 0.0
    # vLLM's own counting (v1/metrics/stats.py): the whole prompt, cache hits included, when the
    # prefill ends; split by source; prefix-cache lookups (whole prompt) when a request is admitted
    prompt_tokens_at_first_token: float = 0.0
    prompt_tokens_local_compute: float = 0.0
    prompt_tokens_local_cache_hit: float = 0.0
    prefix_cache_queries: float = 0.0
    prefix_cache_hits: float = 0.0
    # vLLM's preemption counter: the PREEMPTED event rides on the resumed request's next output
    preemptions_at_resume: float = 0.0
    snapshot_writes: float = 0.0  # not exported: /stats only
    decode_rate: DecayedRate = field(default_factory=DecayedRate)
    prefill_rate: DecayedRate = field(default_factory=DecayedRate)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BOUNDS))
    inter_token: Histogram = field(default_factory=lambda: Histogram(INTER_TOKEN_BOUNDS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BOUNDS))
    iteration_tokens: Histogram = field(default_factory=lambda: Histogram(ITERATION_TOKEN_BOUNDS))
    prefill_step_seconds: Histogram = field(default_factory=lambda: Histogram(PREFILL_STEP_SECONDS_BOUNDS))
    prefill_step_tokens: Histogram = field(default_factory=lambda: Histogram(PREFILL_STEP_TOKEN_BOUNDS))
    queue_wait: Histogram = field(default_factory=lambda: Histogram(QUEUE_WAIT_BOUNDS))

    def counters(self) -> dict[str, float]:
        return {
            "steps": self.steps,
            "steps_decode": self.steps_decode,
            "steps_held": self.steps_held,
            "step_seconds": self.step_seconds,
            "step_seconds_decode": self.step_seconds_decode,
            "prefix_hit_cut_tokens": self.prefix_hit_cut_tokens,
            "preemptions": self.preemptions,
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "request_success": self.request_success,
            "snapshot_writes": self.snapshot_writes,
        }
