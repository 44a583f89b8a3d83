"""verify-arm's counter for vLLM's step budget: prefill tokens per counted step (pdcensus.advice.engaged).

Hand-made windows: 3,000-token prompts whose steps the count shows (vLLM observes a prompt whole
in ``iteration_tokens_total`` where its prefill ends, so the histogram cannot prove a budget).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from pdcensus.advice.engaged import check_step_tokens, prefill_tokens_per_step
from pdcensus.advice.model import StepStatus
from pdcensus.series.vllm_steps import CountedSteps, step_spans


def _window(chunk_steps: int, decode_steps: int = 40) -> Any:
    """10 s of decode, then one 3,000-token prompt over 10 one-second intervals in ``chunk_steps`` steps."""
    n = 21
    steps = np.full(n, decode_steps / 10.0)
    steps[0] = np.nan
    steps[11:] = chunk_steps / 10.0
    busy = np.ones(n, dtype=bool)
    busy[0] = False
    chunk = np.zeros(n, dtype=bool)
    chunk[11:] = True
    prefill = np.where(chunk, 300.0, 0.0)  # tokens per second, 3,000 in all
    cs = CountedSteps(steps, busy, step_spans(steps, busy), None, None)
    return SimpleNamespace(counted_steps=cs, chunk_intervals=chunk, prefill_tokens_per_second=prefill,
                           interval_seconds=np.r_[np.nan, np.ones(n - 1)])


def test_the_mean_is_computed_prefill_tokens_over_the_steps_of_the_prefill_intervals() -> None:
    tokens, steps, mean = prefill_tokens_per_step(_window(chunk_steps=6))
    assert np.isclose(tokens, 3000.0) and np.isclose(steps, 6.0)
    assert np.isclose(mean, 500.0)


def test_a_budget_that_engaged_passes_where_the_before_window_was_above_it() -> None:
    step = check_step_tokens("--max-num-batched-tokens", "512", _window(2), _window(6))
    assert step.status is StepStatus.PASSED
    assert np.isclose(step.numbers["prefill_tokens_per_step_before"], 1500.0)


def test_steps_that_carry_more_than_the_budget_fail() -> None:
    step = check_step_tokens("--max-num-batched-tokens", "512", _window(2), _window(2))
    assert step.status is StepStatus.FAILED
    assert "more than the budget" in step.detail


def test_a_before_window_already_under_the_budget_cannot_tell() -> None:
    step = check_step_tokens("--max-num-batched-tokens", "2048", _window(6), _window(6))
    assert step.status is StepStatus.UNKNOWN
    assert "cannot tell" in step.detail


def test_no_counted_steps_is_unknown_not_a_pass() -> None:
    empty = SimpleNamespace(counted_steps=None, chunk_intervals=None, prefill_tokens_per_second=None,
                            interval_seconds=np.ones(3))
    assert check_step_tokens("--max-num-batched-tokens", "512", empty, empty).status is StepStatus.UNKNOWN
