"""verify-arm's counter for vLLM's step budget: decoders' gaps beside a chunk (pdcensus.verify.engaged).

Hand-made windows shaped like a live vLLM run: 3 decoders at 20 ms per decode-only step, then
3,000-token prompts chunked at a budget, each chunk step holding every decoder for
``20 ms + budget x 1 ms``. vLLM observes a prompt whole in ``iteration_tokens_total`` where its
prefill ends, so the histogram's buckets cannot prove a budget; the gaps can.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from pdcensus.census.signals import Histogram
from pdcensus.series.profiles import Signal
from pdcensus.series.vllm_steps import observations_above as _above
from pdcensus.series.vllm_steps import CountedSteps, step_spans
from pdcensus.verify.engaged import check_step_tokens, chunk_gap_reading
from pdcensus.verify.model import StepStatus

BOUNDS = np.array([0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, np.inf])
DECODE, PER_TOKEN, DECODERS = 0.020, 0.001, 3


def _cumulative(gaps: list[float]) -> np.ndarray:
    return np.array([sum(g <= b for g in gaps) for b in BOUNDS], dtype=float)


def _window(budget: int, quiet: int = 20, busy: int = 30) -> Any:
    """``quiet`` one-second decode-only intervals, then ``busy`` seconds of back-to-back prompts at ``budget``."""
    chunk = DECODE + budget * PER_TOKEN
    n = 1 + quiet + busy
    steps, hist = np.zeros(n), np.zeros((n, BOUNDS.size))
    steps[0], hist[0] = np.nan, np.nan
    steps[1:quiet + 1] = 1.0 / DECODE
    hist[1:quiet + 1] = _cumulative([DECODE] * int(DECODERS / DECODE))
    per_second = 1.0 / chunk  # chunk steps per second while prefill runs (no decode-only step between)
    steps[quiet + 1:] = per_second
    hist[quiet + 1:] = _cumulative([chunk] * DECODERS) * per_second
    busy_rows = np.ones(n, dtype=bool)
    busy_rows[0] = False
    mark = np.zeros(n, dtype=bool)
    mark[quiet + 1:] = True
    prefill = np.where(mark, (budget - DECODERS) * per_second, 0.0)  # computed prompt tokens per second
    cs = CountedSteps(steps, busy_rows, step_spans(steps, busy_rows), None, None)
    return SimpleNamespace(counted_steps=cs, chunk_intervals=mark, prefill_tokens_per_second=prefill,
                           interval_seconds=np.r_[np.nan, np.ones(n - 1)],
                           histograms={Signal.ITL: Histogram("vllm:inter_token_latency_seconds", BOUNDS, hist)})


def test_counts_inside_a_bucket_are_read_as_spread_evenly() -> None:
    counts = np.array([10, 10, 30, 30.0])  # cumulative: 10 in (0, 1], 20 in (2, 4], nothing beyond
    bounds = np.array([1.0, 2.0, 4.0, np.inf])
    assert _above(bounds, counts, 3.0) == 10.0
    assert _above(bounds, counts, 0.5) == 25.0


def test_one_chunk_step_comes_from_the_counted_ledger() -> None:
    reading = chunk_gap_reading(_window(512), 512.0)
    assert np.isclose(reading["chunk_step_seconds"], DECODE + 512 * PER_TOKEN, rtol=0.05)
    assert reading["share"] < 0.10


def test_a_budget_that_engaged_passes_where_the_before_window_ran_larger_chunks() -> None:
    step = check_step_tokens("--max-num-batched-tokens", "512", _window(2048), _window(512))
    assert step.status is StepStatus.PASSED, step.detail
    assert step.numbers["beyond_share_before"] > 0.5


def test_chunks_larger_than_the_budget_fail() -> None:
    step = check_step_tokens("--max-num-batched-tokens", "512", _window(4096, busy=60), _window(4096, busy=60))  # 4.1 s
    assert step.status is StepStatus.FAILED
    assert "larger than the budget" in step.detail


def test_gaps_in_the_bucket_that_holds_twice_the_chunk_step_cannot_tell() -> None:
    # 1,024 after: 1.04 s gaps share the (1, 2.5] s bucket with 2 x 0.532 s; 2,048 before: 2.07 s, the same bucket
    step = check_step_tokens("--max-num-batched-tokens", "512", _window(2048), _window(1024))
    assert step.status is StepStatus.UNKNOWN
    assert "cannot tell" in step.detail


def test_a_before_window_with_chunks_as_short_cannot_tell() -> None:
    step = check_step_tokens("--max-num-batched-tokens", "2048", _window(512), _window(512))
    assert step.status is StepStatus.UNKNOWN
    assert "cannot tell" in step.detail


def test_no_counted_steps_is_unknown_not_a_pass() -> None:
    empty = SimpleNamespace(counted_steps=None, chunk_intervals=None, prefill_tokens_per_second=None,
                            interval_seconds=np.ones(3), histograms={})
    assert check_step_tokens("--max-num-batched-tokens", "512", empty, empty).status is StepStatus.UNKNOWN
